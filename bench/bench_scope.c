/* bench_scope.c - the cost of a SONDE_SCOPE begin+end pair, next to floors measured in the same
 * run, and the throughput of the .sonde writer and of the trace export.
 *
 *   floor      two rdtsc reads and two 16-byte stores into a prefaulted thread-local array: the
 *              least any tracer that stores a timestamp per edge can do
 *   empty      the loop alone (the floor of a disabled pair)
 *
 * Every loop carries the same compiler barrier, so the compiler treats them alike. Each figure is
 * the best of several runs (the least disturbed by the shared machine); ratios carry the verdict.
 * Usage: bench_scope [--pairs N] [--dir DIR] */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench.h"
#include "export/export.h"
#include "model/model.h"
#include "record/record.h"
#include <sonde/sonde.h>

void bench_compiled_out(long n); /* bench_off.c, built with -DSONDE_DISABLE */

#define BARRIER() __asm__ __volatile__("" ::: "memory")
#define RUNS 5

typedef struct rec16 {
    uint64_t ts;
    uint64_t tag;
} rec16;

#define FLOOR_SLOTS (1u << 16) /* 1 MiB */
static _Thread_local rec16 floor_buf[FLOOR_SLOTS];

static void floor_loop(long n)
{
    for (uint32_t i = 0; i < FLOOR_SLOTS; i++) /* prefault */
        floor_buf[i].ts = 0;
    uint32_t k = 0;
    for (long i = 0; i < n; i++) {
        floor_buf[k].ts = __rdtsc();
        floor_buf[k].tag = 1;
        k = (k + 1) & (FLOOR_SLOTS - 1);
        BARRIER();
        floor_buf[k].ts = __rdtsc();
        floor_buf[k].tag = 2;
        k = (k + 1) & (FLOOR_SLOTS - 1);
        BARRIER();
    }
}

static void empty_loop(long n)
{
    for (long i = 0; i < n; i++)
        BARRIER();
}

static sonde_profiler *g_p;

static void scope_loop(long n)
{
    sonde_profiler *p = g_p;
    for (long i = 0; i < n; i++) {
        SONDE_SCOPE(p, "bench");
        BARRIER();
    }
}

/* The function API: sonde_begin + sonde_end with a run-time name. */
static void call_loop(long n)
{
    sonde_profiler *p = g_p;
    for (long i = 0; i < n; i++) {
        sonde_begin(p, "bench call");
        BARRIER();
        sonde_end(p);
    }
}

typedef void (*loop_fn)(long);

/* Best ns per iteration over RUNS runs of n iterations. */
static double best_ns(loop_fn f, long n)
{
    double best = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now_s();
        f(n);
        double t = (bench_now_s() - t0) / (double)n * 1e9;
        if (t < best)
            best = t;
    }
    return best;
}

typedef struct targ {
    loop_fn f;
    long n;
    pthread_barrier_t *bar;
    double ns, cpu_ns; /* best wall and best thread-CPU ns per iteration */
} targ;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *thread_main(void *arg)
{
    targ *a = arg;
    a->ns = a->cpu_ns = 1e30;
    for (int r = 0; r < RUNS; r++) {
        pthread_barrier_wait(a->bar);
        double t0 = bench_now_s(), c0 = thread_cpu_s();
        a->f(a->n);
        double t = (bench_now_s() - t0) / (double)a->n * 1e9;
        double c = (thread_cpu_s() - c0) / (double)a->n * 1e9;
        if (t < a->ns)
            a->ns = t;
        if (c < a->cpu_ns)
            a->cpu_ns = c;
    }
    return NULL;
}

/* Best ns per iteration on each of two threads running at once; returns the worse thread's
 * wall time, and its CPU time in *cpu (what the thread itself spent, without preemption). */
