/* load.c - a run for the commands: from its .sonde file through the model reader, or from a
 * NAME.json report through jansson (a report of another schema or version is refused). */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "analyze/analyze.h"
#include "cli.h"
#include "export/export.h"
#include "format/format.h"
#include "record/record.h"
#include "util/alloc.h"
#include "util/sort.h"

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double num0(json_t *o, const char *k)
{
    double v = num(o, k);
    return isnan(v) ? 0 : v;
}

/* num0 held to [lo, hi]: a report's numbers become integers without overflowing them. */
static double num_in(json_t *o, const char *k, double lo, double hi)
{
    double v = num0(o, k);
    return v < lo ? lo : v > hi ? hi : v;
}
#define U64_MAX_D 1.8e19 /* below 2^64 */
#define I32(o, k) ((int)num_in(o, k, INT_MIN, INT_MAX))
#define U32(o, k) ((uint32_t)num_in(o, k, 0, UINT32_MAX))
#define U64(o, k) ((uint64_t)num_in(o, k, 0, U64_MAX_D))
#define NS(o, k) ((int64_t)(num_in(o, k, -9e9, 9e9) * 1e9)) /* seconds -> ns */

static char *str(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return strdup(json_is_string(v) ? json_string_value(v) : "");
}

/* A section's "sketch" (sx_stat_json) into *out: 0 (NULL when the report has none: one from
 * before sketches), SONDE_ENOMEM, or SONDE_EFORMAT naming what is wrong in why. */
static int sketch_of(json_t *o, sm_sketch **out, const char **why)
{
    *out = NULL;
    if (!o || json_is_null(o))
        return 0;
    json_t *b = json_object_get(o, "buckets"), *lo = json_object_get(o, "min_ns"),
           *hi = json_object_get(o, "max_ns");
    if (!json_is_object(o) || !json_is_array(b) || !json_is_integer(lo) || !json_is_integer(hi)) {
        *why = "not an object with buckets, min_ns and max_ns";
        return SONDE_EFORMAT;
    }
    if (fabs(num0(o, "alpha") - SM_SKETCH_ALPHA) > 1e-12) {
        *why = "alpha is not this sonde's (0.01)";
        return SONDE_EFORMAT;
    }
    sm_sketch *k = sonde__malloc(sizeof *k);
    if (!k)
        return SONDE_ENOMEM;
    sm_sketch_init(k);
    size_t i;
    json_t *e;
    json_array_foreach(b, i, e)
    {
        json_t *ix = json_array_get(e, 0), *n = json_array_get(e, 1);
        /* indices of 1 ns to 2^63 ns, counts below 2^63 */
        if (json_array_size(e) != 2 || !json_is_integer(ix) || !json_is_integer(n) ||
            json_integer_value(ix) < 0 || json_integer_value(ix) > 2200 ||
            json_integer_value(n) < 0) {
            *why = "a bucket is not [index 0..2200, count >= 0]";
            sm_sketch_free(k);
            sonde__free(k);
            return SONDE_EFORMAT;
        }
        if (sm_sketch_add_bucket(k, (int32_t)json_integer_value(ix),
                                 (uint64_t)json_integer_value(n))) {
            sm_sketch_free(k);
            sonde__free(k);
            return SONDE_ENOMEM;
        }
    }
    k->zeros = U64(o, "zeros");
    k->count += k->zeros;
    k->min_ns = json_integer_value(lo);
    k->max_ns = json_integer_value(hi);
    *out = k;
    return 0;
}

