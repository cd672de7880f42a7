/* demangle.c - see demangle.h. */
#define _GNU_SOURCE
#include "demangle.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

char *sonde__demangle(const char *name, int load)
{
    if (strncmp(name, "_Z", 2) != 0)
        return NULL;
    static demangle_fn fn;
    static int looked, loaded;
    if (!looked) { /* the process's own, when it has one */
        fn = (demangle_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        looked = 1;
    }
    if (!fn && load && !loaded) {
        loaded = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL); /* kept for the process */
        if (h)
            fn = (demangle_fn)(uintptr_t)dlsym(h, "__cxa_demangle");
    }
    if (!fn)
        return NULL;
    int status = 0;
    char *d = fn(name, NULL, NULL, &status);
    if (status != 0 || !d) {
        free(d);
        return NULL;
    }
    char *copy = strdup(d); /* given back with our free, whatever allocated d */
    free(d);
    return copy;
}
