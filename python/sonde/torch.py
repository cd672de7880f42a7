"""sonde.torch - PyTorch modules as sonde sections, with their shapes and FLOPs.

    import sonde, sonde.torch
    with sonde.Profiler(name="gpt", peak_flops=1e12) as prof:
        handle = sonde.torch.instrument(model, with_flops=True, record_shapes=True)
        with prof.session("generate"):
            out = model(tokens)          # model, model.blocks.0, model.blocks.0.attn, ... sections
        handle.remove()

Each instrumented module's call is a section named by its path in the model (`model.blocks.0.attn`;
the root is `name`, "model" by default), nested as the modules nest, on the calling thread. The
module's forward is wrapped on the instance (not through forward hooks: PyTorch 1.13 calls no
forward hook when forward raises, and a section must end even then); remove() restores it.

with_flops counts the FLOPs of the matrix products the modules run, from shapes, as 2 x (output
elements) x (reduction length): linear, matmul / @, mm, bmm, addmm, baddbmm, addbmm, mv, addmv,
dot, convolutions (conv1d/2d/3d and transposed) and multi-head attention (its projections and
its two products), including torch's fused kernels for the encoder layer and attention (their
projections, products and feed-forward); bias additions and element-wise work are not counted.
Each product's FLOPs go to the innermost module running it, and feed sonde's FLOP/s and MFU
(peak_flops / peak_device). They are seen through a torch.overrides.TorchFunctionMode entered
around the outermost instrumented call (it sees the outermost torch call only: a product inside
multi_head_attention_forward is counted by that function's formula, never twice), except inside
the modules that have a fused fast path (nn.TransformerEncoderLayer, nn.TransformerEncoder,
nn.MultiheadAttention): a function mode turns their fast path off, so there the function mode is
suspended and a TorchDispatchMode counts the ATen operators instead (the fused kernels by
formula). The operators that run are the same with and without with_flops (test_torch.py).

record_shapes puts each call's input and output shapes and dtypes in its section's metadata
(`input_shapes` = [[1, 32], [1, 32]], `input_dtypes`, `output_shapes`, `output_dtypes`).

docs/pytorch.md has the rest: what runs on CPU only, and what never ran on a GPU.
"""

import contextlib
import functools
import json
import math
import threading

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import sonde

__all__ = ["instrument", "Instrumented", "count_flops", "profile_operators", "instrument_all",
           "parse_activities", "track_cuda"]


def _numel(t):
    return t.numel() if isinstance(t, torch.Tensor) else 0


def _mha_flops(args, kwargs):
    """F.multi_head_attention_forward(query, key, value, embed_dim, num_heads, ...), inputs
    (L, N, E) / (S, N, E) or unbatched: the q, k, v and output projections and the two
    products (QK^T, attention x V)."""
    q, k, v = args[0], args[1], args[2]
    e = q.shape[-1]
    lq = q.shape[0]
    s = k.shape[0]
    n = q.shape[1] if q.dim() == 3 else 1
    kd, vd = k.shape[-1], v.shape[-1]
    proj = 2 * n * (lq * e * e + s * kd * e + s * vd * e + lq * e * e)
    return proj + 2 * (2 * n * lq * s * e)


def _reduce(k_of):
    """FLOPs of a product whose output element is a dot product of length k_of(args)."""
    return lambda args, kwargs, out: 2 * _numel(out) * k_of(args)


# func -> flops(args, kwargs, out)
_FLOPS = {}


def _register():
    last = _reduce(lambda a: a[0].shape[-1] if a[0].dim() else 1)
    for f in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm,
              torch.Tensor.mm, torch.bmm, torch.Tensor.bmm):
        _FLOPS[f] = last
    _FLOPS[torch.Tensor.__rmatmul__] = _reduce(lambda a: a[1].shape[-1] if a[1].dim() else 1)
    mid = _reduce(lambda a: a[1].shape[-1])  # addmm(input, m1, m2), baddbmm(input, b1, b2)
    for f in (torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm):
        _FLOPS[f] = mid
    _FLOPS[F.linear] = _reduce(lambda a: a[1].shape[-1])  # weight (out, in)
    for f in (F.conv1d, F.conv2d, F.conv3d):  # weight (out, in / groups, *kernel)
        _FLOPS[f] = _reduce(lambda a: a[1].shape[1] * math.prod(a[1].shape[2:]))
    _FLOPS[F.multi_head_attention_forward] = lambda args, kwargs, out: _mha_flops(args, kwargs)
    sdpa = getattr(F, "scaled_dot_product_attention", None)  # PyTorch 2: (N, H, L, D), (N, H, S, D)
    if sdpa is not None:
        _FLOPS[sdpa] = lambda a, kw, out: 4 * _numel(out) * a[1].shape[-2]


