/* flight.c - the flight recorder (flight_recorder_s > 0, docs/flight-recorder.md).
 *
 * The recording side is unchanged: threads fill their chunks, the writer encodes them. What
 * changes is where the writer's records go: not to NAME.sonde but to memory, in two parts.
 *   keep:  the records every dump needs, whatever its window: INFO, the first clock anchor, the
 *          call sites and the threads (bounded by the distinct names and threads).
 *   ring:  everything else (events, later anchors, operators, GPU records) in the order it was
 *          written, each with the newest tick it holds; the oldest leave when they are older
 *          than the window (and no trigger waits) or when the ring is full.
 * Events that describe the whole run rather than a moment (run metadata, model parameters, the
 * open session) are also copied aside as they are encoded, so a dump still has them when the
 * records that held them have left the ring: they are written on a thread of their own,
 * "sonde flight recorder", at the window's start.
 *
 * A trigger (sonde_trigger, the trigger signal, the step rule, an exit with a non-zero status)
 * is queued with its tick; the writer thread, on its next pass after tick + after_s, writes the
 * window [tick - flight_recorder_s, now] as NAME-triggerN.sonde straight from memory (a CLEAR
 * record at the window's start makes every reader drop what came before: sections that began
 * before it are left out whole), and a thread of its own reads that file back and writes its
 * reports, so the writer goes on draining chunks meanwhile. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/buf.h"
#include "../util/fileio.h"
#include "record.h"
#include "../config/keys.h"

#define FR_STICKY 256   /* run-wide events kept aside (distinct kinds and keys) */
#define FR_QUEUE 8      /* triggers waiting for their dump */
#define FR_STEPS 64     /* steps the step rule takes the median of */
#define FR_STEPS_MIN 16 /* steps known before the rule fires */

typedef struct fr_rec {
    uint64_t pos;  /* its first byte in the ring, as a running count (pos % cap) */
    uint32_t len;  /* header included */
    uint64_t tmax; /* the newest tick it holds; when it was put, for a record without events */
} fr_rec;

typedef struct fr_sticky {
    uint32_t kind, key; /* what a later one of the same kind and key replaces */
    unsigned nslots;
    sonde__ev ev[2];
} fr_sticky;

#define FR_RULES SONDE_RULES_MAX

/* A trigger_section_over_s or trigger_counter_below rule, as the flight recorder applies it. */
typedef struct fr_rule {
    sonde_trigger_rule r; /* as configured: name, value (counters), seconds */
    uint32_t id;        /* counters: the name interned */
    uint64_t ticks;     /* the seconds in ticks */
    uint64_t below;     /* counters: since when it has been under value (0: it is not) */
    int fired;          /* counters: triggered since it went under */
} fr_rule;

typedef struct fr_trigger {
    uint64_t tick;
    uint64_t joined;   /* triggers that came while this one waited */
    uint32_t reason_id; /* the reason interned, for the dump's "sonde.trigger" instant (0: none) */
    char reason[208];
} fr_trigger;

struct sonde_flight {
    pthread_mutex_t lock;       /* keep, ring and the run-wide events (the writer's side) */
    pthread_mutex_t qlock;      /* the triggers and the step rule (the host's side) */
    uint64_t window_ticks, after_ticks;
    uint64_t start;             /* the run's first tick: no window reaches before it */
    uint32_t trigger_id, reason_key; /* "sonde.trigger" and "reason", interned */
    /* keep */
    uint8_t *keep;
    size_t keep_len, keep_cap;
    int anchored;               /* the first anchor is in keep */
    /* ring */
    uint8_t *ring;
    uint64_t cap, head, tail;   /* live bytes [head, tail), running counts */
    fr_rec *recs;
    size_t rcap, r0, rn;        /* circular: rn records from r0 */
    uint64_t room_tick;         /* the newest tick that left for room while still wanted */
    uint64_t ev_tmax;           /* set by the writer for the EVENTS record it puts next */
    /* run-wide events */
    fr_sticky sticky[FR_STICKY];
    size_t n_sticky;
    uint64_t sticky_lost;
    sonde__fr_thread **th;      /* per thread index, as the writer saw them encoded */
    size_t n_th;
    fr_rule srule[FR_RULES], crule[FR_RULES]; /* trigger_section_over_s, _counter_below */
    int n_srule, n_crule;
    int8_t *site_rule;          /* per site id: its section rule + 1, -1 none, 0 not looked up */
    size_t n_site_rule;
    uint64_t lag_ticks;         /* how late the writer may see an event: kept past the window */
    uint32_t payload_left;      /* METADATA events still to come that belong to an instant */
    /* triggers (qlock) */
    _Atomic uint64_t hold_from; /* the oldest waiting trigger's tick, 0 when none */
    fr_trigger queue[FR_QUEUE];
    size_t nq;
    uint64_t lost;              /* triggers that found the queue full */
    uint64_t over_max;          /* triggers after flight_recorder_max dumps */
    unsigned dumps;
    int next_index;             /* N of the next NAME-triggerN */
    _Atomic uint64_t sig_tick;  /* set by the trigger signal's handler */
    _Atomic int crashed;        /* a fatal signal's dump was written: no other at exit */
    /* the step rule (qlock) */
    uint64_t last_step;
    double steps[FR_STEPS];
    unsigned n_steps, at_step;
    /* the reports thread */
    pthread_t rth;
    int rstarted;
    _Atomic int rdone;
    char *rpath, *rstem;
};

