/* profiler.c - the profiler object and every recording call: lifetime, thread buffers, the
 * slow paths behind the inline macros, sessions, metadata, metrics, steps. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../util/buf.h"
#include "../util/fileio.h"
#include "record.h"
#include "../config/keys.h"
#include "../monitor/monitor.h"
#include "../stacks/stacks.h"
#include "schedule.h"
#include "../util/alloc.h"
#include "../util/env.h"

_Thread_local sonde__tls sonde__tl SONDE__TLS_MODEL = {0, NULL};

static _Atomic uint64_t g_serial;
static pthread_key_t g_exit_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

/* The registry lock also guards thread-exit retirement against sonde_destroy (signal.c). */
extern pthread_mutex_t sonde__registry_lock;
extern sonde_profiler *_Atomic sonde__registry[];
#define REGISTRY_SLOTS 64

/* ------------------------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------------------------- */
static char *xstrdup(const char *s) { return s ? sonde__strdup(s) : NULL; }

void sonde__set_status(sonde_profiler *p, int err, const char *msg)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&p->status, &expected, err)) {
        snprintf(p->status_msg, sizeof p->status_msg, "%s", msg);
        /* Principle 4: reported once, on the log, and the host goes on. */
        sbuf_say(stderr, "sonde: %s", msg);
    }
}

void sonde__warn(sonde_profiler *p, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&p->lock);
    if (p->n_warnings < SONDE_MAX_WARNINGS) {
        char *w = sonde__strdup(tmp);
        if (w)
            p->warnings[p->n_warnings++] = w;
    }
    pthread_mutex_unlock(&p->lock);
}

static int check_p(const sonde_profiler *p, const char *call)
{
    if (!p)
        return sonde__fail(SONDE_EINVAL, "%s: profiler is NULL", call);
    if (p->destroyed)
        return sonde__fail(SONDE_ESTATE, "%s: the profiler was destroyed by sonde_destroy", call);
    return 0;
}

/* The first line of every public call on p: 0, or return check_p's code. */
#define CHECK_P(p, call)                                                                       \
    do {                                                                                       \
        int rc_ = check_p(p, call);                                                            \
        if (rc_)                                                                               \
            return rc_;                                                                        \
    } while (0)

/* ------------------------------------------------------------------------------------------
 * Thread buffers
 * ---------------------------------------------------------------------------------------- */
static void retire_chunk(sonde_profiler *p, sonde_tbuf *tb)
{
    uint32_t idx = atomic_load_explicit(&tb->chunk, memory_order_relaxed);
    if (idx == SONDE_NO_CHUNK)
        return;
    sonde_chunk *c = &p->chunks[idx];
    uint32_t used = (uint32_t)(tb->hot.cur - c->data);
    tb->next_base = c->base + used;
    atomic_store_explicit(&c->final_count, used, memory_order_relaxed);
    atomic_store_explicit(&c->state, CHUNK_FULL, memory_order_release);
    atomic_store_explicit(&tb->chunk, SONDE_NO_CHUNK, memory_order_relaxed);
    sonde__publish(&tb->hot, NULL);
    tb->hot.end = NULL;
    /* A wake is a futex syscall in the recording thread (perf put it at 7.5% of a Python
     * section loop's samples at one wake a chunk, docs/performance.md); the writer takes the
     * chunks in batches and keeps the pool from running dry well before it does. */
    if (atomic_fetch_add_explicit(&p->retired, 1, memory_order_relaxed) + 1 >= p->wake_every) {
        atomic_store_explicit(&p->retired, 0, memory_order_relaxed);
        sem_post(&p->wake);
    }
}

/* Makes room for n slots in tb's buffer. When no chunk is free the thread writes its own full
 * chunk to the file itself and reuses it (back-pressure: a writer that has fallen behind slows
 * the producers down instead of losing their events). 0, or -1 when even that finds no chunk
 * (every chunk held by another live thread): the event is dropped and counted. */
static int ensure_room(sonde_profiler *p, sonde_tbuf *tb, unsigned n)
{
    if (tb->hot.cur && tb->hot.cur + n <= tb->hot.end)
        return 0;
    if (SONDE__UNLIKELY(atomic_load_explicit(&p->child_pending, memory_order_relaxed)))
        sonde__child_start(p); /* the first record of a forked child */
    uint32_t own = atomic_load_explicit(&tb->chunk, memory_order_relaxed);
    retire_chunk(p, tb);
    uint32_t idx = sonde__chunk_pop(p);
    if (idx == SONDE_NO_CHUNK)
        idx = sonde__chunk_back_pressure(p, own);
    if (idx == SONDE_NO_CHUNK) {
        tb->gap++;
        atomic_fetch_add_explicit(&tb->dropped, 1, memory_order_relaxed);
        return -1;
    }
    sonde_chunk *c = &p->chunks[idx];
    c->thread = tb->thread;
    c->tid = (uint32_t)atomic_load_explicit(&tb->tid, memory_order_relaxed);
    c->base = tb->next_base;
    atomic_store_explicit(&c->final_count, 0, memory_order_relaxed);
    atomic_store_explicit(&c->flushed, 0, memory_order_relaxed);
    atomic_store_explicit(&c->owner, tb, memory_order_relaxed);
    tb->hot.end = c->data + p->chunk_slots;
    sonde__publish(&tb->hot, c->data);
    atomic_store_explicit(&tb->chunk, idx, memory_order_relaxed);
    atomic_store_explicit(&c->state, CHUNK_ACTIVE, memory_order_release);
    if (tb->gap) {
        /* Tell the reader that events are missing here, so it does not mis-nest sections. */
        sonde__ev *e = tb->hot.cur;
        e->ts = sonde__ticks();
        e->tag = SONDE_K_GAP;
        e->arg = tb->gap > UINT32_MAX ? UINT32_MAX : (uint32_t)tb->gap;
        tb->gap = 0;
        sonde__publish(&tb->hot, e + 1);
    }
    return 0;
}

static void thread_exit(void *unused)
{
    (void)unused;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&sonde__registry_lock);
    for (int i = 0; i < REGISTRY_SLOTS; i++) {
        sonde_profiler *p = atomic_load(&sonde__registry[i]);
        if (!p)
            continue;
        for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
            if (atomic_load(&tb->tid) == tid && atomic_load(&tb->state) == TB_LIVE) {
                retire_chunk(p, tb);
                if (tb->hot.depth > 0)
                    sonde__warn(p, "thread %u (%s) exited with %d section(s) open", tb->thread,
                                tb->name, tb->hot.depth);
                atomic_store(&tb->tid, 0);
                atomic_store(&tb->state, TB_EXITED);
            }
        }
    }
    pthread_mutex_unlock(&sonde__registry_lock);
    sonde__tl.serial = 0;
    sonde__tl.tb = NULL;
    sonde__altstack_release();
}

static void make_key(void)
{
    if (pthread_key_create(&g_exit_key, thread_exit) != 0)
        g_exit_key = (pthread_key_t)-1;
}

