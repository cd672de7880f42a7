"""sonde.compat.inferix - the Inferix profiling module's API over sonde.

    from sonde.compat.inferix import InferixProfiler, ProfilingConfig

    profiler = InferixProfiler(ProfilingConfig(real_time_display=True, report_format="both"))
    with profiler.session("my_video_generation") as session_id:
        with profiler.stage("text_encoding"):
            encode()
        with profiler.stage("video_generation", metadata={"frames": 81}):
            generate()
        profiler.add_event("milestone_reached", {"progress": 0.5})
    # ./profiling_reports/inferix.json and inferix.html were written when the session ended

What maps where. Sessions and stages are sonde sessions and sections; add_event is an event with
a payload (sonde_event_args); record_diffusion_step / record_block_computation /
record_model_parameters are sonde's diffusion records; the GPU and CPU monitors are sonde's
sampler (NVML, /proc), and get_current_metrics() is its live query (sonde_current_metrics) under
Inferix's keys; report_format picks sonde's html and json reports, written again at the end of
every session; aggregate_reports is `sonde aggregate`. The profile_text_encoding,
profile_vae_decode and profile_inference_steps switches turn off the stages whose names contain
"text_encod" and "vae", and the diffusion step records. GPU memory figures are NVML's MiB, under
Inferix's "_mb" keys. The import lines of the Inferix document map as:

    inferix.profiling                       -> sonde.compat.inferix
    inferix.profiling.config                -> sonde.compat.inferix
    inferix.profiling.decorators            -> sonde.compat.inferix
    inferix.utils.profiling_integration     -> sonde.compat.inferix
    inferix.profiling.aggregate_reports     -> sonde.compat.inferix.aggregate_reports
"""

import contextlib
import dataclasses
import difflib
import functools
import json
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Dict

import sonde
from sonde import _sonde

from ._aggregate import aggregate_reports

__all__ = [
    "ProfilingConfig", "InferixProfiler", "ProfilingIntegration", "GPUMonitor", "CPUMonitor",
    "DiffusionAnalyzer", "create_profiler_from_config", "get_profiling_summary",
    "profile_pipeline_function", "profile_method", "profile_session", "profile_diffusion_step",
    "profile_block_computation", "profile_model_parameters", "add_profiling_event",
    "aggregate_reports", "format_metrics", "current_profiler",
]

_REPORT_FORMATS = {"html": ["html"], "json": ["json"], "both": ["json", "html"]}
_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