static void enqueue(sonde_profiler *p, sonde_flight *f, uint64_t tick, const char *reason,
                    uint32_t reason_id);
static uint32_t intern_reason(const char *reason);

/* ---- memory ---- */
/* The rules of key which (value may be NULL: none), ready to apply; how many. A value the key
 * table did not check (set in code) is refused with a warning. */
static int rules_of(sonde_profiler *p, const char *which, const char *value, fr_rule *out)
{
    sonde_trigger_rule r[FR_RULES];
    char why[200];
    int n = value ? sonde__trigger_rules(which, value, r, FR_RULES, why, sizeof why) : 0;
    if (n < 0) {
        sonde__warn(p, "%s: %s; the rule is off", which, why);
        return 0;
    }
    double tps = sonde__clock()->ticks_per_s;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].r = r[i];
        out[i].id = sonde__intern(r[i].name);
        out[i].ticks = (uint64_t)(r[i].s * tps);
    }
    return n;
}

int sonde__flight_create(sonde_profiler *p)
{
    sonde_flight *f = sonde__calloc(1, sizeof *f);
    if (!f)
        return -1;
    double tps = sonde__clock()->ticks_per_s;
    f->window_ticks = (uint64_t)(p->cfg.flight_recorder_s * tps);
    f->after_ticks = (uint64_t)(p->cfg.flight_recorder_after_s * tps);
    size_t bytes = (size_t)(p->cfg.buffer_mb * 1048576.0);
    f->cap = bytes - bytes / 4; /* the chunks have the other quarter (setup_buffers) */
    if (f->cap < (1u << 20))
        f->cap = 1u << 20;
    f->rcap = (size_t)(f->cap / 256) + 1024;
    f->ring = sonde__malloc(f->cap);
    f->recs = sonde__malloc(f->rcap * sizeof *f->recs);
    f->next_index = 1;
    f->start = p->start_tick ? p->start_tick : sonde__ticks();
    f->trigger_id = sonde__intern("sonde.trigger");
    f->reason_key = sonde__intern("reason");
    f->lag_ticks = (uint64_t)((p->cfg.flush_interval_s + 1) * tps);
    f->n_srule = rules_of(p, "trigger_section_over_s", p->cfg.trigger_section_over_s, f->srule);
    f->n_crule = rules_of(p, "trigger_counter_below", p->cfg.trigger_counter_below, f->crule);
    pthread_mutex_init(&f->lock, NULL);
    pthread_mutex_init(&f->qlock, NULL);
    p->flight = f;
    if (!f->ring || !f->recs)
        return -1;
    return 0;
}

static void join_reports(sonde_flight *f)
{
    if (!f->rstarted)
        return;
    pthread_join(f->rth, NULL);
    f->rstarted = 0;
    sonde__free(f->rpath);
    sonde__free(f->rstem);
    f->rpath = f->rstem = NULL;
}

static void free_threads(sonde_flight *f)
{
    sonde__free(f->site_rule);
    for (size_t i = 0; i < f->n_th; i++)
        sonde__free(f->th[i]);
    sonde__free(f->th);
}

void sonde__flight_forget(sonde_profiler *p)
{
    sonde_flight *f = p->flight;
    if (!f)
        return;
    sonde__free(f->rpath);
    sonde__free(f->rstem);
    sonde__free(f->keep);
    sonde__free(f->ring);
    sonde__free(f->recs);
    free_threads(f);
    sonde__free(f);
    p->flight = NULL;
}

void sonde__flight_free(sonde_profiler *p)
{
    sonde_flight *f = p->flight;
    if (!f)
        return;
    join_reports(f);
    pthread_mutex_destroy(&f->lock);
    pthread_mutex_destroy(&f->qlock);
    sonde__flight_forget(p); /* the memory, as a forked child gives it back */
}

/* ---- records ---- */
static int keep_put(sonde_flight *f, const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    size_t need = f->keep_len + SONDE_RECORD_HEADER_LEN + len;
    if (need > f->keep_cap) {
        size_t cap = f->keep_cap ? f->keep_cap : 4096;
        while (cap < need)
            cap *= 2;
        uint8_t *nk = sonde__realloc(f->keep, cap);
        if (!nk)
            return -1;
        f->keep = nk;
        f->keep_cap = cap;
    }
    memcpy(f->keep + f->keep_len, hdr, SONDE_RECORD_HEADER_LEN);
    memcpy(f->keep + f->keep_len + SONDE_RECORD_HEADER_LEN, payload, len);
    f->keep_len = need;
    return 0;
}

static void drop_oldest(sonde_flight *f, uint64_t wanted_from)
{
    fr_rec *r = &f->recs[f->r0];
    if (r->tmax >= wanted_from && r->tmax > f->room_tick)
        f->room_tick = r->tmax;
    f->head = r->pos + r->len;
    f->r0 = (f->r0 + 1) % f->rcap;
    if (--f->rn == 0)
        f->head = f->tail;
}

/* The tick before which nothing is wanted any more: the window before now, or before the oldest
 * trigger that waits for its dump. */
