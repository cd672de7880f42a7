/* trace.c - the Chrome Trace Event format (JSON array form) that Perfetto and chrome://tracing
 * open: process and thread names, sections as complete ("X") events with their metadata as
 * args, instants, counters, steps and sessions. Written without printf on the per-event path.
 * The TensorBoard flavour is the same events in the object form PyTorch writes, with sections
 * as user annotations and each step as a ProfilerStep#N span. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "../util/alloc.h"

#define OFF_NAMED_MAX 64 /* processes the off-CPU slices name (as sample_processes: 64) */

#define STEPS_TID (1ull << 31) /* the steps' own track: no kernel tid reaches it */

typedef struct tctx {
    sbuf b;
    sx_sink sink;
    void *ctx;
    int err;
    int first;
    /* what the walk's callbacks write with (sx_trace_part) */
    const sm_model *m;
    char **esc;            /* each site's name, escaped */
    char **ids;            /* each thread's ",\"pid\":P,\"tid\":T" */
    const char *x_head;    /* a section's event up to its name */
    size_t x_len;
    int stack;             /* with_stack: where each section is in the source */
    int64_t sh;            /* added to every time */
    int pid;               /* the run's process in the trace */
    int tensorboard;       /* TensorBoard's flavour (sx_trace_opts.tensorboard) */
    sbuf cname;            /* the counter being written: its name, escaped */
    uint32_t named_pids[OFF_NAMED_MAX]; /* processes the off-CPU tracks named */
    size_t n_named;
} tctx;

static void flush(tctx *t, int force)
{
    if (!t->err && sx_drain(&t->b, t->sink, t->ctx, force ? 0 : SX_PIECE) != 0)
        t->err = -1;
}

static void sep(tctx *t)
{
    if (!t->first)
        sbuf_add(&t->b, ",\n", 2);
    t->first = 0;
}

static void pid_tid(tctx *t, int pid, uint64_t tid)
{
    sbuf_add(&t->b, ",\"pid\":", 7);
    sbuf_u64(&t->b, (uint64_t)pid);
    sbuf_add(&t->b, ",\"tid\":", 7);
    sbuf_u64(&t->b, tid);
}

static void name_meta(tctx *t, const char *what, int pid, uint64_t tid, const char *name)
{
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"M\",\"name\":\"");
    sbuf_puts(&t->b, what);
    sbuf_putc(&t->b, '"');
    pid_tid(t, pid, tid);
    sbuf_puts(&t->b, ",\"args\":{\"name\":");
    sbuf_json_str(&t->b, name);
    sbuf_puts(&t->b, "}}");
}

/* The run's metadata in its process's labels: "model=llama, batch=8" */
static void label_meta(const char *key, const char *value, void *ctx)
{
    sbuf_printf(ctx, ", %s=%s", key, value);
}

/* The folded runs as slices: "NAME x N (T ms)", or "N sections (T ms)" when names differ. */
static void fold_events(tctx *t, const sm_model *m, const sm_fold_run *runs, size_t n_runs,
                        char **ids, int64_t sh, int64_t min_ns)
{
    char why[128]; /* the same for every run */
    snprintf(why, sizeof why, ",\"why\":\"%s: sections shorter than %.3f us are folded\"}}",
             m->sections_folded ? "report_max_sections" : "trace_max_events", (double)min_ns / 1e3);
    sbuf label;
    sbuf_init(&label);
    for (size_t i = 0; i < n_runs && !t->err; i++) {
        const sm_fold_run *r = &runs[i];
        sbuf_reset(&label);
        if (sm_fold_label(m, r, &label)) {
            t->err = -1;
            break;
        }
        sep(t);
        sbuf_puts(&t->b, "{\"ph\":\"X\",\"cat\":\"folded\",\"name\":");
        sbuf_json_str(&t->b, label.data);
        sbuf_add(&t->b, ",\"ts\":", 6);
        sbuf_us3(&t->b, r->start_ns + sh);
        sbuf_add(&t->b, ",\"dur\":", 7);
        sbuf_us3(&t->b, r->end_ns - r->start_ns);
        sbuf_puts(&t->b, ids[r->thread]);
        sbuf_puts(&t->b, ",\"args\":{\"sections\":");
        sbuf_u64(&t->b, r->n);
        sbuf_puts(&t->b, ",\"total_ms\":");
        sbuf_decimal(&t->b, r->sum_ns, 6);
        sbuf_puts(&t->b, why);
        flush(t, 0);
    }
    sbuf_free(&label);
}

