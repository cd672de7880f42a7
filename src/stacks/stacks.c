/* stacks.c - CPU samples with call stacks (stacks.h): the kernel's cpu-clock event through
 * perf_event_open, one event per CPU (an inherited per-task event cannot be mapped, so perf
 * record does the same), following a program `sonde run` starts or this process's own threads.
 * A thread drains the ring buffers every 10 ms, merging them in time order. Each sample's
 * addresses are placed at once in the mappings of its process (file, offset), so a library
 * unloaded later is still named; distinct stacks are kept in a hash table and each sample
 * (thread, stack, time) is written out in SAMPLES records as they accumulate; functions are
 * named once per distinct address at the end, from the ELF symbol tables, and written as FUNCS
 * and STACKS records (docs/formats.md). The off-CPU periods beside them are offcpu.c's, CPU-time
 * timers cputimer.c's; the processes, stacks and sample parsing all three use are table.c's
 * (internal.h). */
#define _GNU_SOURCE
#include "stacks.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/buf.h"
#include "../util/pb.h"
#include "../util/strmap.h"

#include "internal.h"


/* The samples held so far as one SAMPLES record: varint hz, varint flags (1: times on
 * CLOCK_MONOTONIC; 2: taken in the threads by SIGPROF, cputimer.c; 4: from per-thread CPU-clock
 * counters, else timers), varint samples
 * the kernel lost since the last record, then per sample varint tid, varint stack, zigzag time
 * less the previous sample's. */
static void flush_samples(sonde_stacks *s)
{
    if (!s->n_pend && s->lost == s->lost_written)
        return;
    sbuf_reset(&s->out);
    pb_varint(&s->out, s->hz);
    pb_varint(&s->out, (uint64_t)s->timed | (s->timer ? 2u : 0u) |
                           (s->timer && sonde__cputimer_counters(s->timer) ? 4u : 0u));
    pb_varint(&s->out, s->lost - s->lost_written);
    uint64_t prev = 0;
    for (size_t i = 0; i < s->n_pend; i++) {
        pb_varint(&s->out, s->pend[i].tid);
        pb_varint(&s->out, s->pend[i].stack);
        pb_varint(&s->out, zigzag_enc((int64_t)(s->pend[i].t - prev)));
        prev = s->pend[i].t;
    }
    if (s->out.oom)
        s->oom = 1;
    else if (s->write(s->ctx, SONDE_R_SAMPLES, (const uint8_t *)s->out.data, s->out.len))
        s->write_failed = 1;
    s->lost_written = s->lost;
    s->n_pend = 0;
}

/* weight samples of stack id on thread tid at time t (a timer's signal may stand for several
 * periods), written out as they gather. */
static void add_sample(sonde_stacks *s, uint32_t tid, uint32_t id, uint64_t t, uint32_t weight)
{
    if (id == UINT32_MAX) {
        s->oom = 1;
        return;
    }
    s->stacks[id].used = 1;
    for (uint32_t w = 0; w < weight; w++) {
        if (SONDE_GROW(s->pend, s->n_pend, s->cap_pend)) {
            s->oom = 1;
            return;
        }
        s->pend[s->n_pend++] = (ssample){tid, id, t};
        if (s->n_pend >= FLUSH_SAMPLES)
            flush_samples(s);
    }
}

/* The process's maps with their paths, for the unwinder. */
static const sonde_umap *umaps_of(sonde_stacks *s, sproc *p)
{
    if (p->umaps_stale || !p->umaps) {
        sonde_umap *u = sonde__malloc((p->n_maps ? p->n_maps : 1) * sizeof *u);
        if (!u) {
            s->oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < p->n_maps; i++)
            u[i] = (sonde_umap){p->maps[i].start, p->maps[i].end, p->maps[i].pgoff,
                                s->files[p->maps[i].file]};
        sonde__free(p->umaps);
        p->umaps = u;
        p->n_umaps = p->n_maps;
        p->umaps_stale = 0;
    }
    return p->umaps;
}

/* After the call chain: the ABI, the registers, the stack's top (PERF_SAMPLE_REGS_USER,
 * PERF_SAMPLE_STACK_USER). Where unwinding them from the call frame information disagrees with
 * the kernel's frame-pointer walk (code without frame pointers hides its callers from that
 * walk, or leads it astray), those frames replace fr. Walks the unwinding leaves as they are
 * are not unwound again. Asked for with sample_cfi. walk: the stack id of fr, n frames; returns
 * the stack id of the sample (walk, or the unwinding's). */
static uint32_t unwind_sample(sonde_stacks *s, sproc *p, uint32_t tid, const uint8_t *q,
                              const uint8_t *end, const sframe *fr, uint32_t n, uint32_t walk)
{
    enum { REGS = 17 };
    if (walk == UINT32_MAX)
        return walk;
    if (walk >= s->cap_verdict) {
        size_t cap = s->cap_verdict ? 2 * s->cap_verdict : 1024;
        while (cap <= walk)
            cap *= 2;
        uint8_t *v = sonde__realloc(s->fp_verdict, cap);
        if (!v) {
            s->oom = 1;
            return walk;
        }
        memset(v + s->cap_verdict, 0, cap - s->cap_verdict);
        s->fp_verdict = v;
        s->cap_verdict = cap;
    }
    if (s->fp_verdict[walk] == 1)
        return walk;
    uint64_t abi, regs[REGS], size, dyn;
    if (end - q < 8)
        return walk;
    memcpy(&abi, q, 8);
    q += 8;
    if (!abi || end - q < 8 * REGS + 8)
        return walk;
    memcpy(regs, q, sizeof regs);
    q += sizeof regs;
    memcpy(&size, q, 8);
    q += 8;
    if (!size || (uint64_t)(end - q) < size + 8)
        return walk;
    memcpy(&dyn, q + size, 8);
    const sonde_umap *maps = umaps_of(s, p);
    if (!maps)
        return walk;
    uint64_t ips[MAX_FRAMES];
    int k = sonde__unwind(s->unwinder, p->pid, (int)tid, maps, p->n_umaps, regs, q,
                          dyn < size ? dyn : size, ips, MAX_FRAMES);
    sframe cfi[MAX_FRAMES];
    int same = k == (int)n;
    for (int i = 0; i < k; i++) {
        cfi[i] = sonde__stk_place(p, i ? ips[i] - 1 : ips[i]);
        if (i < (int)n && (cfi[i].file != fr[i].file || cfi[i].off != fr[i].off))
            same = 0;
    }
    /* the same frames, or fewer (the unwinding stopped short): this walk is not unwound again;
     * a walk the unwinding extends or corrects is unwound at each sample, since one walk cut
     * short can stand for many callers */
    if (same || k < (int)n || k < 2) {
        s->fp_verdict[walk] = 1;
        return walk;
    }
    s->fp_verdict[walk] = 2;
    s->cfi_unwound++;
    return sonde__stk_stack_id(s, (uint32_t)(p - s->procs), cfi, (uint32_t)k);
}

