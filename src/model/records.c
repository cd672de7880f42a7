/* records.c - the instants, steps, counters and metrics of a run as the build reads them, and
 * what a report holds of them past report_max_records (docs/formats.md, "Held records"): each
 * counter's samples thinned as they come, instants and steps by a plan drawn from the first
 * pass's counts, the step figures of a thinned run over every step. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

#define GROW SONDE_GROW

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Held records (report_max_records): a run with more instants than that holds every 2^s-th of
 * each name's, the same share of the bound for every name that has more (water-filling, so a
 * rare name keeps all of its own while a flood is thinned); sonde's own ("sonde.sync",
 * "sonde.aggregated": alignment and statistics) are all held. Past the bound in steps, one in a
 * power of two (step_held), each with the end of the step before it (its start), so that the
 * held steps' durations are exact: about 2 in 2^k records for a bound of at least 4 in 2^k.
 * From the first pass's counts. */
/* The site of slot i of the first pass's instant counts (its id renumbered), -1 for an empty
 * slot (whose id, 0 - 1, was once looked up in the renumbering: a fuzzed file's SEGV) or an id
 * the model has no site for. */
static int32_t inst_site(const sm_records_seen *sk, const sm_model *m, size_t i)
{
    if (!sk->inst->id1[i])
        return -1;
    uint32_t id = sk->inst->id1[i] - 1u, site = sk->rank ? sk->rank[id] : id;
    return site < m->n_sites ? (int32_t)site : -1;
}

int sm__records_plan(sm_records *b, sm_model *m, const sm_records_seen *sk)
{
    uint64_t max = b->max;
    if (max && sk->step_ends > max) {
        uint64_t stride = 2;
        while (stride < (1ull << 62) && sk->last_step / stride + 1 > max / 4)
            stride *= 2;
        b->step_mask = stride - 1;
        m->steps_every = stride;
        m->steps_exact = sk->one_thread; /* in time order as they are read */
        m->steps_min_s = INFINITY;
        b->st_begin = -1;
        b->st_cut = sk->dump;
    }
    if (!max || sk->instants <= max)
        return 0;
    uint64_t *n = sonde__malloc(sk->inst->used * sizeof *n);
    if (!n)
        return -1;
    size_t k = 0;
    uint64_t own = 0; /* sonde's own, all held */
    for (size_t i = 0; i < sk->inst->cap; i++) {
        int32_t site = inst_site(sk, m, i);
        if (site < 0)
            continue;
        if (!strncmp(sm_str(m, (uint32_t)site), "sonde.", 6))
            own += sk->inst->n[i];
        else
            n[k++] = sk->inst->n[i];
    }
    sonde__sort(n, k, sizeof *n, cmp_u64);
    uint64_t left = max > own ? max - own : 0, level = UINT64_MAX;
    for (size_t i = 0; i < k; i++) { /* the share each name may hold: the smaller have less */
        uint64_t share = left / (k - i);
        if (n[i] > share) {
            level = share ? share : 1;
            break;
        }
        left -= n[i];
    }
    sonde__free(n);
    for (size_t i = 0; i < sk->inst->cap; i++) {
        int32_t site = inst_site(sk, m, i);
        if (site < 0 || !strncmp(sm_str(m, (uint32_t)site), "sonde.", 6))
            continue;
        unsigned s = 0;
        while (s < 62 && ((sk->inst->n[i] - 1) >> s) + 1 > level)
            s++;
        m->sites[site].instants_every = 1ull << s;
    }
    return 0;
}

/* 1 when step number is held: one in step_mask + 1, chosen by a mix of its number (splitmix64's
 * finaliser), so a slow step every 2^k (a buffer flushed, a checkpoint) is not held always or
 * never, as every (step_mask + 1)-th step would be. The first step is always held (first_s). */
static int step_held(const sm_records *b, uint64_t number)
{
    if (!number)
        return 1;
    uint64_t z = number + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return ((z ^ (z >> 31)) & b->step_mask) == 0;
}

/* Steps marked by one thread, when only some are held: every one's duration as sort_steps
 * takes it, into the exact count, sum and extremes of the active ones. */
static void step_figures(sm_records *b, sm_model *m, int64_t t, int begin, uint64_t number)
{
    if (begin) {
        b->st_begin = t;
        return;
    }
    int64_t start = b->st_begin >= b->st_prev_end ? b->st_begin : b->st_prev_end;
    int cut = b->st_cut && b->st_begin < 0;
    b->st_cut = 0;
    b->st_begin = -1;
    b->st_prev_end = t;
    if (cut || !sm__step_active(m, number))
        return;
    double d = (double)(t - start) / 1e9;
    m->steps_sum_s += d;
    m->steps_n++;
    if (d < m->steps_min_s)
        m->steps_min_s = d;
    if (d > m->steps_max_s)
        m->steps_max_s = d;
}

int sm__add_metric(sm_records *b, sm_model *m, const char *owner, const char *name, double v)
{
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

/* Holds every stride-th of the counter's samples (sm_counter): at the bound, the held ones with
 * an odd place go and the stride doubles, so those left are every 2*stride-th sample read. */
static void thin_counter(sm_counter *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n; i += 2, k++) {
        c->t_ns[k] = c->t_ns[i];
        c->v[k] = c->v[i];
    }
    c->n = k;
    c->stride *= 2;
}

