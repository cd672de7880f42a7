/* ops.c - operators of another tracer in the model (sonde_ops: PyTorch's profiler through
 * sonde.torch): OPS records parsed (reader.c), each CPU operator placed on its thread under the
 * sections and operators open there, memory charged to the operator running at that instant,
 * GPU work handed to the CUDA activity (gpu.c) as launched by its operator; and the
 * per-operator table the reports print. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "../../include/sonde/sonde.h"
#include "../format/format.h"
#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/buf.h"
#include "../util/strmap.h"
#include "model_build.h"

/* An operator's clock (PyTorch's: microseconds, read apart from sonde's) may put its ends up to
 * this far outside the section or operator it ran in; they are moved inside. */
#define OPS_SLACK_NS 2000

/* Thread ids from this one up name PyTorch's own thread numbers (sonde.torch: a thread whose
 * kernel tid it could not learn), not kernel tids (pid_max is at most 2^22). */
#define OPS_TORCH_TID 0x40000000u

static int get_str(const uint8_t **pp, const uint8_t *end, size_t max, char **out)
{
    uint64_t n;
    *out = NULL;
    if (sm__get_var(pp, end, &n) || n > max || n > (uint64_t)(end - *pp))
        return -1;
    if (!n)
        return 0;
    if (!(*out = sonde__malloc(n + 1)))
        return -2;
    memcpy(*out, *pp, n);
    (*out)[n] = 0;
    *pp += n;
    return 0;
}

int sm__ops_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        if (SONDE_GROW(raw->ops, raw->n_ops, raw->cap_ops))
            return -2;
        sm_op_raw *o = &raw->ops[raw->n_ops];
        memset(o, 0, sizeof *o);
        o->kind = *p++;
        uint64_t tid, dev, stream, bytes, flags = 0;
        if (o->kind == (SONDE_OP_CPU | SONDE_OPS_TABLE_BIT)) { /* the tracer's table's figures */
            o->kind = SONDE_OP_CPU;
            if (sm__get_var(&p, end, &flags) || (flags & ~(uint64_t)SONDE_OP_F_ALL) ||
                (flags & (SONDE_OP_F_TABLE | SONDE_OP_F_LEFT_OUT)) == SONDE_OP_F_LEFT_OUT ||
                sm__get_var(&p, end, &o->table_child))
                return -1;
            o->flags = (uint8_t)flags;
        }
        if (o->kind > SONDE_OP_MEMSET || sm__get_var(&p, end, &tid) || tid > UINT32_MAX ||
            sm__get_var(&p, end, &dev) || sm__get_var(&p, end, &stream) ||
            stream > UINT32_MAX || sm__get_var(&p, end, &o->id) ||
            sm__get_var(&p, end, &o->start_mono) || sm__get_var(&p, end, &o->dur) ||
            sm__get_var(&p, end, &bytes) || end - p < 8)
            return -1;
        int64_t d = zigzag_dec(dev);
        if (d < -1 || d > INT32_MAX || o->start_mono > INT64_MAX / 2 || o->dur > INT64_MAX / 4 ||
            o->table_child > INT64_MAX / 4)
            return -1;
        o->tid = (uint32_t)tid;
        o->device = (int32_t)d;
        o->stream = (uint32_t)stream;
        o->bytes = zigzag_dec(bytes);
        uint64_t bits = sonde_get_u64le(p);
        p += 8;
        memcpy(&o->flops, &bits, sizeof bits);
        if (!(o->flops >= 0 && o->flops <= 1e300)) /* NaN, negative or infinite */
            o->flops = 0;
        int r = get_str(&p, end, SONDE_OP_NAME_MAX, &o->name);
        raw->n_ops++; /* owns its strings from here */
        if (r || (r = get_str(&p, end, SONDE_OP_SHAPES_MAX, &o->shapes)))
            return r;
    }
    return 0;
}

void sm__ops_free_raw(sb_raw *raw)
{
    for (size_t i = 0; i < raw->n_ops; i++) {
        sonde__free(raw->ops[i].name);
        sonde__free(raw->ops[i].shapes);
    }
    sonde__free(raw->ops);
    raw->ops = NULL;
    raw->n_ops = raw->cap_ops = 0;
}

/* ---- placing them --------------------------------------------------------------------------- */
typedef struct obuild {
    sm_model *m;
    strmap names;
    size_t cap_names;
} obuild;

