"""sonde.compat.diffulex - the Diffulex profiler's API (DiffulexProfiler, ProfilerConfig,
PerformanceMetrics) over sonde.

    from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig

    profiler = DiffulexProfiler(ProfilerConfig(enabled=True, output_dir="log/profiles"))
    with profiler.profile("inference", metadata={"batch_size": 10}):
        outputs = run()
        profiler.record_throughput(count_tokens(outputs))
    profiler.export("log/profiles/inference_profile.json")
    print(profiler.get_summary()["avg_throughput_tokens_per_sec"])

What maps where: sections are sonde sections; record_metric takes any JSON-able value (numbers
become metrics, other values the open section's metadata); record_throughput counts tokens;
export(path) writes one report chosen by the extension (.json, .csv, .txt for the summary), or,
without a path, every format of export_formats into output_dir (the run's name is output_file's
stem, else "diffulex"). The reports are sonde's (docs/formats.md), read by every sonde command.
Backends: "simple" is sonde itself; "viztracer" is sonde's Python function tracing (every Python
call a section for the profiler's life; viztracer_config's output_file gets the Chrome trace,
see _VIZ); "pytorch" (torch.profiler) is not available yet and raises a clear error instead of
profiling less.
"""

import dataclasses
import numbers
import os
import sys
from typing import Any, Dict, List, Optional

import sonde
from sonde.compat import _unzip_to

__all__ = ["DiffulexProfiler", "ProfilerConfig", "PerformanceMetrics"]

_FORMATS = {"json": "json", "csv": "csv", "summary": "txt", "txt": "txt", "trace": "trace",
            "html": "html"}

# VizTracer's options as sonde's tracing keys (None: accepted, nothing to do in sonde).
_VIZ = {
    "output_file": None,          # the Chrome trace is written there at close
    "file_info": "with_stack",    # the trace's events carry file and line
    "max_stack_depth": "trace_python_max_depth",  # -1: unlimited (4096)
    "include_files": "trace_python_include",      # file prefixes
    "exclude_files": "trace_python_exclude",
    "ignore_c_function": "trace_python_c_calls",  # inverted
    "ignore_frozen": None,        # frozen modules are left out anyway
    "min_duration": "min_duration_s",             # microseconds
    "tracer_entries": None,       # sonde's buffers are bounded by buffer_mb
    "verbose": None,
    "pid_suffix": None,
    "register_global": None,
}
# VizTracer options whose data sonde does not record: accepted, and said once on stderr.
_VIZ_NOT_RECORDED = ("log_func_args", "log_func_retval", "log_func_repr", "log_print",
                     "log_gc", "log_async", "log_sparse", "log_audit", "log_torch",
                     "log_func_with_objprint", "log_exception")


_TORCH_KEYS = ("activities", "record_shapes", "profile_memory", "with_stack", "with_flops")


def _pytorch_keys(pc):
    """sonde.torch.profile_operators keywords from a pytorch_profiler_config dict (ValueError
    naming an unknown option)."""
    out = {}
    for k, v in (pc or {}).items():
        if k not in _TORCH_KEYS:
            raise ValueError("ProfilerConfig.pytorch_profiler_config: unknown option %r; sonde "
                             "knows %s" % (k, ", ".join(_TORCH_KEYS)))
        out[k] = v
    return out


def _viztracer_keys(vc):
    """sonde keys from a viztracer_config dict (ValueError naming an unknown option)."""
    keys = {"trace_python": True, "trace_python_c_calls": True}  # VizTracer's default
    for k, v in (vc or {}).items():
        if k in _VIZ_NOT_RECORDED:
            if v:
                print("sonde: viztracer_config[%r]: not recorded by sonde's tracer" % k,
                      file=sys.stderr)
            continue
        if k not in _VIZ:
            raise ValueError("ProfilerConfig.viztracer_config: unknown option %r (sonde maps %s)"
                             % (k, ", ".join(sorted(_VIZ))))
        key = _VIZ[k]
        if key is None:
            continue
        if k == "max_stack_depth":
            v = 4096 if v is None or int(v) < 0 else max(1, int(v))
        elif k in ("include_files", "exclude_files"):
            v = ",".join(os.path.join(os.path.abspath(f), "*") if os.path.isdir(f)
                         else os.path.abspath(f) for f in v)
        elif k == "ignore_c_function":
            v = not v
        elif k == "min_duration":
            v = float(v) / 1e6
        keys[key] = v
    return keys


