/* noop_cm.c - floors for bench/bench_python.py: the tightest Python `with` block, a context
 * manager written in C whose __enter__ and __exit__ do nothing (sonde's sections are compared
 * with it); and the tightest function tracer, a C profiling hook that does nothing
 * (profile_noop(True)), which is what the interpreter's hook mechanism alone costs a call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>

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

static int through_init(ThroughObject *self, PyObject *args, PyObject *kw)
{
    PyObject *f;
    (void)kw;
    if (!PyArg_ParseTuple(args, "O", &f))
        return -1;
    Py_INCREF(f);
    Py_XSETREF(self->func, f);
    self->vectorcall = through_call;
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
    if (PyType_Ready(&NoopType) < 0 || PyType_Ready(&ThroughType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Py_INCREF(&NoopType);
    Py_INCREF(&ThroughType);
    if (PyModule_AddObject(m, "Noop", (PyObject *)&NoopType) < 0 ||
        PyModule_AddObject(m, "Through", (PyObject *)&ThroughType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
