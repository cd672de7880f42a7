"""Inferix's report aggregation over `sonde aggregate` (the implementation behind
sonde.compat.inferix.aggregate_reports and its command line)."""

import argparse
import json
import os
import sys

import sonde

__all__ = ["aggregate_reports", "main"]

_FORMATS = {".json": "json", ".csv": "csv", ".md": "markdown"}


def aggregate_reports(reports_dir, output_path, by="section"):
    """One report from the reports of every rank in reports_dir (`sonde aggregate`): per stage
    the min / mean / max / stddev across ranks and the slowest rank. The format follows
    output_path's extension (.json, .csv, .md, else text); a .json output is also returned as
    a dict. Raises FileNotFoundError for a missing directory, RuntimeError when sonde aggregate
    fails (its message is on stderr)."""
    reports_dir, output_path = os.fspath(reports_dir), os.fspath(output_path)
    if not os.path.isdir(reports_dir):
        raise FileNotFoundError("aggregate_reports: no directory %s" % reports_dir)
    if by not in ("section", "session"):
        raise ValueError('aggregate_reports: by=%r; expected "section" or "session"' % (by,))
    fmt = _FORMATS.get(os.path.splitext(output_path)[1].lower(), "text")
    d = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(d, exist_ok=True)
    rc = sonde.cli(["aggregate", reports_dir, "--format", fmt, "-o", output_path, "--by", by])
    if rc != 0:
        raise RuntimeError("aggregate_reports: `sonde aggregate %s` failed (exit %d); its message "
                           "is above" % (reports_dir, rc))
    if fmt == "json":
        with open(output_path) as f:
            return json.load(f)
    return output_path


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m sonde.compat.inferix.aggregate_reports",
        description="Aggregate the profiling reports of every rank into one report.")
    ap.add_argument("--reports_dir", required=True, help="directory of the ranks' reports")
    ap.add_argument("--output", required=True,
                    help="the aggregated report (.json, .csv, .md, else text)")
    ap.add_argument("--by", default="section", choices=["section", "session"])
    a = ap.parse_args(argv)
    try:
        aggregate_reports(a.reports_dir, a.output, a.by)
    except (OSError, RuntimeError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    print("aggregated report: %s" % a.output)
    return 0

