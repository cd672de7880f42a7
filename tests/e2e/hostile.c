/* hostile.c - host programs that misuse or strain libsonde in ways a real host does, for the
 * end-to-end tests of issue 14's findings. Usage: hostile MODE DIR
 *   paused_open    schedule wait 1 active 1 repeat 1, five steps, then a section begun while the
 *                  schedule pauses recording is still open at exit(5): the exit status stays 5
 *                  and the reports are written
 *   dropped_open   a 1 MiB buffer whose chunks 64 threads hold: the main thread's sonde_begin is
 *                  dropped (SONDE_EDROPPED), then sonde_destroy with it still open
 *   lost_end       a section "x" around 1,000 short ones, then 1,000 more and 0.3 s of idle;
 *                  the test turns the outer END into a GAP marker (sonde_edit.py lose_end): the
 *                  lost end must not stretch "x" to the end of the run
 *   overflow       1,000 sections, then runaway recursion: the stack overflows (SIGSEGV on a
 *                  thread with no stack left) and the flush must still run, on the alternate
 *                  stack sonde gave the thread
 *   double_destroy two threads call sonde_destroy at the same moment: one destroys, the other
 *                  gets SONDE_ESTATE; nothing hangs
 *   names          sections named like spreadsheet formulas, invalid UTF-8, terminal escapes, a
 *                  TAB and line breaks that would forge a report line, written as CSV, text,
 *                  JSON and HTML
 *   trigger        a flight recorder dump whose reason holds terminal escapes and a line break
 *                  (the line on stderr must carry neither) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sonde/sonde.h>

static sonde_profiler *g_p;
static pthread_barrier_t g_held, g_done;
static pthread_barrier_t g_go;
static int g_rc[2];

static sonde_config config(const char *dir, const char *name)
{
    sonde_config c = sonde_config_default();
    c.output_dir = dir;
    c.name = name;
    c.formats = SONDE_FORMAT_JSON;
    c.print_summary = 0;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    return c;
}

static volatile int g_never = -1;

/* Recursion that never ends (g_never is never reached) and that no compiler can make a loop:
 * every frame's array is used after the call. */
static int deeper(int n)
{
    volatile char frame[256];
    frame[n % 256] = (char)n;
    if (n == g_never)
        return 0;
    return deeper(n + 1) + frame[n % 256];
}

static void *holder(void *arg)
{
    (void)arg;
    sonde_begin(g_p, "held");
    sonde_end(g_p); /* the thread keeps its chunk */
    pthread_barrier_wait(&g_held);
    pthread_barrier_wait(&g_done);
    return NULL;
}

/* 64 threads that each record once and keep their chunk until released: with a 1 MiB buffer,
 * no chunk is left for anyone else. 0, or -1 when a thread could not start. */
static int hold_chunks(pthread_t *t)
{
    pthread_barrier_init(&g_held, NULL, 65);
    pthread_barrier_init(&g_done, NULL, 65);
    for (int i = 0; i < 64; i++)
        if (pthread_create(&t[i], NULL, holder, NULL))
            return -1;
    pthread_barrier_wait(&g_held);
    return 0;
}

static void release_chunks(pthread_t *t)
{
    pthread_barrier_wait(&g_done);
    for (int i = 0; i < 64; i++)
        pthread_join(t[i], NULL);
}

static void *destroyer(void *arg)
{
    int *rc = arg;
    pthread_barrier_wait(&g_go);
    *rc = sonde_destroy(g_p);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hostile paused_open|dropped_open|lost_end|overflow|"
                        "double_destroy|names|trigger DIR\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    sonde_config c = config(dir, mode);
    if (!strcmp(mode, "paused_open")) {
        c.wait = 1;
        c.active = 1;
        c.repeat = 1;
        g_p = sonde_create(&c);
        for (int i = 0; i < 5; i++) {
            SONDE_SCOPE(g_p, "step");
            sonde_step(g_p);
        }
        sonde_begin(g_p, "epoch");
        exit(5);
    }
    if (!strcmp(mode, "dropped_open")) {
        c.buffer_mb = 1;
        g_p = sonde_create(&c);
        pthread_t t[64];
        if (hold_chunks(t))
            return 3;
        int rc = sonde_begin(g_p, "epoch");
        printf("begin: %s\n", sonde_err_name(rc));
        release_chunks(t);
        printf("destroy: %s\n", sonde_err_name(sonde_destroy(g_p)));
        return 0;
    }
    if (!strcmp(mode, "overflow")) {
        c.flush_interval_s = 3600; /* nothing reaches the file but through the handler's flush */
        g_p = sonde_create(&c);
        for (int i = 0; i < 1000; i++) {
            SONDE_SCOPE(g_p, "before_overflow");
        }
        printf("recursing\n");
        fflush(stdout);
        return deeper(0);
    }
    if (!strcmp(mode, "lost_end")) {
        /* the outer x's END is made a GAP marker by sonde_edit.py lose_end: with back-pressure
         * the recorder drops an event only when more threads record than there are chunks */
        g_p = sonde_create(&c);
        sonde_begin(g_p, "x");
        for (int i = 0; i < 1000; i++) {
            SONDE_SCOPE(g_p, "x");
        }
        sonde_end(g_p);
        for (int i = 0; i < 1000; i++) {
            SONDE_SCOPE(g_p, "x");
        }
        usleep(300000);
        printf("destroy: %s\n", sonde_err_name(sonde_destroy(g_p)));
        return 0;
    }
    if (!strcmp(mode, "double_destroy")) {
        g_p = sonde_create(&c);
        {
            SONDE_SCOPE(g_p, "work");
        }
        pthread_t t[2];
        pthread_barrier_init(&g_go, NULL, 2);
        for (int i = 0; i < 2; i++)
            if (pthread_create(&t[i], NULL, destroyer, &g_rc[i]))
                return 3;
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        printf("destroy: %s %s\n", sonde_err_name(g_rc[0]), sonde_err_name(g_rc[1]));
        return 0;
    }
    if (!strcmp(mode, "names")) {
        c.formats = SONDE_FORMAT_CSV | SONDE_FORMAT_TXT | SONDE_FORMAT_JSON | SONDE_FORMAT_HTML;
        g_p = sonde_create(&c);
        static const char *const names[] = {"=HYPERLINK(\"http://x\")", "@SUM(1)", "-2+3",
                                            "bad\xff\xfeutf8", "\x1b]0;pwned\x07\x1b[2J",
                                            "\xc2\23331m", "ok\nWarning: forged line",
                                            "cr\rWarning: forged cr",
                                            "ls\xe2\x80\xa8Warning: forged separator",
                                            "cell|split", "tab\tshift", "html<b>&\x01"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            sonde_begin(g_p, names[i]);
            sonde_end(g_p);
        }
        printf("destroy: %s\n", sonde_err_name(sonde_destroy(g_p)));
        return 0;
    }
    if (!strcmp(mode, "trigger")) {
        c.flight_recorder_s = 5;
        g_p = sonde_create(&c);
        sonde_begin(g_p, "work");
        sonde_end(g_p);
        printf("trigger: %s\n", sonde_err_name(sonde_trigger(g_p, "\x1b]0;pwned\x07\x1b[2J "
                                                                  "reason\nsonde: forged line")));
        printf("destroy: %s\n", sonde_err_name(sonde_destroy(g_p)));
        return 0;
    }
    fprintf(stderr, "hostile: unknown mode %s\n", mode);
    return 2;
}
