/* model.c - builds the model from decoded events (section trees per thread, sessions, steps,
 * counters, metrics, metadata) and computes the statistics every exporter prints. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/record.h"
#include "../util/strmap.h"
#include "model_build.h"
#include "../util/alloc.h"

static int fold_aggregated(sm_model *m);

#define GROW SONDE_GROW

const char *sm_str(const sm_model *m, uint32_t id)
{
    if (id < m->n_sites && m->sites[id].name)
        return m->sites[id].name;
    return "?";
}

double sm_percentile(const double *v, size_t n, double pct)
{
    if (!n)
        return 0;
    double pos = pct / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    if (lo >= n - 1)
        return v[n - 1];
    double f = pos - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------------------------
 * Building
 * ---------------------------------------------------------------------------------------- */
typedef struct bctx {
    sm_model *m;
    uint64_t cut_tick;
    double ns_per_tick;
    size_t cap_spans, cap_meta, cap_inst, cap_steps, cap_metrics, cap_counters, cap_sessions,
        cap_warn, cap_dsteps, cap_blocks;
    strmap counters, metrics;
    uint64_t unmatched_ends, gaps, gap_events, unterminated;
    uint64_t end_lost;       /* sections whose end was among the dropped events */
    int lost_at_end;         /* the file dropped events no GAP marks (a thread's last ones, or
                                writes that failed): a section open at the end lost its end */
    /* the step schedule's modes over time (MODE events): kept = ACTIVE */
    int64_t *mode_t;
    int *mode_active;
    size_t n_modes;
} bctx;

static int64_t rel(const bctx *b, uint64_t tick)
{
    return (int64_t)((double)(int64_t)(tick - b->cut_tick) * b->ns_per_tick);
}

