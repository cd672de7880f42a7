/* budget.c - which sections a trace keeps under trace_max_events: the longest ones, which are
 * also the outermost (a section is never shorter than one nested in it), so what is kept still
 * nests; the rest are folded into slices by the trace writer (export/trace.c) and counted in
 * the reports. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "../util/alloc.h"

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

static int in_range(const sm_span *s, int64_t t0, int64_t t1)
{
    return s->start_ns >= t0 && s->start_ns < t1;
}

int sm_trace_budget(const sm_model *m, int64_t t0, int64_t t1, sm_budget *out)
{
    memset(out, 0, sizeof *out);
    out->min_ns = INT64_MIN;
    const char *k = sm_info(m, "config.trace_max_events");
    char *end = NULL;
    unsigned long long max = k && *k ? strtoull(k, &end, 10) : SM_TRACE_MAX_DEFAULT;
    if (k && *k && *end)
        max = SM_TRACE_MAX_DEFAULT; /* not a number (a hand-edited file): the default */
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        n += in_range(&m->spans[i], t0, t1);
    out->sections = n;
    if (!max || n <= max)
        return 0;
    /* Folded slices can add one per kept section and one per thread: keep half the budget,
     * the sections strictly longer than the keep-th longest (none when the budget is 1). */
    size_t keep = (size_t)(max / 2);
    if (!keep) {
        out->min_ns = INT64_MAX;
    } else {
        int64_t *d = sonde__malloc(n * sizeof *d);
        if (!d)
            return -1;
        size_t j = 0;
        for (size_t i = 0; i < m->n_spans; i++)
            if (in_range(&m->spans[i], t0, t1))
                d[j++] = m->spans[i].end_ns - m->spans[i].start_ns;
        out->min_ns = kth_largest(d, n, keep) + 1;
        sonde__free(d);
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        out->folded += in_range(s, t0, t1) && s->end_ns - s->start_ns < out->min_ns;
    }
    return 0;
}
