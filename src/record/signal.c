/* signal.c - the registry of live profilers, the flush on fatal signals, SIGTERM and SIGINT,
 * and the flush at normal exit. After flushing, the host's own handler runs; where the host had
 * the default disposition it is restored and the signal raised again, so the process ends
 * exactly as it would have without sonde. A host handler for SIGTERM or SIGINT installed after
 * sonde's (a PyTorch DataLoader worker's, which calls _exit) finds sonde's put in front of it
 * again at the writer's next pass (sonde__signals_guard). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record.h"
#include "../util/sig.h"

#define REGISTRY_SLOTS 64
pthread_mutex_t sonde__registry_lock = PTHREAD_MUTEX_INITIALIZER;
sonde_profiler *_Atomic sonde__registry[REGISTRY_SLOTS];

void sonde__finalize_at_exit(sonde_profiler *p);

static const int g_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT};
#define NSIG_HANDLED (int)(sizeof g_signals / sizeof g_signals[0])
/* The host's action each signal chains to: two copies, so that the guard writes one while a
 * handler may be reading the other, and makes it the one read (g_old_at) once it is whole. */
static struct sigaction g_old[2][NSIG_HANDLED];
static _Atomic int g_old_at[NSIG_HANDLED];
static _Atomic int g_installed;
static pthread_mutex_t g_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_atexit;
static int g_atfork;
static _Atomic int g_flusher; /* the thread flushing in a handler now, 0: none */
static _Atomic int g_finishing; /* runs being finished (profiler.c's finalize) now */
static _Thread_local int g_finishing_here;

void sonde__finishing(int on)
{
    atomic_fetch_add(&g_finishing, on ? 1 : -1);
    g_finishing_here += on ? 1 : -1;
}

void sonde__finishing_forked(void)
{
    /* runs being finished on the parent's other threads are not the child's to wait for */
    atomic_store(&g_finishing, g_finishing_here);
}

/* Whether action a is a handler of the host's own (not an ignore, not the default). */
static int host_handler(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != NULL
                                      : a->sa_handler != SIG_IGN && a->sa_handler != SIG_DFL;
}

/* Before a signal's default action ends the process: a run being finished on another thread
 * (its reports being written) is waited for, at most 30 s, so that the process ends with it
 * written, as a SIGTERM on that thread does (blocked there until it is done). */
