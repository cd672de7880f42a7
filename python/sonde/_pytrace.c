/* _pytrace.c - Python function tracing for the extension: the interpreter's C-level profiling
 * hook (PyEval_SetProfile, on every thread) turns each Python call and return into a sonde
 * section on the calling thread, nested with the program's own sections.
 *
 * Each code object is looked at once: its name (module.qualname), file and first line make a
 * sonde_site, the filters decide whether it is kept, and the answer is found again through an
 * open-addressing table keyed by the code object's address (the table holds a reference, so an
 * address is never reused while its entry lives). A traced call then costs a table probe and
 * SONDE_SCOPE's begin and end. Each thread keeps a stack of the frames it entered since tracing
 * began, so a return is matched to its call by frame (generators and coroutines are entered and
 * left at every resume and yield; an exception makes a return for every frame it unwinds).
 *
 * Hot functions: a function's first trace_python_hot_calls calls are recorded and timed; when
 * most of them took under trace_python_hot_s, its later calls are counted and summed only, and
 * the totals are written when tracing stops as an event "sonde.aggregated" that the reports fold
 * into the function's statistics. What a call does once its entry is found is the core both
 * tracers share (src/record/ftrace.h), here with plain figures (the GIL is their lock).
 *
 * Everything here runs with the GIL held (the hook, start and stop), which is the lock of the
 * table, the entries and the global state. docs/python.md says how to use it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sonde/sonde.h>

#include "_pytrace.h"
#include "record/ftrace.h"
#include "record/record.h" /* sonde__ticks, sonde__clock: the profiler's own clock */
#include "util/globs.h"

#define MAX_PREFIXES 16

typedef struct entry {
    uintptr_t key;             /* the code object, or a C function's PyMethodDef | 1 */
    PyObject *code;            /* held, for code objects; NULL for C functions */
    int lib;                   /* left out as the standard library's or sonde's: the C
                                  functions it calls are left out too */
    sonde_site site;           /* name, file and func owned here */
    sonde__ft_fn ft;           /* its mode and figures */
} entry;

typedef struct tframe {
    const void *key;           /* the frame (Python) or the function object (C) */
    entry *e;                  /* NULL: none */
    sonde__ft_frame ft;        /* how NONE: not traced */
} tframe;

typedef struct tstate {
    uint64_t gen;              /* the tracing session this stack belongs to */
    unsigned depth, cap;
    tframe *stack;
    sonde__ft_opens opens;     /* its open frames by function */
} tstate;

static struct {
    sonde_profiler *p;         /* NULL: not tracing */
    PyObject *handle;          /* held while tracing */
    uint64_t gen;              /* bumped by every start */
    entry **slots;             /* open addressing by key */
    size_t cap, used;
    uint32_t next_idx;         /* the next entry's sonde__ft_fn.idx (from 0 each session) */
    sonde_globs inc, exc;
    char *skip[MAX_PREFIXES], *keep[MAX_PREFIXES]; /* file prefixes left out / kept anyway */
    size_t n_skip, n_keep;
    unsigned max_depth;
    int c_calls;
    int monitoring;            /* 1: driven by sys.monitoring, 0: by the profiling hook */
    sonde__ft_limits lim;      /* the hot thresholds */
    /* counters of the current session (stats()) */
    uint64_t functions, excluded, too_deep, mismatched, table_full;
    _Atomic uint64_t hot_functions;
} g;

static __thread tstate *t_state __attribute__((tls_model("initial-exec")));
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void free_state(void *v)
{
    tstate *t = v;
    if (t) {
        if (t_state == t)
            t_state = NULL;
        free(t->stack);
        sonde__ft_opens_free(&t->opens);
        free(t);
    }
}

static void make_key(void) { pthread_key_create(&g_key, free_state); }

/* The calling thread's stack for the current session (a stack left from an earlier session is
 * emptied without touching its entries: they may be gone). NULL when out of memory. */
static tstate *thread_state(void)
{
    tstate *t = t_state;
    if (t && t->gen == g.gen)
        return t;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t)
            return NULL;
        pthread_once(&g_key_once, make_key);
        pthread_setspecific(g_key, t);
        t_state = t;
    }
    unsigned cap = g.max_depth < 256 ? 256 : g.max_depth;
    if (t->cap < cap) {
        tframe *st = realloc(t->stack, cap * sizeof *st);
        if (!st)
            return NULL;
        t->stack = st;
        t->cap = cap;
    }
    t->depth = 0;
    if (t->opens.cap) /* the last session's functions are gone; this one's count from 0 */
        memset(t->opens.n, 0, t->opens.cap * sizeof *t->opens.n);
    t->gen = g.gen;
    return t;
}

