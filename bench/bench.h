/* bench.h - what the benchmarks share: a monotonic clock in seconds, the floor of a report
 * pass, and a free TCP port on loopback. */
#ifndef SONDE_BENCH_H
#define SONDE_BENCH_H

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

/* A TCP port no one listens on at 127.0.0.1 now (the kernel's pick), or 0. */
static inline unsigned bench_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

#endif
