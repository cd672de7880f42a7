/* _sonde.c - sonde's CPython extension: libsonde's API for the Python package above it.
 *
 * Contents: errors; Config (a sonde_config, set and read by key); Handle (one sonde_profiler);
 * the module. The hot objects (Section, ProfileFn, Wrapped) are in _sections.c, Python function
 * tracing in _pytrace.c. Everything a user reads (names, docstrings, the compat mappings) lives
 * in the Python package (python/sonde/__init__.py). Every function here is called with the GIL
 * held; libsonde's own calls are thread-safe. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

#include <sonde/sonde.h>

#include "_pytrace.h"
#include "_sonde.h"
#include "config/keys.h"
#include "record/record.h"
#include "record/schedule.h"

int sonde_cli_main(int argc, char **argv); /* tools/sonde/main.c */
struct cli_cmd;
const struct cli_cmd *cli_find(const char *name); /* tools/sonde/main.c */

/* ---------------------------------------------------------------------------------------------
 * Errors: SondeError is the package's class (registered by set_error_class); until then, and
 * for anything that is not libsonde's, RuntimeError.
 * ------------------------------------------------------------------------------------------- */
static PyObject *g_error_class;

/* Raises SondeError(code, text) (text is stolen) and returns NULL. */
static PyObject *raise_text(int code, PyObject *text)
{
    if (!text)
        return NULL;
    if (g_error_class) {
        PyObject *e = PyObject_CallFunction(g_error_class, "iO", code, text);
        if (e) {
            PyErr_SetObject(g_error_class, e);
            Py_DECREF(e);
        }
    } else {
        PyErr_SetObject(PyExc_RuntimeError, text);
    }
    Py_DECREF(text);
    return NULL;
}

/* Raises SondeError(code, "what: libsonde's message") and returns NULL. */
PyObject *sonde_py_raise_code(int code, const char *what)
{
    const char *msg = sonde_last_error();
    if (!msg || !*msg)
        msg = sonde_strerror(code);
    return raise_text(code, what ? PyUnicode_FromFormat("%s: %s", what, msg)
                                 : PyUnicode_FromString(msg));
}

/* rc < 0: raise and NULL; else the int rc. */
static PyObject *rc_or_raise(int rc, const char *what)
{
    if (rc < 0)
        return sonde_py_raise_code(rc, what);
    return PyLong_FromLong(rc);
}

/* A str or bytes argument as UTF-8 bytes that live as long as obj (str: its cached UTF-8);
 * None gives NULL when none_ok. -1 with an exception set when it is neither (TypeError) or
 * holds a NUL (ValueError, as CPython's own "s" converter: the C string would end there). */
static int as_text(PyObject *obj, const char **out, int none_ok)
{
    if (obj == Py_None && none_ok) {
        *out = NULL;
        return 0;
    }
    Py_ssize_t n = 0;
    *out = NULL;
    if (PyUnicode_Check(obj)) {
        *out = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!*out)
            return -1;
    } else if (PyBytes_Check(obj)) {
        *out = PyBytes_AS_STRING(obj);
        n = PyBytes_GET_SIZE(obj);
    }
    if (*out) {
        if (!memchr(*out, 0, (size_t)n))
            return 0;
        PyErr_Format(PyExc_ValueError, "embedded null character in %R", obj);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "expected str or bytes%s, got %.100s",
                 none_ok ? " or None" : "", Py_TYPE(obj)->tp_name);
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Config
 * ------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    sonde_config cfg;
} ConfigObject;

static PyTypeObject ConfigType;

