/* analyze.c - diffusion figures, bottlenecks and the recommendation rules. A rule fires only on
 * measured evidence, which it writes next to its advice; adding a rule is one function and one
 * entry in g_rules (and its test). */
#define _GNU_SOURCE
#include "analyze.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../util/alloc.h"
#include "../util/sort.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void sa_series_of(const double *d, const uint64_t *ids, size_t n, sa_series *o)
{
    memset(o, 0, sizeof *o);
    if (!n)
        return;
    double *s = sonde__malloc(n * sizeof *s);
    if (!s)
        return;
    o->count = n;
    o->first_s = d[0];
    size_t imax = 0;
    for (size_t i = 0; i < n; i++) {
        s[i] = d[i];
        o->total_s += d[i];
        if (d[i] > d[imax])
            imax = i;
    }
    o->max_s = d[imax];
    o->slowest = ids ? ids[imax] : imax;
    o->mean_s = o->total_s / (double)n;
    sonde__sort(s, n, sizeof *s, cmp_d);
    o->p50_s = sm_percentile(s, n, 50);
    o->p99_s = sm_percentile(s, n, 99);
    sonde__free(s);
}

void sa_diffusion_of(const sm_model *m, sa_diffusion *o)
{
    memset(o, 0, sizeof *o);
    o->timestep_first = m->n_dsteps ? m->dsteps[0].timestep : NAN;
    o->timestep_last = m->n_dsteps ? m->dsteps[m->n_dsteps - 1].timestep : NAN;
    o->guidance_min = o->guidance_max = o->block_memory_peak_mb = NAN;
    for (size_t i = 0; i < m->n_dsteps; i++) {
        double g = m->dsteps[i].guidance;
        if (isfinite(g) && !(g >= o->guidance_min)) /* NaN compares false: the first sets it */
            o->guidance_min = g;
        if (isfinite(g) && !(g <= o->guidance_max))
            o->guidance_max = g;
    }
    for (size_t i = 0; i < m->n_blocks; i++)
        if (m->blocks[i].memory_mb > 0 && !(m->blocks[i].memory_mb <= o->block_memory_peak_mb))
            o->block_memory_peak_mb = m->blocks[i].memory_mb;
    size_t n = m->n_dsteps > m->n_blocks ? m->n_dsteps : m->n_blocks;
    double *d = sonde__malloc((n ? n : 1) * sizeof *d);
    uint64_t *id = sonde__malloc((n ? n : 1) * sizeof *id);
    if (d && id) {
        for (size_t i = 0; i < m->n_dsteps; i++) {
            d[i] = m->dsteps[i].seconds;
            id[i] = m->dsteps[i].step;
        }
        sa_series_of(d, id, m->n_dsteps, &o->steps);
        for (size_t i = 0; i < m->n_blocks; i++) {
            d[i] = m->blocks[i].seconds;
            id[i] = m->blocks[i].index;
            o->frames += m->blocks[i].frames;
        }
        sa_series_of(d, id, m->n_blocks, &o->blocks);
    }
    sonde__free(d);
    sonde__free(id);
    o->steps_per_s = o->steps.total_s > 0 ? (double)o->steps.count / o->steps.total_s : 0;
    o->fps = o->blocks.total_s > 0 ? o->frames / o->blocks.total_s : 0;
    o->bps = o->blocks.total_s > 0 ? (double)o->blocks.count / o->blocks.total_s : 0;
    for (size_t i = 0; i < m->n_params; i++)
        o->total_params += m->params[i].count;
}

/* ---- helpers for the rules ---- */

/* Mean and max of every system counter whose name matches "gpu%u <tail>". */
static int gpu_figure(const sm_model *m, const char *tail, double *mean, double *max, size_t *n)
{
    double sum = 0;
    *n = 0;
    *max = -INFINITY;
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        unsigned g;
        char t[32];
        if (!c->system || sscanf(c->name, "gpu%u %31[^\n]", &g, t) != 2 || strcmp(t, tail))
            continue;
        sum += c->sum;
        *n += c->samples;
        if (c->max > *max)
            *max = c->max;
    }
    *mean = *n ? sum / (double)*n : 0;
    return *n > 0;
}