/* sections[i] of a report into s. 0, SONDE_ENOMEM, or SONDE_EFORMAT with the message set. */
static int read_stat(json_t *e, size_t i, const char *path, sm_stat *s)
{
    s->name = str(e, "name");
    if (!s->name)
        return SONDE_ENOMEM;
#define READ_U64(f) s->f = U64(e, #f);
#define READ_F64(f) s->f = num0(e, #f);
#define READ(f, kind, label, table, q) READ_##kind(f)
    SONDE_SECTION_STATS(READ)
#undef READ
#undef READ_F64
#undef READ_U64
    json_t *pct = json_object_get(e, "percentiles");
    s->sketched = json_is_string(pct) && !strcmp(json_string_value(pct), "sketch");
    const char *why = NULL;
    int rc = sketch_of(json_object_get(e, "sketch"), &s->sketch, &why);
    if (rc != 0) {
        if (rc == SONDE_EFORMAT)
            sonde__fail(rc, "%s: sections[%zu] (\"%s\").sketch: %s", path, i, s->name, why);
        return rc;
    }
    s->share = num0(e, "share");
    s->threads = U32(e, "threads");
    s->aggregated = U64(e, "aggregated_calls");
    s->min_depth = I32(e, "depth");
    s->units = num0(e, "units");
    double ups = num0(e, "units_per_s");
    s->units_s = ups > 0 ? s->units / ups : 0;
    s->flops = num0(e, "flops");
    double f = num0(e, "flops_per_s");
    s->flops_time_s = f > 0 ? s->flops / f : 0;
    json_t *res = json_object_get(e, "resources");
    s->res_samples = U64(res, "samples");
    s->res_cpu_mean = num(res, "cpu_mean_pct");
    s->res_rss_begin = num(res, "rss_begin_mib");
    s->res_rss_end = num(res, "rss_end_mib");
    s->res_rss_delta = num(res, "memory_delta_mb");
    s->res_gpu_util_mean = num(res, "gpu_util_mean_pct");
    s->res_gpu_mem_peak = num(res, "gpu_memory_peak_mib");
    return 0;
}

/* The report's diffusion figures and findings, printed the way the text summary prints them,
 * as m->analysis_text. 0, or -1 out of memory. */
static int read_analysis(json_t *root, sm_model *m)
{
    sa_report an;
    memset(&an, 0, sizeof an);
    json_t *df = json_object_get(root, "diffusion");
    json_t *ds = json_object_get(df, "steps"), *db = json_object_get(df, "blocks");
    an.diffusion.steps.count = U64(ds, "count");
    an.diffusion.steps.p50_s = num0(ds, "p50_s");
    an.diffusion.steps.slowest = U64(ds, "slowest_step");
    an.diffusion.steps.max_s = num0(ds, "slowest_s");
    an.diffusion.steps_per_s = num0(ds, "steps_per_s");
    an.diffusion.blocks.count = U64(db, "count");
    an.diffusion.blocks.slowest = U64(db, "slowest_block");
    an.diffusion.blocks.max_s = num0(db, "slowest_s");
    an.diffusion.fps = num0(db, "fps");
    an.diffusion.bps = num0(db, "bps");
    an.diffusion.timestep_first = num(ds, "timestep_first");
    an.diffusion.timestep_last = num(ds, "timestep_last");
    an.diffusion.guidance_min = num(ds, "guidance_min");
    an.diffusion.guidance_max = num(ds, "guidance_max");
    an.diffusion.block_memory_peak_mb = num(db, "memory_peak_mb");
    json_t *fs = json_object_get(json_object_get(root, "analysis"), "findings");
    an.findings = calloc(json_array_size(fs) + 1, sizeof *an.findings);
    if (!an.findings)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(fs, i, e)
    {
        sa_finding *f = &an.findings[an.n_findings++];
        json_t *t = json_object_get(e, "title"), *ev = json_object_get(e, "evidence");
        snprintf(f->title, sizeof f->title, "%s", json_is_string(t) ? json_string_value(t) : "");
        snprintf(f->evidence, sizeof f->evidence, "%s",
                 json_is_string(ev) ? json_string_value(ev) : "");
    }
    sbuf t;
    sbuf_init(&t);
    sx_txt_analysis(&an, &t);
    free(an.findings);
    m->analysis_text = strdup(t.data ? t.data : "");
    sbuf_free(&t);
    return m->analysis_text ? 0 : -1;
}

/* Facts of one JSON object as "prefix.key" info pairs. */
static int facts(sm_model *m, json_t *o, const char *prefix)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (!json_is_string(v))
            continue;
        sm_kv *n = realloc(m->info, (m->n_info + 1) * sizeof *n);
        if (!n)
            return -1;
        m->info = n;
        char key[256];
        snprintf(key, sizeof key, "%s%s", prefix, k);
        n[m->n_info].key = strdup(key);
        n[m->n_info].value = strdup(json_string_value(v));
        if (!n[m->n_info].key || !n[m->n_info].value)
            return -1;
        m->n_info++;
    }
    return 0;
}