_register()


def _sequences(t):
    """(count, length) groups of the sequences in t: (N, L, E) -> [(N, L)], (L, E) -> [(1, L)],
    a nested tensor (the encoder's fast path with a padding mask) -> [(1, L_i) each]."""
    if getattr(t, "is_nested", False):
        return [(1, int(n)) for n in t._nested_tensor_size()[:, 0].tolist()]
    return [(t.shape[0], t.shape[1])] if t.dim() == 3 else [(1, t.shape[0])]


def _encoder_layer_flops(a, kw, out):
    """aten::_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
    proj_weight, proj_bias, ..., ffn_weight_1, ffn_bias_1, ffn_weight_2, ...): the fast path of
    nn.TransformerEncoderLayer, src (N, L, E) or nested: attention as _native_mha_flops, then
    the two feed-forward products."""
    e, ffn = a[1], a[14].shape[0]  # ffn_weight_1 (F, E)
    return sum(_attention_flops(n, seq, seq, e) + 2 * (2 * n * seq * e * ffn)
               for n, seq in _sequences(a[0]))


def _attention_flops(n, lq, s, e):
    """Multi-head attention with inputs of width e: the q, k, v and output projections and the
    two products (QK^T, attention x V), over n sequences of lq queries and s keys."""
    return 2 * n * (2 * lq * e * e + 2 * s * e * e) + 2 * (2 * n * lq * s * e)


def _native_mha_flops(a, kw, out):
    """aten::_native_multi_head_attention(query, key, value, embed_dim, ...), (N, L, E): the
    fast path of nn.MultiheadAttention."""
    q, k = a[0], a[1]
    n, lq = (q.shape[0], q.shape[1]) if q.dim() == 3 else (1, q.shape[0])
    s = k.shape[1] if k.dim() == 3 else k.shape[0]
    return _attention_flops(n, lq, s, a[3])


def _conv_flops(a, kw, out):
    """aten::convolution(input, weight, bias, stride, padding, dilation, transposed, ...):
    each output (or, transposed, each input) element is a dot product of in/groups x kernel."""
    x, w, transposed = a[0], a[1], a[6]
    per = w.shape[1] * math.prod(w.shape[2:])
    return 2 * (_numel(x) if transposed else _numel(out)) * per


# ATen operator -> flops(args, kwargs, out): what the dispatch mode counts
_ATEN_FLOPS = {}


def _register_aten():
    aten = torch.ops.aten
    table = {
        "mm": _reduce(lambda a: a[0].shape[-1]), "bmm": _reduce(lambda a: a[0].shape[-1]),
        "mv": _reduce(lambda a: a[0].shape[-1]),
        "addmm": _reduce(lambda a: a[1].shape[-1]), "baddbmm": _reduce(lambda a: a[1].shape[-1]),
        "addmv": _reduce(lambda a: a[1].shape[-1]),
        "addbmm": lambda a, kw, out: 2 * _numel(out) * a[1].shape[0] * a[1].shape[-1],
        "dot": lambda a, kw, out: 2 * _numel(a[0]), "vdot": lambda a, kw, out: 2 * _numel(a[0]),
        "convolution": _conv_flops,
        "_transformer_encoder_layer_fwd": _encoder_layer_flops,
        "_native_multi_head_attention": _native_mha_flops,
    }
    # PyTorch 2's fused attention kernels (torch 1.13 has none; tests on PyTorch 2.11 found the
    # CPU one uncounted): query (N, H, L, D), key (N, H, S, D), the two products 4 x N x H x L x
    # S x D, causal or not, as torch's own flop counter counts them
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_fused_attention_overrideable"):
        table[name] = lambda a, kw, out: 4 * _numel(a[0]) * a[1].shape[-2]
    for name, f in table.items():
        packet = getattr(aten, name, None)
        if packet is None:
            continue
        for overload in packet.overloads():  # default, out, ...: the same work
            _ATEN_FLOPS[getattr(packet, overload)] = f