/* ---- filters --------------------------------------------------------------------------- */
static void strings_free(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

/* The globs of a trace_python_include/exclude value. -1 with an exception set. */
static int patterns_parse(const char *list, sonde_globs *globs, const char *key)
{
    int rc = sonde__globs_parse(globs, list);
    if (rc == SONDE_ENOMEM)
        PyErr_NoMemory();
    else if (rc)
        PyErr_Format(PyExc_ValueError, "%s: more than %d patterns", key, SONDE_GLOBS_MAX);
    return rc ? -1 : 0;
}

/* The length of the longest prefix of file in v, 0 when none. */
static size_t longest_prefix(char *const *v, size_t n, const char *file)
{
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (l > best && !strncmp(file, v[i], l))
            best = l;
    }
    return best;
}

/* In the standard library or sonde: the longest of the skip and keep prefixes that matches the
 * file is a skip one (site-packages sits inside the standard library's directory). */
static int in_lib(const char *file)
{
    return file && longest_prefix(g.skip, g.n_skip, file) > longest_prefix(g.keep, g.n_keep, file);
}

/* Kept: named by an include when there are includes, else not in the standard library or
 * sonde; and named by no exclude. */
static int wanted(const char *qual, const char *module, const char *file, int lib)
{
    const char *where[] = {qual, module, file && *file ? file : NULL};
    int in = g.inc.n ? sonde__globs_match(&g.inc, where, 3) : !lib;
    return in && !sonde__globs_match(&g.exc, where, 3);
}

/* ---- the table of functions ------------------------------------------------------------ */
static size_t slot_of(uintptr_t key, size_t cap)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static inline entry *lookup(uintptr_t key)
{
    if (!g.cap)
        return NULL;
    for (size_t i = slot_of(key, g.cap);; i = (i + 1) & (g.cap - 1)) {
        entry *e = g.slots[i];
        if (!e || e->key == key)
            return e;
    }
}

static void entry_free(entry *e)
{
    Py_XDECREF(e->code);
    free((char *)e->site.name);
    free((char *)e->site.file);
    free((char *)e->site.func);
    free(e);
}

static void table_clear(void)
{
    for (size_t i = 0; i < g.cap; i++)
        if (g.slots[i])
            entry_free(g.slots[i]);
    free(g.slots);
    g.slots = NULL;
    g.cap = g.used = 0;
    g.next_idx = 0;
}

/* Room for one more entry: the table doubles at half full. -1 when out of memory. */
static int table_room(void)
{
    if (g.cap && (g.used + 1) * 2 <= g.cap)
        return 0;
    size_t cap = g.cap ? g.cap * 2 : 1024;
    if (cap > ((size_t)1 << 24))
        return -1; /* 8 Mi functions: the rest are not traced (counted in table_full) */
    entry **s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < g.cap; i++) {
        entry *e = g.slots[i];
        if (!e)
            continue;
        size_t j = slot_of(e->key, cap);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = e;
    }
    free(g.slots);
    g.slots = s;
    g.cap = cap;
    return 0;
}

/* A new entry for key named module.qual; NULL when the table is full or memory ran out (the
 * call is then not traced). */
static entry *add(uintptr_t key, PyObject *code, const char *module, const char *qual,
                  const char *file, int line)
{
    if (table_room() != 0) {
        g.table_full++;
        return NULL;
    }
    entry *e = calloc(1, sizeof *e);
    size_t nl = strlen(module) + strlen(qual) + 2;
    char *name = malloc(nl);
    char *f = strdup(file ? file : "");
    char *fn = strdup(qual);
    if (!e || !name || !f || !fn) {
        free(e);
        free(name);
        free(f);
        free(fn);
        return NULL;
    }
    if (*module)
        snprintf(name, nl, "%s.%s", module, qual);
    else
        snprintf(name, nl, "%s", qual);
    e->key = key;
    e->site.name = name;
    e->site.file = f;
    e->site.func = fn;
    e->site.line = line;
    g.functions++;
    e->lib = code && in_lib(file);
    if (!wanted(name, module, file, e->lib)) {
        atomic_store_explicit(&e->ft.mode, SONDE__FT_SKIP, memory_order_relaxed);
        g.excluded++;
    } else {
        sonde__ft_init(&e->ft, &g.lim, g.next_idx++);
    }
    if (code) {
        Py_INCREF(code);
        e->code = code;
    }
    size_t i = slot_of(key, g.cap);
    while (g.slots[i])
        i = (i + 1) & (g.cap - 1);
    g.slots[i] = e;
    g.used++;
    return e;
}