static double best_ns_2threads(loop_fn f, long n, double *cpu)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    targ a[2] = {{f, n, &bar, 0, 0}, {f, n, &bar, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_main, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    *cpu = a[0].cpu_ns > a[1].cpu_ns ? a[0].cpu_ns : a[1].cpu_ns;
    return a[0].ns > a[1].ns ? a[0].ns : a[1].ns;
}

static size_t g_bytes;
static int count_sink(void *ctx, const char *data, size_t n)
{
    (void)ctx;
    (void)data;
    g_bytes += n;
    return 0;
}

/* What the recorder says of a run: events dropped, chunks written by recording threads, its
 * writer's CPU seconds, and whether the metrics endpoint was up. */
typedef struct run_account {
    uint64_t dropped, bp_chunks;
    double writer_cpu;
    int served;
} run_account;

/* SONDE_SCOPE's best ns per pair in a run of its own under cfg named name, its file removed;
 * the recorder's account of it into a (internal fields: the library is linked statically). */
static double scope_run(sonde_config *cfg, const char *name, long n, run_account *a)
{
    cfg->name = name;
    g_p = sonde_create(cfg);
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p) ? sonde_file_path(g_p) : "");
    double ns = best_ns(scope_loop, n);
    sonde__writer_stop(g_p);
    *a = (run_account){0, atomic_load(&g_p->bp_chunks),
                       (double)atomic_load(&g_p->writer_cpu_ns) / 1e9, g_p->live != NULL};
    for (sonde_tbuf *tb = atomic_load(&g_p->threads); tb; tb = atomic_load(&tb->next))
        a->dropped += atomic_load(&tb->dropped);
    sonde_destroy(g_p);
    unlink(path);
    return ns;
}