static uint64_t wanted_from(sonde_flight *f, uint64_t now)
{
    uint64_t t = atomic_load(&f->hold_from);
    if (!t) /* a rule may see a moment of the window late (the writer's lag): kept for it */
        t = now > f->lag_ticks ? now - f->lag_ticks : 0;
    return t > f->window_ticks ? t - f->window_ticks : 0;
}

static int ring_put(sonde_flight *f, const uint8_t *hdr, const uint8_t *payload, size_t len,
                    uint64_t tmax)
{
    uint64_t n = SONDE_RECORD_HEADER_LEN + len;
    if (n > f->cap)
        return -1;
    uint64_t at = f->tail;
    if (at % f->cap + n > f->cap) /* a record is never split: the rest of the ring is skipped */
        at += f->cap - at % f->cap;
    uint64_t want = wanted_from(f, sonde__ticks());
    while (f->rn && (at + n - f->head > f->cap || f->rn == f->rcap))
        drop_oldest(f, want);
    if (!f->rn)
        f->head = at;
    uint8_t *dst = f->ring + at % f->cap;
    memcpy(dst, hdr, SONDE_RECORD_HEADER_LEN);
    memcpy(dst + SONDE_RECORD_HEADER_LEN, payload, len);
    f->recs[(f->r0 + f->rn) % f->rcap] = (fr_rec){at, (uint32_t)n, tmax};
    f->rn++;
    f->tail = at + n;
    return 0;
}

int sonde__flight_put(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len)
{
    sonde_flight *f = p->flight;
    uint8_t hdr[SONDE_RECORD_HEADER_LEN];
    sonde__record_frame(hdr, type, payload, len);
    pthread_mutex_lock(&f->lock);
    int rc;
    if (type == SONDE_R_INFO || type == SONDE_R_SITE || type == SONDE_R_THREAD ||
        (type == SONDE_R_ANCHOR && !f->anchored)) {
        f->anchored |= type == SONDE_R_ANCHOR;
        rc = keep_put(f, hdr, payload, len);
    } else {
        uint64_t tmax = type == SONDE_R_EVENTS && f->ev_tmax ? f->ev_tmax : sonde__ticks();
        f->ev_tmax = 0;
        rc = ring_put(f, hdr, payload, len, tmax);
    }
    pthread_mutex_unlock(&f->lock);
    if (rc == 0)
        atomic_fetch_add_explicit(&p->bytes_written, SONDE_RECORD_HEADER_LEN + len,
                                  memory_order_relaxed);
    return rc;
}

void sonde__flight_events_end(sonde_profiler *p, uint64_t tmax) { p->flight->ev_tmax = tmax; }

/* ---- run-wide events, seen as the writer encodes them (under wlock) ---- */
sonde__fr_thread *sonde__flight_thread(sonde_profiler *p, uint32_t thread)
{
    sonde_flight *f = p->flight;
    int made;
    sonde__fr_thread *t = SONDE_TABLE_AT(f->th, f->n_th, thread, &made);
    if (made)
        t->watch = f->n_srule > 0;
    return t;
}

/* ---- rules ---- */
/* The section rule of site id (a call site or an interned name: matched by name), -1 none.
 * Looked up once per site. Under wlock. */
static int site_rule(sonde_flight *f, uint32_t id)
{
    if (id >= f->n_site_rule) {
        size_t n = f->n_site_rule ? f->n_site_rule : 256;
        while (n <= id)
            n *= 2;
        int8_t *nr = sonde__realloc(f->site_rule, n);
        if (!nr)
            return -1;
        memset(nr + f->n_site_rule, 0, n - f->n_site_rule);
        f->site_rule = nr;
        f->n_site_rule = n;
    }
    if (!f->site_rule[id]) {
        const sonde_site_rec *r = id < sonde__site_count() ? sonde__site_get(id) : NULL;
        f->site_rule[id] = -1;
        for (int i = 0; r && r->name && i < f->n_srule; i++)
            if (!strcmp(r->name, f->srule[i].r.name))
                f->site_rule[id] = (int8_t)(i + 1);
    }
    return f->site_rule[id] > 0 ? f->site_rule[id] - 1 : -1;
}

void sonde__flight_section_end(sonde_profiler *p, uint32_t id, uint64_t begin, uint64_t end)
{
    sonde_flight *f = p->flight;
    int i = site_rule(f, id);
    if (i >= 0) {
        const fr_rule *r = &f->srule[i];
        if (end - begin <= r->ticks || end < begin)
            return;
        char why[300];
        snprintf(why, sizeof why, "section \"%.120s\" took %.3f ms, over its %g s "
                 "(trigger_section_over_s)", r->r.name,
                 (double)(end - begin) / sonde__clock()->ticks_per_s * 1e3, r->r.s);
        uint32_t rid = intern_reason(why);
        pthread_mutex_lock(&f->qlock);
        enqueue(p, f, end, why, rid);
        pthread_mutex_unlock(&f->qlock);
    }
}