/* cli_read_report's parts, each 0 or -1 out of memory. The run's facts and summary figures. */
static int read_run(json_t *root, const char *path, sm_model *m)
{
    json_t *run = json_object_get(root, "run"), *sum = json_object_get(root, "summary");
    m->name = str(run, "name");
    m->host = str(run, "host");
    m->unit = str(run, "unit");
    m->sonde_version = str(run, "sonde_version");
    m->path = strdup(path);
    if (!m->name || !m->host || !m->unit || !m->sonde_version || !m->path || sm_safe_name(&m->name))
        return -1;
    m->pid = I32(run, "pid");
    m->rank = json_is_number(json_object_get(run, "rank")) ? I32(run, "rank") : -1;
    m->world_size = I32(run, "world_size") > 0 ? I32(run, "world_size") : 1;
    m->start_real_ns = U64(run, "start_unix_ns");
    m->start_mono_ns = U64(run, "start_mono_ns");
    m->peak_flops = num0(run, "peak_flops");
    m->duration_ns = NS(run, "duration_s");
    m->clean_end = json_is_true(json_object_get(run, "clean_end"));
    m->total_sections = U64(sum, "sections");
    m->total_steps = U64(sum, "steps");
    m->total_flops = num0(sum, "flops");
    double fps = num0(sum, "flops_per_s");
    m->total_flops_s = fps > 0 ? m->total_flops / fps : 0;
    m->dropped_events = U64(sum, "dropped_events");
    m->sections_end_lost = U64(sum, "sections_end_lost");
    m->backpressure_chunks = U64(sum, "backpressure_chunks");
    m->backpressure_ns = NS(sum, "backpressure_wait_s");
    m->short_spans = U64(sum, "short_sections_left_out");
    m->trace.sections = U64(sum, "trace_sections");
    m->trace.folded = U64(sum, "trace_sections_folded");
    m->trace.min_ns = m->trace.folded ? llround(num0(sum, "trace_folded_under_s") * 1e9)
                                      : INT64_MIN;
    if (facts(m, json_object_get(run, "system") ? json_object_get(run, "system")
                                                : json_object_get(root, "system"), "system.") ||
        facts(m, json_object_get(root, "config"), "config.") ||
        facts(m, json_object_get(run, "metadata"), "metadata."))
        return -1;
    sm_config_read(m);
    return 0;
}

/* The counters, the sessions (their names the model's sites 1..n) and the threads. */
static int read_lists(json_t *root, sm_model *m)
{
    json_t *a = json_object_get(root, "counters"), *e;
    size_t i;
    m->counters = calloc(json_array_size(a) + 1, sizeof *m->counters);
    if (!m->counters)
        return -1;
    json_array_foreach(a, i, e)
    {
        sm_counter *c = &m->counters[m->n_counters++];
        c->name = str(e, "name");
        if (!c->name)
            return -1;
        json_t *src = json_object_get(e, "source");
        c->system = json_is_string(src) && !strcmp(json_string_value(src), "sampler");
        c->n = c->samples = U64(e, "samples"); /* figures alone: t_ns stays NULL */
        c->stride = 1;
        c->min = num0(e, "min");
        c->max = num0(e, "max");
        c->sum = num0(e, "mean") * (double)c->n;
        c->last = num0(e, "last");
    }
    /* sessions: their names become the model's sites 1..n */
    a = json_object_get(root, "sessions");
    m->sites = calloc(json_array_size(a) + 1, sizeof *m->sites);
    m->sessions = calloc(json_array_size(a) + 1, sizeof *m->sessions);
    if (!m->sites || !m->sessions)
        return -1;
    m->n_sites = 1;
    if (!(m->sites[0].name = strdup("?")))
        return -1;
    json_array_foreach(a, i, e)
    {
        sm_site *st2 = &m->sites[m->n_sites];
        if (!(st2->name = str(e, "name")))
            return -1;
        st2->stat = -1;
        sm_session *s = &m->sessions[m->n_sessions++];
        s->name = (uint32_t)m->n_sites++;
        s->start_ns = NS(e, "start_s");
        s->end_ns = NS(e, "end_s");
        s->meta = -1;
        s->units = num0(e, "units");
        s->flops = num0(e, "flops");
    }
    a = json_object_get(root, "threads");
    m->threads = calloc(json_array_size(a) + 1, sizeof *m->threads);
    if (!m->threads)
        return -1;
    json_array_foreach(a, i, e)
    {
        sm_thread *t = &m->threads[m->n_threads++];
        t->index = U32(e, "index");
        t->tid = U32(e, "tid");
        t->spans = U64(e, "sections");
        t->name = str(e, "name");
        if (!t->name)
            return -1;
    }
    return 0;
}

