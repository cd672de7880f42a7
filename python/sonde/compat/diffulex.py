"""sonde.compat.diffulex - the Diffulex profiler (diffulex_profiler, 000) over sonde.

    from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig

    profiler = DiffulexProfiler(ProfilerConfig(enabled=True, output_dir="log/profiles"))
    with profiler.profile("inference", metadata={"batch_size": 10}):
        outputs = run()
        profiler.record_throughput(count_tokens(outputs))
    profiler.export("log/profiles/inference_profile.json")   # .json and .txt (export_formats)
    print(profiler.get_summary()["avg_throughput_tokens_per_sec"])

As the original (diffulex_profiler at 8ea8717): each section run is one PerformanceMetrics in
profiler.metrics, with its metadata, custom metrics, tokens, throughput, memory delta and the
backend's data; export(path) writes one file per export_formats entry with path's stem (json:
{"metrics": [...], "summary": {...}}; csv: one row per section run; summary: the text, also
logged); export() without a path uses output_dir/output_file, else
output_dir/profile_<YYYYmmdd_HHMMSS>; get_summary() and clear() are the original's. What the
original only warns about (an unknown backend or format, export with nothing recorded, stop
with nothing open) is a warning here too, on the original's loggers ("diffulex_profiler.*",
printed to stdout as Diffulex's logger prints them unless the program configured them).

What sonde adds: every section is also a sonde section (the run's NAME.sonde, NAME.trace.json.gz
and NAME.html in output_dir, NAME being output_file's stem, else "diffulex"), so every `sonde`
command reads the run; sections nest (the original's start() drops an open section when another
begins; here both are kept, the inner one ending first in profiler.metrics); record_throughput
inside the block, without a duration, is computed over the section's own time when it ends (the
original records nothing then). Backends: "simple"; "viztracer" is sonde's Python function
tracing (every Python call a section, for the profiler's life), each section's output file
holding the trace so far; "pytorch" is sonde's torch.profiler backend (sonde.torch), each
section's files written as the original names them. docs/python.md lists the differences.
"""

import abc
import csv
import dataclasses
import json
import logging
import numbers
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import sonde
from sonde.compat import UnknownOption, _unzip_to

__all__ = ["DiffulexProfiler", "ProfilerConfig", "PerformanceMetrics", "collect_gpu_metrics",
           "collect_cpu_metrics", "collect_memory_metrics", "ProfilerBackend",
           "SimpleTimerBackend", "VizTracerBackend", "PyTorchProfilerBackend", "ProfilerExporter",
           "JSONExporter", "CSVExporter", "SummaryExporter"]


def _logger(name):
    """The original's loggers (diffulex.logger.get_logger without rich): INFO and up to stdout
    as 'time | LEVEL | name | message', unless the program gave the logger handlers."""
    lg = logging.getLogger(name)
    if not lg.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter("%(asctime)s | %(levelname)-8s | %(name)s | %(message)s",
                                         datefmt="%Y-%m-%d %H:%M:%S"))
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
    lg.propagate = False
    return lg


logger = _logger("diffulex_profiler.profiler")

