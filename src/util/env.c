/* env.c - the one way libsonde reads its environment: secure_getenv, and one line on stderr the
 * first time a variable is ignored because the process runs with AT_SECURE. */
#define _GNU_SOURCE
#include "env.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

const char *sonde__getenv(const char *name)
{
    const char *v = secure_getenv(name);
    if (v || !getauxval(AT_SECURE) || !getenv(name))
        return v;
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        fprintf(stderr, "sonde: %s ignored: this program runs setuid, setgid or with file "
                        "capabilities, so sonde reads none of its caller's environment (set "
                        "the profiler's configuration in the program)\n", name);
    return NULL;
}
