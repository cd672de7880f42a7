/* trace_budget.c - which sections a trace keeps under trace_max_events: the longest ones, which
 * are also the outermost (a section is never shorter than one nested in it), so what is kept
 * still nests; the rest are folded into slices by trace.c and counted in the reports. */
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "../util/alloc.h"
#include <sonde/sonde.h>

/* The k-th largest of v[0..n) (1 <= k <= n), by quickselect with a three-way partition; v is
 * reordered. */
static int64_t kth_largest(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n, want = k - 1; /* want: its index in descending order */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (;;) {
        if (hi - lo == 1)
            return v[lo];
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int64_t pivot = v[lo + seed % (hi - lo)];
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) > pivot, [lt,i) == pivot, [gt,hi) < pivot */
        while (i < gt) {
            int64_t x = v[i];
            if (x > pivot) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x < pivot) {
                v[i] = v[--gt];
                v[gt] = x;
            } else {
                i++;
            }
        }
        if (want < lt)
            hi = lt;
        else if (want < gt)
            return pivot;
        else
            lo = gt;
    }
}

int sx_trace_budget(const sm_model *m, int64_t t0, int64_t t1, sx_budget *out)
{
    memset(out, 0, sizeof *out);
    out->min_ns = INT64_MIN;
    const char *k = sm_info(m, "config.trace_max_events");
    char *end = NULL;
    unsigned long long max = k && *k ? strtoull(k, &end, 10) : SX_TRACE_MAX_DEFAULT;
    if (k && *k && (!end || *end))
        max = SX_TRACE_MAX_DEFAULT; /* not a number (a hand-edited file): the default */
    out->max_events = max;
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        if (m->spans[i].start_ns >= t0 && m->spans[i].start_ns < t1)
            n++;
    out->sections = n;
    out->kept = n;
    /* Folded slices can add one per kept section and one per thread: keep half the budget. */
    size_t keep = max ? (size_t)(max / 2) : n;
    if (!max || n <= max || keep == 0) {
        if (max && keep == 0 && n) { /* a budget of 1: nothing fits, everything is folded */
            out->min_ns = INT64_MAX;
            out->kept = 0;
            out->folded = n;
        }
        return 0;
    }
    int64_t *d = sonde__malloc(n * sizeof *d);
    if (!d)
        return SONDE_ENOMEM;
    size_t j = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        if (m->spans[i].start_ns >= t0 && m->spans[i].start_ns < t1)
            d[j++] = m->spans[i].end_ns - m->spans[i].start_ns;
    /* kept: strictly longer than the keep-th longest, so never more than keep, and a section
     * kept has its enclosing sections kept (they are at least as long) */
    out->min_ns = kth_largest(d, n, keep) + 1;
    sonde__free(d);
    size_t kept = 0;
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        if (s->start_ns >= t0 && s->start_ns < t1 && s->end_ns - s->start_ns >= out->min_ns)
            kept++;
    }
    out->kept = kept;
    out->folded = n - kept;
    return 0;
}

int sx_trace_budget_of(const sm_model *m, sx_budget *out)
{
    if (!m->trace_known)
        return sx_trace_budget(m, INT64_MIN, INT64_MAX, out);
    memset(out, 0, sizeof *out);
    out->sections = m->trace_sections;
    out->folded = m->trace_folded;
    out->kept = m->trace_sections - m->trace_folded;
    out->min_ns = m->trace_folded ? m->trace_min_ns : INT64_MIN;
    return 0;
}