static int Config_init(ConfigObject *self, PyObject *args, PyObject *kw)
{
    PyObject *from = NULL;
    static char *kwlist[] = {"copy_of", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O!", kwlist, &ConfigType, &from))
        return -1;
    self->cfg = from ? ((ConfigObject *)from)->cfg : sonde_config_default();
    return 0;
}

static PyObject *Config_set(ConfigObject *self, PyObject *args)
{
    PyObject *k, *v;
    const char *key, *value;
    if (!PyArg_ParseTuple(args, "OO", &k, &v) || as_text(k, &key, 0) || as_text(v, &value, 1))
        return NULL;
    return rc_or_raise(sonde_config_set(&self->cfg, key, value), NULL);
}

static PyObject *Config_get(ConfigObject *self, PyObject *arg)
{
    const char *key;
    if (as_text(arg, &key, 0))
        return NULL;
    char small[256];
    int n = sonde_config_get(&self->cfg, key, small, sizeof small);
    if (n < 0)
        return sonde_py_raise_code(n, NULL);
    if ((size_t)n < sizeof small)
        return PyUnicode_DecodeUTF8(small, n, "replace");
    char *big = PyMem_Malloc((size_t)n + 1);
    if (!big)
        return PyErr_NoMemory();
    sonde_config_get(&self->cfg, key, big, (size_t)n + 1);
    PyObject *r = PyUnicode_DecodeUTF8(big, n, "replace");
    PyMem_Free(big);
    return r;
}

static PyObject *Config_preset(ConfigObject *self, PyObject *arg)
{
    const char *name;
    if (as_text(arg, &name, 0))
        return NULL;
    return rc_or_raise(sonde_config_preset(&self->cfg, name), NULL);
}

static PyObject *Config_load_file(ConfigObject *self, PyObject *arg)
{
    const char *path;
    if (as_text(arg, &path, 0))
        return NULL;
    return rc_or_raise(sonde_config_load_file(&self->cfg, path), NULL);
}

static PyObject *Config_from_env(ConfigObject *self, PyObject *unused)
{
    (void)unused;
    return rc_or_raise(sonde_config_from_env(&self->cfg), NULL);
}

/* from_args(list of str): sonde_config_from_args over the words (the first is the program's
 * name); returns the words it left. libsonde keeps the flags' values for the process's life. */
static PyObject *Config_from_args(ConfigObject *self, PyObject *arg)
{
    if (!PyList_Check(arg))
        return PyErr_Format(PyExc_TypeError, "from_args takes a list of str");
    Py_ssize_t n = PyList_GET_SIZE(arg);
    char **argv = PyMem_Calloc((size_t)n + 1, sizeof *argv);
    if (!argv)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *w;
        if (as_text(PyList_GET_ITEM(arg, i), &w, 0)) {
            PyMem_Free(argv);
            return NULL;
        }
        argv[i] = (char *)w;
    }
    int argc = (int)n;
    int rc = sonde_config_from_args(&self->cfg, &argc, argv);
    PyObject *left = NULL;
    if (rc >= 0 && (left = PyList_New(argc)))
        for (int i = 0; i < argc; i++) {
            PyObject *s = PyUnicode_DecodeFSDefault(argv[i]);
            if (!s) {
                Py_CLEAR(left);
                break;
            }
            PyList_SET_ITEM(left, i, s);
        }
    PyMem_Free(argv);
    if (rc < 0)
        return sonde_py_raise_code(rc, NULL);
    return left;
}

static PyMethodDef Config_methods[] = {
    {"set", (PyCFunction)Config_set, METH_VARARGS, "set(key, text or None): one key from text"},
    {"get", (PyCFunction)Config_get, METH_O, "get(key) -> the key's value as text"},
    {"preset", (PyCFunction)Config_preset, METH_O, "preset(name): a named preset over this"},
    {"load_file", (PyCFunction)Config_load_file, METH_O, "load_file(path): a YAML file over this"},
    {"from_env", (PyCFunction)Config_from_env, METH_NOARGS, "from_env(): SONDE_* over this"},
    {"from_args", (PyCFunction)Config_from_args, METH_O,
     "from_args(words) -> the words left once the --profile* flags were applied"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ConfigType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sonde._sonde.Config",
    .tp_basicsize = sizeof(ConfigObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One sonde_config, set and read by key (docs/configuration.md).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Config_init,
    .tp_methods = Config_methods,
};

/* ---------------------------------------------------------------------------------------------
 * Handle: one sonde_profiler. destroy() ends it; every later call fails with SONDE_ESTATE.
 * ------------------------------------------------------------------------------------------- */


PyObject *sonde_py_closed(void)
{
    return raise_text(SONDE_ESTATE, PyUnicode_FromString("the profiler is closed"));
}

#define HANDLE_P(self)                                                                          \
    sonde_profiler *p = ((HandleObject *)(self))->p;                                            \
    if (!p)                                                                                     \
        return sonde_py_closed();

static int Handle_init(HandleObject *self, PyObject *args, PyObject *kw)
{
    PyObject *cfg;
    static char *kwlist[] = {"config", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwlist, &ConfigType, &cfg))
        return -1;
    if (self->p) {
        PyErr_SetString(PyExc_RuntimeError, "a Handle is made once");
        return -1;
    }
    self->p = sonde_create(&((ConfigObject *)cfg)->cfg);
    if (!self->p) {
        sonde_py_raise_code(SONDE_ENOMEM, "sonde_create");
        return -1;
    }
    return 0;
}

static int Handle_traverse(HandleObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cache);
    Py_VISIT(self->on_end);
    return 0;
}

static int Handle_clear_refs(HandleObject *self)
{
    Py_CLEAR(self->cache);
    Py_CLEAR(self->on_end);
    return 0;
}

/* The handle's on_end callable, before a section of it ends: 0, or -1 with its exception set.
 * With an exception already set (a decorated function raised), that one is kept and the
 * hook's, if any, is reported as unraisable. */
