/* marks.c - one rank of a job whose true timeline is known, for `sonde merge`'s alignment (the
 * e2e case `ranks`). Usage: marks RANK WORLD DIR T0_MONO_NS LATE_SYNC_US
 *
 * Records run "marks" (DIR/marks-rankRANK.sonde) with five sonde_sync instants (T0 + 20 ms * k,
 * k = 0..4) and five "mark" events (T0 + 100 ms * k, k = 2..6). Every rank takes each at the same
 * CLOCK_MONOTONIC instant, spinning until then: the true common moments a merge should line up
 * (five syncs, so that one taken late by a preemption shows as their disagreement, which the
 * merge states, rather than as a bias it cannot see); for each sync and each mark it prints
 * the monotonic times just before and just after it ("sync BEFORE AFTER", "mark BEFORE AFTER"
 * in ns, a line each): its own time lies between (a loaded machine may take a rank's sync late
 * whatever LATE_SYNC_US says: what the merge should state is what these times say).
 * LATE_SYNC_US delays this rank's first sync by that much, as a rank that leaves a barrier late
 * would. Exit 0, or 1 with a message. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sonde/sonde.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_until(uint64_t t)
{
    while (mono_ns() < t)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: marks RANK WORLD DIR T0_MONO_NS LATE_SYNC_US\n");
        return 1;
    }
    sonde_config cfg = sonde_config_default();
    if (sonde_config_set(&cfg, "rank", argv[1]) || sonde_config_set(&cfg, "world_size", argv[2]) ||
        sonde_config_set(&cfg, "output_dir", argv[3]) ||
        sonde_config_set(&cfg, "name", "marks") || sonde_config_set(&cfg, "formats", "json") ||
        sonde_config_set(&cfg, "collect_cpu", "0") ||
        sonde_config_set(&cfg, "collect_memory", "0") ||
        sonde_config_set(&cfg, "collect_gpu", "0")) {
        fprintf(stderr, "marks: %s\n", sonde_last_error());
        return 1;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p) {
        fprintf(stderr, "marks: %s\n", sonde_last_error());
        return 1;
    }
    uint64_t t0 = strtoull(argv[4], NULL, 10), late = strtoull(argv[5], NULL, 10) * 1000;
    for (uint64_t k = 0; k < 5; k++) {
        spin_until(t0 + 20000000ull * k + (k == 0 ? late : 0));
        uint64_t before = mono_ns();
        sonde_sync(p);
        uint64_t after = mono_ns();
        printf("sync %llu %llu\n", (unsigned long long)before, (unsigned long long)after);
    }
    for (int k = 2; k < 7; k++) {
        spin_until(t0 + 100000000ull * (uint64_t)k);
        uint64_t before = mono_ns();
        int rc = sonde_event(p, "mark");
        uint64_t after = mono_ns();
        if (rc != 0) {
            fprintf(stderr, "marks: %s\n", sonde_last_error());
            return 1;
        }
        printf("mark %llu %llu\n", (unsigned long long)before, (unsigned long long)after);
    }
    return sonde_destroy(p) == 0 ? 0 : 1;
}
