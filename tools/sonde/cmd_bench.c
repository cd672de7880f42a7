/* cmd_bench.c - `sonde bench -- CMD`: the repeated runs `sonde diff` wants, in one command. Runs
 * CMD under `sonde run` W times to warm up (into DIR/warmup) and N times to measure (DIR/NAME-1
 * ... NAME-N, a JSON report and a .sonde file each), then prints each section's mean time per
 * instance over the runs: mean ± standard deviation, min and max. `sonde diff DIR -- OTHER` then
 * compares two such directories. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "export/export.h"
#include "stats.h"
#include "util/buf.h"
#include "util/strmap.h"

/* One `sonde run --quiet --sample-hz 0 --format json --name NAME -o DIR -- CMD...`: the
 * program's exit code. No CPU samples: their interrupts and the thread draining them would add
 * to the times being compared, and move them from run to run. */
static int run_once(const char *name, const char *dir, char **cmd, int ncmd)
{
    char **v = calloc((size_t)ncmd + 12, sizeof *v);
    if (!v)
        return cli_fail(CLI_USAGE, "bench", "out of memory");
    int k = 0;
    v[k++] = (char *)"run";
    v[k++] = (char *)"--quiet";
    v[k++] = (char *)"--sample-hz";
    v[k++] = (char *)"0";
    v[k++] = (char *)"--format";
    v[k++] = (char *)"json";
    v[k++] = (char *)"--name";
    v[k++] = (char *)name;
    v[k++] = (char *)"-o";
    v[k++] = (char *)dir;
    v[k++] = (char *)"--";
    for (int i = 0; i < ncmd; i++)
        v[k++] = cmd[i];
    int rc = cmd_run(k, v);
    free(v);
    return rc;
}

static int make_dir(const char *d)
{
    if (mkdir(d, 0755) == 0 || errno == EEXIST)
        return 0;
    return cli_fail(CLI_USAGE, "bench", "cannot create %s: %s", d, strerror(errno));
}

typedef struct sec {
    char *name;
    double *v; /* the mean time per instance of each run (NAN where it did not run) */
} sec;

/* The table: the run's duration, then each section's mean per instance across the measured runs
 * (dur: each run's duration; secs: n sections' figures, NaN in a run without them). CLI_OK, or
 * CLI_USAGE out of memory. */