/* The index of text in m->op_names, adding it (the string is taken); -1 when out of memory. */
static int32_t name_id(obuild *b, char **text)
{
    const char *s = *text ? *text : "?";
    int k = strmap_get(&b->names, s);
    if (k >= 0) {
        sonde__free(*text);
        *text = NULL;
        return k;
    }
    sm_model *m = b->m;
    if (SONDE_GROW(m->op_names, m->n_op_names, b->cap_names))
        return -1;
    char *own = *text ? *text : sonde__strdup("?");
    if (!own)
        return -1;
    *text = NULL;
    m->op_names[m->n_op_names] = own;
    if (strmap_put(&b->names, own, (int)m->n_op_names)) {
        m->op_names[m->n_op_names] = NULL;
        sonde__free(own);
        return -1;
    }
    return (int32_t)m->n_op_names++;
}

/* The thread of kernel tid tid (the latest that had it), adding a track for one the run has
 * not seen; -1 when out of memory. */
static int32_t thread_of(sm_model *m, uint32_t tid)
{
    for (size_t t = m->n_threads; t-- > 0;)
        if (m->threads[t].tid == tid)
            return (int32_t)t;
    sm_thread *th = sonde__realloc(m->threads, (m->n_threads + 1) * sizeof *th);
    if (!th)
        return -1;
    m->threads = th;
    sm_thread *x = &th[m->n_threads];
    memset(x, 0, sizeof *x);
    uint32_t index = 0;
    for (size_t t = 0; t < m->n_threads; t++)
        if (th[t].index >= index)
            index = th[t].index + 1;
    x->index = index;
    x->tid = tid;
    x->pid = m->pid;
    if (sonde__asprintf(&x->name, tid >= OPS_TORCH_TID ? "torch thread %u" : "tid %u",
                        tid >= OPS_TORCH_TID ? tid - OPS_TORCH_TID : tid) < 0)
        return -1;
    return (int32_t)m->n_threads++;
}

static int cmp_op(const void *a, const void *b)
{
    const sm_op *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->end_ns != y->end_ns)
        return x->end_ns > y->end_ns ? -1 : 1; /* the enclosing one first */
    return x->depth < y->depth ? -1 : x->depth > y->depth; /* depth: the input order here */
}

typedef struct id_ref {
    uint64_t id;
    int32_t op;
} id_ref;

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = ((const id_ref *)a)->id, y = ((const id_ref *)b)->id;
    return x < y ? -1 : x > y;
}

static void clamp(sm_op *o, int64_t lo, int64_t hi, int64_t slack)
{
    if (o->start_ns < lo && lo - o->start_ns <= slack)
        o->start_ns = lo;
    if (o->end_ns > hi && o->end_ns - hi <= slack)
        o->end_ns = hi;
    if (o->end_ns < o->start_ns)
        o->end_ns = o->start_ns;
}

/* A section of the operator's thread that crosses one of its ends by at most OPS_SLACK_NS:
 * the two clocks disagree, and the operator ran before or after it, not across. The end that
 * lies inside the section is moved to the section's boundary (sfirst: the spans' thread
 * ranges). */
static void off_crossing_sections(const sm_model *m, const sm_nested *spans, const size_t *sfirst,
                                  sm_op *o)
{
    /* a section open at its start that ends just after it: it began after that section */
    for (int32_t k = sm__innermost_at(spans, sfirst, o->thread, o->start_ns); k >= 0;
         k = m->spans[k].parent) {
        int64_t e = m->spans[k].end_ns;
        if (e > o->start_ns && e < o->end_ns && e - o->start_ns <= OPS_SLACK_NS)
            o->start_ns = e;
    }
    /* a section that begins just before its end and ends after it: it ended before that one */
    int64_t from = o->end_ns - OPS_SLACK_NS > o->start_ns ? o->end_ns - OPS_SLACK_NS : o->start_ns;
    int64_t end = o->end_ns;
    for (size_t i = sm__first_after(spans, sfirst, o->thread, from);
         i < sfirst[o->thread + 1] && m->spans[i].start_ns < o->end_ns; i++)
        if (m->spans[i].end_ns > o->end_ns && m->spans[i].start_ns < end)
            end = m->spans[i].start_ns;
    o->end_ns = end;
}

