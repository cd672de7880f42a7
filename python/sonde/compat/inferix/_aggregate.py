"""Inferix's report aggregation (the original's inferix.profiling.aggregate_reports), behind
sonde.compat.inferix.aggregate_reports and its command line.

As the original: reports_dir holds one rank_N directory per rank; every *.json report in them
is read; the "gpu" and "cpu" objects of the reports are aggregated key by key into KEY_min,
KEY_max, KEY_avg and KEY_sum; output_path gets {"total_reports", "rank_count",
"aggregated_gpu_metrics", "aggregated_cpu_metrics", "reports_summary"}, and the original's
lines are printed. sonde adds "sonde_aggregate": `sonde aggregate` over the ranks' NAME.sonde
files (per stage across ranks: min / mean / max / stddev, the slowest rank), when there are
such files."""

import argparse
import contextlib
import glob
import io
import json
import os

import sonde

__all__ = ["aggregate_reports", "aggregate_metrics", "load_json_report", "main"]


def load_json_report(report_path):
    with open(report_path, "r", encoding="utf-8") as f:
        return json.load(f)


def aggregate_metrics(metrics_list):
    """{KEY_min, KEY_max, KEY_avg, KEY_sum} for each numeric key of the first dict."""
    out = {}
    if not metrics_list:
        return out
    for key in metrics_list[0]:
        vals = [m[key] for m in metrics_list
                if key in m and isinstance(m[key], (int, float)) and not isinstance(m[key], bool)]
        if vals:
            out[key + "_min"], out[key + "_max"] = min(vals), max(vals)
            out[key + "_avg"], out[key + "_sum"] = sum(vals) / len(vals), sum(vals)
    return out


def _sonde_aggregate(files):
    """`sonde aggregate` of the ranks' .sonde files as a dict (None without files, or with
    the reason when it fails)."""
    if not files:
        return None
    out = os.path.join(os.path.dirname(files[0]), ".sonde-aggregate.json")
    with contextlib.redirect_stdout(io.StringIO()):
        rc = sonde.cli(["aggregate"] + files + ["--format", "json", "-o", out])
    if rc != 0 or not os.path.exists(out):
        return {"error": "sonde aggregate exited %d (its message is on stderr)" % rc}
    try:
        return load_json_report(out)
    finally:
        os.unlink(out)


def aggregate_reports(reports_dir, output_path):
    """Aggregates the reports of reports_dir/rank_*/ into output_path (see the module's
    documentation). Returns the aggregated dict, or None when there was nothing to aggregate
    (the original's message printed)."""
    reports_dir, output_path = os.fspath(reports_dir), os.fspath(output_path)
    if not os.path.exists(reports_dir):
        print("Reports directory %s does not exist" % reports_dir)
        return None
    rank_dirs = sorted(d for d in glob.glob(os.path.join(reports_dir, "rank_*"))
                       if os.path.isdir(d))
    if not rank_dirs:
        print("No rank directories found")
        return None
    print("Found %d rank directories" % len(rank_dirs))
    reports, gpu, cpu, runs = [], [], [], []
    for d in rank_dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            try:
                r = load_json_report(path)
            except (OSError, ValueError) as e:
                print("Error loading report %s: %s" % (path, e))
                continue
            reports.append(r)
            if isinstance(r, dict) and "gpu" in r:
                gpu.append(r["gpu"])
            if isinstance(r, dict) and "cpu" in r:
                cpu.append(r["cpu"])
        runs += sorted(glob.glob(os.path.join(d, "*.sonde")))
    if not reports:
        print("No valid reports found")
        return None
    data = {"total_reports": len(reports), "rank_count": len(rank_dirs),
            "aggregated_gpu_metrics": aggregate_metrics(gpu),
            "aggregated_cpu_metrics": aggregate_metrics(cpu), "reports_summary": []}
    for i, r in enumerate(reports):
        r = r if isinstance(r, dict) else {}
        tags = r.get("tags", {}) if isinstance(r.get("tags"), dict) else {}
        data["reports_summary"].append({"report_index": i,
                                        "session_id": r.get("session_id", "unknown"),
                                        "duration": r.get("duration", 0),
                                        "rank": tags.get("rank", "unknown")})
    agg = _sonde_aggregate(runs)
    if agg is not None:
        data["sonde_aggregate"] = agg
    d = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(d, exist_ok=True)
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
    print("Aggregated report saved to %s" % output_path)
    print("\n=== Aggregation Summary ===")
    print("Total reports processed: %d" % len(reports))
    print("Ranks: %d" % len(rank_dirs))
    for found, title, agg, lines in (
            (gpu, "GPU", data["aggregated_gpu_metrics"],
             (("GPU Memory", "memory_used_mb", "MB"), ("GPU Utilization", "utilization_percent",
                                                      "%"))),
            (cpu, "CPU", data["aggregated_cpu_metrics"],
             (("CPU Usage", "usage_percent", "%"), ("Memory Usage", "memory_used_mb", "MB")))):
        if not found:
            continue
        print("\n=== %s Metrics (Aggregated) ===" % title)
        for label, key, unit in lines:
            print("%s - Min: %.1f%s, Max: %.1f%s, Avg: %.1f%s" % (
                label, agg.get(key + "_min", 0), unit, agg.get(key + "_max", 0), unit,
                agg.get(key + "_avg", 0), unit))
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description="Aggregate profiling reports from multiple ranks")
    ap.add_argument("--reports_dir", type=str, required=True,
                    help="Directory containing rank subdirectories with profiling reports")
    ap.add_argument("--output", type=str, default="aggregated_profiling_report.json",
                    help="Output path for aggregated report")
    a = ap.parse_args(argv)
    aggregate_reports(a.reports_dir, a.output)
    return 0
