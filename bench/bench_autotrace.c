/* bench_autotrace.c - what libsonde-autotrace costs per traced call: the same tiny function
 * called N times plain (the floor) and built with -finstrument-functions, traced into a
 * streaming profiler; next to SONDE_SCOPE's own cost in the same run. uftrace's figure for the
 * same function comes from bench/uftrace_compare.sh (make bench runs both).
 * Usage: bench_autotrace [--calls N] [--dir DIR] | bench_autotrace --pg N */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sonde/autotrace.h>

#include "bench.h"
#include "traced_fn.h"

#define RUNS 5

typedef int (*fn_t)(int);

static volatile int g_sink; /* the results go somewhere, so the calls stay */

static double best_ns(fn_t f, long n)
{
    double best = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now_s();
        for (long i = 0; i < n; i++)
            g_sink += f((int)i);
        double t = (bench_now_s() - t0) / (double)n * 1e9;
        if (t < best)
            best = t;
    }
    return best;
}

static sonde_profiler *g_p;

static int scoped(int x)
{
    SONDE_SCOPE(g_p, "scope");
    return tiny_plain(x);
}

int main(int argc, char **argv)
{
    long n = 5000000;
    const char *dir = "bench-out";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
            n = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--pg") && i + 1 < argc) {
            /* for uftrace_compare.sh: the -pg copy, n calls, nothing else */
            long k = atol(argv[++i]);
            for (long j = 0; j < k; j++)
                g_sink += tiny_pg((int)j);
            return 0;
        } else {
            fprintf(stderr, "usage: bench_autotrace [--calls N] [--dir DIR] | --pg N\n");
            return 2;
        }
    }
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = dir;
    cfg.name = "bench-autotrace";
    cfg.formats = 0;
    cfg.signal_handlers = 0;
    cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
    cfg.autotrace_hot_calls = 0; /* every call recorded: the cost of a traced call */
    g_p = sonde_create(&cfg);
    if (sonde_status(g_p) || sonde_autotrace_attach(g_p) != 0) {
        fprintf(stderr, "bench_autotrace: %s\n", sonde_last_error());
        return 1;
    }
    double plain = best_ns(tiny_plain, n);
    double traced = best_ns(tiny_traced, n);
    double scope = best_ns(scoped, n);
    sonde_autotrace_detach();
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p) ? sonde_file_path(g_p) : "");
    sonde_destroy(g_p);
    unlink(path);
    /* the defaults: the function is found hot after its first 10,000 calls, then counted */
    cfg.autotrace_hot_calls = sonde_config_default().autotrace_hot_calls;
    cfg.name = "bench-autotrace-hot";
    g_p = sonde_create(&cfg);
    if (sonde_status(g_p) || sonde_autotrace_attach(g_p) != 0) {
        fprintf(stderr, "bench_autotrace: %s\n", sonde_last_error());
        return 1;
    }
    double hot = best_ns(tiny_traced, n);
    sonde_autotrace_detach();
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p) ? sonde_file_path(g_p) : "");
    sonde_destroy(g_p);
    struct stat st;
    double hot_bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
    unlink(path);
    printf("\nlibsonde-autotrace, best of %d runs of %ld calls of a one-line function\n", RUNS, n);
    printf("  untraced call (floor)                 %7.2f ns\n", plain);
    printf("  traced call, streaming to disk        %7.2f ns  (+%.2f ns a call)\n", traced,
           traced - plain);
    printf("  the same call in a SONDE_SCOPE        %7.2f ns  (+%.2f ns)\n", scope, scope - plain);
    printf("  traced at the defaults (hot: counted) %7.2f ns  (+%.2f ns; .sonde file %.0f KiB "
           "for %d x %ld calls)\n", hot, hot - plain, hot_bytes / 1024, RUNS, n);
    return 0;
}
