/* stats.c - the statistics every exporter prints: per section name (count, total, self, mean,
 * min, max, stddev, percentiles exact or from its quantile sketch, throughput, FLOPs), the
 * resources sampled while each ran, the hot functions' counted calls folded in, steps and the
 * run's totals. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/strmap.h"
#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

#define GROW SONDE_GROW

double sm_percentile(const double *v, size_t n, double pct)
{
    if (!n)
        return 0;
    double pos = pct / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    if (lo >= n - 1)
        return v[n - 1];
    double f = pos - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* First sample index with t >= t0 (n when none). */
static size_t lower(const sm_counter *c, int64_t t0)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->t_ns[mid] < t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const sm_counter *counter_named(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_counters; i++)
        if (m->counters[i].system && !strcmp(m->counters[i].name, name))
            return &m->counters[i];
    return NULL;
}

/* Per section name, from the samples that fall inside its instances: mean process CPU, RSS at
 * begin and end, mean GPU utilization, peak GPU memory. Nothing on the hot path: all here. */
int sm__site_stats(const sm_model *m, const sm_stat *stats, size_t n_stats, sm_spans_sel sel,
                   int *site_stat)
{
    strmap by_name; /* a hash of the names: 20,000 names made sites x stats string compares */
    strmap_init(&by_name);
    for (size_t k = 0; k < n_stats; k++)
        if (strmap_get(&by_name, stats[k].name) < 0 && strmap_put(&by_name, stats[k].name, (int)k)) {
            strmap_free(&by_name);
            return -1;
        }
    for (size_t q = 0, nq = sel.only ? sel.n_only : m->n_sites; q < nq; q++) {
        uint32_t i = sel.only ? m->spans[sel.only[q]].site : (uint32_t)q;
        site_stat[i] = strmap_get(&by_name, m->sites[i].name);
    }
    strmap_free(&by_name);
    return 0;
}

void sm_resources(const sm_model *m, sm_stat *stats, size_t n_stats, sm_spans_sel sel)
{
    const sm_counter *cpu = counter_named(m, "process cpu %"), *rss = counter_named(m, "rss MiB");
    const sm_counter *util[64], *mem[64];
    size_t nu = 0, nm = 0;
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        unsigned g;
        char tail[32];
        if (!c->system || sscanf(c->name, "gpu%u %31[^\n]", &g, tail) != 2)
            continue;
        if (!strcmp(tail, "util %") && nu < 64)
            util[nu++] = c;
        else if (!strcmp(tail, "memory MiB") && nm < 64)
            mem[nm++] = c;
    }
    double *acc = sonde__calloc(n_stats ? n_stats * 8 : 1, sizeof *acc);
    int *site_stat = sonde__malloc((m->n_sites ? m->n_sites : 1) * sizeof *site_stat);
    if (!acc || !site_stat) {
        sonde__free(acc);
        sonde__free(site_stat);
        return;
    }
    if (sm__site_stats(m, stats, n_stats, sel, site_stat)) { /* each site's entry, by name */
        sonde__free(acc);
        sonde__free(site_stat);
        return;
    }
    /* acc[8k + ...]: cpu sum, cpu n, rss begin sum, rss end sum, rss instances, util sum,
     * util n, gpu mem peak */
    for (size_t k = 0; k < n_stats; k++)
        acc[8 * k + 7] = NAN;
    for (size_t q = 0, nq = sm_sel_n(m, sel); q < nq; q++) {
        const sm_span *s = &m->spans[sm_sel_at(sel, q)];
        int k = site_stat[s->site];
        if (k < 0)
            continue;
        double *a = &acc[8 * k];
        if (cpu)
            for (size_t j = lower(cpu, s->start_ns); j < cpu->n && cpu->t_ns[j] <= s->end_ns; j++) {
                a[0] += cpu->v[j];
                a[1]++;
            }
        if (rss) {
            size_t j = lower(rss, s->start_ns);
            if (j < rss->n && rss->t_ns[j] <= s->end_ns) { /* a sample inside */
                size_t jb = j > 0 ? j - 1 : j;           /* the last one before it began */
                size_t je = lower(rss, s->end_ns);       /* the first one after it ended */
                if (je >= rss->n)
                    je = rss->n - 1;
                a[2] += rss->v[jb];
                a[3] += rss->v[je];
                a[4]++;
            }
        }
        for (size_t g = 0; g < nu; g++)
            for (size_t j = lower(util[g], s->start_ns); j < util[g]->n && util[g]->t_ns[j] <= s->end_ns; j++) {
                a[5] += util[g]->v[j];
                a[6]++;
            }
        for (size_t g = 0; g < nm; g++)
            for (size_t j = lower(mem[g], s->start_ns); j < mem[g]->n && mem[g]->t_ns[j] <= s->end_ns; j++)
                if (isnan(a[7]) || mem[g]->v[j] > a[7])
                    a[7] = mem[g]->v[j];
    }
    for (size_t k = 0; k < n_stats; k++) {
        const double *a = &acc[8 * k];
        sm_stat *x = &stats[k];
        x->res_samples = (uint64_t)(a[1] > a[4] ? a[1] : a[4]);
        x->res_cpu_mean = a[1] ? a[0] / a[1] : NAN;
        x->res_rss_begin = a[4] ? a[2] / a[4] : NAN;
        x->res_rss_end = a[4] ? a[3] / a[4] : NAN;
        x->res_rss_delta = a[4] ? (a[3] - a[2]) / a[4] : NAN;
        x->res_gpu_util_mean = a[6] ? a[5] / a[6] : NAN;
        x->res_gpu_mem_peak = a[7];
    }
    sonde__free(acc);
    sonde__free(site_stat);
}

