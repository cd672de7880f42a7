"""sonde - libsonde for Python, through its C extension sonde._sonde (no third-party dependency).

    import sonde

    with sonde.Profiler({"name": "inference", "output_dir": "profiles"}) as prof:
        with prof.session("generate"):
            with prof.profile("prefill", metadata={"batch": 8}):
                run_prefill()
            with prof.stage("decode"):
                tokens = run_decode()
                prof.record_throughput(tokens)
            prof.step()
        print(prof.get_summary()["units_per_s"])
    # leaving the block writes OUTDIR/NAME.{sonde,json,csv,txt,trace.json.gz,html}

Everything is recorded by libsonde itself, so a Python program's reports are the same files, in
the same formats, as a C program's, and every `sonde` CLI command reads them. docs/python.md has
the whole API; configuration keys are those of docs/configuration.md.
"""

import functools
import inspect
import json
import os
import sys
import threading
import warnings
import weakref

try:
    from . import _sonde
except ImportError as _e:  # a source checkout that was not built, or built for another python
    raise ImportError(
        "sonde: the C extension sonde._sonde is not built for this interpreter (%s, Python %d.%d). "
        "Install it with `pip install .` from a clone (builds it for this interpreter), or run "
        "`make` and set PYTHONPATH=build/python. (%s)" % (sys.executable, sys.version_info[0],
                                                  sys.version_info[1], _e)
    ) from _e

__version__ = _sonde.version()  # libsonde's, the package's too (pip show sonde)

__all__ = [
    "__version__",
    "SondeError",
    "Config",
    "Profiler",
    "profile_function",
    "current",
    "add_profiling_args",
    "create_profiler_from_args",
    "version",
    "cli",
    "json_text",
    "job_rank",
    "trace_python",
    "PythonTracer",
]

# Error codes, as in include/sonde/sonde.h.
EINVAL, ENOMEM, EIO, EUNBALANCED, EOPEN, EDISABLED = -1, -2, -3, -4, -5, -6
EFORMAT, ENOTFOUND, EDROPPED, ESTATE, EUNSUPPORTED = -7, -8, -9, -10, -11


class SondeError(Exception):
    """A libsonde call failed. code is the negative SONDE_E* code, name its symbol
    ("SONDE_EINVAL"); the message is libsonde's, naming the key, file or call."""

    def __init__(self, code, message):
        self.code = code
        self.name = _sonde.err_name(code)
        super().__init__(message)


_sonde.set_error_class(SondeError)


def _b(s):
    """str -> bytes for C; None stays None. Anything else is formatted with str()."""
    if s is None:
        return None
    if isinstance(s, bytes):
        return s
    return str(s).encode("utf-8", "surrogateescape")


def _text(v):
    """A configuration value as the text libsonde parses (None: NULL)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return b"1" if v else b"0"
    if isinstance(v, dict):  # session_tags: {"experiment": "v1"} -> "experiment=v1"
        return _b(",".join("%s=%s" % (k, x) for k, x in v.items()))
    if isinstance(v, (list, tuple, set, frozenset)):
        return _b(",".join(str(x) for x in v))
    if isinstance(v, float):
        return _b(repr(v))
    return _b(v)


def job_rank():
    """(rank, world_size, local_rank) of this process in a distributed job, read from the
    launcher's environment as libsonde reads it (torchrun, Open MPI, MPICH/PMI, Slurm); -1 for
    what it does not say."""
    return _sonde.job_rank()


def _rank_world():
    """(rank, world_size) of this process: the launcher's environment as libsonde reads it,
    else torch.distributed's process group where the program initialized one (mp.spawn gives
    the rank to init_process_group, not to the environment); None when neither says."""
    rank, world, _ = _sonde.job_rank()
    return (rank, max(world, 1)) if rank >= 0 else _torch_group()


def _torch_group():
    """(rank, world_size) of the torch.distributed process group the program initialized, or
    None (nothing is imported for it)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (RuntimeError, ValueError, AttributeError):
        pass  # a group being torn down
    return None


