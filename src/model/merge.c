/* merge.c - several runs as one model (sonde merge, `sonde run` joining a program's own
 * recording): sites, threads, sections, sessions and the rest appended with their ids moved,
 * times put on the first run's clock, the CPU profiles built again as one (profile.c), then
 * everything derived again. */
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "model_build.h"
#include "../util/alloc.h"

#define MOVE_APPEND(dst, nd, src, ns)                                                           \
    do {                                                                                        \
        if (ns) {                                                                               \
            void *g_ = sonde__realloc((dst), ((nd) + (ns)) * sizeof *(dst));                           \
            if (!g_)                                                                            \
                return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");                 \
            (dst) = g_;                                                                         \
            memcpy((dst) + (nd), (src), (ns) * sizeof *(dst));                                  \
        }                                                                                       \
    } while (0)

/* Where the source's elements land in the destination: its times move by off, its sites,
 * threads, spans, metadata, sessions and span extras by the destination's counts before. */
typedef struct shift {
    int64_t off;
    uint32_t site0, th0;
    int32_t span0, meta0, sess0, x0;
} shift;

/* A held run's folded sections: their runs appended, moved. 0, or SONDE_ENOMEM. */
static int merge_folds(sm_model *d, sm_model *s, const shift *k)
{
    int32_t f0 = (int32_t)d->n_folds;
    MOVE_APPEND(d->folds, d->n_folds, s->folds, s->n_folds);
    for (size_t i = 0; i < s->n_folds; i++) {
        sm_fold_run *r = &d->folds[f0 + (int32_t)i];
        r->thread += k->th0;
        r->site += k->site0;
        r->start_ns += k->off;
        r->end_ns += k->off;
        if (r->box >= 0)
            r->box += (int32_t)d->n_spans;
        if (r->closer >= 0)
            r->closer += (int32_t)d->n_spans;
    }
    d->n_folds += s->n_folds;
    s->n_folds = 0;
    d->sections_folded += s->sections_folded;
    if (s->held_min_ns > d->held_min_ns) /* every folded section is shorter than it */
        d->held_min_ns = s->held_min_ns;
    return 0;
}

/* Sites (names), threads, metadata, sessions, sections and their extras. 0, or SONDE_ENOMEM. */
static int merge_sections(sm_model *d, sm_model *s, const shift *k)
{
    MOVE_APPEND(d->sites, d->n_sites, s->sites, s->n_sites);
    d->n_sites += s->n_sites;
    s->n_sites = 0; /* the strings now belong to d */
    MOVE_APPEND(d->threads, d->n_threads, s->threads, s->n_threads);
    for (size_t i = 0; i < s->n_threads; i++) {
        sm_thread *t = &d->threads[k->th0 + i];
        t->index = k->th0 + (uint32_t)i;
        if (!t->pid)
            t->pid = s->pid;
    }
    d->n_threads += s->n_threads;
    s->n_threads = 0;
    MOVE_APPEND(d->meta, d->n_meta, s->meta, s->n_meta);
    for (size_t i = 0; i < s->n_meta; i++) {
        sm_meta *e = &d->meta[k->meta0 + (int32_t)i];
        e->key += k->site0;
        e->value += k->site0;
        if (e->next >= 0)
            e->next += k->meta0;
    }
    d->n_meta += s->n_meta;
    MOVE_APPEND(d->sessions, d->n_sessions, s->sessions, s->n_sessions);
    for (size_t i = 0; i < s->n_sessions; i++) {
        sm_session *x = &d->sessions[k->sess0 + (int32_t)i];
        x->name += k->site0;
        x->thread += k->th0;
        x->start_ns += k->off;
        x->end_ns += k->off;
        x->unit = (x->unit ? x->unit + k->site0 : 0);
        if (x->meta >= 0)
            x->meta += k->meta0;
        for (size_t j = 0; j < x->n_stats; j++) /* held in part: the run's unit is d's now */
            if (x->stats[j].unit == s->unit)
                x->stats[j].unit = d->unit;
    }
    d->n_sessions += s->n_sessions;
    MOVE_APPEND(d->spans, d->n_spans, s->spans, s->n_spans);
    for (size_t i = 0; i < s->n_spans; i++) {
        sm_span *x = &d->spans[k->span0 + (int32_t)i];
        x->site += k->site0;
        x->thread += k->th0;
        x->start_ns += k->off;
        x->end_ns += k->off;
        if (x->parent >= 0)
            x->parent += k->span0;
        if (x->session >= 0)
            x->session += k->sess0;
        if (x->x >= 0)
            x->x += k->x0;
    }
    d->n_spans += s->n_spans;
    MOVE_APPEND(d->span_x, d->n_span_x, s->span_x, s->n_span_x);
    for (size_t i = 0; i < s->n_span_x; i++) {
        sm_span_x *x = &d->span_x[k->x0 + (int32_t)i];
        x->unit = (x->unit ? x->unit + k->site0 : 0);
        if (x->meta >= 0)
            x->meta += k->meta0;
    }
    d->n_span_x += s->n_span_x;
    MOVE_APPEND(d->metasum, d->n_metasum, s->metasum, s->n_metasum);
    for (size_t i = 0; i < s->n_metasum; i++) {
        sm_metasum *x = &d->metasum[d->n_metasum + i];
        x->name += k->site0;
        x->key += k->site0;
        for (unsigned v = 0; v < x->n_values; v++)
            x->values[v] += k->site0;
        if (x->next >= 0)
            x->next += (int32_t)d->n_metasum;
    }
    d->n_metasum += s->n_metasum;
    return 0;
}

/* Instants, steps, schedule windows, counters and metrics. 0, or SONDE_ENOMEM. */
static int merge_series(sm_model *d, sm_model *s, const shift *k)
{
    MOVE_APPEND(d->instants, d->n_instants, s->instants, s->n_instants);
    for (size_t i = 0; i < s->n_instants; i++) {
        sm_instant *x = &d->instants[d->n_instants + i];
        x->name += k->site0;
        if (x->args >= 0)
            x->args += k->meta0;
        x->thread += k->th0;
        x->t_ns += k->off;
    }
    d->n_instants += s->n_instants;
    MOVE_APPEND(d->steps, d->n_steps, s->steps, s->n_steps);
    for (size_t i = 0; i < s->n_steps; i++) {
        d->steps[d->n_steps + i].thread += k->th0;
        d->steps[d->n_steps + i].t_ns += k->off;
        d->steps[d->n_steps + i].start_ns += k->off;
    }
    d->n_steps += s->n_steps;
    d->instants_thinned += s->instants_thinned; /* what was not held (report_max_records) */
    d->steps_thinned += s->steps_thinned;
    d->steps_active_thinned += s->steps_active_thinned;
    if (s->steps_every > d->steps_every)
        d->steps_every = s->steps_every;
    d->steps_exact = 0; /* the figures over every step are each run's own: the held ones, merged */
    MOVE_APPEND(d->windows, d->n_windows, s->windows, s->n_windows);
    for (size_t i = 0; i < s->n_windows; i++) {
        d->windows[d->n_windows + i].start_ns += k->off;
        d->windows[d->n_windows + i].end_ns += k->off;
    }
    d->n_windows += s->n_windows;
    d->scheduled |= s->scheduled;
    MOVE_APPEND(d->counters, d->n_counters, s->counters, s->n_counters);
    for (size_t i = 0; i < s->n_counters; i++) {
        sm_counter *c = &d->counters[d->n_counters + i];
        for (size_t q = 0; q < c->n; q++)
            c->t_ns[q] += k->off;
        if (c->last_ns != INT64_MIN)
            c->last_ns += k->off;
    }
    d->n_counters += s->n_counters;
    s->n_counters = 0;
    MOVE_APPEND(d->metrics, d->n_metrics, s->metrics, s->n_metrics);
    d->n_metrics += s->n_metrics;
    s->n_metrics = 0;
    return 0;
}

/* Diffusion records, CUDA activity, operators and model parameters: their times and the spans
 * and threads they name. 0, or SONDE_ENOMEM. */
static int merge_device(sm_model *d, sm_model *s, const shift *k)
{
    MOVE_APPEND(d->dsteps, d->n_dsteps, s->dsteps, s->n_dsteps);
    for (size_t i = 0; i < s->n_dsteps; i++) {
        sm_dstep *x = &d->dsteps[d->n_dsteps + i];
        x->t_ns += k->off;
        if (x->span >= 0)
            x->span += k->span0;
    }
    d->n_dsteps += s->n_dsteps;
    MOVE_APPEND(d->blocks, d->n_blocks, s->blocks, s->n_blocks);
    for (size_t i = 0; i < s->n_blocks; i++) {
        sm_block *x = &d->blocks[d->n_blocks + i];
        x->t_ns += k->off;
        if (x->span >= 0)
            x->span += k->span0;
    }
    d->n_blocks += s->n_blocks;
    MOVE_APPEND(d->gpu, d->n_gpu, s->gpu, s->n_gpu);
    for (size_t i = 0; i < s->n_gpu; i++) {
        sm_gpu *x = &d->gpu[d->n_gpu + i];
        x->start_ns += k->off;
        x->end_ns += k->off;
        if (x->launch_ns >= 0)
            x->launch_ns += k->off;
        if (x->launch_thread >= 0)
            x->launch_thread += (int32_t)k->th0;
        if (x->span >= 0)
            x->span += k->span0;
    }
    d->n_gpu += s->n_gpu;
    s->n_gpu = 0; /* the kernel names now belong to d */
    MOVE_APPEND(d->ops, d->n_ops, s->ops, s->n_ops);
    for (size_t i = 0; i < s->n_ops; i++) {
        sm_op *x = &d->ops[d->n_ops + i];
        x->start_ns += k->off;
        x->end_ns += k->off;
        x->name += (uint32_t)d->n_op_names;
        if (x->shapes >= 0)
            x->shapes += (int32_t)d->n_op_names;
        x->thread += k->th0;
        if (x->span >= 0)
            x->span += k->span0;
        if (x->parent >= 0)
            x->parent += (int32_t)d->n_ops;
    }
    d->n_ops += s->n_ops;
    s->n_ops = 0;
    MOVE_APPEND(d->op_names, d->n_op_names, s->op_names, s->n_op_names);
    d->n_op_names += s->n_op_names;
    s->n_op_names = 0; /* the names now belong to d */
    MOVE_APPEND(d->params, d->n_params, s->params, s->n_params);
    d->n_params += s->n_params;
    s->n_params = 0; /* and the model names */
    return 0;
}

int sm_merge(sm_model *d, sm_model *s)
{
    shift k = {(int64_t)(s->start_mono_ns - d->start_mono_ns), (uint32_t)d->n_sites,
               (uint32_t)d->n_threads, (int32_t)d->n_spans, (int32_t)d->n_meta,
               (int32_t)d->n_sessions, (int32_t)d->n_span_x};
    int64_t off = k.off;
    int32_t meta0 = k.meta0;
    /* A run that does not hold every section has statistics its spans cannot give again: the
     * two runs' are combined by name. */
    int held = d->sections_folded || s->sections_folded;
    if (held && sm__stats_combine(&d->stats, &d->n_stats, s->stats, s->n_stats, s->unit, d->unit,
                                  (double)(d->duration_ns > s->duration_ns + off
                                               ? d->duration_ns : s->duration_ns + off) / 1e9))
        return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
    int rc;
    if ((held && (rc = merge_folds(d, s, &k)) != 0) || (rc = merge_sections(d, s, &k)) != 0 ||
        (rc = merge_series(d, s, &k)) != 0 || (rc = merge_device(d, s, &k)) != 0)
        return rc;
    /* the CPU samples of both, placed in the merged sections (a run under `sonde run` sampled
     * in its own threads: the run's own profile has none of them) */
    if (sm__profile_merge(d, s, k.site0))
        return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
    for (size_t i = 0; i < s->n_warnings; i++) {
        char *w = NULL;
        if (sonde__asprintf(&w, "pid %d: %s", s->pid, s->warnings[i]) < 0)
            return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
        char **g = sonde__realloc(d->warnings, (d->n_warnings + 1) * sizeof *g);
        if (!g) {
            sonde__free(w);
            return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
        }
        d->warnings = g;
        d->warnings[d->n_warnings++] = w;
    }
    /* the program's run-level metadata joins the run's */
    for (int32_t e = s->run_meta, next; e >= 0; e = next) {
        next = s->meta[e].next;
        d->meta[meta0 + e].next = d->run_meta;
        d->run_meta = meta0 + e;
    }
    d->run_units += s->run_units;
    d->run_units_s += s->run_units_s;
    d->run_flops += s->run_flops;
    d->dropped_events += s->dropped_events;
    d->sections_end_lost += s->sections_end_lost;
    /* The elements moved into d: src's arrays hold none any more (sm_free frees the arrays). */
    s->n_spans = s->n_span_x = s->n_meta = s->n_sessions = s->n_instants = s->n_steps = 0;
    s->n_windows = 0;
    s->n_dsteps = s->n_blocks = 0;
    for (size_t i = 0; i < d->n_rates; i++)
        sonde__free(d->rates[i].unit);
    sonde__free(d->rates);
    d->rates = NULL;
    d->n_rates = 0;
    d->merged = 1;
    if (sm__build_rates(d, NULL) || sm__derive(d, held ? SM_STATS_FOLDED : SM_STATS_FROM_SPANS))
        return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
    return 0;
}
