/* budget.c - which sections a trace keeps under trace_max_events: the longest ones, which are
 * also the outermost (a section is never shorter than one nested in it), so what is kept still
 * nests; and the folding of the rest into slices (sm_folder), shared by the trace writers
 * (export/trace.c, export/perfetto.c) and counted in the reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "../util/buf.h"
#include "../util/alloc.h"

/* By quickselect with a three-way partition. */
int64_t sm_kth_largest(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n, want = k - 1; /* want: its index in descending order */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (;;) {
        if (hi - lo == 1)
            return v[lo];
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int64_t pivot = v[lo + seed % (hi - lo)];
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) > pivot, [lt,i) == pivot, [gt,hi) < pivot */
        while (i < gt) {
            int64_t x = v[i];
            if (x > pivot) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x < pivot) {
                v[i] = v[--gt];
                v[gt] = x;
            } else {
                i++;
            }
        }
        if (want < lt)
            hi = lt;
        else if (want < gt)
            return pivot;
        else
            lo = gt;
    }
}

uint64_t sm_trace_max_events(const sm_model *m)
{
    sonde_config cfg;
    sm_config(m, &cfg);
    return cfg.trace_max_events;
}

int64_t sm_off_trace_min_ns(const sm_model *m, int64_t t0, int64_t t1)
{
    const sm_profile *pr = &m->profile;
    uint64_t cap = sm_trace_max_events(m) / 4;
    size_t in = 0;
    for (size_t i = 0; i < pr->n_off_held; i++)
        in += pr->off_held[i].t_ns >= t0 && pr->off_held[i].t_ns < t1;
    if (!cap || in <= cap)
        return 0;
    int64_t *d = sonde__malloc(in * sizeof *d);
    if (!d)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < pr->n_off_held; i++)
        if (pr->off_held[i].t_ns >= t0 && pr->off_held[i].t_ns < t1)
            d[n++] = pr->off_held[i].ns;
    int64_t min = sm_kth_largest(d, n, (size_t)cap);
    sonde__free(d);
    return min > 0 ? min : 1;
}

uint64_t sm_report_max_sections(const sm_model *m)
{
    sonde_config cfg;
    sm_config(m, &cfg);
    return cfg.report_max_sections;
}

int sm_trace_budget(const sm_model *m, int64_t t0, int64_t t1, sm_budget *out)
{
    memset(out, 0, sizeof *out);
    out->min_ns = INT64_MIN;
    if (m->sections_folded) { /* folded as it was read: what is held is kept */
        for (size_t i = 0; i < m->n_spans; i++)
            out->sections += sm_span_in(&m->spans[i], t0, t1);
        for (size_t i = 0; i < m->n_folds; i++)
            if (m->folds[i].start_ns >= t0 && m->folds[i].start_ns < t1)
                out->folded += m->folds[i].folded;
        out->sections += out->folded;
        out->min_ns = out->folded ? m->held_min_ns : INT64_MIN;
        return 0;
    }
    uint64_t max = sm_trace_max_events(m);
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        n += sm_span_in(&m->spans[i], t0, t1);
    out->sections = n;
    if (!max || n <= max)
        return 0;
    /* A folded run lies in a box (a kept section, or a thread's top level) between two of the
     * box's kept children, so a box holds at most one run more than it has kept children: at
     * most 2 kept + threads runs in all. Keep a third of what the threads leave, the sections
     * strictly longer than the keep-th longest (none when that is 0). */
    size_t keep = max > m->n_threads ? (size_t)((max - m->n_threads) / 3) : 0;
    if (!keep) {
        out->min_ns = INT64_MAX;
    } else {
        int64_t *d = sonde__malloc(n * sizeof *d);
        if (!d)
            return -1;
        size_t j = 0;
        for (size_t i = 0; i < m->n_spans; i++)
            if (sm_span_in(&m->spans[i], t0, t1))
                d[j++] = m->spans[i].end_ns - m->spans[i].start_ns;
        out->min_ns = sm_kth_largest(d, n, keep) + 1;
        sonde__free(d);
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        out->folded += sm_span_in(s, t0, t1) && s->end_ns - s->start_ns < out->min_ns;
    }
    return 0;
}

