"""sonde.compat.inferix.reporter - Inferix's per-session reports (inferix.profiling.reporter):
OUTPUT_DIR/profiling_report_<session>_<YYYYmmdd_HHMMSS>.json and .html (report_format), and
raw_profiling_data_<session>_<...>.json with save_raw_data.

The JSON has the original's sections and keys: session_info, summary (gpu, cpu), gpu_metrics
(timeline, memory / utilization / temperature / power analyses), cpu_metrics, stage_analysis
(stages, bottlenecks over 30% of the stages' time), events, recommendations, and, when the
session has them, streaming_analysis, computation_analysis, memory_analysis, cache_analysis,
diffusion_analysis, model_analysis and block_analysis. The recommendations keep the original's
categories, priorities and thresholds; their wording is sonde's."""

import html
import json
import os
import time
from datetime import datetime

__all__ = ["ProfilingReporter", "report_data"]


def _stats(values, prefix, suffix=""):
    """{prefix_total..., avg, min, max} helpers: avg/min/max of values under NAME keys."""
    return {"avg_%s%s" % (prefix, suffix): sum(values) / len(values),
            "min_%s%s" % (prefix, suffix): min(values),
            "max_%s%s" % (prefix, suffix): max(values)}


def _efficiency(util):
    """The original's utilization efficiency: (mean + max(0, 100 - variance)) / 2, at most 100."""
    if not util:
        return 0.0
    mean = sum(util) / len(util)
    var = sum((u - mean) ** 2 for u in util) / len(util)
    return min(100.0, (mean + max(0.0, 100.0 - var)) / 2)


def gpu_analysis(snaps):
    out = {"total_samples": len(snaps), "timeline": [], "memory_analysis": {},
           "utilization_analysis": {}, "temperature_analysis": {}, "power_analysis": {}}
    if not snaps:
        return out
    mem, util, temp, power = [], [], [], []
    for s in snaps:
        m = s.metrics
        row = {"timestamp": s.timestamp, "memory_used_mb": m.get("total_gpu_memory_used_mb", 0),
               "memory_total_mb": m.get("total_gpu_memory_total_mb", 0),
               "utilization": m.get("max_gpu_utilization", 0),
               "temperature": m.get("max_gpu_temperature", 0),
               "power": m.get("total_gpu_power_watts", 0)}
        out["timeline"].append(row)
        mem.append(row["memory_used_mb"])
        util.append(row["utilization"])
        temp.append(row["temperature"])
        power.append(row["power"])
    total = snaps[0].metrics.get("total_gpu_memory_total_mb", 0)
    out["memory_analysis"] = {"peak_usage_mb": max(mem), "avg_usage_mb": sum(mem) / len(mem),
                              "min_usage_mb": min(mem), "total_memory_mb": total,
                              "peak_utilization_percent": 100.0 * max(mem) / max(total, 1)}
    out["utilization_analysis"] = {"peak_utilization": max(util),
                                   "avg_utilization": sum(util) / len(util),
                                   "min_utilization": min(util),
                                   "utilization_efficiency": _efficiency(util)}
    if any(t > 0 for t in temp):
        out["temperature_analysis"] = {"peak_temperature": max(temp),
                                       "avg_temperature": sum(temp) / len(temp),
                                       "min_temperature": min(temp),
                                       "thermal_throttling_risk": max(temp) > 85}
    if any(p > 0 for p in power):
        # the original's approximation: samples taken every 0.5 s
        out["power_analysis"] = {"peak_power_watts": max(power),
                                 "avg_power_watts": sum(power) / len(power),
                                 "total_energy_wh": sum(power) * len(snaps) * 0.5 / 3600}
    return out


