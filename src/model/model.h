/* model.h - what a .sonde file holds, read back: run information, threads, the section tree of
 * every thread, sessions, steps, counters, instants, metrics and metadata, and the statistics
 * every exporter prints. The library's reports and the CLI both go through sm_read_file. */
#ifndef SONDE_MODEL_H
#define SONDE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <sonde/sonde.h>

#include "../format/format.h"
#include "sketch.h"

typedef struct sm_site {
    char *name, *file, *func;  /* name is never NULL ("?" when its record was missing) */
    int line;
    int stat;                  /* index into sm_model.stats grouping sites by name, -1 if none */
    uint32_t id;               /* its id in the file (in the model, ids are indices of sites) */
    uint64_t instants;         /* instants of this name, held or not (sm_instant) */
    uint64_t instants_every;   /* of them, every instants_every-th is held (0 or 1: every one) */
} sm_site;

typedef struct sm_thread {
    uint32_t index;
    uint32_t tid;
    char *name;
    uint64_t spans;            /* section instances on this thread */
    int pid;                   /* its process (runs merged from several processes) */
} sm_thread;

/* UNTERMINATED: still open when the file ends (closed at its end); CLOSED_BY_OUTER: closed by an
 * enclosing section's end; END_LOST: its end was among dropped events (zero duration, left out of
 * the statistics, counted in sm_model.sections_end_lost). */
enum { SM_SPAN_UNTERMINATED = 1, SM_SPAN_CLOSED_BY_OUTER = 2, SM_SPAN_END_LOST = 4 };
/* SM_SPAN_META_SUMMED: its metadata is in sm_model.metasum too (a run whose sections are held in
 * part: each section's, held or folded, goes there as it closes, in that order). */
enum { SM_SPAN_META_SUMMED = 8 };
/* The flags that say how a section ended (the reports' "sonde" argument). */
#define SM_SPAN_END_FLAGS (SM_SPAN_UNTERMINATED | SM_SPAN_CLOSED_BY_OUTER | SM_SPAN_END_LOST)

/* A section instance: 48 bytes, the bulk of a model's memory. What few sections carry (metadata,
 * throughput, FLOPs) is kept apart, in an sm_span_x (sm_span_extra). */
typedef struct sm_span {
    uint32_t site;             /* sm_model.sites index */
    uint32_t thread;           /* sm_model.threads index */
    int32_t parent;            /* span index, -1 at top level */
    int32_t session;           /* session index, -1 outside sessions */
    int32_t x;                 /* its sm_model.span_x entry, -1: none (no metadata, throughput or
                                  FLOPs) */
    uint16_t depth;
    uint16_t flags;            /* SM_SPAN_* */
    int64_t start_ns, end_ns;  /* from the run's start */
    int64_t child_ns;          /* time in direct children */
} sm_span;

/* A section's metadata, and the throughput and FLOPs recorded in it. */
typedef struct sm_span_x {
    int32_t meta;              /* first metadata entry (linked by next), -1 none */
    uint32_t unit;             /* site id of its throughput unit, 0: the run's unit */
    int own_dur_units;         /* units recorded with seconds <= 0 */
    double units, units_s;     /* throughput recorded in it */
    double flops;
} sm_span_x;

typedef struct sm_meta {
    uint32_t key, value;       /* site ids of the interned strings */
    int32_t next;
} sm_meta;

/* The metadata of a section name's folded instances (held sections: a section that carries
 * metadata alone is folded like any other): per key, its distinct values, as the JSON lists a
 * name's (at most SM_METASUM_KEYS keys a name, SM_METASUM_VALUES values a key, more: some left
 * out). */
#define SM_METASUM_KEYS 32
#define SM_METASUM_VALUES 16
typedef struct sm_metasum {
    uint32_t name;             /* a site of the section name (its statistic: sites[name].stat) */
    uint32_t key;              /* site ids of the interned strings */
    uint32_t values[SM_METASUM_VALUES];
    uint8_t n_values, more;
    int32_t next;              /* the name's next key as the build makes them, -1 none */
} sm_metasum;

typedef struct sm_session {
    uint32_t name;             /* site id */
    uint32_t thread;           /* the thread that began it (sm_model.threads index) */
    int64_t start_ns, end_ns;
    int32_t meta;
    double units, units_s;
    uint32_t unit;
    int own_dur_units;
    double flops;
    struct sm_stat *stats;     /* its sections' statistics, computed as they were read when the
                                  model holds only some sections (sm_model.sections_folded);
                                  NULL otherwise (sm_stats over its spans gives them) */
    size_t n_stats;
} sm_session;

/* An instant. A run with more than report_max_records holds every 2^s-th of each name that has
 * more than its share (sm_site.instants_every; sonde's own names all), with its payload; the
 * sites count every one. */
typedef struct sm_instant {
    int64_t t_ns;
    uint32_t thread, name;
    int32_t args;              /* its key/value payload: first sm_meta entry, -1 none */
} sm_instant;

/* A counter's samples. A run with more than report_max_records samples of a counter holds every
 * stride-th in reading order (stride 2, 4, ... as the held ones reach the bound again), so what
 * is held stays spread evenly over the run; samples, min, max, sum and last are over every
 * sample read. */
typedef struct sm_counter {
    char *name;
    int system;                /* sampled by sonde (CPU, memory, GPU), not by the program */
    size_t n, cap;             /* held samples (t_ns, v) */
    int64_t *t_ns;
    double *v;
    double min, max, sum, last;
    uint64_t samples;          /* every sample read (n unless thinned) */
    uint64_t stride;           /* held: every stride-th sample read (1: every one) */
    int64_t last_ns;           /* the time of last */
} sm_counter;

/* The mean of every sample of c. */
static inline double sm_counter_mean(const sm_counter *c)
{
    return c->samples ? c->sum / (double)c->samples : 0;
}

/* One step, numbered from 0 as PyTorch numbers them. It ends at its sonde_step and begins at its
 * sonde_step_begin when there was one, else where the step before it ended (the run's start for
 * the first). */
typedef struct sm_step {
    uint64_t number;
    int64_t t_ns;              /* its end */
    uint32_t thread;           /* the thread that ended it */
    int active;                /* inside an active window of the step schedule (1 without one) */
    int64_t start_ns;
    int begun;                 /* 1: begun by sonde_step_begin (while reading, 2: a begin mark;
                                  3: the end of a step not held, where the next one starts) */
} sm_step;