int cli_read_report(const char *path, const char *text, size_t len, sm_model *m)
{
    memset(m, 0, sizeof *m);
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return sonde__fail(SONDE_EFORMAT, "%s:%d:%d: JSON error: %s", path, err.line, err.column,
                           err.text);
    int rc = SONDE_EFORMAT;
    json_t *schema = json_object_get(root, "schema"), *ver = json_object_get(root, "schema_version");
    if (!json_is_object(root) || !json_is_string(schema) ||
        strcmp(json_string_value(schema), "sonde-report")) {
        sonde__fail(rc, "%s: %s, not a sonde report (no \"schema\": \"sonde-report\"); "
                        "expected a .sonde file or a NAME.json report", path,
                    json_object_get(root, "traceEvents") || json_is_array(root)
                        ? "a Chrome trace"
                        : json_object_get(root, "schema") ? "a JSON file of another schema"
                                                          : "a JSON file");
        goto out;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        sonde__fail(rc, "%s: a sonde report of schema_version %s; this sonde reads version 1",
                    path, json_is_integer(ver) ? "" : "?");
        if (json_is_integer(ver))
            sonde__fail(rc, "%s: a sonde report of schema_version %lld; this sonde reads version 1",
                        path, (long long)json_integer_value(ver));
        goto out;
    }
    rc = SONDE_ENOMEM;
    if (read_run(root, path, m) != 0)
        goto out;

    json_t *a = json_object_get(root, "throughput"), *e;
    size_t i;
    m->rates = calloc(json_array_size(a) + 1, sizeof *m->rates);
    if (!m->rates)
        goto out;
    json_array_foreach(a, i, e)
    {
        sm_rate *r = &m->rates[m->n_rates++];
        r->unit = str(e, "unit");
        r->units = num0(e, "units");
        r->seconds = num0(e, "seconds");
        if (!r->unit)
            goto out;
    }
    a = json_object_get(root, "sections");
    m->stats = calloc(json_array_size(a) + 1, sizeof *m->stats);
    if (!m->stats)
        goto out;
    json_array_foreach(a, i, e)
    {
        if ((rc = read_stat(e, i, path, &m->stats[m->n_stats++])) != 0)
            goto out;
    }
    rc = SONDE_ENOMEM;
    json_t *st = json_object_get(root, "steps");
    m->steps_summary.count = U64(st, "count");
    m->steps_summary.per_s = num0(st, "steps_per_s");
    m->steps_summary.mean_s = num0(st, "mean_s");
    m->steps_summary.min_s = num0(st, "min_s");
    m->steps_summary.max_s = num0(st, "max_s");
    m->steps_summary.p50_s = num0(st, "p50_s");
    m->steps_summary.p90_s = num0(st, "p90_s");
    m->steps_summary.p99_s = num0(st, "p99_s");
    m->steps_summary.first_s = num0(st, "first_s");
    if (read_lists(root, m) != 0)
        goto out;
    if (read_analysis(root, m) != 0)
        goto out;
    a = json_object_get(root, "warnings");
    m->warnings = calloc(json_array_size(a) + 1, sizeof *m->warnings);
    if (!m->warnings)
        goto out;
    json_array_foreach(a, i, e)
    {
        if (!json_is_string(e))
            continue;
        if (!(m->warnings[m->n_warnings++] = strdup(json_string_value(e))))
            goto out;
    }
    rc = 0;
out:
    json_decref(root);
    if (rc) {
        if (rc == SONDE_ENOMEM)
            sonde__fail(rc, "%s: out of memory", path);
        sm_free(m);
    }
    return rc;
}

/* What a file that is neither a .sonde file nor a JSON report looks like, for the message: its
 * first bytes (head, got of them) against the kinds a user may hand a command by mistake. */