def cpu_analysis(snaps):
    out = {"total_samples": len(snaps), "timeline": [], "cpu_analysis": {},
           "memory_analysis": {}}
    if not snaps:
        return out
    cpu, mem = [], []
    for s in snaps:
        m = s.metrics
        row = {"timestamp": s.timestamp, "cpu_usage": m.get("cpu_usage_percent", 0),
               "memory_used_mb": m.get("memory_used_mb", 0),
               "memory_total_mb": m.get("memory_total_mb", 0)}
        out["timeline"].append(row)
        cpu.append(row["cpu_usage"])
        mem.append(row["memory_used_mb"])
    total = snaps[0].metrics.get("memory_total_mb", 0)
    out["cpu_analysis"] = {"peak_usage": max(cpu), "avg_usage": sum(cpu) / len(cpu),
                           "min_usage": min(cpu)}
    out["memory_analysis"] = {"peak_usage_mb": max(mem), "avg_usage_mb": sum(mem) / len(mem),
                              "min_usage_mb": min(mem), "total_memory_mb": total,
                              "peak_utilization_percent": 100.0 * max(mem) / max(total, 1)}
    return out


def gpu_summary(snaps):
    mem = [s.metrics.get("total_gpu_memory_used_mb", 0) for s in snaps]
    util = [s.metrics.get("max_gpu_utilization", 0) for s in snaps]
    total = snaps[0].metrics.get("total_gpu_memory_total_mb", 1)
    return {"peak_memory_usage_mb": max(mem), "avg_memory_usage_mb": sum(mem) / len(mem),
            "peak_memory_utilization": 100.0 * max(mem) / max(total, 1),
            "avg_gpu_utilization": sum(util) / len(util), "peak_gpu_utilization": max(util)}


def cpu_summary(snaps):
    cpu = [s.metrics.get("cpu_usage_percent", 0) for s in snaps]
    mem = [s.metrics.get("memory_used_mb", 0) for s in snaps]
    return {"avg_cpu_usage": sum(cpu) / len(cpu), "peak_cpu_usage": max(cpu),
            "avg_memory_usage_mb": sum(mem) / len(mem), "peak_memory_usage_mb": max(mem)}


def stage_analysis(timings):
    """Each stage's total, calls, mean, min, max and share; bottlenecks: over 30%."""
    out = {"total_stages": len(timings), "total_time": 0.0, "stages": {}, "bottlenecks": []}
    for name, t in timings.items():
        calls = t.get("call_count", 1)
        out["stages"][name] = {"total_time": t["total_time"], "call_count": calls,
                               "avg_time": t["total_time"] / max(calls, 1),
                               "min_time": t.get("min_time", 0.0),
                               "max_time": t.get("max_time", 0.0), "percentage_of_total": 0.0}
        out["total_time"] += t["total_time"]
    if out["total_time"] > 0:
        for name, st in out["stages"].items():
            st["percentage_of_total"] = 100.0 * st["total_time"] / out["total_time"]
            if st["percentage_of_total"] > 30:
                out["bottlenecks"].append({"stage": name, "percentage": st["percentage_of_total"],
                                           "total_time": st["total_time"]})
    out["bottlenecks"].sort(key=lambda b: -b["percentage"])
    return out


def _rates(out, count_key):
    seconds = out.get("total_computation_time_ms", 0) / 1000.0
    out["fps"] = out.get("total_frames", 0) / seconds if seconds > 0 else 0
    out["bps"] = out[count_key] / seconds if seconds > 0 else 0


def _records(events, count_key, list_key):
    """What the diffusion steps and the blocks share: their count, the records, and the
    statistics of their computation times and block sizes (total_frames)."""
    items = [e.get("data", {}) for e in events]
    out = {count_key: len(items), list_key: items}
    times = [d.get("computation_time_ms", 0) for d in items]
    sizes = [d.get("block_size", 0) for d in items]
    if times:
        out["total_computation_time_ms"] = sum(times)
        out.update(_stats(times, "computation_time", "_ms"))
    if sizes:
        out.update(_stats(sizes, "block_size"))
        out["total_frames"] = sum(sizes)
    return out, items


def diffusion_analysis(events):
    out, items = _records(events, "total_steps", "steps")
    if items:
        out.update(_stats([d.get("timestep", 0) for d in items], "timestep"))
    _rates(out, "total_steps")
    return out


def _readable(n):
    if n >= 1e9:
        return "%.1fB" % (n / 1e9)
    if n >= 1e6:
        return "%.1fM" % (n / 1e6)
    return "{:,}".format(n)


