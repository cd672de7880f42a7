/* internal.h - what the CPU samples' reading (stacks.c) and its off-CPU periods (offcpu.c) share:
 * the sampler's state, the processes and mappings it follows, its stacks, and the functions
 * each side calls in the other. Internal to src/stacks. */
#ifndef SONDE_STACKS_INTERNAL_H
#define SONDE_STACKS_INTERNAL_H

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacks.h"
#include "../util/buf.h"

#define RING_PAGES 64        /* data pages per CPU: 256 KiB */
#define RING_PAGES_STACK 128 /* with the stack's top in each sample: 512 KiB (within the 516
                                KiB a user may lock per CPU, perf_event_mlock_kb) */
#define STACK_COPY 8192      /* bytes of the user stack each sample carries, for unwinding */
#define MAX_FRAMES 128
#define MAX_CPUS 1024
#define FLUSH_SAMPLES 16384  /* samples held before they are written (about 128 KiB a record) */
#define RECORD_BYTES (1u << 20) /* a FUNCS or STACKS record is cut past this size */

/* A mapped file of a process: [start, end) maps the file from offset pgoff. */
typedef struct smap {
    uint64_t start, end, pgoff;
    uint32_t file;
} smap;

typedef struct sproc {
    int pid;
    char comm[16];
    smap *maps;
    size_t n_maps, cap_maps;
    sonde_umap *umaps;         /* the maps with their paths, for the unwinder (stale: remade) */
    size_t n_umaps;
    int umaps_stale;
    unsigned gen, py_gen;      /* mappings added; their count at the last look for Python */
    uint64_t py_looked;        /* when it was (CLOCK_MONOTONIC ns): at most every 100 ms */
    sonde_pyproc *py;          /* its CPython interpreter (pyframes.c), NULL: none found */
    uint32_t py_file;          /* the file holding it */
    int py_warned;             /* a CPython whose frames are not read was said */
} sproc;

/* A frame: an offset in a file (file UINT32_MAX: an address no mapping held), or a Python
 * frame: file PY_FRAME + its code in the sampler's table, off the line it was running. */
#define PY_FRAME 0x80000000u
/* A frame standing for frames a stack left out (off: how many), named "[truncated N frames]":
 * a stack keeps at most MAX_FRAMES, its innermost TRUNC_INNER and its outermost, so that the
 * flame graph's root stays the program's (issue 61 #11). */
#define TRUNC_FRAME 0x7fffffffu
#define TRUNC_INNER 32
/* Python frames the sampler's way reads of a stack at most (pyframes.c reads up to 256). */
#define PY_STACK_MAX 256
typedef struct sframe {
    uint32_t file;
    uint64_t off;
} sframe;

typedef struct sstack {
    uint64_t hash;
    uint32_t proc, n;
    sframe *f;             /* outermost first */
    int used;              /* a sample has it (a frame-pointer walk the unwinding replaced has
                              none: it is written without frames, not named) */
} sstack;

typedef struct ssample {
    uint32_t tid, stack;
    uint64_t t;
} ssample;

/* A thread off CPU (blocked in the kernel): since t, in stack (its native frames at the
 * switch, its Python frames once read). */
typedef struct soff {
    uint32_t tid, proc, stack;
    int py_read;
    uint64_t py_since;       /* when its Python frames were first looked for (CLOCK_MONOTONIC
                                ns, 0: not yet) */
    uint64_t t;
} soff;

/* An off-CPU period ended, to be written (OFFCPU record). */
typedef struct soffdone {
    uint32_t tid, stack;
    uint64_t t, ns;
} soffdone;

/* A thread the context-switch event saw, and whether it is one of sonde's (its name begins
 * "sonde-": the writer, the samplers), whose waits are the profiler's, not the program's. */
typedef struct stid {
    uint32_t tid;
    int sonde;
    int checks;            /* its name read so many times (up to 3) */
} stid;

/* A record waiting in a ring: its time, its ring, its position there. */
typedef struct sorder {
    uint64_t t, at;
    int ring;
} sorder;