static const sm_counter *system_counter(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_counters; i++)
        if (m->counters[i].system && !strcmp(m->counters[i].name, name))
            return &m->counters[i];
    return NULL;
}

/* The series of the active steps' durations, numbered as the steps are (from 0). Empty when
 * out of memory. */
static void step_series(const sm_model *m, sa_series *o)
{
    double *d = sonde__malloc((m->n_steps ? m->n_steps : 1) * sizeof *d);
    uint64_t *id = sonde__malloc((m->n_steps ? m->n_steps : 1) * sizeof *id);
    size_t n = 0;
    for (size_t i = 0; d && id && i < m->n_steps; i++)
        if (m->steps[i].active) {
            d[n] = sm_step_s(&m->steps[i]);
            id[n++] = m->steps[i].number;
        }
    sa_series_of(d, id, n, o);
    sonde__free(d);
    sonde__free(id);
}

/* ---- the rules ---- */

static int rule_low_gpu_util(const sm_model *m, sa_finding *f)
{
    double mean, max;
    size_t n;
    if (!gpu_figure(m, "util %", &mean, &max, &n) || n < 3 || mean >= 40)
        return 0;
    snprintf(f->title, sizeof f->title, "GPUs are busy only %.0f%% of the time", mean);
    snprintf(f->evidence, sizeof f->evidence,
             "mean GPU utilization %.1f%% over %zu samples (highest %.0f%%)", mean, n, max);
    snprintf(f->advice, sizeof f->advice,
             "The GPUs wait for input or for the CPU: look at the sections where utilization is "
             "low (each section's gpu_util_mean_pct), overlap data loading and host work with "
             "GPU work, raise the batch size, or move preprocessing to the GPU.");
    return 1;
}

static int rule_gpu_memory_high(const sm_model *m, sa_finding *f)
{
    double mean, max;
    size_t n;
    if (!gpu_figure(m, "memory %", &mean, &max, &n) || max <= 90)
        return 0;
    snprintf(f->title, sizeof f->title, "GPU memory reached %.1f%% of the total", max);
    snprintf(f->evidence, sizeof f->evidence, "highest GPU memory use %.1f%% (mean %.1f%%, %zu "
                                               "samples)", max, mean, n);
    snprintf(f->advice, sizeof f->advice,
             "Close to out-of-memory: a longer sequence or a larger batch may fail. Consider "
             "activation checkpointing, smaller blocks, offloading, or a lower-precision dtype.");
    return 1;
}

static int rule_gpu_throttled(const sm_model *m, sa_finding *f)
{
    static const char *bad[] = {"Thermal", "PowerCap", "PowerBrake", "HwSlowdown"};
    for (size_t i = 0; i < m->n_instants; i++) {
        const char *name = sm_str(m, m->instants[i].name);
        if (strncmp(name, "gpu", 3) || !strstr(name, " clocks: "))
            continue;
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
            if (strstr(name, bad[k])) {
                snprintf(f->title, sizeof f->title, "GPU clocks were throttled");
                snprintf(f->evidence, sizeof f->evidence, "NVML reported \"%s\" at %.3f s", name,
                         (double)m->instants[i].t_ns / 1e9);
                snprintf(f->advice, sizeof f->advice,
                         "Throttled clocks slow every kernel: check cooling and the power limit "
                         "(gpuN temperature C, gpuN power W against gpuN power limit W).");
                return 1;
            }
    }
    return 0;
}

/* The first step or block much slower than the median: warm-up or compilation. */
static int rule_first_slow(const sm_model *m, sa_finding *f)
{
    sa_diffusion d;
    sa_diffusion_of(m, &d);
    sa_series s;
    step_series(m, &s);
    const char *what = NULL;
    const sa_series *pick = NULL;
    if (s.count >= 4 && s.first_s > 2 * s.p50_s) {
        what = "step";
        pick = &s;
    } else if (d.steps.count >= 4 && d.steps.first_s > 2 * d.steps.p50_s) {
        what = "diffusion step";
        pick = &d.steps;
    } else if (d.blocks.count >= 4 && d.blocks.first_s > 2 * d.blocks.p50_s) {
        what = "block";
        pick = &d.blocks;
    }
    if (!pick)
        return 0;
    snprintf(f->title, sizeof f->title, "The first %s is %.1fx slower than the median", what,
             pick->first_s / pick->p50_s);
    snprintf(f->evidence, sizeof f->evidence, "first %s %.3f s, median %.3f s over %zu", what,
             pick->first_s, pick->p50_s, pick->count);
    snprintf(f->advice, sizeof f->advice,
             "Warm-up or compilation (kernel autotuning, graph capture, lazy allocation) in the "
             "first %s: profile after it with skip_first or warmup so it does not skew the "
             "statistics, and consider warming up before serving.", what);
    return 1;
}

