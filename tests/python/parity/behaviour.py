"""behaviour.py - programs of the originals' users, run on the original (to record what it
does, as facts) and on sonde.compat with only the import lines switched (to check sonde does
the same): test_parity_behaviour.py runs the second half (issue 65).

A scenario is the source of a short program whose import lines name modules by placeholder
({M}, {integration}, ...); ORIGINALS maps each placeholder to the original's module and to
sonde's. What a run gives (run_scenario): the exception that ended it (its class and bases, by
name), the files it wrote (paths relative to its folder, each run of digits written #), the key
and type layout of each JSON report among them, its stdout lines and its log records (digits
written #).

Recording (needs the original's checkout, from the tool library's `fetch`, and the Python
with torch it ran with: Debian's /usr/bin/python3, PyTorch 1.13, psutil 5.9):

    /usr/bin/python3 tests/python/parity/behaviour.py record 003 GIT_DIR

writes tests/python/parity/behaviour/003.json. Only facts are kept, never the original's code:
its files are copied into a temporary folder for the runs and removed."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FACTS = os.path.join(HERE, "behaviour")

# key: (commit, {placeholder: (original's module, sonde's module)}, files of the original to
# copy (each path's packages get an empty __init__.py where none is copied))
ORIGINALS = {
    # Diffulex's logger prints with rich (to stderr) or colorama (codes, no padding) when
    # importable; the runs hide both: the plain layout to stdout, which sonde follows
    "000": ("8ea8717", {"M": ("diffulex_profiler", "sonde.compat.diffulex")},
            ["diffulex_profiler/", "diffulex/logger.py"]),
    "001": ("a8cb31d", {"M": ("inferix.profiling", "sonde.compat.inferix"),
                        "integration": ("inferix.core.monitoring.profiling",
                                        "sonde.compat.inferix.integration")},
            ["inferix/profiling/", "inferix/core/monitoring/profiling.py"]),
    "002": ("29a8345b", {"M": ("cache_dit.profiler", "sonde.compat.cache_dit")},
            ["src/cache_dit/profiler.py"]),
    "003": ("33c61dc", {"M": ("parallelization.profiler.decorator",
                              "sonde.compat.torch_decorator")},
            ["parallelization/profiler/decorator.py"]),
    # JAX and flax are not on any machine here: the runs use STUBS' (a CPU-only JAX, as the
    # original's note says CPU devices report no memory_stats)
    "004": ("HEAD", {"M": ("artifex.generative_models.training.callbacks.profiling",
                           "sonde.compat.artifex"),
                     "base": ("artifex.generative_models.training.callbacks.base",
                              "sonde.compat.artifex")},
            ["src/artifex/generative_models/training/callbacks/profiling.py",
             "src/artifex/generative_models/training/callbacks/base.py"]),
}

# Modules made unimportable for an original's runs (see ORIGINALS).
HIDDEN = {"000": ("rich", "colorama")}

# Stand-ins for what an original needs and no machine here has: a CPU-only JAX whose devices
# report no memory (as JAX's CPU devices do), whose trace calls record nothing; flax's nnx.
STUBS = {"004": {
    "jax/__init__.py": (
        "from . import profiler\n"
        "class _Cpu:\n"
        "    id = 0\n"
        "    def memory_stats(self):\n"
        "        return None\n"
        "    def __str__(self):\n"
        "        return 'TFRT_CPU_0'\n"
        "def devices():\n"
        "    return [_Cpu()]\n"),
    "jax/profiler.py": (
        "def start_trace(log_dir, create_perfetto_link=False):\n"
        "    pass\n"
        "def stop_trace():\n"
        "    pass\n"),
    "flax/__init__.py": "from . import nnx\n",
    "flax/nnx.py": "class Module:\n    pass\n"}}

TORCH_MODEL = ("import torch\n"
               "torch.manual_seed(0)\n"
               "model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),\n"
               "                            torch.nn.Linear(16, 4))\n")

# key: [(scenario name, environment, source)]
SCENARIOS = {
    "004": [
        ("callback_list", {}, (
            "from {base} import BaseCallback, CallbackList\n"
            "class Rec(BaseCallback):\n"
            "    def on_batch_end(self, trainer, batch, logs):\n"
            "        print('batch_end', batch, logs)\n"
            "    def on_epoch_end(self, trainer, epoch, logs):\n"
            "        print('epoch_end', epoch, logs)\n"
            "r = Rec()\n"
            "cbs = CallbackList([r, BaseCallback()])\n"
            "cbs.on_train_begin(None)\n"
            "cbs.on_batch_begin(None, 0)\n"
            "cbs.on_batch_end(None, batch=100, logs={})\n"
            "cbs.on_epoch_end(None, 1, {'loss': 0.5})\n"
            "cbs.on_validation_begin(None)\n"
            "cbs.on_validation_end(None, {})\n"
            "cbs.remove(r)\n"
            "print(len(cbs), [type(c).__name__ for c in cbs])\n"
            "try:\n"
            "    cbs.on_batch_begin(None)\n"
            "except TypeError:\n"
            "    print('TypeError')\n")),
        ("memory_profile", {}, (
            "from {M} import MemoryProfiler, MemoryProfileConfig\n"
            "mp = MemoryProfiler(MemoryProfileConfig(log_dir='mem', profile_every_n_steps=2))\n"
            "mp.on_train_begin(None)\n"
            "for b in range(1, 7):\n"
            "    mp.on_batch_begin(None, b - 1)\n"
            "    mp.on_batch_end(None, b, {})\n"
            "mp.on_train_end(None)\n"
            "import json\n"
            "print([e['step'] for e in json.load(open('mem/memory_profile.json'))])\n")),
        ("memory_log_dir_moved", {}, (
            "from {M} import MemoryProfiler, MemoryProfileConfig\n"
            "mp = MemoryProfiler(MemoryProfileConfig(log_dir='old'))\n"
            "mp.config.log_dir = 'new'\n"
            "mp.on_batch_end(None, 100, {})\n"
            "mp.on_train_end(None)\n")),
        ("trace_window", {}, (
            "from {M} import JAXProfiler, ProfilingConfig\n"
            "from {base} import CallbackList\n"
            "p = JAXProfiler(ProfilingConfig(log_dir='prof', start_step=2, end_step=4))\n"
            "cbs = CallbackList([p])\n"
            "cbs.on_train_begin(None)\n"
            "for step in range(6):\n"
            "    cbs.on_batch_begin(None, step)\n"
            "    cbs.on_batch_end(None, step + 1, {})\n"
            "cbs.on_train_end(None)\n"
            "print(p._profiling)\n")),
        ("defaults", {}, (
            "from {M} import ProfilingConfig, MemoryProfileConfig, IS_MACOS\n"
            "c, m = ProfilingConfig(), MemoryProfileConfig()\n"
            "print(c.log_dir, c.start_step, c.end_step, IS_MACOS)\n"
            "print(m.log_dir, m.profile_every_n_steps, m.log_device_memory)\n")),
    ],
    "003": [
        ("defaults", {}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='logs')\n"
            "def train(n):\n"
            "    for _ in range(n):\n"
            "        model(torch.randn(2, 8)).sum().backward()\n"
            "        step_profiler()\n"
            "    return 'trained'\n"
            "print('result:', train(8))\n")),
        ("repeat", {}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='rep', skip_first=0, wait=1, warmup=0, active=2, repeat=2)\n"
            "def train():\n"
            "    for _ in range(9):\n"
            "        model(torch.randn(2, 8)).sum()\n"
            "        step_profiler()\n"
            "train()\n")),
        ("rank1_of_2", {"LOCAL_RANK": "1", "RANK": "1", "WORLD_SIZE": "2"}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='dist', skip_first=0, wait=0, warmup=0, active=2)\n"
            "def train():\n"
            "    for _ in range(3):\n"
            "        model(torch.randn(2, 8)).sum()\n"
            "        step_profiler()\n"
            "train()\n")),
        ("raises_midway", {}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='boom', skip_first=0, wait=0, warmup=0, active=2, repeat=0)\n"
            "def train():\n"
            "    for i in range(5):\n"
            "        model(torch.randn(2, 8)).sum()\n"
            "        step_profiler()\n"
            "    raise KeyError('loader')\n"
            "train()\n")),
        ("active_0", {}, (
            "from {M} import profiler\n"
            "@profiler(output_dir='bad', active=0)\n"
            "def train():\n"
            "    print('ran')\n"
            "train()\n")),
        ("no_steps", {}, (
            "from {M} import profiler\n"
            "@profiler(output_dir='short')\n"
            "def train():\n"
            "    print('ran')\n"
            "    return 1\n"
            "train()\n")),
        ("with_modules_and_stack", {}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='mod', skip_first=0, wait=0, warmup=1, active=2,\n"
            "          with_modules=True, with_stack=True)\n"
            "def train():\n"
            "    for _ in range(4):\n"
            "        model(torch.randn(2, 8)).sum().backward()\n"
            "        step_profiler()\n"
            "train()\n")),
        ("nsight_without_cuda", {}, TORCH_MODEL + (
            "from {M} import profiler, step_profiler\n"
            "@profiler(output_dir='ns', nsight_enabled=True, skip_first=0, wait=0, warmup=0,\n"
            "          active=1)\n"
            "def train():\n"
            "    model(torch.randn(2, 8)).sum()\n"
            "    step_profiler()\n"
            "train()\n")),
        ("disabled", {}, (
            "from {M} import profiler, step_profiler\n"
            "@profiler(enabled=False, output_dir='off')\n"
            "def train():\n"
            "    step_profiler()\n"
            "    return 3\n"
            "print(train())\n")),
    ],
    "002": [
        ("context", {}, TORCH_MODEL + (
            "from {M} import ProfilerContext\n"
            "with ProfilerContext(output_dir='prof', profile_name='dit', activities=['CPU']) "
            "as ctx:\n"
            "    for _ in range(3):\n"
            "        model(torch.randn(2, 8))\n"
            "print(ctx.trace_path.name, ctx.memory_snapshot_path)\n"
            "print(type(ctx.profiler.key_averages()).__name__)\n")),
        ("disabled", {}, (
            "from {M} import ProfilerContext, create_profiler_context\n"
            "with ProfilerContext(enabled=False, output_dir='off') as ctx:\n"
            "    pass\n"
            "print(ctx.trace_path, ctx.profiler)\n"
            "c = create_profiler_context(output_dir='off2')\n"
            "print(c.enabled)\n")),
        ("raises_in_block", {}, TORCH_MODEL + (
            "from {M} import ProfilerContext\n"
            "try:\n"
            "    with ProfilerContext(output_dir='err', profile_name='e', activities=['CPU']):\n"
            "        model(torch.randn(2, 8))\n"
            "        raise ValueError('bad batch')\n"
            "except ValueError as e:\n"
            "    print('caught', e)\n")),
        ("decorated", {}, TORCH_MODEL + (
            "from {M} import profile_function\n"
            "@profile_function(output_dir='fn', activities=['CPU'])\n"
            "def infer(x):\n"
            "    return model(x).shape[0]\n"
            "print(infer(torch.randn(5, 8)))\n")),
        ("mem_without_cuda", {}, TORCH_MODEL + (
            "from {M} import ProfilerContext\n"
            "with ProfilerContext(output_dir='mem', profile_name='m',\n"
            "                     activities=['CPU', 'MEM']) as ctx:\n"
            "    model(torch.randn(2, 8))\n"
            "print(ctx.memory_snapshot_path)\n")),
        ("default_name", {}, (
            "from {M} import ProfilerContext\n"
            "ctx = ProfilerContext(output_dir='dn')\n"
            "print(ctx.profile_name.split('_')[0], ctx.activities, ctx.trace_path)\n"
            "with ctx:\n"
            "    pass\n"
            "print(ctx.trace_path.name.startswith('profile_'))\n")),
        ("output_dir_functions", {}, (
            "from {M} import get_profiler_output_dir, set_profiler_output_dir, PROFILER_DIR\n"
            "set_profiler_output_dir('elsewhere')\n"
            "print(get_profiler_output_dir(), PROFILER_DIR)\n")),
    ],
    "000": [
        ("sections_and_exports", {}, (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(output_dir='log', collect_gpu_metrics=False,\n"
            "                     export_formats=['json', 'csv', 'summary']))\n"
            "for i in range(2):\n"
            "    with p.profile('generate', metadata={'batch': 4 + i}) as v:\n"
            "        p.record_metric('steps', 10 + i)\n"
            "        p.record_throughput(100, duration=0.5)\n"
            "print(v)\n"
            "p.export('log/run')\n"
            "s = p.get_summary()\n"
            "print(sorted(s), s['total_sections'], s['total_tokens'])\n"
            "print(type(p.backend).__name__, [type(e).__name__ for e in p.exporters])\n")),
        ("default_export_path", {}, (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(output_dir='o', output_file='named.json',\n"
            "                     export_formats=['json', 'csv']))\n"
            "p.start('a', {'k': 'v'})\n"
            "p.record_metric('x', 1.5)\n"
            "p.stop()\n"
            "p.export()\n"
            "q = DiffulexProfiler(ProfilerConfig(output_dir='t', export_formats=['json']))\n"
            "with q.profile('b'):\n"
            "    pass\n"
            "q.export()\n")),
        ("metrics_functions", {}, (
            "from {M} import collect_memory_metrics, collect_cpu_metrics, collect_gpu_metrics\n"
            "from {M} import PerformanceMetrics\n"
            "print(sorted(collect_memory_metrics()))\n"
            "print(sorted(collect_cpu_metrics()))\n"
            "print(collect_gpu_metrics())\n"
            "m = PerformanceMetrics(name='n')\n"
            "print(sorted(m.to_dict()))\n")),
        ("pytorch_backend", {}, TORCH_MODEL + (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(backend='pytorch', output_dir='pt',\n"
            "                     collect_gpu_metrics=False))\n"
            "with p.profile('fwd'):\n"
            "    model(torch.randn(2, 8))\n"
            "bd = p.metrics[0].backend_data\n"
            "print(sorted(k for k in bd if k != 'summary'), bd['backend'])\n"
            "p.export('pt/res')\n")),
        ("warnings", {}, (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(output_dir='w', backend='nvprof',\n"
            "                     export_formats=['json', 'xml']))\n"
            "p.stop()\n"
            "p.export()\n"
            "print(type(p.backend).__name__)\n")),
        ("clear_and_zero_duration", {}, (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(output_dir='c', export_formats=['json']))\n"
            "with p.profile('a'):\n"
            "    p.clear()\n"
            "with p.profile('b'):\n"
            "    p.record_throughput(50, duration=0)\n"
            "print([m.name for m in p.metrics], p.metrics[0].total_tokens)\n"
            "p.export('c/out.json')\n")),
        ("abstract_classes", {}, (
            "from {M} import ProfilerExporter, ProfilerBackend, SimpleTimerBackend\n"
            "for cls in (ProfilerExporter, ProfilerBackend):\n"
            "    try:\n"
            "        cls()\n"
            "        print('made', cls.__name__)\n"
            "    except TypeError:\n"
            "        print('abstract', cls.__name__)\n"
            "b = SimpleTimerBackend()\n"
            "print(b.stop())\n"
            "b.start('x')\n"
            "print(sorted(b.stop()))\n")),
        ("disabled", {}, (
            "from {M} import DiffulexProfiler, ProfilerConfig\n"
            "p = DiffulexProfiler(ProfilerConfig(enabled=False, output_dir='off'))\n"
            "with p.profile('x'):\n"
            "    p.record_metric('m', 1)\n"
            "print(p.get_summary(), p.backend)\n")),
    ],
    "001": [
        ("session_report", {}, (
            "from {M} import InferixProfiler, ProfilingConfig\n"
            "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir='r',\n"
            "                    real_time_display=False, report_format='json',\n"
            "                    monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "                    monitor_gpu_temperature=False, monitor_gpu_power=False))\n"
            "p.start_session('s1', {'model': 'dit'})\n"
            "with p.stage('text_encoding'):\n"
            "    pass\n"
            "with p.stage('denoise', {'step': 1}):\n"
            "    pass\n"
            "p.add_event('milestone', {'progress': 0.5})\n"
            "p.end_session()\n"
            "p.cleanup()\n")),
        ("reuse_after_cleanup", {}, (
            "from {M} import InferixProfiler, ProfilingConfig\n"
            "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir='q',\n"
            "                    real_time_display=False, report_format='json',\n"
            "                    monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "                    monitor_gpu_temperature=False, monitor_gpu_power=False))\n"
            "for r in ('first', 'second'):\n"
            "    p.start_session(r)\n"
            "    with p.stage('step'):\n"
            "        pass\n"
            "    p.cleanup()\n"
            "print(sorted(p.sessions))\n")),
        ("config_errors", {}, (
            "from {integration} import create_profiler_from_config\n"
            "print(create_profiler_from_config(None))\n"
            "print(create_profiler_from_config({'profiling': {'enabled': False}}))\n"
            "try:\n"
            "    create_profiler_from_config({'profiling': {'enabled': True, 'gpu_intervl': 1}})\n"
            "except TypeError:\n"
            "    print('TypeError')\n")),
        ("disabled", {}, (
            "from {M} import InferixProfiler\n"
            "p = InferixProfiler()\n"
            "print(p.start_session('x'), p.end_session(), p.get_current_metrics())\n"
            "with p.stage('a'):\n"
            "    pass\n")),
        ("recorders_and_diffusion", {}, (
            "from {M} import InferixProfiler, ProfilingConfig\n"
            "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir='rec',\n"
            "                    real_time_display=False, report_format='json',\n"
            "                    monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "                    monitor_gpu_temperature=False, monitor_gpu_power=False))\n"
            "p.start_session('gen')\n"
            "for i in range(3):\n"
            "    p.record_diffusion_step(i, 1.0 - i / 3, 4, 10.0 + i, 7.5)\n"
            "    p.record_block_computation(i, 4, 20.0, 512.0)\n"
            "    p.record_streaming_event(batch_size=4, encoding_time_ms=5.0 + i)\n"
            "p.record_model_parameters('dit', 1200000, 'diffusion')\n"
            "p.record_dropped_frames(2)\n"
            "t0 = p.start_layer_computation('attn')\n"
            "p.end_layer_computation('attn', t0, parameters_count=10)\n"
            "p.record_memory_event('alloc', 4 << 20, allocator='cuda')\n"
            "p.record_cache_event('hits', 3)\n"
            "p.record_cache_event('misses', 1)\n"
            "sid = p.end_session()\n"
            "print(sid, sorted(p.sessions['gen'].cache_stats))\n")),
        ("decorated_pipeline", {}, (
            "from {M} import InferixProfiler, ProfilingConfig, profile_method, profile_session\n"
            "from {M}.decorators import profile_diffusion_step\n"
            "class Pipe:\n"
            "    def __init__(self):\n"
            "        self._profiling_enabled = True\n"
            "        self._profiler = InferixProfiler(ProfilingConfig(enabled=True,\n"
            "            output_dir='deco', real_time_display=False, report_format='json',\n"
            "            monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "            monitor_gpu_temperature=False, monitor_gpu_power=False))\n"
            "    @profile_session('run1', {'mode': 't2v'})\n"
            "    def run(self):\n"
            "        for i in range(2):\n"
            "            self.step(i, 0.5)\n"
            "        return self.encode()\n"
            "    @profile_diffusion_step(lambda a, k: {'step': a[0], 'timestep': a[1]})\n"
            "    def step(self, i, t):\n"
            "        return i\n"
            "    @profile_method('text_encoding')\n"
            "    def encode(self):\n"
            "        return 'done'\n"
            "print(Pipe().run())\n")),
        ("html_and_raw", {}, (
            "from {M} import InferixProfiler, ProfilingConfig\n"
            "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir='both',\n"
            "                    real_time_display=False, report_format='both',\n"
            "                    monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "                    monitor_gpu_temperature=False, monitor_gpu_power=False, save_raw_data=True))\n"
            "p.start_session('s')\n"
            "with p.stage('vae_decode'):\n"
            "    pass\n"
            "p.end_session()\n")),
        ("second_session_warns", {}, (
            "from {M} import InferixProfiler, ProfilingConfig\n"
            "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir='two',\n"
            "                    real_time_display=False, report_format='json',\n"
            "                    monitor_gpu_memory=False, monitor_gpu_utilization=False,\n"
            "                    monitor_gpu_temperature=False, monitor_gpu_power=False))\n"
            "p.start_session('a')\n"
            "p.start_session('b')\n"
            "print(p.current_session.session_id, sorted(p.sessions))\n"
            "p.end_session()\n"
            "print(p.end_session())\n")),
        ("integration_session", {}, (
            "from {integration} import ProfilingIntegration, get_profiling_summary\n"
            "from {M} import ProfilingConfig\n"
            "pi = ProfilingIntegration(ProfilingConfig(enabled=True, output_dir='int',\n"
            "    real_time_display=False, report_format='json', monitor_gpu_memory=False,\n"
            "    monitor_gpu_utilization=False, monitor_gpu_temperature=False,\n"
            "    monitor_gpu_power=False))\n"
            "print(pi.enabled)\n"
            "with pi.session(session_id='req1', tags={'user': 'u'}) as sid:\n"
            "    with pi.stage('encode'):\n"
            "        pass\n"
            "    pi.add_event('note', {'k': 1})\n"
            "print(sid)\n"
            "print(sorted(get_profiling_summary(pi)))\n"
            "print(get_profiling_summary(None))\n"
            "pi.cleanup()\n")),
    ],
}


def _strip_digits(text):
    return re.sub(r"\d+", "#", text)


def schema(v):
    """A JSON value's layout: dicts by key, lists by their first item, the rest by type."""
    if isinstance(v, dict):
        return {k: schema(x) for k, x in v.items()}
    if isinstance(v, list):
        return [schema(v[0])] if v else []
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return "null" if v is None else "str"


