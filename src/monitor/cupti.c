/* cupti.c - CUDA kernel, memcpy and memset activity through CUPTI's activity API, loaded with
 * dlopen (SONDE_CUPTI_LIBRARY, else libcupti.so and its versions) when cuda_activity is on.
 * CUPTI hands over filled buffers on a thread of its own; each record becomes an entry of a GPU
 * record in the .sonde file (docs/formats.md), its timestamps moved onto CLOCK_MONOTONIC. The
 * runtime API records (cudaLaunchKernel, cudaMemcpy...) and the driver's launches (cuLaunchKernel
 * and its kin: cuBLAS's and Triton's kernels) are kept too: their thread and time tell the model
 * which section launched each kernel. CUPTI names their thread by the low 32 bits of its
 * pthread_t (as PyTorch's Kineto reads it), not its kernel thread id: each is turned into the
 * tid of the thread of the profiler it names (the sink's tid_of). Built when CUDA's cupti.h
 * was found (SONDE_HAVE_CUPTI); otherwise cuda_activity reports that it was not built in. CUPTI
 * has one set of activity callbacks per process, so one profiler at a time collects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/dlopen.h"
#include "../util/buf.h"
#include "monitor.h"

size_t sonde__gpu_encode(const sonde_gpu_rec *r, uint8_t *out)
{
    size_t k = 0;
    out[k++] = r->kind;
    k += varint_put(out + k, r->device);
    k += varint_put(out + k, r->stream);
    k += varint_put(out + k, r->correlation);
    k += varint_put(out + k, r->start_ns);
    k += varint_put(out + k, r->end_ns >= r->start_ns ? r->end_ns - r->start_ns : 0);
    switch (r->kind) {
    case SONDE_GPU_KERNEL: {
        size_t n = r->name ? strlen(r->name) : 0;
        if (n > SONDE_GPU_NAME_MAX)
            n = SONDE_GPU_NAME_MAX;
        k += varint_put(out + k, n);
        memcpy(out + k, r->name ? r->name : "", n);
        k += n;
        for (int i = 0; i < 3; i++)
            k += varint_put(out + k, zigzag_enc(r->grid[i]));
        for (int i = 0; i < 3; i++)
            k += varint_put(out + k, zigzag_enc(r->block[i]));
        break;
    }
    case SONDE_GPU_MEMCPY:
        k += varint_put(out + k, r->bytes);
        out[k++] = r->copy_kind;
        break;
    case SONDE_GPU_MEMSET:
        k += varint_put(out + k, r->bytes);
        break;
    case SONDE_GPU_API:
        k += varint_put(out + k, r->tid);
        k += varint_put(out + k, r->cbid);
        break;
    }
    return k;
}

#ifdef SONDE_HAVE_CUPTI
#include <cupti.h>

/* The fields every device activity record has, under the same names. */
#define TAKE_COMMON(x)                                                                          \
    (out->device = (x)->deviceId, out->stream = (x)->streamId,                                  \
     out->correlation = (x)->correlationId, out->start_ns = (x)->start, out->end_ns = (x)->end)

/* A driver API call that launches a kernel (cuBLAS, Triton and other libraries launch through
 * the driver, not the runtime): the one driver record a kernel's section is found by. */
static int driver_launch(CUpti_CallbackId cbid)
{
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        return 1;
    default:
        return 0;
    }
}

int sonde__cupti_convert(const void *record, int64_t offset_ns, sonde_gpu_rec *out)
{
    const CUpti_Activity *a = record;
    memset(out, 0, sizeof *out);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = record;
        out->kind = SONDE_GPU_KERNEL;
        TAKE_COMMON(k);
        out->name = k->name;
        out->grid[0] = k->gridX, out->grid[1] = k->gridY, out->grid[2] = k->gridZ;
        out->block[0] = k->blockX, out->block[1] = k->blockY, out->block[2] = k->blockZ;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = record;
        out->kind = SONDE_GPU_MEMCPY;
        TAKE_COMMON(m);
        out->bytes = m->bytes;
        out->copy_kind = m->copyKind;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = record;
        out->kind = SONDE_GPU_MEMSET;
        TAKE_COMMON(m);
        out->bytes = m->bytes;
        break;
    }
    case CUPTI_ACTIVITY_KIND_DRIVER: /* the launches alone: where a library calls the driver */
        if (!driver_launch(((const CUpti_ActivityAPI *)record)->cbid))
            return 0;
        /* fall through */
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const CUpti_ActivityAPI *r = record;
        out->kind = SONDE_GPU_API;
        out->correlation = r->correlationId;
        out->start_ns = r->start;
        out->end_ns = r->end;
        out->tid = r->threadId;
        out->cbid = r->cbid;
        break;
    }
    default:
        return 0;
    }
    if (out->end_ns < out->start_ns) /* CUPTI writes 0 for an end it could not measure */
        out->end_ns = out->start_ns;
    out->start_ns = (uint64_t)((int64_t)out->start_ns + offset_ns);
    out->end_ns = (uint64_t)((int64_t)out->end_ns + offset_ns);
    return 1;
}