static int rule_step_variance(const sm_model *m, sa_finding *f)
{
    sa_series s;
    step_series(m, &s);
    if (s.count < 10 || s.p50_s <= 0 || s.p99_s / s.p50_s < 1.5)
        return 0;
    snprintf(f->title, sizeof f->title, "Step times vary: p99 is %.1fx the median",
             s.p99_s / s.p50_s);
    snprintf(f->evidence, sizeof f->evidence, "p50 %.3f s, p99 %.3f s, slowest %.3f s (step %llu) "
                                               "over %zu steps", s.p50_s, s.p99_s, s.max_s,
             (unsigned long long)s.slowest, s.count);
    snprintf(f->advice, sizeof f->advice,
             "Irregular steps point to stalls: garbage collection, data loading, host "
             "synchronisation, recompilation on new shapes, or another process on the machine. "
             "Compare the slow steps' sections in the trace with the fast ones.");
    return 1;
}

static int rule_cpu_bound(const sm_model *m, sa_finding *f)
{
    const sm_counter *cpu = system_counter(m, "cpu %");
    double gmean, gmax;
    size_t gn;
    if (!cpu || cpu->samples < 3 || !gpu_figure(m, "util %", &gmean, &gmax, &gn) || gn < 3)
        return 0;
    double cmean = sm_counter_mean(cpu);
    if (cmean < 90 || gmean >= 30)
        return 0;
    snprintf(f->title, sizeof f->title, "The CPU is saturated while the GPUs idle");
    snprintf(f->evidence, sizeof f->evidence, "mean system CPU %.0f%%, mean GPU utilization %.0f%%",
             cmean, gmean);
    snprintf(f->advice, sizeof f->advice,
             "The host is the bottleneck: move preprocessing to the GPU or to more worker "
             "processes, avoid Python-level loops over tensors, and check for CPU fallbacks of "
             "GPU operations.");
    return 1;
}

/* A section that is (80% or more of) the whole run in one instance (`sonde run`'s "run", a
 * main() wrapper): its share says nothing. */
static int whole_run(const sm_stat *s, double dur)
{
    return s->count == 1 && s->total_s >= 0.8 * dur;
}

/* For each section name, the distinct names among the direct children of its instances (0, 1,
 * or 2 for two or more), in one pass over the instances. NULL when out of memory. */
static int *child_names(const sm_model *m)
{
    size_t n = m->n_stats ? m->n_stats : 1;
    int *kids = sonde__calloc(n, sizeof *kids), *first = sonde__malloc(n * sizeof *first);
    if (!kids || !first) {
        sonde__free(kids);
        sonde__free(first);
        return NULL;
    }
    for (size_t k = 0; k < m->n_stats; k++)
        first[k] = -1;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *c = &m->spans[i];
        if (c->parent < 0)
            continue;
        int p = m->sites[m->spans[c->parent].site].stat, st = m->sites[c->site].stat;
        if (p < 0 || kids[p] == 2)
            continue;
        if (first[p] < 0) {
            first[p] = st;
            kids[p] = 1;
        } else if (st != first[p]) {
            kids[p] = 2;
        }
    }
    sonde__free(first);
    return kids;
}

/* The section whose own code (self time, not its nested sections) holds most of the run: the
 * place to look first, and the way to look inside it. Whole-run wrappers are skipped. */
