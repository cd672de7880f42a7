/* derive.c - what the model derives once it is built: steps, instants and counters in time order,
 * short sections left out (min_duration_s) with the folded runs they leave merged, the run's
 * totals, step summary and trace budget (sm__derive). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

static int cmp_step(const void *a, const void *b)
{
    const sm_step *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

/* Steps may be marked from several threads: time order. Then, once, each end takes its start
 * from the last begin mark since the step before it ended (else that end), and the marks go. In
 * a flight recorder's window, a first step with no begin mark began before the window: left
 * out. */
static int sort_steps(sm_model *m)
{
    sonde__sort(m->steps, m->n_steps, sizeof *m->steps, cmp_step);
    if (m->steps_paired) /* a merge of runs paired already: each keeps its own starts */
        return 0;
    m->steps_paired = 1;
    size_t k = 0;
    int64_t prev_end = 0, begin = -1;
    int cut = sm_info(m, "trigger.reason") != NULL;
    for (size_t i = 0; i < m->n_steps; i++) {
        sm_step s = m->steps[i];
        if (s.begun == 2) {
            begin = s.t_ns;
            continue;
        }
        if (s.begun == 3) { /* a step not held (report_max_records): where the next starts */
            cut = 0;
            begin = -1;
            prev_end = s.t_ns;
            continue;
        }
        if (cut && begin < 0) {
            cut = 0;
            prev_end = s.t_ns;
            continue;
        }
        cut = 0;
        s.begun = begin >= prev_end;
        s.start_ns = s.begun ? begin : prev_end;
        begin = -1;
        prev_end = s.t_ns;
        m->steps[k++] = s;
    }
    m->n_steps = k;
    return 0;
}

/* Instants in time order (each thread's are read chunk by chunk), ties in reading order. */
typedef struct inst_at {
    int64_t t;
    size_t i;
} inst_at;

