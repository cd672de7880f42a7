/* clock.c - the timestamp source: the TSC where it is invariant, else CLOCK_MONOTONIC.
 * Ticks are never converted on the hot path; the file stores anchors (tick, monotonic ns,
 * realtime ns) and the reader converts with them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

static sonde_clock_info g_clock;
static pthread_once_t g_clock_once = PTHREAD_ONCE_INIT;

uint64_t sonde__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sonde__real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sonde__now_slow(void) { return sonde__mono_ns(); }

static int tsc_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

static void calibrate(void)
{
    g_clock.use_tsc = 0;
    g_clock.ticks_per_s = 1e9;
#if defined(__x86_64__) || defined(__i386__)
    if (!tsc_invariant())
        return;
    /* Measure the rate over ~2 ms; the reader refines it with the file's anchors. */
    uint64_t m0 = sonde__mono_ns(), t0 = __rdtsc(), m1, t1;
    do {
        m1 = sonde__mono_ns();
        t1 = __rdtsc();
    } while (m1 - m0 < 2000000u);
    if (t1 <= t0)
        return;
    g_clock.ticks_per_s = (double)(t1 - t0) * 1e9 / (double)(m1 - m0);
    g_clock.use_tsc = 1;
#endif
}

const sonde_clock_info *sonde__clock(void)
{
    pthread_once(&g_clock_once, calibrate);
    return &g_clock;
}

void sonde__clock_pair(uint64_t *tick, uint64_t *mono)
{
    /* Each reading is the monotonic clock between two tick reads; the tightest of up to eight
     * is kept (a reading spans a preemption now and then, and an anchor taken across one made
     * a short run's every duration too short). */
    uint64_t best = UINT64_MAX;
    *tick = sonde__ticks();
    *mono = sonde__mono_ns();
    for (int i = 0; i < 8 && best > 2000; i++) {
        uint64_t t0 = sonde__ticks(), m = sonde__mono_ns(), t1 = sonde__ticks();
        if (t1 >= t0 && t1 - t0 < best) {
            best = t1 - t0;
            *tick = t0 + (t1 - t0) / 2;
            *mono = m;
        }
    }
}

uint64_t sonde__ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (g_clock.use_tsc)
        return __rdtsc();
#endif
    return sonde__mono_ns();
}

void sonde__boot_id(char *out, size_t cap)
{
    out[0] = 0;
    const char *e = sonde__getenv("SONDE_BOOT_ID");
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return;
    }
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1); /* no stdio: a forked child's file head is made here */
    close(fd);
    out[n > 0 ? n : 0] = 0;
    out[strcspn(out, "\n")] = 0;
}
