"""sonde.compat.inferix.monitors - Inferix's GPUMonitor and CPUMonitor (inferix.profiling
.monitors) over sonde's sampler.

The figures are read by libsonde's sampler thread (NVML for the GPUs, /proc for the CPU and
memory); a monitor's own thread copies the latest of them every `interval` seconds into a
MetricSnapshot under the original's keys (gpu_devices, total_gpu_memory_used_mb,
max_gpu_utilization, ...; cpu_usage_percent, memory_used_mb, ...), keeping at most
max_data_points, as the original's deque does. A monitor made alone (not by an
InferixProfiler) runs a sonde profiler of its own that writes no file."""

import abc
import collections
import dataclasses
import glob
import os
import re
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

import sonde

__all__ = ["MetricSnapshot", "BaseMonitor", "GPUMonitor", "CPUMonitor", "gpu_metrics",
           "cpu_metrics"]

_GPU = re.compile(r"gpu(\d+) (.+)$")


@dataclasses.dataclass
class MetricSnapshot:
    """The figures of one moment (timestamp: time.time())."""

    timestamp: float
    metrics: Dict[str, Any]

    def __post_init__(self):
        if not self.timestamp:
            self.timestamp = time.time()


def gpu_metrics(live, device_ids=None):
    """The original's GPU figures from sonde's live query: per device gpu_N (memory_used_mb,
    memory_total_mb, memory_free_mb, memory_utilization_percent, utilization_percent,
    memory_util_percent, temperature_celsius, power_watts, graphics_clock_mhz,
    memory_clock_mhz; a figure NVML did not give is left out) and the totals
    total_gpu_memory_used_mb, total_gpu_memory_total_mb, max_gpu_utilization,
    max_gpu_temperature, total_gpu_power_watts. memory_used_mb and memory_total_mb repeat the
    totals (the document's spelling)."""
    devs = {}
    for k, v in live.items():
        m = _GPU.match(k)
        if m and (device_ids is None or int(m.group(1)) in device_ids):
            devs.setdefault(int(m.group(1)), {})[m.group(2)] = v
    out = {"gpu_devices": {}, "total_gpu_memory_used_mb": 0, "total_gpu_memory_total_mb": 0,
           "max_gpu_utilization": 0, "max_gpu_temperature": 0, "total_gpu_power_watts": 0}
    for i in sorted(devs):
        g = devs[i]
        d = {"device_id": i}
        used, total = g.get("memory MiB"), g.get("memory total MiB")
        if used is not None:
            d["memory_used_mb"] = int(used)
            out["total_gpu_memory_used_mb"] += int(used)
        if total is not None:
            d["memory_total_mb"] = int(total)
            out["total_gpu_memory_total_mb"] += int(total)
            if used is not None:
                d["memory_free_mb"] = int(total) - int(used)
                d["memory_utilization_percent"] = 100.0 * used / total if total else 0.0
        for src, key in (("util %", "utilization_percent"), ("memory util %", "memory_util_percent"),
                         ("temperature C", "temperature_celsius"), ("power W", "power_watts"),
                         ("sm clock MHz", "graphics_clock_mhz"),
                         ("memory clock MHz", "memory_clock_mhz")):
            if g.get(src) is not None:
                d[key] = g[src]
        if "utilization_percent" in d:
            out["max_gpu_utilization"] = max(out["max_gpu_utilization"], d["utilization_percent"])
        if "temperature_celsius" in d:
            out["max_gpu_temperature"] = max(out["max_gpu_temperature"],
                                             d["temperature_celsius"])
        if "power_watts" in d:
            out["total_gpu_power_watts"] += d["power_watts"]
        out["gpu_devices"]["gpu_%d" % i] = d
    out["memory_used_mb"] = out["total_gpu_memory_used_mb"]
    out["memory_total_mb"] = out["total_gpu_memory_total_mb"]
    return out


