/* ranks.c - who waits for whom in a distributed job (ranks.h). */
#include "ranks.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/sort.h"
#include "intervals.h"

int sa_is_comm_name(const char *name)
{
    static const char *const words[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                        "broadcast", "barrier",   "nccl",          "gloo",
                                        "c10d::",    "paramcomms"};
    char flat[160];
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < sizeof flat; c++)
        if (*c != '_' && *c != '-' && *c != ' ')
            flat[n++] = (char)tolower((unsigned char)*c);
    flat[n] = 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(flat, words[i]))
            return 1;
    return 0;
}

/* Whether span s carries the metadata key "communication". */
static int marked_comm(const sm_model *m, const sm_span *s)
{
    if (s->x < 0)
        return 0;
    for (int32_t j = m->span_x[s->x].meta; j >= 0; j = m->meta[j].next)
        if (!strcmp(m->sites[m->meta[j].key].name, "communication"))
            return 1;
    return 0;
}

/* Rank m's communication, as disjoint sorted intervals. 0, or -1 out of memory. */
static int comm_of(const sm_model *m, ivs *out)
{
    char *is = sonde__calloc(m->n_sites + 1, 1); /* 1: a comm name, 2: not, 0: not yet told */
    if (!is)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < m->n_spans && !rc; i++) {
        const sm_span *s = &m->spans[i];
        if (!is[s->site])
            is[s->site] = sa_is_comm_name(m->sites[s->site].name) ? 1 : 2;
        if (is[s->site] == 1 || marked_comm(m, s))
            rc = sa_iv_add(out, s->start_ns, s->end_ns);
    }
    sonde__free(is);
    for (size_t i = 0; i < m->n_ops && !rc; i++)
        if (sa_is_comm_name(m->op_names[m->ops[i].name]))
            rc = sa_iv_add(out, m->ops[i].start_ns, m->ops[i].end_ns);
    for (size_t i = 0; i < m->n_gpu && !rc; i++)
        if (m->gpu[i].kind == SM_GPU_KERNEL && m->gpu[i].name && sa_is_comm_name(m->gpu[i].name))
            rc = sa_iv_add(out, m->gpu[i].start_ns, m->gpu[i].end_ns);
    sa_iv_union(out);
    return rc;
}

typedef struct numbered {
    uint64_t number;
    size_t index;
} numbered;

