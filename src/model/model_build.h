/* model_build.h - private: the decoded contents of a .sonde file, handed from reader.c to
 * model.c, which builds the model from them; and the helpers the model's files share. */
#ifndef SONDE_MODEL_BUILD_H
#define SONDE_MODEL_BUILD_H

#include <stddef.h>

#include "model.h"
#include "../format/tally.h"
#include "../util/buf.h"
#include "../util/strmap.h"

/* Ids of sites and interned strings stay below this in any file libsonde writes (its table holds
 * 4 Mi); a reader refuses larger ones, so no id in a crafted file can size an array. */
#define SM_MAX_ID SONDE_MAX_ID
#define SM_UNPLACED INT32_MIN /* sb_raw.sample_site: not placed yet */

/* One decoded event: 24 bytes. Its values, for the kinds that have them (a metric, a counter,
 * throughput, FLOPs, a diffusion record), are in its batch's value table. */
typedef struct sb_ev {
    uint64_t tick;
    uint32_t id, arg;
    uint8_t kind;
    uint32_t vi;     /* its values: sb_batch.v[vi - 1]; 0: none (all read as 0) */
} sb_ev;

typedef struct sb_thread {
    uint32_t index, tid;
    char *name;
} sb_thread;

/* A batch of one thread's events, in recording order. */
typedef struct sb_batch {
    const sb_ev *ev;
    size_t n;
    const double (*v)[SONDE_MAX_VALUES]; /* the values of its events that have some (e->vi) */
} sb_batch;
/* What the model does with a batch: 0, or -1 to stop (out of memory). */
typedef int (*sb_batch_fn)(void *ctx, const sb_batch *b);
/* Decodes thread t's events and hands them to fn a batch at a time, so no thread's events are
 * ever held whole (reader.c). warn: name each malformed block in a warning (the first pass over
 * the file does; a second would repeat them). 0, -1 when fn stopped, -2 out of memory. */
typedef int (*sb_events_fn)(void *src, size_t t, int warn, sb_batch_fn fn, void *ctx);

typedef struct sb_anchor {
    uint64_t tick, mono_ns, real_ns;
} sb_anchor;

/* One entry of an OPS record, as read (ops.c). */
typedef struct sm_op_raw {
    uint8_t kind;              /* SONDE_OP_* */
    uint32_t tid, stream;
    int32_t device;
    uint64_t id, start_mono, dur;
    int64_t bytes;
    double flops;
    char *name, *shapes;       /* shapes NULL when empty */
    uint8_t flags;             /* CPU: SONDE_OP_F_* */
    uint64_t table_child;      /* CPU with SONDE_OP_F_TABLE: its child time in the tracer's table */
} sm_op_raw;

/* CPU samples as read (profile.c): SAMPLES, STACKS and FUNCS records. */
typedef struct sm_sample_raw {
    uint32_t tid, stack;
    uint64_t t_mono;
} sm_sample_raw;
typedef struct sm_pstack_raw {
    uint32_t pid, n;
    char *process;
    uint32_t *f;               /* function ids, outermost first */
    char *file;                /* the innermost frame's source line (LINES), NULL: unknown */
    unsigned line;
    uint32_t *flines;          /* each function's line, n of them (FRAMELINES; 0: unknown),
                                  NULL: none recorded */
} sm_pstack_raw;
typedef struct sm_off_raw {    /* an off-CPU period (OFFCPU) */
    uint32_t tid, stack;
    uint64_t t_mono, ns;
} sm_off_raw;
typedef struct sm_pfunc_raw {
    char *name, *object;
    char *file;                /* where it is defined (FUNCLOC), NULL: unknown */
    unsigned line;
} sm_pfunc_raw;

/* What the caller of a reading asks for besides the model (sm_read_file_fed). */
typedef struct sb_opts {
    const sm_kv *set;  /* configuration facts set over the file's */
    size_t n_set;
    const sm_feed *feed; /* a sink fed every section as it closes (sm_read_file_fed), or NULL */
    uint64_t from;       /* the events' records before this offset are skipped (sm_read_file_from) */
    sm_resume *resume;   /* and where the records that describe the run are, or NULL */
    const sm_part *part; /* the part's open session (sm__skim_open_session), or NULL */
    const sm_consumer *const *ops; /* consumers fed each event kept (sm_read_file_ops) */
    void *const *states;
    size_t n_ops;
} sb_opts;

