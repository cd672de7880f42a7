/* sonde.h - the whole public API of libsonde, a profiler for ML inference and training pipelines.
 *
 * ABOUT
 *   libsonde times the stages and steps of a C or C++ program: sessions, nested sections with
 *   metadata, metrics, throughput, FLOP counts, instant events and counters. A section edge costs
 *   one clock read and one 16-byte store into the calling thread's buffer; full buffers stream to
 *   an append-only OUTDIR/NAME.sonde file from a writer thread (when the writer falls behind, a
 *   thread whose buffer is full writes it itself rather than drop events), and at the end of the
 *   run the library reads that file back and writes the configured reports (NAME.json, NAME.csv,
 *   NAME.txt, NAME.trace.json.gz for Perfetto).
 *
 * USAGE
 *   sonde_config cfg = sonde_config_default();
 *   sonde_config_from_env(&cfg);                 // SONDE_ENABLED, SONDE_OUTPUT_DIR, SONDE_NAME
 *   sonde_profiler *p = sonde_create(&cfg);
 *   sonde_session_begin(p, "inference");
 *   {
 *       SONDE_SCOPE(p, "decode");                 // ends with the enclosing block
 *       sonde_metadata(p, "batch", "8");
 *       run_decode();
 *       sonde_throughput(p, 512, 0);              // 512 tokens over this section's own duration
 *   }
 *   sonde_session_end(p);
 *   sonde_destroy(p);                             // flush and write the reports
 *
 * ERRORS
 *   Every int-returning function returns 0 on success or a negative SONDE_E* code;
 *   sonde_strerror() names the code and sonde_last_error() gives the calling thread's detailed
 *   message for the last failure. The library never aborts and never exits the host.
 *
 * OWNERSHIP
 *   Every string the caller passes is copied (or interned) before the call returns; every object
 *   sonde returns is freed with the function named next to it.
 *
 * THREADS
 *   Recording calls (sections, metrics, events, counters, steps) may be made from any number of
 *   threads at once; each thread nests its own sections. sonde_export, sonde_summary and
 *   sonde_clear may be called from any thread, but not while another thread destroys the same
 *   profiler: no call may run concurrently with sonde_destroy. A call that comes after
 *   sonde_destroy has returned (a thread that had not heard) returns SONDE_ESTATE, and
 *   SONDE_SCOPE does nothing, for as long as 64 later profilers have not been destroyed.
 *
 * COMPILED OUT
 *   With -DSONDE_DISABLE, SONDE_SCOPE and SONDE_FUNCTION expand to nothing.
 */
#ifndef SONDE_SONDE_H
#define SONDE_SONDE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SONDE_VERSION_MAJOR 0
#define SONDE_VERSION_MINOR 1
#define SONDE_VERSION_PATCH 0
#define SONDE_VERSION_STRING "0.1.0"

/* The runtime version of the library, "MAJOR.MINOR.PATCH". */
const char *sonde_version(void);

/* The longest name, key or value (in bytes) the recording calls accept; a longer one is
 * SONDE_EINVAL and nothing is recorded. */
#define SONDE_MAX_NAME 65535
/* The most key/value arguments one event carries (sonde_event_args). */
#define SONDE_EVENT_ARGS_MAX 64

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */
#define SONDE_ERRNO_MAP(X)                                                                      \
    X(EINVAL, -1, "invalid argument")                                                          \
    X(ENOMEM, -2, "out of memory")                                                             \
    X(EIO, -3, "input/output error")                                                           \
    X(EUNBALANCED, -4, "section end without a matching begin")                                 \
    X(EOPEN, -5, "sections were still open")                                                   \
    X(EDISABLED, -6, "profiler is disabled")                                                   \
    X(EFORMAT, -7, "malformed or unsupported file")                                            \
    X(ENOTFOUND, -8, "not found")                                                              \
    X(EDROPPED, -9, "events were dropped")                                                     \
    X(ESTATE, -10, "call not valid in the profiler's current state")                           \
    X(EUNSUPPORTED, -11, "not supported")

#define SONDE__ERR_ENUM(name, val, msg) SONDE_##name = (val),
enum sonde_error { SONDE_OK = 0, SONDE_ERRNO_MAP(SONDE__ERR_ENUM) SONDE__ERR_LAST };
#undef SONDE__ERR_ENUM

/* A short description of an error code ("invalid argument"); never NULL. */
const char *sonde_strerror(int err);
/* The symbolic name of an error code ("SONDE_EINVAL"); never NULL. */
const char *sonde_err_name(int err);
/* The calling thread's message for its most recent failed sonde call (naming the file, key or
 * call that failed), or "" when none. Valid until the next sonde call on this thread. */
const char *sonde_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------------- */
/* Output formats, a bit mask in sonde_config.formats. The .sonde file is always written. */
#define SONDE_FORMAT_JSON 0x1u  /* NAME.json: the full report (docs/formats.md) */
#define SONDE_FORMAT_CSV 0x2u   /* NAME.csv: one row per section name (+ NAME.instances.csv for
                                   a run of at most SONDE_INSTANCES_CSV_AUTO sections) */
#define SONDE_FORMAT_TXT 0x4u   /* NAME.txt: aligned summary table, sorted by total time */
#define SONDE_FORMAT_TRACE 0x8u /* NAME.trace.json.gz: Chrome trace for Perfetto */
#define SONDE_FORMAT_SAMPLES 0x10u /* NAME.samples.csv: every raw sample of every counter */
#define SONDE_FORMAT_HTML 0x20u    /* NAME.html: the self-contained report with charts */
#define SONDE_FORMAT_TENSORBOARD 0x40u /* the trace where TensorBoard looks for it:
                                          OUTDIR/plugins/profile/RUN/HOST_PID.pt.trace.json.gz */
#define SONDE_FORMAT_PERFETTO 0x80u /* NAME.pftrace: Perfetto's own protobuf trace (smaller than
                                       the JSON trace, loaded faster by ui.perfetto.dev) */
#define SONDE_FORMAT_FOLDED 0x100u /* NAME.folded: CPU samples' stacks, one line per distinct
                                      stack and its count (flame graph tools' input); written
                                      when there are samples (`sonde run`, docs/stacks.md) */
#define SONDE_FORMAT_PPROF 0x200u /* NAME.pb.gz: the CPU samples as pprof's profile.proto, for
                                     pprof and speedscope; written when there are samples
                                     (docs/stacks.md) */
#define SONDE_FORMAT_INSTANCES 0x400u /* NAME.instances.csv, one row per section instance,
                                         whatever the run's size (csv writes it only up to
                                         SONDE_INSTANCES_CSV_AUTO sections: 1.1 M instances
                                         made 87 MB and most of a report pass) */
