/* ftrace.h - private: the core the two function tracers share (src/autotrace/autotrace.c over
 * -finstrument-functions, python/sonde/_pytrace.c over the interpreter's hooks). Each tracer
 * finds a call's function its own way and keeps its own stack of frames; what a call then does
 * is decided here:
 *
 * - A function is recorded (every call a section), or probed (its first hot_calls calls are
 *   sections and are timed), or hot (its later calls only counted and summed, no event), or
 *   skipped. A probed function becomes hot when more than half of its probe calls took under
 *   hot_ticks: a median, so a call the scheduler stretched on a loaded machine does not decide
 *   it (a mean did: one run in five kept a hot comparator recorded, issue 35).
 * - Self times add up to the run. A section's children are in the recording, but a counted call
 *   has no section, so each frame sums the time of the calls accounted directly inside it
 *   (`inner`: sections, and counted calls, passed up through frames that account nothing) and,
 *   of that, the time inside sections (`covered`). A counted call's self time is its duration
 *   less its inner time; a section's function has the counted calls' time not inside sections
 *   (inner - covered) taken out of its self time (hidden_ticks), since the reading already takes
 *   out its sections' children. A section opened right under a counted call reads the clock at
 *   both ends to say its duration to that call.
 * - Totals count outermost calls, as the reading does for sections: each thread keeps how many
 *   frames of each function are open (sonde__ft_opens, by the function's dense idx), and a
 *   counted call nested in another call of its function adds to the mean's sum, not to the
 *   total.
 * - sonde__ft_flush writes a function's totals as the "sonde.aggregated" event the reports fold
 *   into its statistics (sm__fold_aggregated).
 *
 * autotrace runs on every thread at once: its figures are atomic adds (mt = 1). Python tracing
 * runs under the GIL: the same fields take plain relaxed loads and stores (mt = 0), no locked
 * instruction on its hot path. Every function here is inline and never instrumented. */
#ifndef SONDE_RECORD_FTRACE_H
#define SONDE_RECORD_FTRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include <sonde/sonde.h>

#include "../util/alloc.h"
#include "record.h"

#define SONDE__FT_INLINE static inline __attribute__((always_inline, no_instrument_function))

enum { SONDE__FT_RECORD, SONDE__FT_PROBE, SONDE__FT_HOT, SONDE__FT_SKIP }; /* a function's mode */
enum { SONDE__FF_NONE, SONDE__FF_RECORD, SONDE__FF_PROBE, SONDE__FF_HOT }; /* what a frame does */

/* A traced function's figures. */
typedef struct sonde__ft_fn {
    _Atomic int mode;                      /* SONDE__FT_* */
    uint32_t idx;                          /* dense, from 0: its slot in each sonde__ft_opens */
    _Atomic uint64_t probe_n, probe_quick; /* probe calls timed; those under hot_ticks */
    _Atomic uint64_t hot_n;                /* calls counted since it became hot */
    _Atomic uint64_t hot_total;            /* their time, outermost calls only (its total) */
    _Atomic uint64_t hot_nested;           /* their time, calls nested in a call of it (with
                                              hot_total, the mean's sum: apart, so an outermost
                                              call makes two locked adds, not three) */
    _Atomic uint64_t hidden_ticks;         /* time to take out of its self time: what is
                                              accounted inside its counted calls, and the
                                              counted calls' time outside sections inside its
                                              sections */
} sonde__ft_fn;

/* A call being traced. Reset by sonde__ft_reset before anything else looks at it. */
typedef struct sonde__ft_frame {
    sonde__scope sc;           /* tb NULL: no section */
    sonde__ft_fn *fn;
    uint64_t t0;               /* ticks at the call (probe, hot, a section under a hot call) */
    uint64_t inner;            /* ticks of the calls accounted directly inside it */
    uint64_t covered;          /* of inner, the ticks inside sections */
    int how;                   /* SONDE__FF_* */
    int under_hot;             /* its nearest accounting caller is a counted call */
    int open;                  /* 0: not in its thread's open counts; 1: its function's
                                  outermost open call on the thread; 2: nested in another */
} sonde__ft_frame;

/* A thread's count of open frames by function (sonde__ft_fn.idx); grown as functions come. */
typedef struct sonde__ft_opens {
    uint32_t *n;
    uint32_t cap;
} sonde__ft_opens;