uint32_t sonde__stk_kernel_python(sonde_stacks *s, sproc *p, uint32_t tid, uint64_t t,
                                  uint32_t id)
{
    if (!sonde__stk_py_of(s, p) || id == UINT32_MAX || tid == s->reader_tid)
        return id;
    const sonde_pykframe *kf = NULL;
    sonde_pycut cut = {0, 0};
    int n = sonde__pybpf_take(s->bpf, tid, t, &kf, &cut);
    if (n < 0) {
        uint64_t ts = sonde__py_tstate(p->py, (int)tid);
        if (ts || n == -2)
            sonde__pybpf_thread(s->bpf, tid, ts, sonde__py_layout(p->py));
        return id;
    }
    /* a deep walk's innermost and outermost frames, the count left out between (and a cut at
     * the root when the walk stopped at its limit) as frames of their own */
    enum { CAP = 128 };
    sonde_pyraw raw[CAP];
    sonde_pyframe py[CAP + 2];
    int held_in = cut.between && n > SONDE_PYCUT_IN ? SONDE_PYCUT_IN : n; /* the walk's */
    int k_in = n ? sonde__py_from_kernel(p->py, kf, held_in, raw, CAP) : 0; /* kf NULL: none */
    int k = k_in + (n > held_in ? sonde__py_from_kernel(p->py, kf + held_in, n - held_in,
                                                        raw + k_in, CAP - k_in)
                                : 0);
    int n_py = sonde__py_resolve_cut(p->py, raw, k, k_in, &cut, py);
    return n_py > 0 ? sonde__stk_with_frames(s, p, id, py, n_py) : id;
}

/* One record of the ring (PERF_RECORD_*). */
static void record(sonde_stacks *s, const struct perf_event_header *h, int off)
{
    const uint8_t *b = (const uint8_t *)(h + 1), *end = (const uint8_t *)h + h->size;
    if (off) {
        sonde__off_record(s, h, b, end);
        return;
    }
    switch (h->type) {
    case PERF_RECORD_SAMPLE: {
        ssample_rec x;
        if (sonde__stk_parse_sample(s, b, end, &x))
            return;
        uint32_t id = sonde__stk_stack_id(s, (uint32_t)(x.p - s->procs), x.fr, x.n);
        if (s->unwinder)
            id = unwind_sample(s, x.p, x.tid, x.rest, end, x.fr, x.n, id);
        id = s->bpf ? sonde__stk_kernel_python(s, x.p, x.tid, x.t, id)
                    : sonde__stk_with_python(s, x.p, x.tid, id);
        add_sample(s, x.tid, id, s->timed ? x.t : 0, 1);
        break;
    }
    case PERF_RECORD_MMAP2: { /* pid, tid, addr, len, pgoff, maj, min, ino, ino_gen, prot,
                                 flags, filename */
        if (end - b < 64)
            return;
        uint32_t pid;
        uint64_t addr, len, pgoff;
        memcpy(&pid, b, 4);
        memcpy(&addr, b + 8, 8);
        memcpy(&len, b + 16, 8);
        memcpy(&pgoff, b + 24, 8);
        const char *name = (const char *)(b + 64);
        if (!memchr(name, 0, (size_t)(end - (const uint8_t *)name)))
            return;
        sonde__stk_add_map(s, (int)pid, addr, len, pgoff, name);
        break;
    }
    case PERF_RECORD_COMM: { /* pid, tid, comm */
        uint32_t pid, tid;
        if (end - b < 9)
            return;
        memcpy(&pid, b, 4);
        memcpy(&tid, b + 4, 4);
        sproc *p = sonde__stk_proc_of(s, (int)pid, 1);
        if (p && pid == tid) /* the process's name, not a thread's */
            snprintf(p->comm, sizeof p->comm, "%.*s", (int)(end - b - 8), (const char *)(b + 8));
        if (p && (h->misc & PERF_RECORD_MISC_COMM_EXEC)) { /* another program: its own Python */
            sonde__py_detach(p->py);
            p->py = NULL;
            p->py_gen = p->gen - 1;
            p->py_looked = 0;
        }
        break;
    }
    case PERF_RECORD_FORK: { /* pid, ppid, tid, ptid: a new process starts with its parent's
                                mappings */
        uint32_t pid, ppid;
        if (end - b < 16)
            return;
        memcpy(&pid, b, 4);
        memcpy(&ppid, b + 4, 4);
        if (pid == ppid)
            return; /* a thread */
        sproc *child = sonde__stk_proc_of(s, (int)pid, 1);
        sproc *parent = sonde__stk_proc_of(s, (int)ppid, 0); /* after: making child may move procs */
        if (!child || !parent || child->n_maps || !parent->n_maps)
            return;
        smap *maps = sonde__malloc(parent->n_maps * sizeof *maps);
        if (!maps) {
            s->oom = 1;
            return;
        }
        memcpy(maps, parent->maps, parent->n_maps * sizeof *maps);
        sonde__free(child->maps);
        child->maps = maps;
        child->n_maps = child->cap_maps = parent->n_maps;
        child->umaps_stale = 1;
        child->gen++; /* its mappings are new to it: its Python (a forked worker) looked for */
        memcpy(child->comm, parent->comm, sizeof child->comm);
        break;
    }
    case PERF_RECORD_LOST: {
        uint64_t lost;
        if (end - b >= 16) {
            memcpy(&lost, b + 8, 8);
            s->lost += lost;
        }
        break;
    }
    default:
        break;
    }
}

