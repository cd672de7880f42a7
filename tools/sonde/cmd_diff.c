/* cmd_diff.c - `sonde diff BASE NEW`: section by section, and CUDA kernel by kernel (rows named
 * "cuda:KERNEL", from cuda_activity), what changed between two runs. A change is a regression
 * only when the mean time per instance grew by more than the threshold and a Mann-Whitney U test
 * over the per-instance durations says it is significant (p < 0.05); with --fail-on-regression
 * the command exits 1 when there is one, to gate a CI job. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export/export.h"
#include "util/buf.h"
#include "util/strmap.h"

#define KERNEL_PREFIX "cuda:"

/* Per-instance GPU durations of the kernels named name (without the prefix). */
static double *kernel_durations(const sm_model *m, const char *name, size_t *n)
{
    *n = 0;
    double *d = malloc((m->n_gpu ? m->n_gpu : 1) * sizeof *d);
    if (!d)
        return NULL;
    for (size_t i = 0; i < m->n_gpu; i++)
        if (m->gpu[i].kind == SM_GPU_KERNEL && !strcmp(m->gpu[i].name ? m->gpu[i].name : "?", name))
            d[(*n)++] = (double)(m->gpu[i].end_ns - m->gpu[i].start_ns) / 1e9;
    return d;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A statistics row per CUDA kernel name ("cuda:NAME"), as sections have; *n rows (0 and NULL
 * when the run has no kernels). NULL with *n = SIZE_MAX when out of memory. */
static sm_stat *kernel_stats(const sm_model *m, size_t *n)
{
    *n = 0;
    strmap idx;
    strmap_init(&idx);
    sm_stat *v = NULL;
    for (size_t i = 0; i < m->n_gpu; i++) {
        const char *nm = m->gpu[i].name ? m->gpu[i].name : "?";
        if (m->gpu[i].kind != SM_GPU_KERNEL || strmap_get(&idx, nm) >= 0)
            continue;
        sm_stat *g = realloc(v, (*n + 1) * sizeof *g);
        if (!g || strmap_put(&idx, nm, (int)*n))
            goto oom;
        v = g;
        memset(&v[*n], 0, sizeof v[*n]);
        size_t k;
        double *d = kernel_durations(m, nm, &k);
        v[*n].name = malloc(strlen(KERNEL_PREFIX) + strlen(nm) + 1);
        (*n)++;
        if (!d || !v[*n - 1].name) {
            free(d);
            goto oom;
        }
        sprintf(v[*n - 1].name, "%s%s", KERNEL_PREFIX, nm);
        qsort(d, k, sizeof *d, cmp_dbl);
        sm_stat *s = &v[*n - 1];
        s->count = k;
        for (size_t j = 0; j < k; j++)
            s->total_s += d[j];
        s->mean_s = k ? s->total_s / (double)k : 0;
        s->p50_s = sm_percentile(d, k, 50);
        s->p99_s = sm_percentile(d, k, 99);
        free(d);
    }
    strmap_free(&idx);
    return v;
oom:
    strmap_free(&idx);
    for (size_t i = 0; i < *n; i++)
        free(v[i].name);
    free(v);
    *n = SIZE_MAX;
    return NULL;
}

static void kernel_stats_free(sm_stat *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

static const sm_stat *find_in(const sm_stat *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    return NULL;
}

#define ALPHA 0.05
#define MIN_INSTANCES 5

/* Per-instance durations of the spans named name. */
static double *durations(const sm_model *m, const char *name, size_t *n)
{
    *n = 0;
    double *d = malloc((m->n_spans ? m->n_spans : 1) * sizeof *d);
    if (!d)
        return NULL;
    for (size_t i = 0; i < m->n_spans; i++)
        if (!strcmp(sm_str(m, m->spans[i].site), name))
            d[(*n)++] = (double)(m->spans[i].end_ns - m->spans[i].start_ns) / 1e9;
    return d;
}

typedef struct ranked {
    double v;
    int group;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    return x < y ? -1 : x > y;
}

/* Two-sided Mann-Whitney U test (normal approximation with the tie correction and a continuity
 * correction); returns p, or NAN when a sample has fewer than MIN_INSTANCES. */
double mann_whitney_p(const double *a, size_t na, const double *b, size_t nb)
{
    if (na < MIN_INSTANCES || nb < MIN_INSTANCES)
        return NAN;
    size_t n = na + nb;
    ranked *r = malloc(n * sizeof *r);
    if (!r)
        return NAN;
    for (size_t i = 0; i < na; i++)
        r[i] = (ranked){a[i], 0};
    for (size_t i = 0; i < nb; i++)
        r[na + i] = (ranked){b[i], 1};
    qsort(r, n, sizeof *r, cmp_ranked);
    double ra = 0, ties = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && r[j].v == r[i].v)
            j++;
        double avg = (double)(i + 1 + j) / 2.0, t = (double)(j - i);
        for (size_t k = i; k < j; k++)
            if (r[k].group == 0)
                ra += avg;
        ties += t * t * t - t;
        i = j;
    }
    free(r);
    double n1 = (double)na, n2 = (double)nb, N = (double)n;
    double u = ra - n1 * (n1 + 1) / 2, mu = n1 * n2 / 2;
    double sigma = sqrt(n1 * n2 / 12.0 * ((N + 1) - ties / (N * (N - 1))));
    if (sigma <= 0)
        return 1;
    double z = (fabs(u - mu) - 0.5) / sigma;
    if (z < 0)
        z = 0;
    return erfc(z / sqrt(2.0));
}

