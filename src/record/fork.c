/* fork.c - a profiled process that forks. The child inherits a copy of every live profiler but
 * none of its threads, so at fork() sonde holds its own locks (no child starts with one locked by
 * a thread it does not have), and in the child each recording profiler starts over as
 * NAME-pidN: the parent's unwritten events are left to the parent, the writer thread is started
 * again, and the file is created once the child records its first event (a fork that is
 * followed by exec leaves no file behind). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record.h"
#include "../config/keys.h"
#include "../monitor/monitor.h"
#include "../stacks/stacks.h"
#include "../util/alloc.h"

#define REGISTRY_SLOTS 64
extern pthread_mutex_t sonde__registry_lock;
extern sonde_profiler *_Atomic sonde__registry[];

static void lock_all(void)
{
    pthread_mutex_lock(&sonde__registry_lock);
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        if (!p)
            continue;
        /* the order every other path takes them in: step, writer pass, profiler */
        pthread_mutex_lock(&p->step_lock);
        sonde__wlock(p);
        pthread_mutex_lock(&p->lock);
    }
    sonde__sites_lock(1);
    /* the sources' own (leaves: taken last, given back first): the sampler's thread may be
     * loading NVML (issue 62: a DataLoader worker forked then hung at its exit in 5 runs of 70) */
    nvml_fork(1);
    cudart_fork(1);
    sonde__cupti_fork(1);
    sonde__env_fork(1);
    sonde__tombs_fork(1);
}

static void unlock_all(void)
{
    sonde__tombs_fork(0);
    sonde__env_fork(0);
    sonde__cupti_fork(0);
    cudart_fork(0);
    nvml_fork(0);
    sonde__sites_lock(0);
    for (int i = REGISTRY_SLOTS; i-- > 0;) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        if (!p)
            continue;
        pthread_mutex_unlock(&p->lock);
        sonde__wunlock(p);
        pthread_mutex_unlock(&p->step_lock);
    }
    pthread_mutex_unlock(&sonde__registry_lock);
}

/* The child's copy of p, before any of its threads runs sonde code again. */
static void start_over(sonde_profiler *p)
{
    sonde__clock_pair(&p->start_tick, &p->start_mono_ns); /* the child's run starts here */
    p->start_real_ns = sonde__real_ns();
    p->writer_started = 0;  /* the threads did not come across: nothing to join */
    p->child_sampler = p->sampler_started;
    p->sampler_started = 0; /* its state is freed by sonde__child_start */
    sonde__stacks_forget(p->stacks); /* the parent's: its thread did not come across */
    p->stacks = NULL;
    sem_destroy(&p->wake);
    sem_init(&p->wake, 0, 0);
    atomic_store(&p->stop, 0);
    close(p->fd); /* the parent's file stays the parent's */
    p->fd = -1;
    sonde__tally_off(p); /* the parent's count: the child's file has no SUMMARY */
    sonde__metrics_forget(p); /* the port is the parent's */

    /* Every chunk is free again: what the parent had not written yet, the parent writes. */
    atomic_store(&p->free_head, (uint64_t)SONDE_NO_CHUNK);
    for (uint32_t i = p->n_chunks; i-- > 0;) {
        atomic_store(&p->chunks[i].owner, NULL);
        sonde__chunk_push(p, i);
    }
    sonde__tbuf *mine = sonde__tl.serial == p->hot.serial ? sonde__tl.tb : NULL;
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        atomic_store(&tb->chunk, SONDE_NO_CHUNK);
        tb->hot.cur = tb->hot.end = NULL;
        tb->next_base = 0;
        tb->gap = 0;
        atomic_store(&tb->dropped, 0);
        if (&tb->hot == mine || &tb->shadow == mine) {
            /* The forking thread goes on in the child, its open sections too: their ends are
             * in the child's file and their begins in the parent's. */
            atomic_store(&tb->tid, (int)syscall(SYS_gettid));
            atomic_store(&tb->written_thread, 0);
        } else {
            atomic_store(&tb->state, TB_EXITED);
            atomic_store(&tb->tid, 0);
            atomic_store(&tb->written_thread, tb->thread + 1); /* nothing of it in this file */
        }
    }
    atomic_store(&p->sites_written, 1);
    atomic_store(&p->bytes_written, 0);
    p->window_from = 0; /* a window open at the fork: its trace reads the child's file whole */
    atomic_store(&p->dropped_io, 0);
    atomic_store(&p->io_failed, 0);
    atomic_store(&p->full_errno, 0);
    atomic_store(&p->reserved_to, 0);
    atomic_store(&p->status, 0);
    p->status_msg[0] = 0;
    atomic_store(&p->writer_cpu_ns, 0);
    atomic_store(&p->sampler_cpu_ns, 0);
    atomic_store(&p->snaps_lost, 0);
    p->snap_n = 0;
    atomic_store(&p->misuse_unbalanced, 0);
    atomic_store(&p->misuse_nonfinite, 0);
    p->child_started = 0;
    p->parent_pid = (int)getppid(); /* its file names it: merge labels it a worker of it */
    atomic_store(&p->child_pending, 1);
    if (p->flight) { /* the parent's window stays the parent's; the child records nothing */
        sonde__flight_forget(p);
        atomic_store(&p->child_pending, 0);
        __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
    }
}