def _read_number(path):
    try:
        with open(path) as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_freq_mhz(proc="/proc", cpu_dir="/sys/devices/system/cpu"):
    """(current, max) CPU frequency in MHz, averaged over the CPUs, as psutil.cpu_freq() reads
    them on Linux (the original's source): each CPU's cpufreq policy (its current frequency
    from /proc/cpuinfo when that lists as many CPUs, else scaling_cur_freq or
    cpuinfo_cur_freq; the max from scaling_max_freq); without cpufreq, /proc/cpuinfo's
    "cpu MHz" lines and a max of 0.0. None where neither says (the original's keys are then
    absent)."""
    info = []
    try:
        with open(os.path.join(proc, "cpuinfo")) as f:
            info = [float(ln.split(":", 1)[1]) for ln in f if ln.lower().startswith("cpu mhz")]
    except (OSError, ValueError, IndexError):
        info = []
    pols = glob.glob(os.path.join(cpu_dir, "cpufreq", "policy[0-9]*")) or \
        glob.glob(os.path.join(cpu_dir, "cpu[0-9]*", "cpufreq"))
    if not pols:
        return (sum(info) / len(info), 0.0) if info else None
    pols.sort(key=lambda p: int(re.search(r"(\d+)(?:/cpufreq)?$", p).group(1)))
    cur, top = [], []
    for i, p in enumerate(pols):
        c = info[i] * 1000 if len(info) == len(pols) else (
            _read_number(os.path.join(p, "scaling_cur_freq")) or
            _read_number(os.path.join(p, "cpuinfo_cur_freq")))
        m = _read_number(os.path.join(p, "scaling_max_freq"))
        if c is None or m is None:
            return None  # psutil raises here; the original then leaves the keys out
        cur.append(c / 1000)
        top.append(m / 1000)
    return sum(cur) / len(cur), sum(top) / len(top)


def cpu_metrics(live, freq=cpu_freq_mhz):
    """The original's CPU figures from sonde's live query: cpu_usage_percent,
    cpu_per_core_percent, cpu_core_count (0.0 for each CPU before a first reading, as psutil's
    first call), memory_total_mb, memory_used_mb, memory_available_mb,
    memory_usage_percent, load_average_1min/5min/15min (those sampled), and
    cpu_freq_current_mhz, cpu_freq_max_mhz where the machine reports a frequency (read now,
    by freq())."""
    out = {}
    # Before the sampler's second reading there is no use over an interval yet: 0.0, as
    # psutil's first cpu_percent(interval=None) gives the original (a figure to ignore)
    out["cpu_usage_percent"] = live.get("cpu %", 0.0)
    cores = sorted((int(k[3:-2]), v) for k, v in live.items() if re.fullmatch(r"cpu\d+ %", k))
    per_core = [v for _, v in cores] or [0.0] * (os.cpu_count() or 1)
    out["cpu_per_core_percent"] = per_core
    out["cpu_core_count"] = len(per_core)
    total, used = live.get("memory total MiB"), live.get("memory used MiB")
    if total is not None:
        out["memory_total_mb"] = int(total)
    if used is not None:
        out["memory_used_mb"] = int(used)
    if live.get("memory available MiB") is not None:
        out["memory_available_mb"] = int(live["memory available MiB"])
    if total and used is not None:
        out["memory_usage_percent"] = round(100.0 * used / total, 1)
    f = freq()
    if f is not None:
        out["cpu_freq_current_mhz"], out["cpu_freq_max_mhz"] = f
    for n in ("1", "5", "15"):
        if live.get("load %sm" % n) is not None:
            out["load_average_%smin" % n] = live["load %sm" % n]
    return out