/* The name of a thread of this process (its comm), 0 or -1. */
static int thread_comm(pid_t tid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

static void tbuf_init(sonde_profiler *p, sonde_tbuf *tb, pid_t tid)
{
    tb->prof = p;
    tb->hot.cur = tb->hot.end = NULL;
    sonde__set_depth(&tb->hot, 0);
    tb->shadow.cur = tb->shadow.end = NULL;
    tb->shadow.depth = SONDE_SHADOW_DEPTH;
    atomic_store(&tb->tid, (int)tid);
    atomic_store(&tb->pthread_tid,
                 (uint64_t)(uint32_t)(uintptr_t)pthread_self() << 32 | (uint32_t)tid);
    tb->gap = 0;
    tb->next_base = 0;
    atomic_store(&tb->chunk, SONDE_NO_CHUNK);
    tb->thread = atomic_fetch_add(&p->n_threads, 1);
    atomic_store(&tb->written_thread, 0);
    /* The OS thread name; a thread that was never named inherits the program's, which would
     * make every worker look like the main thread: those are "tid N". */
    tb->name[0] = 0;
    char main_name[sizeof tb->name] = "";
    if (pthread_getname_np(pthread_self(), tb->name, sizeof tb->name) != 0 || !tb->name[0] ||
        (tid != getpid() && thread_comm(getpid(), main_name, sizeof main_name) == 0 &&
         !strcmp(main_name, tb->name)))
        snprintf(tb->name, sizeof tb->name, "tid %d", (int)tid);
}

int sonde_thread_name(sonde_profiler *p, const char *name)
{
    CHECK_P(p, "sonde_thread_name");
    if (!name || !*name)
        return sonde__fail(SONDE_EINVAL, "sonde_thread_name: the name is %s", name ? "empty" : "NULL");
    if (!sonde__has_sink(p) || atomic_load(&p->finalized))
        return 0;
    sonde_tbuf *tb = sonde__thread_buf(p);
    if (!tb)
        return sonde__fail(SONDE_EDROPPED, "sonde_thread_name: no buffer for this thread");
    pthread_mutex_lock(&p->lock); /* the writer reads names under it */
    snprintf(tb->name, sizeof tb->name, "%s", name);
    atomic_store(&tb->written_thread, 0); /* written again: the reader keeps the last name */
    pthread_mutex_unlock(&p->lock);
    return 0;
}

uint32_t sonde__tid_of_pthread(sonde_profiler *p, uint32_t pth)
{
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        uint64_t v = atomic_load_explicit(&tb->pthread_tid, memory_order_relaxed);
        if (v && (uint32_t)(v >> 32) == pth)
            return (uint32_t)v;
    }
    return 0;
}

sonde_tbuf *sonde__thread_buf(sonde_profiler *p)
{
    if (sonde__tl.serial == p->hot.serial) {
        sonde__tbuf *c = sonde__tl.tb;
        if (c->depth == SONDE_SHADOW_DEPTH) /* an nvtx profiler's: the buffer it belongs to */
            return (sonde_tbuf *)(void *)((char *)c - offsetof(sonde_tbuf, shadow));
        return (sonde_tbuf *)(void *)c;
    }
    pid_t tid = (pid_t)syscall(SYS_gettid);
    sonde_tbuf *found = NULL;
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        if (atomic_load(&tb->tid) == (int)tid && atomic_load(&tb->state) == TB_LIVE) {
            found = tb;
            break;
        }
    }
    if (!found) {
        /* Reuse the buffer of a thread that has exited: memory stays flat under thread churn.
         * Only once the writer has put its THREAD record in the file (it does so under p->lock):
         * its events still in the chunks are written under its index, which must keep its name
         * and tid (test_threads' churn). */
        pthread_mutex_lock(&p->lock);
        for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
            if (atomic_load(&tb->written_thread) != tb->thread + 1 &&
                !(p->ondemand && atomic_load(&p->fd) < 0)) /* between windows: all discarded */
                continue;
            int ex = TB_EXITED;
            if (atomic_compare_exchange_strong(&tb->state, &ex, TB_LIVE)) {
                found = tb;
                break;
            }
        }
        if (!found) {
            found = sonde__calloc(1, sizeof *found);
            if (found) {
                atomic_store(&found->state, TB_LIVE);
                atomic_store(&found->next, atomic_load(&p->threads));
                atomic_store(&p->threads, found);
            }
        }
        if (found)
            tbuf_init(p, found, tid);
        pthread_mutex_unlock(&p->lock);
        if (!found) {
            sonde__fail(SONDE_ENOMEM, "sonde: out of memory for a thread buffer");
            return NULL;
        }
        pthread_once(&g_key_once, make_key);
        if (g_exit_key != (pthread_key_t)-1)
            pthread_setspecific(g_exit_key, (void *)1);
        if (p->cfg.signal_handlers)
            sonde__altstack_ensure(); /* the flush on SIGSEGV survives a stack overflow */
    }
    sonde__tl.serial = p->hot.serial;
    sonde__tl.tb = p->nvtx ? &found->shadow : &found->hot;
    return found;
}

/* Appends one event on the calling thread; its tick in *tick when not NULL. */
static int record_ev(sonde_profiler *p, unsigned kind, uint32_t id, uint32_t arg,
                     const double *v, uint64_t *tick)
{
    sonde_tbuf *tb = sonde__thread_buf(p);
    if (!tb)
        return SONDE_ENOMEM;
    unsigned n = sonde_kind_slots(kind);
    if (ensure_room(p, tb, n) != 0)
        return sonde__fail(SONDE_EDROPPED, "sonde: event dropped: buffers are full");
    sonde__ev *e = tb->hot.cur;
    e->ts = sonde__ticks();
    e->tag = (id << 4) | kind;
    e->arg = arg;
    unsigned nv = sonde_kind_values(kind);
    for (unsigned j = 0; j < 2 * (n - 1); j++) {
        uint64_t bits = 0;
        if (j < nv)
            memcpy(&bits, &v[j], 8);
        sonde__ev *s = &e[1 + j / 2];
        if (j % 2 == 0) {
            s->ts = bits;
        } else {
            s->tag = (uint32_t)bits;
            s->arg = (uint32_t)(bits >> 32);
        }
    }
    if (tick)
        *tick = e->ts;
    sonde__publish(&tb->hot, e + n);
    return 0;
}

int sonde__record(sonde_profiler *p, unsigned kind, uint32_t id, uint32_t arg, const double *v)
{
    return record_ev(p, kind, id, arg, v, NULL);
}

/* Stack entry of a section whose begin was dropped: its sonde_end is dropped too, so it cannot
 * close the enclosing section. Never a real id (ids stay below 2^22). */
#define DROPPED_ID 0x0fffffffu
/* Stack entry of a section begun while the step schedule had recording off: its end is not
 * recorded either, and it is not counted as dropped. */
#define PAUSED_ID 0x0ffffffeu

static int recording(const sonde_profiler *p)
{
    return __atomic_load_n(&p->hot.recording, __ATOMIC_RELAXED);
}

static int begin_id(sonde_profiler *p, uint32_t id, sonde_tbuf **out)
{
    sonde_tbuf *tb = sonde__thread_buf(p);
    if (!tb)
        return SONDE_ENOMEM;
    if (ensure_room(p, tb, 1) != 0) {
        if (!out) /* sonde_begin: remember it, so the matching sonde_end is dropped too */
            sonde__push(&tb->hot, DROPPED_ID);
        /* SONDE_SCOPE: nothing is open, and the scope records no end. */
        return sonde__fail(SONDE_EDROPPED, "sonde: section dropped: buffers are full");
    }
    sonde__ev *e = tb->hot.cur;
    e->ts = sonde__ticks();
    e->tag = (id << 4) | SONDE_K_BEGIN;
    e->arg = 0;
    sonde__push(&tb->hot, id);
    sonde__publish(&tb->hot, e + 1);
    if (out)
        *out = tb;
    return 0;
}

static inline __attribute__((always_inline)) int end_id(sonde_profiler *p, sonde_tbuf *tb,
                                                        uint32_t id)
{
    if (tb->hot.depth <= 0) {
        atomic_fetch_add(&p->misuse_unbalanced, 1);
        return sonde__fail(SONDE_EUNBALANCED, "sonde_end: no section is open on this thread");
    }
    sonde__set_depth(&tb->hot, tb->hot.depth - 1);
    if (ensure_room(p, tb, 1) != 0)
        return sonde__fail(SONDE_EDROPPED, "sonde: section end dropped: buffers are full");
    sonde__ev *e = tb->hot.cur;
    e->ts = sonde__ticks();
    e->tag = (id << 4) | SONDE_K_END;
    e->arg = 0;
    sonde__publish(&tb->hot, e + 1);
    return 0;
}

