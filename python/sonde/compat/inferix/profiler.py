"""sonde.compat.inferix.profiler - Inferix's InferixProfiler and ProfilingSession
(inferix.profiling.profiler) over one sonde.Profiler.

As the original: start_session / end_session (one session at a time: starting one ends the one
under way, with a warning line), stage() timing into the session's stage_timings, add_event
and the streaming, dropped-frame, layer, memory and cache recorders, the diffusion records
through diffusion_analyzer, get_current_metrics() from the GPU and CPU monitors' latest
snapshots, the live display's lines every display_interval seconds, and when a session ends its
reports (ProfilingReporter) and the lines "Profiling session 'ID' started", "Profiling report
generated: PATHS", "Profiling session 'ID' ended (duration: S.SSs)". Disabled (the original's
default), every call is a no-op.

What sonde adds: every session is a sonde session, every stage a sonde section, every event a
sonde event, every diffusion record sonde's own (one timeline in OUTPUT_DIR/NAME.trace.json.gz
and NAME.sonde, which every `sonde` command reads); the monitors are sonde's sampler; session()
is a context manager around start/end_session; profile_function also takes a stage name
("@profiler.profile_function('name')"); a stage outside a session is still a sonde section."""

import contextlib
import dataclasses
import os
import threading
import time
from typing import Any, Dict, List, Optional

import sonde
from sonde.compat import ActiveStack

from .config import ProfilingConfig
from .diffusion_analyzer import DiffusionAnalyzer
from .monitors import CPUMonitor, GPUMonitor
from .reporter import ProfilingReporter

__all__ = ["InferixProfiler", "ProfilingSession", "current_profiler"]

_active = ActiveStack()


def current_profiler():
    """The InferixProfiler whose session the calling thread is in, or None."""
    return _active.top()


def _fresh_cache():
    return {"hits": 0, "misses": 0, "evictions": 0, "total_requests": 0}


@dataclasses.dataclass
class ProfilingSession:
    """One session: its times (time.time()), tags, events and the figures recorded in it."""

    session_id: str
    start_time: float
    end_time: Optional[float] = None
    tags: Dict[str, Any] = dataclasses.field(default_factory=dict)
    custom_events: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    stage_timings: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    streaming_events: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    dropped_frames: int = 0
    layer_timings: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    memory_events: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    cache_stats: Dict[str, int] = dataclasses.field(default_factory=_fresh_cache)

    @property
    def duration(self) -> Optional[float]:
        return self.end_time - self.start_time if self.end_time is not None else None

    @property
    def is_active(self) -> bool:
        return self.end_time is None


