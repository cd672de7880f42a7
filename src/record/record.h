/* record.h - private interface of the recording side: the profiler object, thread buffers,
 * chunks, call sites, the clock, the writer and the signal flush. Runs inside the host. */
#ifndef SONDE_RECORD_H
#define SONDE_RECORD_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../include/sonde/sonde.h"
#include "../format/format.h"
#include "../format/tally.h"
#include "../monitor/monitor.h"
#include "../stacks/stacks.h"
#include "../util/buf.h"

#include "../util/clock.h"
#include "../util/error.h"
#include "../util/sites.h"

/* The hot path's own edge kinds (sonde.h) are the file format's. */
_Static_assert((int)SONDE__K_BEGIN == (int)SONDE_K_BEGIN, "sonde.h's BEGIN is format.h's");
_Static_assert((int)SONDE__K_END == (int)SONDE_K_END, "sonde.h's END is format.h's");

/* sonde_begin with the name's interned id already known (id: sonde__intern(name), or 0 to
 * intern it here): what a caller that opens one name many times (the Python extension's
 * Section) calls, p checked by the caller. Same contract as sonde_begin. */
int sonde__begin_named(sonde_profiler *p, uint32_t id, const char *name);

/* sonde__begin_named and sonde_end for a caller that holds the name's id (> 0) and opens and
 * closes it many times: the Python extension's sections and decorated calls. Each records inline,
 * as SONDE_SCOPE's code does (sonde.h), where that writes exactly what the function would: the
 * profiler recording, this thread's buffer cached and with room, the stack within 64 and, for the
 * end, the section on top of it. Anything else (paused, dropped, a full chunk, nvtx, the thread's
 * first section, a forked child) goes through the function, so the contract is the function's.
 * p checked by the caller. bench/bench_python.py measures the difference. */
static inline int sonde__begin_fast(sonde_profiler *p, uint32_t id, const char *name)
{
    const sonde__hot *h = (const sonde__hot *)(const void *)p;
    sonde__tbuf *tb = sonde__tl.tb;
    if (SONDE__LIKELY(__atomic_load_n(&h->recording, __ATOMIC_RELAXED) &&
                      sonde__begin_inline_ok(h, tb, id))) {
        sonde__write_begin(tb, h, id);
        return 0;
    }
    return sonde__begin_named(p, id, name);
}

static inline int sonde__end_fast(sonde_profiler *p, uint32_t id)
{
    const sonde__hot *h = (const sonde__hot *)(const void *)p;
    sonde__tbuf *tb = sonde__tl.tb;
    if (SONDE__LIKELY(id && __atomic_load_n(&h->recording, __ATOMIC_RELAXED) &&
                      sonde__tl.serial == h->serial)) {
        int32_t d = tb->depth;
        if (SONDE__LIKELY(d > 0 && d <= 64 && tb->stack[d - 1] == id && tb->cur < tb->end)) {
            sonde__write_end(tb, h, id);
            return 0;
        }
    }
    return sonde_end(p);
}

/* ---- per-thread buffers and chunks ---- */
enum { CHUNK_FREE = 0, CHUNK_ACTIVE = 1, CHUNK_FULL = 2 };
#define SONDE_NO_CHUNK UINT32_MAX

typedef struct sonde_tbuf sonde_tbuf;

typedef struct sonde_chunk {
    _Atomic int state;             /* CHUNK_* */
    _Atomic uint32_t next_free;    /* link in the free stack */
    sonde_tbuf *_Atomic owner;     /* thread buffer while ACTIVE */
    uint32_t thread;               /* thread index of the events */
    uint32_t tid;                  /* kernel thread id of the events */
    uint64_t base;                 /* slot index of data[0] in its thread's stream */
    _Atomic uint32_t final_count;  /* slots used, set before the chunk turns FULL */
    _Atomic uint32_t flushed;      /* slots already written to the file */
    sonde__ev *data;
} sonde_chunk;

enum { TB_LIVE = 1, TB_EXITED = 2 };

/* depth of a shadow buffer (never a real one's): see sonde_tbuf.shadow */
#define SONDE_SHADOW_DEPTH INT32_MIN