/* A step's duration in seconds. */
static inline double sm_step_s(const sm_step *s) { return (double)(s->t_ns - s->start_ns) / 1e9; }

/* An active window of the step schedule: the steps whose sections the report keeps. */
typedef struct sm_window {
    int cycle;
    uint64_t first_step, last_step;
    int64_t start_ns, end_ns;
} sm_window;

/* Diffusion records (sonde_diffusion_step, sonde_block). */
typedef struct sm_dstep {
    int64_t t_ns;
    uint32_t step;
    double seconds, timestep, block_size, guidance;
    int32_t span;              /* the span whose duration it took (seconds <= 0), else -1 */
} sm_dstep;

typedef struct sm_block {
    int64_t t_ns;
    uint32_t index;
    double seconds, frames, memory_mb;
    int32_t span;
} sm_block;

/* CUDA activity (cuda_activity): a kernel, memcpy or memset on a device's stream. */
enum { SM_GPU_KERNEL = 1, SM_GPU_MEMCPY = 2, SM_GPU_MEMSET = 3 };
typedef struct sm_gpu {
    uint8_t kind;              /* SM_GPU_* */
    uint8_t copy_kind;         /* memcpy: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ... (CUPTI's) */
    uint32_t device, stream, correlation;
    int64_t start_ns, end_ns;  /* from the run's start */
    char *name;                /* kernel name; NULL for copies */
    int32_t grid[3], block[3];
    uint64_t bytes;
    int64_t launch_ns;         /* the runtime call that launched it, -1 when not seen */
    int32_t launch_thread;     /* its thread (sm_model.threads index), -1 when not one of ours */
    int32_t span;              /* the innermost section open on that thread then, or -1 */
} sm_gpu;

/* GPU entries as read, before the model places them (reader.c -> model.c). */
typedef struct sm_gpu_raw {
    uint8_t kind, copy_kind;
    uint32_t device, stream, correlation, tid, cbid;
    uint64_t start_mono, dur;
    char *name;
    int32_t grid[3], block[3];
    uint64_t bytes;
} sm_gpu_raw;

/* An operator of another tracer (sonde_ops: PyTorch's profiler), placed on its thread. */
typedef struct sm_op {
    uint32_t name;             /* index into sm_model.op_names */
    int32_t shapes;            /* its input shapes (an op_names index), -1 none */
    uint32_t thread;           /* sm_model.threads index */
    int32_t parent;            /* the operator it ran inside, -1 none */
    int32_t span;              /* the innermost section open at its start, -1 none */
    uint32_t depth;            /* operators it is nested in */
    int64_t start_ns, end_ns;  /* from the run's start, inside its parent's and its section's */
    int64_t child_ns;          /* time in directly nested operators */
    double flops;
    int64_t device_ns;         /* GPU time of the work it launched itself (self CUDA) */
    int64_t device_total_ns;   /* the same with its nested operators' (CUDA total) */
    int64_t host_bytes, device_bytes; /* memory it allocated less what it freed, itself */
    uint64_t id;               /* its correlation id */
    /* The tracer's own table's figures (sonde_op.flags SONDE_OP_F_TABLE), which the per-operator
     * table takes over sonde's nesting when table is 1: its duration as recorded, its children's
     * time there, left out of that table (SONDE_OP_F_LEFT_OUT). */
    uint8_t table, table_left_out;
    int64_t table_ns, table_child_ns;
} sm_op;

typedef struct sm_params {
    char *model;
    double count;
} sm_params;

typedef struct sm_metric {
    char *owner;               /* section name, "session NAME" or "run" */
    char *name;
    uint64_t count;
    double sum, min, max, last;
} sm_metric;

typedef struct sm_rate {
    char *unit;
    double units, seconds;
} sm_rate;

/* A section's rates, derived in this one place: units per second of the instances that
 * recorded units, FLOP/s of those that recorded FLOPs, and MFU against peak (0: unknown). */
typedef struct sm_rates {
    double units_per_s, flops_per_s, mfu;
} sm_rates;

/* A section name's statistics: the fields of sonde.h's SONDE_SECTION_STATS, the one list every
 * output (JSON and its reader, CSV, text and HTML tables, Python, aggregate, diff) is made from,
 * and what the reports need besides. */
typedef struct sm_stat {
    char *name;
    const char *unit;          /* unit of units (points into the model's sites or unit) */
    SONDE_SECTION_STATS(SONDE__STAT_FIELD) /* count, total_s, ..., p99_s */
    double share;
    double units, units_s, flops, flops_time_s;
    uint32_t threads;          /* distinct threads it ran on */
    uint64_t aggregated;       /* of count, calls only counted and summed (a hot function of
                                  Python tracing or autotrace): in total_s and mean_s, not in the
                                  percentiles, min, max or stddev, which are its instances' */
    int min_depth;
    sm_sketch *sketch;         /* its durations' quantile sketch (owned; NULL when read from a
                                  report without one): ranks' sketches merge */
    int sketched;              /* p50, p90 and p99 come from the sketch, within SM_SKETCH_ALPHA
                                  (more than SM_SKETCH_AT instances); 0: exact */
    /* Resources while it ran, from the samples that fall inside its instances (NaN: none) */
    uint64_t res_samples;      /* samples of "process cpu %" or "rss MiB" inside */
    double res_cpu_mean;       /* mean process CPU % */
    double res_rss_begin, res_rss_end, res_rss_delta; /* MiB, means over instances */
    double res_gpu_util_mean;  /* mean of every GPU's utilization % */
    double res_gpu_mem_peak;   /* highest GPU memory MiB of any GPU */
} sm_stat;

/* The event Python tracing and autotrace write for a hot function's calls that were counted,
 * not recorded (format.h, SONDE_AGGREGATED_EVENT). The run's statistics (sm_model.stats) fold
 * them into the section's count, total and mean. */
#define SM_AGGREGATED_EVENT SONDE_AGGREGATED_EVENT

/* The trace budget (budget.c): the key trace_max_events, read from the run's configuration
 * (default SM_TRACE_MAX_DEFAULT; 0: no limit), bounds the sections a trace holds. When the
 * sections are more, only those lasting at least min_ns are kept (the longest, never more than a
 * third of the budget less one per thread: nesting stays whole, since a section outlasts what is
 * nested in it); the others are folded into one slice per run of them between kept sections (at
 * most two runs per kept section and one per thread), and the reports say how many. */
