/* autotrace.c - libsonde-autotrace: GCC's and clang's -finstrument-functions hooks turned into
 * sonde sections. Each thread keeps a stack of the frames it entered; each function address is
 * resolved once (symbols.c) into a sonde_site, found again through a lock-free open-addressing
 * table, so a traced call costs a table probe and SONDE_SCOPE's own begin and end.
 *
 * Hot functions (uftrace's time filter, done at run time): a function's first autotrace_hot_calls
 * calls are recorded and timed; when most of them took under autotrace_hot_s, its later calls
 * are only counted and summed (atomic adds, no event), and the totals go into the profiler as
 * "sonde.aggregated" events when tracing stops, which the reports fold into the function's
 * statistics (aggregated_calls). A comparator called millions of times then costs a few hundred
 * kilobytes of file, not gigabytes. What a call does once its function is found is the core
 * both tracers share (src/record/ftrace.h), here with atomic figures. Nothing here
 * is instrumented (-finstrument-functions is for the program, and every function below says
 * no_instrument_function as well). */
#define _GNU_SOURCE
#include <sonde/autotrace.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/ftrace.h"
#include "../record/record.h" /* sonde__fail: the message sonde_last_error() returns */
#include "../util/globs.h"
#include "symbols.h"
#include "../util/env.h"

#define NOINSTR __attribute__((no_instrument_function))
#define TABLE_SIZE (1u << 16) /* functions; a program with more traces the first 49,152 */
#define TABLE_MAX (TABLE_SIZE / 4 * 3)

typedef struct func {
    sonde_site site;             /* first member: the table hands out &func->site */
    sonde__ft_fn ft;             /* its mode and figures */
} func;

typedef struct entry {
    _Atomic uintptr_t fn;        /* 0: empty; published last */
    func *fu;                    /* &g_excluded: filtered out */
} entry;

typedef struct frame {
    void *fn;
    sonde__ft_frame ft;          /* how NONE: not traced (excluded, too deep, no profiler) */
} frame;

typedef struct tstate {
    unsigned depth, cap;
    frame *stack;
    sonde__ft_opens opens;       /* its open frames by function */
} tstate;

static entry g_table[TABLE_SIZE];
static unsigned g_used;          /* entries, under g_lock */
static uint32_t g_next_idx;      /* the next traced function's sonde__ft_fn.idx, under g_lock;
                                    never reset, so a frame open across a new attach keeps its
                                    own slot */
static func g_excluded;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static sonde_profiler *_Atomic g_prof;
static _Atomic unsigned g_max_depth = 64;
static _Atomic int g_auto_done; /* the automatic profiler was created, refused or superseded */
static int g_auto_own;           /* g_prof is the automatic one */
static sonde_globs g_inc, g_exc; /* under g_lock */

static _Atomic uint64_t g_functions, g_excluded_n, g_too_deep, g_table_full, g_mismatch;
static _Atomic uint64_t g_hot_functions;
static sonde__ft_limits g_lim;  /* the profiler's thresholds, set by attach */

static __thread tstate *t_state __attribute__((tls_model("initial-exec")));
static __thread int t_busy __attribute__((tls_model("initial-exec")));
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

/* The key's destructor, on the exiting thread itself: a traced call later in its exit starts a
 * fresh state instead of using this one. */
NOINSTR static void free_state(void *v)
{
    tstate *t = v;
    if (t) {
        if (t_state == t)
            t_state = NULL;
        free(t->stack);
        sonde__ft_opens_free(&t->opens);
        free(t);
    }
}

NOINSTR static void make_key(void)
{
    pthread_key_create(&g_key, free_state);
}

/* ---- filters ------------------------------------------------------------------------------ */
NOINSTR static int matches(const sonde_globs *g, const at_symbol *s)
{
    const char *where[] = {s->name, s->source, s->object};
    return sonde__globs_match(g, where, 3);
}

/* ---- the table of functions --------------------------------------------------------------- */
NOINSTR static inline uint32_t slot_of(uintptr_t fn)
{
    return (uint32_t)(((uint64_t)fn * 0x9E3779B97F4A7C15ull) >> 48) & (TABLE_SIZE - 1);
}

/* The function of fn, NULL when not in the table yet. Lock-free. */
NOINSTR static inline func *lookup(uintptr_t fn)
{
    for (uint32_t i = slot_of(fn);; i = (i + 1) & (TABLE_SIZE - 1)) {
        uintptr_t f = atomic_load_explicit(&g_table[i].fn, memory_order_acquire);
        if (f == fn)
            return g_table[i].fu;
        if (!f)
            return NULL;
    }
}

/* Resolves fn, applies the filters and publishes its entry. NULL when the table is full or
 * memory ran out (the call is then not traced). */
