/* noop_cm.c - the tightest floor for a Python `with` block: a context manager written in C whose
 * __enter__ and __exit__ do nothing (bench/bench_python.py compares sonde's sections with it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "noop_cm", NULL, -1, NULL,
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