/* A GPU stream's track: a thread of the run's process (so ranks stay apart in a merged trace)
 * with a tid no kernel thread id reaches. */
static uint64_t gpu_tid(const sm_gpu *g)
{
    return (1ull << 30) + ((uint64_t)(g->device & 0xff) << 20) + (g->stream & 0xfffff);
}

/* Where a CUDA record goes: the run's process and its stream's track; in the TensorBoard
 * flavour PyTorch's layout instead: a process per device (pid = the device number), a thread
 * per stream. */
static void gpu_place(const tctx *t, const sm_gpu *g, int *pid, uint64_t *tid)
{
    *pid = t->tensorboard ? (int)g->device : t->pid;
    *tid = t->tensorboard ? g->stream : gpu_tid(g);
}

/* CUDA activity (the walk's): a device and stream's track named at its first record (and its
 * device's process, for TensorBoard); kernels, copies and sets as complete events, and a flow
 * from the launching section's thread to each one whose launch was seen. */
static int json_gpu_track(void *ctx, const sm_gpu *g, int new_device)
{
    tctx *t = ctx;
    int pid;
    uint64_t tid;
    gpu_place(t, g, &pid, &tid);
    char label[64];
    if (t->tensorboard) {
        if (new_device) {
            snprintf(label, sizeof label, "GPU %u", g->device);
            name_meta(t, "process_name", pid, 0, label);
        }
        snprintf(label, sizeof label, "stream %u", g->stream);
    } else {
        snprintf(label, sizeof label, "GPU %u stream %u", g->device, g->stream);
    }
    name_meta(t, "thread_name", pid, tid, label);
    return t->err;
}

static int json_gpu(void *ctx, const sm_gpu *g)
{
    tctx *t = ctx;
    const sm_model *m = t->m;
    int pid;
    uint64_t tid;
    gpu_place(t, g, &pid, &tid);
    sep(t);
    static const char *const cats[] = {"", "kernel", "gpu_memcpy", "gpu_memset"};
    sbuf_printf(&t->b, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", cats[g->kind & 3]);
    if (g->kind == SM_GPU_KERNEL) {
        sbuf_json_str(&t->b, g->name ? g->name : "?");
    } else if (g->kind == SM_GPU_MEMCPY) {
        sbuf_printf(&t->b, "\"Memcpy %s\"", sm_gpu_copy_kind(g->copy_kind));
    } else {
        sbuf_puts(&t->b, "\"Memset\"");
    }
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, g->start_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, g->end_ns - g->start_ns);
    pid_tid(t, pid, tid);
    sbuf_printf(&t->b, ",\"args\":{\"device\":%u,\"stream\":%u,\"correlation\":%u",
                g->device, g->stream, g->correlation);
    if (g->kind == SM_GPU_KERNEL)
        sbuf_printf(&t->b, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]", g->grid[0], g->grid[1],
                    g->grid[2], g->block[0], g->block[1], g->block[2]);
    else
        sbuf_printf(&t->b, ",\"bytes\":%llu", (unsigned long long)g->bytes);
    if (g->span >= 0) {
        sbuf_puts(&t->b, ",\"launched_by\":");
        const char *e = t->esc[m->spans[g->span].site];
        sbuf_puts(&t->b, e ? e : "\"?\"");
    }
    sbuf_puts(&t->b, "}}");
    if (g->launch_thread >= 0 && g->launch_ns >= 0) { /* the launch -> the GPU work */
        sep(t);
        sbuf_printf(&t->b, "{\"ph\":\"s\",\"cat\":\"cuda_launch\",\"name\":\"launch\","
                           "\"id\":%u,\"ts\":", g->correlation);
        sbuf_us3(&t->b, g->launch_ns + t->sh);
        sbuf_puts(&t->b, t->ids[g->launch_thread]);
        sbuf_putc(&t->b, '}');
        sep(t);
        sbuf_printf(&t->b, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"cuda_launch\","
                           "\"name\":\"launch\",\"id\":%u,\"ts\":", g->correlation);
        sbuf_us3(&t->b, g->start_ns + t->sh);
        pid_tid(t, pid, tid);
        sbuf_putc(&t->b, '}');
    }
    flush(t, 0);
    return t->err;
}

