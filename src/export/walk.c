/* walk.c - the walk both traces are written from (trace.c's JSON trace, perfetto.c's protobuf
 * trace): a model's kept sections, thread after thread, each beginning after those it follows
 * have ended, with the runs the trace's budget folds (sm_folder) where each closes; its
 * operators, thread after thread, nested by their ends; its instants, by time or by thread; its
 * counters' downsampled points; its steps and sessions; its CUDA activity on a track per device
 * and stream; its off-CPU periods on their tracks. Each trace is an encoder of what the walk
 * hands it (sx_walker); the time range is the walk's to apply (what an encoder leaves out
 * besides is its format's: TensorBoard's trace holds the active steps alone). */
#include <string.h>

#include "export.h"
#include "../util/alloc.h"

/* A run of the folder handed on when there is one (r >= 0). */
static int run_of(const sx_walker *ops, void *ctx, const sm_folder *fo, int32_t r)
{
    return r >= 0 && ops->run ? ops->run(ctx, &fo->runs[r]) : 0;
}

/* spans[a, b), one thread's (those that begin in [t0, t1)), as sx_walk_spans hands them on. */
static int thread_spans(const sm_model *m, size_t a, size_t b, int64_t t0, int64_t t1,
                        sm_folder *fo, const sx_walker *ops, void *ctx)
{
    size_t *stack = NULL, depth = 0, cap = 0;
    int rc = 0, begun = 0;
    for (size_t i = a; i < b && !rc; i++) {
        const sm_span *s = &m->spans[i];
        if (!sm_span_in(s, t0, t1))
            continue;
        if (!begun++ && ops->thread && (rc = ops->thread(ctx, s->thread, s->start_ns)))
            break;
        int folded = sm_fold(fo, s);
        if (folded < 0) {
            rc = -1;
            break;
        }
        if (folded)
            continue;
        int32_t closed = fo->closed; /* in s's box: handed on once the stack is down to it */
        while (!rc && depth && m->spans[stack[depth - 1]].end_ns <= s->start_ns) {
            size_t k = stack[--depth];
            rc = run_of(ops, ctx, fo, sm_fold_take(fo, k));
            if (!rc && ops->end)
                rc = ops->end(ctx, &m->spans[k]);
        }
        if (!rc)
            rc = run_of(ops, ctx, fo, closed);
        if (!rc && ops->begin)
            rc = ops->begin(ctx, s);
        if (!rc && SONDE_GROW(stack, depth, cap))
            rc = -1;
        if (!rc)
            stack[depth++] = i;
    }
    while (!rc && depth) {
        size_t k = stack[--depth];
        rc = run_of(ops, ctx, fo, sm_fold_take(fo, k));
        if (!rc && ops->end)
            rc = ops->end(ctx, &m->spans[k]);
    }
    if (!rc && begun)
        rc = run_of(ops, ctx, fo, sm_fold_take(fo, m->n_spans + m->spans[a].thread));
    sonde__free(stack);
    return rc;
}

int sx_walk_spans(const sm_model *m, sm_folder *fo, int64_t t0, int64_t t1,
                  const sx_walker *ops, void *ctx)
{
    int rc = 0;
    for (size_t a = 0, b; a < m->n_spans && !rc; a = b) { /* grouped by thread, in start order */
        for (b = a; b < m->n_spans && m->spans[b].thread == m->spans[a].thread; b++) {
        }
        rc = thread_spans(m, a, b, t0, t1, fo, ops, ctx);
    }
    return rc;
}

/* ops[a, b), one thread's (those that begin in [t0, t1)), as sx_walk_ops hands them on. */
static int thread_ops(const sm_model *m, size_t a, size_t b, int64_t t0, int64_t t1,
                      const sx_walker *w, void *ctx)
{
    size_t *stack = NULL, depth = 0, cap = 0;
    int rc = 0, begun = 0;
    for (size_t i = a; i <= b && !rc; i++) {
        if (i < b && (m->ops[i].start_ns < t0 || m->ops[i].start_ns >= t1))
            continue;
        int64_t at = i < b ? m->ops[i].start_ns : INT64_MAX;
        while (!rc && depth && m->ops[stack[depth - 1]].end_ns <= at) {
            const sm_op *op = &m->ops[stack[--depth]];
            rc = w->op_end ? w->op_end(ctx, op) : 0;
        }
        if (rc || i == b)
            break;
        const sm_op *op = &m->ops[i];
        if (!begun++ && w->op_thread)
            rc = w->op_thread(ctx, op->thread, op->start_ns);
        if (!rc && w->op_begin)
            rc = w->op_begin(ctx, op);
        if (!rc && SONDE_GROW(stack, depth, cap))
            rc = -1;
        if (!rc)
            stack[depth++] = i;
    }
    sonde__free(stack);
    return rc;
}

int sx_walk_ops(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *w, void *ctx)
{
    int rc = 0;
    for (size_t a = 0, b; a < m->n_ops && !rc; a = b) { /* grouped by thread, in start order */
        for (b = a; b < m->n_ops && m->ops[b].thread == m->ops[a].thread; b++) {
        }
        rc = thread_ops(m, a, b, t0, t1, w, ctx);
    }
    return rc;
}