int sonde_py_call_on_end(HandleObject *h)
{
    PyObject *f = h->on_end;
    if (!f)
        return 0;
    Py_INCREF(f); /* the hook may replace itself */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *r = PyObject_CallNoArgs(f);
    int rc = r ? 0 : -1;
    Py_XDECREF(r);
    if (et) {
        if (rc)
            PyErr_WriteUnraisable(f);
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(f);
    return rc;
}

/* Handle.set_on_end(f): f() runs before every section end made through this handle (sections,
 * sessions, decorated calls, end()); None removes it. sonde.torch's CUDA synchronization. */
static PyObject *Handle_set_on_end(HandleObject *self, PyObject *f)
{
    if (f != Py_None && !PyCallable_Check(f))
        return PyErr_Format(PyExc_TypeError, "set_on_end: expected a callable or None, not %.100s",
                            Py_TYPE(f)->tp_name);
    Py_XSETREF(self->on_end, f == Py_None ? NULL : (Py_INCREF(f), f));
    Py_RETURN_NONE;
}

static void Handle_dealloc(HandleObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->p) { /* never closed: the reports are still written */
        sonde_py_trace_forget(self->p);
        sonde_destroy(self->p);
    }
    Handle_clear_refs(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Handle_destroy(HandleObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->p)
        return PyLong_FromLong(SONDE_ESTATE);
    sonde_profiler *p = self->p;
    sonde_py_trace_forget(p); /* Python tracing into it ends first, its totals written */
    self->p = NULL; /* no new call starts on p; those under way end first */
    while (self->busy > 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->cache); /* the Sections hold this Handle: the cycle goes now */
    int rc;
    Py_BEGIN_ALLOW_THREADS /* writing the reports takes a while: other threads go on */
    rc = sonde_destroy(p);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

sonde_profiler *sonde_py_handle_profiler(PyObject *handle)
{
    if (!PyObject_TypeCheck(handle, &HandleType)) {
        PyErr_Format(PyExc_TypeError, "expected a _sonde.Handle, not %.100s",
                     Py_TYPE(handle)->tp_name);
        return NULL;
    }
    sonde_profiler *p = ((HandleObject *)handle)->p;
    if (!p)
        sonde_py_closed();
    return p;
}

static PyObject *Handle_closed(HandleObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->p == NULL);
}

static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(s);
}

static PyObject *Handle_name(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    return str_or_none(sonde_name(p));
}

static PyObject *Handle_file_path(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    return str_or_none(sonde_file_path(p));
}

static PyObject *Handle_status(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    return PyLong_FromLong(sonde_status(p));
}

/* The calls that take nothing but the profiler. */
#define NOARG_CALL(fn, call, what)                                                              \
    static PyObject *fn(HandleObject *self, PyObject *unused)                                   \
    {                                                                                           \
        (void)unused;                                                                           \
        HANDLE_P(self);                                                                         \
        return rc_or_raise(call(p), what);                                                      \
    }
/* end() and session_end(): the on_end hook first; the section ends even when it raised. */
#define END_CALL(fn, call, what)                                                                \
    static PyObject *fn(HandleObject *self, PyObject *unused)                                   \
    {                                                                                           \
        (void)unused;                                                                           \
        HANDLE_P(self);                                                                         \
        int hook = sonde_py_call_on_end(self);                                                           \
        p = self->p; /* the hook may have closed it */                                          \
        int rc = p ? call(p) : 0;                                                               \
        if (hook)                                                                               \
            return NULL;                                                                        \
        return rc_or_raise(rc, what);                                                           \
    }
END_CALL(Handle_end, sonde_end, "stop")
END_CALL(Handle_session_end, sonde_session_end, "session end")
NOARG_CALL(Handle_sync, sonde_sync, "sync")
NOARG_CALL(Handle_step, sonde_step, "step")
NOARG_CALL(Handle_step_begin, sonde_step_begin, "step_begin")
NOARG_CALL(Handle_clear, sonde_clear, "clear")

/* The calls that take one name. */
#define NAME_CALL(fn, call, what)                                                               \
    static PyObject *fn(HandleObject *self, PyObject *arg)                                      \
    {                                                                                           \
        HANDLE_P(self);                                                                         \
        const char *s;                                                                          \
        if (as_text(arg, &s, 0))                                                                \
            return NULL;                                                                        \
        return rc_or_raise(call(p, s), what);                                                   \
    }
NAME_CALL(Handle_begin, sonde_begin, "profile")
NAME_CALL(Handle_session_begin, sonde_session_begin, "session")
NAME_CALL(Handle_thread_name, sonde_thread_name, "thread_name")
NAME_CALL(Handle_trigger, sonde_trigger, "trigger")

/* The calls that take a name and a number. */
#define NAME_NUM_CALL(fn, call, what)                                                           \
    static PyObject *fn(HandleObject *self, PyObject *args)                                     \
    {                                                                                           \
        HANDLE_P(self);                                                                         \
        PyObject *k;                                                                            \
        double v;                                                                               \
        const char *s;                                                                          \
        if (!PyArg_ParseTuple(args, "Od", &k, &v) || as_text(k, &s, 0))                         \
            return NULL;                                                                        \
        return rc_or_raise(call(p, s, v), what);                                                \
    }
NAME_NUM_CALL(Handle_metric, sonde_metric, "record_metric")
NAME_NUM_CALL(Handle_counter, sonde_counter, "counter")
NAME_NUM_CALL(Handle_model_params, sonde_model_params, "record_model_params")

static PyObject *Handle_metadata(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    PyObject *k, *v;
    const char *key, *value;
    if (!PyArg_ParseTuple(args, "OO", &k, &v) || as_text(k, &key, 0) || as_text(v, &value, 0))
        return NULL;
    return rc_or_raise(sonde_metadata(p, key, value), "metadata");
}

/* mark_end(): the program's own run ends now (close(), before sonde's own closing work). */
static PyObject *Handle_mark_end(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    sonde__mark_end(p);
    Py_RETURN_NONE;
}