/* An off-CPU track (the walk's off_track): a thread of its own beside thread o->tid's (no
 * kernel tid reaches it: 2^29 + tid), named, its process named too when the walk says no one
 * names it (at most OFF_NAMED_MAX: sample_processes names them no more). */
static int off_track(void *ctx, const sm_offperiod *o, int pid, int name_process)
{
    tctx *t = ctx;
    if (name_process && t->n_named < OFF_NAMED_MAX) {
        const char *line = t->m->profile.off[o->off].stack; /* "process;outermost;..." */
        char comm[64];
        snprintf(comm, sizeof comm, "%.*s", (int)strcspn(line, ";"), line);
        name_meta(t, "process_name", pid, 0, comm);
        t->named_pids[t->n_named++] = (uint32_t)pid;
    }
    char label[64];
    snprintf(label, sizeof label, "thread %u off-CPU", o->tid);
    name_meta(t, "thread_name", pid, (1ull << 29) + o->tid, label);
    return t->err;
}

/* An off-CPU period (the walk's off_period) as a slice, "blocked: WAITS_IN", on its track, with
 * the Python function and the stack as args. */
static int off_period(void *ctx, const sm_offperiod *o, int pid)
{
    tctx *t = ctx;
    const sm_offstack *x = &t->m->profile.off[o->off];
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"X\",\"cat\":\"off_cpu\",\"name\":");
    char name[300];
    snprintf(name, sizeof name, "blocked: %s", x->waits_in);
    sbuf_json_str(&t->b, name);
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, o->t_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, o->ns);
    pid_tid(t, pid, (1ull << 29) + o->tid);
    sbuf_puts(&t->b, ",\"args\":{");
    if (x->python) {
        sbuf_puts(&t->b, "\"python\":");
        sbuf_json_str(&t->b, x->python);
        sbuf_putc(&t->b, ',');
    }
    sbuf_puts(&t->b, "\"stack\":");
    sbuf_json_str(&t->b, x->stack);
    sbuf_puts(&t->b, "}}");
    flush(t, 0);
    return t->err;
}

static void sample_processes(tctx *t, const sm_model *m, int pid, const uint32_t *named_pids,
                             size_t n_named)
{
    const sm_profile *pr = &m->profile;
    uint32_t seen[64 + OFF_NAMED_MAX];
    size_t n = n_named; /* those the off-CPU slices named already */
    memcpy(seen, named_pids, n_named * sizeof *seen);
    for (size_t i = 0; i < pr->n_timed && n < 64 + n_named && !t->err; i++) {
        const sm_psample *s = &pr->timed[i];
        if (!s->pid || (int)s->pid == pid || s->stack >= pr->n_stacks)
            continue;
        size_t k = 0;
        while (k < n && seen[k] != s->pid)
            k++;
        if (k < n)
            continue;
        seen[n++] = s->pid;
        int named = 0; /* a process that recorded too: its threads' events named it */
        for (size_t th = 0; th < m->n_threads && !named; th++)
            named = m->threads[th].pid == (int)s->pid;
        if (named)
            continue;
        const char *line = pr->stacks[s->stack]; /* "process;outermost;...;innermost" */
        size_t len = strcspn(line, ";");
        char comm[64];
        snprintf(comm, sizeof comm, "%.*s", (int)(len < sizeof comm ? len : sizeof comm - 1), line);
        name_meta(t, "process_name", (int)s->pid, 0, comm);
    }
}

/* Closes the events and writes the CPU samples: "stackFrames" (a node per distinct caller
 * chain: name, category the object, parent) and "samples" (ts, tid, pid, the leaf node, weight)
 * of [t0, t1), at most trace_max_events of them, evenly. */