def json_text(value):
    """A value as the text sonde records for metadata and event arguments: a str (or bytes) as
    it is, anything else as its JSON text (0.5, true, [1, 2], {"k": "v"})."""
    if isinstance(value, (str, bytes)):
        return value
    return json.dumps(value, default=str)


def _check(rc, what=None):
    """Raises SondeError for a negative libsonde code (with its detailed message)."""
    if rc < 0:
        msg = _sonde.last_error() or _sonde.strerror(rc)
        if what:
            msg = "%s: %s" % (what, msg)
        raise SondeError(rc, msg)
    return rc


def version():
    """libsonde's version string ("0.1.0")."""
    return _sonde.version()


def cli(args):
    """Runs the sonde command (the `sonde` executable's code, inside this process) with the
    arguments args (["aggregate", "reports/", "--format", "json", "-o", "all.json"]) and
    returns its exit code: 0 done, 1 a finding asked to fail on, 2 bad usage or input. Its
    output goes to this process's stdout and stderr. `python -m sonde ARGS` is the same."""
    sys.stdout.flush()
    sys.stderr.flush()
    return _sonde.cli([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])


class Config:
    """A sonde_config: every key of docs/configuration.md, set by name.

    Config(name="run", gpu_interval_s=0.1, formats=["json", "trace"]) starts from the defaults,
    then a preset and a YAML file when given, then the keyword arguments. values may also be a
    path (str or os.PathLike) of a YAML file: Config("sonde.yaml") is
    Config(config_file="sonde.yaml"). A misspelt key or a bad value raises SondeError
    (SONDE_ENOTFOUND with a suggestion, SONDE_EINVAL naming the key and what was expected) at
    once, not when the profiler starts; values of another type, TypeError."""

    def __init__(self, values=None, *, preset=None, config_file=None, **kwargs):
        if isinstance(values, (str, bytes, os.PathLike)):  # a YAML file, as sonde.yaml
            if config_file is not None:
                raise TypeError("Config: a YAML file given twice (%r and config_file=%r)"
                                % (values, config_file))
            values, config_file = None, values
        elif values is not None and not isinstance(values, (Config, dict)) and \
                not hasattr(values, "__dict__"):
            raise TypeError("Config: expected a dict of keys, a Config, an object with "
                            "attributes (argparse's Namespace) or a YAML file's path, not %s"
                            % type(values).__name__)
        self._c = _sonde.Config()
        if preset is not None:
            self._c.preset(_b(preset))
        if config_file is not None:
            self._c.load_file(_b(os.fspath(config_file)))
        if values is not None:
            if isinstance(values, Config):
                self._c = _sonde.Config(values._c)
            else:
                items = values if isinstance(values, dict) else vars(values)
                for k, v in items.items():
                    self.set(k, v)
        for k, v in kwargs.items():
            self.set(k, v)

    def set(self, key, value):
        """Sets one key from a Python value (bool, number, str, list of formats, None)."""
        self._c.set(_b(key), _text(value))
        return self

    def get(self, key):
        """One key's value as text, as `sonde config` prints it ("0.5", "json,csv", "")."""
        return self._c.get(_b(key))

    def __getitem__(self, key):
        return self.get(key)

    def __setitem__(self, key, value):
        self.set(key, value)

    def from_env(self):
        """Applies SONDE_CONFIG and the SONDE_<KEY> variables over this configuration."""
        self._c.from_env()
        return self


_tls = threading.local()


def current():
    """The innermost Profiler entered with `with` on this thread, or None."""
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None


class _SectionMeta:
    """A section or a session with metadata, as a context manager (without metadata, the C
    type _sonde.Section serves alone)."""

    __slots__ = ("_sec", "_meta")

    def __init__(self, sec, metadata):
        self._sec = sec
        self._meta = metadata

    def __enter__(self):
        p = self._sec.__enter__()
        for k, v in self._meta.items():
            p.add_metadata(k, v)
        return p

    def __exit__(self, et, ev, tb):
        return self._sec.__exit__(et, ev, tb)