/* The bytes [at, at + n) of a ring of size bytes, wherever it wraps. */
static void ring_copy(const uint8_t *data, uint64_t size, uint64_t at, void *dst, size_t n)
{
    uint64_t from = at % size, first = size - from < n ? size - from : n;
    memcpy(dst, data + from, first);
    memcpy((uint8_t *)dst + first, data, n - first); /* the part past the ring's end */
}

/* The time of the record at position at: a sample's own, after pid and tid; any other's in the
 * last 8 bytes, the fields sample_id_all appends (pid, tid, time); 0 when too short. */
static uint64_t time_at(const uint8_t *data, uint64_t size, uint64_t at,
                        const struct perf_event_header *h)
{
    uint64_t t = 0;
    if (h->size >= 24)
        ring_copy(data, size, at + (h->type == PERF_RECORD_SAMPLE ? 16u : h->size - 8u), &t, 8);
    return t;
}

static int cmp_order(const void *a, const void *b)
{
    const sorder *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->ring != y->ring)
        return x->ring < y->ring ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Everything the rings hold with a time up to cut, in time order across the rings: a library's
 * MMAP2 record may sit in one CPU's ring and its first samples in another's, and a sample read
 * before the mapping it falls in would name no function. Each ring is in time order by itself. */
/* Ring r: the cpu-clock event's of CPU r below n_cpus, the context-switch event's of CPU
 * r - n_cpus from there. */
static struct perf_event_mmap_page *ring_at(const sonde_stacks *s, int r)
{
    return r < s->n_cpus ? s->rings[r] : s->off_rings[r - s->n_cpus];
}

static void drain(sonde_stacks *s, uint64_t cut)
{
    s->n_order = 0;
    /* the kernel's Python frames first: a sample in the rings now had its record written
     * before it */
    if (s->bpf && sonde__pybpf_read(s->bpf, s->bpf_done))
        s->oom = 1;
    s->bpf_done = cut;
    int n_rings = s->n_cpus + s->n_off;
    for (int c = 0; c < n_rings; c++) {
        struct perf_event_mmap_page *pg = ring_at(s, c);
        const uint8_t *data = (const uint8_t *)pg + pg->data_offset;
        uint64_t size = pg->data_size;
        uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), tail = pg->data_tail;
        while (tail + sizeof(struct perf_event_header) <= head) {
            struct perf_event_header h;
            ring_copy(data, size, tail, &h, sizeof h);
            if (h.size < sizeof h || tail + h.size > head)
                break;
            uint64_t t = time_at(data, size, tail, &h);
            if (t > cut)
                break;
            if (SONDE_GROW(s->order, s->n_order, s->cap_order)) {
                s->oom = 1;
                break;
            }
            s->order[s->n_order++] = (sorder){t, tail, c};
            tail += h.size;
        }
        s->ends[c] = tail;
    }
    sonde__sort(s->order, s->n_order, sizeof *s->order, cmp_order);
    for (size_t i = 0; i < s->n_order; i++) {
        int off = s->order[i].ring >= s->n_cpus;
        struct perf_event_mmap_page *pg = ring_at(s, s->order[i].ring);
        const uint8_t *data = (const uint8_t *)pg + pg->data_offset;
        struct perf_event_header h;
        uint64_t from = s->order[i].at % pg->data_size;
        ring_copy(data, pg->data_size, s->order[i].at, &h, sizeof h);
        if (from + h.size <= pg->data_size) { /* whole where it lies (8-byte aligned) */
            record(s, (const struct perf_event_header *)(const void *)(data + from), off);
            continue;
        }
        ring_copy(data, pg->data_size, s->order[i].at, s->rec, h.size); /* made whole */
        record(s, (const struct perf_event_header *)s->rec, off);
    }
    for (int c = 0; c < n_rings; c++) {
        struct perf_event_mmap_page *pg = ring_at(s, c);
        __atomic_store_n(&pg->data_tail, s->ends[c], __ATOMIC_RELEASE);
    }
    if (s->n_off_open)
        sonde__off_python(s);
}

static void read_own_maps(sonde_stacks *s, int pid);

/* A timer's sample's stack id with the Python frames its handler read (raw, n_raw of them),
 * named now; the interpreter handed to the timers once read, and the thread's state published
 * for the next samples when this one has none (the thread's first, or its state changed). */
static uint32_t timer_python(sonde_stacks *s, sproc *p, uint32_t tid, uint32_t id,
                             const sonde_pyraw *raw, uint32_t n_raw, const sonde_pycut *cut)
{
    if (!s->timer_py) {
        sonde__cputimer_python(s->timer, p->py);
        s->timer_py = 1;
    }
    if (!n_raw) {
        sonde__cputimer_tstate(s->timer, tid, sonde__py_tstate(p->py, (int)tid));
        return id;
    }
    sonde_pyframe py[SONDE_CPUTIMER_PYFRAMES + 2];
    int n_in = n_raw < SONDE_PYCUT_IN ? (int)n_raw : SONDE_PYCUT_IN;
    int n_py = sonde__py_resolve_cut(p->py, raw, (int)n_raw, n_in, cut, py);
    return n_py > 0 ? sonde__stk_with_frames(s, p, id, py, n_py) : id;
}

/* A sample of the timers (cputimer.c): placed in this process's mappings, read again once per
 * drain when a frame falls in none (a library loaded since). */
static void timer_sample(void *ctx, uint32_t tid, uint64_t t, const uint64_t *ip, uint32_t n,
                         uint32_t weight, const sonde_pyraw *raw, uint32_t n_raw,
                         const sonde_pycut *cut)
{
    sonde_stacks *s = ctx;
    sproc *p = sonde__stk_proc_of(s, s->only_pid, 1);
    if (!p)
        return;
    sframe fr[SONDE_CPUTIMER_FRAMES];
    uint32_t k = 0, unplaced = 0;
    for (uint32_t i = 0; i < n && k < SONDE_CPUTIMER_FRAMES; i++) {
        fr[k] = sonde__stk_place(p, k ? ip[i] - 1 : ip[i]); /* return addresses: one byte back is the call */
        unplaced += fr[k].file == UINT32_MAX;
        k++;
    }
    if (unplaced && !s->remapped) {
        s->remapped = 1;
        read_own_maps(s, s->only_pid);
        p = sonde__stk_proc_of(s, s->only_pid, 1);
        for (uint32_t i = 0; p && i < k; i++)
            fr[i] = sonde__stk_place(p, i ? ip[i] - 1 : ip[i]);
    }
    uint32_t id = sonde__stk_stack_id(s, (uint32_t)(p - s->procs), fr, k);
    if (id != UINT32_MAX && tid != s->reader_tid && sonde__stk_py_of(s, p))
        id = timer_python(s, p, tid, id, raw, n_raw, cut);
    add_sample(s, tid, id, t, weight);
}

