/* cmd_aggregate.c - `sonde aggregate`: the reports of every rank of a job as one. Per section
 * name: the count and min / mean / max / stddev of its total time across ranks, the slowest rank
 * and how far over the median it is (stragglers); per-rank totals, throughput summed over ranks,
 * GPU figures per rank. Ranks with different section sets, missing or duplicate ranks and
 * reports of different runs are named in the output. --by session compares sessions instead. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/gpu.h"
#include "analyze/ranks.h"
#include "cli.h"
#include "export/export.h"
#include "util/buf.h"
#include "util/sort.h"

typedef struct rep {
    char *path;
    sm_model m;
    int rank;
    char stem[256]; /* the run name without -rankN */
} rep;

/* By rank; within a rank the run that started last first (the one kept, agg_drop_duplicates),
 * then by path. */
static int cmp_rep(const void *a, const void *b)
{
    const rep *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->m.start_real_ns != y->m.start_real_ns)
        return x->m.start_real_ns > y->m.start_real_ns ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* The files to read: FILES as given, and in a DIR its runs (cli_dir_runs). */
static void free_paths(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int collect(char **args, int n, char ***out, size_t *count)
{
    char **v = NULL;
    size_t cap = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            size_t before = *count;
            if (cli_dir_runs(args[i], 0, &v, count, &cap) == 0) {
                if (cli_run_ranks(&v, count, &cap, before) != 0)
                    goto oom;
                continue;
            }
            if (errno == ENOMEM)
                goto oom;
            cli_fail(0, "aggregate", "%s: %s (left out)", args[i], strerror(errno));
            continue;
        }
        if (*count == cap) {
            size_t nc = cap ? 2 * cap : 16;
            char **g = realloc(v, nc * sizeof *g);
            if (!g)
                goto oom;
            v = g;
            cap = nc;
        }
        if (!(v[*count] = strdup(args[i])))
            goto oom;
        (*count)++;
    }
    *out = v;
    return 0;
oom:
    free_paths(v, *count);
    *count = 0;
    return -1;
}

/* The run's name without -rankN, and without .pidN where it is a program's run under `sonde
 * run` (RUN.pidN-rankR: its ranks are of one run). */
static void stem_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    char *r = strstr(out, "-rank");
    if (r)
        *r = 0;
    char *p = strrchr(out, '.');
    if (p && !strncmp(p, ".pid", 4) && p[4] && strspn(p + 4, "0123456789") == strlen(p + 4))
        *p = 0;
}

static double gpu_peak(const sm_model *m, double *util_mean)
{
    double peak = 0, us = 0;
    size_t un = 0;
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        unsigned g;
        char t[32];
        if (!c->system || sscanf(c->name, "gpu%u %31[^\n]", &g, t) != 2)
            continue;
        if (!strcmp(t, "memory MiB") && c->max > peak)
            peak = c->max;
        if (!strcmp(t, "util %")) {
            us += c->sum;
            un += c->samples;
        }
    }
    *util_mean = un ? us / (double)un : NAN;
    return peak;
}

typedef struct agg {
    char *name;
    double *per_rank; /* NAN where a rank does not have it */
    double *less_wait; /* per_rank less the time that rank waited in it for another (ranks.h) */
    uint64_t count;
    sm_sketch sketch;  /* the instances of every rank (their reports' sketches merged) */
    int sketched;      /* every rank's report had a sketch for it */
} agg;

/* One aggregation: the reports in rank order, the rows made of them, and the output. */
typedef struct aggctx {
    rep *r;
    size_t nf;
    agg *rows;
    size_t nr;
    int sessions, json, csv, md, html, world;
    sbuf notes, o;
    sbuf_pool pool; /* names printed on one line each */
    sa_ranks ranks; /* who waited for whom (by section, two ranks or more) */
    sa_gpu_device *gpu; /* per rank: its devices' figures summed (analyze/gpu.h), NULL: no rank
                           had CUDA activity */
    double **wait_by_stat; /* per rank, per statistic of its model: the time it waited in it */
} aggctx;

/* One report per rank: of reports naming the same rank (a run written twice into one
 * directory, a copy) the one that started last is kept and the others are moved past a->nf
 * (still owned by a->r), each named in a note; counting both would add the rank twice. */
static void agg_drop_duplicates(aggctx *a)
{
    size_t kept = 0;
    for (size_t i = 0; i < a->nf; i++) { /* a->r is sorted by cmp_rep */
        if (kept && a->r[i].rank == a->r[kept - 1].rank) {
            sbuf_printf(&a->notes, "duplicate rank %d: %s left out, %s kept (started last)\n",
                        a->r[i].rank, sbuf_oneline(&a->pool, a->r[i].path),
                        sbuf_oneline(&a->pool, a->r[kept - 1].path));
            continue;
        }
        if (kept != i) { /* the left-out one takes this one's place, past the kept ones */
            rep t = a->r[kept];
            a->r[kept] = a->r[i];
            a->r[i] = t;
        }
        kept++;
    }
    a->nf = kept;
}

/* A forked child's report (a DataLoader worker: it names its parent's pid) is not a rank of the
 * job: it is moved past a->nf (still owned by a->r) and named in a note as a worker of its
 * parent's rank. The reports that say no rank are numbered in the order given. Every report a
 * worker's: all are kept as ranks. */
