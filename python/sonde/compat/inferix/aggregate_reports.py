"""sonde.compat.inferix.aggregate_reports - Inferix's aggregation module and command line.

    from sonde.compat.inferix.aggregate_reports import aggregate_reports
    aggregate_reports(reports_dir="./distributed_profiling_reports",
                      output_path="./aggregated_report.json")

    python -m sonde.compat.inferix.aggregate_reports --reports_dir D --output F [--by session]

Importing this module makes sonde.compat.inferix.aggregate_reports the module rather than the
function; the module is callable, so both spellings keep working.
"""

import sys
import types

from ._aggregate import aggregate_metrics, aggregate_reports, load_json_report, main

__all__ = ["aggregate_reports", "aggregate_metrics", "load_json_report", "main"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return aggregate_reports(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