static const char *utf8_or(PyObject *s, const char *dflt)
{
    const char *r = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    if (!r)
        PyErr_Clear();
    return r ? r : dflt;
}

/* The entry of a code object, made at its first call (globals: its module's, for the name;
 * may be NULL). */
static entry *code_entry_of(PyCodeObject *co, PyObject *globals)
{
    entry *e = lookup((uintptr_t)co);
    if (e)
        return e;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *qualobj = co->co_qualname;
#else
    PyObject *qualobj = co->co_name;
#endif
    PyObject *modobj = globals && PyDict_Check(globals)
                           ? PyDict_GetItemString(globals, "__name__") : NULL;
    return add((uintptr_t)co, (PyObject *)co, utf8_or(modobj, ""), utf8_or(qualobj, "?"),
               utf8_or(co->co_filename, ""), co->co_firstlineno);
}

/* The entry of a Python frame's code object. */
static entry *code_entry(PyFrameObject *frame)
{
    PyCodeObject *co = PyFrame_GetCode(frame);
    entry *e = lookup((uintptr_t)co);
    if (!e) {
#if PY_VERSION_HEX >= 0x030B0000
        PyObject *globals = PyFrame_GetGlobals(frame);
#else
        PyObject *globals = PyObject_GetAttrString((PyObject *)frame, "f_globals");
#endif
        if (!globals)
            PyErr_Clear();
        e = code_entry_of(co, globals);
        Py_XDECREF(globals);
    }
    Py_DECREF(co);
    return e;
}

/* The entry of a C function called from Python, keyed by its PyMethodDef and named after
 * module (the module or type that holds it). */
static entry *ml_entry(PyMethodDef *ml, const char *module)
{
    uintptr_t key = (uintptr_t)ml | 1u;
    entry *e = lookup(key);
    return e ? e : add(key, NULL, module, ml->ml_name, "", 0);
}

static entry *c_entry(PyObject *fn)
{
    if (!PyCFunction_Check(fn))
        return NULL;
    PyCFunctionObject *cf = (PyCFunctionObject *)fn;
    entry *e = lookup((uintptr_t)cf->m_ml | 1u);
    if (e)
        return e;
    const char *module = "";
    PyObject *self = cf->m_self, *modname = NULL;
    if (self && PyModule_Check(self)) {
        modname = PyModule_GetNameObject(self);
        if (!modname)
            PyErr_Clear();
        module = utf8_or(modname, "");
    } else if (self) {
        module = Py_TYPE(self)->tp_name;
    } else if (cf->m_module) {
        module = utf8_or(cf->m_module, "");
    }
    e = ml_entry(cf->m_ml, module);
    Py_XDECREF(modname);
    return e;
}

/* ---- the hook -------------------------------------------------------------------------- */
static void on_call(tstate *t, const void *key, entry *e)
{
    unsigned d = t->depth++;
    if (d >= t->cap) {
        g.too_deep++;
        return;
    }
    tframe *f = &t->stack[d];
    sonde__ft_frame *up = d ? &t->stack[d - 1].ft : NULL;
    f->key = key;
    f->e = e;
    sonde__ft_reset(&f->ft, up);
    if (!e || atomic_load_explicit(&e->ft.mode, memory_order_relaxed) == SONDE__FT_SKIP)
        return;
    if (d >= g.max_depth) {
        g.too_deep++;
        return;
    }
    sonde__ft_enter(&f->ft, &e->ft, g.p, &e->site, &t->opens);
}

/* Closes the frame at depth d of t. */
static void close_frame(tstate *t, unsigned d)
{
    sonde__ft_exit(&t->stack[d].ft, d ? &t->stack[d - 1].ft : NULL, &g.lim, &g.hot_functions, 0,
                   &t->opens);
}

