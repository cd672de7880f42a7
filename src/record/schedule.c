/* schedule.c - the step schedule as a pure function of the step number. */
#include "schedule.h"

#include "record.h"

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