static void cpu_samples(tctx *t, const sm_model *m, int64_t t0, int64_t t1, int64_t sh, int pid)
{
    const sm_profile *pr = &m->profile;
    sbuf_puts(&t->b, "\n],\"stackFrames\":{");
    for (size_t i = 0; i < pr->n_nodes && !t->err; i++) {
        const sm_func *f = &pr->funcs[pr->nodes[i].func];
        sbuf_printf(&t->b, "%s\"%zu\":{\"name\":", i ? "," : "", i + 1);
        sbuf_json_str(&t->b, f->name);
        sbuf_puts(&t->b, ",\"category\":");
        sbuf_json_str(&t->b, f->object);
        if (pr->nodes[i].parent != UINT32_MAX)
            sbuf_printf(&t->b, ",\"parent\":\"%u\"", pr->nodes[i].parent + 1);
        sbuf_putc(&t->b, '}');
        flush(t, 0);
    }
    uint64_t cap = sm_trace_max_events(m);
    size_t in = 0;
    for (size_t i = 0; i < pr->n_timed; i++)
        in += pr->timed[i].t_ns >= t0 && pr->timed[i].t_ns < t1;
    uint64_t every = cap && in > cap ? (in + cap - 1) / cap : 1;
    sbuf_puts(&t->b, "},\"samples\":[");
    int first = 1;
    size_t k = 0;
    for (size_t i = 0; i < pr->n_timed && !t->err; i++) {
        const sm_psample *s = &pr->timed[i];
        if (s->t_ns < t0 || s->t_ns >= t1 || k++ % every)
            continue;
        sbuf_puts(&t->b, first ? "\n{\"ts\":" : ",\n{\"ts\":");
        first = 0;
        sbuf_us3(&t->b, s->t_ns + sh);
        sbuf_printf(&t->b, ",\"pid\":%d,\"tid\":%u,\"cpu\":0,\"name\":\"cpu-clock\",\"weight\":%llu",
                    s->pid ? (int)s->pid : pid, s->tid, (unsigned long long)every);
        if (s->stack < pr->n_stacks && pr->leaf[s->stack] != UINT32_MAX)
            sbuf_printf(&t->b, ",\"sf\":\"%u\"", pr->leaf[s->stack] + 1);
        sbuf_putc(&t->b, '}');
        flush(t, 0);
    }
    sbuf_puts(&t->b, "\n]}\n");
}

int sx_trace(const sm_model *m, sx_sink sink, void *ctx)
{
    return sx_trace_range(m, INT64_MIN, INT64_MAX, sink, ctx);
}

int sx_trace_range(const sm_model *m, int64_t t0, int64_t t1, sx_sink sink, void *ctx)
{
    sx_trace_opts o = {t0, t1, 0, 0, NULL, -1, 1, 1, 0, 0, 1};
    return sx_trace_part(m, &o, sink, ctx);
}

/* sx_trace_part's parts. The process's metadata: its name, sort index and labels, the steps'
 * track, each thread (and the processes of threads of other processes). */
static void trace_meta(tctx *t, const sm_model *m, const sx_trace_opts *o, int pid,
                       uint64_t steps_tid)
{
    name_meta(t, "process_name", pid, 0, o->process_name ? o->process_name : m->name);
    if (o->sort_index >= 0) {
        sep(t);
        sbuf_printf(&t->b, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"sort_index\":%d}}", pid, o->sort_index);
    }
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"M\",\"name\":\"process_labels\"");
    pid_tid(t, pid, 0);
    sbuf_puts(&t->b, ",\"args\":{\"labels\":");
    {
        sbuf l;
        sbuf_init(&l);
        sbuf_printf(&l, "sonde %s on %s", m->sonde_version ? m->sonde_version : "?",
                    m->host ? m->host : "?");
        sm_each_run_meta(m, label_meta, &l);
        sbuf_json_str(&t->b, l.data ? l.data : "sonde");
        sbuf_free(&l);
    }
    sbuf_puts(&t->b, "}}");
    if (m->n_steps)
        name_meta(t, "thread_name", pid, steps_tid, "steps");
    /* Threads of other processes (a program run under `sonde run`): named processes of their
     * own. */
    for (size_t i = 0; i < m->n_threads; i++) {
        int tp = o->pid <= 0 && m->threads[i].pid > 0 ? m->threads[i].pid : pid;
        size_t j;
        for (j = 0; j < i && (o->pid <= 0 && m->threads[j].pid > 0 ? m->threads[j].pid : pid) != tp;
             j++) {
        }
        if (tp != pid && j == i) {
            char label[160];
            snprintf(label, sizeof label, "%s (pid %d)", m->threads[i].name, tp);
            name_meta(t, "process_name", tp, 0, label);
        }
        name_meta(t, "thread_name", tp, sm_thread_tid(m, i), m->threads[i].name);
    }
}

