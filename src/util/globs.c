/* globs.c - comma-separated glob lists for the function tracers' filters. */
#include "globs.h"

#include <fnmatch.h>
#include <string.h>

#include <sonde/sonde.h>

#include "alloc.h"

void sonde__globs_free(sonde_globs *g)
{
    for (size_t i = 0; i < g->n; i++)
        sonde__free(g->v[i]);
    g->n = 0;
}

int sonde__globs_parse(sonde_globs *g, const char *list)
{
    sonde__globs_free(g);
    for (const char *s = list; s && *s;) {
        size_t len = strcspn(s, ",");
        const char *a = s, *b = s + len;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a) {
            char *p = g->n < SONDE_GLOBS_MAX ? sonde__malloc((size_t)(b - a) + 1) : NULL;
            if (!p) {
                int rc = g->n < SONDE_GLOBS_MAX ? SONDE_ENOMEM : SONDE_EINVAL;
                sonde__globs_free(g);
                return rc;
            }
            memcpy(p, a, (size_t)(b - a));
            p[b - a] = 0;
            g->v[g->n++] = p;
        }
        s += len;
        if (*s == ',')
            s++;
    }
    return 0;
}

int sonde__globs_match(const sonde_globs *g, const char *const *s, size_t n)
{
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < n; k++)
            if (s[k] && fnmatch(g->v[i], s[k], 0) == 0)
                return 1;
    return 0;
}
