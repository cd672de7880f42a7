/* crashy.c - a host program that records sections and then ends badly, for the end-to-end tests
 * of the signal and exit flush. Usage: crashy MODE N DIR
 *   segv       N sections, then a write through a null pointer
 *   abort      N sections, then abort()
 *   term       a host SIGTERM handler that exits 3; N sections, then raise(SIGTERM)
 *   exit       N sections, then exit(0) without sonde_destroy (the atexit flush writes reports)
 *   threads    8 threads record N sections each while the main thread raises SIGSEGV
 *   together   8 threads record N sections each, then all 8 write through a null pointer at
 *              once
 *   eintr      a host SIGTERM handler installed without SA_RESTART and with SA_RESETHAND: a
 *              SIGTERM during read() on an empty pipe still makes read fail with EINTR (prints
 *              "eintr", exits 0); a second SIGTERM then ends the process (status 143)
 *   survive    a host SIGINT handler that counts and returns: 4 threads record N sections each
 *              while the process is sent SIGINT every 200 us (at least 200 times); then
 *              sonde_destroy, exit 0 (every section must be in the file; prints "signals S") */
#include <errno.h>
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

static volatile sig_atomic_t g_terms;
static void host_term_count(int sig)
{
    (void)sig;
    g_terms++;
}

static volatile sig_atomic_t g_ints;
static void host_int_count(int sig)
{
    (void)sig;
    g_ints++;
}

static void *record_n(void *arg)
{
    (void)arg;
    for (int i = 0; i < g_n; i++) {
        SONDE_SCOPE(g_p, "survived");
    }
    __atomic_add_fetch(&g_ready, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* 4 threads record while the process survives 200 SIGINTs its handler counts */
static int survive(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, record_n, NULL);
    for (int k = 0; k < 200 || __atomic_load_n(&g_ready, __ATOMIC_SEQ_CST) < 4; k++) {
        kill(getpid(), SIGINT); /* while they record, and at least 200 times */
        usleep(200);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int rc = sonde_destroy(g_p);
    printf("signals %d\n", (int)g_ints);
    return rc == 0 ? 0 : 1;
}

static void *send_term(void *arg)
{
    pthread_t main_thread = *(pthread_t *)arg;
    usleep(200000);
    pthread_kill(main_thread, SIGTERM);
    return NULL;
}

static int g_together;

static void *recorder(void *arg)
{
    (void)arg;
    for (int i = 0; i < g_n; i++) {
        SONDE_SCOPE(g_p, "thread work");
    }
    __atomic_add_fetch(&g_ready, 1, __ATOMIC_SEQ_CST);
    if (g_together) { /* every thread crashes at the same moment */
        while (__atomic_load_n(&g_ready, __ATOMIC_SEQ_CST) < 8) {
        }
        volatile int *null = NULL;
        *null = 1;
    }
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
    if (!strcmp(mode, "eintr")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = host_term_count;
        sa.sa_flags = SA_RESETHAND; /* no SA_RESTART */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
    if (!strcmp(mode, "survive")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = host_int_count;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
    }
    sonde_config c = sonde_config_default();
    c.output_dir = argv[3];
    c.name = mode;
    c.formats = SONDE_FORMAT_JSON;
    g_p = sonde_create(&c);
    g_together = !strcmp(mode, "together");
    if (!strcmp(mode, "survive"))
        return survive();
    if (!strcmp(mode, "threads") || g_together) {
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
    } else if (!strcmp(mode, "eintr")) {
        int fds[2];
        if (pipe(fds) != 0)
            return 1;
        pthread_t self = pthread_self(), th;
        pthread_create(&th, NULL, send_term, &self);
        char byte;
        ssize_t r = read(fds[0], &byte, 1); /* nothing ever comes: only a signal ends it */
        int e = errno;
        pthread_join(th, NULL);
        if (r < 0 && e == EINTR && g_terms == 1) {
            printf("eintr\n");
            fflush(stdout);
            raise(SIGTERM); /* SA_RESETHAND: the default action now */
            return 2;
        }
        printf("read returned %zd (%s), host handler ran %d time(s)\n", r, strerror(e),
               (int)g_terms);
        return 1;
    }
    return 1;
}
