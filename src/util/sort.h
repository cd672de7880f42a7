/* sort.h - qsort for arrays that may be empty. qsort's array is declared nonnull even for no
 * element, and an empty array here is often a NULL pointer (nothing was allocated for it): the
 * UBSan fuzz runs stop on that. sonde__sort leaves arrays of fewer than two elements alone. */
#ifndef SONDE_UTIL_SORT_H
#define SONDE_UTIL_SORT_H

#include <stddef.h>
#include <stdlib.h>

static inline void sonde__sort(void *base, size_t n, size_t size,
                               int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

static inline int sonde__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n doubles in ascending order (none of them NaN). */
static inline void sonde__sort_doubles(double *v, size_t n)
{
    sonde__sort(v, n, sizeof *v, sonde__cmp_double);
}

#endif
