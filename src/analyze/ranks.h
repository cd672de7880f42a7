/* ranks.h - who waits for whom in a distributed job. For the runs of a job's ranks (one model
 * each), step by step (the step numbers every rank has): each rank's step time, its time in
 * communication (the union of its collectives: sections and operators named as collectives,
 * sections carrying the metadata key "communication", NCCL kernels), and of that the time it
 * waited. A collective ends on every rank at about the same moment; the rank that reached it
 * last spends least time in it, the others waited for it: a rank's wait in a step is its
 * communication time less the least any rank spent in that step's, and the rank that spent
 * least is the step's straggler, the cause of the others' wait (docs/distributed.md, "Who
 * waits for whom"). The wait is taken as the first part of a rank's communication in the step (a
 * rank waits as it enters a collective, then the data moves), which gives the sections of the
 * thread that marks the steps the wait they hold, so that a section a rank spent waiting in is
 * not taken for slow compute. */
#ifndef SONDE_ANALYZE_RANKS_H
#define SONDE_ANALYZE_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "../model/model.h"

/* Whether an operator's, section's or kernel's name names communication between ranks: it
 * holds, case aside and with '_', '-' and ' ' left out, one of allreduce, allgather,
 * reducescatter, alltoall, broadcast, barrier, nccl, gloo, c10d::, paramcomms (c10d's and
 * gloo's operators: c10d::allreduce_, gloo:all_reduce; NCCL's: nccl:all_reduce,
 * ncclKernel_AllReduce_...; torch.distributed's functions; torch's record_param_comms). */
int sa_is_comm_name(const char *name);

/* A step's wait of one rank counts where the step's ranks differ by more than this share of the
 * step's median time on them (less is the noise of a balanced job). */
#define SA_WAIT_MIN_SHARE 0.02

typedef struct sa_rank_totals {
    double step_s, comm_s, wait_s; /* over the steps compared */
    double caused_s;               /* the wait of the other ranks in the steps it was the
                                      straggler of */
    size_t straggler_steps;        /* steps it was the straggler of */
    size_t cause;                  /* the rank (index) its wait was most caused by, or
                                      SIZE_MAX: none */
    double cause_s;                /* that rank's share of its wait */
} sa_rank_totals;

typedef struct sa_ranks {
    size_t n_ranks;                /* the models given */
    size_t n_steps;                /* steps every rank has, compared */
    int has_comm;                  /* some rank recorded communication in those steps */
    sa_rank_totals *rank;          /* n_ranks */
    size_t straggler;              /* the rank that caused the most wait, SIZE_MAX: none */
    /* per rank: the intervals it waited in (ns from its run's start, sorted, disjoint) */
    int64_t **wait_iv;             /* pairs [start, end) */
    size_t *n_wait_iv;
    uint32_t *step_thread;         /* per rank: the thread that marks its steps, UINT32_MAX:
                                      none or several */
} sa_ranks;

/* The analysis of models m[0 .. n) (ranks in that order). 0, or -1 out of memory (out then holds
 * nothing to free). With fewer than two ranks, no step common to them or no communication, the
 * totals are zero and no straggler is named. */
int sa_ranks_of(const sm_model *const *m, size_t n, sa_ranks *out);
void sa_ranks_free(sa_ranks *r);

/* How long span s of rank i's model (a section of the thread that marks its steps) spent
 * waiting: its overlap with that rank's wait intervals, in seconds (0 for other threads). */
double sa_ranks_wait_in(const sa_ranks *r, size_t i, const sm_span *s);

#endif
