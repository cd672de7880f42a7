/* table.c - what the CPU sampler's three drivers share (internal.h): the processes followed
 * with their mappings and interpreters, the table of distinct stacks, addresses placed in
 * mappings, Python frames put into a stack, a perf sample record's call chain parsed, events
 * opened, warnings written. stacks.c (the cpu-clock events), cputimer.c (CPU-time timers) and
 * offcpu.c (off-CPU periods) call it; it calls none of them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/pb.h"
#include "../util/strmap.h"
#include "internal.h"

sproc *sonde__stk_proc_of(sonde_stacks *s, int pid, int make)
{
    for (size_t i = 0; i < s->n_procs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    if (!make || SONDE_GROW(s->procs, s->n_procs, s->cap_procs)) {
        s->oom |= make;
        return NULL;
    }
    sproc *p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    return p;
}

uint32_t sonde__stk_file_id(sonde_stacks *s, const char *path)
{
    for (size_t i = 0; i < s->n_files; i++)
        if (!strcmp(s->files[i], path))
            return (uint32_t)i;
    char *c = sonde__strdup(path);
    if (!c || SONDE_GROW(s->files, s->n_files, s->cap_files)) {
        sonde__free(c);
        s->oom = 1;
        return UINT32_MAX;
    }
    s->files[s->n_files] = c;
    return (uint32_t)s->n_files++;
}

/* A new mapping replaces what it overlaps (only whole ones: a partial unmap keeps the rest). */
void sonde__stk_add_map(sonde_stacks *s, int pid, uint64_t start, uint64_t len, uint64_t pgoff,
                        const char *path)
{
    if (path[0] != '/' && strcmp(path, "[vdso]")) /* [heap], anonymous memory: no file (a
                                                      JIT's code is named by its perf map) */
        return;
    sproc *p = sonde__stk_proc_of(s, pid, 1);
    uint32_t f = sonde__stk_file_id(s, path);
    if (!p || f == UINT32_MAX)
        return;
    size_t k = 0;
    for (size_t i = 0; i < p->n_maps; i++)
        if (p->maps[i].end <= start || p->maps[i].start >= start + len)
            p->maps[k++] = p->maps[i];
    p->n_maps = k;
    if (SONDE_GROW(p->maps, p->n_maps, p->cap_maps)) {
        s->oom = 1;
        return;
    }
    p->maps[p->n_maps++] = (smap){start, start + len, pgoff, f};
    p->umaps_stale = 1;
    p->gen++;
}

