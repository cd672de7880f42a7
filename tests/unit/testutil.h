/* testutil.h - helpers shared by the unit tests: a fresh output directory per test, reading a
 * run back through the model. */
#ifndef SONDE_TESTUTIL_H
#define SONDE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "model/model.h"
#include <sonde/sonde.h>

/* 1 in a sanitizer build of the tests (gcc says so by __SANITIZE_*__, clang by __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define TU_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_UNDER_ASAN 1
#endif
#endif
#ifndef TU_UNDER_ASAN
#define TU_UNDER_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TU_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_UNDER_TSAN 1
#endif
#endif
#ifndef TU_UNDER_TSAN
#define TU_UNDER_TSAN 0
#endif

/* A new empty directory under $TMPDIR (or /tmp); the returned string is static per call site. */
static inline const char *tu_tmpdir(char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/sonde-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp failed");
    return buf;
}

/* CLOCK_MONOTONIC in s. */
static inline double tu_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Busy for ms milliseconds of wall time (CPU-bound, so a section around it has that length). */
static inline void tu_spin_ms(double ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6 < ms);
}

/* Spins until this thread has used ms of CPU time: as much work however loaded the machine. */
static inline void tu_cpu_spin_ms(double ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    while ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6 < ms);
}

static inline sonde_config tu_config(const char *dir, const char *name)
{
    sonde_config c = sonde_config_default();
    c.output_dir = dir;
    c.name = name;
    c.formats = 0;
    c.signal_handlers = 0;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0; /* tests that sample turn them on */
    return c;
}

/* Destroys p after copying its file path, then reads the file into m. */
static inline int tu_finish(sonde_profiler *p, sm_model *m)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    int rc = sonde_destroy(p);
    int r = sm_read_file(path, m);
    assert_int_equal(r, 0);
    return rc;
}

static inline const sm_stat *tu_stat(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_stats; i++)
        if (!strcmp(m->stats[i].name, name))
            return &m->stats[i];
    return NULL;
}

static inline void tu_rmrf(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