static void agg_set_workers_apart(aggctx *a)
{
    int next = 0;
    size_t kept = 0;
    for (size_t i = 0; i < a->nf; i++)
        if (a->r[i].m.rank >= next)
            next = a->r[i].m.rank + 1;
    for (size_t i = 0; i < a->nf; i++) {
        const char *pp = sm_info(&a->r[i].m, "system.parent_pid");
        if (pp && atoi(pp) > 0)
            continue;
        if (kept != i) {
            rep t = a->r[kept];
            a->r[kept] = a->r[i];
            a->r[i] = t;
        }
        kept++;
    }
    if (kept == 0)
        kept = a->nf;
    for (size_t i = 0; i < kept; i++)
        a->r[i].rank = a->r[i].m.rank >= 0 ? a->r[i].m.rank : next++;
    for (size_t i = kept; i < a->nf; i++) {
        int ppid = atoi(sm_info(&a->r[i].m, "system.parent_pid"));
        a->r[i].rank = a->r[i].m.rank;
        for (size_t j = 0; j < kept; j++)
            if (a->r[j].m.pid == ppid)
                a->r[i].rank = a->r[j].rank;
        if (a->r[i].rank >= 0)
            sbuf_printf(&a->notes, "worker of rank %d: %s (pid %d), left out of the ranks' "
                                   "figures\n",
                        a->r[i].rank, sbuf_oneline(&a->pool, a->r[i].path), a->r[i].m.pid);
        else
            sbuf_printf(&a->notes, "worker of pid %d: %s (pid %d), left out of the ranks' "
                                   "figures\n",
                        ppid, sbuf_oneline(&a->pool, a->r[i].path), a->r[i].m.pid);
    }
    a->nf = kept;
}

/* What does not fit: missing ranks, other runs; the world size. */
static void agg_fit_notes(aggctx *a)
{
    const rep *r = a->r;
    a->world = 1;
    size_t says = 0; /* a file that says the largest world size */
    for (size_t i = 0; i < a->nf; i++)
        if (r[i].m.world_size > a->world) {
            a->world = r[i].m.world_size;
            says = i;
        }
    /* Ranks that disagree on it: said, since the missing ranks below count against the largest */
    for (size_t i = 0; i < a->nf; i++)
        if (r[i].m.world_size != r[says].m.world_size) {
            sbuf_printf(&a->notes, "world size disagrees: %s (rank %d) says %d, %s (rank %d) says "
                                   "%d; the largest, %d, is used\n",
                        sbuf_oneline(&a->pool, r[i].path), r[i].rank, r[i].m.world_size,
                        sbuf_oneline(&a->pool, r[says].path), r[says].rank,
                        r[says].m.world_size, a->world);
            break;
        }
    /* Missing ranks, between the ranks present (a->r is sorted by rank): the world size is what a
     * file says, so the first 16 are named and the rest counted, whatever it says. */
    long long n_missing = 0;
    int named = 0, next = 0;
    for (size_t i = 0; i <= a->nf; i++) {
        int upto = i < a->nf && r[i].rank < a->world ? r[i].rank : a->world;
        for (int k = next; k < upto && named < 16; k++, named++)
            sbuf_printf(&a->notes, "missing rank %d of %d\n", k, a->world);
        if (upto > next)
            n_missing += upto - next;
        if (i < a->nf && r[i].rank + 1 > next)
            next = r[i].rank + 1;
        if (upto == a->world)
            break;
    }
    if (n_missing > named)
        sbuf_printf(&a->notes, "missing: %lld more of the %d ranks the runs' world size names "
                            "(%zu file(s) read)\n", n_missing - named, a->world, a->nf);
    for (size_t i = 1; i < a->nf; i++)
        if (strcmp(r[i].stem, r[0].stem))
            sbuf_printf(&a->notes, "different run: %s is run \"%s\", %s is run \"%s\"\n",
                        sbuf_oneline(&a->pool, r[0].path), sbuf_oneline(&a->pool, r[0].stem),
                        sbuf_oneline(&a->pool, r[i].path), sbuf_oneline(&a->pool, r[i].stem));

}

/* Rows: every section (or session) name, its total on each rank. 0, or -1 out of memory. */
static int agg_collect_rows(aggctx *a)
{
    for (size_t i = 0; i < a->nf; i++) {
        const sm_model *m = &a->r[i].m;
        size_t n = a->sessions ? m->n_sessions : m->n_stats;
        for (size_t k = 0; k < n; k++) {
            const char *name = a->sessions ? sm_str(m, m->sessions[k].name) : m->stats[k].name;
            double t = a->sessions ? (double)(m->sessions[k].end_ns - m->sessions[k].start_ns) / 1e9
                                : m->stats[k].total_s;
            uint64_t c = a->sessions ? 1 : m->stats[k].count;
            size_t j;
            for (j = 0; j < a->nr && strcmp(a->rows[j].name, name); j++) {
            }
            if (j == a->nr) {
                agg *g = realloc(a->rows, (a->nr + 1) * sizeof *g);
                if (!g)
                    return -1;
                a->rows = g;
                agg *row = &a->rows[a->nr++]; /* freed at out whatever it holds */
                sm_sketch_init(&row->sketch);
                row->sketched = !a->sessions;
                row->name = strdup(name);
                row->per_rank = malloc(a->nf * sizeof(double));
                row->less_wait = malloc(a->nf * sizeof(double));
                row->count = 0;
                if (!row->name || !row->per_rank || !row->less_wait)
                    return -1;
                for (size_t q = 0; q < a->nf; q++)
                    row->per_rank[q] = row->less_wait[q] = NAN;
            }
            double waited = !a->sessions && a->wait_by_stat ? a->wait_by_stat[i][k] : 0;
            a->rows[j].per_rank[i] = isnan(a->rows[j].per_rank[i]) ? t : a->rows[j].per_rank[i] + t;
            a->rows[j].less_wait[i] =
                isnan(a->rows[j].less_wait[i]) ? t - waited : a->rows[j].less_wait[i] + t - waited;
            a->rows[j].count += c;
            if (a->sessions || !a->rows[j].sketched)
                continue;
            if (!m->stats[k].sketch)
                a->rows[j].sketched = 0; /* a report from before sketches */
            else if (sm_sketch_merge(&a->rows[j].sketch, m->stats[k].sketch))
                return -1;
        }
    }
    return 0;
}