#define SB_MAX_DECODERS SM_REPORT_THREADS_MAX /* decoders of one reading at once (dec_end) */
/* A reading uses several threads (the checksums, the first pass) only for a file at least this
 * large, unless SONDE_READ_THREADS asks (a thread's start costs more than a small file's work). */
#define SM_SEVERAL_FROM_BYTES (4u << 20)

/* An EVENTS record whose checksum the reading left for later (reader.c): where its bytes begin
 * in the file, how many, and the CRC-32 its header gives. */
typedef struct sb_sum {
    uint64_t at;
    uint32_t len, crc;
} sb_sum;
/* Sums the n records of recs (in file order) in the file, in memory at data or else read from
 * fd, on up to threads threads (one where they are few), each taking the next run of records
 * and reading it at once. 0 when every sum is right; 1 when one differs or a record cannot be
 * read (the reading then reads the file again, summing each record as it goes, to say which);
 * -1 out of memory. checksums.c. */
int sm__check_records(const uint8_t *data, int fd, const sb_sum *recs, size_t n, int threads);
/* The len bytes at off of a file in memory at data, or else read from fd with pread into *buf
 * (grown to *cap as needed), valid until *buf's next use. NULL when out of memory (errno
 * ENOMEM) or the bytes could not be read (errno; EIO where the file ends first). reader.c. */
const uint8_t *sm__bytes_at(const uint8_t *data, int fd, uint64_t off, size_t len, uint8_t **buf,
                            size_t *cap);

typedef struct sb_raw {
    char *name, *host, *program, *cmdline, *clock, *unit, *sonde_version;
    int pid;
    double ticks_per_s, peak_flops;
    uint64_t bytes, dropped, clear_tick, end_tick, writer_cpu_ns, sampler_cpu_ns;
    uint64_t bp_chunks, bp_ns;      /* back-pressure: chunks recording threads wrote, time spent */
    sm_kv *info;
    size_t n_info, cap_info;
    int clean_end;
    int flushed_on_signal;     /* the last SIGNAL record's signal (0: none) */
    sm_site *sites;    /* as the file gives them (by id, some twice, gaps between): sm__build
                          makes them the model's dense table */
    size_t n_sites, cap_sites;
    sb_thread *threads;
    size_t n_threads;
    sb_opts opts;      /* what the caller of the reading asked for */
    sb_events_fn events; /* each thread's events, decoded on demand from events_src */
    void *events_src;
    /* Another decoder of the same file, for events in a thread of its own (its buffers; the
     * warnings its events give are kept apart until dec_end), NULL out of memory; and dec_end,
     * which adds the warnings of decs (n of them, at most SB_MAX_DECODERS) to the reading's in
     * thread order, as one decoder reading every thread in turn gives them, and frees decs: 0,
     * -1 out of memory. */
    void *(*dec_new)(void *events_src);
    int (*dec_end)(void *events_src, void **decs, int n);
    sb_anchor *anchors;
    size_t n_anchors;
    char **warnings;
    size_t n_warnings;
    sm_gpu_raw *gpu;  /* CUDA activity entries and runtime API calls */
    size_t n_gpu, cap_gpu;
    sm_op_raw *ops;   /* operators of another tracer (sonde_ops) */
    size_t n_ops, cap_ops;
    sm_sample_raw *samples; /* CPU samples with stacks */
    size_t n_samples, cap_samples;
    int32_t *sample_site; /* when not every section is held: each sample's innermost section's
                             site (-1 none), then each off-CPU period's (at its start), placed
                             as the sections were built (model.c); SM_UNPLACED: to be found in
                             the spans (a merged run's points from a run that held them all) */
    sm_pstack_raw *pstacks;
    size_t n_pstacks, cap_pstacks;
    sm_pfunc_raw *pfuncs;
    size_t n_pfuncs, cap_pfuncs;
    uint64_t samples_lost, stacks_cpu_ns;
    uint64_t samples_unnamed;  /* samples left out by an earlier build (sm__profile_merge) */
    uint64_t stacks_cfi;       /* samples unwound by the call frame information (STATS) */
    uint64_t stacks_py_way;    /* how the Python frames were read (STATS; sonde_pyway) */
    uint64_t stacks_py_kernel_runs, stacks_py_kernel_ns; /* the kernel's program's (STATS) */
    unsigned sample_hz;
    int samples_untimed;
    int samples_by_timer;      /* flag 2: taken in the threads by SIGPROF (cputimer.c) */
    int samples_by_counter;    /* flag 4: from per-thread CPU-clock counters */
    int samples_outside;       /* some were taken from outside the threads (a SAMPLES record
                                  without flag 2), kept through merges: pf_drop_taken_inside
                                  may drop those (samples_by_timer follows the most) */
    sm_off_raw *offs;          /* off-CPU periods */
    size_t n_offs, cap_offs;
    int off_followed;          /* an OFFCPU record was read: they were followed */
    uint8_t *summary;          /* the last SUMMARY record's payload (a copy), NULL none */
    size_t summary_len;
    int summary_stale;         /* events or skipped records came after it, or a record was
                                  skipped anywhere: it may not say what the events do */
    uint32_t id_bound;         /* events naming an id at or past it are a malformed block
                                  (SM_MAX_ID; less where the SUMMARY sized the site table) */
} sb_raw;