int sm_folder_init(sm_folder *f, const sm_model *m, int64_t t0, int64_t t1, int64_t min_ns)
{
    memset(f, 0, sizeof *f);
    f->m = m;
    f->t0 = t0;
    f->t1 = t1;
    f->min_ns = min_ns;
    f->closed = -1;
    if (min_ns == INT64_MIN)
        return 0;
    size_t boxes = m->n_spans + m->n_threads;
    f->open_run = sonde__malloc((boxes ? boxes : 1) * sizeof *f->open_run);
    if (!f->open_run)
        return -1;
    memset(f->open_run, 0xff, boxes * sizeof *f->open_run);
    if (!m->sections_folded)
        return 0;
    f->before = sonde__malloc((m->n_spans ? m->n_spans : 1) * sizeof *f->before);
    if (!f->before) {
        sm_folder_free(f);
        return -1;
    }
    memset(f->before, 0xff, m->n_spans * sizeof *f->before);
    int whole = t0 == INT64_MIN && t1 == INT64_MAX;
    if (whole) { /* the writers list f->runs: m->folds, or those in the range */
        f->runs = m->folds;
        f->n_runs = m->n_folds;
        f->borrowed = 1;
    }
    for (size_t i = 0; i < m->n_folds; i++) {
        const sm_fold_run *r = &m->folds[i];
        if (r->start_ns < t0 || r->start_ns >= t1)
            continue;
        if (!whole) {
            if (SONDE_GROW(f->runs, f->n_runs, f->cap_runs)) {
                sm_folder_free(f);
                return -1;
            }
            f->runs[f->n_runs++] = *r;
        }
        /* one run a place (sm__drop_short merges the runs it moved together) */
        int32_t *slot = r->closer >= 0 ? &f->before[r->closer]
                        : &f->open_run[r->box >= 0 ? (size_t)r->box : m->n_spans + r->thread];
        *slot = whole ? (int32_t)i : (int32_t)f->n_runs - 1;
    }
    return 0;
}

int sm_fold(sm_folder *f, const sm_span *s)
{
    f->closed = -1;
    if (!f->open_run)
        return 0;
    const sm_model *m = f->m;
    if (f->before) { /* folded as it was read: s is held, so kept */
        f->closed = f->before[s - m->spans];
        return 0;
    }
    const sm_span *up = s->parent >= 0 ? &m->spans[s->parent] : NULL;
    int up_in = up && sm_span_in(up, f->t0, f->t1);
    size_t box = up_in ? (size_t)s->parent : m->n_spans + s->thread;
    if (s->end_ns - s->start_ns >= f->min_ns) {
        f->closed = f->open_run[box]; /* a kept sibling ends the run before it */
        f->open_run[box] = -1;
        return 0;
    }
    if (up_in && up->end_ns - up->start_ns < f->min_ns)
        return 1; /* inside a folded section: in its run's time */
    int32_t r = f->open_run[box];
    if (r < 0) {
        if (SONDE_GROW(f->runs, f->n_runs, f->cap_runs))
            return -1;
        r = (int32_t)f->n_runs++;
        f->runs[r] = (sm_fold_run){.thread = s->thread, .site = s->site, .start_ns = s->start_ns,
                                   .end_ns = s->end_ns, .box = -1, .closer = -1};
        f->open_run[box] = r;
    }
    sm_fold_run *fr = &f->runs[r];
    fr->mixed |= fr->site != s->site;
    if (s->end_ns > fr->end_ns)
        fr->end_ns = s->end_ns;
    fr->n++;
    fr->sum_ns += (uint64_t)(s->end_ns - s->start_ns);
    return 1;
}

int32_t sm_fold_take(sm_folder *f, size_t box)
{
    if (!f->open_run)
        return -1;
    int32_t r = f->open_run[box];
    f->open_run[box] = -1;
    return r;
}

int sm_fold_label(const sm_model *m, const sm_fold_run *r, sbuf *out)
{
    /* the time in ms with 3 decimals, rounded to the nearest us, in integers and without printf
     * (the trace writes a label per run, and printf was 4% of its writing) */
    if (!r->mixed) {
        const char *name = m->sites[r->site].name;
        size_t len = strlen(name);
        sbuf_add(out, name, len < 400 ? len : 400);
        sbuf_add(out, " x ", 3);
    }
    sbuf_u64(out, r->n);
    sbuf_puts(out, r->mixed ? " sections (" : " (");
    sbuf_decimal(out, (int64_t)((r->sum_ns + 500) / 1000), 3);
    sbuf_add(out, " ms)", 4);
    return out->oom ? -1 : 0;
}

void sm_folder_free(sm_folder *f)
{
    sonde__free(f->open_run);
    sonde__free(f->before);
    if (!f->borrowed)
        sonde__free(f->runs);
    f->open_run = NULL;
    f->before = NULL;
    f->runs = NULL;
}