static void on_return(tstate *t, const void *key)
{
    if (!t->depth)
        return; /* a frame entered before tracing began */
    unsigned d = t->depth - 1;
    if (d >= t->cap) {
        t->depth = d;
        return;
    }
    if (t->stack[d].key != key) {
        /* A frame left without its return (not expected from CPython): close the frames
         * above key's own; a key not on the stack was entered before tracing began. */
        unsigned k = d;
        while (k > 0 && t->stack[k - 1].key != key)
            k--;
        if (k == 0)
            return;
        g.mismatched++;
        for (unsigned j = d; j >= k; j--)
            close_frame(t, j);
        d = k - 1;
    }
    close_frame(t, d);
    t->depth = d;
}

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    if (!g.p) { /* tracing stopped while this thread kept the hook: take it off */
        PyEval_SetProfile(NULL, NULL);
        return 0;
    }
    tstate *t = thread_state();
    if (!t)
        return 0;
    switch (what) {
    case PyTrace_CALL:
        on_call(t, frame, code_entry(frame));
        break;
    case PyTrace_RETURN:
        on_return(t, frame);
        break;
    case PyTrace_C_CALL:
        if (g.c_calls) {
            /* called from the standard library or sonde (unless an include names it): no */
            const tframe *caller = t->depth && t->depth <= t->cap ? &t->stack[t->depth - 1] : NULL;
            int from_lib = caller && caller->e && caller->e->lib && !g.inc.n;
            on_call(t, arg, from_lib ? NULL : c_entry(arg));
        }
        break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        if (g.c_calls)
            on_return(t, arg);
        break;
    default:
        break;
    }
    return 0;
}

/* The profiling hook on every thread of the interpreter (fn NULL: off). */
static int set_all_threads(Py_tracefunc fn)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyEval_SetProfileAllThreads(fn, NULL);
    return PyErr_Occurred() ? -1 : 0;
#else
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts;
         ts = PyThreadState_Next(ts))
        if (_PyEval_SetProfile(ts, fn, NULL) < 0)
            return -1;
    return 0;
#endif
}

/* ---- sys.monitoring (CPython 3.12 and later) -------------------------------------------- *
 * The same on_call/on_return driven by sys.monitoring's events instead of the profiling hook:
 * PY_START, PY_RESUME and PY_THROW enter a frame, PY_RETURN, PY_YIELD and PY_UNWIND leave it
 * (a frame is its code object: a return closes the innermost open frame of that code), and with
 * c_calls CALL, C_RETURN and C_RAISE enter and leave builtin functions and method descriptors.
 * No frame object is made. Functions left out by the filters are not DISABLEd: their frames
 * count in max_depth's depth as the profiling hook's do, so both give the same report. One tool
 * id, PROFILER_ID when free. */
#if PY_VERSION_HEX >= 0x030C0000
static struct {
    int tool;            /* the tool id held, or -1 */
    PyObject *mon;       /* sys.monitoring */
    PyObject *fn[4];     /* the callbacks (mon_defs), as builtin functions */
} m = {-1, NULL, {NULL, NULL, NULL, NULL}};

/* PY_START, PY_RESUME, PY_THROW (code, offset[, exception]) */
static PyObject *mon_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (!g.p || nargs < 1 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    entry *e = lookup((uintptr_t)args[0]);
    if (!e)
        e = code_entry_of((PyCodeObject *)args[0], PyEval_GetGlobals());
    tstate *t = thread_state();
    if (t)
        on_call(t, args[0], e);
    Py_RETURN_NONE;
}

/* PY_RETURN, PY_YIELD (code, offset, value), PY_UNWIND (code, offset, exception) */
static PyObject *mon_leave(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (!g.p || nargs < 1)
        Py_RETURN_NONE;
    tstate *t = thread_state();
    if (t)
        on_return(t, args[0]);
    Py_RETURN_NONE;
}

/* A C callable's entry: a builtin function or a method descriptor (`lst.append(x)` calls the
 * descriptor with the list first); NULL for anything else (Python functions start their own
 * frames; classes and other callables are not functions). */
static int is_c_function(PyObject *fn)
{
    return PyCFunction_Check(fn) || Py_IS_TYPE(fn, &PyMethodDescr_Type);
}

static entry *mon_c_entry(PyObject *fn)
{
    if (PyCFunction_Check(fn))
        return c_entry(fn);
    PyMethodDescrObject *d = (PyMethodDescrObject *)fn;
    return ml_entry(d->d_method, PyDescr_TYPE(d)->tp_name);
}

