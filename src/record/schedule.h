/* schedule.h - the step schedule: which steps are recorded, discarded or kept (PyTorch's
 * skip_first / wait / warmup / active / repeat semantics, or a start_step..end_step window). */
#ifndef SONDE_SCHEDULE_H
#define SONDE_SCHEDULE_H

#include <stdint.h>

#include <sonde/sonde.h>

enum { SCHED_NONE = 0, SCHED_WARMUP = 1, SCHED_ACTIVE = 2 };

typedef struct sched_action {
    int action;       /* SCHED_*: NONE is not recorded, WARMUP recorded and discarded */
    unsigned cycle;   /* 1-based cycle (window) number while WARMUP or ACTIVE, else 0 */
} sched_action;

/* 1 when cfg asks for a schedule (any of the seven numbers set). */
int sonde__schedule_on(const sonde_config *cfg);
/* 0, or SONDE_EINVAL naming what is inconsistent (active 0 with wait or warmup set, a window
 * whose end is not after its start, a window and cycles at once). */
int sonde__schedule_check(const sonde_config *cfg);
/* What happens during step number step (0 is the step before the first sonde_step call). */
sched_action sonde__schedule_action(const sonde_config *cfg, uint64_t step);

#endif