#define SM_TRACE_MAX_DEFAULT 4000000ull
typedef struct sm_budget {
    uint64_t sections, folded; /* sections in the trace's range; folded into slices of them */
    int64_t min_ns;            /* kept: duration >= min_ns (INT64_MIN: every one) */
} sm_budget;

typedef struct sm_kv {
    char *key, *value;
} sm_kv;

/* Step statistics: durations between consecutive steps (the first from the run's start), over
 * the steps of the active windows when the run had a schedule. */
typedef struct sm_steps_summary {
    size_t count;
    double per_s, mean_s, p50_s, p90_s, p99_s, min_s, max_s, first_s;
} sm_steps_summary;

/* CPU samples with call stacks (sample_hz, `sonde run`; src/stacks/stacks.c, built by
 * profile.c): per function, the samples where it was running (self) and where it was on the
 * stack (total, once per sample); every distinct stack, "process;outermost;...;innermost",
 * with its count (NAME.folded); and per section, the samples taken while it was the innermost
 * section open on the sample's thread, with their functions. */
typedef struct sm_func {
    char *name;                /* function, or "object+0xADDRESS" when no symbol covers it */
    char *object;              /* the file it is in (its base name) */
    char *file;                /* the source file it is defined in (from DWARF), NULL: unknown */
    unsigned line;             /* and the line, 0: unknown */
    uint64_t self, total;      /* samples */
    uint64_t own;              /* a Python function (its object is its source file): samples
                                  where it was the innermost Python frame (its own code, or the
                                  interpreter and C code it called); 0 for native functions */
    int python;                /* a Python function: its object is the source file it is
                                  defined in, as the sampler names Python frames (docs/stacks.md) */
} sm_func;
typedef struct sm_func_in {
    uint32_t func;             /* sm_profile.funcs index */
    uint64_t self, total;      /* samples in the section */
    uint64_t own;              /* a Python function: the section's samples it was the innermost
                                  Python frame of (sm_func.own) */
} sm_func_in;
typedef struct sm_stack_in {
    uint32_t stack;            /* sm_profile.stacks index */
    uint64_t count;            /* samples of it in the section */
} sm_stack_in;
typedef struct sm_psection {
    char *name;                /* the section's name */
    uint64_t samples;
    sm_func_in *funcs;         /* by self samples, most first */
    size_t n_funcs;
    sm_stack_in *stacks;       /* its stacks (the HTML report's flame graph of a section), by
                                  count, most first */
    size_t n_stacks;
} sm_psection;
/* A source line where samples were running (the innermost frame's line, from the DWARF). */
typedef struct sm_line {
    uint32_t func;             /* sm_profile.funcs index */
    char *file;
    unsigned line;
    uint64_t self;             /* samples running there */
} sm_line;
/* The samples of one folded stack whose innermost frame was running one source line. */
typedef struct sm_stack_line {
    uint32_t stack;            /* sm_profile.stacks index */
    uint32_t line;             /* sm_profile.lines index */
    uint64_t count;
} sm_stack_line;
/* The samples of one folded stack whose functions were each at one source line (the sampler's
 * FRAMELINES: a Python stack's every frame, a native one's where the DWARF says). */
typedef struct sm_stack_flines {
    uint32_t stack;            /* sm_profile.stacks index */
    uint64_t count;
    size_t at;                 /* its functions' lines, outermost first: sm_profile.flines[at ..
                                  at + the stack's functions), 0: unknown */
} sm_stack_flines;
/* A sample in time, for the trace: its thread and process, its stack (sm_profile.stacks index)
 * and its time from the run's start. */
typedef struct sm_psample {
    int64_t t_ns;
    uint32_t tid, pid, stack;
} sm_psample;
/* A node of the tree of the stacks' frames (the trace's stackFrames): its function and the node
 * of its caller (UINT32_MAX: outermost). */
typedef struct sm_pnode {
    uint32_t func, parent;
} sm_pnode;
/* Off-CPU time of one stack (docs/stacks.md "Off-CPU time"): the sampled threads blocked in
 * the kernel there. */
typedef struct sm_offstack {
    char *stack;               /* folded: "process;outermost;...;innermost" */
    const char *waits_in;      /* its innermost frame's function: what it waits in ("?": no
                                  frame); the name in sm_profile.funcs */
    const char *python;        /* its innermost Python frame's function, NULL: none */
    uint64_t ns, periods;      /* time blocked there, in how many periods */
    uint32_t id;               /* its place before the sort (the build's) */
    uint32_t *frames;          /* its frames, outermost first: sm_profile.funcs indexes (those
                                  of the first stack read with this folded line) */
    uint32_t n_frames;
} sm_offstack;
/* The periods of one off-CPU stack whose frames were each at one source line (FRAMELINES; the
 * samples' sm_stack_flines, for pprof): by off, then in order of first appearance. */
typedef struct sm_off_flines {
    uint32_t off;              /* sm_offstack.id */
    uint64_t ns, periods;
    size_t at;                 /* its frames' lines: sm_profile.flines[at .. at + n_frames) */
} sm_off_flines;
/* The off-CPU time of the periods that began inside sections of one name (the innermost open
 * on the period's thread at its start: a blocked thread opens and closes none). */
typedef struct sm_offsection {
    char *name;
    uint64_t ns, periods;
} sm_offsection;
/* An off-CPU period kept for the trace (the longest, sm_profile.off_held): when, how long, its
 * thread and process, its stack (sm_profile.off index). */
typedef struct sm_offperiod {
    int64_t t_ns, ns;          /* start from the run's start; length */
    uint32_t tid, pid, off;
} sm_offperiod;
#define SM_OFF_HELD_MAX 65536u /* periods kept for the trace, the longest */

