"""sonde.compat.inferix - the Inferix profiling package's API (inferix.profiling and its
pipeline integration) over sonde.

    from sonde.compat.inferix import InferixProfiler, ProfilingConfig

    profiler = InferixProfiler(ProfilingConfig(enabled=True, report_format="both"))
    profiler.start_session("my_video_generation", {"experiment": "v1"})
    with profiler.stage("text_encoding"):
        encode()
    profiler.add_event("milestone_reached", {"progress": 0.5})
    profiler.end_session()   # ./profiling_reports/profiling_report_my_video_generation_*.json, .html

Behaviour, files, keys and printed lines are the original's (each module says which of its
files it stands for); sonde records underneath: sessions, stages, events and the diffusion
records are sonde's own on one timeline (NAME.trace.json.gz, NAME.sonde beside the reports),
and the monitors read sonde's sampler. The import lines of the original and of its document
map as:

    inferix.profiling                       -> sonde.compat.inferix
    inferix.profiling.config                -> sonde.compat.inferix (or .config)
    inferix.profiling.decorators            -> sonde.compat.inferix (or .decorators)
    inferix.profiling.monitors / .reporter  -> sonde.compat.inferix (or .monitors / .reporter)
    inferix.core.monitoring.profiling,
    inferix.utils.profiling_integration     -> sonde.compat.inferix (or .integration)
    inferix.profiling.aggregate_reports     -> sonde.compat.inferix.aggregate_reports

docs/python.md lists what differs from the original, and why.
"""

from ._aggregate import aggregate_reports
from .config import ProfilingConfig
from .decorators import (add_profiling_event, profile_block_computation, profile_diffusion_step,
                         profile_layer, profile_method, profile_model_parameters,
                         profile_session, profile_streaming)
from .diffusion_analyzer import DiffusionAnalyzer
from .integration import (ProfilingIntegration, create_profiler_from_config,
                          get_profiling_summary, profile_pipeline_function)
from .monitors import CPUMonitor, GPUMonitor, MetricSnapshot
from .profiler import InferixProfiler, ProfilingSession, current_profiler, format_metrics
from .reporter import ProfilingReporter

__all__ = [
    "InferixProfiler", "GPUMonitor", "CPUMonitor", "ProfilingReporter", "ProfilingConfig",
    "aggregate_reports", "profile_method", "profile_session", "add_profiling_event",
    "DiffusionAnalyzer", "profile_layer", "profile_streaming", "profile_diffusion_step",
    "profile_model_parameters", "profile_block_computation", "ProfilingIntegration",
    "create_profiler_from_config", "get_profiling_summary", "profile_pipeline_function",
    "ProfilingSession", "MetricSnapshot", "current_profiler", "format_metrics",
]
