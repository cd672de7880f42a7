/* json.c - NAME.json, the full report (schema in docs/formats.md, "sonde-report" version 1). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <stdlib.h>

#include "../analyze/analyze.h"
#include "../analyze/gpu.h"
#include "../util/alloc.h"
#include "../util/sort.h"
#include "export.h"

static void key(sbuf *b, const char *k)
{
    sbuf_json_str(b, k);
    sbuf_putc(b, ':');
}

static void kv_num(sbuf *b, const char *k, double v, int comma)
{
    key(b, k);
    sbuf_json_num(b, v);
    if (comma)
        sbuf_putc(b, ',');
}

static void kv_str(sbuf *b, const char *k, const char *v, int comma)
{
    key(b, k);
    sbuf_json_str(b, v);
    if (comma)
        sbuf_putc(b, ',');
}

void sx_json_kv(const char *k, const char *v, void *ctx)
{
    sbuf *b = ctx;
    if (b->len && b->data[b->len - 1] != '{')
        sbuf_putc(b, ',');
    key(b, k);
    sbuf_json_str(b, v);
}

/* An object of metadata: each key once with its last value, in the order keys were recorded. */
static void meta_obj(sbuf *b, const sm_model *m, int32_t head)
{
    sbuf_putc(b, '{');
    if (!b->oom)
        sm_each_meta(m, head, sx_json_kv, b);
    sbuf_putc(b, '}');
}

typedef struct inst_ref {
    uint32_t name;
    size_t i;  /* the model's instants are in time order: index order is time order */
} inst_ref;

static int cmp_inst_ref(const void *a, const void *b)
{
    const inst_ref *x = a, *y = b;
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_group_first(const void *a, const void *b)
{
    const inst_ref *x = a, *y = b; /* .i: the group's first instant, .name: where it starts */
    return x->i < y->i ? -1 : x->i > y->i;
}

/* "events": [{"name", "count", "occurrences": [{"t_s", "thread", "args"}], "left_out"}], names
 * in the order they first occurred; occurrences in time order, the first max_data_points kept. */
static int events_arr(sbuf *b, const sm_model *m)
{
    size_t n = m->n_instants;
    inst_ref *r = n ? sonde__malloc(n * sizeof *r) : NULL;
    inst_ref *g = n ? sonde__malloc(n * sizeof *g) : NULL;
    if (n && (!r || !g)) {
        sonde__free(r);
        sonde__free(g);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = (inst_ref){m->instants[i].name, i};
    sonde__sort(r, n, sizeof *r, cmp_inst_ref);
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (!i || r[i].name != r[i - 1].name) /* a group's first is its earliest */
            g[ng++] = (inst_ref){(uint32_t)i, r[i].i};
    }
    sonde__sort(g, ng, sizeof *g, cmp_group_first);
    size_t max_points = sm_max_data_points(m);
    sbuf_putc(b, '[');
    for (size_t k = 0; k < ng; k++) {
        size_t start = g[k].name, end = start;
        while (end < n && r[end].name == r[start].name)
            end++;
        static const sm_site none;
        const sm_site *site = r[start].name < m->n_sites ? &m->sites[r[start].name] : &none;
        size_t count = end - start > site->instants ? end - start : (size_t)site->instants;
        /* site->instants counts those not held too */
        size_t held = end - start, kept = held < max_points ? held : max_points;
        if (k)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "name", sm_str(m, r[start].name), 1);
        kv_num(b, "count", (double)count, 1);
        if (site->instants_every > 1) /* occurrences: every every-th (report_max_records) */
            kv_num(b, "every", (double)site->instants_every, 1);
        key(b, "occurrences");
        sbuf_putc(b, '[');
        for (size_t j = 0; j < kept; j++) {
            const sm_instant *e = &m->instants[r[start + j].i];
            if (j)
                sbuf_putc(b, ',');
            sbuf_putc(b, '{');
            kv_num(b, "t_s", (double)e->t_ns / 1e9, 1);
            kv_str(b, "thread", e->thread < m->n_threads && m->threads[e->thread].name
                                    ? m->threads[e->thread].name : "?", 1);
            key(b, "args");
            meta_obj(b, m, e->args);
            sbuf_putc(b, '}');
        }
        sbuf_puts(b, "],");
        kv_num(b, "left_out", (double)(count - kept), 0);
        sbuf_putc(b, '}');
    }
    sbuf_putc(b, ']');
    sonde__free(r);
    sonde__free(g);
    return b->oom ? -1 : 0;
}

/* A quantile sketch: {"alpha", "zeros", "min_ns", "max_ns", "buckets": [[index, count], ...]}
 * with only the buckets holding instances; null when there is none. */
static void sketch_json(sbuf *b, const sm_sketch *k)
{
    if (!k) {
        sbuf_puts(b, "null");
        return;
    }
    sbuf_putc(b, '{');
    kv_num(b, "alpha", SM_SKETCH_ALPHA, 1);
    kv_num(b, "zeros", (double)k->zeros, 1);
    key(b, "min_ns");
    sbuf_printf(b, "%lld,", (long long)(k->count ? k->min_ns : 0));
    key(b, "max_ns");
    sbuf_printf(b, "%lld,", (long long)(k->count ? k->max_ns : 0));
    key(b, "buckets");
    sbuf_putc(b, '[');
    int first = 1;
    for (uint32_t i = 0; i < k->n; i++) {
        if (!k->bins[i])
            continue;
        sbuf_printf(b, "%s[%d,%llu]", first ? "" : ",", k->lo + (int32_t)i,
                    (unsigned long long)k->bins[i]);
        first = 0;
    }
    sbuf_puts(b, "]}");
}