class Profiler:
    """One libsonde profiler: recording starts when it is made, reports are written by close()
    (or when a `with` block around it ends, or at the process's exit).

    config: None (the defaults), a Config, a dict of keys, or an object whose attributes are
    keys (a dataclass). Keyword arguments are keys too. Unless from_env is False, the SONDE_*
    environment variables are applied last, as in a C program that calls
    sonde_config_from_env; as there, a bad value is said on stderr (naming the variable) and
    none of the environment is applied: the program runs with the configuration it gave, never
    stopped by a variable in its environment. A bad value given in config or kwargs raises
    SondeError. (Config.from_env(), called by the program itself, raises too.)"""

    def __init__(self, config=None, *, from_env=True, **kwargs):
        cfg = config if isinstance(config, Config) and not kwargs else Config(config, **kwargs)
        if from_env:
            try:
                cfg = Config(cfg).from_env()
            except SondeError:
                pass  # libsonde says it when the profiler is made (sonde__env_failure)
        if cfg.get("rank") == "-1" and _sonde.job_rank()[0] < 0:
            rw = _torch_group()  # where the environment says nothing
            if rw is not None:
                cfg = Config(cfg)
                cfg.set("rank", rw[0])
                cfg.set("world_size", rw[1])
        self.config = cfg
        self._lock = threading.Lock()
        self._handle = _sonde.Handle(cfg._c)
        # the hot way in as a C call (profile() below is what it does, and its other cases),
        # unless a subclass has a profile() of its own
        if type(self).profile is Profiler.profile:
            self.profile = _sonde.ProfileFn(self._handle, weakref.ref(self))
        self._name = self._handle.name()
        self.output_dir = cfg.get("output_dir") or "./sonde-out"
        self.file_path = self._handle.file_path()
        self.closed_status = None
        self._said = False  # close(): the failure was printed by libsonde when it came
        self._tracer = None
        self._attached = []  # what close() stops first (sonde.torch.profile_operators)
        self._after_step = []  # called after each step() (sonde.torch.track_cuda)
        if cfg.get("trace_python") == "1" and self.enabled:
            from ._tracing import PythonTracer
            self._tracer = PythonTracer(self).start()

    # -- lifetime ---------------------------------------------------------------------------
    def _h(self):
        h = self._handle
        if h is None:
            raise SondeError(ESTATE, "the profiler %r is closed" % self._name)
        return h

    @property
    def name(self):
        """The run name, the stem of every file (a -N suffix when the name was taken)."""
        return self._name

    @property
    def trace_path(self):
        """Where the Chrome/Perfetto trace is (or will be) written; None when the profiler
        records nothing (disabled, or its output directory could not be written)."""
        if self.file_path is None:
            return None
        return os.path.join(self.output_dir, self._name + ".trace.json.gz")

    @property
    def enabled(self):
        return self.config.get("enabled") == "1"

    @property
    def status(self):
        """0 while recording normally, else the first internal error (a negative code)."""
        return self._h().status()

    def close(self, raise_on_error=True):
        """Stops recording, writes the configured reports and frees the profiler. Returns 0, or
        raises SondeError (SONDE_EOPEN when sections were still open: they are closed now and
        listed in the report; SONDE_EIO when a file could not be written). Idempotent."""
        h = self._handle
        if h is not None and self._attached:
            h.mark_end()  # the run is the program's: folding torch's events is sonde's work
        try:
            self._stop_attached()
        except BaseException:
            self._close(False)
            raise
        return self._close(raise_on_error)

    def _stop_attached(self):
        """Stops what records into this profiler from outside (sonde.torch's torch.profiler
        backend, CUDA tracking), last attached first: what they hold is in the run after it."""
        for a in list(reversed(self._attached)):
            a.stop()

    def _close(self, raise_on_error):
        with self._lock:
            h, self._handle = self._handle, None
        if h is None:
            return self.closed_status
        if self._tracer is not None:
            self._tracer.stop()
        stack = getattr(_tls, "stack", None)
        if stack and self in stack:
            stack.remove(self)
        self._said = h.status() != 0  # libsonde printed it on stderr when it came
        _note_distributed(h)
        rc = h.destroy()
        self.closed_status = rc
        if raise_on_error:
            _check(rc, "close")
        return rc

    def __enter__(self):
        if not hasattr(_tls, "stack"):
            _tls.stack = []
        _tls.stack.append(self)
        return self

    def __exit__(self, et, ev, tb):
        # The end of a `with` block never ends the program (docs/reliability.md): reports that
        # could not be written, or sections another thread still has open, are a
        # RuntimeWarning, the recording kept; an explicit close() raises. With an exception in
        # flight, open sections are expected: nothing is said, and nothing masks it. A failure
        # libsonde already printed when it came (the profiler's status: an output directory it
        # could not make) is not said a second time.
        rc = self.close(raise_on_error=False)
        if rc < 0 and et is None and not self._said:
            warnings.warn("sonde: closing the profiler at the end of its with block: %s"
                          % (_sonde.last_error() or _sonde.strerror(rc)), RuntimeWarning,
                          stacklevel=2)
        return False

    # -- sections ---------------------------------------------------------------------------
    def _section(self, name, metadata, session):
        h = self._handle
        if h is None:
            self._h()  # raises: closed
        sec = h.section(self, name if isinstance(name, (str, bytes)) else str(name), session)
        return _SectionMeta(sec, metadata) if metadata else sec

    def profile(self, name, metadata=None):
        """A section as a context manager: `with prof.profile("decode", metadata={...}):`.
        On an instance this is a C call (_sonde.ProfileFn) for a str name without metadata,
        and this method for the rest."""
        h = self._handle  # the hot way in: one C call makes (or finds) the section
        if h is None or metadata or name.__class__ is not str:
            return self._section(name, metadata, False)
        return h.section(self, name)

    def stage(self, name, metadata=None):
        """The same as profile(): a stage is a section inside a session."""
        return self._section(name, metadata, False)

    def session(self, name, metadata=None):
        """A session (a group of stages; beginning one ends the previous one)."""
        return self._section(name, metadata, True)

    def start(self, name, metadata=None):
        """Opens a section on this thread without a `with` block; close it with stop()."""
        self._section(name, metadata, False).__enter__()

    def stop(self):
        """Closes this thread's innermost open section."""
        self._h().end()

    def step_begin(self):
        """Where the next step begins: time before it (and after the last step) is in no step."""
        self._h().step_begin()

    def name_thread(self, name):
        """The calling thread's name in the reports (else its OS name, else "tid N")."""
        self._h().thread_name(_b(name))

    def profile_function(self, func=None, *, name=None):
        """Decorator: every call of the function is a section named after it
        (module.qualname, or name): `@prof.profile_function`, `@prof.profile_function()`,
        `@prof.profile_function("name")` or `@prof.profile_function(name="name")`."""
        return _decorate(func, name, self, None)

    # -- measurements -------------------------------------------------------------------------
    def add_metadata(self, key, value):
        """Metadata of the innermost open section (else the session, else the run)."""
        self._h().metadata(_b(key), _b(value))

    def record_metric(self, name, value):
        """A numeric metric (count, mean, min and max are kept); value must be finite."""
        self._h().metric(_b(name), float(value))

    def record_throughput(self, units, seconds=None, unit=None):
        """units processed (tokens unless unit names another); seconds None: the open
        section's own duration."""
        self._h().throughput(float(units), 0.0 if seconds is None else float(seconds), _b(unit))

    def record_flops(self, flops):
        """Floating-point operations done by the open section (achieved FLOP/s, MFU)."""
        self._h().flops(float(flops))

    def record_shape(self, name, dims):
        """A tensor shape as metadata of the open section (with record_shapes on)."""
        self._h().shape(_b(name), [int(d) for d in dims])

    def event(self, name, args=None):
        """An instant event on this thread's track; args, a dict of at most 64 items, travels
        with it into the JSON (events[].occurrences), the HTML's Events table and the trace.
        A str value is kept as it is, any other value as its JSON text (0.5, true, [1, 2])."""
        if not args:
            self._h().event(_b(name))
            return
        self._h().event(_b(name), {_b(k): _b(json_text(v)) for k, v in args.items()})

    def counter(self, name, value):
        """A sample of a process-wide counter track."""
        self._h().counter(_b(name), float(value))

    def step(self):
        """The end of one step (iteration); drives the step schedule."""
        self._h().step()
        for f in self._after_step:
            f()

    def sync(self):
        """Right after a barrier, on every rank: lets `sonde merge` align the ranks."""
        self._h().sync()

    def record_diffusion_step(self, step, timestep, block_size=0, seconds=None,
                              guidance_scale=0.0):
        """One denoising step (seconds None: the open section's duration; guidance_scale None:
        none given, recorded as 0)."""
        self._h().diffusion_step(int(step), float(timestep), int(block_size),
                                 0.0 if seconds is None else float(seconds),
                                 0.0 if guidance_scale is None else float(guidance_scale))

    def record_block(self, block_index, block_size_frames, seconds=None, memory_mb=0.0):
        """One block of frames (FPS and BPS in the report)."""
        self._h().block(int(block_index), int(block_size_frames),
                        0.0 if seconds is None else float(seconds), float(memory_mb))

    def record_model_params(self, name, count):
        """A model's parameter count."""
        self._h().model_params(_b(name), float(count))

    # -- reading back -------------------------------------------------------------------------
    def get_current_metrics(self):
        """The latest sample of every figure the sampler reads, as the live display shows them:
        {"cpu %": 12.5, "rss MiB": 310.2, "gpu0 util %": 87.0, ...} (docs/monitoring.md names
        them); empty before the first sample or with monitoring off."""
        return self._h().current_metrics()

    def export(self, path=None):
        """Writes every configured report now (path None), or one file whose format follows
        the extension (.json, .csv, .txt, .trace.json.gz). Recording goes on."""
        for a in self._attached:  # what torch.profiler recorded so far, first
            a.flush()
        self._h().export(_b(os.fspath(path)) if path else None)

    def get_summary(self):
        """The run so far as a dict: total_duration_s, sections, steps, units, unit,
        units_per_s, flops, flops_per_s, dropped_events, warnings, not_recorded (None, or why
        nothing was recorded: then every figure is 0), stats (one dict per section name,
        largest total first, with the fields of sonde_section_stats) and operators (one dict
        per operator name that sonde.torch.profile_operators folded in, largest self CPU time
        first, with the fields of sonde_op_stats)."""
        return self._h().summary()

    def clear(self):
        """Discards everything recorded so far."""
        self._h().clear()

    def trigger(self, reason="prof.trigger"):
        """The flight recorder's trigger (Profiler(flight_recorder_s=S)): the last S seconds
        and flight_recorder_after_s after now are written as NAME-triggerN.sonde and its reports
        by sonde's writer thread (this call does no I/O; docs/flight-recorder.md). reason heads
        the dump's report. Without the flight recorder everything is recorded anyway: an instant
        "sonde.trigger" marks the moment."""
        self._h().trigger(_b(str(reason)))