static int rule_hot_self_time(const sm_model *m, sa_finding *f)
{
    double dur = (double)m->duration_ns / 1e9;
    const sm_stat *hot = NULL;
    for (size_t i = 0; i < m->n_stats && dur > 0; i++) {
        const sm_stat *s = &m->stats[i];
        if (!whole_run(s, dur) && (!hot || s->self_s > hot->self_s))
            hot = s;
    }
    if (!hot || hot->self_s / dur <= 0.5)
        return 0;
    int *names = child_names(m);
    int kids = names ? names[hot - m->stats] : 1;
    sonde__free(names);
    /* Instances on several threads at once add up past the run's wall time: a share over
     * 100% would read as an error, so say what the sum is. */
    if (hot->self_s > dur)
        snprintf(f->title, sizeof f->title, "\"%.60s\" spends %.1fx the run's wall time in its "
                 "own code, summed over the threads running it at once", hot->name,
                 hot->self_s / dur);
    else
        snprintf(f->title, sizeof f->title, "\"%.60s\" spends %.0f%% of the run in its own "
                 "code", hot->name, 100 * hot->self_s / dur);
    if (hot->self_s >= 0.995 * hot->total_s) /* a leaf: its own time is all of its time */
        snprintf(f->evidence, sizeof f->evidence, "self time %.3f s (all of its time: no nested "
                 "section ran inside it), run %.3f s, over %llu instance(s)", hot->self_s, dur,
                 (unsigned long long)hot->count);
    else
        snprintf(f->evidence, sizeof f->evidence, "self time %.3f s of %.3f s (%.0f%% of its "
                 "own %.3f s) over %llu instance(s)", hot->self_s, dur,
                 100 * hot->self_s / hot->total_s, hot->total_s,
                 (unsigned long long)hot->count);
    const sm_profile *pr = &m->profile;
    for (size_t i = 0; i < pr->n_sections; i++) { /* its CPU samples say where the time goes */
        const sm_psection *ps = &pr->sections[i];
        if (strcmp(ps->name, hot->name) || !ps->samples || !ps->n_funcs || !ps->funcs[0].self)
            continue;
        char tops[300] = "";
        size_t k = 0;
        uint32_t top[3];
        uint64_t count[3];
        size_t n_top = sm_psection_top(ps, top, count, 3);
        for (size_t j = 0; j < n_top && k < sizeof tops; j++)
            k += (size_t)snprintf(tops + k, sizeof tops - k, "%s%.0f%% in %.60s", j ? ", " : "",
                                  100.0 * (double)count[j] / (double)ps->samples,
                                  pr->funcs[ps->funcs[top[j]].func].name);
        snprintf(f->advice, sizeof f->advice,
                 "Its CPU samples (%llu) say where: %s. Start with the first; NAME.folded has "
                 "the stacks that lead to it.", (unsigned long long)ps->samples, tops);
        return 1;
    }
    snprintf(f->advice, sizeof f->advice,
             "%s: put sections around its parts (or build with -finstrument-functions and "
             "libsonde-autotrace, or sample its CPU time with sample_hz) to see which part "
             "holds the time before optimising.",
             kids ? "Its nested sections cover little of it" : "It has no nested sections");
    return 1;
}

static int rule_overhead(const sm_model *m, sa_finding *f)
{
    double dur = (double)m->duration_ns / 1e9;
    double own = (double)(m->sampler_cpu_ns + m->writer_cpu_ns + m->profile.cpu_ns) / 1e9;
    if (dur < 1 || own / dur <= 0.02)
        return 0;
    snprintf(f->title, sizeof f->title, "Profiling itself took %.1f%% of a core", 100 * own / dur);
    snprintf(f->evidence, sizeof f->evidence, "sampler %.3f s, writer %.3f s and stack samples "
                                               "%.3f s of CPU in a %.3f s run",
             (double)m->sampler_cpu_ns / 1e9, (double)m->writer_cpu_ns / 1e9,
             (double)m->profile.cpu_ns / 1e9, dur);
    snprintf(f->advice, sizeof f->advice,
             "Sample less often (cpu_interval_s, gpu_interval_s, sample_hz, or the production "
             "preset), or record fewer, coarser sections in hot loops.");
    return 1;
}

