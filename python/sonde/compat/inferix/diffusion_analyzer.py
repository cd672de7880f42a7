"""sonde.compat.inferix.diffusion_analyzer - Inferix's DiffusionAnalyzer: the diffusion step,
model parameter and block records of a profiler, each also a custom event of the session (as
the original adds them) and sonde's own diffusion record (sonde_diffusion_step, sonde_block,
sonde_model_params: the FPS and BPS of sonde's reports)."""

from typing import Any, Dict, List, Optional

from .reporter import _readable, block_analysis, diffusion_analysis

__all__ = ["DiffusionAnalyzer"]


class DiffusionAnalyzer:
    """What record_diffusion_step / record_model_parameters / record_block_computation of
    base_profiler (an InferixProfiler) recorded, and its analyses."""

    def __init__(self, base_profiler):
        self.base_profiler = base_profiler
        self.diffusion_steps: List[Dict[str, Any]] = []
        self.model_parameters: Dict[str, Dict[str, Any]] = {}
        self.block_computations: List[Dict[str, Any]] = []

    def _on(self, flag):
        c = self.base_profiler.config
        return c.enabled and getattr(c, flag)

    def record_diffusion_step(self, step, timestep, block_size, computation_time_ms,
                              guidance_scale=None):
        if not self._on("profile_diffusion_steps"):
            return
        d = {"step": step, "timestep": timestep, "block_size": block_size,
             "computation_time_ms": computation_time_ms, "guidance_scale": guidance_scale}
        self.diffusion_steps.append(d)
        self.base_profiler.add_event("diffusion_step", d)
        self.base_profiler.profiler.record_diffusion_step(
            int(step), float(timestep), int(block_size or 0),
            float(computation_time_ms) / 1000.0, guidance_scale)

    def record_model_parameters(self, model_name, parameters_count, model_type):
        if not self._on("profile_model_parameters"):
            return
        self.model_parameters[model_name] = {"parameters_count": parameters_count,
                                             "model_type": model_type}
        self.base_profiler.add_event("model_parameters", {
            "model_name": model_name, "parameters_count": parameters_count,
            "model_type": model_type})
        self.base_profiler.profiler.record_model_params(str(model_name), float(parameters_count))

    def record_block_computation(self, block_index, block_size, computation_time_ms,
                                 memory_usage_mb):
        if not self._on("profile_block_computation"):
            return
        d = {"block_index": block_index, "block_size": block_size,
             "computation_time_ms": computation_time_ms, "memory_usage_mb": memory_usage_mb}
        self.block_computations.append(d)
        self.base_profiler.add_event("block_computation", d)
        self.base_profiler.profiler.record_block(int(block_index), int(block_size),
                                                 float(computation_time_ms) / 1000.0,
                                                 float(memory_usage_mb or 0.0))

    def get_diffusion_analysis(self) -> Optional[Dict[str, Any]]:
        """total_steps, total/avg/min/max computation_time_ms, avg_timestep, avg_block_size,
        total_frames, fps, bps and the steps; None before a step."""
        if not self.diffusion_steps:
            return None
        a = diffusion_analysis([{"data": d} for d in self.diffusion_steps])
        keep = ("total_steps", "total_computation_time_ms", "avg_computation_time_ms",
                "min_computation_time_ms", "max_computation_time_ms", "avg_timestep",
                "avg_block_size", "total_frames", "fps", "bps")
        out = {k: a[k] for k in keep}
        out["steps"] = self.diffusion_steps
        return out

    def get_model_analysis(self) -> Optional[Dict[str, Any]]:
        """models, total_parameters, total_parameters_readable; None before a record."""
        if not self.model_parameters:
            return None
        total = sum(m["parameters_count"] for m in self.model_parameters.values())
        return {"models": self.model_parameters, "total_parameters": total,
                "total_parameters_readable": _readable(total)}

    def get_block_analysis(self) -> Optional[Dict[str, Any]]:
        """total_blocks, total/avg computation_time_ms, avg_block_size, total_frames,
        avg/peak memory_usage_mb, fps, bps and the blocks; None before a block."""
        if not self.block_computations:
            return None
        a = block_analysis([{"data": d} for d in self.block_computations])
        keep = ("total_blocks", "total_computation_time_ms", "avg_computation_time_ms",
                "avg_block_size", "total_frames", "avg_memory_usage_mb", "peak_memory_usage_mb",
                "fps", "bps")
        out = {k: a[k] for k in keep}
        out["blocks"] = self.block_computations
        return out

    def get_performance_recommendations(self) -> List[Dict[str, str]]:
        """The diffusion rules of the session report, on this analyzer's records alone."""
        from .reporter import recommendations
        r = {}
        d, b = self.get_diffusion_analysis(), self.get_block_analysis()
        if d:
            r["diffusion_analysis"] = d
        if b:
            r["block_analysis"] = b
        rules = ("Diffusion Steps", "Block Size", "Generation Speed", "Block Processing")
        out = [x for x in recommendations(r) if x["category"] in rules]
        if d and d["avg_computation_time_ms"] > 200:
            out.insert(2, {"category": "Computation Time", "priority": "High",
                           "issue": "Average step time is %.1fms" % d["avg_computation_time_ms"],
                           "suggestion": "Each step is slow: a lighter model or less work per "
                                         "step would speed generation up."})
        return out