#define SONDE_FORMAT_OFFCPU 0x800u /* NAME.offcpu.folded: the off-CPU periods' stacks (threads
                                      blocked in the kernel), one line per distinct stack and
                                      the microseconds blocked there (an off-CPU flame graph's
                                      input); written when they were followed (docs/stacks.md,
                                      "Off-CPU time") */
#define SONDE_FORMAT_SQLITE 0x1000u /* NAME.sqlite: the run as SQL tables (sections, steps,
                                       counters, operators, GPU work, CPU samples) in one
                                       SQLite database, libsqlite3 loaded at run time
                                       (docs/formats.md: its schema and example queries) */
#define SONDE_INSTANCES_CSV_AUTO 100000u
#define SONDE_FORMAT_REPORTS 0x2fu /* json, csv, txt, trace, html: the default */
#define SONDE_FORMAT_ALL 0x1fffu

typedef struct sonde_profiler sonde_profiler;

/* Called when an active window of the step schedule has finished, with the path of that
 * window's trace (NAME-cycleK.trace.json.gz) and the window's number K (1, 2, ...). Runs on the
 * thread that called sonde_step, as PyTorch's on_trace_ready does, with no sonde lock held: it
 * may call sonde_step, record, or fork(). */
typedef void (*sonde_trace_ready_fn)(sonde_profiler *p, const char *trace_path, int cycle,
                                     void *user);

/* Every field has a key of the same name: SONDE_<KEY> in the environment (SONDE_GPU_INTERVAL_S),
 * and the same name in the YAML file and --profile flags once those land. docs/configuration.md
 * lists them all with their ranges. */