/* 1 when what happens at time t is kept: always without a schedule, else inside a window. */
static int kept_at(const bctx *b, int64_t t)
{
    if (!b->n_modes)
        return 1;
    size_t lo = 0, hi = b->n_modes;
    while (lo < hi) { /* the last mode change at or before t */
        size_t mid = (lo + hi) / 2;
        if (b->mode_t[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? b->mode_active[lo - 1] : 0;
}

typedef struct mode_ev {
    uint64_t tick;
    uint32_t step, arg;
} mode_ev;

static int cmp_mode(const void *a, const void *b)
{
    const mode_ev *x = a, *y = b;
    return x->tick < y->tick ? -1 : x->tick > y->tick;
}

/* The schedule's mode changes, in time order, and the active windows they make. */
static int build_modes(bctx *b, sb_raw *raw, uint64_t end_tick, uint64_t last_step)
{
    sm_model *m = b->m;
    mode_ev *ev = NULL;
    size_t n = 0, cap = 0;
    for (size_t t = 0; t < raw->n_threads; t++)
        for (size_t i = 0; i < raw->tev[t].n; i++) {
            const sb_ev *e = &raw->tev[t].ev[i];
            if (e->kind != SONDE_K_MODE)
                continue;
            if (GROW(ev, n, cap)) {
                sonde__free(ev);
                return -1;
            }
            ev[n++] = (mode_ev){e->tick, e->id, e->arg};
        }
    if (!n)
        return 0;
    qsort(ev, n, sizeof *ev, cmp_mode);
    b->mode_t = sonde__malloc(n * sizeof *b->mode_t);
    b->mode_active = sonde__malloc(n * sizeof *b->mode_active);
    m->windows = sonde__calloc(n, sizeof *m->windows);
    if (!b->mode_t || !b->mode_active || !m->windows) {
        sonde__free(ev);
        return -1;
    }
    m->scheduled = 1;
    for (size_t i = 0; i < n; i++) {
        b->mode_t[i] = rel(b, ev[i].tick);
        b->mode_active[i] = (ev[i].arg & 3u) == 2;
        if (i && m->n_windows && m->windows[m->n_windows - 1].end_ns == INT64_MAX) {
            sm_window *w = &m->windows[m->n_windows - 1];
            w->end_ns = b->mode_t[i];
            w->last_step = ev[i].step ? ev[i].step - 1 : 0;
        }
        if (b->mode_active[i]) {
            sm_window *w = &m->windows[m->n_windows++];
            w->cycle = (int)(ev[i].arg >> 2);
            w->first_step = ev[i].step;
            w->start_ns = b->mode_t[i];
            w->end_ns = INT64_MAX;
        }
    }
    if (m->n_windows && m->windows[m->n_windows - 1].end_ns == INT64_MAX) {
        m->windows[m->n_windows - 1].end_ns = rel(b, end_tick);
        m->windows[m->n_windows - 1].last_step = last_step;
    }
    b->n_modes = n;
    sonde__free(ev);
    return 0;
}


static int add_warning(bctx *b, char *w)
{
    if (!w || GROW(b->m->warnings, b->m->n_warnings, b->cap_warn)) {
        sonde__free(w);
        return -1;
    }
    b->m->warnings[b->m->n_warnings++] = w;
    return 0;
}

static int fmt_warning(bctx *b, const char *fmt, unsigned long long v)
{
    char *w = NULL;
    if (sonde__asprintf(&w, fmt, v) < 0)
        return -1;
    return add_warning(b, w);
}

/* The session in force at time t (ns), or -1. Sessions are sorted and do not overlap. */
static int32_t session_at(const sm_model *m, int64_t t)
{
    size_t lo = 0, hi = m->n_sessions;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->sessions[mid].start_ns <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const sm_session *s = &m->sessions[lo - 1];
    return t <= s->end_ns ? (int32_t)(lo - 1) : -1;
}

typedef struct sess_ev {
    uint64_t tick;
    uint32_t name, thread;
    int begin;
} sess_ev;

static int cmp_sess(const void *a, const void *b)
{
    const sess_ev *x = a, *y = b;
    if (x->tick != y->tick)
        return x->tick < y->tick ? -1 : 1;
    return x->begin - y->begin; /* an end before a begin at the same tick */
}

static int build_sessions(bctx *b, sb_raw *raw, uint64_t end_tick)
{
    sess_ev *ev = NULL;
    size_t n = 0, cap = 0;
    for (size_t t = 0; t < raw->n_threads; t++) {
        for (size_t i = 0; i < raw->tev[t].n; i++) {
            const sb_ev *e = &raw->tev[t].ev[i];
            if (e->kind != SONDE_K_SESSION_BEGIN && e->kind != SONDE_K_SESSION_END)
                continue;
            if (GROW(ev, n, cap)) {
                sonde__free(ev);
                return -1;
            }
            ev[n].tick = e->tick;
            ev[n].name = e->id;
            ev[n].thread = (uint32_t)t;
            ev[n].begin = e->kind == SONDE_K_SESSION_BEGIN;
            n++;
        }
    }
    if (n)
        qsort(ev, n, sizeof *ev, cmp_sess);
    sm_model *m = b->m;
    int open = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t tick = i < n ? ev[i].tick : end_tick;
        if (open) { /* any session event ends the open session */
            sm_session *s = &m->sessions[m->n_sessions - 1];
            s->end_ns = rel(b, tick);
            open = 0;
            if (s->end_ns < 0) /* ended before a clear: discarded */
                m->n_sessions--;
            else if (s->start_ns < 0)
                s->start_ns = 0;
        }
        if (i < n && ev[i].begin) {
            if (GROW(m->sessions, m->n_sessions, b->cap_sessions)) {
                sonde__free(ev);
                return -1;
            }
            sm_session *s = &m->sessions[m->n_sessions++];
            memset(s, 0, sizeof *s);
            s->name = ev[i].name;
            s->thread = ev[i].thread;
            s->start_ns = rel(b, tick);
            s->meta = -1;
            open = 1;
        }
    }
    sonde__free(ev);
    return 0;
}

typedef struct sentry {
    int32_t span; /* -1: a section begun before a clear, tracked only to match its end */
    uint32_t site;
    uint64_t gaps; /* GAP markers on its thread before it began */
} sentry;

/* Where metadata, metrics, throughput and FLOPs go: the innermost section, else the session in
 * force, else the run. */
typedef struct target {
    sm_span *span;
    sm_session *session;
    const char *owner;
} target;

static target target_of(bctx *b, const sentry *stack, size_t depth, int64_t t, char *owner_buf,
                        size_t cap)
{
    target r = {NULL, NULL, "run"};
    sm_model *m = b->m;
    if (depth && stack[depth - 1].span >= 0) {
        r.span = &m->spans[stack[depth - 1].span];
        r.owner = sm_str(m, r.span->site);
        return r;
    }
    if (depth) { /* innermost section was discarded by a clear */
        r.owner = NULL;
        return r;
    }
    int32_t s = session_at(m, t);
    if (s >= 0) {
        r.session = &m->sessions[s];
        snprintf(owner_buf, cap, "session %s", sm_str(m, r.session->name));
        r.owner = owner_buf;
    }
    return r;
}

static int add_meta(bctx *b, int32_t *head, uint32_t key, uint32_t value)
{
    sm_model *m = b->m;
    if (GROW(m->meta, m->n_meta, b->cap_meta))
        return -1;
    sm_meta *e = &m->meta[m->n_meta];
    e->key = key;
    e->value = value;
    e->next = *head;
    *head = (int32_t)m->n_meta++;
    return 0;
}

static int add_metric(bctx *b, const char *owner, const char *name, double v)
{
    sm_model *m = b->m;
    size_t klen = strlen(owner) + strlen(name) + 2;
    char *key = sonde__malloc(klen);
    if (!key)
        return -1;
    snprintf(key, klen, "%s\x1f%s", owner, name);
    int idx = strmap_get(&b->metrics, key);
    if (idx < 0) {
        if (GROW(m->metrics, m->n_metrics, b->cap_metrics) ||
            strmap_put(&b->metrics, key, (int)m->n_metrics)) {
            sonde__free(key);
            return -1;
        }
        sm_metric *mt = &m->metrics[m->n_metrics];
        memset(mt, 0, sizeof *mt);
        mt->owner = sonde__strdup(owner);
        mt->name = sonde__strdup(name);
        if (!mt->owner || !mt->name) {
            sonde__free(mt->owner);
            sonde__free(mt->name);
            sonde__free(key);
            return -1;
        }
        mt->min = mt->max = v;
        idx = (int)m->n_metrics++;
    }
    sonde__free(key);
    sm_metric *mt = &m->metrics[idx];
    mt->count++;
    mt->sum += v;
    if (v < mt->min)
        mt->min = v;
    if (v > mt->max)
        mt->max = v;
    mt->last = v;
    return 0;
}

static int add_counter(bctx *b, const char *name, int64_t t, double v, int system)
{
    sm_model *m = b->m;
    int idx = strmap_get(&b->counters, name);
    if (idx < 0) {
        if (GROW(m->counters, m->n_counters, b->cap_counters) ||
            strmap_put(&b->counters, name, (int)m->n_counters))
            return -1;
        sm_counter *c = &m->counters[m->n_counters];
        memset(c, 0, sizeof *c);
        c->name = sonde__strdup(name);
        if (!c->name)
            return -1;
        c->system = system;
        c->min = c->max = v;
        idx = (int)m->n_counters++;
    }
    sm_counter *c = &m->counters[idx];
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        int64_t *nt = sonde__realloc(c->t_ns, nc * sizeof *nt);
        if (!nt)
            return -1;
        c->t_ns = nt;
        double *nv = sonde__realloc(c->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        c->v = nv;
        c->cap = nc;
    }
    c->t_ns[c->n] = t;
    c->v[c->n] = v;
    c->n++;
    c->sum += v;
    if (v < c->min)
        c->min = v;
    if (v > c->max)
        c->max = v;
    c->last = v;
    return 0;
}

/* Ends the section at stack[k] at t. lost: its END was among dropped events (it was open when
 * events were dropped, and no END of its own came): it is flagged SM_SPAN_END_LOST and keeps
 * no duration (its end is unknown: closing it at the next outer end or at the run's end would
 * stretch it), and the statistics leave it out. */
static void close_span(bctx *b, sentry *stack, size_t k, int64_t t, uint16_t flags, int lost)
{
    if (stack[k].span < 0)
        return;
    sm_span *s = &b->m->spans[stack[k].span];
    if (lost) {
        s->flags |= flags | SM_SPAN_END_LOST;
        s->end_ns = s->start_ns;
        b->end_lost++;
        return;
    }
    s->end_ns = t < s->start_ns ? s->start_ns : t;
    s->flags |= flags;
    int64_t dur = s->end_ns - s->start_ns;
    if (s->parent >= 0)
        b->m->spans[s->parent].child_ns += dur;
}

static int build_thread(bctx *b, sb_tevents *te, uint32_t tindex, uint64_t end_tick)
{
    sm_model *m = b->m;
    sentry *stack = NULL;
    size_t depth = 0, cap = 0;
    char owner_buf[300];
    int rc = -1;
    /* Counters from sonde's own sampler thread are the system's figures. */
    int sampler_thread = m->threads[tindex].name && !strcmp(m->threads[tindex].name, "sonde-sampler");
    uint64_t gaps = 0;      /* GAP markers so far on this thread */
    uint32_t args_left = 0; /* METADATA events still to come that are an instant's payload */
    int32_t args_of = -1;   /* that instant, -1 when it was not kept */
    for (size_t i = 0; i < te->n; i++) {
        const sb_ev *e = &te->ev[i];
        int64_t t = rel(b, e->tick);
        if (args_left && e->kind == SONDE_K_METADATA) {
            args_left--;
            if (args_of >= 0 && add_meta(b, &m->instants[args_of].args, e->id, e->arg))
                goto out;
            continue;
        }
        args_left = 0;
        /* before a clear, or outside the schedule's active windows: not kept */
        int before_cut = e->tick < b->cut_tick || (e->kind != SONDE_K_STEP && !kept_at(b, t));
        switch (e->kind) {
        case SONDE_K_BEGIN: {
            if (GROW(stack, depth, cap))
                goto out;
            int32_t parent = -1;
            for (size_t k = depth; k-- > 0;)
                if (stack[k].span >= 0) {
                    parent = stack[k].span;
                    break;
                }
            stack[depth].site = e->id;
            stack[depth].span = -1;
            stack[depth].gaps = gaps;
            if (!before_cut) {
                if (GROW(m->spans, m->n_spans, b->cap_spans))
                    goto out;
                sm_span *s = &m->spans[m->n_spans];
                memset(s, 0, sizeof *s);
                s->site = e->id;
                s->thread = tindex;
                s->parent = parent;
                s->session = session_at(m, t);
                s->meta = -1;
                s->depth = (uint16_t)(parent >= 0 ? m->spans[parent].depth + 1 : 0);
                s->start_ns = s->end_ns = t;
                stack[depth].span = (int32_t)m->n_spans++;
            }
            depth++;
            break;
        }
        case SONDE_K_END: {
            size_t k = depth;
            if (e->id == 0) {
                k = depth ? depth - 1 : depth;
            } else {
                while (k > 0 && stack[k - 1].site != e->id)
                    k--;
                k = k ? k - 1 : depth;
            }
            if (k >= depth) {
                b->unmatched_ends++;
                break;
            }
            for (size_t j = depth; j-- > k + 1;) /* their ends are missing: dropped or never */
                close_span(b, stack, j, t, SM_SPAN_CLOSED_BY_OUTER, gaps > stack[j].gaps);
            close_span(b, stack, k, t, 0, 0);
            depth = k;
            break;
        }
        case SONDE_K_DSTEP:
        case SONDE_K_BLOCK: {
            if (before_cut)
                break;
            int32_t span = depth && stack[depth - 1].span >= 0 ? stack[depth - 1].span : -1;
            if (e->kind == SONDE_K_DSTEP) {
                if (GROW(m->dsteps, m->n_dsteps, b->cap_dsteps))
                    goto out;
                m->dsteps[m->n_dsteps++] = (sm_dstep){t, e->arg, e->v0, e->v1, e->v2, e->v3,
                                                      e->v0 > 0 ? -1 : span};
            } else {
                if (GROW(m->blocks, m->n_blocks, b->cap_blocks))
                    goto out;
                m->blocks[m->n_blocks++] = (sm_block){t, e->arg, e->v0, e->v1, e->v2,
                                                      e->v0 > 0 ? -1 : span};
            }
            break;
        }
        case SONDE_K_PARAMS: {
            if (before_cut)
                break;
            const char *model = sm_str(m, e->id);
            size_t k;
            for (k = 0; k < m->n_params && strcmp(m->params[k].model, model); k++) {
            }
            if (k == m->n_params) {
                sm_params *np = sonde__realloc(m->params, (k + 1) * sizeof *np);
                if (!np)
                    goto out;
                m->params = np;
                if (!(np[k].model = sonde__strdup(model)))
                    goto out;
                m->n_params++;
            }
            m->params[k].count = e->v0;
            break;
        }
        case SONDE_K_GAP:
            gaps++;
            b->gaps++;
            b->gap_events += e->arg;
            break;
        case SONDE_K_INSTANT:
            /* its payload: the METADATA events right after it (dropped with it when cut) */
            args_left = e->arg;
            args_of = -1;
            if (before_cut)
                break;
            if (GROW(m->instants, m->n_instants, b->cap_inst))
                goto out;
            args_of = (int32_t)m->n_instants;
            m->instants[m->n_instants++] = (sm_instant){t, tindex, e->id, -1};
            break;
        case SONDE_K_COUNTER:
            if (!before_cut && add_counter(b, sm_str(m, e->id), t, e->v0, sampler_thread))
                goto out;
            break;
        case SONDE_K_STEP:
            if (before_cut)
                break;
            if (GROW(m->steps, m->n_steps, b->cap_steps))
                goto out;
            if (e->arg & SONDE_STEP_BEGIN) /* paired with its end by sort_steps */
                m->steps[m->n_steps++] = (sm_step){e->arg & ~SONDE_STEP_BEGIN, t, tindex, 1, t, 2};
            else
                m->steps[m->n_steps++] = (sm_step){e->arg ? e->arg - 1 : 0, t, tindex, 1, 0, 0};
            break;
        case SONDE_K_METRIC:
        case SONDE_K_THROUGHPUT:
        case SONDE_K_FLOPS:
        case SONDE_K_METADATA: {
            if (before_cut)
                break;
            target tg = target_of(b, stack, depth, t, owner_buf, sizeof owner_buf);
            if (!tg.owner)
                break;
            if (e->kind == SONDE_K_METRIC) {
                if (add_metric(b, tg.owner, sm_str(m, e->id), e->v0))
                    goto out;
            } else if (e->kind == SONDE_K_METADATA) {
                int32_t *head = tg.span ? &tg.span->meta : tg.session ? &tg.session->meta
                                                                      : &m->run_meta;
                if (add_meta(b, head, e->id, e->arg))
                    goto out;
            } else if (e->kind == SONDE_K_FLOPS) {
                if (tg.span)
                    tg.span->flops += e->v0;
                else if (tg.session)
                    tg.session->flops += e->v0;
                else
                    m->run_flops += e->v0;
            } else {
                uint32_t *un = tg.span ? &tg.span->unit : tg.session ? &tg.session->unit
                                                                      : &m->run_unit;
                *un = e->id;
                double *u = tg.span ? &tg.span->units : tg.session ? &tg.session->units
                                                                   : &m->run_units;
                double *us = tg.span ? &tg.span->units_s : tg.session ? &tg.session->units_s
                                                                      : &m->run_units_s;
                *u += e->v0;
                if (e->v1 > 0)
                    *us += e->v1;
                else if (tg.span)
                    tg.span->own_dur_units = 1;
                else if (tg.session)
                    tg.session->own_dur_units = 1;
                else
                    *us += (double)m->duration_ns / 1e9;
            }
            break;
        }
        default:
            break;
        }
    }
    /* Sections still open when the file ends: closed at the run's end and flagged. */
    int64_t tend = rel(b, end_tick);
    for (size_t j = depth; j-- > 0;) {
        int lost = gaps > stack[j].gaps || b->lost_at_end;
        if (stack[j].span >= 0 && !lost)
            b->unterminated++;
        close_span(b, stack, j, tend, SM_SPAN_UNTERMINATED, lost);
    }
    rc = 0;
out:
    sonde__free(stack);
    return rc;
}

/* Wall time covered by a set of intervals (overlaps counted once), in seconds. Sorts v. */
typedef struct sm_iv {
    int64_t s, e;
} sm_iv;

static int cmp_iv(const void *a, const void *b)
{
    const sm_iv *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

static double union_s(sm_iv *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_iv);
    int64_t total = 0, cs = v[0].s, ce = v[0].e;
    for (size_t i = 1; i < n; i++) {
        if (v[i].s > ce) {
            total += ce - cs;
            cs = v[i].s;
            ce = v[i].e;
        } else if (v[i].e > ce) {
            ce = v[i].e;
        }
    }
    return (double)(total + ce - cs) / 1e9;
}

/* A rate for the unit (site id, 0: the run's unit) unless it has one; its figures come later. */
static int rate_unit(sm_model *m, uint32_t unit)
{
    const char *name = unit ? sm_str(m, unit) : m->unit;
    for (size_t i = 0; i < m->n_rates; i++)
        if (!strcmp(m->rates[i].unit, name))
            return 0;
    sm_rate *r = sonde__realloc(m->rates, (m->n_rates + 1) * sizeof *r);
    if (!r)
        return -1;
    m->rates = r;
    r[m->n_rates] = (sm_rate){sonde__strdup(name), 0, 0};
    if (!r[m->n_rates].unit)
        return -1;
    m->n_rates++;
    return 0;
}

/* Throughput per unit; the run's own unit first, even when unused. Units recorded with explicit
 * seconds count those seconds; units over a section's (or session's) own duration count the wall
 * time those sections covered, so sections running at once on several threads are not counted
 * twice. */
static const char *unit_name(const sm_model *m, uint32_t unit)
{
    return unit ? sm_str(m, unit) : m->unit;
}

/* Units in one unit and their seconds, over the run (sess < 0: the run's own units too) or one
 * session (its own and its sections'): explicit seconds added, own-duration units counted over
 * the wall time their sessions and sections covered, each instant once. iv: room for
 * n_spans + n_sessions intervals. */
static void unit_time(const sm_model *m, const char *unit, int32_t sess, sm_iv *iv,
                      double *units, double *seconds)
{
    size_t n = 0;
    *units = *seconds = 0;
    if (sess < 0 && m->run_units > 0 && !strcmp(unit_name(m, m->run_unit), unit)) {
        *units += m->run_units;
        *seconds += m->run_units_s;
    }
    for (size_t i = 0; i < m->n_sessions; i++) {
        const sm_session *s = &m->sessions[i];
        if ((sess >= 0 && (int32_t)i != sess) || s->units <= 0 || strcmp(unit_name(m, s->unit), unit))
            continue;
        *units += s->units;
        *seconds += s->units_s;
        if (s->own_dur_units)
            iv[n++] = (sm_iv){s->start_ns, s->end_ns};
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if ((sess >= 0 && s->session != sess) || s->units <= 0 || strcmp(unit_name(m, s->unit), unit))
            continue;
        *units += s->units;
        *seconds += s->units_s;
        if (s->own_dur_units)
            iv[n++] = (sm_iv){s->start_ns, s->end_ns};
    }
    *seconds += union_s(iv, n);
}

static int build_rates(sm_model *m)
{
    /* the units recorded, the run's own first */
    if (rate_unit(m, 0) != 0 || (m->run_units > 0 && rate_unit(m, m->run_unit)))
        return -1;
    for (size_t i = 0; i < m->n_sessions; i++)
        if (m->sessions[i].units > 0 && rate_unit(m, m->sessions[i].unit))
            return -1;
    for (size_t i = 0; i < m->n_spans; i++)
        if (m->spans[i].units > 0 && rate_unit(m, m->spans[i].unit))
            return -1;
    sm_iv *iv = sonde__malloc((m->n_spans + m->n_sessions + 1) * sizeof *iv);
    if (!iv)
        return -1;
    for (size_t r = 0; r < m->n_rates; r++)
        unit_time(m, m->rates[r].unit, -1, iv, &m->rates[r].units, &m->rates[r].seconds);
    sonde__free(iv);
    return 0;
}

int sm_session_units(const sm_model *m, size_t sess, double *units, double *seconds)
{
    *units = *seconds = 0;
    sm_iv *iv = sonde__malloc((m->n_spans + m->n_sessions + 1) * sizeof *iv);
    if (!iv)
        return -1;
    unit_time(m, m->n_rates ? m->rates[0].unit : m->unit, (int32_t)sess, iv, units, seconds);
    sonde__free(iv);
    return 0;
}

static int cmp_step(const void *a, const void *b)
{
    const sm_step *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

/* Steps may be marked from several threads: time order. Then each end takes its start from the
 * last begin mark since the step before it ended (else that end), and the marks go. */
static int sort_steps(sm_model *m)
{
    if (m->n_steps > 1)
        qsort(m->steps, m->n_steps, sizeof *m->steps, cmp_step);
    size_t k = 0;
    int64_t prev_end = 0, begin = -1;
    for (size_t i = 0; i < m->n_steps; i++) {
        sm_step s = m->steps[i];
        if (s.begun == 2) {
            begin = s.t_ns;
            continue;
        }
        s.begun = begin >= prev_end;
        s.start_ns = s.begun ? begin : prev_end;
        begin = -1;
        prev_end = s.t_ns;
        m->steps[k++] = s;
    }
    m->n_steps = k;
    return 0;
}

/* Instants in time order (each thread's are read chunk by chunk), ties in reading order. */
typedef struct inst_at {
    int64_t t;
    size_t i;
} inst_at;

static int cmp_inst_at(const void *a, const void *b)
{
    const inst_at *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int sort_instants(sm_model *m)
{
    size_t n = m->n_instants;
    if (n < 2)
        return 0;
    inst_at *r = sonde__malloc(n * sizeof *r);
    sm_instant *was = sonde__malloc(n * sizeof *was);
    if (!r || !was) {
        sonde__free(r);
        sonde__free(was);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = (inst_at){m->instants[i].t_ns, i};
    qsort(r, n, sizeof *r, cmp_inst_at);
    memcpy(was, m->instants, n * sizeof *was);
    for (size_t k = 0; k < n; k++)
        m->instants[k] = was[r[k].i];
    sonde__free(r);
    sonde__free(was);
    return 0;
}

/* Counter samples in time order (samples from several threads can interleave). */
typedef struct tv {
    int64_t t;
    double v;
} tv;

static int cmp_tv(const void *a, const void *b)
{
    const tv *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int sort_counters(sm_model *m)
{
    for (size_t c = 0; c < m->n_counters; c++) {
        sm_counter *k = &m->counters[c];
        size_t i = 1;
        while (i < k->n && k->t_ns[i - 1] <= k->t_ns[i])
            i++;
        if (i >= k->n)
            continue;
        tv *a = sonde__malloc(k->n * sizeof *a);
        if (!a)
            return -1;
        for (i = 0; i < k->n; i++)
            a[i] = (tv){k->t_ns[i], k->v[i]};
        qsort(a, k->n, sizeof *a, cmp_tv);
        for (i = 0; i < k->n; i++) {
            k->t_ns[i] = a[i].t;
            k->v[i] = a[i].v;
        }
        k->last = k->v[k->n - 1];
        sonde__free(a);
    }
    return 0;
}

/* First sample index with t >= t0 (n when none). */
static size_t lower(const sm_counter *c, int64_t t0)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->t_ns[mid] < t0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const sm_counter *counter_named(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_counters; i++)
        if (m->counters[i].system && !strcmp(m->counters[i].name, name))
            return &m->counters[i];
    return NULL;
}

/* Per section name, from the samples that fall inside its instances: mean process CPU, RSS at
 * begin and end, mean GPU utilization, peak GPU memory. Nothing on the hot path: all here. */
void sm_resources(const sm_model *m, sm_stat *stats, size_t n_stats,
                  int (*keep)(const sm_span *, void *), void *ctx)
{
    const sm_counter *cpu = counter_named(m, "process cpu %"), *rss = counter_named(m, "rss MiB");
    const sm_counter *util[64], *mem[64];
    size_t nu = 0, nm = 0;
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        unsigned g;
        char tail[32];
        if (!c->system || sscanf(c->name, "gpu%u %31[^\n]", &g, tail) != 2)
            continue;
        if (!strcmp(tail, "util %") && nu < 64)
            util[nu++] = c;
        else if (!strcmp(tail, "memory MiB") && nm < 64)
            mem[nm++] = c;
    }
    double *acc = sonde__calloc(n_stats ? n_stats * 8 : 1, sizeof *acc);
    int *site_stat = sonde__malloc((m->n_sites ? m->n_sites : 1) * sizeof *site_stat);
    if (!acc || !site_stat) {
        sonde__free(acc);
        sonde__free(site_stat);
        return;
    }
    for (size_t i = 0; i < m->n_sites; i++) { /* each site's entry in stats, by name */
        site_stat[i] = -1;
        for (size_t k = 0; k < n_stats && site_stat[i] < 0; k++)
            if (!strcmp(stats[k].name, m->sites[i].name))
                site_stat[i] = (int)k;
    }
    /* acc[8k + ...]: cpu sum, cpu n, rss begin sum, rss end sum, rss instances, util sum,
     * util n, gpu mem peak */
    for (size_t k = 0; k < n_stats; k++)
        acc[8 * k + 7] = NAN;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        int k = site_stat[s->site];
        if (k < 0 || (keep && !keep(s, ctx)))
            continue;
        double *a = &acc[8 * k];
        if (cpu)
            for (size_t j = lower(cpu, s->start_ns); j < cpu->n && cpu->t_ns[j] <= s->end_ns; j++) {
                a[0] += cpu->v[j];
                a[1]++;
            }
        if (rss) {
            size_t j = lower(rss, s->start_ns);
            if (j < rss->n && rss->t_ns[j] <= s->end_ns) { /* a sample inside */
                size_t jb = j > 0 ? j - 1 : j;           /* the last one before it began */
                size_t je = lower(rss, s->end_ns);       /* the first one after it ended */
                if (je >= rss->n)
                    je = rss->n - 1;
                a[2] += rss->v[jb];
                a[3] += rss->v[je];
                a[4]++;
            }
        }
        for (size_t g = 0; g < nu; g++)
            for (size_t j = lower(util[g], s->start_ns); j < util[g]->n && util[g]->t_ns[j] <= s->end_ns; j++) {
                a[5] += util[g]->v[j];
                a[6]++;
            }
        for (size_t g = 0; g < nm; g++)
            for (size_t j = lower(mem[g], s->start_ns); j < mem[g]->n && mem[g]->t_ns[j] <= s->end_ns; j++)
                if (isnan(a[7]) || mem[g]->v[j] > a[7])
                    a[7] = mem[g]->v[j];
    }
    for (size_t k = 0; k < n_stats; k++) {
        const double *a = &acc[8 * k];
        sm_stat *x = &stats[k];
        x->res_samples = (uint64_t)(a[1] > a[4] ? a[1] : a[4]);
        x->res_cpu_mean = a[1] ? a[0] / a[1] : NAN;
        x->res_rss_begin = a[4] ? a[2] / a[4] : NAN;
        x->res_rss_end = a[4] ? a[3] / a[4] : NAN;
        x->res_rss_delta = a[4] ? (a[3] - a[2]) / a[4] : NAN;
        x->res_gpu_util_mean = a[6] ? a[5] / a[6] : NAN;
        x->res_gpu_mem_peak = a[7];
    }
    sonde__free(acc);
    sonde__free(site_stat);
}

size_t sm_max_data_points(const sm_model *m)
{
    const char *v = sm_info(m, "config.max_data_points");
    size_t n = v ? (size_t)strtoull(v, NULL, 10) : 10000;
    return n < 10 ? 10 : n;
}

const char *sm_info(const sm_model *m, const char *key)
{
    for (size_t i = m->n_info; i-- > 0;) /* the latest wins */
        if (!strcmp(m->info[i].key, key))
            return m->info[i].value;
    return NULL;
}

const char *sm_counter_unit(const char *name)
{
    static const char *units[] = {"%", "MiB", "W", "C", "MHz", "J"};
    const char *sp = strrchr(name, ' ');
    if (!sp)
        return "";
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(sp + 1, units[i]))
            return sp + 1;
    return "";
}

size_t sm_downsample(const sm_counter *c, size_t max, size_t *keep)
{
    if (max < 2)
        max = 2;
    if (c->n <= max) {
        for (size_t i = 0; i < c->n; i++)
            keep[i] = i;
        return c->n;
    }
    size_t buckets = max / 2, n = 0;
    for (size_t b = 0; b < buckets; b++) {
        size_t lo = c->n * b / buckets, hi = c->n * (b + 1) / buckets;
        if (lo >= hi)
            continue;
        size_t imin = lo, imax = lo;
        for (size_t i = lo + 1; i < hi; i++) {
            if (c->v[i] < c->v[imin])
                imin = i;
            if (c->v[i] > c->v[imax])
                imax = i;
        }
        keep[n++] = imin < imax ? imin : imax;
        if (imin != imax)
            keep[n++] = imin < imax ? imax : imin;
    }
    return n;
}

/* What is computed from the instances: order, active steps, statistics, resources, totals.
 * Run after a build and after a merge. */
/* min_duration_s: section instances shorter than it are left out of the model (and so of every
 * report), except those that carry throughput, FLOPs or a diffusion record: nothing measured is
 * lost. Their time still counts as their parent's time in children (self time is unchanged). */
static int drop_short(sm_model *m)
{
    const char *v = sm_info(m, "config.min_duration_s");
    double min_s = v ? strtod(v, NULL) : 0;
    if (!(min_s > 0) || !m->n_spans)
        return 0;
    int64_t min_ns = (int64_t)(min_s * 1e9);
    int32_t *map = sonde__malloc(m->n_spans * sizeof *map);
    if (!map)
        return -1;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        map[i] = s->end_ns - s->start_ns >= min_ns || s->units > 0 || s->flops > 0 ? 0 : -1;
    }
    for (size_t i = 0; i < m->n_dsteps; i++)
        if (m->dsteps[i].span >= 0)
            map[m->dsteps[i].span] = 0;
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].span >= 0)
            map[m->blocks[i].span] = 0;
    size_t k = 0;
    for (size_t t = 0; t < m->n_threads; t++)
        m->threads[t].spans = 0;
    for (size_t i = 0; i < m->n_spans; i++) {
        if (map[i] < 0)
            continue;
        sm_span s = m->spans[i];
        int32_t p = s.parent; /* the nearest ancestor kept (parents are kept before children) */
        while (p >= 0 && map[p] < 0)
            p = m->spans[p].parent;
        s.parent = p >= 0 ? map[p] : -1;
        map[i] = (int32_t)k;
        m->threads[s.thread].spans++;
        m->spans[k++] = s;
    }
    for (size_t i = 0; i < m->n_dsteps; i++)
        if (m->dsteps[i].span >= 0)
            m->dsteps[i].span = map[m->dsteps[i].span];
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].span >= 0)
            m->blocks[i].span = map[m->blocks[i].span];
    m->short_spans += m->n_spans - k;
    m->n_spans = k;
    sonde__free(map);
    return 0;
}