static const sa_rule g_rules[] = {
    {"low_gpu_utilization", rule_low_gpu_util}, {"gpu_memory_high", rule_gpu_memory_high},
    {"gpu_throttled", rule_gpu_throttled},       {"first_step_slow", rule_first_slow},
    {"step_time_variance", rule_step_variance},  {"cpu_bound", rule_cpu_bound},
    {"hot_self_time", rule_hot_self_time},       {"profiler_overhead", rule_overhead},
};

const sa_rule *sa_rules(size_t *n)
{
    *n = sizeof g_rules / sizeof g_rules[0];
    return g_rules;
}

static int add_bottleneck(sa_report *r, double share, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int add_bottleneck(sa_report *r, double share, const char *fmt, ...)
{
    sa_bottleneck *n = sonde__realloc(r->bottlenecks, (r->n_bottlenecks + 1) * sizeof *n);
    if (!n)
        return -1;
    r->bottlenecks = n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n[r->n_bottlenecks].what, sizeof n->what, fmt, ap);
    va_end(ap);
    n[r->n_bottlenecks++].share = share;
    return 0;
}

static int analyze_into(const sm_model *m, double threshold, sa_report *r);

/* The top-level instances grouped by session, in one pass: those of session s are
 * order[first[s] .. first[s + 1]), s = n_sessions standing for outside sessions. 0, or -1 when
 * out of memory. */
