/* cmd_diff.c - `sonde diff BASE... -- NEW...`: section by section, and CUDA kernel by kernel
 * (rows "cuda:KERNEL"), what changed between two sets of runs.
 *
 * The noise that matters is between runs (the machine busier during one of them), so the test is
 * across runs: each run gives one figure per section (its mean time per instance, or a chosen
 * percentile), and a two-sided Mann-Whitney U test (or Welch's t with --test welch) compares the
 * base runs' figures with the new runs'. A row is a regression when it grew by more than the
 * threshold and p < 0.05, p adjusted for the rows tested together (Holm's by default,
 * --correction); a row not found changed says the change its runs could have shown. With one run a side there is nothing to test: a change over the
 * threshold is then a regression "over threshold, not tested", never a silent pass.
 * --per-instance tests the instances of all runs instead, assuming they are independent (they are
 * not when the whole machine slows down: the old behaviour, kept as an option).
 * Exit: 1 with --fail-on-regression when there is a regression, 2 on misuse (and with --strict
 * when the two sides do not look like the same program), 0 otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "export/export.h"
#include "record/record.h"
#include "stats.h"
#include "util/buf.h"
#include "util/strmap.h"
#include <sonde/sonde.h>
#include "util/sort.h"

#define KERNEL_PREFIX "cuda:"
#define ALPHA 0.05

/* The figures --stat compares: the mean, then the percentiles of the statistics' list
 * (SONDE_SECTION_STATS: the fields with a quantile q, named "pQ"), each by its field; the list's
 * other fields have no name here and are not figures. */
#define FIG_STR_(x) #x
#define FIG_STR(x) FIG_STR_(x)
#define FIG_ROW(f, kind, label, table, q) {(q) ? "p" FIG_STR(q) : NULL, offsetof(sm_stat, f)},
static const struct {
    const char *name;
    size_t at;
} g_figs[] = {{"mean", offsetof(sm_stat, mean_s)}, SONDE_SECTION_STATS(FIG_ROW)};
#undef FIG_ROW
#define N_FIGS (int)(sizeof g_figs / sizeof *g_figs)
enum { FIG_MEAN };

/* ---- the runs of a side ---- */

typedef struct side {
    char **paths;
    size_t n, cap;
    char *program; /* of its first run, for the same-program check */
} side;

static int add_path(side *s, const char *path)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 8;
        char **g = realloc(s->paths, nc * sizeof *g);
        if (!g)
            return -1;
        s->paths = g;
        s->cap = nc;
    }
    if (!(s->paths[s->n] = strdup(path)))
        return -1;
    s->n++;
    return 0;
}

/* A directory's runs (cli_dir_runs); one with none is an error. */
static int add_dir(side *s, const char *dir)
{
    size_t before = s->n;
    if (cli_dir_runs(dir, 0, &s->paths, &s->n, &s->cap) != 0)
        return errno == ENOMEM ? cli_fail(CLI_USAGE, "diff", "out of memory")
                               : cli_fail(CLI_USAGE, "diff", "%s: %s", dir, strerror(errno));
    if (s->n == before)
        return cli_fail(CLI_USAGE, "diff", "%s: no run in the directory (NAME.json or NAME.sonde)",
                        dir);
    return CLI_OK;
}

/* One argument: a directory, a file, or a glob the shell did not expand. */
static int add_arg(side *s, const char *a)
{
    struct stat st;
    if (stat(a, &st) == 0)
        return S_ISDIR(st.st_mode) ? add_dir(s, a)
               : add_path(s, a)    ? cli_fail(CLI_USAGE, "diff", "out of memory")
                                   : CLI_OK;
    if (strpbrk(a, "*?[")) {
        glob_t g;
        int rc = glob(a, 0, NULL, &g);
        if (rc == GLOB_NOMATCH)
            return cli_fail(CLI_USAGE, "diff", "%s: matches no file", a);
        if (rc)
            return cli_fail(CLI_USAGE, "diff", "%s: out of memory", a);
        for (size_t i = 0; i < g.gl_pathc && rc == CLI_OK; i++)
            rc = add_arg(s, g.gl_pathv[i]);
        globfree(&g);
        return rc;
    }
    return cli_fail(CLI_USAGE, "diff", "%s: no such file or directory", a);
}

static void side_free(side *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s->program);
}

/* ---- rows: a section or kernel name, its figures on each side ---- */

typedef struct values {
    double *v;
    size_t n, cap;
} values;

static int push(values *x, double v)
{
    if (x->n == x->cap) {
        size_t nc = x->cap ? 2 * x->cap : 8;
        double *g = realloc(x->v, nc * sizeof *g);
        if (!g)
            return -1;
        x->v = g;
        x->cap = nc;
    }
    x->v[x->n++] = v;
    return 0;
}

typedef struct row {
    char *name;
    int kernel;
    struct {
        values runs;            /* the chosen figure of each run that has the row */
        double count, mean, m2; /* its instances pooled over runs: count, mean, sum of squares */
        values inst;            /* their durations (--per-instance, .sonde runs) */
    } s[2];
    double base;       /* the base side's centre the change is relative to (judge) */
    double change;     /* relative change of the centre (median of runs; pooled mean per instance) */
    st_result r;       /* p (NAN: not tested), the interval of the change (relative) */
    double p_adj;      /* p adjusted for the rows tested together (--correction; NAN: untested) */
    double mdc;        /* the smallest change the test would find with 80% power, relative
                          (NAN: not computed; INFINITY: no p these runs can give passes) */
    int tested, regression, improvement;
} row;

typedef struct table {
    row *rows;
    size_t n, cap;
    strmap idx;
    int no_instances[2]; /* a run of that side had no instances to give (a JSON report) */
} table;

static row *row_of(table *t, const char *name, int kernel)
{
    int k = strmap_get(&t->idx, name);
    if (k >= 0)
        return &t->rows[k];
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 32;
        row *g = realloc(t->rows, nc * sizeof *g);
        if (!g)
            return NULL;
        t->rows = g;
        t->cap = nc;
    }
    row *r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    if (!(r->name = strdup(name)) || strmap_put(&t->idx, r->name, (int)t->n)) {
        free(r->name);
        return NULL;
    }
    r->kernel = kernel;
    t->n++;
    return r;
}

