/* flight.c - a host program for the flight recorder's end-to-end test (tests/e2e/run.sh flight).
 * Usage: flight MODE DIR [STEPS SLOW_AT [INNER [SLOW_MS]]]
 *   steps   STEPS steps of 10 ms (a section "step work" in each, a section "serve" open from
 *           the start), step SLOW_AT takes SLOW_MS (default 100); flight_recorder_s 2, after
 *           0.5 s, trigger_step_over_median 5 (in this mode only). Prints "slow step N" when it
 *           runs it. INNER: sections "inner" each step opens (a heavier load; default 0).
 *   api     two sonde_trigger calls 1.5 s apart with flight_recorder_max 1: one dump, the
 *           second trigger counted
 *   signal  1.5 s of steps, waiting for the trigger signal (sonde trigger PID) from outside;
 *           prints "ready PID" first, then runs until the file "DIR/stop" exists (at most 20 s)
 *   held    prints "ready PID", then steps (at most 20 s) with the trigger signal (SIGUSR2)
 *           blocked in every thread for good: a signal sent stays pending (pidreuse.c)
 *   blocked as signal, but the trigger signal (SIGUSR2) is blocked in every thread for the first
 *           half second after "ready" (50 steps): two `sonde trigger`s sent then must both be
 *           acted on (each waits up to 2 s for the program to take its signal)
 *   exit    steps for 1 s, then exit(3) without sonde_destroy
 *   forkexit  steps for 0.5 s, then a forked child that exits with status 1 (it must write
 *           nothing: a forked child records nothing), then 0.5 s more and a normal end
 *   exitsig as exit, 2,000 sections a step, and a thread that sends the process the trigger signal
 *           once the exit's dump file is there, while its reports are written: the process must
 *           still end with its own status 3 (the signal is taken, not fatal)
 *   section 2.5 s of steps; at 2 s a section "slow part" of 300 ms in one (for the rule
 *           trigger_section_over_s, set from the environment)
 *   counter 2.5 s of steps, each recording the counter "gpu util": 90, but 10 from 1.5 s to
 *           2 s (for trigger_counter_below)
 *   queue   sonde_trigger at 1 s and at 1.7 s: two dumps, the second written after the first
 *   ondemand  steps until the file "DIR/stop" exists (at most 20 s), for on_demand (set from the
 *           environment); prints "ready PID" first, and at the end the mean step time of the
 *           first and the last 100 steps: "first100 MS last100 MS"
 *   segv    steps for 1 s, then a write through a null pointer (inside a section)
 *   kill    a trigger, then steps until SIGKILL comes from outside (prints "dumped" once the
 *           dump's reports are there)
 *   two     a second profiler with a flight recorder ("fl2"), destroyed after 0.5 s of steps;
 *           then the process sends itself the trigger signal: the first profiler, still
 *           recording, must write its dump, and the process must live
 *   burst   8 threads open and close sections as fast as they can in a 1 MiB buffer (events
 *           and section ends dropped), while the main thread records the run metadata
 *           "key0".."key19" between sections of its own; then a trigger: the dump's
 *           run.metadata must hold all 20
 *   chain   the program's own SIGUSR2 handler, installed before sonde_create; it sends itself
 *           SIGUSR2 (its handler's, not a dump), prints "ready PID" and steps until "DIR/stop"
 *           exists (`sonde trigger PID` from outside: a dump); prints "own handler N" at the end
 * The configuration comes from the environment too (SONDE_*), over these settings. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int g_inner;
static volatile sig_atomic_t g_own; /* the program's own SIGUSR2 handler's calls (chain) */

static void own_handler(int sig)
{
    (void)sig;
    g_own++;
}

static sonde_profiler *g_p; /* burst's threads record into it */

static void *burst(void *unused)
{
    (void)unused;
    for (int i = 0; i < 300000; i++) {
        SONDE_SCOPE(g_p, "burst");
    }
    return NULL;
}

static void step(sonde_profiler *p, int ms)
{
    {
        SONDE_SCOPE(p, "step work");
        for (int i = 0; i < g_inner; i++) {
            SONDE_SCOPE(p, "inner");
        }
        sleep_ms(ms);
    }
    sonde_counter(p, "queue depth", ms);
    sonde_step(p);
}