static const char *kind_of(const unsigned char *head, size_t got)
{
    if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return "a gzip file (a .trace.json.gz trace?)";
    if (got == 0)
        return "an empty file";
    size_t i = 0;
    while (i < got && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
        i++;
    if (i < got && (head[i] == '{' || head[i] == '['))
        return NULL; /* JSON: the report reader says what kind */
    if (memchr(head, 0, got))
        return "a binary file sonde did not write";
    return memchr(head, ',', got) ? "a CSV or text file" : "a text file";
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int dir_runs(const char *dir, int sonde_only, char ***v, size_t *n, size_t *cap);

/* 1 when the JSON file at path is a sonde report: "schema": "sonde-report" opens it (a
 * directory also holds Chrome traces and other programs' JSON, which are not runs). */
static int is_sonde_report(const char *path)
{
    char head[256];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[got] = 0;
    return strstr(head, "\"sonde-report\"") != NULL;
}

/* dir/name into *out (malloc'ed), one '/' between them whether or not dir ends with one (a
 * folder given as "sonde-out/" made "sonde-out//NAME.json" in every line). asprintf's result. */
static int join_dir(char **out, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    return asprintf(out, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

/* dir's rank_* subdirectories' runs (their .sonde files, else their reports), in name order. */
static int rank_dirs_runs(const char *dir, int sonde_only, char ***v, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **subs = NULL;
    size_t ns = 0, cs = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "rank_", 5))
            continue;
        char *p;
        if (join_dir(&p, dir, e->d_name) < 0) {
            rc = -1;
            break;
        }
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            free(p);
            continue;
        }
        if (ns == cs) {
            size_t nc = cs ? 2 * cs : 8;
            char **g = realloc(subs, nc * sizeof *g);
            if (!g) {
                free(p);
                rc = -1;
                break;
            }
            subs = g;
            cs = nc;
        }
        subs[ns++] = p;
    }
    closedir(d);
    sonde__sort(subs, ns, sizeof *subs, cmp_path);
    for (size_t i = 0; i < ns; i++) {
        size_t before = *n;
        if (!rc && dir_runs(subs[i], 1, v, n, cap) != 0 && errno == ENOMEM)
            rc = -1;
        if (!rc && !sonde_only && *n == before && dir_runs(subs[i], 0, v, n, cap) != 0 &&
            errno == ENOMEM)
            rc = -1;
        free(subs[i]);
    }
    free(subs);
    if (rc)
        errno = ENOMEM;
    return rc;
}

int cli_dir_runs(const char *dir, int sonde_only, char ***v, size_t *n, size_t *cap)
{
    size_t before = *n;
    if (dir_runs(dir, sonde_only, v, n, cap) != 0)
        return -1;
    return *n > before ? 0 : rank_dirs_runs(dir, sonde_only, v, n, cap);
}

static int dir_runs(const char *dir, int sonde_only, char ***v, size_t *n, size_t *cap)
{
    for (int pass = sonde_only; pass < 2; pass++) {
        size_t before = *n;
        DIR *d = opendir(dir);
        if (!d)
            return -1;
        for (struct dirent *e; (e = readdir(d));) {
            const char *nm = e->d_name;
            int want = pass == 0 ? ends_with(nm, ".json") && !ends_with(nm, ".memory.json") &&
                                       !ends_with(nm, ".aggregate.json") &&
                                       !ends_with(nm, ".diff.json")
                                 : ends_with(nm, ".sonde") && !strstr(nm, ".pid");
            if (!want)
                continue;
            if (*n == *cap) {
                size_t nc = *cap ? 2 * *cap : 16;
                char **g = realloc(*v, nc * sizeof *g);
                if (!g)
                    goto oom;
                *v = g;
                *cap = nc;
            }
            if (join_dir(&(*v)[*n], dir, nm) < 0)
                goto oom;
            if (cli_regular_file((*v)[*n]) && /* a FIFO, a directory: not a run */
                (pass == 1 || is_sonde_report((*v)[*n])))
                (*n)++;
            else
                free((*v)[*n]);
            continue;
        oom:
            closedir(d);
            errno = ENOMEM;
            return -1;
        }
        closedir(d);
        if (*n > before) { /* JSON reports found: the .sonde files are the same runs */
            sonde__sort(*v + before, *n - before, sizeof **v, cmp_path);
            return 0;
        }
    }
    return 0;
}

/* 1 when name is STEM.pidN....sonde: the file of a program that ran under `sonde run STEM`. */
static int program_file_of(const char *name, const char *stem, size_t stem_len)
{
    size_t n = strlen(name);
    return n > stem_len + 10 && !strncmp(name, stem, stem_len) &&
           !strncmp(name + stem_len, ".pid", 4) && name[stem_len + 4] >= '0' &&
           name[stem_len + 4] <= '9' && !strcmp(name + n - 6, ".sonde");
}