static void wait_for_finishing(void)
{
    for (int i = 0; i < 30000 && !g_finishing_here && atomic_load(&g_finishing); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int sig_index(int sig)
{
    for (int i = 0; i < NSIG_HANDLED; i++)
        if (g_signals[i] == sig)
            return i;
    return -1;
}

static void flush_all(int sig)
{
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        if (p)
            sonde__signal_flush(p, sig);
    }
}

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    int idx = sig_index(sig);
    /* One flush at a time. A fault of the flushing thread itself goes straight on to the host's
     * action; another thread's (several threads crashing at once) waits for the flush to end
     * first, at most 30 s, or its default action would end the process in the middle of it. */
    int me = (int)syscall(SYS_gettid), expected = 0;
    if (atomic_compare_exchange_strong(&g_flusher, &expected, me)) {
        flush_all(sig);
        atomic_store(&g_flusher, 0);
    } else if (expected != me) {
        for (int i = 0; i < 30000 && atomic_load(&g_flusher); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (idx < 0)
        return;
    struct sigaction *old = &g_old[atomic_load(&g_old_at[idx])][idx];
    if (host_handler(old) && (old->sa_flags & SA_RESETHAND)) {
        /* the kernel would have reset the action as it called the host's handler, once */
        sonde__sig_plain(sig, SIG_DFL);
    }
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (old->sa_handler == SIG_IGN) {
        return;
    } else if (old->sa_handler != SIG_DFL) {
        old->sa_handler(sig);
        return;
    }
    /* Default disposition: restore it and deliver again, so the exit status, the core dump and
     * the parent's view are what they would have been. */
    if (sig == SIGTERM || sig == SIGINT)
        wait_for_finishing();
    sonde__sig_plain(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
}

/* exit()'s status, for the flight recorder's "exit with a non-zero status" trigger: on_exit
 * hands it over where atexit does not. */
static _Atomic int g_exit_status = -1;

int sonde__exit_status(void) { return atomic_load(&g_exit_status); }

void sonde__finish_all(void)
{
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        if (p)
            sonde__finalize_at_exit(p);
    }
}

static void at_exit(int status, void *unused)
{
    (void)unused;
    atomic_store(&g_exit_status, status);
    sonde__finish_all();
}

/* Whether two actions run the same handler the same way. */
static int same_action(const struct sigaction *a, const struct sigaction *b)
{
    return a->sa_flags == b->sa_flags && ((a->sa_flags & SA_SIGINFO)
                                              ? a->sa_sigaction == b->sa_sigaction
                                              : a->sa_handler == b->sa_handler);
}

/* sonde's action in front of the host's action old: with the host's own restart behaviour,
 * mask and NODEFER, so that a system call the signal interrupts returns EINTR (or restarts)
 * exactly as it did: Python's SIGINT handler has no SA_RESTART, and Ctrl-C must still end an
 * os.read. */
static void ours_over(const struct sigaction *old, struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = on_signal;
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK | (old->sa_flags & (SA_RESTART | SA_NODEFER));
    if (host_handler(old))
        sa->sa_mask = old->sa_mask;
    else
        sigemptyset(&sa->sa_mask);
}

/* A signal the host ignores is left ignored: it interrupts nothing and ends nothing. */
static void install_handlers(void)
{
    for (int i = 0; i < NSIG_HANDLED; i++) {
        struct sigaction old, sa;
        if (sigaction(g_signals[i], NULL, &old) != 0)
            continue;
        g_old[0][i] = old;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            continue;
        ours_over(&old, &sa);
        sigaction(g_signals[i], &sa, &g_old[0][i]);
    }
}

void sonde__signals_guard(void)
{
    if (!atomic_load(&g_installed) || pthread_mutex_trylock(&g_guard_lock) != 0)
        return; /* another profiler's writer is at it */
    for (int i = 0; i < NSIG_HANDLED; i++) {
        if (g_signals[i] != SIGTERM && g_signals[i] != SIGINT)
            continue;
        struct sigaction cur, sa, prev;
        if (sigaction(g_signals[i], NULL, &cur) != 0 || !host_handler(&cur) ||
            ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal))
            continue; /* ours still, or the host ignores it now, or gave it its default */
        int next = 1 - atomic_load(&g_old_at[i]);
        g_old[next][i] = cur;
        atomic_store(&g_old_at[i], next);
        ours_over(&cur, &sa);
        if (sigaction(g_signals[i], &sa, &prev) == 0 && !same_action(&prev, &cur)) {
            next = 1 - next; /* changed again in between: chain to what was replaced */
            g_old[next][i] = prev;
            atomic_store(&g_old_at[i], next);
        }
    }
    pthread_mutex_unlock(&g_guard_lock);
}

/* The alternate stack this thread got from sonde (its mapping, guard page included), if any. */
static _Thread_local void *g_alt_base;
static _Thread_local size_t g_alt_len;

void sonde__altstack_ensure(void)
{
    if (g_alt_base)
        return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return; /* the host (or a sanitizer) gave the thread one: handlers run there */
    long pg = sysconf(_SC_PAGESIZE);
    size_t guard = pg > 0 ? (size_t)pg : 4096;
    size_t size = SONDE_ALT_STACK;
    long min = sysconf(_SC_SIGSTKSZ);
    if (min > 0 && (size_t)min > size)
        size = (size_t)min;
    size = (size + guard - 1) / guard * guard;
    void *base = mmap(NULL, guard + size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return; /* no flush after a stack overflow on this thread; everything else works */
    /* stacks grow down: running off the end of this one faults on the guard page instead of
     * writing over whatever lies below */
    if (mprotect(base, guard, PROT_NONE) != 0) {
        munmap(base, guard + size);
        return;
    }
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = (char *)base + guard;
    ss.ss_size = size;
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(base, guard + size);
        return;
    }
    g_alt_base = base;
    g_alt_len = guard + size;
}

void sonde__altstack_release(void)
{
    if (!g_alt_base)
        return;
    stack_t cur;
    /* only sonde's own, and never while running on it */
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_ONSTACK)) {
        if ((char *)cur.ss_sp >= (char *)g_alt_base &&
            (char *)cur.ss_sp < (char *)g_alt_base + g_alt_len) {
            stack_t off;
            memset(&off, 0, sizeof off);
            off.ss_flags = SS_DISABLE;
            sigaltstack(&off, NULL);
        } else if (!(cur.ss_flags & SS_DISABLE)) {
            return; /* the host replaced it: leave its stack, keep the mapping (it may point in) */
        }
        munmap(g_alt_base, g_alt_len);
    }
    g_alt_base = NULL;
    g_alt_len = 0;
}

int sonde__registry_add(sonde_profiler *p)
{
    int rc = -1;
    pthread_mutex_lock(&sonde__registry_lock);
    if (p->cfg.signal_handlers && !atomic_load(&g_installed)) {
        install_handlers();
        atomic_store(&g_installed, 1);
    }
    if (!g_atexit && on_exit(at_exit, NULL) == 0)
        g_atexit = 1;
    if (!g_atfork) {
        sonde__atfork_install();
        g_atfork = 1;
    }
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        if (!atomic_load(&sonde__registry[i])) {
            atomic_store(&sonde__registry[i], p);
            p->registry_slot = i;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&sonde__registry_lock);
    return rc;
}

void sonde__registry_remove(sonde_profiler *p)
{
    pthread_mutex_lock(&sonde__registry_lock);
    if (p->registry_slot >= 0)
        atomic_store(&sonde__registry[p->registry_slot], NULL);
    p->registry_slot = -1;
    pthread_mutex_unlock(&sonde__registry_lock);
}
