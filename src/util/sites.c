/* sites.c - the process-wide table of call sites and interned names. Ids are dense (1, 2, ...),
 * entries never move or change once published, so the writer and the signal handler read them
 * without a lock; registration and interning take a mutex once per new site or name. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sites.h"
#include "alloc.h"

#define BLOCK_BITS 10
#define BLOCK_SIZE (1u << BLOCK_BITS)
#define MAX_BLOCKS 4096u /* 4 Mi ids */

static sonde_site_rec *_Atomic g_blocks[MAX_BLOCKS];
static _Atomic uint32_t g_count = 1; /* id 0 is "none" */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* Open-addressing hash from name to id, readable without the lock. Old tables stay allocated
 * (readers may still be probing them); they add at most the size of the current one. */
typedef struct itable {
    uint32_t cap; /* power of two */
    uint32_t used;
    struct itable *older;
    _Atomic uint32_t slot[];
} itable;
static itable *_Atomic g_table;

/* FNV-1a of s; *len gets its length, counted no further than SONDE_MAX_NAME + 1. */
static uint64_t hash_str(const char *s, size_t *len)
{
    uint64_t h = 1469598103934665603ull;
    const char *p = s;
    for (; *p && p - s <= SONDE_MAX_NAME; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    *len = (size_t)(p - s);
    return h ^ (h >> 29);
}

uint32_t sonde__site_count(void) { return atomic_load_explicit(&g_count, memory_order_acquire); }

const sonde_site_rec *sonde__site_get(uint32_t id)
{
    if ((id >> BLOCK_BITS) >= MAX_BLOCKS) /* not an id: a placeholder, or garbage */
        return NULL;
    sonde_site_rec *b = atomic_load_explicit(&g_blocks[id >> BLOCK_BITS], memory_order_acquire);
    return b ? &b[id & (BLOCK_SIZE - 1)] : NULL;
}

static char *dup_or_null(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = sonde__strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

/* Appends a record; caller holds g_lock. Returns the id or 0. */
static uint32_t append_locked(const char *name, const char *file, const char *func, int line)
{
    uint32_t id = atomic_load_explicit(&g_count, memory_order_relaxed);
    uint32_t blk = id >> BLOCK_BITS;
    if (blk >= MAX_BLOCKS)
        return 0;
    sonde_site_rec *b = atomic_load_explicit(&g_blocks[blk], memory_order_relaxed);
    if (!b) {
        b = sonde__calloc(BLOCK_SIZE, sizeof *b);
        if (!b)
            return 0;
        atomic_store_explicit(&g_blocks[blk], b, memory_order_release);
    }
    int oom = 0;
    sonde_site_rec *r = &b[id & (BLOCK_SIZE - 1)];
    r->name = dup_or_null(name ? name : "", &oom);
    r->file = dup_or_null(file, &oom);
    r->func = dup_or_null(func, &oom);
    r->line = line;
    if (oom) {
        sonde__free((void *)r->name);
        sonde__free((void *)r->file);
        sonde__free((void *)r->func);
        memset(r, 0, sizeof *r);
        return 0;
    }
    atomic_store_explicit(&g_count, id + 1, memory_order_release);
    return id;
}

uint32_t sonde__site_register(sonde_site *s)
{
    uint32_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
    if (id)
        return id;
    pthread_mutex_lock(&g_lock);
    id = __atomic_load_n(&s->id, __ATOMIC_RELAXED);
    if (!id) {
        id = append_locked(s->name, s->file, s->func, s->line);
        if (id)
            __atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
    return id;
}

static uint32_t lookup(itable *t, const char *name, uint64_t h)
{
    if (!t)
        return 0;
    uint32_t mask = t->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        uint32_t id = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (!id)
            return 0;
        const sonde_site_rec *r = sonde__site_get(id);
        if (r && strcmp(r->name, name) == 0)
            return id;
    }
}

static void insert_slot(itable *t, uint32_t id, uint64_t h)
{
    uint32_t mask = t->cap - 1;
    uint32_t i = (uint32_t)h & mask;
    while (atomic_load_explicit(&t->slot[i], memory_order_relaxed))
        i = (i + 1) & mask;
    atomic_store_explicit(&t->slot[i], id, memory_order_release);
    t->used++;
}

static itable *table_new(uint32_t cap)
{
    itable *t = sonde__calloc(1, sizeof *t + (size_t)cap * sizeof(_Atomic uint32_t));
    if (t)
        t->cap = cap;
    return t;
}

uint32_t sonde__intern(const char *name)
{
    if (!name)
        return 0;
    size_t len;
    uint64_t h = hash_str(name, &len);
    if (len > SONDE_MAX_NAME) {
        errno = ENAMETOOLONG;
        return 0;
    }
    uint32_t id = lookup(atomic_load_explicit(&g_table, memory_order_acquire), name, h);
    if (id)
        return id;
    pthread_mutex_lock(&g_lock);
    itable *t = atomic_load_explicit(&g_table, memory_order_relaxed);
    id = lookup(t, name, h);
    if (id)
        goto out;
    if (!t || (t->used + 1) * 2 > t->cap) {
        itable *n = table_new(t ? t->cap * 2 : 1024);
        if (!n)
            goto out;
        if (t) {
            for (uint32_t i = 0; i < t->cap; i++) {
                uint32_t old = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
                if (old)
                    insert_slot(n, old, hash_str(sonde__site_get(old)->name, &len));
            }
        }
        n->older = t;
        atomic_store_explicit(&g_table, n, memory_order_release);
        t = n;
    }
    id = append_locked(name, NULL, NULL, 0);
    if (!id)
        errno = ENOMEM;
    if (id)
        insert_slot(t, id, h);
out:
    pthread_mutex_unlock(&g_lock);
    return id;
}

void sonde__sites_lock(int lock)
{
    if (lock)
        pthread_mutex_lock(&g_lock);
    else
        pthread_mutex_unlock(&g_lock);
}