WRAPPER = r'''
import json, logging, sys, traceback
log = []
class _Records(logging.Handler):
    def emit(self, r):
        log.append("%s %s: %s" % (r.levelname, r.name, r.getMessage()))
logging.getLogger().addHandler(_Records())
logging.getLogger().setLevel(logging.INFO)
exc = None
try:
    with open(sys.argv[2]) as f:
        code = f.read()
    exec(compile(code, "<scenario>", "exec"), {"__name__": "__main__"})
except BaseException as e:
    exc = [c.__name__ for c in type(e).__mro__]
    traceback.print_exc()
sys.stdout.flush()
with open(sys.argv[1], "w") as f:
    json.dump({"exception": exc, "log": log}, f)
'''


def _console(text):
    """stdout's lines as compared: digits written #, a time's unit (torch picks us, ms or s by
    its size) written T, tables' rows and rules left out (their rows and widths follow the
    data), blank lines left out."""
    out = []
    for ln in text.splitlines():
        ln = re.sub(r"#(\.#)?(us|ms|s)\b", "#T", _strip_digits(ln.rstrip()))  # torch's units
        if not ln.strip() or re.fullmatch(r"[-=\s]+", ln) or \
                re.search(r"\S\s{2,}\S.*\S\s{2,}\S", ln):
            continue
        out.append(ln)
    return out