/* The thresholds, from the profiler's configuration when tracing starts. hot_calls 0: no
 * function is probed (every one recorded). */
typedef struct sonde__ft_limits {
    uint64_t hot_calls, hot_ticks;
} sonde__ft_limits;

SONDE__FT_INLINE uint64_t sonde__ft_load(_Atomic uint64_t *x)
{
    return atomic_load_explicit(x, memory_order_relaxed);
}

/* x += v; the new value. */
SONDE__FT_INLINE uint64_t sonde__ft_add(_Atomic uint64_t *x, uint64_t v, int mt)
{
    if (mt)
        return atomic_fetch_add_explicit(x, v, memory_order_relaxed) + v;
    uint64_t n = atomic_load_explicit(x, memory_order_relaxed) + v;
    atomic_store_explicit(x, n, memory_order_relaxed);
    return n;
}

/* The profiler's clock, inline: rdtsc where the profiler's timestamps are TSC ticks (use_tsc,
 * its sonde__hot's), else CLOCK_MONOTONIC; the clock sonde__ticks reads, without the call. */
SONDE__FT_INLINE uint64_t sonde__ft_now(int use_tsc)
{
    sonde__hot h = {.use_tsc = use_tsc};
    return sonde__now(&h);
}

/* A new function's mode; idx is its dense index among the tracer's functions. */
SONDE__FT_INLINE void sonde__ft_init(sonde__ft_fn *fn, const sonde__ft_limits *lim, uint32_t idx)
{
    fn->idx = idx;
    atomic_store_explicit(&fn->mode, lim->hot_calls ? SONDE__FT_PROBE : SONDE__FT_RECORD,
                          memory_order_relaxed);
}

/* Room in o for idx: 0, or -1 when out of memory (o unchanged). The new slots are 0. */
static __attribute__((noinline, unused, no_instrument_function)) int
sonde__ft_opens_grow(sonde__ft_opens *o, uint32_t idx)
{
    uint32_t cap = o->cap ? o->cap : 64;
    while (cap <= idx)
        cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
    if (cap <= idx)
        return -1;
    uint32_t *n = sonde__realloc(o->n, (size_t)cap * sizeof *n);
    if (!n)
        return -1;
    for (uint32_t i = o->cap; i < cap; i++)
        n[i] = 0;
    o->n = n;
    o->cap = cap;
    return 0;
}

/* Frees o's counts (the thread's state going away). */
SONDE__FT_INLINE void sonde__ft_opens_free(sonde__ft_opens *o)
{
    sonde__free(o->n);
    o->n = NULL;
    o->cap = 0;
}

/* Makes f a frame that accounts nothing (yet), called from up (NULL: none traced). */
SONDE__FT_INLINE void sonde__ft_reset(sonde__ft_frame *f, const sonde__ft_frame *up)
{
    f->sc.tb = NULL;
    f->how = SONDE__FF_NONE;
    f->inner = f->covered = 0;
    f->open = 0;
    f->under_hot = up && (up->how == SONDE__FF_HOT || (up->how == SONDE__FF_NONE && up->under_hot));
}

/* Opens frame f, reset by sonde__ft_reset, for a call of fn (whose section is site) into p, on
 * the thread whose open counts are o. */
SONDE__FT_INLINE void sonde__ft_enter(sonde__ft_frame *f, sonde__ft_fn *fn, sonde_profiler *p,
                                      sonde_site *site, sonde__ft_opens *o)
{
    const sonde__hot *h = (const sonde__hot *)(const void *)p;
    f->sc.use_tsc = h->use_tsc;
    f->fn = fn;
    int mode = atomic_load_explicit(&fn->mode, memory_order_relaxed);
    if (mode == SONDE__FT_SKIP)
        return;
    if (mode == SONDE__FT_HOT) { /* counted and summed, while the profiler records */
        if (!__atomic_load_n(&h->recording, __ATOMIC_RELAXED))
            return;
        f->how = SONDE__FF_HOT;
    } else {
        f->sc = sonde__scope_open(p, site);
        if (!f->sc.tb)
            return; /* not recording: neither a section nor a probe */
        f->how = mode == SONDE__FT_PROBE ? SONDE__FF_PROBE : SONDE__FF_RECORD;
    }
    if (fn->idx < o->cap || sonde__ft_opens_grow(o, fn->idx) == 0)
        f->open = o->n[fn->idx]++ ? 2 : 1;
    if (f->how != SONDE__FF_RECORD || f->under_hot)
        f->t0 = sonde__ft_now(f->sc.use_tsc);
}