int sx_walk_instants(const sm_model *m, int64_t t0, int64_t t1, int by_thread,
                     const sx_walker *w, void *ctx)
{
    int rc = 0;
    if (!by_thread) {
        for (size_t i = 0; i < m->n_instants && !rc; i++)
            if (m->instants[i].t_ns >= t0 && m->instants[i].t_ns < t1 && w->instant)
                rc = w->instant(ctx, &m->instants[i]);
        return rc;
    }
    if (!m->n_instants)
        return 0;
    /* grouped by thread (a counting sort), each thread's in the model's time order */
    size_t *first = sonde__calloc(m->n_threads + 1, sizeof *first);
    size_t *fill = sonde__malloc((m->n_threads + 1) * sizeof *fill);
    size_t *order = sonde__malloc(m->n_instants * sizeof *order);
    if (!first || !fill || !order)
        rc = -1;
    for (size_t i = 0; i < m->n_instants && !rc; i++)
        first[m->instants[i].thread + 1]++;
    for (size_t t = 0; t < m->n_threads && !rc; t++)
        first[t + 1] += first[t];
    if (!rc)
        memcpy(fill, first, (m->n_threads + 1) * sizeof *fill);
    for (size_t i = 0; i < m->n_instants && !rc; i++)
        order[fill[m->instants[i].thread]++] = i;
    for (size_t t = 0; t < m->n_threads && !rc; t++) {
        int begun = 0;
        for (size_t k = first[t]; k < first[t + 1] && !rc; k++) {
            const sm_instant *e = &m->instants[order[k]];
            if (e->t_ns < t0 || e->t_ns >= t1)
                continue;
            if (!begun++ && w->inst_thread)
                rc = w->inst_thread(ctx, (uint32_t)t, e->t_ns);
            if (!rc && w->instant)
                rc = w->instant(ctx, e);
        }
    }
    sonde__free(first);
    sonde__free(fill);
    sonde__free(order);
    return rc;
}

int sx_walk_counters(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *w, void *ctx)
{
    size_t max_points = sm_max_data_points(m);
    size_t *keep = sonde__malloc((max_points + 2) * sizeof *keep);
    int rc = keep ? 0 : -1;
    for (size_t c = 0; c < m->n_counters && !rc; c++) {
        const sm_counter *k = &m->counters[c];
        size_t nk = sm_downsample(k, max_points, keep);
        int begun = 0;
        for (size_t q = 0; q < nk && !rc; q++) {
            size_t i = keep[q];
            if (k->t_ns[i] < t0 || k->t_ns[i] >= t1)
                continue;
            if (!begun++ && w->counter)
                rc = w->counter(ctx, c, k->t_ns[i]);
            if (!rc && w->point)
                rc = w->point(ctx, k, i);
        }
    }
    sonde__free(keep);
    return rc;
}

int sx_walk_steps(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *w, void *ctx)
{
    int rc = 0, n = 0;
    for (size_t i = 0; i < m->n_steps && !rc && w->step; i++)
        if (m->steps[i].t_ns >= t0 && m->steps[i].t_ns < t1)
            rc = w->step(ctx, &m->steps[i], !n++);
    return rc;
}

int sx_walk_sessions(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *w, void *ctx)
{
    int rc = 0, n = 0;
    for (size_t i = 0; i < m->n_sessions && !rc && w->session; i++)
        if (m->sessions[i].end_ns >= t0 && m->sessions[i].start_ns < t1)
            rc = w->session(ctx, &m->sessions[i], !n++);
    return rc;
}

int sx_walk_gpu(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *w, void *ctx)
{
    uint64_t *seen = NULL; /* the tracks so far: device << 32 | stream */
    size_t n_seen = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < m->n_gpu && !rc; i++) {
        const sm_gpu *g = &m->gpu[i];
        if (g->start_ns < t0 || g->start_ns >= t1)
            continue;
        uint64_t key = (uint64_t)g->device << 32 | g->stream;
        size_t k = 0;
        int new_device = 1;
        for (; k < n_seen && seen[k] != key; k++)
            new_device &= seen[k] >> 32 != g->device;
        if (k == n_seen) { /* its track's first record */
            if (SONDE_GROW(seen, n_seen, cap)) {
                rc = -1;
                break;
            }
            seen[n_seen++] = key;
            if (w->gpu_track)
                rc = w->gpu_track(ctx, g, new_device);
        }
        if (!rc && w->gpu)
            rc = w->gpu(ctx, g);
    }
    sonde__free(seen);
    return rc;
}

int sx_walk_off(const sm_model *m, int64_t t0, int64_t t1, int64_t min_ns, int pid, int forced,
                const sx_walker *w, void *ctx)
{
    const sm_profile *pr = &m->profile;
    uint64_t *seen = NULL; /* the tracks so far: pid << 32 | tid */
    size_t n_seen = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < pr->n_off_held && !rc; i++) {
        const sm_offperiod *o = &pr->off_held[i];
        if (o->t_ns < t0 || o->t_ns >= t1 || o->ns < min_ns || o->off >= pr->n_off)
            continue;
        int opid = o->pid && !forced ? (int)o->pid : pid;
        uint64_t key = (uint64_t)(uint32_t)opid << 32 | o->tid;
        int named = opid == pid;
        size_t k = 0;
        for (; k < n_seen && seen[k] != key; k++)
            named |= seen[k] >> 32 == (uint32_t)opid;
        if (k == n_seen) { /* its track's first period */
            for (size_t th = 0; th < m->n_threads && !named; th++)
                named = m->threads[th].pid == opid;
            if (SONDE_GROW(seen, n_seen, cap)) {
                rc = -1;
                break;
            }
            seen[n_seen++] = key;
            if (w->off_track)
                rc = w->off_track(ctx, o, opid, !named);
        }
        if (!rc && w->off_period)
            rc = w->off_period(ctx, o, opid);
    }
    sonde__free(seen);
    return rc;
}