typedef struct row {
    const char *name;
    const sm_stat *a, *b;
    double change;   /* relative change of the mean time per instance */
    double p;        /* NAN: not tested */
    int regression, improvement;
    int kernel;      /* a CUDA kernel's row: its durations come from the GPU activity */
} row;

static const sm_stat *find(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_stats; i++)
        if (!strcmp(m->stats[i].name, name))
            return &m->stats[i];
    return NULL;
}

static double rate_of(const sm_model *m, const char *unit)
{
    for (size_t i = 0; i < m->n_rates; i++)
        if (!strcmp(m->rates[i].unit, unit) && m->rates[i].seconds > 0)
            return m->rates[i].units / m->rates[i].seconds;
    return 0;
}

int cmd_diff(int argc, char **argv)
{
    static const char *const opts[] = {"--threshold", "--fail-on-regression", "--format", NULL};
    const char *files[2] = {NULL, NULL}, *format = "text";
    double threshold = 0.05;
    int fail = 0, nf = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--threshold") || !strcmp(a, "--format")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "diff", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--format")) {
                format = v;
                continue;
            }
            char *end;
            double t = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "%")) || !(t >= 0 && t <= 1000)) /* NaN too */
                return cli_fail(CLI_USAGE, "diff", "--threshold %s: expected a percentage such "
                                                   "as 5%% or 12.5", v);
            threshold = t / 100.0;
        } else if (!strcmp(a, "--fail-on-regression")) {
            fail = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_bad_option("diff", a, opts);
        } else if (nf < 2) {
            files[nf++] = a;
        } else {
            return cli_fail(CLI_USAGE, "diff", "two runs: BASE and NEW (got a third, %s)", a);
        }
    }
    if (nf == 1) {
        cli_fail(CLI_USAGE, "diff", "two runs are needed, BASE and NEW; got only %s", files[0]);
        return cli_usage(cli_find("diff"), 1);
    }
    if (nf != 2)
        return cli_usage(cli_find("diff"), 1);
    int json = !strcmp(format, "json"), md = !strcmp(format, "markdown");
    if (!json && !md && strcmp(format, "text"))
        return cli_fail(CLI_USAGE, "diff", "--format %s: expected text, json or markdown", format);
    sm_model A, B;
    int rc = cli_load("diff", files[0], &A);
    if (rc)
        return rc;
    if ((rc = cli_load("diff", files[1], &B))) {
        sm_free(&A);
        return rc;
    }
    size_t nr = 0, nka, nkb;
    sm_stat *ka = kernel_stats(&A, &nka), *kb = kernel_stats(&B, &nkb);
    row *rows = nka != SIZE_MAX && nkb != SIZE_MAX
                    ? calloc(A.n_stats + B.n_stats + nka + nkb + 1, sizeof *rows)
                    : NULL;
    if (!rows) {
        kernel_stats_free(ka, nka == SIZE_MAX ? 0 : nka);
        kernel_stats_free(kb, nkb == SIZE_MAX ? 0 : nkb);
        sm_free(&A);
        sm_free(&B);
        return cli_fail(CLI_USAGE, "diff", "out of memory");
    }
    for (size_t i = 0; i < A.n_stats; i++)
        rows[nr++] = (row){A.stats[i].name, &A.stats[i], find(&B, A.stats[i].name), 0, NAN, 0, 0, 0};
    for (size_t i = 0; i < B.n_stats; i++)
        if (!find(&A, B.stats[i].name))
            rows[nr++] = (row){B.stats[i].name, NULL, &B.stats[i], 0, NAN, 0, 0, 0};
    for (size_t i = 0; i < nka; i++)
        rows[nr++] = (row){ka[i].name, &ka[i], find_in(kb, nkb, ka[i].name), 0, NAN, 0, 0, 1};
    for (size_t i = 0; i < nkb; i++)
        if (!find_in(ka, nka, kb[i].name))
            rows[nr++] = (row){kb[i].name, NULL, &kb[i], 0, NAN, 0, 0, 1};
    int regressions = 0, instances = A.n_spans && B.n_spans;
    for (size_t i = 0; i < nr; i++) {
        row *r = &rows[i];
        if (!r->a || !r->b || r->a->mean_s <= 0)
            continue;
        r->change = r->b->mean_s / r->a->mean_s - 1;
        if (instances || r->kernel) {
            size_t na, nb;
            const char *kn = r->kernel ? r->name + strlen(KERNEL_PREFIX) : NULL;
            double *da = kn ? kernel_durations(&A, kn, &na) : durations(&A, r->name, &na);
            double *db = kn ? kernel_durations(&B, kn, &nb) : durations(&B, r->name, &nb);
            if (da && db)
                r->p = mann_whitney_p(da, na, db, nb);
            free(da);
            free(db);
        }
        int significant = !isnan(r->p) && r->p < ALPHA;
        r->regression = r->change > threshold && significant;
        r->improvement = r->change < -threshold && significant;
        regressions += r->regression;
    }
    sbuf o;
    sbuf_init(&o);
    const char *test = "two-sided Mann-Whitney U test over per-instance durations, p < 0.05";
    if (json) {
        sbuf_puts(&o, "{\"base\":");
        sbuf_json_str(&o, files[0]);
        sbuf_puts(&o, ",\"new\":");
        sbuf_json_str(&o, files[1]);
        sbuf_printf(&o, ",\"threshold\":%g,\"test\":", threshold);
        sbuf_json_str(&o, test);
        sbuf_printf(&o, ",\"regressions\":%d,\"sections\":[", regressions);
        for (size_t i = 0; i < nr; i++) {
            const row *r = &rows[i];
            sbuf_puts(&o, i ? ",{\"name\":" : "{\"name\":");
            sbuf_json_str(&o, r->name);
            sbuf_printf(&o, ",\"status\":\"%s\"", !r->a ? "new" : !r->b ? "vanished"
                                                  : r->regression ? "regression"
                                                  : r->improvement ? "improvement" : "same");
            if (r->a && r->b) {
                sbuf_printf(&o, ",\"count\":[%llu,%llu],\"total_s\":[", (unsigned long long)r->a->count,
                            (unsigned long long)r->b->count);
                sbuf_json_num(&o, r->a->total_s);
                sbuf_putc(&o, ',');
                sbuf_json_num(&o, r->b->total_s);
                sbuf_puts(&o, "],\"mean_s\":[");
                sbuf_json_num(&o, r->a->mean_s);
                sbuf_putc(&o, ',');
                sbuf_json_num(&o, r->b->mean_s);
                sbuf_puts(&o, "],\"p50_s\":[");
                sbuf_json_num(&o, r->a->p50_s);
                sbuf_putc(&o, ',');
                sbuf_json_num(&o, r->b->p50_s);
                sbuf_puts(&o, "],\"p99_s\":[");
                sbuf_json_num(&o, r->a->p99_s);
                sbuf_putc(&o, ',');
                sbuf_json_num(&o, r->b->p99_s);
                sbuf_puts(&o, "],\"change\":");
                sbuf_json_num(&o, r->change);
                sbuf_puts(&o, ",\"p\":");
                sbuf_json_num(&o, r->p);
            }
            sbuf_putc(&o, '}');
        }
        sbuf_puts(&o, "],\"throughput\":[");
        for (size_t i = 0; i < A.n_rates; i++) {
            double ra = rate_of(&A, A.rates[i].unit), rb = rate_of(&B, A.rates[i].unit);
            sbuf_puts(&o, i ? ",{\"unit\":" : "{\"unit\":");
            sbuf_json_str(&o, A.rates[i].unit);
            sbuf_printf(&o, ",\"per_s\":[%.9g,%.9g]}", ra, rb);
        }
        sbuf_puts(&o, "]}\n");
    } else {
        const char *sep = md ? " | " : "  ";
        sbuf_pool pool = {0}; /* names on one line each */
        if (md)
            sbuf_printf(&o, "### sonde diff\n\n`%s` → `%s`, threshold %.1f%%, %s.\n\n"
                            "| section | count | mean | p50 | p99 | change | p | verdict |\n"
                            "| --- | --- | --- | --- | --- | --- | --- | --- |\n",
                        files[0], files[1], threshold * 100, test);
        else
            sbuf_printf(&o, "sonde diff: %s -> %s (threshold %.1f%%; %s)\n%-32s%s%9s%s%21s%s%9s%s%s\n",
                        files[0], files[1], threshold * 100, test, "section", sep, "count", sep,
                        "mean", sep, "change", sep, "verdict");
        for (size_t i = 0; i < nr; i++) {
            const row *r = &rows[i];
            const char *verdict = !r->a ? "new" : !r->b ? "vanished" : r->regression ? "REGRESSION"
                                  : r->improvement ? "improvement"
                                  : fabs(r->change) > threshold ? (isnan(r->p) ? "changed, not tested"
                                                                              : "changed, not significant")
                                                                : "same";
            char ma[32] = "-", mb[32] = "-", pa[32] = "", pb[32] = "", qa[32] = "", qb[32] = "";
            if (r->a) {
                sx_fmt_dur(ma, sizeof ma, r->a->mean_s);
                sx_fmt_dur(pa, sizeof pa, r->a->p50_s);
                sx_fmt_dur(qa, sizeof qa, r->a->p99_s);
            }
            if (r->b) {
                sx_fmt_dur(mb, sizeof mb, r->b->mean_s);
                sx_fmt_dur(pb, sizeof pb, r->b->p50_s);
                sx_fmt_dur(qb, sizeof qb, r->b->p99_s);
            }
            char ch[32] = "", pv[32] = "";
            if (r->a && r->b)
                snprintf(ch, sizeof ch, "%+.1f%%", 100 * r->change);
            if (!isnan(r->p))
                snprintf(pv, sizeof pv, "%.3g", r->p);
            if (md)
                sbuf_printf(&o, "| %s | %llu → %llu | %s → %s | %s → %s | %s → %s | %s | %s | %s |\n",
                            sbuf_oneline(&pool, r->name), (unsigned long long)(r->a ? r->a->count : 0),
                            (unsigned long long)(r->b ? r->b->count : 0), ma, mb, pa, pb, qa, qb,
                            ch, pv, r->regression ? "**regression**" : verdict);
            else {
                char cnt[48], mean[72]; /* two durations of up to 31 characters */
                snprintf(cnt, sizeof cnt, "%llu->%llu", (unsigned long long)(r->a ? r->a->count : 0),
                         (unsigned long long)(r->b ? r->b->count : 0));
                snprintf(mean, sizeof mean, "%s -> %s", ma, mb);
                sbuf_printf(&o, "%-32.32s%s%9s%s%21s%s%9s%s%s%s%s\n", sbuf_oneline(&pool, r->name),
                            sep, cnt, sep, mean,
                            sep, ch, sep, verdict, pv[0] ? "  p=" : "", pv);
            }
        }
        for (size_t i = 0; i < A.n_rates; i++) {
            double ra = rate_of(&A, A.rates[i].unit), rb = rate_of(&B, A.rates[i].unit);
            if (ra > 0 || rb > 0)
                sbuf_printf(&o, "%sthroughput %s/s: %.2f -> %.2f (%+.1f%%)\n", md ? "\n" : "",
                            sbuf_oneline(&pool, A.rates[i].unit), ra, rb,
                            ra > 0 ? 100 * (rb / ra - 1) : 0);
        }
        if (A.total_flops_s > 0 && B.total_flops_s > 0)
            sbuf_printf(&o, "%sFLOP/s: %.4g -> %.4g (%+.1f%%)\n", md ? "\n" : "",
                        A.total_flops / A.total_flops_s, B.total_flops / B.total_flops_s,
                        100 * ((B.total_flops / B.total_flops_s) / (A.total_flops / A.total_flops_s) - 1));
        if (!instances)
            sbuf_printf(&o, "%s(a JSON report has no per-instance durations: changes were not tested "
                            "for significance; diff the .sonde files for that)\n", md ? "\n" : "");
        sbuf_printf(&o, "%s%d regression(s)\n", md ? "\n" : "", regressions);
        o.oom |= pool.oom;
        sbuf_pool_free(&pool);
    }
    sbuf_text_safe(&o, 0); /* section names from the files: no terminal escapes */
    fputs(o.data ? o.data : "", stdout);
    sbuf_free(&o);
    free(rows);
    kernel_stats_free(ka, nka);
    kernel_stats_free(kb, nkb);
    sm_free(&A);
    sm_free(&B);
    return fail && regressions ? CLI_FINDING : CLI_OK;
}