void sx_stat_json(sbuf *b, const sm_stat *s, double peak)
{
    sbuf_putc(b, '{');
    kv_str(b, "name", s->name, 1);
#define STAT_NUM(f, kind, label, table, q) kv_num(b, #f, (double)s->f, 1);
    SONDE_SECTION_STATS(STAT_NUM)
#undef STAT_NUM
    kv_str(b, "percentiles", s->sketched ? "sketch" : "exact", 1);
    kv_num(b, "share", s->share, 1);
    kv_num(b, "threads", s->threads, 1);
    kv_num(b, "aggregated_calls", (double)s->aggregated, 1);
    kv_num(b, "depth", s->min_depth, 1);
    kv_str(b, "unit", s->unit, 1);
    kv_num(b, "units", s->units, 1);
    sm_rates r = sm_stat_rates(s, peak);
    kv_num(b, "units_per_s", r.units_per_s, 1);
    kv_num(b, "flops", s->flops, 1);
    kv_num(b, "flops_per_s", r.flops_per_s, 1);
    kv_num(b, "mfu", r.mfu, 1);
    /* Resources while it ran (null: no sample fell inside; see "note"). */
    key(b, "resources");
    sbuf_putc(b, '{');
    kv_num(b, "samples", (double)s->res_samples, 1);
    kv_num(b, "cpu_mean_pct", s->res_cpu_mean, 1);
    kv_num(b, "rss_begin_mib", s->res_rss_begin, 1);
    kv_num(b, "rss_end_mib", s->res_rss_end, 1);
    kv_num(b, "memory_delta_mb", s->res_rss_delta, 1);
    kv_num(b, "gpu_util_mean_pct", s->res_gpu_util_mean, 1);
    kv_num(b, "gpu_memory_peak_mib", s->res_gpu_mem_peak, s->res_samples ? 0 : 1);
    if (!s->res_samples)
        kv_str(b, "note", "no sample fell inside: shorter than the sampling interval", 0);
    sbuf_puts(b, "},");
    key(b, "sketch");
    sketch_json(b, s->sketch);
    sbuf_putc(b, '}');
}

/* "system.*" or "config.*" facts as one object, the prefix removed. */
static void info_obj(sbuf *b, const sm_model *m, const char *prefix)
{
    size_t pl = strlen(prefix);
    sbuf_putc(b, '{');
    int first = 1;
    for (size_t i = 0; i < m->n_info; i++) {
        if (strncmp(m->info[i].key, prefix, pl) != 0)
            continue;
        /* a later record repeats a key: the last one wins, so print only that */
        if (sm_info(m, m->info[i].key) != m->info[i].value)
            continue;
        if (!first)
            sbuf_putc(b, ',');
        first = 0;
        key(b, m->info[i].key + pl);
        sbuf_json_str(b, m->info[i].value);
    }
    sbuf_putc(b, '}');
}

/* The metadata of a section name's instances: each key with its distinct values (at most 16
 * values per key and 32 keys; "..." says when values were left out), from its held instances
 * and then what its folded ones left (sm_metasum). */
/* The spans with metadata, listed by statistic: first[stat] and next[span] chain each
 * statistic's in span order (-1 ends a chain), so each name's metadata reads its own spans, not
 * every span again (a report of thousands of names and a million held spans was quadratic);
 * msum[stat] and msnext[i] the same for the keys its folded instances left (m->metasum: a
 * merged run's names have one chain each). */
typedef struct meta_index {
    int32_t *first, *next, *msum, *msnext;
} meta_index;

static void meta_index_free(meta_index *ix)
{
    sonde__free(ix->first);
    sonde__free(ix->next);
    sonde__free(ix->msum);
    sonde__free(ix->msnext);
}

static int meta_index_build(meta_index *ix, const sm_model *m)
{
    size_t ns = m->n_stats ? m->n_stats : 1;
    ix->first = sonde__malloc(ns * sizeof *ix->first);
    ix->next = sonde__malloc((m->n_spans ? m->n_spans : 1) * sizeof *ix->next);
    ix->msum = sonde__malloc(ns * sizeof *ix->msum);
    ix->msnext = sonde__malloc((m->n_metasum ? m->n_metasum : 1) * sizeof *ix->msnext);
    if (!ix->first || !ix->next || !ix->msum || !ix->msnext) {
        meta_index_free(ix);
        return -1;
    }
    for (size_t i = 0; i < m->n_stats; i++)
        ix->first[i] = ix->msum[i] = -1;
    for (size_t i = m->n_spans; i-- > 0;) { /* from the last: each chain comes out in order */
        const sm_span *s = &m->spans[i];
        int stat = m->sites[s->site].stat;
        if (stat < 0 || (size_t)stat >= m->n_stats || sm_span_extra(m, s)->meta < 0 ||
            (s->flags & SM_SPAN_META_SUMMED)) /* read from m->metasum */
            continue;
        ix->next[i] = ix->first[stat];
        ix->first[stat] = (int32_t)i;
    }
    for (size_t i = m->n_metasum; i-- > 0;) {
        const sm_metasum *x = &m->metasum[i];
        int stat = x->name < m->n_sites ? m->sites[x->name].stat : -1;
        if (stat < 0 || (size_t)stat >= m->n_stats)
            continue;
        ix->msnext[i] = ix->msum[stat];
        ix->msum[stat] = (int32_t)i;
    }
    return 0;
}