static void drain_timer(sonde_stacks *s)
{
    s->remapped = 0;
    sonde__cputimer_drain(s->timer, timer_sample, s);
    s->lost = sonde__cputimer_lost(s->timer);
}

/* Until a ring has a sample (rings: 1), the reader is to stop, or 10 ms. */
static void wait_sample(sonde_stacks *s, int rings)
{
    struct pollfd fds[MAX_CPUS + 1];
    int n = 0;
    for (int c = 0; rings && c < s->n_cpus; c++)
        fds[n++] = (struct pollfd){s->fds[c], POLLIN, 0};
    if (s->stop_fd >= 0)
        fds[n++] = (struct pollfd){s->stop_fd, POLLIN, 0};
    if (n) {
        poll(fds, (nfds_t)n, 10);
        return;
    }
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static uint64_t mono_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* The program set an action of its own for the timers' signal (sonde__cputimer_displaced says
 * how it went: 1 moved to another, 2 stopped), which the reports say. */
static void timer_displaced(sonde_stacks *s, int how)
{
    double at = (double)(mono_ns() - s->timer_t0) / 1e9;
    int sig = sonde__cputimer_signal(s->timer);
    if (how == 1)
        sonde__stk_warn(s, "the program gave SIGPROF a handler of its own %.2f s after its "
                        "sampling began (a profiler on setitimer?): its handler gets its own "
                        "signals alone, and the CPU samples taken in its threads go on with "
                        "signal %d (SIGRTMIN+%d) (docs/stacks.md, \"A program with a SIGPROF "
                        "handler of its own\")", at, sig, sig - SIGRTMIN);
    else if (s->timer_displaced == 1)
        sonde__stk_warn(s, "the program gave signal %d (SIGRTMIN+%d), which the samples taken in "
                        "its threads had moved to, a handler of its own %.2f s after its "
                        "sampling began: they stopped there (docs/stacks.md)", sig,
                        sig - SIGRTMIN, at);
    else
        sonde__stk_warn(s, "the program gave SIGPROF a handler of its own %.2f s after its "
                        "sampling began (a profiler on setitimer?), and no real-time signal was "
                        "free: the CPU samples taken in its threads stopped there and its "
                        "handler gets its own signals alone; under sonde run, the samples taken "
                        "from outside go on, with native frames only (docs/stacks.md, \"A "
                        "program with a SIGPROF handler of its own\")", at);
    s->timer_displaced = how;
}

static void *reader(void *arg)
{
    sonde_stacks *s = arg;
    s->reader_tid = (uint32_t)syscall(SYS_gettid);
    for (unsigned round = 1; !atomic_load(&s->stop); round++) {
        struct timespec now;
        /* woken by each sample where its Python frames are to be read now (by this thread:
         * not the kernel), else every 10 ms */
        wait_sample(s, s->py_any && !s->timer && !s->bpf);
        if (s->timer) {
            drain_timer(s);
            int how = sonde__cputimer_displaced(s->timer); /* 2 at once, once stopped */
            if (how != s->timer_displaced)
                timer_displaced(s, how);
            else if (round % 10 == 0) /* the threads begun since: every 100 ms */
                sonde__cputimer_follow_new(s->timer);
            continue;
        }
        /* a record stamped before now but still being written into another ring would come
         * after the later ones of this pass: those stamped after now wait for the next */
        uint64_t cut = UINT64_MAX;
        if (s->timed && clock_gettime(CLOCK_MONOTONIC, &now) == 0)
            cut = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
        drain(s, cut);
    }
    if (s->timer)
        drain_timer(s);
    else
        drain(s, UINT64_MAX);
    uint64_t shallow = s->timer ? sonde__cputimer_shallow(s->timer) : 0;
    if (shallow)
        sonde__stk_warn(s, "%llu CPU samples taken in the threads hold the interrupted instruction "
                        "without its native callers (a Python thread's keep their Python frames): "
                        "their thread's stack had too little room left below it to unwind in (a "
                        "thread made with a small stack, deep in it; docs/stacks.md, \"Threads "
                        "with small stacks\")",
                        (unsigned long long)shallow);
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        s->cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    return NULL;
}

/* This process's mappings as they are now (the kernel reports only those made later). */
static void read_own_maps(sonde_stacks *s, int pid)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[4096 + 128];
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        char perms[8];
        int at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &off, &at) < 4 || !at)
            continue;
        char *path = line + at;
        path[strcspn(path, "\n")] = 0;
        if (perms[2] == 'x' && hi > lo)
            sonde__stk_add_map(s, pid, lo, hi - lo, off, path);
    }
    fclose(f);
    sproc *p = sonde__stk_proc_of(s, pid, 1);
    FILE *c = fopen("/proc/self/comm", "re");
    if (p && c && fgets(p->comm, sizeof p->comm, c))
        p->comm[strcspn(p->comm, "\n")] = 0;
    if (c)
        fclose(c);
}

static void free_all(sonde_stacks *s);

static void close_all(sonde_stacks *s)
{
    for (size_t i = 0; i < s->n_task_fds; i++)
        close(s->task_fds[i]);
    s->n_task_fds = 0;
    sonde__off_close(s);
    for (int c = 0; c < s->n_cpus; c++) {
        munmap(s->rings[c], s->ring_bytes);
        close(s->fds[c]);
    }
    s->n_cpus = 0;
}

/* The events of thread tid of this process on every CPU that has a ring, writing into that
 * CPU's of fds (s->fds, or s->off_fds). 0, or -1 (errno set). */