/* reader.c: the varint at *pp (advanced past it); 0, or -1 when it runs past end. */
int sm__get_var(const uint8_t **pp, const uint8_t *end, uint64_t *v);
/* reader.c: the string at *pp (a varint length, at most max, then its bytes) as a malloc'ed
 * NUL-terminated copy in *out; 0, -1 when malformed or longer than max, -2 out of memory. */
int sm__get_str(const uint8_t **pp, const uint8_t *end, size_t max, char **out);
/* gpu.c: one GPU record's entries appended to raw; 0, -1 malformed, -2 out of memory. */
int sm__gpu_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end);
/* Places the entries on the run's time line and links each to the section that launched it;
 * after the spans are built. 0, or -1 when out of memory. */
int sm__gpu_build(sb_raw *raw, sm_model *m);
void sm__gpu_free_raw(sb_raw *raw);
/* An array of nested intervals grouped by thread, each thread's in start order (m->spans,
 * m->ops): its fields' offsets in an element of size bytes. */
typedef struct sm_nested {
    const void *base;
    size_t n, size, thread, start, end, parent;
} sm_nested;
#define SM_NESTED(T, arr, n_)                                                                   \
    ((sm_nested){(arr), (n_), sizeof(T), offsetof(T, thread), offsetof(T, start_ns),            \
                 offsetof(T, end_ns), offsetof(T, parent)})
#define SM_SPANS(m) SM_NESTED(sm_span, (m)->spans, (m)->n_spans)
#define SM_OPS(m) SM_NESTED(sm_op, (m)->ops, (m)->n_ops)
/* Where each thread's items begin: first[t] .. first[t + 1] (n_threads + 1 entries, malloc'ed);
 * NULL when out of memory. */
size_t *sm__thread_firsts(const sm_nested *v, size_t n_threads);
/* The index of thread th's first item starting after t (first[th + 1] when none). */
size_t sm__first_after(const sm_nested *v, const size_t *first, uint32_t th, int64_t t);
/* The innermost item of thread th open at t, or -1 (first from sm__thread_firsts). */
int32_t sm__innermost_at(const sm_nested *v, const size_t *first, uint32_t th, int64_t t);
/* ops.c: one OPS record's entries appended to raw; 0, -1 malformed, -2 out of memory. */
int sm__ops_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end);
/* Places the operators on their threads (after the spans are built, before sm__gpu_build, to
 * which it hands their GPU work as CUDA activity). 0, or -1 when out of memory. */
int sm__ops_build(sb_raw *raw, sm_model *m);
/* The operators flagged SONDE_OP_F_HOOK_RANGE (as sm_op times), by thread and start: ranges in
 * which the tracer runs the program's hooks. sonde.torch flags autograd's AccumulateGrad ranges:
 * a section it closes from a gradient hook (backward=True) ends inside one, and the rest of that
 * range (the gradient added into .grad) is that section's work too. */
