/* planted.c - a training run whose answers are known by construction, for the SQL export's
 * example queries (the e2e case `sqlite`, docs/formats.md). Usage: planted DIR NAME [RANK WORLD]
 *
 * Session "train" (metadata model=tiny), 10 steps (each begun by sonde_step_begin) of "step"
 * holding "forward" (metadata batch=STEP; inside it "attention") and "backward". Planted:
 * - step 6 also waits in "data_wait" for 1 s: the slowest step (steps 4 and 5 burn 0.1 s of
 *   CPU, which a loaded machine may stretch, but not past a second);
 * - "forward" sleeps 2 + 40 * RANK ms: its p99 grows with the rank, each step's slowest rank is
 *   the last (by 40 ms a step: more than a loaded machine's late wake-ups);
 * - counter "loss" = 1 / (STEP + 1) at each step's end; instant "checkpoint" in steps 3 and 7;
 * - under the fake CUPTI (SONDE_CUPTI_LIBRARY, SONDE_CUDA_ACTIVITY=1): in every "attention" a
 *   gemm_kernel of 300 us and an attn_kernel of 100 us, in every "backward" a bwd_kernel of
 *   200 us, one after the other (their durations exact; one stream, busy 600 us a step and
 *   idle the rest);
 * - "hot_spin" burns 0.1 s of CPU in "backward" of steps 4 and 5 (its stack in the CPU samples,
 *   when sample_hz is set), in a run that is not a rank of a job (whose timings must stay
 *   apart on a loaded machine: a CPU share moves a step by more than the ranks' difference).
 * Formats json, instances and sqlite unless SONDE_FORMATS says otherwise. Exit 0, or 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sonde/sonde.h>

static void (*launch)(const char *, int, int, double);

static void nap_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (long)(ms / 1000)) * 1e6)};
    nanosleep(&ts, NULL);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static double hot_spin(double seconds)
{
    volatile double x = 0;
    for (double t0 = cpu_s(); cpu_s() - t0 < seconds;)
        for (int i = 0; i < 10000; i++)
            x += i * 0.5;
    return x;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: planted DIR NAME [RANK WORLD]\n");
        return 1;
    }
    int rank = argc == 5 ? atoi(argv[3]) : 0;
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = argv[1];
    cfg.name = argv[2];
    cfg.formats = SONDE_FORMAT_JSON | SONDE_FORMAT_INSTANCES | SONDE_FORMAT_SQLITE;
    cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
    if ((argc == 5 && (sonde_config_set(&cfg, "rank", argv[3]) ||
                       sonde_config_set(&cfg, "world_size", argv[4]))) ||
        sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "planted: %s\n", sonde_last_error());
        return 1;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p) {
        fprintf(stderr, "planted: %s\n", sonde_last_error());
        return 1;
    }
    const char *lib = getenv("SONDE_CUPTI_LIBRARY");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL; /* loaded by sonde */
    if (h)
        *(void **)(&launch) = dlsym(h, "fake_cupti_launch");
    sonde_session_begin(p, "train");
    sonde_metadata(p, "model", "tiny");
    for (int step = 0; step < 10; step++) {
        char batch[16];
        snprintf(batch, sizeof batch, "%d", step);
        sonde_step_begin(p);
        sonde_begin(p, "step");
        if (step == 6) {
            sonde_begin(p, "data_wait");
            nap_ms(1000);
            sonde_end(p);
        }
        sonde_begin(p, "forward");
        sonde_metadata(p, "batch", batch);
        nap_ms(2 + 40 * rank);
        sonde_begin(p, "attention");
        if (launch)
            launch("gemm_kernel", 128, 256, 300);
        nap_ms(0.5); /* the kernels' start is 10 us after their launch: one at a time */
        if (launch)
            launch("attn_kernel", 64, 128, 100);
        nap_ms(0.5);
        sonde_end(p);
        sonde_end(p);
        sonde_begin(p, "backward");
        if (launch)
            launch("bwd_kernel", 64, 128, 200);
        if ((step == 4 || step == 5) && argc == 3)
            hot_spin(0.1);
        nap_ms(1);
        sonde_end(p);
        if (step == 3 || step == 7)
            sonde_event(p, "checkpoint");
        sonde_end(p);
        sonde_counter(p, "loss", 1.0 / (step + 1));
        sonde_step(p);
    }
    sonde_session_end(p);
    int rc = sonde_destroy(p);
    if (rc)
        fprintf(stderr, "planted: %s\n", sonde_last_error());
    return rc ? 1 : 0;
}