_register_aten()


def count_flops(func, args, kwargs, out):
    """FLOPs of one call by sonde's formulas: func a torch function (torch.bmm, F.conv2d, ...)
    or an ATen operator (torch.ops.aten.mm.default, ...); 0 for calls it does not count."""
    f = _FLOPS.get(func) or _ATEN_FLOPS.get(func)
    if f is None:
        return 0
    try:
        return int(f(args, kwargs or {}, out))
    except (AttributeError, IndexError, TypeError, RuntimeError):  # an unexpected form (a
        return 0                                                    # nested tensor): not counted


def _run_counted(prof, table, func, args, kwargs):
    """func(*args, **kwargs), its FLOPs (when table has a formula for it) recorded into the
    innermost open section of prof."""
    out = func(*args, **(kwargs or {}))
    if func in table:
        n = count_flops(func, args, kwargs, out)
        if n:
            prof.record_flops(n)
    return out


class _FunctionFlopMode(torch.overrides.TorchFunctionMode):
    """Counts the products of the torch functions run while it is on (_FLOPS) into the innermost
    open section: one Python call per torch function, the cheaper of the two modes."""

    def __init__(self, prof):
        super().__init__()
        self.prof = prof

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return _run_counted(self.prof, _FLOPS, func, args, kwargs)


class _DispatchFlopMode(TorchDispatchMode):
    """Counts the products of the ATen operators run while it is on (_ATEN_FLOPS). Torch's
    fast paths test for function modes (has_torch_function), not for it, so it is what counts
    inside a module that has one; one Python call per ATen operator (make bench, bench_torch's
    "bare modes" line: about twice the function mode's cost on an MLP)."""

    def __init__(self, prof):
        super().__init__()
        self.prof = prof

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _run_counted(self.prof, _ATEN_FLOPS, func, args, kwargs)


# Modules whose forward takes a fused fast path only when no function mode is on (PyTorch
# 1.13's "fast path" checks has_torch_function): inside them FLOPs are counted at the ATen level.
_FAST_PATH = (torch.nn.TransformerEncoderLayer, torch.nn.TransformerEncoder,
              torch.nn.MultiheadAttention)
_pop_function_mode = getattr(torch.overrides, "_pop_mode_temporarily", None)


@contextlib.contextmanager
def _counting(p, fast_path):
    """Turns FLOP counting on for one instrumented call that no enclosing call's mode counts
    (_wrap's test, inline: a module inside the outermost enters no context manager): the
    function mode, or for a module with a fast path the dispatch mode. Inside an enclosing
    call's function mode, a fast-path module suspends that mode (counting there, it would turn
    the fast path off) and counts through the dispatch mode instead."""
    state = getattr(_tls, "counting", None)  # "function" only where _pop_function_mode exists
    if state == "function" and not isinstance(torch.overrides._get_current_function_mode(),
                                              _FunctionFlopMode):
        yield  # another function mode above ours: the fast path is off anyway; ours counts
        return
    dispatch = fast_path or _pop_function_mode is None
    _tls.counting = "dispatch" if dispatch else "function"
    try:
        if not dispatch:
            with _FunctionFlopMode(p):
                yield
        elif state == "function":
            with _pop_function_mode(), _DispatchFlopMode(p):
                yield
        else:
            with _DispatchFlopMode(p):
                yield
    finally:
        _tls.counting = state


def _describe(values):
    shapes, dtypes = [], []
    for v in values:
        if isinstance(v, torch.Tensor):
            shapes.append(list(v.shape))
            dtypes.append(str(v.dtype).replace("torch.", ""))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, torch.Tensor) for x in v):
            shapes.append([list(x.shape) for x in v])
            dtypes.append([str(x.dtype).replace("torch.", "") for x in v])
    return json.dumps(shapes), json.dumps(dtypes)