int cli_join_programs(const char *cmd, const char *path, sm_model *m)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    if (bl <= 6 || strcmp(base + bl - 6, ".sonde"))
        return 0;
    size_t stem_len = bl - 6;
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup("./");
    if (!dir)
        return -1;
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int joined = 0, rc = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!program_file_of(e->d_name, base, stem_len))
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            char **g = realloc(names, nc * sizeof *g);
            if (!g) {
                rc = -1;
                break;
            }
            names = g;
            cap = nc;
        }
        if (asprintf(&names[n], "%s%s", dir, e->d_name) < 0) {
            rc = -1;
            break;
        }
        n++;
    }
    if (d)
        closedir(d);
    sonde__sort(names, n, sizeof *names, cmp_path); /* the same order whatever readdir gives */
    struct stat run_st;
    const char *run_id = sm_info(m, "run.id");
    int have_st = stat(path, &run_st) == 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        sm_model child;
        struct stat st;
        if (!cli_regular_file(names[i]))
            continue;
        /* Only the run's own files: its owner's (a shared directory may hold another user's,
         * planted), and of its id (another run of that name left its files there too). */
        if (have_st && stat(names[i], &st) == 0 && st.st_uid != run_st.st_uid) {
            cli_fail(0, cmd, "%s: owned by uid %u, not by the run's owner (uid %u): not of this "
                     "run, left out", names[i], (unsigned)st.st_uid, (unsigned)run_st.st_uid);
            continue;
        }
        if (sm_read_file(names[i], &child) != 0) {
            cli_fail(0, cmd, "%s (left out)", sonde_last_error());
            continue;
        }
        const char *child_id = sm_info(&child, "run.id");
        if (run_id && (!child_id || strcmp(child_id, run_id))) {
            cli_fail(0, cmd, "%s: of another run (run id %s, this run's %s): left out", names[i],
                     child_id ? child_id : "none", run_id);
            sm_free(&child);
            continue;
        }
        if (sm_merge(m, &child) != 0)
            cli_fail(0, cmd, "%s: %s (left out)", names[i], sonde_last_error());
        else
            joined++;
        sm_free(&child);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(dir);
    if (rc)
        cli_fail(0, cmd, "out of memory looking for the program files of %s", path);
    return rc ? -1 : joined;
}

/* 1 when name is STEM.pidN-rankR.sonde: a rank's run, the program of a `sonde run STEM`. */
static int rank_program_of(const char *name, const char *stem, size_t stem_len)
{
    size_t n = strlen(name), digits;
    if (n <= stem_len + 4 || strncmp(name, stem, stem_len) || strncmp(name + stem_len, ".pid", 4))
        return 0;
    const char *q = name + stem_len + 4;
    if (!(digits = strspn(q, "0123456789")) || strncmp(q + digits, "-rank", 5))
        return 0;
    q += digits + 5;
    digits = strspn(q, "0123456789");
    return digits && !strcmp(q + digits, ".sonde");
}

/* v[i] replaced by the ranks of its `sonde run` recording (cli_run_ranks). */
static int ranks_of_run(char ***v, size_t *count, size_t *cap, size_t i)
{
    char *path = (*v)[i];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base), ext = bl > 5 && !strcmp(base + bl - 5, ".json") ? 5
                                  : bl > 6 && !strcmp(base + bl - 6, ".sonde") ? 6 : 0;
    if (!ext)
        return 0;
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup("./");
    DIR *d = dir ? opendir(dir) : NULL;
    char **found = NULL;
    size_t n = 0;
    int rc = dir ? 0 : -1;
    for (struct dirent *e; d && !rc && (e = readdir(d));) {
        if (!rank_program_of(e->d_name, base, bl - ext))
            continue;
        char **g = realloc(found, (n + 1) * sizeof *g);
        if (!g || asprintf(&g[n], "%s%s", slash ? dir : "", e->d_name) < 0)
            rc = -1;
        else
            n++;
        if (g)
            found = g;
    }
    if (d)
        closedir(d);
    free(dir);
    if (!rc && n) {
        sonde__sort(found, n, sizeof *found, cmp_path);
        if (*count + n - 1 > *cap) {
            char **g = realloc(*v, (*count + n) * sizeof *g);
            if (!g)
                rc = -1;
            else
                *v = g, *cap = *count + n;
        }
    }
    if (!rc && n) {
        free((*v)[i]);
        memmove(*v + i + n, *v + i + 1, (*count - i - 1) * sizeof **v);
        memcpy(*v + i, found, n * sizeof *found);
        *count += n - 1;
        n = 0;
    }
    for (size_t k = 0; k < n; k++)
        free(found[k]);
    free(found);
    return rc;
}