static void table_free(table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->rows[i].name);
        for (int s = 0; s < 2; s++) {
            free(t->rows[i].s[s].runs.v);
            free(t->rows[i].s[s].inst.v);
        }
    }
    free(t->rows);
    strmap_free(&t->idx);
}

static double pick(const sm_stat *st, int fig)
{
    return *(const double *)(const void *)((const char *)st + g_figs[fig].at);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The statistics of every CUDA kernel name of m, as sections have them (*n of them). */
static sm_stat *kernel_stats(const sm_model *m, size_t *n)
{
    *n = 0;
    strmap idx;
    strmap_init(&idx);
    sm_stat *v = NULL;
    double *d = malloc((m->n_gpu ? m->n_gpu : 1) * sizeof *d);
    if (!d)
        goto oom;
    for (size_t i = 0; i < m->n_gpu; i++) {
        const char *nm = m->gpu[i].name ? m->gpu[i].name : "?";
        if (m->gpu[i].kind != SM_GPU_KERNEL || strmap_get(&idx, nm) >= 0)
            continue;
        sm_stat *g = realloc(v, (*n + 1) * sizeof *g);
        if (!g)
            goto oom;
        v = g;
        memset(&v[*n], 0, sizeof v[*n]);
        if (!(v[*n].name = strdup(nm)))
            goto oom;
        (*n)++;
        if (strmap_put(&idx, v[*n - 1].name, (int)*n - 1))
            goto oom;
        size_t k = 0;
        for (size_t j = i; j < m->n_gpu; j++)
            if (m->gpu[j].kind == SM_GPU_KERNEL && !strcmp(m->gpu[j].name ? m->gpu[j].name : "?", nm))
                d[k++] = (double)(m->gpu[j].end_ns - m->gpu[j].start_ns) / 1e9;
        sonde__sort(d, k, sizeof *d, cmp_dbl);
        sm_stat *s = &v[*n - 1];
        double mean, var;
        st_mean_var(d, k, &mean, &var);
        s->count = k;
        s->mean_s = mean;
        s->stddev_s = k ? sqrt(var * (double)(k - 1) / (double)k) : 0; /* as sections: over n */
        sm_stat_percentiles(s, d, k);
    }
    free(d);
    strmap_free(&idx);
    return v;
oom:
    free(d);
    strmap_free(&idx);
    for (size_t i = 0; i < *n; i++)
        free(v[i].name);
    free(v);
    *n = SIZE_MAX;
    return NULL;
}

/* The correction for testing many rows at once (--correction). */
enum { CORR_NONE, CORR_HOLM, CORR_BH };

typedef struct opts {
    int fig, welch, per_instance, correction;
} opts;

/* Adds one statistics row of one run to side s of its table row. */
static int add_stat(table *t, int s, const sm_stat *st, const char *name, int kernel,
                    const opts *o)
{
    if (!st->count)
        return 0;
    row *r = row_of(t, name, kernel);
    if (!r)
        return -1;
    double n = (double)st->count, var = st->stddev_s * st->stddev_s * n; /* sum of squares */
    double tot = r->s[s].count + n, delta = st->mean_s - r->s[s].mean;
    r->s[s].m2 += var + delta * delta * r->s[s].count * n / tot; /* Chan et al. */
    r->s[s].mean += delta * n / tot;
    r->s[s].count = tot;
    return push(&r->s[s].runs, pick(st, o->fig));
}

typedef struct inst_ctx {
    table *t;
    int s;
    int oom;
} inst_ctx;

/* One section's duration into its row (END_LOST ones have none). 0, or -1 out of memory. */
static int add_instance(void *ctx, const sm_model *m, const sm_span *sp)
{
    inst_ctx *c = ctx;
    if (sp->flags & SM_SPAN_END_LOST)
        return 0;
    row *r = row_of(c->t, sm_str(m, sp->site), 0);
    c->oom = !r || push(&r->s[c->s].inst, (double)(sp->end_ns - sp->start_ns) / 1e9);
    return c->oom ? -1 : 0;
}

/* --per-instance of a run the model will not hold whole (report_max_sections): its sections'
 * durations taken by name as the file is read (a sink of the reading), each name's in the order
 * they closed (call sites of one name together, as the rows have them), and put in the table
 * once the run's statistics rows are (add_instances). */
typedef struct inst_feed {
    int32_t *slot_of;   /* by site id: its name's slot + 1, 0 until met */
    size_t n_ids;
    strmap names;       /* a name's slot */
    values *by_name;    /* each slot's durations */
    uint32_t *site_of;  /* a site of each slot's name */
    size_t n_slots, cap_slots;
} inst_feed;

/* The slot of site's name, made when it is new. -1 out of memory. */
static int32_t feed_slot(inst_feed *f, const sm_model *m, uint32_t site)
{
    if (site >= f->n_ids) {
        size_t n = (size_t)site + 1 > 2 * f->n_ids ? (size_t)site + 1 : 2 * f->n_ids;
        int32_t *g = realloc(f->slot_of, n * sizeof *g);
        if (!g)
            return -1;
        memset(g + f->n_ids, 0, (n - f->n_ids) * sizeof *g);
        f->slot_of = g;
        f->n_ids = n;
    }
    if (f->slot_of[site])
        return f->slot_of[site] - 1;
    const char *name = sm_str(m, site);
    int k = strmap_get(&f->names, name);
    if (k < 0) {
        if (f->n_slots == f->cap_slots) {
            size_t nc = f->cap_slots ? 2 * f->cap_slots : 16;
            values *v = realloc(f->by_name, nc * sizeof *v);
            if (v)
                f->by_name = v;
            uint32_t *w = v ? realloc(f->site_of, nc * sizeof *w) : NULL;
            if (!w)
                return -1;
            f->site_of = w;
            f->cap_slots = nc;
        }
        k = (int)f->n_slots;
        if (strmap_put(&f->names, name, k))
            return -1;
        f->by_name[k] = (values){0};
        f->site_of[k] = site;
        f->n_slots++;
    }
    f->slot_of[site] = k + 1;
    return k;
}

static int feed_instance(void *ctx, const sm_model *m, const sm_span *sp)
{
    inst_feed *f = ctx;
    if (sp->flags & SM_SPAN_END_LOST)
        return 0;
    int32_t k = feed_slot(f, m, sp->site);
    if (k >= 0 && push(&f->by_name[k], (double)(sp->end_ns - sp->start_ns) / 1e9) == 0)
        return 0;
    sonde__fail(SONDE_ENOMEM, "out of memory while reading the instances"); /* cli_load_fed
                                                                              says it */
    return -1;
}

static void inst_feed_free(inst_feed *f)
{
    for (size_t i = 0; i < f->n_slots; i++)
        free(f->by_name[i].v);
    free(f->by_name);
    free(f->site_of);
    free(f->slot_of);
    strmap_free(&f->names);
}

/* The instance durations of a run for --per-instance: every section's, those of a run the model
 * does not hold whole as the file was read (fed: m->fed), else the spans it holds. 0, -1 out
 * of memory, -2 the file could not be read again (sonde_last_error says why). */
static int add_instances(table *t, int s, const sm_model *m, const inst_feed *fed)
{
    inst_ctx c = {t, s, 0};
    if (m->fed && !m->merged) {
        for (size_t i = 0; i < fed->n_slots; i++) {
            row *r = row_of(t, sm_str(m, fed->site_of[i]), 0);
            if (!r)
                return -1;
            for (size_t k = 0; k < fed->by_name[i].n; k++)
                if (push(&r->s[s].inst, fed->by_name[i].v[k]))
                    return -1;
        }
    } else if (sm_each_section(m, add_instance, &c)) {
        return c.oom ? -1 : -2;
    }
    char name[1024];
    for (size_t i = 0; i < m->n_gpu; i++) {
        if (m->gpu[i].kind != SM_GPU_KERNEL)
            continue;
        snprintf(name, sizeof name, "%s%s", KERNEL_PREFIX, m->gpu[i].name ? m->gpu[i].name : "?");
        row *r = row_of(t, name, 1);
        if (!r || push(&r->s[s].inst, (double)(m->gpu[i].end_ns - m->gpu[i].start_ns) / 1e9))
            return -1;
    }
    return 0;
}

/* Throughput per unit, summed figures per side (the mean over the side's runs). */
typedef struct rate {
    char unit[128];
    double sum[2];
    int n[2];
} rate;

static char *base_name(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return strdup(s ? s + 1 : path ? path : "");
}

/* Loads every run of side s into the table (one model at a time). CLI_OK or CLI_USAGE. */
static int load_side(table *t, side *sd, int s, const opts *o, rate *rates, size_t *n_rates)
{
    for (size_t i = 0; i < sd->n; i++) {
        sm_model m;
        inst_feed fed;
        memset(&fed, 0, sizeof fed);
        strmap_init(&fed.names);
        const sm_feed feed = {sm_feed_whenever_folded, feed_instance, &fed};
        int rc = cli_load_fed("diff", sd->paths[i], o->per_instance ? &feed : NULL, &m);
        if (rc) {
            inst_feed_free(&fed);
            return rc;
        }
        if (i == 0) {
            if (!(sd->program = base_name(m.program)))
                rc = -1;
        }
        for (size_t k = 0; k < m.n_stats && !rc; k++)
            rc = add_stat(t, s, &m.stats[k], m.stats[k].name, 0, o);
        size_t nk;
        sm_stat *ks = kernel_stats(&m, &nk);
        if (nk == SIZE_MAX)
            rc = -1;
        char name[1024];
        for (size_t k = 0; k < nk && nk != SIZE_MAX && !rc; k++) {
            snprintf(name, sizeof name, "%s%s", KERNEL_PREFIX, ks[k].name);
            rc = add_stat(t, s, &ks[k], name, 1, o);
        }
        for (size_t k = 0; ks && k < nk; k++)
            free(ks[k].name);
        free(ks);
        if (!rc && o->per_instance) {
            if (m.n_spans || m.n_gpu)
                rc = add_instances(t, s, &m, &fed);
            else
                t->no_instances[s] = 1;
        }
        for (size_t u = 0; u < m.n_rates && !rc; u++) {
            if (!(m.rates[u].seconds > 0))
                continue;
            size_t k = 0;
            while (k < *n_rates && strcmp(rates[k].unit, m.rates[u].unit))
                k++;
            if (k == *n_rates) {
                if (k == 16)
                    continue;
                memset(&rates[k], 0, sizeof rates[k]);
                snprintf(rates[k].unit, sizeof rates[k].unit, "%s", m.rates[u].unit);
                (*n_rates)++;
            }
            rates[k].sum[s] += m.rates[u].units / m.rates[u].seconds;
            rates[k].n[s]++;
        }
        inst_feed_free(&fed);
        sm_free(&m);
        if (rc == -2)
            return cli_fail(CLI_USAGE, "diff", "%s", sonde_last_error());
        if (rc)
            return cli_fail(CLI_USAGE, "diff", "out of memory");
    }
    return CLI_OK;
}

/* ---- the verdict of a row ---- */

static const char *const g_corr[] = {"none", "holm", "bh"};

static double centre(const values *x)
{
    double *c = malloc((x->n ? x->n : 1) * sizeof *c);
    if (!c || !x->n) {
        free(c);
        return NAN;
    }
    memcpy(c, x->v, x->n * sizeof *c);
    double m = st_median(c, x->n);
    free(c);
    return m;
}

static int judge(row *r, const opts *o, double threshold, int have_instances)
{
    r->r.p = r->r.lo = r->r.hi = r->base = NAN;
    r->r.min_p = 1;
    if (!r->s[0].runs.n || !r->s[1].runs.n)
        return 0;
    double base, nw;
    int rc = 0;
    if (o->per_instance) {
        base = r->s[0].mean;
        nw = r->s[1].mean;
        int have = have_instances && r->s[0].inst.n && r->s[1].inst.n;
        if (have && !o->welch)
            rc = st_mann_whitney(r->s[0].inst.v, r->s[0].inst.n, r->s[1].inst.v,
                                 r->s[1].inst.n, ALPHA, &r->r);
        else if (r->s[0].count >= 2 && r->s[1].count >= 2)
            st_welch((size_t)r->s[0].count, base, r->s[0].m2 / (r->s[0].count - 1),
                     (size_t)r->s[1].count, nw, r->s[1].m2 / (r->s[1].count - 1), ALPHA, &r->r);
    } else if (o->welch) {
        double va, vb;
        st_mean_var(r->s[0].runs.v, r->s[0].runs.n, &base, &va);
        st_mean_var(r->s[1].runs.v, r->s[1].runs.n, &nw, &vb);
        st_welch(r->s[0].runs.n, base, va, r->s[1].runs.n, nw, vb, ALPHA, &r->r);
    } else {
        base = centre(&r->s[0].runs);
        nw = centre(&r->s[1].runs);
        if (r->s[0].runs.n >= 2 && r->s[1].runs.n >= 2)
            rc = st_mann_whitney(r->s[0].runs.v, r->s[0].runs.n, r->s[1].runs.v,
                                 r->s[1].runs.n, ALPHA, &r->r);
    }
    if (rc)
        return -1;
    r->base = base;
    if (!(base > 0))
        return 0;
    r->change = nw / base - 1;
    r->r.lo /= base; /* the interval of new - base, as a change relative to base */
    r->r.hi /= base;
    if (r->r.lo < -1) /* a time or a rate falls to zero at the most: -100% (Welch's normal */
        r->r.lo = -1; /* interval went below it, "[-143.2%, +21.0%]", on two noisy runs) */
    r->tested = !isnan(r->r.p);
    (void)threshold; /* decide() judges, once every row's p is known */
    return 0;
}

static int cmp_p(const void *a, const void *b)
{
    double x = (*(row *const *)a)->r.p, y = (*(row *const *)b)->r.p;
    return (x > y) - (x < y);
}

/* The tested rows' p adjusted for their number m (Holm's step-down: the k-th smallest times
 * m - k + 1, never below the one before; Benjamini-Hochberg's step-up: the k-th smallest times
 * m / k, never above the one after), into p_adj. 0, or -1 out of memory. */
static int adjust(table *t, int correction, size_t *m_out)
{
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++)
        m += t->rows[i].tested;
    *m_out = m;
    row **by = malloc((m ? m : 1) * sizeof *by);
    if (!by)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        t->rows[i].p_adj = NAN;
        if (t->rows[i].tested)
            by[k++] = &t->rows[i];
    }
    qsort(by, m, sizeof *by, cmp_p);
    if (correction == CORR_HOLM) {
        double run = 0;
        for (size_t j = 0; j < m; j++) {
            double q = by[j]->r.p * (double)(m - j);
            run = q > run ? q : run;
            by[j]->p_adj = run < 1 ? run : 1;
        }
    } else if (correction == CORR_BH) {
        double run = 1;
        for (size_t j = m; j-- > 0;) {
            double q = by[j]->r.p * (double)m / (double)(j + 1);
            run = q < run ? q : run;
            by[j]->p_adj = run;
        }
    } else {
        for (size_t j = 0; j < m; j++)
            by[j]->p_adj = by[j]->r.p;
    }
    free(by);
    return 0;
}