typedef struct meta_set {
    uint32_t keys[SM_METASUM_KEYS], vals[SM_METASUM_KEYS][SM_METASUM_VALUES];
    int nv[SM_METASUM_KEYS], more[SM_METASUM_KEYS];
    int nk;
} meta_set;

/* key's place in ms (added when there is room), -1 when none. */
static int meta_set_key(meta_set *ms, const sm_model *m, uint32_t key)
{
    const char *kname = sm_str(m, key);
    int k;
    for (k = 0; k < ms->nk && strcmp(sm_str(m, ms->keys[k]), kname); k++) {
    }
    if (k == ms->nk) {
        if (ms->nk == SM_METASUM_KEYS)
            return -1;
        ms->keys[k] = key;
        ms->nv[k] = ms->more[k] = 0;
        ms->nk++;
    }
    return k;
}

static void meta_set_value(meta_set *ms, const sm_model *m, int k, uint32_t value)
{
    const char *vname = sm_str(m, value);
    int v;
    for (v = 0; v < ms->nv[k] && strcmp(sm_str(m, ms->vals[k][v]), vname); v++) {
    }
    if (v == ms->nv[k]) {
        if (ms->nv[k] < SM_METASUM_VALUES)
            ms->vals[k][ms->nv[k]++] = value;
        else
            ms->more[k] = 1;
    }
}

static void stat_meta(sbuf *b, const sm_model *m, const meta_index *ix, int stat)
{
    meta_set ms;
    ms.nk = 0;
    for (int32_t i = ix->first[stat]; i >= 0; i = ix->next[i]) {
        const sm_span *s = &m->spans[i];
        for (int32_t e = sm_span_extra(m, s)->meta; e >= 0; e = m->meta[e].next) {
            int k = meta_set_key(&ms, m, m->meta[e].key);
            if (k >= 0)
                meta_set_value(&ms, m, k, m->meta[e].value);
        }
    }
    for (int32_t i = ix->msum[stat]; i >= 0; i = ix->msnext[i]) {
        const sm_metasum *x = &m->metasum[i];
        int k = meta_set_key(&ms, m, x->key);
        if (k < 0)
            continue;
        for (unsigned v = 0; v < x->n_values; v++)
            meta_set_value(&ms, m, k, x->values[v]);
        ms.more[k] |= x->more;
    }
    sbuf_putc(b, '{');
    for (int k = 0; k < ms.nk; k++) {
        if (k)
            sbuf_putc(b, ',');
        key(b, sm_str(m, ms.keys[k]));
        sbuf_putc(b, '[');
        for (int v = 0; v < ms.nv[k]; v++) {
            if (v)
                sbuf_putc(b, ',');
            sbuf_json_str(b, sm_str(m, ms.vals[k][v]));
        }
        if (ms.more[k])
            sbuf_puts(b, ms.nv[k] ? ",\"...\"" : "\"...\"");
        sbuf_putc(b, ']');
    }
    sbuf_putc(b, '}');
}

/* A series of durations as an object (its closing brace last, so callers can add fields). */
static void series_obj(sbuf *b, const sa_series *s, const char *slowest_key)
{
    sbuf_putc(b, '{');
    kv_num(b, "count", (double)s->count, 1);
    kv_num(b, "total_s", s->total_s, 1);
    kv_num(b, "mean_s", s->mean_s, 1);
    kv_num(b, "p50_s", s->p50_s, 1);
    kv_num(b, "p99_s", s->p99_s, 1);
    kv_num(b, "first_s", s->first_s, 1);
    kv_num(b, slowest_key, (double)s->slowest, 1);
    kv_num(b, "slowest_s", s->max_s, 0);
    sbuf_putc(b, '}');
}

static void gpu_names(sbuf *b, const char *k, const sm_gpu_name *v, size_t n, size_t max)
{
    key(b, k);
    sbuf_putc(b, '[');
    for (size_t i = 0; i < n && i < max; i++) {
        sbuf_puts(b, i ? ",{" : "{");
        kv_str(b, "name", v[i].name, 1);
        kv_num(b, "count", (double)v[i].count, 1);
        kv_num(b, "total_s", v[i].total_s, 1);
        kv_num(b, "mean_s", v[i].count ? v[i].total_s / (double)v[i].count : 0, 1);
        kv_num(b, "max_s", v[i].max_s, 0);
        sbuf_putc(b, '}');
    }
    sbuf_putc(b, ']');
}

/* "gpu_activity": CUDA kernels, copies and sets (cuda_activity). */
static int gpu_obj(sbuf *b, const sm_model *m)
{
    sm_gpu_sum g;
    if (sm_gpu_summarize(m, &g) != 0)
        return -1;
    key(b, "gpu_activity");
    sbuf_putc(b, '{');
    kv_num(b, "kernels", (double)g.kernels, 1);
    kv_num(b, "kernel_s", g.kernel_s, 1);
    kv_num(b, "memcpy", (double)g.memcpys, 1);
    kv_num(b, "memcpy_bytes", (double)g.memcpy_bytes, 1);
    kv_num(b, "memcpy_s", g.memcpy_s, 1);
    kv_num(b, "memset", (double)g.memsets, 1);
    kv_num(b, "memset_bytes", (double)g.memset_bytes, 1);
    kv_num(b, "memset_s", g.memset_s, 1);
    kv_num(b, "linked_to_sections", (double)g.linked, 1);
    gpu_names(b, "top_kernels", g.by_kernel, g.n_by_kernel, 50);
    sbuf_putc(b, ',');
    gpu_names(b, "kernels_by_section", g.by_section, g.n_by_section, (size_t)-1);
    sm_gpu_sum_free(&g);
    /* where the GPU time went and what the CPU did in its waits (sonde analyze gpu), the top
     * ten of each list */
    sa_gpu a;
    if (sa_gpu_of(m, SA_GPU_KERNEL_DELAY_NS, SA_GPU_MIN_IDLE_NS, &a) != 0)
        return -1;
    sbuf_putc(b, ',');
    key(b, "analysis");
    sx_gpu_analysis_json(b, NULL, &a, 10);
    sa_gpu_free(&a);
    sbuf_puts(b, "},");
    return 0;
}