def run_scenario(code, modules, python, env_add, pythonpath, timeout=240):
    """Runs one scenario with its placeholders replaced by modules ({name: module}) in a fresh
    folder; returns its facts: exception, files, json (layout per JSON report), console, log."""
    work = tempfile.mkdtemp(prefix="sonde-parity-")
    cwd = os.path.join(work, "run")
    os.makedirs(cwd)
    try:
        src = os.path.join(work, "scenario.py")
        for k, v in modules.items():
            code = code.replace("{%s}" % k, v)
        with open(src, "w") as f:
            f.write(code)
        wrapper = os.path.join(work, "wrapper.py")
        with open(wrapper, "w") as f:
            f.write(WRAPPER)
        facts_path = os.path.join(work, "facts.json")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SONDE_", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                    "CACHE_DIT_"))}
        env.update(env_add)
        env["PYTHONPATH"] = pythonpath
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        r = subprocess.run([python, wrapper, facts_path, src], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout)
        with open(facts_path) as f:
            facts = json.load(f)
        files, layouts = [], {}
        for d, _, names in os.walk(cwd):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), cwd)
                files.append(_strip_digits(rel))
                if n.endswith(".json") and ".trace." not in n:
                    try:
                        with open(os.path.join(d, n)) as f:
                            layouts[_strip_digits(rel)] = schema(json.load(f))
                    except ValueError:
                        layouts[_strip_digits(rel)] = "not JSON"
        facts.update(files=sorted(set(files)), json=layouts, console=_console(r.stdout),
                     log=[_strip_digits(x) for x in facts["log"]], stderr_tail=r.stderr[-1500:])
        return facts
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _subsequence(want, got):
    """The items of want not found in got in order (empty: want is a subsequence of got); a
    missing item does not hide the ones after it."""
    missing, at = [], 0
    for w in want:
        try:
            at = got.index(w, at) + 1
        except ValueError:
            missing.append(w)
    return missing


