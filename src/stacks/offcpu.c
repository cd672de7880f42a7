/* offcpu.c - off-CPU periods (docs/stacks.md, "Off-CPU time"): beside the CPU samples
 * (stacks.c), the kernel's context-switch event on the same CPUs and tasks takes each thread's
 * user stack as it leaves its CPU and its switch records say when it is back; a period from a
 * voluntary switch-out to the next switch-in is the time the thread was blocked in the kernel,
 * written with its stack (and its Python frames, read while it is still blocked) in OFFCPU
 * records. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../format/format.h"
#include "../util/clock.h"
#include "../util/alloc.h"
#include "../util/pb.h"

void sonde__off_close(sonde_stacks *s)
{
    for (int c = 0; c < s->n_off; c++) {
        munmap(s->off_rings[c], s->off_ring_bytes);
        close(s->off_fds[c]);
    }
    s->n_off = 0;
}

/* The context-switch event's attributes o, beside the cpu-clock event's a: the same CPUs,
 * tasks and clock; off-CPU periods. */
void sonde__off_attr(const struct perf_event_attr *a, struct perf_event_attr *o)
{
    *o = *a;
    o->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    o->freq = 0;
    o->sample_period = 1; /* every switch */
    o->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    o->sample_regs_user = 0;
    o->sample_stack_user = 0;
    o->exclude_kernel = 0; /* a switch happens in the kernel; its stack is the user's alone */
    o->exclude_callchain_kernel = 1;
    o->mmap = o->mmap2 = o->comm = o->task = 0; /* the cpu-clock event's ring has those */
    o->context_switch = 1; /* PERF_RECORD_SWITCH: when each thread is back */
    o->wakeup_events = 0;  /* read at the cpu-clock event's wake-ups, never waking the reader */
}

/* The context-switch event o of task on every CPU with a ring, into rings of its own. Refused
 * (kernel.perf_event_paranoid 2 refuses an event that counts in the kernel, as switches do,
 * without CAP_PERFMON): none, and the samples go on without them. */