typedef struct sm_profile {
    uint64_t samples, lost;    /* samples taken; samples the kernel dropped (ring full) */
    uint64_t draws;            /* the distinct moments they were taken at (a thread and a time):
                                  a timer's signal comes at the kernel's tick and stands for the
                                  1/hz periods since the last, as that many samples of one
                                  moment, so the shares are as precise as draws, not samples;
                                  the samples where they carry no time */
    uint64_t unnamed;          /* samples left out: their stack is not in the file (the program
                                  ended before naming them) or names a function it lacks */
    unsigned hz;
    uint64_t cpu_ns;           /* CPU time of the thread that took them */
    uint64_t cfi_unwound;      /* of them, unwound by the call frame information where the
                                  frame pointers gave fewer frames (perf_event_open's samples) */
    unsigned py_way;           /* their Python frames read: 0 not at all, 1 by the sampler's
                                  thread, 2 in the kernel at each sample (BPF), 3 in the
                                  threads' signal handlers */
    uint64_t py_kernel_runs, py_kernel_ns; /* the kernel's program's runs and their time (0
                                  unless the kernel's BPF statistics were on) */
    int untimed;               /* the samples carry no time (a kernel before 4.1): no sections */
    int by_timer;              /* taken in the threads by SIGPROF, stacks unwound from .eh_frame
                                  (perf_event_open was refused, or sample_in_thread): from
                                  timers on their CPU clocks, or (by_counter) CPU-clock counters
                                  of their own; else the kernel's cpu-clock event, stacks along
                                  frame pointers */
    int by_counter;
    sm_func *funcs;            /* by self samples, most first */
    size_t n_funcs;
    char **stacks;             /* folded stacks */
    uint64_t *counts;
    size_t n_stacks;
    uint32_t *frames;          /* each stack's functions (funcs indices), outermost first: */
    size_t *first;             /* stack i's are frames[first[i] .. first[i + 1]) */
    sm_psection *sections;     /* by samples, most first */
    size_t n_sections;
    uint64_t in_sections;      /* samples taken inside some section (the rest: outside any, or
                                  on threads that record none) */
    sm_line *lines;            /* by samples, most first */
    size_t n_lines;
    sm_stack_line *stack_lines; /* by stack, then line: which lines each stack's samples ran
                                   (pprof's locations); a stack's samples with no line known
                                   are its count less these */
    size_t n_stack_lines;
    sm_stack_flines *stack_flines; /* by stack: the lines each stack's samples ran in every
                                      frame (pprof's locations, where the file has them: then in
                                      place of stack_lines); a stack's samples with none known
                                      are its count less these */
    size_t n_stack_flines;
    uint32_t *flines;
    size_t n_flines, cap_flines;
    sm_off_flines *off_flines; /* the off-CPU stacks' lines, as stack_flines the samples' */
    size_t n_off_flines;
    sm_psample *timed;         /* every sample in order of time (none when untimed) */
    size_t n_timed;
    sm_pnode *nodes;           /* the frames' tree; stack i ends at node leaf[i] */
    size_t n_nodes;
    uint32_t *leaf;
    uint32_t *python;          /* the Python functions (funcs indexes), most own samples first */
    size_t n_python;
    int off_followed;          /* off-CPU periods were followed (the context-switch event was
                                  allowed: docs/stacks.md) */
    uint64_t off_ns, off_periods; /* the sampled threads' time blocked in the kernel */
    sm_offstack *off;          /* by stack, the longest first */
    size_t n_off;
    sm_offperiod *off_held;    /* the longest periods (at most SM_OFF_HELD_MAX), in time order */
    size_t n_off_held;
    sm_offsection *off_sections; /* by section, the longest first */
    size_t n_off_sections;
    uint64_t off_in_sections_ns; /* of off_ns, the periods that began inside a section */
} sm_profile;
void sm_profile_free(sm_profile *p);
/* Up to k functions of section ps that own samples as their innermost Python frame, most first:
 * their indexes in ps->funcs into top; how many (at most k). */
size_t sm_psection_python(const sm_psection *ps, uint32_t *top, size_t k);
/* Up to k functions that say where section ps's samples went, for a one-line summary: its
 * Python functions by own samples when it has any (the interpreter's C functions under them say
 * less), else its functions by self samples. Their indexes in ps->funcs into top, each one's
 * samples of that kind into count; how many (at most k). */
size_t sm_psection_top(const sm_psection *ps, uint32_t *top, uint64_t *count, size_t k);

