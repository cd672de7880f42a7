"""sonde's torch.profiler backend (sonde.torch.profile_operators): libsonde's step schedule drives
torch.profiler.profile, and each window torch records is folded into sonde's recording through
sonde_ops, on sonde's clock. docs/pytorch.md describes it; this module is the mechanism."""

import atexit
import bisect
import json
import sys
import threading
import time
import weakref

import torch
from torch.profiler import ProfilerAction, ProfilerActivity

import sonde

# sonde_ops kinds (include/sonde/sonde.h)
OP_CPU, OP_MEMORY, OP_KERNEL, OP_MEMCPY, OP_MEMSET = 0, 1, 2, 3, 4
# A torch thread number sonde could not map to a kernel tid is given this tid + its number
# (src/model/ops.c names its track "torch thread N").
TORCH_TID = 0x40000000
_USER_SCOPE = 7        # at::RecordScope::USER_SCOPE: record_function ranges
_MARK = "sonde.tid:"   # the marker ranges that tell torch's thread numbers from kernel tids
_HOOKED = ("step", "profile", "stage", "session")  # the profiler's methods it takes over

_tls = threading.local()

# The torch profilers running now. One still running when the interpreter exits hangs the exit:
# torch's thread-local profiler state, destroyed after the interpreter is gone, waits for the GIL
# for ever (PyTorch 1.13: "PythonTracer::stop() was not called", then no exit). A program that
# never closes its sonde.Profiler (Diffulex's backend="pytorch" does not) would never end.
_running = weakref.WeakSet()


@atexit.register
def _stop_running():
    """At the interpreter's exit, before its teardown: each torch profiler still running is
    stopped, its open window folded into the run that sonde's own exit handler then writes."""
    for tp in list(_running):
        try:
            tp.stop()
        except Exception as e:  # one failing does not keep the others running
            print("sonde.torch: stopping torch.profiler at exit: %s" % e, file=sys.stderr)

# A record_function range without record_function's handle tensor (PyTorch 1.13's enter makes it
# with aten::zeros, which would be traced as operators of sonde's own making).
if hasattr(torch.ops.profiler, "_record_function_enter_new"):
    def _rf_enter(name):
        return torch.ops.profiler._record_function_enter_new(name, None)

    def _rf_exit(h):
        torch.ops.profiler._record_function_exit._RecordFunction(h)
else:  # pragma: no cover (PyTorch before 1.13)
    def _rf_enter(name):
        r = torch.autograd.profiler.record_function(name)
        r.__enter__()
        return r

    def _rf_exit(h):
        h.__exit__(None, None, None)


# sonde.torch's own autograd identities (instrument(backward=True): the _Mark function, its
# backward and autograd's range around it), and the aliasing done inside them: sonde's doing, not
# the program's, so in no table and no trace (issue 35)
_OWN_OPS = ("_Mark", "_MarkBackward", "autograd::engine::evaluate_function: _MarkBackward")


# sonde_op flags: the figures of PyTorch's own table (key_averages) for an operator, and a range
# the program's hooks run in (a section a gradient hook closes inside it ends with it)
OP_F_TABLE, OP_F_LEFT_OUT, OP_F_HOOK_RANGE = 1, 2, 4
# autograd's range around AccumulateGrad: where backward=True's gradient hooks run
_HOOK_RANGES = frozenset(("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",))
# the events PyTorch 1.13's table never lists (torch.autograd.profiler_util._filter_name)
_TABLE_FILTERED = frozenset(("[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                             "profiler::_record_function_enter_new",
                             "profiler::_record_function_exit", "aten::is_leaf",
                             "aten::output_nr", "aten::_version"))


# PyTorch 2 times its events in ns (KinetoEvent.start_ns, duration_ns), 1.13 in whole
# microseconds (start_us, duration_us): _span_ns reads whichever this torch has.
_NS = hasattr(getattr(torch._C._autograd, "_KinetoEvent", None), "start_ns")


def _span_ns(e):
    """An event's start on torch's clock (ns since the epoch) and its duration, in ns."""
    if _NS:
        return int(e.start_ns()), int(e.duration_ns())
    return int(e.start_us()) * 1000, int(e.duration_us()) * 1000


