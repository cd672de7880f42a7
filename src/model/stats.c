/* stats.c - the statistics every exporter prints: per section name (count, total, self, mean,
 * min, max, stddev, percentiles exact or from its quantile sketch, throughput, FLOPs), the
 * resources sampled while each ran, the hot functions' counted calls folded in, steps and the
 * run's totals. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/record.h"
#include "../util/strmap.h"
#include "model_build.h"
#include "../util/alloc.h"

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
void sm_resources(const sm_model *m, sm_stat *stats, size_t n_stats,
                  int (*keep)(const sm_span *, void *), void *ctx)
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
    for (size_t i = 0; i < m->n_sites; i++) { /* each site's entry in stats, by name */
        site_stat[i] = -1;
        for (size_t k = 0; k < n_stats && site_stat[i] < 0; k++)
            if (!strcmp(stats[k].name, m->sites[i].name))
                site_stat[i] = (int)k;
    }
    /* acc[8k + ...]: cpu sum, cpu n, rss begin sum, rss end sum, rss instances, util sum,
     * util n, gpu mem peak */
    for (size_t k = 0; k < n_stats; k++)
        acc[8 * k + 7] = NAN;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        int k = site_stat[s->site];
        if (k < 0 || (keep && !keep(s, ctx)))
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
    const char *section, *calls, *total_s;
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
}