class Instrumented:
    """What instrument() did: `names` maps each instrumented module to its section name;
    remove() restores every forward (also on leaving a `with` block)."""

    def __init__(self):
        self.names = {}
        self._patched = []
        self._backward = []

    def remove(self):
        for b in self._backward:
            b.drop()
        self._backward = []
        for mod, had in self._patched:
            if had is None:
                try:
                    del mod.forward
                except AttributeError:
                    pass
            else:
                mod.forward = had
        self._patched = []

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.remove()
        return False


_tls = threading.local()


def instrument(model, profiler=None, *, record_shapes=False, with_flops=False, backward=False,
               name="model"):
    """Makes every module of `model` (an nn.Module, itself included) a section per call, named
    by its path (`name`.blocks.0.attn). profiler: a sonde.Profiler, or None for the one entered
    with `with` on the calling thread at call time (none: the model runs unprofiled).
    record_shapes: shapes and dtypes of inputs and outputs as metadata. with_flops: FLOPs of the
    products each module runs (see the module's docstring). backward: each call made with
    gradients on also gives a section `PATH.backward` for its part of the backward pass (see
    _Backward). Returns an Instrumented handle."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("sonde.torch.instrument: expected a torch.nn.Module, not %s"
                        % type(model).__name__)
    handle = Instrumented()
    for path, mod in model.named_modules():
        section = name + "." + path if path else name
        handle.names[mod] = section
        had = mod.__dict__.get("forward")
        bwd = _Backward(mod, section + ".backward", handle) if backward else None
        mod.forward = _wrap(had if had is not None else type(mod).forward.__get__(mod),
                            section, profiler, record_shapes, with_flops, bwd,
                            isinstance(mod, _FAST_PATH))
        handle._patched.append((mod, had))
    return handle


# -- backward sections ------------------------------------------------------------------------
class _Call:
    """One module call's backward section: opened when the gradients of the call's outputs have
    all arrived, closed when those of its inputs are computed (or, when no input needs one, those
    of the module's parameters)."""

    __slots__ = ("prof", "name", "open", "done", "left", "hooks")

    def __init__(self, prof, name):
        self.prof, self.name = prof, name
        self.open = self.done = False
        self.left = 0
        self.hooks = []


def _bwd_open(call):
    if call.open or call.done or call.prof._handle is None:
        return
    call.prof.start(call.name)
    call.open = True
    stack = getattr(_tls, "bwd", None)
    if stack is None:
        stack = _tls.bwd = []
    stack.append(call)


def _bwd_close(call):
    """Closes call's section, and with it those above it that closed first: autograd may finish
    an enclosing call an instant before an inner one (a parameter both use), and sonde's
    sections nest, so the outer one ends when the inner one does."""
    if not call.open or call.done:
        return
    call.done = True
    stack = getattr(_tls, "bwd", None) or []
    while stack and stack[-1].done:
        c = stack.pop()
        if c.prof._handle is not None:
            c.prof.stop()


class _Mark(torch.autograd.Function):
    """Identity on some of a call's tensors whose backward, run by autograd once every gradient
    for them is in, calls at(call): on the call's outputs _bwd_open (its backward begins), on
    its inputs _bwd_close (the call's gradients for them are computed; only this call's, as the
    aliases are used by no one else)."""

    @staticmethod
    def forward(ctx, at, call, *xs):
        ctx.at, ctx.call = at, call
        return tuple(x.detach() for x in xs)  # aliases, not views: in-place use stays legal

    @staticmethod
    def backward(ctx, *grads):
        ctx.at(ctx.call)
        return (None, None) + grads


def _grad_tensors(values):
    """The distinct tensors needing a gradient among values and the lists/tuples in them."""
    seen, out = set(), []
    for v in values:
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, torch.Tensor) and t.requires_grad and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


def _substitute(v, alias):
    """v with its tensors (and those of a list, tuple or dict in it) replaced through alias."""
    if isinstance(v, torch.Tensor):
        return alias.get(id(v), v)
    if isinstance(v, (list, tuple)):
        items = [alias.get(id(t), t) if isinstance(t, torch.Tensor) else t for t in v]
        if isinstance(v, list):
            return items
        return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
    if isinstance(v, dict):
        o = v.copy()
        for k, t in v.items():
            if isinstance(t, torch.Tensor) and id(t) in alias:
                o[k] = alias[id(t)]
        return o
    return v