static void op_rows(sbuf *b, const char *k, const sm_op_row *v, size_t n)
{
    key(b, k);
    sbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(b, i ? ",{" : "{");
        kv_str(b, "name", v[i].name, 1);
        if (v[i].shapes)
            kv_str(b, "input_shapes", v[i].shapes, 1); /* the text as recorded */
        kv_num(b, "calls", (double)v[i].calls, 1);
        kv_num(b, "self_cpu_s", v[i].self_cpu_s, 1);
        kv_num(b, "cpu_total_s", v[i].cpu_total_s, 1);
        kv_num(b, "self_cuda_s", v[i].self_device_s, 1);
        kv_num(b, "cuda_total_s", v[i].device_total_s, 1);
        kv_num(b, "flops", v[i].flops, 1);
        kv_num(b, "self_cpu_memory_bytes", (double)v[i].host_bytes, 1);
        kv_num(b, "self_cuda_memory_bytes", (double)v[i].device_bytes, 0);
        sbuf_putc(b, '}');
    }
    sbuf_putc(b, ']');
}

/* "operators": the per-operator table of another tracer's operators (sonde_ops), by name and
 * by name and input shapes. */
static int ops_obj(sbuf *b, const sm_model *m)
{
    sm_op_row *byname, *byshape;
    size_t nn, ns;
    if (sm_ops_table(m, 0, &byname, &nn) != 0)
        return -1;
    if (sm_ops_table(m, 1, &byshape, &ns) != 0) {
        sonde__free(byname);
        return -1;
    }
    key(b, "operators");
    sbuf_putc(b, '{');
    kv_num(b, "calls", (double)sm_ops_calls(byname, nn), 1);
    char note[600];
    sm_ops_flops_note(m, byname, nn, note, sizeof note);
    if (note[0])
        kv_str(b, "flops_note", note, 1);
    op_rows(b, "by_name", byname, nn);
    sbuf_putc(b, ',');
    op_rows(b, "by_input_shapes", byshape, ns);
    sbuf_puts(b, "},");
    sonde__free(byname);
    sonde__free(byshape);
    return 0;
}