static int follow_task(sonde_stacks *s, struct perf_event_attr *a, pid_t tid, const int *fds)
{
    for (int k = 0; k < s->n_cpus; k++) {
        int fd = sonde__stk_open_event(a, tid, s->cpus[k]);
        if (fd < 0)
            return errno == ESRCH ? 0 : -1; /* ESRCH: the thread has ended */
        if (SONDE_GROW(s->task_fds, s->n_task_fds, s->cap_task_fds)) {
            close(fd);
            errno = ENOMEM;
            return -1;
        }
        s->task_fds[s->n_task_fds++] = fd;
        if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, fds[k]) != 0)
            return -1;
        if (s->bpf && fds == s->fds && sonde__pybpf_attach(s->bpf, fd) != 0) {
            s->bpf_refused = 1;
            return -1;
        }
        if (s->off_bpf && fds == s->off_fds && sonde__pybpf_attach(s->bpf, fd) != 0)
            s->off_bpf = 0; /* its periods' frames are read from outside (offcpu.c) */
    }
    return 0;
}

/* The cpu-clock events (perf_event_open) of pid's process, or of this one (pid 0) with every
 * thread it has now. 0, or -1 with the reason in why and nothing left open. */
static int perf_start(sonde_stacks *s, pid_t pid, char *why, size_t cap)
{
    pid_t self = getpid(), main_task = pid ? pid : self;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = s->hz;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    if (s->unwinder) { /* the registers and the stack's top, to unwind by the CFI */
        a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        a.sample_regs_user = sonde__unwind_regs_mask();
        a.sample_stack_user = STACK_COPY;
    }
    a.exclude_kernel = a.exclude_hv = a.exclude_callchain_kernel = 1;
    a.inherit = 1;
    a.mmap = a.mmap2 = a.comm = a.task = 1;
    a.sample_id_all = 1; /* every record has a time: the rings are read in time order */
    /* a poll wakes at each sample where this thread reads the Python frames (below); else the
     * kernel's default (half the ring): a wake-up is a self-interrupt in the sampled thread */
    a.wakeup_events = s->pytab && !s->bpf;
    a.use_clockid = 1;   /* the clock sonde's sections are anchored to */
    a.clockid = CLOCK_MONOTONIC;
    if (pid) { /* counting begins at the child's exec */
        a.disabled = 1;
        a.enable_on_exec = 1;
    }
    long n = sysconf(_SC_NPROCESSORS_CONF);
    s->ring_bytes = (size_t)(1 + (s->unwinder ? RING_PAGES_STACK : RING_PAGES)) *
                    (size_t)sysconf(_SC_PAGESIZE);
    for (long c = 0; c < n && c < MAX_CPUS; c++) {
        int fd = sonde__stk_open_event(&a, main_task, (int)c);
        if (fd < 0 && errno == EINVAL && a.use_clockid && !s->n_cpus) {
            a.use_clockid = 0; /* a kernel before 4.1: samples without times */
            a.clockid = 0;
            s->timed = 0;
            fd = sonde__stk_open_event(&a, main_task, (int)c);
        }
        if (fd < 0) {
            if (errno == ENODEV || errno == EINVAL) /* an offline CPU */
                continue;
            snprintf(why, cap, "perf_event_open: %s%s", strerror(errno),
                     errno == EACCES || errno == EPERM
                         ? " (kernel.perf_event_paranoid must be 2 or less; docs/stacks.md)"
                         : "");
            goto fail;
        }
        void *ring = mmap(NULL, s->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ring == MAP_FAILED) {
            snprintf(why, cap, "mmap of the sample buffer: %s", strerror(errno));
            close(fd);
            goto fail;
        }
        s->fds[s->n_cpus] = fd;
        s->cpus[s->n_cpus] = (int)c;
        s->rings[s->n_cpus++] = ring;
        if (s->bpf && sonde__pybpf_attach(s->bpf, fd) != 0) {
            snprintf(why, cap, "PERF_EVENT_IOC_SET_BPF: %s", strerror(errno));
            s->bpf_refused = 1;
            goto fail;
        }
    }
    if (!s->n_cpus) {
        snprintf(why, cap, "perf_event_open: no CPU accepted the event");
        goto fail;
    }
    struct perf_event_attr off_a;
    sonde__off_attr(&a, &off_a);
    if (s->want_off)
        sonde__off_start(s, &off_a, main_task);
    if (!pid) {
        /* This process's other threads alive now (those started later inherit the events of
         * the thread that starts them). */
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char *endp;
            long tid = strtol(e->d_name, &endp, 10);
            if (*endp || tid <= 0 || tid == (long)self)
                continue;
            if (follow_task(s, &a, (pid_t)tid, s->fds) != 0 ||
                (s->n_off && follow_task(s, &off_a, (pid_t)tid, s->off_fds) != 0)) {
                snprintf(why, cap, "perf_event_open for thread %ld: %s", tid, strerror(errno));
                closedir(d);
                goto fail;
            }
        }
        if (d)
            closedir(d);
    }
    return 0;
fail:
    close_all(s);
    s->timed = 1;
    return -1;
}

/* sample_python 2 refused (why): said; the Python frames are read by the sampler's thread. */
static void bpf_refused(sonde_stacks *s, const char *why)
{
    sonde__stk_warn(s, "sample_python 2 (the Python frames read in the kernel): %s; they are "
                    "read by the sampler's thread at each sample instead (docs/stacks.md, "
                    "\"Python frames read in the kernel\")", why);
}