/* off_crossing_sections for every operator, before they are sorted. 0, or -1 out of memory. */
static int off_sections(sm_model *m)
{
    sm_nested spans = SM_SPANS(m);
    size_t *sfirst = sm__thread_firsts(&spans, m->n_threads);
    if (!sfirst)
        return -1;
    for (size_t i = 0; i < m->n_ops; i++)
        off_crossing_sections(m, &spans, sfirst, &m->ops[i]);
    sonde__free(sfirst);
    return 0;
}

/* Nesting, sections, clamping and self times of m->ops, sorted by thread and start. */
static int nest(sm_model *m)
{
    sm_nested spans = SM_SPANS(m);
    size_t *sfirst = sm__thread_firsts(&spans, m->n_threads);
    int32_t *stack = sonde__malloc((m->n_ops ? m->n_ops : 1) * sizeof *stack);
    if (!sfirst || !stack) {
        sonde__free(sfirst);
        sonde__free(stack);
        return -1;
    }
    size_t depth = 0;
    for (size_t i = 0; i < m->n_ops; i++) {
        sm_op *o = &m->ops[i];
        if (i && m->ops[i - 1].thread != o->thread)
            depth = 0;
        /* inside the one open before it when it starts before that one's end and ends by it
         * (or within the clock's slack of it: then it is moved inside) */
        while (depth && (m->ops[stack[depth - 1]].end_ns <= o->start_ns ||
                         m->ops[stack[depth - 1]].end_ns + OPS_SLACK_NS < o->end_ns))
            depth--;
        o->parent = depth ? stack[depth - 1] : -1;
        o->depth = (uint32_t)depth;
        o->span = sm__innermost_at(&spans, sfirst, o->thread,
                              o->start_ns + (o->end_ns - o->start_ns) / 2);
        if (o->span >= 0) {
            const sm_span *s = &m->spans[o->span];
            clamp(o, s->start_ns, s->end_ns, OPS_SLACK_NS);
        }
        if (o->parent >= 0) {
            sm_op *p = &m->ops[o->parent];
            clamp(o, p->start_ns, p->end_ns, INT64_MAX);
            p->child_ns += o->end_ns - o->start_ns;
        }
        stack[depth++] = (int32_t)i;
    }
    sonde__free(sfirst);
    sonde__free(stack);
    return 0;
}

static int gpu_add(sb_raw *raw, const sm_gpu_raw *g)
{
    if (SONDE_GROW(raw->gpu, raw->n_gpu, raw->cap_gpu))
        return -1;
    raw->gpu[raw->n_gpu++] = *g;
    return 0;
}

/* Memory and GPU work: charged to their operators; GPU work handed to gpu.c with a runtime
 * call at its operator's start on its thread, so that it links to the section there. */