def _decorate(func, name, profiler, which):
    """The decorators' common part: each call of f is a section named name (or module.qualname)
    in profiler, or in the one which() returns at call time; none, or a closed one: f runs
    unprofiled. The wrapper is the C type _sonde.Wrapped (a call costs one sonde_begin and one
    sonde_end around the function's own)."""

    if isinstance(func, (str, bytes)):  # @profile_function("name"): the name, positionally
        if name is not None:
            raise TypeError("profile_function: the name was given twice (%r and name=%r)"
                            % (func, name))
        func, name = None, func
    elif func is not None and not callable(func):
        raise TypeError("profile_function: expected a function or a section name, got %r"
                        % (func,))

    def wrap(f):
        label = _b(name or "%s.%s" % (f.__module__, f.__qualname__))
        if inspect.isgeneratorfunction(f):
            w = _generator_wrapper(f, _sonde.Wrapped(_resume, label, profiler, which))
        elif inspect.isasyncgenfunction(f):
            w = _async_generator_wrapper(f, label, profiler, which)
        elif inspect.iscoroutinefunction(f):
            w = _coroutine_wrapper(f, label, profiler, which)
        else:
            return functools.update_wrapper(_sonde.Wrapped(f, label, profiler, which), f)
        return functools.update_wrapper(w, f)

    return wrap(func) if func is not None else wrap


