/* dlopen.h - optional libraries (NVML, libcudart, CUPTI, the NVTX tool) loaded at run time. */
#ifndef SONDE_UTIL_DLOPEN_H
#define SONDE_UTIL_DLOPEN_H

#include <stddef.h>

/* The library at $env when that is set and not empty, else the first of names[0..n) that loads
 * (RTLD_NOW | RTLD_LOCAL); *tried names the first one tried. NULL with "cannot load NAME
 * (dlerror)" in why when none loads. */
void *sonde__dlopen_any(const char *env, const char *const *names, size_t n, const char **tried,
                        char *why, size_t cap);

#endif