static int attach(sb_raw *raw, sm_model *m, int64_t origin)
{
    sm_nested ops = SM_OPS(m);
    size_t *first = sm__thread_firsts(&ops, m->n_threads);
    id_ref *ids = sonde__malloc((m->n_ops ? m->n_ops : 1) * sizeof *ids);
    uint8_t *launched = sonde__calloc(m->n_ops ? m->n_ops : 1, 1);
    int rc = -1;
    if (!first || !ids || !launched)
        goto out;
    size_t n_ids = 0;
    for (size_t i = 0; i < m->n_ops; i++)
        if (m->ops[i].id) {
            ids[n_ids].id = m->ops[i].id;
            ids[n_ids++].op = (int32_t)i;
        }
    sonde__sort(ids, n_ids, sizeof *ids, cmp_id);
    for (size_t i = 0; i < raw->n_ops; i++) {
        sm_op_raw *r = &raw->ops[i];
        int64_t t0 = (int64_t)r->start_mono - origin;
        if (r->kind == SONDE_OP_CPU || t0 < 0)
            continue;
        if (r->kind == SONDE_OP_MEMORY) {
            int32_t th = -1;
            for (size_t t = m->n_threads; t-- > 0 && th < 0;)
                if (m->threads[t].tid == r->tid)
                    th = (int32_t)t;
            int32_t o = th >= 0 ? sm__innermost_at(&ops, first, (uint32_t)th, t0) : -1;
            if (o >= 0) {
                if (r->device < 0)
                    m->ops[o].host_bytes += r->bytes;
                else
                    m->ops[o].device_bytes += r->bytes;
            }
            continue;
        }
        sm_gpu_raw g;
        memset(&g, 0, sizeof g);
        g.kind = r->kind == SONDE_OP_KERNEL   ? SONDE_GPU_KERNEL
                 : r->kind == SONDE_OP_MEMCPY ? SONDE_GPU_MEMCPY
                                              : SONDE_GPU_MEMSET;
        g.device = r->device < 0 ? 0 : (uint32_t)r->device;
        g.stream = r->stream;
        g.correlation = (uint32_t)r->id;
        g.start_mono = r->start_mono;
        g.dur = r->dur;
        g.bytes = r->bytes > 0 ? (uint64_t)r->bytes : 0;
        g.name = g.kind == SONDE_GPU_KERNEL ? r->name : NULL;
        if (g.kind == SONDE_GPU_KERNEL && !g.name && !(g.name = sonde__strdup("?")))
            goto out;
        if (gpu_add(raw, &g)) {
            if (g.name != r->name)
                sonde__free(g.name);
            goto out;
        }
        if (g.name == r->name)
            r->name = NULL; /* the GPU entry owns it now */
        id_ref key = {r->id, 0};
        const id_ref *hit = r->id && n_ids ? bsearch(&key, ids, n_ids, sizeof *ids, cmp_id) : NULL;
        if (!hit)
            continue;
        sm_op *o = &m->ops[hit->op];
        o->device_ns += (int64_t)r->dur;
        if (!launched[hit->op]) {
            launched[hit->op] = 1;
            sm_gpu_raw api;
            memset(&api, 0, sizeof api);
            api.kind = SONDE_GPU_API;
            api.correlation = (uint32_t)r->id;
            api.tid = m->threads[o->thread].tid;
            api.start_mono = (uint64_t)(o->start_ns + origin);
            if (gpu_add(raw, &api))
                goto out;
        }
    }
    for (size_t i = 0; i < m->n_ops; i++)
        m->ops[i].device_total_ns = m->ops[i].device_ns;
    for (size_t i = m->n_ops; i-- > 0;) /* a nested operator comes after the one it is in */
        if (m->ops[i].parent >= 0)
            m->ops[m->ops[i].parent].device_total_ns += m->ops[i].device_total_ns;
    rc = 0;
out:
    sonde__free(first);
    sonde__free(ids);
    sonde__free(launched);
    return rc;
}

static int cmp_grange(const void *a, const void *b)
{
    const sm_grange *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

int sm__granges(const sb_raw *raw, const sm_model *m, sm_granges *g)
{
    g->r = NULL;
    g->n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < raw->n_ops; i++) {
        const sm_op_raw *o = &raw->ops[i];
        int64_t t0 = (int64_t)o->start_mono - (int64_t)m->start_mono_ns;
        if (o->kind != SONDE_OP_CPU || t0 < 0 || !(o->flags & SONDE_OP_F_HOOK_RANGE))
            continue;
        size_t t = m->n_threads; /* the latest thread with its tid (thread_of) */
        while (t > 0 && m->threads[t - 1].tid != o->tid)
            t--;
        if (!t)
            continue;
        if (SONDE_GROW(g->r, g->n, cap))
            return -1;
        g->r[g->n++] = (sm_grange){(uint32_t)(t - 1), t0, t0 + (int64_t)o->dur};
    }
    sonde__sort(g->r, g->n, sizeof *g->r, cmp_grange);
    return 0;
}

int64_t sm__grange_end(const sm_granges *g, uint32_t thread, int64_t start, int64_t t)
{
    size_t lo = 0, hi = g->n;
    while (lo < hi) { /* the first range past (thread, t) */
        size_t mid = (lo + hi) / 2;
        const sm_grange *r = &g->r[mid];
        if (r->thread < thread || (r->thread == thread && r->start_ns < t))
            lo = mid + 1;
        else
            hi = mid;
    }
    const sm_grange *r = lo ? &g->r[lo - 1] : NULL; /* the last that began before t */
    if (r && r->thread == thread && r->start_ns > start && t < r->end_ns)
        return r->end_ns;
    return t;
}