typedef struct sm_grange {
    uint32_t thread;
    int64_t start_ns, end_ns;
} sm_grange;
typedef struct sm_granges {
    sm_grange *r;
    size_t n;
} sm_granges;
/* Gathers them once the threads are built. 0, or -1 out of memory. */
int sm__granges(const sb_raw *raw, const sm_model *m, sm_granges *g);
/* Where a section of thread that began at start and closes at t ends: at the end of the
 * hook range that began inside it and holds t, else t. */
int64_t sm__grange_end(const sm_granges *g, uint32_t thread, int64_t start, int64_t t);
void sm__ops_free_raw(sb_raw *raw);

/* profile.c: one SAMPLES, STACKS, FUNCS, FUNCLOC, LINES or OFFCPU record appended to raw; 0,
 * -1 malformed, -2 out of memory. */
int sm__profile_parse(sb_raw *raw, unsigned type, const uint8_t *p, const uint8_t *end);
/* The profile from the samples, each placed in the innermost section open on its thread then
 * (after the spans are built). 0, or -1 when out of memory. */
int sm__profile_build(sb_raw *raw, sm_model *m);
/* profile.c: raw's samples, stacks, functions and off-CPU periods moved into a sb_raw of m's own
 * (m->praw), for sm_merge; nothing when raw has none. 0, or -1 out of memory. */
int sm__profile_keep(sb_raw *raw, sm_model *m);
/* profile.c: s's kept profile input appended to d's (its stacks' functions matched to d's by
 * name, object and place, its sections' sites moved by site0), and d's profile built again from
 * both, d's sections (s's merged into them) placing the samples. A side read back from a JSON
 * report has no input kept: d's profile stays as it was. 0, or -1 out of memory. */
int sm__profile_merge(sm_model *d, sm_model *s, uint32_t site0);
/* profile.c: stack st as a folded line into line: "process;outermost;...;innermost", each
 * function funcs[at[id]] (at NULL: funcs[id]) with the folded format's separators replaced. */
/* The variant of raw stack st's lines (FRAMELINES) under owner (a folded or off-CPU stack)
 * among those seen: its index, -1 when new (key then holds its key for strmap_put), -2 out of
 * memory. */
int sm__flines_find(const strmap *seen, sbuf *key, uint32_t owner, const sm_pstack_raw *st);
/* Appends raw stack st's lines (FRAMELINES, st->n of them) to pr->flines. 0, or -1 out of
 * memory. */
int sm__add_flines(sm_profile *pr, const sm_pstack_raw *st);
void sm__fold_line(sbuf *line, const sm_pstack_raw *st, const sm_func *funcs, const uint32_t *at);
/* offcpu.c: an OFFCPU record's periods appended to raw; 0, -1 malformed, -2 out of memory. */
int sm__offcpu_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end);
/* offcpu.c: raw's off-CPU periods summed by stack into m->profile (its functions built and
 * sorted, at[raw function id] their places), the longest kept for the trace, and by the section
 * each began in (site[i]: the site of the innermost section open on period i's thread at its
 * start, -1 none; site NULL: none known); 0, or -1 out of memory. */
int sm__offcpu_build(const sb_raw *raw, sm_model *m, const uint32_t *at, const int32_t *site);
void sm__profile_free_raw(sb_raw *raw);

/* Moves what it keeps out of raw into m (raw is freed by the caller either way). */
int sm__build(sb_raw *raw, sm_model *m, const char *fname);
void sb_raw_free(sb_raw *raw);

/* A section shorter than min_duration_s, flagged while building (model.c) and removed before
 * the build ends: no model holds one. */
#define SM_SPAN_SHORT 0x8000u

/* Shared by the model's files (model.c, stats.c, merge.c). */
/* An interval of time, ns. */
typedef struct sm_iv {
    int64_t s, e;
} sm_iv;
/* Wall time covered by a set of intervals (overlaps counted once), in seconds. Sorts v. */
double sm__union_s(sm_iv *v, size_t n);
/* The name of a throughput unit (a site id; 0: the run's unit). */
const char *sm__unit_name(const sm_model *m, uint32_t unit);
/* Per-name statistics fed one section at a time (stats.c): the one computation behind the
 * run's statistics, which the build feeds as each section closes, and behind sm_stats, which
 * feeds them from the spans. A name keeps its durations while it has at most SM_SKETCH_AT
 * instances (exact percentiles), then running figures and its sketch: memory grows with the
 * names and with the sections that carry throughput or FLOPs (an interval each), not with the
 * others. */