sonde_stacks *sonde__stacks_start(pid_t pid, unsigned hz, int inline_frames, int cfi,
                                  int python, int off_cpu, int timers, sonde_stacks_write write,
                                  void *ctx, char *why, size_t cap)
{
    sonde_stacks *s = sonde__calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    sbuf_init(&s->out);
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); /* -1: the reader notices in 10 ms */
    if (python && !(s->pytab = sonde__pytab_new())) {
        snprintf(why, cap, "out of memory");
        if (s->stop_fd >= 0)
            close(s->stop_fd);
        sonde__free(s);
        return NULL;
    }
    s->hz = hz;
    s->want_off = off_cpu;
    s->inline_frames = inline_frames;
    s->write = write;
    s->ctx = ctx;
    s->timed = 1;
    pid_t self = getpid();
    if (!pid)
        s->only_pid = (int)self;
    if (cfi && !timers) /* NULL where not built: frame pointers alone (the in-thread samples
                           are unwound by backtrace()) */
        s->unwinder = sonde__unwind_new();
    if (timers && pid) {
        snprintf(why, cap, "sample_in_thread: 1, but sonde run cannot take samples in another "
                           "process's threads (0 samples it with perf_event_open)");
        goto fail;
    }
    /* read in the kernel: in a child (what it will run is not known yet), or in this process
     * where it holds a CPython (a C program's samples need no program: its loading is about
     * 10 ms of CPU) */
    if ((python == 1 || python == 2) && s->pytab && !timers &&
        (pid || python == 2 || dlsym(RTLD_DEFAULT, "Py_Version"))) {
        char bpf_why[256];
        if (!(s->bpf = sonde__pybpf_open(bpf_why, sizeof bpf_why)) && python == 2)
            bpf_refused(s, bpf_why);
    }
    int rc = timers ? -1 : perf_start(s, pid, why, cap);
    if (rc != 0 && s->bpf_refused) { /* the program would not attach: read here instead */
        if (python == 2)
            bpf_refused(s, why);
        sonde__pybpf_close(s->bpf);
        s->bpf = NULL;
        s->bpf_refused = 0;
        rc = perf_start(s, pid, why, cap);
    }
    if (timers)
        snprintf(why, cap, "sample_in_thread: 1 asks for samples taken in each thread");
    if (rc != 0 && !timers && s->unwinder) { /* the larger rings may pass the locked-memory
                                                limit */
        sonde__unwind_free(s->unwinder);
        s->unwinder = NULL;
        rc = perf_start(s, pid, why, cap);
    }
    if (rc != 0) {
        sonde__pybpf_close(s->bpf); /* no event to run it on */
        s->bpf = NULL;
        if (pid)
            goto fail;
        /* refused here: timers on the threads' CPU clocks instead */
        char perf_why[256], timer_why[256];
        snprintf(perf_why, sizeof perf_why, "%s", why);
        s->timer_t0 = mono_ns();
        s->timer = sonde__cputimer_start(hz, timers, timer_why, sizeof timer_why);
        if (!s->timer) {
            snprintf(why, cap, "%s; and %s", perf_why, timer_why);
            goto fail;
        }
    }
    if (!pid) {
        read_own_maps(s, (int)self); /* the mappings already made (the kernel reports later ones) */
        if (s->oom) {
            snprintf(why, cap, "out of memory");
            goto fail;
        }
    }
    if (pthread_create(&s->thread, NULL, reader, s) != 0) {
        snprintf(why, cap, "cannot start the sampler's thread");
        goto fail;
    }
    return s;
fail:
    free_all(s);
    return NULL;
}

/* ---- names ---- */

/* Writes b as a record of the given type when it holds more than limit bytes, and empties it. */
static void emit(sonde_stacks *s, unsigned type, sbuf *b, size_t limit)
{
    if (b->len <= limit)
        return;
    if (b->oom)
        s->oom = 1;
    else if (s->write(s->ctx, type, (const uint8_t *)b->data, b->len))
        s->write_failed = 1;
    sbuf_reset(b);
}

/* The naming of the frames at the end: each distinct frame ("file:offset") once, into its chain
 * of functions (the inlined ones too, outermost first) and the source line it was at; each
 * distinct (object, name) a function, numbered in order, written as FUNCS (and FUNCLOC where
 * the DWARF says where it is defined). */
typedef struct namer {
    sonde_symfile **files;
    strmap funcs, frames;
    sbuf fb, lb, key;
    int n_funcs;
    uint32_t *cids, *cfirst;   /* chain c: cids[cfirst[c] .. cfirst[c + 1]) */
    size_t n_cids, cap_cids, n_chains, cap_chains;
    const char **src;          /* per chain, the frame's source file (NULL: none) and line */
    unsigned *line;
    size_t cap_src, cap_line;
    int perf_pid;              /* the process whose perf map is open (0: none read yet) */
    sonde_symfile *perf_map;   /* its /tmp/perf-PID.map, NULL: it has none */
} namer;

/* The symbols of mapped file `file`, opened when a stack first names it (a process that took
 * no sample, a shell's or a shim's under sonde run --sample-in-thread, opens none); NULL out of
 * memory. */
static sonde_symfile *file_of(const sonde_stacks *s, namer *nm, uint32_t file)
{
    if (!nm->files[file])
        nm->files[file] = sonde__sym_open(s->files[file]);
    return nm->files[file];
}

/* The perf map of process pid, read once while its stacks are named (stacks are in process
 * order, so one at a time). */
static sonde_symfile *perf_map_of(namer *nm, int pid)
{
    if (nm->perf_pid != pid) {
        sonde__sym_close(nm->perf_map);
        nm->perf_map = sonde__sym_perfmap(pid);
        nm->perf_pid = pid;
    }
    return nm->perf_map;
}

/* The function id of name in object obj, named (FUNCS, FUNCLOC) when new; -1 out of memory. */
static int function_id(namer *nm, const char *obj, const sonde_symframe *sf)
{
    sbuf_reset(&nm->key);
    sbuf_puts(&nm->key, obj);
    sbuf_putc(&nm->key, '\t');
    sbuf_puts(&nm->key, sf->name);
    if (nm->key.oom)
        return -1;
    int id = strmap_get(&nm->funcs, nm->key.data);
    if (id >= 0)
        return id;
    id = nm->n_funcs++;
    if (strmap_put(&nm->funcs, nm->key.data, id))
        return -1;
    pb_varint(&nm->fb, (uint64_t)id);
    pb_lenstr(&nm->fb, sf->name);
    pb_lenstr(&nm->fb, obj);
    if (sf->file) {
        pb_varint(&nm->lb, (uint64_t)id);
        pb_lenstr(&nm->lb, sf->file);
        pb_varint(&nm->lb, sf->line);
    }
    return id;
}

/* The chain of frame fr of process pid, made when new; -1 out of memory. An address no
 * mapped file holds is named by the process's perf map when it lists it, else by number. */
