/* sketch.h - a mergeable quantile sketch of durations (the DDSketch construction: logarithmic
 * buckets, so every quantile it answers is within a relative error alpha of the instance at that
 * rank). The statistics keep one for a name with more than SM_SKETCH_AT instances instead of
 * every duration, and the JSON report carries it, so reports of several ranks can be merged. */
#ifndef SONDE_MODEL_SKETCH_H
#define SONDE_MODEL_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#define SM_SKETCH_ALPHA 0.01   /* relative error of a quantile: 1% */
#define SM_SKETCH_AT 10000u    /* more instances than this: percentiles from the sketch */

/* Durations in ns: bucket i (from lo) holds those in (gamma^(i-1), gamma^i], gamma =
 * (1 + alpha) / (1 - alpha); zero durations are counted apart. About 2,200 buckets cover 1 ns
 * to 292 years; the buckets held are those between the shortest and longest duration added. */
typedef struct sm_sketch {
    uint64_t count, zeros;
    int64_t min_ns, max_ns;
    int32_t lo;                /* index of bins[0] */
    uint32_t n;                /* buckets held */
    uint64_t *bins;
} sm_sketch;

void sm_sketch_init(sm_sketch *s);
/* Adds a duration (negative ones count as zero). 0, or -1 when out of memory (s unchanged). */
int sm_sketch_add(sm_sketch *s, int64_t ns);
/* Adds the bucket index i (as sm_sketch_index gives) count times: a bucket read back from a
 * report. 0, or -1 when out of memory. */
int sm_sketch_add_bucket(sm_sketch *s, int32_t i, uint64_t count);
/* The bucket of a duration > 0: the least i with duration <= gamma^i. */
int32_t sm_sketch_index(int64_t ns);
/* Adds every instance of from into into. 0, or -1 when out of memory. */
int sm_sketch_merge(sm_sketch *into, const sm_sketch *from);
/* The duration (ns) at quantile q in [0, 1]: within alpha of the instance at rank
 * floor(q * (count - 1)) in increasing order, kept between min_ns and max_ns. 0 when empty. */
double sm_sketch_quantile(const sm_sketch *s, double q);
void sm_sketch_free(sm_sketch *s);

#endif
