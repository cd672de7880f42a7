/* perfetto.c - Perfetto's own trace format (NAME.pftrace): a protobuf `Trace`, one TracePacket
 * after another, each a TrackEvent or a TrackDescriptor (protos/perfetto/trace/ in Perfetto's
 * tree). Tracks: a process track per process, a thread track per thread, under each thread a
 * "cpu ops" track for another tracer's operators, a counter track per counter, and "steps",
 * "sessions" and one track per GPU stream under the run's process.
 *
 * Each thread's sections are one packet sequence in time order: a slice begins and ends as two
 * events, names are interned (an EventName sent once per sequence, then its iid), and times are
 * deltas from the event before on a sequence-scoped incremental clock declared by a
 * ClockSnapshot, so an event costs a few bytes where the JSON trace spends about 90. The
 * packets are then zlib-compressed in batches (TracePacket.compressed_packets, which Perfetto
 * inflates on loading). The trace budget (sm_trace_budget) folds the same sections as the JSON
 * trace does (sm_folder). Written in pieces of 256 KiB, never held whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export.h"
#include "../util/alloc.h"
#include "../util/pb.h"

/* Packets are compressed in batches of about this many bytes: Perfetto wants each
 * compressed_packets packet under 512 KiB. */
#define FLUSH_AT (256u << 10)