def layout_gaps(want, got, where=""):
    """Where got's layout lacks what want's has (keys, list items, types; numbers are one
    type)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return ["%s: an object in the original" % (where or "/")]
        out = []
        for k, v in want.items():
            if k not in got:
                out.append("%s/%s: missing" % (where, k))
            else:
                out += layout_gaps(v, got[k], "%s/%s" % (where, k))
        return out
    if isinstance(want, list):
        if not isinstance(got, list):
            return ["%s: a list in the original" % (where or "/")]
        if want and not got:
            return ["%s: empty here, not in the original" % (where or "/")]
        return layout_gaps(want[0], got[0], where + "[0]") if want else []
    return [] if want == got else ["%s: %s, the original's %s" % (where or "/", got, want)]


def compare(want, got):
    """The differences between the original's facts (want) and sonde's (got), as sentences:
    the same exception (sonde's may be a subclass), the original's files among sonde's (which
    may write more), each JSON report's keys and types among sonde's, the original's console
    lines and log records in sonde's in the same order."""
    out = []
    if (want["exception"] is None) != (got["exception"] is None) or \
            (want["exception"] and want["exception"][0] not in got["exception"]):
        out.append("ended with %s, the original with %s" % (
            got["exception"] and got["exception"][0], want["exception"] and
            want["exception"][0]))
    for f in want["files"]:
        if f not in got["files"]:
            out.append("file %s not written" % f)
    for f, layout in want["json"].items():
        if f in got["json"]:
            out += ["%s%s" % (f, g) for g in layout_gaps(layout, got["json"][f])]
    out += ["console line missing: %r" % x for x in _subsequence(want["console"],
                                                                 got["console"])]
    out += ["log record missing: %r" % x for x in _subsequence(want["log"], got["log"])]
    return out