sonde__tbuf *sonde__scope_begin_slow(sonde_profiler *p, sonde_site *s)
{
    if (!p || !recording(p))
        return NULL;
    uint32_t id = sonde__site_register(s);
    if (!id)
        return NULL;
    sonde_tbuf *tb = NULL;
    if (begin_id(p, id, &tb) != 0)
        return NULL;
    if (p->nvtx) { /* the end comes back here through the shadow, to pop the range */
        sonde__nvtx_push(s->name);
        return &tb->shadow;
    }
    return &tb->hot;
}

/* A section end with nvtx on: recorded, then its NVTX range popped. Kept out of line so that
 * sonde_end's own code is what it is without NVTX. */
static __attribute__((noinline, cold)) int end_nvtx(sonde_profiler *p, sonde_tbuf *tb,
                                                     uint32_t id)
{
    int rc = end_id(p, tb, id);
    if (rc != SONDE_EUNBALANCED)
        sonde__nvtx_pop();
    return rc;
}

void sonde__scope_end_slow(sonde__tbuf *htb, uint32_t id)
{
    if (htb->depth == SONDE_SHADOW_DEPTH) {
        sonde_tbuf *tb = (sonde_tbuf *)(void *)((char *)htb - offsetof(sonde_tbuf, shadow));
        if (!tb->prof->destroyed)
            end_nvtx(tb->prof, tb, id);
        return;
    }
    sonde_tbuf *tb = (sonde_tbuf *)(void *)htb;
    if (tb->prof->destroyed) /* the scope outlived sonde_destroy: its end goes nowhere */
        return;
    end_id(tb->prof, tb, id);
}

/* ------------------------------------------------------------------------------------------
 * Lifetime
 * ---------------------------------------------------------------------------------------- */
static char *default_name(void)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    const char *prog = program_invocation_short_name;
    if (!prog || !*prog)
        prog = "sonde";
    size_t n = strlen(prog) + strlen(stamp) + 2;
    char *r = sonde__malloc(n);
    if (r)
        snprintf(r, n, "%s-%s", prog, stamp);
    return r;
}

/* Everything p owns; p itself stays. */
static void free_threads(sonde_tbuf *tb)
{
    while (tb) {
        sonde_tbuf *n = atomic_load(&tb->next);
        sonde__free(tb);
        tb = n;
    }
}

/* Everything p owns but its thread buffers when keep_threads; p itself stays. */
static void free_contents(sonde_profiler *p, int keep_threads)
{
    for (int i = 0; i < p->n_warnings; i++)
        sonde__free(p->warnings[i]);
    if (!keep_threads)
        free_threads(atomic_load(&p->threads));
    sonde__flight_free(p);
    sonde__tally_free(p);
    sonde__free(p->chunks);
    sonde__free(p->pool);
    sonde__free(p->enc);
    sonde__free(p->sig_enc);
    sonde__free(p->name);
    sonde__free(p->output_dir);
    sonde__free(p->unit);
    sonde__free(p->path);
    sonde__free(p->child_path);
    sonde__free(p->child_head);
    sonde__free(p->od_base);
    sonde__free(p->ready_path);
    if (p->reports)
        p->reports->release(p);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->wlock);
    pthread_mutex_destroy(&p->step_lock);
    pthread_mutex_destroy(&p->latest_lock);
    sem_destroy(&p->wake);
}

static void free_profiler(sonde_profiler *p)
{
    free_contents(p, 0);
    sonde__free(p);
}

/* A destroyed profiler keeps its struct, emptied and marked destroyed, while the next
 * SONDE_TOMBSTONES profilers are destroyed: a call through its handle in that time (another
 * thread that has not heard yet) returns SONDE_ESTATE, and SONDE_SCOPE sees recording off,
 * instead of touching freed memory. About 2 KiB each; the oldest is freed for real. */
#define SONDE_TOMBSTONES 64
static pthread_mutex_t g_tomb_lock = PTHREAD_MUTEX_INITIALIZER;
static sonde_profiler *g_tombs[SONDE_TOMBSTONES];
static size_t g_tomb_next;

static void free_tomb(sonde_profiler *t)
{
    if (!t)
        return;
    free_threads(atomic_load(&t->threads));
    sonde__free(t);
}

/* The tombstone keeps the thread buffers too, emptied (no room: cur = end = NULL), so that a
 * SONDE_SCOPE still open when sonde_destroy ran (on this thread or another) ends through the
 * slow path, which sees the profiler destroyed and writes nothing, instead of writing into the
 * freed chunks (issue 36 #1). */
_Static_assert(offsetof(sonde_profiler, hot) == 0, "bury keeps the hot header, the first member");
static void bury(sonde_profiler *p)
{
    sonde_tbuf *threads = atomic_load(&p->threads);
    for (sonde_tbuf *tb = threads; tb; tb = atomic_load(&tb->next)) {
        __atomic_store_n(&tb->hot.end, NULL, __ATOMIC_RELAXED);
        sonde__publish(&tb->hot, NULL);
    }
    free_contents(p, 1);
    /* every pointer NULL; the hot header, which another thread's SONDE_SCOPE may be reading as
     * this runs, only has recording set to 0 (atomically: the macros' loads are atomic) */
    __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
    memset((char *)p + sizeof p->hot, 0, sizeof *p - sizeof p->hot);
    p->fd = -1;
    atomic_store(&p->finalized, 1);
    atomic_store(&p->threads, threads);
    p->destroyed = 1;
    pthread_mutex_lock(&g_tomb_lock);
    sonde_profiler *oldest = g_tombs[g_tomb_next];
    g_tombs[g_tomb_next] = p;
    g_tomb_next = (g_tomb_next + 1) % SONDE_TOMBSTONES;
    pthread_mutex_unlock(&g_tomb_lock);
    free_tomb(oldest);
}

void sonde__mark_end(sonde_profiler *p)
{
    uint64_t none = 0;
    atomic_compare_exchange_strong(&p->user_end, &none, sonde__ticks());
}

void sonde__tombs_fork(int take)
{
    if (take)
        pthread_mutex_lock(&g_tomb_lock);
    else
        pthread_mutex_unlock(&g_tomb_lock);
}

void sonde__tombstones_free(void)
{
    pthread_mutex_lock(&g_tomb_lock);
    for (size_t i = 0; i < SONDE_TOMBSTONES; i++) {
        free_tomb(g_tombs[i]);
        g_tombs[i] = NULL;
    }
    pthread_mutex_unlock(&g_tomb_lock);
}

#define ENC_PIECE_SLOTS 8192u

static int setup_buffers(sonde_profiler *p)
{
    size_t bytes = (size_t)(p->cfg.buffer_mb * 1048576.0);
    if (p->cfg.flight_recorder_s > 0) /* the flight recorder's window has the rest (flight.c) */
        bytes = bytes / 4 > (1u << 20) ? bytes / 4 : (1u << 20);
    /* At least 1024 chunks when the buffer allows (every recording thread holds one, and the
     * chunks of exited threads wait for the writer), each of 64 KiB to 1 MiB: 64 KiB at the
     * default 64 MiB. */
    size_t chunk = 1u << 20;
    while (chunk > (64u << 10) && chunk * 1024 > bytes)
        chunk >>= 1;
    size_t n = bytes / chunk;
    if (n < 4)
        n = 4;
    p->n_chunks = (uint32_t)n;
    p->wake_every = n >= 128 ? 8 : n >= 16 ? (uint32_t)(n / 16) : 1;
    p->chunk_slots = (uint32_t)(chunk / sizeof(sonde__ev));
    p->pool = sonde__malloc(n * chunk);
    p->chunks = sonde__calloc(n, sizeof *p->chunks);
    p->enc_cap = (size_t)ENC_PIECE_SLOTS * 24 + 128;
    p->enc = sonde__malloc(p->enc_cap);
    p->sig_enc = sonde__malloc(p->enc_cap);
    if (!p->pool || !p->chunks || !p->enc || !p->sig_enc)
        return -1;
    atomic_store(&p->free_head, (uint64_t)SONDE_NO_CHUNK);
    for (uint32_t i = (uint32_t)n; i-- > 0;) {
        p->chunks[i].data = p->pool + (size_t)i * p->chunk_slots;
        sonde__chunk_push(p, i);
    }
    return 0;
}

