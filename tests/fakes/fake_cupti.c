/* fake_cupti.c - the part of CUPTI's activity API that sonde loads, for machines without a GPU:
 * the activity callbacks, enable/disable, flush, record iteration, a clock 5 s ahead of
 * CLOCK_MONOTONIC (so sonde's clock conversion is exercised). Records are built with CUPTI's own
 * structs (cupti.h) when the test program calls fake_cupti_launch / _memcpy / _memset, each with
 * the runtime API record CUPTI would write for the call (its thread and correlation id).
 * Builds: FAKE_FAIL (cuptiActivityEnable fails), FAKE_OLD (reports an older API version). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#define API __attribute__((visibility("default")))
#define MAX_RECORDS 4096

typedef union any_record {
    CUpti_Activity base;
    CUpti_ActivityKernel10 kernel;
    CUpti_ActivityMemcpy6 memcpy;
    CUpti_ActivityMemset4 memset;
    CUpti_ActivityAPI api;
} any_record;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc g_request;
static CUpti_BuffersCallbackCompleteFunc g_complete;
static int g_enabled;
static any_record g_pending[MAX_RECORDS];
static size_t g_n;
static uint32_t g_correlation;
static char g_names[64][128];
static size_t g_n_names;

static uint64_t cupti_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 5000000000ull;
}

static size_t record_size(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return sizeof(CUpti_ActivityAPI);
    }
}

API CUptiResult cuptiGetVersion(uint32_t *v)
{
#ifdef FAKE_OLD
    *v = CUPTI_API_VERSION - 1;
#else
    *v = CUPTI_API_VERSION;
#endif
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == CUPTI_ERROR_NOT_INITIALIZED ? "CUPTI_ERROR_NOT_INITIALIZED" : "CUPTI_ERROR_UNKNOWN";
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                               CUpti_BuffersCallbackCompleteFunc done)
{
    g_request = req;
    g_complete = done;
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    (void)kind;
#ifdef FAKE_FAIL
    return CUPTI_ERROR_NOT_INITIALIZED;
#else
    g_enabled = 1;
    return CUPTI_SUCCESS;
#endif
}

API CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    (void)kind;
    g_enabled = 0;
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    *ts = cupti_now();
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
    (void)ctx;
    (void)stream;
    *n = 0;
    return CUPTI_SUCCESS;
}

/* Records are packed one after another in the buffer, each its struct's size. */
API CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **rec)
{
    uint8_t *next = *rec ? (uint8_t *)*rec + record_size((*rec)->kind) : buffer;
    if (next + sizeof(CUpti_Activity) > buffer + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(void *)next;
    return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&g_lock);
    while (g_n && g_request && g_complete) {
        uint8_t *buf;
        size_t size, max;
        g_request(&buf, &size, &max);
        size_t used = 0, i = 0;
        for (; i < g_n; i++) {
            size_t k = record_size(g_pending[i].base.kind);
            if (used + k > size)
                break;
            memcpy(buf + used, &g_pending[i], k);
            used += k;
        }
        memmove(g_pending, g_pending + i, (g_n - i) * sizeof g_pending[0]);
        g_n -= i;
        g_complete(NULL, 0, buf, size, used);
    }
    pthread_mutex_unlock(&g_lock);
    return CUPTI_SUCCESS;
}

static any_record *add(void)
{
    if (!g_enabled || g_n == MAX_RECORDS)
        return NULL;
    any_record *r = &g_pending[g_n++];
    memset(r, 0, sizeof *r);
    return r;
}

/* The runtime API call on this thread, now; returns its correlation id (0: not recording). */
static uint32_t api_call(CUpti_CallbackId cbid, uint64_t *t)
{
    any_record *r = add();
    if (!r)
        return 0;
    r->api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    r->api.cbid = cbid;
    r->api.start = *t = cupti_now();
    r->api.end = r->api.start + 3000;
    r->api.processId = (uint32_t)getpid();
    r->api.threadId = (uint32_t)(uintptr_t)pthread_self(); /* as CUPTI does: not the tid */
    r->api.correlationId = ++g_correlation;
    return r->api.correlationId;
}

API void fake_cupti_launch(const char *name, int grid, int block, double run_us)
{
    pthread_mutex_lock(&g_lock);
    uint64_t t;
    uint32_t c = api_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &t);
    any_record *r = c ? add() : NULL;
    if (r && g_n_names < 64) {
        snprintf(g_names[g_n_names], sizeof g_names[0], "%s", name);
        r->kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r->kernel.name = g_names[g_n_names++];
        r->kernel.start = t + 10000; /* queued 10 us after the call */
        r->kernel.end = r->kernel.start + (uint64_t)(run_us * 1000);
        r->kernel.deviceId = 0;
        r->kernel.streamId = 7;
        r->kernel.correlationId = c;
        r->kernel.gridX = grid, r->kernel.gridY = 2, r->kernel.gridZ = 1;
        r->kernel.blockX = block, r->kernel.blockY = 1, r->kernel.blockZ = 1;
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_memcpy(uint64_t bytes, int copy_kind)
{
    pthread_mutex_lock(&g_lock);
    uint64_t t;
    uint32_t c = api_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &t);
    any_record *r = c ? add() : NULL;
    if (r) {
        r->memcpy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r->memcpy.copyKind = (uint8_t)copy_kind;
        r->memcpy.bytes = bytes;
        r->memcpy.start = t + 5000;
        r->memcpy.end = r->memcpy.start + bytes / 10; /* 10 GB/s */
        r->memcpy.deviceId = 0;
        r->memcpy.streamId = 9;
        r->memcpy.correlationId = c;
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_memset(uint64_t bytes)
{
    pthread_mutex_lock(&g_lock);
    uint64_t t;
    uint32_t c = api_call(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &t);
    any_record *r = c ? add() : NULL;
    if (r) {
        r->memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r->memset.bytes = bytes;
        r->memset.start = t + 5000;
        r->memset.end = r->memset.start + 2000;
        r->memset.deviceId = 0;
        r->memset.streamId = 7;
        r->memset.correlationId = c;
    }
    pthread_mutex_unlock(&g_lock);
}
