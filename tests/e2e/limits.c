/* limits.c - a host program for the reliability tests. Usage: limits MODE DIR
 *   fsize   a 256 KiB file-size limit: sonde's writes fail with EFBIG, the host is not killed
 *   full    the same on a disk that fills up (the test mounts a small tmpfs at DIR): ENOSPC
 *   bound   100 million section edges through 64 MiB of buffers: prints the peak RSS
 *   churn   10,000 threads that each record 3 sections and exit: prints RSS along the way
 *   kill    8 threads record until SIGKILL; prints "realtime_ns sections_completed" every 50 ms
 *   wide    limits wide DIR NAMES EACH: NAMES distinct section names, EACH instances of each
 *           (in rounds, one of every name a round), each with metadata and a nested section;
 *           the file is DIR/wide-NAMES-EACH.sonde (the report pass's growth with names and
 *           instances) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

static sonde_profiler *g_p;
static atomic_ulong g_done;

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void *few(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(g_p, "churn");
    }
    return NULL;
}

static void *forever(void *arg)
{
    (void)arg;
    for (;;) {
        {
            SONDE_SCOPE(g_p, "work");
            struct timespec ts = {0, 200000}; /* 0.2 ms: a file small enough to read back */
            nanosleep(&ts, NULL);
        }
        atomic_fetch_add(&g_done, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int wide = argc == 5 && !strcmp(argv[1], "wide");
    if (argc != 3 && !wide) {
        fprintf(stderr, "usage: limits fsize|full|bound|records|tagged|churn|kill DIR\n"
                        "       limits wide DIR NAMES EACH\n");
        return 2;
    }
    const char *mode = argv[1];
    sonde_config c = sonde_config_default();
    c.output_dir = argv[2];
    c.name = mode;
    c.formats = 0;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    if (wide) {
        long names = atol(argv[3]), each = atol(argv[4]);
        char run[64], name[32], v[8];
        snprintf(run, sizeof run, "wide-%ld-%ld", names, each);
        c.name = run;
        g_p = sonde_create(&c);
        for (long i = 0; i < each; i++)
            for (long n = 0; n < names; n++) {
                snprintf(name, sizeof name, "fn%05ld", n);
                sonde_begin(g_p, name);
                snprintf(v, sizeof v, "%ld", i % 4);
                sonde_metadata(g_p, "batch", v);
                sonde_begin(g_p, "inner");
                sonde_end(g_p);
                sonde_end(g_p);
            }
        return sonde_destroy(g_p) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "fsize") || !strcmp(mode, "full")) {
        struct rlimit rl = {256 * 1024, 256 * 1024};
        if (!strcmp(mode, "fsize"))
            setrlimit(RLIMIT_FSIZE, &rl);
        c.formats = SONDE_FORMAT_JSON;
        g_p = sonde_create(&c);
        for (int i = 0; i < 400000; i++) {
            SONDE_SCOPE(g_p, "work");
        }
        int rc = sonde_destroy(g_p);
        printf("destroy: %s\n", sonde_strerror(rc));
        return 7; /* the host's own exit code */
    }
    if (!strcmp(mode, "bound")) {
        c.buffer_mb = 64;
        g_p = sonde_create(&c);
        for (long i = 0; i < 50000000; i++) { /* 100 million edges */
            SONDE_SCOPE(g_p, "edge");
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("maxrss_kb %ld\n", ru.ru_maxrss);
        return sonde_destroy(g_p) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "records")) { /* 4 M instants, steps and counter samples: the report's */
        g_p = sonde_create(&c);
        for (long i = 0; i < 4000000; i++) {
            sonde_event(g_p, "tick");
            sonde_step(g_p);
            sonde_counter(g_p, "queue", (double)(i % 1000));
        }
        return sonde_destroy(g_p) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "tagged")) { /* 4 M sections, each with metadata */
        g_p = sonde_create(&c);
        char v[16];
        for (long i = 0; i < 4000000; i++) {
            sonde_begin(g_p, "request");
            snprintf(v, sizeof v, "%ld", i % 20);
            sonde_metadata(g_p, "batch", v);
            sonde_end(g_p);
        }
        return sonde_destroy(g_p) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "churn")) {
        g_p = sonde_create(&c);
        long early = 0;
        for (int wave = 0; wave < 200; wave++) { /* 200 waves of 50 threads */
            pthread_t th[50];
            for (int i = 0; i < 50; i++)
                pthread_create(&th[i], NULL, few, NULL);
            for (int i = 0; i < 50; i++)
                pthread_join(th[i], NULL);
            if (wave == 19)
                early = rss_kb();
        }
        long late = rss_kb();
        sonde_summary_t *s = sonde_summary(g_p);
        printf("rss_kb_after_1000 %ld rss_kb_after_10000 %ld sections %llu dropped %llu\n", early,
               late, s ? (unsigned long long)s->sections : 0ull,
               s ? (unsigned long long)s->dropped_events : 0ull);
        sonde_summary_free(s);
        return sonde_destroy(g_p) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "kill")) {
        if (sonde_config_from_env(&c) != 0) /* SONDE_FLUSH_INTERVAL_S: the interval under test */
            return 2;
        g_p = sonde_create(&c);
        pthread_t th[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&th[i], NULL, forever, NULL);
        for (;;) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            unsigned long done = atomic_load(&g_done);
            printf("%lld %lu\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, done);
            fflush(stdout);
            usleep(50000);
        }
    }
    fprintf(stderr, "limits: unknown mode %s\n", mode);
    return 2;
}
