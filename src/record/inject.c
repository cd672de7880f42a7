/* inject.c - `sonde run --sample-in-thread`: the program's CPU samples taken in its own threads.
 * sonde run preloads libsonde.so into the program (LD_PRELOAD) with SONDE_RUN_SAMPLE_HZ set; when
 * the library is loaded, this starts a profiler of its own that samples every thread of the
 * process in that thread (sample_in_thread: a CPU-clock counter per thread whose overflows send
 * it SIGPROF, Python frames read in the handler) and joins the run as RUN.pidN.samples.sonde,
 * which sonde run merges when the program ends (sm_merge builds the CPU profiles as one): at its
 * exit, at _exit() and on SIGTERM; a forked child goes on as RUN.pidN.samples-pidM. No sampler
 * thread is woken a sample, which is what sampling from outside costs (docs/stacks.md). Under
 * sonde run's default for a Python program (SONDE_RUN_SAMPLE_PYTHON_ONLY=1) only the CPython
 * processes start one; sonde run samples the rest of the tree from outside.
 * Built into libsonde.so only: a program that links libsonde statically never runs it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "record.h"
#include "../util/sig.h"
#include "../util/env.h"

static sonde_profiler *_Atomic g_injected;
static pid_t g_pid; /* the process whose profiler g_injected is (a forked child's, after it) */
static pthread_mutex_t g_end_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t g_term;           /* posted by on_term: term_waiter writes the samples */
static atomic_int g_term_taken;
static int g_term_caught;      /* on_term is SIGTERM's handler */
static pid_t g_waiter_pid;     /* the process term_waiter runs in (0: none) */
static _Atomic pid_t g_end_tid; /* the thread in injected_end's writing (0: none) */
static int g_forked;           /* this process is a forked child going on with the profiler */

/* A profiling timer of the program's (setitimer(ITIMER_PROF)) still running as it exits, with
 * SIGPROF at its default again (Python's finalization restores it): the CPU the samples' writing
 * takes would let that timer end the process by SIGPROF, which it would not have met without
 * us. SIGPROF is ignored for the rest of the exit then. */