def _original_tree(key, git_dir):
    commit, _, paths = ORIGINALS[key]
    tree = tempfile.mkdtemp(prefix="sonde-original-")
    listed = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", "--name-only", commit],
                            capture_output=True, text=True, check=True).stdout.split()
    for p in paths:
        for f in (x for x in listed if x == p or (p.endswith("/") and x.startswith(p))):
            if not f.endswith(".py"):
                continue
            dest = os.path.join(tree, f[len("src/"):] if f.startswith("src/") else f)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as out:
                out.write(subprocess.run(["git", "-C", git_dir, "show", "%s:%s" % (commit, f)],
                                         capture_output=True, check=True).stdout)
    for d, _, names in os.walk(tree):  # packages without their own __init__: empty ones
        if d != tree and "__init__.py" not in names:
            open(os.path.join(d, "__init__.py"), "w").close()
    for rel, text in STUBS.get(key, {}).items():
        os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
        with open(os.path.join(tree, rel), "w") as f:
            f.write(text)
    for hidden in HIDDEN.get(key, ()):
        with open(os.path.join(tree, hidden + ".py"), "w") as f:
            f.write("raise ImportError('hidden for the recording')\n")
    return tree


def record(key, git_dir):
    """Runs every scenario of original key on the original; writes behaviour/KEY.json."""
    tree = _original_tree(key, git_dir)
    mods = {k: v[0] for k, v in ORIGINALS[key][1].items()}
    commit = subprocess.run(["git", "-C", git_dir, "rev-parse", "--short=10",
                             ORIGINALS[key][0]], capture_output=True, text=True,
                            check=True).stdout.strip()
    out = {"original": key, "commit": commit, "python": sys.version.split()[0],
           "hidden": list(HIDDEN.get(key, ())), "stubs": sorted(STUBS.get(key, {})),
           "scenarios": {}}
    try:
        for name, env, code in SCENARIOS[key]:
            facts = run_scenario(code, mods, sys.executable, env, tree)
            facts.pop("stderr_tail")
            out["scenarios"][name] = facts
            print("%s %s: %s, %d files, %d console lines" % (
                key, name, facts["exception"] and facts["exception"][0], len(facts["files"]),
                len(facts["console"])), file=sys.stderr)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(FACTS, exist_ok=True)
    with open(os.path.join(FACTS, key + ".json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "record":
        sys.exit("usage: behaviour.py record KEY GIT_DIR")
    record(sys.argv[2], sys.argv[3])
