/* strmap.c - open-addressing string map to int. */
#define _GNU_SOURCE
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ (h >> 31);
}

void strmap_init(strmap *m) { memset(m, 0, sizeof *m); }

void strmap_free(strmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        sonde__free(m->keys[i]);
    sonde__free(m->keys);
    sonde__free(m->vals);
    strmap_init(m);
}

static size_t slot(const strmap *m, const char *key)
{
    size_t mask = m->cap - 1, i = (size_t)hash(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

int strmap_get(const strmap *m, const char *key)
{
    if (!m->cap)
        return -1;
    size_t i = slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

static int grow(strmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    char **k = sonde__calloc(ncap, sizeof *k);
    int *v = sonde__calloc(ncap, sizeof *v);
    if (!k || !v) {
        sonde__free(k);
        sonde__free(v);
        return -1;
    }
    strmap old = *m;
    m->keys = k;
    m->vals = v;
    m->cap = ncap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.keys[i]) {
            size_t j = slot(m, old.keys[i]);
            m->keys[j] = old.keys[i];
            m->vals[j] = old.vals[i];
        }
    }
    sonde__free(old.keys);
    sonde__free(old.vals);
    return 0;
}

int strmap_put(strmap *m, const char *key, int val)
{
    if ((m->used + 1) * 2 > m->cap && grow(m) != 0)
        return -1;
    size_t i = slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = sonde__strdup(key);
        if (!m->keys[i])
            return -1;
        m->used++;
    }
    m->vals[i] = val;
    return 0;
}