/* The sides' spread for the minimum detectable change: count, mean and sample variance of what
 * the test compares (the runs' figures; the pooled instances with --per-instance). */
static void spread(const row *r, int s, const opts *o, double *n, double *var)
{
    if (o->per_instance) {
        *n = r->s[s].count;
        *var = r->s[s].count >= 2 ? r->s[s].m2 / (r->s[s].count - 1) : 0;
    } else {
        double mean;
        st_mean_var(r->s[s].runs.v, r->s[s].runs.n, &mean, var);
        *n = (double)r->s[s].runs.n;
    }
}

/* Mann-Whitney's smallest two-sided p for na and nb values without ties, 2 / C(na + nb, na):
 * what the run counts allow (st_result's min_p counts the ties these values have). */
static double mw_min_p(size_t na, size_t nb)
{
    double c = 1;
    for (size_t k = 1; k <= na; k++)
        c = c * (double)(nb + k) / (double)k;
    return c > 2 ? 2 / c : 1;
}

/* The change the test would find in 80% of tries at level alpha (each row's, after the
 * correction: alpha / m for the row tested first), relative to the base: (t at 1 - alpha / 2
 * plus t at 0.8) standard errors of the difference, with Welch's degrees of freedom; the same
 * normal theory stands in for Mann-Whitney (its efficiency against t is 0.95 for normal
 * times), which cannot find anything where its smallest p does not pass (INFINITY). */
