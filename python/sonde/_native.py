"""_native - libsonde loaded with ctypes, and the C prototypes the package calls.

Which libsonde is loaded, first found wins:
  1. the path in SONDE_LIBRARY;
  2. the library installed beside this package (PREFIX/LIBDIR/sonde/python/sonde ->
     PREFIX/LIBDIR/libsonde.so.0, where `make install` puts both);
  3. a build tree's library when the package is used from a source checkout (build/);
  4. the dynamic linker's search path (libsonde.so.0).
"""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libsonde.so.0"

# sonde_config is handled as opaque storage, read and written only by key through
# sonde_config_set/get, so this package never depends on the struct's layout. libsonde checks
# with a static assertion (src/config/config.c) that the struct fits in these bytes.
CONFIG_BYTES = 1024


class Config(ctypes.Structure):
    """Storage for one sonde_config, aligned for any of its fields."""

    _fields_ = [("_opaque", ctypes.c_uint64 * (CONFIG_BYTES // 8))]


class SectionStats(ctypes.Structure):
    """sonde_section_stats, field for field (include/sonde/sonde.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("count", ctypes.c_uint64),
        ("total_s", ctypes.c_double),
        ("self_s", ctypes.c_double),
        ("mean_s", ctypes.c_double),
        ("min_s", ctypes.c_double),
        ("max_s", ctypes.c_double),
        ("stddev_s", ctypes.c_double),
        ("p50_s", ctypes.c_double),
        ("p90_s", ctypes.c_double),
        ("p99_s", ctypes.c_double),
        ("share", ctypes.c_double),
        ("unit", ctypes.c_char_p),
        ("units", ctypes.c_double),
        ("units_per_s", ctypes.c_double),
        ("flops", ctypes.c_double),
        ("flops_per_s", ctypes.c_double),
        ("mfu", ctypes.c_double),
    ]


class Summary(ctypes.Structure):
    """sonde_summary_t, field for field."""

    _fields_ = [
        ("total_duration_s", ctypes.c_double),
        ("sections", ctypes.c_uint64),
        ("steps", ctypes.c_uint64),
        ("units", ctypes.c_double),
        ("units_per_s", ctypes.c_double),
        ("unit", ctypes.c_char_p),
        ("flops", ctypes.c_double),
        ("flops_per_s", ctypes.c_double),
        ("dropped_events", ctypes.c_uint64),
        ("warnings", ctypes.c_uint64),
        ("n_stats", ctypes.c_size_t),
        ("stats", ctypes.POINTER(SectionStats)),
        ("not_recorded", ctypes.c_char_p),
    ]


def _candidates():
    env = os.environ.get("SONDE_LIBRARY")
    if env:
        return [env]
    out = [os.path.normpath(os.path.join(_HERE, "..", "..", "..", _SONAME))]
    root = os.path.normpath(os.path.join(_HERE, "..", ".."))
    for build in ("build", "build-release"):
        out.append(os.path.join(root, build, _SONAME))
    out.append(_SONAME)
    return out


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "sonde: cannot load libsonde; set SONDE_LIBRARY to its path. Tried: " + "; ".join(tried)
    )


lib = _load()

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_D = ctypes.c_double

_PROTOS = {
    "sonde_version": (_S, []),
    "sonde_strerror": (_S, [_I]),
    "sonde_err_name": (_S, [_I]),
    "sonde_last_error": (_S, []),
    "sonde_config_default": (Config, []),
    "sonde_config_from_env": (_I, [ctypes.POINTER(Config)]),
    "sonde_config_preset": (_I, [ctypes.POINTER(Config), _S]),
    "sonde_config_load_file": (_I, [ctypes.POINTER(Config), _S]),
    "sonde_config_from_args": (
        _I,
        [ctypes.POINTER(Config), ctypes.POINTER(_I), ctypes.POINTER(ctypes.c_char_p)],
    ),
    "sonde_config_set": (_I, [ctypes.POINTER(Config), _S, _S]),
    "sonde_config_get": (_I, [ctypes.POINTER(Config), _S, ctypes.c_char_p, ctypes.c_size_t]),
    "sonde_create": (_P, [ctypes.POINTER(Config)]),
    "sonde_destroy": (_I, [_P]),
    "sonde_name": (_S, [_P]),
    "sonde_file_path": (_S, [_P]),
    "sonde_status": (_I, [_P]),
    "sonde_session_begin": (_I, [_P, _S]),
    "sonde_session_end": (_I, [_P]),
    "sonde_begin": (_I, [_P, _S]),
    "sonde_end": (_I, [_P]),
    "sonde_metadata": (_I, [_P, _S, _S]),
    "sonde_metric": (_I, [_P, _S, _D]),
    "sonde_throughput_unit": (_I, [_P, _D, _D, _S]),
    "sonde_shape": (_I, [_P, _S, ctypes.POINTER(ctypes.c_int64), _I]),
    "sonde_flops": (_I, [_P, _D]),
    "sonde_event": (_I, [_P, _S]),
    "sonde_counter": (_I, [_P, _S, _D]),
    "sonde_sync": (_I, [_P]),
    "sonde_step": (_I, [_P]),
    "sonde_diffusion_step": (_I, [_P, _I, _D, _I, _D, _D]),
    "sonde_block": (_I, [_P, _I, _I, _D, _D]),
    "sonde_model_params": (_I, [_P, _S, _D]),
    "sonde_summary": (ctypes.POINTER(Summary), [_P]),
    "sonde_summary_free": (None, [ctypes.POINTER(Summary)]),
    "sonde_export": (_I, [_P, _S]),
    "sonde_clear": (_I, [_P]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
