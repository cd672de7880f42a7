/* hotspots.c - a program with known hot functions for `sonde run`'s CPU sampler: each thread
 * spends 70% of its work in hot70, 20% in warm20 and 10% in cool10, each its own loop. Built
 * at -O0 with frame pointers (tests/CMakeLists.txt): a function without a frame hides its
 * caller from a frame-pointer walk.
 * Usage: hotspots THREADS ROUNDS */
#include <pthread.h>
#include <stdlib.h>

#include "hotwork.h"

static long g_rounds;

static void *work(void *arg)
{
    (void)arg;
    for (long r = 0; r < g_rounds; r++) {
        hot70();
        warm20();
        cool10();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    g_rounds = argc > 2 ? atol(argv[2]) : 50;
    if (threads < 1 || threads > 64)
        return 2;
    pthread_t th[64];
    for (int i = 1; i < threads; i++)
        pthread_create(&th[i], NULL, work, NULL);
    work(NULL);
    for (int i = 1; i < threads; i++)
        pthread_join(th[i], NULL);
    return 0;
}