@dataclasses.dataclass
class ProfilerConfig:
    """Diffulex's configuration, field for field."""

    enabled: bool = True
    backend: str = "simple"
    output_dir: str = "log/profiles"
    output_file: Optional[str] = None
    collect_gpu_metrics: bool = True
    collect_memory_metrics: bool = True
    collect_timing: bool = True
    export_formats: List[str] = dataclasses.field(default_factory=lambda: ["json", "summary"])
    viztracer_config: Optional[Dict] = None
    pytorch_profiler_config: Optional[Dict] = None


@dataclasses.dataclass
class PerformanceMetrics:
    """One section's figures (from sonde's statistics of that name)."""

    name: str
    duration: float = 0.0
    total_tokens: float = 0.0
    throughput_tokens_per_sec: float = 0.0
    gpu_utilization: Optional[float] = None
    memory_delta_mb: Optional[float] = None
    custom_metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
    metadata: Dict[str, Any] = dataclasses.field(default_factory=dict)
    count: int = 0


class DiffulexProfiler:
    """Diffulex's profiler over a sonde.Profiler (its `.profiler`)."""

    def __init__(self, config: Optional[ProfilerConfig] = None):
        self.config = config if config is not None else ProfilerConfig()
        c = self.config
        if c.backend not in ("simple", "viztracer", "pytorch"):
            raise ValueError('ProfilerConfig.backend: "%s"; expected "simple", "viztracer" or '
                             '"pytorch"' % c.backend)
        torch_keys = _pytorch_keys(c.pytorch_profiler_config) if c.backend == "pytorch" else None
        viz = _viztracer_keys(c.viztracer_config) if c.backend == "viztracer" else {}
        formats = []
        for f in c.export_formats or []:
            if f not in _FORMATS:
                raise ValueError("ProfilerConfig.export_formats: %r; expected json, csv or summary"
                                 % f)
            formats.append(_FORMATS[f])
        if not c.collect_timing:
            print("sonde: ProfilerConfig.collect_timing=False: sonde always times its sections",
                  file=sys.stderr)
        name = os.path.splitext(os.path.basename(c.output_file))[0] if c.output_file else "diffulex"
        self._viz_output = (c.viztracer_config or {}).get("output_file") if viz else None
        if self._viz_output and "trace" not in formats:
            formats.append("trace")
        self.profiler = sonde.Profiler(
            dict({"enabled": c.enabled, "name": name, "output_dir": c.output_dir,
                  "formats": formats or ["json"], "collect_gpu": c.collect_gpu_metrics,
                  "collect_memory": c.collect_memory_metrics, "unit": "tokens"}, **viz))
        self.torch_profiler = None
        if torch_keys is not None and self.profiler.enabled:
            try:
                from sonde import torch as sonde_torch
            except ImportError as e:
                self.profiler.close(raise_on_error=False)
                raise ImportError('ProfilerConfig.backend="pytorch" needs PyTorch in this '
                                  'interpreter (%s): %s' % (sys.executable, e)) from e
            self.torch_profiler = sonde_torch.profile_operators(self.profiler, **torch_keys)
        self._custom = {}  # section name -> {metric: last value}, for PerformanceMetrics
        self._meta = {}
        self._open = []    # names of the sections open through start()/profile()

    # -- sections ---------------------------------------------------------------------------
    def profile(self, name: str, metadata: Optional[Dict] = None):
        """A section as a context manager."""
        return _Scope(self, name, metadata)

    def start(self, name: str, metadata: Optional[Dict] = None):
        """Opens a section; stop() closes it."""
        self.profiler.start(name)
        self._open.append(name)
        for k, v in (metadata or {}).items():
            self._note(name, k, v)

    def stop(self):
        """Closes the section opened last."""
        self.profiler.stop()
        if self._open:
            self._open.pop()

    def _note(self, section, key, value):
        self.profiler.add_metadata(key, sonde.json_text(value))
        self._meta.setdefault(section, {})[key] = value

    # -- measurements -----------------------------------------------------------------------
    def record_metric(self, name: str, value: Any):
        """A custom metric: a number is a metric (count, mean, min, max); any other value the
        open section's metadata."""
        section = self._open[-1] if self._open else "run"
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            self.profiler.record_metric(name, float(value))
        else:
            self._note(section, name, value)
        self._custom.setdefault(section, {})[name] = value

    def record_throughput(self, tokens: Optional[float] = None, duration: Optional[float] = None,
                          *, total_tokens: Optional[float] = None):
        """Tokens processed, over duration seconds or the open section's own time."""
        n = total_tokens if tokens is None else tokens
        if n is None:
            raise TypeError("record_throughput() needs tokens (or total_tokens=)")
        self.profiler.record_throughput(n, duration)

    # -- results ----------------------------------------------------------------------------
    def export(self, output_path: Optional[str] = None):
        """One report at output_path (the format from its extension: .json, .csv, .txt), or
        every format of export_formats into output_dir. Returns the path(s) written."""
        if output_path is None:
            self.profiler.export()
            stem = os.path.join(self.profiler.output_dir, self.profiler.name)
            out = [stem + "." + f for f in sorted(set(self.profiler.config.get("formats")
                                                      .split(",")))]
            if self._viz_output and os.path.exists(stem + ".trace.json.gz"):
                _unzip_to(stem + ".trace.json.gz", self._viz_output)  # VizTracer's file
                out.append(self._viz_output)
            return out
        d = os.path.dirname(os.path.abspath(output_path))
        os.makedirs(d, exist_ok=True)
        self.profiler.export(output_path)
        return output_path

    def sections(self) -> List[PerformanceMetrics]:
        """Every section name's figures, largest total first."""
        s = self.profiler.get_summary()
        out = []
        for st in s["stats"]:
            out.append(PerformanceMetrics(
                name=st["name"], duration=st["total_s"], total_tokens=st["units"],
                throughput_tokens_per_sec=st["units_per_s"], count=st["count"],
                custom_metrics=dict(self._custom.get(st["name"], {})),
                metadata=dict(self._meta.get(st["name"], {}))))
        return out

    def get_summary(self) -> Dict[str, Any]:
        """Diffulex's summary keys: total_duration_sec (the run so far), num_sections,
        total_tokens, avg_throughput_tokens_per_sec (tokens over the time of the sections that
        recorded them), sections (name -> duration, count, tokens, throughput)."""
        s = self.profiler.get_summary()
        return {
            "total_duration_sec": s["total_duration_s"],
            "num_sections": s["sections"],
            "total_tokens": s["units"],
            "avg_throughput_tokens_per_sec": s["units_per_s"],
            "sections": {m.name: dataclasses.asdict(m) for m in self.sections()},
            "not_recorded": s["not_recorded"],
        }

    def clear(self):
        """Discards everything collected so far."""
        self.profiler.clear()
        self._custom.clear()
        self._meta.clear()


class _Scope:
    __slots__ = ("_d", "_name", "_meta")

    def __init__(self, d, name, meta):
        self._d, self._name, self._meta = d, name, meta

    def __enter__(self):
        self._d.start(self._name, self._meta)
        return self._d

    def __exit__(self, et, ev, tb):
        if self._d._open:
            self._d._open.pop()
        try:
            self._d.profiler.stop()
        except sonde.SondeError:
            if et is None:
                raise
        return False