/* Folds the SM_AGGREGATED_EVENT instants into the run's statistics: their calls into count and
 * aggregated, their time into total, self and mean; a name with no recorded instance gets a
 * statistic of its own (its mean in every order statistic). 0, or -1 when out of memory. An
 * event with arguments that do not parse is left alone (it stays an event). */
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
        char *e1, *e2;
        unsigned long long calls = a.calls ? strtoull(a.calls, &e1, 10) : 0;
        double total = a.total_s ? strtod(a.total_s, &e2) : -1;
        if (!a.section || !calls || !a.calls || *e1 || !a.total_s || *e2 || !(total >= 0) ||
            !isfinite(total))
            continue;
        int k = strmap_get(&by_name, a.section);
        sm_stat *x = k >= 0 ? &m->stats[k] : NULL;
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
            x->min_s = x->max_s = x->p50_s = x->p90_s = x->p99_s = total / (double)calls;
            x->res_cpu_mean = x->res_rss_begin = x->res_rss_end = x->res_rss_delta = NAN;
            x->res_gpu_util_mean = x->res_gpu_mem_peak = NAN;
        }
        double sum = x->mean_s * (double)x->count + total;
        x->count += calls;
        x->aggregated += calls;
        x->total_s += total;
        x->self_s += total;
        x->mean_s = sum / (double)x->count;
    }
    strmap_free(&by_name);
    if (rc)
        return -1;
    if (any) {
        double run_s = (double)m->duration_ns / 1e9;
        for (size_t k = 0; k < m->n_stats; k++)
            m->stats[k].share = run_s > 0 ? m->stats[k].total_s / run_s : 0;
        qsort(m->stats, m->n_stats, sizeof *m->stats, cmp_stat);
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

typedef struct gsm_iv {
    int g, kind;
    sm_iv iv;
} gsm_iv;

static int cmp_giv(const void *a, const void *b)
{
    const gsm_iv *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->iv.s < y->iv.s ? -1 : x->iv.s > y->iv.s;
}

sm_stat *sm_stats(const sm_model *m, int (*keep)(const sm_span *, void *), void *ctx,
                  double share_of_s, size_t *n_out)
{
    *n_out = 0;
    if (!m->n_spans)
        return NULL;
    /* Group sites by name. */
    strmap names;
    strmap_init(&names);
    int *site_stat = sonde__malloc(m->n_sites * sizeof *site_stat);
    size_t *count = NULL, *fill = NULL;
    double *dur = NULL;
    double *mean = NULL, *m2 = NULL; /* running mean and squared deviations (Welford) */
    gsm_iv *iv = NULL;
    size_t n_iv = 0;
    uint32_t *last_thread = NULL;
    int64_t *open_end = NULL;
    sm_stat *st = NULL;
    size_t ns = 0;
    if (!site_stat)
        goto fail;
    for (size_t i = 0; i < m->n_sites; i++) {
        int k = strmap_get(&names, m->sites[i].name);
        if (k < 0) {
            k = (int)ns++;
            if (strmap_put(&names, m->sites[i].name, k))
                goto fail;
        }
        site_stat[i] = k;
    }
    st = sonde__calloc(ns, sizeof *st);
    count = sonde__calloc(ns + 1, sizeof *count);
    fill = sonde__calloc(ns + 1, sizeof *fill);
    last_thread = sonde__malloc(ns * sizeof *last_thread);
    open_end = sonde__malloc((ns ? ns : 1) * sizeof *open_end);
    if (!st || !count || !fill || !last_thread || !open_end)
        goto fail;
    size_t with_x = 0; /* kept spans with throughput or FLOPs (an interval each, at most) */
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if ((s->flags & SM_SPAN_END_LOST) || (keep && !keep(s, ctx)))
            continue;
        count[site_stat[s->site]]++;
        with_x += s->x >= 0;
    }
    /* Every duration of a group with at most SM_SKETCH_AT instances (exact percentiles); the
     * larger ones take theirs from their quantile sketch, so memory does not grow with their
     * instances. Every group has a sketch: the JSON report carries it for merging. */
    size_t exact = 0;
    for (size_t k = 0; k < ns; k++) {
        fill[k] = exact; /* offset of the group in dur */
        if (count[k] <= SM_SKETCH_AT)
            exact += count[k];
        st[k].sketched = count[k] > SM_SKETCH_AT;
        if (!count[k])
            continue;
        st[k].sketch = sonde__malloc(sizeof *st[k].sketch); /* every group's: mergeable */
        if (!st[k].sketch)
            goto fail;
        sm_sketch_init(st[k].sketch);
    }
    dur = sonde__malloc((exact ? exact : 1) * sizeof *dur);
    iv = sonde__malloc((2 * with_x + 1) * sizeof *iv);
    mean = sonde__calloc(ns + 1, sizeof *mean);
    m2 = sonde__calloc(ns + 1, sizeof *m2);
    if (!dur || !iv || !mean || !m2)
        goto fail;
    for (size_t k = 0; k < ns; k++) {
        last_thread[k] = UINT32_MAX;
        st[k].min_depth = 1 << 30;
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if ((s->flags & SM_SPAN_END_LOST) || (keep && !keep(s, ctx)))
            continue;
        int k = site_stat[s->site];
        sm_stat *x = &st[k];
        double d = (double)(s->end_ns - s->start_ns) / 1e9;
        x->count++;
        if (sm_sketch_add(x->sketch, s->end_ns - s->start_ns))
            goto fail;
        if (!x->sketched) {
            dur[fill[k]++] = d;
        } else {
            double delta = d - mean[k];
            mean[k] += delta / (double)x->count;
            m2[k] += delta * (d - mean[k]);
        }
        if (last_thread[k] != s->thread) { /* spans are grouped by thread */
            last_thread[k] = s->thread;
            x->threads++;
            open_end[k] = INT64_MIN;
        }
        /* A recursive call (inside an earlier instance of the same name on its thread) is
         * already in that instance's total: the total counts the outermost instances. */
        if (s->start_ns >= open_end[k]) {
            x->total_s += d;
            open_end[k] = s->end_ns;
        }
        x->self_s += d - (double)s->child_ns / 1e9;
        const sm_span_x *sx = sm_span_extra(m, s);
        x->units += sx->units;
        x->units_s += sx->units_s; /* explicit seconds; own durations are added below */
        if (sx->units > 0 && !x->unit)
            x->unit = sm__unit_name(m, sx->unit);
        if (sx->units > 0 && sx->own_dur_units)
            iv[n_iv++] = (gsm_iv){k, 0, {s->start_ns, s->end_ns}};
        if (sx->flops > 0) {
            x->flops += sx->flops;
            iv[n_iv++] = (gsm_iv){k, 1, {s->start_ns, s->end_ns}};
        }
        if (s->depth < x->min_depth)
            x->min_depth = s->depth;
    }
    /* Wall time of each group's instances: with throughput over their own duration (kind 0),
     * with FLOPs (kind 1). */
    if (n_iv) {
        qsort(iv, n_iv, sizeof *iv, cmp_giv);
        sm_iv *tmp = sonde__malloc(n_iv * sizeof *tmp);
        if (!tmp)
            goto fail;
        for (size_t i = 0; i < n_iv;) {
            size_t j = i;
            size_t n = 0;
            for (; j < n_iv && iv[j].g == iv[i].g && iv[j].kind == iv[i].kind; j++)
                tmp[n++] = iv[j].iv;
            double u = sm__union_s(tmp, n);
            sm_stat *x = &st[iv[i].g];
            if (iv[i].kind == 0)
                x->units_s += u;
            else
                x->flops_time_s = u;
            i = j;
        }
        sonde__free(tmp);
    }
    /* Compact to the names that have spans; compute the order statistics. */
    size_t out = 0, off = 0;
    for (size_t k = 0; k < ns; k++) {
        double *d = dur + off;
        if (!st[k].count)
            continue;
        sm_stat x = st[k];
        size_t c = (size_t)x.count;
        st[k].sketch = NULL; /* now x's */
        if (x.sketched) { /* from the running figures and the sketch */
            x.mean_s = mean[k];
            x.stddev_s = sqrt(m2[k] / (double)c);
            x.min_s = (double)x.sketch->min_ns / 1e9;
            x.max_s = (double)x.sketch->max_ns / 1e9;
            x.p50_s = sm_sketch_quantile(x.sketch, 0.50) / 1e9;
            x.p90_s = sm_sketch_quantile(x.sketch, 0.90) / 1e9;
            x.p99_s = sm_sketch_quantile(x.sketch, 0.99) / 1e9;
            x.share = share_of_s > 0 ? x.total_s / share_of_s : 0;
            x.name = NULL;
            if (!x.unit)
                x.unit = m->unit;
            st[out++] = x;
            continue;
        }
        off += c;
        qsort(d, c, sizeof *d, cmp_double);
        double sum = 0;
        for (size_t i = 0; i < c; i++)
            sum += d[i];
        x.mean_s = sum / (double)c;
        double var = 0;
        for (size_t i = 0; i < c; i++)
            var += (d[i] - x.mean_s) * (d[i] - x.mean_s);
        x.stddev_s = sqrt(var / (double)c);
        x.min_s = d[0];
        x.max_s = d[c - 1];
        x.p50_s = sm_percentile(d, c, 50);
        x.p90_s = sm_percentile(d, c, 90);
        x.p99_s = sm_percentile(d, c, 99);
        x.share = share_of_s > 0 ? x.total_s / share_of_s : 0;
        x.name = NULL;
        if (!x.unit)
            x.unit = m->unit;
        st[out++] = x;
    }
    {
        /* Each kept group's name, through the sites that map to it. */
        const char **gname = sonde__calloc(ns, sizeof *gname);
        if (!gname) {
            sm_stats_free(st, out);
            st = NULL;
            goto fail;
        }
        for (size_t i = m->n_sites; i-- > 0;)
            gname[site_stat[i]] = m->sites[i].name;
        for (size_t k = 0, o = 0; k < ns; k++) {
            if (!count[k])
                continue;
            st[o].name = sonde__strdup(gname[k]);
            if (!st[o++].name) {
                sonde__free(gname);
                sm_stats_free(st, out);
                st = NULL;
                goto fail;
            }
        }
        sonde__free(gname);
    }
    qsort(st, out, sizeof *st, cmp_stat);
    *n_out = out;
    if (!out) {
        sonde__free(st);
        st = NULL;
    }
    ns = 0; /* st's sketches are its rows' now */
fail:
    for (size_t k = 0; st && k < ns; k++) { /* failed: the sketches of every group */
        if (st[k].sketch)
            sm_sketch_free(st[k].sketch);
        sonde__free(st[k].sketch);
    }
    if (!*n_out)
        sonde__free(st);
    strmap_free(&names);
    sonde__free(site_stat);
    sonde__free(count);
    sonde__free(fill);
    sonde__free(dur);
    sonde__free(mean);
    sonde__free(m2);
    sonde__free(iv);
    sonde__free(last_thread);
    sonde__free(open_end);
    return *n_out ? st : NULL;
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
    o->count = k;
    if (!k) {
        sonde__free(d);
        return;
    }
    o->mean_s = span / (double)k;
    o->per_s = span > 0 ? (double)k / span : 0;
    qsort(d, k, sizeof *d, cmp_double);
    o->min_s = d[0];
    o->max_s = d[k - 1];
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