typedef struct sm_model {
    /* run information (INFO record) */
    char *name, *host, *program, *cmdline, *clock, *unit, *sonde_version, *path;
    int pid;
    int rank, world_size;      /* -1 and 1 outside a distributed job */
    double peak_flops;
    uint64_t start_real_ns;    /* wall-clock time of the run's start (after any clear) */
    uint64_t start_mono_ns;    /* the same on CLOCK_MONOTONIC (aligns runs of one machine) */
    int64_t duration_ns;
    int clean_end;             /* the END record was found */
    int in_progress;           /* read by the recording library while it still records
                                  (sonde_export mid-run): the run so far, not a crash */
    uint64_t dropped_events;
    uint64_t sections_end_lost; /* spans flagged SM_SPAN_END_LOST */
    uint64_t short_spans;      /* instances under config min_duration_s, left out */
    sm_budget trace;           /* the whole run's trace under trace_max_events (budget.c; read
                                  back from a JSON report, which has no instances) */
    /* Held sections (report_max_sections): a run with more sections than that holds only those
     * lasting at least held_min_ns, and those that carry throughput, FLOPs or a diffusion
     * record, with what encloses them; the others were folded into runs as the file was read
     * (folds, as the trace budget folds them), after they had fed the statistics and their
     * metadata their name's sm_metasum. */
    uint64_t sections_folded;  /* sections not held (0: every one is) */
    int64_t held_min_ns;       /* INT64_MIN when every section is held */
    int fed;                   /* every section was handed to a sink of the reading as it
                                  closed (sm_feed.want said 1): the instances CSV, written then */
    struct sm_fold_run *folds; /* the runs they were folded into, each thread's in order */
    size_t n_folds;
    uint64_t bytes;            /* size of the file read */
    int merged;                /* runs of several files merged (sm_merge): path is the first's */
    uint64_t writer_cpu_ns;    /* CPU time of the recorder's writer thread (0: unknown) */
    uint64_t backpressure_chunks; /* chunks recording threads wrote themselves: the writer had
                                   * fallen behind and no buffer was free */
    uint64_t backpressure_ns;  /* the time those threads spent on it (waiting included) */
    uint64_t sampler_cpu_ns;   /* CPU time of the sampler thread (0: none ran) */
    sm_kv *info;               /* "system.*" and "config.*" facts, in file order */
    size_t n_info;
    sonde_config cfg;          /* the "config.*" facts decoded once (sm_config_read), when */
    int cfg_read;              /* set; sm_set_info keeps it so */

    sm_site *sites;
    size_t n_sites;
    sm_thread *threads;
    size_t n_threads;
    sm_span *spans;            /* grouped by thread, each thread's in start order */
    size_t n_spans;
    sm_span_x *span_x;         /* the spans' extras (sm_span.x), in no order */
    size_t n_span_x;
    sm_meta *meta;
    size_t n_meta;
    sm_metasum *metasum;       /* folded sections' metadata, by name and key (sm_metasum) */
    size_t n_metasum;
    int32_t run_meta;          /* metadata outside sections and sessions */
    double run_units, run_units_s, run_flops;
    uint32_t run_unit;
    sm_rate *rates;            /* throughput per unit over the run; rates[0] is the run's unit */
    size_t n_rates;
    sm_session *sessions;
    size_t n_sessions;
    sm_instant *instants;      /* in time order */
    size_t n_instants;
    uint64_t instants_thinned; /* instants read and not held (report_max_records) */
    sm_counter *counters;
    size_t n_counters;
    sm_step *steps;            /* past report_max_records, those whose number is a multiple of
                                  steps_every (their durations exact) */
    size_t n_steps;
    uint64_t steps_every;      /* 0 or 1: every step held */
    int steps_paired;          /* each step has its start (sort_steps ran; a merge keeps it) */
    uint64_t steps_thinned;    /* steps read and not held */
    uint64_t steps_active_thinned; /* of them, in an active window (every one without a schedule) */
    int steps_exact;           /* thinned steps all of one thread: the next four are over every
                                  active step (sm_steps takes them), not just those held */
    uint64_t steps_n;
    double steps_sum_s, steps_min_s, steps_max_s;
    int scheduled;             /* the run had a step schedule: only windows are kept */
    sm_window *windows;
    size_t n_windows;
    sm_metric *metrics;
    size_t n_metrics;
    sm_dstep *dsteps;
    size_t n_dsteps;
    sm_block *blocks;
    size_t n_blocks;
    sm_gpu *gpu;               /* CUDA activity, in start order */
    size_t n_gpu;
    sm_op *ops;                /* operators, grouped by thread, each thread's in start order */
    size_t n_ops;
    char **op_names;           /* operator names and shape texts, each once */
    size_t n_op_names;
    sm_params *params;         /* one per model, the last count recorded */
    size_t n_params;
    sm_stat *stats;            /* per section name, sorted by total_s, largest first */
    size_t n_stats;
    /* Totals computed once when the model is built, so that a model read back from a JSON
     * report (which has no instances) prints the same summary. */
    uint64_t total_sections, total_steps;
    double total_flops, total_flops_s;
    sm_steps_summary steps_summary;
    char *analysis_text;       /* read back from a JSON report: its analysis lines, as printed */
    sm_profile profile;        /* CPU samples with stacks (samples 0: none were taken) */
    struct sb_raw *praw;       /* what the profile was built from, kept so that sm_merge can
                                  build the runs' profile again as one (NULL: no samples, or a
                                  model read back from a JSON report) */
    char **warnings;           /* recorder warnings, then the reader's own */
    size_t n_warnings;
    /* How long the reading of a .sonde file took, step by step (CLOCK_MONOTONIC; no report
     * holds them: `make bench-scale` prints them): the walk over its records with their
     * checksums, the first pass over the events (what must be known before a section is
     * built), the build (the sections, their statistics and folds, the events decoded again);
     * the rest of the reading (operators, GPU work, the profile, the derived figures) is what
     * the whole took beyond them. 0 where the model was not read from a .sonde file. */
    struct {
        double walk_s, first_pass_s, build_s;
        int one_pass;          /* the events were decoded once: the SUMMARY record told what a
                                  first pass over them would have found */
    } read_times;
} sm_model;

/* Every section of the run, held or folded (sm_model.sections_folded). */
static inline uint64_t sm_sections(const sm_model *m) { return m->n_spans + m->sections_folded; }

/* How many threads the report pass may use (reading a file's threads, writing its reports):
 * SONDE_READ_THREADS where set to 1 or more (then *chosen is 1, where chosen is not NULL), else
 * one a CPU this process may run on (taskset, a cpuset); at most SM_REPORT_THREADS_MAX. */
#define SM_REPORT_THREADS_MAX 8
int sm_report_threads(int *chosen);
/* Reads a .sonde file into *m. 0, or a negative SONDE_E* code with the reason (naming the file
 * and the offset) in sonde_last_error(); *m is empty on failure. A torn or corrupt tail is not
 * an error: the model holds everything before it and a warning says where it stopped. */
int sm_read_file(const char *path, sm_model *m);
/* The same from memory (for fuzzing and tests); name is used in messages. */
int sm_read_mem(const uint8_t *data, size_t n, const char *name, sm_model *m);
/* sm_read_file with configuration facts set over the file's before the model is built
 * (`sonde export --set`: report_max_sections decides what is held): set[i].key as
 * "config.KEY". */
int sm_read_file_set(const char *path, const sm_kv *set, size_t n_set, sm_model *m);
/* sm_read_file of what a file holds from byte offset part->from on: the records that describe the
 * run (information, sites, threads, its first clock anchor, stacks, warnings, ...) are read
 * wherever they are, those of its events (EVENTS, CPU samples, off-CPU periods, GPU activity,
 * operators) and the other clock anchors only from `from` (their headers alone before it: no
 * byte of them is read or decoded). The model's clock is a line through the first and last
 * anchors, so the times are those of the whole file's reading. A step schedule's window is read
 * so from where the recorder's file ended before the step it began with (reports.c).
 *
 * rs, when not NULL, makes a series of such readings of one growing file cost what each part
 * holds, not the file: a reading notes there where the records that describe the run lie before
 * `from`, and up to where it walked, and the next reading (with a `from` as great) reads those
 * places and walks on from there. Start it zeroed; sm_resume_free frees it. A `from` below an
 * earlier one, past the file's end, or a noted place that no longer holds a whole record starts
 * it again from the file's beginning. from 0, or past the file's end, reads the file whole. */
