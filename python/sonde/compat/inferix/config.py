"""sonde.compat.inferix.config - Inferix's ProfilingConfig (inferix.profiling.config): every
field of the original with its default, and sonde's additions: from_dict / from_yaml (the
document's YAML file, an unknown key or bad value naming the file, line and key) and the
document's three presets."""

import dataclasses
import difflib
import os
from typing import Any, Dict, Optional

from sonde import _sonde
from sonde.compat import UnknownOption

__all__ = ["ProfilingConfig", "REPORT_FORMATS"]

REPORT_FORMATS = ("html", "json", "both")
_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


@dataclasses.dataclass
class ProfilingConfig:
    """Inferix's configuration, field for field with the original's defaults (profiling is off
    unless enabled=True)."""

    enabled: bool = False
    gpu_monitor_interval: float = 0.5
    cpu_monitor_interval: float = 1.0
    monitor_gpu_memory: bool = True
    monitor_gpu_utilization: bool = True
    monitor_gpu_temperature: bool = True
    monitor_gpu_power: bool = True
    monitor_cpu_usage: bool = True
    monitor_system_memory: bool = True
    real_time_display: bool = True
    display_interval: float = 5.0
    generate_final_report: bool = True
    save_raw_data: bool = False
    output_dir: Optional[str] = None
    report_format: str = "both"
    max_data_points: int = 10000
    profile_inference_steps: bool = True
    profile_vae_decode: bool = True
    profile_text_encoding: bool = True
    profile_diffusion_steps: bool = True
    profile_block_computation: bool = True
    profile_model_parameters: bool = True
    session_tags: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for f in ("gpu_monitor_interval", "cpu_monitor_interval", "display_interval"):
            if not float(getattr(self, f)) > 0:
                raise ValueError("%s must be positive (ProfilingConfig.%s=%r)"
                                 % (f, f, getattr(self, f)))
        if not int(self.max_data_points) > 0:
            raise ValueError("max_data_points must be positive (ProfilingConfig.max_data_points"
                             "=%r)" % (self.max_data_points,))
        if self.report_format not in REPORT_FORMATS:
            raise ValueError("report_format must be 'html', 'json', or 'both' "
                             "(ProfilingConfig.report_format=%r)" % (self.report_format,))
        if not isinstance(self.session_tags, dict):
            raise ValueError("ProfilingConfig.session_tags: expected a mapping, got %r"
                             % (self.session_tags,))

    @property
    def reports_dir(self):
        """Where the reports go: output_dir, else ./profiling_reports (as the original)."""
        return self.output_dir or os.path.join(os.getcwd(), "profiling_reports")

    @classmethod
    def from_dict(cls, values, source="<dict>", lines=None):
        """A configuration from a mapping of its keys (or one holding them under `profiling:`).
        Values may be text, as a YAML file has them ("true", "0.5"). An unknown key is a
        TypeError, as the original's ProfilingConfig(**values) raises (sonde.compat.UnknownOption,
        also a ValueError), a bad value a ValueError; both name source, the line when known,
        and the key."""
        if isinstance(values, dict) and isinstance(values.get("profiling"), dict):
            values, prefix = values["profiling"], "profiling."
        else:
            prefix = ""
        if not isinstance(values, dict):
            raise ValueError("%s: expected a mapping of profiling keys" % source)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kw = {}
        for key, value in values.items():
            where = source
            if lines and prefix + key in lines:
                where = "%s:%d" % (source, lines[prefix + key])
            if key not in fields:
                near = difflib.get_close_matches(key, fields, 1)
                raise UnknownOption('%s: unknown key "%s"%s' % (
                    where, key, ' (did you mean "%s"?)' % near[0] if near else ""))
            try:
                kw[key] = _convert(fields[key], value)
            except ValueError as e:
                raise ValueError('%s: key "%s": %s' % (where, key, e)) from None
        try:
            return cls(**kw)
        except ValueError as e:
            raise ValueError("%s: %s" % (source, e)) from None

    @classmethod
    def from_yaml(cls, path):
        """A configuration from a YAML file: its keys at the top level or under `profiling:`,
        as the Inferix document writes them."""
        path = os.fspath(path)
        with open(path, "rb") as f:
            data = f.read(16 << 20)
        doc, lines = _sonde.yaml_load(data, path)
        return cls.from_dict(doc if doc is not None else {}, path, lines)

    # the document's presets
    @classmethod
    def development(cls, **kw):
        """High-frequency monitoring, every feature, the live display."""
        return cls(**dict(dict(enabled=True, real_time_display=True, display_interval=2.0,
                               gpu_monitor_interval=0.1, cpu_monitor_interval=0.5), **kw))

    @classmethod
    def production(cls, **kw):
        """Low-frequency, essential monitoring; JSON reports for automation."""
        return cls(**dict(dict(enabled=True, real_time_display=False, gpu_monitor_interval=5.0,
                               cpu_monitor_interval=5.0, monitor_gpu_temperature=False,
                               monitor_gpu_power=False, report_format="json"), **kw))

    @classmethod
    def debugging(cls, **kw):
        """Maximum detail, frequent live updates."""
        return cls(**dict(dict(enabled=True, real_time_display=True, display_interval=1.0,
                               gpu_monitor_interval=0.05, cpu_monitor_interval=0.1,
                               save_raw_data=True, max_data_points=1000000), **kw))


def _convert(field, value):
    t = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    if value is None:
        if field.name == "output_dir":
            return None
        raise ValueError("no value")
    if t == "bool":
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError("%r is not a boolean (true/false)" % (value,))
    if t == "float":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError("%r is not a number" % (value,)) from None
    if t == "int":
        try:
            return int(str(value), 10) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError("%r is not an integer" % (value,)) from None
    if field.name == "session_tags":
        if not isinstance(value, dict):
            raise ValueError("expected a mapping of tags")
        return dict(value)
    return str(value)