typedef struct sm_giv {
    int g, kind;               /* group; 0: throughput over its own duration, 1: FLOPs */
    sm_iv iv;
} sm_giv;
__extension__ typedef unsigned __int128 sm_u128;
typedef struct sm_sgroup {
    sm_stat st;                /* the figures kept as they come (name unset, sketch owned) */
    const char *name;          /* borrowed from the model's sites */
    double *dur;               /* durations (s) while it has at most SM_SKETCH_AT instances */
    size_t n_dur, cap_dur;
    /* Integer sums, exact, so that the figures do not depend on the order the instances are
     * added in (sm__sink_merge): of every duration and of its square (mean and deviation once
     * past SM_SKETCH_AT; each saturates rather than wraps), of the outermost instances' (the
     * total) and of the self times. */
    uint64_t sum_ns;
    sm_u128 sumsq;
    int64_t total_ns, self_ns;
    uint32_t last_thread;      /* instances come thread by thread: distinct threads */
} sm_sgroup;
typedef struct sm_statsink {
    int *site_group;           /* each site's group (sites of one name share it) */
    sm_sgroup *g;
    size_t n_groups;
    sm_giv *iv;
    size_t n_iv, cap_iv;
} sm_statsink;
/* 0, or -1 out of memory (k empty). */
int sm__sink_init(sm_statsink *k, const sm_model *m);
/* The same for the spans sel names only: its cost is theirs, not the model's every site (a
 * session's statistics, for each of 20,000 sessions); site_group is set for their sites alone. */
int sm__sink_init_sel(sm_statsink *k, const sm_model *m, sm_spans_sel sel);
/* One section instance, closed, not END_LOST; a thread's come together. outermost: no
 * instance of its name encloses it (its duration counts in the total). 0, or -1 out of memory. */
int sm__sink_add(sm_statsink *k, const sm_model *m, const sm_span *s, int outermost);
/* The statistics of the names fed (*out malloc'ed, sorted by total time; NULL and 0 when none),
 * share of share_of_s. The sketches move to *out; free k after. 0, or -1 out of memory. */
int sm__sink_finish(sm_statsink *k, const sm_model *m, double share_of_s, sm_stat **out,
                    size_t *n);
/* Adds what from was fed to into (both initialized from one model; from's sketches may move to
 * into): the figures are those feeding into with from's instances too gives, in any order, as
 * the sums are integers and the durations kept are sorted before they are read. 0, or -1 out
 * of memory. */
int sm__sink_merge(sm_statsink *into, sm_statsink *from);
void sm__sink_free(sm_statsink *k);
/* sm_stats with its failure told apart from no statistics: 0 (*out NULL when no section is
 * kept), or -1 out of memory. */
int sm__stats(const sm_model *m, sm_spans_sel sel,
              double share_of_s, sm_stat **out, size_t *n_out);

/* Statistics of another run (from, n_from) added into *into by name (merge.c, for models that
 * do not hold every section): counts and totals summed, mean and deviation pooled, percentiles
 * from the merged sketches; a name only from's is moved out of from. unit_from (from's run's
 * unit) becomes unit_to. share of share_of_s, sorted again. 0, or -1 out of memory. */
int sm__stats_combine(sm_stat **into, size_t *n_into, sm_stat *from, size_t n_from,
                      const char *unit_from, const char *unit_to, double share_of_s);

/* The throughput per unit (sm_model.rates) from the spans and sessions, units recorded inside a
 * section or session that recorded the same unit counted once, in the outer one (nested, when
 * not NULL, receives how many section instances that left out). 0, or -1 out of memory. */
int sm__build_rates(sm_model *m, unsigned long long *nested);
/* Where m->stats stand when sm__derive runs. */
typedef enum sm_stats_from {
    SM_STATS_FROM_SPANS, /* not computed yet: from the sections held (a merge of whole runs) */
    SM_STATS_FED,        /* fed by the build as each section closed; the hot functions' counted
                            calls (sonde.aggregated) still to be folded in */
    SM_STATS_FOLDED      /* complete, counted calls included (a merge of runs held in part,
                            whose statistics were merged) */
} sm_stats_from;
/* What is computed from the instances once they are in place: order, active steps, statistics
 * as `from` says, resources, totals, the trace budget. Run after a build and after a merge. 0,
 * or -1. */