typedef struct sm_resume_span {
    uint64_t at, end;
} sm_resume_span;
typedef struct sm_resume {
    uint64_t walked;        /* the records before this offset were walked: */
    sm_resume_span *defs;   /* where those that describe the run are, adjacent ones joined */
    size_t n_defs, cap_defs;
} sm_resume;
/* A part of a file to read (sm_read_file_from): from where, and the session that was open
 * when the part began (open 1: begun at tick `tick` on thread index `thread`, named by site id
 * `name`), whose begin lies before the part: the model has it begun then (once, where the part
 * holds the same begin too). */
typedef struct sm_part {
    uint64_t from;
    int open;
    uint64_t tick;
    uint32_t name, thread;
} sm_part;
int sm_read_file_from(const char *path, const sm_part *part, sm_resume *rs, sm_model *m);
/* The same from memory (the fuzzer). */
int sm_read_mem_from(const uint8_t *data, size_t n, const char *fname, const sm_part *part,
                     sm_resume *rs, sm_model *m);
void sm_resume_free(sm_resume *rs);
/* A sink of the reading for every section of the run: fn is handed each as it closes, with the
 * model being built (its threads, sites, sessions and the section's metadata are in place; its
 * parent, when held, too), thread by thread, each thread's in the order they ended; those under
 * min_duration_s are not. fn returns 0, or -1 to stop the reading (the result is then
 * SONDE_EIO; fn's caller knows why). want, when not NULL, is asked once the first pass has
 * decided that the model will not hold every section (report_max_sections), and only then,
 * with the number of sections that pass counted (those a clear or the schedule leaves out
 * among them): 1 to be fed (sm_model.fed says it was), 0 not, -1 to stop the reading; a model
 * that holds every section hands its spans later (sm_each_section), so such a sink feeds on
 * those. So NAME.instances.csv is written as the file is read, not by a second reading. */
typedef int (*sm_section_fn)(void *ctx, const sm_model *m, const sm_span *s);
typedef struct sm_feed {
    int (*want)(void *ctx, const sm_model *m, uint64_t sections);
    sm_section_fn fn;
    void *ctx;
} sm_feed;
int sm_read_file_fed(const char *path, const sm_kv *set, size_t n_set, const sm_feed *feed,
                     sm_model *m);
/* Consumers of the reading: what a report needs beyond the model adds a consumer, which the
 * build hands each event it keeps as it decodes it (its second pass, every thread's events in
 * order), one handler per event kind; a report never reads the file again for it. The
 * consumers a user can name are sm_consumers' (consumers.c: adding one is its file and a row
 * there). An event as a consumer sees it: */
struct sbuf; /* util/buf.h */
typedef struct sm_event {
    unsigned kind;       /* SONDE_K_* */
    uint32_t thread;     /* the model's thread index */
    int64_t t_ns;        /* from the run's start */
    uint32_t id, arg;    /* by kind (format.h): a site, a name, a key; ids are the model's */
    const double *v;     /* its values (SONDE_MAX_VALUES) */
    uint32_t open;       /* the site of the innermost section open on its thread before it, 0:
                            none (for an END, the section it closes is still open) */
} sm_event;
typedef struct sm_consumer {
    const char *name;    /* as `sonde summary --table NAME` names it */
    const char *help;    /* a line: what its table shows */
    void *(*start)(void); /* its state, NULL when out of memory */
    int (*on[SONDE_K_COUNT])(void *st, const sm_model *m, const sm_event *e); /* NULL: not
                            wanted; 0, or -1 out of memory (the reading stops) */
    /* Its table, as text lines, once the model is built; 0, or -1 out of memory. */
    int (*print)(void *st, const sm_model *m, struct sbuf *out);
    void (*stop)(void *st);
} sm_consumer;
/* The consumers a user can name, NULL-terminated (consumers.c). */
extern const sm_consumer *const sm_consumers[];
/* The one of them named name, or NULL. */
const sm_consumer *sm_consumer_find(const char *name);
/* sm_read_file, feeding n consumers (states[i] from ops[i]->start(), which the caller stops). */
int sm_read_file_ops(const char *path, const sm_consumer *const *ops, void *const *states,
                     size_t n, sm_model *m);
/* An sm_feed.want that is fed whenever the model folds sections (returns 1). */
int sm_feed_whenever_folded(void *ctx, const sm_model *m, uint64_t sections);
/* sm_read_mem with such a sink (the fuzzer feeds the instances CSV's rows from it). */
int sm_read_mem_fed(const uint8_t *data, size_t n, const char *fname, const sm_feed *feed,
                    sm_model *m);
/* Every section of m's run handed to fn (NAME.instances.csv, `sonde diff --per-instance`, where
 * their sink was not fed as the file was read: sm_model.fed): the spans m holds when it holds
 * every section, else the file read again (sm_read_file_fed). A model merged from several
 * files, or read from memory, hands the spans it holds. 0, or not 0 when fn stopped or the file
 * could not be read again (sonde_last_error says why). */
int sm_each_section(const sm_model *m, sm_section_fn fn, void *ctx);
/* 1 when sm_each_section hands m's sections from the file read again, thread by thread, each
 * thread's in the order they ended (their parents not held); 0: m's spans, in m's order. */
int sm_each_section_by_end(const sm_model *m);
void sm_free(sm_model *m);
/* A run name read from a file made into what the library itself allows as a name, a single path
 * component, since the CLI names its outputs after it: '/', '\\' and control characters become
 * '_', and "", "." and ".." become "run" (*name replaced). 0, or -1 when out of memory. */
int sm_safe_name(char **name);

/* Some of a model's spans: n_only indices into m->spans, ascending (only NULL: every span). A
 * session's are sm_session_spans' (a pass over the spans for every session made reports of
 * many sessions quadratic). */
typedef struct sm_spans_sel {
    const int32_t *only;
    size_t n_only;
} sm_spans_sel;
#define SM_ALL_SPANS ((sm_spans_sel){NULL, 0})
static inline size_t sm_sel_n(const sm_model *m, sm_spans_sel sel)
{
    return sel.only ? sel.n_only : m->n_spans;
}
static inline size_t sm_sel_at(sm_spans_sel sel, size_t q)
{
    return sel.only ? (size_t)sel.only[q] : q;
}
/* Every session's spans in one pass: sessions's spans are idx[first[s] .. first[s + 1]) in span
 * order (first has n_sessions + 1 entries). Both malloc'ed; 0, or -1 out of memory. */