static void spare_exit_from_itimer(void)
{
    struct sigaction cur;
    struct itimerval it;
    if (sigaction(SIGPROF, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != SIG_DFL || getitimer(ITIMER_PROF, &it) != 0 ||
        (!it.it_value.tv_sec && !it.it_value.tv_usec))
        return;
    sonde__sig_plain(SIGPROF, SIG_IGN);
}

/* The samples written, for sonde run to merge: at exit, at _exit, or on SIGTERM, whichever comes
 * first; the others wait until it is done (the process must not end while it writes). */
static void injected_end(void)
{
    spare_exit_from_itimer();
    pthread_mutex_lock(&g_end_lock);
    atomic_store(&g_end_tid, (pid_t)syscall(SYS_gettid));
    sonde_profiler *p = atomic_exchange(&g_injected, NULL);
    if (p)
        sonde_destroy(p);
    atomic_store(&g_end_tid, 0);
    pthread_mutex_unlock(&g_end_lock);
}

/* Before the process ends without its atexit handlers (_exit) or replaces its image (exec): the
 * samples written, or, where another thread is writing them (term_waiter on a SIGTERM that came
 * a moment before, as a pool's worker is sent one while it leaves by os._exit), waited for: ending
 * then would cut the file short (no END record, the samples' stacks lost). Not in the thread that
 * is writing them (a signal handler of the program's calling _exit meanwhile), which would wait
 * for itself: it ends the process as it asks. Only in the process the profiler is (g_pid): a
 * vforked child shares this memory and must touch nothing. */
static void end_before_leaving(void)
{
    if (getpid() != g_pid || atomic_load(&g_end_tid) == (pid_t)syscall(SYS_gettid))
        return;
    injected_end();
}

/* SIGTERM where the program left it at its default (ending the process): the samples are named
 * and written first, which a signal handler cannot do, so the handler wakes term_waiter, which
 * writes them, restores the default and sends SIGTERM again: the process ends by it, as it would
 * have, a few milliseconds later. A forked child (no waiter of its own) or a second SIGTERM
 * takes the default at once. */
static void on_term(int sig)
{
    if (getpid() == g_waiter_pid && !atomic_exchange(&g_term_taken, 1)) {
        sem_post(&g_term);
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void *term_waiter(void *arg)
{
    (void)arg;
    while (sem_wait(&g_term) != 0 && errno == EINTR) {
    }
    injected_end();
    signal(SIGTERM, SIG_DFL);
    kill(getpid(), SIGTERM);
    return NULL;
}

/* term_waiter started in this process (all signals blocked in it): 0, or -1. */
static int start_waiter(void)
{
    if (sem_init(&g_term, 0, 0) != 0)
        return -1;
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    pthread_t t;
    int ok = pthread_create(&t, NULL, term_waiter, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (!ok)
        return -1;
    pthread_detach(t);
    g_waiter_pid = getpid();
    return 0;
}

/* on_term in place of SIGTERM's default action, with its waiter. */
static void catch_term(void)
{
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL || start_waiter() != 0)
        return; /* the program's own disposition: left to it */
    g_term_caught = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
}

/* A forked child (a DataLoader's or a pool's worker with the fork start method) goes on with the
 * profiler's copy, which fork.c started over as RUN.pidN.samples-pidM; it records nothing until
 * an event comes, so one does ("fork", an instant): the child's writer starts, and its first
 * pass, 5 ms later, begins its file and its own samples taken in its threads (sonde__child_open;
 * a fork that execs sooner leaves no file: before_exec). Its exit, _exit and SIGTERM write them,
 * as the parent's do (its own waiter). Runs after fork.c's handler: registered after it. */
static void injected_child(void)
{
    sonde_profiler *p = atomic_load(&g_injected);
    pthread_mutex_init(&g_end_lock, NULL); /* a parent thread may have held it at the fork */
    atomic_store(&g_end_tid, 0);
    if (!p)
        return;
    g_pid = getpid();
    g_forked = 1;
    atomic_store(&g_term_taken, 0);
    if (g_term_caught)
        start_waiter(); /* else (no thread) SIGTERM takes its default in the child at once */
    sonde_event(p, "fork");
}

__attribute__((constructor)) static void injected_start(void)
{
    const char *hz = sonde__getenv("SONDE_RUN_SAMPLE_HZ"), *dir = sonde__getenv("SONDE_RUN_DIR");
    const char *name = sonde__getenv("SONDE_RUN_NAME");
    const char *py_only = sonde__getenv("SONDE_RUN_SAMPLE_PYTHON_ONLY");
    if (!hz || !*hz || !dir || !*dir || !name || !*name)
        return; /* not under `sonde run` taking samples in the threads */
    /* sonde run's way with a Python program: the CPython processes of the tree (3.11 and later,
     * whose frames are read: Py_Version is theirs) sample themselves; every other process (a
     * shell, a pyenv shim, a tool the program runs) is left to sonde run's sampling from
     * outside, and costs nothing more here */
    if (py_only && *py_only == '1' && !dlsym(RTLD_DEFAULT, "Py_Version"))
        return;
    char *end = NULL;
    unsigned long v = strtoul(hz, &end, 10);
    if (*end || v < 1 || v > 10000) {
        fprintf(stderr, "sonde run: SONDE_RUN_SAMPLE_HZ=%s: expected 1 to 10000; this process's "
                        "CPU samples are not taken\n", hz);
        return;
    }
    sonde_config c = sonde_config_default();
    if (sonde_config_from_env(&c) != 0) {
        fprintf(stderr, "sonde run: %s; this process's CPU samples are not taken\n",
                sonde_last_error());
        return;
    }
    c.enabled = 1;
    c.sample_hz = (int)v;
    c.sample_in_thread = 1;
    c.signal_handlers = 0; /* the program's own: sonde run watches how it ends */
    c.flight_recorder_s = 0;
    sonde_profiler *p = sonde__create_watching(&c, 0, ".samples", NULL); /* the run reports */
    if (!p) {
        fprintf(stderr, "sonde run: %s; this process's CPU samples are not taken\n",
                sonde_last_error());
        return;
    }
    atomic_store(&g_injected, p);
    g_pid = getpid();
    if (atexit(injected_end) != 0) { /* no way to write them: none taken */
        atomic_store(&g_injected, NULL);
        sonde_destroy(p);
        return;
    }
    catch_term();
    pthread_atfork(NULL, NULL, injected_child);
}

/* _exit() (Python's os._exit, which multiprocessing's workers and many servers end with) skips
 * the atexit handlers: the samples are written first (or their writing under way waited for:
 * end_before_leaving), in the process that started the profiler (a forked or vforked child's
 * _exit writes nothing and costs a getpid). This definition comes
 * before libc's for every caller through the PLT: libsonde.so is preloaded first; a program
 * linking libsonde.so without `sonde run` has no profiler here and exits as libc's would. */
__attribute__((noreturn)) void _exit(int status)
{
    end_before_leaving();
    for (;;)
        syscall(SYS_exit_group, status);
}

__attribute__((noreturn)) void _Exit(int status)
{
    _exit(status);
}

/* The exec functions: the image exec replaces ends without its atexit handlers, so the samples
 * are written first (and the file ends cleanly) in the process owning the profiler; a forked
 * child that has not opened its file yet (a fork that execs at once: a shell's, a pyenv shim's)
 * leaves none, and holds its writer's lock through the exec, so that the writer's first pass
 * does not begin the file that the exec would cut short. The new image has libsonde.so preloaded
 * again and starts its own. Returns the profiler whose lock it holds (for exec_done), else
 * NULL. */
static sonde_profiler *before_exec(void)
{
    sonde_profiler *p = atomic_load(&g_injected);
    if (p && g_forked && getpid() == g_pid) {
        sonde__wlock(p);
        if (!sonde_file_path(p)) {
            atomic_store(&g_injected, NULL); /* nothing of it is written: exec ends its threads */
            return p;
        }
        sonde__wunlock(p);
    }
    end_before_leaving();
    return NULL;
}

/* After libc's exec function returned rc (it failed): a forked child whose file was not begun
 * goes on recording as before; a process whose samples were written goes on unprofiled. */
static int exec_done(sonde_profiler *held, int rc)
{
    if (held) {
        int e = errno;
        atomic_store(&g_injected, held);
        sonde__wunlock(held);
        errno = e;
    }
    return rc;
}

/* libc's exec functions, found once as the library is loaded (resolve_exec): a vforked child
 * must not look them up (dlsym takes the loader's lock and may allocate). */
typedef int (*exec_fn)(const char *, char *const[], char *const[]);
static exec_fn g_execve, g_execvpe;
static int (*g_fexecve)(int, char *const[], char *const[]);

__attribute__((constructor)) static void resolve_exec(void)
{
    g_execve = (exec_fn)dlsym(RTLD_NEXT, "execve");
    g_execvpe = (exec_fn)dlsym(RTLD_NEXT, "execvpe");
    g_fexecve = (int (*)(int, char *const[], char *const[]))dlsym(RTLD_NEXT, "fexecve");
}

/* One of them not found: -1, errno ENOSYS. */
static int no_exec(void)
{
    errno = ENOSYS;
    return -1;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    if (!g_execve)
        return no_exec();
    sonde_profiler *held = before_exec();
    return exec_done(held, g_execve(path, argv, envp));
}

int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (!g_execvpe)
        return no_exec();
    sonde_profiler *held = before_exec();
    return exec_done(held, g_execvpe(file, argv, envp));
}

int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
    if (!g_fexecve)
        return no_exec();
    sonde_profiler *held = before_exec();
    return exec_done(held, g_fexecve(fd, argv, envp));
}

/* execl, execle, execlp: their arguments as an argv (glibc's call its execve within libc,
 * where this library's is not seen). */
#define LIST_ARGV(first, ap, argv, envp_out)                                                       \
    size_t n_ = 1; /* first: never NULL (libc's declarations say so) */                            \
    va_start(ap, first);                                                                           \
    while (va_arg(ap, char *))                                                                     \
        n_++;                                                                                      \
    va_end(ap);                                                                                    \
    char *argv[n_ + 1];                                                                            \
    va_start(ap, first);                                                                           \
    argv[0] = (char *)(first);                                                                     \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                            \
        argv[i_] = va_arg(ap, char *);                                                             \
    envp_out;                                                                                      \
    va_end(ap)

int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    LIST_ARGV(arg, ap, argv, (void)0);
    return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    LIST_ARGV(arg, ap, argv, (void)0);
    return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    LIST_ARGV(arg, ap, argv, envp = va_arg(ap, char *const *));
    return execve(path, argv, envp);
}
