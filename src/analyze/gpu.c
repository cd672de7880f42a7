/* gpu.c - where the GPU time goes and why it waits (gpu.h). */
#define _GNU_SOURCE /* strcasestr */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/strmap.h"
#include "intervals.h"

int sa_gpu_kind(const sm_gpu *g)
{
    if (g->kind != SM_GPU_KERNEL)
        return SA_GPU_MEMORY;
    return g->name && strcasestr(g->name, "nccl") ? SA_GPU_COMM : SA_GPU_COMPUTE;
}

void sa_gpu_free(sa_gpu *g)
{
    for (size_t i = 0; i < g->n_dev; i++)
        sonde__free(g->dev[i].steps);
    for (size_t i = 0; i < g->n_causes; i++)
        sonde__free(g->causes[i].what);
    sonde__free(g->causes);
    sonde__free(g->dev);
    sonde__free(g->kernels);
    memset(g, 0, sizeof *g);
}

/* Causes by name, grown as they come. */
typedef struct causes {
    strmap at;
    sa_gpu_cause *v;
    size_t n, cap, cap_last;
    size_t interval;       /* the host wait being explained (1-based) */
    size_t *last;          /* per cause: the last interval it had a part in */
} causes;

/* s seconds (samples samples) more for what in the host wait being explained; a section's debit
 * (s < 0: its children's part) is no part of its own in it. 0, or -1 out of memory. */
static int cause_add(causes *c, const char *what, int sample, double s, uint64_t samples)
{
    int k = strmap_get(&c->at, what);
    if (k < 0) {
        if (SONDE_GROW(c->v, c->n, c->cap) || SONDE_GROW(c->last, c->n, c->cap_last))
            return -1;
        char *copy = sonde__strdup(what);
        if (!copy || strmap_put(&c->at, what, (int)c->n)) {
            sonde__free(copy);
            return -1;
        }
        c->v[c->n] = (sa_gpu_cause){copy, sample, 0, 0, 0};
        c->last[c->n] = 0;
        k = (int)c->n++;
    }
    c->v[k].idle_s += s;
    c->v[k].samples += samples;
    if ((s > 0 || samples) && c->last[k] != c->interval) {
        c->last[k] = c->interval;
        c->v[k].intervals++;
    }
    return 0;
}

/* The first of elements [lo, hi) of an array (each size bytes from base, in the order of the
 * int64_t time at offset off in each) whose time is at or after t. */