/* sonde__create_watching's parts. The configuration as the profiler will run it: repaired (what
 * was wrong said in bad), joined to a `sonde run` where one is recording (its file beside the
 * run's, RUN.pidN.sonde; the run samples the machine and writes the reports), with the rank,
 * the device's peak and the formats of CPU samples. Returns 1 when it joins a run. */
static int settle_config(sonde_profiler *p, sonde_config *cfg, pid_t watch,
                         const char *join_suffix, char *joined, size_t cap, char *bad,
                         size_t bad_cap)
{
    sonde__config_repair(cfg, bad, bad_cap);
    const char *run_dir = sonde__getenv("SONDE_RUN_DIR");
    const char *run_name = sonde__getenv("SONDE_RUN_NAME");
    int joins = 0;
    if (!watch && cfg->enabled && run_dir && *run_dir && run_name && *run_name &&
        !strchr(run_name, '/')) {
        joins = 1;
        snprintf(joined, cap, "%s.pid%d%s", run_name, (int)getpid(), join_suffix);
        cfg->name = joined;
        cfg->output_dir = run_dir;
        cfg->formats = 0;
        cfg->print_summary = 0;
        cfg->collect_cpu = cfg->collect_memory = cfg->collect_gpu = 0;
        cfg->real_time_display = 0;
    }
    sonde__detect_rank(cfg);
    if (cfg->peak_flops <= 0 && cfg->peak_device) {
        cfg->peak_flops = sonde__device_peak(cfg->peak_device);
        if (!cfg->peak_flops)
            snprintf(bad, bad_cap, "sonde_config.peak_device: unknown device \"%s\"; MFU is "
                                   "not computed", cfg->peak_device);
    }
    if (cfg->unit && strlen(cfg->unit) > SONDE_MAX_NAME) { /* a name in every report; the
                                                              file's header holds it whole */
        char msg[200];
        snprintf(msg, sizeof msg, "sonde_config.unit is longer than %d bytes (\"%.40s...\"); "
                                  "the unit is \"tokens\"", SONDE_MAX_NAME, cfg->unit);
        if (!bad[0])
            snprintf(bad, bad_cap, "%s", msg);
        else
            sonde__warn(p, "%s", msg);
        cfg->unit = NULL;
    }
    /* CPU samples with their stacks in process: NAME.folded, NAME.pb.gz and NAME.offcpu.folded
     * too, as `sonde run` writes them (only when samples or off-CPU periods came; in the file's
     * configuration, so that `sonde export` writes them again). Not in flight-recorder mode,
     * which keeps no samples. */
    if (!watch && cfg->formats && cfg->flight_recorder_s <= 0 &&
        (cfg->sample_hz > 0 || (cfg->sample_hz < 0 && cfg->with_stack)))
        cfg->formats |= SONDE_FORMAT_FOLDED | SONDE_FORMAT_PPROF | SONDE_FORMAT_OFFCPU;
    return joins;
}

/* The profiler's run id (`sonde run`'s, which `sonde export RUN.sonde` checks before it merges
 * RUN.pidN.sonde: a file of another run of that name, or one planted there, is left out), name
 * (NAME-rankN in a distributed job), output folder and unit. 0, or -1 out of memory. */
static int name_profiler(sonde_profiler *p, const sonde_config *cfg, int joins, pid_t watch)
{
    const char *run_id = joins || watch ? sonde__getenv("SONDE_RUN_ID") : NULL;
    if (run_id && *run_id && strlen(run_id) < sizeof p->run_id &&
        strspn(run_id, "0123456789abcdef") == strlen(run_id))
        memcpy(p->run_id, run_id, strlen(run_id) + 1);
    p->name = cfg->name ? xstrdup(cfg->name) : default_name();
    p->output_dir = xstrdup(cfg->output_dir ? cfg->output_dir : "./sonde-out");
    p->unit = xstrdup(cfg->unit ? cfg->unit : "tokens");
    if (!p->name || !p->output_dir || !p->unit)
        return -1;
    if (cfg->world_size > 1 && cfg->rank >= 0) {
        char *rn = NULL;
        if (sonde__asprintf(&rn, "%s-rank%d", p->name, cfg->rank) < 0 || !rn)
            return -1;
        sonde__free(p->name);
        p->name = rn;
    }
    p->cfg.name = p->name;
    p->cfg.output_dir = p->output_dir;
    p->cfg.unit = p->unit;
    return 0;
}

/* With the file open: the fatal signals' flush, the writer thread, NVTX, the step schedule,
 * the sampler, CPU samples with their stacks and CUDA activity, each said when it fails. */
static void start_recording(sonde_profiler *p, const sonde_config *cfg, pid_t watch)
{
    if (sonde__registry_add(p) != 0)
        sonde__warn(p, "more than 64 live profilers: this one is not flushed on fatal signals");
    if (sonde__writer_start(p) != 0)
        sonde__warn(p, "could not start the writer thread: events are written at export");
    if (p->flight)
        sonde__control_install(p);
    if (cfg->nvtx) {
        const char *why = sonde__nvtx_reason();
        if (why)
            sonde__warn(p, "nvtx: %s", why);
        else
            p->nvtx = 1;
    }
    __atomic_store_n(&p->hot.recording, 1, __ATOMIC_RELAXED);
    if (sonde__schedule_on(&p->cfg)) {
        if (sonde__schedule_check(&p->cfg) != 0) {
            sonde__warn(p, "%s; recording every step", sonde_last_error());
            sonde__set_status(p, SONDE_EINVAL, sonde_last_error());
        } else {
            p->schedule_on = 1;
            p->sched_action = -1;
            pthread_mutex_lock(&p->step_lock);
            sonde__schedule_step(p, 0, 0);
            pthread_mutex_unlock(&p->step_lock);
        }
    }
    if (sonde__sampler_start(p) != 0)
        sonde__warn(p, "could not start the sampler thread: no CPU, memory or GPU samples");
    if (cfg->metrics_port && !p->flight) {
        char why[320];
        if (sonde__metrics_start(p, why, sizeof why) != 0) {
            sonde__warn(p, "%s; the run goes on without live metrics", why);
            fprintf(stderr, "sonde: %s; the run goes on without live metrics\n", why);
        }
    }
    int hz = cfg->sample_hz < 0 ? (cfg->with_stack ? 999 : 0) : cfg->sample_hz;
    if (hz > 0 && p->flight) {
        sonde__warn(p, "flight recorder: CPU samples with call stacks are not kept in its "
                       "window yet; sample_hz is off");
        hz = 0;
    }
    if (!watch && hz > 0) {
        char why[300];
        if (sonde__stacks_attach(p, 0, (unsigned)hz, p->cfg.sample_python, why, sizeof why) != 0)
            sonde__warn(p, "no CPU samples with call stacks: %s", why);
    }
    if (cfg->cuda_activity) {
        char why[400];
        sonde_gpu_sink sink = sonde__gpu_sink(p);
        if (sonde__cupti_start(&sink, why, sizeof why) != 0)
            sonde__warn(p, "cuda activity: %s", why);
    }
}