#define BUF_SIZE (1u << 20)

static struct {
    pthread_mutex_t lock;
    void *lib;
    char why[400];
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*timestamp)(uint64_t *);
    CUptiResult (*version)(uint32_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    sonde_gpu_sink owner;        /* the run that collects (owner.ctx NULL: none) */
    int64_t offset_ns;           /* CLOCK_MONOTONIC - CUPTI's clock */
} g_cupti = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const CUpti_ActivityKind g_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

static const char *kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    default: return "?";
    }
}

static const char *result(CUptiResult r)
{
    const char *s = NULL;
    if (g_cupti.result_string && g_cupti.result_string(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

static int load(char *why, size_t cap)
{
    if (g_cupti.lib)
        return 0;
    static const char *const names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12",
                                        "libcupti.so.11.8", "/usr/local/cuda/lib64/libcupti.so",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
    const char *tried;
    void *lib = sonde__dlopen_any("SONDE_CUPTI_LIBRARY", names, sizeof names / sizeof names[0],
                                  &tried, why, cap);
    if (!lib)
        return -1;
#define SYM(field, name)                                                                        \
    do {                                                                                        \
        *(void **)(&g_cupti.field) = dlsym(lib, name);                                          \
        if (!g_cupti.field) {                                                                   \
            snprintf(why, cap, "%s lacks %s", tried, name);                                     \
            dlclose(lib);                                                                       \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)
    SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYM(enable, "cuptiActivityEnable");
    SYM(disable, "cuptiActivityDisable");
    SYM(flush_all, "cuptiActivityFlushAll");
    SYM(next_record, "cuptiActivityGetNextRecord");
    SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    SYM(timestamp, "cuptiGetTimestamp");
    SYM(version, "cuptiGetVersion");
    SYM(result_string, "cuptiGetResultString");
#undef SYM
    uint32_t v = 0;
    if (g_cupti.version(&v) != CUPTI_SUCCESS || v != CUPTI_API_VERSION) {
        /* Activity records change layout between versions: read only the version built for. */
        snprintf(why, cap, "%s is CUPTI API version %u; this libsonde was built against version "
                 "%u (its record layouts differ)", tried, v, (unsigned)CUPTI_API_VERSION);
        dlclose(lib);
        return -1;
    }
    g_cupti.lib = lib;
    return 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* 8-byte aligned, as CUPTI requires */
    *buffer = aligned_alloc(8, BUF_SIZE);
    *size = *buffer ? BUF_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    pthread_mutex_lock(&g_cupti.lock);
    sonde_gpu_sink sink = g_cupti.owner;
    int64_t offset = g_cupti.offset_ns;
    pthread_mutex_unlock(&g_cupti.lock);
    if (sink.ctx)
        sonde__gpu_write(&sink, buffer, valid, offset);
    size_t dropped = 0;
    if (sink.ctx && g_cupti.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        char msg[128];
        snprintf(msg, sizeof msg, "cuda activity: CUPTI dropped %zu records (its buffers were "
                                  "full)", dropped);
        sink.warn(sink.ctx, msg);
    }
    free(buffer);
}

int sonde__gpu_write(const sonde_gpu_sink *s, uint8_t *buffer, size_t valid, int64_t offset_ns)
{
    uint8_t *payload = sonde__malloc(SONDE_GPU_RECORD_BYTES + SONDE_GPU_ENTRY_MAX);
    if (!payload)
        return -1;
    size_t n = 0;
    int rc = 0;
    CUpti_Activity *rec = NULL;
    uint32_t last_pth = 0, last_tid = 0; /* API calls come in runs from one thread */
    while (g_cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
        sonde_gpu_rec r;
        if (!sonde__cupti_convert(rec, offset_ns, &r))
            continue;
        if (r.kind == SONDE_GPU_API) { /* CUPTI names the thread by its pthread_t: its tid */
            if (r.tid != last_pth || !last_tid) {
                last_pth = r.tid;
                last_tid = s->tid_of(s->ctx, r.tid);
            }
            if (last_tid)
                r.tid = last_tid;
        }
        n += sonde__gpu_encode(&r, payload + n);
        if (n >= SONDE_GPU_RECORD_BYTES) {
            rc |= s->write(s->ctx, payload, n);
            n = 0;
        }
    }
    if (n)
        rc |= s->write(s->ctx, payload, n);
    sonde__free(payload);
    return rc;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int sonde__cupti_start(const sonde_gpu_sink *s, char *why, size_t cap)
{
    pthread_mutex_lock(&g_cupti.lock);
    int rc = -1;
    if (g_cupti.owner.ctx) {
        snprintf(why, cap, "another profiler (%s) collects CUDA activity in this process",
                 g_cupti.owner.name ? g_cupti.owner.name : "?");
        goto out;
    }
    if (load(why, cap) != 0)
        goto out;
    CUptiResult r = g_cupti.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        snprintf(why, cap, "cuptiActivityRegisterCallbacks: %s", result(r));
        goto out;
    }
    for (size_t i = 0; i < sizeof g_kinds / sizeof g_kinds[0]; i++) {
        r = g_cupti.enable(g_kinds[i]);
        if (r != CUPTI_SUCCESS) {
            snprintf(why, cap, "cuptiActivityEnable(%s): %s (is there a GPU and its driver?)",
                     kind_name(g_kinds[i]), result(r));
            for (size_t j = 0; j < i; j++)
                g_cupti.disable(g_kinds[j]);
            goto out;
        }
    }
    /* CUPTI's clock against CLOCK_MONOTONIC: read between two monotonic reads, the tightest of
     * a few tries (a preemption between the reads would skew every time by up to its length) */
    int64_t best = INT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t ts = 0;
        int64_t m0 = mono_ns();
        g_cupti.timestamp(&ts);
        int64_t m1 = mono_ns();
        if (m1 - m0 < best) {
            best = m1 - m0;
            g_cupti.offset_ns = m0 + (m1 - m0) / 2 - (int64_t)ts;
        }
    }
    g_cupti.owner = *s;
    rc = 0;
out:
    pthread_mutex_unlock(&g_cupti.lock);
    return rc;
}

void sonde__cupti_stop(const void *ctx)
{
    pthread_mutex_lock(&g_cupti.lock);
    int mine = ctx && g_cupti.owner.ctx == ctx;
    pthread_mutex_unlock(&g_cupti.lock);
    if (!mine)
        return;
    /* Everything completed so far reaches buffer_completed (on this thread or CUPTI's). */
    g_cupti.flush_all(1);
    for (size_t i = 0; i < sizeof g_kinds / sizeof g_kinds[0]; i++)
        g_cupti.disable(g_kinds[i]);
    g_cupti.flush_all(1);
    pthread_mutex_lock(&g_cupti.lock);
    memset(&g_cupti.owner, 0, sizeof g_cupti.owner);
    pthread_mutex_unlock(&g_cupti.lock);
}

void sonde__cupti_fork(int take)
{
    if (take)
        pthread_mutex_lock(&g_cupti.lock);
    else
        pthread_mutex_unlock(&g_cupti.lock);
}

#else /* built without cupti.h */

void sonde__cupti_fork(int take)
{
    (void)take;
}

int sonde__cupti_start(const sonde_gpu_sink *s, char *why, size_t cap)
{
    (void)s;
    snprintf(why, cap, "this libsonde was built without CUDA's cupti.h (rebuild with the CUDA "
                       "toolkit installed, or -DSONDE_CUPTI_INCLUDE=DIR)");
    return -1;
}

void sonde__cupti_stop(const void *ctx)
{
    (void)ctx;
}

#endif

