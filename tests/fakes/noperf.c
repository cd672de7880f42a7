/* noperf.c - LD_PRELOAD'ed into tests/e2e/hotsections.c, it makes perf_event_open fail with
 * EACCES, as a kernel whose perf_event_paranoid forbids it does: the test of what sonde says and
 * does then. The only other syscall() that program makes is gettid (libsonde's thread ids),
 * answered here; any other fails with ENOSYS, since its arguments cannot be forwarded without
 * knowing how many there are (reading more than the caller passed is undefined, and ASan says
 * so). */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long n, ...)
{
    if (n == SYS_gettid)
        return gettid();
    errno = n == SYS_perf_event_open ? EACCES : ENOSYS;
    return -1;
}
