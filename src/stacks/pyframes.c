/* pyframes.c - the Python frames of a thread of CPython 3.11, 3.12 or 3.13 (stacks.h), read
 * while the program runs, from the sampler's thread, without stopping it or any of its threads.
 *
 * The interpreter is found in the process's mappings: the file (the python executable, or
 * libpythonX.Y.so) whose ELF symbols hold `_PyRuntime`, `Py_Version` and `PyCode_Type`. Memory
 * is read with process_vm_readv, in this process as in a child: a freed or half-made frame, a
 * pointer into nothing, a cycle, all end the walk with the frames read so far, never with a
 * fault. The structures' offsets are the release builds' (the default, GIL build) of each
 * version, measured from each version's own headers (docs/stacks.md); 3.13's are checked against
 * the `_Py_DebugOffsets` the interpreter carries for such readers.
 *
 * The walk: _PyRuntime -> interpreters -> thread states (the one whose native_thread_id is the
 * sampled thread's) -> its current frame -> each frame's code object and instruction -> the
 * code's qualified name, file, first line and location table (the line being run). Code objects
 * are read once per process and address; a thread's frames mostly lie in its data stack, read
 * in one piece per sample. */
#define _GNU_SOURCE
#include "stacks.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/strmap.h"

#define WINDOW 16384          /* bytes of a thread's data stack read at once, below its top */
#define MAX_HOPS 4096         /* frames followed at most (a cycle in torn memory ends here) */
#define MAX_THREADS 4096      /* thread states walked at most per interpreter */
#define MAX_INTERPS 64
#define MAX_TEXT 1024         /* characters of a name or file kept */
#define MAX_LINETABLE (1u << 20)
#define MAX_FRAMES_READ 256  /* Python frames of a stack at most */
#define RESCAN_NS 50000000ull /* a thread not found is looked for again after 50 ms */

/* Where each field is, per version (release builds, x86-64 and other LP64 ABIs). */
typedef struct pylayout {
    unsigned minor;
    uint32_t rt_interps;     /* _PyRuntime.interpreters.head */
    uint32_t is_next, is_threads; /* PyInterpreterState.next, .threads.head */
    uint32_t ts_next, ts_tid; /* PyThreadState.next, .native_thread_id */
    uint32_t ts_frame;       /* .cframe (3.11, 3.12) or .current_frame (3.13) */
    uint32_t cf_frame;       /* _PyCFrame.current_frame; NONE where ts_frame is the frame */
    uint32_t ts_chunk, ts_top; /* .datastack_chunk, .datastack_top */
    uint32_t fr_code, fr_previous, fr_instr, fr_owner; /* _PyInterpreterFrame */
    uint32_t co_filename, co_qualname, co_firstlineno, co_linetable, co_code; /* PyCodeObject */
    uint32_t str_ascii, str_compact; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
    int cstack_owner;        /* the owner of the C stack's entry frames (no code of the
                                program's): skipped; -1 where there are none */
    int fr_is_entry;         /* 3.11: _PyInterpreterFrame.is_entry, the first frame of an
                                evaluation loop's activation (-1: the C stack's frames say) */
    uint32_t ts_status;      /* PyThreadState._status (3.12, 3.13; NONE before), whose bit
                                STATUS_BOUND (bound_gilstate) marks the state its thread entered
                                last: the interpreter it is in, GIL held or not (read from a
                                running 3.12.1 and 3.13.0: set, and still set asleep; clear while
                                the thread runs in a sub-interpreter) */
} pylayout;
#define STATUS_BOUND 8u

#define NONE UINT32_MAX
static const pylayout layouts[] = {
    {11, 40, 0, 16, 8, 160, 56, 8, 296, 304, 32, 48, 56, 69, 112, 128, 72, 136, 184, 48, 72, -1,
     68, NONE},
    {12, 40, 0, 72, 8, 144, 56, 0, 232, 240, 0, 8, 56, 70, 112, 128, 68, 136, 192, 40, 56, 3, -1,
     24},
    {13, 632, 7264, 7344, 8, 160, 72, NONE, 232, 240, 0, 8, 56, 70, 112, 128, 68, 136, 200, 40,
     56, 3, -1, 32},
};

typedef struct pycode_e {
    char *name, *file;
    unsigned first_line;
    uint8_t *lines;          /* the location table */
    size_t n_lines;
} pycode_e;

struct sonde_pytab {
    pycode_e *codes;
    size_t n_codes, cap_codes;
    strmap same;             /* "file\tname\tfirst line" -> the first code of that source: a
                                code made again and again (exec, a class body) is kept once */
};

/* A code object read: its address, what it was then (a freed code's address may hold another
 * later: its name, file and first line are then other objects), its id in the table + 1. */
typedef struct codekey {
    uint64_t addr, file, qual;
    uint32_t first, id;
} codekey;

typedef struct tcache {
    int tid;
    uint64_t tstate;         /* 0: not a Python thread at the last look */
} tcache;

struct sonde_pyproc {
    int pid;
    sonde_pytab *tab;
    const pylayout *l;
    char *path;              /* the file holding the interpreter */
    uint64_t runtime, code_type;
    uint64_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault in the file (offsets); 0, 0: unknown */
    codekey *codes;          /* code objects read, by address (open addressing) */
    size_t cap_map, n_map;
    tcache *threads;
    size_t n_threads, cap_threads;
    uint64_t rescanned;      /* when the thread states were last walked */
    uint64_t interps;        /* the interpreters and their newest threads then (interps_sig) */
    uint64_t looked;         /* when it was last compared with the process's */
    uint8_t win[WINDOW];     /* sonde__py_stack's window on a data stack */
    uint8_t heads[MAX_FRAMES_READ][256]; /* the code objects' heads of one stack */
};

sonde_pytab *sonde__pytab_new(void)
{
    sonde_pytab *t = sonde__calloc(1, sizeof *t);
    if (t)
        strmap_init(&t->same);
    return t;
}