NOINSTR static func *add(uintptr_t fn)
{
    pthread_mutex_lock(&g_lock);
    func *site = lookup(fn); /* another thread may have added it */
    if (site || g_used >= TABLE_MAX) {
        if (!site)
            atomic_fetch_add(&g_table_full, 1);
        pthread_mutex_unlock(&g_lock);
        return site;
    }
    at_symbol sym;
    if (at_resolve((void *)fn, &sym) != 0) {
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    int keep = (!g_inc.n || matches(&g_inc, &sym)) && !matches(&g_exc, &sym) &&
               strncmp(sym.name, "sonde_", 6) != 0;
    if (keep) {
        site = calloc(1, sizeof *site);
        if (!site) {
            at_symbol_free(&sym);
            pthread_mutex_unlock(&g_lock);
            return NULL;
        }
        /* the strings live as long as the process, as a SONDE_SCOPE literal does */
        site->site.name = sym.name;
        site->site.func = sym.name;
        site->site.file = sym.source ? sym.source : sym.object ? sym.object : "";
        site->site.line = sym.line;
        sonde__ft_init(&site->ft, &g_lim, g_next_idx++);
        if (sym.source)
            free(sym.object);
        else
            free(sym.source);
    } else {
        site = &g_excluded;
        atomic_fetch_add(&g_excluded_n, 1);
        at_symbol_free(&sym);
    }
    atomic_fetch_add(&g_functions, 1);
    uint32_t i = slot_of(fn);
    while (atomic_load_explicit(&g_table[i].fn, memory_order_relaxed))
        i = (i + 1) & (TABLE_SIZE - 1);
    g_table[i].fu = site;
    atomic_store_explicit(&g_table[i].fn, fn, memory_order_release);
    g_used++;
    pthread_mutex_unlock(&g_lock);
    return site;
}

/* ---- profiler ----------------------------------------------------------------------------- */
/* Writes the hot functions' totals since the last call into p as "sonde.aggregated" events
 * (the reports fold them into each function's statistics) and starts them again from zero. */
NOINSTR static void write_hot(sonde_profiler *p)
{
    static uint64_t told; /* calls too deep already said, under g_lock */
    pthread_mutex_lock(&g_lock);
    uint64_t deep = atomic_load(&g_too_deep);
    if (deep > told) /* said in every report, not only in sonde_autotrace_get_stats */
        sonde__warn(p, "autotrace: %llu calls nested deeper than autotrace_max_depth (%u) were "
                       "not traced; their time is in the traced call above them",
                    (unsigned long long)(deep - told), atomic_load(&g_max_depth));
    told = deep;
    for (uint32_t i = 0; i < TABLE_SIZE; i++) {
        func *u = atomic_load_explicit(&g_table[i].fn, memory_order_acquire) ? g_table[i].fu
                                                                              : NULL;
        if (u && u != &g_excluded)
            sonde__ft_flush(p, u->site.name, &u->ft);
    }
    pthread_mutex_unlock(&g_lock);
}

/* At exit, before libsonde's own handler (registered earlier, so run later) writes the reports
 * of the profiler traced into: the hot functions' totals go in first. */
NOINSTR static void hot_at_exit(void)
{
    sonde_profiler *p = atomic_load(&g_prof);
    if (p)
        write_hot(p);
}

NOINSTR static int attach(sonde_profiler *p, int own)
{
    const sonde_config *c = sonde_config_of(p);
    pthread_mutex_lock(&g_lock);
    int rc = sonde__globs_parse(&g_inc, c->autotrace_include);
    if (!rc)
        rc = sonde__globs_parse(&g_exc, c->autotrace_exclude);
    if (rc) {
        sonde__globs_free(&g_inc);
        sonde__globs_free(&g_exc);
        pthread_mutex_unlock(&g_lock);
        if (rc == SONDE_ENOMEM)
            return sonde__fail(rc, "sonde_autotrace_attach: out of memory");
        return sonde__fail(rc, "sonde_autotrace_attach: more than %d patterns in "
                               "autotrace_include or autotrace_exclude", SONDE_GLOBS_MAX);
    }
    /* Functions seen under other filters are looked at again. */
    for (uint32_t i = 0; i < TABLE_SIZE; i++) {
        atomic_store_explicit(&g_table[i].fn, 0, memory_order_relaxed);
        g_table[i].fu = NULL;
    }
    g_used = 0;
    g_lim.hot_calls = c->autotrace_hot_calls;
    g_lim.hot_ticks = (uint64_t)(c->autotrace_hot_s * sonde__clock()->ticks_per_s);
    atomic_store(&g_max_depth, c->autotrace_max_depth ? c->autotrace_max_depth : 64);
    g_auto_own = own;
    atomic_store(&g_prof, p);
    static int exit_hook;
    if (!exit_hook && atexit(hot_at_exit) == 0)
        exit_hook = 1;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* At the first traced call with no profiler: one from the environment, its reports written at
 * exit by libsonde. SONDE_AUTOTRACE=manual (or off) leaves it to sonde_autotrace_attach. */
NOINSTR static void create_auto(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_auto_done, &expected, 1))
        return;
    const char *mode = sonde__getenv("SONDE_AUTOTRACE");
    if (mode && (!strcmp(mode, "manual") || !strcmp(mode, "off") || !strcmp(mode, "0")))
        return;
    sonde_config cfg = sonde_config_default();
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "sonde autotrace: %s; not tracing\n", sonde_last_error());
        return;
    }
    if (!cfg.enabled)
        return;
    sonde_profiler *p = sonde_create(&cfg);
    if (!p) {
        fprintf(stderr, "sonde autotrace: %s; not tracing\n", sonde_last_error());
        return;
    }
    attach(p, 1);
}