/* A note for each row some ranks lack. */
static void agg_missing_notes(aggctx *a)
{
    const rep *r = a->r;
    for (size_t j = 0; j < a->nr; j++) {
        sbuf missing;
        sbuf_init(&missing);
        for (size_t i = 0; i < a->nf; i++)
            if (isnan(a->rows[j].per_rank[i]))
                sbuf_printf(&missing, "%s%d", missing.len ? ", " : "", r[i].rank);
        if (missing.len)
            sbuf_printf(&a->notes, "%s \"%s\" is missing on rank(s) %s\n",
                        a->sessions ? "session" : "section",
                        sbuf_oneline(&a->pool, a->rows[j].name), missing.data);
        a->notes.oom |= missing.oom;
        sbuf_free(&missing);
    }

}

static void agg_header(aggctx *a)
{
    const rep *r = a->r;
    const char *by = a->sessions ? "session" : "section";
    if (a->json)
        sbuf_printf(&a->o, "{\"schema\":\"sonde-aggregate\",\"schema_version\":1,\"by\":\"%s\","
                           "\"ranks\":%zu,\"world_size\":%d,\"rows\":[", by, a->nf, a->world);
    else if (a->csv)
        sbuf_puts(&a->o, "name,count,ranks,min_s,mean_s,max_s,stddev_s,slowest_rank,over_median\n");
    else if (a->md)
        sbuf_printf(&a->o, "### sonde aggregate: %zu rank(s)\n\n| %s | count | min | mean | max | "
                           "stddev | slowest rank | over median |\n| --- | --- | --- | --- | --- "
                           "| --- | --- | --- |\n", a->nf, by);
    else
        sbuf_printf(&a->o, "sonde aggregate: %zu report(s), run \"%s\", world size %d\n%-28s %8s "
                           "%10s %10s %10s %10s  %s\n", a->nf, sbuf_oneline(&a->pool, r[0].stem),
                    a->world, by, "count", "min", "mean", "max", "stddev",
                    "slowest rank (over median)");
}

/* Row j: count, min, mean, max and stddev over the ranks, the slowest and how far over the
 * median; in JSON each rank's total and the instances' percentiles. 0, or -1 out of memory. */
