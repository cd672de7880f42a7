/* cudart.c - cudaProfilerStart/Stop from libcudart, loaded with dlopen at run time, so that
 * `nsys profile --capture-range=cudaProfilerApi` captures exactly the active steps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "../util/dlopen.h"

static struct {
    pthread_mutex_t lock;
    int tried;
    int (*start)(void);
    int (*stop)(void);
    char why[300];
} g_cudart = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, NULL, ""};

static void load(void)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so.11.0"};
    const char *tried;
    char why[sizeof g_cudart.why - 40];
    void *lib = sonde__dlopen_any("SONDE_CUDART_LIBRARY", names, sizeof names / sizeof names[0],
                                  &tried, why, sizeof why);
    if (!lib) {
        snprintf(g_cudart.why, sizeof g_cudart.why, "cuda_profiler_range unavailable: %s", why);
        return;
    }
    *(void **)(&g_cudart.start) = dlsym(lib, "cudaProfilerStart");
    *(void **)(&g_cudart.stop) = dlsym(lib, "cudaProfilerStop");
    if (!g_cudart.start || !g_cudart.stop) {
        snprintf(g_cudart.why, sizeof g_cudart.why,
                 "cuda_profiler_range unavailable: %s lacks cudaProfilerStart/Stop", tried);
        g_cudart.start = g_cudart.stop = NULL;
    }
}

void cudart_fork(int take)
{
    if (take)
        pthread_mutex_lock(&g_cudart.lock);
    else
        pthread_mutex_unlock(&g_cudart.lock);
}

int cudart_profiler(int start, char *why, size_t cap)
{
    pthread_mutex_lock(&g_cudart.lock);
    if (!g_cudart.tried) {
        g_cudart.tried = 1;
        load();
    }
    int (*f)(void) = start ? g_cudart.start : g_cudart.stop;
    if (!f)
        snprintf(why, cap, "%s", g_cudart.why);
    pthread_mutex_unlock(&g_cudart.lock);
    if (!f)
        return -1;
    int rc = f();
    if (rc != 0) {
        snprintf(why, cap, "%s returned CUDA error %d", start ? "cudaProfilerStart" : "cudaProfilerStop", rc);
        return -1;
    }
    return 0;
}