/* sx_json's parts, each one top-level key or a few, in the report's order. */
static void json_run(sbuf *b, const sm_model *m)
{
    double dur = (double)m->duration_ns / 1e9;
    char iso[64] = "";
    time_t secs = (time_t)(m->start_real_ns / 1000000000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    key(b, "run");
    sbuf_putc(b, '{');
    kv_str(b, "name", m->name, 1);
    kv_str(b, "host", m->host, 1);
    kv_num(b, "pid", m->pid, 1);
    kv_str(b, "program", m->program, 1);
    kv_str(b, "cmdline", m->cmdline, 1);
    kv_str(b, "sonde_version", m->sonde_version, 1);
    kv_str(b, "start_time", iso, 1);
    key(b, "start_unix_ns");
    sbuf_u64(b, m->start_real_ns);
    sbuf_putc(b, ',');
    kv_num(b, "duration_s", dur, 1);
    kv_str(b, "clock", m->clock, 1);
    kv_num(b, "rank", m->rank, 1);
    kv_num(b, "world_size", m->world_size, 1);
    key(b, "start_mono_ns");
    sbuf_u64(b, m->start_mono_ns);
    sbuf_putc(b, ',');
    kv_str(b, "unit", m->unit, 1);
    kv_num(b, "peak_flops", m->peak_flops, 1);
    key(b, "clean_end");
    sbuf_puts(b, m->clean_end ? "true," : "false,");
    key(b, "in_progress");
    sbuf_puts(b, m->in_progress ? "true," : "false,");
    /* the file's name alone: the library and `sonde export` write the same report */
    const char *base = m->path ? strrchr(m->path, '/') : NULL;
    kv_str(b, "file", base ? base + 1 : m->path, 1);
    char **workers = NULL; /* its forked children's runs beside it (DataLoader workers) */
    size_t n_workers = 0;
    if (sm_worker_runs(m, &workers, &n_workers) != 0)
        b->oom = 1;
    if (n_workers) {
        key(b, "workers");
        sbuf_putc(b, '[');
        for (size_t i = 0; i < n_workers; i++) {
            if (i)
                sbuf_putc(b, ',');
            sbuf_json_str(b, workers[i]);
        }
        sbuf_puts(b, "],");
    }
    sm_worker_runs_free(workers, n_workers);
    key(b, "metadata");
    meta_obj(b, m, m->run_meta);
    if (sm_info(m, "trigger.reason")) { /* a flight recorder's dump: why and what it holds */
        sbuf_putc(b, ',');
        key(b, "trigger");
        info_obj(b, m, "trigger.");
    }
    sbuf_puts(b, "},");
    key(b, "system");
    info_obj(b, m, "system.");
    sbuf_putc(b, ',');
    key(b, "config");
    info_obj(b, m, "config.");
    sbuf_putc(b, ',');
}

static void json_summary(sbuf *b, const sm_model *m)
{
    double units, units_s, flops, flops_s;
    sm_totals(m, &units, &units_s, &flops, &flops_s);
    double dur = (double)m->duration_ns / 1e9;
    key(b, "summary");
    sbuf_putc(b, '{');
    kv_num(b, "total_duration_s", dur, 1);
    kv_num(b, "sections", (double)sm_sections(m), 1);
    kv_num(b, "sections_held", (double)m->n_spans, 1);
    kv_num(b, "section_names", (double)m->n_stats, 1);
    kv_num(b, "steps", (double)m->total_steps, 1);
    kv_num(b, "units", units, 1);
    kv_str(b, "unit", m->unit, 1);
    kv_num(b, "units_per_s", units_s > 0 ? units / units_s : 0, 1);
    kv_num(b, "flops", flops, 1);
    double fps = flops_s > 0 ? flops / flops_s : 0;
    kv_num(b, "flops_per_s", fps, 1);
    kv_num(b, "mfu", m->peak_flops > 0 ? fps / m->peak_flops : 0, 1);
    kv_num(b, "dropped_events", (double)m->dropped_events, 1);
    kv_num(b, "sections_end_lost", (double)m->sections_end_lost, 1);
    kv_num(b, "short_sections_left_out", (double)m->short_spans, 1);
    kv_num(b, "trace_sections", (double)m->trace.sections, 1);
    kv_num(b, "trace_sections_folded", (double)m->trace.folded, 1);
    kv_num(b, "trace_folded_under_s", m->trace.folded ? (double)m->trace.min_ns / 1e9 : 0, 1);
    kv_num(b, "writer_cpu_s", (double)m->writer_cpu_ns / 1e9, 1);
    kv_num(b, "backpressure_chunks", (double)m->backpressure_chunks, 1);
    kv_num(b, "backpressure_wait_s", (double)m->backpressure_ns / 1e9, 1);
    kv_num(b, "sampler_cpu_s", (double)m->sampler_cpu_ns / 1e9, 1);
    kv_num(b, "sampler_cpu_share", dur > 0 ? (double)m->sampler_cpu_ns / 1e9 / dur : 0, 1);
    kv_num(b, "warnings", (double)m->n_warnings, 0);
    sbuf_puts(b, "},");

    key(b, "throughput");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_rates; i++) {
        const sm_rate *r = &m->rates[i];
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "unit", r->unit, 1);
        kv_num(b, "units", r->units, 1);
        kv_num(b, "seconds", r->seconds, 1);
        kv_num(b, "per_s", r->seconds > 0 ? r->units / r->seconds : 0, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");
}

/* The sections' statistics, and each session's with its own sections'. */
static void json_sections(sbuf *b, const sm_model *m)
{
    meta_index ix;
    if (meta_index_build(&ix, m)) {
        b->oom = 1;
        return;
    }
    key(b, "sections");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_stats; i++) {
        if (i)
            sbuf_putc(b, ',');
        sx_stat_json(b, &m->stats[i], m->peak_flops);
        sbuf_unput(b, 1); /* reopen the object: the metadata of its instances */
        sbuf_putc(b, ',');
        key(b, "metadata");
        stat_meta(b, m, &ix, (int)i);
        sbuf_putc(b, '}');
    }
    meta_index_free(&ix);
    sbuf_puts(b, "],");

    int32_t *sidx; /* each session's spans, found in one pass */
    size_t *sfirst;
    if (sm_session_spans(m, &sidx, &sfirst)) {
        b->oom = 1;
        return;
    }
    key(b, "sessions");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_sessions; i++) {
        sm_spans_sel sel = sm_session_sel(sidx, sfirst, i);
        const sm_session *s = &m->sessions[i];
        double sd = (double)(s->end_ns - s->start_ns) / 1e9;
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "name", sm_str(m, s->name), 1);
        kv_num(b, "start_s", (double)s->start_ns / 1e9, 1);
        kv_num(b, "end_s", (double)s->end_ns / 1e9, 1);
        kv_num(b, "duration_s", sd, 1);
        double su, ss;
        sm_session_units(m, i, sel, &su, &ss); /* its own and its sections', in the run's unit */
        kv_num(b, "units", su, 1);
        kv_num(b, "units_per_s", ss > 0 ? su / ss : 0, 1);
        kv_num(b, "flops", s->flops, 1);
        key(b, "metadata");
        meta_obj(b, m, s->meta);
        sbuf_putc(b, ',');
        key(b, "sections");
        sbuf_putc(b, '[');
        size_t n = s->n_stats; /* computed as the file was read when not every span is held */
        sm_stat *st = s->stats ? s->stats : sm_stats(m, sel, sd, &n);
        if (st)
            sm_resources(m, st, n, sel);
        for (size_t k = 0; k < n; k++) {
            if (k)
                sbuf_putc(b, ',');
            sx_stat_json(b, &st[k], m->peak_flops);
        }
        if (st != s->stats)
            sm_stats_free(st, n);
        sbuf_puts(b, "]}");
    }
    sonde__free(sidx);
    sonde__free(sfirst);
    sbuf_puts(b, "],");
}