static int cmp_numbered(const void *x, const void *y)
{
    const numbered *a = x, *b = y;
    if (a->number != b->number)
        return a->number < b->number ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Rank m's steps by number (the first of a number kept), into *out (n of them), and the thread
 * that marks them. 0, or -1 out of memory. */
static int steps_of(const sm_model *m, numbered **out, size_t *n, uint32_t *thread)
{
    *n = 0;
    *thread = m->n_steps ? m->steps[0].thread : UINT32_MAX;
    *out = sonde__malloc((m->n_steps + 1) * sizeof **out);
    if (!*out)
        return -1;
    for (size_t i = 0; i < m->n_steps; i++) {
        (*out)[i] = (numbered){m->steps[i].number, i};
        if (m->steps[i].thread != *thread)
            *thread = UINT32_MAX;
    }
    sonde__sort(*out, m->n_steps, sizeof **out, cmp_numbered);
    for (size_t i = 0; i < m->n_steps; i++)
        if (!*n || (*out)[*n - 1].number != (*out)[i].number)
            (*out)[(*n)++] = (*out)[i];
    return 0;
}

void sa_ranks_free(sa_ranks *r)
{
    if (r->wait_iv)
        for (size_t i = 0; i < r->n_ranks; i++)
            sonde__free(r->wait_iv[i]);
    sonde__free(r->wait_iv);
    sonde__free(r->n_wait_iv);
    sonde__free(r->rank);
    sonde__free(r->step_thread);
    memset(r, 0, sizeof *r);
}

/* The first wait_ns of rank i's communication in [a, b) added to its wait intervals. */
static int take_wait(const ivs *comm, int64_t a, int64_t b, int64_t wait_ns, ivs *out)
{
    for (size_t k = sa_iv_first(comm->v, comm->n, a); k < comm->n && wait_ns > 0; k++) {
        int64_t lo = comm->v[2 * k] > a ? comm->v[2 * k] : a;
        int64_t hi = comm->v[2 * k + 1] < b ? comm->v[2 * k + 1] : b;
        if (lo >= b)
            break;
        if (hi - lo > wait_ns)
            hi = lo + wait_ns;
        if (hi > lo) {
            if (sa_iv_add(out, lo, hi))
                return -1;
            wait_ns -= hi - lo;
        }
    }
    return 0;
}

/* Step by step over the steps every rank has; the wait intervals into w. */
static int compare_steps(const sm_model *const *m, size_t n, numbered **st, const size_t *n_st,
                         const ivs *comm, ivs *w, sa_ranks *out)
{
    size_t *at = sonde__calloc(n, sizeof *at);
    double *d = sonde__malloc(n * sizeof *d), *c = sonde__malloc(n * sizeof *c);
    double *sorted = sonde__malloc(n * sizeof *sorted);
    double *pair = n <= 4096 ? sonde__calloc(n * n, sizeof *pair) : NULL; /* [waiter][cause] */
    int rc = at && d && c && sorted && (pair || n > 4096) ? 0 : -1;
    for (size_t k = 0; !rc && k < n_st[0]; k++) {
        uint64_t number = st[0][k].number;
        int everywhere = 1;
        for (size_t i = 1; i < n && everywhere; i++) {
            while (at[i] < n_st[i] && st[i][at[i]].number < number)
                at[i]++;
            everywhere = at[i] < n_st[i] && st[i][at[i]].number == number;
        }
        if (!everywhere)
            continue;
        at[0] = k;
        size_t least = 0;
        for (size_t i = 0; i < n; i++) {
            const sm_step *s = &m[i]->steps[st[i][at[i]].index];
            d[i] = (double)(s->t_ns - s->start_ns);
            c[i] = (double)sa_iv_overlap(comm[i].v, comm[i].n, s->start_ns, s->t_ns);
            sorted[i] = d[i];
            if (c[i] < c[least])
                least = i;
            out->rank[i].step_s += d[i] / 1e9;
            out->rank[i].comm_s += c[i] / 1e9;
            if (c[i] > 0)
                out->has_comm = 1;
        }
        out->n_steps++;
        sonde__sort_doubles(sorted, n);
        double median = sm_percentile(sorted, n, 50);
        double most = 0;
        for (size_t i = 0; i < n; i++)
            most = c[i] - c[least] > most ? c[i] - c[least] : most;
        if (most <= SA_WAIT_MIN_SHARE * median)
            continue; /* balanced: nobody waited for anybody */
        out->rank[least].straggler_steps++;
        for (size_t i = 0; i < n; i++) {
            double wait = c[i] - c[least];
            if (i == least || wait <= 0)
                continue;
            const sm_step *s = &m[i]->steps[st[i][at[i]].index];
            if (take_wait(&comm[i], s->start_ns, s->t_ns, (int64_t)wait, &w[i]))
                rc = -1;
            out->rank[i].wait_s += wait / 1e9;
            out->rank[least].caused_s += wait / 1e9;
            if (pair)
                pair[i * n + least] += wait / 1e9;
        }
    }
    for (size_t i = 0; !rc && pair && i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (pair[i * n + j] > out->rank[i].cause_s) {
                out->rank[i].cause_s = pair[i * n + j];
                out->rank[i].cause = j;
            }
    sonde__free(at);
    sonde__free(d);
    sonde__free(c);
    sonde__free(sorted);
    sonde__free(pair);
    return rc;
}

int sa_ranks_of(const sm_model *const *m, size_t n, sa_ranks *out)
{
    memset(out, 0, sizeof *out);
    out->n_ranks = n;
    out->straggler = SIZE_MAX;
    out->rank = sonde__calloc(n + 1, sizeof *out->rank);
    out->wait_iv = sonde__calloc(n + 1, sizeof *out->wait_iv);
    out->n_wait_iv = sonde__calloc(n + 1, sizeof *out->n_wait_iv);
    out->step_thread = sonde__malloc((n + 1) * sizeof *out->step_thread);
    numbered **st = sonde__calloc(n + 1, sizeof *st);
    size_t *n_st = sonde__calloc(n + 1, sizeof *n_st);
    ivs *comm = sonde__calloc(n + 1, sizeof *comm), *w = sonde__calloc(n + 1, sizeof *w);
    int rc = out->rank && out->wait_iv && out->n_wait_iv && out->step_thread && st && n_st &&
                     comm && w ? 0 : -1;
    for (size_t i = 0; i < n && !rc; i++) {
        out->rank[i].cause = SIZE_MAX;
        rc = steps_of(m[i], &st[i], &n_st[i], &out->step_thread[i]);
        if (!rc)
            rc = comm_of(m[i], &comm[i]);
    }
    if (!rc && n >= 2)
        rc = compare_steps(m, n, st, n_st, comm, w, out);
    for (size_t i = 0; i < n && !rc; i++) {
        sa_iv_union(&w[i]);
        out->wait_iv[i] = w[i].v;
        out->n_wait_iv[i] = w[i].n;
        w[i].v = NULL;
        double caused = out->rank[i].caused_s;
        if (caused > 0 && (out->straggler == SIZE_MAX ||
                           caused > out->rank[out->straggler].caused_s))
            out->straggler = i;
    }
    for (size_t i = 0; i < n; i++) {
        if (st)
            sonde__free(st[i]);
        if (comm)
            sonde__free(comm[i].v);
        if (w)
            sonde__free(w[i].v);
    }
    sonde__free(st);
    sonde__free(n_st);
    sonde__free(comm);
    sonde__free(w);
    if (rc)
        sa_ranks_free(out);
    return rc;
}

double sa_ranks_wait_in(const sa_ranks *r, size_t i, const sm_span *s)
{
    if (i >= r->n_ranks || !r->n_wait_iv[i] || s->thread != r->step_thread[i])
        return 0;
    return (double)sa_iv_overlap(r->wait_iv[i], r->n_wait_iv[i], s->start_ns, s->end_ns) / 1e9;
}