/* A counter's sample: the trigger_counter_below rules. Caller holds f->lock. */
static void counter_rules(sonde_profiler *p, sonde_flight *f, const sonde__ev *e)
{
    uint32_t id = e->tag >> 4;
    double v;
    uint64_t bits = e[1].ts;
    memcpy(&v, &bits, sizeof v);
    for (int i = 0; i < f->n_crule; i++) {
        fr_rule *r = &f->crule[i];
        if (r->id != id)
            continue;
        if (v >= r->r.value) {
            r->below = 0;
            r->fired = 0;
            continue;
        }
        if (!r->below)
            r->below = e->ts ? e->ts : 1;
        if (r->fired || e->ts - r->below < r->ticks)
            continue;
        r->fired = 1;
        char why[300];
        snprintf(why, sizeof why, "counter \"%.120s\" under %g for %g s, now %g "
                 "(trigger_counter_below)", r->r.name, r->r.value, r->r.s, v);
        uint32_t rid = intern_reason(why);
        pthread_mutex_lock(&f->qlock);
        enqueue(p, f, e->ts, why, rid);
        pthread_mutex_unlock(&f->qlock);
    }
}

static void sticky_set(sonde_flight *f, uint32_t kind, uint32_t key, const sonde__ev *e,
                       unsigned nslots)
{
    size_t i;
    for (i = 0; i < f->n_sticky; i++)
        if (f->sticky[i].kind == kind && f->sticky[i].key == key)
            break;
    if (i == f->n_sticky) {
        if (i == FR_STICKY) {
            f->sticky_lost++;
            return;
        }
        f->n_sticky++;
    }
    f->sticky[i].kind = kind;
    f->sticky[i].key = key;
    f->sticky[i].nslots = nslots;
    memcpy(f->sticky[i].ev, e, nslots * sizeof *e);
}

static void sticky_remove(sonde_flight *f, uint32_t kind)
{
    for (size_t i = 0; i < f->n_sticky; i++)
        if (f->sticky[i].kind == kind) {
            f->sticky[i] = f->sticky[--f->n_sticky];
            return;
        }
}

void sonde__flight_run_meta(sonde_profiler *p, uint32_t key, uint32_t value, uint64_t tick)
{
    sonde_flight *f = p->flight;
    sonde__ev e = {tick, key << 4 | SONDE_K_METADATA, value};
    pthread_mutex_lock(&f->lock);
    sticky_set(f, SONDE_K_METADATA, key, &e, 1);
    pthread_mutex_unlock(&f->lock);
}

void sonde__flight_event(sonde_profiler *p, const sonde__ev *e, unsigned nslots)
{
    sonde_flight *f = p->flight;
    unsigned kind = e->tag & 15u;
    uint32_t id = e->tag >> 4;
    pthread_mutex_lock(&f->lock);
    if (kind == SONDE_K_INSTANT) {
        f->payload_left = e->arg;
    } else if (kind == SONDE_K_METADATA && f->payload_left) {
        f->payload_left--;
    } else if (kind == SONDE_K_PARAMS) {
        sticky_set(f, kind, id, e, nslots);
    } else if (kind == SONDE_K_SESSION_BEGIN) {
        sticky_set(f, kind, 0, e, nslots);
    } else if (kind == SONDE_K_SESSION_END) {
        sticky_remove(f, SONDE_K_SESSION_BEGIN);
    }
    if (kind != SONDE_K_INSTANT && kind != SONDE_K_METADATA)
        f->payload_left = 0;
    if (kind == SONDE_K_COUNTER && f->n_crule && nslots >= 2)
        counter_rules(p, f, e);
    pthread_mutex_unlock(&f->lock);
}

/* ---- triggers ---- */
/* Queues a trigger at tick; caller holds f->qlock. reason_id: reason interned (0: none). */
static void enqueue(sonde_profiler *p, sonde_flight *f, uint64_t tick, const char *reason,
                    uint32_t reason_id)
{
    if (f->nq && tick <= f->queue[f->nq - 1].tick + f->after_ticks) {
        f->queue[f->nq - 1].joined++; /* inside the window of the one before: it shows it */
        return;
    }
    if (f->dumps + f->nq >= p->cfg.flight_recorder_max) {
        f->over_max++;
        return;
    }
    if (f->nq == FR_QUEUE) {
        f->lost++;
        return;
    }
    fr_trigger *t = &f->queue[f->nq++];
    t->tick = tick;
    t->joined = 0;
    t->reason_id = reason_id;
    snprintf(t->reason, sizeof t->reason, "%.200s", reason && *reason ? reason : "sonde_trigger");
    for (char *c = t->reason; *c; c++) /* one line: it heads the text report */
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    atomic_store(&f->hold_from, f->queue[0].tick);
}

