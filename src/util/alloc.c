/* alloc.c - libsonde's allocations, through the C library or the host's sonde_allocator. */
#include "alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/sonde/sonde.h"

static void *libc_malloc(size_t n, void *ctx) { (void)ctx; return malloc(n); }
static void *libc_realloc(void *p, size_t n, void *ctx) { (void)ctx; return realloc(p, n); }
static void libc_free(void *p, void *ctx) { (void)ctx; free(p); }

static sonde_allocator g_alloc = {libc_malloc, libc_realloc, libc_free, NULL};
/* Blocks handed out and not yet given back: the allocator can change only at zero. */
static atomic_long g_live;
static pthread_mutex_t g_set_lock = PTHREAD_MUTEX_INITIALIZER;

int sonde_set_allocator(const sonde_allocator *a)
{
    if (a && (!a->malloc_fn || !a->realloc_fn || !a->free_fn))
        return SONDE_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&g_set_lock);
    if (atomic_load(&g_live) != 0)
        rc = SONDE_ESTATE;
    else if (a)
        g_alloc = *a;
    else
        g_alloc = (sonde_allocator){libc_malloc, libc_realloc, libc_free, NULL};
    pthread_mutex_unlock(&g_set_lock);
    return rc;
}

void *sonde__malloc(size_t n)
{
    void *p = g_alloc.malloc_fn(n ? n : 1, g_alloc.ctx);
    if (p)
        atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    else
        errno = ENOMEM; /* callers that report errno say "out of memory" */
    return p;
}

void *sonde__calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    size_t total = count * size;
    void *p = sonde__malloc(total);
    if (p)
        memset(p, 0, total ? total : 1);
    return p;
}

void *sonde__realloc(void *p, size_t n)
{
    if (!p)
        return sonde__malloc(n);
    void *q = g_alloc.realloc_fn(p, n ? n : 1, g_alloc.ctx);
    if (!q)
        errno = ENOMEM;
    return q;
}

void sonde__free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
    g_alloc.free_fn(p, g_alloc.ctx);
}

char *sonde__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = sonde__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int sonde__asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    char *b = sonde__malloc((size_t)n + 1);
    if (!b)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b, (size_t)n + 1, fmt, ap);
    va_end(ap);
    *out = b;
    return n;
}

int sonde__grow(void **arr, size_t *cap, size_t elem)
{
    size_t nc = *cap ? *cap * 2 : 16;
    void *n = sonde__realloc(*arr, nc * elem);
    if (!n)
        return -1;
    *arr = n;
    *cap = nc;
    return 0;
}

void *sonde__table_at(void ***tab, size_t *n, size_t i, size_t size, int *made)
{
    if (made)
        *made = 0;
    if (i >= *n) {
        size_t nn = *n ? *n : 16;
        while (nn <= i)
            nn *= 2;
        void **g = sonde__realloc(*tab, nn * sizeof *g);
        if (!g)
            return NULL;
        memset(g + *n, 0, (nn - *n) * sizeof *g);
        *tab = g;
        *n = nn;
    }
    if (!(*tab)[i]) {
        if (!((*tab)[i] = sonde__calloc(1, size)))
            return NULL;
        if (made)
            *made = 1;
    }
    return (*tab)[i];
}

int sonde__reserve(void **arr, size_t *cap, size_t n, size_t more, size_t elem)
{
    if (more > SIZE_MAX - n)
        return -1;
    size_t want = n + more;
    if (want <= *cap)
        return 0;
    if (*cap <= SIZE_MAX / 2 && *cap * 2 > want && (!elem || *cap * 2 <= SIZE_MAX / elem))
        want = *cap * 2;
    if (elem && want > SIZE_MAX / elem)
        return -1;
    void *g = sonde__realloc(*arr, want * elem);
    if (!g)
        return -1;
    *arr = g;
    *cap = want;
    return 0;
}