/* event(name, args=None): args a dict of str to str (sonde_event_args). */
static PyObject *Handle_event(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    PyObject *n, *d = Py_None;
    const char *name;
    if (!PyArg_ParseTuple(args, "O|O", &n, &d) || as_text(n, &name, 0))
        return NULL;
    if (d == Py_None)
        return rc_or_raise(sonde_event(p, name), "event");
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "event: args must be a dict, got %.100s",
                     Py_TYPE(d)->tp_name);
        return NULL;
    }
    Py_ssize_t n_args = PyDict_Size(d), pos = 0, i = 0;
    if (n_args > SONDE_EVENT_ARGS_MAX) {
        PyErr_Format(PyExc_ValueError, "event %s: %zd arguments; at most %d", name, n_args,
                     SONDE_EVENT_ARGS_MAX);
        return NULL;
    }
    const char *keys[SONDE_EVENT_ARGS_MAX], *values[SONDE_EVENT_ARGS_MAX];
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (as_text(k, &keys[i], 0) || as_text(v, &values[i], 0))
            return NULL;
        i++;
    }
    return rc_or_raise(sonde_event_args(p, name, keys, values, (size_t)i), "event");
}

static PyObject *Handle_flops(HandleObject *self, PyObject *arg)
{
    HANDLE_P(self);
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    return rc_or_raise(sonde_flops(p, v), "record_flops");
}

static PyObject *Handle_throughput(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    double units, seconds;
    PyObject *u = Py_None;
    const char *unit;
    if (!PyArg_ParseTuple(args, "dd|O", &units, &seconds, &u) || as_text(u, &unit, 1))
        return NULL;
    return rc_or_raise(sonde_throughput_unit(p, units, seconds, unit), "record_throughput");
}

