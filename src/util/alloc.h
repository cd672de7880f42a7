/* alloc.h - every allocation libsonde makes goes through these, so a host's allocator (set with
 * sonde_set_allocator) sees them all and a test can fail any one of them. */
#ifndef SONDE_UTIL_ALLOC_H
#define SONDE_UTIL_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *sonde__malloc(size_t n);
void *sonde__calloc(size_t count, size_t size); /* NULL on overflow of count * size */
void *sonde__realloc(void *p, size_t n);
void sonde__free(void *p);
char *sonde__strdup(const char *s);
/* Doubles the capacity of a growing array (16 at first) through sonde__realloc; 0, or -1 with
 * *arr and *cap unchanged. SONDE_GROW(arr, n, cap) grows only when the array is full. */
int sonde__grow(void **arr, size_t *cap, size_t elem);
#define SONDE_GROW(arr, n, cap) ((n) < (cap) ? 0 : sonde__grow((void **)&(arr), &(cap), sizeof *(arr)))
/* Room for more elements after the n in use of a growing array: where its capacity is less
 * than n + more, grows it through sonde__realloc to n + more or double, the larger; 0, or -1
 * with *arr and *cap unchanged (out of memory, or n + more elements overflow a size_t).
 * SONDE_RESERVE(arr, n, more, cap) calls it only when the room is not there. */
int sonde__reserve(void **arr, size_t *cap, size_t n, size_t more, size_t elem);
static inline int sonde__has_room(size_t n, size_t more, size_t cap)
{
    return n <= cap && more <= cap - n;
}
#define SONDE_RESERVE(arr, n, more, cap)                                                           \
    (sonde__has_room((n), (more), (cap))                                                           \
         ? 0                                                                                       \
         : sonde__reserve((void **)&(arr), &(cap), (n), (more), sizeof *(arr)))
/* Entry i of a table of *n pointers to objects of size bytes (a thread's state by its index):
 * the table grown where i is past it (doubling from 16, the new entries NULL), the entry made
 * zeroed where it is NULL (*made set to 1 then, else 0; made may be NULL). The entry, or NULL
 * out of memory. SONDE_TABLE_AT(tab, n, i, made) passes the entries' size. */
void *sonde__table_at(void ***tab, size_t *n, size_t i, size_t size, int *made);
#define SONDE_TABLE_AT(tab, n, i, made)                                                            \
    sonde__table_at((void ***)&(tab), &(n), (i), sizeof **(tab), (made))
/* Like asprintf: the length, or -1 (and *out unset) when out of memory. */
int sonde__asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
