/* schedule.c - the step schedule: which steps are recorded, as a pure function of the step
 * number, and what the recorder does as its steps move through it (mode records, windows'
 * traces, cudaProfilerStart/Stop). */
#define _GNU_SOURCE
#include <stdio.h>

#include "schedule.h"

#include "record.h"
#include "../monitor/monitor.h"
#include "../stacks/stacks.h"
#include "../util/alloc.h"
#include "../util/fileio.h"

int sonde__schedule_on(const sonde_config *c)
{
    return c->skip_first || c->wait || c->warmup || c->active || c->repeat || c->start_step ||
           c->end_step;
}

int sonde__schedule_check(const sonde_config *c)
{
    int window = c->start_step || c->end_step;
    int cycles = c->skip_first || c->wait || c->warmup || c->active || c->repeat;
    if (window && cycles)
        return sonde__fail(SONDE_EINVAL, "step schedule: use either start_step/end_step or "
                                         "skip_first/wait/warmup/active/repeat, not both");
    if (window && c->end_step <= c->start_step)
        return sonde__fail(SONDE_EINVAL, "step schedule: end_step (%u) must be after start_step "
                                         "(%u)", c->end_step, c->start_step);
    if (cycles && !c->active)
        return sonde__fail(SONDE_EINVAL, "step schedule: active must be at least 1 when "
                                         "skip_first, wait, warmup or repeat is set");
    return 0;
}

sched_action sonde__schedule_action(const sonde_config *c, uint64_t step)
{
    sched_action r = {SCHED_ACTIVE, 1};
    if (!sonde__schedule_on(c))
        return r;
    if (c->start_step || c->end_step) {
        if (step >= c->start_step && step < c->end_step)
            return r;
        r.action = SCHED_NONE;
        r.cycle = 0;
        return r;
    }
    r.action = SCHED_NONE;
    r.cycle = 0;
    if (step < c->skip_first)
        return r;
    step -= c->skip_first;
    uint64_t per = (uint64_t)c->wait + c->warmup + c->active;
    uint64_t cycle = step / per;
    if (c->repeat && cycle >= c->repeat)
        return r;
    uint64_t mod = step % per;
    if (mod < c->wait)
        return r;
    r.cycle = (unsigned)(cycle + 1);
    r.action = mod < (uint64_t)c->wait + c->warmup ? SCHED_WARMUP : SCHED_ACTIVE;
    return r;
}

/* ------------------------------------------------------------------------------------------
 * The recorder moving through the schedule (sonde_step, profiler.c)
 * ---------------------------------------------------------------------------------------- */
static void cuda_range(sonde_profiler *p, int start)
{
    if (!p->cfg.cuda_profiler_range || (start ? p->cuda_range_open : !p->cuda_range_open))
        return;
    char why[320];
    if (cudart_profiler(start, why, sizeof why) == 0) {
        p->cuda_range_open = start;
    } else if (!p->cuda_noted) {
        p->cuda_noted = 1;
        sonde__warn(p, "%s", why);
    }
}

/* The active window that covered steps up to `step` (excluded) has ended: its trace; the
 * callback is left to the caller, who calls it with step_lock released (take_ready), so that
 * it may call sonde_step or fork(). Caller holds step_lock. */
void sonde__end_window(sonde_profiler *p, uint64_t step)
{
    int cycle = p->sched_cycle;
    uint32_t arg = (uint32_t)SCHED_NONE;
    sonde__record(p, SONDE_K_MODE, (uint32_t)(step & 0x0fffffff), arg, NULL);
    p->sched_action = SCHED_NONE;
    p->sched_cycle = 0;
    cuda_range(p, 0);
    char name[600], *path;
    snprintf(name, sizeof name, "%s-cycle%d.trace.json.gz", p->name, cycle);
    path = path_join(p->output_dir, name);
    if (!path)
        return;
    sonde__wlock(p);
    sonde__writer_pass(p, 1);
    sonde__wunlock(p);
    if (!p->reports) {
        sonde__free(path);
        return;
    }
    if (p->reports->write_cycle_trace(p, cycle, path) != 0) {
        sonde__warn(p, "cycle %d trace: %s", cycle, sonde_last_error());
    } else if (p->cfg.on_trace_ready && !p->ready_path) {
        p->ready_path = path;
        p->ready_cycle = cycle;
        return;
    }
    sonde__free(path);
}

/* Releases step_lock, then calls on_trace_ready for a window that ended under it, if any. */
void sonde__unlock_and_ready(sonde_profiler *p)
{
    char *path = p->ready_path;
    int cycle = p->ready_cycle;
    p->ready_path = NULL;
    pthread_mutex_unlock(&p->step_lock);
    if (path) {
        p->cfg.on_trace_ready(p, path, cycle, p->cfg.on_trace_ready_user);
        sonde__free(path);
    }
}

/* Applies what step number `step` does; from: where the file ended before the step that
 * ended (sonde__file_end), the start of the events of a window that begins with this step.
 * Caller holds step_lock. */
void sonde__schedule_step(sonde_profiler *p, uint64_t step, uint64_t from)
{
    sched_action a = sonde__schedule_action(&p->cfg, step);
    if (a.action == p->sched_action && (int)a.cycle == p->sched_cycle)
        return;
    if (p->sched_action == SCHED_ACTIVE)
        sonde__end_window(p, step);
    if (a.action != p->sched_action || (int)a.cycle != p->sched_cycle)
        sonde__record(p, SONDE_K_MODE, (uint32_t)(step & 0x0fffffff),
                      (uint32_t)a.action | (uint32_t)a.cycle << 2, NULL);
    if (a.action == SCHED_ACTIVE) { /* where its trace reads from, and the session open */
        p->window_from = from;
        uint64_t tick = atomic_load(&p->session_tick);
        uint32_t name = atomic_load(&p->cur_session);
        sonde_tbuf *stb = atomic_load(&p->session_tb);
        p->window_session = atomic_load(&p->session_open) && name && stb;
        p->window_session_tick = tick;
        p->window_session_name = name;
        p->window_session_thread = stb ? stb->thread : 0;
    }
    p->sched_action = a.action;
    p->sched_cycle = (int)a.cycle;
    __atomic_store_n(&p->hot.recording, a.action != SCHED_NONE, __ATOMIC_RELAXED);
    if (a.action == SCHED_ACTIVE)
        cuda_range(p, 1);
}