void sonde__child_start(sonde_profiler *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->child_started) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->child_started = 1;
    for (int i = 0; i < p->n_warnings; i++)
        sonde__free(p->warnings[i]); /* the parent's: its own file has them */
    p->n_warnings = 0;
    pthread_mutex_unlock(&p->lock);
    sonde__free(p->path); /* the parent's file */
    p->path = NULL;
    sonde__sampler_forget(p);
    char *name = sonde__malloc(strlen(p->name) + 24);
    if (name) {
        sprintf(name, "%s-pid%d", p->name, (int)getpid());
        sonde__free(p->name);
        p->name = name;
        p->cfg.name = name;
        sonde__free(p->child_path); /* a forked child's child: its parent's, not made */
        sonde__free(p->child_head);
        p->child_path = NULL;
        p->child_head = NULL;
        sonde__child_prepare(p); /* else its first pass makes the file; a SIGTERM before loses it */
    }
    if (!name || sonde__writer_start(p) != 0) {
        /* Without its own name or writer the child records nothing rather than risk the
         * parent's file; the status says so. */
        atomic_store(&p->child_pending, 0);
        __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
        sonde__set_status(p, SONDE_ENOMEM, "sonde: after fork(), the child could not start "
                                           "its own recording; profiling is off in the child");
    }
}

static void in_child(void)
{
    unlock_all();
    sonde__destroy_lock_child();
    sonde__control_lock_child();
    sonde__finishing_forked();
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        /* a flight recorder has no file until a trigger: its copy starts over too (it keeps the
         * parent's window otherwise, and an exit of the child with a status wrote it) */
        if (p && (p->fd >= 0 || p->flight) && !atomic_load(&p->finalized) &&
            __atomic_load_n(&p->hot.recording, __ATOMIC_RELAXED)) {
            start_over(p);
        } else if (p && atomic_load(&p->finalized)) {
            /* being destroyed by a parent thread: the child's copy has none of its threads to
             * stop, and writes nothing (the parent writes the run) */
            p->writer_started = 0;
            sonde__sampler_forget(p);
            sonde__stacks_forget(p->stacks);
            p->stacks = NULL;
            p->fd = -1;
        }
    }
}

void sonde__atfork_install(void) { pthread_atfork(lock_all, unlock_all, in_child); }

int sonde__child_open(sonde_profiler *p)
{
    if (!atomic_load(&p->child_pending))
        return 0;
    int any = 0;
    for (uint32_t i = 0; i < p->n_chunks && !any; i++)
        any = atomic_load(&p->chunks[i].state) != CHUNK_FREE;
    if (!any)
        return -1;
    atomic_store(&p->child_pending, 0);
    if (sonde__child_create(p) != 0 && sonde__writer_open(p) != 0) {
        __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
        sonde__warn(p, "%s", sonde_last_error());
        return -1;
    }
    if (p->child_sampler && !atomic_load(&p->finalized) && sonde__sampler_start(p) != 0)
        sonde__warn(p, "could not start the sampler thread in the forked child");
    char why[300];
    if (p->stacks_hz && !p->watch_pid && !atomic_load(&p->finalized) &&
        sonde__stacks_attach(p, 0, p->stacks_hz, p->cfg.sample_python, why, sizeof why) != 0)
        sonde__warn(p, "no CPU samples with call stacks in the forked child: %s", why);
    return 0;
}

int sonde__child_open_in_signal(sonde_profiler *p)
{
    int any = 0;
    for (uint32_t i = 0; i < p->n_chunks && !any; i++)
        any = atomic_load(&p->chunks[i].state) != CHUNK_FREE;
    int one = 1;
    if (!any || !p->child_path || !atomic_compare_exchange_strong(&p->child_pending, &one, 0))
        return -1;
    if (sonde__child_create(p) == 0)
        return 0;
    atomic_store(&p->child_pending, 1); /* a program that lives on: its writer tries again */
    return -1;
}