int sm__derive(sm_model *m, sm_stats_from from);

/* records.c: instants, steps, counters and metrics as the build reads them, and what a report
 * holds of them past report_max_records (docs/formats.md, "Held records"). */

/* What the first pass found that the plan needs. */
typedef struct sm_records_seen {
    uint64_t instants, step_ends, last_step;
    const sonde_idcount *inst; /* instants per name id (format/tally.h) */
    const uint32_t *rank;    /* file id -> site when renumbered, else NULL */
    int one_thread;          /* every step marked by one thread */
    int dump;                /* a flight recorder's window (sort_steps' first step) */
} sm_records_seen;

typedef struct sm_records {
    uint64_t max;            /* config report_max_records (0: every one held) */
    uint64_t step_mask;      /* steps held: one in step_mask + 1 (0: every one) */
    int64_t st_prev_end, st_begin; /* steps of one thread: where the next one starts */
    int st_cut;              /* ... and its first is left out (a flight recorder's window) */
    strmap counters, metrics; /* name -> index */
    size_t cap_counters, cap_metrics, cap_steps, cap_metasum;
    int32_t *ms_first;       /* per statistics group: its first sm_metasum, -1 none */
    size_t ms_groups;
} sm_records;

/* Plans what is held (once the sites are built): a share of the bound per instant name, one
 * step in a power of two. 0, or -1 out of memory. */
int sm__records_plan(sm_records *r, sm_model *m, const sm_records_seen *seen);
/* Counts an instant of the site; 1 when it is held (m->instants takes it), 0 when not. */
int sm__instant_held(sm_records *r, sm_model *m, uint32_t site);
/* A STEP event (arg as recorded) at t on thread: held, an anchor or counted. 0, or -1. */
int sm__add_step(sm_records *r, sm_model *m, int64_t t, uint32_t thread, uint64_t arg);
/* A counter's sample, a metric's value (owner: section, "session NAME" or "run"). 0, or -1. */
int sm__add_counter(sm_records *r, sm_model *m, const char *name, int64_t t, double v,
                    int system);
int sm__add_metric(sm_records *r, sm_model *m, const char *owner, const char *name, double v);
/* A section's metadata as it closes, in a run whose sections are held in part (group: its
 * name's statistics group, of n_groups): into m->metasum, the span flagged
 * SM_SPAN_META_SUMMED. 0, or -1 out of memory. */
int sm__sum_meta(sm_records *r, sm_model *m, sm_span *s, int group, size_t n_groups);
/* A section folded: its extras and metadata entries are let go when they were the last made
 * (they are, unless an instant's payload came between). */
void sm__fold_meta(sm_model *m, sm_span *s);
/* 1 when the span's extras are metadata alone (no throughput, FLOPs or unit). */
int sm__meta_only(const sm_model *m, const sm_span *s);
void sm__records_free(sm_records *r);
/* 1 when step number step is in an active window of the run's schedule (always without one). */
int sm__step_active(const sm_model *m, uint64_t step);
/* min_duration_s (derive.c): instances shorter than min_ns, flagged SM_SPAN_SHORT by the build,
 * leave the model unless they carry throughput, FLOPs or a diffusion record; what was nested in
 * one takes its nearest ancestor kept. 0, or -1 out of memory. */
int sm__drop_short(sm_model *m, int64_t min_ns);
/* Folds the hot functions' counted calls (SM_AGGREGATED_EVENT) into m->stats. 0, or -1. */
int sm__fold_aggregated(sm_model *m);
/* site_stat[i] (room for m->n_sites): the index in stats of the entry named as site i, -1 none,
 * by a hash of the names; set for the sites of sel's spans only when sel names some. 0, or -1
 * out of memory. */
int sm__site_stats(const sm_model *m, const sm_stat *stats, size_t n_stats, sm_spans_sel sel,
                   int *site_stat);

/* skim.c - the first pass over every thread's events: what must be known before any section is
 * built (model.c's sm__build). Held sections: it matches each thread's begins and ends as the
 * build will and counts their durations in ticks in a log histogram (values under 64 ticks
 * exactly, then 64 buckets an octave: at most 1.6% wide), from which the build finds the
 * shortest duration held (the bucket's edge in ns: a section within a nanosecond of it may fall
 * on either side).
 * It counts sections the build will leave out (before a clear, outside the schedule's windows)
 * and closes a section whose end was lost where the build gives it none: both only raise the
 * bound, so no more are held than were meant to be. */