/* ------------------------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------------------------- */
static int cmp_stat(const void *a, const void *b)
{
    const sm_stat *x = a, *y = b;
    if (x->total_s != y->total_s)
        return x->total_s > y->total_s ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct agg_args {
    const char *section, *calls, *total_s, *sum_s, *hidden_s;
} agg_args;

static void agg_arg(const char *key, const char *value, void *ctx)
{
    agg_args *a = ctx;
    if (!strcmp(key, "section"))
        a->section = value;
    else if (!strcmp(key, "calls"))
        a->calls = value;
    else if (!strcmp(key, "total_s"))
        a->total_s = value;
    else if (!strcmp(key, "sum_s"))
        a->sum_s = value;
    else if (!strcmp(key, "hidden_s"))
        a->hidden_s = value;
}

/* s as a finite duration >= 0 into *v: 0, or -1 when it is not one. NULL gives dflt. */
static int agg_seconds(const char *s, double dflt, double *v)
{
    char *e;
    *v = s ? strtod(s, &e) : dflt;
    return (s && (e == s || *e)) || !(*v >= 0) || !isfinite(*v) ? -1 : 0;
}

/* Folds the SM_AGGREGATED_EVENT instants into the run's statistics: their calls into count and
 * aggregated, total_s (the outermost calls' time) into total, sum_s (every call's time; total_s
 * when absent) into self and mean; a name with no recorded instance gets a statistic of its own
 * (its mean in every order statistic). hidden_s, the time accounted inside the name's calls by
 * other statistics, is taken out of its self time. 0, or -1 when out of memory. An event with
 * arguments that do not parse is
 * left alone (it stays an event). */
int sm__fold_aggregated(sm_model *m)
{
    int any = 0, rc = 0;
    strmap by_name; /* stat name -> index, built at the first event */
    strmap_init(&by_name);
    for (size_t i = 0; i < m->n_instants && !rc; i++) {
        if (strcmp(sm_str(m, m->instants[i].name), SM_AGGREGATED_EVENT) != 0)
            continue;
        if (!any) {
            for (size_t k = 0; k < m->n_stats && !rc; k++)
                rc = strmap_put(&by_name, m->stats[k].name, (int)k);
            any = 1;
            if (rc)
                break;
        }
        agg_args a = {0};
        sm_each_meta(m, m->instants[i].args, agg_arg, &a);
        char *e1;
        unsigned long long calls = a.calls ? strtoull(a.calls, &e1, 10) : 0;
        double total, sum, hidden;
        if (!a.section || !a.calls || *e1 || !a.total_s || agg_seconds(a.total_s, 0, &total) ||
            agg_seconds(a.sum_s, total, &sum) || agg_seconds(a.hidden_s, 0, &hidden) ||
            (!calls && !(hidden > 0)))
            continue;
        int k = strmap_get(&by_name, a.section);
        sm_stat *x = k >= 0 ? &m->stats[k] : NULL;
        if (!x && !calls)
            continue; /* time hidden in calls of a name the run did not keep */
        if (!x) {
            sm_stat *st = sonde__realloc(m->stats, (m->n_stats + 1) * sizeof *st);
            if (!st) {
                rc = -1;
                break;
            }
            m->stats = st;
            x = &st[m->n_stats];
            memset(x, 0, sizeof *x);
            if (!(x->name = sonde__strdup(a.section)) ||
                strmap_put(&by_name, a.section, (int)m->n_stats) != 0) {
                sonde__free(x->name);
                rc = -1;
                break;
            }
            x->unit = m->unit;
            x->threads = 1;
            m->n_stats++;
            x->min_s = x->max_s = sum / (double)calls;
#define AT_MEAN(f, kind, label, table, q) if (q) x->f = (SONDE__STAT_##kind)(sum / (double)calls);
            SONDE_SECTION_STATS(AT_MEAN)
#undef AT_MEAN
            x->res_cpu_mean = x->res_rss_begin = x->res_rss_end = x->res_rss_delta = NAN;
            x->res_gpu_util_mean = x->res_gpu_mem_peak = NAN;
        }
        if (calls) {
            double all = x->mean_s * (double)x->count + sum;
            x->count += calls;
            x->aggregated += calls;
            x->total_s += total;
            x->self_s += sum;
            x->mean_s = all / (double)x->count;
        }
        x->self_s = x->self_s > hidden ? x->self_s - hidden : 0;
    }
    strmap_free(&by_name);
    if (rc)
        return -1;
    if (any && m->n_stats) {
        double run_s = (double)m->duration_ns / 1e9;
        for (size_t k = 0; k < m->n_stats; k++)
            m->stats[k].share = run_s > 0 ? m->stats[k].total_s / run_s : 0;
        sonde__sort(m->stats, m->n_stats, sizeof *m->stats, cmp_stat);
    }
    return 0;
}

void sm_stats_free(sm_stat *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        sonde__free(s[i].name);
        if (s[i].sketch)
            sm_sketch_free(s[i].sketch);
        sonde__free(s[i].sketch);
    }
    sonde__free(s);
}

