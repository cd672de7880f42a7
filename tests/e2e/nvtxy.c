/* nvtxy.c - a program for the NVTX test: sections through SONDE_SCOPE and SONDE_FUNCTION (the
 * inline path) and sonde_begin/sonde_end, nested, on 3 threads, in two sessions, with steps.
 * Usage: nvtxy OUTDIR NAME (the configuration also from SONDE_* variables, e.g. SONDE_NVTX=1). */
#include <pthread.h>
#include <stdio.h>

#include <sonde/sonde.h>

static sonde_profiler *g_p;

static void leaf(void)
{
    SONDE_FUNCTION(g_p);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        SONDE_SCOPE(g_p, "outer");
        sonde_begin(g_p, "inner");
        leaf();
        sonde_end(g_p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nvtxy OUTDIR NAME\n");
        return 2;
    }
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = argv[1];
    cfg.name = argv[2];
    cfg.formats = SONDE_FORMAT_JSON;
    cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "nvtxy: %s\n", sonde_last_error());
        return 2;
    }
    g_p = sonde_create(&cfg);
    if (!g_p)
        return 1;
    sonde_session_begin(g_p, "load");
    {
        SONDE_SCOPE(g_p, "weights");
    }
    sonde_session_begin(g_p, "generate"); /* ends "load" */
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 5; i++) {
        SONDE_SCOPE(g_p, "step body");
        sonde_step(g_p);
    }
    sonde_session_end(g_p);
    return sonde_destroy(g_p) == 0 ? 0 : 1;
}
