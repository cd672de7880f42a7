/* ondemand.c - the control signal and recording on demand.
 *
 * The control signal (trigger_signal, SIGUSR2 unless configured otherwise) is installed for
 * each flight recorder or on_demand profiler of the process (up to 16 share it; the program's
 * own handler is put back when the last one ends, after its exit dumps). `sonde trigger PID`
 * sends it with a command in sigqueue's value (SONDE_CTL_*: a dump, `--start [--for S]`,
 * `--stop`); a plain signal (`kill -USR2`) asks for a dump too, unless the program had a handler
 * of its own for the signal before sonde: then that handler gets every signal sonde did not
 * send. The handler only stores what came and wakes the writer threads, which do the rest.
 *
 * on_demand: the profiler records nothing and writes nothing (each section costs the one branch
 * of a disabled profiler) until a start command; then it records everything into a run of its
 * own, NAME-ondemandN.sonde, until a stop command or the start's duration, and writes that
 * run's reports; the next start begins NAME-ondemandN+1. Section ends that come between windows
 * (of sections begun in one) are discarded at the next start. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "record.h"

#define MAX_USERS 16                       /* profilers of one process on its control signal */
static sonde_profiler *_Atomic g_users[MAX_USERS]; /* NULL: a free slot */
static int g_installed;                    /* the signal whose handler is ours, 0: none */
static struct sigaction g_old;             /* the program's before ours, put back at the end */
static int g_chain;                        /* g_old is a handler of the program's */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* Puts cmd in p's ring of commands, in the order they came (handlers on several threads may
 * race for a slot: each takes its own); one more than the ring holds is dropped. */
static void ctl_put(sonde_profiler *p, int cmd)
{
    for (;;) {
        unsigned h = atomic_load(&p->ctl_head);
        if (atomic_load(&p->ctl_q[h % 8]))
            return; /* eight not taken yet */
        if (atomic_compare_exchange_weak(&p->ctl_head, &h, h + 1)) {
            atomic_store(&p->ctl_q[h % 8], cmd);
            return;
        }
    }
}

/* What a control signal asks of p: cmd from sigqueue's value (0: a plain signal, a dump). */
static void deliver(sonde_profiler *p, int cmd)
{
    if (cmd && (cmd & 3) != SONDE_CTL_TRIGGER) {
        if (p->ondemand)
            ctl_put(p, cmd);
        else
            atomic_store(&p->ctl_ignored, cmd & 3);
    } else if (p->flight) {
        sonde__flight_signal(p);
    } else {
        atomic_store(&p->ctl_ignored, SONDE_CTL_TRIGGER);
    }
    sem_post(&p->wake);
}

/* The control signal, for every profiler of the process that listens on it. One sonde did not
 * send (not sigqueue'd with a SONDE_CTL_* command: `kill`, the program's own raise) goes to the
 * program's handler when it had one before sonde's, and to sonde only when it had none. */
static void on_control_signal(int sig, siginfo_t *info, void *uctx)
{
    int cmd = info && info->si_code == SI_QUEUE ? info->si_value.sival_int : 0;
    if (!(cmd & 3) && g_chain) {
        if (g_old.sa_flags & SA_SIGINFO)
            g_old.sa_sigaction(sig, info, uctx);
        else
            g_old.sa_handler(sig);
        return;
    }
    for (int i = 0; i < MAX_USERS; i++) {
        sonde_profiler *p = atomic_load(&g_users[i]);
        if (p)
            deliver(p, cmd);
    }
}

void sonde__control_install(sonde_profiler *p)
{
    int sig = p->cfg.trigger_signal;
    if (sig <= 0 || sig >= NSIG)
        return; /* 0: none (the configuration refuses the signals that cannot be triggers) */
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < MAX_USERS && slot < 0; i++)
        if (!atomic_load(&g_users[i]))
            slot = i;
    if (slot < 0) {
        pthread_mutex_unlock(&g_lock);
        sonde__warn(p, "trigger_signal %d: %d profilers of this process listen on it already; "
                       "this one has no signal trigger", sig, MAX_USERS);
        return;
    }
    if (g_installed && g_installed != sig)
        sonde__warn(p, "trigger_signal %d: this process's control signal is %d already (another "
                       "profiler's); this profiler listens on that one", sig, g_installed);
    if (!g_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_control_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, NULL, &g_old) != 0 || sigaction(sig, &sa, NULL) != 0) {
            pthread_mutex_unlock(&g_lock);
            sonde__warn(p, "trigger_signal %d: %m", sig);
            return;
        }
        g_installed = sig;
        g_chain = (g_old.sa_flags & SA_SIGINFO) ? g_old.sa_sigaction != NULL
                                                : g_old.sa_handler != SIG_DFL &&
                                                      g_old.sa_handler != SIG_IGN;
        if (g_chain)
            sonde__warn(p, "trigger_signal %d (%s) had a handler of the program's: sonde "
                           "passes it every such signal but those `sonde trigger` sends",
                        sig, strsignal(sig));
    }
    atomic_store(&g_users[slot], p);
    pthread_mutex_unlock(&g_lock);
}