void sonde__pytab_free(sonde_pytab *t)
{
    for (size_t i = 0; t && i < t->n_codes; i++) {
        sonde__free(t->codes[i].name);
        sonde__free(t->codes[i].file);
        sonde__free(t->codes[i].lines);
    }
    if (t) {
        sonde__free(t->codes);
        strmap_free(&t->same);
    }
    sonde__free(t);
}

int sonde__pytab_code(const sonde_pytab *t, uint32_t id, sonde_pycode *out)
{
    if (!t || id >= t->n_codes)
        return -1;
    *out = (sonde_pycode){t->codes[id].name, t->codes[id].file, t->codes[id].first_line};
    return 0;
}

/* A window on a thread's data stack, read in one piece while its frames are walked: [at, at +
 * len) of the process pid, in buf (cap bytes, the caller's). */
typedef struct pywin {
    int pid;
    uint64_t at;
    size_t len, cap;
    uint8_t *buf;
} pywin;

/* n bytes at addr of w's process, from the window when it holds them; 0, or -1 where the memory
 * is not there (freed, unmapped, never was). A system call and memcpy only: a signal handler
 * may call it. */
static int rd_win(const pywin *w, uint64_t addr, void *dst, size_t n)
{
    if (w->len && addr >= w->at && addr - w->at <= w->len && n <= w->len - (addr - w->at)) {
        memcpy(dst, w->buf + (addr - w->at), n);
        return 0;
    }
    if (!addr)
        return -1;
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    return process_vm_readv(w->pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* n bytes at addr of py's process. */
static int rd(sonde_pyproc *py, uint64_t addr, void *dst, size_t n)
{
    pywin none = {py->pid, 0, 0, 0, NULL};
    return rd_win(&none, addr, dst, n);
}

static uint64_t u64_at(const uint8_t *b, uint32_t off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

static void put_utf8(char *out, size_t *k, uint32_t c)
{
    if (c < 0x80) {
        out[(*k)++] = (char)c;
    } else if (c < 0x800) {
        out[(*k)++] = (char)(0xC0 | (c >> 6));
        out[(*k)++] = (char)(0x80 | (c & 63));
    } else if (c < 0x10000) {
        out[(*k)++] = (char)(0xE0 | (c >> 12));
        out[(*k)++] = (char)(0x80 | ((c >> 6) & 63));
        out[(*k)++] = (char)(0x80 | (c & 63));
    } else {
        out[(*k)++] = (char)(0xF0 | ((c >> 18) & 7));
        out[(*k)++] = (char)(0x80 | ((c >> 12) & 63));
        out[(*k)++] = (char)(0x80 | ((c >> 6) & 63));
        out[(*k)++] = (char)(0x80 | (c & 63));
    }
}

/* A str object as UTF-8 (compact strings only, as every identifier and file name is); NULL
 * where it cannot be read or out of memory. */
static char *read_str(sonde_pyproc *py, uint64_t addr)
{
    uint8_t h[80];
    if (rd(py, addr, h, py->l->str_compact))
        return NULL;
    int64_t len;
    uint32_t state;
    uint64_t refs = u64_at(h, 0);
    if (!refs || refs > 0xFFFFFFFFull)
        return NULL; /* a freed block's first word is its allocator's link (code_alive) */
    memcpy(&len, h + 16, 8);
    memcpy(&state, h + 32, 4);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4))
        return NULL;
    size_t n = len > MAX_TEXT ? MAX_TEXT : (size_t)len;
    uint8_t raw[MAX_TEXT * 4];
    uint64_t data = addr + (ascii ? py->l->str_ascii : py->l->str_compact);
    if (n && rd(py, data, raw, n * kind))
        return NULL;
    char *out = sonde__malloc(n * 4 + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    uint32_t max = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                                                     : (uint32_t)raw[4 * i] |
                                                           (uint32_t)raw[4 * i + 1] << 8 |
                                                           (uint32_t)raw[4 * i + 2] << 16 |
                                                           (uint32_t)raw[4 * i + 3] << 24;
        max = c > max ? c : max;
        if (c > 0x10FFFF || (c >= 0xD800 && c < 0xE000))
            c = 0xFFFD; /* a lone surrogate (allowed in a str) is not UTF-8 */
        put_utf8(out, &k, c);
    }
    out[k] = 0;
    /* CPython makes every str in the narrowest kind its characters fit, ASCII flagged: one that
     * is not is no str (a freed one's memory, read meanwhile; the stress read such names) */
    uint32_t floor = ascii ? 0 : kind == 1 ? 0x80 : kind == 2 ? 0x100 : 0x10000;
    uint32_t ceil = ascii ? 0x80 : kind == 1 ? 0x100 : kind == 2 ? 0x10000 : 0x110000;
    if (n == (size_t)len && n && (max < floor || max >= ceil)) {
        sonde__free(out);
        return NULL;
    }
    return out;
}

/* The id of code e in the table, e's memory taken (kept, or freed where the table has its
 * source already: the same file, name, first line and location table); -1 out of memory. */
static int64_t code_entry(sonde_pytab *t, pycode_e *e)
{
    sbuf key;
    sbuf_init(&key);
    sbuf_printf(&key, "%s\t%s\t%u", e->file, e->name, e->first_line);
    int64_t id = key.oom ? -2 : strmap_get(&t->same, key.data);
    if (id >= 0 && (t->codes[id].n_lines != e->n_lines ||
                    (e->n_lines && memcmp(t->codes[id].lines, e->lines, e->n_lines))))
        id = -3; /* the same name, other code: kept apart, the first stays the one found */
    if (id < 0) {
        if (id == -2 || t->n_codes >= INT32_MAX || SONDE_GROW(t->codes, t->n_codes, t->cap_codes) ||
            (id == -1 && strmap_put(&t->same, key.data, (int)t->n_codes))) {
            id = -1;
        } else {
            id = (int64_t)t->n_codes;
            t->codes[t->n_codes++] = *e;
            *e = (pycode_e){NULL, NULL, 0, NULL, 0};
        }
    }
    sonde__free(e->name);
    sonde__free(e->file);
    sonde__free(e->lines);
    sbuf_free(&key);
    return id;
}

/* A qualified name as CPython makes them: identifiers (letters, digits, '_', non-ASCII letters)
 * joined by '.', and the <lambda>, <locals>, <module>, <genexpr> kinds. A string read from a
 * code object freed meanwhile (its memory another str's) is seldom one. Of the Latin-1 range
 * (names as read_str writes them, UTF-8), only the letters are: not U+0080-U+00BF but for
 * U+00AA, U+00B5 and U+00BA, nor U+00D7 and U+00F7 (the stress read "\u00c0c\u0095", a freed
 * code's name, from outside), nor U+FFFD (read once as a name of one character); nor ".0" (a
 * comprehension's argument's name, read in process as a freed code's name), nor a character of
 * the private use areas (read in process under ASan). A space only inside
 * CPython's own <...> kinds: 3.12's "<generic parameters of f>". */
static int qualname_like(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9') || *s == '.' || strstr(s, "..") || s[strlen(s) - 1] == '.')
        return 0; /* no qualified name begins or ends with a dot, or has two together */
    int angle = 0; /* inside <...> */
    for (; *s; s++) {
        angle += *s == '<' ? 1 : *s == '>' ? -1 : 0;
        if (*s == ' ' && angle > 0 && s[1] != ' ' && s[1] != '>')
            continue;
        unsigned char c = (unsigned char)*s, next = (unsigned char)s[1];
        if (c == 0xC2 && next != 0xAA && next != 0xB5 && next != 0xBA)
            return 0; /* a C1 control or a sign */
        if (c == 0xC3 && (next == 0x97 || next == 0xB7))
            return 0; /* the multiplication and division signs */
        if (c == 0xEF && next == 0xBF && (unsigned char)s[2] == 0xBD)
            return 0; /* U+FFFD: what read_str writes for no character */
        if (c == 0xEE || (c == 0xEF && next >= 0x80 && next <= 0xA3) ||
            (c == 0xF3 && next >= 0xB0) || c == 0xF4)
            return 0; /* the private use areas, no identifier's (U+E000-U+F8FF, planes 15 and
                         16): the stress read "\uf710\u7935\u7f83", a freed code's name */
        if (!(c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '<' || c == '>'))
            return 0;
    }
    return 1;
}

/* Whether head h is a live code object's: its type, and a live object's reference count, 1 to
 * 2^32 - 1 (3.12's immortal), where a freed block's first word is the allocator's link (an
 * address, or 0 at the end of its list). */
static int code_alive(const sonde_pyproc *py, const uint8_t *h)
{
    uint64_t refs = u64_at(h, 0);
    return u64_at(h, 8) == py->code_type && refs && refs <= 0xFFFFFFFFull;
}

/* What a code object's head h says it is: its file, name and first line (the table's key). */
static codekey key_of(const pylayout *l, uint64_t addr, const uint8_t *h)
{
    uint32_t first;
    memcpy(&first, h + l->co_firstlineno, 4);
    return (codekey){addr, u64_at(h, l->co_filename), u64_at(h, l->co_qualname), first, 0};
}

/* Whether a and b are the same code object's head: the same file, name and first line. */
static int key_same(const codekey *a, const codekey *b)
{
    return a->file == b->file && a->qual == b->qual && a->first == b->first;
}

/* Whether the code object at k.addr is still the one read as k with location table lt. Its
 * strings were read after its head, and a code object freed meanwhile frees them with it (their
 * memory another object's: the stress test in process on the counters, ASan, read a name of
 * three Hangul and CJK characters for a frame of asyncio/locks.py); its head read again after
 * them, alive and unchanged, says they were its own. */
static int same_code(sonde_pyproc *py, const codekey *k, uint64_t lt)
{
    const pylayout *l = py->l;
    uint8_t now[sizeof py->heads[0]];
    if (l->co_code > sizeof now || rd(py, k->addr, now, l->co_code) || !code_alive(py, now))
        return 0;
    codekey again = key_of(l, k->addr, now);
    return key_same(&again, k) && u64_at(now, l->co_linetable) == lt;
}

/* The code object at addr, whose first co_code bytes are h, as an id of the table, read when
 * new; -1 where it is not a code object (a torn or freed frame) or out of memory; -2 where it is
 * a live one whose name is no qualified name (code.replace(co_qualname="a b")): the caller
 * leaves out that frame alone. */
static int64_t code_id(sonde_pyproc *py, uint64_t addr, const uint8_t *h)
{
    const pylayout *l = py->l;
    if (!code_alive(py, h))
        return -1;
    codekey key = key_of(l, addr, h);
    if (py->n_map * 2 >= py->cap_map) { /* grow, keeping the table half empty */
        size_t cap = py->cap_map ? py->cap_map * 2 : 256;
        codekey *t = sonde__calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < py->cap_map; i++)
            if (py->codes[i].addr) {
                size_t j = (py->codes[i].addr >> 4) & (cap - 1);
                while (t[j].addr)
                    j = (j + 1) & (cap - 1);
                t[j] = py->codes[i];
            }
        sonde__free(py->codes);
        py->codes = t;
        py->cap_map = cap;
    }
    size_t j = (addr >> 4) & (py->cap_map - 1);
    for (; py->codes[j].addr; j = (j + 1) & (py->cap_map - 1))
        if (py->codes[j].addr == addr)
            break;
    codekey *k = &py->codes[j];
    if (k->addr && key_same(k, &key))
        return (int64_t)k->id - 1;
    uint8_t bh[32];
    uint64_t lt = u64_at(h, l->co_linetable);
    int64_t n_lt = 0;
    if (rd(py, lt, bh, 32) == 0)
        memcpy(&n_lt, bh + 16, 8);
    pycode_e e = {read_str(py, key.qual), read_str(py, key.file),
                  (int32_t)key.first > 0 ? key.first : 0, NULL, 0};
    if (n_lt > 0 && (uint64_t)n_lt <= MAX_LINETABLE && (e.lines = sonde__malloc((size_t)n_lt)) &&
        rd(py, lt + 32, e.lines, (size_t)n_lt) == 0)
        e.n_lines = (size_t)n_lt;
    int64_t id = -1;
    int live = e.name && e.file && e.file[0] && same_code(py, &key, lt);
    int named = live && qualname_like(e.name);
    int odd = live && e.name[0] && !named; /* an empty name is a freed code's, not odd */
    if (named) {
        /* else the code object was freed while read (seen at exit: an empty name) */
        id = code_entry(py->tab, &e);
    } else {
        sonde__free(e.name);
        sonde__free(e.file);
        sonde__free(e.lines);
    }
    if (id < 0) /* a live code whose name is no qualified name (code.replace): that frame only */
        return odd ? -2 : -1;
    py->n_map += !k->addr;
    key.id = (uint32_t)id + 1;
    *k = key; /* new, or the same address holding another code now */
    return id;
}