sonde_profiler *sonde__create_watching(const sonde_config *cfg_in, pid_t watch,
                                       const char *join_suffix,
                                       const struct sonde_reports *reports)
{
    sonde_config cfg = cfg_in ? *cfg_in : sonde_config_default();
    sonde_profiler *p = sonde__calloc(1, sizeof *p);
    if (!p) {
        sonde__fail(SONDE_ENOMEM, "sonde_create: out of memory");
        return NULL;
    }
    p->watch_pid = watch;
    p->reports = reports;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->wlock, NULL);
    pthread_mutex_init(&p->step_lock, NULL);
    pthread_mutex_init(&p->latest_lock, NULL);
    sem_init(&p->wake, 0, 0);
    p->fd = -1;
    p->registry_slot = -1;
    atomic_store(&p->sites_written, 1); /* id 0 is "none" */
    p->hot.serial = atomic_fetch_add(&g_serial, 1) + 1;
    p->hot.use_tsc = sonde__clock()->use_tsc;

    char bad[600], env_bad[600], joined[512];
    sonde__env_failure(env_bad, sizeof env_bad);
    if (env_bad[0]) /* said again: the program may have dropped sonde_config_from_env's code */
        fprintf(stderr, "sonde: the environment was not applied (sonde_config_from_env failed): %s\n",
                env_bad);
    int joins = settle_config(p, &cfg, watch, join_suffix, joined, sizeof joined, bad, sizeof bad);
    p->cfg = cfg;
    if (name_profiler(p, &cfg, joins, watch) != 0) {
        free_profiler(p);
        sonde__fail(SONDE_ENOMEM, "sonde_create: out of memory");
        return NULL;
    }
    if (bad[0]) {
        sonde__set_status(p, SONDE_EINVAL, bad);
        sonde__warn(p, "%s", bad);
    }
    if (env_bad[0])
        sonde__warn(p, "the environment was not applied: %s", env_bad);
    if (!cfg.enabled)
        return p;

    if (setup_buffers(p) != 0 || (cfg.flight_recorder_s > 0 && sonde__flight_create(p) != 0)) {
        free_profiler(p);
        sonde__fail(SONDE_ENOMEM, "sonde_create: out of memory for %g MiB of buffers",
                    cfg.buffer_mb);
        return NULL;
    }
    if (cfg.on_demand && cfg.flight_recorder_s > 0) {
        sonde__warn(p, "on_demand is off: the flight recorder (flight_recorder_s) records "
                       "everything already");
        p->cfg.on_demand = cfg.on_demand = 0;
    }
    if (cfg.on_demand) { /* no file, no recording, until a start command (ondemand.c) */
        p->ondemand = 1;
        if (!(p->od_base = xstrdup(p->name))) {
            free_profiler(p);
            sonde__fail(SONDE_ENOMEM, "sonde_create: out of memory");
            return NULL;
        }
        if (sonde__registry_add(p) != 0)
            sonde__warn(p, "more than 64 live profilers: this one is not flushed on fatal "
                           "signals");
        if (sonde__writer_start(p) != 0)
            sonde__warn(p, "could not start the writer thread: no recording on demand");
        sonde__control_install(p);
        return p;
    }
    if (sonde__writer_open(p) != 0)
        return p; /* status says why; recording stays off and the host goes on */
    start_recording(p, &cfg, watch);
    return p;
}

static int stacks_write(void *ctx, unsigned type, const uint8_t *payload, size_t len)
{
    sonde_profiler *p = ctx;
    return p->fd >= 0 ? sonde__write_record(p, type, payload, len) : -1;
}

int sonde__stacks_attach(sonde_profiler *p, pid_t pid, unsigned hz, int python, char *why,
                         size_t cap)
{
    if (p->stacks || p->fd < 0) {
        snprintf(why, cap, "%s", p->stacks ? "already sampling" : "the profiler records nothing");
        return -1;
    }
    p->stacks = sonde__stacks_start(pid, hz, p->cfg.sample_inline, p->cfg.sample_cfi,
                                    python, p->cfg.sample_off_cpu,
                                    p->cfg.sample_in_thread, stacks_write, p, why, cap);
    if (p->stacks)
        p->stacks_hz = hz;
    return p->stacks ? 0 : -1;
}

void sonde__stacks_stop(sonde_profiler *p)
{
    if (!p->stacks)
        return;
    int rc = sonde__stacks_finish(p->stacks, &p->stacks_cpu_ns, &p->stacks_cfi, &p->stacks_py);
    p->stacks = NULL;
    if (rc)
        sonde__warn(p, "CPU samples with call stacks: %s; the report's are incomplete",
                    rc == SONDE_ENOMEM ? "out of memory naming their functions"
                                       : "a record could not be written");
}

static int finalize_run(sonde_profiler *p);

/* Stops recording, writes everything and the reports; everything except freeing. SIGTERM waits
 * on this thread until it is done, and a termination signal's default action on another thread
 * waits for it too (signal.c): a pool's terminate() sends SIGTERM to workers that may be
 * finishing their runs (issue 61 #10: a worker's sections were lost when the signal came
 * first on a loaded machine). */
static int finalize(sonde_profiler *p)
{
    sigset_t term, old; /* blocked before the run is marked finalized: a handler that sees the
                           mark writes nothing, so no SIGTERM may come on this thread after it */
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &old);
    sonde__finishing(1); /* before the mark too, for a handler on another thread */
    int expected = 0;
    if (!atomic_compare_exchange_strong(&p->finalized, &expected, 1)) {
        sonde__finishing(0);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return 0;
    }
    int rc = finalize_run(p);
    sonde__finishing(0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static int finalize_run(sonde_profiler *p)
{
    int rc = 0;
    sonde__metrics_stop(p); /* scraped no more: the run ends */
    sonde__sampler_stop(p); /* its last samples are still recorded */
    sonde__stacks_stop(p);  /* its samples, stacks and functions too */
    sonde__cupti_stop(p);   /* CUPTI's last buffers too */
    if (p->schedule_on && sonde__has_sink(p)) {
        /* An active window still open ends with the run: its trace and callback too. */
        pthread_mutex_lock(&p->step_lock);
        if (p->sched_action == SCHED_ACTIVE)
            sonde__end_window(p, (uint64_t)atomic_load(&p->steps));
        sonde__unlock_and_ready(p);
    }
    __atomic_store_n(&p->hot.recording, 0, __ATOMIC_RELAXED);
    if (p->ondemand) { /* a window still open ends with the run */
        sonde__writer_stop(p);
        return sonde__ondemand_finish(p);
    }
    if (p->flight) { /* nothing is written but the dumps: those still due, and an exit's */
        sonde__writer_stop(p);
        sonde__wlock(p);
        sonde__writer_pass(p, 1);
        int st = sonde__exit_status();
        sonde__flight_finish(p, st > 0 ? st : 0);
        sonde__wunlock(p);
        return atomic_load(&p->status) ? SONDE_EIO : 0;
    }
    /* No writer pass from here on: a forked child's first one may be opening its file
     * (child_pending cleared, fd not yet set), which read in between looked like a run with no
     * file, left unwritten (test_sonde's fork pool under load: a worker's run lost). */
    sonde__writer_stop(p);
    if (p->fd < 0 && !atomic_load(&p->child_pending))
        return atomic_load(&p->status) ? SONDE_EIO : 0;
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        /* a thread may still be opening sections as this runs: its depth and stack are read
         * as the live display reads them (relaxed loads of what it stores so) */
        int32_t depth = __atomic_load_n(&tb->hot.depth, __ATOMIC_RELAXED);
        if (atomic_load(&tb->state) != TB_LIVE || depth <= 0)
            continue;
        char open[256] = "";
        size_t k = 0;
        int d = depth < 64 ? depth : 64;
        for (int i = 0; i < d && k < sizeof open - 40; i++) {
            uint32_t id = __atomic_load_n(&tb->hot.stack[i], __ATOMIC_RELAXED);
            const sonde_site_rec *r = sonde__site_get(id); /* NULL for the placeholders */
            k += (size_t)snprintf(open + k, sizeof open - k, "%s%.32s", i ? " > " : "",
                                  r                  ? r->name
                                  : id == PAUSED_ID  ? "(paused by the schedule)"
                                  : id == DROPPED_ID ? "(dropped: buffers full)"
                                                     : "?");
        }
        sonde__warn(p, "%d section(s) still open at the end of the run on thread %u (%s): %s",
                    depth, tb->thread, tb->name, open);
        if (rc != SONDE_EOPEN) /* the first thread's, in the caller's last error (not stale) */
            sonde__fail(SONDE_EOPEN, "sonde_destroy: %d section(s) still open on thread %u "
                                     "(%s), closed now: %s", depth, tb->thread,
                        tb->name, open);
        rc = SONDE_EOPEN;
    }
    uint64_t unb = atomic_load(&p->misuse_unbalanced);
    if (unb)
        sonde__warn(p, "sonde_end or sonde_session_end without an open section or session: %llu "
                       "time(s)", (unsigned long long)unb);
    uint64_t lost = atomic_load(&p->snaps_lost);
    if (lost)
        sonde__warn(p, "%llu memory snapshot(s) skipped: steps came faster than the sampler could "
                       "take them", (unsigned long long)lost);
    uint64_t nf = atomic_load(&p->misuse_nonfinite);
    if (nf)
        sonde__warn(p, "non-finite values passed to sonde_metric/counter/throughput/flops were "
                       "rejected: %llu time(s)", (unsigned long long)nf);
    if (sonde__writer_close(p) != 0 && !rc)
        rc = SONDE_EIO;
    if (atomic_load(&p->child_pending))
        return rc; /* a forked child that recorded nothing has no file and no reports */
    /* (sonde run's profiler records the formats it will write, and writes them itself once the
     * program's own runs are joined in) */
    if (!p->watch_pid && p->reports && (p->cfg.formats || p->cfg.print_summary)) {
        int wr = p->reports->write_reports(p, NULL);
        if (wr) {
            /* said where it is seen even when the host ignores the code (an exit() without
             * sonde_destroy cannot return one): the recording is whole, the reports can be made
             * again from it */
            fprintf(stderr, "sonde: the reports of run %s were not all written: %s; the recording "
                            "%s is kept, and `sonde export %s` writes them again\n",
                    p->name, sonde_last_error(), p->path ? p->path : "?", p->path ? p->path : "?");
            if (!rc)
                rc = wr == SONDE_ENOMEM ? SONDE_ENOMEM : SONDE_EIO;
        }
    }
    return rc;
}