static int derive(sm_model *m)
{
    if (sort_counters(m) || sort_steps(m) || sort_instants(m))
        return -1;
    /* diffusion records with seconds <= 0 take their section's duration */
    for (size_t i = 0; i < m->n_dsteps; i++)
        if (m->dsteps[i].span >= 0)
            m->dsteps[i].seconds = (double)(m->spans[m->dsteps[i].span].end_ns -
                                            m->spans[m->dsteps[i].span].start_ns) / 1e9;
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].span >= 0)
            m->blocks[i].seconds = (double)(m->spans[m->blocks[i].span].end_ns -
                                            m->spans[m->blocks[i].span].start_ns) / 1e9;
    /* A step is active when a window covers its number. */
    for (size_t i = 0; m->scheduled && i < m->n_steps; i++) {
        uint64_t step = m->steps[i].number;
        m->steps[i].active = 0;
        for (size_t w = 0; w < m->n_windows; w++)
            if (step >= m->windows[w].first_step && step <= m->windows[w].last_step)
                m->steps[i].active = 1;
    }
    sm_stats_free(m->stats, m->n_stats);
    m->stats = sm_stats(m, NULL, NULL, (double)m->duration_ns / 1e9, &m->n_stats);
    if (!m->stats && m->n_spans)
        return -1;
    if (fold_aggregated(m) != 0)
        return -1;
    for (size_t i = 0; i < m->n_sites; i++) {
        m->sites[i].stat = -1;
        for (size_t k = 0; k < m->n_stats; k++)
            if (!strcmp(m->stats[k].name, m->sites[i].name)) {
                m->sites[i].stat = (int)k;
                break;
            }
    }
    sm_resources(m, m->stats, m->n_stats, NULL, NULL);
    m->total_sections = m->n_spans - m->sections_end_lost; /* those are counted apart */
    m->total_steps = m->n_steps;
    double tu, tus;
    sm_totals(m, &tu, &tus, &m->total_flops, &m->total_flops_s);
    sm_steps(m, &m->steps_summary);
    return sm_trace_budget(m, INT64_MIN, INT64_MAX, &m->trace);
}