static int frame_chain(sonde_stacks *s, namer *nm, const sframe *fr, int pid)
{
    char at[64];
    if (fr->file == UINT32_MAX) /* an address: the process's own */
        snprintf(at, sizeof at, "p%d:%" PRIx64, pid, fr->off);
    else
        snprintf(at, sizeof at, "%" PRIu32 ":%" PRIx64, fr->file, fr->off);
    int c = strmap_get(&nm->frames, at);
    if (c >= 0)
        return c;
    sonde_symframe sf[8];
    int n = 1;
    sonde_pycode pc = {NULL, NULL, 0};
    char trunc[64];
    if (fr->file == TRUNC_FRAME) { /* frames a stack left out (with_frames) */
        if (fr->off & SONDE_PYCUT_BEYOND) /* the root: a walk stopped at its limit */
            snprintf(trunc, sizeof trunc, "[truncated: deeper than %" PRIu64 " frames]",
                     fr->off & ~(uint64_t)SONDE_PYCUT_BEYOND);
        else
            snprintf(trunc, sizeof trunc, "[truncated %" PRIu64 " frames]", fr->off);
        pc = (sonde_pycode){trunc, "[sonde]", 0};
        sf[0] = (sonde_symframe){sonde__strdup(trunc), sonde__strdup("[sonde]"), 0};
        if (!sf[0].name || !sf[0].file) {
            sonde__free(sf[0].name);
            sonde__free(sf[0].file);
            return -1;
        }
    } else if (fr->file != UINT32_MAX && fr->file >= PY_FRAME) { /* Python: its code says all */
        if (sonde__pytab_code(s->pytab, fr->file - PY_FRAME, &pc))
            return -1;
        sf[0] = (sonde_symframe){sonde__strdup(pc.name), sonde__strdup(pc.file), pc.first_line};
        if (!sf[0].name || !sf[0].file) {
            sonde__free(sf[0].name);
            sonde__free(sf[0].file);
            return -1;
        }
    }
    sonde_symfile *jit = fr->file == UINT32_MAX ? perf_map_of(nm, pid) : NULL;
    if (jit && !sonde__sym_holds(jit, fr->off))
        jit = NULL;
    if (pc.name) {
        /* named above */
    } else if (jit) {
        if ((n = sonde__sym_at(jit, fr->off, sf, 1)) < 0)
            return -1;
    } else if (fr->file == UINT32_MAX) {
        sf[0] = (sonde_symframe){NULL, NULL, 0};
        if (sonde__asprintf(&sf[0].name, "0x%" PRIx64, fr->off) < 0)
            return -1;
    } else {
        sonde_symfile *f = file_of(s, nm, fr->file);
        if (!f || (n = sonde__sym_at(f, fr->off, sf, s->inline_frames ? 8 : 1)) < 0)
            return -1;
    }
    const char *obj = pc.name                 ? pc.file
                      : jit                   ? sonde__sym_base(jit)
                      : fr->file == UINT32_MAX ? "?"
                                               : sonde__sym_base(nm->files[fr->file]);
    int rc = 0;
    for (int j = n - 1; j >= 0 && !rc; j--) { /* outermost first */
        int id = function_id(nm, obj, &sf[j]);
        if (id < 0 || SONDE_GROW(nm->cids, nm->n_cids, nm->cap_cids))
            rc = -1;
        else
            nm->cids[nm->n_cids++] = (uint32_t)id;
    }
    for (int j = 0; j < n; j++) {
        sonde__free(sf[j].name);
        sonde__free(sf[j].file);
    }
    c = (int)nm->n_chains - 1;
    if (rc || SONDE_GROW(nm->cfirst, nm->n_chains, nm->cap_chains) ||
        SONDE_GROW(nm->src, nm->n_chains - 1, nm->cap_src) ||
        SONDE_GROW(nm->line, nm->n_chains - 1, nm->cap_line) ||
        strmap_put(&nm->frames, at, c))
        return -1;
    nm->cfirst[nm->n_chains++] = (uint32_t)nm->n_cids;
    nm->src[c] = NULL;
    nm->line[c] = 0;
    if (pc.name && fr->off) { /* the line it was at (the innermost frame's, in LINES) */
        nm->src[c] = pc.file;
        nm->line[c] = (unsigned)fr->off;
    } else if (fr->file != UINT32_MAX && !pc.name) {
        sonde__sym_line(nm->files[fr->file], fr->off, &nm->src[c], &nm->line[c]);
    }
    return c;
}