# Generators and coroutines (issue 36 #16): calling one only makes the object, so a section
# around the call would time nothing. A generator's section is each resume (each next(), send()
# or throw() until it returns: the generator's own work, not the consumer's), as the Python
# tracer records them. A coroutine's is the whole await, from its first step to its result:
# the time `await f()` takes; an async generator's, each `async for` step the same way.

def _resume(gen, throw, value):
    """One resume of gen (its send or, with throw, its throw): what the section times."""
    return gen.throw(value) if throw else gen.send(value)


def _generator_wrapper(f, resume):
    def wrapper(*args, **kwargs):
        gen = f(*args, **kwargs)
        throw, value = False, None
        while True:
            try:
                item = resume(gen, throw, value)
            except StopIteration as stop:
                return stop.value
            try:
                throw, value = False, (yield item)
            except GeneratorExit:
                gen.close()
                raise
            except BaseException as e:  # thrown in by the consumer: on into the generator
                throw, value = True, e
    return wrapper


async def _timed(awaitable, label, profiler, which):
    """await awaitable inside a section from its first step to its result, in profiler, or in
    the one which() gives when it starts (none, or a closed one: unprofiled). Sections end
    innermost-first on their thread, so concurrent tasks that await the same function on one
    event loop swap their ends but keep its count and total time (docs/python.md)."""
    prof = profiler if profiler is not None else (which() if which is not None else None)
    h = getattr(prof, "_handle", None) if prof is not None else None
    if not isinstance(h, _sonde.Handle):
        return await awaitable
    h.begin(label)
    try:
        return await awaitable
    finally:
        if prof._handle is h:  # closed meanwhile: nothing to end
            h.end()


