/* intervals.h - sets of time intervals [start, end) in ns, for the analyses that add up what
 * was running when (ranks.c, gpu.c). */
#ifndef SONDE_ANALYZE_INTERVALS_H
#define SONDE_ANALYZE_INTERVALS_H

#include <stddef.h>
#include <stdint.h>

/* Intervals, grown as they come: v holds n pairs (start, end). */
typedef struct ivs {
    int64_t *v;
    size_t n, cap;
} ivs;

/* [a, b) appended (nothing when empty). 0, or -1 out of memory. */
int sa_iv_add(ivs *s, int64_t a, int64_t b);
/* s sorted and merged into disjoint intervals. */
void sa_iv_union(ivs *s);
/* The first of n disjoint sorted intervals v that ends after a. */
size_t sa_iv_first(const int64_t *v, size_t n, int64_t a);
/* How much of [a, b) n disjoint sorted intervals v cover, in ns. */
int64_t sa_iv_overlap(const int64_t *v, size_t n, int64_t a, int64_t b);
/* Their total length, in ns. */
int64_t sa_iv_total(const ivs *s);
/* How long two sets of disjoint sorted intervals both cover, in ns. */
int64_t sa_iv_meet(const ivs *a, const ivs *b);

#endif