def model_analysis(events):
    out = {"models": {}, "total_parameters": 0}
    for e in events:
        d = e.get("data", {})
        if d.get("model_name"):
            out["models"][d["model_name"]] = {"parameters_count": d.get("parameters_count", 0),
                                              "model_type": d.get("model_type")}
            out["total_parameters"] += d.get("parameters_count", 0)
    out["total_parameters_readable"] = _readable(out["total_parameters"])
    return out


def block_analysis(events):
    out, items = _records(events, "total_blocks", "blocks")
    mem = [d.get("memory_usage_mb", 0) for d in items]
    if mem:
        out["avg_memory_usage_mb"] = sum(mem) / len(mem)
        out["peak_memory_usage_mb"] = max(mem)
        out["min_memory_usage_mb"] = min(mem)
    _rates(out, "total_blocks")
    return out


def streaming_analysis(events, dropped):
    frames = sum(e.get("batch_size", 0) for e in events)
    out = {"total_streaming_events": len(events), "total_frames_streamed": frames,
           "total_dropped_frames": dropped, "current_fps": 0.0,
           "avg_encoding_time_ms": sum(e.get("encoding_time_ms", 0) for e in events) / len(events),
           "avg_network_latency_ms": sum(e.get("network_latency_ms", 0)
                                         for e in events) / len(events),
           "drop_rate_percent": 0.0}
    if len(events) >= 2:  # over the last ten events
        recent = events[-10:]
        span = recent[-1].get("timestamp", 0) - recent[0].get("timestamp", 0)
        if span > 0:
            out["current_fps"] = sum(e.get("batch_size", 0) for e in recent) / span
    if frames + dropped > 0:
        out["drop_rate_percent"] = 100.0 * dropped / (frames + dropped)
    return out


def computation_analysis(layer_timings):
    out = {"layer_performance": {}, "bottlenecks": []}
    totals = {}
    for name, times in layer_timings.items():
        if times:
            totals[name] = sum(times)
            out["layer_performance"][name] = {
                "avg_time_ms": totals[name] / len(times), "min_time_ms": min(times),
                "max_time_ms": max(times), "total_time_ms": totals[name],
                "call_count": len(times)}
    whole = sum(totals.values())
    if whole > 0:
        for name, t in totals.items():
            if 100.0 * t / whole > 30:
                out["bottlenecks"].append({"layer": name, "percentage": 100.0 * t / whole,
                                           "total_time_ms": t})
        out["bottlenecks"].sort(key=lambda b: -b["percentage"])
    return out


def memory_analysis(events):
    out = {"allocation_patterns": {}, "fragmentation_analysis": {}}
    by = {}
    for e in events:
        by.setdefault(e.get("allocator", "unknown"), []).append(e)
    for alloc, evs in by.items():
        sizes = [e.get("size_bytes", 0) for e in evs]
        out["allocation_patterns"][alloc] = {
            "total_allocations": sum(e.get("event_type") == "alloc" for e in evs),
            "total_deallocations": sum(e.get("event_type") == "dealloc" for e in evs),
            "total_bytes_allocated": sum(sizes),
            "avg_allocation_size_bytes": sum(sizes) / len(sizes),
            "max_allocation_size_bytes": max(sizes), "min_allocation_size_bytes": min(sizes)}
    allocs = [e for e in events if e.get("event_type") == "alloc"]
    if allocs:
        small = sum(e.get("size_bytes", 0) < (1 << 20) for e in allocs)
        out["fragmentation_analysis"] = {"small_allocation_ratio": small / len(allocs),
                                         "total_allocations": len(allocs)}
    return out


def cache_analysis(stats):
    n = stats.get("total_requests", 0)
    if not n:
        return {}
    return {"cache_performance": {"hits": stats.get("hits", 0),
                                  "misses": stats.get("misses", 0),
                                  "evictions": stats.get("evictions", 0), "total_requests": n},
            "cache_efficiency": {"hit_rate": stats.get("hits", 0) / n,
                                 "miss_rate": stats.get("misses", 0) / n,
                                 "eviction_rate": stats.get("evictions", 0) / n}}


def _rec(category, priority, issue, suggestion):
    return {"category": category, "priority": priority, "issue": issue, "suggestion": suggestion}


