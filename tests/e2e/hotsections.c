/* hotsections.c - known hot functions inside sonde sections, for libsonde's own CPU sampler
 * (sample_hz, with_stack: set through the environment). Each thread runs rounds of a "step"
 * section holding "decode" (hot70: 70% of the work) and "prefill" (warm20: 20%), then cool10
 * (10%) outside every section. Built at -O0 with frame pointers, as hotspots.c. With "early",
 * the other threads start before sonde_create and wait for it: the sampler must find them
 * (/proc/self/task), since they do not inherit its events.
 * Usage: hotsections DIR NAME THREADS ROUNDS [early] */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sonde/sonde.h>

#include "hotwork.h"

static sonde_profiler *g_p;
static long g_rounds;
static pthread_barrier_t g_made; /* "early": the threads wait here for the profiler */

static void *work(void *arg)
{
    if (arg)
        pthread_barrier_wait(&g_made);
    for (long r = 0; r < g_rounds; r++) {
        {
            SONDE_SCOPE(g_p, "step");
            {
                SONDE_SCOPE(g_p, "decode");
                hot70();
            }
            {
                SONDE_SCOPE(g_p, "prefill");
                warm20();
            }
        }
        cool10();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return 2;
    sonde_config c = sonde_config_default();
    c.output_dir = argv[1];
    c.name = argv[2];
    c.formats = SONDE_FORMAT_JSON | SONDE_FORMAT_TXT; /* sampling adds .folded and .pb.gz */
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    if (sonde_config_from_env(&c) != 0)
        return 3;
    int threads = atoi(argv[3]);
    g_rounds = atol(argv[4]);
    if (threads < 1 || threads > 64)
        return 2;
    int early = argc > 5 && !strcmp(argv[5], "early");
    pthread_t th[64];
    if (early) {
        pthread_barrier_init(&g_made, NULL, (unsigned)threads);
        for (int i = 1; i < threads; i++)
            pthread_create(&th[i], NULL, work, &g_made);
    }
    g_p = sonde_create(&c);
    if (early)
        pthread_barrier_wait(&g_made);
    for (int i = 1; i < threads && !early; i++)
        pthread_create(&th[i], NULL, work, NULL);
    work(NULL);
    for (int i = 1; i < threads; i++)
        pthread_join(th[i], NULL);
    return sonde_destroy(g_p);
}