static PyObject *Handle_shape(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    PyObject *k, *dims;
    const char *name;
    if (!PyArg_ParseTuple(args, "OO", &k, &dims) || as_text(k, &name, 0))
        return NULL;
    PyObject *seq = PySequence_Fast(dims, "record_shape: dims must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int64_t small[16], *d = n <= 16 ? small : PyMem_Calloc((size_t)n, sizeof *d);
    if (!d) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        d[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (d[i] == -1 && PyErr_Occurred()) {
            if (d != small)
                PyMem_Free(d);
            Py_DECREF(seq);
            return NULL;
        }
    }
    int rc = sonde_shape(p, name, d, (int)n);
    if (d != small)
        PyMem_Free(d);
    Py_DECREF(seq);
    return rc_or_raise(rc, "record_shape");
}

static PyObject *Handle_diffusion_step(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    int step, block_size;
    double timestep, seconds, guidance;
    if (!PyArg_ParseTuple(args, "ididd", &step, &timestep, &block_size, &seconds, &guidance))
        return NULL;
    return rc_or_raise(sonde_diffusion_step(p, step, timestep, block_size, seconds, guidance),
                       "record_diffusion_step");
}

static PyObject *Handle_block(HandleObject *self, PyObject *args)
{
    HANDLE_P(self);
    int index, frames;
    double seconds, memory;
    if (!PyArg_ParseTuple(args, "iidd", &index, &frames, &seconds, &memory))
        return NULL;
    return rc_or_raise(sonde_block(p, index, frames, seconds, memory), "record_block");
}

static PyObject *Handle_export(HandleObject *self, PyObject *arg)
{
    HANDLE_P(self);
    const char *path;
    if (as_text(arg, &path, 1))
        return NULL;
    int rc;
    self->busy++;
    Py_BEGIN_ALLOW_THREADS
    rc = sonde_export(p, path);
    Py_END_ALLOW_THREADS
    self->busy--;
    return rc_or_raise(rc, "export");
}

/* d[key] = value, stealing value; -1 on failure. */
static int put(PyObject *d, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *section_dict(const sonde_section_stats *s)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
#define PY_U64(f) put(d, #f, PyLong_FromUnsignedLongLong(s->f)) ||
#define PY_F64(f) put(d, #f, PyFloat_FromDouble(s->f)) ||
#define PY(f, kind, label, table, q) PY_##kind(f)
    if (put(d, "name", PyUnicode_DecodeUTF8(s->name, (Py_ssize_t)strlen(s->name), "replace")) ||
        SONDE_SECTION_STATS(PY)
        put(d, "share", PyFloat_FromDouble(s->share)) ||
        put(d, "unit", PyUnicode_DecodeUTF8(s->unit, (Py_ssize_t)strlen(s->unit), "replace")) ||
        put(d, "units", PyFloat_FromDouble(s->units)) ||
        put(d, "units_per_s", PyFloat_FromDouble(s->units_per_s)) ||
        put(d, "flops", PyFloat_FromDouble(s->flops)) ||
        put(d, "flops_per_s", PyFloat_FromDouble(s->flops_per_s)) ||
        put(d, "mfu", PyFloat_FromDouble(s->mfu))) {
        Py_DECREF(d);
        return NULL;
    }
#undef PY
#undef PY_F64
#undef PY_U64
    return d;
}

/* summary() -> the sonde_summary_t as a dict, its sections under "stats". */
static PyObject *Handle_summary(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    sonde_summary_t *s;
    self->busy++; /* close() in another thread waits for it */
    Py_BEGIN_ALLOW_THREADS
    s = sonde_summary(p);
    Py_END_ALLOW_THREADS
    int st = s ? 0 : sonde_status(p);
    self->busy--;
    if (!s)
        return sonde_py_raise_code(st ? st : SONDE_EIO, "get_summary");
    PyObject *d = PyDict_New(), *stats = d ? PyList_New((Py_ssize_t)s->n_stats) : NULL;
    PyObject *ops = stats ? PyList_New((Py_ssize_t)s->n_ops) : NULL;
    int bad = !ops;
    for (size_t i = 0; !bad && i < s->n_stats; i++) {
        PyObject *x = section_dict(&s->stats[i]);
        if (!x)
            bad = 1;
        else
            PyList_SET_ITEM(stats, (Py_ssize_t)i, x);
    }
    for (size_t i = 0; !bad && i < s->n_ops; i++) {
        const sonde_op_stats *o = &s->ops[i];
        PyObject *x = Py_BuildValue(
            "{s:N,s:K,s:d,s:d,s:d,s:d,s:d,s:L,s:L}", "name",
            PyUnicode_DecodeUTF8(o->name, (Py_ssize_t)strlen(o->name), "replace"), "calls",
            (unsigned long long)o->calls, "self_cpu_s", o->self_cpu_s, "cpu_total_s",
            o->cpu_total_s, "self_cuda_s", o->self_cuda_s, "cuda_total_s", o->cuda_total_s,
            "flops", o->flops, "self_cpu_memory", (long long)o->self_cpu_memory,
            "self_cuda_memory", (long long)o->self_cuda_memory);
        if (!x)
            bad = 1;
        else
            PyList_SET_ITEM(ops, (Py_ssize_t)i, x);
    }
    if (!bad)
        bad = put(d, "total_duration_s", PyFloat_FromDouble(s->total_duration_s)) ||
              put(d, "sections", PyLong_FromUnsignedLongLong(s->sections)) ||
              put(d, "steps", PyLong_FromUnsignedLongLong(s->steps)) ||
              put(d, "units", PyFloat_FromDouble(s->units)) ||
              put(d, "units_per_s", PyFloat_FromDouble(s->units_per_s)) ||
              put(d, "unit", PyUnicode_DecodeUTF8(s->unit, (Py_ssize_t)strlen(s->unit), "replace")) ||
              put(d, "flops", PyFloat_FromDouble(s->flops)) ||
              put(d, "flops_per_s", PyFloat_FromDouble(s->flops_per_s)) ||
              put(d, "dropped_events", PyLong_FromUnsignedLongLong(s->dropped_events)) ||
              put(d, "warnings", PyLong_FromUnsignedLongLong(s->warnings)) ||
              put(d, "not_recorded", str_or_none(s->not_recorded));
    if (!bad)
        bad = PyDict_SetItemString(d, "stats", stats) || PyDict_SetItemString(d, "operators", ops);
    Py_XDECREF(stats);
    Py_XDECREF(ops);
    sonde_summary_free(s);
    if (bad) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}


/* current_metrics() -> {name: value}, the latest sample of every figure */
static PyObject *Handle_current_metrics(HandleObject *self, PyObject *unused)
{
    (void)unused;
    HANDLE_P(self);
    sonde_current_metric small[64], *m = small;
    int n = sonde_current_metrics(p, small, 64);
    if (n < 0)
        return sonde_py_raise_code(n, "get_current_metrics");
    if (n > 64) {
        if (!(m = PyMem_Calloc((size_t)n, sizeof *m)))
            return PyErr_NoMemory();
        int again = sonde_current_metrics(p, m, (size_t)n);
        n = again < n ? again : n;
    }
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < n; i++) {
        PyObject *v = PyFloat_FromDouble(m[i].value);
        if (!v || PyDict_SetItemString(d, m[i].name, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    if (m != small)
        PyMem_Free(m);
    return d;
}

/* schedule(step) -> (action, cycle): what the step schedule does during step number step
 * (0 not recorded, 1 warmup, 2 active; cycle from 1), as libsonde applies it. A run without a
 * schedule (or with an inconsistent one, which records every step) is (2, 1) throughout. */
static PyObject *Handle_schedule(HandleObject *self, PyObject *arg)
{
    HANDLE_P(self);
    unsigned long long step = PyLong_AsUnsignedLongLong(arg);
    if (step == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    const sonde_config *c = sonde_config_of(p);
    sched_action a = {SCHED_ACTIVE, 1};
    if (sonde__schedule_on(c) && sonde__schedule_check(c) == 0)
        a = sonde__schedule_action(c, step);
    return Py_BuildValue("(iI)", a.action, a.cycle);
}

/* ops(entries): sonde_ops over a sequence of tuples (kind, name, start_ns, dur_ns, tid, device,
 * stream, id, flops, bytes, shapes[, flags, table_child_ns]); name and shapes may be None. */
static PyObject *Handle_ops(HandleObject *self, PyObject *arg)
{
    HANDLE_P(self);
    PyObject *seq = PySequence_Fast(arg, "ops: expected a sequence of tuples");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    sonde_op *v = PyMem_Calloc(n ? (size_t)n : 1, sizeof *v);
    if (!v) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject *res = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i), *name, *shapes;
        sonde_op *o = &v[i];
        unsigned long long start, dur, id;
        long long bytes;
        unsigned long long child = 0;
        if (!PyTuple_Check(t) ||
            !PyArg_ParseTuple(t, "iOKKiiIKdLO|IK", &o->kind, &name, &start, &dur, &o->tid,
                              &o->device, &o->stream, &id, &o->flops, &bytes, &shapes,
                              &o->flags, &child)) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "ops: entry %zd is not a tuple (kind, name, "
                             "start_ns, dur_ns, tid, device, stream, id, flops, bytes, shapes"
                             "[, flags, table_child_ns])", i);
            }
            goto out;
        }
        o->start_ns = start;
        o->dur_ns = dur;
        o->table_child_ns = child;
        o->id = id;
        o->bytes = bytes;
        if ((name != Py_None && as_text(name, &o->name, 0)) ||
            (shapes != Py_None && as_text(shapes, &o->shapes, 0)))
            goto out;
    }
    res = rc_or_raise(sonde_ops(p, v, (size_t)n), "ops");