static double min_detectable(const row *r, const opts *o, double alpha, double base)
{
    if (!r->tested || !(base > 0))
        return NAN;
    if (!o->welch && !o->per_instance && mw_min_p(r->s[0].runs.n, r->s[1].runs.n) >= alpha)
        return INFINITY;
    double na, va, nb, vb;
    spread(r, 0, o, &na, &va);
    spread(r, 1, o, &nb, &vb);
    if (na < 2 || nb < 2)
        return NAN;
    double ea = va / na, eb = vb / nb, se = sqrt(ea + eb);
    if (!(se > 0))
        return 0;
    double df = (ea + eb) * (ea + eb) /
                (ea * ea / (na - 1) + eb * eb / (nb - 1) + 1e-300);
    return (st_t_quantile(1 - alpha / 2, df) + st_t_quantile(0.8, df)) * se / base;
}

/* The level the row tested first must pass, m rows tested together: alpha / m under a
 * correction (Holm's and Benjamini-Hochberg's alike), else alpha. */
static double first_alpha(const opts *o, size_t m)
{
    return o->correction == CORR_NONE || m < 2 ? ALPHA : ALPHA / (double)m;
}

/* Every row's verdict once all are tested: significant where its adjusted p < 0.05 (untested:
 * the threshold decides), a regression or an improvement past the threshold; and its minimum
 * detectable change. The count of regressions, or -1 out of memory. */