def first_block_delay(r):
    """Seconds to the first block: the first block record's time, else the mean time of the
    first stage whose name mentions a block or diffusion; None without either."""
    blocks = r.get("block_analysis", {}).get("blocks", [])
    if blocks:
        return blocks[0].get("computation_time_ms", 0) / 1000.0
    for name, st in r.get("stage_analysis", {}).get("stages", {}).items():
        if ("block" in name.lower() or "diffusion" in name.lower()) and st.get("call_count"):
            return st.get("avg_time", 0)
    return None


def recommendations(r):
    """The original's rules (categories, priorities, thresholds), in sonde's words."""
    out = []
    g = r.get("summary", {}).get("gpu", {})
    if g:
        if g.get("peak_memory_utilization", 0) > 90:
            out.append(_rec("GPU Memory", "High", "Peak GPU memory utilization is %.1f%%"
                            % g["peak_memory_utilization"],
                            "Little memory is left: a smaller batch, activation checkpointing or "
                            "lower precision would free some."))
        if g.get("avg_gpu_utilization", 0) < 50:
            out.append(_rec("GPU Utilization", "Medium", "Average GPU utilization is only %.1f%%"
                            % g.get("avg_gpu_utilization", 0),
                            "The GPU waits for much of the run: feed it larger batches or find "
                            "what keeps it idle (data loading, host-side work)."))
    for b in r.get("stage_analysis", {}).get("bottlenecks", [])[:3]:
        if b["stage"] != "run_inference":
            out.append(_rec("Performance Bottleneck", "High", "Stage '%s' takes %.1f%% of total "
                            "time" % (b["stage"], b["percentage"]),
                            "Optimizing '%s' gives the largest gain." % b["stage"]))
    t = r.get("gpu_metrics", {}).get("temperature_analysis", {})
    if t.get("thermal_throttling_risk"):
        out.append(_rec("Thermal Management", "High", "Peak GPU temperature is %.1f°C"
                        % t.get("peak_temperature", 0),
                        "Above 85°C the GPU may slow itself down: check its cooling or load."))
    s = r.get("streaming_analysis", {})
    if s.get("drop_rate_percent", 0) > 5:
        out.append(_rec("Streaming Performance", "High", "High frame drop rate: %.1f%%"
                        % s["drop_rate_percent"],
                        "Frames are lost: lighten the encoding or widen the network path."))
    for b in r.get("computation_analysis", {}).get("bottlenecks", [])[:3]:
        out.append(_rec("Computation Bottleneck", "High", "Layer '%s' takes %.1f%% of total "
                        "computation time" % (b["layer"], b["percentage"]),
                        "Optimizing layer '%s', or spreading its work, gives the largest gain."
                        % b["layer"]))
    d, blk = r.get("diffusion_analysis", {}), r.get("block_analysis", {})
    if d and d.get("total_steps", 0) > 30:
        out.append(_rec("Diffusion Steps", "High", "Using %d diffusion steps" % d["total_steps"],
                        "20 to 30 steps are usually enough and take less time."))
    if blk and blk.get("avg_block_size", 0) > 8:
        out.append(_rec("Block Size", "Medium", "Average block size is %.1f frames"
                        % blk["avg_block_size"],
                        "Smaller blocks lower latency and memory and stream more smoothly."))
    if d and d.get("fps", 0) < 10:
        out.append(_rec("Generation Speed", "High", "Current FPS is %.1f" % d.get("fps", 0),
                        "Below real time: smooth video needs about 16 frames per second."))
    if d and d.get("bps", 0) < 2:
        out.append(_rec("Block Processing", "Medium", "Current BPS is %.1f" % d.get("bps", 0),
                        "Blocks are processed slowly: faster or parallel block processing would "
                        "raise throughput."))
    tags = r.get("session_info", {}).get("tags", {})
    world = tags.get("world_size", 1)
    delay = first_block_delay(r)
    if delay:
        out.append(_rec("Latency Optimization", "Medium", "First-block delay is %.2f seconds"
                        % delay, "The first block takes long: faster start-up or smaller "
                        "blocks would shorten the wait for the first frames."))
    if isinstance(world, (int, float)) and world > 1:
        parts = ["%s (%d GPUs)" % (n, tags.get(k, 1)) for n, k in
                 (("Ulysses", "ulysses_size"), ("Ring", "ring_size")) if tags.get(k, 1) > 1]
        out.append(_rec("Multi-GPU Scaling", "Medium", "Using %d GPUs with %s strategy"
                        % (world, " and ".join(parts) or "Data Parallel"),
                        "Try other Ulysses/Ring splits for this interconnect; scaling is not "
                        "linear because of communication."))
        out.append(_rec("Advanced Parallelization", "Low",
                        "Opportunity for more sophisticated parallel strategies",
                        "Block-parallel or timestep-parallel schedules, or both, may scale "
                        "further."))
    else:
        out.append(_rec("Multi-GPU Scaling", "Medium", "Using single GPU",
                        "More GPUs, with Ulysses (attention) and Ring (sequence) parallelism, "
                        "would shorten generation."))
    return out


