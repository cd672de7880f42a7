/* gpu.c - CUDA activity in the model: GPU records parsed (reader.c), then placed on the run's
 * time line and linked to the sections that launched them: a kernel's correlation id names the
 * runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched it, and that call's thread
 * and start name the innermost section open there and then. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/buf.h"
#include "../util/demangle.h"
#include "../util/strmap.h"
#include "model_build.h"

static int u32(const uint8_t **pp, const uint8_t *end, uint32_t *v)
{
    uint64_t x;
    if (sm__get_var(pp, end, &x) || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

static int i32z(const uint8_t **pp, const uint8_t *end, int32_t *v)
{
    uint64_t x;
    if (sm__get_var(pp, end, &x))
        return -1;
    int64_t d = zigzag_dec(x);
    if (d < INT32_MIN || d > INT32_MAX)
        return -1;
    *v = (int32_t)d;
    return 0;
}

int sm__gpu_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        if (SONDE_GROW(raw->gpu, raw->n_gpu, raw->cap_gpu))
            return -2;
        sm_gpu_raw *g = &raw->gpu[raw->n_gpu];
        memset(g, 0, sizeof *g);
        g->kind = *p++;
        if (u32(&p, end, &g->device) || u32(&p, end, &g->stream) ||
            u32(&p, end, &g->correlation) || sm__get_var(&p, end, &g->start_mono) ||
            sm__get_var(&p, end, &g->dur))
            return -1;
        switch (g->kind) {
        case SONDE_GPU_KERNEL: {
            uint64_t n;
            if (sm__get_var(&p, end, &n) || n > SONDE_GPU_NAME_MAX || n > (uint64_t)(end - p))
                return -1;
            if (!(g->name = sonde__malloc(n + 1)))
                return -2;
            memcpy(g->name, p, n);
            g->name[n] = 0;
            p += n;
            raw->n_gpu++; /* owns the name from here */
            for (int i = 0; i < 3; i++)
                if (i32z(&p, end, &g->grid[i]))
                    return -1;
            for (int i = 0; i < 3; i++)
                if (i32z(&p, end, &g->block[i]))
                    return -1;
            continue;
        }
        case SONDE_GPU_MEMCPY:
            if (sm__get_var(&p, end, &g->bytes) || p >= end)
                return -1;
            g->copy_kind = *p++;
            break;
        case SONDE_GPU_MEMSET:
            if (sm__get_var(&p, end, &g->bytes))
                return -1;
            break;
        case SONDE_GPU_API:
            if (u32(&p, end, &g->tid) || u32(&p, end, &g->cbid))
                return -1;
            break;
        default:
            return -1; /* the entries that follow cannot be found */
        }
        raw->n_gpu++;
    }
    return 0;
}

void sm__gpu_free_raw(sb_raw *raw)
{
    for (size_t i = 0; i < raw->n_gpu; i++)
        sonde__free(raw->gpu[i].name);
    sonde__free(raw->gpu);
    raw->gpu = NULL;
    raw->n_gpu = raw->cap_gpu = 0;
}

typedef struct api_ref {
    uint32_t correlation, tid;
    int64_t t;
} api_ref;

static int cmp_api(const void *a, const void *b)
{
    uint32_t x = ((const api_ref *)a)->correlation, y = ((const api_ref *)b)->correlation;
    return x < y ? -1 : x > y;
}

static int cmp_gpu(const void *a, const void *b)
{
    int64_t x = ((const sm_gpu *)a)->start_ns, y = ((const sm_gpu *)b)->start_ns;
    return x < y ? -1 : x > y;
}

/* start + dur - origin in ns, on the run's clock, held to the int64 range: a damaged or crafted
 * record's times cannot overflow (they come from the file). */
static int64_t sat_ns(uint64_t start, uint64_t origin, uint64_t dur)
{
    uint64_t end = start + dur < start ? UINT64_MAX : start + dur;
    if (end >= origin)
        return end - origin > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(end - origin);
    return origin - end > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(origin - end);
}

/* The items (spans or operators: a uint32 thread, int64 start_ns and end_ns, int32 parent at the
 * given offsets) of each thread are in start order and nest: the last one to start at or before
 * t is the innermost open at t, or else nested in it, so the answer is it or its nearest
 * ancestor still open at t. */
#define FIELD(T, base, size, i, off) (*(const T *)((const char *)(base) + (i) * (size) + (off)))