/* Called by the atexit handler (signal.c): a run whose host never called sonde_destroy still
 * ends with its reports. */
void sonde__finalize_at_exit(sonde_profiler *p) { finalize(p); }

/* sonde_destroy runs one at a time: a second call on the same profiler, from another thread at
 * the same moment, waits for the first and then finds it destroyed (SONDE_ESTATE) instead of
 * joining the writer thread twice. Recursive: a callback run by the first may destroy another. */
static pthread_mutex_t g_destroy_lock;
static pthread_once_t g_destroy_once = PTHREAD_ONCE_INIT;

static _Atomic int g_destroy_ready;

static void destroy_lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_destroy_lock, &a);
    pthread_mutexattr_destroy(&a);
    atomic_store(&g_destroy_ready, 1);
}

void sonde__destroy_lock_child(void)
{
    if (atomic_load(&g_destroy_ready))
        destroy_lock_init(); /* the thread that held it is not in the child */
}

int sonde_destroy(sonde_profiler *p)
{
    pthread_once(&g_destroy_once, destroy_lock_init);
    pthread_mutex_lock(&g_destroy_lock);
    int rc = check_p(p, "sonde_destroy");
    if (!rc) {
        rc = finalize(p);
        sonde__writer_stop(p);
        sonde__registry_remove(p);
        if (sonde__tl.serial == p->hot.serial) {
            sonde__tl.serial = 0;
            sonde__tl.tb = NULL;
        }
        bury(p);
    }
    pthread_mutex_unlock(&g_destroy_lock);
    return rc;
}

const char *sonde_name(const sonde_profiler *p) { return p ? p->name : NULL; }
const char *sonde_file_path(const sonde_profiler *p) { return p ? p->path : NULL; }
const sonde_config *sonde_config_of(const sonde_profiler *p)
{
    return p && !p->destroyed ? &p->cfg : NULL;
}
int sonde_status(const sonde_profiler *p)
{
    if (!p)
        return SONDE_EINVAL;
    return p->destroyed ? SONDE_ESTATE : atomic_load(&((sonde_profiler *)p)->status);
}

/* ------------------------------------------------------------------------------------------
 * Recording calls
 * ---------------------------------------------------------------------------------------- */
#define RECORDING_OR_RETURN(p, call)                                                           \
    do {                                                                                       \
        CHECK_P(p, call);                                                                      \
        if (!recording(p))                                                                     \
            return 0;                                                                          \
    } while (0)

static int intern_arg(const char *s, const char *call, const char *what, uint32_t *id)
{
    if (!s)
        return sonde__fail(SONDE_EINVAL, "%s: %s is NULL", call, what);
    *id = sonde__intern(s);
    if (!*id && errno == ENAMETOOLONG)
        return sonde__fail(SONDE_EINVAL, "%s: the %s is longer than %d bytes (\"%.40s...\")", call,
                           what, SONDE_MAX_NAME, s);
    if (!*id)
        return sonde__fail(SONDE_ENOMEM, "%s: out of memory interning the %s", call, what);
    return 0;
}

static int finite_arg(sonde_profiler *p, double v, const char *call)
{
    if (isfinite(v))
        return 0;
    atomic_fetch_add(&p->misuse_nonfinite, 1);
    return sonde__fail(SONDE_EINVAL, "%s: value is not finite", call);
}

/* Sessions are process-wide NVTX ranges ("session NAME"): the open one ends, name (if any)
 * starts. Under the profiler's lock: sessions may begin and end on different threads. */
static void nvtx_session(sonde_profiler *p, const char *name)
{
    pthread_mutex_lock(&p->lock);
    if (p->nvtx_session)
        sonde__nvtx_end(p->nvtx_session);
    p->nvtx_session = 0;
    if (name) {
        char label[300];
        snprintf(label, sizeof label, "session %s", name);
        p->nvtx_session = sonde__nvtx_start(label);
    }
    pthread_mutex_unlock(&p->lock);
}

int sonde_session_begin(sonde_profiler *p, const char *name)
{
    RECORDING_OR_RETURN(p, "sonde_session_begin");
    uint32_t id;
    int rc = intern_arg(name, "sonde_session_begin", "name", &id);
    if (rc)
        return rc;
    if (atomic_exchange(&p->session_open, 1))
        sonde__record(p, SONDE_K_SESSION_END, 0, 0, NULL);
    if (p->nvtx)
        nvtx_session(p, name);
    uint64_t tick = 0;
    rc = record_ev(p, SONDE_K_SESSION_BEGIN, id, 0, NULL, &tick);
    atomic_store(&p->session_tick, tick); /* before its name: a window's start reads in turn */
    atomic_store(&p->cur_session, id);
    atomic_store(&p->session_tb, sonde__thread_buf(p));
    /* session_tags (checked key=value,... when set): the session's metadata */
    for (const char *t = p->cfg.session_tags; !rc && t && *t;) {
        size_t n = strcspn(t, ",");
        char kv[SONDE_TAG_MAX + 1]; /* items were checked to fit when the key was set */
        snprintf(kv, sizeof kv, "%.*s", (int)(n < sizeof kv ? n : sizeof kv - 1), t);
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = 0;
            rc = sonde_metadata(p, kv, eq + 1);
        }
        t += n + (t[n] == ',');
    }
    return rc;
}

int sonde_session_end(sonde_profiler *p)
{
    RECORDING_OR_RETURN(p, "sonde_session_end");
    if (!atomic_exchange(&p->session_open, 0)) {
        atomic_fetch_add(&p->misuse_unbalanced, 1);
        return sonde__fail(SONDE_EUNBALANCED, "sonde_session_end: no session is open");
    }
    atomic_store(&p->cur_session, 0);
    atomic_store(&p->session_tb, NULL);
    if (p->nvtx)
        nvtx_session(p, NULL);
    return sonde__record(p, SONDE_K_SESSION_END, 0, 0, NULL);
}

/* sonde_begin with nvtx on, out of line as end_nvtx is. */
static __attribute__((noinline, cold)) int begin_nvtx(sonde_profiler *p, uint32_t id,
                                                       const char *name)
{
    int rc = begin_id(p, id, NULL);
    if (rc == 0)
        sonde__nvtx_push(name);
    return rc;
}