@dataclasses.dataclass
class ProfilingConfig:
    """Inferix's configuration, every key of its document, with its defaults."""

    enabled: bool = True
    real_time_display: bool = False
    display_interval: float = 5.0
    gpu_monitor_interval: float = 0.5
    monitor_gpu_memory: bool = True
    monitor_gpu_utilization: bool = True
    monitor_gpu_temperature: bool = True
    monitor_gpu_power: bool = True
    cpu_monitor_interval: float = 1.0
    monitor_cpu_usage: bool = True
    monitor_system_memory: bool = True
    generate_final_report: bool = True
    report_format: str = "both"
    output_dir: str = "./profiling_reports"
    max_data_points: int = 10000
    profile_inference_steps: bool = True
    profile_vae_decode: bool = True
    profile_text_encoding: bool = True
    session_tags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.report_format not in _REPORT_FORMATS:
            raise ValueError('ProfilingConfig.report_format: %r; expected "html", "json" or "both"'
                             % (self.report_format,))
        for f in ("display_interval", "gpu_monitor_interval", "cpu_monitor_interval"):
            if not float(getattr(self, f)) > 0:
                raise ValueError("ProfilingConfig.%s: %r; expected seconds > 0"
                                 % (f, getattr(self, f)))
        if int(self.max_data_points) < 10:
            raise ValueError("ProfilingConfig.max_data_points: %r; expected at least 10"
                             % (self.max_data_points,))
        if not isinstance(self.session_tags, dict):
            raise ValueError("ProfilingConfig.session_tags: expected a mapping, got %r"
                             % (self.session_tags,))

    @classmethod
    def from_dict(cls, values, source="<dict>", lines=None):
        """A configuration from a mapping of its keys (or one holding them under `profiling:`).
        Values may be text, as a YAML file has them ("true", "0.5"). An unknown key or a bad
        value is a ValueError naming source, the line when known, and the key."""
        if isinstance(values, dict) and isinstance(values.get("profiling"), dict):
            values, prefix = values["profiling"], "profiling."
        else:
            prefix = ""
        if not isinstance(values, dict):
            raise ValueError("%s: expected a mapping of profiling keys" % source)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kw = {}
        for key, value in values.items():
            where = source
            if lines and prefix + key in lines:
                where = "%s:%d" % (source, lines[prefix + key])
            if key not in fields:
                near = difflib.get_close_matches(key, fields, 1)
                raise ValueError('%s: unknown key "%s"%s' % (
                    where, key, ' (did you mean "%s"?)' % near[0] if near else ""))
            try:
                kw[key] = _convert(fields[key], value)
            except ValueError as e:
                raise ValueError('%s: key "%s": %s' % (where, key, e)) from None
        try:
            return cls(**kw)
        except ValueError as e:
            raise ValueError("%s: %s" % (source, e)) from None

    @classmethod
    def from_yaml(cls, path):
        """A configuration from a YAML file: its keys at the top level or under `profiling:`,
        as the Inferix document writes them."""
        path = os.fspath(path)
        with open(path, "rb") as f:
            data = f.read(16 << 20)
        doc, lines = _sonde.yaml_load(data, path)
        return cls.from_dict(doc if doc is not None else {}, path, lines)

    # the document's presets, as sonde's presets set them
    @classmethod
    def development(cls, **kw):
        """High-frequency monitoring, every feature, the live display."""
        return cls(**dict(dict(real_time_display=True, display_interval=2.0,
                               gpu_monitor_interval=0.1, cpu_monitor_interval=0.5), **kw))

    @classmethod
    def production(cls, **kw):
        """Low-frequency, essential monitoring; JSON reports for automation."""
        return cls(**dict(dict(real_time_display=False, gpu_monitor_interval=5.0,
                               cpu_monitor_interval=5.0, monitor_gpu_temperature=False,
                               monitor_gpu_power=False, report_format="json"), **kw))

    @classmethod
    def debugging(cls, **kw):
        """Maximum detail, frequent live updates."""
        return cls(**dict(dict(real_time_display=True, display_interval=1.0,
                               gpu_monitor_interval=0.05, cpu_monitor_interval=0.1,
                               max_data_points=1000000), **kw))


def _convert(field, value):
    t = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    if value is None:
        raise ValueError("no value")
    if t == "bool":
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError("%r is not a boolean (true/false)" % (value,))
    if t == "float":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError("%r is not a number" % (value,)) from None
    if t == "int":
        try:
            return int(str(value), 10) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError("%r is not an integer" % (value,)) from None
    if field.name == "session_tags":
        if not isinstance(value, dict):
            raise ValueError("expected a mapping of tags")
        return dict(value)
    return str(value)


# -- which profiler a decorator uses ---------------------------------------------------------
_tls = threading.local()


def current_profiler():
    """The InferixProfiler whose session (or `with` block) the calling thread is in, or None."""
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


def _push(p):
    if not hasattr(_tls, "stack"):
        _tls.stack = []
    _tls.stack.append(p)


def _pop(p):
    stack = getattr(_tls, "stack", None)
    if stack and p in stack:
        stack.reverse()
        stack.remove(p)
        stack.reverse()