#define MOVE_APPEND(dst, nd, src, ns)                                                           \
    do {                                                                                        \
        if (ns) {                                                                               \
            void *g_ = sonde__realloc((dst), ((nd) + (ns)) * sizeof *(dst));                           \
            if (!g_)                                                                            \
                return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");                 \
            (dst) = g_;                                                                         \
            memcpy((dst) + (nd), (src), (ns) * sizeof *(dst));                                  \
        }                                                                                       \
    } while (0)

int sm_merge(sm_model *d, sm_model *s)
{
    int64_t off = (int64_t)(s->start_mono_ns - d->start_mono_ns);
    uint32_t site0 = (uint32_t)d->n_sites, th0 = (uint32_t)d->n_threads;
    int32_t span0 = (int32_t)d->n_spans, meta0 = (int32_t)d->n_meta, sess0 = (int32_t)d->n_sessions;
#define REMAP_UNIT(u) ((u) ? (u) + site0 : 0)
    MOVE_APPEND(d->sites, d->n_sites, s->sites, s->n_sites);
    d->n_sites += s->n_sites;
    s->n_sites = 0; /* the strings now belong to d */
    MOVE_APPEND(d->threads, d->n_threads, s->threads, s->n_threads);
    for (size_t i = 0; i < s->n_threads; i++) {
        sm_thread *t = &d->threads[th0 + i];
        t->index = th0 + (uint32_t)i;
        if (!t->pid)
            t->pid = s->pid;
    }
    d->n_threads += s->n_threads;
    s->n_threads = 0;
    MOVE_APPEND(d->meta, d->n_meta, s->meta, s->n_meta);
    for (size_t i = 0; i < s->n_meta; i++) {
        sm_meta *e = &d->meta[meta0 + (int32_t)i];
        e->key += site0;
        e->value += site0;
        if (e->next >= 0)
            e->next += meta0;
    }
    d->n_meta += s->n_meta;
    MOVE_APPEND(d->sessions, d->n_sessions, s->sessions, s->n_sessions);
    for (size_t i = 0; i < s->n_sessions; i++) {
        sm_session *x = &d->sessions[sess0 + (int32_t)i];
        x->name += site0;
        x->thread += th0;
        x->start_ns += off;
        x->end_ns += off;
        x->unit = REMAP_UNIT(x->unit);
        if (x->meta >= 0)
            x->meta += meta0;
    }
    d->n_sessions += s->n_sessions;
    MOVE_APPEND(d->spans, d->n_spans, s->spans, s->n_spans);
    for (size_t i = 0; i < s->n_spans; i++) {
        sm_span *x = &d->spans[span0 + (int32_t)i];
        x->site += site0;
        x->thread += th0;
        x->start_ns += off;
        x->end_ns += off;
        x->unit = REMAP_UNIT(x->unit);
        if (x->parent >= 0)
            x->parent += span0;
        if (x->session >= 0)
            x->session += sess0;
        if (x->meta >= 0)
            x->meta += meta0;
    }
    d->n_spans += s->n_spans;
    MOVE_APPEND(d->instants, d->n_instants, s->instants, s->n_instants);
    for (size_t i = 0; i < s->n_instants; i++) {
        sm_instant *x = &d->instants[d->n_instants + i];
        x->name += site0;
        if (x->args >= 0)
            x->args += meta0;
        x->thread += th0;
        x->t_ns += off;
    }
    d->n_instants += s->n_instants;
    MOVE_APPEND(d->steps, d->n_steps, s->steps, s->n_steps);
    for (size_t i = 0; i < s->n_steps; i++) {
        d->steps[d->n_steps + i].thread += th0;
        d->steps[d->n_steps + i].t_ns += off;
        d->steps[d->n_steps + i].start_ns += off;
    }
    d->n_steps += s->n_steps;
    MOVE_APPEND(d->windows, d->n_windows, s->windows, s->n_windows);
    for (size_t i = 0; i < s->n_windows; i++) {
        d->windows[d->n_windows + i].start_ns += off;
        d->windows[d->n_windows + i].end_ns += off;
    }
    d->n_windows += s->n_windows;
    d->scheduled |= s->scheduled;
    MOVE_APPEND(d->counters, d->n_counters, s->counters, s->n_counters);
    for (size_t i = 0; i < s->n_counters; i++) {
        sm_counter *c = &d->counters[d->n_counters + i];
        for (size_t k = 0; k < c->n; k++)
            c->t_ns[k] += off;
    }
    d->n_counters += s->n_counters;
    s->n_counters = 0;
    MOVE_APPEND(d->metrics, d->n_metrics, s->metrics, s->n_metrics);
    d->n_metrics += s->n_metrics;
    s->n_metrics = 0;
    /* diffusion records and CUDA activity: their times and the spans and threads they name */
    MOVE_APPEND(d->dsteps, d->n_dsteps, s->dsteps, s->n_dsteps);
    for (size_t i = 0; i < s->n_dsteps; i++) {
        sm_dstep *x = &d->dsteps[d->n_dsteps + i];
        x->t_ns += off;
        if (x->span >= 0)
            x->span += span0;
    }
    d->n_dsteps += s->n_dsteps;
    MOVE_APPEND(d->blocks, d->n_blocks, s->blocks, s->n_blocks);
    for (size_t i = 0; i < s->n_blocks; i++) {
        sm_block *x = &d->blocks[d->n_blocks + i];
        x->t_ns += off;
        if (x->span >= 0)
            x->span += span0;
    }
    d->n_blocks += s->n_blocks;
    MOVE_APPEND(d->gpu, d->n_gpu, s->gpu, s->n_gpu);
    for (size_t i = 0; i < s->n_gpu; i++) {
        sm_gpu *x = &d->gpu[d->n_gpu + i];
        x->start_ns += off;
        x->end_ns += off;
        if (x->launch_ns >= 0)
            x->launch_ns += off;
        if (x->launch_thread >= 0)
            x->launch_thread += (int32_t)th0;
        if (x->span >= 0)
            x->span += span0;
    }
    d->n_gpu += s->n_gpu;
    s->n_gpu = 0; /* the kernel names now belong to d */
    MOVE_APPEND(d->ops, d->n_ops, s->ops, s->n_ops);
    for (size_t i = 0; i < s->n_ops; i++) {
        sm_op *x = &d->ops[d->n_ops + i];
        x->start_ns += off;
        x->end_ns += off;
        x->name += (uint32_t)d->n_op_names;
        if (x->shapes >= 0)
            x->shapes += (int32_t)d->n_op_names;
        x->thread += th0;
        if (x->span >= 0)
            x->span += span0;
        if (x->parent >= 0)
            x->parent += (int32_t)d->n_ops;
    }
    d->n_ops += s->n_ops;
    s->n_ops = 0;
    MOVE_APPEND(d->op_names, d->n_op_names, s->op_names, s->n_op_names);
    d->n_op_names += s->n_op_names;
    s->n_op_names = 0; /* the names now belong to d */
    MOVE_APPEND(d->params, d->n_params, s->params, s->n_params);
    d->n_params += s->n_params;
    s->n_params = 0; /* and the model names */
    for (size_t i = 0; i < s->n_warnings; i++) {
        char *w = NULL;
        if (sonde__asprintf(&w, "pid %d: %s", s->pid, s->warnings[i]) < 0)
            return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
        char **g = sonde__realloc(d->warnings, (d->n_warnings + 1) * sizeof *g);
        if (!g) {
            sonde__free(w);
            return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
        }
        d->warnings = g;
        d->warnings[d->n_warnings++] = w;
    }
    /* the program's run-level metadata joins the run's */
    for (int32_t e = s->run_meta, next; e >= 0; e = next) {
        next = s->meta[e].next;
        d->meta[meta0 + e].next = d->run_meta;
        d->run_meta = meta0 + e;
    }
    d->run_units += s->run_units;
    d->run_units_s += s->run_units_s;
    d->run_flops += s->run_flops;
    d->dropped_events += s->dropped_events;
    d->sections_end_lost += s->sections_end_lost;
    /* The elements moved into d: src's arrays hold none any more (sm_free frees the arrays). */
    s->n_spans = s->n_meta = s->n_sessions = s->n_instants = s->n_steps = s->n_windows = 0;
    s->n_dsteps = s->n_blocks = 0;
#undef REMAP_UNIT
    for (size_t i = 0; i < d->n_rates; i++)
        sonde__free(d->rates[i].unit);
    sonde__free(d->rates);
    d->rates = NULL;
    d->n_rates = 0;
    if (build_rates(d) || derive(d))
        return sonde__fail(SONDE_ENOMEM, "out of memory merging runs");
    return 0;
}

static int cmp_site_id(const void *a, const void *b)
{
    uint32_t x = ((const sm_site *)a)->id, y = ((const sm_site *)b)->id;
    return x < y ? -1 : x > y;
}

static void free_site(sm_site *s)
{
    sonde__free(s->name);
    sonde__free(s->file);
    sonde__free(s->func);
}

#define BIT_SET(v, i) ((v)[(i) >> 6] |= 1ull << ((i) & 63))
#define BIT_GET(v, i) (((v)[(i) >> 6] >> ((i) & 63)) & 1u)

/* The model's site table, dense: every id a SITE record or an event names has an entry ("?"
 * when its record is missing). Ids are indices, as in the file, unless they are sparse (a
 * crafted file naming id 4,000,000 and nothing else, or a profiler whose process interned many
 * names before it): then they are renumbered by rank and the events rewritten, so the table
 * grows with what the file holds, never with the largest id in it (at most 64 Ki gaps). */
static int build_sites(sb_raw *raw, sm_model *m, uint32_t max_id)
{
    if (raw->n_sites)
        qsort(raw->sites, raw->n_sites, sizeof *raw->sites, cmp_site_id);
    size_t nu = 0; /* a site written twice (writer and signal handler): one copy, both alike */
    for (size_t i = 0; i < raw->n_sites; i++) {
        if (nu && raw->sites[nu - 1].id == raw->sites[i].id)
            free_site(&raw->sites[i]);
        else
            raw->sites[nu++] = raw->sites[i];
    }
    raw->n_sites = nu;
    if (nu && raw->sites[nu - 1].id > max_id)
        max_id = raw->sites[nu - 1].id;
    uint64_t *used = NULL;
    uint32_t *rank = NULL;
    size_t n = (size_t)max_id + 1;
    if (n > 2 * nu + 65536) { /* perhaps sparse: count the ids named */
        used = sonde__calloc(SM_MAX_ID / 64, sizeof *used);
        if (!used)
            return -1;
        BIT_SET(used, 0u);
        for (size_t i = 0; i < nu; i++)
            BIT_SET(used, raw->sites[i].id);
        for (size_t t = 0; t < raw->n_threads; t++)
            for (size_t i = 0; i < raw->tev[t].n; i++) {
                const sb_ev *e = &raw->tev[t].ev[i];
                BIT_SET(used, e->id);
                if (e->kind == SONDE_K_METADATA)
                    BIT_SET(used, e->arg);
            }
        size_t count = 0;
        for (size_t w = 0; w <= max_id / 64; w++)
            count += (size_t)__builtin_popcountll(used[w]);
        if (n > 2 * count + 65536) { /* sparse: renumber */
            rank = sonde__malloc(n * sizeof *rank);
            if (!rank) {
                sonde__free(used);
                return -1;
            }
            uint32_t next = 0;
            for (uint32_t id = 0; id <= max_id; id++)
                rank[id] = BIT_GET(used, id) ? next++ : UINT32_MAX;
            n = count;
        }
        sonde__free(used);
    }
    sm_site *t = sonde__calloc(n, sizeof *t);
    if (!t) {
        sonde__free(rank);
        return -1;
    }
    for (size_t i = 0; i < nu; i++) {
        uint32_t id = raw->sites[i].id;
        t[rank ? rank[id] : id] = raw->sites[i];
    }
    raw->n_sites = 0;
    if (rank)
        for (size_t k = 0; k < raw->n_threads; k++)
            for (size_t i = 0; i < raw->tev[k].n; i++) {
                sb_ev *e = &raw->tev[k].ev[i];
                e->id = rank[e->id];
                if (e->kind == SONDE_K_METADATA)
                    e->arg = rank[e->arg];
            }
    sonde__free(rank);
    m->sites = t;
    m->n_sites = n;
    for (size_t i = 0; i < n; i++) {
        t[i].stat = -1;
        t[i].id = (uint32_t)i;
        if (!t[i].name && !(t[i].name = sonde__strdup("?")))
            return -1;
    }
    return 0;
}

int sm__build(sb_raw *raw, sm_model *m, const char *fname)
{
    bctx b;
    memset(&b, 0, sizeof b);
    b.m = m;
    strmap_init(&b.counters);
    strmap_init(&b.metrics);
    int rc = SONDE_ENOMEM;

#define TAKE(field) (m->field = raw->field, raw->field = NULL)
    TAKE(name);
    TAKE(host);
    TAKE(program);
    TAKE(cmdline);
    TAKE(clock);
    TAKE(unit);
    TAKE(sonde_version);
#undef TAKE
    m->pid = raw->pid;
    m->peak_flops = raw->peak_flops;
    m->clean_end = raw->clean_end;
    m->dropped_events = raw->dropped;
    m->bytes = raw->bytes;
    m->writer_cpu_ns = raw->writer_cpu_ns;
    m->backpressure_chunks = raw->bp_chunks;
    m->backpressure_ns = raw->bp_ns;
    m->sampler_cpu_ns = raw->sampler_cpu_ns;
    m->info = raw->info;
    m->n_info = raw->n_info;
    raw->info = NULL;
    raw->n_info = 0;
    m->run_meta = -1;
    if (!m->name && !(m->name = sonde__strdup("?")))
        goto out;
    if (sm_safe_name(&m->name))
        goto out;
    if (!m->unit && !(m->unit = sonde__strdup("units")))
        goto out;

    /* Clock: a line through the first and last anchors; the start-up rate if only one. */
    const sb_anchor *a0 = &raw->anchors[0], *a1 = &raw->anchors[raw->n_anchors - 1];
    b.ns_per_tick = raw->ticks_per_s > 0 ? 1e9 / raw->ticks_per_s : 1.0;
    if (a1->tick > a0->tick + 1000 && a1->mono_ns > a0->mono_ns)
        b.ns_per_tick = (double)(a1->mono_ns - a0->mono_ns) / (double)(a1->tick - a0->tick);
    b.cut_tick = raw->clear_tick > a0->tick ? raw->clear_tick : a0->tick;
    m->start_real_ns = a0->real_ns + (uint64_t)((double)(b.cut_tick - a0->tick) * b.ns_per_tick);
    m->start_mono_ns = a0->mono_ns + (uint64_t)((double)(b.cut_tick - a0->tick) * b.ns_per_tick);

    uint64_t end_tick = raw->end_tick;
    uint32_t max_id = 0;
    uint64_t marked = 0; /* dropped events that GAP markers place */
    if (!raw->clean_end) {
        for (size_t i = 0; i < raw->n_anchors; i++)
            if (raw->anchors[i].tick > end_tick)
                end_tick = raw->anchors[i].tick;
    }
    for (size_t t = 0; t < raw->n_threads; t++) {
        for (size_t i = 0; i < raw->tev[t].n; i++) {
            const sb_ev *e = &raw->tev[t].ev[i];
            if (!raw->clean_end && e->tick > end_tick)
                end_tick = e->tick;
            if (e->id > max_id)
                max_id = e->id;
            if (e->kind == SONDE_K_METADATA && e->arg > max_id)
                max_id = e->arg;
            if (e->kind == SONDE_K_GAP)
                marked += e->arg;
        }
    }
    if (end_tick < b.cut_tick)
        end_tick = b.cut_tick;
    b.lost_at_end = raw->dropped > marked;
    m->duration_ns = rel(&b, end_tick);

    if (build_sites(raw, m, max_id))
        goto out;

    m->threads = sonde__calloc(raw->n_threads ? raw->n_threads : 1, sizeof *m->threads);
    if (!m->threads)
        goto out;
    m->n_threads = raw->n_threads;
    for (size_t t = 0; t < raw->n_threads; t++) {
        m->threads[t].index = raw->tev[t].index;
        m->threads[t].tid = raw->tev[t].tid;
        m->threads[t].pid = m->pid;
        m->threads[t].name = raw->tev[t].name;
        raw->tev[t].name = NULL;
        if (!m->threads[t].name && sonde__asprintf(&m->threads[t].name, "thread %u", (unsigned)t) < 0) {
            m->threads[t].name = NULL;
            goto out;
        }
    }
    m->warnings = raw->warnings;
    m->n_warnings = raw->n_warnings;
    b.cap_warn = raw->n_warnings;
    raw->warnings = NULL;
    raw->n_warnings = 0;

    const char *rk = sm_info(m, "config.rank"), *ws = sm_info(m, "config.world_size");
    m->rank = rk ? atoi(rk) : -1;
    m->world_size = ws && atoi(ws) > 0 ? atoi(ws) : 1;
    if (build_sessions(&b, raw, end_tick))
        goto out;
    uint64_t last_step = 0;
    for (size_t t = 0; t < raw->n_threads; t++)
        for (size_t i = 0; i < raw->tev[t].n; i++)
            if (raw->tev[t].ev[i].kind == SONDE_K_STEP &&
                (raw->tev[t].ev[i].arg & ~SONDE_STEP_BEGIN) > last_step)
                last_step = raw->tev[t].ev[i].arg & ~SONDE_STEP_BEGIN;
    if (build_modes(&b, raw, end_tick, last_step))
        goto out;
    for (size_t t = 0; t < raw->n_threads; t++) {
        size_t before = m->n_spans;
        if (build_thread(&b, &raw->tev[t], (uint32_t)t, end_tick))
            goto out;
        m->threads[t].spans = m->n_spans - before;
    }
    if (drop_short(m) || sm__ops_build(raw, m) || sm__gpu_build(raw, m))
        goto out;
    if (build_rates(m))
        goto out;
    if (b.unmatched_ends &&
        fmt_warning(&b, "%llu section end(s) had no matching begin in the file (begins dropped "
                        "or discarded by sonde_clear, or recorded before a fork())", (unsigned long long)b.unmatched_ends))
        goto out;
    if (b.end_lost &&
        fmt_warning(&b, "%llu section(s) lost their end among the dropped events (they were open "
                        "when events were dropped and never ended after): they are counted "
                        "apart (sections_end_lost) and left out of the statistics",
                    (unsigned long long)b.end_lost))
        goto out;
    m->sections_end_lost = b.end_lost;
    if (b.unterminated &&
        fmt_warning(&b, "%llu section(s) had not ended when the recording stopped; they are "
                        "closed at its end", (unsigned long long)b.unterminated))
        goto out;
    if (b.gap_events > m->dropped_events)
        m->dropped_events = b.gap_events;
    if (m->dropped_events &&
        fmt_warning(&b, "%llu event(s) were dropped: buffers were full (raise buffer_mb) or "
                        "the file could not be written", (unsigned long long)m->dropped_events))
        goto out;

    if (derive(m))
        goto out;
    rc = 0;
out:
    strmap_free(&b.counters);
    strmap_free(&b.metrics);
    sonde__free(b.mode_t);
    sonde__free(b.mode_active);
    if (rc)
        sonde__fail(rc, "%s: out of memory while building the model", fname);
    return rc;
}

void sb_raw_free(sb_raw *raw)
{
    sonde__free(raw->name);
    sonde__free(raw->host);
    sonde__free(raw->program);
    sonde__free(raw->cmdline);
    sonde__free(raw->clock);
    sonde__free(raw->unit);
    sonde__free(raw->sonde_version);
    if (raw->sites)
        for (size_t i = 0; i < raw->n_sites; i++) {
            sonde__free(raw->sites[i].name);
            sonde__free(raw->sites[i].file);
            sonde__free(raw->sites[i].func);
        }
    sonde__free(raw->sites);
    if (raw->tev)
        for (size_t i = 0; i < raw->n_threads; i++) {
            sonde__free(raw->tev[i].name);
            sonde__free(raw->tev[i].ev);
        }
    sonde__free(raw->tev);
    sonde__free(raw->anchors);
    for (size_t i = 0; i < raw->n_info; i++) {
        sonde__free(raw->info[i].key);
        sonde__free(raw->info[i].value);
    }
    sonde__free(raw->info);
    for (size_t i = 0; i < raw->n_warnings; i++)
        sonde__free(raw->warnings[i]);
    sonde__free(raw->warnings);
    sm__gpu_free_raw(raw);
    sm__ops_free_raw(raw);
    memset(raw, 0, sizeof *raw);
}

int sm_safe_name(char **name)
{
    char *s = *name;
    for (unsigned char *c = (unsigned char *)s; *c; c++)
        if (*c == '/' || *c == '\\' || *c < 0x20 || *c == 0x7f)
            *c = '_';
    if (*s && strcmp(s, ".") && strcmp(s, ".."))
        return 0;
    char *run = sonde__strdup("run");
    if (!run)
        return -1;
    sonde__free(s);
    *name = run;
    return 0;
}

void sm_free(sm_model *m)
{
    sonde__free(m->name);
    sonde__free(m->host);
    sonde__free(m->program);
    sonde__free(m->cmdline);
    sonde__free(m->clock);
    sonde__free(m->unit);
    sonde__free(m->sonde_version);
    sonde__free(m->path);
    for (size_t i = 0; m->sites && i < m->n_sites; i++) {
        sonde__free(m->sites[i].name);
        sonde__free(m->sites[i].file);
        sonde__free(m->sites[i].func);
    }
    sonde__free(m->sites);
    for (size_t i = 0; m->threads && i < m->n_threads; i++)
        sonde__free(m->threads[i].name);
    sonde__free(m->threads);
    sonde__free(m->spans);
    sonde__free(m->meta);
    sonde__free(m->sessions);
    sonde__free(m->instants);
    for (size_t i = 0; i < m->n_counters; i++) {
        sonde__free(m->counters[i].name);
        sonde__free(m->counters[i].t_ns);
        sonde__free(m->counters[i].v);
    }
    sonde__free(m->counters);
    sonde__free(m->steps);
    sonde__free(m->windows);
    sonde__free(m->analysis_text);
    sonde__free(m->dsteps);
    sonde__free(m->blocks);
    for (size_t i = 0; i < m->n_params; i++)
        sonde__free(m->params[i].model);
    sonde__free(m->params);
    for (size_t i = 0; i < m->n_gpu; i++)
        sonde__free(m->gpu[i].name);
    sonde__free(m->gpu);
    for (size_t i = 0; i < m->n_op_names; i++)
        sonde__free(m->op_names[i]);
    sonde__free(m->op_names);
    sonde__free(m->ops);
    for (size_t i = 0; i < m->n_rates; i++)
        sonde__free(m->rates[i].unit);
    sonde__free(m->rates);
    for (size_t i = 0; i < m->n_metrics; i++) {
        sonde__free(m->metrics[i].owner);
        sonde__free(m->metrics[i].name);
    }
    sonde__free(m->metrics);
    sm_stats_free(m->stats, m->n_stats);
    for (size_t i = 0; i < m->n_info; i++) {
        sonde__free(m->info[i].key);
        sonde__free(m->info[i].value);
    }
    sonde__free(m->info);
    for (size_t i = 0; i < m->n_warnings; i++)
        sonde__free(m->warnings[i]);
    sonde__free(m->warnings);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------------------------- */
static int cmp_stat(const void *a, const void *b)
{
    const sm_stat *x = a, *y = b;
    if (x->total_s != y->total_s)
        return x->total_s > y->total_s ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef struct agg_args {
    const char *section, *calls, *total_s;
} agg_args;

static void agg_arg(const char *key, const char *value, void *ctx)
{
    agg_args *a = ctx;
    if (!strcmp(key, "section"))
        a->section = value;
    else if (!strcmp(key, "calls"))
        a->calls = value;
    else if (!strcmp(key, "total_s"))
        a->total_s = value;
}

/* Folds the SM_AGGREGATED_EVENT instants into the run's statistics: their calls into count and
 * aggregated, their time into total, self and mean; a name with no recorded instance gets a
 * statistic of its own (its mean in every order statistic). 0, or -1 when out of memory. An
 * event with arguments that do not parse is left alone (it stays an event). */
static int fold_aggregated(sm_model *m)
{
    int any = 0, rc = 0;
    strmap by_name; /* stat name -> index, built at the first event */
    strmap_init(&by_name);
    for (size_t i = 0; i < m->n_instants && !rc; i++) {
        if (strcmp(sm_str(m, m->instants[i].name), SM_AGGREGATED_EVENT) != 0)
            continue;
        if (!any) {
            for (size_t k = 0; k < m->n_stats && !rc; k++)
                rc = strmap_put(&by_name, m->stats[k].name, (int)k);
            any = 1;
            if (rc)
                break;
        }
        agg_args a = {0};
        sm_each_meta(m, m->instants[i].args, agg_arg, &a);
        char *e1, *e2;
        unsigned long long calls = a.calls ? strtoull(a.calls, &e1, 10) : 0;
        double total = a.total_s ? strtod(a.total_s, &e2) : -1;
        if (!a.section || !calls || !a.calls || *e1 || !a.total_s || *e2 || !(total >= 0) ||
            !isfinite(total))
            continue;
        int k = strmap_get(&by_name, a.section);
        sm_stat *x = k >= 0 ? &m->stats[k] : NULL;
        if (!x) {
            sm_stat *st = sonde__realloc(m->stats, (m->n_stats + 1) * sizeof *st);
            if (!st) {
                rc = -1;
                break;
            }
            m->stats = st;
            x = &st[m->n_stats];
            memset(x, 0, sizeof *x);
            if (!(x->name = sonde__strdup(a.section)) ||
                strmap_put(&by_name, a.section, (int)m->n_stats) != 0) {
                sonde__free(x->name);
                rc = -1;
                break;
            }
            x->unit = m->unit;
            x->threads = 1;
            m->n_stats++;
            x->min_s = x->max_s = x->p50_s = x->p90_s = x->p99_s = total / (double)calls;
            x->res_cpu_mean = x->res_rss_begin = x->res_rss_end = x->res_rss_delta = NAN;
            x->res_gpu_util_mean = x->res_gpu_mem_peak = NAN;
        }
        double sum = x->mean_s * (double)x->count + total;
        x->count += calls;
        x->aggregated += calls;
        x->total_s += total;
        x->self_s += total;
        x->mean_s = sum / (double)x->count;
    }
    strmap_free(&by_name);
    if (rc)
        return -1;
    if (any) {
        double run_s = (double)m->duration_ns / 1e9;
        for (size_t k = 0; k < m->n_stats; k++)
            m->stats[k].share = run_s > 0 ? m->stats[k].total_s / run_s : 0;
        qsort(m->stats, m->n_stats, sizeof *m->stats, cmp_stat);
    }
    return 0;
}

void sm_stats_free(sm_stat *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        sonde__free(s[i].name);
        if (s[i].sketch)
            sm_sketch_free(s[i].sketch);
        sonde__free(s[i].sketch);
    }
    sonde__free(s);
}

typedef struct gsm_iv {
    int g, kind;
    sm_iv iv;
} gsm_iv;

static int cmp_giv(const void *a, const void *b)
{
    const gsm_iv *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->iv.s < y->iv.s ? -1 : x->iv.s > y->iv.s;
}

sm_stat *sm_stats(const sm_model *m, int (*keep)(const sm_span *, void *), void *ctx,
                  double share_of_s, size_t *n_out)
{
    *n_out = 0;
    if (!m->n_spans)
        return NULL;
    /* Group sites by name. */
    strmap names;
    strmap_init(&names);
    int *site_stat = sonde__malloc(m->n_sites * sizeof *site_stat);
    size_t *count = NULL, *fill = NULL;
    double *dur = NULL;
    double *mean = NULL, *m2 = NULL; /* running mean and squared deviations (Welford) */
    gsm_iv *iv = NULL;
    size_t n_iv = 0;
    uint32_t *last_thread = NULL;
    int64_t *open_end = NULL;
    sm_stat *st = NULL;
    size_t ns = 0;
    if (!site_stat)
        goto fail;
    for (size_t i = 0; i < m->n_sites; i++) {
        int k = strmap_get(&names, m->sites[i].name);
        if (k < 0) {
            k = (int)ns++;
            if (strmap_put(&names, m->sites[i].name, k))
                goto fail;
        }
        site_stat[i] = k;
    }
    st = sonde__calloc(ns, sizeof *st);
    count = sonde__calloc(ns + 1, sizeof *count);
    fill = sonde__calloc(ns + 1, sizeof *fill);
    last_thread = sonde__malloc(ns * sizeof *last_thread);
    open_end = sonde__malloc((ns ? ns : 1) * sizeof *open_end);
    if (!st || !count || !fill || !last_thread || !open_end)
        goto fail;
    size_t kept = 0;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if ((s->flags & SM_SPAN_END_LOST) || (keep && !keep(s, ctx)))
            continue;
        count[site_stat[s->site]]++;
        kept++;
    }
    /* Every duration of a group with at most SM_SKETCH_AT instances (exact percentiles); the
     * larger ones take theirs from their quantile sketch, so memory does not grow with their
     * instances. Every group has a sketch: the JSON report carries it for merging. */
    size_t exact = 0;
    for (size_t k = 0; k < ns; k++) {
        fill[k] = exact; /* offset of the group in dur */
        if (count[k] <= SM_SKETCH_AT)
            exact += count[k];
        st[k].sketched = count[k] > SM_SKETCH_AT;
        if (!count[k])
            continue;
        st[k].sketch = sonde__malloc(sizeof *st[k].sketch); /* every group's: mergeable */
        if (!st[k].sketch)
            goto fail;
        sm_sketch_init(st[k].sketch);
    }
    dur = sonde__malloc((exact ? exact : 1) * sizeof *dur);
    iv = sonde__malloc((2 * kept + 1) * sizeof *iv);
    mean = sonde__calloc(ns + 1, sizeof *mean);
    m2 = sonde__calloc(ns + 1, sizeof *m2);
    if (!dur || !iv || !mean || !m2)
        goto fail;
    for (size_t k = 0; k < ns; k++) {
        last_thread[k] = UINT32_MAX;
        st[k].min_depth = 1 << 30;
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if ((s->flags & SM_SPAN_END_LOST) || (keep && !keep(s, ctx)))
            continue;
        int k = site_stat[s->site];
        sm_stat *x = &st[k];
        double d = (double)(s->end_ns - s->start_ns) / 1e9;
        x->count++;
        if (sm_sketch_add(x->sketch, s->end_ns - s->start_ns))
            goto fail;
        if (!x->sketched) {
            dur[fill[k]++] = d;
        } else {
            double delta = d - mean[k];
            mean[k] += delta / (double)x->count;
            m2[k] += delta * (d - mean[k]);
        }
        if (last_thread[k] != s->thread) { /* spans are grouped by thread */
            last_thread[k] = s->thread;
            x->threads++;
            open_end[k] = INT64_MIN;
        }
        /* A recursive call (inside an earlier instance of the same name on its thread) is
         * already in that instance's total: the total counts the outermost instances. */
        if (s->start_ns >= open_end[k]) {
            x->total_s += d;
            open_end[k] = s->end_ns;
        }
        x->self_s += d - (double)s->child_ns / 1e9;
        x->units += s->units;
        x->units_s += s->units_s; /* explicit seconds; own durations are added below */
        if (s->units > 0 && !x->unit)
            x->unit = unit_name(m, s->unit);
        if (s->units > 0 && s->own_dur_units)
            iv[n_iv++] = (gsm_iv){k, 0, {s->start_ns, s->end_ns}};
        if (s->flops > 0) {
            x->flops += s->flops;
            iv[n_iv++] = (gsm_iv){k, 1, {s->start_ns, s->end_ns}};
        }
        if (s->depth < x->min_depth)
            x->min_depth = s->depth;
    }
    /* Wall time of each group's instances: with throughput over their own duration (kind 0),
     * with FLOPs (kind 1). */
    if (n_iv) {
        qsort(iv, n_iv, sizeof *iv, cmp_giv);
        sm_iv *tmp = sonde__malloc(n_iv * sizeof *tmp);
        if (!tmp)
            goto fail;
        for (size_t i = 0; i < n_iv;) {
            size_t j = i;
            size_t n = 0;
            for (; j < n_iv && iv[j].g == iv[i].g && iv[j].kind == iv[i].kind; j++)
                tmp[n++] = iv[j].iv;
            double u = union_s(tmp, n);
            sm_stat *x = &st[iv[i].g];
            if (iv[i].kind == 0)
                x->units_s += u;
            else
                x->flops_time_s = u;
            i = j;
        }
        sonde__free(tmp);
    }
    /* Compact to the names that have spans; compute the order statistics. */
    size_t out = 0, off = 0;
    for (size_t k = 0; k < ns; k++) {
        double *d = dur + off;
        if (!st[k].count)
            continue;
        sm_stat x = st[k];
        size_t c = (size_t)x.count;
        st[k].sketch = NULL; /* now x's */
        if (x.sketched) { /* from the running figures and the sketch */
            x.mean_s = mean[k];
            x.stddev_s = sqrt(m2[k] / (double)c);
            x.min_s = (double)x.sketch->min_ns / 1e9;
            x.max_s = (double)x.sketch->max_ns / 1e9;
            x.p50_s = sm_sketch_quantile(x.sketch, 0.50) / 1e9;
            x.p90_s = sm_sketch_quantile(x.sketch, 0.90) / 1e9;
            x.p99_s = sm_sketch_quantile(x.sketch, 0.99) / 1e9;
            x.share = share_of_s > 0 ? x.total_s / share_of_s : 0;
            x.name = NULL;
            if (!x.unit)
                x.unit = m->unit;
            st[out++] = x;
            continue;
        }
        off += c;
        qsort(d, c, sizeof *d, cmp_double);
        double sum = 0;
        for (size_t i = 0; i < c; i++)
            sum += d[i];
        x.mean_s = sum / (double)c;
        double var = 0;
        for (size_t i = 0; i < c; i++)
            var += (d[i] - x.mean_s) * (d[i] - x.mean_s);
        x.stddev_s = sqrt(var / (double)c);
        x.min_s = d[0];
        x.max_s = d[c - 1];
        x.p50_s = sm_percentile(d, c, 50);
        x.p90_s = sm_percentile(d, c, 90);
        x.p99_s = sm_percentile(d, c, 99);
        x.share = share_of_s > 0 ? x.total_s / share_of_s : 0;
        x.name = NULL;
        if (!x.unit)
            x.unit = m->unit;
        st[out++] = x;
    }
    {
        /* Each kept group's name, through the sites that map to it. */
        const char **gname = sonde__calloc(ns, sizeof *gname);
        if (!gname) {
            sm_stats_free(st, out);
            st = NULL;
            goto fail;
        }
        for (size_t i = m->n_sites; i-- > 0;)
            gname[site_stat[i]] = m->sites[i].name;
        for (size_t k = 0, o = 0; k < ns; k++) {
            if (!count[k])
                continue;
            st[o].name = sonde__strdup(gname[k]);
            if (!st[o++].name) {
                sonde__free(gname);
                sm_stats_free(st, out);
                st = NULL;
                goto fail;
            }
        }
        sonde__free(gname);
    }
    qsort(st, out, sizeof *st, cmp_stat);
    *n_out = out;
    if (!out) {
        sonde__free(st);
        st = NULL;
    }
    ns = 0; /* st's sketches are its rows' now */
fail:
    for (size_t k = 0; st && k < ns; k++) { /* failed: the sketches of every group */
        if (st[k].sketch)
            sm_sketch_free(st[k].sketch);
        sonde__free(st[k].sketch);
    }
    if (!*n_out)
        sonde__free(st);
    strmap_free(&names);
    sonde__free(site_stat);
    sonde__free(count);
    sonde__free(fill);
    sonde__free(dur);
    sonde__free(mean);
    sonde__free(m2);
    sonde__free(iv);
    sonde__free(last_thread);
    sonde__free(open_end);
    return *n_out ? st : NULL;
}

void sm_steps(const sm_model *m, sm_steps_summary *o)
{
    memset(o, 0, sizeof *o);
    size_t n = m->n_steps;
    if (!n)
        return;
    double *d = sonde__malloc(n * sizeof *d);
    if (!d)
        return;
    size_t k = 0;
    double span = 0;
    for (size_t i = 0; i < n; i++) {
        double dur = sm_step_s(&m->steps[i]);
        if (!m->steps[i].active)
            continue;
        if (!k)
            o->first_s = dur;
        d[k++] = dur;
        span += dur;
    }
    o->count = k;
    if (!k) {
        sonde__free(d);
        return;
    }
    o->mean_s = span / (double)k;
    o->per_s = span > 0 ? (double)k / span : 0;
    qsort(d, k, sizeof *d, cmp_double);
    o->min_s = d[0];
    o->max_s = d[k - 1];
    o->p50_s = sm_percentile(d, k, 50);
    o->p90_s = sm_percentile(d, k, 90);
    o->p99_s = sm_percentile(d, k, 99);
    sonde__free(d);
}

void sm_totals(const sm_model *m, double *units, double *units_s, double *flops, double *flops_s)
{
    *units = m->n_rates ? m->rates[0].units : 0;
    *units_s = m->n_rates ? m->rates[0].seconds : 0;
    double f = m->run_flops;
    for (size_t i = 0; i < m->n_sessions; i++)
        f += m->sessions[i].flops;
    sm_iv *iv = sonde__malloc((m->n_spans + 1) * sizeof *iv);
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if (s->flops > 0) {
            f += s->flops;
            if (iv)
                iv[n++] = (sm_iv){s->start_ns, s->end_ns};
        }
    }
    *flops = f;
    *flops_s = iv ? union_s(iv, n) : 0;
    sonde__free(iv);
}

size_t sm_program_threads(const sm_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_threads; i++)
        n += !m->threads[i].name || (strcmp(m->threads[i].name, "sonde-sampler") &&
                                     strcmp(m->threads[i].name, "sonde-writer"));
    return n;
}

