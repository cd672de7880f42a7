/* traced.c - a program built with -finstrument-functions for the autotrace test: global and
 * static functions, recursion, a thread, a longjmp out of two frames, calls into C++
 * (traced_cpp.cpp), and with TRACED_PLUGIN=path a library loaded with dlopen mid-run
 * (plugin.c). It records nothing itself: libsonde-autotrace does.
 * Usage: traced [attach OUTDIR] - with "attach", main (not instrumented) makes its own profiler
 * and attaches it. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sonde/autotrace.h>

int cpp_entry(int n); /* traced_cpp.cpp */

static jmp_buf g_jump;
static volatile int g_sink;

static int helper_static(int x)
{
    return x * 3;
}

int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int excluded_noise(int x)
{
    return x + 1;
}

int fast_leaf(int x)
{
    return x ^ 0x55;
}

/* 2 ms: long under any minimum duration the test sets */
void slow_step(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static void jumper_inner(void)
{
    longjmp(g_jump, 1);
}

static void jumper(void)
{
    jumper_inner();
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++)
        g_sink += helper_static(i);
    return NULL;
}

int run(void)
{
    for (int i = 0; i < 7; i++)
        g_sink += helper_static(i);
    g_sink += fib(6);
    for (int i = 0; i < 5; i++)
        g_sink += excluded_noise(i);
    for (int i = 0; i < 1000; i++)
        g_sink += fast_leaf(i);
    slow_step();
    if (setjmp(g_jump) == 0)
        jumper();
    g_sink += cpp_entry(4);
    const char *plugin = getenv("TRACED_PLUGIN");
    if (plugin) { /* loaded after tracing began: its symbols were not in the first report */
        void *h = dlopen(plugin, RTLD_NOW);
        int (*work)(int) = NULL;
        if (h)
            *(void **)(&work) = dlsym(h, "plugin_work");
        if (work)
            g_sink += work(2);
        else
            fprintf(stderr, "traced: cannot use %s: %s\n", plugin, dlerror());
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return g_sink;
}

__attribute__((no_instrument_function)) int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "attach")) {
        sonde_config cfg = sonde_config_default();
        cfg.name = "attached";
        cfg.output_dir = argv[2];
        cfg.formats = SONDE_FORMAT_JSON;
        cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
        cfg.autotrace_exclude = "excluded_*";
        sonde_profiler *p = sonde_create(&cfg);
        if (sonde_autotrace_attach(p) != 0) {
            fprintf(stderr, "traced: %s\n", sonde_last_error());
            return 1;
        }
        run();
        sonde_autotrace_stats st;
        sonde_autotrace_get_stats(&st);
        printf("functions %llu excluded %llu mismatched %llu\n",
               (unsigned long long)st.functions, (unsigned long long)st.excluded,
               (unsigned long long)st.mismatched_exits);
        if (sonde_autotrace_detach() != p)
            return 1;
        run(); /* not traced */
        return sonde_destroy(p) == 0 ? 0 : 1;
    }
    run();
    return 0;
}