/* Adds a call's time t, of which s inside sections, to the frame it was called from. */
SONDE__FT_INLINE void sonde__ft_pass_up(sonde__ft_frame *up, uint64_t t, uint64_t s)
{
    if (up) {
        up->inner += t;
        up->covered += s;
    }
}

/* Closes frame f, the innermost, on the thread whose open counts are o; up is the frame it was
 * called from (NULL: none traced). A probe call's end may make its function hot
 * (hot_functions counts those). */
SONDE__FT_INLINE void sonde__ft_exit(sonde__ft_frame *f, sonde__ft_frame *up,
                                     const sonde__ft_limits *lim, _Atomic uint64_t *hot_functions,
                                     int mt, sonde__ft_opens *o)
{
    sonde__ft_fn *fn = f->fn;
    uint64_t hidden;
    switch (f->how) {
    case SONDE__FF_RECORD:
        if (f->under_hot) {
            uint64_t dt = sonde__ft_now(f->sc.use_tsc) - f->t0;
            sonde__ft_pass_up(up, dt, dt);
        }
        sonde__scope_close(&f->sc);
        hidden = f->inner - f->covered;
        break;
    case SONDE__FF_PROBE: {
        uint64_t dt = sonde__ft_now(f->sc.use_tsc) - f->t0;
        sonde__scope_close(&f->sc);
        sonde__ft_pass_up(up, dt, dt);
        hidden = f->inner - f->covered;
        if (dt < lim->hot_ticks)
            sonde__ft_add(&fn->probe_quick, 1, mt);
        if (sonde__ft_add(&fn->probe_n, 1, mt) == lim->hot_calls) { /* the deciding call */
            int hot = 2 * sonde__ft_load(&fn->probe_quick) > lim->hot_calls;
            atomic_store_explicit(&fn->mode, hot ? SONDE__FT_HOT : SONDE__FT_RECORD,
                                  memory_order_relaxed);
            if (hot)
                sonde__ft_add(hot_functions, 1, mt);
        }
        break;
    }
    case SONDE__FF_HOT: {
        uint64_t dt = sonde__ft_now(f->sc.use_tsc) - f->t0;
        sonde__ft_add(&fn->hot_n, 1, mt);
        sonde__ft_add(f->open == 2 ? &fn->hot_nested : &fn->hot_total, dt, mt);
        sonde__ft_pass_up(up, dt, f->covered);
        hidden = f->inner;
        break;
    }
    default: /* no section, nothing counted: what it holds is its caller's */
        sonde__ft_pass_up(up, f->inner, f->covered);
        f->inner = f->covered = 0;
        return;
    }
    if (hidden)
        sonde__ft_add(&fn->hidden_ticks, hidden, mt);
    if (f->open)
        o->n[fn->idx]--;
    f->inner = f->covered = 0;
    f->open = 0;
    f->how = SONDE__FF_NONE;
}

/* Closes frame f without counting it: a frame left without its exit (longjmp), whose time is
 * unknown. o: its thread's open counts. */
SONDE__FT_INLINE void sonde__ft_abandon(sonde__ft_frame *f, sonde__ft_opens *o)
{
    if (f->how == SONDE__FF_RECORD || f->how == SONDE__FF_PROBE)
        sonde__scope_close(&f->sc);
    if (f->open)
        o->n[f->fn->idx]--;
    f->open = 0;
    f->how = SONDE__FF_NONE;
    f->inner = f->covered = 0;
}

/* Writes fn's totals since the last call into p (the "sonde.aggregated" event of section name)
 * and starts them again from zero. 0, or the error of sonde_event_args. */
SONDE__FT_INLINE int sonde__ft_flush(sonde_profiler *p, const char *name, sonde__ft_fn *fn)
{
    if (!sonde__ft_load(&fn->hot_n) && !sonde__ft_load(&fn->hidden_ticks))
        return 0;
    uint64_t n = atomic_exchange(&fn->hot_n, 0), total = atomic_exchange(&fn->hot_total, 0);
    uint64_t sum = total + atomic_exchange(&fn->hot_nested, 0);
    uint64_t hidden = atomic_exchange(&fn->hidden_ticks, 0);
    return sonde__aggregated(p, name, n, total, sum, hidden);
}

#endif