size_t sm__first_after(const sm_nested *v, const size_t *first, uint32_t th, int64_t t)
{
    size_t lo = first[th], hi = first[th + 1];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (FIELD(int64_t, v->base, v->size, mid, v->start) <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t sm__innermost_at(const sm_nested *v, const size_t *first, uint32_t th, int64_t t)
{
    size_t lo = sm__first_after(v, first, th, t);
    if (lo == first[th])
        return -1;
    int32_t s = (int32_t)(lo - 1);
    while (s >= 0 && FIELD(int64_t, v->base, v->size, (size_t)s, v->end) < t)
        s = FIELD(int32_t, v->base, v->size, (size_t)s, v->parent);
    return s;
}

size_t *sm__thread_firsts(const sm_nested *v, size_t n_threads)
{
    size_t *first = sonde__malloc((n_threads + 1) * sizeof *first);
    if (!first)
        return NULL;
    size_t k = 0;
    for (size_t t = 0; t < n_threads; t++) {
        first[t] = k;
        while (k < v->n && FIELD(uint32_t, v->base, v->size, k, v->thread) == t)
            k++;
    }
    first[n_threads] = v->n;
    return first;
}

/* CUPTI gives a kernel's name mangled (_ZN7cutlass7Kernel2I...E): names[i] made readable
 * (void cutlass::Kernel2<...>(...)), as PyTorch's traces show them, through libstdc++'s
 * demangler, each distinct name once (seen: its index in names). A name that is not a C++ one,
 * or with no demangler at hand, stays as it is. 0, or -1 out of memory. */
static int demangle_names(sb_raw *raw)
{
    strmap seen;
    strmap_init(&seen);
    char **done = NULL; /* demangled names by first appearance; NULL: kept as it is */
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < raw->n_gpu && !rc; i++) {
        sm_gpu_raw *g = &raw->gpu[i];
        if (g->kind != SONDE_GPU_KERNEL || !g->name || strncmp(g->name, "_Z", 2))
            continue;
        int k = strmap_get(&seen, g->name);
        if (k < 0) {
            if (SONDE_GROW(done, n, cap) || strmap_put(&seen, g->name, (int)n)) {
                rc = -1;
                break;
            }
            k = (int)n;
            done[n++] = sonde__demangle(g->name, 1);
        }
        if (!done[k])
            continue;
        char *d = sonde__strdup(done[k]);
        if (!d)
            rc = -1;
        else {
            sonde__free(g->name);
            g->name = d;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(done[i]); /* sonde__demangle's: malloc'd */
    sonde__free(done);
    strmap_free(&seen);
    return rc;
}

int sm__gpu_build(sb_raw *raw, sm_model *m)
{
    if (!raw->n_gpu)
        return 0;
    if (demangle_names(raw))
        return -1;
    size_t n_api = 0, n_dev = 0;
    for (size_t i = 0; i < raw->n_gpu; i++) {
        if (raw->gpu[i].kind == SONDE_GPU_API)
            n_api++;
        else
            n_dev++;
    }
    api_ref *api = sonde__malloc((n_api ? n_api : 1) * sizeof *api);
    sm_nested spans = SM_SPANS(m);
    size_t *first = sm__thread_firsts(&spans, m->n_threads);
    m->gpu = sonde__calloc(n_dev ? n_dev : 1, sizeof *m->gpu);
    if (!api || !first || !m->gpu) {
        sonde__free(api);
        sonde__free(first);
        return -1;
    }
    size_t a = 0;
    for (size_t i = 0; i < raw->n_gpu; i++) {
        sm_gpu_raw *r = &raw->gpu[i];
        int64_t t0 = sat_ns(r->start_mono, m->start_mono_ns, 0);
        if (r->kind == SONDE_GPU_API) {
            api[a].correlation = r->correlation;
            api[a].tid = r->tid;
            api[a].t = t0;
            a++;
            continue;
        }
        sm_gpu *g = &m->gpu[m->n_gpu++];
        g->kind = r->kind;
        g->copy_kind = r->copy_kind;
        g->device = r->device;
        g->stream = r->stream;
        g->correlation = r->correlation;
        g->start_ns = t0;
        g->end_ns = sat_ns(r->start_mono, m->start_mono_ns, r->dur);
        g->name = r->name;
        r->name = NULL;
        memcpy(g->grid, r->grid, sizeof g->grid);
        memcpy(g->block, r->block, sizeof g->block);
        g->bytes = r->bytes;
        g->launch_ns = -1;
        g->launch_thread = -1;
        g->span = -1;
    }
    sonde__sort(api, n_api, sizeof *api, cmp_api);
    for (size_t i = 0; i < m->n_gpu; i++) {
        sm_gpu *g = &m->gpu[i];
        api_ref key = {g->correlation, 0, 0};
        const api_ref *hit = n_api ? bsearch(&key, api, n_api, sizeof *api, cmp_api) : NULL;
        if (!hit)
            continue;
        g->launch_ns = hit->t;
        for (size_t t = 0; t < m->n_threads; t++)
            if (m->threads[t].tid == hit->tid) {
                g->launch_thread = (int32_t)t;
                g->span = sm__innermost_at(&spans, first, (uint32_t)t, hit->t);
                break;
            }
    }
    sonde__sort(m->gpu, m->n_gpu, sizeof *m->gpu, cmp_gpu);
    sonde__free(api);
    sonde__free(first);
    return 0;
}

/* ---- summary for the reports ---------------------------------------------------------------- */
static int cmp_name_total(const void *a, const void *b)
{
    double x = ((const sm_gpu_name *)a)->total_s, y = ((const sm_gpu_name *)b)->total_s;
    return x > y ? -1 : x < y;
}

/* Adds one entry under name into a grouped list; -1 when out of memory. */
static int group_add(strmap *idx, sm_gpu_name **v, size_t *n, const char *name, double s)
{
    int k = strmap_get(idx, name);
    if (k < 0) {
        sm_gpu_name *g = sonde__realloc(*v, (*n + 1) * sizeof *g);
        if (!g)
            return -1;
        *v = g;
        k = (int)*n;
        if (strmap_put(idx, name, k))
            return -1;
        g[k].name = name;
        g[k].count = 0;
        g[k].total_s = g[k].max_s = 0;
        (*n)++;
    }
    sm_gpu_name *e = &(*v)[k];
    e->count++;
    e->total_s += s;
    if (s > e->max_s)
        e->max_s = s;
    return 0;
}

int sm_gpu_summarize(const sm_model *m, sm_gpu_sum *o)
{
    memset(o, 0, sizeof *o);
    strmap kn, sn;
    strmap_init(&kn);
    strmap_init(&sn);
    int rc = 0;
    for (size_t i = 0; i < m->n_gpu && !rc; i++) {
        const sm_gpu *g = &m->gpu[i];
        double s = (double)(g->end_ns - g->start_ns) / 1e9;
        if (g->span >= 0)
            o->linked++;
        if (g->kind == SM_GPU_KERNEL) {
            o->kernels++;
            o->kernel_s += s;
            rc = group_add(&kn, &o->by_kernel, &o->n_by_kernel, g->name ? g->name : "?", s);
            if (!rc && g->span >= 0)
                rc = group_add(&sn, &o->by_section, &o->n_by_section,
                               m->sites[m->spans[g->span].site].name, s);
        } else if (g->kind == SM_GPU_MEMCPY) {
            o->memcpys++;
            o->memcpy_s += s;
            o->memcpy_bytes += g->bytes;
        } else {
            o->memsets++;
            o->memset_s += s;
            o->memset_bytes += g->bytes;
        }
    }
    strmap_free(&kn);
    strmap_free(&sn);
    if (rc) {
        sm_gpu_sum_free(o);
        return -1;
    }
    sonde__sort(o->by_kernel, o->n_by_kernel, sizeof *o->by_kernel, cmp_name_total);
    sonde__sort(o->by_section, o->n_by_section, sizeof *o->by_section, cmp_name_total);
    return 0;
}

void sm_gpu_sum_free(sm_gpu_sum *o)
{
    sonde__free(o->by_kernel);
    sonde__free(o->by_section);
    memset(o, 0, sizeof *o);
}

const char *sm_gpu_copy_kind(unsigned k)
{
    switch (k) {
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 3: return "HtoA";
    case 4: return "AtoH";
    case 5: return "AtoA";
    case 6: return "AtoD";
    case 7: return "DtoA";
    case 8: return "DtoD";
    case 9: return "HtoH";
    case 10: return "PtoP";
    default: return "?";
    }
}