class BaseMonitor(abc.ABC):
    """A monitor (abstract, as the original's: a subclass gives collect_metrics):
    start_monitoring() starts its thread, which takes a snapshot every interval seconds;
    stop_monitoring() stops it. source: a function returning sonde's live figures (None: a
    sonde profiler of the monitor's own, made at the first start)."""

    _keys = {}
    _first_keys = ()  # the sampler's figures the first snapshot waits for

    def __init__(self, interval=1.0, max_data_points=10000, source=None):
        self.interval = interval
        self.max_data_points = max_data_points
        self.data_points = collections.deque(maxlen=max_data_points)
        self.is_monitoring = False
        self.monitor_thread = None
        self._stop_event = threading.Event()
        self._source = source
        self._own = None

    @abc.abstractmethod
    def collect_metrics(self):
        """The figures now, under the original's keys."""

    def _live(self):
        if self._source is not None:
            return self._source()
        return self._own.get_current_metrics() if self._own is not None else {}

    def start_monitoring(self):
        if self.is_monitoring:
            return
        if self._source is None and self._own is None:
            self._own = sonde.Profiler(dict(self._keys, name=type(self).__name__, formats=[],
                                            output_dir=tempfile.gettempdir(), enabled=True,
                                            max_data_points=max(10, int(self.max_data_points))),
                                       from_env=False)
        self.is_monitoring = True
        self._stop_event.clear()
        self._first_snapshot()
        self.monitor_thread = threading.Thread(target=self._monitor_loop, daemon=True,
                                               name="inferix-" + type(self).__name__)
        self.monitor_thread.start()

    def stop_monitoring(self):
        if not self.is_monitoring:
            return
        self._stop_event.set()
        self.is_monitoring = False
        if self.monitor_thread:
            self.monitor_thread.join(timeout=self.interval * 2 + 1)
        if self._own is not None:
            own, self._own = self._own, None
            if own.file_path:
                own.close(raise_on_error=False)
                if os.path.exists(own.file_path):
                    os.unlink(own.file_path)  # the figures are in the snapshots

    def _snapshot(self):
        """Appends the figures now; False (said on stdout) when they cannot be read."""
        try:
            self.data_points.append(MetricSnapshot(time.time(), self.collect_metrics()))
            return True
        except (sonde.SondeError, ValueError) as e:  # closed under it
            print("Error collecting metrics in %s: %s" % (type(self).__name__, e))
            return False

    def _first_snapshot(self):
        """The snapshot start_monitoring() takes before it returns, as the original's thread
        takes one at once (psutil's figures are there at once): it waits, up to a second, for
        the sampler's first round, which a profiler made a moment ago has not published yet.
        Every monitoring period has it, and a live display started after sees it."""
        ready_by = time.monotonic() + 1.0
        while time.monotonic() < ready_by and not all(k in self._live()
                                                      for k in self._first_keys):
            time.sleep(0.005)
        return self._snapshot()

    def _monitor_loop(self):
        while not self._stop_event.wait(self.interval):
            if not self._snapshot():
                return

    def get_latest_metrics(self) -> Optional[MetricSnapshot]:
        return self.data_points[-1] if self.data_points else None

    def get_all_data(self) -> List[MetricSnapshot]:
        return list(self.data_points)

    def clear_data(self):
        self.data_points.clear()


class GPUMonitor(BaseMonitor):
    """The GPUs' memory, utilization, temperature, power and clocks (NVML, through sonde's
    sampler), every interval seconds; device_ids: the GPUs to follow (None or []: all)."""

    _keys = {"collect_gpu": True, "collect_cpu": False, "collect_memory": False}

    def __init__(self, interval=0.5, max_data_points=10000, device_ids=None, source=None):
        super().__init__(interval, max_data_points, source)
        self.device_ids = list(device_ids or [])
        self._keys = dict(self._keys, gpu_interval_s=max(0.01, interval))
        if self.device_ids:
            self._keys["gpu_devices"] = ",".join(str(int(d)) for d in self.device_ids)

    def collect_metrics(self):
        return gpu_metrics(self._live(), set(self.device_ids) or None)


class CPUMonitor(BaseMonitor):
    """CPU use, system memory and load (/proc, through sonde's sampler) every interval
    seconds."""

    _keys = {"collect_gpu": False, "collect_cpu": True, "collect_memory": True}
    _first_keys = ("memory used MiB", "memory available MiB", "load 1m")

    def __init__(self, interval=1.0, max_data_points=10000, source=None):
        super().__init__(interval, max_data_points, source)
        self._keys = dict(self._keys, cpu_interval_s=max(0.01, interval))

    def collect_metrics(self):
        return cpu_metrics(self._live())
