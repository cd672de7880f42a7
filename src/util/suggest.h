/* suggest.h - the closest valid name to a mistyped one, for "did you mean" messages. */
#ifndef SONDE_UTIL_SUGGEST_H
#define SONDE_UTIL_SUGGEST_H

#include <stddef.h>

/* Levenshtein distance between a and b (case-sensitive). */
size_t edit_distance(const char *a, const char *b);
/* The candidate closest to word when it is close enough to be a likely typo, else NULL. */
const char *suggest(const char *word, const char *const *cands, size_t n);

#endif