int cli_run_ranks(char ***v, size_t *n, size_t *cap, size_t from)
{
    for (size_t k = from; k < *n; k++) {
        size_t had = *n;
        if (ranks_of_run(v, n, cap, k) != 0)
            return -1;
        k += *n - had; /* past the ranks put in its place */
    }
    return 0;
}

#define EXPECTED "expected a .sonde file or a NAME.json report"

int cli_load(const char *cmd, const char *path, sm_model *m)
{
    return cli_load_fed(cmd, path, NULL, m);
}

/* Opens path, a regular file, and reads its first bytes into head (*got of them, at most 255, a
 * NUL after them); the file, or
 * NULL with the failure printed (a directory, not a regular file, unreadable) in the words of
 * what was expected. */
static FILE *open_input(const char *cmd, const char *path, const char *expected,
                        unsigned char head[256], size_t *got)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        cli_fail(CLI_USAGE, cmd, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_fail(CLI_USAGE, cmd, "%s is a directory; %s (e.g. %s%sNAME.sonde)", path, expected,
                 path, path[strlen(path) - 1] == '/' ? "" : "/");
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_fail(CLI_USAGE, cmd, "%s: not a regular file; %s", path, expected);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_fail(CLI_USAGE, cmd, "%s: %s", path, strerror(errno));
        return NULL;
    }
    memset(head, 0, 256);
    *got = fread(head, 1, 255, f); /* the last byte stays 0: the head is a string to strstr */
    return f;
}

static int is_recording(const unsigned char *head, size_t got)
{
    return got >= SONDE_FILE_MAGIC_LEN && !memcmp(head, SONDE_FILE_MAGIC, SONDE_FILE_MAGIC_LEN);
}

int cli_check_recording(const char *cmd, const char *path)
{
    static const char expected[] = "expected a .sonde file (the recording)";
    unsigned char head[256];
    size_t got;
    FILE *f = open_input(cmd, path, expected, head, &got);
    if (!f)
        return CLI_USAGE;
    fclose(f);
    if (is_recording(head, got))
        return 0;
    const char *kind = kind_of(head, got);
    if (kind)
        return cli_fail(CLI_USAGE, cmd, "%s: %s; %s", path, kind, expected);
    if (strstr((const char *)head, "\"sonde-report\""))
        return cli_fail(CLI_USAGE, cmd, "%s: a sonde JSON report, not a recording; %s: the .sonde "
                        "file beside it (`sonde report` and `sonde summary` read reports)", path,
                        expected);
    return cli_fail(CLI_USAGE, cmd, "%s: not a .sonde file; %s", path, expected);
}

int cli_load_fed(const char *cmd, const char *path, const sm_feed *feed, sm_model *m)
{
    struct stat st;
    unsigned char head[256];
    size_t got;
    FILE *f = open_input(cmd, path, EXPECTED, head, &got);
    if (!f)
        return CLI_USAGE;
    if (is_recording(head, got)) {
        fclose(f);
        if (sm_read_file_fed(path, NULL, 0, feed, m) != 0)
            return cli_fail(CLI_USAGE, cmd, "%s", sonde_last_error());
        if (cli_join_programs(cmd, path, m) < 0) {
            sm_free(m);
            return CLI_USAGE;
        }
        return 0;
    }
    const char *kind = kind_of(head, got);
    if (kind) {
        fclose(f);
        return cli_fail(CLI_USAGE, cmd, "%s: %s; " EXPECTED, path, kind);
    }
    /* a JSON report */
    if (fstat(fileno(f), &st) != 0 || st.st_size > (off_t)(512u << 20)) {
        fclose(f);
        return cli_fail(CLI_USAGE, cmd, "%s: a JSON file over 512 MiB; " EXPECTED, path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return cli_fail(CLI_USAGE, cmd, "%s: out of memory", path);
    }
    rewind(f);
    size_t r = fread(buf, 1, n, f);
    fclose(f);
    buf[r] = 0;
    int rc = cli_read_report(path, buf, r, m);
    free(buf);
    if (rc)
        return cli_fail(CLI_USAGE, cmd, "%s", sonde_last_error());
    return 0;
}
