/* _sections.c - the extension's hot objects: Section (`with prof.profile(name):`), ProfileFn
 * (what `prof.profile` is on a Profiler) and Wrapped (a decorated function). Entering a Section
 * records inline what sonde_begin would (sonde__begin_fast, record/record.h), leaving it what
 * sonde_end would, with no Python object made on the way. Called with the GIL held. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <string.h>

#include <sonde/sonde.h>

#include "_sonde.h"
#include "record/record.h"

/* ---------------------------------------------------------------------------------------------
 * Section: `with prof.profile("decode"):`. Entering is sonde_begin (or sonde_session_begin),
 * leaving sonde_end; __enter__ returns the owner (the Python Profiler). An exception leaving the
 * block still ends the section and goes on; a failed end is raised only when none is in flight.
 * ------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    HandleObject *handle;
    PyObject *owner;  /* what __enter__ returns */
    PyObject *name;   /* bytes */
    int session;
    uint32_t id;      /* the name's interned id (sonde__intern), 0: sonde_begin interns it */
} SectionObject;


/* A section's name as a new reference to bytes (UTF-8 for a str), or NULL with TypeError (not
 * text) or ValueError (a NUL in it, which would cut the name short and merge it with others, as
 * CPython refuses a path with one). */
static PyObject *name_bytes(PyObject *name)
{
    PyObject *b;
    if (PyUnicode_Check(name)) {
        b = PyUnicode_AsUTF8String(name);
    } else if (PyBytes_Check(name)) {
        Py_INCREF(name);
        b = name;
    } else {
        return PyErr_Format(PyExc_TypeError, "a section's name is str or bytes, not %.100s",
                            Py_TYPE(name)->tp_name);
    }
    if (b && memchr(PyBytes_AS_STRING(b), 0, (size_t)PyBytes_GET_SIZE(b))) {
        Py_DECREF(b);
        return PyErr_Format(PyExc_ValueError, "embedded null character in section name %R",
                            name);
    }
    return b;
}

static int Section_init(SectionObject *self, PyObject *args, PyObject *kw)
{
    PyObject *h, *owner, *name;
    int session = 0;
    static char *kwlist[] = {"handle", "owner", "name", "session", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO|p", kwlist, &HandleType, &h, &owner, &name,
                                     &session))
        return -1;
    PyObject *b = name_bytes(name);
    if (!b)
        return -1;
    Py_INCREF(h);
    Py_INCREF(owner);
    Py_XSETREF(self->handle, (HandleObject *)h);
    Py_XSETREF(self->owner, owner);
    Py_XSETREF(self->name, b);
    self->session = session;
    self->id = session ? 0 : sonde__intern(PyBytes_AS_STRING(b));
    return 0;
}

static int Section_traverse(SectionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handle);
    Py_VISIT(self->owner);
    return 0;
}

static int Section_clear(SectionObject *self)
{
    Py_CLEAR(self->handle);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->name);
    return 0;
}