/* exitsig: waits (up to 30 s) for DIR/fl-trigger1.sonde, then signals the process. */
static void *signal_at_dump(void *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fl-trigger1.sonde", (const char *)dir);
    for (int i = 0; i < 30000 && access(path, F_OK) != 0; i++)
        sleep_ms(1);
    kill(getpid(), SIGUSR2);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: flight steps|api|signal|exit|raiseend|... DIR [STEPS SLOW_AT]\n");
        return 2;
    }
    const char *mode = argv[1];
    sonde_config c = sonde_config_default();
    c.output_dir = argv[2];
    c.name = "fl";
    c.formats = SONDE_FORMAT_JSON | SONDE_FORMAT_TXT | SONDE_FORMAT_TRACE;
    c.collect_gpu = 0;
    c.cpu_interval_s = 0.1;
    c.flight_recorder_s = 2;
    c.flight_recorder_after_s = 0.5;
    if (!strcmp(mode, "steps")) /* the other modes' triggers are theirs alone */
        c.trigger_step_over_median = 5;
    if (!strcmp(mode, "api"))
        c.flight_recorder_max = 1;
    if (!strcmp(mode, "burst"))
        c.buffer_mb = 1;
    if (!strcmp(mode, "ondemand")) /* recording on demand, not the flight recorder */
        c.flight_recorder_s = 0;
    if (sonde_config_from_env(&c) != 0) {
        fprintf(stderr, "flight: %s\n", sonde_last_error());
        return 2;
    }
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    if (!strcmp(mode, "blocked") || !strcmp(mode, "held")) /* sonde's threads inherit it */
        sigprocmask(SIG_BLOCK, &usr2, NULL);
    if (!strcmp(mode, "chain"))
        signal(SIGUSR2, own_handler);
    sonde_profiler *p = sonde_create(&c);
    if (!p) {
        fprintf(stderr, "flight: %s\n", sonde_last_error());
        return 2;
    }
    sonde_metadata(p, "model", "tiny");
    sonde_begin(p, "serve");
    if (!strcmp(mode, "steps")) {
        int n = argc > 3 ? atoi(argv[3]) : 400, slow = argc > 4 ? atoi(argv[4]) : 250;
        g_inner = argc > 5 ? atoi(argv[5]) : 0;
        int slow_ms = argc > 6 ? atoi(argv[6]) : 100;
        for (int i = 0; i < n; i++) {
            if (i == slow) {
                printf("slow step %d\n", i);
                fflush(stdout);
            }
            step(p, i == slow ? slow_ms : 10);
        }
    } else if (!strcmp(mode, "api")) {
        for (int i = 0; i < 300; i++) {
            if (i == 100 || i == 250)
                sonde_trigger(p, i == 100 ? "asked by the test" : "asked again");
            step(p, 10);
        }
    } else if (!strcmp(mode, "signal") || !strcmp(mode, "blocked")) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        if (!strcmp(mode, "blocked")) {
            for (int i = 0; i < 50; i++)
                step(p, 10);
            sigprocmask(SIG_UNBLOCK, &usr2, NULL);
        }
        char stop[4096];
        snprintf(stop, sizeof stop, "%s/stop", argv[2]);
        for (int i = 0; i < 2000 && access(stop, F_OK) != 0; i++)
            step(p, 10);
    } else if (!strcmp(mode, "section")) {
        for (int i = 0; i < 250; i++) {
            if (i == 200) {
                SONDE_SCOPE(p, "slow part");
                sleep_ms(300);
            }
            step(p, 10);
        }
    } else if (!strcmp(mode, "counter")) {
        for (int i = 0; i < 250; i++) {
            sonde_counter(p, "gpu util", i >= 150 && i < 200 ? 10 : 90);
            step(p, 10);
        }
    } else if (!strcmp(mode, "queue")) {
        for (int i = 0; i < 300; i++) {
            if (i == 100 || i == 170)
                sonde_trigger(p, i == 100 ? "first" : "second");
            step(p, 10);
        }
    } else if (!strcmp(mode, "ondemand")) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        char stop[4096];
        snprintf(stop, sizeof stop, "%s/stop", argv[2]);
        static double ms[2000];
        int n = 0;
        for (; n < 2000 && access(stop, F_OK) != 0; n++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            step(p, 10);
            clock_gettime(CLOCK_MONOTONIC, &b);
            ms[n] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        }
        double first = 0, last = 0;
        for (int i = 0; i < 100 && i < n; i++) {
            first += ms[i] / 100;
            last += ms[n - 1 - i] / 100;
        }
        printf("first100 %.3f last100 %.3f\n", first, last);
    } else if (!strcmp(mode, "segv")) {
        for (int i = 0; i < 100; i++)
            step(p, 10);
        SONDE_SCOPE(p, "crashing");
        volatile int *null = NULL;
        *null = 1;
    } else if (!strcmp(mode, "kill")) {
        for (int i = 0; i < 50; i++)
            step(p, 10);
        sonde_trigger(p, "before the kill");
        char txt[4096];
        snprintf(txt, sizeof txt, "%s/fl-trigger1.txt", argv[2]);
        for (int i = 0; i < 3000 && access(txt, F_OK) != 0; i++)
            step(p, 10);
        printf("dumped\n");
        fflush(stdout);
        for (int i = 0; i < 3000; i++)
            step(p, 10);
    } else if (!strcmp(mode, "held")) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (int i = 0; i < 2000; i++)
            step(p, 10);
    } else if (!strcmp(mode, "two")) {
        sonde_config c2 = c;
        c2.name = "fl2";
        sonde_profiler *p2 = sonde_create(&c2);
        for (int i = 0; i < 50; i++)
            step(p, 10);
        if (sonde_destroy(p2) != 0)
            fprintf(stderr, "flight: the second profiler: %s\n", sonde_last_error());
        kill(getpid(), SIGUSR2); /* the first still records: a dump, not the end of the process */
        for (int i = 0; i < 150; i++)
            step(p, 10);
    } else if (!strcmp(mode, "chain")) {
        kill(getpid(), SIGUSR2); /* the program's own: its handler, no dump */
        for (int i = 0; i < 20 && !g_own; i++)
            step(p, 10);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        char stop[4096];
        snprintf(stop, sizeof stop, "%s/stop", argv[2]);
        for (int i = 0; i < 2000 && access(stop, F_OK) != 0; i++)
            step(p, 10);
        printf("own handler %d\n", (int)g_own);
    } else if (!strcmp(mode, "forkexit")) {
        for (int i = 0; i < 50; i++)
            step(p, 10);
        pid_t child = fork();
        if (child == 0)
            exit(1);
        int st = 0;
        waitpid(child, &st, 0);
        printf("child %d exited %d\n", (int)child, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        for (int i = 0; i < 50; i++)
            step(p, 10);
    } else if (!strcmp(mode, "exitsig")) {
        g_inner = 2000;
        for (int i = 0; i < 100; i++)
            step(p, 10);
        pthread_t t;
        if (pthread_create(&t, NULL, signal_at_dump, argv[2]) == 0)
            pthread_detach(t);
        exit(3);
    } else if (!strcmp(mode, "burst")) {
        sonde_end(p); /* outside any section, the run's own */
        g_p = p;
        pthread_t t[8];
        int n = 0;
        while (n < 8 && pthread_create(&t[n], NULL, burst, NULL) == 0)
            n++;
        for (int i = 0; i < 20; i++) {
            for (int j = 0; j < 20000; j++) {
                SONDE_SCOPE(p, "mine");
            }
            char k[16], v[16];
            snprintf(k, sizeof k, "key%d", i);
            snprintf(v, sizeof v, "v%d", i);
            sonde_metadata(p, k, v);
        }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        sonde_trigger(p, "after the burst");
        sonde_begin(p, "serve");
    } else if (!strcmp(mode, "raiseend")) { /* a trigger signal just before the run ends */
        for (int i = 0; i < 20; i++)
            step(p, 10);
        raise(SIGUSR2);
    } else if (!strcmp(mode, "exit")) {
        for (int i = 0; i < 100; i++)
            step(p, 10);
        exit(3);
    } else {
        fprintf(stderr, "flight: unknown mode %s\n", mode);
        return 2;
    }
    sonde_end(p);
    return sonde_destroy(p) == 0 ? 0 : 1;
}