struct sonde_stacks {
    int fds[MAX_CPUS];     /* the event of each CPU, whose ring buffer is mapped */
    void *rings[MAX_CPUS];
    int cpus[MAX_CPUS];    /* the CPU of each (offline ones have none) */
    int n_cpus;
    int *task_fds;         /* this process's threads alive at the start: their events, writing
                              into the rings of fds[] */
    size_t n_task_fds, cap_task_fds;
    size_t ring_bytes;
    unsigned hz;
    int only_pid;          /* samples of this process alone (0: of every process followed) */
    int timed;             /* sample times are on CLOCK_MONOTONIC */
    sonde_stacks_write write;
    void *ctx;
    pthread_t thread;
    atomic_int stop;
    int stop_fd;           /* an eventfd written as stop is set: the reader's waits end at once
                              (-1: none, it notices within 10 ms) */
    int oom, write_failed;
    uint64_t lost, lost_written, cpu_ns;
    char **files;
    size_t n_files, cap_files;
    sproc *procs;
    size_t n_procs, cap_procs;
    sstack *stacks;
    size_t n_stacks, cap_stacks;
    uint32_t *table;       /* stack index + 1 by hash, open addressing, cap a power of two */
    size_t cap_table;
    ssample *pend;         /* samples not written yet */
    size_t n_pend, cap_pend;
    sonde_cputimer *timer; /* where perf_event_open was refused: the samples' source */
    int timer_py;          /* the timers were handed this process's interpreter */
    int timer_displaced;   /* the program took the timers' signal: 1 they moved to another, 2
                              they stopped (timer_displaced) */
    uint64_t timer_t0;     /* when the timers started (CLOCK_MONOTONIC, ns) */
    int inline_frames;     /* inlined functions are frames of their own */
    sonde_pytab *pytab;    /* the Python code objects of every process (pyframes.c); NULL:
                              Python frames are not read (config sample_python 0) */
    uint32_t reader_tid;   /* the sampler's own thread (sampled too, in process) */
    int py_warnings;       /* processes with a CPython whose frames are not read, said (the
                              first 4) */
    int py_any;            /* some process runs Python: each sample wakes the thread, which
                              reads the Python frames of its thread at once */
    sonde_pybpf *bpf;      /* sample_python 2: the Python frames read in the kernel at each
                              sample (pybpf.c), no wake-up a sample; NULL: read here */
    uint64_t bpf_done;     /* the samples up to this time were drained: their records too */
    int bpf_refused;       /* perf_start: the program would not attach to an event */
    sonde_unwinder *unwinder; /* the samples carry registers and the stack's top: code without
                                 frame pointers is unwound from its call frame information */
    uint64_t cfi_unwound;  /* samples whose stack came from the call frame information */
    uint8_t *fp_verdict;   /* per stack id seen as a frame-pointer walk: 0 not tried yet, 1 the
                              walk agrees with the call frame information, 2 it does not */
    size_t cap_verdict;
    int remapped;          /* /proc/self/maps read again in this drain (timer samples) */
    sorder *order;         /* the records of one drain, put in time order */
    size_t n_order, cap_order;
    uint64_t ends[2 * MAX_CPUS]; /* per ring, the position after the last record taken */
    /* Off-CPU periods: the context-switch event of each CPU, its samples (a voluntary
     * switch-out's stack) and its switch records in rings of their own (ring n_cpus + c); none
     * where perf_event_open refused it (kernel.perf_event_paranoid 2 without CAP_PERFMON). */
    int off_fds[MAX_CPUS];
    void *off_rings[MAX_CPUS];
    int n_off;             /* n_cpus when the event was opened, else 0 */
    int off_on;            /* it was: an OFFCPU record is written at the end, even empty */
    int off_bpf;           /* the BPF program (bpf) runs at each switch too: a period's Python
                              frames are those the kernel read as the thread left its CPU */
    int want_off;          /* config sample_off_cpu: try it */
    uint64_t off_lost;     /* records the kernel dropped from those rings (full) */
    size_t off_ring_bytes;
    soff *off;             /* the threads off CPU now: since when, and where */
    size_t n_off_open, cap_off_open;
    soffdone *off_pend;    /* the periods ended, not written yet */
    size_t n_off_pend, cap_off_pend;
    stid *tids;            /* threads met by the event: sonde's own are left out */
    size_t n_tids, cap_tids;
    sbuf out;
    uint8_t rec[1 << 16];  /* a record that wraps around the ring's end, made whole */
};