class _Backward:
    """backward=True for one module: wraps each call made with gradients on. The call's inputs
    that need a gradient, and its outputs, pass through a _Mark each, so autograd
    itself says when the call's backward begins and ends, on the thread that runs it. A call
    none of whose inputs needs a gradient (token ids into an embedding, images into the first
    convolution) ends when the gradients of the module's parameters are computed, seen through
    one-shot tensor hooks (a call whose backward never ran has its hooks taken off at the next
    call, or by remove()). Tensors the module receives or returns inside other containers than
    lists, tuples and (returned) dicts are not seen."""

    def __init__(self, mod, name, handle):
        self.mod, self.name = mod, name
        self.pending = None  # the last call's parameter hooks, until they fire
        handle._backward.append(self)

    def drop(self):
        if self.pending is not None:
            for h in self.pending.hooks:
                h.remove()
            self.pending = None

    def call(self, prof, orig, *args, **kwargs):
        ins = _grad_tensors(list(args) + list(kwargs.values()))
        params = [] if ins else [q for q in self.mod.parameters() if q.requires_grad]
        if not ins and not params:
            return orig(*args, **kwargs)
        call = _Call(prof, self.name)
        if ins:
            alias = {id(t): a for t, a in zip(ins, _Mark.apply(_bwd_close, call, *ins))}
            args = tuple(_substitute(a, alias) for a in args)
            kwargs = {k: _substitute(v, alias) for k, v in kwargs.items()}
        out = orig(*args, **kwargs)
        outs = _grad_tensors(list(out.values()) if isinstance(out, dict) else [out])
        if not outs:
            return out
        if params:
            self.drop()
            call.left = len(params)
            call.hooks = [q.register_hook(functools.partial(self._param_done, call))
                          for q in params]
            self.pending = call
        alias = {id(t): a for t, a in zip(outs, _Mark.apply(_bwd_open, call, *outs))}
        return _substitute(out, alias)

    def _param_done(self, call, grad):
        call.left -= 1
        if call.left == 0:
            for h in call.hooks:
                h.remove()
            if self.pending is call:
                self.pending = None
            _bwd_close(call)
        return None


def _wrap(orig, section, profiler, record_shapes, with_flops, bwd, fast_path=False):
    @functools.wraps(orig)
    def forward(*args, **kwargs):
        p = profiler if profiler is not None else sonde.current()
        if p is None or p._handle is None:
            return orig(*args, **kwargs)
        run = orig
        if bwd is not None and torch.is_grad_enabled():  # the call's backward: a section too
            run = functools.partial(bwd.call, p, orig)
        with p.profile(section):
            state = getattr(_tls, "counting", None) if with_flops else None
            if with_flops and state != "dispatch" and (state != "function" or fast_path):
                with _counting(p, fast_path):
                    out = run(*args, **kwargs)
            else:
                out = run(*args, **kwargs)
            if record_shapes:
                s, d = _describe(list(args) + list(kwargs.values()))
                p.add_metadata("input_shapes", s)
                p.add_metadata("input_dtypes", d)
                s, d = _describe(out if isinstance(out, (list, tuple)) else [out])
                p.add_metadata("output_shapes", s)
                p.add_metadata("output_dtypes", d)
            return out
    return forward