/* CALL (code, offset, callable, arg0) */
static PyObject *mon_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (!g.p || nargs < 3 || !is_c_function(args[2]))
        Py_RETURN_NONE;
    tstate *t = thread_state();
    if (!t)
        Py_RETURN_NONE;
    /* called from the standard library or sonde (unless an include names it): no */
    const entry *caller = lookup((uintptr_t)args[0]);
    if (!caller && PyCode_Check(args[0])) /* a caller entered before tracing began */
        caller = code_entry_of((PyCodeObject *)args[0], PyEval_GetGlobals());
    int from_lib = caller && caller->lib && !g.inc.n;
    on_call(t, args[2], from_lib ? NULL : mon_c_entry(args[2]));
    Py_RETURN_NONE;
}

/* C_RETURN, C_RAISE (code, offset, callable, arg0) */
static PyObject *mon_c_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (!g.p || nargs < 3 || !is_c_function(args[2]))
        Py_RETURN_NONE;
    tstate *t = thread_state();
    if (t)
        on_return(t, args[2]);
    Py_RETURN_NONE;
}

static PyMethodDef mon_defs[] = {
    {"_mon_enter", (PyCFunction)(void (*)(void))mon_enter, METH_FASTCALL, NULL},
    {"_mon_leave", (PyCFunction)(void (*)(void))mon_leave, METH_FASTCALL, NULL},
    {"_mon_call", (PyCFunction)(void (*)(void))mon_call, METH_FASTCALL, NULL},
    {"_mon_c_return", (PyCFunction)(void (*)(void))mon_c_return, METH_FASTCALL, NULL},
};

/* sys.monitoring.<what>(args...), the result dropped; -1 with the exception set. */
static int mon_do(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *a = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    PyObject *f = a ? PyObject_GetAttrString(m.mon, what) : NULL;
    PyObject *r = f ? PyObject_Call(f, a, NULL) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(f);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static long mon_event(const char *name)
{
    PyObject *events = PyObject_GetAttrString(m.mon, "events");
    PyObject *v = events ? PyObject_GetAttrString(events, name) : NULL;
    long r = v ? PyLong_AsLong(v) : -1;
    Py_XDECREF(events);
    Py_XDECREF(v);
    return r;
}

/* Every callback off and the tool id given back (the exception state kept). */
static void mon_off(void)
{
    if (m.tool < 0)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (mon_do("set_events", "(ii)", m.tool, 0) < 0)
        PyErr_Clear();
    static const char *evs[] = {"PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD",
                                "PY_UNWIND", "CALL", "C_RETURN", "C_RAISE"};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++) {
        long e = mon_event(evs[i]);
        if (e < 0 || mon_do("register_callback", "(ilO)", m.tool, e, Py_None) < 0)
            PyErr_Clear();
    }
    if (mon_do("free_tool_id", "(i)", m.tool) < 0)
        PyErr_Clear();
    m.tool = -1;
    PyErr_Restore(et, ev, tb);
}

/* Takes a free tool id and turns the events on; -1 with an exception. */
static int mon_on(int c_calls)
{
    if (!m.mon) {
        PyObject *sys = PyImport_ImportModule("sys");
        m.mon = sys ? PyObject_GetAttrString(sys, "monitoring") : NULL;
        Py_XDECREF(sys);
        if (!m.mon)
            return -1;
        for (size_t i = 0; i < 4; i++)
            if (!(m.fn[i] = PyCFunction_New(&mon_defs[i], NULL)))
                return -1;
    }
    for (int id = 2; id < 6 && m.tool < 0; id++) { /* PROFILER_ID, then the unnamed ids */
        PyObject *f = PyObject_GetAttrString(m.mon, "get_tool");
        PyObject *who = f ? PyObject_CallFunction(f, "i", id) : NULL;
        Py_XDECREF(f);
        if (!who)
            return -1;
        int free_id = who == Py_None;
        Py_DECREF(who);
        if (free_id) {
            if (mon_do("use_tool_id", "(is)", id, "sonde") < 0)
                return -1;
            m.tool = id;
        }
    }
    if (m.tool < 0) {
        PyErr_SetString(PyExc_RuntimeError, "Python tracing: every sys.monitoring tool id that "
                                            "sonde may take (2-5) is in use by another tool");
        return -1;
    }
    struct { const char *ev; int fn; int c; } cb[] = {
        {"PY_START", 0, 0}, {"PY_RESUME", 0, 0}, {"PY_THROW", 0, 0}, {"PY_RETURN", 1, 0},
        {"PY_YIELD", 1, 0}, {"PY_UNWIND", 1, 0}, {"CALL", 2, 1}, {"C_RETURN", 3, 1},
        {"C_RAISE", 3, 1},
    };
    long mask = 0;
    for (size_t i = 0; i < sizeof cb / sizeof *cb; i++) {
        if (cb[i].c && !c_calls)
            continue;
        long e = mon_event(cb[i].ev);
        if (e < 0 || mon_do("register_callback", "(ilO)", m.tool, e, m.fn[cb[i].fn]) < 0) {
            mon_off();
            return -1;
        }
        mask |= e;
    }
    if (mon_do("set_events", "(il)", m.tool, mask) < 0) {
        mon_off();
        return -1;
    }
    return 0;
}
#endif

