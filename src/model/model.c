/* model.c - builds the model from decoded events (section trees per thread, sessions, steps,
 * counters, metrics, metadata). What is derived from it once built is in derive.c, throughput
 * in rates.c, the statistics in stats.c, the downsampling of series in series.c, the merging of
 * runs in merge.c, the trace budget in budget.c. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/error.h"
#include "../util/strmap.h"
#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

#define GROW SONDE_GROW
#define BIT_SET(v, i) ((v)[(i) >> 6] |= 1ull << ((i) & 63))
#define BIT_GET(v, i) (((v)[(i) >> 6] >> ((i) & 63)) & 1u)

const char *sm_str(const sm_model *m, uint32_t id)
{
    if (id < m->n_sites && m->sites[id].name)
        return m->sites[id].name;
    return "?";
}

/* ------------------------------------------------------------------------------------------
 * Building
 * ---------------------------------------------------------------------------------------- */

typedef sonde_tally_mode mode_ev;
typedef sonde_tally_sess sess_ev;

static int64_t rel(const bctx *b, uint64_t tick)
{
    return sm__rel(b->set.cut_tick, b->set.ns_per_tick, tick);
}

/* ns_per_tick x ticks as a count of ns, clamped to what a uint64_t holds. */
static uint64_t ticks_ns(const bctx *b, uint64_t ticks)
{
    double v = (double)ticks * b->set.ns_per_tick;
    return v < 1.8e19 ? (uint64_t)v : UINT64_MAX;
}

/* The lowest duration of the histogram's bucket i (ticks) in ns. */
static int64_t bucket_ns(const bctx *b, size_t i)
{
    double v = (double)sonde_bucket_low(i) * b->set.ns_per_tick;
    return v < 9.2e18 ? (int64_t)v : INT64_MAX;
}

/* The shortest duration held in ns (INT64_MIN: every section is held), from the first pass's
 * histogram of sk's sections' durations in ticks, and in ticks (b->set.held_ticks: the held are
 * those the histogram counted above the bound). Durations bunch (a hot call's are alike), so the
 * bucket just under it may hold many times what is left of the number to hold: its sections are
 * held one in edge_every, counted on each thread (so a thread's are the same whichever thread
 * builds it: build_threads.c), spread over the run, filling the number with at most one a thread
 * more (b->set.edge_lo, b->set.edge_hi, b->set.edge_every). */
static int64_t held_bound(bctx *b, size_t n_threads, const sm_skim *sk)
{
    uint64_t max = sm_report_max_sections(b->m), sections = 0;
    b->set.edge_lo = b->set.edge_hi = 0; /* none */
    b->set.held_ticks = 0;
    for (size_t i = 0; i < SONDE_DUR_BUCKETS; i++) /* each closed once, at the latest at the run's end */
        sections += sk->t.hist[i];
    b->seen_sections = sections;
    if (!max || sections <= max)
        return INT64_MIN;
    uint64_t hold = max / 3, tmax = sm_trace_max_events(b->m); /* held, and a run beside each */
    if (tmax) {
        uint64_t th = tmax > n_threads ? (tmax - n_threads) / 3 : 0;
        hold = th < hold ? th : hold;
    }
    uint64_t above = 0;
    size_t i = SONDE_DUR_BUCKETS;
    while (i > 0 && above + sk->t.hist[i - 1] <= hold)
        above += sk->t.hist[--i];
    int64_t bound = i == SONDE_DUR_BUCKETS ? INT64_MAX : bucket_ns(b, i);
    b->set.held_ticks = i == SONDE_DUR_BUCKETS ? UINT64_MAX : sonde_bucket_low(i);
    if (bound < b->set.min_ns) { /* the shorter are left out: held are those not left out */
        double mt = ceil((double)b->set.min_ns / b->set.ns_per_tick);
        b->set.held_ticks = mt < 1.8e19 ? (uint64_t)mt : UINT64_MAX;
        return b->set.min_ns;
    }
    if (i > 0 && hold > above) {
        b->set.edge_lo = sonde_bucket_low(i - 1); /* the durations of bucket i - 1 */
        b->set.edge_hi = b->set.held_ticks;
        b->set.edge_every = (sk->t.hist[i - 1] + (hold - above) - 1) / (hold - above);
    }
    return bound;
}

