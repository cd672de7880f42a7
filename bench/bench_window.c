/* bench_window.c - what the sonde_step() that ends a step schedule's active window costs, early
 * in a run and late in it (issue 59): the schedule wait 1, warmup 1, active 2, repeat 0, 200
 * sections a step, a trace written at each window's end (NAME-cycleN.trace.json.gz). A training
 * loop pays this at every window's end; it must not grow with the run.
 *
 *   window 10     the median of the window-ending steps of windows 6..15
 *   window 1000   the median of those of windows 996..1005 (or the last ten, for fewer windows)
 *   other step    the median of the steps that end no window, the floor of the figure above
 *
 * Usage: bench_window [--windows N] [--dir DIR] (N >= 20, default 1005) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include <sonde/sonde.h>

#define SECTIONS 200 /* a step */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of the ten window-ending steps of windows from..from+9 (counted from 1). */
static double window_median(const double *ends, int from)
{
    double v[10];
    memcpy(v, ends + from - 1, sizeof v);
    return median(v, 10);
}

int main(int argc, char **argv)
{
    int windows = 1005;
    const char *dir = "bench-window-out";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--windows") && i + 1 < argc) {
            windows = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_window [--windows N] [--dir DIR]\n");
            return 2;
        }
    }
    if (windows < 20) {
        fprintf(stderr, "bench_window: --windows %d: at least 20\n", windows);
        return 2;
    }
    sonde_config c = sonde_config_default();
    c.output_dir = dir;
    c.name = "window";
    c.formats = 0; /* the run's own reports are not what is measured */
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    c.signal_handlers = 0;
    c.wait = 1;
    c.warmup = 1;
    c.active = 2;
    c.repeat = 0;
    sonde_profiler *p = sonde_create(&c);
    if (!p) {
        fprintf(stderr, "bench_window: sonde_create: %s\n", sonde_last_error());
        return 1;
    }
    int steps = windows * 4; /* wait, warmup, active, active */
    double *ends = malloc((size_t)windows * sizeof *ends);
    double *others = malloc((size_t)steps * sizeof *others);
    if (!ends || !others) {
        fprintf(stderr, "bench_window: out of memory\n");
        return 1;
    }
    size_t n_ends = 0, n_others = 0;
    double t_run = bench_now_s();
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < SECTIONS; k++) {
            SONDE_SCOPE(p, "layer");
        }
        double t = bench_now_s();
        sonde_step(p);
        t = bench_now_s() - t;
        if (s % 4 == 3) /* the step that ends the two active steps */
            ends[n_ends++] = t;
        else
            others[n_others++] = t;
    }
    t_run = bench_now_s() - t_run;
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/window-cycle%d.trace.json.gz", dir, windows);
    struct stat st;
    int have_trace = stat(trace, &st) == 0;
    if (sonde_destroy(p) != 0)
        fprintf(stderr, "bench_window: sonde_destroy: %s\n", sonde_last_error());
    if (!have_trace || (int)n_ends != windows) {
        fprintf(stderr, "bench_window: no trace for window %d (%s)\n", windows, trace);
        return 1;
    }
    int late = windows >= 1005 ? 996 : windows - 9;
    double early_s = window_median(ends, 6), late_s = window_median(ends, late);
    double other_s = median(others, n_others);
    printf("bench_window: sonde_step() ending a window (wait 1, warmup 1, active 2, %d sections a "
           "step, %d windows, %.1f s in all)\n", SECTIONS, windows, t_run);
    printf("  window %-5d %9.3f ms\n", 10, early_s * 1e3);
    printf("  window %-5d %9.3f ms   (%.2fx window 10; the target: within 1.2x)\n", late + 4,
           late_s * 1e3, late_s / early_s);
    printf("  other step   %9.4f ms   (a step that ends no window: the floor)\n", other_s * 1e3);
    free(ends);
    free(others);
    return 0;
}