int sm_session_spans(const sm_model *m, int32_t **idx, size_t **first);
static inline sm_spans_sel sm_session_sel(const int32_t *idx, const size_t *first, size_t sess)
{
    return (sm_spans_sel){idx + first[sess], first[sess + 1] - first[sess]};
}

/* Statistics of the spans sel names into a malloc'ed array sorted by total time; *n receives its
 * length. share_of_s is the duration used for share. NULL when out of memory (or no spans: then
 * *n is 0). */
sm_stat *sm_stats(const sm_model *m, sm_spans_sel sel, double share_of_s, size_t *n);
void sm_stats_free(sm_stat *s, size_t n);
/* Fills the res_* figures of stats (n of them, from sm_stats over the same sel) from the samples
 * that fall inside the instances of each name. */
void sm_resources(const sm_model *m, sm_stat *stats, size_t n, sm_spans_sel sel);

/* Percentile (0..100) of a sorted array, interpolating between closest ranks. */
double sm_percentile(const double *sorted, size_t n, double pct);
/* Every percentile of SONDE_SECTION_STATS into s, from its n durations sorted (seconds). */
void sm_stat_percentiles(sm_stat *s, const double *sorted, size_t n);

void sm_steps(const sm_model *m, sm_steps_summary *out);

/* Throughput of session sess in the run's unit: what was recorded on the session itself and in
 * the sections inside it (sel: its spans, sm_session_spans), over the seconds they were measured
 * in (as for the run). 0, or -1 when out of memory (then both are 0). */
int sm_session_units(const sm_model *m, size_t sess, sm_spans_sel sel, double *units,
                     double *seconds);

/* Totals over the run: units (in the run's unit) and their seconds, FLOPs and the time of the sections that
 * recorded them. */
void sm_totals(const sm_model *m, double *units, double *units_s, double *flops, double *flops_s);

/* Moves the run src (of another process on the same machine) into dst: its threads as threads
 * of their own process, its times on dst's clock, everything derived computed again. src keeps
 * nothing worth reading; free it with sm_free. 0, or SONDE_ENOMEM. */
int sm_merge(sm_model *dst, sm_model *src);

/* CUDA activity summed for the reports: kernels by name and by launching section (largest
 * GPU time first; names borrowed from m), copies and sets. 0, or -1 when out of memory. */
typedef struct sm_gpu_name {
    const char *name;
    uint64_t count;
    double total_s, max_s;
} sm_gpu_name;
typedef struct sm_gpu_sum {
    uint64_t kernels, memcpys, memsets, linked; /* linked: entries with a launching section */
    double kernel_s, memcpy_s, memset_s;
    uint64_t memcpy_bytes, memset_bytes;
    sm_gpu_name *by_kernel, *by_section;
    size_t n_by_kernel, n_by_section;
} sm_gpu_sum;
int sm_gpu_summarize(const sm_model *m, sm_gpu_sum *out);
void sm_gpu_sum_free(sm_gpu_sum *s);
/* CUPTI's memcpy kind as text ("HtoD"). */
const char *sm_gpu_copy_kind(unsigned kind);

/* The per-operator table: one row per operator name (by_shape: per name and input shapes),
 * largest self CPU time first; names borrowed from m. Self time is the operator's own less the
 * operators nested in it; total CPU time sums every call (a call inside a call of the same name
 * counts in both, as PyTorch's table counts it). As PyTorch's key_averages(), a call that is the
 * only child of a call of its own name is not a row's call: its parent takes its children and
 * its kernels (ops.c, fold_dups). 0, or -1 when out of memory. */
typedef struct sm_op_row {
    const char *name, *shapes; /* shapes NULL unless by_shape (and then NULL: none recorded) */
    uint64_t calls;
    double self_cpu_s, cpu_total_s, self_device_s, device_total_s, flops;
    int64_t host_bytes, device_bytes;
} sm_op_row;
int sm_ops_table(const sm_model *m, int by_shape, sm_op_row **rows, size_t *n);
/* Why the operator table's FLOPs (the other tracer's counter: torch's, which counts a few
 * operators only) and the run's (Compute: the program's own, sonde_flops) differ, when both are
 * there and differ by over 5%: one line into out (cap bytes, "" otherwise) naming the operators
 * of matrix and convolution work its counter gave none, largest self CPU time first. The rows
 * are the by-name table's. */
void sm_ops_flops_note(const sm_model *m, const sm_op_row *rows, size_t n, char *out,
                       size_t cap);
/* The calls the table's n rows count (calls folded into a parent of their name left out). */
static inline uint64_t sm_ops_calls(const sm_op_row *rows, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += rows[i].calls;
    return c;
}

/* Metadata from the entry head of m->meta back, each key once with its last value, in the order
 * the keys were first recorded. Out of memory: nothing is visited. */
/* Span s's metadata, throughput and FLOPs: its entry, or one of none (meta -1, all zero). */
extern const sm_span_x sm_span_x_none;
static inline const sm_span_x *sm_span_extra(const sm_model *m, const sm_span *s)
{
    return s->x >= 0 ? &m->span_x[s->x] : &sm_span_x_none;
}

void sm_each_meta(const sm_model *m, int32_t head,
                  void (*fn)(const char *key, const char *value, void *ctx), void *ctx);
/* The run's own metadata (sonde_metadata outside sections and sessions) the same way; from a
 * model read from a JSON report, its run.metadata ("metadata.KEY" facts). */
void sm_each_run_meta(const sm_model *m, void (*fn)(const char *key, const char *value, void *ctx),
                      void *ctx);

/* The program's threads: every thread less sonde's own (its sampler and writer). */
size_t sm_program_threads(const sm_model *m);

/* Name of a site id, "?" when unknown. */
const char *sm_str(const sm_model *m, uint32_t id);

/* The value of an INFO fact ("system.cpu_model", "config.max_data_points"), or NULL. */
const char *sm_info(const sm_model *m, const char *key);
/* The files of the run's forked children (its DataLoader workers, which name their runs
 * NAME-pidN: record/fork.c) beside the run's own .sonde file, their names sorted: *out and *n
 * (free with sm_worker_runs_free); none for a run read from a JSON report or from memory. 0, or
 * SONDE_ENOMEM. */