out:
    PyMem_Free(v);
    Py_DECREF(seq);
    return res;
}

static PyMethodDef Handle_methods[] = {
    {"current_metrics", (PyCFunction)Handle_current_metrics, METH_NOARGS,
     "current_metrics() -> {figure: its latest sampled value}"},
    {"section", (PyCFunction)(void (*)(void))Handle_section, METH_FASTCALL,
     "section(owner, name[, session]) -> a Section of this profiler"},
    {"destroy", (PyCFunction)Handle_destroy, METH_NOARGS, "destroy() -> sonde_destroy's code"},
    {"name", (PyCFunction)Handle_name, METH_NOARGS, "the run name"},
    {"file_path", (PyCFunction)Handle_file_path, METH_NOARGS, "the .sonde file, or None"},
    {"status", (PyCFunction)Handle_status, METH_NOARGS, "sonde_status"},
    {"begin", (PyCFunction)Handle_begin, METH_O, "sonde_begin"},
    {"end", (PyCFunction)Handle_end, METH_NOARGS, "sonde_end"},
    {"set_on_end", (PyCFunction)Handle_set_on_end, METH_O,
     "set_on_end(f): f() before every section end made through this handle (None: none)"},
    {"session_begin", (PyCFunction)Handle_session_begin, METH_O, "sonde_session_begin"},
    {"session_end", (PyCFunction)Handle_session_end, METH_NOARGS, "sonde_session_end"},
    {"metadata", (PyCFunction)Handle_metadata, METH_VARARGS, "sonde_metadata"},
    {"mark_end", (PyCFunction)Handle_mark_end, METH_NOARGS, "sonde__mark_end"},
    {"metric", (PyCFunction)Handle_metric, METH_VARARGS, "sonde_metric"},
    {"throughput", (PyCFunction)Handle_throughput, METH_VARARGS, "sonde_throughput_unit"},
    {"shape", (PyCFunction)Handle_shape, METH_VARARGS, "sonde_shape"},
    {"flops", (PyCFunction)Handle_flops, METH_O, "sonde_flops"},
    {"event", (PyCFunction)Handle_event, METH_VARARGS, "sonde_event / sonde_event_args"},
    {"counter", (PyCFunction)Handle_counter, METH_VARARGS, "sonde_counter"},
    {"sync", (PyCFunction)Handle_sync, METH_NOARGS, "sonde_sync"},
    {"step", (PyCFunction)Handle_step, METH_NOARGS, "sonde_step"},
    {"step_begin", (PyCFunction)Handle_step_begin, METH_NOARGS, "sonde_step_begin"},
    {"thread_name", (PyCFunction)Handle_thread_name, METH_O, "sonde_thread_name"},
    {"diffusion_step", (PyCFunction)Handle_diffusion_step, METH_VARARGS, "sonde_diffusion_step"},
    {"block", (PyCFunction)Handle_block, METH_VARARGS, "sonde_block"},
    {"model_params", (PyCFunction)Handle_model_params, METH_VARARGS, "sonde_model_params"},
    {"summary", (PyCFunction)Handle_summary, METH_NOARGS, "sonde_summary as a dict"},
    {"export", (PyCFunction)Handle_export, METH_O, "sonde_export (None: every format)"},
    {"clear", (PyCFunction)Handle_clear, METH_NOARGS, "sonde_clear"},
    {"trigger", (PyCFunction)Handle_trigger, METH_O, "sonde_trigger"},
    {"schedule", (PyCFunction)Handle_schedule, METH_O,
     "schedule(step) -> (action, cycle) of the step schedule"},
    {"ops", (PyCFunction)Handle_ops, METH_O, "sonde_ops over tuples"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Handle_getset[] = {
    {"closed", (getter)Handle_closed, NULL, "True once destroy() ran", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sonde._sonde.Handle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Handle_traverse,
    .tp_clear = (inquiry)Handle_clear_refs,
    .tp_doc = "Handle(config): one libsonde profiler (sonde_create); destroy() ends it.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Handle_init,
    .tp_dealloc = (destructor)Handle_dealloc,
    .tp_methods = Handle_methods,
    .tp_getset = Handle_getset,
};

/* ---------------------------------------------------------------------------------------------
 * The module
 * ------------------------------------------------------------------------------------------- */
static PyObject *m_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(sonde_version());
}

static PyObject *m_err_name(PyObject *self, PyObject *arg)
{
    (void)self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(sonde_err_name((int)code));
}

static PyObject *m_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(sonde_strerror((int)code));
}

static PyObject *m_last_error(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_DecodeUTF8(sonde_last_error(), (Py_ssize_t)strlen(sonde_last_error()),
                                "replace");
}

static PyObject *m_set_error_class(PyObject *self, PyObject *cls)
{
    (void)self;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Exception))
        return PyErr_Format(PyExc_TypeError, "an exception class is needed");
    Py_INCREF(cls);
    Py_XSETREF(g_error_class, cls);
    Py_RETURN_NONE;
}

