/* bench.h - what the benchmarks share: a monotonic clock in seconds, and the floor of a report
 * pass. */
#ifndef SONDE_BENCH_H
#define SONDE_BENCH_H

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The seconds it takes to read a file's bytes into a buffer and drop them (from the page cache,
 * as a reader's own read is): the least a pass over a .sonde file costs. -1 when the file cannot
 * be opened. */
static inline double bench_read_s(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    static char buf[1 << 20];
    double t0 = bench_now_s();
    while (read(fd, buf, sizeof buf) > 0) {
    }
    double s = bench_now_s() - t0;
    close(fd);
    return s;
}

#endif