static int by_session(const sm_model *m, size_t **order, size_t **first)
{
    size_t ns = m->n_sessions + 1, n = 0;
    *first = sonde__calloc(ns + 1, sizeof **first);
    if (!*first)
        return -1;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *x = &m->spans[i];
        if (x->parent < 0) {
            size_t s = x->session >= 0 && (size_t)x->session < m->n_sessions
                           ? (size_t)x->session : m->n_sessions;
            (*first)[s + 1]++;
            n++;
        }
    }
    for (size_t s = 0; s < ns; s++)
        (*first)[s + 1] += (*first)[s];
    *order = sonde__malloc((n ? n : 1) * sizeof **order);
    size_t *fill = sonde__malloc(ns * sizeof *fill);
    if (!*order || !fill) {
        sonde__free(fill);
        return -1;
    }
    memcpy(fill, *first, ns * sizeof *fill);
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *x = &m->spans[i];
        if (x->parent < 0) {
            size_t s = x->session >= 0 && (size_t)x->session < m->n_sessions
                           ? (size_t)x->session : m->n_sessions;
            (*order)[fill[s]++] = i;
        }
    }
    sonde__free(fill);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Time of each section name among the top-level instances order[a..b) (one session's), into t
 * (all zero before); the names met are listed in names (ascending, *n_names of them, marked in
 * met). Returns how many names have some time. */
static int stage_times(const sm_model *m, const size_t *order, size_t a, size_t b, double *t,
                       int *names, size_t *n_names, char *met)
{
    int stages = 0;
    *n_names = 0;
    for (size_t j = a; j < b; j++) {
        const sm_span *x = &m->spans[order[j]];
        int k = m->sites[x->site].stat;
        if (k < 0)
            continue;
        if (!met[k]) {
            met[k] = 1;
            names[(*n_names)++] = k;
        }
        stages += t[k] == 0 && x->end_ns > x->start_ns;
        t[k] += (double)(x->end_ns - x->start_ns) / 1e9;
    }
    sonde__sort(names, *n_names, sizeof *names, cmp_int);
    return stages;
}

int sa_analyze(const sm_model *m, double threshold, sa_report *r)
{
    memset(r, 0, sizeof *r);
    int rc = analyze_into(m, threshold, r);
    if (rc)
        sa_free(r); /* out of memory part way: nothing half-built is left to the caller */
    return rc;
}

static int analyze_into(const sm_model *m, double threshold, sa_report *r)
{
    sa_diffusion_of(m, &r->diffusion);
    size_t nr;
    const sa_rule *rules = sa_rules(&nr);
    r->findings = sonde__calloc(nr, sizeof *r->findings);
    if (!r->findings)
        return -1;
    for (size_t i = 0; i < nr; i++) {
        sa_finding f;
        memset(&f, 0, sizeof f);
        if (rules[i].check(m, &f)) {
            f.rule = rules[i].name;
            r->findings[r->n_findings++] = f;
        }
    }
    /* Stages (top-level sections) over the threshold of their session, else of the run: one
     * pass groups the top-level instances by session, so many sessions cost no more. */
    double dur = (double)m->duration_ns / 1e9;
    size_t nst = m->n_stats ? m->n_stats : 1;
    double *times = sonde__calloc(nst, sizeof *times);
    int *names = sonde__malloc(nst * sizeof *names);
    char *met = sonde__calloc(nst, 1);
    size_t *order = NULL, *first = NULL;
    int *kids = child_names(m);
    int rc = !times || !names || !met || !kids || by_session(m, &order, &first) ? -1 : 0;
    for (size_t s = 0; s <= m->n_sessions && !rc; s++) {
        int32_t sess = s < m->n_sessions ? (int32_t)s : -1;
        double sd = sess >= 0 ? (double)(m->sessions[s].end_ns - m->sessions[s].start_ns) / 1e9
                              : dur;
        if (sd <= 0)
            continue;
        /* a stage's share restates the table unless the session has several stages; a
         * wrapper whose one child holds its time is left to that child */
        size_t n_names = 0;
        int stages = stage_times(m, order, first[s], first[s + 1], times, names, &n_names, met);
        for (size_t q = 0; q < n_names && stages > 1 && !rc; q++) {
            size_t k = (size_t)names[q];
            double t = times[k];
            const sm_stat *st = &m->stats[k];
            if (kids[k] == 1 && st->self_s < 0.1 * st->total_s)
                continue;
            if (t / sd > threshold &&
                add_bottleneck(r, t / sd, "stage %s: %.0f%% of %s%s", st->name, 100 * t / sd,
                               sess >= 0 ? "session " : "the run",
                               sess >= 0 ? sm_str(m, m->sessions[s].name) : ""))
                rc = -1;
        }
        for (size_t q = 0; q < n_names; q++) { /* all zero again for the next session */
            times[names[q]] = 0;
            met[names[q]] = 0;
        }
    }
    sonde__free(times);
    sonde__free(names);
    sonde__free(met);
    sonde__free(order);
    sonde__free(first);
    sonde__free(kids);
    if (rc)
        return -1;
    /* The top sections by self time. */
    size_t top[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
    for (size_t k = 0; k < m->n_stats; k++)
        for (int j = 0; j < 3 && !whole_run(&m->stats[k], dur); j++)
            if (top[j] == SIZE_MAX || m->stats[k].self_s > m->stats[top[j]].self_s) {
                for (int q = 2; q > j; q--)
                    top[q] = top[q - 1];
                top[j] = k;
                break;
            }
    for (int j = 0; j < 3 && dur > 0; j++) /* the top three, each at least 5% of the run */
        if (top[j] != SIZE_MAX && m->stats[top[j]].self_s >= 0.05 * dur &&
            add_bottleneck(r, m->stats[top[j]].self_s / dur, "self time: %s %.3f s",
                           m->stats[top[j]].name, m->stats[top[j]].self_s))
            return -1;
    /* The busiest thread: its time in top-level sections, all threads in one pass. */
    double best = 0;
    size_t bt = 0;
    double *busy = sonde__calloc(m->n_threads ? m->n_threads : 1, sizeof *busy);
    if (!busy)
        return -1;
    for (size_t i = 0; i < m->n_spans; i++)
        if (m->spans[i].parent < 0 && m->spans[i].thread < m->n_threads)
            busy[m->spans[i].thread] += (double)(m->spans[i].end_ns - m->spans[i].start_ns) / 1e9;
    for (size_t t = 0; t < m->n_threads; t++)
        if (busy[t] > best) {
            best = busy[t];
            bt = t;
        }
    sonde__free(busy);
    if (best > 0 && dur > 0 && m->n_threads > 1 &&
        add_bottleneck(r, best / dur, "busiest thread: %s, in sections %.0f%% of the run",
                       m->threads[bt].name, 100 * best / dur))
        return -1;
    return 0;
}

void sa_free(sa_report *r)
{
    sonde__free(r->findings);
    sonde__free(r->bottlenecks);
    memset(r, 0, sizeof *r);
}
