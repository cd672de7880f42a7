/* noperf.c - LD_PRELOAD'ed into tests/e2e/hotsections.c, it makes perf_event_open fail with
 * EACCES, as a kernel whose perf_event_paranoid forbids it does: the test of what sonde says and
 * does then (it samples through timers on the threads' CPU clocks). With NOPERF_TIMERS set,
 * timer_create fails too (EPERM), as a seccomp profile could make it. The only other syscall() that program makes is gettid (libsonde's thread ids),
 * answered here; any other fails with ENOSYS, since its arguments cannot be forwarded without
 * knowing how many there are (reading more than the caller passed is undefined, and ASan says
 * so). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int timer_create(clockid_t clock, struct sigevent *ev, timer_t *id)
{
    if (getenv("NOPERF_TIMERS")) {
        errno = EPERM;
        return -1;
    }
    int (*real)(clockid_t, struct sigevent *, timer_t *) =
        (int (*)(clockid_t, struct sigevent *, timer_t *))dlsym(RTLD_NEXT, "timer_create");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(clock, ev, id);
}

long syscall(long n, ...)
{
    if (n == SYS_gettid)
        return gettid();
    errno = n == SYS_perf_event_open ? EACCES : ENOSYS;
    return -1;
}