static int decide(table *t, const opts *o, double threshold, size_t *tested)
{
    if (adjust(t, o->correction, tested))
        return -1;
    double alpha = first_alpha(o, *tested);
    int regressions = 0;
    for (size_t i = 0; i < t->n; i++) {
        row *r = &t->rows[i];
        int significant = r->tested ? r->p_adj < ALPHA : 1;
        r->regression = r->s[0].runs.n && r->s[1].runs.n && r->change > threshold && significant;
        r->improvement = r->s[0].runs.n && r->s[1].runs.n && r->change < -threshold &&
                         significant;
        r->mdc = min_detectable(r, o, alpha, r->base);
        regressions += r->regression;
    }
    return regressions;
}

/* What the test could have seen, for a row it did not find changed: " (could have seen
 * +-X%)", or that no p these runs can give passes. */
static void could_see(char *out, size_t cap, const row *r)
{
    if (isinf(r->mdc))
        snprintf(out, cap, " (could see none: run more)");
    else if (!isnan(r->mdc))
        snprintf(out, cap, " (could have seen %.1f%%)", 100 * r->mdc);
    else
        out[0] = 0;
}

static const char *verdict(const row *r, double threshold, char *buf, size_t cap)
{
    if (!r->s[0].runs.n)
        return "new";
    if (!r->s[1].runs.n)
        return "vanished";
    if (r->regression)
        return r->tested ? "REGRESSION" : "REGRESSION (over threshold, not tested)";
    if (r->improvement)
        return r->tested ? "improvement" : "improvement (over threshold, not tested)";
    char seen[64];
    could_see(seen, sizeof seen, r);
    snprintf(buf, cap, "%s%s", fabs(r->change) > threshold ? "changed, not significant"
                                                            : "no change detected", seen);
    return buf;
}

/* ---- output ---- */

/* A side's runs: their centre (the median, or with mean the mean, as the change is computed),
 * and their standard deviation relative to it. */
static void fmt_side(char *out, size_t cap, const values *x, int mean)
{
    double m, v;
    st_mean_var(x->v, x->n, &m, &v);
    double c = mean ? m : centre(x);
    char a[32];
    sx_fmt_dur(a, sizeof a, c);
    if (x->n < 2 || !(m > 0))
        snprintf(out, cap, "%s", a);
    else
        snprintf(out, cap, "%s ±%.1f%%", a, 100 * sqrt(v) / m);
}

/* s in a column w characters wide (UTF-8 characters, not bytes), left or right aligned. */
static void col(sbuf *o, const char *s, int w, int left)
{
    int extra = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        extra += (*c & 0xc0) == 0x80;
    sbuf_printf(o, left ? "%-*s  " : "%*s  ", w + extra, s);
}

static void fmt_ci(char *out, size_t cap, const row *r)
{
    if (isnan(r->r.lo) || isnan(r->r.hi))
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "[%+.1f%%, %+.1f%%]", 100 * r->r.lo, 100 * r->r.hi);
}

static void json_values(sbuf *o, const values *x)
{
    sbuf_putc(o, '[');
    for (size_t i = 0; i < x->n; i++) {
        if (i)
            sbuf_putc(o, ',');
        sbuf_json_num(o, x->v[i]);
    }
    sbuf_putc(o, ']');
}

static void json_paths(sbuf *o, const side *s)
{
    sbuf_putc(o, '[');
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            sbuf_putc(o, ',');
        sbuf_json_str(o, s->paths[i]);
    }
    sbuf_putc(o, ']');
}

static void describe(char *out, size_t cap, const side *sd)
{
    if (sd->n == 1)
        snprintf(out, cap, "%s", sd->paths[0]);
    else
        snprintf(out, cap, "%zu runs (%s ...)", sd->n, sd->paths[0]);
}

/* The comparison as JSON (schema sonde-diff 2). warn's lines are cut in place and restored. */
static void diff_json(sbuf *out, const side sd[2], const table *t, const opts *o,
                      double threshold, const char *test, int regressions, sbuf *warn,
                      const rate *rates, size_t n_rates)
{
    sbuf_puts(out, "{\"schema\":\"sonde-diff\",\"schema_version\":2,\"base\":");
    json_paths(out, &sd[0]);
    sbuf_puts(out, ",\"new\":");
    json_paths(out, &sd[1]);
    sbuf_printf(out, ",\"threshold\":%g,\"alpha\":%g,\"correction\":\"%s\",\"figure\":",
                threshold, ALPHA, g_corr[o->correction]);
    sbuf_json_str(out, o->per_instance ? "instances" : g_figs[o->fig].name);
    sbuf_puts(out, ",\"test\":");
    sbuf_json_str(out, test);
    sbuf_printf(out, ",\"regressions\":%d,\"warnings\":[", regressions);
    int first = 1;
    for (char *l = warn->data; l && *l;) {
        char *nl = strchr(l, '\n');
        sbuf_puts(out, first ? "" : ",");
        first = 0;
        if (nl)
            *nl = 0;
        sbuf_json_str(out, l);
        if (nl)
            *nl = '\n';
        l = nl ? nl + 1 : NULL;
    }
    sbuf_puts(out, "],\"sections\":[");
    for (size_t i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        sbuf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        sbuf_json_str(out, r->name);
        sbuf_printf(out, ",\"status\":\"%s\",\"tested\":%s,\"runs\":[%zu,%zu],\"count\":[%.0f,%.0f]",
                    !r->s[0].runs.n ? "new" : !r->s[1].runs.n ? "vanished"
                    : r->regression ? "regression" : r->improvement ? "improvement"
                    : fabs(r->change) > threshold ? "changed" : "same",
                    r->tested ? "true" : "false", r->s[0].runs.n, r->s[1].runs.n,
                    r->s[0].count, r->s[1].count);
        sbuf_puts(out, ",\"base_s\":");
        json_values(out, &r->s[0].runs);
        sbuf_puts(out, ",\"new_s\":");
        json_values(out, &r->s[1].runs);
        sbuf_puts(out, ",\"mean_s\":[");
        sbuf_json_num(out, r->s[0].runs.n ? r->s[0].mean : NAN);
        sbuf_putc(out, ',');
        sbuf_json_num(out, r->s[1].runs.n ? r->s[1].mean : NAN);
        sbuf_puts(out, "],\"change\":");
        sbuf_json_num(out, r->s[0].runs.n && r->s[1].runs.n ? r->change : NAN);
        sbuf_puts(out, ",\"ci\":[");
        sbuf_json_num(out, r->r.lo);
        sbuf_putc(out, ',');
        sbuf_json_num(out, r->r.hi);
        sbuf_puts(out, "],\"p\":");
        sbuf_json_num(out, r->r.p);
        sbuf_puts(out, ",\"p_adjusted\":");
        sbuf_json_num(out, r->p_adj);
        sbuf_puts(out, ",\"mdc\":"); /* null: not computed, or no p these runs give passes */
        sbuf_json_num(out, isinf(r->mdc) ? NAN : r->mdc);
        sbuf_putc(out, '}');
    }
    sbuf_puts(out, "],\"throughput\":[");
    for (size_t k = 0; k < n_rates; k++) {
        sbuf_puts(out, k ? ",{\"unit\":" : "{\"unit\":");
        sbuf_json_str(out, rates[k].unit);
        sbuf_puts(out, ",\"per_s\":[");
        sbuf_json_num(out, rates[k].n[0] ? rates[k].sum[0] / rates[k].n[0] : NAN);
        sbuf_putc(out, ',');
        sbuf_json_num(out, rates[k].n[1] ? rates[k].sum[1] / rates[k].n[1] : NAN);
        sbuf_puts(out, "]}");
    }
    sbuf_puts(out, "]}\n");
}

