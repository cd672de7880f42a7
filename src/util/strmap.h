/* strmap.h - a string-keyed hash map to int, for grouping by name off the hot path. */
#ifndef SONDE_UTIL_STRMAP_H
#define SONDE_UTIL_STRMAP_H

#include <stddef.h>

typedef struct strmap {
    char **keys;   /* owned copies */
    int *vals;
    size_t cap;    /* power of two, 0 when empty */
    size_t used;
} strmap;

void strmap_init(strmap *m);
void strmap_free(strmap *m);
/* The value for key, or -1. */
int strmap_get(const strmap *m, const char *key);
/* Sets key to val (copying key). 0, or -1 when out of memory. */
int strmap_put(strmap *m, const char *key, int val);

#endif