/* Which mechanism "auto" means on this interpreter: the faster in bench/bench_python.py. */
static const char *auto_mechanism(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return "monitoring";
#else
    return "profile";
#endif
}

/* ---- start, stop ----------------------------------------------------------------------- */
static int strings_from(PyObject *seq, char **v, size_t *n, const char *what)
{
    strings_free(v, n);
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of str");
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > MAX_PREFIXES) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: more than %d prefixes", what, MAX_PREFIXES);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        const char *s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i));
        if (!s || !(v[*n] = strdup(s))) {
            Py_DECREF(fast);
            if (s)
                PyErr_NoMemory();
            return -1;
        }
        (*n)++;
    }
    Py_DECREF(fast);
    return 0;
}

static PyObject *m_trace_start(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"handle", "include", "exclude", "skip", "keep", "max_depth",
                             "c_calls", "hot_calls", "hot_s", "mechanism", NULL};
    PyObject *handle, *skip, *keep;
    const char *inc = NULL, *exc = NULL, *mech = "auto";
    unsigned max_depth = 1000;
    int c_calls = 0;
    unsigned long long hot_calls = 0;
    double hot_s = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OzzOO|IpKds", kwlist, &handle, &inc, &exc, &skip,
                                     &keep, &max_depth, &c_calls, &hot_calls, &hot_s, &mech))
        return NULL;
    if (g.p) {
        PyErr_SetString(PyExc_RuntimeError, "Python tracing is on already; stop it first");
        return NULL;
    }
    if (strcmp(mech, "auto") == 0)
        mech = auto_mechanism();
    int monitoring = strcmp(mech, "monitoring") == 0;
    if (!monitoring && strcmp(mech, "profile") != 0)
        return PyErr_Format(PyExc_ValueError, "Python tracing: mechanism '%s': expected 'auto', "
                            "'monitoring' or 'profile'", mech);
#if PY_VERSION_HEX < 0x030C0000
    if (monitoring)
        return PyErr_Format(PyExc_ValueError, "Python tracing: mechanism 'monitoring' needs "
                            "Python 3.12 or later (sys.monitoring); this is %s", Py_GetVersion());
#endif
    sonde_profiler *p = sonde_py_handle_profiler(handle);
    if (!p)
        return NULL;
    if (patterns_parse(inc, &g.inc, "trace_python_include") ||
        patterns_parse(exc, &g.exc, "trace_python_exclude") ||
        strings_from(skip, g.skip, &g.n_skip, "skip") ||
        strings_from(keep, g.keep, &g.n_keep, "keep"))
        return NULL;
    table_clear(); /* functions seen under other filters are looked at again */
    g.functions = g.excluded = g.too_deep = g.mismatched = g.table_full = 0;
    atomic_store_explicit(&g.hot_functions, 0, memory_order_relaxed);
    g.max_depth = max_depth ? max_depth : 1000;
    g.c_calls = c_calls;
    g.lim.hot_calls = hot_calls;
    g.lim.hot_ticks = (uint64_t)(hot_s * sonde__clock()->ticks_per_s);
    g.gen++;
    g.p = p;
    Py_INCREF(handle);
    g.handle = handle;
    g.monitoring = monitoring;
#if PY_VERSION_HEX >= 0x030C0000
    if (monitoring) {
        if (mon_on(c_calls) != 0) {
            g.p = NULL;
            Py_CLEAR(g.handle);
            return NULL;
        }
        return PyUnicode_FromString(mech);
    }
#endif
    if (set_all_threads(hook) != 0) {
        g.p = NULL;
        Py_CLEAR(g.handle);
        set_all_threads(NULL);
        return NULL;
    }
    return PyUnicode_FromString(mech);
}

