/* noop_cm.c - floors for bench/bench_python.py: the tightest Python `with` block, a context
 * manager written in C whose __enter__ and __exit__ do nothing (sonde's sections are compared
 * with it), reached bare or through a C call as `with prof.profile(name)` reaches sonde's
 * (Const); the same with each method reading the time stamp counter once into a ring of 16-byte
 * records (Stamp: the least any timing context manager costs); a wrapper that only calls through
 * (Through), or that reads the counter around the call (Through(f, True)); and the tightest
 * function tracer, a C profiling hook that does nothing (profile_noop(True)), which is what the
 * interpreter's hook mechanism alone costs a call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define STAMP() __rdtsc()
#else
#include <time.h>
static uint64_t stamp_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define STAMP() stamp_ns()
#endif

/* The ring the stamping floors write: 16-byte records, as sonde's thread buffers hold. */
typedef struct {
    uint64_t ts;
    uint64_t tag;
} rec16;
#define RING 4096u
static rec16 g_ring[RING];
static unsigned g_at;

static inline void stamp(uint64_t tag)
{
    rec16 *r = &g_ring[g_at++ & (RING - 1)];
    r->ts = STAMP();
    r->tag = tag;
}

static PyObject *enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *exit_(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    (void)nargs;
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"__enter__", enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))exit_, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *stamp_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    stamp(0);
    Py_INCREF(self);
    return self;
}

static PyObject *stamp_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    (void)nargs;
    stamp(1);
    Py_RETURN_FALSE;
}

static PyMethodDef stamp_methods[] = {
    {"__enter__", stamp_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stamp_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StampType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "noop_cm.Stamp",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_methods = stamp_methods,
};

static PyTypeObject NoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "noop_cm.Noop",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_methods = methods,
};

/* Through(func): a wrapper written in C that does nothing but call func (the decorator's floor:
 * what any C wrapper costs a call). */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    vectorcallfunc vectorcall;
} ThroughObject;

static PyObject *through_call(PyObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
    return PyObject_Vectorcall(((ThroughObject *)self)->func, args, nargsf, kwnames);
}

static PyObject *through_stamped(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    stamp(0);
    PyObject *r = PyObject_Vectorcall(((ThroughObject *)self)->func, args, nargsf, kwnames);
    stamp(1);
    return r;
}

static int through_init(ThroughObject *self, PyObject *args, PyObject *kw)
{
    PyObject *f;
    int stamped = 0;
    (void)kw;
    if (!PyArg_ParseTuple(args, "O|p", &f, &stamped))
        return -1;
    Py_INCREF(f);
    Py_XSETREF(self->func, f);
    self->vectorcall = stamped ? through_stamped : through_call;
    return 0;
}

static void through_dealloc(ThroughObject *self)
{
    Py_XDECREF(self->func);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ThroughType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "noop_cm.Through",
    .tp_basicsize = sizeof(ThroughObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)through_init,
    .tp_dealloc = (destructor)through_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ThroughObject, vectorcall),
};

/* Const(obj): a C callable that returns obj whatever it is given (the call that reaches a
 * context manager in `with get(name):`, as prof.profile(name) reaches a section). */
typedef struct {
    PyObject_HEAD
    PyObject *obj;
    vectorcallfunc vectorcall;
} ConstObject;

static PyObject *const_call(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    PyObject *o = ((ConstObject *)self)->obj;
    Py_INCREF(o);
    return o;
}

static int const_init(ConstObject *self, PyObject *args, PyObject *kw)
{
    PyObject *o;
    (void)kw;
    if (!PyArg_ParseTuple(args, "O", &o))
        return -1;
    Py_INCREF(o);
    Py_XSETREF(self->obj, o);
    self->vectorcall = const_call;
    return 0;
}

static void const_dealloc(ConstObject *self)
{
    Py_XDECREF(self->obj);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ConstType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "noop_cm.Const",
    .tp_basicsize = sizeof(ConstObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)const_init,
    .tp_dealloc = (destructor)const_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ConstObject, vectorcall),
};

static int noop_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)frame;
    (void)what;
    (void)arg;
    return 0;
}

/* profile_noop(on): the do-nothing hook on the calling thread, or off. */
static PyObject *profile_noop(PyObject *self, PyObject *on)
{
    (void)self;
    PyEval_SetProfile(PyObject_IsTrue(on) ? noop_hook : NULL, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"profile_noop", profile_noop, METH_O, "profile_noop(on): a C profiling hook that does nothing"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "noop_cm", NULL, -1, module_methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_noop_cm(void)
{
    PyTypeObject *types[] = {&NoopType, &StampType, &ThroughType, &ConstType};
    const char *names[] = {"Noop", "Stamp", "Through", "Const"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