static int agg_row(aggctx *a, size_t j)
{
    const agg *row = &a->rows[j];
    double *v = malloc(a->nf * sizeof *v), *w = malloc(a->nf * sizeof *w);
    if (!v || !w) {
        free(v);
        free(w);
        return -1;
    }
    /* the slowest rank and its lead over the median by the time each rank spent in it less
     * what it waited there for another (the same where no rank waited) */
    const double *by = a->ranks.straggler != SIZE_MAX ? row->less_wait : row->per_rank;
    size_t n = 0, slow = 0;
    double sum = 0;
    for (size_t i = 0; i < a->nf; i++)
        if (!isnan(row->per_rank[i])) {
            w[n] = by[i];
            v[n++] = row->per_rank[i];
            sum += row->per_rank[i];
            if (isnan(by[slow]) || by[i] > by[slow])
                slow = i;
        }
    double mean = n ? sum / (double)n : 0, var = 0;
    for (size_t i = 0; i < n; i++)
        var += (v[i] - mean) * (v[i] - mean);
    double sd = n ? sqrt(var / (double)n) : 0;
    double mn = INFINITY, mx = 0;
    for (size_t i = 0; i < n; i++) {
        mn = fmin(mn, v[i]);
        mx = fmax(mx, v[i]);
    }
    sonde__sort_doubles(w, n);
    double med = n ? sm_percentile(w, n, 50) : 0;
    double over = med > 0 ? by[slow] / med - 1 : 0;
    free(v);
    free(w);
    int rank = a->r[slow].rank;
    if (a->json) {
        sbuf_puts(&a->o, j ? ",{\"name\":" : "{\"name\":");
        sbuf_json_str(&a->o, row->name);
        sbuf_printf(&a->o, ",\"count\":%llu,\"ranks\":%zu,\"min_s\":",
                    (unsigned long long)row->count, n);
        sbuf_json_num(&a->o, n ? mn : 0);
        sbuf_puts(&a->o, ",\"mean_s\":");
        sbuf_json_num(&a->o, mean);
        sbuf_puts(&a->o, ",\"max_s\":");
        sbuf_json_num(&a->o, mx);
        sbuf_puts(&a->o, ",\"stddev_s\":");
        sbuf_json_num(&a->o, sd);
        sbuf_printf(&a->o, ",\"slowest_rank\":%d,\"over_median\":", rank);
        sbuf_json_num(&a->o, over);
        sbuf_puts(&a->o, ",\"per_rank_s\":[");
        for (size_t i = 0; i < a->nf; i++) {
            if (i)
                sbuf_putc(&a->o, ',');
            sbuf_json_num(&a->o, row->per_rank[i]);
        }
        /* percentiles of every instance on every rank, from the merged sketches */
        sbuf_puts(&a->o, "],\"instances\":");
        if (row->sketched && row->sketch.count) {
            const sm_sketch *k = &row->sketch;
            sbuf_printf(&a->o, "{\"count\":%llu", (unsigned long long)k->count);
            /* the percentiles of the statistics' list (SONDE_SECTION_STATS: p50, p90, p99) */
#define PCT(f, kind, label, table, q)                                                           \
    if (q) {                                                                                    \
        sbuf_puts(&a->o, ",\"" #f "\":");                                                       \
        sbuf_json_num(&a->o, sm_sketch_quantile(k, (q) / 100.0) / 1e9);                         \
    }
            SONDE_SECTION_STATS(PCT)
#undef PCT
            sbuf_puts(&a->o, ",\"relative_error\":");
            sbuf_json_num(&a->o, SM_SKETCH_ALPHA);
            sbuf_puts(&a->o, "}}");
        } else {
            sbuf_puts(&a->o, "null}");
        }
    } else if (a->csv) {
        sbuf_csv_str(&a->o, row->name);
        sbuf_printf(&a->o, ",%llu,%zu,%.9f,%.9f,%.9f,%.9f,%d,%.6f\n",
                    (unsigned long long)row->count,
                    n, n ? mn : 0, mean, mx, sd, rank, over);
    } else {
        char lo[32], b2[32], c[32], d[32];
        sx_fmt_dur(lo, sizeof lo, n ? mn : 0);
        sx_fmt_dur(b2, sizeof b2, mean);
        sx_fmt_dur(c, sizeof c, mx);
        sx_fmt_dur(d, sizeof d, sd);
        if (a->html) {
            sbuf_puts(&a->o, "<tr><td class=\"name\">");
            sbuf_html_str(&a->o, row->name);
            sbuf_printf(&a->o, "</td><td>%llu</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                               "<td class=\"slowest\" data-rank=\"%d\">rank %d</td><td>%+.1f%%"
                               "</td></tr>\n", (unsigned long long)row->count, lo, b2, c, d, rank,
                        rank, 100 * over);
        } else if (a->md)
            sbuf_printf(&a->o, "| %s | %llu | %s | %s | %s | %s | %d | %+.1f%% |\n",
                        sbuf_md_cell(&a->pool, row->name),
                        (unsigned long long)row->count, lo, b2, c, d, rank, 100 * over);
        else
            sbuf_printf(&a->o, "%-28.28s %8llu %10s %10s %10s %10s  rank %d (%+.1f%%)\n",
                        sbuf_oneline(&a->pool, row->name), (unsigned long long)row->count, lo,
                        b2, c, d, rank, 100 * over);
    }
    return 0;
}

/* Per rank: duration, throughput, GPU; and the throughput summed per unit. */
static void agg_per_rank(aggctx *a)
{
    const rep *r = a->r;
    if (a->json)
        sbuf_puts(&a->o, "],\"per_rank\":[");
    else if (!a->csv)
        sbuf_printf(&a->o, "%sper rank:\n", a->md ? "\n" : "");
    /* throughput summed per unit by its name: ranks may have recorded their units in another
     * order (frames/s must never be added to tokens/s) */
    const char *units[16];
    double units_sum[16] = {0};
    size_t n_units = 0;
    for (size_t i = 0; i < a->nf; i++)
        for (size_t u = 0; u < r[i].m.n_rates; u++) {
            size_t k = 0;
            while (k < n_units && strcmp(units[k], r[i].m.rates[u].unit))
                k++;
            if (k == n_units && n_units < 16)
                units[n_units++] = r[i].m.rates[u].unit;
        }
    for (size_t i = 0; i < a->nf; i++) {
        const sm_model *m = &r[i].m;
        double um, peak = gpu_peak(m, &um);
        const char *host = sm_info(m, "system.hostname") ? sm_info(m, "system.hostname") : m->host;
        if (a->json) {
            sbuf_printf(&a->o, "%s{\"rank\":%d,\"file\":", i ? "," : "", r[i].rank);
            sbuf_json_str(&a->o, r[i].path);
            sbuf_puts(&a->o, ",\"host\":");
            sbuf_json_str(&a->o, host);
            sbuf_puts(&a->o, ",\"duration_s\":");
            sbuf_json_num(&a->o, (double)m->duration_ns / 1e9);
            sbuf_puts(&a->o, ",\"gpu_memory_peak_mib\":");
            sbuf_json_num(&a->o, peak);
            sbuf_puts(&a->o, ",\"gpu_util_mean_pct\":");
            sbuf_json_num(&a->o, um);
            sbuf_putc(&a->o, '}');
        } else if (!a->csv) {
            sbuf_printf(&a->o, "  rank %d (%s): %.3f s", r[i].rank,
                        host ? sbuf_oneline(&a->pool, host) : "?",
                        (double)m->duration_ns / 1e9);
            if (peak > 0)
                sbuf_printf(&a->o, ", GPU memory peak %.0f MiB, utilization %.1f%%", peak, um);
        }
        for (size_t u = 0; u < m->n_rates; u++) {
            double ps = m->rates[u].seconds > 0 ? m->rates[u].units / m->rates[u].seconds : 0;
            for (size_t k = 0; k < n_units; k++)
                if (!strcmp(units[k], m->rates[u].unit))
                    units_sum[k] += ps;
            if (!a->json && !a->csv && ps > 0)
                sbuf_printf(&a->o, ", %.2f %s/s", ps, sbuf_oneline(&a->pool, m->rates[u].unit));
        }
        if (!a->json && !a->csv)
            sbuf_putc(&a->o, '\n');
    }
    if (a->json)
        sbuf_puts(&a->o, "],\"throughput_sum\":[");
    for (size_t u = 0; u < n_units; u++) {
        if (a->json) {
            sbuf_printf(&a->o, "%s{\"unit\":", u ? "," : "");
            sbuf_json_str(&a->o, units[u]);
            sbuf_puts(&a->o, ",\"per_s\":");
            sbuf_json_num(&a->o, units_sum[u]);
            sbuf_putc(&a->o, '}');
        } else if (!a->csv && units_sum[u] > 0) {
            sbuf_printf(&a->o, "throughput summed over ranks: %.2f %s/s\n", units_sum[u],
                        sbuf_oneline(&a->pool, units[u]));
        }
    }
    if (a->json)
        sbuf_putc(&a->o, ']');
}

/* The model the rank analysis reads for rank i: its own, or where it is a report's (which
 * holds no sections' instances, no operators), the .sonde file beside the report, read into
 * *own (owned[i] set); the report's own where there is none or it cannot be read (said). NULL
 * only out of memory. */
static const sm_model *agg_wait_model(aggctx *a, size_t i, sm_model *own, int *owned)
{
    const sm_model *m = &a->r[i].m;
    size_t n = strlen(a->r[i].path);
    if (m->n_spans || m->n_ops || n < 5 || strcmp(a->r[i].path + n - 5, ".json"))
        return m;
    char *path;
    struct stat st;
    if (asprintf(&path, "%.*s.sonde", (int)(n - 5), a->r[i].path) < 0)
        return NULL;
    int ok = stat(path, &st) == 0 && S_ISREG(st.st_mode) && cli_load("aggregate", path, own) == 0;
    free(path);
    if (!ok)
        return m; /* no .sonde beside it: the report's steps alone */
    owned[i] = 1;
    return own;
}

/* The time rank i waited in each statistic of a->r[i].m, from those of model w (another model of
 * the same run when it was read for the analysis: matched by name). */
static void agg_wait_stats(aggctx *a, size_t i, const sm_model *w, const double *by_w_stat)
{
    const sm_model *m = &a->r[i].m;
    for (size_t k = 0; k < m->n_stats; k++) {
        if (w == m) {
            a->wait_by_stat[i][k] = by_w_stat[k];
            continue;
        }
        for (size_t q = 0; q < w->n_stats; q++)
            if (!strcmp(w->stats[q].name, m->stats[k].name))
                a->wait_by_stat[i][k] += by_w_stat[q];
    }
}

/* Each rank's GPU figures (sonde analyze gpu's, its devices summed) from models ms, where some
 * rank had CUDA activity. 0, or -1 out of memory. */
static int agg_gpu_prepare(aggctx *a, const sm_model *const *ms)
{
    size_t with = 0;
    for (size_t i = 0; i < a->nf; i++)
        with += ms[i]->n_gpu > 0;
    if (!with)
        return 0;
    if (!(a->gpu = calloc(a->nf, sizeof *a->gpu)))
        return -1;
    for (size_t i = 0; i < a->nf; i++) {
        sa_gpu g;
        if (sa_gpu_of(ms[i], SA_GPU_KERNEL_DELAY_NS, SA_GPU_MIN_IDLE_NS, &g) != 0)
            return -1;
        sa_gpu_device *t = &a->gpu[i];
        for (size_t k = 0; k < g.n_dev; k++) {
            const sa_gpu_device *d = &g.dev[k];
            t->entries += d->entries;
            t->span_s += d->span_s;
            t->idle_s += d->idle_s;
            t->compute_s += d->compute_s;
            t->non_compute_s += d->non_compute_s;
            t->host_wait_s += d->host_wait_s;
        }
        sa_gpu_free(&g);
    }
    return 0;
}

/* The ranks' GPU figures side by side, the rank whose GPUs idled most named: a JSON member or
 * a block of lines (not in CSV). */
static void agg_gpu(aggctx *a)
{
    if (a->csv || !a->gpu)
        return;
    size_t most = 0, least = 0;
    for (size_t i = 0; i < a->nf; i++) {
        most = a->gpu[i].idle_s > a->gpu[most].idle_s ? i : most;
        least = a->gpu[i].idle_s < a->gpu[least].idle_s ? i : least;
    }
    if (a->json)
        sbuf_puts(&a->o, ",\"gpu\":[");
    else
        sbuf_printf(&a->o, "%sGPU per rank (its devices summed; sonde analyze gpu, "
                           "docs/analysis.md):\n", a->md ? "\n" : "");
    for (size_t i = 0; i < a->nf; i++) {
        const sa_gpu_device *t = &a->gpu[i];
        if (a->json) {
            sbuf_printf(&a->o, "%s{\"rank\":%d,\"entries\":%zu,\"span_s\":", i ? "," : "",
                        a->r[i].rank, t->entries);
            sbuf_json_num(&a->o, t->span_s);
            sbuf_puts(&a->o, ",\"idle_s\":");
            sbuf_json_num(&a->o, t->idle_s);
            sbuf_puts(&a->o, ",\"compute_s\":");
            sbuf_json_num(&a->o, t->compute_s);
            sbuf_puts(&a->o, ",\"non_compute_s\":");
            sbuf_json_num(&a->o, t->non_compute_s);
            sbuf_puts(&a->o, ",\"host_wait_s\":");
            sbuf_json_num(&a->o, t->host_wait_s);
            sbuf_putc(&a->o, '}');
            continue;
        }
        double span = t->span_s > 0 ? t->span_s : 1;
        sbuf_printf(&a->o, "  rank %d: %zu entries over %.3f s: idle %.3f s (%.1f%%; host wait "
                           "%.3f s), compute %.3f s (%.1f%%), non-compute %.3f s\n", a->r[i].rank,
                    t->entries, t->span_s, t->idle_s, 100 * t->idle_s / span, t->host_wait_s,
                    t->compute_s, 100 * t->compute_s / span, t->non_compute_s);
    }
    if (a->json) {
        sbuf_putc(&a->o, ']');
        return;
    }
    if (most != least)
        sbuf_printf(&a->o, "  the most idle: rank %d, %.3f s more than rank %d's\n",
                    a->r[most].rank, a->gpu[most].idle_s - a->gpu[least].idle_s,
                    a->r[least].rank);
}

/* Who waited for whom (ranks.h), and per rank and statistic the time it waited in that
 * statistic's sections. 0, or -1 out of memory. */
static int agg_wait_prepare(aggctx *a)
{
    if (a->sessions || a->nf < 2)
        return 0;
    const sm_model **ms = calloc(a->nf, sizeof *ms);
    sm_model *own = calloc(a->nf, sizeof *own);
    int *owned = calloc(a->nf, sizeof *owned);
    int rc = ms && own && owned ? 0 : -1;
    for (size_t i = 0; i < a->nf && !rc; i++)
        if (!(ms[i] = agg_wait_model(a, i, &own[i], owned)))
            rc = -1;
    if (!rc)
        rc = agg_gpu_prepare(a, ms);
    if (!rc)
        rc = sa_ranks_of(ms, a->nf, &a->ranks);
    if (!rc && a->ranks.straggler != SIZE_MAX) {
        if (!(a->wait_by_stat = calloc(a->nf, sizeof *a->wait_by_stat)))
            rc = -1;
        for (size_t i = 0; i < a->nf && !rc; i++) {
            const sm_model *w = ms[i];
            double *by = calloc(w->n_stats + 1, sizeof *by);
            if (!by || !(a->wait_by_stat[i] = calloc(a->r[i].m.n_stats + 1, sizeof *by))) {
                free(by);
                rc = -1;
                break;
            }
            for (size_t k = 0; k < w->n_spans; k++) {
                int stat = w->sites[w->spans[k].site].stat;
                if (stat >= 0)
                    by[stat] += sa_ranks_wait_in(&a->ranks, i, &w->spans[k]);
            }
            agg_wait_stats(a, i, w, by);
            free(by);
        }
    }
    for (size_t i = 0; owned && i < a->nf; i++)
        if (owned[i])
            sm_free(&own[i]);
    free(ms);
    free(own);
    free(owned);
    return rc;
}

/* Rank i's steps, communication and wait in words (the text's line, the page's figures). */
static void rank_wait_figures(aggctx *a, size_t i)
{
    const sa_rank_totals *t = &a->ranks.rank[i];
    sbuf_printf(&a->o, "steps %.3f s, compute and the rest %.3f s, communication %.3f s, of it "
                       "waiting %.3f s (%.1f%% of its steps)", t->step_s, t->step_s - t->comm_s,
                t->comm_s, t->wait_s, t->step_s > 0 ? 100 * t->wait_s / t->step_s : 0);
    if (t->cause != SIZE_MAX)
        sbuf_printf(&a->o, ", most for rank %d (%.3f s)", a->r[t->cause].rank, t->cause_s);
}

/* The ranks' communication and wait, where some rank recorded communication in the steps they
 * all have: a JSON member, or a block of lines (not in CSV). */
static void agg_waiting(aggctx *a)
{
    const sa_ranks *w = &a->ranks;
    if (a->csv || !w->has_comm)
        return;
    if (a->json) {
        sbuf_printf(&a->o, ",\"waiting\":{\"steps\":%zu,\"straggler\":", w->n_steps);
        if (w->straggler == SIZE_MAX)
            sbuf_puts(&a->o, "null");
        else
            sbuf_printf(&a->o, "%d", a->r[w->straggler].rank);
        sbuf_puts(&a->o, ",\"per_rank\":[");
    } else {
        sbuf_printf(&a->o, "%swaiting (communication: collectives by name, docs/distributed.md; "
                           "%zu step(s) on every rank):\n", a->md ? "\n" : "", w->n_steps);
    }
    for (size_t i = 0; i < a->nf; i++) {
        const sa_rank_totals *t = &w->rank[i];
        int cause = t->cause == SIZE_MAX ? -1 : a->r[t->cause].rank;
        if (a->json) {
            sbuf_printf(&a->o, "%s{\"rank\":%d,\"steps_s\":", i ? "," : "", a->r[i].rank);
            sbuf_json_num(&a->o, t->step_s);
            sbuf_puts(&a->o, ",\"communication_s\":");
            sbuf_json_num(&a->o, t->comm_s);
            sbuf_puts(&a->o, ",\"wait_s\":");
            sbuf_json_num(&a->o, t->wait_s);
            sbuf_printf(&a->o, ",\"waited_most_for\":%d,\"straggler_steps\":%zu,"
                               "\"caused_wait_s\":", cause, t->straggler_steps);
            sbuf_json_num(&a->o, t->caused_s);
            sbuf_putc(&a->o, '}');
            continue;
        }
        sbuf_printf(&a->o, "  rank %d: ", a->r[i].rank);
        rank_wait_figures(a, i);
        sbuf_putc(&a->o, '\n');
    }
    if (a->json) {
        sbuf_puts(&a->o, "]}");
        return;
    }
    if (w->straggler == SIZE_MAX) {
        sbuf_printf(&a->o, "  no rank waited for another (their communication differs by less "
                           "than %.0f%% of a step)\n", 100 * SA_WAIT_MIN_SHARE);
        return;
    }
    const sa_rank_totals *t = &w->rank[w->straggler];
    sbuf_printf(&a->o, "  straggler: rank %d, the last into the collectives in %zu of %zu steps: "
                       "the others waited %.3f s for it\n  (each section's slowest rank above "
                       "leaves out the time a rank waited in it)\n", a->r[w->straggler].rank,
                t->straggler_steps, w->n_steps, t->caused_s);
}

/* The notes: a JSON array, or lines under "notes:". */
static void agg_notes_out(aggctx *a)
{
    if (a->json) {
        sbuf_puts(&a->o, ",\"notes\":[");
        int first = 1;
        for (char *line = a->notes.data; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            sbuf_puts(&a->o, first ? "" : ",");
            sbuf_json_str(&a->o, line);
            first = 0;
            line = nl ? nl + 1 : NULL;
        }
        sbuf_puts(&a->o, "]}\n");
    } else if (!a->csv && a->notes.len) {
        sbuf_printf(&a->o, "%snotes:\n", a->md ? "\n" : "");
        for (char *line = a->notes.data; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            sbuf_printf(&a->o, "  %s\n", line);
            line = nl ? nl + 1 : NULL;
        }
    }
}

#define AGG_HTML_STYLE                                                                          \
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}"           \
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"                                      \
    "table{border-collapse:collapse;width:100%}td,th{padding:3px 8px;text-align:right;"          \
    "border-bottom:1px solid #ddd;white-space:nowrap}td.name,th.name{text-align:left;"          \
    "white-space:normal;word-break:break-all}.verdict{font-weight:600}"                         \
    ".rank{display:grid;grid-template-columns:7em 1fr;gap:8px;align-items:center;margin:4px 0}" \
    ".bar{display:flex;height:18px;background:#f3f3f3}.bar span{display:block;height:100%}"     \
    ".compute{background:#4c78a8}.comm{background:#72b7b2}.wait{background:#e45756}"            \
    ".figs{grid-column:2;font-size:12px;color:#555}.key span{display:inline-block;width:12px;"  \
    "height:12px;margin:0 4px 0 12px;vertical-align:middle}pre{white-space:pre-wrap;"          \
    "word-break:break-all;background:#fafafa;padding:8px}.scroll{overflow-x:auto}"

