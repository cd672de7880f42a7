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

#include "cli.h"
#include "export/export.h"
#include "util/buf.h"

typedef struct rep {
    char *path;
    sm_model m;
    int rank;
    char stem[256]; /* the run name without -rankN */
} rep;

static int cmp_rep(const void *a, const void *b)
{
    const rep *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
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
            if (cli_dir_runs(args[i], 0, &v, count, &cap) == 0)
                continue;
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

static void stem_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s", name);
    char *r = strstr(out, "-rank");
    if (r)
        *r = 0;
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
            un += c->n;
        }
    }
    *util_mean = un ? us / (double)un : NAN;
    return peak;
}

typedef struct agg {
    char *name;
    double *per_rank; /* NAN where a rank does not have it */
    uint64_t count;
    sm_sketch sketch;  /* the instances of every rank (their reports' sketches merged) */
    int sketched;      /* every rank's report had a sketch for it */
} agg;

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
    int json = !strcmp(format, "json"), csv = !strcmp(format, "csv"), md = !strcmp(format, "markdown");
    if (!json && !csv && !md && strcmp(format, "text")) {
        free(args);
        return cli_fail(CLI_USAGE, "aggregate", "--format %s: expected text, json, csv or markdown",
                        format);
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
    rep *r = calloc(nf, sizeof *r);
    size_t loaded = 0; /* models in r to free */
    agg *rows = NULL;
    size_t nr = 0;
    sbuf notes, o;
    sbuf_init(&notes);
    sbuf_init(&o);
    sbuf_pool pool = {0}; /* names printed on one line each */
#define OOM()                                                                                      do {                                                                                               rc = cli_fail(CLI_USAGE, "aggregate", "out of memory");                                        goto out;                                                                                  } while (0)
    if (!r) {
        free_paths(files, nf);
        return cli_fail(CLI_USAGE, "aggregate", "out of memory");
    }
    for (size_t i = 0; i < nf; i++)
        r[i].path = files[i]; /* r owns them now */
    free(files);
    for (size_t i = 0; i < nf; i++, loaded++) {
        if ((rc = cli_load("aggregate", r[i].path, &r[i].m)))
            goto out;
        r[i].rank = r[i].m.rank >= 0 ? r[i].m.rank : (int)i;
        stem_of(r[i].m.name, r[i].stem, sizeof r[i].stem);
    }
    qsort(r, nf, sizeof *r, cmp_rep);

    /* What does not fit: duplicate and missing ranks, other runs. */
    int world = 1;
    for (size_t i = 0; i < nf; i++)
        if (r[i].m.world_size > world)
            world = r[i].m.world_size;
    for (size_t i = 1; i < nf; i++)
        if (r[i].rank == r[i - 1].rank)
            sbuf_printf(&notes, "duplicate rank %d: %s and %s\n", r[i].rank,
                        sbuf_oneline(&pool, r[i - 1].path), sbuf_oneline(&pool, r[i].path));
    /* Missing ranks, between the ranks present (r is sorted by rank): the world size is what a
     * file says, so the first 16 are named and the rest counted, whatever it says. */
    long long n_missing = 0;
    int named = 0, next = 0;
    for (size_t i = 0; i <= nf; i++) {
        int upto = i < nf && r[i].rank < world ? r[i].rank : world;
        for (int k = next; k < upto && named < 16; k++, named++)
            sbuf_printf(&notes, "missing rank %d of %d\n", k, world);
        if (upto > next)
            n_missing += upto - next;
        if (i < nf && r[i].rank + 1 > next)
            next = r[i].rank + 1;
        if (upto == world)
            break;
    }
    if (n_missing > named)
        sbuf_printf(&notes, "missing: %lld more of the %d ranks the runs' world size names "
                            "(%zu file(s) read)\n", n_missing - named, world, nf);
    for (size_t i = 1; i < nf; i++)
        if (strcmp(r[i].stem, r[0].stem))
            sbuf_printf(&notes, "different run: %s is run \"%s\", %s is run \"%s\"\n",
                        sbuf_oneline(&pool, r[0].path), sbuf_oneline(&pool, r[0].stem),
                        sbuf_oneline(&pool, r[i].path), sbuf_oneline(&pool, r[i].stem));

    /* Rows: every section (or session) name, its total on each rank. */
    for (size_t i = 0; i < nf; i++) {
        const sm_model *m = &r[i].m;
        size_t n = sessions ? m->n_sessions : m->n_stats;
        for (size_t k = 0; k < n; k++) {
            const char *name = sessions ? sm_str(m, m->sessions[k].name) : m->stats[k].name;
            double t = sessions ? (double)(m->sessions[k].end_ns - m->sessions[k].start_ns) / 1e9
                                : m->stats[k].total_s;
            uint64_t c = sessions ? 1 : m->stats[k].count;
            size_t j;
            for (j = 0; j < nr && strcmp(rows[j].name, name); j++) {
            }
            if (j == nr) {
                agg *g = realloc(rows, (nr + 1) * sizeof *g);
                if (!g)
                    OOM();
                rows = g;
                agg *row = &rows[nr++]; /* freed at out whatever it holds */
                sm_sketch_init(&row->sketch);
                row->sketched = !sessions;
                row->name = strdup(name);
                row->per_rank = malloc(nf * sizeof(double));
                row->count = 0;
                if (!row->name || !row->per_rank)
                    OOM();
                for (size_t q = 0; q < nf; q++)
                    row->per_rank[q] = NAN;
            }
            rows[j].per_rank[i] = isnan(rows[j].per_rank[i]) ? t : rows[j].per_rank[i] + t;
            rows[j].count += c;
            if (sessions || !rows[j].sketched)
                continue;
            if (!m->stats[k].sketch)
                rows[j].sketched = 0; /* a report from before sketches */
            else if (sm_sketch_merge(&rows[j].sketch, m->stats[k].sketch))
                OOM();
        }
    }
    for (size_t j = 0; j < nr; j++) {
        sbuf missing;
        sbuf_init(&missing);
        for (size_t i = 0; i < nf; i++)
            if (isnan(rows[j].per_rank[i]))
                sbuf_printf(&missing, "%s%d", missing.len ? ", " : "", r[i].rank);
        if (missing.len)
            sbuf_printf(&notes, "%s \"%s\" is missing on rank(s) %s\n", sessions ? "session" : "section",
                        sbuf_oneline(&pool, rows[j].name), missing.data);
        notes.oom |= missing.oom;
        sbuf_free(&missing);
    }

    if (json)
        sbuf_printf(&o, "{\"schema\":\"sonde-aggregate\",\"schema_version\":1,\"by\":\"%s\","
                        "\"ranks\":%zu,\"world_size\":%d,\"rows\":[", sessions ? "session" : "section",
                    nf, world);
    else if (csv)
        sbuf_puts(&o, "name,count,ranks,min_s,mean_s,max_s,stddev_s,slowest_rank,over_median\n");
    else if (md)
        sbuf_printf(&o, "### sonde aggregate: %zu rank(s)\n\n| %s | count | min | mean | max | "
                        "stddev | slowest rank | over median |\n| --- | --- | --- | --- | --- | --- "
                        "| --- | --- |\n", nf, sessions ? "session" : "section");
    else
        sbuf_printf(&o, "sonde aggregate: %zu report(s), run \"%s\", world size %d\n%-28s %8s %10s "
                        "%10s %10s %10s  %s\n", nf, sbuf_oneline(&pool, r[0].stem), world,
                    sessions ? "session" : "section", "count", "min", "mean", "max", "stddev",
                    "slowest rank (over median)");
    for (size_t j = 0; j < nr; j++) {
        double *v = malloc(nf * sizeof *v);
        if (!v)
            OOM();
        size_t n = 0, slow = 0;
        double sum = 0;
        for (size_t i = 0; i < nf; i++)
            if (!isnan(rows[j].per_rank[i])) {
                v[n++] = rows[j].per_rank[i];
                sum += rows[j].per_rank[i];
                if (isnan(rows[j].per_rank[slow]) || rows[j].per_rank[i] > rows[j].per_rank[slow])
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
        for (size_t a = 1; a < n; a++)
            for (size_t b = a; b > 0 && v[b - 1] > v[b]; b--) {
                double t = v[b];
                v[b] = v[b - 1];
                v[b - 1] = t;
            }
        double med = n ? sm_percentile(v, n, 50) : 0;
        double over = med > 0 ? rows[j].per_rank[slow] / med - 1 : 0;
        free(v);
        int rank = r[slow].rank;
        if (json) {
            sbuf_puts(&o, j ? ",{\"name\":" : "{\"name\":");
            sbuf_json_str(&o, rows[j].name);
            sbuf_printf(&o, ",\"count\":%llu,\"ranks\":%zu,\"min_s\":", (unsigned long long)rows[j].count, n);
            sbuf_json_num(&o, n ? mn : 0);
            sbuf_puts(&o, ",\"mean_s\":");
            sbuf_json_num(&o, mean);
            sbuf_puts(&o, ",\"max_s\":");
            sbuf_json_num(&o, mx);
            sbuf_puts(&o, ",\"stddev_s\":");
            sbuf_json_num(&o, sd);
            sbuf_printf(&o, ",\"slowest_rank\":%d,\"over_median\":", rank);
            sbuf_json_num(&o, over);
            sbuf_puts(&o, ",\"per_rank_s\":[");
            for (size_t i = 0; i < nf; i++) {
                if (i)
                    sbuf_putc(&o, ',');
                sbuf_json_num(&o, rows[j].per_rank[i]);
            }
            /* percentiles of every instance on every rank, from the merged sketches */
            sbuf_puts(&o, "],\"instances\":");
            if (rows[j].sketched && rows[j].sketch.count) {
                const sm_sketch *k = &rows[j].sketch;
                sbuf_printf(&o, "{\"count\":%llu,\"p50_s\":", (unsigned long long)k->count);
                sbuf_json_num(&o, sm_sketch_quantile(k, 0.50) / 1e9);
                sbuf_puts(&o, ",\"p90_s\":");
                sbuf_json_num(&o, sm_sketch_quantile(k, 0.90) / 1e9);
                sbuf_puts(&o, ",\"p99_s\":");
                sbuf_json_num(&o, sm_sketch_quantile(k, 0.99) / 1e9);
                sbuf_puts(&o, ",\"relative_error\":");
                sbuf_json_num(&o, SM_SKETCH_ALPHA);
                sbuf_puts(&o, "}}");
            } else {
                sbuf_puts(&o, "null}");
            }
        } else if (csv) {
            sbuf_csv_str(&o, rows[j].name);
            sbuf_printf(&o, ",%llu,%zu,%.9f,%.9f,%.9f,%.9f,%d,%.6f\n", (unsigned long long)rows[j].count,
                        n, n ? mn : 0, mean, mx, sd, rank, over);
        } else {
            char a[32], b2[32], c[32], d[32];
            sx_fmt_dur(a, sizeof a, n ? mn : 0);
            sx_fmt_dur(b2, sizeof b2, mean);
            sx_fmt_dur(c, sizeof c, mx);
            sx_fmt_dur(d, sizeof d, sd);
            if (md)
                sbuf_printf(&o, "| %s | %llu | %s | %s | %s | %s | %d | %+.1f%% |\n",
                            sbuf_md_cell(&pool, rows[j].name),
                            (unsigned long long)rows[j].count, a, b2, c, d, rank, 100 * over);
            else
                sbuf_printf(&o, "%-28.28s %8llu %10s %10s %10s %10s  rank %d (%+.1f%%)\n",
                            sbuf_oneline(&pool, rows[j].name), (unsigned long long)rows[j].count, a, b2, c, d, rank,
                            100 * over);
        }
    }
    /* per rank: duration, throughput, GPU; and the sum of throughput */
    if (json)
        sbuf_puts(&o, "],\"per_rank\":[");
    else if (!csv)
        sbuf_printf(&o, "%sper rank:\n", md ? "\n" : "");
    /* throughput summed per unit by its name: ranks may have recorded their units in another
     * order (frames/s must never be added to tokens/s) */
    const char *units[16];
    double units_sum[16] = {0};
    size_t n_units = 0;
    for (size_t i = 0; i < nf; i++)
        for (size_t u = 0; u < r[i].m.n_rates; u++) {
            size_t k = 0;
            while (k < n_units && strcmp(units[k], r[i].m.rates[u].unit))
                k++;
            if (k == n_units && n_units < 16)
                units[n_units++] = r[i].m.rates[u].unit;
        }
    for (size_t i = 0; i < nf; i++) {
        const sm_model *m = &r[i].m;
        double um, peak = gpu_peak(m, &um);
        const char *host = sm_info(m, "system.hostname") ? sm_info(m, "system.hostname") : m->host;
        if (json) {
            sbuf_printf(&o, "%s{\"rank\":%d,\"file\":", i ? "," : "", r[i].rank);
            sbuf_json_str(&o, r[i].path);
            sbuf_puts(&o, ",\"host\":");
            sbuf_json_str(&o, host);
            sbuf_puts(&o, ",\"duration_s\":");
            sbuf_json_num(&o, (double)m->duration_ns / 1e9);
            sbuf_puts(&o, ",\"gpu_memory_peak_mib\":");
            sbuf_json_num(&o, peak);
            sbuf_puts(&o, ",\"gpu_util_mean_pct\":");
            sbuf_json_num(&o, um);
            sbuf_putc(&o, '}');
        } else if (!csv) {
            sbuf_printf(&o, "  rank %d (%s): %.3f s", r[i].rank, host ? sbuf_oneline(&pool, host) : "?",
                        (double)m->duration_ns / 1e9);
            if (peak > 0)
                sbuf_printf(&o, ", GPU memory peak %.0f MiB, utilization %.1f%%", peak, um);
        }
        for (size_t u = 0; u < m->n_rates; u++) {
            double ps = m->rates[u].seconds > 0 ? m->rates[u].units / m->rates[u].seconds : 0;
            for (size_t k = 0; k < n_units; k++)
                if (!strcmp(units[k], m->rates[u].unit))
                    units_sum[k] += ps;
            if (!json && !csv && ps > 0)
                sbuf_printf(&o, ", %.2f %s/s", ps, sbuf_oneline(&pool, m->rates[u].unit));
        }
        if (!json && !csv)
            sbuf_putc(&o, '\n');
    }
    if (json)
        sbuf_puts(&o, "],\"throughput_sum\":[");
    for (size_t u = 0; u < n_units; u++) {
        if (json) {
            sbuf_printf(&o, "%s{\"unit\":", u ? "," : "");
            sbuf_json_str(&o, units[u]);
            sbuf_puts(&o, ",\"per_s\":");
            sbuf_json_num(&o, units_sum[u]);
            sbuf_putc(&o, '}');
        } else if (!csv && units_sum[u] > 0) {
            sbuf_printf(&o, "throughput summed over ranks: %.2f %s/s\n", units_sum[u],
                        sbuf_oneline(&pool, units[u]));
        }
    }
    if (json) {
        sbuf_puts(&o, "],\"notes\":[");
        int first = 1;
        for (char *line = notes.data; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            sbuf_puts(&o, first ? "" : ",");
            sbuf_json_str(&o, line);
            first = 0;
            line = nl ? nl + 1 : NULL;
        }
        sbuf_puts(&o, "]}\n");
    } else if (!csv && notes.len) {
        sbuf_printf(&o, "%snotes:\n", md ? "\n" : "");
        for (char *line = notes.data; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            sbuf_printf(&o, "  %s\n", line);
            line = nl ? nl + 1 : NULL;
        }
    }
    if (!json && !csv)
        sbuf_text_safe(&o, 0); /* names from the files: no terminal escapes */
    if (o.oom || notes.oom || pool.oom)
        OOM();
    rc = CLI_OK;
    if (outpath) {
        for (size_t i = 0; i < nf && rc == CLI_OK; i++)
            rc = cli_output_check("aggregate", outpath, r[i].path);
        if (rc == CLI_OK)
            rc = cli_write_output("aggregate", outpath, o.data ? o.data : "", o.len);
    } else {
        fputs(o.data ? o.data : "", stdout);
    }
#undef OOM
out:
    sbuf_free(&o);
    sbuf_free(&notes);
    sbuf_pool_free(&pool);
    for (size_t j = 0; j < nr; j++) {
        free(rows[j].name);
        free(rows[j].per_rank);
        sm_sketch_free(&rows[j].sketch);
    }
    free(rows);
    for (size_t i = 0; i < nf; i++) {
        free(r[i].path);
        if (i < loaded)
            sm_free(&r[i].m);
    }
    free(r);
    return rc;
}