int sonde__stacks_finish(sonde_stacks *s, uint64_t *cpu_ns, uint64_t *cfi_unwound,
                         sonde_pyway *pyway)
{
    atomic_store(&s->stop, 1);
    if (s->stop_fd >= 0) { /* where the write fails, the reader sees stop within 10 ms */
        uint64_t one = 1;
        ssize_t w = write(s->stop_fd, &one, sizeof one);
        (void)w;
    }
    pthread_join(s->thread, NULL); /* it arms the timers of new threads: stopped first */
    if (s->timer) {
        sonde__cputimer_disarm(s->timer); /* no sample after this */
        drain_timer(s);
    }
    close_all(s);
    if (cpu_ns)
        *cpu_ns = s->cpu_ns;
    if (cfi_unwound)
        *cfi_unwound = s->cfi_unwound;
    sonde_pyway way = {!s->py_any ? 0 : s->bpf ? 2 : s->timer ? 3 : 1, 0, 0, 0};
    if (s->bpf) {
        sonde__pybpf_runs(s->bpf, &way.kernel_ns, &way.kernel_runs);
        if ((way.kernel_lost = sonde__pybpf_lost(s->bpf)))
            sonde__stk_warn(s, "%llu CPU samples have no Python frames: the kernel's ring for "
                            "them was full (docs/stacks.md, \"Python frames read in the "
                            "kernel\")", (unsigned long long)way.kernel_lost);
    }
    if (pyway)
        *pyway = way;
    flush_samples(s);
    struct timespec now; /* the threads still blocked: their periods end with the sampling */
    if (clock_gettime(CLOCK_MONOTONIC, &now) == 0)
        sonde__off_finish(s, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
    namer nm;
    memset(&nm, 0, sizeof nm);
    strmap_init(&nm.funcs);
    strmap_init(&nm.frames);
    sbuf_init(&nm.fb);
    sbuf_init(&nm.lb);
    sbuf_init(&nm.key);
    sbuf sb, xb, fl; /* STACKS, LINES, FRAMELINES */
    sbuf_init(&sb);
    sbuf_init(&xb);
    sbuf_init(&fl);
    nm.files = sonde__calloc(s->n_files + 1, sizeof *nm.files);
    if (!nm.files || SONDE_GROW(nm.cfirst, nm.n_chains, nm.cap_chains))
        s->oom = 1;
    else
        nm.cfirst[nm.n_chains++] = 0;
    uint32_t ids[MAX_FRAMES * 8];
    unsigned lines[MAX_FRAMES * 8]; /* each function's line: its chain's innermost has it */
    for (size_t i = 0; i < s->n_stacks && !s->oom; i++) {
        const sstack *st = &s->stacks[i];
        const sproc *p = &s->procs[st->proc];
        uint32_t n_ids = 0, known = 0; /* known: a line of some frame is */
        int c = -1, py = -1;
        for (uint32_t k = 0; st->used && k < st->n; k++) { /* unused: written without frames */
            if ((c = frame_chain(s, &nm, &st->f[k], p->pid)) < 0) {
                s->oom = 1;
                break;
            }
            if (st->f[k].file != UINT32_MAX && st->f[k].file >= PY_FRAME)
                py = c; /* the innermost Python frame so far */
            for (uint32_t q = nm.cfirst[c]; q < nm.cfirst[c + 1] && n_ids < MAX_FRAMES * 8; q++) {
                lines[n_ids] = q + 1 == nm.cfirst[c + 1] && nm.src[c] ? nm.line[c] : 0;
                known |= lines[n_ids];
                ids[n_ids++] = nm.cids[q];
            }
        }
        if (nm.fb.len > RECORD_BYTES) { /* the functions (and their places) before the stacks */
            emit(s, SONDE_R_FUNCS, &nm.fb, 0);
            emit(s, SONDE_R_FUNCLOC, &nm.lb, 0);
        }
        pb_varint(&sb, i);
        pb_varint(&sb, (uint64_t)p->pid);
        pb_lenstr(&sb, p->comm[0] ? p->comm : "?");
        pb_varint(&sb, n_ids);
        for (uint32_t k = 0; k < n_ids; k++)
            pb_varint(&sb, ids[k]);
        if (c >= 0 && !nm.src[c] && py >= 0) /* the interpreter's C code: its Python's line */
            c = py;
        if (c >= 0 && nm.src[c]) { /* the line the innermost frame was running */
            pb_varint(&xb, i);
            pb_lenstr(&xb, nm.src[c]);
            pb_varint(&xb, nm.line[c]);
        }
        if (known) { /* every frame's line (pprof's locations) */
            pb_varint(&fl, i);
            pb_varint(&fl, n_ids);
            for (uint32_t k = 0; k < n_ids; k++)
                pb_varint(&fl, lines[k]);
        }
        if (sb.len > RECORD_BYTES || xb.len > RECORD_BYTES || fl.len > RECORD_BYTES) {
            emit(s, SONDE_R_STACKS, &sb, 0);
            emit(s, SONDE_R_LINES, &xb, 0); /* after the stacks they speak of */
            emit(s, SONDE_R_FRAMELINES, &fl, 0);
        }
    }
    emit(s, SONDE_R_FUNCS, &nm.fb, 0); /* the functions before the last stacks that name them */
    emit(s, SONDE_R_FUNCLOC, &nm.lb, 0);
    emit(s, SONDE_R_STACKS, &sb, 0);
    emit(s, SONDE_R_LINES, &xb, 0);
    emit(s, SONDE_R_FRAMELINES, &fl, 0);
    sbuf_free(&sb);
    sbuf_free(&xb);
    sbuf_free(&fl);
    sbuf_free(&nm.fb);
    sbuf_free(&nm.lb);
    sbuf_free(&nm.key);
    strmap_free(&nm.funcs);
    strmap_free(&nm.frames);
    sonde__free(nm.cids);
    sonde__free(nm.cfirst);
    sonde__free(nm.src);
    sonde__free(nm.line);
    for (size_t i = 0; nm.files && i < s->n_files; i++)
        sonde__sym_close(nm.files[i]);
    sonde__free(nm.files);
    sonde__sym_close(nm.perf_map);
    int rc = s->oom ? SONDE_ENOMEM : s->write_failed ? SONDE_EIO : 0;
    free_all(s);
    return rc;
}

void sonde__stacks_forget(sonde_stacks *s)
{
    if (!s)
        return;
    /* Only the descriptors and the mappings: the parent's thread may have been growing a table
     * at the fork, so the child's copy of the memory is left as it is (one copy per fork). */
    sonde__cputimer_forget(s->timer);
    sonde__pybpf_forget(s->bpf);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    for (size_t i = 0; i < s->n_task_fds && s->task_fds; i++)
        close(s->task_fds[i]);
    sonde__off_close(s);
    for (int c = 0; c < s->n_cpus; c++) {
        munmap(s->rings[c], s->ring_bytes);
        close(s->fds[c]);
    }
}

static void free_all(sonde_stacks *s)
{
    close_all(s);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    sonde__cputimer_stop(s->timer);
    sonde__free(s->task_fds);
    for (size_t i = 0; i < s->n_files; i++)
        sonde__free(s->files[i]);
    sonde__free(s->files);
    for (size_t i = 0; i < s->n_procs; i++) {
        sonde__free(s->procs[i].maps);
        sonde__free(s->procs[i].umaps);
        sonde__py_detach(s->procs[i].py);
    }
    sonde__pytab_free(s->pytab);
    sonde__pybpf_close(s->bpf);
    sonde__unwind_free(s->unwinder);
    sonde__free(s->fp_verdict);
    sonde__free(s->procs);
    for (size_t i = 0; i < s->n_stacks; i++)
        sonde__free(s->stacks[i].f);
    sonde__free(s->stacks);
    sonde__free(s->table);
    sonde__free(s->pend);
    sonde__off_free(s);
    sonde__free(s->order);
    sbuf_free(&s->out);
    sonde__free(s);
}
