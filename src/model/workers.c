/* workers.c - the runs of a run's forked children (a trainer's DataLoader workers): each child
 * starts its run over as NAME-pidN (record/fork.c), its file beside the parent's NAME.sonde. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "../util/alloc.h"
#include "../util/sort.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_worker_file(const char *entry, const char *name)
{
    size_t nl = strlen(name), el = strlen(entry);
    return el > nl + 10 && !strncmp(entry, name, nl) && !strncmp(entry + nl, "-pid", 4) &&
           isdigit((unsigned char)entry[nl + 4]) && !strcmp(entry + el - 6, ".sonde");
}

void sm_worker_runs_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sonde__free(v[i]);
    sonde__free(v);
}

int sm_worker_runs(const sm_model *m, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t pl = m->path ? strlen(m->path) : 0;
    if (!m->name || pl < 6 || strcmp(m->path + pl - 6, ".sonde"))
        return 0; /* read from a JSON report, or from memory: no folder to look in */
    char *dir = sonde__strdup(m->path);
    if (!dir)
        return SONDE_ENOMEM;
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = 0;
    DIR *d = opendir(slash ? dir : ".");
    sonde__free(dir);
    if (!d)
        return 0; /* the folder is gone: no worker to name */
    size_t cap = 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!is_worker_file(e->d_name, m->name))
            continue;
        if (SONDE_GROW(*out, *n, cap) != 0)
            rc = SONDE_ENOMEM;
        else if (!((*out)[*n] = sonde__strdup(e->d_name)))
            rc = SONDE_ENOMEM;
        else
            (*n)++;
    }
    closedir(d);
    if (rc) {
        sm_worker_runs_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc;
    }
    sonde__sort(*out, *n, sizeof **out, by_name);
    return 0;
}