/* A tick as ns since cut_tick, clamped to +-2^62 ns (146 years; only a crafted file's ticks reach
 * it), so that the difference of any two such times fits an int64_t. */
#define SM_REL_MAX_NS (((int64_t)1 << 62) - 1) /* a fuzzed file's ends at -2^62 and +2^62
                                                     overflowed */
static inline int64_t sm__rel(uint64_t cut_tick, double ns_per_tick, uint64_t tick)
{
    double v = (double)(int64_t)(tick - cut_tick) * ns_per_tick;
    return v < (double)SM_REL_MAX_NS ? v > -(double)SM_REL_MAX_NS ? (int64_t)v : -SM_REL_MAX_NS
                                     : SM_REL_MAX_NS;
}


/* What the first pass finds: the run's end when it did not end cleanly, the ids named, the
 * dropped events GAP markers place, the sessions and the step schedule's mode changes (few, in
 * the order of the threads, then of their events), the last step, how many steps ended and
 * instants of each name there are (what the report can hold of them: sm__records_plan), and the
 * sections' durations. */
typedef struct sm_skim {
    int clean_end;           /* set by the caller, with end_tick: the file's */
    uint64_t end_tick;
    sonde_tally t;           /* the counts, the ids named, the sections' durations in ticks
                                (those open at their thread's end closed at the run's) */
    sonde_tally_sess *sess;  /* the sessions' begins and ends */
    size_t n_sess, cap_sess;
    sonde_tally_mode *modes; /* the step schedule's mode changes */
    size_t n_modes, cap_modes;
    uint8_t *own;            /* per file thread: 1 when its events build nothing the threads
                                share (no SONDE_SHARED_KIND): model.c may build it on a thread
                                of its own */
    int summary;             /* from the file's SUMMARY record, not from a first pass */
} sm_skim;
/* The first pass over raw's threads' events into sk (clean_end and end_tick set, the rest 0):
 * their tally (format/tally.h), the sections open at their thread's end closed at the run's
 * (sk's end_tick, or cut_tick if later). Where the events are many and spread over several
 * threads, several threads of this process read them (one a CPU, at most SB_MAX_DECODERS;
 * SONDE_READ_THREADS chooses), each its own file threads into its own tally, merged after in
 * the order of the file's threads: sk is the same either way, and so are the reading's
 * warnings. 0, or -1 out of memory. */
int sm__skim(sb_raw *raw, uint64_t cut_tick, sm_skim *sk);
/* sk as sm__skim would find it, from the file's SUMMARY record (raw->summary) instead of a pass
 * over the events, with raw->id_bound the site table's size (raw->sites sorted by id, each once):
 * 0; 1 when there is none to trust (no record, a part of a file, a run that did not end
 * cleanly, records skipped or events after it, SONDE_READ_SUMMARY=0) or its ids are sparse
 * enough to be renumbered (a first pass finds the ids the events name); 2 when it is
 * malformed (the caller says so): then sm__skim reads the events; -1 out of memory. */
int sm__skim_summary(sb_raw *raw, uint64_t cut_tick, sm_skim *sk);
/* The begin of a session open when a part of a file began (sm_part) among the first pass's
 * session events (its thread one of the n_threads read), unless they hold it already. 0, or -1 out of memory. */
int sm__skim_open_session(sm_skim *sk, const sm_part *part, size_t n_threads);
/* How many threads read raw's events at once, the first pass's (sm__skim) and the build's:
 * sm__threads_for the file's size, for a file of several threads; never more than the file has
 * threads. */
int sm__readers_for(const sb_raw *raw);
/* How many threads a reading of a file of bytes bytes may use: sm_report_threads where
 * SONDE_READ_THREADS is set or the file has SM_SEVERAL_FROM_BYTES or more, else 1. */
int sm__threads_for(uint64_t bytes);
void sm__skim_free(sm_skim *sk);

/* model.c - the build: what every file thread's sections are built with. A file thread built
 * on a thread of its own (build_threads.c) has a copy of its own, with the model of its own it
 * builds into. */