int main(int argc, char **argv)
{
    long n = 10000000;
    const char *dir = "./bench-out";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_scope [--pairs N] [--dir DIR]\n");
            return 2;
        }
    }
    if (n < 1000)
        n = 1000;
    printf("sonde bench: SONDE_SCOPE begin+end pairs, best of %d runs of %ld pairs\n\n", RUNS, n);

    double floor1 = best_ns(floor_loop, n);
    double empty = best_ns(empty_loop, n);

    /* Run-time disabled: a profiler whose recording flag is off. */
    sonde_config off = sonde_config_default();
    off.enabled = 0;
    g_p = sonde_create(&off);
    double disabled = best_ns(scope_loop, n);
    sonde_destroy(g_p);
    double compiled_out = best_ns(bench_compiled_out, n);

    /* Enabled, streaming to disk through 64 MiB of buffers; no sampler. */
    sonde_config on = sonde_config_default();
    on.output_dir = dir;
    on.name = "bench";
    on.formats = 0;
    on.signal_handlers = 0;
    on.collect_cpu = on.collect_memory = on.collect_gpu = 0;
    g_p = sonde_create(&on);
    if (sonde_status(g_p)) {
        fprintf(stderr, "bench_scope: %s\n", sonde_last_error());
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p));
    double enabled1 = best_ns(scope_loop, n);
    double calls1 = best_ns(call_loop, n);
    double floor2_cpu, enabled2_cpu;
    double floor2 = best_ns_2threads(floor_loop, n, &floor2_cpu);
    double enabled2 = best_ns_2threads(scope_loop, n, &enabled2_cpu);
    /* The recorder's own account (internal fields: this benchmark links the library statically). */
    sonde__writer_stop(g_p);
    uint64_t dropped = atomic_load(&g_p->dropped_io);
    for (sonde_tbuf *tb = atomic_load(&g_p->threads); tb; tb = atomic_load(&tb->next))
        dropped += atomic_load(&tb->dropped);
    double writer_cpu = (double)atomic_load(&g_p->writer_cpu_ns) / 1e9;
    uint64_t bp_chunks = atomic_load(&g_p->bp_chunks), bp_ns = atomic_load(&g_p->bp_ns);
    uint64_t n_chunks = g_p->n_chunks;
    sonde_destroy(g_p);
    struct stat st;
    double file_bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
    unlink(path);

    printf("%-44s %9s %9s %8s\n", "case", "ns/pair", "floor", "ratio");
    printf("%-44s %9.2f %9s %8s\n", "floor: 2 rdtsc + 2 16-byte stores, 1 thread", floor1, "", "");
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE enabled, streaming, 1 thread", enabled1,
           floor1, enabled1 / floor1);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE enabled, streaming, 2 threads", enabled2,
           floor2, enabled2 / floor2);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "  the same, thread CPU time (no preemption)", enabled2_cpu,
           floor2_cpu, enabled2_cpu / floor2_cpu);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "sonde_begin+sonde_end, 1 thread", calls1, floor1,
           calls1 / floor1);
    /* nvtx on, with no NVTX tool attached (not under nsys): NVTX's calls are no-ops, and every
     * section takes sonde's slow path to make them. A separate short run. */
    on.nvtx = 1;
    on.name = "bench-nvtx";
    g_p = sonde_create(&on);
    char npath[4096];
    snprintf(npath, sizeof npath, "%s", sonde_file_path(g_p) ? sonde_file_path(g_p) : "");
    double nvtx_scope = best_ns(scope_loop, n / 10), nvtx_call = best_ns(call_loop, n / 10);
    sonde_destroy(g_p);
    unlink(npath);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE, nvtx on, no tool attached", nvtx_scope,
           floor1, nvtx_scope / floor1);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "sonde_begin+end, nvtx on, no tool attached", nvtx_call,
           floor1, nvtx_call / floor1);
    /* The flight recorder (flight_recorder_s 5): the hot path is the same; the writer encodes
     * into memory instead of the file, and nothing is written without a trigger. */
    on.nvtx = 0;
    on.name = "bench-flight";
    on.flight_recorder_s = 5;
    g_p = sonde_create(&on);
    double flight1 = best_ns(scope_loop, n);
    double flight2_cpu, flight2 = best_ns_2threads(scope_loop, n, &flight2_cpu);
    sonde__writer_stop(g_p);
    uint64_t fdropped = 0;
    for (sonde_tbuf *tb = atomic_load(&g_p->threads); tb; tb = atomic_load(&tb->next))
        fdropped += atomic_load(&tb->dropped);
    double fwriter_cpu = (double)atomic_load(&g_p->writer_cpu_ns) / 1e9;
    sonde_destroy(g_p);
    on.flight_recorder_s = 0;
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE, flight recorder, 1 thread", flight1,
           floor1, flight1 / floor1);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE, flight recorder, 2 threads", flight2,
           floor2, flight2 / floor2);
    printf("  (flight recorder: %llu events dropped, writer %.2f s CPU)\n",
           (unsigned long long)fdropped, fwriter_cpu);
    /* The live metrics endpoint (metrics_port): the hot path is the same; the writer follows
     * every event it writes into the totals the endpoint serves (a slower writer would show
     * here as back-pressure and dropped events). Its control runs the same without it just
     * before and just after: the first run after others pays for what they left (the disk
     * busier, the caches colder), 1-2 ns a pair, which a control on one side alone would
     * charge to one of the two. */
    run_account met, ctl[2];
    double before1 = scope_run(&on, "bench-control", n, &ctl[0]);
    on.metrics_port = bench_free_port();
    double metrics1 = scope_run(&on, "bench-metrics", n, &met);
    on.metrics_port = 0;
    double after1 = scope_run(&on, "bench-control", n, &ctl[1]);
    double control1 = (before1 + after1) / 2;
    printf("%-44s %9.2f %9.2f %7.2fx\n", "SONDE_SCOPE, metrics_port on, 1 thread", metrics1,
           floor1, metrics1 / floor1);
    printf("%-44s %9.2f %9.2f %7.2fx\n", "  the same without it, before and after", control1,
           floor1, control1 / floor1);
    printf("  (metrics %s: %+.2f ns a pair against the runs without it, which differ by %.2f ns; "
           "%llu events dropped, %llu chunks by back-pressure; writer %.2f s CPU with it, %.2f s "
           "without, for %.0f edges)\n", met.served ? "served" : "NOT served",
           metrics1 - control1, fabs(after1 - before1), (unsigned long long)met.dropped,
           (unsigned long long)met.bp_chunks, met.writer_cpu,
           (ctl[0].writer_cpu + ctl[1].writer_cpu) / 2, 2.0 * (double)n * RUNS);
    printf("%-44s %9.2f %9s %8s\n", "empty loop", empty, "", "");
    printf("%-44s %9.2f %9.2f %+7.2f ns\n", "SONDE_SCOPE run-time disabled", disabled, empty,
           disabled - empty);
    printf("%-44s %9.2f %9.2f %+7.2f ns\n", "SONDE_SCOPE compiled out (-DSONDE_DISABLE)",
           compiled_out, empty, compiled_out - empty);

    double recorded_edges = 2.0 * (double)n * RUNS * 6 - (double)dropped; /* 1 + 1 + 2x2 threads */
    printf("\n.sonde streaming: %.0f section edges written, %llu events dropped (%.2f%%)\n",
           recorded_edges, (unsigned long long)dropped,
           100.0 * (double)dropped / (recorded_edges + (double)dropped));
    printf("  %.2f bytes per section edge on disk (16 in memory)\n", file_bytes / recorded_edges);
    printf("  back-pressure: recording threads wrote %llu of the chunks themselves (%llu in the "
           "buffer), %.3f s in all\n", (unsigned long long)bp_chunks,
           (unsigned long long)n_chunks, (double)bp_ns / 1e9);
    if (writer_cpu > 0)
        printf("  writer: %.1f M edges/s of its CPU time (%.2f s CPU in all)\n",
               recorded_edges / writer_cpu / 1e6, writer_cpu);

    /* Read back and trace export on a smaller run: 1M nested sections on 2 levels. */
    on.name = "bench-read";
    g_p = sonde_create(&on);
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p));
    for (int i = 0; i < 500000; i++) {
        SONDE_SCOPE(g_p, "outer");
        {
            SONDE_SCOPE(g_p, "inner");
        }
    }
    sonde_destroy(g_p);
    double floor_s = bench_read_s(path); /* the file's bytes alone: the least a reader costs */
    double t0 = bench_now_s();
    sm_model m;
    if (sm_read_file(path, &m) != 0) {
        fprintf(stderr, "bench_scope: %s\n", sonde_last_error());
        return 1;
    }
    double read_s = bench_now_s() - t0;
    double events = (double)m.n_spans;
    printf("  reader: %.1f M section edges/s into the model (%.0f sections); floor, reading the "
           "file's bytes: %.0f M edges/s\n", 2 * events / read_s / 1e6, events,
           floor_s > 0 ? 2 * events / floor_s / 1e6 : 0);
    unlink(path);

    g_bytes = 0;
    t0 = bench_now_s();
    sx_trace(&m, count_sink, NULL);
    double tr_s = bench_now_s() - t0;
    printf("\ntrace export: %.1f M events/s before compression, %.1f bytes/event\n",
           events / tr_s / 1e6, (double)g_bytes / events);
    snprintf(path, sizeof path, "%s/bench.trace.json.gz", dir);
    t0 = bench_now_s();
    sx_write_path(&m, path);
    double gz_s = bench_now_s() - t0;
    if (stat(path, &st) == 0)
        printf("  with gzip (level 1): %.1f M events/s, %.1f bytes/event\n",
               events / gz_s / 1e6, (double)st.st_size / events);
    unlink(path);
    g_bytes = 0; /* Perfetto's protobuf: a section is two events, begin and end */
    t0 = bench_now_s();
    sx_perfetto(&m, count_sink, NULL);
    double pf_s = bench_now_s() - t0;
    printf("  Perfetto protobuf (.pftrace): %.1f M sections/s, %.1f bytes/section\n",
           events / pf_s / 1e6, (double)g_bytes / events);
    sm_free(&m);

    /* The sampler: its own CPU at 10 Hz with every source on, and the pair cost while it
     * samples at 100 Hz. With no GPU on this machine, NVML is the fake library the build makes,
     * so the GPU path still runs. */
    const char *nvml = getenv("SONDE_NVML_LIBRARY");
    if (!nvml || !*nvml) {
        setenv("SONDE_NVML_LIBRARY", FAKE_NVML_PATH, 1);
        nvml = FAKE_NVML_PATH;
    }
    sonde_config smp = on;
    smp.name = "bench-sampler";
    smp.collect_cpu = smp.collect_memory = smp.collect_gpu = 1;
    smp.cpu_interval_s = smp.gpu_interval_s = 0.1;
    g_p = sonde_create(&smp);
    double idle_s = 3.0;
    struct timespec idle = {3, 0};
    nanosleep(&idle, NULL);
    sonde__sampler_stop(g_p);
    double sampler_cpu = (double)atomic_load(&g_p->sampler_cpu_ns) / 1e9;
    snprintf(path, sizeof path, "%s", sonde_file_path(g_p));
    sonde_destroy(g_p);
    unlink(path);
    /* Sampling at 100 Hz against no sampling, measured here in turns (plain, sampled, plain,
     * sampled: the machine's state after the runs above, its page cache written back, is the
     * same for both), each the best of its runs. */
    smp.cpu_interval_s = smp.gpu_interval_s = 0.01;
    sonde_config plain = on;
    plain.name = "bench-plain";
    double enabled_sampled = 1e30, enabled_plain = 1e30;
    for (int turn = 0; turn < 4; turn++) {
        g_p = sonde_create(turn % 2 ? &smp : &plain);
        snprintf(path, sizeof path, "%s", sonde_file_path(g_p));
        double t = best_ns(scope_loop, n / 2);
        sonde_destroy(g_p);
        unlink(path);
        double *best = turn % 2 ? &enabled_sampled : &enabled_plain;
        if (t < *best)
            *best = t;
    }
    printf("\nsampler (NVML: %s)\n", nvml);
    printf("  CPU at 10 Hz, all sources on: %.3f%% of one core (%.4f s in %.0f s)\n",
           100.0 * sampler_cpu / idle_s, sampler_cpu, idle_s);
    printf("  SONDE_SCOPE enabled while sampling at 100 Hz: %.2f ns/pair, %.2fx the figure "
           "without sampling measured in turn with it (%.2f)\n", enabled_sampled,
           enabled_sampled / enabled_plain, enabled_plain);

    return 0;
}