typedef struct sonde_config {
    int enabled;             /* 0: every call is a cheap no-op and no file is written (default 1) */
    const char *name;        /* run name, the stem of every file; NULL: PROGRAM-YYYYmmdd-HHMMSS */
    const char *output_dir;  /* directory for every file, created if missing (default ./sonde-out) */
    unsigned formats;        /* SONDE_FORMAT_* bits written at sonde_destroy (default REPORTS) */
    double buffer_mb;        /* bound on event buffer memory in MiB, 1..65536 (default 64): chunks
                              * of 64 KiB, one held by each recording thread; events are dropped
                              * (SONDE_EDROPPED) only when more threads record at once than that */
    const char *unit;        /* unit of sonde_throughput, e.g. "tokens", "frames" (default tokens) */
    double peak_flops;       /* device peak FLOP/s for utilization (MFU); 0: unknown (default 0) */
    const char *peak_device; /* or a device whose dense peak sonde knows ("h100-sxm-bf16"; see
                                docs/analysis.md); used when peak_flops is 0 */
    double flush_interval_s; /* the writer persists recorded events at least this often (1.0) */
    int signal_handlers;     /* 1: flush on fatal signals, SIGTERM, SIGINT (default 1) */
    int print_summary;       /* 1: print the text summary to stderr at sonde_destroy (default 0) */

    /* Background monitoring: one sampler thread per profiler, started when any collect_* is on.
     * Samples become counters ("cpu %", "rss MiB", "gpu0 util %", ...) in every report. */
    int collect_cpu;         /* system and process CPU %, load average (default 1) */
    int collect_memory;      /* system memory, process RSS and peak, threads, I/O (default 1) */
    int collect_gpu;         /* every GPU through NVML, loaded at run time (default 1) */
    double cpu_interval_s;   /* seconds between CPU and memory samples, 0.01..3600 (default 1) */
    double gpu_interval_s;   /* seconds between GPU samples, 0.01..3600 (default 0.5) */
    int monitor_gpu_temperature; /* GPU temperature (default 1) */
    int monitor_gpu_power;   /* GPU power draw, limit and energy (default 1) */
    const char *gpu_devices; /* GPUs to sample by index, "0,2"; NULL or "all": every GPU */
    unsigned max_data_points; /* samples per counter kept in reports, 10..10000000 (default
                                 10000); the .sonde file keeps every sample */
    int real_time_display;   /* a live block on stderr while the program runs (default 0) */
    double display_interval_s; /* seconds between redraws, 0.1..3600 (default 5) */
    int display_all_ranks;   /* show it in ranks other than 0 too (default 0) */

    /* Step schedule (sonde_step), PyTorch's semantics: skip_first steps are not recorded; then
     * cycles of wait (not recorded), warmup (recorded, discarded) and active (kept) steps;
     * repeat cycles (0: until the end). Or a start_step..end_step window (end excluded). All 0
     * (the default): every step is recorded. */
    unsigned skip_first, wait, warmup, active, repeat;
    unsigned start_step, end_step;
    sonde_trace_ready_fn on_trace_ready; /* after each active window; NULL: none */
    void *on_trace_ready_user;           /* passed to on_trace_ready */
    int cuda_profiler_range; /* cudaProfilerStart/Stop around each active window (default 0) */
    unsigned memory_every_n_steps; /* a memory snapshot into NAME.memory.json every N steps */
    int with_stack;          /* sections carry their source file, line and function in the
                                trace, and CPU samples with call stacks are taken (sample_hz;
                                default 0) */
    int record_shapes;       /* sonde_shape records shapes; off, it costs a branch (default 0) */
    double bottleneck_threshold; /* a stage above this share of its session is a bottleneck
                                    (default 0.3) */
    unsigned html_max_spans; /* spans the HTML timeline carries, the longest when there are more
                                (default 1000000) */

    /* Distributed jobs: -1 (the default) detects them from the launcher's environment
     * (torchrun RANK/WORLD_SIZE/LOCAL_RANK, Open MPI OMPI_COMM_WORLD_*, MPICH/PMI PMI_RANK/
     * PMI_SIZE, Slurm SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID). With world_size > 1 every file
     * name carries -rankN, and the live display and console summary come from rank 0 only
     * (display_all_ranks shows them everywhere). */
    int rank, world_size, local_rank;
    int nvtx;                /* every section is also an NVTX range, every step an NVTX mark,
                                every session a process-wide range, in the domain "sonde", for
                                Nsight Systems (default 0; docs/integrations.md) */
    /* Function tracing (libsonde-autotrace, include/sonde/autotrace.h): which functions become
     * sections, by comma-separated glob patterns on the function name, the source file or the
     * object file ("main,*decode*", "*vendor*"; docs/autotrace.md); NULL: all. */
    unsigned autotrace_max_depth; /* calls nested deeper than this are not traced (default 64) */
    const char *autotrace_include;
    const char *autotrace_exclude;
    unsigned autotrace_hot_calls; /* a function more than half of whose first N calls took
                                     under autotrace_hot_s is counted and summed from then on,
                                     not recorded per call (default 10000; 0: never) */
    double autotrace_hot_s;  /* (default 0.000001) */
    double min_duration_s;   /* section instances shorter than this are left out of every
                                report, statistics included (counted in the summary; default 0) */
    int cuda_activity;       /* CUDA kernels, memcpy and memset from CUPTI (libcupti loaded at
                                run time) on per-stream GPU tracks, each linked to the section
                                that launched it (default 0; docs/integrations.md) */
    int trace_python;        /* Python function tracing (the Python package's tracer; C
                                programs ignore it): every Python call a section (default 0;
                                docs/python.md) */
    const char *session_tags; /* "key=value,key=value": metadata of every session, recorded as
                                 it begins (001's session_tags; default none) */
    /* Python function tracing's filters, autotrace's semantics: comma-separated globs on the
     * qualified name (module.qualname), the module or the source file; NULL: all (the standard
     * library and sonde's own frames are left out unless an include names them). */
    const char *trace_python_include;
    const char *trace_python_exclude;
    unsigned trace_python_max_depth; /* Python calls nested deeper are not traced (default
                                        1000, CPython's own recursion limit); how many were
                                        left out is a warning in the reports */
    int trace_python_c_calls;  /* C functions called from Python are sections too (default 0) */
    unsigned trace_python_hot_calls; /* a function more than half of whose first N calls
                                        took under trace_python_hot_s is counted and summed
                                        from then on, not recorded per call (default 100000;
                                        0: never) */
    double trace_python_hot_s; /* (default 0.000002) */
    unsigned trace_max_events; /* the trace keeps at most this many sections: the longest (and
                                  so the outermost) whole, the others folded into slices
                                  "NAME x N (T ms)" that the reports count (default 4000000;
                                  0: no limit; docs/formats.md) */
    int sample_hz;           /* CPU samples with call stacks of every thread, per second of its
                                CPU time, each attributed to the innermost section open on its
                                thread (perf_event_open; docs/stacks.md). -1 (the default): 999
                                when with_stack is on, else none; 0: none */
    int sample_inline;       /* 1 (the default): a function inlined where a sample was taken is a
                                frame of its own, under the function it was inlined into (from
                                the DWARF); 0: the function that holds it alone, as perf report
                                shows by default. Took half of a reserved pointer (64-bit ABI) */
    int sample_cfi;          /* 1: each CPU sample also carries the top 8 KiB of its thread's
                                stack, and where the frame pointers fall short (code built
                                without them) the stack is unwound from the call frame
                                information (.eh_frame) instead, as perf's --call-graph dwarf
                                does; it costs more (docs/stacks.md). 0 (the default): frame
                                pointers. Took the other half of the reserved pointer */
    unsigned report_max_sections; /* the sections a report holds in memory, folded slices
                                  included (default 4000000; 0: no limit). A run with more holds
                                  its longest third of that, the others folded into slices as
                                  they are read, so a report's memory stays bounded however long
                                  the run (docs/formats.md, "Held sections"). Took half of the
                                  reserved pointer */
    unsigned report_max_records; /* the instants, the steps and each counter's samples a report
                                  holds in memory (default 1000000; 0: no limit). Past it every
                                  2nd, then 4th, ... is held, evenly over the run, while counts,
                                  sums, extremes and step statistics stay over every one
                                  (docs/formats.md, "Held records"). Took the other half of the
                                  reserved pointer */

    /* The flight recorder (docs/flight-recorder.md): with flight_recorder_s > 0 nothing is
     * written while the program runs; the last flight_recorder_s seconds of events are kept in
     * memory (buffer_mb bounds it: a quarter holds the threads' chunks, the rest the window,
     * encoded as in the file; when the two disagree the memory wins and each dump says how many
     * seconds it holds), and each trigger writes that window as a run of its own,
     * NAME-triggerN.sonde and its reports, flight_recorder_after_s seconds after the trigger.
     * Triggers: sonde_trigger, the signal trigger_signal (`sonde trigger PID`), a step over
     * trigger_step_over_median times the median of the last steps, a section over its
     * trigger_section_over_s, a counter under its trigger_counter_below, an exit with a
     * non-zero status, a fatal signal. */
    double flight_recorder_s;       /* seconds kept before a trigger (default 0: off) */
    double flight_recorder_after_s; /* seconds recorded past the trigger (default 1) */
    unsigned flight_recorder_max;   /* dumps written at most; later triggers are counted
                                       (default 10) */
    int trigger_signal;             /* the signal that triggers a dump (default SIGUSR2, 12;
                                       0: none); installed only in flight-recorder mode */
    double trigger_step_over_median; /* a step (the time between two sonde_step calls) over K
                                        times the median of the last 64 steps triggers, once 16
                                        steps are known (default 0: off) */
    const char *trigger_section_over_s; /* "NAME=S[;NAME=S...]": a section NAME that took over
                                           S seconds triggers (up to 8 rules; default none) */
    const char *trigger_counter_below;  /* "NAME=VALUE,S[;...]": a counter (sonde_counter or a
                                           sampled figure such as "gpu0 util %") under VALUE
                                           for S seconds triggers, once until it is back over
                                           (up to 8 rules; default none) */
    int on_demand;           /* 1: record nothing until `sonde trigger PID --start [--for S]`
                                (the control signal, trigger_signal), then record into a run of
                                its own, NAME-ondemandN, until --stop or S seconds, and write its
                                reports; off again until the next start (default 0;
                                docs/flight-recorder.md) */
    int sample_python;       /* 1 (the default): a CPU sample of a thread running CPython 3.11,
                                3.12 or 3.13 carries its Python frames (function, file, line),
                                read in the kernel at the sample by a BPF program where the
                                kernel allows it (root, or CAP_BPF and CAP_PERFMON), else by the
                                sampler's thread, woken at each sample; 2: the same, with a
                                warning when the kernel refuses; 3: by the sampler's thread
                                always; 0: native frames only (docs/stacks.md, "Python
                                frames") */
    int sample_off_cpu;      /* 1 (the default): with CPU samples, the time each thread spends
                                blocked in the kernel (a lock, a queue, I/O, a sleep), by the
                                stack it blocked in, its Python frames too, where the kernel
                                allows the context-switch event (root, CAP_PERFMON or
                                kernel.perf_event_paranoid 1 or lower); 0: none, no record per
                                context switch (docs/stacks.md, "Off-CPU time") */
    int sample_in_thread;    /* 1: a program's own CPU samples are taken in each thread, by
                                SIGPROF from a CPU-clock counter of its own (perf_event, where
                                allowed; else a timer on its CPU clock, at the kernel's tick),
                                its stack and Python frames read in the handler: no wake-up of
                                the sampler a sample, but no off-CPU periods, and threads
                                followed every 100 ms; refused under sonde run. 0 (the default):
                                the process's perf_event sampling where allowed (docs/stacks.md) */
    unsigned metrics_port;   /* serve live metrics (OpenMetrics and Prometheus text: sections'
                                calls and seconds, a step-time histogram, throughput, FLOPs, the
                                sampler's CPU, memory and GPU figures, dropped events) at
                                http://metrics_address:PORT/metrics from a thread of its own;
                                0 (the default): none. A port that cannot be had is a warning
                                and the run goes on (docs/monitoring.md, "Live metrics") */
    const char *metrics_address; /* the address it listens on (default "127.0.0.1": this
                                    machine only; "0.0.0.0" or "::" to be scraped from others) */
} sonde_config;

/* The defaults documented on each field. */
sonde_config sonde_config_default(void);

/* Overrides fields from the environment: SONDE_CONFIG names a YAML file loaded first (below
 * the variables), then SONDE_<KEY> for every field (SONDE_ENABLED,
 * SONDE_OUTPUT_DIR, SONDE_NAME, SONDE_FORMATS as a comma list of json,csv,txt,trace or all,
 * SONDE_BUFFER_MB, SONDE_GPU_INTERVAL_S, ...). Booleans take 1/0, true/false, yes/no, on/off.
 * String values are copied into storage that lives as long as the process. On a bad value
 * returns SONDE_EINVAL, names the variable and what was expected in sonde_last_error(), and
 * leaves cfg unchanged. */
int sonde_config_from_env(sonde_config *cfg);
/* This process's place in a distributed job as sonde detects it (the launchers' variables of
 * sonde_config.rank): each of rank, world_size and local_rank (any may be NULL) is set, -1 when
 * the environment does not say. */
void sonde_job_rank(int *rank, int *world_size, int *local_rank);

/* Applies a named preset over cfg: "development" (frequent sampling, every figure, the live
 * display, every report), "production" (sampling every few seconds, no GPU temperature or power,
 * no live display, JSON only, 16 MiB of buffers) or "debugging" (everything at the highest
 * rates, raw sample CSVs, source locations in the trace). README.md lists every value.
 * SONDE_EINVAL (naming the preset and the valid ones) leaves cfg unchanged. */
int sonde_config_preset(sonde_config *cfg, const char *name);

/* Loads a YAML file: the keys at top level or under a `profiling:` mapping. An unknown key, a
 * wrong type, a value out of range or a malformed file returns SONDE_EINVAL (SONDE_ENOTFOUND,
 * SONDE_EIO for a file that cannot be read) with a message naming the file, line, column and key
 * and what was expected; cfg is left unchanged on error (all or nothing). */
int sonde_config_load_file(sonde_config *cfg, const char *path);

/* Recognises the --profile* flags, applies them and removes them from argv, leaving every other
 * argument in order (argv[*argc] becomes NULL). Both "--flag value" and "--flag=value". A "--"
 * ends the flags: it and every argument after it are left to the program, --profile* or not:
 *   --profile  --profile-name NAME  --profile-dir DIR  --profile-activities CPU GPU MEM
 *   --profile-with-stack  --profile-record-shapes  --profile-skip-first N  --profile-wait N
 *   --profile-warmup N  --profile-active N  --profile-repeat N  --profile-start-step N
 *   --profile-end-step N  --profile-memory-every N  --profile-flight-recorder-s S
 *   --profile-trigger-step-over-median K  --profile-config FILE
 *   --profile-preset NAME  --profile-help
 * Precedence, lowest first: what cfg held, --profile-preset, --profile-config (YAML), the
 * environment, the other flags. Returns 0; 1 when --profile-help printed the list (the host may
 * exit); SONDE_EINVAL naming the flag on a bad value, leaving cfg and argv unchanged. */
int sonde_config_from_args(sonde_config *cfg, int *argc, char **argv);

/* Sets one field by its key name (docs/configuration.md; the names of the YAML file) from text,
 * as SONDE_<KEY> would: sonde_config_set(&cfg, "gpu_interval_s", "0.1"). For bindings and hosts
 * that take settings as text. SONDE_ENOTFOUND for an unknown key (the message suggests the
 * closest), SONDE_EINVAL naming the key and what was expected for a bad value; cfg is unchanged
 * on error. Strings are copied into storage that lives as long as the process; a NULL value
 * sets a string field back to NULL (its default where the default is none). */
int sonde_config_set(sonde_config *cfg, const char *key, const char *value);
/* Writes the current value of one field as text ("0.1", "json,csv", "" for no string) into
 * out[cap], truncating. Returns the length of the whole text (as snprintf), or
 * SONDE_ENOTFOUND for an unknown key. */