static unsigned varint(const uint8_t *t, size_t n, size_t *i)
{
    unsigned v = 0, shift = 0;
    while (*i < n && shift < 30) {
        uint8_t b = t[(*i)++];
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    return v;
}

static int svarint(const uint8_t *t, size_t n, size_t *i)
{
    unsigned v = varint(t, n, i);
    return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The line of code unit at in a 3.11+ location table (Objects/locations.md): each entry covers
 * 1-8 code units; its first byte's bits 3-6 say its form, the line moving by the entry's delta.
 * 0 where the table does not say. */
static unsigned line_at(const pycode_e *c, int64_t at)
{
    const uint8_t *t = c->lines;
    size_t n = c->n_lines, i = 0;
    long line = c->first_line;
    int64_t pos = 0;
    while (i < n) {
        uint8_t b = t[i++];
        if (!(b & 0x80))
            return 0; /* not an entry's first byte: a table we do not read */
        unsigned code = (b >> 3) & 15, len = (b & 7) + 1u;
        int has = 1;
        if (code == 15) {
            has = 0;
        } else if (code == 14) {
            line += svarint(t, n, &i);
            varint(t, n, &i);
            varint(t, n, &i);
            varint(t, n, &i);
        } else if (code == 13) {
            line += svarint(t, n, &i);
        } else if (code >= 10) {
            line += code - 10;
            i += 2;
        } else {
            i += 1;
        }
        if (at < pos + len)
            return has && line > 0 ? (unsigned)line : 0;
        pos += len;
    }
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Walks every interpreter's thread states, remembering each thread's. */
/* The interpreters and the newest thread state of each, as one number: it changes when either
 * does (two reads an interpreter). */
static uint64_t interps_sig(sonde_pyproc *py)
{
    const pylayout *l = py->l;
    uint64_t interp, sig = 0;
    if (rd(py, py->runtime + l->rt_interps, &interp, 8))
        return 0;
    for (int k = 0; interp && k < MAX_INTERPS; k++) {
        uint64_t ts, next;
        if (rd(py, interp + l->is_threads, &ts, 8) || rd(py, interp + l->is_next, &next, 8))
            break;
        sig = (sig ^ interp ^ (ts * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
        interp = next;
    }
    return sig;
}

static void rescan(sonde_pyproc *py)
{
    const pylayout *l = py->l;
    py->n_threads = 0;
    py->rescanned = now_ns();
    uint64_t interp;
    py->interps = interps_sig(py);
    if (rd(py, py->runtime + l->rt_interps, &interp, 8))
        return;
    for (int k = 0; interp && k < MAX_INTERPS; k++) {
        uint64_t ts, next;
        if (rd(py, interp + l->is_threads, &ts, 8) || rd(py, interp + l->is_next, &next, 8))
            return;
        for (int m = 0; ts && m < MAX_THREADS; m++) {
            uint8_t head[256]; /* next and native_thread_id, in one read */
            if (rd(py, ts, head, (l->ts_tid > l->ts_next ? l->ts_tid : l->ts_next) + 8) ||
                SONDE_GROW(py->threads, py->n_threads, py->cap_threads))
                break;
            py->threads[py->n_threads++] = (tcache){(int)u64_at(head, l->ts_tid), ts};
            ts = u64_at(head, l->ts_next);
        }
        interp = next;
    }
}

/* Whether an interpreter or a thread state was made or ended since the last walk (a thread that
 * enters a sub-interpreter gets a state there), asked of the process at most every RESCAN_NS. */
static int interps_changed(sonde_pyproc *py)
{
    uint64_t t = now_ns();
    if (t - py->looked < RESCAN_NS)
        return 0;
    py->looked = t;
    return interps_sig(py) != py->interps;
}

#define MAX_STATES 4 /* a thread's states followed (the interpreters it is inside, nested) */

/* Whether the state read in ts is the one its thread entered last (1), is not (0), or the
 * version does not say (-1). */
static int is_bound(const pylayout *l, const uint8_t *ts)
{
    if (l->ts_status == NONE)
        return -1;
    uint32_t st;
    memcpy(&st, ts + l->ts_status, 4);
    return (st & STATUS_BOUND) != 0;
}

/* The states of thread tid, one an interpreter it has run in, newest interpreter first (the
 * walk's order: a sub-interpreter is entered from an older one), each read (n bytes) into ts[i];
 * how many (0: none). From the last walk, walked again when one no longer holds tid, when the
 * interpreters changed, and at most every RESCAN_NS for a thread that has none. */
static int tstates_of(sonde_pyproc *py, int tid, uint64_t *addr, uint8_t (*ts)[512], size_t n)
{
    if (interps_changed(py))
        rescan(py);
    for (int pass = 0; pass < 2; pass++) {
        int k = 0, stale = 0;
        for (size_t i = 0; i < py->n_threads && k < MAX_STATES; i++) {
            if (py->threads[i].tid != tid)
                continue;
            uint64_t a = py->threads[i].tstate, got;
            if (!a)
                continue; /* no Python in it at the last walk */
            if (rd(py, a, ts[k], n) == 0 &&
                (memcpy(&got, ts[k] + py->l->ts_tid, 8), (int)got == tid)) {
                addr[k++] = a;
                continue;
            }
            py->threads[i].tstate = 0; /* gone, or its state reused: walk again */
            stale = 1;
        }
        int bound = k && is_bound(py->l, ts[0]) != 0;
        for (int i = 1; i < k && !bound; i++) /* the state the thread is in first: innermost */
            if (is_bound(py->l, ts[i]) == 1) {
                bound = 1;
                uint64_t a = addr[i];
                uint8_t t[512];
                memcpy(t, ts[i], n);
                memmove(addr + 1, addr, (size_t)i * sizeof *addr);
                memmove(ts + 1, ts, (size_t)i * sizeof *ts);
                addr[0] = a;
                memcpy(ts[0], t, n);
                break;
            }
        /* none the thread is in: it entered an interpreter since the walk (walked again, at
         * most every RESCAN_NS / 10: its samples meanwhile have no Python frames) */
        if (k && !bound && !stale && !pass && now_ns() - py->rescanned >= RESCAN_NS / 10)
            stale = 1;
        if ((k && !stale) || pass || (!stale && now_ns() - py->rescanned < RESCAN_NS))
            return k;
        rescan(py);
        int found = 0;
        for (size_t i = 0; i < py->n_threads; i++)
            found |= py->threads[i].tid == tid;
        if (!found && !SONDE_GROW(py->threads, py->n_threads, py->cap_threads))
            py->threads[py->n_threads++] = (tcache){tid, 0};
    }
    return 0;
}

/* Whether the state read in ts runs Python now (its current frame is set; a state of a
 * sub-interpreter the thread has left has none). */
static int has_frame(sonde_pyproc *py, const uint8_t *ts)
{
    const pylayout *l = py->l;
    uint64_t frame = u64_at(ts, l->ts_frame);
    if (frame && l->cf_frame != NONE && rd(py, frame + l->cf_frame, &frame, 8))
        return 0;
    return frame != 0;
}

/* Where frame i of a walk goes in raw (cap places): the innermost SONDE_PYCUT_IN in order, the
 * rest in turn in the places after them, so that the outermost stay (walk_end puts them back in
 * order). */
static int slot_of(int i, int cap)
{
    return i < SONDE_PYCUT_IN || cap <= SONDE_PYCUT_IN
               ? i
               : SONDE_PYCUT_IN + (i - SONDE_PYCUT_IN) % (cap - SONDE_PYCUT_IN);
}

/* One frame read (its code object, instruction, owner and is_entry bytes) as frame n of raw
 * (cap places, slot_of): the C stack's entry into the interpreter (3.12, 3.13), which runs no
 * code of ours, is left out and marks the frame inward of it as the first of an activation, as
 * 3.11's is_entry does its own. The new count. raw_walk's and the kernel's walks
 * (sonde__py_from_kernel) alike. */
static int push_frame(const pylayout *l, sonde_pyraw *raw, int n, int cap, uint64_t code,
                      uint64_t instr, uint8_t owner, uint8_t is_entry)
{
    if (l->cstack_owner >= 0 && owner == (uint8_t)l->cstack_owner) {
        if (n)
            raw[slot_of(n - 1, cap)].instr |= SONDE_PYRAW_ENTRY;
        return n;
    }
    raw[slot_of(n, cap)] = (sonde_pyraw){code, (instr & ~SONDE_PYRAW_ENTRY) |
                                                   (l->fr_is_entry >= 0 && is_entry
                                                        ? SONDE_PYRAW_ENTRY : 0)};
    return n + 1;
}

static void reverse(sonde_pyraw *r, int n)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        sonde_pyraw t = r[i];
        r[i] = r[j];
        r[j] = t;
    }
}

/* A walk of n frames into cap places (slot_of) ended: its frames put in order, innermost first;
 * how many it keeps, what it left out into cut (beyond: the walk's limit, where frames still
 * followed it). No memory
 * but raw's: a signal handler's walk ends here. */
static int walk_end(sonde_pyraw *raw, int n, int cap, int beyond, sonde_pycut *cut)
{
    cut->between = 0;
    cut->beyond = beyond;
    if (n <= cap)
        return n;
    int ring = cap - SONDE_PYCUT_IN, r = (n - SONDE_PYCUT_IN) % ring;
    sonde_pyraw *o = raw + SONDE_PYCUT_IN; /* frame n - ring is at o[r]: rotate left by r */
    reverse(o, r);
    reverse(o + r, ring - r);
    reverse(o, ring);
    cut->between = (uint32_t)(n - cap);
    return cap;
}

/* The frames of the thread whose state is ts (read at its address): each frame's code object
 * and instruction addresses, innermost first, at most cap (deeper: the innermost
 * SONDE_PYCUT_IN and the outermost, cut says what was left out; SONDE_PYRAW_ENTRY set on the
 * first frame of an activation of the evaluation loop). The current frame (3.11, 3.12: in the
 * cframe, on the C stack) and the frames of the running code, below the data stack's top, are
 * read in one system call of two pieces into w's buffer; system calls and memcpy only, so that
 * a signal handler may call it. */
static int raw_walk(const pylayout *l, pywin *w, const uint8_t *ts, sonde_pyraw *raw, int cap,
                    sonde_pycut *cut)
{
    uint64_t frame = u64_at(ts, l->ts_frame), chunk = u64_at(ts, l->ts_chunk),
             top = u64_at(ts, l->ts_top);
    uint64_t from = chunk && top > chunk ? (top - chunk > w->cap ? top - w->cap : chunk) : top;
    int via_cframe = l->cf_frame != NONE;
    struct iovec lv[2] = {{&frame, 8}, {w->buf, (size_t)(top - from)}},
                 rv[2] = {{(void *)(uintptr_t)(frame + (via_cframe ? l->cf_frame : 0)), 8},
                          {(void *)(uintptr_t)from, (size_t)(top - from)}};
    w->len = 0;
    cut->between = 0;
    cut->beyond = 0;
    ssize_t part = process_vm_readv(w->pid, lv + !via_cframe, 2 - (unsigned long)!via_cframe,
                                    rv + !via_cframe, 2 - (unsigned long)!via_cframe, 0);
    if (via_cframe && part < 8)
        return 0; /* no cframe: not running Python now */
    part -= via_cframe ? 8 : 0;
    if (part > 0) {
        w->at = from;
        w->len = (size_t)part;
    }
    /* a deep stack is followed to its root, at most 4 x cap frames (a signal handler's walk
     * reads the frames past its window one system call each) */
    int n = 0, hops = 4 * cap < MAX_HOPS ? 4 * cap : MAX_HOPS;
    for (int hop = 0; frame && hop < hops; hop++) {
        uint8_t f[80];
        if (rd_win(w, frame, f, (size_t)l->fr_owner + 1)) {
            frame = 0; /* unreadable: the walk ends here, as at the outermost */
            break;
        }
        n = push_frame(l, raw, n, cap, u64_at(f, l->fr_code), u64_at(f, l->fr_instr),
                       f[l->fr_owner], l->fr_is_entry >= 0 ? f[l->fr_is_entry] : 0);
        frame = u64_at(f, l->fr_previous);
    }
    w->len = 0;
    return walk_end(raw, n, cap, frame ? hops : 0, cut);
}

/* sonde_pyraw's check of a code object (sonde__py_raw): 16 bits of its file's and qualified
 * name's addresses, never 0, in the top byte of code and of instr (user addresses stay below
 * 2^56); PYRAW_ADDR masks it off. */
#define PYRAW_ADDR ((UINT64_C(1) << 56) - 1)
#define CHECK_SPAN 24 /* co_filename, co_name, co_qualname: one read (every layout has them so) */
_Static_assert(sizeof ((sonde_pyscratch *)0)->id[0] == CHECK_SPAN, "a check's read");

static unsigned code_check(uint64_t file, uint64_t qual)
{
    uint64_t h = (file ^ (qual * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return (unsigned)(h >> 48) ? (unsigned)(h >> 48) : 1u;
}

/* Frame r carries the check of its code object, whose file and qualified name were these. */
static void put_check(sonde_pyraw *r, uint64_t file, uint64_t qual)
{
    unsigned c = code_check(file, qual);
    r->code = (r->code & PYRAW_ADDR) | (uint64_t)(c >> 8) << 56;
    r->instr = (r->instr & PYRAW_ADDR) | (uint64_t)(c & 255) << 56;
}

int sonde__py_raw(const sonde_pyproc *py, int tid, uint64_t tstate, sonde_pyraw *raw, int cap,
                  sonde_pyscratch *sc, sonde_pycut *cut)
{
    cut->between = 0;
    cut->beyond = 0;
    const pylayout *l = py->l;
    uint8_t *ts = sc->ts;
    pywin w = {py->pid, 0, 0, sizeof sc->win, sc->win};
    if (l->ts_top + 8 > sizeof sc->ts || rd_win(&w, tstate, ts, l->ts_top + 8) ||
        (int)u64_at(ts, l->ts_tid) != tid || is_bound(l, ts) == 0)
        return -1; /* another thread's, or the thread is in another interpreter now */
    int n = raw_walk(l, &w, ts, raw, cap < SONDE_PYRAW_MAX ? cap : SONDE_PYRAW_MAX, cut);
    /* Named later (sonde__py_resolve), when a code object freed since may have left its memory
     * to another: each one's file and name as they are now go with it, in one read, and the
     * frames end at the first that cannot be read */
    if (n <= 0 || l->co_qualname + 8 - l->co_filename != CHECK_SPAN)
        return n;
    for (int i = 0; i < n; i++) {
        sc->lv[i] = (struct iovec){sc->id[i], CHECK_SPAN};
        sc->rv[i] = (struct iovec){(void *)(uintptr_t)(raw[i].code + l->co_filename), CHECK_SPAN};
    }
    ssize_t got = process_vm_readv(py->pid, sc->lv, (unsigned long)n, sc->rv, (unsigned long)n, 0);
    int whole = got > 0 ? (int)(got / CHECK_SPAN) : 0;
    for (int i = 0; i < whole; i++)
        put_check(&raw[i], u64_at(sc->id[i], 0), u64_at(sc->id[i], 16));
    if (whole <= SONDE_PYCUT_IN && whole < n) /* the cut's frames with the ones not read */
        cut->between = 0, cut->beyond = 0;
    return whole;
}

int sonde__py_from_kernel(const sonde_pyproc *py, const sonde_pykframe *f, int n,
                          sonde_pyraw *raw, int cap)
{
    const pylayout *l = py->l;
    int k = 0;
    for (int i = 0; i < n && k < cap; i++) {
        int was = k;
        k = push_frame(l, raw, k, cap, f[i].code, f[i].instr, f[i].owner, f[i].is_entry);
        if (k == was)
            continue; /* the C stack's entry frame */
        if (!f[i].file && !f[i].qual)
            return was; /* its code object could not be read: freed */
        put_check(&raw[k - 1], f[i].file, f[i].qual);
    }
    return k;
}

int sonde__py_offsets(sonde_pyoffsets *o, int cap)
{
    int n = 0;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0] && n < cap; i++) {
        const pylayout *l = &layouts[i];
        o[n++] = (sonde_pyoffsets){l->minor, l->ts_tid, l->ts_frame, l->cf_frame, l->fr_code,
                                   l->fr_previous, l->fr_instr, l->fr_owner, l->fr_is_entry,
                                   l->co_filename, l->ts_status};
    }
    return n;
}

int sonde__py_layout(const sonde_pyproc *py)
{
    return (int)(py->l - layouts);
}

uint64_t sonde__py_tstate(sonde_pyproc *py, int tid)
{
    uint8_t ts[MAX_STATES][512];
    uint64_t a[MAX_STATES];
    int n = tstates_of(py, tid, a, ts, py->l->ts_top + 8);
    if (n && is_bound(py->l, ts[0]) == 1)
        return a[0]; /* the interpreter it is in */
    for (int i = 0; i < n; i++) /* else the newest running Python */
        if (has_frame(py, ts[i]))
            return a[i];
    return n ? a[0] : 0;
}

/* The check a raw frame carries (0: none, read outside a handler). */
static unsigned raw_check(const sonde_pyraw *r)
{
    return (unsigned)(r->code >> 56) << 8 | (unsigned)(r->instr >> 56);
}

/* The id of the code object at addr when the table has it as the one whose check a handler
 * took (its file and name then are those the table read); -1: it must be read. */
static int64_t code_known(const sonde_pyproc *py, uint64_t addr, unsigned check)
{
    if (!check || !py->cap_map)
        return -1;
    for (size_t j = (addr >> 4) & (py->cap_map - 1); py->codes[j].addr;
         j = (j + 1) & (py->cap_map - 1))
        if (py->codes[j].addr == addr)
            return code_check(py->codes[j].file, py->codes[j].qual) == check
                       ? (int64_t)py->codes[j].id - 1 : -1;
    return -1;
}

int sonde__py_resolve(sonde_pyproc *py, const sonde_pyraw *raw, int n, sonde_pyframe *inner)
{
    /* The heads of the code objects not known in one read (a handler's frames whose checks
     * match the table's need none: no system call for a stack of code met before), then the
     * codes: an address met before is read again only when its head has changed */
    const pylayout *l = py->l;
    struct iovec local[MAX_FRAMES_READ], remote[MAX_FRAMES_READ];
    int64_t known[MAX_FRAMES_READ];
    int slot[MAX_FRAMES_READ], need = 0;
    if (n > MAX_FRAMES_READ)
        n = MAX_FRAMES_READ;
    for (int i = 0; i < n; i++) {
        uint64_t code = raw[i].code & PYRAW_ADDR;
        if ((known[i] = code_known(py, code, raw_check(&raw[i]))) >= 0)
            continue;
        local[need] = (struct iovec){py->heads[need], l->co_code};
        remote[need] = (struct iovec){(void *)(uintptr_t)code, l->co_code};
        slot[i] = need++;
    }
    ssize_t got = need > 0 ? process_vm_readv(py->pid, local, (unsigned long)need, remote,
                                              (unsigned long)need, 0) : 0;
    int whole = got > 0 ? (int)((size_t)got / l->co_code) : 0; /* the reads stop at a fault */
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint64_t code = raw[i].code & PYRAW_ADDR;
        unsigned check = raw_check(&raw[i]);
        int64_t id = known[i];
        if (id < 0) {
            const uint8_t *h = slot[i] < whole ? py->heads[slot[i]] : NULL;
            if (!h)
                break; /* its head cannot be read: freed */
            if (check && check != code_check(u64_at(h, l->co_filename), u64_at(h, l->co_qualname)))
                break; /* another code object's now: the one sampled was freed since */
            if ((id = code_id(py, code, h)) == -2)
                continue; /* a live code named oddly: only its frame is left out */
            if (id < 0)
                break; /* not a code object: the frame was torn or freed while read */
        }
        uint64_t instr = raw[i].instr & PYRAW_ADDR & ~SONDE_PYRAW_ENTRY;
        int64_t at = ((int64_t)instr - (int64_t)(code + l->co_code)) / 2;
        if (at < 0)
            continue; /* a frame made, not started */
        inner[k++] = (sonde_pyframe){(uint32_t)id, line_at(&py->tab->codes[id], at),
                                     (raw[i].instr & SONDE_PYRAW_ENTRY) != 0};
    }
    return k;
}

int sonde__py_stack(sonde_pyproc *py, int tid, sonde_pyframe *inner, int cap)
{
    uint8_t ts[MAX_STATES][512];
    uint64_t a[MAX_STATES];
    int states = tstates_of(py, tid, a, ts, py->l->ts_top + 8);
    sonde_pyraw raw[MAX_FRAMES_READ];
    pywin w = {py->pid, 0, 0, WINDOW, py->win};
    sonde_pycut cut = {0, 0};
    int room = cap - 2; /* the cut's frames too */
    if (room > MAX_FRAMES_READ)
        room = MAX_FRAMES_READ;
    /* a thread inside a sub-interpreter runs its frames there, called from the frames of the
     * interpreter it entered it from (the next state with frames): those follow, outward */
    int n = 0, n_in = 0;
    for (int i = 0; i < states && n < room && !cut.between && !cut.beyond; i++) {
        int got = raw_walk(py->l, &w, ts[i], raw + n, room - n, &cut);
        n_in = n + (got < SONDE_PYCUT_IN ? got : SONDE_PYCUT_IN); /* where a cut would be */
        n += got;
    }
    return sonde__py_resolve_cut(py, raw, n, n_in, &cut, inner);
}

int sonde__py_resolve_cut(sonde_pyproc *py, const sonde_pyraw *raw, int n, int n_in,
                          const sonde_pycut *cut, sonde_pyframe *inner)
{
    if (!cut->between && !cut->beyond)
        return sonde__py_resolve(py, raw, n, inner);
    int k = sonde__py_resolve(py, raw, n_in, inner);
    if (k < n_in)
        return k; /* a code object gone: the stack ends there */
    if (cut->between)
        inner[k++] = (sonde_pyframe){SONDE_PYFRAME_CUT, cut->between, 0};
    int out = sonde__py_resolve(py, raw + n_in, n - n_in, inner + k);
    k += out;
    if (cut->beyond && out == n - n_in)
        inner[k++] = (sonde_pyframe){SONDE_PYFRAME_CUT,
                                     SONDE_PYCUT_BEYOND | (uint32_t)cut->beyond, 0};
    return k;
}


/* The address of each of n names in the ELF file at path, 0 where absent, its size into
 * size[] (when not NULL) and its place in the file into off[] (when not NULL: where the loaded
 * segment holding it puts it, as a sample's frames are placed), and the lowest address its
 * loaded segments ask for; -1 where it is not an ELF file. */
static int elf_symbols(const char *path, const char *const *names, uint64_t *at, int n,
                       uint64_t *low, uint64_t *size, uint64_t *off)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t nph = 0;
    int rc = -1;
    if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph))
        goto out;
    *low = UINT64_MAX;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < *low)
            *low = ph.p_vaddr & ~(uint64_t)0xfff;
    }
    memset(at, 0, (size_t)n * sizeof *at);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        Elf_Data *d;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
            !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
            continue;
        for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
            GElf_Sym sym;
            const char *name;
            if (!gelf_getsym(d, (int)k, &sym) || !sym.st_value ||
                !(name = elf_strptr(e, sh.sh_link, sym.st_name)))
                continue;
            for (int q = 0; q < n; q++)
                if (!at[q] && !strcmp(name, names[q])) {
                    at[q] = sym.st_value;
                    if (size)
                        size[q] = sym.st_size;
                }
        }
    }
    for (int q = 0; off && q < n; q++) {
        off[q] = 0;
        for (size_t i = 0; at[q] && i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && at[q] >= ph.p_vaddr &&
                at[q] < ph.p_vaddr + ph.p_filesz)
                off[q] = at[q] - ph.p_vaddr + ph.p_offset;
        }
    }
    rc = *low == UINT64_MAX ? -1 : 0;