void sm_each_meta(const sm_model *m, int32_t head,
                  void (*fn)(const char *key, const char *value, void *ctx), void *ctx)
{
    /* the list runs from the latest entry back: walk it oldest first, each key at its last value */
    size_t n = 0;
    for (int32_t i = head; i >= 0 && (size_t)i < m->n_meta; i = m->meta[i].next)
        n++;
    int32_t few[16]; /* most lists are short: no allocation for them */
    int32_t *order = n <= 16 ? few : sonde__malloc(n * sizeof *order);
    if (!order)
        return;
    size_t k = n;
    for (int32_t i = head; k > 0; i = m->meta[i].next)
        order[--k] = i;
    for (size_t a = 0; a < n; a++) {
        const char *key = sm_str(m, m->meta[order[a]].key);
        size_t first = a, last = a;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(sm_str(m, m->meta[order[j]].key), key)) {
                first = j < first ? j : first;
                last = j;
            }
        if (first == a)
            fn(key, sm_str(m, m->meta[order[last]].value), ctx);
    }
    if (order != few)
        sonde__free(order);
}

void sm_each_run_meta(const sm_model *m, void (*fn)(const char *key, const char *value, void *ctx),
                      void *ctx)
{
    if (m->run_meta >= 0 && (size_t)m->run_meta < m->n_meta) {
        sm_each_meta(m, m->run_meta, fn, ctx);
        return;
    }
    for (size_t i = 0; i < m->n_info; i++) /* read from a JSON report: its run.metadata */
        if (!strncmp(m->info[i].key, "metadata.", 9) && sm_info(m, m->info[i].key) == m->info[i].value)
            fn(m->info[i].key + 9, m->info[i].value, ctx);
}