int sonde_begin(sonde_profiler *p, const char *name)
{
    CHECK_P(p, "sonde_begin");
    return sonde__begin_named(p, 0, name);
}

int sonde__begin_named(sonde_profiler *p, uint32_t id, const char *name)
{
    if (!recording(p)) {
        /* Paused by the schedule, or between windows of recording on demand: remember the
         * section so that its end, recording or not, closes nothing else. */
        if (((p->schedule_on && sonde__has_sink(p)) || p->ondemand) &&
            !atomic_load(&p->finalized)) {
            sonde_tbuf *tb = sonde__thread_buf(p);
            if (!tb)
                return SONDE_ENOMEM;
            sonde__push(&tb->hot, PAUSED_ID);
        }
        return 0;
    }
    if (!id) {
        int rc = intern_arg(name, "sonde_begin", "name", &id);
        if (rc)
            return rc;
    }
    if (SONDE__UNLIKELY(p->nvtx))
        return begin_nvtx(p, id, name);
    return begin_id(p, id, NULL);
}

int sonde_end(sonde_profiler *p)
{
    CHECK_P(p, "sonde_end");
    /* With the schedule paused (or on demand, between windows), a section begun while
     * recording still records its end. */
    if (!recording(p) &&
        !(((p->schedule_on && sonde__has_sink(p)) || p->ondemand) && !atomic_load(&p->finalized)))
        return 0;
    sonde_tbuf *tb = sonde__thread_buf(p);
    if (!tb)
        return SONDE_ENOMEM;
    int32_t d = tb->hot.depth;
    uint32_t id = (d > 0 && d <= 64) ? tb->hot.stack[d - 1] : 0;
    if (id == PAUSED_ID) {
        sonde__set_depth(&tb->hot, d - 1);
        return 0;
    }
    if (id == DROPPED_ID) {
        sonde__set_depth(&tb->hot, d - 1);
        atomic_fetch_add_explicit(&tb->dropped, 1, memory_order_relaxed);
        tb->gap++;
        return sonde__fail(SONDE_EDROPPED, "sonde_end: its section had been dropped");
    }
    if (SONDE__UNLIKELY(p->nvtx))
        return end_nvtx(p, tb, id);
    return end_id(p, tb, id);
}

int sonde_metadata(sonde_profiler *p, const char *key, const char *value)
{
    RECORDING_OR_RETURN(p, "sonde_metadata");
    uint32_t k, v;
    int rc = intern_arg(key, "sonde_metadata", "key", &k);
    if (!rc)
        rc = intern_arg(value, "sonde_metadata", "value", &v);
    if (rc)
        return rc;
    uint64_t t0 = p->flight ? sonde__ticks() : 0;
    rc = sonde__record(p, SONDE_K_METADATA, k, v, NULL);
    if (p->flight) { /* outside any section of this thread: the run's, in every dump */
        const sonde_tbuf *tb = sonde__thread_buf(p);
        if (!tb || tb->hot.depth <= 0)
            sonde__flight_run_meta(p, k, v, rc == SONDE_EDROPPED ? 0 : t0);
    }
    return rc;
}

int sonde_diffusion_step(sonde_profiler *p, int step, double timestep, int block_size,
                         double seconds, double guidance_scale)
{
    RECORDING_OR_RETURN(p, "sonde_diffusion_step");
    int rc;
    if ((rc = finite_arg(p, timestep, "sonde_diffusion_step")) ||
        (rc = finite_arg(p, seconds, "sonde_diffusion_step")) ||
        (rc = finite_arg(p, guidance_scale, "sonde_diffusion_step")))
        return rc;
    if (step < 0 || block_size < 0)
        return sonde__fail(SONDE_EINVAL, "sonde_diffusion_step: step %d and block size %d must "
                                         "be >= 0", step, block_size);
    double v[4] = {seconds, timestep, (double)block_size, guidance_scale};
    return sonde__record(p, SONDE_K_DSTEP, 0, (uint32_t)step, v);
}

int sonde_block(sonde_profiler *p, int block_index, int block_size_frames, double seconds,
                double memory_mb)
{
    RECORDING_OR_RETURN(p, "sonde_block");
    int rc;
    if ((rc = finite_arg(p, seconds, "sonde_block")) || (rc = finite_arg(p, memory_mb, "sonde_block")))
        return rc;
    if (block_index < 0 || block_size_frames < 0)
        return sonde__fail(SONDE_EINVAL, "sonde_block: index %d and frames %d must be >= 0",
                           block_index, block_size_frames);
    double v[4] = {seconds, (double)block_size_frames, memory_mb, 0};
    return sonde__record(p, SONDE_K_BLOCK, 0, (uint32_t)block_index, v);
}

/* A named value of kind (metric, counter, parameter count): the name interned, the value finite
 * (and not negative when min_zero). The caller checked p. */
static int named_value(sonde_profiler *p, const char *call, unsigned kind, const char *name,
                       double value, int min_zero)
{
    uint32_t id;
    int rc = intern_arg(name, call, "name", &id);
    if (rc || (rc = finite_arg(p, value, call)))
        return rc;
    if (min_zero && value < 0)
        return sonde__fail(SONDE_EINVAL, "%s: %g is negative", call, value);
    return sonde__record(p, kind, id, 0, &value);
}

int sonde_model_params(sonde_profiler *p, const char *name, double count)
{
    RECORDING_OR_RETURN(p, "sonde_model_params");
    return named_value(p, "sonde_model_params", SONDE_K_PARAMS, name, count, 1);
}

int sonde_shape(sonde_profiler *p, const char *name, const int64_t *dims, int ndims)
{
    RECORDING_OR_RETURN(p, "sonde_shape");
    if (!p->cfg.record_shapes)
        return 0;
    if (ndims < 0 || ndims > 64 || (ndims && !dims))
        return sonde__fail(SONDE_EINVAL, "sonde_shape: %d dimensions (0..64 with dims)", ndims);
    char text[64 * 22 + 3];
    size_t k = 0;
    text[k++] = '[';
    for (int i = 0; i < ndims; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%s%lld", i ? ", " : "",
                              (long long)dims[i]);
    text[k++] = ']';
    text[k] = 0;
    return sonde_metadata(p, name, text);
}

int sonde_metric(sonde_profiler *p, const char *name, double value)
{
    RECORDING_OR_RETURN(p, "sonde_metric");
    return named_value(p, "sonde_metric", SONDE_K_METRIC, name, value, 0);
}

int sonde_throughput(sonde_profiler *p, double units, double seconds)
{
    return sonde_throughput_unit(p, units, seconds, NULL);
}

int sonde_throughput_unit(sonde_profiler *p, double units, double seconds, const char *unit)
{
    RECORDING_OR_RETURN(p, "sonde_throughput");
    uint32_t uid = 0;
    int rc = unit ? intern_arg(unit, "sonde_throughput_unit", "unit", &uid) : 0;
    if (rc || (rc = finite_arg(p, units, "sonde_throughput")) ||
        (rc = finite_arg(p, seconds, "sonde_throughput")))
        return rc;
    if (units < 0)
        return sonde__fail(SONDE_EINVAL, "sonde_throughput: units %g is negative", units);
    double v[2] = {units, seconds};
    return sonde__record(p, SONDE_K_THROUGHPUT, uid, 0, v);
}

int sonde_flops(sonde_profiler *p, double flops)
{
    RECORDING_OR_RETURN(p, "sonde_flops");
    int rc = finite_arg(p, flops, "sonde_flops");
    if (rc)
        return rc;
    if (flops < 0)
        return sonde__fail(SONDE_EINVAL, "sonde_flops: %g is negative", flops);
    return sonde__record(p, SONDE_K_FLOPS, 0, 0, &flops);
}

