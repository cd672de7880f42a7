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
 * - A hot call's time is inside the frame that called it, a section whose self time then holds
 *   it, while the hot function's own statistics count it too. Each frame sums the hot calls
 *   made directly inside it (`hidden`, passed up through frames that record nothing) and, when
 *   it is a counted frame, adds them to its function's hidden_ticks: the reports take them out
 *   of that function's self time, so the self times add up to the run.
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

#include "record.h"

#define SONDE__FT_INLINE static inline __attribute__((always_inline, no_instrument_function))

enum { SONDE__FT_RECORD, SONDE__FT_PROBE, SONDE__FT_HOT, SONDE__FT_SKIP }; /* a function's mode */
enum { SONDE__FF_NONE, SONDE__FF_RECORD, SONDE__FF_PROBE, SONDE__FF_HOT }; /* what a frame does */

/* A traced function's figures. */
typedef struct sonde__ft_fn {
    _Atomic int mode;                      /* SONDE__FT_* */
    _Atomic uint64_t probe_n, probe_quick; /* probe calls timed; those under hot_ticks */
    _Atomic uint64_t hot_n, hot_ticks;     /* calls counted and summed since it became hot */
    _Atomic uint64_t hidden_ticks;         /* hot calls' time inside its counted calls */
} sonde__ft_fn;

/* A call being traced. */
typedef struct sonde__ft_frame {
    sonde__scope sc;           /* tb NULL: no section */
    sonde__ft_fn *fn;
    uint64_t t0;               /* ticks at the call (probe, hot) */
    uint64_t hidden;           /* ticks of hot calls directly inside it */
    int how;                   /* SONDE__FF_* */
} sonde__ft_frame;

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

/* A new function's mode. */
SONDE__FT_INLINE void sonde__ft_init(sonde__ft_fn *fn, const sonde__ft_limits *lim)
{
    atomic_store_explicit(&fn->mode, lim->hot_calls ? SONDE__FT_PROBE : SONDE__FT_RECORD,
                          memory_order_relaxed);
}

/* Opens frame f for a call of fn (whose section is site) into p. */
SONDE__FT_INLINE void sonde__ft_enter(sonde__ft_frame *f, sonde__ft_fn *fn, sonde_profiler *p,
                                      sonde_site *site)
{
    const sonde__hot *h = (const sonde__hot *)(const void *)p;
    f->sc.tb = NULL;
    f->sc.use_tsc = h->use_tsc;
    f->how = SONDE__FF_NONE;
    f->fn = fn;
    f->hidden = 0;
    int mode = atomic_load_explicit(&fn->mode, memory_order_relaxed);
    if (mode == SONDE__FT_SKIP)
        return;
    if (mode == SONDE__FT_HOT) { /* counted and summed, while the profiler records */
        if (__atomic_load_n(&h->recording, __ATOMIC_RELAXED)) {
            f->how = SONDE__FF_HOT;
            f->t0 = sonde__ft_now(f->sc.use_tsc);
        }
        return;
    }
    f->sc = sonde__scope_open(p, site);
    if (!f->sc.tb)
        return; /* not recording: neither a section nor a probe */
    if (mode == SONDE__FT_PROBE) {
        f->how = SONDE__FF_PROBE;
        f->t0 = sonde__ft_now(f->sc.use_tsc);
    } else {
        f->how = SONDE__FF_RECORD;
    }
}

/* Closes frame f, the innermost; up is the frame it was called from (NULL: none traced). A
 * probe call's end may make its function hot (hot_functions counts those). */
SONDE__FT_INLINE void sonde__ft_exit(sonde__ft_frame *f, sonde__ft_frame *up,
                                     const sonde__ft_limits *lim, _Atomic uint64_t *hot_functions,
                                     int mt)
{
    sonde__ft_fn *fn = f->fn;
    switch (f->how) {
    case SONDE__FF_RECORD:
        sonde__scope_close(&f->sc);
        break;
    case SONDE__FF_PROBE: {
        uint64_t dt = sonde__ft_now(f->sc.use_tsc) - f->t0;
        sonde__scope_close(&f->sc);
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
        sonde__ft_add(&fn->hot_ticks, dt, mt);
        if (up)
            up->hidden += dt;
        break;
    }
    default: /* no section, nothing counted: what it holds is its caller's */
        if (f->hidden && up)
            up->hidden += f->hidden;
        f->hidden = 0;
        return;
    }
    if (f->hidden)
        sonde__ft_add(&fn->hidden_ticks, f->hidden, mt);
    f->hidden = 0;
    f->how = SONDE__FF_NONE;
}

/* Closes frame f without counting it: a frame left without its exit (longjmp), whose time is
 * unknown. */
SONDE__FT_INLINE void sonde__ft_abandon(sonde__ft_frame *f)
{
    if (f->how == SONDE__FF_RECORD || f->how == SONDE__FF_PROBE)
        sonde__scope_close(&f->sc);
    f->how = SONDE__FF_NONE;
    f->hidden = 0;
}

/* Writes fn's totals since the last call into p (the "sonde.aggregated" event of section name)
 * and starts them again from zero. 0, or the error of sonde_event_args. */
SONDE__FT_INLINE int sonde__ft_flush(sonde_profiler *p, const char *name, sonde__ft_fn *fn)
{
    if (!sonde__ft_load(&fn->hot_n) && !sonde__ft_load(&fn->hidden_ticks))
        return 0;
    uint64_t n = atomic_exchange(&fn->hot_n, 0), ticks = atomic_exchange(&fn->hot_ticks, 0);
    uint64_t hidden = atomic_exchange(&fn->hidden_ticks, 0);
    return sonde__aggregated(p, name, n, ticks, hidden);
}

#endif