/* The comparison as text or a markdown table (md), then throughput, warnings and the count. */
static void diff_text(sbuf *out, int md, const char *da, const char *db, const char *figure,
                      const char *test, double threshold, const table *t, const opts *o,
                      int regressions, const sbuf *warn, const rate *rates, size_t n_rates,
                      sbuf_pool *pool)
{
    static const int widths[] = {32, 6, 18, 18, 7, 17, 7};
    if (md)
        sbuf_printf(out, "### sonde diff\n\n`%s` → `%s`: %s; %s; threshold %.1f%%.\n\n"
                          "| section | runs | base | new | change | 95%% CI | p | verdict |\n"
                          "| --- | --- | --- | --- | --- | --- | --- | --- |\n",
                    da, db, figure, test, threshold * 100);
    else {
        sbuf_printf(out, "sonde diff: %s -> %s\n  %s; %s; threshold %.1f%%\n", da, db,
                    figure, test, threshold * 100);
        static const char *const head[] = {"section", "runs", "base", "new", "change",
                                           "95% CI", "p"};
        for (int k = 0; k < 7; k++)
            col(out, head[k], widths[k], k == 0);
        sbuf_puts(out, "verdict\n");
    }
    for (size_t i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        char runs[48], a[72] = "-", b[72] = "-", ch[32] = "", ci[64] = "", pv[32] = "";
        snprintf(runs, sizeof runs, "%zu->%zu", r->s[0].runs.n, r->s[1].runs.n);
        int by_mean = o->welch || o->per_instance;
        if (r->s[0].runs.n)
            fmt_side(a, sizeof a, &r->s[0].runs, by_mean);
        if (r->s[1].runs.n)
            fmt_side(b, sizeof b, &r->s[1].runs, by_mean);
        if (r->s[0].runs.n && r->s[1].runs.n) {
            snprintf(ch, sizeof ch, "%+.1f%%", 100 * r->change);
            fmt_ci(ci, sizeof ci, r);
            if (r->tested) /* adjusted (the header says how): what the verdict used */
                snprintf(pv, sizeof pv, "%.3g", r->p_adj);
            else
                snprintf(pv, sizeof pv, "-");
        }
        char vb[128];
        const char *v = verdict(r, threshold, vb, sizeof vb);
        if (md)
            sbuf_printf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
                        sbuf_md_cell(pool, r->name), runs, a, b, ch, ci, pv,
                        r->regression ? "**regression**" : v);
        else {
            char nm[33];
            snprintf(nm, sizeof nm, "%s", sbuf_oneline(pool, r->name));
            const char *cells[] = {nm, runs, a, b, ch, ci, pv};
            for (int k = 0; k < 7; k++)
                col(out, cells[k], widths[k], k == 0);
            sbuf_printf(out, "%s\n", v);
        }
    }
    for (size_t k = 0; k < n_rates; k++) {
        double ra = rates[k].n[0] ? rates[k].sum[0] / rates[k].n[0] : 0;
        double rb = rates[k].n[1] ? rates[k].sum[1] / rates[k].n[1] : 0;
        char chg[32];
        if (ra > 0 && rb > 0)
            snprintf(chg, sizeof chg, "%+.1f%%", 100 * (rb / ra - 1));
        else
            snprintf(chg, sizeof chg, "%s", ra > 0 ? "vanished" : "new");
        sbuf_printf(out, "%sthroughput %s/s: %.2f -> %.2f (%s)\n", md ? "\n" : "",
                    sbuf_oneline(pool, rates[k].unit), ra, rb, chg);
    }
    for (char *l = warn->data; l && *l;) {
        char *nl = strchr(l, '\n');
        sbuf_printf(out, "%swarning: %.*s\n", md ? "\n" : "", (int)(nl ? nl - l : (long)strlen(l)), l);
        l = nl ? nl + 1 : NULL;
    }
    sbuf_printf(out, "%s%d regression(s)\n", md ? "\n" : "", regressions);
    sbuf_text_safe(out, 0); /* names from the files: no terminal escapes */
}

/* What `sonde diff` was asked (parse_args). */
typedef struct diff_args {
    const char *format;
    double threshold;
    int fail, strict, min_runs;
    int sep;          /* the runs before it are the base's: pos[0..sep) */
    const char **pos; /* the runs named */
    int npos;
    opts o;
} diff_args;

/* The value of a flag that takes one (--threshold, --format, --stat, --test, --min-runs) into d.
 * CLI_OK, or CLI_USAGE said. */
