/* ondemand.c - the control signal and recording on demand.
 *
 * The control signal (trigger_signal, SIGUSR2 unless configured otherwise) is installed for a
 * flight recorder or an on_demand profiler. A plain signal (kill, `sonde trigger PID`) asks the
 * flight recorder for a dump; a signal sent with sigqueue carries a command in its value
 * (SONDE_CTL_*: `sonde trigger PID --start [--for S]`, `--stop`). The handler only stores what
 * came and wakes the writer thread, which does the rest outside the handler.
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

static sonde_profiler *_Atomic g_owner; /* the profiler the signal is for */
static int g_installed;                 /* the signal whose handler is ours, 0: none */
static struct sigaction g_old;
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

static void on_control_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)uctx;
    sonde_profiler *p = atomic_load(&g_owner);
    if (!p)
        return;
    int cmd = info && info->si_code == SI_QUEUE ? info->si_value.sival_int : 0;
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

void sonde__control_install(sonde_profiler *p)
{
    int sig = p->cfg.trigger_signal;
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP) {
        if (sig)
            sonde__warn(p, "trigger_signal %d is not a signal that can be caught: no signal "
                           "trigger", sig);
        return;
    }
    pthread_mutex_lock(&g_lock);
    atomic_store(&g_owner, p);
    if (g_installed && g_installed != sig) { /* another profiler's signal: given back */
        sigaction(g_installed, &g_old, NULL);
        g_installed = 0;
    }
    if (!g_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_control_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, &g_old) == 0)
            g_installed = sig;
        else
            sonde__warn(p, "trigger_signal %d: %m", sig);
    }
    pthread_mutex_unlock(&g_lock);
}

void sonde__control_release(sonde_profiler *p)
{
    pthread_mutex_lock(&g_lock);
    sonde_profiler *expected = p;
    if (atomic_compare_exchange_strong(&g_owner, &expected, NULL) && g_installed) {
        sigaction(g_installed, &g_old, NULL);
        g_installed = 0;
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
    if (p->cfg.formats || p->cfg.print_summary) {
        int wr = sonde__write_reports(p, NULL);
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
    sonde__control_release(p);
    return p->fd >= 0 ? window_stop(p) : 0;
}