/* Field numbers of the messages written (Perfetto's protos). */
enum {
    TRACE_PACKET = 1,
    /* TracePacket */
    TP_COMPRESSED = 50, TP_CLOCK_SNAPSHOT = 6, TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11,
    TP_INTERNED = 12, TP_SEQ_FLAGS = 13, TP_CLOCK_ID = 58, TP_DEFAULTS = 59, TP_TRACK = 60,
    /* ClockSnapshot, ClockSnapshot.Clock */
    CS_CLOCK = 1, CLK_ID = 1, CLK_TS = 2, CLK_INCREMENTAL = 3,
    /* TracePacketDefaults, TrackEventDefaults */
    DEF_CLOCK_ID = 58, DEF_TRACK_EVENT = 11, TED_TRACK = 11,
    /* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
    TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8,
    PD_PID = 1, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5,
    /* TrackEvent */
    TE_CATEGORY = 3, TE_ARG = 4, TE_TYPE = 9, TE_NAME_IID = 10, TE_TRACK = 11, TE_NAME = 23,
    TE_COUNTER = 44,
    /* DebugAnnotation */
    DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6, DA_NAME = 10,
    /* InternedData, EventCategory / EventName */
    ID_CATEGORY = 1, ID_NAME = 2, IN_IID = 1, IN_NAME = 2,
};
enum { TYPE_BEGIN = 1, TYPE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { CLOCK_BOOTTIME = 6, CLOCK_SEQUENCE = 64 }; /* 64: the first sequence-scoped clock id */

/* The categories, interned as iid = index + 1 on every sequence. */
static const char *const g_cats[] = {"section", "folded",     "event",      "cpu_op",
                                     "step",    "session",    "kernel",     "gpu_memcpy",
                                     "gpu_memset", "off_cpu"};
enum { CAT_SECTION = 1, CAT_FOLDED, CAT_EVENT, CAT_OP, CAT_STEP, CAT_SESSION, CAT_KERNEL,
       CAT_OFFCPU = 10 };

/* Track uuids: a kind in the top byte, an index below. */
#define UUID_PROCESS(pid) ((1ull << 56) + (uint64_t)(uint32_t)(pid))
#define UUID_THREAD(i) ((2ull << 56) + (i))
#define UUID_OPS(i) ((3ull << 56) + (i))
#define UUID_COUNTER(i) ((4ull << 56) + (i))
#define UUID_GPU(key) ((5ull << 56) + (key))
#define UUID_STEPS (6ull << 56)
#define UUID_SESSIONS ((6ull << 56) + 1)
#define UUID_OFFCPU(pid, tid) ((7ull << 56) + ((uint64_t)(uint32_t)(pid) << 24) + (tid))

typedef struct pw {
    sbuf b;               /* packets not yet written */
    sbuf label;           /* a folded run's name (run_slice) */
    uint8_t *z;           /* their compressed form */
    size_t z_cap;
    sx_sink sink;
    void *ctx;
    int err;
    const sm_model *m;
    int64_t off;          /* added to every time: the earliest one becomes 0 */
    uint32_t next_seq;    /* the next sequence id */
    uint32_t seq;         /* the open sequence */
    int incremental;      /* its times are deltas on CLOCK_SEQUENCE */
    uint64_t last;        /* its last time */
    uint8_t *seen;        /* names interned on it, one bit per name */
    size_t seen_bytes;
    unsigned seen_cats;   /* categories interned on it, one bit per category */
    int stack_info;       /* with_stack: where each section is in the source */
    size_t off_tracks;    /* off-CPU tracks described */
    int run_pid;          /* the run's process */
} pw;

/* Writes the packets held, once they reach FLUSH_AT bytes (or force), as one TracePacket whose
 * compressed_packets are their zlib-compressed bytes (level 1): about a tenth of their size. */
static void flush(pw *w, int force)
{
    if (w->b.oom)
        w->err = -1;
    if (w->err || !w->b.len || (!force && w->b.len < FLUSH_AT))
        return;
    uLongf zn = compressBound((uLong)w->b.len);
    if (zn > w->z_cap) {
        uint8_t *z = sonde__malloc(zn);
        if (!z) {
            w->err = -1;
            return;
        }
        sonde__free(w->z);
        w->z = z;
        w->z_cap = zn;
    }
    if (compress2(w->z, &zn, (const Bytef *)w->b.data, (uLong)w->b.len, 1) != Z_OK) {
        w->err = -1;
        return;
    }
    uint8_t head[32], inner[12];
    size_t ni = varint_put(inner, (uint64_t)TP_COMPRESSED << 3 | 2);
    ni += varint_put(inner + ni, zn);
    size_t nh = varint_put(head, (uint64_t)TRACE_PACKET << 3 | 2);
    nh += varint_put(head + nh, ni + zn);
    memcpy(head + nh, inner, ni);
    if (w->sink(w->ctx, (const char *)head, nh + ni) != 0 ||
        w->sink(w->ctx, (const char *)w->z, zn) != 0)
        w->err = -1;
    sbuf_reset(&w->b);
}

/* ---- sequences and packets ---- */

static uint64_t abs_time(const pw *w, int64_t t_ns)
{
    int64_t v = t_ns + w->off;
    return v > 0 ? (uint64_t)v : 0;
}

/* Opens a new sequence whose events go to track unless they say otherwise. incremental: its
 * times are deltas from first_ns (they must not go back). Names and categories are interned
 * on it as they come (intern). */
static void seq_open(pw *w, uint64_t track, int incremental, int64_t first_ns)
{
    sbuf *b = &w->b;
    w->seq = w->next_seq++;
    w->incremental = incremental;
    w->last = abs_time(w, first_ns);
    if (w->seen)
        memset(w->seen, 0, w->seen_bytes);
    w->seen_cats = 0;
    size_t p = pb_open(b, TRACE_PACKET);
    pb_uint(b, TP_SEQ_ID, w->seq);
    pb_uint(b, TP_SEQ_FLAGS, SEQ_CLEARED);
    size_t d = pb_open(b, TP_DEFAULTS);
    if (incremental)
        pb_uint(b, DEF_CLOCK_ID, CLOCK_SEQUENCE);
    size_t e = pb_open(b, DEF_TRACK_EVENT);
    pb_uint(b, TED_TRACK, track);
    pb_close(&w->b, e);
    pb_close(&w->b, d);
    if (incremental) { /* the clock: CLOCK_SEQUENCE reads first_ns when BOOTTIME does */
        pb_uint(b, TP_TIMESTAMP, w->last);
        pb_uint(b, TP_CLOCK_ID, CLOCK_BOOTTIME);
        size_t cs = pb_open(b, TP_CLOCK_SNAPSHOT);
        size_t c = pb_open(b, CS_CLOCK);
        pb_uint(b, CLK_ID, CLOCK_BOOTTIME);
        pb_uint(b, CLK_TS, w->last);
        pb_close(&w->b, c);
        c = pb_open(b, CS_CLOCK);
        pb_uint(b, CLK_ID, CLOCK_SEQUENCE);
        pb_uint(b, CLK_TS, w->last);
        pb_uint(b, CLK_INCREMENTAL, 1);
        pb_close(&w->b, c);
        pb_close(&w->b, cs);
    }
    pb_close(&w->b, p);
}

/* Opens an event's packet at t_ns on the open sequence (never before its last time: a section
 * ending after its parent is drawn ending with it). Returns where pb_close must close it. */
static size_t packet_open(pw *w, int64_t t_ns)
{
    sbuf *b = &w->b;
    uint64_t t = abs_time(w, t_ns);
    size_t p = pb_open(b, TRACE_PACKET);
    if (w->incremental) {
        if (t < w->last)
            t = w->last;
        pb_uint(b, TP_TIMESTAMP, t - w->last);
        w->last = t;
    } else {
        pb_uint(b, TP_TIMESTAMP, t);
    }
    pb_uint(b, TP_SEQ_ID, w->seq);
    pb_uint(b, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
    return p;
}

/* Interns, in the packet being written, the category cat and the name number id (its text:
 * name; SIZE_MAX: none) when the open sequence has not had them yet. Returns the name's iid. */
static uint64_t intern(pw *w, int cat, size_t id, const char *name)
{
    int new_cat = !(w->seen_cats & (1u << cat));
    int new_name = id != SIZE_MAX && !(w->seen[id / 8] & (1u << (id % 8)));
    if (new_cat || new_name) {
        size_t in = pb_open(&w->b, TP_INTERNED);
        if (new_cat) {
            w->seen_cats |= 1u << cat;
            size_t c = pb_open(&w->b, ID_CATEGORY);
            pb_uint(&w->b, IN_IID, (uint64_t)cat);
            pb_str(&w->b, IN_NAME, g_cats[cat - 1]);
            pb_close(&w->b, c);
        }
        if (new_name) {
            w->seen[id / 8] |= (uint8_t)(1u << (id % 8));
            size_t e = pb_open(&w->b, ID_NAME);
            pb_uint(&w->b, IN_IID, id + 1);
            pb_str(&w->b, IN_NAME, name);
            pb_close(&w->b, e);
        }
        pb_close(&w->b, in);
    }
    return id != SIZE_MAX ? id + 1 : 0;
}

/* A slice's end (or, with name NULL and type TYPE_END, nothing but the type). */
static void end_event(pw *w, int64_t t_ns)
{
    size_t p = packet_open(w, t_ns);
    size_t e = pb_open(&w->b, TP_TRACK_EVENT);
    pb_uint(&w->b, TE_TYPE, TYPE_END);
    pb_close(&w->b, e);
    pb_close(&w->b, p);
    flush(w, 0);
}

static void arg_str(pw *w, const char *key, const char *value)
{
    size_t a = pb_open(&w->b, TE_ARG);
    pb_str(&w->b, DA_NAME, key);
    pb_str(&w->b, DA_STRING, value);
    pb_close(&w->b, a);
}

static void arg_num(pw *w, const char *key, double v)
{
    size_t a = pb_open(&w->b, TE_ARG);
    pb_str(&w->b, DA_NAME, key);
    pb_double(&w->b, DA_DOUBLE, v);
    pb_close(&w->b, a);
}

static void arg_int(pw *w, const char *key, int64_t v)
{
    size_t a = pb_open(&w->b, TE_ARG);
    pb_str(&w->b, DA_NAME, key);
    pb_uint(&w->b, DA_INT, (uint64_t)v);
    pb_close(&w->b, a);
}

static void arg_kv(const char *key, const char *value, void *ctx)
{
    arg_str(ctx, key, value);
}

/* A slice's beginning or an instant named by the interned name id (or, id SIZE_MAX, by name
 * itself). Leaves the TrackEvent open (returned with its packet's start in *packet) for
 * arguments. */
static size_t event_open(pw *w, int64_t t_ns, int type, int cat, size_t id, const char *name,
                         size_t *packet)
{
    *packet = packet_open(w, t_ns);
    uint64_t iid = intern(w, cat, id / 8 < w->seen_bytes ? id : SIZE_MAX, name);
    size_t e = pb_open(&w->b, TP_TRACK_EVENT);
    pb_uint(&w->b, TE_TYPE, (uint64_t)type);
    pb_uint(&w->b, TE_CATEGORY, (uint64_t)cat);
    if (iid)
        pb_uint(&w->b, TE_NAME_IID, iid);
    else
        pb_str(&w->b, TE_NAME, name);
    return e;
}

static void event_close(pw *w, size_t e, size_t packet)
{
    pb_close(&w->b, e);
    pb_close(&w->b, packet);
    flush(w, 0);
}

/* ---- tracks ---- */

static void track(pw *w, uint64_t uuid, uint64_t parent, const char *name, int pid, int64_t tid,
                  int counter)
{
    sbuf *b = &w->b;
    size_t p = pb_open(b, TRACE_PACKET);
    size_t t = pb_open(b, TP_TRACK);
    pb_uint(b, TD_UUID, uuid);
    if (parent)
        pb_uint(b, TD_PARENT, parent);
    if (tid >= 0) {
        size_t d = pb_open(b, TD_THREAD);
        pb_uint(b, THD_PID, (uint64_t)pid);
        pb_uint(b, THD_TID, (uint64_t)tid);
        pb_str(b, THD_NAME, name);
        pb_close(&w->b, d);
    } else if (!parent) {
        size_t d = pb_open(b, TD_PROCESS);
        pb_uint(b, PD_PID, (uint64_t)pid);
        pb_str(b, PD_NAME, name);
        pb_close(&w->b, d);
    } else {
        pb_str(b, TD_NAME, name);
    }
    if (counter)
        pb_close(&w->b, pb_open(b, TD_COUNTER));
    pb_close(&w->b, t);
    pb_close(&w->b, p);
    flush(w, 0);
}

static int thread_pid(const sm_model *m, size_t i, int run_pid)
{
    return m->threads[i].pid > 0 ? m->threads[i].pid : run_pid;
}


static uint64_t gpu_key(const sm_gpu *g)
{
    return ((uint64_t)g->device << 32) | g->stream;
}

static void tracks(pw *w, int run_pid)
{
    const sm_model *m = w->m;
    track(w, UUID_PROCESS(run_pid), 0, m->name, run_pid, -1, 0);
    for (size_t i = 0; i < m->n_threads; i++) { /* other processes (`sonde run`): their own */
        int pid = thread_pid(m, i, run_pid);
        size_t j = 0;
        while (j < i && thread_pid(m, j, run_pid) != pid)
            j++;
        if (pid != run_pid && j == i) {
            char label[160];
            snprintf(label, sizeof label, "%s (pid %d)", m->threads[i].name, pid);
            track(w, UUID_PROCESS(pid), 0, label, pid, -1, 0);
        }
        track(w, UUID_THREAD(i), 0, m->threads[i].name, pid, (int64_t)sm_thread_tid(m, i),
              0);
    }
    if (m->n_steps)
        track(w, UUID_STEPS, UUID_PROCESS(run_pid), "steps", run_pid, -1, 0);
    if (m->n_sessions)
        track(w, UUID_SESSIONS, UUID_PROCESS(run_pid), "sessions", run_pid, -1, 0);
    for (size_t c = 0; c < m->n_counters; c++)
        track(w, UUID_COUNTER(c), UUID_PROCESS(run_pid), m->counters[c].name, run_pid, -1, 1);
}

/* ---- events ---- */

/* A kept section's beginning, with its metadata, throughput, FLOPs and how it ended. */
/* The walk's callbacks (walk.c): each thread's sections on its track, as a sequence, each
 * kept one a slice from its begin to its end, each folded run a slice named as in the JSON
 * trace; each thread's operators on its "cpu ops" track, nested by parent. */
static int section_begin(void *ctx, const sm_span *s)
{
    pw *w = ctx;
    const sm_model *m = w->m;
    const sm_site *site = &m->sites[s->site];
    size_t p, e = event_open(w, s->start_ns, TYPE_BEGIN, CAT_SECTION, s->site, site->name, &p);
    if (w->stack_info && site->file) { /* with_stack: where the section is in the source */
        arg_str(w, "file", site->file);
        arg_int(w, "line", site->line);
        arg_str(w, "function", site->func ? site->func : "");
    }
    const sm_span_x *x = sm_span_extra(m, s);
    if (x->meta >= 0)
        sm_each_meta(m, x->meta, arg_kv, w);
    if (x->units > 0)
        arg_num(w, "units", x->units);
    if (x->flops > 0)
        arg_num(w, "flops", x->flops);
    if (s->flags & SM_SPAN_END_FLAGS)
        arg_str(w, "sonde", s->flags & SM_SPAN_END_LOST       ? "end_lost"
                            : s->flags & SM_SPAN_UNTERMINATED ? "unterminated"
                                                              : "closed_by_outer");
    event_close(w, e, p);
    return w->err;
}

static int section_end(void *ctx, const sm_span *s)
{
    pw *w = ctx;
    end_event(w, s->end_ns);
    return w->err;
}

static int run_slice(void *ctx, const sm_fold_run *run)
{
    pw *w = ctx;
    sbuf_reset(&w->label);
    if (sm_fold_label(w->m, run, &w->label))
        return w->err = -1;
    size_t p, e = event_open(w, run->start_ns, TYPE_BEGIN, CAT_FOLDED, SIZE_MAX, w->label.data,
                             &p);
    arg_int(w, "sections", (int64_t)run->n);
    arg_num(w, "total_ms", (double)run->sum_ns / 1e6);
    event_close(w, e, p);
    end_event(w, run->end_ns);
    return w->err;
}

static int thread_seq(void *ctx, uint32_t th, int64_t first_ns)
{
    pw *w = ctx;
    seq_open(w, UUID_THREAD(th), 1, first_ns);
    return w->err;
}

static int ops_seq(void *ctx, uint32_t th, int64_t first_ns)
{
    pw *w = ctx;
    track(w, UUID_OPS(th), UUID_THREAD(th), "cpu ops", 0, -1, 0);
    seq_open(w, UUID_OPS(th), 1, first_ns);
    return w->err;
}

static int op_begin(void *ctx, const sm_op *op)
{
    pw *w = ctx;
    const sm_model *m = w->m;
    size_t p, e = event_open(w, op->start_ns, TYPE_BEGIN, CAT_OP, op->name,
                             m->op_names[op->name], &p);
    arg_int(w, "correlation", (int64_t)op->id);
    if (op->shapes >= 0)
        arg_str(w, "input_shapes", m->op_names[op->shapes]);
    if (op->flops > 0)
        arg_num(w, "flops", op->flops);
    event_close(w, e, p);
    return w->err;
}

static int op_end(void *ctx, const sm_op *op)
{
    pw *w = ctx;
    end_event(w, op->end_ns);
    return w->err;
}

/* Every thread's instants, each thread's on a sequence of its own. */
/* A thread's instants (the walk's, thread after thread) on its track's sequence. */
static int inst_seq(void *ctx, uint32_t th, int64_t first_ns)
{
    pw *w = ctx;
    seq_open(w, UUID_THREAD(th), 1, first_ns);
    return w->err;
}

static int instant(void *ctx, const sm_instant *e)
{
    pw *w = ctx;
    const sm_model *m = w->m;
    int named = e->name < m->n_sites;
    size_t p, ev = event_open(w, e->t_ns, TYPE_INSTANT, CAT_EVENT, named ? e->name : SIZE_MAX,
                              named ? m->sites[e->name].name : "?", &p);
    if (e->args >= 0)
        sm_each_meta(m, e->args, arg_kv, w);
    event_close(w, ev, p);
    return w->err;
}

/* Counters, downsampled to max_data_points as in the JSON trace (the walk's), each on its own
 * sequence. */
static int counter_seq(void *ctx, size_t c, int64_t first_ns)
{
    pw *w = ctx;
    seq_open(w, UUID_COUNTER(c), 1, first_ns);
    return w->err;
}

static int counter_point(void *ctx, const sm_counter *k, size_t i)
{
    pw *w = ctx;
    size_t p = packet_open(w, k->t_ns[i]);
    size_t e = pb_open(&w->b, TP_TRACK_EVENT);
    pb_uint(&w->b, TE_TYPE, TYPE_COUNTER);
    pb_double(&w->b, TE_COUNTER, k->v[i]);
    event_close(w, e, p);
    return w->err;
}

/* Steps, sessions and GPU activity: few, on sequences with absolute times, each slice's
 * beginning and end together. */
static void slice_on(pw *w, uint64_t track_uuid, int64_t t0, int64_t t1, int cat,
                     const char *name)
{
    size_t p, e = event_open(w, t0, TYPE_BEGIN, cat, SIZE_MAX, name, &p);
    if (track_uuid)
        pb_uint(&w->b, TE_TRACK, track_uuid);
    event_close(w, e, p);
    p = packet_open(w, t1);
    e = pb_open(&w->b, TP_TRACK_EVENT);
    pb_uint(&w->b, TE_TYPE, TYPE_END);
    if (track_uuid)
        pb_uint(&w->b, TE_TRACK, track_uuid);
    event_close(w, e, p);
}

/* Steps and sessions (the walk's), each on a sequence of its own. */
static int step_slice(void *ctx, const sm_step *st, int first)
{
    pw *w = ctx;
    if (first)
        seq_open(w, UUID_STEPS, 0, 0);
    char name[48];
    snprintf(name, sizeof name, "step %llu", (unsigned long long)st->number);
    slice_on(w, 0, st->start_ns, st->t_ns, CAT_STEP, name);
    return w->err;
}

static int session_slice(void *ctx, const sm_session *s, int first)
{
    pw *w = ctx;
    const sm_model *m = w->m;
    if (first)
        seq_open(w, UUID_SESSIONS, 0, 0);
    slice_on(w, 0, s->start_ns, s->end_ns, CAT_SESSION,
             s->name < m->n_sites ? m->sites[s->name].name : "?");
    return w->err;
}

/* CUDA activity (the walk's): a track per device and stream under the run's process, all
 * described first, then each record a slice on its track. */
static int gpu_track(void *ctx, const sm_gpu *g, int new_device)
{
    pw *w = ctx;
    (void)new_device;
    char label[64];
    snprintf(label, sizeof label, "GPU %u stream %u", g->device, g->stream);
    track(w, UUID_GPU(gpu_key(g)), UUID_PROCESS(w->run_pid), label, w->run_pid, -1, 0);
    return w->err;
}

static int gpu_slice(void *ctx, const sm_gpu *g)
{
    pw *w = ctx;
    char name[64];
    const char *nm = name;
    if (g->kind == SM_GPU_KERNEL)
        nm = g->name ? g->name : "?";
    else if (g->kind == SM_GPU_MEMCPY)
        snprintf(name, sizeof name, "Memcpy %s", sm_gpu_copy_kind(g->copy_kind));
    else
        snprintf(name, sizeof name, "Memset");
    slice_on(w, UUID_GPU(gpu_key(g)), g->start_ns, g->end_ns, CAT_KERNEL + (g->kind & 3) - 1, nm);
    return w->err;
}

/* Off-CPU periods (docs/stacks.md, "Off-CPU time"), the same the JSON trace shows: a track
 * "thread TID off-CPU" per thread under its process (described here when no thread of the run
 * is in it), each period a slice "blocked: WAITS_IN" with the Python function and the stack. */
static int off_track(void *ctx, const sm_offperiod *o, int pid, int name_process)
{
    pw *w = ctx;
    char label[64];
    if (name_process) { /* a process of `sonde run`'s that only waited: its command */
        const char *line = w->m->profile.off[o->off].stack;
        snprintf(label, sizeof label, "%.*s", (int)strcspn(line, ";"), line);
        track(w, UUID_PROCESS(pid), 0, label, pid, -1, 0);
    }
    snprintf(label, sizeof label, "thread %u off-CPU", o->tid);
    track(w, UUID_OFFCPU(pid, o->tid), UUID_PROCESS(pid), label, pid, -1, 0);
    w->off_tracks++;
    return w->err;
}

static int off_period(void *ctx, const sm_offperiod *o, int pid)
{
    pw *w = ctx;
    const sm_offstack *x = &w->m->profile.off[o->off];
    uint64_t uuid = UUID_OFFCPU(pid, o->tid);
    char name[300];
    snprintf(name, sizeof name, "blocked: %s", x->waits_in);
    size_t p, e = event_open(w, o->t_ns, TYPE_BEGIN, CAT_OFFCPU, SIZE_MAX, name, &p);
    pb_uint(&w->b, TE_TRACK, uuid);
    if (x->python)
        arg_str(w, "python", x->python);
    arg_str(w, "stack", x->stack);
    event_close(w, e, p);
    p = packet_open(w, o->t_ns + o->ns);
    e = pb_open(&w->b, TP_TRACK_EVENT);
    pb_uint(&w->b, TE_TYPE, TYPE_END);
    pb_uint(&w->b, TE_TRACK, uuid);
    event_close(w, e, p);
    return w->err;
}

/* The tracks first (the walk with off_track alone), then the periods on one sequence of
 * absolute times. */
static int off_cpu(pw *w, int run_pid)
{
    static const sx_walker tracks = {.off_track = off_track}, periods = {.off_period = off_period};
    int64_t min_ns = sm_off_trace_min_ns(w->m, INT64_MIN, INT64_MAX); /* once for both walks */
    if (min_ns < 0 || sx_walk_off(w->m, INT64_MIN, INT64_MAX, min_ns, run_pid, 0, &tracks, w))
        return w->err = -1;
    if (w->off_tracks)
        seq_open(w, 0, 0, 0);
    if (!w->err && sx_walk_off(w->m, INT64_MIN, INT64_MAX, min_ns, run_pid, 0, &periods, w))
        w->err = -1;
    return w->err;
}

/* The earliest time written, so every time can be written as an unsigned offset from it. */
static int64_t earliest(const sm_model *m)
{
    int64_t t = 0;
#define EARLIER(v)                                                                             \
    do {                                                                                       \
        if ((v) < t)                                                                           \
            t = (v);                                                                           \
    } while (0)
    for (size_t i = 0; i < m->n_spans; i++)
        EARLIER(m->spans[i].start_ns);
    for (size_t i = 0; i < m->n_ops; i++)
        EARLIER(m->ops[i].start_ns);
    if (m->n_instants)
        EARLIER(m->instants[0].t_ns);
    for (size_t c = 0; c < m->n_counters; c++)
        if (m->counters[c].n)
            EARLIER(m->counters[c].t_ns[0]);
    for (size_t i = 0; i < m->n_steps; i++)
        EARLIER(m->steps[i].start_ns);
    for (size_t i = 0; i < m->n_sessions; i++)
        EARLIER(m->sessions[i].start_ns);
    for (size_t i = 0; i < m->n_gpu; i++)
        EARLIER(m->gpu[i].start_ns);
    if (m->profile.n_off_held) /* in time order */
        EARLIER(m->profile.off_held[0].t_ns);
#undef EARLIER
    return t;
}

int sx_perfetto(const sm_model *m, sx_sink sink, void *ctx)
{
    pw w;
    memset(&w, 0, sizeof w);
    sbuf_init(&w.b);
    sbuf_init(&w.label);
    w.sink = sink;
    w.ctx = ctx;
    w.m = m;
    w.off = -earliest(m);
    w.next_seq = 1;
    int run_pid = m->pid > 0 ? m->pid : 1;
    size_t names = m->n_sites > m->n_op_names ? m->n_sites : m->n_op_names;
    w.seen_bytes = names / 8 + 1;
    w.seen = sonde__calloc(w.seen_bytes, 1);
    sm_folder fo;
    const sm_budget *bud = &m->trace;
    if (sm_folder_init(&fo, m, INT64_MIN, INT64_MAX, bud->folded ? bud->min_ns : INT64_MIN) ||
        !w.seen)
        w.err = -1;
    sonde_config cfg;
    sm_config(m, &cfg);
    w.stack_info = cfg.with_stack;
    if (!w.err)
        tracks(&w, run_pid);
    static const sx_walker walk = {.thread = thread_seq, .begin = section_begin,
                                   .end = section_end, .run = run_slice, .op_thread = ops_seq,
                                   .op_begin = op_begin, .op_end = op_end,
                                   .inst_thread = inst_seq, .instant = instant,
                                   .counter = counter_seq, .point = counter_point,
                                   .step = step_slice, .session = session_slice};
    if (!w.err && sx_walk_spans(m, &fo, INT64_MIN, INT64_MAX, &walk, &w))
        w.err = -1;
    if (!w.err && sx_walk_ops(m, INT64_MIN, INT64_MAX, &walk, &w))
        w.err = -1;
    if (!w.err && sx_walk_instants(m, INT64_MIN, INT64_MAX, 1, &walk, &w))
        w.err = -1;
    if (!w.err && sx_walk_counters(m, INT64_MIN, INT64_MAX, &walk, &w))
        w.err = -1;
    if (!w.err && (sx_walk_steps(m, INT64_MIN, INT64_MAX, &walk, &w) ||
                   sx_walk_sessions(m, INT64_MIN, INT64_MAX, &walk, &w)))
        w.err = -1;
    static const sx_walker gpu_tracks = {.gpu_track = gpu_track}, gpu_slices = {.gpu = gpu_slice};
    w.run_pid = run_pid;
    if (!w.err && m->n_gpu && sx_walk_gpu(m, INT64_MIN, INT64_MAX, &gpu_tracks, &w))
        w.err = -1;
    if (!w.err && m->n_gpu)
        seq_open(&w, 0, 0, 0);
    if (!w.err && m->n_gpu && sx_walk_gpu(m, INT64_MIN, INT64_MAX, &gpu_slices, &w))
        w.err = -1;
    if (!w.err && m->profile.n_off_held)
        off_cpu(&w, run_pid);
    flush(&w, 1);
    sm_folder_free(&fo);
    sonde__free(w.seen);
    sonde__free(w.z);
    sbuf_free(&w.b);
    sbuf_free(&w.label);
    return w.err;
}
