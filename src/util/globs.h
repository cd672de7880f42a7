/* globs.h - a comma-separated list of glob patterns (fnmatch), as the function tracers take
 * them: libsonde-autotrace's autotrace_include/exclude and the Python tracer's
 * trace_python_include/exclude. */
#ifndef SONDE_UTIL_GLOBS_H
#define SONDE_UTIL_GLOBS_H

#include <stddef.h>

#define SONDE_GLOBS_MAX 64

typedef struct sonde_globs {
    char *v[SONDE_GLOBS_MAX];
    size_t n;
} sonde_globs;

/* Replaces g's patterns with those of list ("a*, *b ,c": blanks around each are trimmed, empty
 * ones skipped; NULL: none). 0; SONDE_EINVAL when there are more than SONDE_GLOBS_MAX, or
 * SONDE_ENOMEM; g is then empty. */
int sonde__globs_parse(sonde_globs *g, const char *list);
void sonde__globs_free(sonde_globs *g);
/* Whether a pattern of g matches one of the n strings (NULL ones are skipped). */
int sonde__globs_match(const sonde_globs *g, const char *const *s, size_t n);

#endif