/* Instant events in [t0, t1), shifted by sh. */
/* An instant as a thread-scoped instant event with its payload as args (the walk's, in time
 * order). */
static int json_instant(void *ctx, const sm_instant *e)
{
    tctx *t = ctx;
    const sm_model *m = t->m;
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"event\",\"name\":");
    sbuf_puts(&t->b, e->name < m->n_sites && t->esc[e->name] ? t->esc[e->name] : "\"?\"");
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, e->t_ns + t->sh);
    sbuf_puts(&t->b, t->ids[e->thread]);
    if (e->args >= 0) { /* its payload (sonde_event_args) */
        sbuf_puts(&t->b, ",\"args\":{");
        sm_each_meta(m, e->args, sx_json_kv, &t->b);
        sbuf_putc(&t->b, '}');
    }
    sbuf_putc(&t->b, '}');
    flush(t, 0);
    return t->err;
}

/* A counter's name, escaped, for its points (the walk's: at most max_data_points of each,
 * every bucket's least and greatest, in [t0, t1)). */
static int json_counter(void *ctx, size_t c, int64_t first_ns)
{
    tctx *t = ctx;
    (void)first_ns;
    sbuf_reset(&t->cname);
    sbuf_json_str(&t->cname, t->m->counters[c].name);
    if (t->cname.oom)
        t->err = -1;
    return t->err;
}

static int json_point(void *ctx, const sm_counter *k, size_t i)
{
    tctx *t = ctx;
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"C\",\"name\":");
    sbuf_puts(&t->b, t->cname.data);
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, k->t_ns[i] + t->sh);
    pid_tid(t, t->pid, 0);
    sbuf_puts(&t->b, ",\"args\":{\"value\":");
    sbuf_json_num(&t->b, k->v[i]);
    sbuf_puts(&t->b, "}}");
    flush(t, 0);
    return t->err;
}

/* A step (the walk's: those that end in [t0, t1)) as a span on the steps' track and a "step"
 * counter; for TensorBoard also as PyTorch's ProfilerStep#N, the active steps alone (a window's
 * trace holds the steps it recorded, as PyTorch's does). */
/* The head of step st's complete event: category and name (`name` then its number) from its
 * start to its end; its thread is the caller's to add. */
static void step_span(tctx *t, const sm_step *st, const char *cat_name)
{
    sep(t);
    sbuf_puts(&t->b, cat_name);
    sbuf_u64(&t->b, st->number);
    sbuf_add(&t->b, "\",\"ts\":", 7);
    sbuf_us3(&t->b, st->start_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, st->t_ns - st->start_ns);
}

