/* rates.c - throughput: the units recorded, per unit in the run's and each session's time (a
 * nested section's units counted once), and the union of intervals they are measured over. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

static int cmp_iv(const void *a, const void *b)
{
    const sm_iv *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s;
}

double sm__union_s(sm_iv *v, size_t n)
{
    if (!n)
        return 0;
    sonde__sort(v, n, sizeof *v, cmp_iv);
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
const char *sm__unit_name(const sm_model *m, uint32_t unit)
{
    return unit ? sm_str(m, unit) : m->unit;
}

/* 1 when a section enclosing s, or s's session, recorded units in unit: s's units are part of
 * that count (a batch's tokens and its decode's), and are not added a second time. */
static int units_counted_above(const sm_model *m, const sm_span *s, const char *unit)
{
    for (int32_t p = s->parent; p >= 0 && (size_t)p < m->n_spans; p = m->spans[p].parent) {
        const sm_span_x *x = sm_span_extra(m, &m->spans[p]);
        if (x->units > 0 && !strcmp(sm__unit_name(m, x->unit), unit))
            return 1;
    }
    if (s->session >= 0 && (size_t)s->session < m->n_sessions) {
        const sm_session *se = &m->sessions[s->session];
        return se->units > 0 && !strcmp(sm__unit_name(m, se->unit), unit);
    }
    return 0;
}

/* Units in one unit and their seconds, over the run (sess < 0: the run's own units too) or one
 * session (its own and its sections'): explicit seconds added, own-duration units counted over
 * the wall time their sessions and sections covered, each instant once. A section inside one
 * that recorded units in the same unit (or inside such a session) is counted there, not again;
 * nested, when not NULL, counts those sections. iv: room for n_spans + n_sessions intervals. */
static void unit_time(const sm_model *m, const char *unit, int32_t sess, sm_spans_sel sel,
                      sm_iv *iv, double *units, double *seconds, unsigned long long *nested)
{
    size_t n = 0;
    *units = *seconds = 0;
    if (sess < 0 && m->run_units > 0 && !strcmp(sm__unit_name(m, m->run_unit), unit)) {
        *units += m->run_units;
        *seconds += m->run_units_s;
    }
    size_t s0 = sess >= 0 ? (size_t)sess : 0, s1 = sess >= 0 ? (size_t)sess + 1 : m->n_sessions;
    for (size_t i = s0; i < s1 && i < m->n_sessions; i++) {
        const sm_session *s = &m->sessions[i];
        if (s->units <= 0 || strcmp(sm__unit_name(m, s->unit), unit))
            continue;
        *units += s->units;
        *seconds += s->units_s;
        if (s->own_dur_units)
            iv[n++] = (sm_iv){s->start_ns, s->end_ns};
    }
    int any = 0; /* a section recorded units: else the walk over every span finds none */
    for (size_t i = 0; i < m->n_span_x && !any; i++)
        any = m->span_x[i].units > 0;
    for (size_t q = 0, nq = any ? sm_sel_n(m, sel) : 0; q < nq; q++) {
        const sm_span *s = &m->spans[sm_sel_at(sel, q)];
        const sm_span_x *x = sm_span_extra(m, s);
        if ((sess >= 0 && s->session != sess) || x->units <= 0 || strcmp(sm__unit_name(m, x->unit), unit))
            continue;
        if (units_counted_above(m, s, unit)) {
            if (nested)
                (*nested)++;
            continue;
        }
        *units += x->units;
        *seconds += x->units_s;
        if (x->own_dur_units)
            iv[n++] = (sm_iv){s->start_ns, s->end_ns};
    }
    *seconds += sm__union_s(iv, n);
}

int sm__build_rates(sm_model *m, unsigned long long *nested)
{
    /* the units recorded, the run's own first */
    if (rate_unit(m, 0) != 0 || (m->run_units > 0 && rate_unit(m, m->run_unit)))
        return -1;
    for (size_t i = 0; i < m->n_sessions; i++)
        if (m->sessions[i].units > 0 && rate_unit(m, m->sessions[i].unit))
            return -1;
    for (size_t i = 0; i < m->n_span_x; i++)
        if (m->span_x[i].units > 0 && rate_unit(m, m->span_x[i].unit))
            return -1;
    sm_iv *iv = sonde__malloc((m->n_spans + m->n_sessions + 1) * sizeof *iv);
    if (!iv)
        return -1;
    for (size_t r = 0; r < m->n_rates; r++)
        unit_time(m, m->rates[r].unit, -1, SM_ALL_SPANS, iv, &m->rates[r].units,
                  &m->rates[r].seconds, nested);
    sonde__free(iv);
    return 0;
}

int sm_session_units(const sm_model *m, size_t sess, sm_spans_sel sel, double *units,
                     double *seconds)
{
    *units = *seconds = 0;
    sm_iv *iv = sonde__malloc((sm_sel_n(m, sel) + 2) * sizeof *iv);
    if (!iv)
        return -1;
    unit_time(m, m->n_rates ? m->rates[0].unit : m->unit, (int32_t)sess, sel, iv, units, seconds,
              NULL);
    sonde__free(iv);
    return 0;
}