def _coroutine_wrapper(f, label, profiler, which):
    async def wrapper(*args, **kwargs):
        return await _timed(f(*args, **kwargs), label, profiler, which)
    return wrapper


def _async_generator_wrapper(f, label, profiler, which):
    async def wrapper(*args, **kwargs):
        agen = f(*args, **kwargs)
        throw, value = False, None
        while True:
            step = agen.athrow(value) if throw else agen.asend(value)
            try:
                item = await _timed(step, label, profiler, which)
            except StopAsyncIteration:
                return
            try:
                throw, value = False, (yield item)
            except GeneratorExit:
                await agen.aclose()
                raise
            except BaseException as e:
                throw, value = True, e
    return wrapper


def profile_function(func=None, *, name=None, profiler=None):
    """Decorator: each call is a section in `profiler`, or in the profiler entered with `with`
    on the calling thread at call time (none: the function runs unprofiled). On a generator
    function each resume is a section; on an `async def`, the whole await."""
    return _decorate(func, name, profiler, None if profiler is not None else current)


# -- argparse -----------------------------------------------------------------------------------
_SWITCHES = ("profile_with_stack", "profile_record_shapes", "profile_trace_python")
_VALUES = (
    "profile_name", "profile_dir", "profile_skip_first", "profile_wait", "profile_warmup",
    "profile_active", "profile_repeat", "profile_start_step", "profile_end_step",
    "profile_memory_every", "profile_config", "profile_preset",
)