def report_data(session, gpu_data, cpu_data):
    """The report of one ended session (a ProfilingSession) and the monitors' snapshots."""
    r = {"session_info": {"id": session.session_id, "start_time": session.start_time,
                          "end_time": session.end_time, "duration": session.duration,
                          "tags": session.tags, "generated_at": time.time()},
         "summary": {}, "gpu_metrics": {}, "cpu_metrics": {}, "stage_analysis": {},
         "events": session.custom_events, "recommendations": []}
    if gpu_data:
        r["gpu_metrics"] = gpu_analysis(gpu_data)
        r["summary"]["gpu"] = gpu_summary(gpu_data)
    if cpu_data:
        r["cpu_metrics"] = cpu_analysis(cpu_data)
        r["summary"]["cpu"] = cpu_summary(cpu_data)
    if session.stage_timings:
        r["stage_analysis"] = stage_analysis(session.stage_timings)
    if session.streaming_events:
        r["streaming_analysis"] = streaming_analysis(session.streaming_events,
                                                     session.dropped_frames)
    if session.layer_timings:
        r["computation_analysis"] = computation_analysis(session.layer_timings)
    if session.memory_events:
        r["memory_analysis"] = memory_analysis(session.memory_events)
    if session.cache_stats:  # {} without requests, as the original writes it
        r["cache_analysis"] = cache_analysis(session.cache_stats)
    for name, key, fn in (("diffusion_step", "diffusion_analysis", diffusion_analysis),
                          ("model_parameters", "model_analysis", model_analysis),
                          ("block_computation", "block_analysis", block_analysis)):
        evs = [e for e in session.custom_events if e.get("name") == name]
        if evs:
            r[key] = fn(evs)
    r["recommendations"] = recommendations(r)
    return r


class ProfilingReporter:
    """Writes a session's reports into config's output directory (made if missing)."""

    def __init__(self, config):
        self.config = config
        self.output_dir = config.reports_dir
        os.makedirs(self.output_dir, exist_ok=True)

    def generate_report(self, session, gpu_data, cpu_data):
        """The session's reports; returns their paths joined by ", ", or None (a failure is
        printed, as the original prints it)."""
        try:
            r = report_data(session, gpu_data, cpu_data)
            paths = []
            if self.config.report_format in ("json", "both"):
                paths.append(self._write("profiling_report_%s_%s.json", session.session_id,
                                         lambda f: json.dump(r, f, indent=2, default=str)))
            if self.config.report_format in ("html", "both"):
                paths.append(self._write("profiling_report_%s_%s.html", session.session_id,
                                         lambda f: f.write(render_html(r))))
            if self.config.save_raw_data:
                raw = {"session_id": session.session_id,
                       "gpu_data": [{"timestamp": s.timestamp, "metrics": s.metrics}
                                    for s in gpu_data],
                       "cpu_data": [{"timestamp": s.timestamp, "metrics": s.metrics}
                                    for s in cpu_data],
                       "saved_at": time.time()}
                paths.append(self._write("raw_profiling_data_%s_%s.json", session.session_id,
                                         lambda f: json.dump(raw, f, indent=2, default=str)))
            return ", ".join(paths) if paths else None
        except (OSError, TypeError, ValueError) as e:
            print("Error generating profiling report: %s" % e)
            return None

    def _write(self, pattern, session_id, write):
        path = os.path.join(self.output_dir, pattern % (session_id,
                                                         datetime.now().strftime("%Y%m%d_%H%M%S")))
        with open(path, "w", encoding="utf-8") as f:
            write(f)
        return path