/* 1 when what happens at time t is kept: always without a schedule, else inside a window. */
static int kept_at(const bctx *b, int64_t t)
{
    if (!b->set.n_modes)
        return 1;
    size_t lo = 0, hi = b->set.n_modes;
    while (lo < hi) { /* the last mode change at or before t */
        size_t mid = (lo + hi) / 2;
        if (b->set.mode_t[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? b->set.mode_active[lo - 1] : 0;
}

static int cmp_mode(const void *a, const void *b)
{
    const mode_ev *x = a, *y = b;
    return x->tick < y->tick ? -1 : x->tick > y->tick;
}

/* The schedule's mode changes (ev, n of them, from the first pass), in time order, and the
 * active windows they make. */
static int build_modes(bctx *b, mode_ev *ev, size_t n, uint64_t end_tick, uint64_t last_step)
{
    sm_model *m = b->m;
    if (!n)
        return 0;
    sonde__sort(ev, n, sizeof *ev, cmp_mode);
    b->set.mode_t = sonde__malloc(n * sizeof *b->set.mode_t);
    b->set.mode_active = sonde__malloc(n * sizeof *b->set.mode_active);
    m->windows = sonde__calloc(n, sizeof *m->windows);
    if (!b->set.mode_t || !b->set.mode_active || !m->windows)
        return -1;
    m->scheduled = 1;
    for (size_t i = 0; i < n; i++) {
        b->set.mode_t[i] = rel(b, ev[i].tick);
        b->set.mode_active[i] = (ev[i].arg & 3u) == 2;
        if (i && m->n_windows && m->windows[m->n_windows - 1].end_ns == INT64_MAX) {
            sm_window *w = &m->windows[m->n_windows - 1];
            w->end_ns = b->set.mode_t[i];
            w->last_step = ev[i].step ? ev[i].step - 1 : 0;
        }
        if (b->set.mode_active[i]) {
            sm_window *w = &m->windows[m->n_windows++];
            w->cycle = (int)(ev[i].arg >> 2);
            w->first_step = ev[i].step;
            w->start_ns = b->set.mode_t[i];
            w->end_ns = INT64_MAX;
        }
    }
    if (m->n_windows && m->windows[m->n_windows - 1].end_ns == INT64_MAX) {
        m->windows[m->n_windows - 1].end_ns = rel(b, end_tick);
        m->windows[m->n_windows - 1].last_step = last_step;
    }
    b->set.n_modes = n;
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

static int cmp_sess(const void *a, const void *b)
{
    const sess_ev *x = a, *y = b;
    if (x->tick != y->tick)
        return x->tick < y->tick ? -1 : 1;
    return x->begin - y->begin; /* an end before a begin at the same tick */
}

/* The sessions from their begin and end events (ev, n of them, from the first pass; sorted
 * here). */
static int build_sessions(bctx *b, sess_ev *ev, size_t n, uint64_t end_tick)
{
    sonde__sort(ev, n, sizeof *ev, cmp_sess);
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
            if (GROW(m->sessions, m->n_sessions, b->cap_sessions))
                return -1;
            sm_session *s = &m->sessions[m->n_sessions++];
            memset(s, 0, sizeof *s);
            s->name = b->set.rank ? b->set.rank[ev[i].name] : ev[i].name;
            s->thread = ev[i].thread;
            s->start_ns = rel(b, tick);
            s->meta = -1;
            open = 1;
        }
    }
    return 0;
}

typedef struct sentry {
    int32_t span; /* -1: a section begun before a clear, tracked only to match its end */
    uint32_t site;
    int32_t group; /* its name's statistics group (b->sink.site_group[site]) */
    int32_t run;    /* the run of folded sections open in it (m->folds), -1 none */
    uint64_t gaps; /* GAP markers on its thread before it began */
    int64_t inner_ns; /* durations of instances of its name nested in it (not in the total while
                         it counts; they do if it loses its end) */
    int64_t sinner_ns; /* inner_ns for its session's statistics (when they are fed here) */
    int referenced; /* a diffusion record took its duration: kept however short */
    int held_child; /* a section nested in it is held (settle) */
    uint64_t tick; /* its begin's */
} sentry; /* 56 bytes: pushed and popped once a section */

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

const sm_span_x sm_span_x_none = {-1, 0, 0, 0, 0, 0};

/* Span s's extras, made when it has none yet; NULL out of memory. */
static sm_span_x *span_x_of(bctx *b, sm_span *s)
{
    sm_model *m = b->m;
    if (s->x < 0) {
        if (GROW(m->span_x, m->n_span_x, b->cap_span_x))
            return NULL;
        m->span_x[m->n_span_x] = sm_span_x_none;
        s->x = (int32_t)m->n_span_x++;
    }
    return &m->span_x[s->x];
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

/* The nearest section below stack[k] that is built (not begun before a clear), or NULL. */
static sentry *built_below(sentry *stack, size_t k)
{
    if (k && stack[k - 1].span >= 0) /* most: the one right below */
        return &stack[k - 1];
    while (k-- > 0)
        if (stack[k].span >= 0)
            return &stack[k];
    return NULL;
}

/* The nearest section below stack[k] of the sink group g that is kept (and of session sess
 * unless INT32_MIN), or -1. */
static ptrdiff_t open_of_name(const bctx *b, const sentry *stack, size_t k, int g, int32_t sess)
{
    while (k-- > 0)
        if (stack[k].span >= 0 && stack[k].group == g &&
            (sess == INT32_MIN || b->m->spans[stack[k].span].session == sess))
            return (ptrdiff_t)k;
    return -1;
}

/* Inlined where called: settle and close_span, once a section (close_span says why). */
#define SM_INLINE static inline __attribute__((always_inline))

/* Held sections (sm_model.held_min_ns): once stack[k] has closed and fed the statistics (and its
 * metadata its name's sm_metasum), it is held when it lasts at least held_min_ns (or is one of
 * those just under it that held_bound spreads over the run), carries throughput or FLOPs, a
 * diffusion record took its duration, or a section nested in it is held. Else it is folded: its
 * descendants are folded already, so it is the last span, and it is popped; it joins the run
 * open in its box (its parent, or its thread's top level), and what was folded inside it goes
 * with it. A held section closes the run open in its box (the run lies before it) and its own
 * (the run after its last held child). A section shorter than min_duration_s is dropped, as
 * sm__drop_short drops it, and folded nowhere. 0, or -1 out of memory. */
SM_INLINE int settle(bctx *b, sentry *stack, size_t k, uint64_t tick)
{
    if (b->set.held_min_ns == INT64_MIN)
        return 0;
    sm_model *m = b->m;
    sentry *se = &stack[k], *up = built_below(stack, k);
    int32_t *slot = up ? &up->run : &b->top_run, idx = se->span;
    const sm_span *s = &m->spans[idx];
    int64_t dt = (int64_t)(tick - se->tick); /* in ticks, as the histogram counted it */
    uint64_t dur = dt > 0 ? (uint64_t)dt : 0;
    int last = (size_t)idx == m->n_spans - 1 && (se->run < 0 || (size_t)se->run == m->n_folds - 1);
    int edge = dur < b->set.edge_hi && dur >= b->set.edge_lo &&
               b->edge_seen++ % b->set.edge_every == 0;
    int carries = s->x >= 0 && !sm__meta_only(m, s); /* metadata alone is folded (metasum) */
    int group = se->group;
    if (sm_span_extra(m, s)->meta >= 0 &&
        sm__sum_meta(&b->rec, m, &m->spans[idx], group, b->sink.n_groups))
        return -1;
    if (dur >= b->set.held_ticks || edge || se->referenced || se->held_child || carries || !last) {
        if (se->run >= 0)
            m->folds[se->run].closer = -1;
        if (*slot >= 0)
            m->folds[*slot].closer = idx;
        *slot = -1;
        if (up)
            up->held_child = 1;
        return 0;
    }
    uint64_t inside = 0;
    if (se->run >= 0) {
        inside = m->folds[se->run].folded;
        m->n_folds--;
    }
    if (s->x >= 0)
        sm__fold_meta(m, &m->spans[idx]);
    const sm_span *gone = s; /* popped, its entry still there until the next is built */
    m->n_spans--;
    if (gone->flags & SM_SPAN_SHORT) { /* not built, as far as the counts go */
        m->short_spans++;
        b->n.built--;
        return 0;
    }
    if (*slot < 0) {
        if (GROW(m->folds, m->n_folds, b->cap_folds))
            return -1;
        *slot = (int32_t)m->n_folds++;
        m->folds[*slot] = (sm_fold_run){.thread = gone->thread, .site = gone->site,
                                        .start_ns = gone->start_ns, .end_ns = gone->start_ns,
                                        .box = gone->parent, .closer = -1};
    }
    sm_fold_run *r = &m->folds[*slot];
    r->mixed |= r->site != gone->site;
    if (gone->end_ns > r->end_ns)
        r->end_ns = gone->end_ns;
    r->n++;
    r->sum_ns += (uint64_t)dur;
    r->folded += 1 + inside;
    b->n.folded++; /* those inside were counted as they were folded */
    return 0;
}

/* Ends the section at stack[k] at t and feeds the statistics. lost: its END was among dropped
 * events (it was open when events were dropped, and no END of its own came): it is flagged
 * SM_SPAN_END_LOST and keeps no duration (its end is unknown: closing it at the next outer end
 * or at the run's end would stretch it), and the statistics leave it out. A section shorter than
 * min_duration_s, with no throughput, FLOPs or diffusion record, is flagged SM_SPAN_SHORT for
 * sm__drop_short and left out too. A nested instance of the same name is not in the name's total
 * (its outer one's time holds it) unless that outer one loses its end; the same within its
 * session for the session's statistics, when they are fed here. 0, or -1 out of memory. */
static int feed_stats(bctx *b, sentry *stack, size_t k, int64_t t, uint16_t flags, int lost)
{
    sm_model *m = b->m;
    sm_span *s = &m->spans[stack[k].span];
    int g = stack[k].group;
    int32_t sess = s->session;
    sm_statsink *ss = b->ssink && sess >= 0 ? &b->ssink[sess] : NULL;
    b->open_n[g]--;
    if (lost) {
        s->flags |= flags | SM_SPAN_END_LOST;
        s->end_ns = s->start_ns;
        b->n.end_lost++;
    } else {
        s->end_ns = t < s->start_ns ? s->start_ns : t;
        s->flags |= flags;
    }
    int64_t dur = s->end_ns - s->start_ns;
    const sm_span_x *x = sm_span_extra(m, s);
    if (b->set.min_ns > 0 && dur < b->set.min_ns && x->units <= 0 && x->flops <= 0 &&
        !stack[k].referenced)
        s->flags |= SM_SPAN_SHORT;
    if (lost) { /* what was nested in it of its name counts now, unless another encloses it */
        ptrdiff_t up = stack[k].inner_ns > 0 ? open_of_name(b, stack, k, g, INT32_MIN) : -1;
        if (up >= 0)
            stack[up].inner_ns += stack[k].inner_ns;
        else
            b->sink.g[g].total_ns += stack[k].inner_ns;
        up = ss && stack[k].sinner_ns > 0 ? open_of_name(b, stack, k, g, sess) : -1;
        if (up >= 0)
            stack[up].sinner_ns += stack[k].sinner_ns;
        else if (ss)
            ss->g[g].total_ns += stack[k].sinner_ns;
        return 0;
    }
    if (s->parent >= 0)
        m->spans[s->parent].child_ns += dur;
    if (s->flags & SM_SPAN_SHORT)
        return 0;
    int outermost = b->open_n[g] == 0;
    if (!outermost) {
        ptrdiff_t up = open_of_name(b, stack, k, g, INT32_MIN);
        if (up >= 0)
            stack[up].inner_ns += dur;
    }
    if (sm__sink_add(&b->sink, m, s, outermost))
        return -1;
    if (!ss)
        return 0;
    ptrdiff_t up = outermost ? -1 : open_of_name(b, stack, k, g, sess);
    if (up >= 0)
        stack[up].sinner_ns += dur;
    return sm__sink_add(ss, m, s, up < 0);
}

/* Ends the section at stack[k] at t (tick: feed_stats), then holds or folds it (settle). 0, or -1
 * out of memory. Inlined, as settle is, into the loop over a thread's events: once a section,
 * the span's fields then stay in registers (docs/performance.md: 12% fewer instructions with the
 * edges' own path). */
SM_INLINE int close_span(bctx *b, sentry *stack, size_t k, int64_t t, uint64_t tick,
                         uint16_t flags, int lost)
{
    if (stack[k].span < 0)
        return 0;
    const sm_span *open = &b->m->spans[stack[k].span];
    if (!lost && b->set.grad.n) /* closed by a hook: with the rest of the range it ran in */
        t = sm__grange_end(&b->set.grad, open->thread, open->start_ns, t);
    if (feed_stats(b, stack, k, t, flags, lost))
        return -1;
    const sm_span *s = &b->m->spans[stack[k].span];
    const sb_opts *o = &b->set.raw->opts;
    if (b->feeding && !(s->flags & SM_SPAN_SHORT) && o->feed->fn(o->feed->ctx, b->m, s)) {
        b->each_stopped = 1;
        return -1;
    }
    return settle(b, stack, k, tick);
}

/* One thread's sections being built, from its events a batch at a time. */
typedef struct tbuild {
    bctx *b;
    uint32_t tindex;
    int sampler_thread;     /* sonde's own sampler: its counters are the system's figures */
    sentry *stack;          /* the sections open */
    size_t depth, cap;
    uint64_t gaps;          /* GAP markers so far on this thread */
    uint32_t args_left;     /* METADATA events still to come that are an instant's payload */
    int32_t args_of;        /* that instant, -1 when it was not kept */
    const uint32_t *smp;    /* its CPU samples and off-CPU periods in time order (held
                               sections), n_smp of them */
    size_t n_smp, at_smp;   /* at_smp: the next one to place */
    int64_t *t_ns;          /* the batch's events' times (rel), computed together first: apart
                               from the loop over the events, the conversions overlap */
    size_t cap_t;
} tbuild;

/* Point i of the places to find: CPU sample i, then off-CPU period i - n_samples (its start). */
static sm_sample_raw point_at(const sb_raw *raw, size_t i)
{
    if (i < raw->n_samples)
        return raw->samples[i];
    const sm_off_raw *o = &raw->offs[i - raw->n_samples];
    return (sm_sample_raw){o->tid, o->stack, o->t_mono};
}

/* Held sections: the CPU samples (and off-CPU periods' starts) of the thread up to time t
 * (inclusive: a section's end holds a sample taken then, as sm__innermost_at has it) in the
 * innermost section built and open. */
static void place_samples(tbuild *tb, int64_t t, int inclusive)
{
    const sb_raw *raw = tb->b->set.raw;
    const sentry *in = built_below(tb->stack, tb->depth);
    int32_t site = in ? (int32_t)tb->b->m->spans[in->span].site : -1;
    while (tb->at_smp < tb->n_smp) {
        uint32_t i = tb->smp[tb->at_smp];
        int64_t ts = (int64_t)(point_at(raw, i).t_mono - tb->b->m->start_mono_ns);
        if (ts > t || (ts == t && !inclusive))
            break;
        raw->sample_site[i] = site;
        tb->at_smp++;
    }
}

/* A section's BEGIN (site id, at t): pushed on the thread's stack, and built unless it comes
 * before a clear or outside the schedule's active windows. 0, or -1 out of memory. */
static int begin_section(tbuild *tb, uint32_t id, int64_t t, uint64_t tick, int before_cut)
{
    bctx *b = tb->b;
    sm_model *m = b->m;
    if (GROW(tb->stack, tb->depth, tb->cap))
        return -1;
    const sentry *up = built_below(tb->stack, tb->depth);
    int32_t parent = up ? up->span : -1;
    sentry *se = &tb->stack[tb->depth++];
    *se = (sentry){.span = -1, .site = id, .gaps = tb->gaps, .run = -1,
                   .group = b->sink.site_group[id], .tick = tick};
    if (before_cut)
        return 0;
    if (GROW(m->spans, m->n_spans, b->cap_spans))
        return -1;
    sm_span *s = &m->spans[m->n_spans];
    *s = (sm_span){.site = id, .thread = tb->tindex, .parent = parent,
                   .session = session_at(m, t), .x = -1,
                   .depth = (uint16_t)(parent >= 0 ? m->spans[parent].depth + 1 : 0),
                   .start_ns = t, .end_ns = t};
    se->span = (int32_t)m->n_spans++;
    b->n.built++;
    b->open_n[se->group]++;
    return 0;
}

/* A section's END (site id, 0 for the innermost, at t): closes it and those open inside it,
 * whose own ends are missing. 0, or -1 out of memory. */
static int end_section(tbuild *tb, uint32_t id, int64_t t, uint64_t tick)
{
    bctx *b = tb->b;
    size_t k = tb->depth;
    if (id == 0) {
        k = tb->depth ? tb->depth - 1 : tb->depth;
    } else {
        while (k > 0 && tb->stack[k - 1].site != id)
            k--;
        k = k ? k - 1 : tb->depth;
    }
    if (k >= tb->depth) {
        b->n.unmatched_ends++;
        return 0;
    }
    for (size_t j = tb->depth; j-- > k + 1;) /* their ends are missing: dropped or never */
        if (close_span(b, tb->stack, j, t, tick, SM_SPAN_CLOSED_BY_OUTER,
                       tb->gaps > tb->stack[j].gaps))
            return -1;
    if (close_span(b, tb->stack, k, t, tick, 0, 0))
        return -1;
    tb->depth = k;
    return 0;
}

/* build_batch's handlers of the events that are not section edges, one a kind or kinds that
 * go together: each 0, or -1 out of memory. A diffusion step or block record, bound to the
 * section it was recorded in when it gives no duration of its own. */
static int on_diffusion(tbuild *tb, const sb_ev *e, const double *v, int64_t t)
{
    sm_model *m = tb->b->m;
    int32_t span = tb->depth ? tb->stack[tb->depth - 1].span : -1; /* -1: none kept */
    if (span >= 0 && v[0] <= 0)
        tb->stack[tb->depth - 1].referenced = 1;
    if (e->kind == SONDE_K_DSTEP) {
        if (GROW(m->dsteps, m->n_dsteps, tb->b->cap_dsteps))
            return -1;
        m->dsteps[m->n_dsteps++] = (sm_dstep){t, e->arg, v[0], v[1], v[2], v[3],
                                              v[0] > 0 ? -1 : span};
    } else {
        if (GROW(m->blocks, m->n_blocks, tb->b->cap_blocks))
            return -1;
        m->blocks[m->n_blocks++] = (sm_block){t, e->arg, v[0], v[1], v[2],
                                              v[0] > 0 ? -1 : span};
    }
    return 0;
}

/* A model's parameter count (the last one recorded for each model name). */
static int on_params(sm_model *m, const sb_ev *e, const double *v)
{
    const char *model = sm_str(m, e->id);
    size_t k;
    for (k = 0; k < m->n_params && strcmp(m->params[k].model, model); k++) {
    }
    if (k == m->n_params) {
        sm_params *np = sonde__realloc(m->params, (k + 1) * sizeof *np);
        if (!np)
            return -1;
        m->params = np;
        if (!(np[k].model = sonde__strdup(model)))
            return -1;
        m->n_params++;
    }
    m->params[k].count = v[0];
    return 0;
}

/* An instant, held or thinned (sm__instant_held); its payload, the METADATA events right after
 * it, goes with it (args_left), dropped with it when cut. */
static int on_instant(tbuild *tb, const sb_ev *e, int64_t t, int before_cut)
{
    bctx *b = tb->b;
    sm_model *m = b->m;
    tb->args_left = e->arg;
    tb->args_of = -1;
    if (before_cut || !sm__instant_held(&b->rec, m, e->id))
        return 0;
    if (GROW(m->instants, m->n_instants, b->cap_inst))
        return -1;
    tb->args_of = (int32_t)m->n_instants;
    m->instants[m->n_instants++] = (sm_instant){t, tb->tindex, e->id, -1};
    return 0;
}

/* A metric, units, FLOPs or a metadata pair: attached to the innermost open section kept, else
 * to the session, else to the run (target_of). */
static int on_attached(tbuild *tb, const sb_ev *e, const double *v, int64_t t)
{
    bctx *b = tb->b;
    sm_model *m = b->m;
    char owner_buf[300];
    target tg = target_of(b, tb->stack, tb->depth, t, owner_buf, sizeof owner_buf);
    if (!tg.owner)
        return 0;
    sm_span_x *sx = NULL; /* the span's extras, the session's or the run's fields */
    if (tg.span && e->kind != SONDE_K_METRIC && !(sx = span_x_of(b, tg.span)))
        return -1;
    if (e->kind == SONDE_K_METRIC)
        return sm__add_metric(&b->rec, m, tg.owner, sm_str(m, e->id), v[0]) ? -1 : 0;
    if (e->kind == SONDE_K_METADATA) {
        int32_t *head = sx ? &sx->meta : tg.session ? &tg.session->meta : &m->run_meta;
        return add_meta(b, head, e->id, e->arg) ? -1 : 0;
    }
    if (e->kind == SONDE_K_FLOPS) {
        *(sx ? &sx->flops : tg.session ? &tg.session->flops : &m->run_flops) += v[0];
        return 0;
    }
    *(sx ? &sx->unit : tg.session ? &tg.session->unit : &m->run_unit) = e->id;
    *(sx ? &sx->units : tg.session ? &tg.session->units : &m->run_units) += v[0];
    double *us = sx ? &sx->units_s : tg.session ? &tg.session->units_s : &m->run_units_s;
    if (v[1] > 0)
        *us += v[1];
    else if (sx)
        sx->own_dur_units = 1;
    else if (tg.session)
        tg.session->own_dur_units = 1;
    else
        *us += (double)m->duration_ns / 1e9;
    return 0;
}

/* An event of one of the kinds above (or a gap, counter or step), ids already renumbered. */
static int on_event(tbuild *tb, const sb_ev *e, const double *v, int64_t t)
{
    bctx *b = tb->b;
    sm_model *m = b->m;
    /* before a clear, or outside the schedule's active windows: not kept */
    int before_cut = e->tick < b->set.cut_tick || (e->kind != SONDE_K_STEP && !kept_at(b, t));
    switch (e->kind) {
    case SONDE_K_DSTEP:
    case SONDE_K_BLOCK:
        return before_cut ? 0 : on_diffusion(tb, e, v, t);
    case SONDE_K_PARAMS:
        return before_cut ? 0 : on_params(m, e, v);
    case SONDE_K_GAP:
        tb->gaps++;
        b->n.gaps++;
        b->n.gap_events += e->arg;
        return 0;
    case SONDE_K_INSTANT:
        return on_instant(tb, e, t, before_cut);
    case SONDE_K_COUNTER: /* the sampler's past the run's end: taken during sonde's closing
                             work, after the program's own run ended (sonde__mark_end) */
        return !before_cut && (t <= m->duration_ns || !tb->sampler_thread) &&
                       sm__add_counter(&b->rec, m, sm_str(m, e->id), t, v[0], tb->sampler_thread)
                   ? -1 : 0;
    case SONDE_K_STEP:
        return !before_cut && sm__add_step(&b->rec, m, t, tb->tindex, e->arg) ? -1 : 0;
    case SONDE_K_METRIC:
    case SONDE_K_THROUGHPUT:
    case SONDE_K_FLOPS:
    case SONDE_K_METADATA:
        return before_cut ? 0 : on_attached(tb, e, v, t);
    default:
        return 0;
    }
}

/* Hands an event the model keeps to the reading's consumers (sm_read_file_ops), with the
 * section open on its thread before it. 0, or -1 when one failed. */
static int consume(tbuild *tb, unsigned kind, uint32_t id, uint32_t arg, const double *v,
                   int64_t t)
{
    const sb_opts *o = &tb->b->set.raw->opts;
    sm_event ev = {kind, tb->tindex, t, id, arg, v,
                   tb->depth ? tb->stack[tb->depth - 1].site : 0};
    for (size_t i = 0; i < o->n_ops; i++) {
        int (*fn)(void *, const sm_model *, const sm_event *) = o->ops[i]->on[kind];
        if (fn && fn(o->states[i], tb->b->m, &ev))
            return -1;
    }
    return 0;
}

static int build_batch(void *ctx, const sb_batch *bt)
{
    tbuild *tb = ctx;
    bctx *b = tb->b;
    sm_model *m = b->m;
    static const double none[SONDE_MAX_VALUES];
    if (SONDE_RESERVE(tb->t_ns, 0, bt->n, tb->cap_t))
        return -1;
    for (size_t i = 0; i < bt->n; i++)
        tb->t_ns[i] = rel(b, bt->ev[i].tick);
    for (size_t i = 0; i < bt->n; i++) {
        if (bt->ev[i].kind <= SONDE_K_END) { /* a section's edge (most events): no values */
            const sb_ev *e = &bt->ev[i];
            uint32_t id = b->set.rank ? b->set.rank[e->id] : e->id; /* (build_sites) */
            int64_t t = tb->t_ns[i];
            if (tb->at_smp < tb->n_smp)
                place_samples(tb, t, e->kind == SONDE_K_END);
            tb->args_left = 0;
            int cut = e->tick < b->set.cut_tick || !kept_at(b, t);
            if (b->set.raw->opts.n_ops && !cut && consume(tb, e->kind, id, 0, none, t))
                return -1;
            if (e->kind == SONDE_K_END ? end_section(tb, id, t, e->tick)
                                       : begin_section(tb, id, t, e->tick, cut))
                return -1;
            continue;
        }
        sb_ev ev = bt->ev[i];
        if (b->fragment && SONDE_SHARED_KIND(ev.kind)) { /* the SUMMARY said the thread had none */
            b->summary_wrong = 1;
            return -1;
        }
        if (b->set.rank && ev.kind != SONDE_K_MODE) { /* ids renumbered (build_sites) */
            ev.id = b->set.rank[ev.id];
            if (ev.kind == SONDE_K_METADATA)
                ev.arg = b->set.rank[ev.arg];
        }
        const double *v = ev.vi ? bt->v[ev.vi - 1] : none; /* its values */
        if (tb->args_left && ev.kind == SONDE_K_METADATA) { /* an instant's payload */
            tb->args_left--;
            if (tb->args_of >= 0 && add_meta(b, &m->instants[tb->args_of].args, ev.id, ev.arg))
                return -1;
            continue;
        }
        tb->args_left = 0;
        if (b->set.raw->opts.n_ops && ev.tick >= b->set.cut_tick &&
            (ev.kind == SONDE_K_STEP || kept_at(b, tb->t_ns[i])) &&
            consume(tb, ev.kind, ev.id, ev.arg, v, tb->t_ns[i]))
            return -1;
        if (on_event(tb, &ev, v, tb->t_ns[i]))
            return -1;
    }
    return 0;
}

typedef struct smp_key {
    uint32_t tid, i;
    uint64_t t;
} smp_key;

static int cmp_smp(const void *a, const void *b)
{
    const smp_key *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Held sections: the CPU samples and the off-CPU periods' starts are placed in their sections
 * as those are built, not after (place_samples), so b->set.smp lists them by thread id and time,
 * and raw->sample_site receives their places (the periods' after the samples'). 0, or -1 out of
 * memory. */
static int sort_samples(bctx *b)
{
    sb_raw *raw = b->set.raw;
    size_t n = raw->n_samples + raw->n_offs;
    smp_key *k = sonde__malloc(n * sizeof *k);
    b->set.smp = sonde__malloc(n * sizeof *b->set.smp);
    raw->sample_site = sonde__malloc(n * sizeof *raw->sample_site);
    if (!k || !b->set.smp || !raw->sample_site) {
        sonde__free(k);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        sm_sample_raw s = point_at(raw, i);
        k[i] = (smp_key){s.tid, (uint32_t)i, s.t_mono};
        raw->sample_site[i] = -1;
    }
    sonde__sort(k, n, sizeof *k, cmp_smp);
    for (size_t i = 0; i < n; i++)
        b->set.smp[i] = k[i].i;
    sonde__free(k);
    return 0;
}

/* Thread t's points in b->set.smp: those of its thread id, when no other thread has that id (the
 * profile places a sample by its thread id alone). */
static void thread_samples(const bctx *b, size_t t, const uint32_t **smp, size_t *n)
{
    const sm_model *m = b->m;
    uint32_t tid = m->threads[t].tid;
    *n = 0;
    for (size_t u = 0; u < m->n_threads; u++)
        if (u != t && m->threads[u].tid == tid)
            return;
    size_t lo = 0, hi = b->set.raw->n_samples + b->set.raw->n_offs, all = hi;
    while (lo < hi) { /* the first of its id */
        size_t mid = (lo + hi) / 2;
        if (point_at(b->set.raw, b->set.smp[mid]).tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < all && point_at(b->set.raw, b->set.smp[end]).tid == tid)
        end++;
    *smp = b->set.smp + lo;
    *n = end - lo;
}

/* Sections still open when the thread's events end: closed at the run's end and flagged. 0, or
 * -1 out of memory. */
static int build_finish(tbuild *tb, uint64_t end_tick)
{
    bctx *b = tb->b;
    int64_t tend = rel(b, end_tick);
    if (tb->at_smp < tb->n_smp)
        place_samples(tb, tend, 1); /* those after the run's end stay in none */
    for (size_t j = tb->depth; j-- > 0;) {
        int lost = tb->gaps > tb->stack[j].gaps || b->set.lost_at_end || b->set.dump;
        if (tb->stack[j].span >= 0 && !lost)
            b->n.unterminated++;
        if (close_span(b, tb->stack, j, tend, end_tick, SM_SPAN_UNTERMINATED, lost))
            return -1;
    }
    tb->depth = 0;
    b->top_run = -1; /* its last run: nothing held follows it */
    return 0;
}

int sm__build_thread(bctx *b, void *src, size_t t, uint64_t end_tick)
{
    sm_model *m = b->m;
    uint64_t before = b->n.built;
    b->top_run = -1;
    b->edge_seen = 0; /* per thread: the same wherever the thread is built */
    const char *tn = m->threads[t].name;
    tbuild tb = {.b = b, .tindex = (uint32_t)t, .args_of = -1,
                 .sampler_thread = tn && !strcmp(tn, "sonde-sampler")};
    if (b->set.smp)
        thread_samples(b, t, &tb.smp, &tb.n_smp);
    int r = b->set.raw->events(src, t, b->set.warn_events, build_batch, &tb);
    if (!r)
        r = build_finish(&tb, end_tick);
    sonde__free(tb.stack);
    sonde__free(tb.t_ns);
    if (!r)
        m->threads[t].spans = b->n.built - before;
    return r ? -1 : 0;
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

/* The file's SITE records sorted by id, each once (a site written twice, by the writer and a
 * signal handler: one copy, both alike). */
static void unique_sites(sb_raw *raw)
{
    sonde__sort(raw->sites, raw->n_sites, sizeof *raw->sites, cmp_site_id);
    size_t nu = 0;
    for (size_t i = 0; i < raw->n_sites; i++) {
        if (nu && raw->sites[nu - 1].id == raw->sites[i].id)
            free_site(&raw->sites[i]);
        else
            raw->sites[nu++] = raw->sites[i];
    }
    raw->n_sites = nu;
}

/* The model's site table, dense: every id a SITE record or an event names has an entry ("?"
 * when its record is missing). Ids are indices, as in the file, unless they are sparse (a
 * crafted file naming id 4,000,000 and nothing else, or a profiler whose process interned many
 * names before it): then they are renumbered by rank (b->set.rank, applied to each event as it is
 * built), so the table grows with what the file holds, never with the largest id in it (at most
 * 64 Ki gaps). used: the ids the events name, from the first pass; raw's SITE records sorted,
 * each once (unique_sites). */
static int build_sites(bctx *b, sb_raw *raw, uint32_t max_id, uint64_t *used)
{
    sm_model *m = b->m;
    size_t nu = raw->n_sites;
    if (nu && raw->sites[nu - 1].id > max_id)
        max_id = raw->sites[nu - 1].id;
    uint32_t *rank = NULL;
    size_t n = (size_t)max_id + 1;
    if (n > 2 * nu + 65536) { /* perhaps sparse: count the ids named (used: by the events) */
        BIT_SET(used, 0u);
        for (size_t i = 0; i < nu; i++)
            BIT_SET(used, raw->sites[i].id);
        size_t count = 0;
        for (size_t w = 0; w <= max_id / 64; w++)
            count += (size_t)__builtin_popcountll(used[w]);
        if (n > 2 * count + 65536) { /* sparse: renumber */
            rank = sonde__malloc(n * sizeof *rank);
            if (!rank)
                return -1;
            uint32_t next = 0;
            for (uint32_t id = 0; id <= max_id; id++)
                rank[id] = BIT_GET(used, id) ? next++ : UINT32_MAX;
            n = count;
        }
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
    b->set.rank = rank; /* the events' ids are renumbered as they are built */
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

/* The throughput (sm__build_rates), then the build's counts of what did not fit as the run's
 * warnings (units counted once, samples without stacks, ends without begins, sections without
 * ends, events dropped: the larger of the file's count and the gaps found). 0, or -1 out of
 * memory. */
static int build_rates_warnings(bctx *b, sm_model *m)
{
    unsigned long long nested_units = 0;
    if (sm__build_rates(m, &nested_units))
        return -1;
    if (nested_units &&
        fmt_warning(b, "throughput: %llu section instance(s) recorded units inside a section (or "
                        "session) that recorded units in the same unit too: each is counted once, "
                        "in the outer one's total, not added again",
                    nested_units))
        return -1;
    if (m->profile.unnamed &&
        fmt_warning(b, "%llu CPU sample(s) are left out: their stacks are not in the file (the "
                        "program ended without sonde_destroy or exit, which write them) or name "
                        "functions it lacks", (unsigned long long)m->profile.unnamed))
        return -1;
    int dump = b->set.dump;
    if (b->n.unmatched_ends && dump &&
        fmt_warning(b, "%llu section(s) began before the flight recorder's window and are left "
                        "out (their ends are in it)", (unsigned long long)b->n.unmatched_ends))
        return -1;
    if (b->n.unmatched_ends && !dump &&
        fmt_warning(b, "%llu section end(s) had no matching begin in the file (begins dropped "
                        "or discarded by sonde_clear, or recorded before a fork())",
                    (unsigned long long)b->n.unmatched_ends))
        return -1;
    if (b->n.end_lost && dump &&
        fmt_warning(b, "%llu section(s) had not ended when the flight recorder's window was "
                        "written: their end is past it, so they are counted apart "
                        "(sections_end_lost) and left out of the statistics",
                    (unsigned long long)b->n.end_lost))
        return -1;
    if (b->n.end_lost && !dump &&
        fmt_warning(b, "%llu section(s) lost their end among the dropped events (they were open "
                        "when events were dropped and never ended after): they are counted "
                        "apart (sections_end_lost) and left out of the statistics",
                    (unsigned long long)b->n.end_lost))
        return -1;
    m->sections_end_lost = b->n.end_lost;
    if (b->n.unterminated &&
        fmt_warning(b, "%llu section(s) had not ended when the recording stopped; they are "
                        "closed at its end", (unsigned long long)b->n.unterminated))
        return -1;
    if (b->n.gap_events > m->dropped_events)
        m->dropped_events = b->n.gap_events;
    if (m->dropped_events &&
        fmt_warning(b, "%llu event(s) were dropped: buffers were full (raise buffer_mb) or "
                        "the file could not be written", (unsigned long long)m->dropped_events))
        return -1;

    return 0;
}

/* Whether the reading's sink (sm_feed) is fed the sections as they close: always without a want,
 * else when the model will not hold every section and want says so. 0, or -1 when want stopped
 * the reading. */
static int start_feeding(bctx *b, const sm_feed *fd)
{
    int w = !fd->want                    ? 1
            : b->set.held_min_ns == INT64_MIN ? 0
                                          : fd->want(fd->ctx, b->m, b->seen_sections);
    if (w < 0) {
        b->each_stopped = 1;
        return -1;
    }
    b->feeding = w;
    b->m->fed = w && fd->want;
    return 0;
}

/* What the build held for itself. */
static void bctx_free(bctx *b)
{
    sm__records_free(&b->rec);
    sonde__free(b->set.grad.r);
    sonde__free(b->set.mode_t);
    sonde__free(b->set.mode_active);
    sonde__free(b->set.rank);
    sonde__free(b->open_n);
    sonde__free(b->set.smp);
    sm__sink_free(&b->sink);
    for (size_t i = 0; i < b->n_ssink; i++)
        sm__sink_free(&b->ssink[i]);
    sonde__free(b->ssink);
}

/* The build's phases (sm__build), each 0 or -1 out of memory. The run's facts from the
 * records that describe it: name, host, information (with the facts set over it), counters. */
static int take_run(bctx *b, sb_raw *raw, sm_model *m)
{
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
    for (size_t i = 0; i < raw->opts.n_set; i++)
        if (sm_set_info(m, raw->opts.set[i].key, raw->opts.set[i].value))
            return -1;
    sm_config_read(m); /* once: every step and report after reads m->cfg */
    m->run_meta = -1;
    b->set.dump = sm_info(m, "trigger.reason") != NULL;
    if (!m->name && !(m->name = sonde__strdup("?")))
        return -1;
    if (sm_safe_name(&m->name))
        return -1;
    if (!m->unit && !(m->unit = sonde__strdup("units")))
        return -1;
    return 0;
}

/* The clock: a line through the first and last anchors (the start-up rate if only one), and
 * where the run starts (its first anchor, or its last clear). */
static void set_clock(bctx *b, const sb_raw *raw, sm_model *m)
{
    const sb_anchor *a0 = &raw->anchors[0], *a1 = &raw->anchors[raw->n_anchors - 1];
    b->set.ns_per_tick = raw->ticks_per_s > 0 ? 1e9 / raw->ticks_per_s : 1.0;
    if (a1->tick > a0->tick + 1000 && a1->mono_ns > a0->mono_ns)
        b->set.ns_per_tick = (double)(a1->mono_ns - a0->mono_ns) / (double)(a1->tick - a0->tick);
    if (!(b->set.ns_per_tick > 1e-6 && b->set.ns_per_tick < 1e6)) /* anchors no clock gives */
        b->set.ns_per_tick = 1.0;
    b->set.cut_tick = raw->clear_tick > a0->tick ? raw->clear_tick : a0->tick;
    m->start_real_ns = a0->real_ns + ticks_ns(b, b->set.cut_tick - a0->tick);
    m->start_mono_ns = a0->mono_ns + ticks_ns(b, b->set.cut_tick - a0->tick);
}

/* What must be known before any section is built (sk): from the file's SUMMARY record where
 * it can be trusted, else from a first pass over the events; the run's end (*end_tick) and
 * duration. */
static int first_pass(bctx *b, sb_raw *raw, sm_skim *sk, uint64_t *end_tick)
{
    sm_model *m = b->m;
    sk->clean_end = raw->clean_end;
    sk->end_tick = raw->end_tick;
    if (!raw->clean_end) {
        for (size_t i = 0; i < raw->n_anchors; i++)
            if (raw->anchors[i].tick > sk->end_tick)
                sk->end_tick = raw->anchors[i].tick;
    }
    uint64_t from = sonde__mono_ns();
    int r = sm__skim_summary(raw, b->set.cut_tick, sk);
    b->summary_malformed = r == 2; /* said once the file's warnings are the model's */
    b->set.warn_events = r == 0; /* the build is the only pass: it names malformed blocks */
    if (r < 0 || (r && sm__skim(raw, b->set.cut_tick, sk)) ||
        sm__skim_open_session(sk, raw->opts.part, raw->n_threads))
        return -1;
    m->read_times.first_pass_s = (double)(sonde__mono_ns() - from) / 1e9;
    m->read_times.one_pass = sk->summary;
    *end_tick = sk->end_tick < b->set.cut_tick ? b->set.cut_tick : sk->end_tick;
    b->set.lost_at_end = raw->dropped > sk->t.marked;
    m->duration_ns = rel(b, *end_tick);
    return 0;
}

/* The threads (named "thread N" where the file names none) and the file's warnings. */
static int take_threads(bctx *b, sb_raw *raw, sm_model *m)
{
    m->threads = sonde__calloc(raw->n_threads ? raw->n_threads : 1, sizeof *m->threads);
    if (!m->threads)
        return -1;
    m->n_threads = raw->n_threads;
    for (size_t t = 0; t < raw->n_threads; t++) {
        m->threads[t].index = raw->threads[t].index;
        m->threads[t].tid = raw->threads[t].tid;
        m->threads[t].pid = m->pid;
        m->threads[t].name = raw->threads[t].name;
        raw->threads[t].name = NULL;
        if (!m->threads[t].name && sonde__asprintf(&m->threads[t].name, "thread %u", (unsigned)t) < 0) {
            m->threads[t].name = NULL;
            return -1;
        }
    }
    m->warnings = raw->warnings;
    m->n_warnings = raw->n_warnings;
    b->cap_warn = raw->n_warnings;
    raw->warnings = NULL;
    raw->n_warnings = 0;
    return 0;
}

/* What the second pass needs set up: the configuration's bounds, the statistics' sinks, the
 * sessions and windows, what the report holds of instants and steps, where held sections are
 * cut, the sections' feed. */
static int plan_second_pass(bctx *b, sb_raw *raw, sm_skim *sk, uint64_t end_tick)
{
    sm_model *m = b->m;
    sonde_config cfg;
    sm_config(m, &cfg);
    m->rank = cfg.rank;
    m->world_size = cfg.world_size > 0 ? cfg.world_size : 1;
    b->set.min_ns = cfg.min_duration_s > 0 ? (int64_t)(cfg.min_duration_s * 1e9) : 0;
    b->rec.max = cfg.report_max_records == 1 ? 2 : cfg.report_max_records; /* a pair at least */
    if (sm__sink_init(&b->sink, m) ||
        !(b->open_n = sonde__calloc(b->sink.n_groups ? b->sink.n_groups : 1, sizeof *b->open_n)))
        return -1;
    if (build_sessions(b, sk->sess, sk->n_sess, end_tick) ||
        build_modes(b, sk->modes, sk->n_modes, end_tick, sk->t.last_step))
        return -1;
    sm_records_seen seen = {sk->t.instants, sk->t.step_ends, sk->t.last_step, &sk->t.inst,
                            b->set.rank, sk->t.stepped && sk->t.step_thread != UINT32_MAX,
                            b->set.dump};
    if (sm__records_plan(&b->rec, m, &seen) || sm__granges(raw, m, &b->set.grad))
        return -1;
    b->set.held_min_ns = held_bound(b, raw->n_threads, sk);
    if (raw->opts.feed && start_feeding(b, raw->opts.feed))
        return -1;
    if (b->set.held_min_ns != INT64_MIN && m->n_sessions) { /* their spans will not all be there */
        if (!(b->ssink = sonde__calloc(m->n_sessions, sizeof *b->ssink)))
            return -1;
        for (; b->n_ssink < m->n_sessions; b->n_ssink++)
            if (sm__sink_init(&b->ssink[b->n_ssink], m))
                return -1;
    }
    if (b->set.held_min_ns != INT64_MIN && (raw->n_samples || raw->n_offs) && sort_samples(b))
        return -1;
    return 0;
}

/* After the second pass: the statistics, then operators, GPU activity, CPU samples, rates and
 * what derives from them. */
static int finish(bctx *b, sb_raw *raw, sm_model *m)
{
    m->sections_folded = b->n.folded;
    m->held_min_ns = b->set.held_min_ns;
    for (size_t i = 0; i < b->n_ssink; i++) {
        sm_session *se = &m->sessions[i];
        if (sm__sink_finish(&b->ssink[i], m, (double)(se->end_ns - se->start_ns) / 1e9, &se->stats,
                            &se->n_stats))
            return -1;
    }
    if (sm__sink_finish(&b->sink, m, (double)m->duration_ns / 1e9, &m->stats, &m->n_stats) ||
        sm__drop_short(m, b->set.min_ns) || sm__ops_build(raw, m) || sm__gpu_build(raw, m) ||
        sm__profile_build(raw, m) || sm__profile_keep(raw, m))
        return -1;
    if (build_rates_warnings(b, m) != 0)
        return -1;
    return sm__derive(m, SM_STATS_FED) ? -1 : 0;
}

/* The warning that the SUMMARY record was malformed. 0, or -1 out of memory. */
static int summary_malformed(bctx *b, const char *fname)
{
    char *w = NULL;
    if (sonde__asprintf(&w, "%s: its SUMMARY record is malformed: its events were read twice, "
                            "as those of a file without one are", fname) < 0)
        return -1;
    return add_warning(b, w);
}

int sm__build(sb_raw *raw, sm_model *m, const char *fname)
{
    bctx b;
    memset(&b, 0, sizeof b);
    sm_skim sk;
    memset(&sk, 0, sizeof sk);
    b.m = m;
    b.set.raw = raw;
    strmap_init(&b.rec.counters);
    strmap_init(&b.rec.metrics);
    int rc = SONDE_ENOMEM;
    uint64_t end_tick = 0;
    if (take_run(&b, raw, m))
        goto out;
    set_clock(&b, raw, m);
    unique_sites(raw);
    if (first_pass(&b, raw, &sk, &end_tick) || build_sites(&b, raw, sk.t.max_id, sk.t.used))
        goto out;
    sonde__free(sk.t.used);
    sk.t.used = NULL;
    if (take_threads(&b, raw, m) || (b.summary_malformed && summary_malformed(&b, fname)) ||
        plan_second_pass(&b, raw, &sk, end_tick))
        goto out;
    /* The second pass: each thread's sections, its events decoded a batch at a time. */
    uint64_t from = sonde__mono_ns();
    /* (threads built on helpers feed no consumer: with consumers, every one on this thread) */
    if (sm__build_threads(&b, b.feeding || b.n_ssink > SM_OWN_MAX_SESSIONS || raw->opts.n_ops
                                  ? NULL : sk.own,
                          end_tick))
        goto out;
    m->read_times.build_s = (double)(sonde__mono_ns() - from) / 1e9;
    for (size_t i = 0; i < raw->n_warnings; i++) { /* the build's malformed blocks (warn_events) */
        if (add_warning(&b, raw->warnings[i]))
            goto out;
        raw->warnings[i] = NULL;
    }
    raw->n_warnings = 0;
    if (finish(&b, raw, m))
        goto out;
    rc = 0;
out:
    bctx_free(&b);
    sm__skim_free(&sk);
    if (b.each_stopped) /* the reason is the callback's */
        return SONDE_EIO;
    if (b.summary_wrong)
        return sonde__fail(SONDE_EFORMAT, "%s: its SUMMARY record does not say what its events "
                           "hold (a thread it says has only sections has other events); "
                           "SONDE_READ_SUMMARY=0 reads it without the record", fname);
    if (rc)
        sonde__fail(rc, "%s: out of memory while building the model", fname);
    return rc;
}

void sb_raw_free(sb_raw *raw)
{
    sonde__free(raw->summary);
    sonde__free(raw->sample_site);
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
    if (raw->threads)
        for (size_t i = 0; i < raw->n_threads; i++)
            sonde__free(raw->threads[i].name);
    sonde__free(raw->threads);
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
    sm__profile_free_raw(raw);
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
    sm_profile_free(&m->profile);
    if (m->praw) {
        sb_raw_free(m->praw);
        sonde__free(m->praw);
    }
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
    sonde__free(m->span_x);
    sonde__free(m->metasum);
    sonde__free(m->meta);
    sonde__free(m->folds);
    for (size_t i = 0; m->sessions && i < m->n_sessions; i++)
        sm_stats_free(m->sessions[i].stats, m->sessions[i].n_stats);
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