def add_profiling_args(parser):
    """Adds sonde's --profile* flags (the C library's own, docs/configuration.md) to an
    argparse parser. Unset flags stay None, so they leave the configuration alone."""
    g = parser.add_argument_group("profiling (sonde)")
    g.add_argument("--profile", action="store_true", default=False, help="turn profiling on")
    g.add_argument("--profile-name", help="run name, the stem of every file")
    g.add_argument("--profile-dir", help="directory for every file")
    g.add_argument("--profile-activities", nargs="+", metavar="ACTIVITY",
                   help="what to sample: CPU GPU MEM; NVTX for Nsight ranges; CUDA for kernels (CUPTI)")
    g.add_argument("--profile-with-stack", action="store_true", default=None,
                   help="source locations of sections in the trace")
    g.add_argument("--profile-record-shapes", action="store_true", default=None,
                   help="record shapes")
    g.add_argument("--profile-trace-python", action="store_true", default=None,
                   help="every Python function call a section")
    for flag, what in (("skip-first", "steps skipped before the first cycle"),
                       ("wait", "steps not recorded at the start of each cycle"),
                       ("warmup", "steps recorded and discarded"),
                       ("active", "steps kept in each cycle"),
                       ("repeat", "cycles (0: until the end)"),
                       ("start-step", "first step of a window"),
                       ("end-step", "step the window ends at (excluded)"),
                       ("memory-every", "a memory snapshot every N steps")):
        g.add_argument("--profile-" + flag, type=int, metavar="N", help=what)
    g.add_argument("--profile-config", metavar="FILE", help="a YAML configuration file")
    g.add_argument("--profile-preset", metavar="NAME",
                   help="development, production or debugging")
    return parser


def create_profiler_from_args(args, profile_name=None, config=None, **kwargs):
    """A Profiler from an argparse namespace carrying the --profile* flags (see
    add_profiling_args): the flags are handed back to libsonde's own parser
    (sonde_config_from_args), so they mean exactly what they mean to a C program. Without
    --profile the profiler is disabled (every call a cheap no-op, no file written).
    profile_name overrides --profile-name; config and keyword arguments are the program's
    settings, below the preset, the file, the environment and the flags."""
    cfg = Config(config, **kwargs)
    enabled = bool(getattr(args, "profile", False))
    cfg.set("enabled", enabled)
    cfg.from_env()  # the environment, below the flags; a preset or file goes under it again
    words = ["python"]
    if enabled:
        words.append("--profile")
    for attr in _SWITCHES:
        if getattr(args, attr, None):
            words.append("--" + attr.replace("_", "-"))
    for attr in _VALUES:
        v = getattr(args, attr, None)
        if attr == "profile_name" and profile_name is not None:
            v = profile_name
        if v is not None:
            words += ["--" + attr.replace("_", "-"), str(v)]
    acts = getattr(args, "profile_activities", None)
    if acts:
        words.append("--profile-activities")
        words += [str(a) for a in acts]
    try:
        cfg._c.from_args([_b(w) for w in words])
    except SondeError as e:
        raise SondeError(e.code, "create_profiler_from_args: %s" % e) from None
    return Profiler(cfg, from_env=False)


from ._tracing import PythonTracer, trace_python  # noqa: E402 (needs the names above)



def _note_distributed(h):
    """torch.distributed's backend as the run's metadata "distributed.backend" (the TensorBoard
    trace's distributedInfo says it), where the program initialized a process group; nothing is
    imported for it."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            h.metadata("distributed.backend", str(dist.get_backend()))
    except (RuntimeError, ValueError, AttributeError):
        pass  # a group being torn down, or a torch without these: the trace says "unknown"


class _ForkKey:
    """The object multiprocessing's after-fork registry keys sonde's callback by (kept alive)."""


_FORK_KEY = _ForkKey()


def _finish_at_worker_exit(_key=None):
    mpu = sys.modules.get("multiprocessing.util")
    if mpu is not None:
        mpu.Finalize(None, _sonde.finish_all, exitpriority=-100)


def _after_fork_in_child():
    """A forked child that is a multiprocessing worker ends through os._exit, after running
    multiprocessing's finalizers but not exit()'s handlers: sonde finishes the child's runs
    (NAME-pidN, with their reports) in one of those finalizers, as exit() would have (issue 36
    #10). The worker's bootstrap empties the finalizers it inherited and then runs the after-fork
    callbacks, so the finalizer is registered from one of those. A child that calls exit() is
    finished by exit(), once."""
    mpu = sys.modules.get("multiprocessing.util")
    if mpu is not None:
        mpu.register_after_fork(_FORK_KEY, _finish_at_worker_exit)
        _finish_at_worker_exit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