def _table_figures(events):
    """{index in events: (child_ns, left_out)}: each CPU event as PyTorch's own table counts it
    (EventList._populate_cpu_children, then _remove_dup_nodes, as torch 1.13 does them, over the
    same events in the same order): the time of its children there, and whether the table leaves
    it out (a call that is the only child of a call of its name, or a name it never lists). An
    async event has no children and no self time (its child time is its duration). sonde's table
    takes these figures, so it equals key_averages() row for row (issue 35 #3)."""
    cpu = torch._C._autograd.DeviceType.CPU
    names, dur, parent, kids, out, by_thread = {}, {}, {}, {}, {}, {}
    for i, e in enumerate(events):
        name = e.name()
        if name in _TABLE_FILTERED:
            out[i] = (0, True)
            continue
        if e.device_type() != cpu:
            continue
        s, d = _span_ns(e)
        if e.is_async() or e.start_thread_id() != e.end_thread_id():
            out[i] = (d, False)
            continue
        names[i] = "ProfilerStep*" if name.startswith("ProfilerStep#") else name
        dur[i] = d
        by_thread.setdefault(e.start_thread_id(), []).append((s, -(s + d), i))
    for rows in by_thread.values():
        rows.sort(key=lambda r: (r[0], r[1]))  # stable: ties keep the events' order
        stack = []
        for s, neg_end, i in rows:
            while stack:
                ps, pneg, p = stack[-1]
                if s >= -pneg or -neg_end > -pneg:
                    stack.pop()
                else:
                    parent[i] = p
                    kids.setdefault(p, []).append(i)
                    break
            stack.append((s, neg_end, i))
    gone = set()
    order = list(names)  # the events' order, as the table's list holds them
    while True:
        dropped = set()
        for i in order:
            p = parent.get(i)
            if p is None or names[p] != names[i] or len(kids.get(p, ())) != 1:
                continue
            kids[p] = kids.get(i, [])
            for c in kids[p]:
                parent[c] = p
            dropped.add(i)
        if not dropped:
            break
        gone |= dropped
        order = [i for i in order if i not in dropped]
    for i in names:
        out[i] = (sum(dur[c] for c in kids.get(i, ())), i in gone)
    return out


def _own_spans(events):
    """{torch thread: ([starts], [ends])}: the merged time ranges (ns, torch's clock) of
    _OWN_OPS, sorted, disjoint."""
    by = {}
    for e in events:
        if e.name() in _OWN_OPS:
            s, d = _span_ns(e)
            by.setdefault(e.start_thread_id(), []).append((s, s + d))
    out = {}
    for th, v in by.items():
        v.sort()
        merged = [list(v[0])]
        for a, b in v[1:]:
            if a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        out[th] = ([a for a, _ in merged], [b for _, b in merged])
    return out


def _in_own(own, th, s, e):
    """Whether [s, e] (ns, torch's clock) on torch thread th lies inside one of sonde's own ops."""
    spans = own.get(th)
    if not spans:
        return False
    k = bisect.bisect_right(spans[0], s) - 1
    return k >= 0 and e <= spans[1][k]