static int json_step(void *ctx, const sm_step *st, int first)
{
    tctx *t = ctx;
    (void)first;
    if (t->tensorboard && !st->active)
        return 0;
    /* the step from its start to its end, on the steps' track */
    step_span(t, st, "{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"step ");
    pid_tid(t, t->pid, STEPS_TID);
    sbuf_puts(&t->b, ",\"args\":{\"step\":");
    sbuf_u64(&t->b, st->number);
    sbuf_puts(&t->b, st->begun ? ",\"begun\":true}}" : "}}");
    /* and a "step" counter track: the step number over time */
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"C\",\"name\":\"step\",\"ts\":");
    sbuf_us3(&t->b, st->t_ns + t->sh);
    pid_tid(t, t->pid, 0);
    sbuf_puts(&t->b, ",\"args\":{\"value\":");
    sbuf_u64(&t->b, st->number);
    sbuf_puts(&t->b, "}}");
    if (t->tensorboard) { /* the step as a span, named as PyTorch names its steps */
        step_span(t, st, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ProfilerStep#");
        sbuf_puts(&t->b, t->ids[st->thread]);
        sbuf_putc(&t->b, '}');
    }
    flush(t, 0);
    return t->err;
}

static void backend_of(const char *key, const char *value, void *ctx)
{
    if (!strcmp(key, "distributed.backend"))
        *(const char **)ctx = value;
}

/* The end of TensorBoard's trace: in a distributed job (a rank), PyTorch's distributedInfo, which
 * TensorBoard's distributed view reads: the backend (the run's metadata "distributed.backend",
 * which the Python package records from torch.distributed; "unknown" without), rank and world
 * size. */
static void tensorboard_close(tctx *t, const sm_model *m)
{
    sbuf_puts(&t->b, "\n]");
    if (m->rank >= 0) {
        const char *backend = "unknown";
        sm_each_run_meta(m, backend_of, (void *)&backend);
        sbuf_puts(&t->b, ",\"distributedInfo\":{\"backend\":");
        sbuf_json_str(&t->b, backend);
        sbuf_puts(&t->b, ",\"rank\":");
        sbuf_u64(&t->b, (uint64_t)m->rank);
        sbuf_puts(&t->b, ",\"world_size\":");
        sbuf_u64(&t->b, (uint64_t)(m->world_size > 0 ? m->world_size : 1));
        sbuf_puts(&t->b, "}");
    }
    sbuf_puts(&t->b, "}\n");
}

/* TensorBoard's trace of a run with no step: one ProfilerStep#0 over the run, as PyTorch's
 * plugin wants a step (without one it takes the extent of operators, which sonde's sections
 * are not). */
static void tensorboard_step(tctx *t, const sm_model *m)
{
    if (!t->tensorboard || m->n_steps || !m->n_threads || t->err)
        return;
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ProfilerStep#0\",\"ts\":");
    sbuf_us3(&t->b, t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, m->duration_ns);
    sbuf_puts(&t->b, t->ids[0]);
    sbuf_putc(&t->b, '}');
}

/* A session (the walk's: those overlapping [t0, t1]) on the thread that began it. */
static int json_session(void *ctx, const sm_session *s, int first)
{
    tctx *t = ctx;
    const sm_model *m = t->m;
    (void)first;
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"X\",\"cat\":\"session\",\"name\":");
    sbuf_puts(&t->b, s->name < m->n_sites && t->esc[s->name] ? t->esc[s->name] : "\"?\"");
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, s->start_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, s->end_ns - s->start_ns);
    sbuf_puts(&t->b, t->ids[s->thread < m->n_threads ? s->thread : 0]);
    sbuf_putc(&t->b, '}');
    return t->err;
}

/* A kept section as a complete event, with its metadata, units and FLOPs as args (the walk's
 * begin). */
static int json_section(void *ctx, const sm_span *s)
{
    tctx *t = ctx;
    const sm_model *m = t->m;
    const char *name = t->esc[s->site] ? t->esc[s->site] : "\"?\"";
    const sm_site *site = &m->sites[s->site];
    int where = t->stack && site->file;
    sep(t);
    sbuf_add(&t->b, t->x_head, t->x_len);
    sbuf_puts(&t->b, name);
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, s->start_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, s->end_ns - s->start_ns);
    sbuf_puts(&t->b, t->ids[s->thread]);
    const sm_span_x *x = sm_span_extra(m, s);
    if (x->meta >= 0 || x->units > 0 || x->flops > 0 || (s->flags & SM_SPAN_END_FLAGS) || where) {
        sbuf_puts(&t->b, ",\"args\":{");
        int first = 1;
        if (where) { /* with_stack: where the section is in the source */
            sbuf_puts(&t->b, "\"file\":");
            sbuf_json_str(&t->b, site->file);
            sbuf_printf(&t->b, ",\"line\":%d,\"function\":", site->line);
            sbuf_json_str(&t->b, site->func);
            first = 0;
        }
        if (x->meta >= 0) { /* each key once, at its last value */
            sm_each_meta(m, x->meta, sx_json_kv, &t->b);
            first = t->b.len && t->b.data[t->b.len - 1] == '{';
        }
        if (x->units > 0) {
            sbuf_puts(&t->b, first ? "\"units\":" : ",\"units\":");
            sbuf_json_num(&t->b, x->units);
            first = 0;
        }
        if (x->flops > 0) {
            sbuf_puts(&t->b, first ? "\"flops\":" : ",\"flops\":");
            sbuf_json_num(&t->b, x->flops);
            first = 0;
        }
        if (s->flags & SM_SPAN_END_FLAGS) {
            sbuf_puts(&t->b, first ? "" : ",");
            sbuf_puts(&t->b, s->flags & SM_SPAN_END_LOST       ? "\"sonde\":\"end_lost\""
                             : s->flags & SM_SPAN_UNTERMINATED ? "\"sonde\":\"unterminated\""
                                                               : "\"sonde\":\"closed_by_outer\"");
        }
        sbuf_putc(&t->b, '}');
    }
    sbuf_putc(&t->b, '}');
    flush(t, 0);
    return t->err;
}