class InferixProfiler:
    """Inferix's profiler (see the module's documentation). config: a ProfilingConfig (sonde
    also takes a dict of its keys or a YAML file's path); name: sonde's run name, the stem of
    NAME.sonde and NAME.trace.json.gz in the reports' directory."""

    def __init__(self, config=None, name="inferix"):
        if isinstance(config, dict):
            config = ProfilingConfig.from_dict(config)
        elif isinstance(config, (str, bytes, os.PathLike)):
            config = ProfilingConfig.from_yaml(config)
        self.config = c = config or ProfilingConfig()
        self.gpu_monitor = None
        self.cpu_monitor = None
        self.reporter = None
        self.current_session: Optional[ProfilingSession] = None
        self.sessions: Dict[str, ProfilingSession] = {}
        self._display_thread = None
        self._display_stop_event = threading.Event()
        self._last_display_time = 0.0
        self._stage_stack: List[Dict[str, Any]] = []
        self._streaming_events: List[Dict[str, Any]] = []
        self._dropped_frames = 0
        self._layer_timings: Dict[str, List[float]] = {}
        self._memory_events: List[Dict[str, Any]] = []
        self._cache_stats = _fresh_cache()
        self._sonde_session = None
        self.diffusion_analyzer = DiffusionAnalyzer(self) if c.enabled else None
        gpu = (c.monitor_gpu_memory or c.monitor_gpu_utilization or c.monitor_gpu_temperature or
               c.monitor_gpu_power)
        cpu = c.monitor_cpu_usage or c.monitor_system_memory
        self.profiler = sonde.Profiler({
            "enabled": c.enabled, "name": name, "output_dir": c.reports_dir,
            "formats": ["trace"], "collect_gpu": gpu, "gpu_interval_s": c.gpu_monitor_interval,
            "monitor_gpu_temperature": c.monitor_gpu_temperature,
            "monitor_gpu_power": c.monitor_gpu_power, "collect_cpu": cpu, "collect_memory": cpu,
            "cpu_interval_s": c.cpu_monitor_interval,
            "max_data_points": min(10000000, max(10, int(c.max_data_points))), "unit": "frames"})
        if c.enabled:
            live = self.profiler.get_current_metrics
            if gpu:
                self.gpu_monitor = GPUMonitor(c.gpu_monitor_interval, c.max_data_points,
                                              source=live)
            if cpu:
                self.cpu_monitor = CPUMonitor(c.cpu_monitor_interval, c.max_data_points,
                                              source=live)
            self.reporter = ProfilingReporter(c)

    @property
    def enabled(self):
        return bool(self.config.enabled)

    # -- sessions -----------------------------------------------------------------------------
    def start_session(self, session_id, tags=None):
        """Starts session session_id (ending the one under way); returns session_id."""
        if not self.config.enabled:
            return session_id
        if self.current_session is not None:
            print("Warning: Starting new session '%s' while session '%s' is still active"
                  % (session_id, self.current_session.session_id))
            self.end_session()
        t = dict(self.config.session_tags)
        t.update(tags or {})
        s = ProfilingSession(session_id=session_id, start_time=time.time(), tags=t)
        meta = {k: sonde.json_text(v) for k, v in t.items()}
        sess = self.profiler.session(session_id, meta)
        sess.__enter__()  # first: a session that cannot start leaves nothing to report
        self._sonde_session = sess
        self.current_session = self.sessions[session_id] = s
        _active.push(self)
        for m in (self.gpu_monitor, self.cpu_monitor):
            if m:
                m.start_monitoring()
        if self.config.real_time_display:
            self._start_real_time_display()
        print("Profiling session '%s' started" % session_id)
        return session_id

    def end_session(self):
        """Ends the session under way, writes its reports; returns its id (None: none)."""
        s = self.current_session
        if not self.config.enabled or s is None:
            return None
        s.end_time = time.time()
        s.streaming_events = list(self._streaming_events)
        s.dropped_frames = self._dropped_frames
        s.layer_timings = {k: list(v) for k, v in self._layer_timings.items()}
        s.memory_events = list(self._memory_events)
        s.cache_stats = dict(self._cache_stats)
        for m in (self.gpu_monitor, self.cpu_monitor):
            if m:
                m.stop_monitoring()
        self._stop_real_time_display()
        sess, self._sonde_session = self._sonde_session, None
        _active.remove(self)
        if sess is not None:
            sess.__exit__(None, None, None)
        if self.config.generate_final_report and self.reporter:
            path = self.reporter.generate_report(
                s, self.gpu_monitor.get_all_data() if self.gpu_monitor else [],
                self.cpu_monitor.get_all_data() if self.cpu_monitor else [])
            if path:
                print("Profiling report generated: %s" % path)
        print("Profiling session '%s' ended (duration: %.2fs)" % (s.session_id, s.duration))
        self._streaming_events.clear()
        self._dropped_frames = 0
        self._layer_timings.clear()
        self._memory_events.clear()
        self._cache_stats = _fresh_cache()
        self.current_session = None
        return s.session_id

    @contextlib.contextmanager
    def session(self, session_id, tags=None):
        """start_session / end_session around a block; yields the session's id."""
        sid = self.start_session(session_id, tags)
        try:
            yield sid
        finally:
            self.end_session()

    # -- stages and events ------------------------------------------------------------------------
    @contextlib.contextmanager
    def stage(self, stage_name, metadata=None):
        """A stage: its time goes into the session's stage_timings (total, calls, min, max,
        each call's metadata), and it is a sonde section (metadata values of any JSON-able
        type)."""
        if not self.config.enabled:
            yield
            return
        meta = {k: sonde.json_text(v) for k, v in metadata.items()} if metadata else None
        session = self.current_session
        info = {"name": stage_name, "start_time": time.time(), "metadata": metadata or {}}
        if session is not None:
            self._stage_stack.append(info)
        with self.profiler.stage(stage_name, meta):
            try:
                yield
            finally:
                if session is not None and self._stage_stack:
                    info = self._stage_stack.pop()
                    d = time.time() - info["start_time"]
                    t = session.stage_timings.setdefault(stage_name, {
                        "total_time": 0.0, "call_count": 0, "min_time": float("inf"),
                        "max_time": 0.0, "metadata": []})
                    t["total_time"] += d
                    t["call_count"] += 1
                    t["min_time"] = min(t["min_time"], d)
                    t["max_time"] = max(t["max_time"], d)
                    t["metadata"].append(info["metadata"])

    def profile_function(self, func=None, stage_name=None, metadata=None):
        """func wrapped so that each call is a stage (stage_name, else func's name). Also a
        decorator factory: @profiler.profile_function("name") or
        @profiler.profile_function(stage_name="name")."""
        if func is None or isinstance(func, str):
            name = func if isinstance(func, str) else stage_name
            return lambda f: self.profile_function(f, name, metadata)
        name = stage_name or func.__name__

        def wrapper(*args, **kwargs):
            with self.stage(name, metadata):
                return func(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = func.__name__, func.__doc__
        wrapper.__wrapped__ = func
        return wrapper

    def add_event(self, event_name, data=None):
        """An event of the session under way (none: nothing), with its data as given."""
        if not self.config.enabled or self.current_session is None:
            return
        d = data or {}
        self.current_session.custom_events.append({"name": event_name,
                                                   "timestamp": time.time(), "data": d})
        self.profiler.event(event_name, d if isinstance(d, dict) else {"data": d})

    def record_streaming_event(self, batch_size, encoding_time_ms, network_latency_ms=0.0,
                               buffer_occupancy=0.0):
        """A batch of frames streamed (in a session)."""
        if not self.config.enabled or self.current_session is None:
            return
        self._streaming_events.append({
            "timestamp": time.time(), "batch_size": batch_size,
            "encoding_time_ms": encoding_time_ms, "network_latency_ms": network_latency_ms,
            "buffer_occupancy": buffer_occupancy})
        self.profiler.counter("streamed frames", float(batch_size))

    def record_dropped_frames(self, count=1):
        """Frames dropped while streaming."""
        if not self.config.enabled:
            return
        self._dropped_frames += count
        self.profiler.counter("dropped frames", float(self._dropped_frames))

    def start_layer_computation(self, layer_name):
        """The time a layer's computation starts (pass it to end_layer_computation)."""
        return time.time()

    def end_layer_computation(self, layer_name, start_time, parameters_count=None):
        """Records the layer's time since start_time; returns it in milliseconds."""
        ms = (time.time() - start_time) * 1000
        if not self.config.enabled:
            return ms
        self._layer_timings.setdefault(layer_name, []).append(ms)
        self.add_event("layer_computation", {"layer_name": layer_name,
                                             "computation_time_ms": ms,
                                             "parameters_count": parameters_count})
        return ms

    def record_memory_event(self, event_type, size_bytes, allocator="unknown", context=""):
        """An allocation ("alloc"), a release ("dealloc") or another memory event."""
        if not self.config.enabled:
            return
        self._memory_events.append({"timestamp": time.time(), "event_type": event_type,
                                    "size_bytes": size_bytes, "allocator": allocator,
                                    "context": context})

    def record_cache_event(self, event_type, cache_size, requested_size=0, evicted_size=0):
        """A cache "hits", "misses" or "evictions" event."""
        if not self.config.enabled:
            return
        if event_type in self._cache_stats:
            self._cache_stats[event_type] += 1
        self._cache_stats["total_requests"] += 1
        self.add_event("cache_event", {"event_type": event_type, "cache_size": cache_size,
                                       "requested_size": requested_size,
                                       "evicted_size": evicted_size})

    # -- diffusion records ------------------------------------------------------------------------
    def record_diffusion_step(self, step, timestep, block_size, computation_time_ms,
                              guidance_scale=None):
        """One diffusion step (profile_diffusion_steps)."""
        if self.diffusion_analyzer is not None:
            self.diffusion_analyzer.record_diffusion_step(step, timestep, block_size,
                                                          computation_time_ms, guidance_scale)

    def record_model_parameters(self, model_name, parameters_count, model_type):
        """A model's parameter count and type (profile_model_parameters)."""
        if self.diffusion_analyzer is not None:
            self.diffusion_analyzer.record_model_parameters(model_name, parameters_count,
                                                            model_type)

    def record_block_computation(self, block_index, block_size, computation_time_ms,
                                 memory_usage_mb):
        """One block of frames (profile_block_computation)."""
        if self.diffusion_analyzer is not None:
            self.diffusion_analyzer.record_block_computation(block_index, block_size,
                                                             computation_time_ms,
                                                             memory_usage_mb)

    # -- live figures -------------------------------------------------------------------------------
    def get_current_metrics(self):
        """{} when disabled, else timestamp, and "gpu" / "cpu": the monitors' latest
        snapshots (taken while a session runs), under the original's keys."""
        if not self.config.enabled:
            return {}
        out = {"timestamp": time.time()}
        for key, m in (("gpu", self.gpu_monitor), ("cpu", self.cpu_monitor)):
            snap = m.get_latest_metrics() if m else None
            if snap:
                out[key] = snap.metrics
        return out

    def _start_real_time_display(self):
        if self._display_thread is not None:
            return
        self._display_stop_event.clear()
        self._display_thread = threading.Thread(target=self._real_time_display_loop,
                                                daemon=True, name="inferix-display")
        self._display_thread.start()

    def _stop_real_time_display(self):
        t, self._display_thread = self._display_thread, None
        if t is not None:
            self._display_stop_event.set()
            t.join(timeout=self.config.display_interval + 1.0)

    def _real_time_display_loop(self):
        while not self._display_stop_event.is_set():
            now = time.time()
            if now - self._last_display_time >= self.config.display_interval:
                self._display_current_metrics()
                self._last_display_time = now
            self._display_stop_event.wait(min(1.0, self.config.display_interval))

    def _display_current_metrics(self):
        m = self.get_current_metrics()
        if m:
            print(format_metrics(m, self.current_session.session_id if self.current_session
                                 else None))

    # -- lifetime -------------------------------------------------------------------------------
    def cleanup(self):
        """Ends the session under way and stops the monitors, as the original; the profiler
        stays usable (a pipeline cleans up after each request and starts the next session on
        the same profiler). sonde's trace of the run so far is written now; the run's files
        are completed when the program ends, or by close()."""
        if self.current_session:
            self.end_session()
        for m in (self.gpu_monitor, self.cpu_monitor):
            if m:
                m.stop_monitoring()
        if self.config.enabled and self.profiler._handle is not None:
            self.profiler.export()

    def close(self):
        """cleanup(), then sonde's recording ends for good (its files written); what sonde
        adds: the original has no end."""
        self.cleanup()
        self.profiler.close(raise_on_error=False)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.cleanup()


def format_metrics(m, session_id=None):
    """The live display's lines, as the original prints them (a blank line first)."""
    lines = ["\n=== Profiling Metrics (%s) ===" % (session_id or "No Session")]
    g = m.get("gpu")
    if g is not None:
        used, total = g.get("total_gpu_memory_used_mb", 0), g.get("total_gpu_memory_total_mb", 0)
        lines.append("GPU: Memory %.0fMB / %.0fMB (%.1f%%), Util %.1f%%, Temp %.1f°C" % (
            used, total, used / max(total, 1) * 100, g.get("max_gpu_utilization", 0),
            g.get("max_gpu_temperature", 0)))
    c = m.get("cpu")
    if c is not None:
        lines.append("CPU: %.1f%%, Memory %.0fMB / %.0fMB (%.1f%%)" % (
            c.get("cpu_usage_percent", 0), c.get("memory_used_mb", 0),
            c.get("memory_total_mb", 0), c.get("memory_usage_percent", 0)))
    return "\n".join(lines)
