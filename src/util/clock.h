/* clock.h - the timestamp source: the TSC where it is invariant, else CLOCK_MONOTONIC, and the
 * monotonic and real-time clocks in ns. Ticks are never converted on the hot path; the file
 * stores anchors (tick, monotonic ns, realtime ns) and the reader converts with them. */
#ifndef SONDE_UTIL_CLOCK_H
#define SONDE_UTIL_CLOCK_H

#include <stddef.h>
#include <stdint.h>

typedef struct sonde_clock_info {
    int use_tsc;          /* 1: ticks are rdtsc, else CLOCK_MONOTONIC ns */
    double ticks_per_s;   /* nominal rate measured at start-up */
} sonde_clock_info;
/* Calibrates once per process (about 2 ms the first time); thread-safe. */
const sonde_clock_info *sonde__clock(void);
uint64_t sonde__ticks(void);                 /* the profiler's timestamp source */
uint64_t sonde__mono_ns(void);               /* CLOCK_MONOTONIC in ns; async-signal-safe */
uint64_t sonde__real_ns(void);               /* CLOCK_REALTIME in ns; async-signal-safe */
/* A tick and the monotonic clock at the same instant, as close as the machine allows (the
 * file's clock anchors); async-signal-safe. */
void sonde__clock_pair(uint64_t *tick, uint64_t *mono);
/* The boot this process runs in, whose CLOCK_MONOTONIC every process of it shares (and no
 * other): /proc/sys/kernel/random/boot_id, or $SONDE_BOOT_ID where set (a test's stand-in for
 * another machine). Writes "" where neither says. out: at least 64 bytes. */
void sonde__boot_id(char *out, size_t cap);


#endif