static void json_steps(sbuf *b, const sm_model *m)
{
    sm_steps_summary ss;
    sm_steps(m, &ss);
    key(b, "steps");
    sbuf_putc(b, '{');
    kv_num(b, "count", (double)ss.count, 1);
    kv_num(b, "steps_per_s", ss.per_s, 1);
    kv_num(b, "mean_s", ss.mean_s, 1);
    kv_num(b, "min_s", ss.min_s, 1);
    kv_num(b, "max_s", ss.max_s, 1);
    kv_num(b, "p50_s", ss.p50_s, 1);
    kv_num(b, "p90_s", ss.p90_s, 1);
    kv_num(b, "p99_s", ss.p99_s, 1);
    kv_num(b, "first_s", ss.first_s, 1);
    if (m->steps_every > 1) /* only steps every-th held (report_max_records) */
        kv_num(b, "durations_every", (double)m->steps_every, 1);
    key(b, "durations_s"); /* every step held, in order; "active": those the statistics cover */
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_steps; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_json_num(b, sm_step_s(&m->steps[i]));
    }
    sbuf_puts(b, "],");
    key(b, "active");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_steps; i++)
        sbuf_puts(b, i ? (m->steps[i].active ? ",true" : ",false")
                       : (m->steps[i].active ? "true" : "false"));
    sbuf_puts(b, "]},");
}

/* Diffusion records and what the analysis concludes. 0, or -1 out of memory. */
static int json_diffusion(sbuf *b, const sm_model *m, sx_report *r)
{
    const sa_report *an = sx_analysis(r);
    if (!an)
        return -1;
    key(b, "diffusion");
    sbuf_putc(b, '{');
    key(b, "steps");
    series_obj(b, &an->diffusion.steps, "slowest_step");
    sbuf_unput(b, 1);
    sbuf_putc(b, ',');
    kv_num(b, "steps_per_s", an->diffusion.steps_per_s, 1);
    kv_num(b, "timestep_first", an->diffusion.timestep_first, 1);
    kv_num(b, "timestep_last", an->diffusion.timestep_last, 1);
    kv_num(b, "guidance_min", an->diffusion.guidance_min, 1);
    kv_num(b, "guidance_max", an->diffusion.guidance_max, 1);
    static const char *const step_series[] = {"series_s", "steps", "timesteps", "block_sizes",
                                              "guidance_scales"};
    for (int k = 0; k < 5; k++) { /* per diffusion step, in order (null: not given) */
        key(b, step_series[k]);
        sbuf_putc(b, '[');
        for (size_t i = 0; i < m->n_dsteps; i++) {
            const sm_dstep *x = &m->dsteps[i];
            double v[5] = {x->seconds, x->step, x->timestep, x->block_size, x->guidance};
            if (i)
                sbuf_putc(b, ',');
            sbuf_json_num(b, v[k]);
        }
        sbuf_puts(b, k < 4 ? "]," : "]},");
    }
    key(b, "blocks");
    series_obj(b, &an->diffusion.blocks, "slowest_block");
    sbuf_unput(b, 1);
    sbuf_putc(b, ',');
    kv_num(b, "frames", an->diffusion.frames, 1);
    kv_num(b, "fps", an->diffusion.fps, 1);
    kv_num(b, "bps", an->diffusion.bps, 1);
    kv_num(b, "memory_peak_mb", an->diffusion.block_memory_peak_mb, 1);
    static const char *const block_series[] = {"series_s", "memory_mb"};
    for (int k = 0; k < 2; k++) { /* per block, in order (memory null: not given) */
        key(b, block_series[k]);
        sbuf_putc(b, '[');
        for (size_t i = 0; i < m->n_blocks; i++) {
            const sm_block *x = &m->blocks[i];
            if (i)
                sbuf_putc(b, ',');
            sbuf_json_num(b, k ? (x->memory_mb > 0 ? x->memory_mb : NAN) : x->seconds);
        }
        sbuf_puts(b, k < 1 ? "]," : "]},");
    }
    key(b, "models");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_params; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "name", m->params[i].model, 1);
        kv_num(b, "params", m->params[i].count, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");
    kv_num(b, "total_params", an->diffusion.total_params, 0);
    sbuf_puts(b, "},");
    key(b, "analysis");
    sbuf_putc(b, '{');
    key(b, "findings");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < an->n_findings; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "rule", an->findings[i].rule, 1);
        kv_str(b, "title", an->findings[i].title, 1);
        kv_str(b, "evidence", an->findings[i].evidence, 1);
        kv_str(b, "advice", an->findings[i].advice, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");
    key(b, "bottlenecks");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < an->n_bottlenecks; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "what", an->bottlenecks[i].what, 1);
        kv_num(b, "share", an->bottlenecks[i].share, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "]},");
    return 0;
}

static void json_schedule(sbuf *b, const sm_model *m)
{
    key(b, "schedule");
    sbuf_putc(b, '{');
    key(b, "scheduled");
    sbuf_puts(b, m->scheduled ? "true," : "false,");
    key(b, "windows");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_windows; i++) {
        const sm_window *w = &m->windows[i];
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_num(b, "cycle", w->cycle, 1);
        kv_num(b, "first_step", (double)w->first_step, 1);
        kv_num(b, "last_step", (double)w->last_step, 1);
        kv_num(b, "start_s", (double)w->start_ns / 1e9, 1);
        kv_num(b, "end_s", (double)w->end_ns / 1e9, 1);
        char tr[600];
        snprintf(tr, sizeof tr, "%s-cycle%d.trace.json.gz", m->name, w->cycle);
        kv_str(b, "trace", tr, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "]},");
}

