/* intervals.c - sets of time intervals (intervals.h). */
#include "intervals.h"

#include <stdlib.h>

#include "../util/alloc.h"
#include "../util/sort.h"

int sa_iv_add(ivs *s, int64_t a, int64_t b)
{
    if (b <= a)
        return 0;
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        int64_t *g = sonde__realloc(s->v, nc * 2 * sizeof *g);
        if (!g)
            return -1;
        s->v = g;
        s->cap = nc;
    }
    s->v[2 * s->n] = a;
    s->v[2 * s->n + 1] = b;
    s->n++;
    return 0;
}

static int cmp_iv(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Sorted and merged into disjoint intervals. */
void sa_iv_union(ivs *s)
{
    if (!s->n)
        return;
    sonde__sort(s->v, s->n, 2 * sizeof *s->v, cmp_iv);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->v[2 * i] <= s->v[2 * k + 1]) {
            if (s->v[2 * i + 1] > s->v[2 * k + 1])
                s->v[2 * k + 1] = s->v[2 * i + 1];
        } else {
            k++;
            s->v[2 * k] = s->v[2 * i];
            s->v[2 * k + 1] = s->v[2 * i + 1];
        }
    }
    s->n = k + 1;
}

/* The first of n disjoint sorted intervals that ends after a. */
size_t sa_iv_first(const int64_t *v, size_t n, int64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[2 * mid + 1] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* How much of [a, b) the intervals cover, in ns. */
int64_t sa_iv_overlap(const int64_t *v, size_t n, int64_t a, int64_t b)
{
    int64_t sum = 0;
    for (size_t i = sa_iv_first(v, n, a); i < n && v[2 * i] < b; i++) {
        int64_t lo = v[2 * i] > a ? v[2 * i] : a, hi = v[2 * i + 1] < b ? v[2 * i + 1] : b;
        if (hi > lo)
            sum += hi - lo;
    }
    return sum;
}

int64_t sa_iv_total(const ivs *s)
{
    int64_t t = 0;
    for (size_t i = 0; i < s->n; i++)
        t += s->v[2 * i + 1] - s->v[2 * i];
    return t;
}

int64_t sa_iv_meet(const ivs *a, const ivs *b)
{
    int64_t sum = 0;
    for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
        int64_t lo = a->v[2 * i] > b->v[2 * j] ? a->v[2 * i] : b->v[2 * j];
        int64_t hi = a->v[2 * i + 1] < b->v[2 * j + 1] ? a->v[2 * i + 1] : b->v[2 * j + 1];
        if (hi > lo)
            sum += hi - lo;
        if (a->v[2 * i + 1] < b->v[2 * j + 1])
            i++;
        else
            j++;
    }
    return sum;
}