static int cmp_giv(const void *a, const void *b)
{
    const sm_giv *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->iv.s < y->iv.s ? -1 : x->iv.s > y->iv.s;
}

/* The sink's groups: the sites sel's spans name (every site when sel is every span) grouped by
 * name, each group named as its lowest site. For some spans only (a session's) the work is
 * theirs, not the model's every site: site_group is then set for their sites alone. */
static int sink_groups(sm_statsink *k, const sm_model *m, sm_spans_sel sel)
{
    strmap names;
    strmap_init(&names);
    int rc = -1;
    size_t nq = sel.only ? sel.n_only : m->n_sites;
    uint32_t *lowest = NULL; /* each group's lowest site */
    size_t cap = 0;
    for (size_t q = 0; q < nq; q++) {
        uint32_t i = sel.only ? m->spans[sel.only[q]].site : (uint32_t)q;
        int g = strmap_get(&names, m->sites[i].name);
        if (g < 0) {
            g = (int)k->n_groups;
            if (strmap_put(&names, m->sites[i].name, g) || SONDE_GROW(lowest, k->n_groups, cap))
                goto out;
            lowest[k->n_groups++] = i;
        } else if (i < lowest[g]) {
            lowest[g] = i;
        }
        k->site_group[i] = g;
    }
    k->g = sonde__calloc(k->n_groups ? k->n_groups : 1, sizeof *k->g);
    if (!k->g)
        goto out;
    for (size_t g = 0; g < k->n_groups; g++)
        k->g[g].name = m->sites[lowest[g]].name;
    rc = 0;
out:
    sonde__free(lowest);
    strmap_free(&names);
    return rc;
}

int sm__sink_init(sm_statsink *k, const sm_model *m)
{
    return sm__sink_init_sel(k, m, SM_ALL_SPANS);
}

int sm__sink_init_sel(sm_statsink *k, const sm_model *m, sm_spans_sel sel)
{
    memset(k, 0, sizeof *k);
    k->site_group = sonde__malloc((m->n_sites ? m->n_sites : 1) * sizeof *k->site_group);
    if (!k->site_group || sink_groups(k, m, sel))
        goto fail;
    for (size_t g = 0; g < k->n_groups; g++) {
        k->g[g].st.min_depth = 1 << 30;
        k->g[g].last_thread = UINT32_MAX;
    }
    return 0;
fail:
    sm__sink_free(k);
    return -1;
}