class InferixProfiler:
    """Inferix's profiler over one sonde.Profiler (its `.profiler`). Reports are NAME.json
    and/or NAME.html in output_dir (NAME: "inferix", "-rankN" in a distributed job), written
    when each session ends and when the profiler is closed; NAME.sonde holds the raw data."""

    def __init__(self, config=None, name="inferix"):
        if config is None:
            config = ProfilingConfig()
        elif isinstance(config, dict):
            config = ProfilingConfig.from_dict(config)
        elif isinstance(config, (str, bytes, os.PathLike)):
            config = ProfilingConfig.from_yaml(config)
        self.config = c = config
        gpu = (c.monitor_gpu_memory or c.monitor_gpu_utilization or c.monitor_gpu_temperature or
               c.monitor_gpu_power)
        self.profiler = sonde.Profiler({
            "enabled": c.enabled, "name": name, "output_dir": c.output_dir,
            "formats": _REPORT_FORMATS[c.report_format] if c.generate_final_report else [],
            "collect_gpu": gpu, "gpu_interval_s": c.gpu_monitor_interval,
            "monitor_gpu_temperature": c.monitor_gpu_temperature,
            "monitor_gpu_power": c.monitor_gpu_power, "collect_cpu": c.monitor_cpu_usage,
            "collect_memory": c.monitor_system_memory, "cpu_interval_s": c.cpu_monitor_interval,
            "max_data_points": c.max_data_points, "session_tags": c.session_tags or None,
            "unit": "frames"})
        self.session_id = None
        self.diffusion_analyzer = DiffusionAnalyzer(self)
        self._display = None
        self._steps = 0   # diffusion steps and blocks recorded by the decorators
        self._blocks = 0

    # -- lifetime -------------------------------------------------------------------------
    @property
    def enabled(self):
        return self.profiler.enabled

    def __enter__(self):
        _push(self)
        return self

    def __exit__(self, et, ev, tb):
        _pop(self)
        self.close()
        return False

    def close(self):
        """Stops monitoring and writes the final reports."""
        self._stop_display()
        self.profiler.close(raise_on_error=False)

    cleanup = close

    def report_paths(self):
        """The reports this profiler writes (empty when disabled or generate_final_report is
        off)."""
        if self.profiler.file_path is None or not self.config.generate_final_report:
            return []
        stem = os.path.join(self.profiler.output_dir, self.profiler.name)
        return [stem + "." + f for f in _REPORT_FORMATS[self.config.report_format]]

    # -- sessions and stages ----------------------------------------------------------------
    @contextlib.contextmanager
    def session(self, name="session", metadata=None):
        """A session; yields its id ("session_" and 6 hex digits), recorded as its metadata
        session_id. Its end writes the reports (generate_final_report)."""
        sid = "session_" + uuid.uuid4().hex[:6]
        meta = {k: sonde.json_text(v) for k, v in (metadata or {}).items()}
        meta["session_id"] = sid
        self.session_id = sid
        _push(self)
        self._start_display()
        try:
            with self.profiler.session(name, meta):
                yield sid
        finally:
            self._stop_display()
            _pop(self)
            self.session_id = None
            if self.config.generate_final_report and self.profiler.file_path is not None:
                self.profiler.export()

    def _stage_on(self, name):
        n = str(name).lower()
        c = self.config
        return not (("text_encod" in n and not c.profile_text_encoding) or
                    ("vae" in n and not c.profile_vae_decode))

    def stage(self, name, metadata=None):
        """A stage (a section) as a context manager; metadata values of any JSON-able type."""
        if not self._stage_on(name):
            return contextlib.nullcontext()
        meta = {k: sonde.json_text(v) for k, v in metadata.items()} if metadata else None
        return self.profiler.stage(name, meta)

    def add_event(self, name, data=None):
        """A custom event with its data (a dict) at this instant, in every report."""
        self.profiler.event(name, data or None)

    def profile_function(self, name=None):
        """Decorator: each call of the function is a stage named name (else its qualified
        name). @profiler.profile_function("my_function") or @profiler.profile_function."""
        if callable(name):
            return sonde.profile_function(name, profiler=self.profiler)
        return sonde.profile_function(name=name, profiler=self.profiler)

    # -- diffusion records --------------------------------------------------------------------
    def record_diffusion_step(self, step, timestep, block_size=0, computation_time_ms=None,
                              guidance_scale=None):
        """One denoising step: its time in ms (None: the open stage's own duration). Not
        recorded when profile_inference_steps is off."""
        if not self.config.profile_inference_steps:
            return
        self.profiler.record_diffusion_step(
            int(step), float(timestep), int(block_size or 0),
            None if computation_time_ms is None else float(computation_time_ms) / 1000.0,
            0.0 if guidance_scale is None else float(guidance_scale))

    def record_block_computation(self, block_index, block_size, computation_time_ms=None,
                                 memory_usage_mb=None):
        """One block of frames: FPS and BPS in the reports."""
        self.profiler.record_block(
            int(block_index), int(block_size),
            None if computation_time_ms is None else float(computation_time_ms) / 1000.0,
            float(memory_usage_mb or 0.0))

    def record_model_parameters(self, model_name, total_params=None, trainable_params=None,
                                model=None):
        """A model's parameter count: total_params, or counted (numel() of each of
        .parameters()) from model, or from model_name when that is the model itself (then
        named by its class); the trainable ones (requires_grad) as a metric beside it."""
        if model is None and total_params is None and hasattr(model_name, "parameters"):
            model, model_name = model_name, type(model_name).__name__
        if total_params is None and model is not None:
            params = list(model.parameters())
            total_params = sum(x.numel() for x in params)
            trainable_params = sum(x.numel() for x in params
                                   if getattr(x, "requires_grad", True))
        if total_params is None:
            raise TypeError("record_model_parameters(%r): total_params is needed" % (model_name,))
        self.profiler.record_model_params(str(model_name), float(total_params))
        if trainable_params is not None:
            self.profiler.record_metric("%s trainable parameters" % model_name,
                                        float(trainable_params))

    # -- live figures -------------------------------------------------------------------------
    def get_current_metrics(self):
        """The latest monitoring figures under Inferix's keys: metrics["gpu"] (the first GPU:
        memory_used_mb, memory_total_mb, memory_percent, utilization, temperature, power_w;
        None where not sampled), metrics["gpus"] (one such dict per GPU), metrics["cpu"]
        (usage_percent, process_percent, load_1m/5m/15m), metrics["memory"] (used_mb,
        available_mb, total_mb, percent, process_rss_mb) and timestamp."""
        return _shape(self.profiler.get_current_metrics())

    def _start_display(self):
        if self.config.real_time_display and self.profiler.file_path is not None:
            self._display = _Display(self)

    def _stop_display(self):
        d, self._display = self._display, None
        if d:
            d.stop()

    # -- results --------------------------------------------------------------------------
    def get_summary(self):
        """The run so far: total_duration, sessions and stages (name -> count, total_time,
        avg_time, min_time, max_time, percentage), total_frames, fps, and sonde's summary under
        "sonde"."""
        s = self.profiler.get_summary()
        dur = s["total_duration_s"]
        stages = {st["name"]: {"count": st["count"], "total_time": st["total_s"],
                               "avg_time": st["mean_s"], "min_time": st["min_s"],
                               "max_time": st["max_s"],
                               "percentage": 100.0 * st["total_s"] / dur if dur > 0 else 0.0}
                  for st in s["stats"]}
        return {"total_duration": dur, "stages": stages, "total_frames": s["units"],
                "fps": s["units_per_s"], "warnings": s["warnings"], "sonde": s}

    get_profiling_summary = get_summary