int sonde_event(sonde_profiler *p, const char *name)
{
    RECORDING_OR_RETURN(p, "sonde_event");
    uint32_t id;
    int rc = intern_arg(name, "sonde_event", "name", &id);
    if (rc)
        return rc;
    return sonde__record(p, SONDE_K_INSTANT, id, 0, NULL);
}

int sonde_event_args(sonde_profiler *p, const char *name, const char *const *keys,
                     const char *const *values, size_t n)
{
    RECORDING_OR_RETURN(p, "sonde_event_args");
    if (n > SONDE_EVENT_ARGS_MAX)
        return sonde__fail(SONDE_EINVAL, "sonde_event_args: %zu arguments; at most %d", n,
                           SONDE_EVENT_ARGS_MAX);
    if (n && (!keys || !values))
        return sonde__fail(SONDE_EINVAL, "sonde_event_args: keys or values is NULL");
    uint32_t id, kv[2 * SONDE_EVENT_ARGS_MAX];
    int rc = intern_arg(name, "sonde_event_args", "name", &id);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = intern_arg(keys[i], "sonde_event_args", "key", &kv[2 * i]);
        if (!rc)
            rc = intern_arg(values[i], "sonde_event_args", "value", &kv[2 * i + 1]);
    }
    if (rc)
        return rc;
    sonde_tbuf *tb = sonde__thread_buf(p);
    if (!tb)
        return SONDE_ENOMEM;
    /* The instant and its arguments in one piece of one chunk: never an argument without its
     * event (it would attach to the open section), never an event with some of them. */
    if (ensure_room(p, tb, (unsigned)n + 1) != 0)
        return sonde__fail(SONDE_EDROPPED, "sonde: event dropped: buffers are full");
    sonde__ev *e = tb->hot.cur;
    uint64_t now = sonde__ticks();
    e[0].ts = now;
    e[0].tag = (id << 4) | SONDE_K_INSTANT;
    e[0].arg = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        e[1 + i].ts = now;
        e[1 + i].tag = (kv[2 * i] << 4) | SONDE_K_METADATA;
        e[1 + i].arg = kv[2 * i + 1];
    }
    sonde__publish(&tb->hot, e + n + 1);
    return 0;
}

int sonde__aggregated(sonde_profiler *p, const char *section, uint64_t calls, uint64_t ticks,
                      uint64_t sum_ticks, uint64_t hidden_ticks)
{
    char n[32], total[32], sum[32], hidden[32];
    double tps = sonde__clock()->ticks_per_s;
    snprintf(n, sizeof n, "%llu", (unsigned long long)calls);
    snprintf(total, sizeof total, "%.9g", (double)ticks / tps);
    snprintf(sum, sizeof sum, "%.9g", (double)sum_ticks / tps);
    snprintf(hidden, sizeof hidden, "%.9g", (double)hidden_ticks / tps);
    const char *keys[5] = {"section", "calls", "total_s"}, *values[5] = {section, n, total};
    size_t k = 3;
    if (sum_ticks != ticks) {
        keys[k] = "sum_s";
        values[k++] = sum;
    }
    if (hidden_ticks) {
        keys[k] = "hidden_s";
        values[k++] = hidden;
    }
    return sonde_event_args(p, SONDE_AGGREGATED_EVENT, keys, values, k);
}

int sonde_counter(sonde_profiler *p, const char *name, double value)
{
    RECORDING_OR_RETURN(p, "sonde_counter");
    return named_value(p, "sonde_counter", SONDE_K_COUNTER, name, value, 0);
}

int sonde_sync(sonde_profiler *p)
{
    RECORDING_OR_RETURN(p, "sonde_sync");
    uint32_t id = sonde__intern("sonde.sync");
    return id ? sonde__record(p, SONDE_K_INSTANT, id, 0, NULL)
              : sonde__fail(SONDE_ENOMEM, "sonde_sync: out of memory");
}

int sonde_step(sonde_profiler *p)
{
    CHECK_P(p, "sonde_step");
    /* Steps count whatever the schedule says, so it knows where it is. */
    if (!sonde__has_sink(p) || atomic_load(&p->finalized))
        return 0;
    uint64_t from = p->schedule_on ? sonde__file_end(p) : 0; /* before its step's end */
    uint64_t n = atomic_fetch_add(&p->steps, 1) + 1;
    int rc = sonde__record(p, SONDE_K_STEP, 0, (uint32_t)n, NULL);
    if (p->flight)
        sonde__flight_step(p, n);
    if (p->nvtx) {
        char mark[32];
        snprintf(mark, sizeof mark, "step %llu", (unsigned long long)(n - 1)); /* ended: from 0 */
        sonde__nvtx_mark(mark);
    }
    if (p->schedule_on || (p->cfg.memory_every_n_steps && n % p->cfg.memory_every_n_steps == 0)) {
        pthread_mutex_lock(&p->step_lock);
        if (p->schedule_on)
            sonde__schedule_step(p, n, from);
        if (p->cfg.memory_every_n_steps && n % p->cfg.memory_every_n_steps == 0) {
            /* The sampler takes the snapshot and writes the file: no I/O on this thread. */
            if (p->snap_n < sizeof p->snap_queue / sizeof p->snap_queue[0])
                p->snap_queue[p->snap_n++] = n;
            else
                atomic_fetch_add(&p->snaps_lost, 1);
            if (p->sampler_started)
                sem_post(&p->sampler_wake);
        }
        sonde__unlock_and_ready(p);
    }
    return rc;
}

int sonde_step_begin(sonde_profiler *p)
{
    CHECK_P(p, "sonde_step_begin");
    if (!sonde__has_sink(p) || atomic_load(&p->finalized))
        return 0;
    uint64_t n = atomic_load(&p->steps); /* the step about to begin */
    return sonde__record(p, SONDE_K_STEP, 0, SONDE_STEP_BEGIN | (uint32_t)(n & 0x7fffffffu), NULL);
}

int sonde_current_metrics(sonde_profiler *p, sonde_current_metric *out, size_t cap)
{
    CHECK_P(p, "sonde_current_metrics");
    if (cap && !out)
        return sonde__fail(SONDE_EINVAL, "sonde_current_metrics: out is NULL");
    pthread_mutex_lock(&p->latest_lock);
    size_t n = p->n_latest;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = (sonde_current_metric){p->latest[i].name, p->latest[i].value, p->latest[i].t};
    pthread_mutex_unlock(&p->latest_lock);
    return (int)n;
}

int sonde_clear(sonde_profiler *p)
{
    CHECK_P(p, "sonde_clear");
    if (!sonde__has_sink(p))
        return 0;
    sonde__wlock(p);
    sonde__writer_pass(p, 1);
    uint8_t buf[16];
    size_t n = varint_put(buf, sonde__ticks());
    int rc = sonde__write_record(p, SONDE_R_CLEAR, buf, n);
    sonde__wunlock(p);
    return rc ? sonde__fail(SONDE_EIO, "sonde_clear: could not write to %s", p->path) : 0;
}

int sonde_export(sonde_profiler *p, const char *path)
{
    CHECK_P(p, "sonde_export");
    if (p->flight)
        return sonde__fail(SONDE_ESTATE, "sonde_export: the flight recorder writes only on a "
                                         "trigger (sonde_trigger writes the window now)");
    if (p->ondemand && p->fd < 0)
        return sonde__fail(SONDE_ESTATE, "sonde_export: recording on demand is off (`sonde "
                                         "trigger %d --start` starts it)", (int)getpid());
    if (p->fd < 0 && !atomic_load(&p->finalized))
        return sonde__fail(SONDE_ESTATE, "sonde_export: nothing was recorded (%s)",
                           p->status_msg[0] ? p->status_msg : "profiler disabled");
    if (p->fd >= 0) {
        sonde__wlock(p);
        sonde__writer_pass(p, 1);
        sonde__wunlock(p);
    }
    if (!p->reports)
        return sonde__fail(SONDE_ESTATE, "sonde_export: this profiler writes no reports (it "
                                         "records into a `sonde run`, which writes them)");
    return p->reports->write_reports(p, path);
}
