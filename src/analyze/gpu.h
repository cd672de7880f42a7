/* gpu.h - where the GPU time goes and why it waits, from sonde's own CUDA activity (CUPTI on
 * sonde's clock, each entry linked to the thread and section that launched it), with the
 * definitions of Holistic Trace Analysis (docs/analysis.md gives both side by side):
 * - the temporal breakdown of each device over its span (its first entry's start to its last
 *   one's end: HTA's "kernel time"): idle (no entry running), compute (compute kernels
 *   running), non-compute (the rest: communication and memory entries with no compute kernel),
 *   and, beside HTA's, communication (NCCL kernels) and memory (copies and sets) on their own;
 * - the idle time of each stream between its entries, as HTA classifies it: host wait (the next
 *   entry's launch came after the previous one ended: the CPU was late), kernel wait (launched
 *   before, and the gap under kernel_delay_ns: the launch's own delay), other;
 * - what the CPU was doing in each host wait at least min_idle_ns long: on the thread that
 *   launched the entry after it, the innermost sections open then (each section's own part of
 *   the interval) and the CPU samples taken then (their innermost Python frame, else their
 *   innermost function), ranked by the idle time they explain. No peer does this part;
 * - communication overlapped by compute (HTA's communication/computation overlap), the launch
 *   delays (runtime call to start: mean, median, p99, longest, outliers), and each step's
 *   breakdown (the run's steps, within each);
 * - the kernels by name: calls, total, mean, median and longest. */
#ifndef SONDE_ANALYZE_GPU_H
#define SONDE_ANALYZE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "../model/model.h"

/* HTA's kernel kinds, by name: a kernel whose name holds "nccl" is communication, copies and
 * sets are memory, every other kernel is compute. */
enum { SA_GPU_COMPUTE, SA_GPU_COMM, SA_GPU_MEMORY };
int sa_gpu_kind(const sm_gpu *g);

/* Gaps under it between an entry and one launched before it ended are the launch's own delay
 * (kernel wait): HTA's consecutive_kernel_delay, whose default is 30 in its trace's unit (30 us
 * where it read traces in microseconds; its current API says 30 ns, under any launch's delay). */
#define SA_GPU_KERNEL_DELAY_NS 30000
/* A launch delay past it is an outlier (HTA's launch_delay_cutoff default, 100 us). */
#define SA_GPU_LAUNCH_DELAY_NS 100000
/* The shortest host wait whose CPU activity is looked at, by default. */
#define SA_GPU_MIN_IDLE_NS 50000

typedef struct sa_gpu_device {
    uint32_t device;
    size_t entries;                  /* kernels, copies and sets */
    double span_s;                   /* first start to last end (HTA's kernel time) */
    double idle_s, compute_s, non_compute_s; /* HTA's temporal breakdown: they add to span_s */
    double comm_s, memory_s;         /* NCCL kernels, copies and sets running (unions) */
    double host_wait_s, kernel_wait_s, other_wait_s; /* its streams' idle, HTA's classes */
    double comm_overlap_s;           /* communication while compute ran: HTA's overlap is
                                        comm_overlap_s / comm_s */
    /* launch delays: from the runtime call's start to the entry's start, of the entries whose
     * call was seen; those over SA_GPU_LAUNCH_DELAY_NS counted apart (HTA's outliers) */
    size_t launches, slow_launches;
    double launch_mean_s, launch_p50_s, launch_p99_s, launch_max_s;
    struct sa_gpu_step *steps;       /* per step of the run, in order (none without steps) */
    size_t n_steps;
} sa_gpu_device;

/* A step's part of a device's time: the same breakdown, within the step. */
typedef struct sa_gpu_step {
    uint64_t number;
    double span_s, idle_s, compute_s, non_compute_s;
} sa_gpu_step;

typedef struct sa_gpu_kernel {
    const char *name;                /* the model's */
    int kind;                        /* SA_GPU_* */
    uint64_t calls;
    double total_s, mean_s, p50_s, max_s;
} sa_gpu_kernel;

/* What the CPU was doing while the GPU waited for it. */
typedef struct sa_gpu_cause {
    char *what;                      /* a section's name, "(no section)", or a function */
    int sample;                      /* 1: from the CPU samples (what is a function, its file
                                        after it for a Python one), 0: a section */
    double idle_s;                   /* sections: the host waits' time it was the innermost in;
                                        samples: the samples' count over the rate */
    uint64_t samples;                /* samples: how many */
    size_t intervals;                /* host waits it had a part in */
} sa_gpu_cause;

typedef struct sa_gpu {
    sa_gpu_device *dev;
    size_t n_dev;
    sa_gpu_kernel *kernels;          /* by total time, most first */
    size_t n_kernels;
    sa_gpu_cause *causes;            /* sections first, then samples; each by idle_s, most first */
    size_t n_causes;
    size_t waits;                    /* host waits at least min_idle_ns long */
    double waits_s;                  /* their time */
    int64_t kernel_delay_ns, min_idle_ns;
} sa_gpu;

/* The analysis of m's CUDA activity (none: out->n_dev 0). 0, or -1 out of memory (out then
 * holds nothing to free). */
int sa_gpu_of(const sm_model *m, int64_t kernel_delay_ns, int64_t min_idle_ns, sa_gpu *out);
void sa_gpu_free(sa_gpu *g);

#endif