int sm__add_counter(sm_records *b, sm_model *m, const char *name, int64_t t, double v, int system)
{
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
        c->stride = 1;
        c->last_ns = INT64_MIN;
        idx = (int)m->n_counters++;
    }
    sm_counter *c = &m->counters[idx];
    uint64_t nth = c->samples++;
    c->sum += v;
    if (v < c->min)
        c->min = v;
    if (v > c->max)
        c->max = v;
    if (t >= c->last_ns) { /* samples of several threads interleave: the latest in time */
        c->last = v;
        c->last_ns = t;
    }
    if (b->max && c->n >= b->max)
        thin_counter(c);
    if (nth % c->stride)
        return 0;
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
    return 0;
}

int sm__instant_held(sm_records *b, sm_model *m, uint32_t site)
{
    if (site >= m->n_sites)
        return 1;
    sm_site *s = &m->sites[site];
    uint64_t nth = s->instants++, every = s->instants_every; /* a power of two, 0: every one */
    if (every > 1 && (nth & (every - 1))) {
        m->instants_thinned++; /* not held: its payload goes with it */
        return 0;
    }
    return 1;
}

int sm__add_step(sm_records *b, sm_model *m, int64_t t, uint32_t thread, uint64_t arg)
{
    int begin = (arg & SONDE_STEP_BEGIN) != 0; /* paired with its end by sort_steps */
    uint64_t number = begin ? arg & ~SONDE_STEP_BEGIN : arg ? arg - 1 : 0;
    int mark = begin ? 2 : 0;
    if (m->steps_exact)
        step_figures(b, m, t, begin, number);
    if (b->step_mask && !step_held(b, number)) { /* sm__records_plan */
        if (begin)
            return 0;
        if (sm__step_active(m, number))
            m->steps_active_thinned++;
        m->steps_thinned++;
        if (!step_held(b, number + 1))
            return 0;
        mark = 3; /* the end of the step before a held one: where that one starts */
    }
    if (GROW(m->steps, m->n_steps, b->cap_steps))
        return -1;
    m->steps[m->n_steps++] = (sm_step){number, t, thread, 1, begin ? t : 0, mark};
    return 0;
}

int sm__meta_only(const sm_model *m, const sm_span *s)
{
    const sm_span_x *x = sm_span_extra(m, s);
    return s->x >= 0 && x->meta >= 0 && !x->unit && !x->own_dur_units && x->units == 0 &&
           x->units_s == 0 && x->flops == 0;
}

/* The name's entry for key (made when it has fewer than SM_METASUM_KEYS), -1 when none can be. */
static int32_t metasum_key(sm_records *b, sm_model *m, int group, uint32_t name, uint32_t key)
{
    int32_t *at = &b->ms_first[group];
    unsigned n = 0;
    for (; *at >= 0; at = &m->metasum[*at].next, n++)
        if (m->metasum[*at].key == key)
            return *at;
    if (n >= SM_METASUM_KEYS)
        return -1;
    if (GROW(m->metasum, m->n_metasum, b->cap_metasum))
        return -2;
    m->metasum[m->n_metasum] = (sm_metasum){.name = name, .key = key, .next = -1};
    *at = (int32_t)m->n_metasum;
    return (int32_t)m->n_metasum++;
}

int sm__sum_meta(sm_records *b, sm_model *m, sm_span *s, int group, size_t n_groups)
{
    if (!b->ms_first) {
        if (!(b->ms_first = sonde__malloc((n_groups ? n_groups : 1) * sizeof *b->ms_first)))
            return -1;
        for (size_t i = 0; i < n_groups; i++)
            b->ms_first[i] = -1;
        b->ms_groups = n_groups;
    }
    if (group < 0 || (size_t)group >= b->ms_groups)
        return 0;
    s->flags |= SM_SPAN_META_SUMMED;
    /* newest first, as the JSON reads a span's (stat_meta) */
    for (int32_t e = sm_span_extra(m, s)->meta; e >= 0; e = m->meta[e].next) {
        int32_t k = metasum_key(b, m, group, s->site, m->meta[e].key);
        if (k == -2)
            return -1;
        if (k < 0)
            continue;
        sm_metasum *x = &m->metasum[k];
        unsigned v = 0;
        while (v < x->n_values && x->values[v] != m->meta[e].value)
            v++;
        if (v == x->n_values && v < SM_METASUM_VALUES)
            x->values[x->n_values++] = m->meta[e].value;
        else if (v == x->n_values)
            x->more = 1;
    }
    return 0;
}

void sm__fold_meta(sm_model *m, sm_span *s)
{
    int32_t low = INT32_MAX;
    size_t n = 0;
    for (int32_t e = m->span_x[s->x].meta; e >= 0; e = m->meta[e].next, n++)
        low = e < low ? e : low;
    if (n && (size_t)low + n == m->n_meta) /* its own entries, the last made */
        m->n_meta = (size_t)low;
    if ((size_t)s->x + 1 == m->n_span_x)
        m->n_span_x--;
    s->x = -1;
}

void sm__records_free(sm_records *b)
{
    strmap_free(&b->counters);
    strmap_free(&b->metrics);
    sonde__free(b->ms_first);
}
