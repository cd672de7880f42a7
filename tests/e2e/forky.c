/* forky.c - a profiled host that forks while 4 other threads record. Usage: forky DIR FORKS
 * Each of FORKS children keeps profiling: it ends the section open at the fork, records 100
 * "child_work" sections and exits, leaving DIR/fork-pidN.json. Then one child execs /bin/true
 * and one _exits without recording: neither may leave a file. A child that has not exited
 * after 20 s is a deadlock: it is killed and the test fails. Prints each child's pid. With
 * FORKY_BURN_MS set, each child's "child_work" sections burn that many ms of CPU in all (for the
 * CPU sampler across a fork: sample_hz comes from the environment). FORKS "destroy": a fork while
 * another thread is inside sonde_destroy; the child's own sonde_destroy must return. FORKS
 * "sigterm": one child that installs its own SIGTERM handler after sonde's, one that calls
 * _exit(0) when its parent sends it (as a PyTorch DataLoader worker's does), records 100
 * "child_work" sections and waits; the parent sends it SIGTERM 300 ms later: its
 * fork-pidN.sonde must hold the 100 sections (prints its pid). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

static sonde_profiler *g_p;
static atomic_int g_stop;
static volatile double g_sink;

static void burn_ms(double ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    double x = 0;
    do {
        for (int i = 0; i < 10000; i++)
            x += i * 0.5;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6 < ms);
    g_sink = x;
}

static void *background(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        {
            SONDE_SCOPE(g_p, "background");
        }
        struct timespec ts = {0, 20000}; /* busy enough to be mid-record at a fork */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *destroyer(void *arg)
{
    (void)arg;
    sonde_destroy(g_p);
    return NULL;
}

/* A DataLoader worker's SIGTERM handler: its parent's SIGTERM ends it at once. */
static void exit_on_parents_term(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (info->si_pid == getppid())
        _exit(0);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* 0 when the child exited with status 0 within 20 s. */
static int reap(pid_t pid, const char *what)
{
    for (int i = 0; i < 2000; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                return 0;
            fprintf(stderr, "forky: %s child %d ended with status %d\n", what, (int)pid, st);
            return 1;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "forky: %s child %d hung (deadlock after fork)\n", what, (int)pid);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *burn = getenv("FORKY_BURN_MS");
    double burn_each = burn ? atof(burn) / 100 : 0;
    sonde_config c = sonde_config_default();
    c.name = "fork";
    c.output_dir = argv[1];
    c.formats = SONDE_FORMAT_JSON;
    c.collect_gpu = 0;
    if (sonde_config_from_env(&c) != 0)
        return 3;
    g_p = sonde_create(&c);
    if (!g_p)
        return 3;
    if (!strcmp(argv[2], "destroy")) {
        /* a fork while another thread is inside sonde_destroy (writing the reports of 1M
         * sections): the child's own sonde_destroy returns, and the child exits */
        for (int i = 0; i < 1000000; i++) {
            SONDE_SCOPE(g_p, "work");
        }
        pthread_t d;
        pthread_create(&d, NULL, destroyer, NULL);
        struct timespec ts = {0, 30000000};
        nanosleep(&ts, NULL);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            sonde_destroy(g_p);
            _exit(0);
        }
        int failed = pid < 0 || reap(pid, "destroying");
        pthread_join(d, NULL);
        return failed;
    }
    if (!strcmp(argv[2], "sigterm")) {
        int ready[2];
        if (pipe(ready) != 0)
            return 4;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = exit_on_parents_term;
            sa.sa_flags = SA_SIGINFO;
            sigaction(SIGTERM, &sa, NULL);
            for (int k = 0; k < 100; k++) {
                sonde_begin(g_p, "child_work");
                sonde_end(g_p);
            }
            if (write(ready[1], "r", 1) != 1)
                _exit(6);
            for (;;)
                pause();
        }
        char r;
        if (pid < 0 || read(ready[0], &r, 1) != 1)
            return 4;
        printf("%d\n", (int)pid);
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        kill(pid, SIGTERM);
        int failed = reap(pid, "SIGTERMed");
        return (sonde_destroy(g_p) != 0) | failed;
    }
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, background, NULL);
    int failed = 0, forks = atoi(argv[2]);
    sonde_begin(g_p, "outer");
    for (int i = 0; i < forks + 2; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            return 4;
        if (pid == 0) {
            if (i == forks)
                execl("/bin/true", "true", (char *)NULL);
            if (i >= forks)
                _exit(0);
            int rc = sonde_end(g_p); /* "outer", begun in the parent */
            for (int k = 0; k < 100; k++) {
                sonde_begin(g_p, "child_work");
                if (burn_each > 0)
                    burn_ms(burn_each);
                rc |= sonde_end(g_p);
            }
            exit(rc ? 5 : 0); /* sonde's exit handler writes fork-pidN.json */
        }
        if (i < forks)
            printf("%d\n", (int)pid);
        failed |= reap(pid, i < forks ? "profiling" : "exec/_exit");
    }
    sonde_end(g_p);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int rc = sonde_destroy(g_p);
    if (rc)
        fprintf(stderr, "forky: sonde_destroy: %s\n", sonde_strerror(rc));
    return failed || rc ? 1 : 0;
}