static int parse_value(diff_args *d, const char *a, const char *v)
{
    char *end;
    if (!strcmp(a, "--format")) {
        d->format = v;
    } else if (!strcmp(a, "--threshold")) {
        double x = strtod(v, &end);
        if (end == v || (*end && strcmp(end, "%")) || !(x >= 0 && x <= 1000)) /* NaN too */
            return cli_fail(CLI_USAGE, "diff", "--threshold %s: expected a percentage such as "
                                               "5%% or 12.5", v);
        d->threshold = x / 100.0;
    } else if (!strcmp(a, "--stat")) {
        d->o.fig = -1;
        char all[96] = "";
        for (int k = 0, said = 0; k < N_FIGS; k++) {
            if (!g_figs[k].name)
                continue;
            if (!strcmp(v, g_figs[k].name))
                d->o.fig = k;
            int last = 1; /* the last named figure: "or" before it */
            for (int j = k + 1; j < N_FIGS; j++)
                last &= !g_figs[j].name;
            size_t l = strlen(all);
            snprintf(all + l, sizeof all - l, "%s%s", !said++ ? "" : last ? " or " : ", ",
                     g_figs[k].name);
        }
        if (d->o.fig < 0)
            return cli_fail(CLI_USAGE, "diff", "--stat %s: expected %s", v, all);
    } else if (!strcmp(a, "--correction")) {
        int k = 0;
        while (k < 3 && strcmp(v, g_corr[k]))
            k++;
        if (k == 3)
            return cli_fail(CLI_USAGE, "diff", "--correction %s: expected holm, bh or none", v);
        d->o.correction = k;
    } else if (!strcmp(a, "--test")) {
        if (!strcmp(v, "welch"))
            d->o.welch = 1;
        else if (strcmp(v, "mann-whitney"))
            return cli_fail(CLI_USAGE, "diff", "--test %s: expected mann-whitney or welch", v);
    } else {
        long x = strtol(v, &end, 10);
        if (end == v || *end || x < 1 || x > 100000)
            return cli_fail(CLI_USAGE, "diff", "--min-runs %s: expected a number of runs, 1 or "
                                               "more", v);
        d->min_runs = (int)x;
    }
    return CLI_OK;
}

/* The command line into d (d->pos allocated: the caller frees it). CLI_OK, or CLI_USAGE said. */
static int parse_args(int argc, char **argv, diff_args *d)
{
    static const char *const optnames[] = {"--threshold", "--fail-on-regression", "--format",
                                           "--stat", "--test", "--per-instance", "--min-runs",
                                           "--strict", "--correction", NULL};
    *d = (diff_args){.format = "text", .threshold = 0.05, .min_runs = 1, .sep = -1,
                     .o = {FIG_MEAN, 0, 0, CORR_HOLM}};
    if (!(d->pos = calloc((size_t)argc + 1, sizeof *d->pos)))
        return cli_fail(CLI_USAGE, "diff", "out of memory");
    int rc = CLI_OK;
    for (int i = 1; i < argc && rc == CLI_OK; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--threshold") || !strcmp(a, "--format") || !strcmp(a, "--stat") ||
            !strcmp(a, "--test") || !strcmp(a, "--min-runs") || !strcmp(a, "--correction")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "diff", "%s needs a value", a);
            rc = parse_value(d, a, argv[++i]);
        } else if (!strcmp(a, "--fail-on-regression")) {
            d->fail = 1;
        } else if (!strcmp(a, "--strict")) {
            d->strict = 1;
        } else if (!strcmp(a, "--per-instance")) {
            d->o.per_instance = 1;
        } else if (!strcmp(a, "--")) {
            if (d->sep >= 0)
                rc = cli_fail(CLI_USAGE, "diff", "one -- between the base runs and the new runs");
            d->sep = d->npos;
        } else if (a[0] == '-' && a[1]) {
            rc = cli_bad_option("diff", a, optnames);
        } else {
            d->pos[d->npos++] = a;
        }
    }
    int json = !strcmp(d->format, "json"), md = !strcmp(d->format, "markdown");
    if (rc == CLI_OK && !json && !md && strcmp(d->format, "text"))
        rc = cli_fail(CLI_USAGE, "diff", "--format %s: expected text, json or markdown",
                      d->format);
    if (rc == CLI_OK && d->sep < 0) { /* BASE NEW */
        if (d->npos == 2)
            d->sep = 1;
        else if (d->npos == 1)
            rc = cli_fail(CLI_USAGE, "diff", "two runs are needed, BASE and NEW; got only %s",
                          d->pos[0]);
        else if (d->npos > 2)
            rc = cli_fail(CLI_USAGE, "diff", "%d runs given: put -- between the base runs and "
                                             "the new ones (sonde diff base/*.sonde -- new/*.sonde)",
                          d->npos);
        else
            rc = cli_usage(cli_find("diff"), 1);
    }
    if (rc == CLI_OK && (d->sep == 0 || d->sep == d->npos))
        rc = cli_fail(CLI_USAGE, "diff", "no %s runs: sonde diff BASE... -- NEW...",
                      d->sep == 0 ? "base" : "new");
    return rc;
}

/* What the reader should doubt, into warn: the sides sharing few names or being different
 * programs (*alike 0: what --strict refuses), runs too few for the test. */
/* The fewest runs a side (alike) for which Mann-Whitney's smallest p, 2 / C(2n, n), is below
 * alpha. */
static int runs_for(double alpha)
{
    for (int n = 1; n < 64; n++)
        if (mw_min_p((size_t)n, (size_t)n) < alpha)
            return n;
    return 64;
}