/* Writes the hot functions' totals as "sonde.aggregated" events. */
static void write_aggregates(void)
{
    for (size_t i = 0; i < g.cap; i++) {
        entry *e = g.slots[i];
        if (e)
            sonde__ft_flush(g.p, e->site.name, &e->ft);
    }
}

/* Stops tracing: the calling thread's open frames are closed, the hook comes off every
 * thread, the hot functions' totals are written. Frames still open on other threads stay
 * open in the recording (their sections end with the run). */
static void trace_stop(void)
{
    if (!g.p)
        return;
    tstate *t = t_state;
    if (t && t->gen == g.gen) {
        unsigned top = t->depth < t->cap ? t->depth : t->cap;
        while (top > 0)
            close_frame(t, --top);
        t->depth = 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (g.monitoring)
        mon_off();
#endif
    if (!g.monitoring) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (set_all_threads(NULL) != 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    if (g.too_deep) /* said in every report, not only in stats() */
        sonde__warn(g.p, "Python tracing: %llu calls nested deeper than trace_python_max_depth "
                         "(%u) were not traced; their time is in the traced call above them",
                    (unsigned long long)g.too_deep, g.max_depth);
    write_aggregates();
    g.p = NULL;
    g.gen++; /* every thread's stack is stale now */
    Py_CLEAR(g.handle);
}

static PyObject *stats_dict(void)
{
    return Py_BuildValue("{sKsKsKsKsKsK}", "functions", (unsigned long long)g.functions,
                         "excluded", (unsigned long long)g.excluded, "too_deep",
                         (unsigned long long)g.too_deep, "mismatched",
                         (unsigned long long)g.mismatched, "hot_functions",
                         (unsigned long long)g.hot_functions, "table_full",
                         (unsigned long long)g.table_full);
}

static PyObject *m_trace_stop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    trace_stop();
    return stats_dict();
}

static PyObject *m_trace_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return stats_dict();
}

static PyObject *m_trace_auto_mechanism(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(auto_mechanism());
}

static PyObject *m_trace_handle(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *h = g.handle ? g.handle : Py_None;
    Py_INCREF(h);
    return h;
}

/* threading.setprofile's function: a thread started while tracing is on gets the C hook at its
 * first call, and that call is its first frame. */
static PyObject *m_trace_thread_hook(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "OOO", &frame, &event, &arg))
        return NULL;
    if (!g.p || g.monitoring) { /* sys.monitoring sees every thread already */
        PyEval_SetProfile(NULL, NULL);
        Py_RETURN_NONE;
    }
    PyEval_SetProfile(hook, NULL);
    if (PyFrame_Check(frame) && PyUnicode_Check(event) &&
        PyUnicode_CompareWithASCIIString(event, "call") == 0)
        hook(NULL, (PyFrameObject *)frame, PyTrace_CALL, NULL);
    Py_RETURN_NONE;
}

void sonde_py_trace_forget(sonde_profiler *p)
{
    if (p && g.p == p)
        trace_stop();
}

static PyMethodDef trace_methods[] = {
    {"trace_start", (PyCFunction)(void (*)(void))m_trace_start, METH_VARARGS | METH_KEYWORDS,
     "trace_start(handle, include, exclude, skip, keep, max_depth=1000, c_calls=False, "
     "hot_calls=0, hot_s=0.0, mechanism='auto'): Python function tracing into handle's "
     "profiler, through sys.monitoring or the profiling hook ('auto': the faster on this "
     "interpreter); returns the mechanism used"},
    {"trace_stop", m_trace_stop, METH_NOARGS,
     "stops Python function tracing (the calling thread's open frames end now); its counters"},
    {"trace_stats", m_trace_stats, METH_NOARGS, "the counters of the last tracing session"},
    {"trace_handle", m_trace_handle, METH_NOARGS, "the Handle being traced into, or None"},
    {"trace_auto_mechanism", m_trace_auto_mechanism, METH_NOARGS,
     "the mechanism 'auto' means on this interpreter: 'monitoring' or 'profile'"},
    {"trace_thread_hook", m_trace_thread_hook, METH_VARARGS,
     "for threading.setprofile: installs the tracer on a new thread"},
    {NULL, NULL, 0, NULL},
};

int sonde_py_trace_add(PyObject *module) { return PyModule_AddFunctions(module, trace_methods); }
