/* _sonde.h - between the extension's files: _sonde.c (errors, Config, Handle, the module) and
 * _sections.c (the hot objects: Section, ProfileFn, Wrapped). Every function here is called with
 * the GIL held. */
#ifndef SONDE_PY_SONDE_H
#define SONDE_PY_SONDE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sonde/sonde.h>

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* One sonde_profiler (_sonde.c). */
typedef struct {
    PyObject_HEAD
    sonde_profiler *p;
    PyObject *cache;       /* name -> Section (section()), or NULL */
    PyObject *cache_owner; /* the owner those Sections return; compared only */
    PyObject *on_end;      /* called before every section end made through it, or NULL */
    int busy;              /* calls using p with the GIL released (summary, export): destroy
                            * waits for them (changed with the GIL held) */
} HandleObject;

extern PyTypeObject HandleType;
/* _sections.c */
extern PyTypeObject SectionType, ProfileFnType, WrappedType;
extern PyObject *g_handle_attr; /* "_handle" */

/* _sonde.c: raises SondeError(code, "what: libsonde's message") and returns NULL. */
PyObject *sonde_py_raise_code(int code, const char *what);
/* _sonde.c: raises SondeError(SONDE_ESTATE, "the profiler is closed") and returns NULL. */
PyObject *sonde_py_closed(void);
/* _sonde.c: runs h's on_end hook before a section ends (the exception in flight kept); 0, or
 * -1 with the hook's exception set. */
int sonde_py_call_on_end(HandleObject *h);
/* _sections.c: Handle.section(owner, name[, session]), the hot way to a Section. */
PyObject *Handle_section(HandleObject *self, PyObject *const *args, Py_ssize_t nargs);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif
