/* export.h - the exporters: each turns the model into one format. One file per format; the
 * table in export.c drives which are written and under which name. */
#ifndef SONDE_EXPORT_H
#define SONDE_EXPORT_H

#include "../model/model.h"
#include "../util/buf.h"
#include "../util/fileio.h"

#define SONDE_JSON_SCHEMA_VERSION 1

/* One write of a run's reports: the model, its recorded configuration decoded once (sm_config),
 * and the analysis, run on first use and shared by every report that shows it (the JSON, the
 * text summary, the HTML report). sx_write_formats makes one for all the files it writes. */
struct sa_report;
typedef struct sx_report {
    const sm_model *m;
    sonde_config cfg;
    struct sa_report *an; /* NULL until sx_analysis */
} sx_report;
void sx_report_init(sx_report *r, const sm_model *m);
/* The analysis (bottleneck_threshold from cfg), run on the first call. NULL out of memory. */
const struct sa_report *sx_analysis(sx_report *r);
void sx_report_free(sx_report *r);
/* fn(r, out) in a context of its own for m: a report written alone. 0, or -1. */
int sx_alone(const sm_model *m, sbuf *out, int (*fn)(sx_report *, sbuf *));
/* The three reports that show the analysis, in a write's context. 0, or -1 out of memory. */
int sx_json_report(sx_report *r, sbuf *out);
int sx_txt_report(sx_report *r, sbuf *out);
int sx_html_report(sx_report *r, sbuf *out);

/* Each appends its format to out (json, txt and html in a context of their own); 0, or -1
 * when out of memory. */
int sx_json(const sm_model *m, sbuf *out);
int sx_csv(const sm_model *m, sbuf *out);
int sx_csv_instances(const sm_model *m, sbuf *out);
int sx_csv_samples(const sm_model *m, sbuf *out); /* every sample of every counter */
int sx_html(const sm_model *m, sbuf *out);        /* the self-contained HTML report */
int sx_txt(const sm_model *m, sbuf *out);
/* The analysis lines of the text summary (diffusion figures, recommendations). */
void sx_txt_analysis(const struct sa_report *an, sbuf *out);
/* The text summary with its rows sorted by SX_SORT_* and cut to top rows (0: all), in 100
 * columns (names cut to fit; no Min and Max), or wide: every column, names up to 40. */
enum { SX_SORT_TOTAL, SX_SORT_SELF, SX_SORT_COUNT, SX_SORT_MEAN };
int sx_txt_opts(const sm_model *m, sbuf *out, int sort, size_t top, int wide);

/* The Chrome trace (JSON array form), handed to sink in pieces of about 1 MiB. */
typedef int (*sx_sink)(void *ctx, const char *data, size_t n);
int sx_trace(const sm_model *m, sx_sink sink, void *ctx);
/* The streamed writers' step: hands what b holds to sink once it holds at least `at` bytes (0:
 * whatever it holds), then empties it. 0, or -1 when b ran out of memory or sink failed. */
#define SX_PIECE (1u << 20)
int sx_drain(sbuf *b, sx_sink sink, void *ctx, size_t at);
/* NAME.instances.csv handed to sink in pieces of about 1 MiB: its memory does not grow with the
 * instances. 0, or -1 when out of memory or when sink failed. */
int sx_csv_instances_stream(const sm_model *m, sx_sink sink, void *ctx);
/* NAME.instances.csv written a row at a time as the sections come: sx_rows_begin puts the
 * header, sx_rows_add (an sm_section_fn) a section's row, sx_rows_end what is left and frees r;
 * sx_rows_add and sx_rows_end return -1 on a failed write (errno) or out of memory. */
typedef struct sx_rows {
    sbuf b, meta;
    sx_sink sink;
    void *ctx;
    int err;
} sx_rows;
void sx_rows_begin(sx_rows *r, sx_sink sink, void *ctx);
int sx_rows_add(void *r, const sm_model *m, const sm_span *s);
int sx_rows_end(sx_rows *r);
/* NAME.folded (folded.c): the CPU samples' stacks, one line per distinct stack. 0, or -1. */
int sx_folded_stream(const sm_model *m, sx_sink sink, void *ctx);
/* NAME.offcpu.folded (folded.c): the off-CPU periods' stacks, one line per distinct stack and
 * the microseconds blocked there (rounded; a stack under half of one has no line). 0, or -1. */
int sx_offcpu_folded_stream(const sm_model *m, sx_sink sink, void *ctx);
/* NAME.pb.gz (pprof.c): the CPU samples as pprof's profile, gzip-compressed. 0, or -1. */
int sx_pprof_stream(const sm_model *m, sx_sink sink, void *ctx);
/* NAME.sqlite (sqlite.c): runs as SQL tables in one SQLite database (docs/formats.md), through
 * libsqlite3 loaded at run time. sx_db_open makes the tables in file, a new file (path names it
 * in errors: the file may be its temporary); sx_db_add puts a run in, every section of it
 * (sm_each_section), with its rank (-1: the run's own), a label (NULL: none) and the shift that
 * puts it on a merged timeline (runs.align_ns); sx_db_close makes the indexes and commits
 * (commit 0: leaves it, after a failure) and frees d. Each returns 0 or a SONDE_E* code with
 * sonde_last_error() naming path; after a failure only sx_db_close is left to call. */
typedef struct sx_db sx_db;
typedef struct sx_db_run {
    int rank;
    const char *label;
    int64_t align_ns;
} sx_db_run;
int sx_db_open(sx_db **d, const char *file, const char *path);
int sx_db_add(sx_db *d, const sm_model *m, const sx_db_run *r);
int sx_db_close(sx_db *d, int commit);
/* One run's database at path, through a temporary name. 0, or a SONDE_E* code. */
int sx_sqlite_file(const sm_model *m, const char *path);
/* The walk both traces are encoders of (walk.c). Each callback returns 0 to go on, else the
 * walk stops and returns what it returned; a callback left NULL is skipped. */
typedef struct sx_walker {
    /* sx_walk_spans: before a thread's first section (at first_ns, its start), folded or kept;
     * a kept section's beginning, after the ends of those it follows; its end, after the ends
     * of those inside it; a folded run, once closed (handed on before what comes after it:
     * the section that closed it, or its box's end) */
    int (*thread)(void *ctx, uint32_t thread, int64_t first_ns);
    int (*begin)(void *ctx, const sm_span *s);
    int (*end)(void *ctx, const sm_span *s);
    int (*run)(void *ctx, const sm_fold_run *r);
    /* sx_walk_ops: before a thread's first operator; an operator's beginning, after the ends
     * of those before it that ended; its end, after those inside it */
    int (*op_thread)(void *ctx, uint32_t thread, int64_t first_ns);
    int (*op_begin)(void *ctx, const sm_op *op);
    int (*op_end)(void *ctx, const sm_op *op);
    /* sx_walk_off: an off-CPU track's first period (the track of thread o->tid in process pid),
     * name_process 1 when no thread of the run and no track before it is in that process (a
     * child of `sonde run` that only waited: its name is the stack's first frame); a period
     * (after its track's) */
    int (*off_track)(void *ctx, const sm_offperiod *o, int pid, int name_process);
    int (*off_period)(void *ctx, const sm_offperiod *o, int pid);
    /* sx_walk_instants: before a thread's first instant (by thread only); an instant */
    int (*inst_thread)(void *ctx, uint32_t thread, int64_t first_ns);
    int (*instant)(void *ctx, const sm_instant *e);
    /* sx_walk_counters: before counter c's first point (at first_ns); its point i (k->t_ns[i],
     * k->v[i]) */
    int (*counter)(void *ctx, size_t c, int64_t first_ns);
    int (*point)(void *ctx, const sm_counter *k, size_t i);
    /* sx_walk_gpu: a device and stream's first record (new_device: its device's first too);
     * a kernel, copy or set */
    int (*gpu_track)(void *ctx, const sm_gpu *g, int new_device);
    int (*gpu)(void *ctx, const sm_gpu *g);
    /* sx_walk_steps: a step (first: the first handed on); sx_walk_sessions: a session likewise */
    int (*step)(void *ctx, const sm_step *st, int first);
    int (*session)(void *ctx, const sm_session *s, int first);
} sx_walker;
/* The sections that begin in [t0, t1), thread after thread (as m->spans groups them), each
 * thread's in time order, folded by fo (sm_folder_init over the same range; fo->runs holds
 * every run afterwards, in the order they began). 0, -1 out of memory, or a callback's value. */
int sx_walk_spans(const sm_model *m, sm_folder *fo, int64_t t0, int64_t t1,
                  const sx_walker *ops, void *ctx);
/* The instants at [t0, t1), in time order (as the model keeps them), or by_thread: thread after
 * thread, each thread's in time order. 0, -1 out of memory, or a callback's value. */
int sx_walk_instants(const sm_model *m, int64_t t0, int64_t t1, int by_thread,
                     const sx_walker *ops, void *ctx);
/* Each counter's points in [t0, t1), counter after counter, at most max_data_points of each
 * (sm_downsample: every bucket's least and greatest). */
int sx_walk_counters(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *ops, void *ctx);
/* The steps that end in [t0, t1), in the model's order. */
int sx_walk_steps(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *ops, void *ctx);
/* The sessions that overlap [t0, t1], in the model's order. */
int sx_walk_sessions(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *ops,
                     void *ctx);
/* The CUDA activity that begins in [t0, t1), in the model's order, each device and stream
 * announced at its first record. */
int sx_walk_gpu(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *ops, void *ctx);
/* The operators that begin in [t0, t1), thread after thread, nested by their ends. */
int sx_walk_ops(const sm_model *m, int64_t t0, int64_t t1, const sx_walker *ops, void *ctx);
/* The off-CPU periods the model kept that begin in [t0, t1) and last min_ns or more (the
 * trace's share of them: sm_off_trace_min_ns over the same range), in time order, each in its
 * own process, or in pid when forced (a merged trace's rank) or unknown; pid is the trace's
 * run. */
int sx_walk_off(const sm_model *m, int64_t t0, int64_t t1, int64_t min_ns, int pid, int forced,
                const sx_walker *ops, void *ctx);
/* Perfetto's protobuf trace (NAME.pftrace, perfetto.c), handed to sink in compressed pieces.
 * 0, or -1 when out of memory or when sink failed. */
int sx_perfetto(const sm_model *m, sx_sink sink, void *ctx);
/* One model's part of a trace: its events limited to [t0, t1), shifted by shift_ns, under pid
 * (0: its own) named process_name (NULL: the run's name) with a sort index (-1: none); open
 * writes the array's "[", close its "]", continued means events were written before. */
typedef struct sx_trace_opts {
    int64_t t0, t1;
    int64_t shift_ns;
    int pid;
    const char *process_name;
    int sort_index;
    int open, close, continued;
    int tensorboard; /* the object form, user annotations and ProfilerStep#N spans */
    int samples;     /* with open and close: the CPU samples with their stacks too, when the
                        run has timed ones (the object form: "traceEvents", "stackFrames",
                        "samples"; at most trace_max_events samples, evenly, each weighted
                        by the samples it stands for) */
} sx_trace_opts;
int sx_trace_part(const sm_model *m, const sx_trace_opts *o, sx_sink sink, void *ctx);

/* The same limited to [t0_ns, t1_ns): sections that begin, and samples, instants and steps that
 * fall, in it; sessions that overlap it. */
int sx_trace_range(const sm_model *m, int64_t t0_ns, int64_t t1_ns, sx_sink sink, void *ctx);
/* NAME.trace.json.gz of that range, through a temporary file. 0, or a SONDE_E* code. */
int sx_write_trace_range(const sm_model *m, const char *path, int64_t t0_ns, int64_t t1_ns);

/* Writes the formats in the SONDE_FORMAT_* mask as DIR/NAME.ext, each through a temporary
 * file; the CPU samples' (folded, pprof) only when the run has samples, offcpu only when the
 * off-CPU periods were followed. Prints nothing. 0, or a negative SONDE_E* code naming the
 * failing file in sonde_last_error() (the other formats are still written). */
int sx_write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats);
/* How many threads sx_write_formats writes the formats in the mask on: the calling one, and one
 * a CPU more (sm_report_threads) for the files written apart from the text ones, as far as there
 * are such files. */