static void warnings(const table *t, const side *sd, const opts *o, size_t n_tested,
                     sbuf *warn, sbuf_pool *pool, int *alike)
{
    size_t common = 0, only[2] = {0, 0};
    for (size_t i = 0; i < t->n; i++) {
        int a = t->rows[i].s[0].runs.n > 0, b = t->rows[i].s[1].runs.n > 0;
        common += a && b;
        only[0] += a && !b;
        only[1] += b && !a;
    }
    size_t fewer = only[0] + common < only[1] + common ? only[0] + common : only[1] + common;
    *alike = 1;
    if (fewer && common * 2 < fewer) {
        *alike = 0;
        sbuf_printf(warn, "the two sides share %zu of their section names (%zu only in base, "
                          "%zu only in new): are they the same program?\n", common, only[0],
                    only[1]);
    }
    if (sd[0].program && sd[1].program && *sd[0].program && *sd[1].program &&
        strcmp(sd[0].program, sd[1].program)) {
        *alike = 0;
        sbuf_printf(warn, "different programs: %s (base) and %s (new)\n",
                    sbuf_oneline(pool, sd[0].program), sbuf_oneline(pool, sd[1].program));
    }
    int untestable = 0, uncorrectable = 0;
    double alpha = first_alpha(o, n_tested);
    for (size_t i = 0; i < t->n; i++) {
        double least = mw_min_p(t->rows[i].s[0].runs.n, t->rows[i].s[1].runs.n);
        untestable |= t->rows[i].tested && least >= ALPHA;
        uncorrectable |= t->rows[i].tested && least >= alpha;
    }
    if (untestable && !o->per_instance && !o->welch)
        sbuf_printf(warn, "with %zu and %zu run(s), a Mann-Whitney test cannot reach p < 0.05 "
                          "(5 runs a side can): run more, or --test welch\n", sd[0].n, sd[1].n);
    else if (uncorrectable && !o->per_instance && !o->welch)
        sbuf_printf(warn, "with %zu and %zu run(s), a Mann-Whitney test cannot pass the "
                          "correction for %zu sections tested together (p < %.2g): %d runs a "
                          "side can (or --correction none)\n",
                    sd[0].n, sd[1].n, n_tested, alpha, runs_for(alpha));
    if (!o->per_instance && sd[0].n == 1 && sd[1].n == 1)
        sbuf_printf(warn, "one run a side: nothing to test; a change over the threshold counts "
                          "as a regression (run each side 5 times for a test)\n");
}

int cmd_diff(int argc, char **argv)
{
    diff_args d;
    side sd[2];
    memset(sd, 0, sizeof sd);
    table t;
    memset(&t, 0, sizeof t);
    strmap_init(&t.idx);
    sbuf out, warn;
    sbuf_init(&out);
    sbuf_init(&warn);
    sbuf_pool pool = {0};
    rate rates[16];
    size_t n_rates = 0;
    int rc = parse_args(argc, argv, &d);
    opts *o = &d.o;
    for (int i = 0; i < d.npos && rc == CLI_OK; i++)
        rc = add_arg(&sd[i >= d.sep], d.pos[i]);
    for (int s = 0; s < 2 && rc == CLI_OK; s++)
        if ((int)sd[s].n < d.min_runs)
            rc = cli_fail(CLI_USAGE, "diff", "--min-runs %d: the %s side has %zu run(s)",
                          d.min_runs, s ? "new" : "base", sd[s].n);
    for (int s = 0; s < 2 && rc == CLI_OK; s++)
        rc = load_side(&t, &sd[s], s, o, rates, &n_rates);
    if (rc != CLI_OK)
        goto out;
    for (size_t i = 0; i < t.n; i++) {
        if (judge(&t.rows[i], o, d.threshold, !t.no_instances[0] && !t.no_instances[1])) {
            rc = cli_fail(CLI_USAGE, "diff", "out of memory");
            goto out;
        }
    }
    size_t n_tested = 0;
    int regressions = decide(&t, o, d.threshold, &n_tested);
    if (regressions < 0) {
        rc = cli_fail(CLI_USAGE, "diff", "out of memory");
        goto out;
    }
    int alike;
    warnings(&t, sd, o, n_tested, &warn, &pool, &alike);
    char test[200];
    int by_summary = o->per_instance && (o->welch || t.no_instances[0] || t.no_instances[1]);
    char corr[96] = "";
    if (o->correction != CORR_NONE && n_tested > 1)
        snprintf(corr, sizeof corr, ", %s over the %zu sections tested",
                 o->correction == CORR_HOLM ? "Holm-adjusted" : "Benjamini-Hochberg-adjusted",
                 n_tested);
    snprintf(test, sizeof test, "%s%s, two-sided, p < 0.05%s",
             o->welch || by_summary ? "Welch's t-test" : "Mann-Whitney U test",
             !o->per_instance ? " across runs"
             : by_summary ? " over the instances of all runs from their count, mean and variance "
                            "(assumes independent instances)"
                          : " over the instances of all runs (assumes independent instances)",
             corr);
    char figure[128];
    if (o->per_instance)
        snprintf(figure, sizeof figure, "mean time per instance");
    else
        snprintf(figure, sizeof figure, "each run's %s time per instance, the %s of the runs "
                 "(±: their standard deviation)", g_figs[o->fig].name, o->welch ? "mean" : "median");
    char da[1200], db[1200];
    describe(da, sizeof da, &sd[0]);
    describe(db, sizeof db, &sd[1]);
    if (!strcmp(d.format, "json"))
        diff_json(&out, sd, &t, o, d.threshold, test, regressions, &warn, rates, n_rates);
    else
        diff_text(&out, !strcmp(d.format, "markdown"), da, db, figure, test, d.threshold, &t, o,
                  regressions, &warn, rates, n_rates, &pool);
    if (out.oom || warn.oom || pool.oom) {
        rc = cli_fail(CLI_USAGE, "diff", "out of memory");
        goto out;
    }
    fputs(out.data ? out.data : "", stdout);
    if (warn.len)
        for (char *l = warn.data; l && *l;) { /* on stderr too, where CI logs show it */
            char *nl = strchr(l, '\n');
            fprintf(stderr, "sonde diff: warning: %.*s\n", (int)(nl ? nl - l : (long)strlen(l)), l);
            l = nl ? nl + 1 : NULL;
        }
    if (d.strict && !alike)
        rc = cli_fail(CLI_USAGE, "diff", "--strict: the two sides do not look like the same program");
    else
        rc = d.fail && regressions ? CLI_FINDING : CLI_OK;
out:
    free(d.pos);
    table_free(&t);
    side_free(&sd[0]);
    side_free(&sd[1]);
    sbuf_free(&out);
    sbuf_free(&warn);
    sbuf_pool_free(&pool);
    return rc;
}