static size_t first_at(const void *base, size_t size, size_t off, size_t lo, size_t hi, int64_t t)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t at;
        memcpy(&at, (const char *)base + mid * size + off, sizeof at);
        if (at < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first span of [lo, hi) (one thread's: spans are grouped by thread, in start order) that
 * starts at or after t. */
static size_t span_at(const sm_model *m, size_t lo, size_t hi, int64_t t)
{
    return first_at(m->spans, sizeof *m->spans, offsetof(sm_span, start_ns), lo, hi, t);
}

static int64_t overlap(int64_t a, int64_t b, int64_t lo, int64_t hi)
{
    int64_t x = a > lo ? a : lo, y = b < hi ? b : hi;
    return y > x ? y - x : 0;
}

/* A thread's sections (spans [lo, hi)) in [a, b), each credited with its own part of it (its
 * overlap less its children's: the innermost open explains each moment), the rest "(no
 * section)". The spans
 * that overlap are those open at a (the span open last before a and its ancestors) and those
 * that start in [a, b). */
static int sections_in(const sm_model *m, size_t lo, size_t hi, int64_t a, int64_t b, causes *c)
{
    size_t first = span_at(m, lo, hi, a), last = span_at(m, lo, hi, b);
    int64_t covered = 0;
    for (size_t i = first; i < last; i++) { /* starting within: credited, their parents debited */
        const sm_span *s = &m->spans[i];
        int64_t o = overlap(a, b, s->start_ns, s->end_ns);
        if (cause_add(c, m->sites[s->site].name, 0, (double)o / 1e9, 0))
            return -1;
        if (s->parent >= 0) {
            const sm_span *p = &m->spans[s->parent];
            if (cause_add(c, m->sites[p->site].name, 0, -(double)o / 1e9, 0))
                return -1;
        } else {
            covered += o;
        }
    }
    /* open at a: the last span started before it, and its ancestors, where still open */
    int64_t chain = first > lo ? (int64_t)first - 1 : -1;
    for (int64_t j = chain; j >= 0; j = m->spans[j].parent) {
        const sm_span *s = &m->spans[j];
        int64_t o = overlap(a, b, s->start_ns, s->end_ns);
        if (!o)
            continue;
        if (cause_add(c, m->sites[s->site].name, 0, (double)o / 1e9, 0))
            return -1;
        if (s->parent >= 0 && overlap(a, b, m->spans[s->parent].start_ns,
                                       m->spans[s->parent].end_ns)) {
            if (cause_add(c, m->sites[m->spans[s->parent].site].name, 0, -(double)o / 1e9, 0))
                return -1;
        } else {
            covered += o;
        }
    }
    return b - a > covered ? cause_add(c, "(no section)", 0, (double)(b - a - covered) / 1e9, 0)
                           : 0;
}

/* The samples of thread tid in [a, b) (the timed samples are in time order), each credited to
 * its innermost Python frame, else its innermost function. */
static int samples_in(const sm_profile *p, uint32_t tid, int64_t a, int64_t b, causes *c)
{
    size_t lo = first_at(p->timed, sizeof *p->timed, offsetof(sm_psample, t_ns), 0,
                         p->n_timed, a);
    double period = p->hz ? 1.0 / p->hz : 0;
    char what[512];
    for (size_t i = lo; i < p->n_timed && p->timed[i].t_ns < b; i++) {
        const sm_psample *x = &p->timed[i];
        if (x->tid != tid || x->stack >= p->n_stacks || !p->first)
            continue;
        size_t f0 = p->first[x->stack], f1 = p->first[x->stack + 1], at = f1;
        for (size_t k = f1; k-- > f0 && at == f1;)
            if (p->funcs[p->frames[k]].python)
                at = k;
        if (f1 == f0)
            continue;
        const sm_func *fn = &p->funcs[p->frames[at == f1 ? f1 - 1 : at]];
        if (fn->python)
            snprintf(what, sizeof what, "%s (%s)", fn->name, fn->object ? fn->object : "?");
        else
            snprintf(what, sizeof what, "%s", fn->name);
        if (cause_add(c, what, 1, period, 1))
            return -1;
    }
    return 0;
}

typedef struct entry_ref {
    uint32_t device, stream;
    int64_t start, end;
    size_t index;
} entry_ref;

static int cmp_entry(const void *x, const void *y)
{
    const entry_ref *a = x, *b = y;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The launch delays of device d's entries [i0, i1) of v whose runtime call was seen. */
static int launch_delays(const sm_model *m, const entry_ref *v, size_t i0, size_t i1,
                         sa_gpu_device *d)
{
    double *x = sonde__malloc((i1 - i0 + 1) * sizeof *x); /* seconds */
    if (!x)
        return -1;
    size_t n = 0;
    double sum = 0;
    for (size_t i = i0; i < i1; i++) {
        const sm_gpu *e = &m->gpu[v[i].index];
        if (e->launch_ns < 0 || e->start_ns < e->launch_ns)
            continue;
        d->slow_launches += e->start_ns - e->launch_ns > SA_GPU_LAUNCH_DELAY_NS;
        sum += x[n++] = (double)(e->start_ns - e->launch_ns) / 1e9;
    }
    sonde__sort_doubles(x, n); /* percentiles as every report takes them (sm_percentile) */
    d->launches = n;
    d->launch_mean_s = n ? sum / (double)n : 0;
    d->launch_p50_s = sm_percentile(x, n, 50);
    d->launch_p99_s = sm_percentile(x, n, 99);
    d->launch_max_s = n ? x[n - 1] : 0;
    sonde__free(x);
    return 0;
}

/* Each step's breakdown of device d from its busy and compute unions (the run's steps). */
static int device_steps(const sm_model *m, const ivs *all, const ivs *comp, sa_gpu_device *d)
{
    if (!m->n_steps)
        return 0;
    if (!(d->steps = sonde__calloc(m->n_steps, sizeof *d->steps)))
        return -1;
    for (size_t i = 0; i < m->n_steps; i++) {
        const sm_step *s = &m->steps[i];
        int64_t span = s->t_ns > s->start_ns ? s->t_ns - s->start_ns : 0;
        int64_t busy = sa_iv_overlap(all->v, all->n, s->start_ns, s->t_ns);
        int64_t c = sa_iv_overlap(comp->v, comp->n, s->start_ns, s->t_ns);
        d->steps[d->n_steps++] = (sa_gpu_step){s->number, (double)span / 1e9,
                                               (double)(span - busy) / 1e9, (double)c / 1e9,
                                               (double)(busy - c) / 1e9};
    }
    return 0;
}

/* Device d's temporal breakdown, from its entries [i0, i1) of v (sorted by stream, start). */
static int device_breakdown(const sm_model *m, const entry_ref *v, size_t i0, size_t i1,
                            sa_gpu_device *d)
{
    ivs all = {0}, comp = {0}, comm = {0}, mem = {0};
    int64_t first = INT64_MAX, last = INT64_MIN;
    int rc = 0;
    for (size_t i = i0; i < i1 && !rc; i++) {
        int kind = sa_gpu_kind(&m->gpu[v[i].index]);
        first = v[i].start < first ? v[i].start : first;
        last = v[i].end > last ? v[i].end : last;
        rc = sa_iv_add(&all, v[i].start, v[i].end) ||
             sa_iv_add(kind == SA_GPU_COMPUTE ? &comp : kind == SA_GPU_COMM ? &comm : &mem,
                       v[i].start, v[i].end);
    }
    if (!rc) {
        sa_iv_union(&all);
        sa_iv_union(&comp);
        sa_iv_union(&comm);
        sa_iv_union(&mem);
        int64_t span = last > first ? last - first : 0, busy = sa_iv_total(&all);
        d->entries = i1 - i0;
        d->span_s = (double)span / 1e9;
        d->idle_s = (double)(span - busy) / 1e9;
        d->compute_s = (double)sa_iv_total(&comp) / 1e9;
        d->non_compute_s = (double)(busy - sa_iv_total(&comp)) / 1e9;
        d->comm_s = (double)sa_iv_total(&comm) / 1e9;
        d->memory_s = (double)sa_iv_total(&mem) / 1e9;
        d->comm_overlap_s = (double)sa_iv_meet(&comm, &comp) / 1e9;
        rc = device_steps(m, &all, &comp, d) || launch_delays(m, v, i0, i1, d);
    }
    sonde__free(all.v);
    sonde__free(comp.v);
    sonde__free(comm.v);
    sonde__free(mem.v);
    return rc ? -1 : 0;
}

/* The idle gaps of the streams of device d (entries [i0, i1) of v), classified as HTA does;
 * the host waits at least g->min_idle_ns explained by the launching thread's sections and
 * samples. */
static int device_idle(const sm_model *m, const entry_ref *v, size_t i0, size_t i1,
                       const size_t *th_lo, const size_t *th_hi, sa_gpu *g, sa_gpu_device *d,
                       causes *c)
{
    for (size_t i = i0 + 1; i < i1; i++) {
        if (v[i].stream != v[i - 1].stream)
            continue; /* a stream's first entry: no gap before it */
        int64_t prev_end = v[i - 1].end, gap = v[i].start - prev_end; /* HTA: the entry before */
        if (gap <= 0)
            continue;
        const sm_gpu *e = &m->gpu[v[i].index];
        int host = e->launch_ns >= 0 && e->launch_ns > prev_end;
        if (!host) {
            *(gap < g->kernel_delay_ns ? &d->kernel_wait_s : &d->other_wait_s) +=
                (double)gap / 1e9;
            continue;
        }
        d->host_wait_s += (double)gap / 1e9;
        if (gap < g->min_idle_ns || e->launch_thread < 0 ||
            (size_t)e->launch_thread >= m->n_threads)
            continue;
        g->waits++;
        g->waits_s += (double)gap / 1e9;
        c->interval = g->waits;
        uint32_t th = (uint32_t)e->launch_thread;
        if (sections_in(m, th_lo[th], th_hi[th], prev_end, v[i].start, c) ||
            samples_in(&m->profile, m->threads[th].tid, prev_end, v[i].start, c))
            return -1;
    }
    return 0;
}

typedef struct kref {
    const char *name;
    double dur;                /* seconds */
    int kind;
} kref;

static int cmp_kref(const void *x, const void *y)
{
    const kref *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    return c ? c : sonde__cmp_double(&a->dur, &b->dur);
}

static int cmp_kernel_total(const void *x, const void *y)
{
    const sa_gpu_kernel *a = x, *b = y;
    if (a->total_s != b->total_s)
        return a->total_s > b->total_s ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The kernels by name: calls, total, mean, median, longest; by total, most first. */
static int kernels_of(const sm_model *m, sa_gpu *g)
{
    kref *v = sonde__malloc((m->n_gpu + 1) * sizeof *v);
    double *dur = sonde__malloc((m->n_gpu + 1) * sizeof *dur); /* v's, in v's order */
    if (!v || !dur) {
        sonde__free(v);
        sonde__free(dur);
        return -1;
    }
    size_t n = 0, groups = 0;
    for (size_t i = 0; i < m->n_gpu; i++)
        if (m->gpu[i].kind == SM_GPU_KERNEL && m->gpu[i].name)
            v[n++] = (kref){m->gpu[i].name, (double)(m->gpu[i].end_ns - m->gpu[i].start_ns) / 1e9,
                            sa_gpu_kind(&m->gpu[i])};
    sonde__sort(v, n, sizeof *v, cmp_kref);
    for (size_t i = 0; i < n; i++)
        dur[i] = v[i].dur;
    for (size_t i = 0; i < n; i++)
        groups += !i || strcmp(v[i].name, v[i - 1].name);
    g->kernels = sonde__calloc(groups + 1, sizeof *g->kernels);
    for (size_t i = 0; g->kernels && i < n;) {
        size_t j = i;
        double total = 0;
        while (j < n && !strcmp(v[j].name, v[i].name))
            total += v[j++].dur;
        size_t c = j - i;
        g->kernels[g->n_kernels++] = (sa_gpu_kernel){v[i].name, v[i].kind, c, total,
                                                     total / (double)c,
                                                     sm_percentile(dur + i, c, 50), dur[j - 1]};
        i = j;
    }
    sonde__free(v);
    sonde__free(dur);
    if (!g->kernels)
        return -1;
    sonde__sort(g->kernels, g->n_kernels, sizeof *g->kernels, cmp_kernel_total);
    return 0;
}

static int cmp_cause(const void *x, const void *y)
{
    const sa_gpu_cause *a = x, *b = y;
    if (a->sample != b->sample)
        return a->sample - b->sample;
    if (a->idle_s != b->idle_s)
        return a->idle_s > b->idle_s ? -1 : 1;
    return strcmp(a->what, b->what);
}

int sa_gpu_of(const sm_model *m, int64_t kernel_delay_ns, int64_t min_idle_ns, sa_gpu *out)
{
    memset(out, 0, sizeof *out);
    out->kernel_delay_ns = kernel_delay_ns;
    out->min_idle_ns = min_idle_ns;
    if (!m->n_gpu)
        return 0;
    entry_ref *v = sonde__malloc(m->n_gpu * sizeof *v);
    size_t *th_lo = sonde__calloc(m->n_threads + 1, sizeof *th_lo);
    size_t *th_hi = sonde__calloc(m->n_threads + 1, sizeof *th_hi);
    causes c;
    memset(&c, 0, sizeof c);
    strmap_init(&c.at);
    int rc = v && th_lo && th_hi ? 0 : -1;
    for (size_t i = 0; i < m->n_spans && !rc; i++) { /* each thread's run of spans */
        uint32_t t = m->spans[i].thread;
        if (t < m->n_threads && th_hi[t] == 0)
            th_lo[t] = i;
        if (t < m->n_threads)
            th_hi[t] = i + 1;
    }
    for (size_t i = 0; i < m->n_gpu && !rc; i++)
        v[i] = (entry_ref){m->gpu[i].device, m->gpu[i].stream, m->gpu[i].start_ns,
                           m->gpu[i].end_ns, i};
    if (!rc)
        sonde__sort(v, m->n_gpu, sizeof *v, cmp_entry);
    for (size_t i = 0; i < m->n_gpu && !rc;) {
        size_t j = i;
        while (j < m->n_gpu && v[j].device == v[i].device)
            j++;
        sa_gpu_device *g = sonde__realloc(out->dev, (out->n_dev + 1) * sizeof *g);
        if (!g) {
            rc = -1;
            break;
        }
        out->dev = g;
        sa_gpu_device *d = &out->dev[out->n_dev++];
        memset(d, 0, sizeof *d);
        d->device = v[i].device;
        rc = device_breakdown(m, v, i, j, d) || device_idle(m, v, i, j, th_lo, th_hi, out, d, &c);
        i = j;
    }
    if (!rc)
        rc = kernels_of(m, out);
    if (!rc) { /* a section debited by its children to nothing explains nothing */
        size_t k = 0;
        for (size_t i = 0; i < c.n; i++) {
            if (c.v[i].sample || c.v[i].idle_s > 1e-12)
                c.v[k++] = c.v[i];
            else
                sonde__free(c.v[i].what);
        }
        c.n = k;
        sonde__sort(c.v, c.n, sizeof *c.v, cmp_cause);
        out->causes = c.v;
        out->n_causes = c.n;
        c.v = NULL;
    }
    for (size_t i = 0; c.v && i < c.n; i++)
        sonde__free(c.v[i].what);
    sonde__free(c.v);
    sonde__free(c.last);
    strmap_free(&c.at);
    sonde__free(v);
    sonde__free(th_lo);
    sonde__free(th_hi);
    if (rc)
        sa_gpu_free(out);
    return rc;
}