/* An operator of another tracer as a complete event in PyTorch's cpu_op category (the walk's
 * op_begin). */
static int json_op(void *ctx, const sm_op *op)
{
    tctx *t = ctx;
    const sm_model *m = t->m;
    sep(t);
    sbuf_puts(&t->b, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":");
    sbuf_json_str(&t->b, m->op_names[op->name]);
    sbuf_add(&t->b, ",\"ts\":", 6);
    sbuf_us3(&t->b, op->start_ns + t->sh);
    sbuf_add(&t->b, ",\"dur\":", 7);
    sbuf_us3(&t->b, op->end_ns - op->start_ns);
    sbuf_puts(&t->b, t->ids[op->thread]);
    sbuf_puts(&t->b, ",\"args\":{\"correlation\":");
    sbuf_u64(&t->b, op->id);
    if (op->shapes >= 0) {
        sbuf_puts(&t->b, ",\"input_shapes\":");
        sbuf_json_str(&t->b, m->op_names[op->shapes]);
    }
    if (op->flops > 0) {
        sbuf_puts(&t->b, ",\"flops\":");
        sbuf_json_num(&t->b, op->flops);
    }
    sbuf_puts(&t->b, "}}");
    flush(t, 0);
    return t->err;
}

int sx_trace_part(const sm_model *m, const sx_trace_opts *o, sx_sink sink, void *ctx)
{
    int64_t t0 = o->t0, t1 = o->t1, sh = o->shift_ns;
    tctx t;
    memset(&t, 0, sizeof t);
    sbuf_init(&t.b);
    t.sink = sink;
    t.ctx = ctx;
    t.first = !o->continued;
    int pid = o->pid > 0 ? o->pid : m->pid > 0 ? m->pid : 1;

    /* Escaped names, once per site. */
    char **esc = sonde__calloc(m->n_sites ? m->n_sites : 1, sizeof *esc);
    if (!esc)
        return -1;
    for (size_t i = 0; i < m->n_sites; i++) {
        sbuf e;
        sbuf_init(&e);
        sbuf_json_str(&e, m->sites[i].name);
        if (e.oom) {
            t.err = -1;
            break;
        }
        esc[i] = e.data;
    }

    int with_samples = o->samples && o->open && o->close && !o->tensorboard &&
                       m->profile.n_timed;
    if (o->open)
        sbuf_puts(&t.b, o->tensorboard ? "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\","
                                         "\"traceEvents\":[\n"
                        : with_samples ? "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
                                       : "[\n");
    trace_meta(&t, m, o, pid, STEPS_TID);

    /* ",\"pid\":P,\"tid\":T" once per thread: most events only copy it. */
    char **ids = sonde__calloc(m->n_threads ? m->n_threads : 1, sizeof *ids);
    if (!ids)
        t.err = -1;
    for (size_t i = 0; i < m->n_threads && !t.err; i++) {
        sbuf e;
        sbuf_init(&e);
        sbuf_puts(&e, ",\"pid\":");
        sbuf_u64(&e, (uint64_t)(o->pid <= 0 && m->threads[i].pid > 0 ? m->threads[i].pid : pid));
        sbuf_puts(&e, ",\"tid\":");
        sbuf_u64(&e, sm_thread_tid(m, i));
        if (e.oom)
            t.err = -1;
        ids[i] = e.data;
    }
    static const char x_sec[] = "{\"ph\":\"X\",\"cat\":\"section\",\"name\":";
    static const char x_ann[] = "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":";
    sonde_config cfg;
    sm_config(m, &cfg);
    /* The budget: sections shorter than bud.min_ns are folded into runs (sm_folder). */
    sm_budget bud = m->trace; /* the whole run's, else that of [t0, t1) */
    if (!t.err && (t0 != INT64_MIN || t1 != INT64_MAX) && sm_trace_budget(m, t0, t1, &bud) != 0)
        t.err = -1;
    sm_folder fo;
    if (sm_folder_init(&fo, m, t0, t1, bud.folded ? bud.min_ns : INT64_MIN) != 0)
        t.err = -1;
    t.m = m;
    t.esc = esc;
    t.ids = ids;
    t.x_head = o->tensorboard ? x_ann : x_sec;
    t.x_len = o->tensorboard ? sizeof x_ann - 1 : sizeof x_sec - 1;
    t.stack = cfg.with_stack;
    t.sh = sh;
    t.pid = pid;
    t.tensorboard = o->tensorboard;
    /* the kept sections as complete events, then the folded runs in the order they began; the
     * operators of another tracer (sonde_ops) on their threads, in PyTorch's category */
    static const sx_walker walk = {.begin = json_section, .op_begin = json_op,
                                   .instant = json_instant, .counter = json_counter,
                                   .point = json_point, .gpu_track = json_gpu_track,
                                   .gpu = json_gpu, .step = json_step, .session = json_session};
    if (!t.err && sx_walk_spans(m, &fo, t0, t1, &walk, &t))
        t.err = -1;
    if (!t.err)
        fold_events(&t, m, fo.runs, fo.n_runs, ids, sh, bud.min_ns);
    sm_folder_free(&fo);
    if (!t.err && sx_walk_ops(m, t0, t1, &walk, &t))
        t.err = -1;
    if (!t.err && sx_walk_instants(m, t0, t1, 0, &walk, &t))
        t.err = -1;
    sbuf_init(&t.cname);
    if (!t.err && sx_walk_counters(m, t0, t1, &walk, &t))
        t.err = -1;
    sbuf_free(&t.cname);
    if (!t.err && sx_walk_steps(m, t0, t1, &walk, &t))
        t.err = -1;
    tensorboard_step(&t, m);
    if (!t.err && sx_walk_sessions(m, t0, t1, &walk, &t))
        t.err = -1;
    if (!t.err && m->n_gpu && sx_walk_gpu(m, t0, t1, &walk, &t))
        t.err = -1;
    /* the off-CPU periods (the longest the model kept, docs/stacks.md "Off-CPU time"), at most
     * a quarter of trace_max_events of them, the longest; all in pid where the caller gives the
     * run one (a merged trace's rank) */
    static const sx_walker off = {.off_track = off_track, .off_period = off_period};
    int with_off = !t.err && m->profile.n_off_held && !o->tensorboard;
    int64_t off_min = with_off ? sm_off_trace_min_ns(m, t0, t1) : 0; /* the shorter left out */
    if (off_min < 0 ||
        (with_off && sx_walk_off(m, t0, t1, off_min, pid, o->pid > 0, &off, &t)))
        t.err = -1;
    if (with_samples && !t.err) {
        sample_processes(&t, m, pid, t.named_pids, t.n_named);
        cpu_samples(&t, m, t0, t1, sh, pid);
    }
    else if (o->close && o->tensorboard)
        tensorboard_close(&t, m);
    else if (o->close)
        sbuf_puts(&t.b, "\n]\n");
    flush(&t, 1);
    for (size_t i = 0; i < m->n_sites; i++)
        sonde__free(esc[i]);
    sonde__free(esc);
    for (size_t i = 0; ids && i < m->n_threads; i++)
        sonde__free(ids[i]);
    sonde__free(ids);
    sbuf_free(&t.b);
    return t.err;
}
