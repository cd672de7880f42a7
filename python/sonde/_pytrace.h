/* _pytrace.h - between the extension's two files: _sonde.c (the module, Handle) and
 * _pytrace.c (Python function tracing). */
#ifndef SONDE_PYTRACE_H
#define SONDE_PYTRACE_H

#include <Python.h>
#include <sonde/sonde.h>

/* _sonde.c: the profiler of a Handle; NULL with TypeError or SondeError (closed) set. */
sonde_profiler *sonde_py_handle_profiler(PyObject *handle);

/* _pytrace.c: adds trace_start, trace_stop, trace_stats, trace_handle and trace_thread_hook to
 * the module. 0, or -1 with an exception set. */
int sonde_py_trace_add(PyObject *module);
/* Stops tracing when it traces into p (before p is destroyed). */
void sonde_py_trace_forget(sonde_profiler *p);

#endif
