/* manyspans.c - a run of many sections, for the HTML report at scale (the e2e html test checks
 * the page's size; bench/bench_html.js times its first paint). 4 threads named worker-N, each
 * running steps of a "layer" holding "attention" (with "softmax" nested), "mlp" and "norm": 5
 * sections a layer; every 1000th layer carries metadata; the main thread marks a step every 100
 * layers of its own and records a counter. Writes only the HTML report and the .sonde.
 * Usage: manyspans DIR NAME SECTIONS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sonde/sonde.h>

#define THREADS 4

static sonde_profiler *g_p;
static long g_layers; /* per thread */

static volatile double g_sink;

static void spin(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += i * 0.5;
    g_sink = x;
}

static void *work(void *arg)
{
    long me = (long)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%ld", me);
    sonde_thread_name(g_p, name);
    for (long i = 0; i < g_layers; i++) {
        sonde_begin(g_p, "layer");
        if (i % 1000 == 0) {
            char v[32];
            snprintf(v, sizeof v, "%ld", i);
            sonde_metadata(g_p, "layer_index", v);
        }
        sonde_begin(g_p, "attention");
        spin(40);
        sonde_begin(g_p, "softmax");
        spin(20);
        sonde_end(g_p);
        sonde_end(g_p);
        sonde_begin(g_p, "mlp");
        spin(60);
        sonde_end(g_p);
        sonde_begin(g_p, "norm");
        spin(10);
        sonde_end(g_p);
        sonde_end(g_p);
        if (me == 0 && i % 100 == 99) {
            sonde_step(g_p);
            sonde_counter(g_p, "loss", 1.0 / (double)(i + 1));
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: manyspans DIR NAME SECTIONS\n");
        return 2;
    }
    long sections = atol(argv[3]);
    if (sections < 5 * THREADS) {
        fprintf(stderr, "manyspans: SECTIONS must be %d or more\n", 5 * THREADS);
        return 2;
    }
    g_layers = sections / 5 / THREADS;
    sonde_config c = sonde_config_default();
    c.output_dir = argv[1];
    c.name = argv[2];
    c.formats = SONDE_FORMAT_HTML;
    c.print_summary = 0;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    if (sonde_config_from_env(&c) != 0)
        return 3;
    g_p = sonde_create(&c);
    if (!g_p)
        return 4;
    pthread_t th[THREADS];
    for (long i = 1; i < THREADS; i++)
        if (pthread_create(&th[i], NULL, work, (void *)(intptr_t)i) != 0)
            return 5;
    work((void *)(intptr_t)0);
    for (int i = 1; i < THREADS; i++)
        pthread_join(th[i], NULL);
    return sonde_destroy(g_p) == 0 ? 0 : 6;
}
