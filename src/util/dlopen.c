/* dlopen.c - loading an optional vendor library (libcudart, libcupti) at run time: the path in
 * an environment variable when set, else the first of the usual names that loads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlopen.h"
#include "env.h"

void *sonde__dlopen_any(const char *env, const char *const *names, size_t n, const char **tried,
                        char *why, size_t cap)
{
    const char *path = env ? sonde__getenv(env) : NULL;
    void *lib = NULL;
    *tried = path && *path ? path : names[0];
    if (path && *path) {
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    } else {
        for (size_t i = 0; i < n && !lib; i++)
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, cap, "cannot load %s (%s)", *tried, e ? e : "?");
    }
    return lib;
}