/* What every thread's build reads and none changes, set before the build begins: a fragment
 * built on another thread (build_threads.c) takes a copy of the whole. The arrays are the run's
 * (bctx_free frees them). */
typedef struct bset {
    uint64_t cut_tick;
    double ns_per_tick;
    int dump;                /* a flight recorder's window: what is open at its end ends past it */
    int warn_events;         /* the build names malformed event blocks (no first pass did) */
    int lost_at_end;         /* the file dropped events no GAP marks (a thread's last ones, or
                                writes that failed): a section open at the end lost its end */
    /* the step schedule's modes over time (MODE events): kept = ACTIVE */
    int64_t *mode_t;
    int *mode_active;
    size_t n_modes;
    uint32_t *rank;          /* file id -> site index when the ids were sparse (build_sites) */
    int64_t min_ns;          /* config min_duration_s: shorter sections are left out (0: none) */
    sm_granges grad;         /* the hook ranges among the operators (ops.c) */
    /* held sections (report_max_sections, settle) */
    int64_t held_min_ns;     /* INT64_MIN: every section is held */
    uint64_t held_ticks;     /* else those lasting at least this many ticks */
    uint64_t edge_lo, edge_hi; /* the durations (ticks) of the histogram bucket just under
                                held_ticks (edge_hi), in [edge_lo, edge_hi); none: 0, 0 */
    uint64_t edge_every;     /* of each thread's, every edge_every-th is held too */
    sb_raw *raw;
    uint32_t *smp;           /* held sections: CPU samples by thread and time (place_samples) */
} bset;

/* What a build counts as it goes: a fragment's are added to the run's (bcount_add). */
typedef struct bcount {
    uint64_t unmatched_ends, gaps, gap_events, unterminated;
    uint64_t end_lost;       /* sections whose end was among the dropped events */
    uint64_t built, folded;  /* sections built; of them, folded */
} bcount;

static inline void bcount_add(bcount *to, const bcount *n)
{
    to->unmatched_ends += n->unmatched_ends;
    to->gaps += n->gaps;
    to->gap_events += n->gap_events;
    to->unterminated += n->unterminated;
    to->end_lost += n->end_lost;
    to->built += n->built;
    to->folded += n->folded;
}

/* The build: its settings, its counts, and the state of the thread being built. */
typedef struct bctx {
    sm_model *m;
    bset set;
    bcount n;
    size_t cap_spans, cap_span_x, cap_meta, cap_inst, cap_sessions,
        cap_warn, cap_dsteps, cap_blocks;
    sm_statsink sink;        /* the run's statistics, fed as each section closes */
    uint32_t *open_n;        /* per name (sink group): its instances open on the thread built */
    sm_records rec;          /* instants, steps, counters, metrics (records.c) */
    uint64_t edge_seen;      /* of the thread built's edge sections, those seen (set.edge_every) */
    sm_statsink *ssink;      /* per session, when some sections are folded */
    size_t n_ssink, cap_folds;
    int32_t top_run;         /* the thread being built: the run open at its top level, -1 none */
    int feeding;             /* raw->opts.feed is handed every section as it closes */
    uint64_t seen_sections;  /* the sections the first pass counted (held_bound) */
    int each_stopped;        /* raw->opts.feed asked to stop */
    int fragment;            /* a file thread's build on a helper (build_threads.c) */
    int summary_wrong;       /* it met an event the SUMMARY record said its thread had none of */
    int summary_malformed;   /* the SUMMARY record was malformed: the first pass read the events */
} bctx;

/* Builds file thread t's sections (its events decoded from src, raw's or a decoder of its own)
 * into b and its model, those open at its end closed at end_tick. 0, or -1 out of memory or when
 * its events could not be read. */
int sm__build_thread(bctx *b, void *src, size_t t, uint64_t end_tick);
/* Builds every file thread's sections in thread order (build_threads.c): those whose events
 * build nothing shared (own[t], NULL: none) on helper threads into fragments, merged in turn.
 * 0, or -1 as sm__build_thread. */
int sm__build_threads(bctx *b, const uint8_t *own, uint64_t end_tick);
/* Where more sessions keep statistics of their own (folded sections), every thread is built in
 * turn: a fragment would start with a statistics sink for each. */
#define SM_OWN_MAX_SESSIONS 64

#endif