struct sonde_tbuf {
    sonde__tbuf hot;               /* read and written inline by the macros; first member */
    /* With nvtx on, the thread's cached buffer is this one instead of hot: cur = end = NULL and
     * depth SONDE_SHADOW_DEPTH send every inline begin and end to the slow path, which records
     * into hot and opens or closes the NVTX range. The inline fast path stays as it is. */
    sonde__tbuf shadow;
    sonde_profiler *prof;
    sonde_tbuf *_Atomic next;      /* the profiler's list; nodes are never unlinked */
    _Atomic int state;             /* TB_* */
    _Atomic uint32_t chunk;        /* index of the active chunk or SONDE_NO_CHUNK */
    uint32_t thread;               /* thread index in the file; with name, set under prof->lock */
    _Atomic int tid;               /* kernel thread id while LIVE, 0 once the thread exited */
    _Atomic uint64_t pthread_tid;  /* the low 32 bits of its pthread_t (how CUPTI names a thread)
                                      << 32 | its kernel thread id; kept once it exited, until
                                      the buffer is reused (sonde__tid_of_pthread) */
    uint64_t next_base;            /* slot index of the next chunk's first slot */
    uint64_t gap;                  /* events dropped since the last recorded one */
    _Atomic uint64_t dropped;      /* events dropped in all */
    _Atomic uint32_t written_thread; /* thread index + 1 whose THREAD record is in the file */
    char name[32];
};

/* ---- the profiler ---- */
/* Room kept for the file's end (statistics, every warning, END) when the disk fills, and how far
 * ahead blocks are reserved at a time (one fallocate per step written). */
#define SONDE_TAIL_ROOM (48u * 1024u)
#define SONDE_RESERVE_STEP (1024u * 1024u)
#define SONDE_MAX_WARNINGS 64

typedef struct sonde_flight sonde_flight;

struct sonde_profiler {
    sonde__hot hot;                /* first member: the macros read it */
    sonde_config cfg;              /* strings below are owned copies */
    char *name, *output_dir, *unit, *path;
    char run_id[40];               /* the `sonde run` this profiler records in or for
                                      (SONDE_RUN_ID, INFO "run.id"); "": none */
    _Atomic int fd;                /* the .sonde file, -1 when none (atomic: recording on demand
                                    * opens and closes it while host threads look) */
    sonde_flight *flight;          /* the flight recorder's memory (flight.c), NULL when off:
                                    * the writer's records go there instead of to fd */
    _Atomic int flight_direct;     /* ... until a fatal signal's dump: then to fd, that dump */
    /* on_demand (ondemand.c): recording off until a start command; each window its own run */
    int ondemand;
    _Atomic int ctl_q[8];          /* the commands the control signal brought, in order, a ring */
    _Atomic unsigned ctl_head;     /* (0: a free slot); the next to be put at ctl_head, taken */
    unsigned ctl_tail;             /* at ctl_tail (sonde__ondemand_poll's thread only) */
    _Atomic int ctl_ignored;       /* a command this profiler cannot follow (SONDE_CTL_*): said */
    int od_window;                 /* windows started so far; one is open when fd >= 0 */
    uint64_t od_until_ns;          /* the open window's end (CLOCK_MONOTONIC), 0: until stopped */
    char *od_base;                 /* the run's name; windows are od_base-ondemandN */
    _Atomic int status;            /* first internal error, 0 when none */
    _Atomic int io_failed;         /* writes stopped after an I/O error */
    _Atomic int full_errno;        /* ... because the disk filled (ENOSPC, EDQUOT, EFBIG): the
                                    * file's end still fits in the room kept (writer.c) */
    _Atomic uint64_t reserved_to;  /* the file's blocks are reserved up to here; UINT64_MAX:
                                    * the file system cannot (no fallocate) */
    char status_msg[256];

    pthread_mutex_t lock;          /* thread list appends, warnings, sessions */
    sonde_tbuf *_Atomic threads;
    _Atomic uint32_t n_threads;

    sonde_chunk *chunks;
    uint32_t n_chunks;
    uint32_t chunk_slots;
    sonde__ev *pool;
    _Atomic uint64_t free_head;    /* tagged index: tag << 32 | chunk index */