class DiffusionAnalyzer:
    """The diffusion records of a profiler, from its JSON report's "diffusion" and "models"."""

    def __init__(self, profiler):
        self._p = profiler

    def _report(self):
        fd, path = tempfile.mkstemp(suffix=".json", prefix="sonde-inferix-")
        os.close(fd)
        try:
            self._p.profiler.export(path)
            with open(path) as f:
                return json.load(f)
        finally:
            os.unlink(path)

    def get_diffusion_analysis(self):
        """Steps: count, steps_per_s, mean/p50/p99, timesteps and guidance scales."""
        return (self._report().get("diffusion") or {}).get("steps", {})

    def get_block_analysis(self):
        """Blocks: count, frames, fps, bps, times and memory."""
        return (self._report().get("diffusion") or {}).get("blocks", {})

    def get_model_analysis(self):
        """Models: name -> parameter count."""
        r = self._report()
        models = r.get("models") or (r.get("diffusion") or {}).get("models") or []
        return {m["name"]: m.get("params") for m in models}


def _num(v):
    return None if v is None else float(v)


def _shape(cur):
    gpus = {}
    for k, v in cur.items():
        m = re.match(r"gpu(\d+) (.+)$", k)
        if m:
            gpus.setdefault(int(m.group(1)), {})[m.group(2)] = v

    def gpu(i, g):
        return {"device_id": i, "available": bool(g),
                "memory_used_mb": _num(g.get("memory MiB")),
                "memory_total_mb": _num(g.get("memory total MiB")),
                "memory_percent": _num(g.get("memory %")),
                "utilization": _num(g.get("util %")),
                "memory_utilization": _num(g.get("memory util %")),
                "temperature": _num(g.get("temperature C")),
                "power_w": _num(g.get("power W")), "power_limit_w": _num(g.get("power limit W"))}

    ids = sorted(gpus)
    used, total = cur.get("memory used MiB"), cur.get("memory total MiB")
    return {
        "timestamp": time.time(),
        "gpu": gpu(ids[0], gpus[ids[0]]) if ids else gpu(None, {}),
        "gpus": [gpu(i, gpus[i]) for i in ids],
        "cpu": {"usage_percent": _num(cur.get("cpu %")),
                "process_percent": _num(cur.get("process cpu %")),
                "load_1m": _num(cur.get("load 1m")), "load_5m": _num(cur.get("load 5m")),
                "load_15m": _num(cur.get("load 15m"))},
        "memory": {"used_mb": _num(used), "available_mb": _num(cur.get("memory available MiB")),
                   "total_mb": _num(total),
                   "percent": 100.0 * used / total if used is not None and total else None,
                   "process_rss_mb": _num(cur.get("rss MiB"))},
    }