void sm__sink_free(sm_statsink *k)
{
    for (size_t g = 0; k->g && g < k->n_groups; g++) {
        sonde__free(k->g[g].dur);
        if (k->g[g].st.sketch)
            sm_sketch_free(k->g[g].st.sketch);
        sonde__free(k->g[g].st.sketch);
    }
    sonde__free(k->g);
    sonde__free(k->site_group);
    sonde__free(k->iv);
    memset(k, 0, sizeof *k);
}

/* Past SM_SKETCH_AT instances a group keeps its sketch and its integer sums, not its
 * durations. */
static void to_running(sm_sgroup *x)
{
    sonde__free(x->dur);
    x->dur = NULL;
    x->n_dur = x->cap_dur = 0;
    x->st.sketched = 1;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static sm_u128 sat_add128(sm_u128 a, sm_u128 b)
{
    return a > ~(sm_u128)0 - b ? ~(sm_u128)0 : a + b;
}

int sm__sink_add(sm_statsink *k, const sm_model *m, const sm_span *s, int outermost)
{
    sm_sgroup *x = &k->g[k->site_group[s->site]];
    sm_stat *st = &x->st;
    int64_t ns = s->end_ns - s->start_ns;
    if (!st->sketch) { /* every group's: the JSON report carries it for merging */
        if (!(st->sketch = sonde__malloc(sizeof *st->sketch)))
            return -1;
        sm_sketch_init(st->sketch);
    }
    if (sm_sketch_add(st->sketch, ns))
        return -1;
    st->count++;
    if (!st->sketched) {
        if (GROW(x->dur, x->n_dur, x->cap_dur))
            return -1;
        x->dur[x->n_dur++] = (double)ns / 1e9;
        if (x->n_dur > SM_SKETCH_AT)
            to_running(x);
    }
    uint64_t u = ns > 0 ? (uint64_t)ns : 0;
    x->sum_ns = sat_add(x->sum_ns, u);
    x->sumsq = sat_add128(x->sumsq, (sm_u128)u * u);
    if (x->last_thread != s->thread) { /* fed thread by thread */
        x->last_thread = s->thread;
        st->threads++;
    }
    if (outermost)
        x->total_ns += ns;
    x->self_ns += ns - s->child_ns;
    if (s->depth < st->min_depth)
        st->min_depth = s->depth;
    const sm_span_x *sx = sm_span_extra(m, s);
    if (sx == &sm_span_x_none)
        return 0;
    st->units += sx->units;
    st->units_s += sx->units_s; /* explicit seconds; own durations are added at the end */
    if (sx->units > 0 && !st->unit)
        st->unit = sm__unit_name(m, sx->unit);
    int g = k->site_group[s->site];
    if (sx->units > 0 && sx->own_dur_units) {
        if (GROW(k->iv, k->n_iv, k->cap_iv))
            return -1;
        k->iv[k->n_iv++] = (sm_giv){g, 0, {s->start_ns, s->end_ns}};
    }
    if (sx->flops > 0) {
        st->flops += sx->flops;
        if (GROW(k->iv, k->n_iv, k->cap_iv))
            return -1;
        k->iv[k->n_iv++] = (sm_giv){g, 1, {s->start_ns, s->end_ns}};
    }
    return 0;
}

int sm__sink_merge(sm_statsink *into, sm_statsink *from)
{
    for (size_t g = 0; g < into->n_groups; g++) {
        sm_sgroup *x = &into->g[g], *y = &from->g[g];
        sm_stat *a = &x->st, *b = &y->st;
        if (!b->count)
            continue;
        if (!a->sketch) {
            a->sketch = b->sketch;
            b->sketch = NULL;
        } else if (b->sketch && sm_sketch_merge(a->sketch, b->sketch)) {
            return -1;
        }
        if (!a->sketched && !b->sketched && a->count + b->count <= SM_SKETCH_AT) {
            if (SONDE_RESERVE(x->dur, x->n_dur, y->n_dur, x->cap_dur))
                return -1;
            memcpy(x->dur + x->n_dur, y->dur, y->n_dur * sizeof *y->dur);
            x->n_dur += y->n_dur;
        } else if (!a->sketched) {
            to_running(x);
        }
        a->count += b->count;
        a->threads += b->threads;
        if (b->min_depth < a->min_depth)
            a->min_depth = b->min_depth;
        a->units += b->units;
        a->units_s += b->units_s;
        a->flops += b->flops;
        if (!a->unit)
            a->unit = b->unit;
        x->sum_ns = sat_add(x->sum_ns, y->sum_ns);
        x->sumsq = sat_add128(x->sumsq, y->sumsq);
        x->total_ns += y->total_ns;
        x->self_ns += y->self_ns;
        x->last_thread = y->last_thread;
    }
    for (size_t i = 0; i < from->n_iv; i++) {
        if (GROW(into->iv, into->n_iv, into->cap_iv))
            return -1;
        into->iv[into->n_iv++] = from->iv[i];
    }
    return 0;
}

/* The list's percentiles from the stat's sketch (within SM_SKETCH_ALPHA). */
static void sketch_percentiles(sm_stat *r)
{
#define FROM_SKETCH(f, kind, label, table, q)                                                     \
    if (q)                                                                                         \
        r->f = (SONDE__STAT_##kind)(sm_sketch_quantile(r->sketch, q / 100.0) / 1e9);
    SONDE_SECTION_STATS(FROM_SKETCH)
#undef FROM_SKETCH
    r->sketched = 1;
}

void sm_stat_percentiles(sm_stat *s, const double *sorted, size_t n)
{
#define EXACT(f, kind, label, table, q) if (q) s->f = (SONDE__STAT_##kind)sm_percentile(sorted, n, q);
    SONDE_SECTION_STATS(EXACT)
#undef EXACT
}

int sm__sink_finish(sm_statsink *k, const sm_model *m, double share_of_s, sm_stat **out,
                    size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    /* Wall time of each group's instances: with throughput over their own duration (kind 0),
     * with FLOPs (kind 1). */
    if (k->n_iv) {
        sonde__sort(k->iv, k->n_iv, sizeof *k->iv, cmp_giv);
        sm_iv *tmp = sonde__malloc(k->n_iv * sizeof *tmp);
        if (!tmp)
            return -1;
        for (size_t i = 0; i < k->n_iv;) {
            size_t j = i, n = 0;
            for (; j < k->n_iv && k->iv[j].g == k->iv[i].g && k->iv[j].kind == k->iv[i].kind; j++)
                tmp[n++] = k->iv[j].iv;
            double u = sm__union_s(tmp, n);
            sm_stat *x = &k->g[k->iv[i].g].st;
            if (k->iv[i].kind == 0)
                x->units_s += u;
            else
                x->flops_time_s = u;
            i = j;
        }
        sonde__free(tmp);
    }
    size_t n = 0;
    for (size_t g = 0; g < k->n_groups; g++)
        n += k->g[g].st.count > 0;
    if (!n)
        return 0;
    sm_stat *st = sonde__calloc(n, sizeof *st);
    if (!st)
        return -1;
    size_t o = 0;
    for (size_t g = 0; g < k->n_groups; g++) { /* the names that have instances */
        sm_sgroup *x = &k->g[g];
        sm_stat r = x->st;
        if (!r.count)
            continue;
        size_t c = (size_t)r.count;
        r.total_s = (double)x->total_ns / 1e9;
        r.self_s = (double)x->self_ns / 1e9;
        if (r.sketched) { /* from the integer sums and the sketch */
            sm_u128 sq = (sm_u128)x->sum_ns * x->sum_ns / c; /* sum^2 / n <= the squares' sum */
            r.mean_s = (double)x->sum_ns / (double)c / 1e9;
            r.stddev_s = sqrt((double)(x->sumsq > sq ? x->sumsq - sq : 0) / (double)c) / 1e9;
            r.min_s = (double)r.sketch->min_ns / 1e9;
            r.max_s = (double)r.sketch->max_ns / 1e9;
            sketch_percentiles(&r);
        } else {
            double *d = x->dur;
            sonde__sort(d, c, sizeof *d, cmp_double);
            double sum = 0, var = 0;
            for (size_t i = 0; i < c; i++)
                sum += d[i];
            r.mean_s = sum / (double)c;
            for (size_t i = 0; i < c; i++)
                var += (d[i] - r.mean_s) * (d[i] - r.mean_s);
            r.stddev_s = sqrt(var / (double)c);
            r.min_s = d[0];
            r.max_s = d[c - 1];
            sm_stat_percentiles(&r, d, c);
        }
        r.share = share_of_s > 0 ? r.total_s / share_of_s : 0;
        if (!r.unit)
            r.unit = m->unit;
        r.name = sonde__strdup(x->name);
        if (!r.name) {
            sm_stats_free(st, o);
            return -1;
        }
        x->st.sketch = NULL; /* r's now */
        st[o++] = r;
    }
    sonde__sort(st, o, sizeof *st, cmp_stat);
    *out = st;
    *n_out = o;
    return 0;
}

int sm__stats(const sm_model *m, sm_spans_sel sel, double share_of_s, sm_stat **out,
              size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!m->n_spans)
        return 0;
    sm_statsink k;
    if (sm__sink_init_sel(&k, m, sel))
        return -1;
    int rc = -1;
    /* A recursive call (inside an earlier instance of the same name on its thread) is already
     * in that instance's total: the total counts the outermost instances. */
    int64_t *open_end = sonde__malloc((k.n_groups ? k.n_groups : 1) * sizeof *open_end);
    uint32_t *open_thread = sonde__malloc((k.n_groups ? k.n_groups : 1) * sizeof *open_thread);
    if (!open_end || !open_thread)
        goto out;
    for (size_t g = 0; g < k.n_groups; g++)
        open_thread[g] = UINT32_MAX;
    for (size_t q = 0, nq = sm_sel_n(m, sel); q < nq; q++) {
        const sm_span *s = &m->spans[sm_sel_at(sel, q)];
        if (s->flags & SM_SPAN_END_LOST)
            continue;
        int g = k.site_group[s->site];
        if (open_thread[g] != s->thread) { /* spans are grouped by thread */
            open_thread[g] = s->thread;
            open_end[g] = INT64_MIN;
        }
        int outermost = s->start_ns >= open_end[g];
        if (outermost)
            open_end[g] = s->end_ns;
        if (sm__sink_add(&k, m, s, outermost))
            goto out;
    }
    rc = sm__sink_finish(&k, m, share_of_s, out, n_out);
out:
    sonde__free(open_end);
    sonde__free(open_thread);
    sm__sink_free(&k);
    return rc;
}

int sm__stats_combine(sm_stat **into, size_t *n_into, sm_stat *from, size_t n_from,
                      const char *unit_from, const char *unit_to, double share_of_s)
{
    for (size_t i = 0; i < n_from; i++) {
        sm_stat *f = &from[i];
        if (f->unit == unit_from)
            f->unit = unit_to; /* the run's unit: from's model is freed after */
        size_t k;
        for (k = 0; k < *n_into && strcmp((*into)[k].name, f->name); k++) {
        }
        if (k == *n_into) { /* a name of its own: moved */
            sm_stat *g = sonde__realloc(*into, (k + 1) * sizeof *g);
            if (!g)
                return -1;
            *into = g;
            g[k] = *f;
            f->name = NULL;
            f->sketch = NULL;
            (*n_into)++;
            continue;
        }
        sm_stat *t = &(*into)[k];
        double n1 = (double)t->count, n2 = (double)f->count, n = n1 + n2;
        if (n > 0) { /* pooled mean and variance of the instances */
            double mean = (n1 * t->mean_s + n2 * f->mean_s) / n;
            double sq = (n1 * (t->stddev_s * t->stddev_s + t->mean_s * t->mean_s) +
                         n2 * (f->stddev_s * f->stddev_s + f->mean_s * f->mean_s)) / n;
            t->mean_s = mean;
            t->stddev_s = sq > mean * mean ? sqrt(sq - mean * mean) : 0;
        }
        t->min_s = f->min_s < t->min_s ? f->min_s : t->min_s;
        t->max_s = f->max_s > t->max_s ? f->max_s : t->max_s;
        t->count += f->count;
        t->aggregated += f->aggregated;
        t->total_s += f->total_s;
        t->self_s += f->self_s;
        t->units += f->units;
        t->units_s += f->units_s;
        t->flops += f->flops;
        t->flops_time_s += f->flops_time_s;
        t->threads += f->threads;
        t->min_depth = f->min_depth < t->min_depth ? f->min_depth : t->min_depth;
        if (!t->unit)
            t->unit = f->unit;
        if (t->sketch && f->sketch) { /* percentiles from the merged sketches */
            if (sm_sketch_merge(t->sketch, f->sketch))
                return -1;
            sketch_percentiles(t);
        }
    }
    for (size_t k = 0; k < *n_into; k++)
        (*into)[k].share = share_of_s > 0 ? (*into)[k].total_s / share_of_s : 0;
    sonde__sort(*into, *n_into, sizeof **into, cmp_stat);
    return 0;
}

sm_stat *sm_stats(const sm_model *m, sm_spans_sel sel, double share_of_s, size_t *n_out)
{
    sm_stat *st;
    return sm__stats(m, sel, share_of_s, &st, n_out) ? NULL : st;
}

int sm_session_spans(const sm_model *m, int32_t **idx, size_t **first)
{
    *idx = sonde__malloc((m->n_spans ? m->n_spans : 1) * sizeof **idx);
    *first = sonde__calloc(m->n_sessions + 2, sizeof **first);
    if (!*idx || !*first) {
        sonde__free(*idx);
        sonde__free(*first);
        *idx = NULL;
        *first = NULL;
        return -1;
    }
    size_t *f = *first; /* counted at f[s + 2], then the starts shifted into f[s + 1] */
    for (size_t i = 0; i < m->n_spans; i++) {
        int32_t s = m->spans[i].session;
        if (s >= 0 && (size_t)s < m->n_sessions)
            f[s + 2]++;
    }
    for (size_t s = 0; s < m->n_sessions; s++)
        f[s + 2] += f[s + 1];
    for (size_t i = 0; i < m->n_spans; i++) { /* in span order: each session's ascending */
        int32_t s = m->spans[i].session;
        if (s >= 0 && (size_t)s < m->n_sessions)
            (*idx)[f[s + 1]++] = (int32_t)i;
    }
    return 0;
}

void sm_steps(const sm_model *m, sm_steps_summary *o)
{
    memset(o, 0, sizeof *o);
    size_t n = m->n_steps;
    if (!n)
        return;
    double *d = sonde__malloc(n * sizeof *d);
    if (!d)
        return;
    size_t k = 0;
    double span = 0;
    for (size_t i = 0; i < n; i++) {
        double dur = sm_step_s(&m->steps[i]);
        if (!m->steps[i].active)
            continue;
        if (!k)
            o->first_s = dur;
        d[k++] = dur;
        span += dur;
    }
    o->count = k + m->steps_active_thinned; /* the rest: over the held steps, a sample */
    if (!k) {
        sonde__free(d);
        return;
    }
    o->mean_s = span / (double)k;
    o->per_s = span > 0 ? (double)k / span : 0;
    sonde__sort(d, k, sizeof *d, cmp_double);
    o->min_s = d[0];
    o->max_s = d[k - 1];
    if (m->steps_exact && m->steps_n) { /* every step's, not the held sample's */
        o->count = m->steps_n;
        o->mean_s = m->steps_sum_s / (double)m->steps_n;
        o->per_s = m->steps_sum_s > 0 ? (double)m->steps_n / m->steps_sum_s : 0;
        o->min_s = m->steps_min_s;
        o->max_s = m->steps_max_s;
    }
    o->p50_s = sm_percentile(d, k, 50);
    o->p90_s = sm_percentile(d, k, 90);
    o->p99_s = sm_percentile(d, k, 99);
    sonde__free(d);
}

void sm_totals(const sm_model *m, double *units, double *units_s, double *flops, double *flops_s)
{
    *units = m->n_rates ? m->rates[0].units : 0;
    *units_s = m->n_rates ? m->rates[0].seconds : 0;
    double f = m->run_flops;
    for (size_t i = 0; i < m->n_sessions; i++)
        f += m->sessions[i].flops;
    size_t with = 0; /* the spans with FLOPs: no more than the extras that have some */
    for (size_t i = 0; i < m->n_span_x; i++)
        with += m->span_x[i].flops > 0;
    sm_iv *iv = with ? sonde__malloc(with * sizeof *iv) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans && with; i++) {
        const sm_span *s = &m->spans[i];
        const sm_span_x *x = sm_span_extra(m, s);
        if (x->flops > 0) {
            f += x->flops;
            if (iv)
                iv[n++] = (sm_iv){s->start_ns, s->end_ns};
        }
    }
    *flops = f;
    *flops_s = iv ? sm__union_s(iv, n) : 0;
    sonde__free(iv);
}

sm_rates sm_stat_rates(const sm_stat *s, double peak)
{
    sm_rates r;
    r.units_per_s = s->units_s > 0 ? s->units / s->units_s : 0;
    r.flops_per_s = s->flops_time_s > 0 ? s->flops / s->flops_time_s : 0;
    r.mfu = peak > 0 ? r.flops_per_s / peak : 0;
    return r;
}