static int cmp_inst_at(const void *a, const void *b)
{
    const inst_at *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int sort_instants(sm_model *m)
{
    size_t n = m->n_instants;
    if (n < 2)
        return 0;
    inst_at *r = sonde__malloc(n * sizeof *r);
    sm_instant *was = sonde__malloc(n * sizeof *was);
    if (!r || !was) {
        sonde__free(r);
        sonde__free(was);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = (inst_at){m->instants[i].t_ns, i};
    sonde__sort(r, n, sizeof *r, cmp_inst_at);
    memcpy(was, m->instants, n * sizeof *was);
    for (size_t k = 0; k < n; k++)
        m->instants[k] = was[r[k].i];
    sonde__free(r);
    sonde__free(was);
    return 0;
}

/* Counter samples in time order (samples from several threads can interleave). */
typedef struct tv {
    int64_t t;
    double v;
} tv;

static int cmp_tv(const void *a, const void *b)
{
    const tv *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int sort_counters(sm_model *m)
{
    for (size_t c = 0; c < m->n_counters; c++) {
        sm_counter *k = &m->counters[c];
        size_t i = 1;
        while (i < k->n && k->t_ns[i - 1] <= k->t_ns[i])
            i++;
        if (i >= k->n)
            continue;
        tv *a = sonde__malloc(k->n * sizeof *a);
        if (!a)
            return -1;
        for (i = 0; i < k->n; i++)
            a[i] = (tv){k->t_ns[i], k->v[i]};
        sonde__sort(a, k->n, sizeof *a, cmp_tv);
        for (i = 0; i < k->n; i++) {
            k->t_ns[i] = a[i].t;
            k->v[i] = a[i].v;
        }
        sonde__free(a); /* k->last is the latest of every sample (add_counter) */
    }
    return 0;
}

/* Folded runs that sm__drop_short moved may share a place with another (two at the end of one
 * box): each such pair becomes one run. 0, or -1 out of memory. */
static int merge_moved_runs(sm_model *m)
{
    size_t places = 2 * m->n_spans + m->n_threads; /* before a span, a span's end, a thread's */
    int32_t *at = sonde__malloc((places ? places : 1) * sizeof *at);
    if (!at)
        return -1;
    memset(at, 0xff, places * sizeof *at);
    size_t k = 0;
    for (size_t i = 0; i < m->n_folds; i++) {
        sm_fold_run r = m->folds[i];
        size_t p = r.closer >= 0 ? (size_t)r.closer
                   : r.box >= 0  ? m->n_spans + (size_t)r.box
                                 : 2 * m->n_spans + r.thread;
        if (at[p] < 0) {
            at[p] = (int32_t)k;
            m->folds[k++] = r;
            continue;
        }
        sm_fold_run *into = &m->folds[at[p]];
        into->mixed |= r.mixed || r.site != into->site;
        into->start_ns = r.start_ns < into->start_ns ? r.start_ns : into->start_ns;
        into->end_ns = r.end_ns > into->end_ns ? r.end_ns : into->end_ns;
        into->n += r.n;
        into->sum_ns += r.sum_ns;
        into->folded += r.folded;
    }
    m->n_folds = k;
    sonde__free(at);
    return 0;
}

/* min_duration_s: section instances shorter than it are left out of the model (and so of every
 * report), except those that carry throughput, FLOPs or a diffusion record: nothing measured is
 * lost. Their time still counts as their parent's time in children (self time is unchanged).
 * close_span flags them SM_SPAN_SHORT and leaves them out of the statistics; this removes them,
 * and what was nested in one takes its nearest ancestor kept. */
int sm__drop_short(sm_model *m, int64_t min_ns)
{
    if (!(min_ns > 0) || !m->n_spans)
        return 0;
    int32_t *map = sonde__malloc(m->n_spans * sizeof *map);
    if (!map)
        return -1;
    for (size_t i = 0; i < m->n_spans; i++)
        map[i] = m->spans[i].flags & SM_SPAN_SHORT ? -1 : 0;
    size_t k = 0;
    for (size_t i = 0; i < m->n_spans; i++) {
        if (map[i] < 0) {
            m->threads[m->spans[i].thread].spans--;
            continue;
        }
        sm_span s = m->spans[i];
        int32_t p = s.parent; /* the nearest ancestor kept (parents are kept before children) */
        while (p >= 0 && map[p] < 0)
            p = m->spans[p].parent;
        s.parent = p >= 0 ? map[p] : -1;
        map[i] = (int32_t)k;
        m->spans[k++] = s;
    }
    /* Folded runs (held sections) in a dropped section move to its nearest ancestor kept. One it
     * closed lies at its box's end now; merge_moved_runs merges it with the one there. */
    for (size_t i = 0; i < m->n_folds; i++) {
        sm_fold_run *r = &m->folds[i];
        int32_t p = r->box;
        while (p >= 0 && map[p] < 0)
            p = m->spans[p].parent;
        r->box = p >= 0 ? map[p] : -1;
        r->closer = r->closer >= 0 ? map[r->closer] : -1;
    }
    for (size_t i = 0; i < m->n_dsteps; i++)
        if (m->dsteps[i].span >= 0)
            m->dsteps[i].span = map[m->dsteps[i].span];
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].span >= 0)
            m->blocks[i].span = map[m->blocks[i].span];
    m->short_spans += m->n_spans - k;
    m->n_spans = k;
    sonde__free(map);
    return m->n_folds ? merge_moved_runs(m) : 0;
}

int sm__step_active(const sm_model *m, uint64_t step)
{
    if (!m->scheduled)
        return 1;
    for (size_t w = 0; w < m->n_windows; w++)
        if (step >= m->windows[w].first_step && step <= m->windows[w].last_step)
            return 1;
    return 0;
}

int sm__derive(sm_model *m, sm_stats_from from)
{
    if (sort_counters(m) || sort_steps(m) || sort_instants(m))
        return -1;
    /* diffusion records with seconds <= 0 take their section's duration */
    for (size_t i = 0; i < m->n_dsteps; i++)
        if (m->dsteps[i].span >= 0)
            m->dsteps[i].seconds = (double)(m->spans[m->dsteps[i].span].end_ns -
                                            m->spans[m->dsteps[i].span].start_ns) / 1e9;
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].span >= 0)
            m->blocks[i].seconds = (double)(m->spans[m->blocks[i].span].end_ns -
                                            m->spans[m->blocks[i].span].start_ns) / 1e9;
    for (size_t i = 0; m->scheduled && i < m->n_steps; i++)
        m->steps[i].active = sm__step_active(m, m->steps[i].number);
    if (from == SM_STATS_FROM_SPANS) {
        sm_stats_free(m->stats, m->n_stats);
        m->stats = NULL;
        m->n_stats = 0;
        if (sm__stats(m, SM_ALL_SPANS, (double)m->duration_ns / 1e9, &m->stats, &m->n_stats))
            return -1;
    }
    if (from != SM_STATS_FOLDED && sm__fold_aggregated(m) != 0)
        return -1;
    int *site_stat = sonde__malloc((m->n_sites ? m->n_sites : 1) * sizeof *site_stat);
    if (!site_stat || sm__site_stats(m, m->stats, m->n_stats, SM_ALL_SPANS, site_stat)) {
        sonde__free(site_stat);
        return -1;
    }
    for (size_t i = 0; i < m->n_sites; i++)
        m->sites[i].stat = site_stat[i];
    sonde__free(site_stat);
    sm_resources(m, m->stats, m->n_stats, SM_ALL_SPANS);
    m->total_sections = sm_sections(m) - m->sections_end_lost; /* those are counted apart */
    m->total_steps = m->n_steps + m->steps_thinned;
    double tu, tus;
    sm_totals(m, &tu, &tus, &m->total_flops, &m->total_flops_s);
    sm_steps(m, &m->steps_summary);
    return sm_trace_budget(m, INT64_MIN, INT64_MAX, &m->trace);
}