void sonde__off_start(sonde_stacks *s, struct perf_event_attr *o, pid_t task)
{
    s->off_ring_bytes = (size_t)(1 + RING_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    for (int k = 0; k < s->n_cpus; k++) {
        int fd = sonde__stk_open_event(o, task, s->cpus[k]);
        void *ring = fd < 0 ? MAP_FAILED
                            : mmap(NULL, s->off_ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                   fd, 0);
        if (ring == MAP_FAILED) {
            if (fd >= 0)
                close(fd);
            sonde__off_close(s);
            return;
        }
        s->off_fds[k] = fd;
        s->off_rings[k] = ring;
        s->n_off = k + 1;
    }
    s->off_on = s->n_off > 0;
    /* the program that reads the Python frames at each CPU sample reads them at each switch
     * too: a period then has the frames of the moment the thread blocked, however short it is
     * (read from outside, only a period still open at the next drain had them: issue 61 #17,
     * 26 of 120 sleeps of 2 ms) */
    s->off_bpf = s->off_on && s->bpf;
    for (int k = 0; k < s->n_off && s->off_bpf; k++)
        if (sonde__pybpf_attach(s->bpf, s->off_fds[k]) != 0)
            s->off_bpf = 0;
}

/* ---- off-CPU periods ---- */

/* Whether thread tid of process pid is one of sonde's own (the sampler's reading thread, or a
 * name beginning "sonde-": the writer, the samplers), asked of /proc at a thread's first three
 * periods (a thread names itself just after it starts: its first switch may come before). */
static int sonde_thread(sonde_stacks *s, uint32_t pid, uint32_t tid)
{
    if (tid == s->reader_tid)
        return 1;
    stid *t = NULL;
    for (size_t i = 0; i < s->n_tids && !t; i++)
        if (s->tids[i].tid == tid)
            t = &s->tids[i];
    if (t && (t->sonde || t->checks >= 3))
        return t->sonde;
    if (!t) {
        if (SONDE_GROW(s->tids, s->n_tids, s->cap_tids)) {
            s->oom = 1;
            return 0;
        }
        t = &s->tids[s->n_tids++];
        *t = (stid){tid, 0, 0};
    }
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/%u/task/%u/comm", pid, tid);
    FILE *f = fopen(path, "re");
    if (f) {
        if (!fgets(name, sizeof name, f))
            name[0] = 0;
        fclose(f);
    }
    t->checks++;
    t->sonde = !strncmp(name, "sonde-", 6);
    return t->sonde;
}

/* The periods ended so far as an OFFCPU record: per period varint tid, varint stack id,
 * varint zigzag(start ns - the previous period's), varint ns. */
static void off_flush(sonde_stacks *s)
{
    sbuf_reset(&s->out);
    uint64_t prev = 0;
    for (size_t i = 0; i < s->n_off_pend; i++) {
        const soffdone *d = &s->off_pend[i];
        pb_varint(&s->out, d->tid);
        pb_varint(&s->out, d->stack);
        pb_varint(&s->out, zigzag_enc((int64_t)(d->t - prev)));
        pb_varint(&s->out, d->ns);
        prev = d->t;
    }
    if (s->out.oom)
        s->oom = 1;
    else if (s->write(s->ctx, SONDE_R_OFFCPU, (const uint8_t *)s->out.data, s->out.len))
        s->write_failed = 1;
    s->n_off_pend = 0;
}

/* The open period of thread tid: its index in s->off, or SIZE_MAX. */
static size_t off_find(const sonde_stacks *s, uint32_t tid)
{
    for (size_t i = 0; i < s->n_off_open; i++)
        if (s->off[i].tid == tid)
            return i;
    return SIZE_MAX;
}

/* Open period i ends at t (the thread is back on a CPU), kept to be written (keep 0: dropped,
 * the thread was preempted, not blocked). */
static void off_end(sonde_stacks *s, size_t i, uint64_t t, int keep)
{
    soff o = s->off[i];
    s->off[i] = s->off[--s->n_off_open];
    if (!keep || t <= o.t)
        return;
    if (SONDE_GROW(s->off_pend, s->n_off_pend, s->cap_off_pend)) {
        s->oom = 1;
        return;
    }
    s->stacks[o.stack].used = 1;
    s->off_pend[s->n_off_pend++] = (soffdone){o.tid, o.stack, o.t, t - o.t};
    if (s->n_off_pend >= FLUSH_SAMPLES)
        off_flush(s);
}

/* A record of a context-switch ring: a sample (a thread leaving its CPU, with its user stack)
 * opens a period; the switch records end it (the thread back on a CPU) or drop it (a
 * preemption: the thread could still run, it waited for a CPU, not in the kernel). */
void sonde__off_record(sonde_stacks *s, const struct perf_event_header *h, const uint8_t *b,
                       const uint8_t *end)
{
    if (h->type == PERF_RECORD_LOST && end - b >= 16) { /* id, lost: the ring was full */
        uint64_t lost;
        memcpy(&lost, b + 8, 8);
        s->off_lost += lost;
        return;
    }
    if (h->type == PERF_RECORD_SWITCH && end - b >= 16) { /* sample_id_all: pid, tid, time */
        uint32_t tid;
        uint64_t t;
        memcpy(&tid, b + 4, 4);
        memcpy(&t, b + 8, 8);
        size_t i = off_find(s, tid);
        if (i == SIZE_MAX)
            return;
        if (!(h->misc & PERF_RECORD_MISC_SWITCH_OUT))
            off_end(s, i, t, 1);
        else if (h->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
            off_end(s, i, t, 0);
        return;
    }
    ssample_rec x;
    if (h->type != PERF_RECORD_SAMPLE || !s->timed || sonde__stk_parse_sample(s, b, end, &x) ||
        sonde_thread(s, x.pid, x.tid))
        return;
    uint32_t tid = x.tid;
    uint64_t t = x.t;
    sproc *p = x.p;
    uint32_t id = sonde__stk_stack_id(s, (uint32_t)(p - s->procs), x.fr, x.n);
    if (id == UINT32_MAX) {
        s->oom = 1;
        return;
    }
    size_t i = off_find(s, tid);
    if (i != SIZE_MAX) /* a switch-in lost: the period before ends where this one begins */
        off_end(s, i, t, 1);
    uint32_t with_py = s->off_bpf ? sonde__stk_kernel_python(s, p, tid, t, id) : id;
    if (with_py == UINT32_MAX) {
        s->oom = 1;
        with_py = id;
    }
    if (SONDE_GROW(s->off, s->n_off_open, s->cap_off_open)) {
        s->oom = 1;
        return;
    }
    s->off[s->n_off_open++] = (soff){.tid = tid, .proc = (uint32_t)(p - s->procs),
                                     .stack = with_py, .t = t, .py_read = with_py != id};
}

/* How long a blocked thread's Python frames are looked for, at each drain, before it is taken
 * for a thread that runs no Python: five of the frame reader's looks for a thread it has not
 * found (pyframes.c's RESCAN_NS, 50 ms). Counted in drains (20) it was 20 ms where the drains
 * come with every sample (Python frames read from outside: a wake-up a sample), so a thread that
 * blocked as it began, before the reader's look had found its state, kept none (e2e pyframes
 * under ASan, a CI run: the waiter's and the locker's waits without their Python frames). */
#define OFF_PY_TRY_NS 250000000ull

/* The Python frames of the threads off CPU now (still blocked: their stacks stand still), read
 * once a period, after a drain. */
void sonde__off_python(sonde_stacks *s)
{
    uint64_t now = 0;
    for (size_t i = 0; i < s->n_off_open; i++) {
        soff *o = &s->off[i];
        if (o->py_read || o->proc >= s->n_procs)
            continue;
        sproc *p = &s->procs[o->proc];
        uint32_t id = sonde__stk_with_python(s, p, o->tid, o->stack);
        /* none yet: the interpreter or a new thread's state may be found at a later drain */
        if (!now)
            now = sonde__mono_ns();
        if (!o->py_since)
            o->py_since = now;
        o->py_read = id != o->stack || now - o->py_since >= OFF_PY_TRY_NS;
        if (id != UINT32_MAX)
            o->stack = id;
    }
}

void sonde__off_finish(sonde_stacks *s, uint64_t t)
{
    if (!s->off_on)
        return;
    while (s->n_off_open)
        off_end(s, s->n_off_open - 1, t, 1);
    off_flush(s);
    if (s->off_lost)
        sonde__stk_warn(s, "%llu context-switch record(s) were lost (their ring was full): the "
                           "off-CPU time is short of the threads' true time blocked",
                        (unsigned long long)s->off_lost);
}

void sonde__off_free(sonde_stacks *s)
{
    sonde__free(s->off);
    sonde__free(s->off_pend);
    sonde__free(s->tids);
}