int sonde_autotrace_attach(sonde_profiler *p)
{
    if (!p)
        return sonde__fail(SONDE_EINVAL, "sonde_autotrace_attach: p is NULL");
    sonde_profiler *cur = atomic_load(&g_prof);
    if (cur && g_auto_own && cur != p)
        return sonde__fail(
            SONDE_ESTATE, "sonde_autotrace_attach: the automatic profiler (%s) is already "
                          "tracing: it was created at the first traced call; attach before "
                          "that call (main not instrumented, or from a constructor) or run with "
                          "SONDE_AUTOTRACE=manual", sonde_name(cur));
    atomic_store(&g_auto_done, 1);
    return attach(p, 0);
}

sonde_profiler *sonde_autotrace_detach(void)
{
    atomic_store(&g_auto_done, 1);
    pthread_mutex_lock(&g_lock);
    sonde_profiler *p = atomic_exchange(&g_prof, NULL);
    g_auto_own = 0;
    pthread_mutex_unlock(&g_lock);
    if (p)
        write_hot(p);
    return p;
}

void sonde_autotrace_get_stats(sonde_autotrace_stats *out)
{
    out->functions = atomic_load(&g_functions);
    out->excluded = atomic_load(&g_excluded_n);
    out->too_deep = atomic_load(&g_too_deep);
    out->table_full = atomic_load(&g_table_full);
    out->mismatched_exits = atomic_load(&g_mismatch);
    out->hot_functions = atomic_load(&g_hot_functions);
}

/* ---- the hooks ---------------------------------------------------------------------------- */
NOINSTR static tstate *thread_state(void)
{
    unsigned cap = atomic_load(&g_max_depth); /* at least 256, for a later, deeper limit */
    if (cap < 256)
        cap = 256;
    tstate *t = calloc(1, sizeof *t);
    frame *st = calloc(cap, sizeof *st);
    if (!t || !st) {
        free(t);
        free(st);
        return NULL;
    }
    t->cap = cap;
    t->stack = st;
    pthread_once(&g_key_once, make_key);
    pthread_setspecific(g_key, t);
    return t;
}

NOINSTR void __cyg_profile_func_enter(void *fn, void *call_site)
{
    (void)call_site;
    if (t_busy)
        return;
    tstate *t = t_state;
    if (__builtin_expect(!t, 0)) {
        t_busy = 1;
        if (!atomic_load_explicit(&g_auto_done, memory_order_relaxed))
            create_auto();
        t = t_state = thread_state();
        t_busy = 0;
        if (!t)
            return;
    }
    unsigned d = t->depth++;
    if (d >= t->cap) {
        atomic_fetch_add_explicit(&g_too_deep, 1, memory_order_relaxed);
        return;
    }
    frame *f = &t->stack[d];
    sonde__ft_frame *up = d ? &t->stack[d - 1].ft : NULL;
    f->fn = fn;
    sonde__ft_reset(&f->ft, up);
    if (d >= atomic_load_explicit(&g_max_depth, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g_too_deep, 1, memory_order_relaxed);
        return;
    }
    sonde_profiler *p = atomic_load_explicit(&g_prof, memory_order_acquire);
    if (!p)
        return;
    func *s = lookup((uintptr_t)fn);
    if (__builtin_expect(!s, 0)) {
        t_busy = 1; /* symbol reading must not come back here (a traced callback, malloc) */
        s = add((uintptr_t)fn);
        t_busy = 0;
        if (!s)
            return;
    }
    if (s != &g_excluded)
        sonde__ft_enter(&f->ft, &s->ft, p, &s->site, &t->opens);
}

NOINSTR void __cyg_profile_func_exit(void *fn, void *call_site)
{
    (void)call_site;
    tstate *t = t_state;
    if (t_busy || !t || !t->depth)
        return;
    unsigned d = --t->depth;
    if (d >= t->cap)
        return; /* was too deep: never recorded */
    if (__builtin_expect(t->stack[d].fn != fn, 0)) {
        /* A frame left without its exit (longjmp): close the frames above fn's own. */
        unsigned k = d;
        while (k > 0 && t->stack[k - 1].fn != fn)
            k--;
        if (k == 0) { /* fn was entered before this thread's stack began: ignore the exit */
            t->depth++;
            return;
        }
        atomic_fetch_add_explicit(&g_mismatch, 1, memory_order_relaxed);
        for (unsigned j = d; j >= k; j--)
            sonde__ft_abandon(&t->stack[j].ft, &t->opens); /* their time is unknown */
        d = k - 1;
        t->depth = d;
    }
    sonde__ft_exit(&t->stack[d].ft, d ? &t->stack[d - 1].ft : NULL, &g_lim, &g_hot_functions, 1,
                   &t->opens);
}