def _clock_offset(wall=time.time_ns, mono=time.monotonic_ns, tries=8):
    """torch's clock (CLOCK_REALTIME) less CLOCK_MONOTONIC, in ns. The wall clock is read between
    two monotonic reads, and the tightest of tries such brackets is kept: a thread preempted
    between two bare reads would shift every operator of the window by the time it was off the
    CPU (hundreds of microseconds on a loaded machine), out of the sections around it."""
    best = None
    for _ in range(tries):
        m0 = mono()
        w = wall()
        m1 = mono()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, w - (m0 + (m1 - m0) // 2))
    return best[1]


def _fold(events, skip, off_ns, record_shapes):
    """torch's events (KinetoEvent-like objects) as sonde_ops tuples: CPU operators, memory,
    and CUDA kernels, copies and sets. skip: names of record_function ranges that mirror sonde's
    own sections (left out: sonde has them); off_ns: torch's clock (the epoch's time) less
    CLOCK_MONOTONIC, in ns. Returns (entries, kernel tids seen)."""
    tids = {}
    for e in events:  # the markers first: torch thread number -> kernel tid
        n = e.name()
        if n.startswith(_MARK):
            tids[e.start_thread_id()] = int(n[len(_MARK):])
    own = _own_spans(events)
    table = _table_figures(events)
    out = []
    for k, e in enumerate(events):
        name = e.name()
        t0, dur = _span_ns(e)
        start = t0 - off_ns
        if start < 0:
            continue
        dev = e.device_type()
        if dev == torch._C._autograd.DeviceType.CPU or name == "[memory]":
            th = e.start_thread_id()
            tid = tids.get(th, TORCH_TID + th)
            if name == "[memory]":
                where = -1 if dev == torch._C._autograd.DeviceType.CPU else e.device_index()
                out.append((OP_MEMORY, None, start, 0, tid, where, 0, 0, 0.0, int(e.nbytes()),
                            None))
                continue
            if name.startswith(_MARK) or (e.scope() == _USER_SCOPE and
                                          (name in skip or name.startswith("ProfilerStep#"))):
                continue
            if own and _in_own(own, e.start_thread_id(), t0, t0 + dur):
                continue
            shapes = None
            if record_shapes:
                s = e.shapes()
                if any(len(x) for x in s):
                    shapes = json.dumps([list(x) for x in s])
            child_ns, left_out = table.get(k, (0, False))
            out.append((OP_CPU, name, start, dur, tid, 0, 0,
                        int(e.correlation_id()), float(e.flops() or 0), 0, shapes,
                        OP_F_TABLE | (OP_F_LEFT_OUT if left_out else 0) |
                        (OP_F_HOOK_RANGE if name in _HOOK_RANGES else 0), child_ns))
        else:  # GPU work: linked to its CPU operator by correlation
            kind = (OP_MEMCPY if name.startswith("Memcpy") else
                    OP_MEMSET if name.startswith("Memset") else OP_KERNEL)
            out.append((kind, name, start, dur, 0,
                        max(int(e.device_index()), 0), int(e.device_resource_id()) & 0xffffffff,
                        int(e.linked_correlation_id()), 0.0, 0, None))
    return out, tids


class _Mirror:
    """A sonde section that is also a torch record_function range (sonde's sections in torch's
    trace), with the thread's marker once per step."""

    __slots__ = ("sec", "name", "backend", "rf")

    def __init__(self, sec, name, backend):
        self.sec = sec
        self.name = name
        self.backend = backend
        self.rf = None

    def __enter__(self):
        r = self.sec.__enter__()
        b = self.backend
        b._mark_thread()
        b._mirrored.add(self.name)
        self.rf = _rf_enter(self.name)
        return r

    def __exit__(self, et, ev, tb):
        try:
            _rf_exit(self.rf)
        except BaseException:
            self.sec.__exit__(et, ev, tb)  # the section ends whatever happens to the range
            raise
        return self.sec.__exit__(et, ev, tb)


class TorchProfiler:
    """torch.profiler driven by a sonde.Profiler's step schedule (see
    sonde.torch.profile_operators). windows: one dict per window torch recorded, in order:
    {"cycle", "first_step", "last_step", "ops" (entries folded), "key_averages" (torch's own
    table of that window, kept only with keep_key_averages)}."""

    def __init__(self, prof, *, activities=None, record_shapes=True, with_flops=True,
                 profile_memory=False, with_stack=False, mirror_sections=True,
                 keep_key_averages=False, keep_last_profile=False):
        if prof is None or prof._handle is None:
            raise sonde.SondeError(sonde.ESTATE, "profile_operators: no open sonde.Profiler")
        self.prof = prof
        self.windows = []
        self.record_shapes = record_shapes
        self.keep_key_averages = keep_key_averages
        self.keep_last_profile = keep_last_profile
        self.last_profile = None
        self.note = None
        acts = list(activities) if activities is not None else [ProfilerActivity.CPU,
                                                                    ProfilerActivity.CUDA]
        if ProfilerActivity.CUDA in acts and not torch.cuda.is_available():
            acts.remove(ProfilerActivity.CUDA)
            self.note = ("CUDA kernels are not traced: torch.cuda.is_available() is False "
                         "(CPU operators only)")
        self._step = 0
        self._gen = 0
        self._mirrored = set()
        self._kw = dict(activities=acts, record_shapes=record_shapes,
                        profile_memory=profile_memory, with_flops=with_flops,
                        with_stack=with_stack)
        self._tp = torch.profiler.profile(schedule=self._schedule, on_trace_ready=self._ready,
                                          **self._kw)
        self._stopped = self._ending = False
        self._since = 0  # where torch's profiler (re)started
        self._tp.start()
        self._mark_thread()
        # sonde's own calls on this profiler now also drive torch's (instance attributes over
        # the class's methods: removed by stop())
        # what the instance had (profile: the C way in), restored by stop()
        self._saved = {k: prof.__dict__[k] for k in _HOOKED if k in prof.__dict__}
        prof.step = self._on_step
        if mirror_sections:
            for k in _HOOKED[1:]:
                setattr(prof, k, self._mirror_of(getattr(type(prof), k)))
        prof._attached.append(self)
        _running.add(self)
        prof.torch_profiler = self  # the last one attached, also once stopped
        if self.note:
            print("sonde.torch: " + self.note, file=sys.stderr)
            prof.event("sonde.torch", {"note": self.note})

    def _mirror_of(self, method):
        """The profiler's method (profile, stage, session) whose sections are also ranges."""
        prof = self.prof
        return lambda name, metadata=None: _Mirror(method(prof, name, metadata), str(name), self)

    # -- torch's schedule, from sonde's --------------------------------------------------------
    def action(self, step):
        """torch's ProfilerAction for step number step under the sonde profiler's schedule: NONE
        outside windows, WARMUP, RECORD, and RECORD_AND_SAVE for a window's last step."""
        a, c = self.prof._h().schedule(step)
        if a == 0:
            return ProfilerAction.NONE
        if a == 1:
            return ProfilerAction.WARMUP
        na, nc = self.prof._h().schedule(step + 1)
        return ProfilerAction.RECORD if (na, nc) == (2, c) else ProfilerAction.RECORD_AND_SAVE

    def _schedule(self, step):
        return self.action(step)

    def _mark_thread(self):
        if getattr(_tls, "gen", None) != (id(self), self._gen):
            _tls.gen = (id(self), self._gen)
            _rf_exit(_rf_enter(_MARK + str(threading.get_native_id())))

    @staticmethod
    def is_own_range(name):
        """Whether a range in torch's events is sonde's own marker (not the program's)."""
        return name.startswith(_MARK)

    def _on_step(self):
        # torch's step first: a window that ends here is folded into sonde before sonde's step
        # ends its window and writes that window's trace (NAME-cycleK), operators included
        self._step += 1
        self._gen += 1
        self._tp.step()
        type(self.prof).step(self.prof)
        self._mark_thread()

    def _ready(self, tp):
        events = tp.profiler.kineto_results.events()
        off = _clock_offset()
        ops, _ = _fold(events, self._mirrored, off, self.record_shapes)
        h = self.prof._handle
        if h is not None:
            h.ops(ops)
        # the step that just ended, or (stop, flush) the one under way
        last = self._step if self._ending else self._step - 1
        first = last
        while first > self._since and self.action(first - 1) == ProfilerAction.RECORD:
            first -= 1
        w = {"cycle": self.prof._h().schedule(last)[1] if h is not None else 0,
             "first_step": first, "last_step": last, "ops": len(ops)}
        if self.keep_key_averages:
            w["key_averages"] = tp.key_averages()
        if self.keep_last_profile:
            self.last_profile = tp
        self.windows.append(w)
        self._mirrored = set()

    def flush(self):
        """Folds what torch has recorded so far into sonde now, when no step schedule cuts
        windows (sonde.Profiler.export calls it): torch's profiler is stopped and started again.
        With a schedule, a window is folded when it ends."""
        if self._stopped or self.prof._h().schedule(0) != (2, 1) or \
                self.prof._h().schedule(1 << 40) != (2, 1):
            return
        self._ending = True
        try:
            self._tp.stop()
        finally:
            self._ending = False
        self._since = self._step
        self._tp = torch.profiler.profile(schedule=self._schedule, on_trace_ready=self._ready,
                                          **self._kw)
        self._tp.start()
        self._gen += 1
        self._mark_thread()

    def stop(self):
        """Ends torch's profiling (a window still open is folded now) and gives the sonde
        profiler its own methods back. Idempotent; the sonde profiler's close() calls it."""
        if self._stopped:
            return
        self._stopped = self._ending = True
        _running.discard(self)
        try:
            self._tp.stop()
        finally:
            for k in _HOOKED:
                if k in self._saved:
                    self.prof.__dict__[k] = self._saved[k]
                else:
                    self.prof.__dict__.pop(k, None)
            if self in self.prof._attached:
                self.prof._attached.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.stop()
        return False