int sm__ops_build(sb_raw *raw, sm_model *m)
{
    if (!raw->n_ops)
        return 0;
    size_t n_cpu = 0;
    for (size_t i = 0; i < raw->n_ops; i++)
        n_cpu += raw->ops[i].kind == SONDE_OP_CPU;
    obuild b = {m, {0}, 0};
    strmap_init(&b.names);
    int rc = -1;
    m->ops = sonde__calloc(n_cpu ? n_cpu : 1, sizeof *m->ops);
    if (!m->ops)
        goto out;
    int64_t origin = (int64_t)m->start_mono_ns;
    for (size_t i = 0; i < raw->n_ops; i++) {
        sm_op_raw *r = &raw->ops[i];
        int64_t t0 = (int64_t)r->start_mono - origin;
        if (r->kind != SONDE_OP_CPU || t0 < 0) /* before the run's start (or its sonde_clear) */
            continue;
        sm_op *o = &m->ops[m->n_ops];
        int32_t th = thread_of(m, r->tid);
        int32_t name = th >= 0 ? name_id(&b, &r->name) : -1;
        int32_t shapes = name >= 0 && r->shapes ? name_id(&b, &r->shapes) : -1;
        if (th < 0 || name < 0 || (r->shapes && shapes < 0))
            goto out;
        o->name = (uint32_t)name;
        o->shapes = shapes;
        o->thread = (uint32_t)th;
        o->start_ns = t0;
        o->end_ns = t0 + (int64_t)r->dur;
        o->flops = r->flops;
        o->id = r->id;
        o->table = (r->flags & SONDE_OP_F_TABLE) != 0;
        o->table_left_out = (r->flags & SONDE_OP_F_LEFT_OUT) != 0;
        o->table_ns = (int64_t)r->dur;
        o->table_child_ns = (int64_t)r->table_child;
        o->depth = (uint32_t)m->n_ops; /* the input order, for cmp_op; nest() sets the depth */
        m->n_ops++;
    }
    if (off_sections(m))
        goto out;
    sonde__sort(m->ops, m->n_ops, sizeof *m->ops, cmp_op);
    if (nest(m) || attach(raw, m, origin))
        goto out;
    rc = 0;
out:
    strmap_free(&b.names);
    return rc;
}

/* ---- the table ------------------------------------------------------------------------------ */
static int cmp_row(const void *a, const void *b)
{
    const sm_op_row *x = a, *y = b;
    if (x->self_cpu_s != y->self_cpu_s)
        return x->self_cpu_s > y->self_cpu_s ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return strcmp(x->shapes ? x->shapes : "", y->shapes ? y->shapes : "");
}

/* PyTorch's table (EventList._remove_dup_nodes) leaves out a call whose parent has its name and
 * no other child: aten::div_ calling aten::div_ is one call. The parent takes over the child's
 * children, so its self time is its own less theirs, and its self device time becomes the
 * child's (torch lifts the child's kernels in place of the parent's). Over m->ops (parents
 * before children): gone[i] marks such a call, child_ns[k] and device_ns[k] are each call's
 * figures as the table counts them. An operator that carries the tracer's own table's figures
 * (sm_op.table, from sonde.torch) takes them instead: which calls it leaves out and each call's
 * child time come from torch's own tree, where sonde's nesting can differ (sections are not
 * operators there, and operators that tie at a microsecond). 0, or -1 out of memory. */
typedef struct op_fold {
    uint8_t *gone;
    int64_t *child_ns, *device_ns;
} op_fold;

static int fold_dups(const sm_model *m, op_fold *f)
{
    size_t n = m->n_ops;
    uint32_t *kids = sonde__calloc(n, sizeof *kids);
    int32_t *keeper = sonde__malloc(n * sizeof *keeper); /* the call holding i's children now */
    f->gone = sonde__calloc(n, 1);
    f->child_ns = sonde__malloc(n * sizeof *f->child_ns);
    f->device_ns = sonde__malloc(n * sizeof *f->device_ns);
    if (!kids || !keeper || !f->gone || !f->child_ns || !f->device_ns) {
        sonde__free(kids);
        sonde__free(keeper);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (m->ops[i].parent >= 0)
            kids[m->ops[i].parent]++;
        f->child_ns[i] = m->ops[i].child_ns;
        f->device_ns[i] = m->ops[i].device_ns;
    }
    for (size_t i = 0; i < n; i++) {
        const sm_op *o = &m->ops[i];
        keeper[i] = (int32_t)i;
        if (o->table) { /* the tracer's own table decided: its figures */
            f->gone[i] = (uint8_t)o->table_left_out;
            f->child_ns[i] = o->table_child_ns;
        }
        if (o->parent < 0)
            continue;
        int32_t k = keeper[o->parent]; /* i's parent now: the parent, or what took it over */
        int same = kids[o->parent] == 1 && m->ops[k].name == o->name;
        if (o->table ? !o->table_left_out || m->ops[k].name != o->name : !same)
            continue;
        f->gone[i] = 1;
        keeper[i] = k;
        if (!m->ops[k].table)
            f->child_ns[k] = o->child_ns;
        f->device_ns[k] = o->device_ns; /* the table lifts its kernels to the one it is in */
    }
    sonde__free(kids);
    sonde__free(keeper);
    return 0;
}