def format_metrics(metrics, session_id=None):
    """The live display's lines, as Inferix prints them:
        === Profiling Metrics (session_abc123) ===
        GPU: Memory 8420MB / 24564MB (34.3%), Util 85.2%, Temp 72.1°C
        CPU: 45.3%, Memory 12840MB / 32768MB (39.2%)
    A figure not sampled (yet) reads "n/a"; with no GPU the GPU line says why not."""

    def f(v, fmt):
        return "n/a" if v is None else fmt % v

    g, c, m = metrics["gpu"], metrics["cpu"], metrics["memory"]
    lines = ["=== Profiling Metrics (%s) ===" % (session_id or "no session")]
    if g["available"]:
        pct = g["memory_percent"]
        if pct is None and g["memory_used_mb"] is not None and g["memory_total_mb"]:
            pct = 100.0 * g["memory_used_mb"] / g["memory_total_mb"]
        lines.append("GPU: Memory %sMB / %sMB (%s), Util %s, Temp %s" % (
            f(g["memory_used_mb"], "%.0f"), f(g["memory_total_mb"], "%.0f"), f(pct, "%.1f%%"),
            f(g["utilization"], "%.1f%%"), f(g["temperature"], "%.1f°C")))
    else:
        lines.append("GPU: not monitored (no GPU figures: NVML absent or GPU monitoring off)")
    lines.append("CPU: %s, Memory %sMB / %sMB (%s)" % (
        f(c["usage_percent"], "%.1f%%"), f(m["used_mb"], "%.0f"), f(m["total_mb"], "%.0f"),
        f(m["percent"], "%.1f%%")))
    return "\n".join(lines)