static void Section_dealloc(SectionObject *self)
{
    PyObject_GC_UnTrack(self);
    Section_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Section_enter(SectionObject *self, PyObject *unused)
{
    (void)unused;
    sonde_profiler *p = self->handle ? self->handle->p : NULL;
    if (!p)
        return sonde_py_closed();
    const char *name = PyBytes_AS_STRING(self->name);
    int rc = self->session ? sonde_session_begin(p, name) : sonde__begin_fast(p, self->id, name);
    if (rc < 0)
        return sonde_py_raise_code(rc, self->session ? "session" : "profile");
    Py_INCREF(self->owner);
    return self->owner;
}

static PyObject *Section_exit(SectionObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    sonde_profiler *p = self->handle ? self->handle->p : NULL;
    if (p) { /* closed inside the block: nothing to end */
        int hook = sonde_py_call_on_end(self->handle);
        p = self->handle->p;
        int rc = !p ? 0 : self->session ? sonde_session_end(p) : sonde__end_fast(p, self->id);
        if (hook)
            return NULL;
        if (rc < 0 && (nargs < 1 || args[0] == Py_None))
            return sonde_py_raise_code(rc, self->session ? "session end" : "profile end");
    }
    Py_RETURN_FALSE;
}

/* Handle.section(owner, name[, session]): a Section of this profiler, made without parsing
 * keywords (the hot way in: `prof.profile(name)`). Sections of one name are the same object
 * each time (a Section holds no state between enter and exit), from a cache of at most 4096. */
PyObject *Handle_section(HandleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3)
        return PyErr_Format(PyExc_TypeError, "section(owner, name[, session])");
    if (!self->p)
        return sonde_py_closed();
    int session = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (session < 0)
        return NULL;
    PyObject *owner = args[0], *name = args[1];
    if (!session && self->cache && self->cache_owner == owner) {
        PyObject *hit = PyDict_GetItemWithError(self->cache, name);
        if (hit) {
            Py_INCREF(hit);
            return hit;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    PyObject *b = name_bytes(name);
    if (!b)
        return NULL;
    SectionObject *s = PyObject_GC_New(SectionObject, &SectionType);
    if (!s) {
        Py_DECREF(b);
        return NULL;
    }
    Py_INCREF(self);
    Py_INCREF(owner);
    s->handle = self;
    s->owner = owner;
    s->name = b;
    s->session = session;
    s->id = session ? 0 : sonde__intern(PyBytes_AS_STRING(b));
    PyObject_GC_Track(s);
    if (!session) {
        if (!self->cache || self->cache_owner != owner) {
            Py_XSETREF(self->cache, PyDict_New());
            self->cache_owner = owner; /* compared, never dereferenced: no reference held */
        }
        if (self->cache && PyDict_GET_SIZE(self->cache) < 4096 &&
            PyDict_SetItem(self->cache, name, (PyObject *)s) < 0)
            PyErr_Clear(); /* an unhashable name is still a name: no caching */
    }
    return (PyObject *)s;
}

static PyMethodDef Section_methods[] = {
    {"__enter__", (PyCFunction)Section_enter, METH_NOARGS, "opens the section"},
    {"__exit__", (PyCFunction)(void (*)(void))Section_exit, METH_FASTCALL, "closes it"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sonde._sonde.Section",
    .tp_basicsize = sizeof(SectionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Section(handle, owner, name, session=False): a section (or session) as a context "
              "manager.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Section_init,
    .tp_dealloc = (destructor)Section_dealloc,
    .tp_traverse = (traverseproc)Section_traverse,
    .tp_clear = (inquiry)Section_clear,
    .tp_methods = Section_methods,
};

/* ---------------------------------------------------------------------------------------------
 * ProfileFn: what `prof.profile` is on a Profiler instance, so that `with prof.profile(name):`
 * is two C calls and no Python frame. fn(name) with a str name returns the handle's Section for
 * it (Handle_section, owner the Profiler); any other call (metadata, another type of name, a
 * closed handle) is the class's Python method, Profiler.profile(owner, ...), which does the rest
 * or raises. The owner is held through a weak reference: no cycle through its __dict__.
 * ------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    HandleObject *handle;
    PyObject *owner_ref;       /* weakref.ref to the Profiler */
    PyObject *last_name;       /* the name of the last call, the very object, or NULL */
    PyObject *last_section;    /* the Section it returned (the handle's own for that name) */
    vectorcallfunc vectorcall;
} ProfileFnObject;


/* The owner, a new reference, or NULL (with no exception) when it is gone. */
static PyObject *profile_owner(ProfileFnObject *self)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(self->owner_ref, &o) < 0)
        PyErr_Clear();
    return o;
#else
    PyObject *o = PyWeakref_GetObject(self->owner_ref);
    if (o == Py_None)
        return NULL;
    Py_INCREF(o);
    return o;
#endif
}

static PyObject *ProfileFn_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames)
{
    ProfileFnObject *self = (ProfileFnObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* a loop's `with prof.profile("decode"):` passes the same str constant each time */
    if (nargs == 1 && !kwnames && args[0] == self->last_name && self->handle->p) {
        Py_INCREF(self->last_section);
        return self->last_section;
    }
    PyObject *owner = profile_owner(self);
    if (!owner)
        return sonde_py_closed();
    PyObject *r;
    if (nargs == 1 && !kwnames && PyUnicode_CheckExact(args[0]) && self->handle->p) {
        PyObject *a[2] = {owner, args[0]};
        r = Handle_section(self->handle, a, 2);
        if (r) {
            Py_INCREF(args[0]);
            Py_INCREF(r);
            Py_XSETREF(self->last_name, args[0]);
            Py_XSETREF(self->last_section, r);
        }
    } else { /* the class's method, with the owner first */
        PyObject *meth = PyObject_GetAttrString((PyObject *)Py_TYPE(owner), "profile");
        Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        PyObject **all = meth ? PyMem_Malloc((size_t)(nargs + nk + 1) * sizeof *all) : NULL;
        if (meth && !all)
            PyErr_NoMemory();
        r = NULL;
        if (all) {
            all[0] = owner;
            for (Py_ssize_t i = 0; i < nargs + nk; i++)
                all[i + 1] = args[i];
            r = PyObject_Vectorcall(meth, all, (size_t)(nargs + 1), kwnames);
            PyMem_Free(all);
        }
        Py_XDECREF(meth);
    }
    Py_DECREF(owner);
    return r;
}

static int ProfileFn_init(ProfileFnObject *self, PyObject *args, PyObject *kw)
{
    PyObject *h, *ref;
    static char *kwlist[] = {"handle", "owner_ref", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O", kwlist, &HandleType, &h, &ref))
        return -1;
    if (!PyWeakref_CheckRef(ref)) {
        PyErr_SetString(PyExc_TypeError, "ProfileFn: owner_ref must be a weakref.ref");
        return -1;
    }
    Py_INCREF(h);
    Py_INCREF(ref);
    Py_XSETREF(self->handle, (HandleObject *)h);
    Py_XSETREF(self->owner_ref, ref);
    Py_CLEAR(self->last_name);
    Py_CLEAR(self->last_section);
    self->vectorcall = ProfileFn_vectorcall;
    return 0;
}

static int ProfileFn_traverse(ProfileFnObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handle);
    Py_VISIT(self->owner_ref);
    Py_VISIT(self->last_section);
    return 0;
}

static int ProfileFn_clear(ProfileFnObject *self)
{
    Py_CLEAR(self->handle);
    Py_CLEAR(self->owner_ref);
    Py_CLEAR(self->last_name);
    Py_CLEAR(self->last_section);
    return 0;
}

static void ProfileFn_dealloc(ProfileFnObject *self)
{
    PyObject_GC_UnTrack(self);
    ProfileFn_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ProfileFn_call(PyObject *self, PyObject *args, PyObject *kw)
{
    return PyVectorcall_Call(self, args, kw);
}

PyTypeObject ProfileFnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sonde._sonde.ProfileFn",
    .tp_basicsize = sizeof(ProfileFnObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ProfileFn(handle, owner_ref): profile(name, metadata=None), a section as a "
              "context manager (Profiler.profile, as a C call).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ProfileFn_init,
    .tp_dealloc = (destructor)ProfileFn_dealloc,
    .tp_traverse = (traverseproc)ProfileFn_traverse,
    .tp_clear = (inquiry)ProfileFn_clear,
    .tp_call = ProfileFn_call,
    .tp_vectorcall_offset = offsetof(ProfileFnObject, vectorcall),
};

/* ---------------------------------------------------------------------------------------------
 * Wrapped: what a decorator returns. Each call is a section named label around the function, in
 * the profiler given (an object whose _handle is a Handle, or None) or, without one, in the one
 * which() returns at call time. No profiler, or a closed one: the function runs unprofiled.
 * ------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    PyObject *label;    /* bytes */
    PyObject *profiler; /* or NULL */
    PyObject *which;    /* or NULL */
    PyObject *dict;     /* __dict__: functools.update_wrapper fills it */
    HandleObject *cached; /* profiler's _handle once read, or NULL: a Profiler's _handle is set
                           * once and becomes None only on close, when the Handle's p is NULL */
    vectorcallfunc vectorcall;
    uint32_t id;        /* label's interned id (sonde__intern), 0: sonde_begin interns it */
} WrappedObject;

PyObject *g_handle_attr; /* "_handle", set by the module's init */

static int Wrapped_init(WrappedObject *self, PyObject *args, PyObject *kw)
{
    PyObject *func, *label, *profiler = Py_None, *which = Py_None;
    static char *kwlist[] = {"func", "label", "profiler", "which", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|OO", kwlist, &func, &PyBytes_Type, &label,
                                     &profiler, &which))
        return -1;
    Py_INCREF(func);
    Py_INCREF(label);
    Py_XSETREF(self->func, func);
    Py_XSETREF(self->label, label);
    Py_XSETREF(self->profiler, profiler == Py_None ? NULL : (Py_INCREF(profiler), profiler));
    Py_XSETREF(self->which, which == Py_None ? NULL : (Py_INCREF(which), which));
    Py_CLEAR(self->cached);
    self->id = sonde__intern(PyBytes_AS_STRING(label));
    return 0;
}