out:
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

/* Checks the interpreter's own map of its structures (3.13's _Py_DebugOffsets, at the start of
 * _PyRuntime: cookie "xdebugpy", version, free_threaded, then the offsets of the runtime's,
 * interpreters' and threads' fields, each section starting with its size) against the table:
 * a build whose layout differs (free-threaded, another patch release) gets no frames rather
 * than wrong ones. */
static int debug_offsets_agree(sonde_pyproc *py)
{
    const pylayout *l = py->l;
    uint8_t h[216];
    if (rd(py, py->runtime, h, sizeof h) || memcmp(h, "xdebugpy", 8))
        return 0;
    return u64_at(h, 16) == 0 && u64_at(h, 40) == l->rt_interps && u64_at(h, 64) == l->is_next &&
           u64_at(h, 72) == l->is_threads && u64_at(h, 168) == l->ts_next &&
           u64_at(h, 184) == l->ts_frame && u64_at(h, 200) == l->ts_tid &&
           u64_at(h, 208) == l->ts_chunk;
}

sonde_pyproc *sonde__py_attach_at(sonde_pytab *tab, int pid, unsigned minor, uint64_t runtime,
                                  uint64_t code_type)
{
    const pylayout *l = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        if (layouts[i].minor == minor)
            l = &layouts[i];
    sonde_pyproc *py = l ? sonde__calloc(1, sizeof *py) : NULL;
    if (py) { /* calloc'd: the rest is empty */
        py->pid = pid;
        py->tab = tab;
        py->l = l;
        py->runtime = runtime;
        py->code_type = code_type;
    }
    return py;
}

