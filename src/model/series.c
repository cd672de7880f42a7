/* series.c - counters as series: how many points a report keeps (max_data_points), the unit at
 * the end of a counter's name, and the downsampling that keeps every bucket's extremes. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

size_t sm_max_data_points(const sm_model *m)
{
    sonde_config cfg;
    sm_config(m, &cfg);
    return cfg.max_data_points; /* the key's range: at least 10 */
}

const char *sm_counter_unit(const char *name)
{
    static const char *units[] = {"%", "MiB", "W", "C", "MHz", "J"};
    const char *sp = strrchr(name, ' ');
    if (!sp)
        return "";
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(sp + 1, units[i]))
            return sp + 1;
    return "";
}

size_t sm_downsample(const sm_counter *c, size_t max, size_t *keep)
{
    if (max < 2)
        max = 2;
    if (c->n <= max) {
        for (size_t i = 0; i < c->n; i++)
            keep[i] = i;
        return c->n;
    }
    size_t buckets = max / 2, n = 0;
    for (size_t b = 0; b < buckets; b++) {
        size_t lo = c->n * b / buckets, hi = c->n * (b + 1) / buckets;
        if (lo >= hi)
            continue;
        size_t imin = lo, imax = lo;
        for (size_t i = lo + 1; i < hi; i++) {
            if (c->v[i] < c->v[imin])
                imin = i;
            if (c->v[i] > c->v[imax])
                imax = i;
        }
        keep[n++] = imin < imax ? imin : imax;
        if (imin != imax)
            keep[n++] = imin < imax ? imax : imin;
    }
    return n;
}