class _Display:
    """Prints format_metrics to stdout every display_interval seconds during a session."""

    def __init__(self, prof):
        self._prof = prof
        self._stop = threading.Event()
        self._out = sys.stdout
        self._t = threading.Thread(target=self._run, name="inferix-display", daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(self._prof.config.display_interval):
            try:
                text = format_metrics(self._prof.get_current_metrics(), self._prof.session_id)
                print(text, file=self._out, flush=True)
            except (sonde.SondeError, ValueError, OSError):
                return

    def stop(self):
        self._stop.set()
        self._t.join()


# -- integration, monitors, helpers ----------------------------------------------------------
class ProfilingIntegration:
    """The easy pipeline integration: an InferixProfiler (its `.profiler`) whose session is
    named after the pipeline and records the prompt."""

    def __init__(self, config=None, name="inferix"):
        self.profiler = (config if isinstance(config, InferixProfiler)
                         else InferixProfiler(config, name=name))

    @contextlib.contextmanager
    def session(self, prompt=None, name="generation", **metadata):
        """A session with the prompt (and any other keyword) as its metadata; yields its id."""
        if prompt is not None:
            metadata["prompt"] = prompt
        with self.profiler.session(name, metadata) as sid:
            yield sid

    def __getattr__(self, attr):  # stage, add_event, get_current_metrics, record_*, close ...
        return getattr(self.profiler, attr)


class _Monitor:
    _what = {}

    def __init__(self, name, output_dir, **keys):
        self._keys = dict({"name": name, "output_dir": output_dir, "formats": []}, **keys)
        self.profiler = None

    def start(self):
        """Starts sampling (in sonde's sampler thread)."""
        if self.profiler is None:
            self.profiler = sonde.Profiler(dict(self._keys, **self._what))
        return self

    def stop(self):
        """Stops sampling; the samples are in output_dir/NAME.sonde."""
        if self.profiler is not None:
            self.profiler.close(raise_on_error=False)
            self.profiler = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _current(self):
        return _shape(self.profiler.get_current_metrics()) if self.profiler else _shape({})


class GPUMonitor(_Monitor):
    """GPU monitoring (NVML) of the devices listed (None: every GPU), every interval seconds."""

    _what = {"collect_gpu": True, "collect_cpu": False, "collect_memory": False}

    def __init__(self, device_ids=None, interval=0.5, output_dir="./profiling_reports",
                 monitor_temperature=True, monitor_power=True, max_data_points=10000):
        self.device_ids = list(device_ids) if device_ids is not None else None
        super().__init__("gpu_monitor", output_dir, gpu_interval_s=interval,
                         gpu_devices=",".join(str(int(d)) for d in self.device_ids)
                         if self.device_ids else "all",
                         monitor_gpu_temperature=monitor_temperature,
                         monitor_gpu_power=monitor_power, max_data_points=max_data_points)

    def get_current_metrics(self):
        """{device_id: {memory_used_mb, memory_total_mb, utilization, temperature, ...}}."""
        return {g["device_id"]: g for g in self._current()["gpus"]}


class CPUMonitor(_Monitor):
    """CPU, system memory and load monitoring (/proc) every interval seconds."""

    _what = {"collect_gpu": False, "collect_cpu": True, "collect_memory": True}

    def __init__(self, interval=1.0, output_dir="./profiling_reports", max_data_points=10000):
        super().__init__("cpu_monitor", output_dir, cpu_interval_s=interval,
                         max_data_points=max_data_points)

    def get_current_metrics(self):
        """{"cpu": {...}, "memory": {...}} as InferixProfiler.get_current_metrics has them."""
        cur = self._current()
        return {"cpu": cur["cpu"], "memory": cur["memory"], "timestamp": cur["timestamp"]}


def create_profiler_from_config(config=None, name="inferix"):
    """An InferixProfiler from a ProfilingConfig, a dict of its keys, or a YAML file's path."""
    return InferixProfiler(config, name=name)


def get_profiling_summary(profiler=None):
    """The summary of profiler (else the one the calling thread is in)."""
    p = profiler or current_profiler()
    if p is None:
        raise ValueError("get_profiling_summary: no profiler given and none is active on this "
                         "thread")
    return p.get_summary()


# -- decorators ----------------------------------------------------------------------------
def _owner(args):
    """The profiler a decorated call uses: its instance's `profiler` attribute, else the one
    the calling thread is in."""
    if args:
        p = getattr(args[0], "profiler", None)
        if isinstance(p, ProfilingIntegration):
            p = p.profiler
        if isinstance(p, InferixProfiler):
            return p
    return current_profiler()


def _decorator(make):
    """A decorator factory usable bare (@d) or called (@d("name", ...))."""

    @functools.wraps(make)
    def factory(*dargs, **dkw):
        if len(dargs) == 1 and callable(dargs[0]) and not dkw:
            return make(dargs[0])
        return lambda f: make(f, *dargs, **dkw)

    return factory


def _around(f, enter, after=None):
    """The decorators' wrapper: the call inside enter(p), a context manager of the profiler p
    it uses, then after(p, kwargs, result) still inside it; without a profiler, the call
    alone."""

    @functools.wraps(f)
    def run(*a, **kw):
        p = _owner(a)
        if p is None:
            return f(*a, **kw)
        with enter(p):
            r = f(*a, **kw)
            if after is not None:
                after(p, kw, r, a)
        return r

    return run


def _nothing(p):
    return contextlib.nullcontext()


@_decorator
def profile_method(f, name=None, metadata=None):
    """Each call of the method is a stage (named name, else its qualified name)."""
    label = name or f.__qualname__
    return _around(f, lambda p: p.stage(label, metadata))


profile_pipeline_function = profile_method


@_decorator
def profile_session(f, name=None, metadata=None):
    """Each call of the method is a whole session (its reports written when it returns)."""
    label = name or f.__qualname__
    return _around(f, lambda p: p.session(label, metadata))


@_decorator
def profile_diffusion_step(f, name="diffusion_step"):
    """Each call is one diffusion step, timed as a stage; step, timestep, block_size and
    guidance_scale are taken from the call's keyword arguments when it has them (step: else
    counted from 0)."""

    def record(p, kw, r, a):
        step = kw.get("step")
        step = p._steps if step is None else step
        p._steps = int(step) + 1
        p.record_diffusion_step(step, kw.get("timestep", 0.0), kw.get("block_size", 0), None,
                                kw.get("guidance_scale"))

    return _around(f, lambda p: p.stage(name), record)


@_decorator
def profile_block_computation(f, name="block_computation"):
    """Each call computes one block, timed as a stage; block_index and block_size (frames)
    from the call's keyword arguments (block_index: else counted from 0), the block's memory
    from the first GPU's memory in use."""

    def record(p, kw, r, a):
        idx = kw.get("block_index")
        idx = p._blocks if idx is None else idx
        p._blocks = int(idx) + 1
        mem = p.get_current_metrics()["gpu"]["memory_used_mb"]
        p.record_block_computation(idx, kw.get("block_size", 0), None, mem)

    return _around(f, lambda p: p.stage(name), record)


@_decorator
def profile_model_parameters(f, model_name=None):
    """After the call, the parameter count of the model it returns (else of its instance's
    `model`), anything with .parameters()."""

    def record(p, kw, r, a):
        model = r if hasattr(r, "parameters") else getattr(a[0], "model", None) if a else None
        if model is not None and hasattr(model, "parameters"):
            p.record_model_parameters(model_name or type(model).__name__, model=model)

    return _around(f, _nothing, record)


@_decorator
def add_profiling_event(f, event_name=None, data=None):
    """After the call, an event (named event_name, else "NAME completed") with data."""
    label = event_name or "%s completed" % f.__qualname__
    return _around(f, _nothing, lambda p, kw, r, a: p.add_event(label, data))