int sm_worker_runs(const sm_model *m, char ***out, size_t *n);
void sm_worker_runs_free(char **v, size_t n);
/* The run's recorded configuration (runcfg.c): every numeric and boolean key decoded from its
 * "config.KEY" fact by the key table's parser, the key's default where the fact is missing or
 * its value out of the key's range; string keys are left at their defaults (read them with
 * sm_info). What every report and reading step reads a key through: m->cfg where it was
 * decoded (sm_config_read), else decoded now. */
void sm_config(const sm_model *m, sonde_config *out);
/* Decodes the run's configuration into m->cfg once (the build does, when it has the facts; so
 * does the reading of a JSON report): sm_config then copies it, and sm_set_info of a "config.*"
 * fact decodes it again. */
void sm_config_read(sm_model *m);
/* A statistic's rates (sm_rates), peak the run's peak FLOP/s. */
sm_rates sm_stat_rates(const sm_stat *s, double peak);
/* Sets an INFO fact (it wins over the file's: `sonde export --set`); 0, or -1 out of memory
 * (m unchanged). */
int sm_set_info(sm_model *m, const char *key, const char *value);
/* The trace budget of the sections that begin in [t0, t1) (sm_model.trace is the whole run's,
 * set by the build and by a merge). 0, or -1 when out of memory (out zeroed). */
int sm_trace_budget(const sm_model *m, int64_t t0, int64_t t1, sm_budget *out);
/* The k-th largest of v[0..n) (1 <= k <= n) in linear time (quickselect); v is reordered. */
int64_t sm_kth_largest(int64_t *v, size_t n, size_t k);
/* The run's trace_max_events (sm_config: the key's default, SM_TRACE_MAX_DEFAULT, when it has
 * none or one out of the key's range; 0: no limit): the sections a trace keeps, and the CPU
 * samples it carries. */
uint64_t sm_trace_max_events(const sm_model *m);
/* The shortest off-CPU period a trace of [t0, t1) shows (the longest held periods, at most a
 * quarter of trace_max_events of them): 0 all of them; -1 out of memory. */
int64_t sm_off_trace_min_ns(const sm_model *m, int64_t t0, int64_t t1);
/* The run's report_max_sections the same way (default SM_REPORT_MAX_DEFAULT; 0: no limit). */
#define SM_REPORT_MAX_DEFAULT 4000000ull
uint64_t sm_report_max_sections(const sm_model *m);
/* The folding of a trace under its budget (sm_budget), shared by the trace writers: feed a
 * thread's sections in start order (sections of several threads may interleave); each shorter
 * than min_ns joins the open run of its box (its parent when that is kept and in [t0, t1), else
 * its thread's top level), so consecutive short siblings become one slice "NAME x N (T ms)"; a
 * kept section closes the run open in its own box, so a run never overlaps a kept sibling; a
 * section inside a folded one is in its run's time. */
typedef struct sm_fold_run {
    uint32_t thread, site;
    int mixed;                 /* more than one name */
    int64_t start_ns, end_ns;
    uint64_t n, sum_ns;        /* sections folded into it, their summed duration */
    /* Runs folded as the file was read (sm_model.folds) also say where they lie: */
    int32_t box;               /* the held section they are in, -1: the thread's top level */
    int32_t closer;            /* the held section right after them in their box, -1: none */
    uint64_t folded;           /* sections in them, those nested in the n included */
} sm_fold_run;
typedef struct sm_folder {
    const sm_model *m;
    int64_t t0, t1, min_ns;
    int32_t *open_run;         /* per box (span index, then n_spans + thread): -1 when none */
    sm_fold_run *runs;         /* in order of their first section */
    size_t n_runs, cap_runs;
    int32_t closed;            /* the run the last kept section closed, -1 when none */
    int32_t *before;           /* a model that holds some sections: the run each held one
                                  closes (m->folds), -1 none */
    int borrowed;              /* runs are m->folds, not the folder's */
} sm_folder;
/* 0, or -1 when out of memory. With min_ns INT64_MIN nothing is folded and nothing allocated.
 * A model that holds only some sections (sm_model.sections_folded) was folded as it was read:
 * then every section it holds is kept, and the runs of m->folds that begin in [t0, t1) are
 * given out where the trace writers ask for them (min_ns is its held_min_ns). */
int sm_folder_init(sm_folder *f, const sm_model *m, int64_t t0, int64_t t1, int64_t min_ns);
/* 1: s is folded (part of a run), 0: kept (f->closed says which run it closed), -1: out of
 * memory. */
int sm_fold(sm_folder *f, const sm_span *s);
/* The run open in a box (sm_folder.open_run's index), -1 when none; it is closed. */
int32_t sm_fold_take(sm_folder *f, size_t box);
/* A run's label appended to out: "NAME x N (T ms)" (NAME's first 400 bytes), or "N sections
 * (T ms)" when names differ. 0, or -1 out of memory. */
struct sbuf;
int sm_fold_label(const sm_model *m, const sm_fold_run *r, struct sbuf *out);
void sm_folder_free(sm_folder *f);

/* A section begins in [t0, t1): the range the trace writers and the budget take. */
static inline int sm_span_in(const sm_span *s, int64_t t0, int64_t t1)
{
    return s->start_ns >= t0 && s->start_ns < t1;
}
/* The tid a trace shows for thread i: the kernel's when known, else one no kernel tid reaches. */
static inline uint64_t sm_thread_tid(const sm_model *m, size_t i)
{
    return m->threads[i].tid ? m->threads[i].tid : 1000000000u + (uint64_t)i;
}

/* The run's max_data_points (its configuration fact; the default 10000 when absent; at least
 * 10): how many samples or occurrences of one series a report keeps. */
size_t sm_max_data_points(const sm_model *m);

/* The unit at the end of a counter's name ("gpu0 memory MiB" -> "MiB"), or "" when none. */
const char *sm_counter_unit(const char *name);

/* Which samples of c to keep to show at most max points: evenly spaced buckets keeping each
 * bucket's minimum and maximum (in time order), so a spike is never lost. Fills keep (room for
 * max + 2 indices) and returns how many; all of them when c->n <= max. */
size_t sm_downsample(const sm_counter *c, size_t max, size_t *keep);

#endif