sframe sonde__stk_place(const sproc *p, uint64_t ip)
{
    for (size_t i = 0; p && i < p->n_maps; i++)
        if (ip >= p->maps[i].start && ip < p->maps[i].end)
            return (sframe){p->maps[i].file, ip - p->maps[i].start + p->maps[i].pgoff};
    return (sframe){UINT32_MAX, ip};
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* The index of a stack (frames innermost first, as the kernel gives them), added when new;
 * UINT32_MAX when out of memory. */
uint32_t sonde__stk_stack_id(sonde_stacks *s, uint32_t proc, const sframe *inner, uint32_t n)
{
    uint64_t h = mix(proc, n);
    for (uint32_t i = 0; i < n; i++)
        h = mix(mix(h, inner[i].file), inner[i].off);
    if (s->n_stacks * 2 >= s->cap_table) { /* grow to keep the table half empty */
        size_t cap = s->cap_table ? 2 * s->cap_table : 1024;
        uint32_t *t = sonde__calloc(cap, sizeof *t);
        if (!t) {
            s->oom = 1;
            return UINT32_MAX;
        }
        for (size_t i = 0; i < s->cap_table; i++)
            if (s->table[i]) {
                size_t j = s->stacks[s->table[i] - 1].hash & (cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = s->table[i];
            }
        sonde__free(s->table);
        s->table = t;
        s->cap_table = cap;
    }
    size_t j = h & (s->cap_table - 1);
    for (; s->table[j]; j = (j + 1) & (s->cap_table - 1)) {
        const sstack *e = &s->stacks[s->table[j] - 1];
        if (e->hash != h || e->proc != proc || e->n != n)
            continue;
        uint32_t i = 0;
        while (i < n && e->f[n - 1 - i].file == inner[i].file &&
               e->f[n - 1 - i].off == inner[i].off)
            i++;
        if (i == n)
            return s->table[j] - 1;
    }
    sframe *f = sonde__malloc((n ? n : 1) * sizeof *f);
    if (!f || s->n_stacks >= UINT32_MAX - 1 || SONDE_GROW(s->stacks, s->n_stacks, s->cap_stacks)) {
        sonde__free(f);
        s->oom = 1;
        return UINT32_MAX;
    }
    for (uint32_t i = 0; i < n; i++)
        f[i] = inner[n - 1 - i];
    s->stacks[s->n_stacks] = (sstack){h, proc, n, f, 0};
    s->table[j] = (uint32_t)++s->n_stacks;
    return (uint32_t)(s->n_stacks - 1);
}

/* A warning in the file (WARNING record): the reports list it. */
void sonde__stk_warn(sonde_stacks *s, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    sbuf b;
    sbuf_init(&b);
    pb_lenstr(&b, text);
    if (b.oom)
        s->oom = 1;
    else if (s->write(s->ctx, SONDE_R_WARNING, (const uint8_t *)b.data, b.len))
        s->write_failed = 1;
    sbuf_free(&b);
}

/* Python frame f as a stack's frame (a walk's cut, SONDE_PYFRAME_CUT, as the frame that names
 * how many it left out). */
static sframe py_frame(const sonde_pyframe *f)
{
    return f->code == SONDE_PYFRAME_CUT ? (sframe){TRUNC_FRAME, f->line}
                                        : (sframe){PY_FRAME + f->code, f->line};
}

/* Stack st (a whole native stack, as the call frame information unwinds it: sample_cfi) with
 * the Python frames py (innermost first) in place of the evaluation loop's activations they ran
 * in: each _PyEval_EvalFrameDefault frame of st stands for one run of Python frames (from an
 * entry frame inward), the C code between them (a C function calling back into Python) kept,
 * as are the frames outward of the outermost (main, Py_RunMain) up to an address no mapping
 * holds. Into fr (innermost first); 0 where the two do not pair up (the native stack stops
 * short, as the frame pointers do in libpython). */
static uint32_t interleave(const sproc *p, const sstack *st, const sonde_pyframe *py, int n_py,
                           sframe *fr, uint32_t cap)
{
    uint32_t evals = 0, runs = 0;
    for (uint32_t k = 0; k < st->n; k++)
        evals += st->f[k].file == p->py_file && sonde__py_is_eval(p->py, st->f[k].off);
    for (int i = 0; i < n_py; i++)
        runs += py[i].entry;
    if (!evals || evals != runs || !py[n_py - 1].entry)
        return 0;
    uint32_t n = 0;
    int i = 0;
    for (uint32_t k = st->n; k-- > 0 && n < cap;) {
        const sframe *f = &st->f[k];
        if (f->file == p->py_file && sonde__py_is_eval(p->py, f->off)) {
            if (k == st->n - 1)
                fr[n++] = *f; /* the loop itself running: the innermost frame */
            do /* the Python frames it ran, up to the entry frame */
                if (n < cap)
                    fr[n++] = py_frame(&py[i]);
            while (!py[i++].entry);
            evals--;
        } else if (!evals && f->file == UINT32_MAX) {
            break; /* past the outermost run: no mapping holds it, a frame pointer's garbage */
        } else {
            fr[n++] = *f;
        }
    }
    return n;
}

/* Process p's interpreter (NULL: none read), looked for when its mappings have grown (at most
 * every 100 ms) and after an exec; the reasons a CPython found is not read are warned of. */
sonde_pyproc *sonde__stk_py_of(sonde_stacks *s, sproc *p)
{
    struct timespec now;
    if (!p->py && p->gen != p->py_gen && s->pytab && clock_gettime(CLOCK_MONOTONIC, &now) == 0 &&
        (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec >= p->py_looked) {
        char why[256];
        p->py_gen = p->gen;
        p->py_looked = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 100000000ull;
        int found;
        if ((p->py = sonde__py_attach(s->pytab, p->pid, why, sizeof why, &found))) {
            p->py_file = sonde__stk_file_id(s, sonde__py_path(p->py));
            s->py_any = 1;
        } else if (found && !p->py_warned && s->py_warnings < 4) { /* a Python the user will
                                                                    look for: say why not */
            p->py_warned = 1;
            s->py_warnings++;
            sonde__stk_warn(s, "process %d: %s; its CPU samples keep their native frames only "
                    "(docs/stacks.md, \"Python frames\")", p->pid, why);
        }
    }
    return p->py;
}

/* Sample stack id with the Python frames py (n_py, innermost first) outside the native frames
 * running inward of the interpreter: the native frames from the innermost to the first in the
 * interpreter's file (kept when it is the innermost: Python code running) or the first no
 * mapping holds, then the Python frames, innermost first; interleaved where the native stack is
 * whole (interleave). */
uint32_t sonde__stk_with_frames(sonde_stacks *s, sproc *p, uint32_t id, const sonde_pyframe *py,
                                int n_py)
{
    const sstack *st = &s->stacks[id];
    enum { CAP = MAX_FRAMES + PY_STACK_MAX };
    sframe fr[CAP];
    uint32_t n = interleave(p, st, py, n_py, fr, CAP);
    if (!n) {
        for (uint32_t k = st->n; k-- > 0 && n < CAP;) {
            if (n && st->f[k].file == UINT32_MAX)
                break; /* no mapping holds it: what a frame-pointer walk through code without
                          frame pointers reads (or a JIT's code, which the Python frames stand
                          for) */
            if (st->f[k].file == p->py_file) {
                if (!n)
                    fr[n++] = st->f[k];
                break;
            }
            fr[n++] = st->f[k];
        }
        for (int i = 0; i < n_py && n < CAP; i++)
            fr[n++] = py_frame(&py[i]);
    }
    uint32_t cut = 0; /* a cut the Python frames came with between their innermost and outermost
                         (a walk's; not the one at the root of a walk that stopped at its limit) */
    while (cut < n && (fr[cut].file != TRUNC_FRAME || (fr[cut].off & SONDE_PYCUT_BEYOND)))
        cut++;
    if (n > MAX_FRAMES && cut < n && cut >= n - MAX_FRAMES) {
        /* one cut: the frames just inward of it join it, the outermost stay */
        uint32_t d = n - MAX_FRAMES;
        fr[cut - d] = (sframe){TRUNC_FRAME, fr[cut].off + d};
        memmove(fr + cut - d + 1, fr + cut + 1, (n - cut - 1) * sizeof *fr);
        n = MAX_FRAMES;
    } else if (n > MAX_FRAMES) { /* the innermost and the outermost kept, the cut between */
        uint32_t outer = MAX_FRAMES - TRUNC_INNER - 1;
        uint64_t left = 0; /* the frames cut, and those a cut among them stood for */
        for (uint32_t k = TRUNC_INNER; k < n - outer; k++)
            left += fr[k].file == TRUNC_FRAME ? fr[k].off : 1;
        fr[TRUNC_INNER] = (sframe){TRUNC_FRAME, left};
        memmove(fr + TRUNC_INNER + 1, fr + n - outer, outer * sizeof *fr);
        n = MAX_FRAMES;
    }
    return sonde__stk_stack_id(s, (uint32_t)(p - s->procs), fr, n);
}

/* Sample stack id of thread tid with its Python frames (pyframes.c), read now (with_frames). */
uint32_t sonde__stk_with_python(sonde_stacks *s, sproc *p, uint32_t tid, uint32_t id)
{
    if (!sonde__stk_py_of(s, p) || id == UINT32_MAX ||
        tid == s->reader_tid) /* in process: this thread runs no Python */
        return id;
    sonde_pyframe py[PY_STACK_MAX];
    int n_py = sonde__py_stack(p->py, (int)tid, py, PY_STACK_MAX);
    return n_py > 0 ? sonde__stk_with_frames(s, p, id, py, n_py) : id;
}

int sonde__stk_parse_sample(sonde_stacks *s, const uint8_t *b, const uint8_t *end,
                            ssample_rec *x)
{
    uint64_t nr;
    if (end - b < 24)
        return -1;
    memcpy(&x->pid, b, 4);
    memcpy(&x->tid, b + 4, 4);
    memcpy(&x->t, b + 8, 8);
    memcpy(&nr, b + 16, 8);
    const uint8_t *ips = b + 24;
    if (nr > (uint64_t)(end - ips) / 8 || (s->only_pid && (int)x->pid != s->only_pid) ||
        !(x->p = sonde__stk_proc_of(s, (int)x->pid, 1)))
        return -1;
    x->n = 0;
    for (uint64_t i = 0; i < nr && x->n < MAX_FRAMES; i++) {
        uint64_t ip;
        memcpy(&ip, ips + 8 * i, 8);
        if (ip >= (uint64_t)PERF_CONTEXT_MAX) /* a context marker (user, kernel) */
            continue;
        if (!ip) /* where a frame-pointer chain ends (no caller): no frame, and not the frame
                    "0xffffffffffffffff" its byte back made of it (issue 61 #17) */
            break;
        /* a return address points after its call: one byte back is inside the call */
        x->fr[x->n] = sonde__stk_place(x->p, x->n ? ip - 1 : ip);
        x->n++;
    }
    x->rest = ips + 8 * nr;
    return 0;
}

int sonde__stk_open_event(struct perf_event_attr *a, pid_t pid, int cpu)
{
    return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}
