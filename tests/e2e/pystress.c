/* pystress.c SECONDS DIR SCRIPT - CPython embedded in a program that samples itself at 4999 Hz
 * through libsonde, so that the Python frame reader runs in this process (under ASan in the
 * ASan build), while SCRIPT (tests/e2e/pystress.py) makes and drops frames, threads, generators
 * and coroutines for SECONDS. The sampler goes on after the interpreter is finalized, reading
 * what it leaves. Exit 0 when the script ran and the profiler wrote its reports (e2e pyframes
 * checks them). The environment's SONDE_* keys apply (SONDE_SAMPLE_IN_THREAD=1). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>

#include <sonde/sonde.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: pystress SECONDS DIR SCRIPT\n");
        return 2;
    }
    sonde_config c = sonde_config_default();
    c.output_dir = argv[2];
    c.name = "pystress";
    c.sample_hz = 4999;
    c.formats = SONDE_FORMAT_JSON;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    if (sonde_config_from_env(&c) != 0) { /* SONDE_SAMPLE_IN_THREAD=1: the in-thread sampling */
        fprintf(stderr, "pystress: %s\n", sonde_last_error());
        return 1;
    }
    sonde_profiler *p = sonde_create(&c);
    if (!p) {
        fprintf(stderr, "pystress: sonde_create failed\n");
        return 1;
    }
    Py_Initialize();
    PyObject *args = Py_BuildValue("[ss]", argv[3], argv[1]);
    int rc = !args || PySys_SetObject("argv", args) ? -1 : 0;
    Py_XDECREF(args);
    FILE *f = rc ? NULL : fopen(argv[3], "r");
    if (f) {
        rc = PyRun_SimpleFileExFlags(f, argv[3], 1, NULL);
    } else {
        fprintf(stderr, "pystress: cannot run %s\n", argv[3]);
        rc = -1;
    }
    if (Py_FinalizeEx() < 0)
        rc = -1;
    int err = sonde_destroy(p);
    if (err)
        fprintf(stderr, "pystress: sonde_destroy: %s\n", sonde_strerror(err));
    return rc || err ? 1 : 0;
}