int sonde_config_get(const sonde_config *cfg, const char *key, char *out, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------------------------- */
/* Where libsonde's own allocations go (those of zlib and libyaml inside it excepted). malloc
 * and realloc return NULL on failure, like the C library's; every failure reaches the caller as
 * SONDE_ENOMEM (or a NULL profiler or summary) with a message naming what was being allocated. */
typedef struct sonde_allocator {
    void *(*malloc_fn)(size_t size, void *ctx);
    void *(*realloc_fn)(void *ptr, size_t size, void *ctx);
    void (*free_fn)(void *ptr, void *ctx);
    void *ctx;
} sonde_allocator;

/* Installs a (NULL: the C library's). Only while libsonde holds no memory at all, that is
 * before the first sonde call that allocates: otherwise SONDE_ESTATE, since memory from one
 * allocator would be given back to another. SONDE_EINVAL when a function is missing. */
int sonde_set_allocator(const sonde_allocator *a);

/* ---------------------------------------------------------------------------------------------
 * Profiler lifetime
 * ------------------------------------------------------------------------------------------- */
/* Creates a profiler and opens OUTDIR/NAME.sonde (a -N suffix is added when that name is taken).
 * cfg NULL means the defaults. Returns NULL only when out of memory; a profiler that cannot write
 * (bad directory, disk full) still records nothing harmful, and the reason is available from
 * sonde_status() and in sonde_last_error(). */
sonde_profiler *sonde_create(const sonde_config *cfg);

/* Stops recording, flushes every thread's buffer, writes the configured reports, frees what p
 * holds. Returns SONDE_EOPEN when sections were still open (they are closed at this instant and
 * listed as warnings in the report), SONDE_EIO when a file could not be written, else 0; p is
 * destroyed in every case. p NULL: SONDE_EINVAL; p already destroyed: SONDE_ESTATE. The handle
 * stays a small tombstone until 64 more profilers are destroyed, so late calls through it fail
 * cleanly with SONDE_ESTATE; after that it is freed. */
int sonde_destroy(sonde_profiler *p);

/* The configuration p runs with (defaults applied, strings owned by p); NULL when p is NULL. */
const sonde_config *sonde_config_of(const sonde_profiler *p);
/* The run name and the path of the .sonde file (NULL when none could be opened). Owned by p. */
const char *sonde_name(const sonde_profiler *p);
const char *sonde_file_path(const sonde_profiler *p);
/* 0 when the profiler is recording normally, else the first internal error it met. */
int sonde_status(const sonde_profiler *p);

/* ---------------------------------------------------------------------------------------------
 * Recording. Each returns 0, or a negative code (nothing recorded). With the profiler disabled
 * each returns 0 at the cost of one branch.
 * ------------------------------------------------------------------------------------------- */
/* A session groups the stages of one piece of work ("inference", "epoch 3"). Sessions follow
 * one another; beginning one while another is open ends the earlier one. */
int sonde_session_begin(sonde_profiler *p, const char *name);
int sonde_session_end(sonde_profiler *p);

/* Opens a section on the calling thread, nested in the thread's innermost open section. name
 * need not outlive the call. */
int sonde_begin(sonde_profiler *p, const char *name);
/* Closes the calling thread's innermost open section; SONDE_EUNBALANCED when none is open. */
int sonde_end(sonde_profiler *p);

/* Metadata, metrics, throughput and FLOPs attach to the calling thread's innermost open section,
 * or to the session (or the run) when none is open. */
int sonde_metadata(sonde_profiler *p, const char *key, const char *value);
/* A metric recorded many times keeps count, mean, min and max. value must be finite. */
int sonde_metric(sonde_profiler *p, const char *name, double value);
/* units processed (in cfg.unit) over seconds; seconds <= 0: the open section's own duration. */
int sonde_throughput(sonde_profiler *p, double units, double seconds);
/* The same in a named unit ("frames", "blocks"), for a run that measures several kinds of
 * throughput; unit NULL means cfg.unit. The report keeps one rate per unit. */
int sonde_throughput_unit(sonde_profiler *p, double units, double seconds, const char *unit);
/* A tensor shape as metadata of the open section ("input" -> "[8, 77, 512]"), recorded when
 * cfg.record_shapes is on; off, it returns 0 at the cost of a branch. */
int sonde_shape(sonde_profiler *p, const char *name, const int64_t *dims, int ndims);
/* Floating-point operations done by the open section; the report gives achieved FLOP/s. */
int sonde_flops(sonde_profiler *p, double flops);
/* Names the calling thread in every report and the trace (at most 31 bytes are kept; the last
 * name given wins). Without it a thread is known by its OS name (pthread_setname_np), or as
 * "tid N" when it has none of its own. SONDE_EINVAL for a NULL or empty name. */
int sonde_thread_name(sonde_profiler *p, const char *name);
/* An instant event on the calling thread's track. */
int sonde_event(sonde_profiler *p, const char *name);
/* The same with a payload: n key/value pairs (at most SONDE_EVENT_ARGS_MAX, each string at most SONDE_MAX_NAME
 * bytes) that travel with this event (not with the open section) into every report: the JSON's
 * events[].occurrences, the HTML's Events table, the trace event's args. Recorded in one piece:
 * when no buffer chunk can be had the event and all its arguments are dropped (SONDE_EDROPPED).
 * SONDE_EINVAL for n > 64, a NULL name, key or value, or a string over the limit. */
int sonde_event_args(sonde_profiler *p, const char *name, const char *const *keys,
                     const char *const *values, size_t n);
/* A sample of a named counter (a process-wide track in the trace). value must be finite. */
int sonde_counter(sonde_profiler *p, const char *name, double value);
/* Call right after a barrier the job already has (MPI_Barrier, a NCCL all-reduce), on every
 * rank: the common instant lets `sonde merge` align the ranks more tightly than their clocks. */
int sonde_sync(sonde_profiler *p);
/* Marks the end of one step (a training iteration, a denoising step); the report gives the
 * step count, per-step durations and steps/s. Steps are numbered from 0, as PyTorch numbers
 * them: the first sonde_step ends step 0. A step begins at its sonde_step_begin when there was
 * one since the step before it ended, else where that step ended (the first: at sonde_create), so
 * without sonde_step_begin, work done before a loop (loading, a prefill) counts in step 0. */
int sonde_step(sonde_profiler *p);
/* Marks where the next step begins: the time between the end of the step before and this call
 * belongs to no step, and step statistics (and the advice drawn from them) leave it out.
 * SONDE_STEP(p) does both for a block: the step begins there and ends with the block. */
int sonde_step_begin(sonde_profiler *p);

/* Diffusion pipelines (as in the reference documents): one denoising step, one block of frames,
 * a model's parameter count. seconds <= 0: the duration of the calling thread's innermost open
 * section. The report derives steps/s, frames per second (FPS), blocks per second (BPS), the
 * per-step and per-block series (mean, p50, p99, the slowest) and parameters per model. */
int sonde_diffusion_step(sonde_profiler *p, int step, double timestep, int block_size,
                         double seconds, double guidance_scale);
int sonde_block(sonde_profiler *p, int block_index, int block_size_frames, double seconds,
                double memory_mb);
int sonde_model_params(sonde_profiler *p, const char *name, double count);

/* Operators timed by another tracer (PyTorch's profiler, through sonde.torch), folded into the
 * run after they ran, on the run's clock (CLOCK_MONOTONIC):
 * - SONDE_OP_CPU: an operator ("aten::addmm") on a thread, a span nested under the sections
 *   and operators open there, with its input shapes and FLOPs;
 * - SONDE_OP_MEMORY: memory allocated (bytes > 0) or freed (< 0) at start_ns on a thread, on the
 *   host (device -1) or a GPU; charged to the operator running there and then;
 * - SONDE_OP_KERNEL, SONDE_OP_MEMCPY, SONDE_OP_MEMSET: GPU work on a device's stream, launched
 *   by the CPU operator whose id it names (its self CUDA time), shown as CUDA activity.
 * The reports give a per-operator table (calls, self and total CPU and CUDA time, FLOPs, memory;
 * also per input shapes) and the trace shows the operators on their threads. */
enum {
    SONDE_OP_CPU = 0,
    SONDE_OP_MEMORY = 1,
    SONDE_OP_KERNEL = 2,
    SONDE_OP_MEMCPY = 3,
    SONDE_OP_MEMSET = 4
};
typedef struct sonde_op {
    int kind;                 /* SONDE_OP_* */
    const char *name;         /* CPU: the operator; kernel: its name (NULL: "?"); at most
                                 SONDE_OP_NAME_MAX bytes are kept */
    uint64_t start_ns;        /* CLOCK_MONOTONIC */
    uint64_t dur_ns;          /* 0 for memory */
    int tid;                  /* CPU, memory: the kernel thread id it ran on (0: the calling
                                 thread); a tid none of the run's threads has gets a track */
    int device;               /* memory: -1 host, else the GPU; kernel, copy, set: the GPU */
    uint32_t stream;          /* kernel, copy, set */
    uint64_t id;              /* CPU: its correlation id (0: none); kernel, copy, set: the id of
                                 the CPU operator that launched it (0: unknown) */
    double flops;             /* CPU: FLOPs it did (0: not counted); finite, >= 0 */
    int64_t bytes;            /* memory: allocated (< 0: freed); copy, set: bytes */
    const char *shapes;       /* CPU: its input shapes as text ("[[4, 8], [8, 8]]"), NULL: none;
                                 at most SONDE_OP_SHAPES_MAX bytes are kept */
    unsigned flags;           /* CPU: SONDE_OP_F_* (0: sonde's table nests the operators itself) */
    uint64_t table_child_ns;  /* CPU with SONDE_OP_F_TABLE: time in its children as the tracer's
                                 own table counts it (its self time is dur_ns less this, which
                                 torch's can make negative: children that overlap each other) */
} sonde_op;
/* sonde_op.flags: the tracer's own table (PyTorch's key_averages()) decides, so that sonde's per-
 * operator table equals it row for row: F_TABLE, its child time is table_child_ns; F_LEFT_OUT
 * (with F_TABLE only), the table leaves it out (a call that is the only child of a call of its
 * name, counted in that one; an operator the table never lists). F_HOOK_RANGE: a range in which
 * the tracer runs the program's hooks (PyTorch's autograd AccumulateGrad, where gradient hooks
 * run): a section a hook closes inside it ends where the range ends, so the section holds the
 * rest of the range's work instead of ending across it. */
#define SONDE_OP_F_TABLE 1u
#define SONDE_OP_F_LEFT_OUT 2u
#define SONDE_OP_F_HOOK_RANGE 4u
#define SONDE_OP_F_ALL (SONDE_OP_F_TABLE | SONDE_OP_F_LEFT_OUT | SONDE_OP_F_HOOK_RANGE)
#define SONDE_OP_NAME_MAX 4096
#define SONDE_OP_SHAPES_MAX 4096
/* Records n operators (any order, any thread may call it), also after the step schedule's
 * window closed, until sonde_destroy. 0; SONDE_EINVAL (naming the entry) for an unknown kind,
 * unknown flags or F_LEFT_OUT without F_TABLE, a non-finite or negative flops, or ops NULL with
 * n > 0; SONDE_EIO when the file cannot be written. */
int sonde_ops(sonde_profiler *p, const sonde_op *ops, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Reading back
 * ------------------------------------------------------------------------------------------- */
/* A section name's statistics, one list: X(field, kind, label, table, percentile). kind: U64 or
 * F64 (seconds); label: the column's name in the text and HTML tables; table: 0 in the files only
 * (JSON, CSV, Python), 1 in every table as well, 2 also in the wide text table and the HTML
 * table; percentile: q for the q-th percentile of the durations (computed from it wherever the
 * statistics are), 0 for the others. sonde_section_stats holds them in this order, as do the
 * JSON report, the CSV, the text and HTML tables, the Python summary, sonde aggregate and the
 * figures `sonde diff --stat` compares: a new figure is a line here (and, unless it is a
 * percentile, its computation in src/model/stats.c). */
#define SONDE_SECTION_STATS(X)                                                                 \
    X(count, U64, "Count", 0, 0)     /* completed instances */                                 \
    X(total_s, F64, "Total", 1, 0)   /* sum of durations */                                    \
    X(self_s, F64, "Self", 1, 0)     /* total less the time in nested sections, same thread */ \
    X(mean_s, F64, "Mean", 1, 0)                                                               \
    X(min_s, F64, "Min", 2, 0)                                                                 \
    X(max_s, F64, "Max", 2, 0)                                                                 \
    X(stddev_s, F64, "Stddev", 0, 0)                                                           \
    X(p50_s, F64, "P50", 1, 50)                                                                \
    X(p90_s, F64, "P90", 2, 90)                                                                \
    X(p99_s, F64, "P99", 1, 99)
#define SONDE__STAT_U64 uint64_t
#define SONDE__STAT_F64 double
#define SONDE__STAT_FIELD(f, kind, label, table, q) SONDE__STAT_##kind f;

typedef struct sonde_section_stats {
    const char *name;        /* section name */
    SONDE_SECTION_STATS(SONDE__STAT_FIELD) /* count, total_s, ..., p99_s: the list above */
    double share;            /* total_s / the run's (or session's) duration, 0..1 per thread */
    const char *unit;        /* unit of units (cfg.unit unless sonde_throughput_unit named one) */
    double units;            /* throughput units recorded in it (0: none) */
    double units_per_s;      /* units / their seconds (0: none) */
    double flops;            /* FLOPs recorded in it (0: none) */
    double flops_per_s;      /* flops / total_s of the instances that recorded FLOPs */
    double mfu;              /* flops_per_s / cfg.peak_flops (0 when the peak is unknown) */
} sonde_section_stats;

/* One row of the operator table (operators recorded through sonde_ops): every call of one name. */
typedef struct sonde_op_stats {
    const char *name;        /* "aten::addmm" */
    uint64_t calls;
    double self_cpu_s;       /* its own time, less the operators nested in it */
    double cpu_total_s;      /* every call's whole duration */
    double self_cuda_s;      /* device time of the kernels it launched itself */
    double cuda_total_s;     /* ... and of those its nested operators launched */
    double flops;            /* FLOPs of its calls (with_flops) */
    int64_t self_cpu_memory; /* bytes allocated less freed while it ran, host */
    int64_t self_cuda_memory;/* ... device */
} sonde_op_stats;

typedef struct sonde_summary_t {
    double total_duration_s;   /* from sonde_create (or the last sonde_clear) to now */
    uint64_t sections;         /* section instances */
    uint64_t steps;            /* sonde_step calls */
    double units;              /* throughput units in cfg.unit in all */
    double units_per_s;        /* units over the seconds they were measured in */
    const char *unit;          /* cfg.unit */
    double flops;              /* FLOPs in all */
    double flops_per_s;        /* achieved FLOP/s over the sections that recorded FLOPs */
    uint64_t dropped_events;   /* events lost because buffers were full or the disk failed */
    uint64_t warnings;         /* misuse or faults listed in the report */
    size_t n_stats;            /* entries in stats, sorted by total_s, largest first */
    sonde_section_stats *stats;
    const char *not_recorded;  /* NULL while recording; else why nothing was recorded ("profiling
                                  is disabled", "cannot create DIR: ...") and every figure is 0 */
    size_t n_ops;              /* entries in ops: one per operator name, largest self CPU first */
    sonde_op_stats *ops;       /* NULL when no operator was recorded */
} sonde_summary_t;

/* Flushes what was recorded so far and computes the summary of the whole run. A profiler that
 * records nothing (disabled, or its output directory could not be written) still gives a
 * summary: empty, with not_recorded saying why. Returns NULL only for a NULL or destroyed
 * profiler, when out of memory, or when the recording cannot be read back (see
 * sonde_last_error()). Free the result with sonde_summary_free. */
sonde_summary_t *sonde_summary(sonde_profiler *p);
void sonde_summary_free(sonde_summary_t *s);

/* The latest value of every figure the sampler reads (the names of docs/monitoring.md: "cpu %",
 * "rss MiB", "gpu0 util %", "gpu0 memory MiB", ...), as the live display shows them. */
typedef struct sonde_current_metric {
    const char *name;        /* valid for the life of the process */
    double value;
    double t_s;              /* when it was sampled, in seconds since the sampler started (in
                                sonde_create) */
} sonde_current_metric;
/* Copies up to cap of them into out, in the order the figures were first sampled, and returns
 * how many there are (more than cap: call again with room for all). 0 before the first sample,
 * for a disabled profiler, or with every collect_* off. Any thread may call it. */
int sonde_current_metrics(sonde_profiler *p, sonde_current_metric *out, size_t cap);

/* Writes a report of what was recorded so far. path NULL: every configured format into
 * OUTDIR/NAME.*; else one file whose format follows the extension (.json, .csv, .txt,
 * .trace.json.gz or .json.gz). Files are written to a temporary name and renamed. */
int sonde_export(sonde_profiler *p, const char *path);

/* Discards everything recorded so far: later reports start from this instant. */
int sonde_clear(sonde_profiler *p);

/* The flight recorder's trigger (flight_recorder_s > 0; docs/flight-recorder.md): records an
 * instant "sonde.trigger" with reason as its argument, and asks for the window around now to be
 * written as NAME-triggerN.sonde and its reports, flight_recorder_after_s seconds from now, by
 * sonde's writer thread (this call does no I/O). A trigger that comes while another waits for
 * its dump joins it (the dump counts it); past flight_recorder_max dumps, triggers are counted
 * in the last dump's warnings and the run's. reason: any text (NULL: "sonde_trigger"), cut at
 * 200 bytes. Without the flight recorder everything is recorded anyway: the instant is
 * recorded and 0 returned. Any thread may call it. */
int sonde_trigger(sonde_profiler *p, const char *reason);

/* ---------------------------------------------------------------------------------------------
 * Macros: SONDE_SCOPE(p, "literal") opens a section that ends with the enclosing block;
 * SONDE_FUNCTION(p) one named after the enclosing function. The name is registered once per
 * call site; each use then costs a clock read and a store. SONDE_STEP(p) makes the rest of the
 * enclosing block one step (sonde_step_begin now, sonde_step at the block's end).
 * ------------------------------------------------------------------------------------------- */
/* Private interface below: don't call these directly; their layout may change. */
typedef struct sonde_site {
    const char *name;   /* section name */
    const char *file;   /* __FILE__ */
    const char *func;   /* __func__ */
    int line;           /* __LINE__ */
    uint32_t id;        /* 0 until registered */
} sonde_site;

typedef struct sonde__ev {   /* one 16-byte slot of a thread buffer */
    uint64_t ts;
    uint32_t tag;            /* kind in the low 4 bits, id above */
    uint32_t arg;
} sonde__ev;

typedef struct sonde__tbuf { /* hot part of a per-thread buffer */
    sonde__ev *cur;          /* next free slot; published with release order */
    sonde__ev *end;          /* end of the current chunk */
    int32_t depth;           /* open sections on this thread */
    uint32_t stack[64];      /* ids of the innermost open sections */
} sonde__tbuf;

typedef struct sonde__hot {  /* first member of every profiler */
    int recording;           /* read by the macros (relaxed atomic loads) */
    int use_tsc;             /* 1: timestamps are rdtsc ticks */
    uint64_t serial;         /* unique per profiler in the process */
} sonde__hot;

typedef struct sonde__tls {
    uint64_t serial;         /* profiler whose buffer is cached */
    sonde__tbuf *tb;
} sonde__tls;

#if defined(__GNUC__) || defined(__clang__)
#define SONDE__LIKELY(x) __builtin_expect(!!(x), 1)
#define SONDE__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SONDE__TLS_MODEL __attribute__((tls_model("initial-exec")))
/* A program built with -finstrument-functions (libsonde-autotrace) must not trace sonde's own
 * inline helpers. */
#define SONDE__NOINSTR __attribute__((no_instrument_function))
#define SONDE__INLINE static inline SONDE__NOINSTR
#else
#define SONDE__LIKELY(x) (x)
#define SONDE__UNLIKELY(x) (x)
#define SONDE__TLS_MODEL
#define SONDE__NOINSTR
#define SONDE__INLINE static inline
#endif

#ifdef __cplusplus
extern thread_local sonde__tls sonde__tl SONDE__TLS_MODEL;
#else
extern _Thread_local sonde__tls sonde__tl SONDE__TLS_MODEL;
#endif

enum { SONDE__K_BEGIN = 0, SONDE__K_END = 1 };

uint64_t sonde__now_slow(void);
sonde__tbuf *sonde__scope_begin_slow(sonde_profiler *p, sonde_site *s);
void sonde__scope_end_slow(sonde__tbuf *tb, uint32_t id);

SONDE__INLINE uint64_t sonde__now(const sonde__hot *h)
{
#if defined(__x86_64__) || defined(__i386__)
    if (SONDE__LIKELY(h->use_tsc)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#else
    (void)h;
#endif
    return sonde__now_slow();
}

SONDE__INLINE void sonde__publish(sonde__tbuf *tb, sonde__ev *next)
{
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&tb->cur, next, __ATOMIC_RELEASE);
#else
    tb->cur = next;
#endif
}

/* depth and stack are written by their thread alone and read by the live display: relaxed
 * atomic stores, plain moves on x86. */
SONDE__INLINE void sonde__set_depth(sonde__tbuf *tb, int32_t d)
{
#if defined(__GNUC__) || defined(__clang__)
    __atomic_store_n(&tb->depth, d, __ATOMIC_RELAXED);
#else
    tb->depth = d;
#endif
}

SONDE__INLINE void sonde__push(sonde__tbuf *tb, uint32_t id)
{
    int32_t d = tb->depth;
    if (d < 64) {
#if defined(__GNUC__) || defined(__clang__)
        __atomic_store_n(&tb->stack[d], id, __ATOMIC_RELAXED);
#else
        tb->stack[d] = id;
#endif
    }
    sonde__set_depth(tb, d + 1);
}

/* Writes a section's begin (kind SONDE__K_BEGIN, pushing id) or end (popping it) at tb's cursor:
 * the caller has checked that the slot is there and the stack within its 64 entries. kind is a
 * constant at every call, so each inlined copy keeps one branch's code. */
SONDE__INLINE void sonde__write_edge(sonde__tbuf *tb, const sonde__hot *h, uint32_t id,
                                     unsigned kind)
{
    sonde__ev *e = tb->cur;
    e->ts = sonde__now(h);
    e->tag = (id << 4) | kind;
    e->arg = 0;
    if (kind == SONDE__K_BEGIN)
        sonde__push(tb, id);
    else
        sonde__set_depth(tb, tb->depth - 1);
    sonde__publish(tb, e + 1);
}
SONDE__INLINE void sonde__write_begin(sonde__tbuf *tb, const sonde__hot *h, uint32_t id)
{
    sonde__write_edge(tb, h, id, SONDE__K_BEGIN);
}

SONDE__INLINE void sonde__write_end(sonde__tbuf *tb, const sonde__hot *h, uint32_t id)
{
    sonde__write_edge(tb, h, id, SONDE__K_END);
}

/* Whether a begin of id can be written inline on tb, the calling thread's cached buffer: it is
 * p's (h's serial), id is a registered site, the chunk has room and the stack depth is under
 * 64. SONDE_SCOPE and the extension's sections (record.h) ask the same question. */
SONDE__INLINE int sonde__begin_inline_ok(const sonde__hot *h, const sonde__tbuf *tb, uint32_t id)
{
    return sonde__tl.serial == h->serial && id != 0 && tb->cur < tb->end &&
           (uint32_t)tb->depth < 64u;
}

/* Opens a section for a call site; returns the thread buffer to pass to sonde__scope_end, or
 * NULL when nothing was recorded. */
SONDE__INLINE sonde__tbuf *sonde__scope_begin(sonde_profiler *p, sonde_site *s)
{
    const sonde__hot *h = (const sonde__hot *)(const void *)p;
    if (SONDE__UNLIKELY(!p))
        return NULL;
#if defined(__GNUC__) || defined(__clang__)
    if (SONDE__UNLIKELY(!__atomic_load_n(&h->recording, __ATOMIC_RELAXED)))
        return NULL;
#else
    if (SONDE__UNLIKELY(!h->recording))
        return NULL;
#endif
    sonde__tbuf *tb = sonde__tl.tb;
#if defined(__GNUC__) || defined(__clang__)
    uint32_t id = __atomic_load_n(&s->id, __ATOMIC_RELAXED);
#else
    uint32_t id = s->id;
#endif
    if (SONDE__UNLIKELY(!sonde__begin_inline_ok(h, tb, id)))
        return sonde__scope_begin_slow(p, s);
    sonde__write_begin(tb, h, id);
    return tb;
}

SONDE__INLINE void sonde__scope_end(sonde__tbuf *tb, uint32_t id, int use_tsc)
{
    if (!tb)
        return;
    if (SONDE__UNLIKELY(tb->cur >= tb->end) || SONDE__UNLIKELY(tb->depth <= 0)) {
        sonde__scope_end_slow(tb, id);
        return;
    }
    sonde__hot h;
    h.use_tsc = use_tsc;
    sonde__write_end(tb, &h, id);
}

typedef struct sonde__scope {
    sonde__tbuf *tb;
    uint32_t id;
    int use_tsc;
} sonde__scope;

SONDE__INLINE sonde__scope sonde__scope_open(sonde_profiler *p, sonde_site *s)
{
    sonde__scope sc;
    sc.tb = sonde__scope_begin(p, s);
    sc.id = s->id;
    sc.use_tsc = p ? ((const sonde__hot *)(const void *)p)->use_tsc : 0;
    return sc;
}

SONDE__INLINE void sonde__scope_close(sonde__scope *sc)
{
    sonde__scope_end(sc->tb, sc->id, sc->use_tsc);
}

#define SONDE__CAT2(a, b) a##b
#define SONDE__CAT(a, b) SONDE__CAT2(a, b)

SONDE__INLINE sonde_profiler *sonde__step_open(sonde_profiler *p)
{
    sonde_step_begin(p);
    return p;
}

SONDE__INLINE void sonde__step_close(sonde_profiler **p) { sonde_step(*p); }

#if defined(SONDE_DISABLE)
#define SONDE_SCOPE(p, name) ((void)0)
#define SONDE_FUNCTION(p) ((void)0)
#define SONDE_STEP(p) ((void)0)
#elif defined(__cplusplus)
} /* extern "C" */
struct sonde__scope_guard {
    sonde__scope sc;
    SONDE__NOINSTR sonde__scope_guard(sonde_profiler *p, sonde_site *s)
        : sc(sonde__scope_open(p, s)) {}
    SONDE__NOINSTR ~sonde__scope_guard() { sonde__scope_close(&sc); }
    sonde__scope_guard(const sonde__scope_guard &) = delete;
    sonde__scope_guard &operator=(const sonde__scope_guard &) = delete;
};
struct sonde__step_guard {
    sonde_profiler *p;
    SONDE__NOINSTR explicit sonde__step_guard(sonde_profiler *q) : p(sonde__step_open(q)) {}
    SONDE__NOINSTR ~sonde__step_guard() { sonde__step_close(&p); }
    sonde__step_guard(const sonde__step_guard &) = delete;
    sonde__step_guard &operator=(const sonde__step_guard &) = delete;
};
extern "C" {
#define SONDE__SCOPE_SITE(p, nm, fn)                                                            \
    static sonde_site SONDE__CAT(sonde__site_, __LINE__) = {nm, __FILE__, fn, __LINE__, 0};    \
    sonde__scope_guard SONDE__CAT(sonde__guard_, __LINE__)((p), &SONDE__CAT(sonde__site_, __LINE__))
#define SONDE_SCOPE(p, name) SONDE__SCOPE_SITE(p, name, __func__)
#define SONDE_FUNCTION(p) SONDE__SCOPE_SITE(p, __func__, __func__)
#define SONDE_STEP(p) sonde__step_guard SONDE__CAT(sonde__step_, __LINE__)((p))
#else
#define SONDE__SCOPE_SITE(p, nm, fn)                                                            \
    static sonde_site SONDE__CAT(sonde__site_, __LINE__) = {nm, __FILE__, fn, __LINE__, 0};    \
    sonde__scope SONDE__CAT(sonde__scope_, __LINE__)                                           \
        __attribute__((cleanup(sonde__scope_close), unused)) =                                 \
        sonde__scope_open((p), &SONDE__CAT(sonde__site_, __LINE__))
#define SONDE_SCOPE(p, name) SONDE__SCOPE_SITE(p, name, __func__)
#define SONDE_FUNCTION(p) SONDE__SCOPE_SITE(p, __func__, __func__)
#define SONDE_STEP(p)                                                                           \
    sonde_profiler *SONDE__CAT(sonde__step_, __LINE__)                                         \
        __attribute__((cleanup(sonde__step_close), unused)) = sonde__step_open(p)
#endif

#ifdef __cplusplus
}
#endif

#endif /* SONDE_SONDE_H */