def profile_operators(profiler=None, *, activities=None, record_shapes=True, with_flops=True,
                      profile_memory=False, with_stack=False, mirror_sections=True,
                      keep_key_averages=False, keep_last_profile=False):
    """Runs torch.profiler under a sonde profiler's step schedule and folds what it records into
    sonde's recording: every operator (aten::*) on its thread inside the sections it ran in, with
    its input shapes, FLOPs and memory, and CUDA kernels and copies when torch traces them; the
    reports gain a per-operator table. profiler: a sonde.Profiler, or None for the one entered
    with `with` on this thread. The window is the schedule's (skip_first / wait / warmup / active
    / repeat, or start_step..end_step; none: from here to the end), stepped by the profiler's
    step(). activities may also name them ("CPU", "GPU", "MEM": see parse_activities()). With
    mirror_sections, sonde's sections entered through profile / stage / session
    are also record_function ranges in torch's own trace. activities: torch's
    (ProfilerActivity.CPU, and CUDA when torch.cuda.is_available()). Returns a TorchProfiler:
    stop() ends it (the sonde profiler's close() does too); its windows list what each window
    held (with torch's own key_averages() when keep_key_averages); with keep_last_profile, its
    last_profile is torch's profile object of the last window (export_chrome_trace,
    export_stacks, key_averages)."""
    from ._torchprof import TorchProfiler

    if activities is not None and any(isinstance(a, str) for a in activities):
        acts, mem = parse_activities([a for a in activities if isinstance(a, str)])
        activities = [a for a in activities if not isinstance(a, str)] + acts
        profile_memory = profile_memory or mem
    p = profiler if profiler is not None else sonde.current()
    return TorchProfiler(p, activities=activities, record_shapes=record_shapes,
                         with_flops=with_flops, profile_memory=profile_memory,
                         with_stack=with_stack, mirror_sections=mirror_sections,
                         keep_key_averages=keep_key_averages,
                         keep_last_profile=keep_last_profile)


def track_cuda(profiler=None, *, sync=False, memory=True, snapshot=False):
    """What a CUDA device adds to a sonde profiler's run (profiler None: the one entered with
    `with` on this thread). sync: every section ended through the Python API (profile, stage,
    session, decorated functions, instrument()'s modules, stop()) first waits for every CUDA
    device (torch.cuda.synchronize), so its time includes the GPU work it queued. memory: the
    counters `cudaN allocated MiB`, `cudaN peak allocated MiB` and `cudaN reserved MiB` per
    device, at the start, after every step() and at the end. snapshot: torch's allocation
    history is recorded and, at the end, its memory snapshot written as
    OUTDIR/NAME-memory-YYYYmmdd-HHMMSS.pickle (cache-dit's MEM activity). Without CUDA
    (torch.cuda.is_available() False) it says so in one line on stderr and as an event, and
    does nothing. Returns a CudaTracker: stop() ends it (the profiler's close() does too)."""
    from ._torchcuda import CudaTracker

    p = profiler if profiler is not None else sonde.current()
    return CudaTracker(p, sync=sync, memory=memory, snapshot=snapshot)


def parse_activities(names):
    """torch.profiler activities from the names sonde's flags and the compat modules use:
    ("CPU", "GPU" or "CUDA", "MEM") -> ([ProfilerActivity...], profile_memory). Other names
    (NVTX) are sonde's own and are left out."""
    from torch.profiler import ProfilerActivity

    acts, mem = [], False
    for n in names or ():
        u = str(n).upper()
        if u == "CPU":
            acts.append(ProfilerActivity.CPU)
        elif u in ("GPU", "CUDA"):
            acts.append(ProfilerActivity.CUDA)
        elif u == "MEM":
            mem = True
    return (acts or [ProfilerActivity.CPU]), mem


class _AllModules:
    """What instrument_all() did: remove() takes its global hooks off."""

    def __init__(self, handles):
        self._handles = handles

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []


def instrument_all(profiler=None):
    """Every nn.Module call anywhere (torch's global forward hooks) as a section named
    "nn.Module: ClassName", as torch.profiler's with_modules names them, while the handle lives
    (remove() ends it). profiler None: the one entered with `with` on the calling thread. A
    module whose forward raises has no forward hook call in PyTorch 1.13: its section is closed
    by the section around it (the report says so); instrument() has no such gap."""
    from torch.nn.modules import module as M

    def pre(mod, inputs):
        p = profiler if profiler is not None else sonde.current()
        if p is not None and p._handle is not None:
            p.start("nn.Module: " + type(mod).__name__)

    def post(mod, inputs, out):
        p = profiler if profiler is not None else sonde.current()
        if p is not None and p._handle is not None:
            p.stop()

    return _AllModules([M.register_module_forward_pre_hook(pre),
                        M.register_module_forward_hook(post)])