    pthread_t writer;
    int writer_started;
    sem_t wake;
    /* Chunks retired since the writer was last woken: it is woken for every wake_every of them
     * (8, or a sixteenth of a small pool), and every flush interval (at most 100 ms) anyway. */
    _Atomic uint32_t retired;
    uint32_t wake_every;
    _Atomic int stop;
    pthread_mutex_t wlock;         /* one writer pass at a time (writer thread or export) */
    /* Who holds a writer pass: 0 none, the tid of the thread holding wlock for one, or
     * SONDE_WPASS_SIGNAL for a signal handler's flush, which keeps out of a pass and knows when
     * it interrupted the holder itself (sonde__wlock, sonde__signal_flush). */
    _Atomic int wpass;
    /* The tally of the events written (format/tally.h), for the SUMMARY record before END: a
     * writer pass's (under wlock). Off (tally_on 0) in a flight recorder's run, in a forked
     * child, once a signal handler has written events, or out of memory: no SUMMARY then. */
    sonde_tally *tally;
    sonde_tally_thread *tally_th;
    size_t n_tally_th, cap_tally_th; /* threads tallied (indices below n), room for cap */
    struct sonde_pass_slot { uint32_t thread, idx; uint64_t base; } *pass_order; /* a writer
                                      pass's chunks, sorted by thread and slot (n_chunks) */
    _Atomic int tally_on;
    uint8_t *enc;                  /* writer's encode buffer */
    uint8_t *sig_enc;              /* the signal handler's own */
    size_t enc_cap;
    _Atomic uint32_t sites_written;
    _Atomic uint64_t bytes_written;
    _Atomic uint64_t dropped_io;   /* events lost to write errors */
    _Atomic uint64_t bp_chunks;    /* chunks recording threads wrote themselves (back-pressure) */
    _Atomic uint64_t bp_ns;        /* the time threads that found no free chunk spent getting one
                                    * (waiting for the writer included) */
    _Atomic uint64_t writer_cpu_ns; /* CPU time the writer thread used, set when it stops */

    /* the sampler thread (sampler.c) */
    pthread_t sampler;
    int sampler_started;
    sem_t sampler_wake;
    _Atomic int sampler_stop;
    void *sampler_state;
    _Atomic uint64_t sampler_cpu_ns; /* CPU time the sampler used, set when it stops */
    /* CPU samples with call stacks (stacks/stacks.c: sample_hz, sonde run) */
    struct sonde_stacks *stacks;
    uint64_t stacks_cpu_ns;        /* CPU time its thread used, set when it stops */
    uint64_t stacks_cfi;           /* its samples unwound by the call frame information */
    sonde_pyway stacks_py;         /* how it read the Python frames */
    unsigned stacks_hz;            /* its rate; a forked child that records starts its own */
    /* the latest value of every sampled figure, for sonde_current_metrics and the display */
    pthread_mutex_t latest_lock;
    struct sonde__latest {
        const char *name;          /* interned: lives as long as the process */
        double value, t;           /* t: when it was sampled, seconds since the sampler began */
    } latest[256];
    size_t n_latest;

    /* the step schedule (schedule.c), changed under step_lock by sonde_step */
    pthread_mutex_t step_lock;
    int schedule_on;
    int sched_action, sched_cycle;   /* what the current step does */
    uint64_t window_from;            /* the file's length before the step the active window
                                        began with: its trace reads the file from there on */
    int window_session;              /* a session was open when it began: */
    uint64_t window_session_tick;    /* begun then (session_tick), */
    uint32_t window_session_name, window_session_thread; /* so named, on that thread index */
    struct sm_resume *window_read;   /* where the earlier windows' readings left off
                                        (reports.c, sm_read_file_from) */
    const struct sonde_reports *reports; /* the reports layer's hook (sonde_create), or NULL */
    int cuda_range_open;             /* cudaProfilerStart was called and not yet stopped */
    char *ready_path;                /* a window's trace for on_trace_ready, called once
                                        step_lock is released (profiler.c, unlock_and_ready) */
    int ready_cycle;
    int cuda_noted;                  /* the reason cudaProfiler* is unavailable was reported */
    int nvtx;                        /* sections, steps and sessions are NVTX ranges and marks */
    int destroyed;                   /* a tombstone: sonde_destroy ran (profiler.c, bury) */
    uint64_t nvtx_session;           /* the open session's NVTX range */

    /* memory snapshots every N steps: steps waiting for the sampler (step_lock) */
    uint64_t snap_queue[64];
    unsigned snap_n;
    _Atomic uint64_t snaps_lost;   /* requests that found the queue full */

