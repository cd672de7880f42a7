/* crashy.c - a host program that records sections and then ends badly, for the end-to-end tests
 * of the signal and exit flush. Usage: crashy MODE N DIR
 *   segv       N sections, then a write through a null pointer
 *   abort      N sections, then abort()
 *   term       a host SIGTERM handler that exits 3; N sections, then raise(SIGTERM)
 *   exit       N sections, then exit(0) without sonde_destroy (the atexit flush writes reports)
 *   threads    8 threads record N sections each while the main thread raises SIGSEGV */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sonde/sonde.h>

static sonde_profiler *g_p;
static int g_n;
static volatile int g_ready;

static void host_term(int sig)
{
    (void)sig;
    static const char msg[] = "host handler ran\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

static void *recorder(void *arg)
{
    (void)arg;
    for (int i = 0; i < g_n; i++) {
        SONDE_SCOPE(g_p, "thread work");
    }
    __atomic_add_fetch(&g_ready, 1, __ATOMIC_SEQ_CST);
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: crashy segv|abort|term|exit|threads N DIR\n");
        return 2;
    }
    const char *mode = argv[1];
    g_n = atoi(argv[2]);
    if (!strcmp(mode, "term"))
        signal(SIGTERM, host_term);
    sonde_config c = sonde_config_default();
    c.output_dir = argv[3];
    c.name = mode;
    c.formats = SONDE_FORMAT_JSON;
    g_p = sonde_create(&c);
    if (!strcmp(mode, "threads")) {
        pthread_t th[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&th[i], NULL, recorder, NULL);
        while (__atomic_load_n(&g_ready, __ATOMIC_SEQ_CST) < 8)
            usleep(1000);
        volatile int *null = NULL;
        *null = 1;
        return 0;
    }
    for (int i = 0; i < g_n; i++) {
        SONDE_SCOPE(g_p, "work");
        sonde_metric(g_p, "i", i);
    }
    if (!strcmp(mode, "segv")) {
        volatile int *null = NULL;
        *null = 1;
    } else if (!strcmp(mode, "abort")) {
        abort();
    } else if (!strcmp(mode, "term")) {
        raise(SIGTERM);
    } else if (!strcmp(mode, "exit")) {
        exit(0);
    }
    return 1;
}