# VizTracer's options as sonde's tracing keys (None: accepted, nothing to do in sonde).
_VIZ = {
    "output_file": None,          # each section's trace is written there
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


def _viztracer_keys(vc):
    """sonde keys from a viztracer_config dict (ValueError naming an unknown option)."""
    keys = {"trace_python": True, "trace_python_c_calls": True}  # VizTracer's default
    for k, v in (vc or {}).items():
        if k in _VIZ_NOT_RECORDED:
            if v:
                print("sonde: viztracer_config[%r]: not recorded by sonde's tracer" % k,
                      file=sys.stderr)
            continue
        if k == "output_dir":
            continue
        if k not in _VIZ:
            raise UnknownOption("ProfilerConfig.viztracer_config: unknown option %r (sonde maps %s)"
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


def _cuda_total(e):
    """A key_averages() row's CUDA time in microseconds: cuda_time_total in PyTorch 1.x,
    device_time_total in PyTorch 2 (whose rows have no cuda_time_total: a GPU run found the
    summary failing there)."""
    t = getattr(e, "device_time_total", None)
    return e.cuda_time_total if t is None else t


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
    viztracer_config: Optional[Dict[str, Any]] = None
    pytorch_profiler_config: Optional[Dict[str, Any]] = None


@dataclasses.dataclass
class PerformanceMetrics:
    """One section run's figures, field for field as the original's."""

    name: str
    metadata: Dict[str, Any] = dataclasses.field(default_factory=dict)
    start_time: float = 0.0
    end_time: float = 0.0
    duration: float = 0.0
    total_tokens: int = 0
    throughput_tokens_per_sec: float = 0.0
    gpu_metrics_start: Optional[Dict[str, Any]] = None
    gpu_metrics_end: Optional[Dict[str, Any]] = None
    gpu_utilization: float = 0.0
    memory_metrics_start: Optional[Dict[str, Any]] = None
    memory_metrics_end: Optional[Dict[str, Any]] = None
    memory_delta_mb: float = 0.0
    custom_metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
    backend_data: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The run's entry in the JSON export."""
        return {"name": self.name, "metadata": self.metadata, "duration_sec": self.duration,
                "total_tokens": self.total_tokens,
                "throughput_tokens_per_sec": self.throughput_tokens_per_sec,
                "gpu_utilization": self.gpu_utilization, "memory_delta_mb": self.memory_delta_mb,
                "custom_metrics": self.custom_metrics, "backend_data": self.backend_data}


# -- the original's metric collectors --------------------------------------------------------
def collect_memory_metrics() -> Dict[str, Any]:
    """System memory now, from /proc/meminfo, as psutil.virtual_memory() reports it: total_mb,
    available_mb, used_mb (total - free - buffers - cache) and percent; {} where unreadable."""
    try:
        with open("/proc/meminfo") as f:
            kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in f if ln.split()[1:2]}
    except (OSError, ValueError, IndexError):
        return {}
    total = kb.get("MemTotal", 0)
    if not total:
        return {}
    avail = kb.get("MemAvailable", kb.get("MemFree", 0))
    used = total - kb.get("MemFree", 0) - kb.get("Buffers", 0) - kb.get("Cached", 0) - \
        kb.get("SReclaimable", 0)
    if used < 0:
        used = total - kb.get("MemFree", 0)
    return {"total_mb": total / 1024.0, "available_mb": avail / 1024.0, "used_mb": used / 1024.0,
            "percent": round(100.0 * (total - avail) / total, 1)}


def collect_cpu_metrics() -> Dict[str, Any]:
    """CPU use over 0.1 s (from /proc/stat), the CPU count and the load averages."""
    def ticks():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + (v[4] if len(v) > 4 else 0)

    try:
        t0, i0 = ticks()
        time.sleep(0.1)
        t1, i1 = ticks()
    except (OSError, ValueError, IndexError):
        return {}
    busy = (t1 - t0) - (i1 - i0)
    return {"cpu_percent": round(100.0 * busy / (t1 - t0), 1) if t1 > t0 else 0.0,
            "cpu_count": os.cpu_count(),
            "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None}


def collect_gpu_metrics() -> Dict[str, Any]:
    """The current CUDA device's allocator figures from torch, when the program has torch with
    CUDA ({} otherwise): device, device_name, allocated_mb, reserved_mb, peak_allocated_mb."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available():
            return {}
        d = cuda.current_device()
        st = cuda.memory_stats(d)
        mib = float(1 << 20)
        return {"device": d, "device_name": cuda.get_device_name(d),
                "allocated_mb": st.get("allocated_bytes.all.current", 0) / mib,
                "reserved_mb": st.get("reserved_bytes.all.current", 0) / mib,
                "peak_allocated_mb": st.get("allocated_bytes.all.peak", 0) / mib}
    except (RuntimeError, AttributeError):
        return {}


# -- the original's exporters ------------------------------------------------------------------
class ProfilerExporter(abc.ABC):
    """An exporter (the original's abstract base): export(metrics, output_path) writes
    output_path with its own suffix."""

    @abc.abstractmethod
    def export(self, metrics: List[PerformanceMetrics], output_path: Path) -> None:
        """Writes the metrics to output_path (the exporter gives the suffix)."""


def _totals(metrics):
    duration = sum(m.duration for m in metrics if m.duration)
    tokens = sum(m.total_tokens for m in metrics if m.total_tokens)
    return duration, tokens


class JSONExporter(ProfilerExporter):
    """PATH.json: {"metrics": [each run's to_dict()], "summary": {...}}."""

    def export(self, metrics, output_path):
        duration, tokens = _totals(metrics)
        summary = {} if not metrics else {
            "total_sections": len(metrics), "total_duration_sec": duration,
            "total_tokens": tokens,
            "avg_throughput_tokens_per_sec": tokens / duration if duration > 0 else 0}
        with open(Path(output_path).with_suffix(".json"), "w") as f:
            json.dump({"metrics": [m.to_dict() for m in metrics], "summary": summary}, f,
                      indent=2)


class CSVExporter(ProfilerExporter):
    """PATH.csv: a row per section run, its custom metrics and metadata_KEY columns (nothing
    is written without runs)."""

    def export(self, metrics, output_path):
        if not metrics:
            return
        names = {"name", "duration_sec", "total_tokens", "throughput_tokens_per_sec"}
        for m in metrics:
            names.update(m.custom_metrics)
            names.update("metadata_%s" % k for k in m.metadata)
        with open(Path(output_path).with_suffix(".csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sorted(names))
            w.writeheader()
            for m in metrics:
                row = {"name": m.name, "duration_sec": m.duration, "total_tokens": m.total_tokens,
                       "throughput_tokens_per_sec": m.throughput_tokens_per_sec}
                row.update(m.custom_metrics)
                row.update(("metadata_%s" % k, v) for k, v in m.metadata.items())
                w.writerow(row)


class SummaryExporter(ProfilerExporter):
    """PATH.txt: the original's text summary, also logged at INFO."""

    log = _logger("diffulex_profiler.exporters.summary")

    def export(self, metrics, output_path):
        duration, tokens = _totals(metrics)
        avg = tokens / duration if duration > 0 and tokens > 0 else 0
        out = ["=" * 80, "Diffulex Profiling Summary", "=" * 80, "",
               "Total Sections: %d" % len(metrics), "Total Duration: %.2f seconds" % duration,
               "Total Tokens: %s" % tokens, "Average Throughput: %.2f tokens/sec" % avg, "",
               "-" * 80, "Section Details:", "-" * 80]
        for m in metrics:
            out.append("\nSection: %s" % m.name)
            out.append("  Duration: %.4f seconds" % m.duration)
            if m.total_tokens > 0:
                out.append("  Tokens: %s" % m.total_tokens)
                out.append("  Throughput: %.2f tokens/sec" % m.throughput_tokens_per_sec)
            if m.gpu_utilization != 0:
                out.append("  GPU Utilization: %.2f%%" % m.gpu_utilization)
            if m.memory_delta_mb != 0:
                out.append("  Memory Delta: %.2f MB" % m.memory_delta_mb)
            if m.custom_metrics:
                out.append("  Custom Metrics: %s" % (m.custom_metrics,))
            if m.metadata:
                out.append("  Metadata: %s" % (m.metadata,))
            bd = m.backend_data or {}
            if bd.get("backend") == "viztracer":
                out.append("  VizTracer Output: %s" % bd.get("output_file", "N/A"))
            if bd.get("backend") == "pytorch":
                out.append("  PyTorch Trace: %s" % bd.get("trace_file", "N/A"))
                out.append("  PyTorch Stacks: %s" % bd.get("stacks_file", "N/A"))
                out.append("  PyTorch Top Table: %s" % bd.get("top_table_file", "N/A"))
        out += ["", "=" * 80]
        with open(Path(output_path).with_suffix(".txt"), "w") as f:
            f.write("\n".join(out))
        self.log.info("\n".join(out))


_EXPORTERS = {"json": JSONExporter, "csv": CSVExporter, "summary": SummaryExporter}


# -- backends ------------------------------------------------------------------------------------
class ProfilerBackend(abc.ABC):
    """A backend (the original's abstract base): start(name) begins timing a section, stop()
    ends it and returns the backend's data for it (None when nothing was started); as a context
    manager, leaving the block stops what was started."""

    @abc.abstractmethod
    def start(self, name: str) -> None:
        """Begins a section."""

    @abc.abstractmethod
    def stop(self) -> Optional[Dict[str, Any]]:
        """Ends the section begun last and returns its data."""

    @abc.abstractmethod
    def __enter__(self):
        """The backend itself."""

    @abc.abstractmethod
    def __exit__(self, exc_type, exc_val, exc_tb):
        """Stops a section still begun."""


class _Backend(ProfilerBackend):
    """What sonde's backends share: `with backend:` stops a section still begun on leaving."""

    def _begun(self):
        return self.current_name is not None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self._begun():
            self.stop()


class SimpleTimerBackend(_Backend):
    """Times sections with time.perf_counter: stop() returns {"duration_sec", "name"}.
    start_time and current_name are the section begun last. Sections may nest here (the
    original's second start() forgets the first): stop() ends the innermost."""

    def __init__(self):
        self.start_time: Optional[float] = None
        self.current_name: Optional[str] = None
        self._outer = []  # (name, start) of the sections begun before the current one

    def start(self, name: str) -> None:
        if self.start_time is not None:
            self._outer.append((self.current_name, self.start_time))
        self.current_name = name
        self.start_time = time.perf_counter()

    def stop(self) -> Optional[Dict[str, Any]]:
        if self.start_time is None:
            return None
        out = {"duration_sec": time.perf_counter() - self.start_time, "name": self.current_name}
        self.current_name, self.start_time = self._outer.pop() if self._outer else (None, None)
        return out

    def _begun(self):
        return self.start_time is not None


class _OnSonde(_Backend):
    """A backend that records through a sonde.Profiler: the DiffulexProfiler's (bound when it
    makes the backend), else one of its own from start() to stop(), in a temporary folder."""

    _prof = None
    _own = None  # the folder of a profiler of the backend's own

    def _bind(self, prof):
        self._prof = prof

    def _own_profiler(self, name):
        self._own = tempfile.mkdtemp(prefix="sonde-diffulex-")
        self._prof = sonde.Profiler(dict({"name": "backend", "output_dir": self._own,
                                          "formats": ["trace"]}, **self._keys()))
        self._bind(self._prof)

    def _close_own(self):
        """The trace of a profiler of the backend's own (None when bound)."""
        if self._own is None:
            return None
        self._prof.close()
        return os.path.join(self._own, "backend.trace.json.gz")

    def _drop_own(self):
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = self._prof = None

    def _keys(self):
        return {}


class VizTracerBackend(_OnSonde):
    """VizTracer's place taken by sonde's Python function tracing (VizTracer need not be
    installed): every Python call is a section, and stop() writes the Chrome trace recorded so
    far, uncompressed as VizTracer writes it, at output_file (else viztracer_NAME.json), in
    output_dir when given. kwargs: VizTracer's options (tracer_entries, max_stack_depth,
    include_files, ...); one sonde does not know raises TypeError (also a ValueError)."""

    log = _logger("diffulex_profiler.backends.viztracer")

    def __init__(self, output_file: Optional[str] = None, output_dir: Optional[str] = None,
                 **kwargs):
        self.output_file = output_file
        self.output_dir = output_dir
        self.config = kwargs
        self.current_name: Optional[str] = None
        self._keys()  # an unknown option is refused now

    def _keys(self):
        return _viztracer_keys(self.config)

    def _path(self, name):
        f = self.output_file or "viztracer_%s.json" % name
        return str(Path(self.output_dir) / Path(f).name) if self.output_dir else f

    def start(self, name: str) -> None:
        if self.current_name is not None:
            self.log.warning("VizTracer already started, stopping previous instance")
            self.stop()
        path = self._path(name)
        if self.output_dir:
            Path(self.output_dir).mkdir(parents=True, exist_ok=True)
        self.log.info("VizTracer output file: %s" % path)
        if self._prof is None:
            self._own_profiler(name)
        self.current_name = name

    def stop(self) -> Optional[Dict[str, Any]]:
        if self.current_name is None:
            return None
        path = self._path(self.current_name)
        self.current_name = None
        made = self._close_own()
        try:
            if made is None:  # the DiffulexProfiler's run: its trace so far
                self._prof.export()
                made = os.path.join(self._prof.output_dir, self._prof.name + ".trace.json.gz")
            if os.path.exists(made):
                _unzip_to(made, path)
        finally:
            self._drop_own()
        return {"backend": "viztracer", "output_file": str(path)}


class PyTorchProfilerBackend(_OnSonde):
    """torch.profiler in sonde's hands (sonde.torch.profile_operators): torch's operators are on
    sonde's timeline, and stop() writes the section's window as the original names its files in
    output_dir (default log/profiles): pytorch_trace_NAME.json (Chrome trace),
    pytorch_stacks_NAME.stacks (flame graph input, export_stacks) and pytorch_top_NAME.txt
    (key_averages' table, export_table), and returns them with a summary of the window.
    ImportError without PyTorch, as the original. kwargs: torch.profiler.profile's options
    (record_shapes, profile_memory and with_stack are always on, as the original sets them);
    one sonde does not pass on raises TypeError (also a ValueError)."""

    log = _logger("diffulex_profiler.backends.pytorch")
    _KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops")

    def __init__(self, output_dir: Optional[str] = None, activities: Optional[list] = None, *,
                 export_stacks: bool = True, stacks_metric: str = "self_cuda_time_total",
                 export_table: bool = True, table_sort_by: Optional[str] = None,
                 table_row_limit: int = 50, **kwargs):
        import torch  # ImportError: the caller falls back, as the original's
        self.torch = torch
        self.output_dir = Path(output_dir) if output_dir else Path("log/profiles")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.activities = activities
        self.export_stacks = export_stacks
        self.stacks_metric = stacks_metric
        self.export_table = export_table
        self.table_sort_by = table_sort_by
        self.table_row_limit = table_row_limit
        self.config = kwargs
        self.current_name: Optional[str] = None
        self.tp = None
        unknown = [k for k in kwargs if k not in self._KEYS + ("activities",)]
        if unknown:
            raise UnknownOption("PyTorchProfilerBackend: unknown option %r; sonde knows %s" % (
                unknown[0], ", ".join(("output_dir", "activities") + self._KEYS + (
                    "export_stacks", "stacks_metric", "export_table", "table_sort_by",
                    "table_row_limit"))))

    def _bind(self, prof):
        from sonde import torch as sonde_torch
        self._prof = prof
        kw = {"record_shapes": True, "profile_memory": True, "with_stack": True}
        if self.activities is not None:
            kw["activities"] = self.activities
        if "with_flops" in self.config:
            kw["with_flops"] = self.config["with_flops"]
        self.tp = sonde_torch.profile_operators(prof, keep_last_profile=True, **kw)

    def start(self, name: str) -> None:
        if self.current_name is not None:
            self.log.warning("PyTorch Profiler already started, stopping previous instance")
            self.stop()
        if self._prof is None:
            self._own_profiler(name)
        self.tp.flush()  # what ran before the section is a window of its own
        self.current_name = name

    def stop(self) -> Optional[Dict[str, Any]]:
        if self.current_name is None:
            return None
        name, self.current_name = self.current_name, None
        self.tp.flush()  # the section's window
        tp = self.tp.last_profile
        try:
            return self._write(name, tp)
        finally:
            if self._own is not None:
                self._close_own()
                self._drop_own()
                self.tp = None

    def _write(self, name, tp):
        cuda = self.torch.cuda.is_available()
        trace = self.output_dir / ("pytorch_trace_%s.json" % name)
        stacks = self.output_dir / ("pytorch_stacks_%s.stacks" % name)
        table = self.output_dir / ("pytorch_top_%s.txt" % name)
        out = {"backend": "pytorch", "name": name}
        if tp is None:
            self.log.warning("Failed to export PyTorch trace: no window was recorded")
            trace = stacks = table = None
        else:
            trace = self._try("trace", lambda: tp.export_chrome_trace(str(trace)), trace)
            stacks = None if not self.export_stacks else self._try(
                "stacks", lambda: tp.export_stacks(str(stacks), "self_cpu_time_total" if (
                    not cuda and "cuda" in self.stacks_metric) else self.stacks_metric), stacks)
            if self.export_table:
                sort_by = self.table_sort_by or ("self_cuda_time_total" if cuda
                                                 else "self_cpu_time_total")
                table = self._try("top table", lambda: table.write_text(
                    tp.key_averages().table(sort_by=sort_by,
                                            row_limit=int(self.table_row_limit)),
                    encoding="utf-8"), table)
            else:
                table = None
            ev = tp.key_averages()
            out["summary"] = {
                "total_events": len(ev),
                "cpu_time_total_ms": sum(e.cpu_time_total for e in ev) / 1000,
                "cuda_time_total_ms": (sum(_cuda_total(e) for e in ev) / 1000 if cuda
                                       else 0)}
        out.update(trace_file=str(trace) if trace else None,
                   stacks_file=str(stacks) if stacks else None,
                   top_table_file=str(table) if table else None)
        return out

    def _try(self, what, write, path):
        try:
            write()
            return path
        except Exception as e:  # the original warns and goes on
            self.log.warning("Failed to export PyTorch %s: %s" % (what, e))
            return None


class DiffulexProfiler:
    """Diffulex's profiler (see the module's documentation). metrics: the section runs ended,
    in the order they ended; current_metrics: the innermost section open; profiler: the
    sonde.Profiler underneath (None when disabled)."""

    def __init__(self, config: Optional[ProfilerConfig] = None):
        self.config = config or ProfilerConfig()
        self.metrics: List[PerformanceMetrics] = []
        self.current_metrics: Optional[PerformanceMetrics] = None
        self.backend = None
        self.exporters: List[ProfilerExporter] = []
        self.profiler = None
        self._open = []  # the PerformanceMetrics open, outermost first
        self._cleared = 0  # how many of them (the outermost) clear() dropped
        c = self.config
        if not c.enabled:
            return
        self.backend = self._make_backend(c)
        for fmt in c.export_formats:
            if fmt in _EXPORTERS:
                self.exporters.append(_EXPORTERS[fmt]())
            else:
                logger.warning("Unknown export format '%s', skipping" % fmt)
        Path(c.output_dir).mkdir(parents=True, exist_ok=True)
        name = os.path.splitext(os.path.basename(c.output_file))[0] if c.output_file else "diffulex"
        self.profiler = sonde.Profiler(dict({
            "name": name, "output_dir": c.output_dir, "formats": ["trace", "html"],
            "collect_gpu": c.collect_gpu_metrics, "collect_memory": c.collect_memory_metrics,
            "unit": "tokens"}, **(self.backend._keys() if isinstance(self.backend, _OnSonde)
                                  else {})))
        if isinstance(self.backend, _OnSonde):
            try:
                self.backend._bind(self.profiler)
            except BaseException:  # nothing left recording
                self.profiler.close(raise_on_error=False)
                raise

    @staticmethod
    def _make_backend(c):
        """The configured backend, as the original picks it (its options checked now; the
        output_dir is ProfilerConfig's unless the backend's options give one)."""
        if c.backend == "viztracer":
            vc = c.viztracer_config or {}
            vc.setdefault("output_dir", c.output_dir)  # into the caller's dict, as the original
            return VizTracerBackend(**vc)
        if c.backend == "pytorch":
            pc = c.pytorch_profiler_config or {}
            pc.setdefault("output_dir", c.output_dir)
            try:
                return PyTorchProfilerBackend(**pc)
            except ImportError:
                logger.warning("PyTorch Profiler not available, falling back to simple timer")
        elif c.backend != "simple":
            logger.warning("Unknown backend '%s', using simple timer" % c.backend)
        return SimpleTimerBackend()

    # -- sections ---------------------------------------------------------------------------
    def profile(self, name: str, metadata: Optional[Dict[str, Any]] = None):
        """A section as a context manager (the block's exception still ends it)."""
        return _Scope(self, name, metadata)

    def start(self, name: str, metadata: Optional[Dict[str, Any]] = None):
        """Opens a section; stop() closes the innermost one."""
        if not self.config.enabled:
            return
        m = PerformanceMetrics(name=name, metadata=metadata or {})
        self.profiler.start(name)
        for k, v in m.metadata.items():
            self.profiler.add_metadata(k, sonde.json_text(v))
        self.backend.start(name)
        if self.config.collect_gpu_metrics:
            m.gpu_metrics_start = self._gpu()
        if self.config.collect_memory_metrics:
            m.memory_metrics_start = collect_memory_metrics()
        if self.config.collect_timing:
            m.start_time = time.perf_counter()
        self._open.append(m)
        self.current_metrics = m

    def stop(self):
        """Closes the innermost open section (none: nothing, as the original)."""
        if not self.config.enabled or not self._open:
            return
        m = self._open.pop()
        if len(self._open) < self._cleared:  # clear() dropped it: its ends are closed only
            self._cleared = len(self._open)
            self.profiler.stop()
            self.backend.stop()
            return
        if self.config.collect_timing:
            m.end_time = time.perf_counter()
            m.duration = m.end_time - m.start_time
        self.profiler.stop()
        if m.total_tokens and not m.throughput_tokens_per_sec and m.duration > 0:
            m.throughput_tokens_per_sec = m.total_tokens / m.duration  # recorded inside
        data = self.backend.stop()
        if data:
            m.backend_data = data
        if self.config.collect_gpu_metrics and m.gpu_metrics_start:
            m.gpu_metrics_end = self._gpu()
            m.gpu_utilization = (m.gpu_metrics_end.get("utilization", 0) -
                                 m.gpu_metrics_start.get("utilization", 0))
        if self.config.collect_memory_metrics:
            m.memory_metrics_end = collect_memory_metrics()
            if m.memory_metrics_start and m.memory_metrics_end:
                m.memory_delta_mb = (m.memory_metrics_end.get("used_mb", 0) -
                                     m.memory_metrics_start.get("used_mb", 0))
        self.metrics.append(m)
        self.current_metrics = self._open[-1] if len(self._open) > self._cleared else None

    def _gpu(self):
        """The GPU figures at a section's edge: torch's allocator (collect_gpu_metrics) and the
        utilization sonde's sampler last read from NVML for that device."""
        g = collect_gpu_metrics()
        if g:
            u = self.profiler.get_current_metrics().get("gpu%d util %%" % g["device"])
            if u is not None:
                g["utilization"] = u
        return g

    # -- measurements -----------------------------------------------------------------------
    def record_metric(self, name: str, value: Any):
        """A custom metric of the open section (none open: nothing). Numbers are also sonde
        metrics (count, mean, min, max), other values the section's metadata in sonde."""
        if not self.config.enabled or self.current_metrics is None:
            return
        self.current_metrics.custom_metrics[name] = value
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            self.profiler.record_metric(name, float(value))
        else:
            self.profiler.add_metadata(name, sonde.json_text(value))

    def record_throughput(self, tokens: Optional[int] = None, duration: Optional[float] = None,
                          *, total_tokens: Optional[int] = None):
        """Tokens processed by the open section, over duration seconds, or (None) over the
        section's own time when it ends (the original records nothing then); a duration of 0
        or less records nothing, as the original. total_tokens= is the same as tokens (the
        document's spelling)."""
        n = total_tokens if tokens is None else tokens
        if n is None:
            raise TypeError("record_throughput() needs tokens (or total_tokens=)")
        m = self.current_metrics
        if not self.config.enabled or m is None:
            return
        if duration is not None and not duration > 0:
            return  # the original records nothing over no time
        m.total_tokens = n  # without a duration: the rate is computed when the section ends
        m.throughput_tokens_per_sec = n / duration if duration else 0.0
        self.profiler.record_throughput(n, duration)

    # -- results ----------------------------------------------------------------------------
    def export(self, output_path: Optional[str] = None):
        """Writes one file per export_formats entry with output_path's stem (the extension is
        each format's); output_path None: output_dir/output_file, else
        output_dir/profile_YYYYmmdd_HHMMSS. sonde's trace and HTML report are written too."""
        if not self.config.enabled or not self.metrics:
            logger.warning("No metrics to export")
            return
        if output_path is None:
            c = self.config
            output_path = str(Path(c.output_dir) / (c.output_file or "profile_%s" % time.strftime(
                "%Y%m%d_%H%M%S")))
        output_path = Path(output_path)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        for e in self.exporters:
            try:
                e.export(self.metrics, output_path)
            except Exception as err:  # the original logs and goes on to the next format
                logger.error("Failed to export using %s: %s" % (type(e).__name__, err))
        self.profiler.export()

    def get_summary(self) -> Dict[str, Any]:
        """The original's summary: {} before any section ended, else total_sections,
        total_duration_sec, total_tokens, avg_throughput_tokens_per_sec and sections (one dict
        per run: name, duration_sec, throughput_tokens_per_sec, total_tokens)."""
        if not self.metrics:
            return {}
        duration, tokens = _totals(self.metrics)
        return {
            "total_sections": len(self.metrics), "total_duration_sec": duration,
            "total_tokens": tokens,
            "avg_throughput_tokens_per_sec": (tokens / duration if duration > 0 and tokens > 0
                                              else 0),
            "sections": [{"name": m.name, "duration_sec": m.duration,
                          "throughput_tokens_per_sec": m.throughput_tokens_per_sec,
                          "total_tokens": m.total_tokens} for m in self.metrics]}

    def clear(self):
        """Forgets the section runs collected so far, and, as the original, the sections open
        now: they never land in metrics (sonde's recording, and its files, keep the whole
        run)."""
        self.metrics.clear()
        self.current_metrics = None
        self._cleared = len(self._open)


class _Scope:
    __slots__ = ("_d", "_name", "_meta")

    def __init__(self, d, name, meta):
        self._d, self._name, self._meta = d, name, meta

    def __enter__(self):  # binds None, as the original's generator yields nothing
        self._d.start(self._name, self._meta)

    def __exit__(self, et, ev, tb):
        self._d.stop()
        return False