    pid_t watch_pid;               /* procfs samples this process tree (sonde run), 0: itself */
    _Atomic uint64_t steps;
    _Atomic int session_open;
    _Atomic uint32_t cur_session;  /* name id of the open session, 0 when none */
    sonde_tbuf *_Atomic session_tb; /* the thread that opened it (the live display's stage) */
    _Atomic uint64_t session_tick; /* when it was begun (a window's trace: reports.c) */
    _Atomic uint64_t misuse_unbalanced, misuse_nonfinite;
    char *warnings[SONDE_MAX_WARNINGS];
    int n_warnings;
    _Atomic int finalized;
    int registry_slot;
    /* a forked child's copy (fork.c): its file is not created until it records */
    _Atomic uint64_t user_end;     /* the tick the program's own run ended at (sonde__mark_end;
                                      0: at the file's end): its END record's */
    _Atomic int child_pending;
    int child_started;             /* its name and writer thread are set up (under lock) */
    int parent_pid;                /* a forked child's copy: the process it was forked from */
    int child_sampler;             /* the parent sampled: the child's file starts a sampler */
    char *child_path;              /* its file, made ready at its first record (writer.c's */
    uint8_t *child_head;           /* sonde__child_prepare): path, first bytes */
    size_t child_head_len;
    uint64_t start_tick;           /* the run's start when not the file's creation (the fork), */
    uint64_t start_mono_ns, start_real_ns; /* with the clocks read at the same moment */
    struct sonde_live *live;       /* the live metrics (metrics.c; metrics_port), NULL: none;
                                      set and cleared under wlock */
    _Atomic int live_off;          /* a signal handler writes (sonde__signal_flush): no event is
                                      followed until it is done */
};

/* Events have somewhere to go: the .sonde file or the flight recorder's memory. */
static inline int sonde__has_sink(const sonde_profiler *p) { return p->fd >= 0 || p->flight; }

/* ---- profiler.c ---- */
/* sonde_create for `sonde run`: the CPU and memory figures are those of the process tree rooted
 * at watch (summed over its descendants, and per process), not of this process (watch 0: as
 * sonde_create). join_suffix: under `sonde run`, a profiler that joins the run is named
 * RUN.pidN followed by it ("" for the program's own, ".samples" for inject.c's). reports: the
 * reports layer's hook (sonde__reports, src/reports/reports.h), or NULL to write none. */
sonde_profiler *sonde__create_watching(const sonde_config *cfg, pid_t watch,
                                       const char *join_suffix,
                                       const struct sonde_reports *reports);
/* The calling thread's buffer for p, creating it on first use; NULL when out of memory. */
sonde_tbuf *sonde__thread_buf(sonde_profiler *p);
/* The kernel thread id of the thread of p whose pthread_t's low 32 bits are pth (CUPTI's
 * threadId of an API call), live or exited since; 0 when p has no such thread. Lock-free. */
uint32_t sonde__tid_of_pthread(sonde_profiler *p, uint32_t pth);
/* CUDA activity's sink into p (ops.c): its file under wlock, its threads, its warnings. */
sonde_gpu_sink sonde__gpu_sink(sonde_profiler *p);
/* Appends one event of kind with id/arg and n value doubles (0..2) on the calling thread.
 * Returns 0, or SONDE_EDROPPED when no buffer space was free. */
int sonde__record(sonde_profiler *p, unsigned kind, uint32_t id, uint32_t arg, const double *v);
/* Records calls a hot function made that were counted and summed, not recorded: the event
 * SONDE_AGGREGATED_EVENT with arguments section, calls, total_s (the time of the outermost of
 * them on their threads), sum_s when it differs (every call's time, for the mean: calls nested
 * in a call of the same function), and hidden_s when hidden_ticks > 0: the time the reports take
 * out of the section's self time (what was accounted inside its counted calls, and counted
 * calls' time outside sections inside its recorded calls). Ticks on sonde__ticks' clock, written
 * in seconds; calls may be 0 when only hidden_s is news. For the function tracers (ftrace.h).
 * sonde_event_args' code. */
int sonde__aggregated(sonde_profiler *p, const char *section, uint64_t calls, uint64_t ticks,
                      uint64_t sum_ticks, uint64_t hidden_ticks);