/* Counters, metrics and instant events. 0, or -1 out of memory. */
static int json_series(sbuf *b, const sm_model *m)
{
    key(b, "counters");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "name", c->name, 1);
        kv_str(b, "unit", sm_counter_unit(c->name), 1);
        kv_str(b, "source", c->system ? "sampler" : "program", 1);
        kv_num(b, "samples", (double)c->samples, 1);
        kv_num(b, "min", c->min, 1);
        kv_num(b, "mean", sm_counter_mean(c), 1);
        kv_num(b, "max", c->max, 1);
        kv_num(b, "last", c->last, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");

    key(b, "metrics");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_metrics; i++) {
        const sm_metric *x = &m->metrics[i];
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_str(b, "owner", x->owner, 1);
        kv_str(b, "name", x->name, 1);
        kv_num(b, "count", (double)x->count, 1);
        kv_num(b, "mean", x->count ? x->sum / (double)x->count : 0, 1);
        kv_num(b, "min", x->min, 1);
        kv_num(b, "max", x->max, 1);
        kv_num(b, "sum", x->sum, 1);
        kv_num(b, "last", x->last, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");

    /* Instant events per name, each with its occurrences (at most max_data_points). */
    key(b, "events");
    if (events_arr(b, m))
        return -1;
    sbuf_putc(b, ',');
    return 0;
}

static void json_threads(sbuf *b, const sm_model *m)
{
    key(b, "threads");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_threads; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_putc(b, '{');
        kv_num(b, "index", m->threads[i].index, 1);
        kv_num(b, "tid", m->threads[i].tid, 1);
        kv_num(b, "pid", m->threads[i].pid, 1);
        kv_str(b, "name", m->threads[i].name, 1);
        kv_num(b, "sections", (double)m->threads[i].spans, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");
}

/* "python": the Python functions (docs/stacks.md), most own samples first (the innermost Python
 * frame of a sample owns it); nothing when the samples have no Python frames. */
static void json_python(sbuf *b, const sm_profile *pr)
{
    if (!pr->n_python)
        return;
    key(b, "python");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < pr->n_python; i++) {
        const sm_func *f = &pr->funcs[pr->python[i]];
        sbuf_puts(b, i ? ",{" : "{");
        kv_str(b, "name", f->name, 1);
        kv_str(b, "file", f->file, 1);
        kv_num(b, "line", f->line, 1);
        kv_num(b, "own", (double)f->own, 1);
        kv_num(b, "total", (double)f->total, 1);
        kv_num(b, "own_share", (double)f->own / (double)pr->samples, 1);
        kv_num(b, "total_share", (double)f->total / (double)pr->samples, 0);
        sbuf_putc(b, '}');
    }
    sbuf_puts(b, "],");
}

/* An off-CPU row's "seconds", "periods" and "share" (of total ns), and its end. */
static void off_figures(sbuf *b, uint64_t ns, uint64_t periods, uint64_t total)
{
    kv_num(b, "seconds", (double)ns / 1e9, 1);
    kv_num(b, "periods", (double)periods, 1);
    kv_num(b, "share", total ? (double)ns / (double)total : 0, 0);
    sbuf_putc(b, '}');
}

/* "off_cpu": where the sampled threads were blocked in the kernel, top 100 stacks by time, and
 * by section (only when the periods were followed: docs/stacks.md "Off-CPU time"). */

static void json_off_cpu(sbuf *b, const sm_profile *pr)
{
    if (!pr->off_followed)
        return;
    key(b, "off_cpu");
    sbuf_putc(b, '{');
    kv_num(b, "seconds", (double)pr->off_ns / 1e9, 1);
    kv_num(b, "periods", (double)pr->off_periods, 1);
    key(b, "stacks");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < pr->n_off && i < 100; i++) {
        const sm_offstack *x = &pr->off[i];
        sbuf_puts(b, i ? ",{" : "{");
        kv_str(b, "stack", x->stack, 1);
        kv_str(b, "waits_in", x->waits_in, 1);
        if (x->python)
            kv_str(b, "python", x->python, 1);
        off_figures(b, x->ns, x->periods, pr->off_ns);
    }
    sbuf_puts(b, "],");
    /* by the innermost section open on the thread when it blocked, top 100 by time */
    kv_num(b, "in_sections_seconds", (double)pr->off_in_sections_ns / 1e9, 1);
    key(b, "sections");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < pr->n_off_sections && i < 100; i++) {
        const sm_offsection *x = &pr->off_sections[i];
        sbuf_puts(b, i ? ",{" : "{");
        kv_str(b, "name", x->name, 1);
        off_figures(b, x->ns, x->periods, pr->off_ns);
    }
    sbuf_puts(b, "]},");
}

/* A section's "python": its top 20 Python functions by own samples (only when it has some). */
static void json_section_python(sbuf *b, const sm_profile *pr, const sm_psection *ps)
{
    uint32_t top[20];
    size_t n = sm_psection_python(ps, top, 20);
    if (!n)
        return;
    sbuf_putc(b, ',');
    key(b, "python");
    sbuf_putc(b, '[');
    for (size_t j = 0; j < n; j++) {
        const sm_func_in *f = &ps->funcs[top[j]];
        sbuf_puts(b, j ? ",{" : "{");
        kv_str(b, "name", pr->funcs[f->func].name, 1);
        kv_num(b, "own", (double)f->own, 1);
        kv_num(b, "own_share", (double)f->own / (double)ps->samples, 0);
        sbuf_putc(b, '}');
    }
    sbuf_putc(b, ']');
}