int sx_write_threads(unsigned formats);
/* The formats a run's own configuration names (config.formats), every report's when it names
 * none or cannot be read: what `sonde export` writes without --format. */
unsigned sx_run_formats(const sm_model *m);

/* The reports whose files are written as the .sonde file is read, where the model will not hold
 * every section (report_max_sections): NAME.instances.csv, its rows as the sections close,
 * where sx_write_formats would read the file a second time for them. Set dir, name (NULL: the
 * run's) and formats (0: the run's own, sx_run_formats) before sx_read_file; the rest is its. */
typedef struct sx_early {
    const char *dir, *name;
    unsigned formats;
    int open;                /* the instances CSV is being written (af, rows) */
    afile af;
    sx_rows rows;
    int err;                 /* a write failed there (errno): the file is dropped */
} sx_early;
/* Reads path into m as sm_read_file_set does, writing e's early reports as it goes (a write
 * that fails there is said by sx_write_formats_early; the reading goes on). 0, or the reading's
 * SONDE_E* code; nothing of e is left open then. */
int sx_read_file(const char *path, const sm_kv *set, size_t n_set, sx_early *e, sm_model *m);
/* sx_write_formats for a model read by sx_read_file: what e wrote early is put in place (or
 * dropped, when the formats do not write it after all) and the rest written. e may be NULL. */
int sx_write_formats_early(const sm_model *m, const char *dir, const char *name,
                           unsigned formats, sx_early *e);
/* Drops what e wrote early (a model read but not written). */
void sx_early_drop(sx_early *e);
/* Prints the text summary to stderr (sonde_destroy with print_summary, `sonde run`); nothing
 * when out of memory. */
void sx_print_summary(const sm_model *m);
/* Calls fn with the path of every file the formats in the mask write for DIR/NAME, in the order
 * sx_write_formats writes them. 0, or SONDE_ENOMEM. */
int sx_each_path(const sm_model *m, const char *dir, const char *name, unsigned formats,
                 void (*fn)(const char *path, void *ctx), void *ctx);
/* Where the TensorBoard format goes: DIR/plugins/profile/RUN/HOST_PID.pt.trace.json.gz, RUN
 * being name less its -rankN in a distributed job (every rank a worker of one run). Allocated
 * (sonde__free); NULL when out of memory. */
char *sx_tensorboard_path(const sm_model *m, const char *dir, const char *name);
/* Writes one file whose format follows the extension of path. */
int sx_write_path(const sm_model *m, const char *path);

/* The duration columns of the text and HTML tables: the entries of SONDE_SECTION_STATS whose
 * table flag is set (1: every table; 2: the wide text table and the HTML table), in its order.
 * sx_stat_cols[i].off is the field's offset in sm_stat; sx_stat_col_s reads it. */
typedef struct sx_stat_col {
    const char *label;
    size_t off;
    int table;
} sx_stat_col;
extern const sx_stat_col sx_stat_cols[];
extern const size_t sx_n_stat_cols;
double sx_stat_col_s(const sm_stat *s, const sx_stat_col *c);

/* Human-readable durations and rates ("12.3 ms", "4.56 GFLOP/s"). */
void sx_fmt_dur(char *out, size_t cap, double s);

/* sonde analyze gpu's figures (analyze/gpu.h) appended to o: as text (each device's breakdown,
 * what the CPU did in the host waits, the kernels; the top of each list; run: a title line
 * naming it, NULL: neither title nor kernels, for NAME.txt) or as a JSON object (run: the command's document with its schema, a
 * line; NULL: the object alone, for NAME.json's gpu_activity.analysis). */
struct sa_gpu;
void sx_gpu_analysis_txt(sbuf *o, const char *run, const struct sa_gpu *g, size_t top);
void sx_gpu_analysis_json(sbuf *o, const char *run, const struct sa_gpu *g, size_t top);
void sx_fmt_si(char *out, size_t cap, double v, const char *unit);
/* One "key":"value" member of the JSON object being written into the sbuf ctx, preceded by a
 * comma unless the object was just opened: sm_each_meta's callback for every JSON writer. */
void sx_json_kv(const char *key, const char *value, void *ctx);

#endif