/* The profiler of this call: a new reference to its Handle with a live profiler, or NULL
 * (an exception set only when which() raised). */
static HandleObject *call_handle(WrappedObject *self)
{
    PyObject *prof = self->profiler;
    if (prof && self->cached && self->cached->p) {
        Py_INCREF(self->cached);
        return self->cached;
    }
    if (prof)
        Py_INCREF(prof);
    else if (self->which && !(prof = PyObject_CallNoArgs(self->which)))
        return NULL;
    if (!prof)
        return NULL;
    PyObject *h = prof == Py_None ? NULL : PyObject_GetAttr(prof, g_handle_attr);
    Py_DECREF(prof);
    if (!h) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyObject_TypeCheck(h, &HandleType) || !((HandleObject *)h)->p) {
        Py_DECREF(h);
        return NULL;
    }
    if (self->profiler) {
        Py_INCREF(h);
        Py_XSETREF(self->cached, (HandleObject *)h);
    }
    return (HandleObject *)h;
}

static PyObject *Wrapped_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames)
{
    WrappedObject *self = (WrappedObject *)callable;
    HandleObject *h = call_handle(self);
    if (!h) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    }
    int rc = sonde__begin_fast(h->p, self->id, PyBytes_AS_STRING(self->label));
    if (rc < 0) {
        Py_DECREF(h);
        return sonde_py_raise_code(rc, "profile_function");
    }
    PyObject *r = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if (h->p && sonde_py_call_on_end(h) && r) /* the hook raised: that is the call's outcome */
        Py_CLEAR(r);
    if (h->p) /* the function (or the hook) may have closed the profiler */
        sonde__end_fast(h->p, self->id);
    Py_DECREF(h);
    return r;
}

