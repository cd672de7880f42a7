"""`python -m sonde [FLAGS] SCRIPT.py [ARGS...]` and `python -m sonde [FLAGS] -m MODULE [ARGS...]`:
runs a Python program as `python SCRIPT.py ARGS` would, with sonde around it (as `python -m
cProfile` and `viztracer` do): every Python function call a section (unless --no-trace or
SONDE_TRACE_PYTHON=0), CPU, memory and GPU sampling, and the reports written when the program
ends. Exits with the program's own exit code (1 after an uncaught exception, as Python does).

FLAGS are libsonde's --profile-* flags (docs/configuration.md; --profile-help lists them) and
--no-trace; they come before the program, whose own arguments are left alone. The run is named
after the script or module unless --profile-name (or SONDE_NAME) says otherwise.
"""

import os
import runpy
import sys
import traceback

import sonde

USAGE = ("usage: python -m sonde [--profile-* FLAGS] [--no-trace] SCRIPT.py [ARGS...]\n"
         "       python -m sonde [--profile-* FLAGS] [--no-trace] -m MODULE [ARGS...]\n"
         "       python -m sonde COMMAND [ARGS...]   (the sonde command: python -m sonde --help)\n")

_SWITCHES = {"--profile", "--profile-with-stack", "--profile-record-shapes",
             "--profile-trace-python", "--profile-help"}
_ACTIVITIES = {"cpu", "gpu", "mem", "nvtx", "cuda"}


def _split(argv):
    """(sonde's flags, trace, module or None, program argv) from the words after `-m sonde`."""
    flags, trace, i = [], True, 0
    while i < len(argv):
        w = argv[i]
        if w == "--no-trace":
            trace, i = False, i + 1
        elif w == "--":
            i += 1
            break
        elif w.startswith("--profile"):
            flags.append(w)
            i += 1
            if "=" in w or w in _SWITCHES:
                continue
            if w == "--profile-activities":
                while i < len(argv) and argv[i].lower() in _ACTIVITIES:
                    flags.append(argv[i])
                    i += 1
            elif i < len(argv):
                flags.append(argv[i])
                i += 1
        else:
            break
    rest = argv[i:]
    if rest and rest[0] == "-m":
        if len(rest) < 2:
            raise SystemExit("python -m sonde: -m needs a module name\n" + USAGE)
        return flags, trace, rest[1], rest[1:]
    if not rest:
        raise SystemExit("python -m sonde: no script to run\n" + USAGE)
    return flags, trace, None, rest


def run(argv):
    """Runs the program the words name; returns its exit code."""
    flags, trace, module, prog = _split(argv)
    stem = module or os.path.splitext(os.path.basename(prog[0]))[0]
    if module is None and not os.path.isfile(prog[0]):
        sys.stderr.write("python -m sonde: %s: no such file\n" % prog[0])
        return 2
    # json and txt unless the environment or a flag names others: the HTML page, the trace and
    # the instances CSV cost more than the tracing on a traced run of a million calls (issue 35;
    # docs/python.md); any of them can be written later from the .sonde file
    cfg = sonde.Config({"name": stem, "trace_python": True, "formats": "json,txt"})
    cfg.from_env()
    try:
        cfg._c.from_args(["python"] + flags)
    except sonde.SondeError as e:
        sys.stderr.write("python -m sonde: %s\n" % e)
        return 2
    if "--profile-help" in flags:  # libsonde printed the flags
        return 0
    if not trace:
        cfg.set("trace_python", False)
    if cfg.get("enabled") != "1":  # the program runs all the same; a run that writes nothing
        sys.stderr.write("python -m sonde: profiling is off (SONDE_ENABLED=0, or enabled: false "
                         "in SONDE_CONFIG or a flag): %s runs without it and nothing is written\n"
                         % (module or prog[0]))
    prof = sonde.Profiler(cfg, from_env=False)
    sys.argv = list(prog)
    code = 0
    with prof:
        try:
            if module is not None:
                sys.path.insert(0, os.getcwd())
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                sys.path.insert(0, os.path.dirname(os.path.abspath(prog[0])))
                runpy.run_path(prog[0], run_name="__main__")
        except SystemExit as e:
            code = e.code
        except BaseException:  # the program's own failure: its traceback, as Python prints it
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
    fmts = prof.config["formats"].split(",")
    if prof.file_path and "html" not in fmts and "all" not in fmts:
        sys.stderr.write("sonde: %s (reports: %s); the HTML page and the trace: sonde export %s "
                         "--format html,trace\n" % (prof.file_path, ",".join(fmts) or "none",
                                                    prof.file_path))
    if code is None:
        return 0
    if not isinstance(code, int):
        sys.stderr.write("%s\n" % code)
        return 1
    return code