/* An operator of matrix or convolution work by its name (torch's aten:: names and the like). */
static int heavy_op(const char *name)
{
    static const char *const kinds[] = {"mm", "matmul", "linear", "conv", "einsum", "bmm",
                                        "addmm", "attention", NULL};
    for (int i = 0; kinds[i]; i++)
        if (strstr(name, kinds[i]))
            return 1;
    return 0;
}

void sm_ops_flops_note(const sm_model *m, const sm_op_row *rows, size_t n, char *out,
                       size_t cap)
{
    out[0] = 0;
    double ops = 0;
    for (size_t i = 0; i < n; i++)
        ops += rows[i].flops;
    double run = m->total_flops;
    if (!(ops > 0) || !(run > 0) || fabs(ops - run) <= 0.05 * run || cap < 64)
        return;
    int k = snprintf(out, cap, "the operators' FLOPs (their tracer's counter) sum to %.4g, "
                               "%.1f%% %s the run's %.4g (the program's own count)",
                     ops, 100 * fabs(ops - run) / run, ops < run ? "below" : "above", run);
    const char *sep = ": the counter gives none for ";
    int named = 0;
    for (size_t i = 0; i < n && named < 3 && k > 0 && (size_t)k < cap; i++) { /* by self CPU */
        if (rows[i].flops > 0 || !rows[i].name || !heavy_op(rows[i].name))
            continue;
        k += snprintf(out + k, cap - (size_t)k, "%s%s (%llu calls)", sep, rows[i].name,
                      (unsigned long long)rows[i].calls);
        sep = ", ";
        named++;
    }
    if (k > 0 && (size_t)k < cap && !named)
        snprintf(out + k, cap - (size_t)k, "; the counter counts only some operators "
                                           "(docs/pytorch.md)");
}

int sm_ops_table(const sm_model *m, int by_shape, sm_op_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (!m->n_ops)
        return 0;
    op_fold fold;
    if (fold_dups(m, &fold)) {
        sonde__free(fold.gone);
        sonde__free(fold.child_ns);
        sonde__free(fold.device_ns);
        return -1;
    }
    /* a row per name, or per (name, shapes): keyed by their op_names indices */
    strmap idx;
    strmap_init(&idx);
    sm_op_row *v = NULL;
    size_t nv = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < m->n_ops && !rc; i++) {
        const sm_op *o = &m->ops[i];
        if (fold.gone[i])
            continue;
        char key[32];
        snprintf(key, sizeof key, "%u/%d", o->name, by_shape ? o->shapes : -1);
        int k = strmap_get(&idx, key);
        if (k < 0) {
            if (SONDE_GROW(v, nv, cap) || strmap_put(&idx, key, (int)nv)) {
                rc = -1;
                break;
            }
            k = (int)nv++;
            memset(&v[k], 0, sizeof v[k]);
            v[k].name = m->op_names[o->name];
            v[k].shapes = by_shape && o->shapes >= 0 ? m->op_names[o->shapes] : NULL;
        }
        sm_op_row *r = &v[k];
        r->calls++;
        int64_t dur = o->table ? o->table_ns : o->end_ns - o->start_ns;
        r->cpu_total_s += (double)dur / 1e9;
        r->self_cpu_s += (double)(dur - fold.child_ns[i]) / 1e9;
        r->self_device_s += (double)fold.device_ns[i] / 1e9;
        r->device_total_s += (double)o->device_total_ns / 1e9;
        r->flops += o->flops;
        r->host_bytes += o->host_bytes;
        r->device_bytes += o->device_bytes;
    }
    strmap_free(&idx);
    sonde__free(fold.gone);
    sonde__free(fold.child_ns);
    sonde__free(fold.device_ns);
    if (rc) {
        sonde__free(v);
        return -1;
    }
    sonde__sort(v, nv, sizeof *v, cmp_row);
    *rows = v;
    *n = nv;
    return 0;
}