static PyObject *Wrapped_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj); /* a method: bound like a function */
}

static int Wrapped_traverse(WrappedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->profiler);
    Py_VISIT(self->which);
    Py_VISIT(self->dict);
    Py_VISIT(self->cached);
    return 0;
}

static int Wrapped_clear(WrappedObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->label);
    Py_CLEAR(self->profiler);
    Py_CLEAR(self->which);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->cached);
    return 0;
}

static void Wrapped_dealloc(WrappedObject *self)
{
    PyObject_GC_UnTrack(self);
    Wrapped_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Wrapped_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    WrappedObject *self = (WrappedObject *)PyType_GenericNew(type, args, kw);
    if (self)
        self->vectorcall = Wrapped_vectorcall;
    return (PyObject *)self;
}

/* Pickled by reference, as a function is: the name of its module's attribute (its __qualname__,
 * which functools.update_wrapper copied), so a decorated module-level function goes to a
 * ProcessPoolExecutor and comes back as the same object; a local one fails as a local function
 * does. */
static PyObject *Wrapped_reduce(WrappedObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *q = self->dict ? PyDict_GetItemString(self->dict, "__qualname__") : NULL;
    if (q && PyUnicode_Check(q)) {
        Py_INCREF(q);
        return q;
    }
    return PyErr_Format(PyExc_TypeError, "cannot pickle a profiled function without a "
                                         "__qualname__ (%R)", self->func);
}

static PyMethodDef Wrapped_methods[] = {
    {"__reduce__", (PyCFunction)Wrapped_reduce, METH_NOARGS, "pickled by reference"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Wrapped_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject WrappedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sonde._sonde.Wrapped",
    .tp_basicsize = sizeof(WrappedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Wrapped(func, label, profiler=None, which=None): each call is a section.",
    .tp_new = Wrapped_new,
    .tp_init = (initproc)Wrapped_init,
    .tp_dealloc = (destructor)Wrapped_dealloc,
    .tp_traverse = (traverseproc)Wrapped_traverse,
    .tp_clear = (inquiry)Wrapped_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(WrappedObject, vectorcall),
    .tp_dictoffset = offsetof(WrappedObject, dict),
    .tp_descr_get = Wrapped_get,
    .tp_getset = Wrapped_getset,
    .tp_methods = Wrapped_methods,
};