/* CPU samples with stacks: every function by self samples, the top lines, by section. */
static void json_profile(sbuf *b, const sm_model *m)
{
    /* CPU samples with stacks: every function, by self samples; or off-CPU periods alone (a
     * program that only waited) */
    if (m->profile.samples || m->profile.n_off) {
        const sm_profile *pr = &m->profile;
        key(b, "profile");
        sbuf_putc(b, '{');
        kv_num(b, "samples", (double)pr->samples, 1);
        kv_num(b, "draws", (double)pr->draws, 1);
        kv_num(b, "lost", (double)pr->lost, 1);
        kv_num(b, "hz", pr->hz, 1);
        kv_str(b, "method", !pr->by_timer ? "perf_event"
                            : pr->by_counter ? "counter_signal" : "timer_signal", 1);
        kv_num(b, "cfi_unwound", (double)pr->cfi_unwound, 1);
        kv_num(b, "sampler_cpu_s", (double)pr->cpu_ns / 1e9, 1);
        static const char *const ways[] = {"none", "sampler", "kernel", "signal_handler"};
        kv_str(b, "python_frames", ways[pr->py_way < 4 ? pr->py_way : 0], 1);
        if (pr->py_kernel_runs) { /* the kernel's BPF statistics were on */
            kv_num(b, "python_kernel_runs", (double)pr->py_kernel_runs, 1);
            kv_num(b, "python_kernel_cpu_s", (double)pr->py_kernel_ns / 1e9, 1);
        }
        kv_num(b, "stacks", (double)pr->n_stacks, 1);
        key(b, "functions");
        sbuf_putc(b, '[');
        /* (the functions of off-CPU stacks alone have no sample: they sort last, left out) */
        for (size_t i = 0; i < pr->n_funcs && pr->funcs[i].total; i++) {
            sbuf_puts(b, i ? ",{" : "{");
            kv_str(b, "name", pr->funcs[i].name, 1);
            kv_str(b, "object", pr->funcs[i].object, 1);
            if (pr->funcs[i].file) { /* where it is defined, from the DWARF */
                kv_str(b, "file", pr->funcs[i].file, 1);
                kv_num(b, "line", pr->funcs[i].line, 1);
            }
            kv_num(b, "self", (double)pr->funcs[i].self, 1);
            kv_num(b, "total", (double)pr->funcs[i].total, 1);
            kv_num(b, "self_share", (double)pr->funcs[i].self / (double)pr->samples, 1);
            kv_num(b, "total_share", (double)pr->funcs[i].total / (double)pr->samples, 0);
            sbuf_putc(b, '}');
        }
        sbuf_puts(b, "],");
        /* the source lines the samples were running, top 100 */
        key(b, "lines");
        sbuf_putc(b, '[');
        for (size_t i = 0; i < pr->n_lines && i < 100; i++) {
            sbuf_puts(b, i ? ",{" : "{");
            kv_str(b, "function", pr->funcs[pr->lines[i].func].name, 1);
            kv_str(b, "file", pr->lines[i].file, 1);
            kv_num(b, "line", pr->lines[i].line, 1);
            kv_num(b, "self", (double)pr->lines[i].self, 1);
            kv_num(b, "self_share", (double)pr->lines[i].self / (double)pr->samples, 0);
            sbuf_putc(b, '}');
        }
        sbuf_puts(b, "],");
        json_python(b, pr);
        json_off_cpu(b, pr);
        /* by the innermost section open on the sample's thread: its functions, top 20 */
        kv_num(b, "in_sections", (double)pr->in_sections, 1);
        key(b, "sections");
        sbuf_putc(b, '[');
        for (size_t i = 0; i < pr->n_sections; i++) {
            const sm_psection *ps = &pr->sections[i];
            sbuf_puts(b, i ? ",{" : "{");
            kv_str(b, "name", ps->name, 1);
            kv_num(b, "samples", (double)ps->samples, 1);
            kv_num(b, "share", (double)ps->samples / (double)pr->samples, 1);
            key(b, "functions");
            sbuf_putc(b, '[');
            for (size_t j = 0; j < ps->n_funcs && j < 20; j++) {
                const sm_func_in *f = &ps->funcs[j];
                sbuf_puts(b, j ? ",{" : "{");
                kv_str(b, "name", pr->funcs[f->func].name, 1);
                kv_num(b, "self", (double)f->self, 1);
                kv_num(b, "total", (double)f->total, 1);
                kv_num(b, "self_share", (double)f->self / (double)ps->samples, 0);
                sbuf_putc(b, '}');
            }
            sbuf_putc(b, ']');
            json_section_python(b, pr, ps);
            sbuf_putc(b, '}');
        }
        sbuf_puts(b, "]},");
    }
}

int sx_json(const sm_model *m, sbuf *b) { return sx_alone(m, b, sx_json_report); }

int sx_json_report(sx_report *r, sbuf *b)
{
    const sm_model *m = r->m;
    sbuf_putc(b, '{');
    kv_str(b, "schema", "sonde-report", 1);
    kv_num(b, "schema_version", SONDE_JSON_SCHEMA_VERSION, 1);
    json_run(b, m);
    json_summary(b, m);
    json_sections(b, m);
    json_steps(b, m);
    if (m->n_gpu && gpu_obj(b, m) != 0)
        return -1;
    if (m->n_ops && ops_obj(b, m) != 0)
        return -1;
    if (json_diffusion(b, m, r) != 0)
        return -1;
    json_schedule(b, m);
    if (json_series(b, m) != 0)
        return -1;
    json_threads(b, m);
    json_profile(b, m);
    key(b, "warnings");
    sbuf_putc(b, '[');
    for (size_t i = 0; i < m->n_warnings; i++) {
        if (i)
            sbuf_putc(b, ',');
        sbuf_json_str(b, m->warnings[i]);
    }
    sbuf_puts(b, "]}\n");
    return b->oom ? -1 : 0;
}