/* The reason of a trigger as an interned id, as it will head the dump (one line, 200 bytes). */
static uint32_t intern_reason(const char *reason)
{
    char r[208];
    snprintf(r, sizeof r, "%.200s", reason);
    for (char *c = r; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return sonde__intern(r);
}

static void trigger_at(sonde_profiler *p, uint64_t tick, const char *reason)
{
    sonde_flight *f = p->flight;
    uint32_t id = intern_reason(reason);
    pthread_mutex_lock(&f->qlock);
    enqueue(p, f, tick, reason, id);
    pthread_mutex_unlock(&f->qlock);
    sem_post(&p->wake);
}

int sonde_trigger(sonde_profiler *p, const char *reason)
{
    if (!p)
        return sonde__fail(SONDE_EINVAL, "sonde_trigger: profiler is NULL");
    const char *why = reason && *reason ? reason : "sonde_trigger";
    if (!p->flight) { /* everything is recorded: the moment is marked in the timeline */
        const char *k = "reason";
        int rc = sonde_event_args(p, "sonde.trigger", &k, &why, 1);
        return rc == SONDE_EINVAL || rc == SONDE_ENOMEM ? rc : 0;
    }
    if (!atomic_load(&p->finalized)) /* the dump marks the moment itself */
        trigger_at(p, sonde__ticks(), why);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void sonde__flight_step(sonde_profiler *p, uint64_t n)
{
    sonde_flight *f = p->flight;
    double k = p->cfg.trigger_step_over_median;
    if (!f || k <= 0)
        return;
    uint64_t now = sonde__ticks();
    char reason[208] = "";
    pthread_mutex_lock(&f->qlock);
    uint64_t last = f->last_step;
    f->last_step = now;
    if (last && now > last) {
        double tps = sonde__clock()->ticks_per_s;
        double d = (double)(now - last) / tps;
        if (f->n_steps >= FR_STEPS_MIN) {
            double s[FR_STEPS];
            memcpy(s, f->steps, f->n_steps * sizeof *s);
            sonde__sort(s, f->n_steps, sizeof *s, cmp_double);
            double med = f->n_steps % 2 ? s[f->n_steps / 2]
                                        : (s[f->n_steps / 2 - 1] + s[f->n_steps / 2]) / 2;
            if (med > 0 && d > k * med)
                snprintf(reason, sizeof reason, "step %llu took %.3f ms, %.1f x the median "
                         "%.3f ms of the last %u steps (trigger_step_over_median %g)",
                         (unsigned long long)(n - 1), d * 1e3, d / med, med * 1e3, f->n_steps,
                         k);
        }
        f->steps[f->at_step] = d;
        f->at_step = (f->at_step + 1) % FR_STEPS;
        if (f->n_steps < FR_STEPS)
            f->n_steps++;
    }
    pthread_mutex_unlock(&f->qlock);
    if (reason[0])
        trigger_at(p, now, reason);
}

void sonde__flight_signal(sonde_profiler *p)
{
    uint64_t t = sonde__ticks();
    atomic_store(&p->flight->sig_tick, t ? t : 1);
}

/* ---- the dump ---- */
static int put_rec(int fd, unsigned type, const uint8_t *payload, size_t len)
{
    uint8_t hdr[SONDE_RECORD_HEADER_LEN];
    sonde__record_frame(hdr, type, payload, len);
    return write_all(fd, hdr, sizeof hdr) || write_all(fd, payload, len) ? -1 : 0;
}

/* The dump's own thread (index thread), "sonde flight recorder": the run-wide events at the
 * window's start w, then the trigger's instant "sonde.trigger" with its reason at its tick.
 * Async-signal-safe. */
static int put_flight_thread(int fd, const sonde_flight *f, const fr_trigger *t, uint32_t thread,
                             uint64_t w, uint8_t *enc)
{
    int instant = t->reason_id && f->trigger_id && f->reason_key && t->tick >= w;
    uint64_t nslots = instant ? 2 : 0;
    for (size_t i = 0; i < f->n_sticky; i++) /* those in the window are in the ring already */
        nslots += f->sticky[i].ev[0].ts < w ? f->sticky[i].nslots : 0;
    if (!nslots)
        return 0;
    size_t k = varint_put(enc, thread);
    k += varint_put(enc + k, 0);
    k += str_put(enc + k, "sonde flight recorder", SIZE_MAX);
    if (put_rec(fd, SONDE_R_THREAD, enc, k))
        return -1;
    k = varint_put(enc, thread);
    k += varint_put(enc + k, 0);
    k += varint_put(enc + k, 0);
    k += varint_put(enc + k, nslots);
    sonde_put_u64le(enc + k, w);
    k += 8;
    for (size_t i = 0; i < f->n_sticky; i++) {
        const sonde__ev *e = f->sticky[i].ev;
        if (e->ts < w) /* every one at w */
            k += sonde__put_event(enc + k, e, e->ts);
    }
    if (instant) {
        k += varint_put(enc + k, (uint64_t)f->trigger_id << 4 | SONDE_K_INSTANT);
        k += varint_put(enc + k, zigzag_enc((int64_t)(t->tick - w)));
        k += varint_put(enc + k, 1); /* its payload: one argument */
        k += varint_put(enc + k, (uint64_t)f->reason_key << 4 | SONDE_K_METADATA);
        k += varint_put(enc + k, 0);
        k += varint_put(enc + k, t->reason_id);
    }
    return put_rec(fd, SONDE_R_EVENTS, enc, k);
}

static int dump_path(char *out, size_t cap, const sonde_profiler *p, int n, int stem_only);

/* Seconds as text with 3 (or 6) decimals, without printf: the crash path is a signal handler. */
static void fmt_secs(char *out, double secs, int decimals)
{
    uint64_t scale = decimals == 6 ? 1000000u : 1000u;
    uint64_t v = secs > 0 ? (uint64_t)(secs * (double)scale + 0.5) : 0;
    char tmp[32];
    int n = 0;
    for (int d = 0; d < decimals || v || n <= decimals; d++, v /= 10) {
        if (d == decimals)
            tmp[n++] = '.';
        tmp[n++] = (char)('0' + v % 10);
    }
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

static void fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

/* The dump's trigger record: why, which, and what the window holds. Async-signal-safe. */
static int put_info(int fd, const sonde_profiler *p, const fr_trigger *t, int index, double kept_s,
                    double after_s, uint8_t *enc)
{
    char num[64], stem[4096];
    size_t k = 0;
    if (dump_path(stem, sizeof stem, p, index, 1) == 0) /* its own run: NAME-triggerN */
        k += kv_put(enc + k, "name", stem);
    k += kv_put(enc + k, "trigger.reason", t->reason);
    fmt_u64(num, (uint64_t)index);
    k += kv_put(enc + k, "trigger.index", num);
    fmt_secs(num, p->cfg.flight_recorder_s, 3);
    k += kv_put(enc + k, "trigger.window_s", num);
    fmt_secs(num, kept_s, 3);
    k += kv_put(enc + k, "trigger.kept_s", num);
    fmt_secs(num, after_s, 3);
    k += kv_put(enc + k, "trigger.after_s", num);
    fmt_secs(num, kept_s, 6);
    k += kv_put(enc + k, "trigger.at_s", num);
    fmt_u64(num, t->joined);
    k += kv_put(enc + k, "trigger.joined", num);
    return put_rec(fd, SONDE_R_INFO, enc, k);
}

static int put_warning(int fd, const char *text, uint8_t *enc, size_t cap)
{
    if (strlen(text) + 16 > cap)
        return 0;
    size_t k = str_put(enc, text, SIZE_MAX);
    return put_rec(fd, SONDE_R_WARNING, enc, k);
}

/* OUTDIR/NAME-triggerN.sonde into out, without printf or malloc. 0, or -1 when it is too long. */
/* parts[0..n) joined into out (cap bytes with its NUL); -1 when they do not fit.
 * Async-signal-safe. */
static int join_parts(char *out, size_t cap, const char *const *parts, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(parts[i]);
        if (k + l >= cap)
            return -1;
        memcpy(out + k, parts[i], l);
        k += l;
    }
    out[k] = 0;
    return 0;
}

static int dump_path(char *out, size_t cap, const sonde_profiler *p, int n, int stem_only)
{
    char num[24];
    fmt_u64(num, (uint64_t)n);
    const char *parts[] = {stem_only ? "" : p->output_dir, stem_only ? "" : "/", p->name,
                           "-trigger", num, stem_only ? "" : ".sonde"};
    return join_parts(out, cap, parts, sizeof parts / sizeof parts[0]);
}

/* Creates the next free OUTDIR/NAME-triggerN.sonde (path into out); its descriptor, or -1.
 * Async-signal-safe. */
static int open_dump(sonde_profiler *p, sonde_flight *f, char *out, size_t cap, int *index)
{
    for (int tries = 0; tries < 10000; tries++, f->next_index++) {
        if (dump_path(out, cap, p, f->next_index, 0))
            return -1;
        int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -1;
        *index = f->next_index++;
        return fd;
    }
    return -1;
}

/* The window's start for a trigger at tick: flight_recorder_s before it, but not before the
 * run began nor before what left the ring for room. */
static uint64_t window_start(const sonde_flight *f, uint64_t tick)
{
    uint64_t w = tick > f->window_ticks ? tick - f->window_ticks : 0;
    if (w < f->start)
        w = f->start;
    if (f->room_tick >= w)
        w = f->room_tick + 1;
    return w;
}

/* A dump's beginning: the file header, the records every dump keeps, the trigger's record, the
 * run-wide events, the ring's records from w on, and the CLEAR at w. Takes no lock (the caller
 * holds f->lock, or is the crash handler); async-signal-safe. 0, or -1 on a write error. */
static int dump_body(int fd, sonde_profiler *p, sonde_flight *f, const fr_trigger *t, int index,
                     uint64_t w, uint8_t *enc)
{
    double tps = sonde__clock()->ticks_per_s;
    uint8_t hdr[SONDE_FILE_HEADER_LEN];
    sonde__file_header(hdr);
    int rc = write_all(fd, hdr, sizeof hdr) || write_all(fd, f->keep, f->keep_len);
    uint64_t now = sonde__ticks();
    double kept = t->tick > w ? (double)(t->tick - w) / tps : 0;
    double after = now > t->tick ? (double)(now - t->tick) / tps : 0;
    if (!rc)
        rc = put_info(fd, p, t, index, kept, after, enc);
    if (!rc)
        rc = put_flight_thread(fd, f, t, atomic_load(&p->n_threads), w, enc);
    size_t rn = f->rn, r0 = f->r0;
    for (size_t i = 0; i < rn && !rc; i++) {
        const fr_rec *r = &f->recs[(r0 + i) % f->rcap];
        if (r->tmax >= w)
            rc = write_all(fd, f->ring + r->pos % f->cap, r->len);
    }
    size_t k = varint_put(enc, w);
    if (!rc)
        rc = put_rec(fd, SONDE_R_CLEAR, enc, k);
    return rc;
}

/* Writes the window of trigger t (the queue's first) as its own .sonde file. Caller holds wlock
 * (so nothing is put in the ring meanwhile) and not f->lock. 0, or -1 (a warning says why). */
static int write_dump(sonde_profiler *p, sonde_flight *f, const fr_trigger *t, char **path,
                      char **stem)
{
    int index;
    char pbuf[4096], stembuf[4096];
    if (mkdir_p(p->output_dir) != 0) {
        sonde__warn(p, "flight recorder: cannot create %s: %s", p->output_dir,
                    mkdir_p_error(errno));
        return -1;
    }
    int fd = open_dump(p, f, pbuf, sizeof pbuf, &index);
    if (fd < 0) {
        sonde__warn(p, "flight recorder: cannot create %s-triggerN.sonde in %s: %s", p->name,
                    p->output_dir, strerror(errno));
        return -1;
    }
    dump_path(stembuf, sizeof stembuf, p, index, 1);
    *path = sonde__strdup(pbuf);
    *stem = sonde__strdup(stembuf);
    uint8_t *enc = p->enc;
    double tps = sonde__clock()->ticks_per_s;
    pthread_mutex_lock(&f->lock);
    uint64_t w = window_start(f, t->tick);
    int rc = !*path || !*stem || dump_body(fd, p, f, t, index, w, enc);
    double kept = t->tick > w ? (double)(t->tick - w) / tps : 0;
    uint64_t sticky_lost = f->sticky_lost;
    int room = f->room_tick + 1 == w;
    pthread_mutex_unlock(&f->lock);
    pthread_mutex_lock(&f->qlock);
    uint64_t lost = f->lost, over = f->over_max;
    pthread_mutex_unlock(&f->qlock);
    size_t k;
    if (!rc) {
        k = sonde__stats_payload(p, enc);
        rc = put_rec(fd, SONDE_R_STATS, enc, k);
    }
    char msg[400];
    if (!rc && room) {
        snprintf(msg, sizeof msg, "flight recorder: the window holds %.3f s before the trigger of "
                 "the %.3f s asked: buffer_mb (%g MiB) bounds it", kept,
                 p->cfg.flight_recorder_s, p->cfg.buffer_mb);
        rc = put_warning(fd, msg, enc, p->enc_cap);
    }
    if (!rc && (lost || over)) {
        snprintf(msg, sizeof msg, "flight recorder: %llu trigger(s) came after the %u dumps "
                 "flight_recorder_max allows, %llu found %d others waiting: no dump of their own",
                 (unsigned long long)over, p->cfg.flight_recorder_max, (unsigned long long)lost,
                 FR_QUEUE);
        rc = put_warning(fd, msg, enc, p->enc_cap);
    }
    if (!rc && sticky_lost) {
        snprintf(msg, sizeof msg, "flight recorder: %llu run-wide metadata key(s) beyond the "
                 "first %d are not in dumps", (unsigned long long)sticky_lost, FR_STICKY);
        rc = put_warning(fd, msg, enc, p->enc_cap);
    }
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n_warnings && !rc; i++)
        rc = put_warning(fd, p->warnings[i], enc, p->enc_cap);
    pthread_mutex_unlock(&p->lock);
    uint64_t mono, tick;
    sonde__clock_pair(&tick, &mono);
    if (!rc)
        rc = put_rec(fd, SONDE_R_ANCHOR, enc, sonde__anchor_put(enc, tick, mono, sonde__real_ns()));
    if (!rc) {
        k = varint_put(enc, tick);
        rc = put_rec(fd, SONDE_R_END, enc, k);
    }
    int e = rc ? errno : 0;
    if (close(fd) != 0 && !rc) {
        rc = -1;
        e = errno;
    }
    if (rc) { /* said as the streaming writer says it: once on stderr, and sonde_destroy's code;
                 a torn dump would read as a crashed run's, so it goes */
        unlink(pbuf);
        snprintf(msg, sizeof msg, "flight recorder: writing %.200s failed: %s; the partial dump "
                 "is removed", pbuf, strerror(e ? e : EIO));
        sonde__warn(p, "%s", msg);
        sonde__set_status(p, SONDE_EIO, msg);
        return -1;
    }
    return 0;
}

int sonde__flight_crash_open(sonde_profiler *p, int sig)
{
    sonde_flight *f = p->flight;
    if (atomic_exchange(&f->crashed, 1))
        return -1;
    fr_trigger t;
    memset(&t, 0, sizeof t);
    t.tick = sonde__ticks();
    char num[24];
    fmt_u64(num, (uint64_t)sig);
    const char *parts[] = {"fatal signal ", num, " (", sig == SIGSEGV ? "SIGSEGV"
                                                       : sig == SIGBUS  ? "SIGBUS"
                                                       : sig == SIGFPE  ? "SIGFPE"
                                                       : sig == SIGILL  ? "SIGILL"
                                                       : sig == SIGABRT ? "SIGABRT"
                                                       : sig == SIGTERM ? "SIGTERM"
                                                       : sig == SIGINT  ? "SIGINT"
                                                                        : "signal",
                           ")"};
    join_parts(t.reason, sizeof t.reason, parts, sizeof parts / sizeof parts[0]); /* fits */
    char path[4096];
    int index;
    int fd = open_dump(p, f, path, sizeof path, &index);
    if (fd < 0)
        return -1;
    /* the writer thread may hold the lock (it is not stopped): the ring read as it is then */
    int locked = pthread_mutex_trylock(&f->lock) == 0;
    int rc = dump_body(fd, p, f, &t, index, window_start(f, t.tick), p->sig_enc);
    if (locked)
        pthread_mutex_unlock(&f->lock);
    static const char msg1[] = "sonde: flight recorder: fatal signal; the window is in ";
    static const char msg2[] = " (sonde export writes its reports)\n";
    ssize_t wr = write(2, msg1, sizeof msg1 - 1);
    wr = write(2, path, strlen(path));
    wr = write(2, msg2, sizeof msg2 - 1);
    (void)wr;
    if (rc) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *reports_main(void *arg)
{
    sonde_profiler *p = arg;
    sonde_flight *f = p->flight;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_setname_np(pthread_self(), "sonde-dump");
    if (p->reports)
        p->reports->write_dump_reports(p, f->rpath, f->rstem);
    atomic_store(&f->rdone, 1);
    return NULL;
}

/* Writes the first queued trigger's dump and starts its reports (on a thread of their own, or
 * here when sync). Caller holds wlock. */
static void dump_first(sonde_profiler *p, sonde_flight *f, int sync)
{
    pthread_mutex_lock(&f->qlock);
    fr_trigger t = f->queue[0];
    pthread_mutex_unlock(&f->qlock);
    sonde__writer_pass(p, 1); /* what threads still hold, into the ring */
    char *path = NULL, *stem = NULL;
    int rc = write_dump(p, f, &t, &path, &stem);
    pthread_mutex_lock(&f->qlock);
    memmove(f->queue, f->queue + 1, (f->nq - 1) * sizeof *f->queue);
    f->nq--;
    f->dumps++;
    atomic_store(&f->hold_from, f->nq ? f->queue[0].tick : 0);
    pthread_mutex_unlock(&f->qlock);
    if (rc) {
        sonde__free(path);
        sonde__free(stem);
        return;
    }
    sbuf_say(stderr, "sonde: flight recorder: %s; writing %s and its reports", t.reason, path);
    f->rpath = path;
    f->rstem = stem;
    atomic_store(&f->rdone, 0);
    if (!sync && pthread_create(&f->rth, NULL, reports_main, p) == 0) {
        f->rstarted = 1;
        return;
    }
    if (p->reports)
        p->reports->write_dump_reports(p, path, stem);
    sonde__free(f->rpath);
    sonde__free(f->rstem);
    f->rpath = f->rstem = NULL;
}

/* A trigger signal's request (sonde__flight_signal), if one came, queued as a trigger. */
static void take_signal(sonde_profiler *p, sonde_flight *f)
{
    uint64_t st = atomic_exchange(&f->sig_tick, 0);
    if (st) {
        char why[64];
        snprintf(why, sizeof why, "signal %d (sonde trigger or kill)", p->cfg.trigger_signal);
        pthread_mutex_lock(&f->qlock);
        enqueue(p, f, st, why, intern_reason(why));
        pthread_mutex_unlock(&f->qlock);
    }
}

void sonde__flight_poll(sonde_profiler *p)
{
    sonde_flight *f = p->flight;
    take_signal(p, f);
    if (f->rstarted && atomic_load(&f->rdone))
        join_reports(f);
    uint64_t now = sonde__ticks();
    pthread_mutex_lock(&f->qlock);
    int due = f->nq && now >= f->queue[0].tick + f->after_ticks;
    pthread_mutex_unlock(&f->qlock);
    pthread_mutex_lock(&f->lock);
    uint64_t want = wanted_from(f, now);
    while (f->rn && f->recs[f->r0].tmax < want)
        drop_oldest(f, want);
    pthread_mutex_unlock(&f->lock);
    if (due && !f->rstarted)
        dump_first(p, f, 0);
}

/* The run ends: every trigger still waiting is written now, and the window before an exit with
 * a non-zero status. Caller holds wlock; the writer thread has stopped. */
void sonde__flight_finish(sonde_profiler *p, int status)
{
    sonde_flight *f = p->flight;
    if (!f)
        return;
    join_reports(f);
    take_signal(p, f); /* one the writer thread had not polled yet (a loaded machine) */
    if (status && !atomic_load(&f->crashed)) {
        char why[64];
        snprintf(why, sizeof why, "exit with status %d", status);
        pthread_mutex_lock(&f->qlock);
        enqueue(p, f, sonde__ticks(), why, intern_reason(why));
        pthread_mutex_unlock(&f->qlock);
    }
    for (;;) {
        pthread_mutex_lock(&f->qlock);
        size_t nq = f->nq;
        pthread_mutex_unlock(&f->qlock);
        if (!nq)
            break;
        dump_first(p, f, 1);
    }
    if (f->over_max || f->lost)
        fprintf(stderr, "sonde: flight recorder: %llu trigger(s) wrote no dump of their own "
                        "(flight_recorder_max %u)\n",
                (unsigned long long)(f->over_max + f->lost), p->cfg.flight_recorder_max);
    /* Only now: a trigger while the dumps above were written (seconds) is taken, not fatal. */
    sonde__control_release(p);
}