sonde_pyproc *sonde__py_attach(sonde_pytab *tab, int pid, char *why, size_t cap, int *found)
{
    *found = 0;
    char mp[64], line[4096 + 128];
    snprintf(mp, sizeof mp, "/proc/%d/maps", pid);
    FILE *f = fopen(mp, "re");
    if (!f) {
        snprintf(why, cap, "%s: cannot be read", mp);
        return NULL;
    }
    static const char *const names[] = {"_PyRuntime", "Py_Version", "PyCode_Type",
                                        "_PyEval_EvalFrameDefault"};
    char tried[4][512];
    int n_tried = 0;
    sonde_pyproc *py = NULL;
    snprintf(why, cap, "no CPython in the process");
    while (!py && fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        int at = 0;
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &at) < 3 || !at || off)
            continue;
        char *path = line + at;
        path[strcspn(path, "\n")] = 0;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (path[0] != '/' || (strncmp(base, "python", 6) && strncmp(base, "libpython", 9)))
            continue; /* the interpreter is in the executable or in libpython */
        int seen = 0;
        for (int i = 0; i < n_tried; i++)
            seen |= !strcmp(tried[i], path);
        if (seen || n_tried == 4)
            continue;
        snprintf(tried[n_tried++], sizeof tried[0], "%s", path);
        uint64_t sym[4] = {0}, size[4] = {0}, at_file[4] = {0}, low = 0;
        if (elf_symbols(path, names, sym, 4, &low, size, at_file) || !sym[0])
            continue;
        *found = 1; /* _PyRuntime: a CPython */
        if (!sym[1] || !sym[2]) {
            snprintf(why, cap, "CPython before 3.11 (%s has no Py_Version): Python frames are "
                     "read from 3.11, 3.12 and 3.13", path);
            continue;
        }
        uint64_t bias = lo - low;
        sonde_pyproc probe = {.pid = pid, .tab = tab};
        uint64_t version;
        if (rd(&probe, bias + sym[1], &version, 8)) {
            snprintf(why, cap, "%s: its memory cannot be read (process_vm_readv: %s)", path,
                     strerror(errno));
            continue;
        }
        unsigned major = (unsigned)(version >> 24) & 255, minor = (unsigned)(version >> 16) & 255;
        const pylayout *l = NULL;
        for (size_t i = 0; major == 3 && i < sizeof layouts / sizeof *layouts; i++)
            if (layouts[i].minor == minor)
                l = &layouts[i];
        if (!l) {
            snprintf(why, cap, "CPython %u.%u (%s): Python frames are read from 3.11, 3.12 and "
                     "3.13", major, minor, path);
            continue;
        }
        probe.l = l;
        probe.runtime = bias + sym[0];
        if (minor >= 13 && !debug_offsets_agree(&probe)) {
            snprintf(why, cap, "CPython %u.%u (%s): not the layout of its release build "
                     "(free-threaded or debug?)", major, minor, path);
            continue;
        }
        py = sonde__py_attach_at(tab, pid, minor, bias + sym[0], bias + sym[2]);
        if (py && at_file[3] && size[3]) { /* the evaluation loop's code, in the file */
            py->eval_lo = at_file[3];
            py->eval_hi = at_file[3] + size[3];
        }
        if (!py || !(py->path = sonde__strdup(path))) {
            sonde__py_detach(py);
            py = NULL;
            *found = 0;
            snprintf(why, cap, "out of memory");
            break;
        }
    }
    fclose(f);
    return py;
}

const char *sonde__py_path(const sonde_pyproc *py)
{
    return py->path;
}

int sonde__py_is_eval(const sonde_pyproc *py, uint64_t off)
{
    return off >= py->eval_lo && off < py->eval_hi;
}

void sonde__py_detach(sonde_pyproc *py)
{
    if (!py)
        return;
    sonde__free(py->path);
    sonde__free(py->codes);
    sonde__free(py->threads);
    sonde__free(py);
}