def _table(rows, cols):
    head = "".join("<th>%s</th>" % html.escape(c) for c in cols)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(v)) for v in row)
                   for row in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _spark(points, label):
    """An inline SVG line of a timeline's values (no script, no external file)."""
    if len(points) < 2:
        return ""
    lo, hi = min(points), max(points)
    span = (hi - lo) or 1.0
    xy = " ".join("%.1f,%.1f" % (600.0 * i / (len(points) - 1), 60 - 55.0 * (v - lo) / span)
                  for i, v in enumerate(points))
    return ('<figure><figcaption>%s: %.1f to %.1f</figcaption><svg width="600" height="62" '
            'role="img" aria-label="%s"><polyline fill="none" stroke="#3465a4" '
            'stroke-width="1.5" points="%s"/></svg></figure>'
            % (html.escape(label), lo, hi, html.escape(label), xy))


def render_html(r):
    """The report as one self-contained page: session, summary, timelines, stages,
    recommendations, events."""
    si = r["session_info"]

    def when(t):
        return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else "N/A"

    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Inferix profiling report "
             "- %s</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}</style>"
             "</head><body>" % html.escape(str(si["id"])),
             "<h1>Profiling report: %s</h1>" % html.escape(str(si["id"])),
             _table([[when(si["start_time"]), when(si["end_time"]),
                      "%.2f s" % (si["duration"] or 0), json.dumps(si["tags"])]],
                    ["Start", "End", "Duration", "Tags"])]
    for key, title in (("gpu", "GPU summary"), ("cpu", "CPU summary")):
        s = r["summary"].get(key)
        if s:
            parts.append("<h2>%s</h2>%s" % (title, _table([[("%.1f" % v) if isinstance(v, float)
                                                             else v for v in s.values()]],
                                                           list(s))))
    tl = r["gpu_metrics"].get("timeline", []) if r["gpu_metrics"] else []
    ct = r["cpu_metrics"].get("timeline", []) if r["cpu_metrics"] else []
    if tl or ct:
        parts.append("<h2>Timelines</h2>")
        parts.append(_spark([p["memory_used_mb"] for p in tl], "GPU memory used (MB)"))
        parts.append(_spark([p["utilization"] for p in tl], "GPU utilization (%)"))
        parts.append(_spark([p["cpu_usage"] for p in ct], "CPU usage (%)"))
        parts.append(_spark([p["memory_used_mb"] for p in ct], "System memory used (MB)"))
    st = r.get("stage_analysis", {}).get("stages", {})
    if st:
        parts.append("<h2>Stage analysis</h2>" + _table(
            [[n, "%.4f" % s["total_time"], s["call_count"], "%.4f" % s["avg_time"],
              "%.4f" % s["min_time"], "%.4f" % s["max_time"], "%.1f%%" % s["percentage_of_total"]]
             for n, s in sorted(st.items(), key=lambda kv: -kv[1]["total_time"])],
            ["Stage", "Total (s)", "Calls", "Mean (s)", "Min (s)", "Max (s)", "Share"]))
    for key, title in (("diffusion_analysis", "Diffusion steps"), ("block_analysis", "Blocks"),
                       ("model_analysis", "Models"), ("streaming_analysis", "Streaming"),
                       ("cache_analysis", "Cache")):
        a = r.get(key)
        if a:
            flat = {k: v for k, v in a.items() if not isinstance(v, (list, dict))}
            if flat:
                parts.append("<h2>%s</h2>%s" % (title, _table([list(flat.values())], list(flat))))
    if r["recommendations"]:
        parts.append("<h2>Recommendations</h2>" + _table(
            [[x["priority"], x["category"], x["issue"], x["suggestion"]]
             for x in r["recommendations"]], ["Priority", "Category", "Issue", "Suggestion"]))
    if r["events"]:
        parts.append("<h2>Events</h2>" + _table(
            [[when(e["timestamp"]), e["name"], json.dumps(e["data"], default=str)]
             for e in r["events"]], ["Time", "Event", "Data"]))
    parts.append("</body></html>\n")
    return "\n".join(parts)