/* The rank view of the HTML page: a bar a rank, its steps' time as compute (and the rest),
 * communication and wait, and the straggler named. */
static void agg_waiting_html(aggctx *a)
{
    const sa_ranks *w = &a->ranks;
    sbuf_puts(&a->o, "<section id=\"waiting\"><h2>Who waits for whom</h2>\n");
    if (!w->has_comm) {
        sbuf_printf(&a->o, "<p class=\"verdict\">No communication recorded in the %zu step(s) "
                           "every rank has: no rank's wait can be told from its work (sections "
                           "or operators named as collectives, docs/distributed.md).</p></section>"
                           "\n", w->n_steps);
        return;
    }
    if (w->straggler == SIZE_MAX)
        sbuf_printf(&a->o, "<p class=\"verdict\" data-straggler=\"\">No rank waited for another "
                           "(their communication differs by less than %.0f%% of a step).</p>\n",
                    100 * SA_WAIT_MIN_SHARE);
    else
        sbuf_printf(&a->o, "<p class=\"verdict\" data-straggler=\"%d\">Rank %d is the straggler: "
                           "the last into the collectives in %zu of %zu steps; the others waited "
                           "%.3f s for it.</p>\n", a->r[w->straggler].rank,
                    a->r[w->straggler].rank, w->rank[w->straggler].straggler_steps, w->n_steps,
                    w->rank[w->straggler].caused_s);
    double most = 0;
    for (size_t i = 0; i < a->nf; i++)
        most = w->rank[i].step_s > most ? w->rank[i].step_s : most;
    sbuf_puts(&a->o, "<p class=\"key\"><span class=\"compute\"></span>compute and the rest"
                     "<span class=\"comm\"></span>communication<span class=\"wait\"></span>"
                     "waiting in it</p>\n");
    for (size_t i = 0; i < a->nf; i++) {
        const sa_rank_totals *t = &w->rank[i];
        double pct = most > 0 ? 100 / most : 0, compute = t->step_s - t->comm_s;
        int cause = t->cause == SIZE_MAX ? -1 : a->r[t->cause].rank;
        sbuf_printf(&a->o, "<div class=\"rank\" data-rank=\"%d\" data-wait=\"%.6f\" "
                           "data-cause=\"%d\"><span>rank %d</span><div class=\"bar\">"
                           "<span class=\"compute\" style=\"width:%.2f%%\"></span>"
                           "<span class=\"comm\" style=\"width:%.2f%%\"></span>"
                           "<span class=\"wait\" style=\"width:%.2f%%\"></span></div>"
                           "<span class=\"figs\">", a->r[i].rank, t->wait_s, cause, a->r[i].rank,
                    compute > 0 ? compute * pct : 0, (t->comm_s - t->wait_s) * pct,
                    t->wait_s * pct);
        rank_wait_figures(a, i); /* numbers and words only: nothing to escape */
        sbuf_puts(&a->o, "</span></div>\n");
    }
    sbuf_puts(&a->o, "<p>Each section's slowest rank below leaves out the time a rank waited in "
                     "it.</p></section>\n");
}