/* Frees the structs kept for destroyed profilers (for tests that count every allocation). */
void sonde__tombstones_free(void);
/* Adds a warning line to the report (copied; the first SONDE_MAX_WARNINGS are kept). */
void sonde__warn(sonde_profiler *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the first internal error (status) and its message; later ones are ignored. */
void sonde__set_status(sonde_profiler *p, int err, const char *msg);

/* ---- writer.c ---- */
/* Opens the .sonde file (choosing a free name) and writes its header and INFO. */
int sonde__writer_open(sonde_profiler *p);
/* The tally of what the writer writes (p->tally): started anew for each file (writer_open),
 * turned off where the file will not hold what it counted (sonde__tally_off: async-signal-
 * safe), freed with p. */
void sonde__tally_off(sonde_profiler *p);
void sonde__tally_free(sonde_profiler *p);
int sonde__writer_start(sonde_profiler *p);
/* Stops and joins the writer thread (idempotent). */
void sonde__writer_stop(sonde_profiler *p);
/* One pass: new sites and threads, FULL chunks, and (flush_active) what ACTIVE chunks hold. */
void sonde__writer_pass(sonde_profiler *p, int flush_active);
/* Writes one record; -1 on I/O error (and marks p failed). */
int sonde__write_record(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len);
/* Writes the closing records (stats, warnings, anchor, END) and closes the file. */
int sonde__writer_close(sonde_profiler *p);
/* wlock and the pass word beside it: a writer pass (the writer thread, back pressure, an export,
 * fork, close) takes both; a signal handler's flush takes only the word (SONDE_WPASS_SIGNAL), so
 * that it never writes while a pass recycles the chunks it reads (a host that survived a SIGINT
 * lost a chunk of sections that way: crashy survive). */
#define SONDE_WPASS_SIGNAL (-1)
void sonde__wlock(sonde_profiler *p);
void sonde__wunlock(sonde_profiler *p);

/* One event of a thread buffer (e, and the slots of its values after it) encoded as in an
 * EVENTS record, its time as the difference from prev; the bytes written. Async-signal-safe. */
size_t sonde__put_event(uint8_t *out, const sonde__ev *e, uint64_t prev);
/* An ANCHOR record's payload (a tick and the two clocks read with it) into out (30 bytes at
 * most); its length. Async-signal-safe. */
static inline size_t sonde__anchor_put(uint8_t *out, uint64_t tick, uint64_t mono, uint64_t real)
{
    size_t n = varint_put(out, tick);
    n += varint_put(out + n, mono);
    return n + varint_put(out + n, real);
}
/* A record's 12-byte header: type, length and the payload's CRC-32. Async-signal-safe. */
/* A .sonde file's first SONDE_FILE_HEADER_LEN bytes: the magic, the version, 0. */
void sonde__file_header(uint8_t *hdr);
void sonde__record_frame(uint8_t *hdr, unsigned type, const uint8_t *payload, size_t len);
/* The STATS record's payload (the recorder's counters) into out (p->enc_cap bytes); its length. */
size_t sonde__stats_payload(sonde_profiler *p, uint8_t *out);

/* ---- flight.c: the flight recorder (flight_recorder_s > 0) ---- */
/* Its memory, sized from buffer_mb; -1 when out of memory (p->flight may then be set: free it). */
int sonde__flight_create(sonde_profiler *p);
void sonde__flight_free(sonde_profiler *p);
/* In a forked child: its copy of the memory freed, no lock or thread touched (they did not come
 * across); p->flight NULL. */
void sonde__flight_forget(sonde_profiler *p);
/* Where write_rec sends a record in flight-recorder mode. 0, or -1 (too big for the ring, or
 * out of memory for the records every dump keeps). */
int sonde__flight_put(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len);
/* For the writer as it encodes (under wlock): the newest tick of the EVENTS record it puts
 * next; an event other than a section edge, of nslots slots (run-wide ones are kept). */
void sonde__flight_events_end(sonde_profiler *p, uint64_t tmax);
void sonde__flight_event(sonde_profiler *p, const sonde__ev *e, unsigned nslots);
/* Run metadata (sonde_metadata outside any section of the calling thread), kept for every dump
 * from the call itself: neither a dropped event nor an end dropped before it (which leaves the
 * writer's count of the thread's open sections one too high) may lose it. tick: a tick at or
 * before the event's, 0 when the event was dropped (every dump writes it then). */
void sonde__flight_run_meta(sonde_profiler *p, uint32_t key, uint32_t value, uint64_t tick);
/* A thread's open sections as the writer sees them encoded: their count, and with
 * trigger_section_over_s rules (watch) the innermost 64's ids and begin ticks. */
#define SONDE_FR_DEPTH 64
typedef struct sonde__fr_thread {
    int32_t depth;
    int watch;
    uint32_t id[SONDE_FR_DEPTH];
    uint64_t ts[SONDE_FR_DEPTH];
} sonde__fr_thread;
/* Thread index thread's (NULL when out of memory). Under wlock. */
sonde__fr_thread *sonde__flight_thread(sonde_profiler *p, uint32_t thread);
/* A watched thread's section id ended: the trigger_section_over_s rules. */
void sonde__flight_section_end(sonde_profiler *p, uint32_t id, uint64_t begin, uint64_t end);
static inline void sonde__flight_edge(sonde_profiler *p, sonde__fr_thread *t, const sonde__ev *e)
{
    int32_t d = t->depth;
    if ((e->tag & 15u) == SONDE_K_BEGIN) {
        if (t->watch && d >= 0 && d < SONDE_FR_DEPTH) {
            t->id[d] = e->tag >> 4;
            t->ts[d] = e->ts;
        }
        t->depth = d + 1;
    } else if (d > 0) {
        t->depth = --d;
        if (t->watch && d < SONDE_FR_DEPTH)
            sonde__flight_section_end(p, t->id[d], t->ts[d], e->ts);
    }
}

/* The writer thread, after each pass (under wlock): the signal's trigger, the window's oldest
 * records, a trigger whose dump is due. */
void sonde__flight_poll(sonde_profiler *p);
/* sonde_step's rule (trigger_step_over_median); n: steps ended so far. */
void sonde__flight_step(sonde_profiler *p, uint64_t n);
/* The trigger signal came (its handler, ondemand.c): the writer's next poll queues a trigger.
 * Async-signal-safe. */
void sonde__flight_signal(sonde_profiler *p);
/* The end of the run (wlock held, writer stopped): waiting triggers written now, and one for
 * a non-zero exit status. */
void sonde__flight_finish(sonde_profiler *p, int status);
/* A fatal signal (sig) in flight-recorder mode: creates the next NAME-triggerN.sonde and writes
 * the window into it; returns its descriptor for the signal flush to add what threads still hold,
 * or -1 (once a dump was written this way, always -1). Async-signal-safe. */
int sonde__flight_crash_open(sonde_profiler *p, int sig);
/* The flight recorder's memory while records go there: p->flight, NULL after a fatal signal
 * sent them to its dump. */
static inline sonde_flight *sonde__flight_mem(sonde_profiler *p)
{
    return p->flight && !atomic_load_explicit(&p->flight_direct, memory_order_relaxed) ? p->flight
                                                                                       : NULL;
}
/* Async-signal-safe: writes every recorded event not yet in the file, with the signal encode
 * buffer, without taking any lock; sig: the signal. In flight-recorder mode, the window and those
 * events into a dump of their own (sonde__flight_crash_open). */
void sonde__signal_flush(sonde_profiler *p, int sig);
/* Recording on demand, at a window's start (wlock held): what threads recorded since the last
 * window is dropped unwritten, and the state of the file written last is reset for a new one. */
void sonde__writer_discard(sonde_profiler *p);
/* A chunk from the free stack (state ACTIVE), or SONDE_NO_CHUNK. Lock-free. */
uint32_t sonde__chunk_pop(sonde_profiler *p);
void sonde__chunk_push(sonde_profiler *p, uint32_t idx);
/* Back-pressure, for a thread that found the free stack empty: under wlock, writes the chunk it
 * has just filled (own, in state FULL; SONDE_NO_CHUNK when it had none) itself and returns it
 * for reuse; if the writer got to it first, returns a chunk the writer or this call freed.
 * SONDE_NO_CHUNK only when every chunk is held by a live thread (more threads recording at once
 * than chunks) or a forked child's file cannot be made. The caller holds no sonde lock. */
uint32_t sonde__chunk_back_pressure(sonde_profiler *p, uint32_t own);

/* ---- ondemand.c: the control signal and recording on demand ---- */
/* Commands a control signal carries (sigqueue's value; `sonde trigger PID`): the operation in
 * the low 2 bits, a start's duration in tenths of a second above (0: until stopped). A plain
 * signal (kill) is a trigger. */
enum { SONDE_CTL_TRIGGER = 1, SONDE_CTL_START = 2, SONDE_CTL_STOP = 3 };
/* Installs the handler of trigger_signal for p (flight recorder or on_demand; the profiler
 * created last owns it), and gives it back. */
void sonde__control_install(sonde_profiler *p);
void sonde__control_release(sonde_profiler *p);
/* The writer thread, after each pass (no lock held): an on_demand profiler's start and stop
 * commands and its --for deadline; a command the profiler cannot follow is said on stderr. */
void sonde__ondemand_poll(sonde_profiler *p);
/* The end of the run for an on_demand profiler (writer stopped): a window still open is closed
 * and its reports written. 0, or a sonde error code. */
int sonde__ondemand_finish(sonde_profiler *p);

/* ---- nvtx.c: NVTX ranges for Nsight Systems (option nvtx) ---- */
/* NULL when NVTX calls are compiled in, else why there are none (for the report's warning). */
const char *sonde__nvtx_reason(void);
/* A range on the calling thread, in the "sonde" domain; marks; process-wide ranges (sessions). */
void sonde__nvtx_push(const char *name);
void sonde__nvtx_pop(void);
void sonde__nvtx_mark(const char *name);
uint64_t sonde__nvtx_start(const char *name);
void sonde__nvtx_end(uint64_t id);

/* In a forked child: sonde_destroy's lock made anew (a parent thread inside sonde_destroy at the
 * fork left it locked in the child, whose own sonde_destroy then waited forever). */
void sonde__destroy_lock_child(void);
/* Around fork(): the tombstones' lock (a leaf) taken (1) and given back (0). */
void sonde__tombs_fork(int take);
/* In a forked child: the control signal's lock made anew (ondemand.c; a parent thread may have
 * held it, and it is taken before a profiler's own, so it is not held across the fork). */
void sonde__control_lock_child(void);

/* ---- fork.c ---- */
/* pthread_atfork handlers: sonde's locks are held across fork(), and in the child every
 * recording profiler starts over as NAME-pidN. Installed once, with the first profiler. */
void sonde__atfork_install(void);
/* In a forked child whose file is not created yet: creates it once events were recorded.
 * 0 when the file is open (or p is not such a child), -1 when still pending or on error.
 * Caller holds p->wlock. */
/* The program's own run ends now (the first call counts): the file's END says this tick, so the
 * run's duration and every share of it leave out what sonde does after it (the Python package's
 * close(): folding torch.profiler's events, issue 62). Recording goes on until the end. */
void sonde__mark_end(sonde_profiler *p);
/* A run is being finished on this thread (1) or no longer (0): signal.c's handlers wait for it
 * before a termination signal's default action on another thread. */
void sonde__finishing(int on);
/* In a forked child: only the forking thread came across, and its finishing with it. */
void sonde__finishing_forked(void);
int sonde__child_open(sonde_profiler *p);
/* sonde__child_open in a signal handler (SIGTERM before the writer's first pass): only a file
 * sonde__child_prepare made ready, no sampler. 0, or -1: no file. */
int sonde__child_open_in_signal(sonde_profiler *p);
int sonde__child_prepare(sonde_profiler *p);
int sonde__child_create(sonde_profiler *p);
/* In a forked child, on its first record: names it NAME-pidN and starts its writer thread
 * (not in the fork handler itself, where allocators and thread libraries may hold locks). */
void sonde__child_start(sonde_profiler *p);

/* ---- rank.c ---- */
/* Fills rank, world_size and local_rank left at -1 from the launcher's environment. */
void sonde__detect_rank(sonde_config *c);

/* ---- sampler.c ---- */
/* Starts the sampler thread when any collect_* option or the live display is on. 0 or -1. */
int sonde__sampler_start(sonde_profiler *p);
/* Stops and joins it (promptly: it waits on a semaphore, not a sleep); idempotent. */
void sonde__sampler_stop(sonde_profiler *p);
/* Frees the sampler's state without joining its thread (in a forked child, where the thread did
 * not come across); idempotent. */
void sonde__sampler_forget(sonde_profiler *p);
/* CPU samples with call stacks of pid (0: this process) at hz into p's file, until
 * sonde__stacks_stop (finalize calls it); their Python frames read where python (sonde run
 * samples a Python program's processes from outside without them: they sample themselves).
 * 0, or -1 with the reason in why. */
int sonde__stacks_attach(sonde_profiler *p, pid_t pid, unsigned hz, int python, char *why,
                         size_t cap);
/* Stops them and writes what they hold; a warning says what could not be written. */
void sonde__stacks_stop(sonde_profiler *p);

/* ---- metrics.c: live metrics for Prometheus (metrics_port) ---- */
/* Listens on metrics_address:metrics_port and starts the thread that serves /metrics; the
 * writer follows its events from then on. 0, or -1 with why (the run goes on without it). */
int sonde__metrics_start(sonde_profiler *p, char *why, size_t cap);
/* Stops the thread, closes the socket and frees it all (the writer no longer follows). */
void sonde__metrics_stop(sonde_profiler *p);
/* In a forked child: the parent's socket closed, nothing served (the thread did not come). */
void sonde__metrics_forget(sonde_profiler *p);
/* For the writer as it encodes one record of a file thread's events (under wlock). Its sections
 * are followed through the tally while it is on (the writer counts them there anyway: one walk),
 * by a walk of the follower's own once it is off:
 * - sonde__live_thread: file thread thread's follower for its events from slot on (NULL: none
 *   followed); via_tally: the tally counts them (it may go off within the record);
 * - sonde__live_section: a section of site id the tally closed, from tick begin to end;
 * - sonde__live_other: an event not a section's edge, followed through the tally;
 * - sonde__live_events: the n slots of events from ev on followed by the follower's own walk
 *   (the tally off at their start, or before this record); counted: the tally's part of that
 *   thread, whose open sections the walk takes where the tally followed them until then;
 * - sonde__live_done: the record's end, slot_after the slot after its events: its sections'
 *   totals published. */
void *sonde__live_thread(sonde_profiler *p, uint32_t thread, uint64_t slot, int via_tally);
void sonde__live_section(sonde_profiler *p, uint32_t id, uint64_t begin, uint64_t end);
void sonde__live_other(sonde_profiler *p, const sonde__ev *e);
void sonde__live_events(sonde_profiler *p, void *thread, const sonde__ev *ev, uint32_t n,
                        const sonde_tally_thread *counted);
void sonde__live_done(sonde_profiler *p, void *thread, uint64_t slot_after);

/* ---- signal.c: the process-wide registry of live profilers ---- */
int sonde__registry_add(sonde_profiler *p);
/* Where the host has put a handler of its own for SIGTERM or SIGINT in place of sonde's since
 * (a PyTorch DataLoader worker's SIGTERM handler, which calls _exit), sonde's goes in front of
 * it again, chaining to it. The writer calls it at each pass; nothing when sonde installed no
 * handlers. */
void sonde__signals_guard(void);
/* What exit() does for every live profiler: each finishes its run and writes its reports. For
 * a process that ends without exit() but gives notice (a multiprocessing worker's finalizers,
 * before its os._exit). */
void sonde__finish_all(void);
/* The status the process is exiting with (exit() or a return from main), -1 before that. */
int sonde__exit_status(void);
void sonde__registry_remove(sonde_profiler *p);
/* Gives the calling thread an alternate signal stack of its own (SONDE_ALT_STACK bytes under a
 * guard page, mapped, not touched) unless it has one, so that the flush on SIGSEGV can run after
 * a stack overflow; release takes it back at thread exit. Called when a thread first records. */
#define SONDE_ALT_STACK (64u * 1024u)
void sonde__altstack_ensure(void);
void sonde__altstack_release(void);

/* ---- the step schedule (schedule.c); callers hold step_lock ---- */
/* Applies what step number `step` does; from: where the file ended (sonde__file_end) before
 * the step that ended, where the events of a window that begins with this step start. */
void sonde__schedule_step(sonde_profiler *p, uint64_t step, uint64_t from);
/* The active window that covered steps up to `step` (excluded) has ended: its trace, the
 * callback left to sonde__unlock_and_ready. */
void sonde__end_window(sonde_profiler *p, uint64_t step);
/* Releases step_lock, then calls on_trace_ready for a window that ended under it, if any. */
void sonde__unlock_and_ready(sonde_profiler *p);

/* ---- the reports (src/reports/, the layer above the recorder and the reading) ---- */
/* What the recorder asks of the reports layer, through the hook sonde_create gives the profiler
 * (p->reports; NULL: none, as for the in-process sampler's profiler of `sonde run`, which joins
 * the run's reports). Each returns 0 or a SONDE_E* code with the reason in sonde_last_error. */
struct sonde_reports {
    /* The run's reports in its formats to its output folder (path NULL: at its end, with the
     * summary printed where asked), or the one report path names (sonde_export). */
    int (*write_reports)(sonde_profiler *p, const char *path);
    /* A flight recorder dump's reports: path read back, the configured formats as
     * OUTDIR/stem.*. */
    int (*write_dump_reports)(sonde_profiler *p, const char *path, const char *stem);
    /* The trace of active window `cycle` of the step schedule to path, read from the file's
     * part from p->window_from on (sm_read_file_from), with the session open when it began
     * (p->window_session*). */
    int (*write_cycle_trace)(sonde_profiler *p, int cycle, const char *path);
    /* Frees what the reports kept in p (p->window_read). */
    void (*release)(sonde_profiler *p);
};
/* Where the profiler's file ends now, records being written aside: every event recorded after
 * this is read lands at or after it. */
uint64_t sonde__file_end(sonde_profiler *p);

#endif