/* yaml_load(data, name) -> (document, lines): a YAML document read by libyaml (the library the
 * configuration loader uses) as Python values: mappings as dicts in file order, sequences as
 * lists, scalars as str (a plain ~, null or empty scalar: None); lines maps each mapping key's
 * dotted path ("profiling.report_format") to its line. Errors: ValueError "NAME:LINE:COL: ...". */
typedef struct ydoc {
    yaml_parser_t parser;
    const char *name;
    PyObject *lines;
} ydoc;

static int y_next(ydoc *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->parser, ev))
        return 0;
    char msg[600];
    sonde__yaml_problem(&y->parser, y->name, msg, sizeof msg);
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

static PyObject *y_node(ydoc *y, yaml_event_t *ev, const char *path, int depth);

static PyObject *y_mapping(ydoc *y, const char *path, int depth)
{
    PyObject *d = PyDict_New();
    while (d) {
        yaml_event_t ev;
        if (y_next(y, &ev))
            goto fail;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return d;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            PyErr_Format(PyExc_ValueError, "%s:%zu:%zu: a mapping key must be a scalar", y->name,
                         ev.start_mark.line + 1, ev.start_mark.column + 1);
            yaml_event_delete(&ev);
            goto fail;
        }
        size_t line = ev.start_mark.line + 1;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)ev.data.scalar.value,
                                             (Py_ssize_t)ev.data.scalar.length, "replace");
        yaml_event_delete(&ev);
        if (!key)
            goto fail;
        PyObject *full = *path ? PyUnicode_FromFormat("%s.%U", path, key) : (Py_INCREF(key), key);
        if (!full || PyDict_Contains(d, key)) {
            if (full)
                PyErr_Format(PyExc_ValueError, "%s:%zu: key \"%U\" appears twice", y->name, line,
                             full);
            Py_XDECREF(full);
            Py_DECREF(key);
            goto fail;
        }
        const char *fp = PyUnicode_AsUTF8(full);
        PyObject *ln = PyLong_FromSize_t(line);
        PyObject *v = NULL;
        if (fp && ln && !PyDict_SetItem(y->lines, full, ln) && !y_next(y, &ev))
            v = y_node(y, &ev, fp, depth + 1);
        Py_XDECREF(ln);
        if (!v || PyDict_SetItem(d, key, v)) {
            Py_XDECREF(v);
            Py_DECREF(full);
            Py_DECREF(key);
            goto fail;
        }
        Py_DECREF(v);
        Py_DECREF(full);
        Py_DECREF(key);
    }
    return NULL;
fail:
    Py_XDECREF(d);
    return NULL;
}

/* The node whose first event is ev (consumed here). */
static PyObject *y_node(ydoc *y, yaml_event_t *ev, const char *path, int depth)
{
    yaml_event_type_t t = ev->type;
    if (depth > 64) {
        PyErr_Format(PyExc_ValueError, "%s:%zu: nested deeper than 64 levels", y->name,
                     ev->start_mark.line + 1);
        yaml_event_delete(ev);
        return NULL;
    }
    if (t == YAML_SCALAR_EVENT) {
        const char *v = (const char *)ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        PyObject *r;
        if (ev->data.scalar.plain_implicit &&
            (n == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
             !strcmp(v, "NULL")))
            r = (Py_INCREF(Py_None), Py_None);
        else
            r = PyUnicode_DecodeUTF8(v, (Py_ssize_t)n, "replace");
        yaml_event_delete(ev);
        return r;
    }
    if (t == YAML_ALIAS_EVENT) {
        PyErr_Format(PyExc_ValueError, "%s:%zu: YAML aliases are not supported", y->name,
                     ev->start_mark.line + 1);
        yaml_event_delete(ev);
        return NULL;
    }
    yaml_event_delete(ev);
    if (t == YAML_MAPPING_START_EVENT)
        return y_mapping(y, path, depth);
    if (t != YAML_SEQUENCE_START_EVENT) {
        PyErr_Format(PyExc_ValueError, "%s: unexpected YAML event", y->name);
        return NULL;
    }
    PyObject *l = PyList_New(0);
    while (l) {
        yaml_event_t e;
        if (y_next(y, &e))
            break;
        if (e.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&e);
            return l;
        }
        PyObject *v = y_node(y, &e, path, depth + 1);
        if (!v || PyList_Append(l, v)) {
            Py_XDECREF(v);
            break;
        }
        Py_DECREF(v);
    }
    Py_XDECREF(l);
    return NULL;
}

