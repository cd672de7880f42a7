/* noop_cm.c - floors for bench/bench_python.py: the tightest Python `with` block, a context
 * manager written in C whose __enter__ and __exit__ do nothing (sonde's sections are compared
 * with it); and the tightest function tracer, a C profiling hook that does nothing
 * (profile_noop(True)), which is what the interpreter's hook mechanism alone costs a call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

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
    if (PyType_Ready(&NoopType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Py_INCREF(&NoopType);
    if (PyModule_AddObject(m, "Noop", (PyObject *)&NoopType) < 0) {
        Py_DECREF(&NoopType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