static int print_table(const char *prog, const char *dir, const char *stem, long runs,
                       long warmup, const double *dur, const sec *secs, size_t n)
{
    int rc = CLI_OK;
    sbuf o;
    sbuf_init(&o);
    sbuf_pool pool = {0};
    double mean, var;
    st_mean_var(dur, (size_t)runs, &mean, &var);
    char a[32], b[32], c[32];
    sx_fmt_dur(a, sizeof a, mean);
    sbuf_printf(&o, "sonde bench: %s, %ld run(s) after %ld warm-up run(s), in %s/%s-*\n"
                    "run duration %s ±%.1f%%\n%-32s %5s %22s %11s %11s\n",
                sbuf_oneline(&pool, prog), runs, warmup, dir, stem, a,
                mean > 0 ? 100 * sqrt(var) / mean : 0, "section (mean per instance)", "runs",
                "mean ± σ", "min", "max");
    double *v = malloc((size_t)runs * sizeof *v);
    for (size_t s = 0; v && s < n; s++) {
        size_t got = 0;
        double lo = INFINITY, hi = -INFINITY;
        for (long k = 0; k < runs; k++)
            if (!isnan(secs[s].v[k])) {
                v[got++] = secs[s].v[k];
                lo = fmin(lo, secs[s].v[k]);
                hi = fmax(hi, secs[s].v[k]);
            }
        st_mean_var(v, got, &mean, &var);
        char cell[64], nm[33];
        sx_fmt_dur(a, sizeof a, mean);
        sx_fmt_dur(b, sizeof b, lo);
        sx_fmt_dur(c, sizeof c, hi);
        snprintf(cell, sizeof cell, "%s ±%.1f%%", a, mean > 0 ? 100 * sqrt(var) / mean : 0);
        snprintf(nm, sizeof nm, "%s", sbuf_oneline(&pool, secs[s].name));
        sbuf_printf(&o, "%-32s %5zu %21s %11s %11s\n", nm, got, cell, b, c); /* ± is 2 bytes */
    }
    sbuf_printf(&o, "compare with another set of runs: sonde diff %s -- OTHER_DIR\n", dir);
    sbuf_text_safe(&o, 0);
    if (!v || o.oom || pool.oom)
        rc = cli_fail(CLI_USAGE, "bench", "out of memory");
    else
        fputs(o.data, stdout);
    free(v);
    sbuf_free(&o);
    sbuf_pool_free(&pool);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    static const char *const opts[] = {"--runs", "--warmup", "--name", "-o", NULL};
    long runs = 5, warmup = 1;
    const char *name = NULL, *dir = "sonde-bench";
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--runs") || !strcmp(a, "--warmup") || !strcmp(a, "--name") ||
            !strcmp(a, "-o")) {
            if (i + 1 >= argc || !strcmp(argv[i + 1], "--"))
                return cli_fail(CLI_USAGE, "bench", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--name")) {
                name = v;
            } else if (!strcmp(a, "-o")) {
                dir = v;
            } else {
                char *end;
                long x = strtol(v, &end, 10);
                long lo = !strcmp(a, "--runs") ? 1 : 0;
                if (end == v || *end || x < lo || x > 1000)
                    return cli_fail(CLI_USAGE, "bench", "%s %s: expected a number in %ld..1000",
                                    a, v, lo);
                *(!strcmp(a, "--runs") ? &runs : &warmup) = x;
            }
        } else if (a[0] == '-') {
            return cli_bad_option("bench", a, opts);
        } else {
            return cli_fail(CLI_USAGE, "bench", "the command goes after --: sonde bench [options] "
                                                "-- %s", a);
        }
    }
    if (i >= argc - 1)
        return cli_fail(CLI_USAGE, "bench", "no command: sonde bench [options] -- CMD [ARGS...]");
    char **cmd = argv + i + 1;
    int ncmd = argc - i - 1;
    char stem[256];
    const char *base = strrchr(cmd[0], '/');
    snprintf(stem, sizeof stem, "%s", name ? name : base ? base + 1 : cmd[0]);
    if (!stem[0] || strchr(stem, '/'))
        return cli_fail(CLI_USAGE, "bench", "--name %s: a run name has no '/'", stem);
    char path[PATH_MAX], wdir[PATH_MAX], run[300];
    snprintf(wdir, sizeof wdir, "%s/warmup", dir);
    if (make_dir(dir) || make_dir(wdir))
        return CLI_USAGE;
    for (long k = 1; k <= runs; k++) { /* never mix these runs with an earlier bench's */
        snprintf(path, sizeof path, "%s/%s-%ld.sonde", dir, stem, k);
        if (access(path, F_OK) == 0)
            return cli_fail(CLI_USAGE, "bench", "%s exists: give another -o DIR or --name", path);
    }
    for (long k = 1; k <= warmup + runs; k++) {
        int measured = k > warmup;
        snprintf(run, sizeof run, measured ? "%s-%ld" : "%s-warmup%ld", stem,
                 measured ? k - warmup : k);
        fprintf(stderr, "sonde bench: %s run %ld of %ld: %s\n", measured ? "measured" : "warm-up",
                measured ? k - warmup : k, measured ? runs : warmup, cmd[0]);
        int code = run_once(run, measured ? dir : wdir, cmd, ncmd);
        if (code) {
            cli_fail(0, "bench", "%s exited %d (run %s); stopping", cmd[0], code, run);
            return code;
        }
    }
    /* the table: each section's figure across the measured runs */
    sec *secs = NULL;
    size_t n = 0;
    strmap idx;
    strmap_init(&idx);
    double *dur = calloc((size_t)runs, sizeof *dur);
    int rc = dur ? CLI_OK : cli_fail(CLI_USAGE, "bench", "out of memory");
    for (long k = 0; k < runs && rc == CLI_OK; k++) {
        snprintf(path, sizeof path, "%s/%s-%ld.json", dir, stem, k + 1);
        sm_model m;
        if ((rc = cli_load("bench", path, &m)))
            break;
        dur[k] = (double)m.duration_ns / 1e9;
        for (size_t s = 0; s < m.n_stats && rc == CLI_OK; s++) {
            int j = strmap_get(&idx, m.stats[s].name);
            if (j < 0) {
                sec *g = realloc(secs, (n + 1) * sizeof *g);
                if (!g) {
                    rc = cli_fail(CLI_USAGE, "bench", "out of memory");
                    break;
                }
                secs = g;
                secs[n].name = strdup(m.stats[s].name);
                secs[n].v = malloc((size_t)runs * sizeof(double));
                n++;
                if (!secs[n - 1].name || !secs[n - 1].v ||
                    strmap_put(&idx, secs[n - 1].name, (int)n - 1)) {
                    rc = cli_fail(CLI_USAGE, "bench", "out of memory");
                    break;
                }
                for (long q = 0; q < runs; q++)
                    secs[n - 1].v[q] = NAN;
                j = (int)n - 1;
            }
            secs[j].v[k] = m.stats[s].mean_s;
        }
        sm_free(&m);
    }
    if (rc == CLI_OK)
        rc = print_table(cmd[0], dir, stem, runs, warmup, dur, secs, n);
    for (size_t s = 0; s < n; s++) {
        free(secs[s].name);
        free(secs[s].v);
    }
    free(secs);
    free(dur);
    strmap_free(&idx);
    return rc;
}