static PyObject *m_yaml_load(PyObject *self, PyObject *args)
{
    (void)self;
    const char *data, *name;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y#s", &data, &n, &name))
        return NULL;
    ydoc y = {.name = name, .lines = PyDict_New()};
    if (!y.lines)
        return NULL;
    if (!yaml_parser_initialize(&y.parser)) {
        Py_DECREF(y.lines);
        return PyErr_NoMemory();
    }
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)data, (size_t)n);
    PyObject *doc = NULL;
    int started = 0;
    for (;;) { /* stream start, document start, the root node (the first document's) */
        yaml_event_t ev;
        if (y_next(&y, &ev))
            goto out;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
            t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (started) {
            yaml_event_delete(&ev);
            PyErr_Format(PyExc_ValueError, "%s: more than one YAML document", name);
            goto out;
        }
        started = 1;
        if (!(doc = y_node(&y, &ev, "", 0)))
            goto out;
    }
    yaml_parser_delete(&y.parser);
    if (!doc)
        doc = (Py_INCREF(Py_None), Py_None);
    PyObject *r = Py_BuildValue("(NN)", doc, y.lines);
    return r;
out:
    Py_XDECREF(doc);
    yaml_parser_delete(&y.parser);
    Py_DECREF(y.lines);
    return NULL;
}

/* job_rank() -> (rank, world_size, local_rank), -1 for what the environment does not say. */
static PyObject *m_job_rank(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int r, w, l;
    sonde_job_rank(&r, &w, &l);
    return Py_BuildValue("(iii)", r, w, l);
}

/* cli(args) -> exit code: the sonde command (tools/sonde) with argv = ["sonde", *args], run
 * without the GIL; its output goes to the process's stdout and stderr, flushed before return. */
static PyObject *m_cli(PyObject *self, PyObject *seq)
{
    (void)self;
    PyObject *fast = PySequence_Fast(seq, "cli: expected a list of str");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    char **argv = PyMem_Calloc((size_t)n + 2, sizeof *argv);
    PyObject *rc = NULL;
    if (!argv) {
        PyErr_NoMemory();
        goto out;
    }
    argv[0] = "sonde";
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *a;
        if (as_text(PySequence_Fast_GET_ITEM(fast, i), &a, 0))
            goto out;
        argv[i + 1] = (char *)a;
    }
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = sonde_cli_main((int)n + 1, argv);
    fflush(stdout);
    fflush(stderr);
    Py_END_ALLOW_THREADS
    rc = PyLong_FromLong(code);
out:
    PyMem_Free(argv);
    Py_DECREF(fast);
    return rc;
}

/* cli_is_command(word) -> whether the sonde command has a subcommand of that name. */
static PyObject *m_cli_is_command(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *w;
    if (as_text(arg, &w, 0))
        return NULL;
    return PyBool_FromLong(cli_find(w) != NULL);
}

/* finish_all(): what exit() does for every live profiler (each finishes its run and writes
 * its reports), without the GIL. */
static PyObject *m_finish_all(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    sonde__finish_all();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"finish_all", m_finish_all, METH_NOARGS,
     "what exit() does for every live profiler: each writes its run and reports"},
    {"cli_is_command", m_cli_is_command, METH_O,
     "cli_is_command(word) -> True when the sonde command has that subcommand"},
    {"yaml_load", m_yaml_load, METH_VARARGS,
     "yaml_load(data: bytes, name) -> (document, {dotted key: line})"},
    {"job_rank", m_job_rank, METH_NOARGS, "sonde_job_rank: (rank, world_size, local_rank)"},
    {"cli", m_cli, METH_O, "the sonde command: cli([\"aggregate\", \"DIR\"]) -> exit code"},
    {"version", m_version, METH_NOARGS, "libsonde's version"},
    {"err_name", m_err_name, METH_O, "the symbol of an error code (\"SONDE_EINVAL\")"},
    {"strerror", m_strerror, METH_O, "the text of an error code"},
    {"last_error", m_last_error, METH_NOARGS, "this thread's last detailed message"},
    {"set_error_class", m_set_error_class, METH_O,
     "the exception class raised for libsonde's errors, called as cls(code, message)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_sonde",
    "libsonde for Python: Config, Handle, Section and Wrapped (see sonde/__init__.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sonde(void)
{
    if (PyType_Ready(&ConfigType) < 0 || PyType_Ready(&HandleType) < 0 ||
        PyType_Ready(&SectionType) < 0 || PyType_Ready(&WrappedType) < 0 ||
        PyType_Ready(&ProfileFnType) < 0)
        return NULL;
    if (!g_handle_attr && !(g_handle_attr = PyUnicode_InternFromString("_handle")))
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (sonde_py_trace_add(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyTypeObject *types[] = {&ConfigType, &HandleType, &SectionType, &WrappedType,
                             &ProfileFnType};
    const char *names[] = {"Config", "Handle", "Section", "Wrapped", "ProfileFn"};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