void sonde__control_lock_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
}

void sonde__control_release(sonde_profiler *p)
{
    pthread_mutex_lock(&g_lock);
    int left = 0;
    for (int i = 0; i < MAX_USERS; i++) {
        sonde_profiler *expected = p;
        atomic_compare_exchange_strong(&g_users[i], &expected, NULL);
        left += atomic_load(&g_users[i]) != NULL;
    }
    if (!left && g_installed) { /* the last one: the program's handler back */
        sigaction(g_installed, &g_old, NULL);
        g_installed = 0;
        g_chain = 0;
    }
    pthread_mutex_unlock(&g_lock);
}

/* Starts window od_window + 1: its file, the sampler, recording. */
static void window_start(sonde_profiler *p, unsigned tenths)
{
    char *name = NULL;
    if (sonde__asprintf(&name, "%s-ondemand%d", p->od_base, p->od_window + 1) < 0 || !name) {
        sonde__warn(p, "recording on demand: out of memory");
        return;
    }
    p->od_window++;
    sonde__free(p->name);
    p->name = name;
    p->cfg.name = name;
    pthread_mutex_lock(&p->step_lock); /* a schedule's window open now reads the new file whole */
    p->window_from = 0;
    pthread_mutex_unlock(&p->step_lock);
    sonde__wlock(p);
    sonde__writer_discard(p); /* what came between windows: the ends of sections begun before */
    sonde__free(p->path);
    p->path = NULL;
    int rc = sonde__writer_open(p);
    sonde__wunlock(p);
    if (rc) {
        fprintf(stderr, "sonde: recording on demand could not start: %s\n", sonde_last_error());
        return;
    }
    p->od_until_ns = tenths ? sonde__mono_ns() + (uint64_t)tenths * 100000000u : 0;
    if (sonde__sampler_start(p) != 0)
        sonde__warn(p, "could not start the sampler thread: no CPU, memory or GPU samples");
    __atomic_store_n(&p->hot.recording, 1, __ATOMIC_RELAXED);
    if (tenths)
        fprintf(stderr, "sonde: recording on demand for %.1f s into %s\n", tenths / 10.0, p->path);
    else
        fprintf(stderr, "sonde: recording on demand into %s until `sonde trigger %d --stop`\n",
                p->path, (int)getpid());
}

/* Ends the open window: recording off, the file closed, its reports written. */
static int window_stop(sonde_profiler *p)
{
    __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
    sonde__sampler_stop(p);
    int rc = sonde__writer_close(p) ? SONDE_EIO : 0;
    p->od_until_ns = 0;
    if (p->reports && (p->cfg.formats || p->cfg.print_summary)) {
        int wr = p->reports->write_reports(p, NULL);
        if (wr && !rc)
            rc = wr;
    }
    fprintf(stderr, "sonde: recording on demand stopped: %s%s\n", p->path ? p->path : "?",
            rc ? " (its reports were not all written: sonde export writes them)"
               : " and its reports are written");
    return rc;
}

void sonde__ondemand_poll(sonde_profiler *p)
{
    int ignored = atomic_exchange(&p->ctl_ignored, 0);
    if (ignored == SONDE_CTL_TRIGGER)
        fprintf(stderr, "sonde: a trigger signal came, but run %s has no flight recorder "
                        "(flight_recorder_s); with on_demand, `sonde trigger %d --start` records; "
                        "ignored\n", p->ondemand ? p->od_base : p->name, (int)getpid());
    else if (ignored)
        fprintf(stderr, "sonde: `sonde trigger %d %s` needs on_demand; run %s records with the "
                        "flight recorder (a plain `sonde trigger %d` writes its window); "
                        "ignored\n", (int)getpid(), ignored == SONDE_CTL_STOP ? "--stop" : "--start",
                p->name, (int)getpid());
    if (!p->ondemand)
        return;
    /* every command in the order it came: a start and a stop sent while the last window's
     * reports were being written make a window of their own, not a lost start */
    int cmd;
    while ((cmd = atomic_exchange(&p->ctl_q[p->ctl_tail % 8], 0)) != 0) {
        p->ctl_tail++;
        int open = p->fd >= 0;
        if ((cmd & 3) == SONDE_CTL_START) {
            unsigned tenths = (unsigned)cmd >> 2;
            if (open) /* already recording: the new duration counts from now */
                p->od_until_ns = tenths ? sonde__mono_ns() + (uint64_t)tenths * 100000000u : 0;
            else
                window_start(p, tenths);
        } else if ((cmd & 3) == SONDE_CTL_STOP && open) {
            window_stop(p);
        }
    }
    if (p->fd >= 0 && p->od_until_ns && sonde__mono_ns() >= p->od_until_ns)
        window_stop(p);
}

int sonde__ondemand_finish(sonde_profiler *p)
{
    int rc = p->fd >= 0 ? window_stop(p) : 0;
    sonde__control_release(p); /* after the reports: a signal until then is taken, not fatal */
    return rc;
}