/* The HTML page (--format html): the rank view, the sections' table, and the per-rank lines
 * and notes as the text report has them. */
static int agg_html(aggctx *a)
{
    sbuf_puts(&a->o, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<title>sonde aggregate: ");
    sbuf_html_str(&a->o, a->r[0].stem);
    sbuf_puts(&a->o, "</title><style>" AGG_HTML_STYLE "</style></head>\n"
                     "<body data-ready=\"1\"><h1>sonde aggregate: run &ldquo;");
    sbuf_html_str(&a->o, a->r[0].stem);
    sbuf_printf(&a->o, "&rdquo;, %zu rank(s), world size %d</h1>\n", a->nf, a->world);
    if (!a->sessions)
        agg_waiting_html(a);
    sbuf_printf(&a->o, "<section id=\"sections\"><h2>By %s</h2><div class=\"scroll\"><table>"
                       "<thead><tr>"
                       "<th class=\"name\">%s</th><th>count</th><th>min</th><th>mean</th>"
                       "<th>max</th><th>stddev</th><th>slowest rank</th><th>over median</th>"
                       "</tr></thead><tbody>\n", a->sessions ? "session" : "section",
                a->sessions ? "session" : "section");
    for (size_t j = 0; j < a->nr; j++)
        if (agg_row(a, j) != 0)
            return -1;
    sbuf_puts(&a->o, "</tbody></table></div></section>\n");
    sbuf page = a->o; /* the per-rank lines and notes as text, then into the page */
    sbuf_init(&a->o);
    a->html = 0;
    agg_per_rank(a);
    agg_gpu(a);
    agg_notes_out(a);
    a->html = 1;
    sbuf text = a->o;
    a->o = page;
    sbuf_puts(&a->o, "<section id=\"per-rank\"><h2>Per rank</h2><pre>");
    sbuf_html_str(&a->o, text.data ? text.data : "");
    sbuf_puts(&a->o, "</pre></section>\n</body></html>\n");
    a->o.oom |= text.oom;
    sbuf_free(&text);
    return 0;
}

int cmd_aggregate(int argc, char **argv)
{
    static const char *const opts[] = {"--format", "-o", "--by", NULL};
    const char *format = "text", *outpath = NULL, *by = "section";
    char **args = calloc((size_t)argc + 1, sizeof *args);
    int na = 0;
    if (!args)
        return cli_fail(CLI_USAGE, "aggregate", "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--format") || !strcmp(a, "-o") || !strcmp(a, "--by")) {
            if (i + 1 >= argc) {
                free(args);
                return cli_fail(CLI_USAGE, "aggregate", "%s needs a value", a);
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--format"))
                format = v;
            else if (!strcmp(a, "-o"))
                outpath = v;
            else
                by = v;
        } else if (a[0] == '-' && a[1]) {
            free(args);
            return cli_bad_option("aggregate", a, opts);
        } else {
            args[na++] = argv[i];
        }
    }
    int json = !strcmp(format, "json"), csv = !strcmp(format, "csv");
    int md = !strcmp(format, "markdown"), html = !strcmp(format, "html");
    if (!json && !csv && !md && !html && strcmp(format, "text")) {
        free(args);
        return cli_fail(CLI_USAGE, "aggregate",
                        "--format %s: expected text, json, csv, markdown or html", format);
    }
    int sessions = !strcmp(by, "session");
    if (!sessions && strcmp(by, "section")) {
        free(args);
        return cli_fail(CLI_USAGE, "aggregate", "--by %s: expected section or session", by);
    }
    if (!na) {
        free(args);
        return cli_usage(cli_find("aggregate"), 1);
    }
    char **files;
    size_t nf;
    int rc = collect(args, na, &files, &nf);
    free(args);
    if (rc != 0)
        return cli_fail(CLI_USAGE, "aggregate", "out of memory");
    if (!nf) {
        free(files);
        return cli_fail(CLI_USAGE, "aggregate", "no report found (NAME.json or NAME.sonde)");
    }
    /* Everything below is freed at `out`, whatever path leads there. */
    aggctx a;
    memset(&a, 0, sizeof a);
    a.r = calloc(nf, sizeof *a.r);
    a.nf = nf;
    size_t loaded = 0; /* models in a.r to free */
    sbuf_init(&a.notes);
    sbuf_init(&a.o);
#define OOM()                                                                              \
    do {                                                                                   \
        rc = cli_fail(CLI_USAGE, "aggregate", "out of memory");                            \
        goto out;                                                                          \
    } while (0)
    if (!a.r) {
        free_paths(files, nf);
        return cli_fail(CLI_USAGE, "aggregate", "out of memory");
    }
    for (size_t i = 0; i < nf; i++)
        a.r[i].path = files[i]; /* r owns them now */
    free(files);
    for (size_t i = 0; i < nf; i++, loaded++) {
        if ((rc = cli_load("aggregate", a.r[i].path, &a.r[i].m)))
            goto out;
        stem_of(a.r[i].m.name, a.r[i].stem, sizeof a.r[i].stem);
    }
    agg_set_workers_apart(&a);
    sonde__sort(a.r, a.nf, sizeof *a.r, cmp_rep);

    a.sessions = sessions;
    a.json = json;
    a.csv = csv;
    a.md = md;
    a.html = html;
    agg_drop_duplicates(&a);
    agg_fit_notes(&a);
    if (agg_wait_prepare(&a) != 0 || agg_collect_rows(&a) != 0)
        OOM();
    agg_missing_notes(&a);
    if (html) {
        if (agg_html(&a) != 0)
            OOM();
    } else {
        agg_header(&a);
        for (size_t j = 0; j < a.nr; j++)
            if (agg_row(&a, j) != 0)
                OOM();
        agg_per_rank(&a);
        agg_waiting(&a);
        agg_gpu(&a);
        agg_notes_out(&a);
    }
    if (!json && !csv)
        sbuf_text_safe(&a.o, 0); /* names from the files: no terminal escapes */
    if (a.o.oom || a.notes.oom || a.pool.oom)
        OOM();
    rc = CLI_OK;
    if (outpath) {
        for (size_t i = 0; i < nf && rc == CLI_OK; i++)
            rc = cli_output_check("aggregate", outpath, a.r[i].path);
        if (rc == CLI_OK)
            rc = cli_write_output("aggregate", outpath, a.o.data ? a.o.data : "", a.o.len);
    } else {
        fputs(a.o.data ? a.o.data : "", stdout);
    }
#undef OOM
out:
    sbuf_free(&a.o);
    sbuf_free(&a.notes);
    sbuf_pool_free(&a.pool);
    for (size_t j = 0; j < a.nr; j++) {
        free(a.rows[j].name);
        free(a.rows[j].per_rank);
        free(a.rows[j].less_wait);
        sm_sketch_free(&a.rows[j].sketch);
    }
    free(a.rows);
    for (size_t i = 0; a.wait_by_stat && i < nf; i++)
        free(a.wait_by_stat[i]);
    free(a.wait_by_stat);
    free(a.gpu);
    sa_ranks_free(&a.ranks);
    for (size_t i = 0; i < nf; i++) {
        free(a.r[i].path);
        if (i < loaded)
            sm_free(&a.r[i].m);
    }
    free(a.r);
    return rc;
}