/* A PERF_RECORD_SAMPLE's fields (sample_type TID, TIME, CALLCHAIN first). */
typedef struct ssample_rec {
    uint32_t pid, tid;
    uint64_t t;
    sproc *p;                  /* its process */
    sframe fr[MAX_FRAMES];     /* its call chain placed in the process's mappings, innermost
                                  first */
    uint32_t n;
    const uint8_t *rest;       /* past the call chain: what sample_type adds after it */
} ssample_rec;

/* table.c: what the three drivers (stacks.c, cputimer.c, offcpu.c) share */
/* The sample record's body [b, end) into x: 0, or -1 when malformed, of a process not followed,
 * or out of memory. */
int sonde__stk_parse_sample(sonde_stacks *s, const uint8_t *b, const uint8_t *end,
                            ssample_rec *x);
/* The process pid's entry (made when make and not there: NULL out of memory). */
sproc *sonde__stk_proc_of(sonde_stacks *s, int pid, int make);
/* Address ip of process p as a frame: the file mapped there and the offset in it. */
sframe sonde__stk_place(const sproc *p, uint64_t ip);
/* The id of the stack of process proc whose frames are inner[0..n) (innermost first), made
 * when new; UINT32_MAX out of memory. */
uint32_t sonde__stk_stack_id(sonde_stacks *s, uint32_t proc, const sframe *inner, uint32_t n);
/* Stack id of thread tid at time t with the Python frames the kernel read at that sample or
 * switch (pybpf.c; the same id when it has none). A thread the program does not know yet (its
 * first samples), or knew by a thread state no longer its own, is given its state for the next
 * ones; this one keeps its native frames. */
uint32_t sonde__stk_kernel_python(sonde_stacks *s, sproc *p, uint32_t tid, uint64_t t,
                                  uint32_t id);
/* Stack id of thread tid with its Python frames read now (the same id when it has none). */
uint32_t sonde__stk_with_python(sonde_stacks *s, sproc *p, uint32_t tid, uint32_t id);
/* A warning in the file (a WARNING record, printf-style): the reports list it. */
void sonde__stk_warn(sonde_stacks *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The index of a mapped file's path, added when new (UINT32_MAX out of memory). */
uint32_t sonde__stk_file_id(sonde_stacks *s, const char *path);
/* A mapping of process pid: [start, start + len) of the file at path from offset pgoff; it
 * replaces the whole ones it overlaps. */
void sonde__stk_add_map(sonde_stacks *s, int pid, uint64_t start, uint64_t len, uint64_t pgoff,
                        const char *path);
/* Process p's interpreter (NULL: none read), looked for when its mappings have grown; the
 * reasons a CPython found is not read are warned of. */
sonde_pyproc *sonde__stk_py_of(sonde_stacks *s, sproc *p);
/* Stack id with the Python frames py (n_py, innermost first) in place of the interpreter's
 * native frames (interleaved where the native stack is whole). */
uint32_t sonde__stk_with_frames(sonde_stacks *s, sproc *p, uint32_t id, const sonde_pyframe *py,
                                int n_py);

/* offcpu.c: the off-CPU periods (docs/stacks.md, "Off-CPU time") */
/* The context-switch event's attributes o, beside the cpu-clock event's a. */
void sonde__off_attr(const struct perf_event_attr *a, struct perf_event_attr *o);
/* Event o of task on every CPU with a ring, into rings of their own; none when refused. */
void sonde__off_start(sonde_stacks *s, struct perf_event_attr *o, pid_t task);
/* Its rings unmapped and its descriptors closed. */
void sonde__off_close(sonde_stacks *s);
/* One record of a context-switch ring (the header h, its body [b, end)). */
void sonde__off_record(sonde_stacks *s, const struct perf_event_header *h, const uint8_t *b,
                       const uint8_t *end);
/* After a drain: the Python frames of the threads blocked now, once a period. */
void sonde__off_python(sonde_stacks *s);
/* At the end: the periods still open end at t, and every one is written (an OFFCPU record,
 * maybe empty, as the file's readers expect when they were followed). */
void sonde__off_finish(sonde_stacks *s, uint64_t t);
/* What the periods held. */
void sonde__off_free(sonde_stacks *s);

#endif
