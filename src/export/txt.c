/* txt.c - NAME.txt: an aligned table like PyTorch's key_averages, sorted by total time, with the
#define _GNU_SOURCE
 * run's duration, throughput, FLOP/s, steps and warnings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/analyze.h"
#include "../analyze/gpu.h"
#include "export.h"
#include "../util/alloc.h"
#include "../util/sort.h"

void sx_fmt_dur(char *out, size_t cap, double s)
{
    double a = fabs(s);
    if (a >= 1)
        snprintf(out, cap, "%.3f s", s);
    else if (a >= 1e-3)
        snprintf(out, cap, "%.3f ms", s * 1e3);
    else if (a >= 1e-6)
        snprintf(out, cap, "%.3f us", s * 1e6);
    else
        snprintf(out, cap, "%.0f ns", s * 1e9);
}

void sx_fmt_si(char *out, size_t cap, double v, const char *unit)
{
    static const char *pre[] = {"", "K", "M", "G", "T", "P", "E"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 6) {
        v /= 1000;
        i++;
    }
    snprintf(out, cap, "%.2f %s%s", v, pre[i], unit);
}

#define NAME_W 40

/* sonde's own samples worth a line in the summary. */
static int headline(const char *name)
{
    static const char *keep[] = {"cpu %", "process cpu %", "rss MiB", "rss peak MiB",
                                 "memory used MiB", "load 1m"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (!strcmp(name, keep[i]))
            return 1;
    unsigned g;
    char tail[32];
    if (sscanf(name, "gpu%u %31[^\n]", &g, tail) == 2)
        return !strcmp(tail, "util %") || !strcmp(tail, "memory MiB") ||
               !strcmp(tail, "temperature C") || !strcmp(tail, "power W");
    return 0;
}

typedef struct meta_ctx {
    sbuf *b;
    sbuf_pool *pool;
} meta_ctx;

static void txt_meta(const char *key, const char *value, void *ctx)
{
    meta_ctx *c = ctx;
    sbuf *b = c->b;
    sbuf_printf(b, "%s%s=%s", b->len && b->data[b->len - 1] == ' ' ? "" : ", ",
                sbuf_oneline(c->pool, key), sbuf_oneline(c->pool, value));
}

int sx_txt(const sm_model *m, sbuf *b) { return sx_txt_opts(m, b, SX_SORT_TOTAL, 0, 0); }
static int sx_txt_body(sx_report *r, sbuf *b, int sort, size_t top, int wide);

void sx_txt_analysis(const struct sa_report *an, sbuf *b)
{
    const sa_diffusion *d = &an->diffusion;
    if (d->steps.count) {
        sbuf_printf(b, "Diffusion steps: %zu, %.2f steps/s, p50 %.3f s, slowest step %llu "
                       "(%.3f s)", d->steps.count, d->steps_per_s, d->steps.p50_s,
                    (unsigned long long)d->steps.slowest, d->steps.max_s);
        if (isfinite(d->timestep_first))
            sbuf_printf(b, ", timesteps %.6g to %.6g", d->timestep_first, d->timestep_last);
        if (isfinite(d->guidance_min) && d->guidance_min == d->guidance_max)
            sbuf_printf(b, ", guidance %.6g", d->guidance_min);
        else if (isfinite(d->guidance_min))
            sbuf_printf(b, ", guidance %.6g to %.6g", d->guidance_min, d->guidance_max);
        sbuf_putc(b, '\n');
    }
    if (d->blocks.count) {
        sbuf_printf(b, "Blocks: %zu, %.2f FPS, %.2f BPS, slowest block %llu (%.3f s)",
                    d->blocks.count, d->fps, d->bps, (unsigned long long)d->blocks.slowest,
                    d->blocks.max_s);
        if (isfinite(d->block_memory_peak_mb))
            sbuf_printf(b, ", peak block memory %.6g MB", d->block_memory_peak_mb);
        sbuf_putc(b, '\n');
    }
    sbuf_pool pool = {0};
    for (size_t i = 0; i < an->n_findings; i++)
        sbuf_printf(b, "Recommendation: %s (%s)\n", sbuf_oneline(&pool, an->findings[i].title),
                    sbuf_oneline(&pool, an->findings[i].evidence));
    b->oom |= pool.oom;
    sbuf_pool_free(&pool);
}

static int g_sort; /* qsort has no context argument */

static double sort_key(const sm_stat *s)
{
    switch (g_sort) {
    case SX_SORT_SELF: return s->self_s;
    case SX_SORT_COUNT: return (double)s->count;
    case SX_SORT_MEAN: return s->mean_s;
    default: return s->total_s;
    }
}

static int cmp_sort(const void *a, const void *b)
{
    double x = sort_key(*(const sm_stat *const *)a), y = sort_key(*(const sm_stat *const *)b);
    if (x != y)
        return x > y ? -1 : 1;
    return strcmp((*(const sm_stat *const *)a)->name, (*(const sm_stat *const *)b)->name);
}

static int txt_in(sx_report *r, sbuf *b, int sort, size_t top, int wide)
{
    size_t from = b->len;
    int rc = sx_txt_body(r, b, sort, top, wide);
    return sbuf_text_safe(b, from) || rc ? -1 : 0; /* names from the run, printed as text */
}

int sx_txt_opts(const sm_model *m, sbuf *b, int sort, size_t top, int wide)
{
    sx_report r;
    sx_report_init(&r, m);
    int rc = txt_in(&r, b, sort, top, wide);
    sx_report_free(&r);
    return rc;
}

int sx_txt_report(sx_report *r, sbuf *b) { return txt_in(r, b, SX_SORT_TOTAL, 0, 0); }

static int sx_txt_lines(sx_report *r, sbuf *b, int sort, size_t top, int wide,
                        sbuf_pool *pool);

/* Every name from the run goes through L(): one line each, whatever it holds. */
static int sx_txt_body(sx_report *r, sbuf *b, int sort, size_t top, int wide)
{
    sbuf_pool pool = {0};
    int rc = sx_txt_lines(r, b, sort, top, wide, &pool);
    if (pool.oom)
        rc = -1;
    sbuf_pool_free(&pool);
    return rc;
}

#define L(s) sbuf_oneline(pool, (s))

/* The table: a rule, the header, one row per section name in the order asked for (at most
 * top), the notes on hot functions and sketched percentiles, a rule. 0, or -1 out of memory. */
static int txt_table(const sm_model *m, sbuf *b, int sort, size_t top, int wide, sbuf_pool *pool)
{
    char d[32];
    /* rows in the order asked for, at most top of them */
    const sm_stat **rows = sonde__malloc((m->n_stats ? m->n_stats : 1) * sizeof *rows);
    if (!rows)
        return -1;
    for (size_t i = 0; i < m->n_stats; i++)
        rows[i] = &m->stats[i];
    g_sort = sort;
    sonde__sort(rows, m->n_stats, sizeof *rows, cmp_sort);
    size_t nrows = top && top < m->n_stats ? top : m->n_stats;
    size_t w = 4;
    for (size_t i = 0; i < nrows; i++) {
        size_t l = strlen(L(rows[i]->name));
        if (l > w)
            w = l;
    }
    /* the narrow table fits 100 columns (the name cut to fit); wide adds the columns of the
     * statistics' list with table 2 (Min, Max, P90) and longer names */
    size_t ncols = 0, nnarrow = 0;
    for (size_t c = 0; c < sx_n_stat_cols; c++) {
        ncols += sx_stat_cols[c].table != 0;
        nnarrow += sx_stat_cols[c].table == 1;
    }
    size_t name_w = wide ? NAME_W : 100 - 7 - 1 - nnarrow * 11 - 8;
    if (w > name_w)
        w = name_w;
    int cw = wide ? 11 : 10; /* a duration column, its space included */
    char rule[512];
    size_t rl = w + 8 + (wide ? ncols : nnarrow) * (size_t)(cw + 1) + 8;
    if (rl > sizeof rule - 1)
        rl = sizeof rule - 1;
    memset(rule, '-', rl);
    rule[rl] = 0;
    sbuf_printf(b, "%s\n%-*s %7s", rule, (int)w, "Name", "Count");
    for (size_t c = 0; c < sx_n_stat_cols; c++)
        if (sx_stat_cols[c].table == 1 || (wide && sx_stat_cols[c].table))
            sbuf_printf(b, " %*s", cw, sx_stat_cols[c].label);
    sbuf_printf(b, " %7s\n%s\n", "%Run", rule);
    for (size_t i = 0; i < nrows; i++) {
        const sm_stat *s = rows[i];
        char name[NAME_W + 1];
        const char *full = L(s->name);
        size_t l = strlen(full);
        if (l > w) {
            memcpy(name, full, w - 3);
            memcpy(name + w - 3, "...", 4);
        } else {
            memcpy(name, full, l + 1);
        }
        sbuf_printf(b, "%-*s %7llu", (int)w, name, (unsigned long long)s->count);
        for (size_t c = 0; c < sx_n_stat_cols; c++) {
            if (sx_stat_cols[c].table != 1 && !(wide && sx_stat_cols[c].table))
                continue;
            sx_fmt_dur(d, sizeof d, sx_stat_col_s(s, &sx_stat_cols[c]));
            sbuf_printf(b, " %*s", cw, d);
        }
        sbuf_printf(b, " %6.1f%%\n", s->share * 100);
    }
    sonde__free(rows);
    if (nrows < m->n_stats)
        sbuf_printf(b, "... %zu more section names (--top)\n", m->n_stats - nrows);
    for (size_t i = 0; i < m->n_stats; i++)
        if (m->stats[i].aggregated)
            sbuf_printf(b, "%s: %llu of its %llu calls counted, not recorded (a hot function: "
                        "in count, total and mean, not in min, max or percentiles)\n",
                        L(m->stats[i].name), (unsigned long long)m->stats[i].aggregated,
                        (unsigned long long)m->stats[i].count);
    size_t sketched = 0;
    for (size_t i = 0; i < m->n_stats; i++)
        sketched += m->stats[i].sketched != 0;
    if (sketched)
        sbuf_printf(b, "Percentiles of %zu name(s) with over %u instances: from a quantile "
                       "sketch, within %.0f%%\n", sketched, SM_SKETCH_AT, 100 * SM_SKETCH_ALPHA);
    sbuf_printf(b, "%s\n", rule);
    return 0;
}

/* The run's own lines: duration, metadata, throughput, compute, steps, counters. */
static void txt_run_lines(const sm_model *m, sbuf *b, sbuf_pool *pool)
{
    double flops = m->total_flops, flops_s = m->total_flops_s;
    char d[32], x[64];
    sx_fmt_dur(d, sizeof d, (double)m->duration_ns / 1e9);
    sbuf_printf(b, "Run duration: %s\n", d);
    char **workers = NULL; /* its forked children's runs beside it (DataLoader workers) */
    size_t n_workers = 0;
    if (sm_worker_runs(m, &workers, &n_workers) != 0)
        b->oom = 1;
    for (size_t i = 0; i < n_workers; i++)
        sbuf_printf(b, "%s%s%s", i ? ", " : "Workers (forked, their own runs): ", L(workers[i]),
                    i + 1 == n_workers ? "\n" : "");
    sm_worker_runs_free(workers, n_workers);
    sbuf meta;
    sbuf_init(&meta);
    sbuf_puts(&meta, "Run metadata: ");
    size_t empty = meta.len;
    sm_each_run_meta(m, txt_meta, &(meta_ctx){&meta, pool});
    if (meta.len > empty)
        sbuf_printf(b, "%s\n", meta.data);
    b->oom |= meta.oom;
    sbuf_free(&meta);
    for (size_t i = 0; i < m->n_rates; i++) {
        const sm_rate *r = &m->rates[i];
        if (r->units > 0)
            sbuf_printf(b, "Throughput: %.2f %s/s (%.6g %s in %.3f s)\n",
                        r->seconds > 0 ? r->units / r->seconds : 0, L(r->unit), r->units, L(r->unit),
                        r->seconds);
    }
    if (flops > 0) {
        sx_fmt_si(x, sizeof x, flops_s > 0 ? flops / flops_s : 0, "FLOP/s");
        sbuf_printf(b, "Compute: %.6g FLOPs, %s", flops, x);
        if (m->peak_flops > 0)
            sbuf_printf(b, " (%.1f%% of the %.3g FLOP/s peak)",
                        100 * (flops_s > 0 ? flops / flops_s : 0) / m->peak_flops, m->peak_flops);
        sbuf_putc(b, '\n');
    }
    if (m->steps_summary.count) {
        const sm_steps_summary ss = m->steps_summary;
        char p50[32], p99[32];
        sx_fmt_dur(p50, sizeof p50, ss.p50_s);
        sx_fmt_dur(p99, sizeof p99, ss.p99_s);
        sbuf_printf(b, "Steps: %zu, %.2f steps/s, p50 %s, p99 %s\n", ss.count, ss.per_s, p50, p99);
    }
    /* The program's counters in full; of sonde's samples, the headline figures only (every
     * counter is in NAME.json and the trace). */
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        if (c->system && !headline(c->name))
            continue;
        sbuf_printf(b, "%s %s: min %.6g, mean %.6g, max %.6g, last %.6g (%zu samples)\n",
                    c->system ? "Sampled" : "Counter", L(c->name), c->min,
                    sm_counter_mean(c), c->max, c->last, (size_t)c->samples);
    }
}

/* The machine: GPU status and notes, the CPU, memory and kernel, each GPU. */
static void txt_system(const sm_model *m, sbuf *b, sbuf_pool *pool)
{
    const char *gs = sm_info(m, "system.gpu_status"), *gn = sm_info(m, "system.gpu_notes");
    if (gs)
        sbuf_printf(b, "%s\n", L(gs));
    if (gn)
        sbuf_printf(b, "GPU figures unavailable: %s\n", L(gn));
    const char *cpu = sm_info(m, "system.cpu_model"), *cores = sm_info(m, "system.cpu_cores");
    const char *mem = sm_info(m, "system.memory_total_mib"), *kern = sm_info(m, "system.kernel");
    if (cpu || kern)
        sbuf_printf(b, "System: %s, %s cores, %s MiB, %s\n", cpu ? L(cpu) : "?",
                    cores ? L(cores) : "?", mem ? L(mem) : "?", kern ? L(kern) : "?");
    for (int g = 0; g < 64; g++) {
        char key[48];
        snprintf(key, sizeof key, "system.gpu%d_name", g);
        const char *name = sm_info(m, key);
        if (!name)
            continue;
        snprintf(key, sizeof key, "system.gpu%d_memory_total_mib", g);
        const char *gm = sm_info(m, key);
        const char *drv = sm_info(m, "system.gpu_driver");
        sbuf_printf(b, "GPU %d: %s, %s MiB, driver %s\n", g, L(name), gm ? L(gm) : "?",
                    drv ? L(drv) : "?");
    }
}

/* The samples' share by process (the folded stacks' first frame: "python3 (rank 0)" for a rank
 * under `sonde run`), where they come from more than one: a line, the 8 largest. */
static void txt_processes(sbuf *b, const sm_profile *pr, sbuf_pool *pool)
{
    enum { MAXP = 64 };
    const char *name[MAXP];
    size_t len[MAXP], n = 0;
    uint64_t count[MAXP], other = 0;
    for (size_t i = 0; i < pr->n_stacks; i++) {
        const char *s = pr->stacks[i], *semi = strchr(s, ';');
        size_t l = semi ? (size_t)(semi - s) : strlen(s), k = 0;
        while (k < n && (len[k] != l || strncmp(name[k], s, l)))
            k++;
        if (k == n && n == MAXP) {
            other += pr->counts[i];
            continue;
        }
        if (k == n) {
            name[n] = s;
            len[n] = l;
            count[n++] = 0;
        }
        count[k] += pr->counts[i];
    }
    if (n < 2 || !pr->samples)
        return;
    sbuf_puts(b, "  by process:");
    for (size_t shown = 0; shown < 8 && shown < n; shown++) {
        size_t top = shown;
        for (size_t k = shown + 1; k < n; k++)
            if (count[k] > count[top])
                top = k;
        const char *tn = name[top];
        size_t tl = len[top];
        uint64_t tc = count[top];
        name[top] = name[shown], len[top] = len[shown], count[top] = count[shown];
        name[shown] = tn, len[shown] = tl, count[shown] = tc;
        char one[128];
        snprintf(one, sizeof one, "%.*s", (int)(tl < 100 ? tl : 100), tn);
        sbuf_printf(b, "%s %s %.1f%%", shown ? "," : "", L(one),
                    100.0 * (double)tc / (double)pr->samples);
    }
    for (size_t k = 8; k < n; k++)
        other += count[k];
    if (other)
        sbuf_printf(b, ", the rest %.1f%%", 100.0 * (double)other / (double)pr->samples);
    sbuf_putc(b, '\n');
}

/* The Python functions by own samples (the innermost Python frame of each: docs/stacks.md),
 * up to 15; nothing when the samples have no Python frames. */
static void txt_python(sbuf *b, const sm_profile *pr, sbuf_pool *pool)
{
    if (!pr->n_python)
        return;
    sbuf_printf(b, "Python functions by own samples (the innermost Python frame: its code and the "
                   "C code it called):\n");
    sbuf_printf(b, "  %-40s %-28s %7s %7s\n", "function", "defined at", "own", "total");
    for (size_t i = 0; i < pr->n_python && i < 15; i++) {
        const sm_func *f = &pr->funcs[pr->python[i]];
        const char *base = strrchr(f->file, '/');
        char at[64];
        snprintf(at, sizeof at, "%.50s:%u", base ? base + 1 : f->file, f->line);
        sbuf_printf(b, "  %-40.40s %-28.28s %6.1f%% %6.1f%%\n", L(f->name), L(at),
                    100.0 * (double)f->own / (double)pr->samples,
                    100.0 * (double)f->total / (double)pr->samples);
    }
}

/* Off-CPU time (docs/stacks.md "Off-CPU time"): where the sampled threads were blocked in the
 * kernel, the 10 longest stacks, each by what it waits in and its innermost Python function. */
static void txt_off_cpu(sbuf *b, const sm_profile *pr, sbuf_pool *pool)
{
    if (!pr->off_followed)
        return;
    char d[32];
    sx_fmt_dur(d, sizeof d, (double)pr->off_ns / 1e9);
    sbuf_printf(b, "Off-CPU: %s in %llu period(s) the sampled threads were blocked in the kernel "
                   "(locks, queues, I/O, sleeps); where, the longest first:\n",
                d, (unsigned long long)pr->off_periods);
    if (pr->n_off)
        sbuf_printf(b, "  %10s %8s  %-40s %s\n", "time", "periods", "waits in",
                    "Python function");
    for (size_t i = 0; i < pr->n_off && i < 10; i++) {
        const sm_offstack *x = &pr->off[i];
        sx_fmt_dur(d, sizeof d, (double)x->ns / 1e9);
        sbuf_printf(b, "  %10s %8llu  %-40.40s %s\n", d, (unsigned long long)x->periods,
                    L(x->waits_in), x->python ? L(x->python) : "-");
    }
    if (pr->n_off_sections) /* "inside load: 0.5 s" */
        sbuf_printf(b, "Off-CPU time by the innermost section open on the thread when it blocked "
                       "(%.1f%% of it began inside one):\n",
                    pr->off_ns ? 100.0 * (double)pr->off_in_sections_ns / (double)pr->off_ns : 0);
    for (size_t i = 0; i < pr->n_off_sections && i < 10; i++) {
        const sm_offsection *x = &pr->off_sections[i];
        sx_fmt_dur(d, sizeof d, (double)x->ns / 1e9);
        sbuf_printf(b, "  %-24.24s %10s %8llu period(s) %6.1f%%\n", L(x->name), d,
                    (unsigned long long)x->periods,
                    pr->off_ns ? 100.0 * (double)x->ns / (double)pr->off_ns : 0);
    }
}

/* CUDA activity: kernels, copies and sets, the top kernels by time. */
static void txt_gpu(const sm_model *m, sbuf *b, sbuf_pool *pool)
{
    sm_gpu_sum g;
    if (!m->n_gpu || sm_gpu_summarize(m, &g) != 0)
        return;
    char t[32], bytes[32];
    sx_fmt_dur(t, sizeof t, g.kernel_s);
    sbuf_printf(b, "CUDA: %llu kernels (%s on the GPU)", (unsigned long long)g.kernels, t);
    sx_fmt_dur(t, sizeof t, g.memcpy_s);
    sx_fmt_si(bytes, sizeof bytes, (double)g.memcpy_bytes, "B");
    sbuf_printf(b, ", %llu copies (%s, %s), %llu sets; %llu linked to their section\n",
                (unsigned long long)g.memcpys, bytes, t, (unsigned long long)g.memsets,
                (unsigned long long)g.linked);
    for (size_t i = 0; i < g.n_by_kernel && i < 5; i++) {
        sx_fmt_dur(t, sizeof t, g.by_kernel[i].total_s);
        sbuf_printf(b, "  kernel %-40.40s %6llu x  %s\n", L(g.by_kernel[i].name),
                    (unsigned long long)g.by_kernel[i].count, t);
    }
    sm_gpu_sum_free(&g);
    sa_gpu a; /* where the GPU time went, what the CPU did in its waits (sonde analyze gpu) */
    if (sa_gpu_of(m, SA_GPU_KERNEL_DELAY_NS, SA_GPU_MIN_IDLE_NS, &a) == 0) {
        sx_gpu_analysis_txt(b, NULL, &a, 5);
        sa_gpu_free(&a);
    }
}

/* The operators of another tracer (torch.profiler's), the top by self CPU time. */
static void txt_ops(const sm_model *m, sbuf *b, sbuf_pool *pool)
{
    sm_op_row *ops;
    size_t n_ops;
    if (m->n_ops && sm_ops_table(m, 0, &ops, &n_ops) == 0) {
        sbuf_printf(b, "Operators: %llu calls of %zu operators; the top by self CPU time:\n",
                    (unsigned long long)sm_ops_calls(ops, n_ops), n_ops);
        sbuf_printf(b, "  %-32s %8s %10s %10s %10s %10s %10s\n", "name", "calls", "self CPU",
                    "CPU total", "self CUDA", "CUDA total", "FLOPs");
        for (size_t i = 0; i < n_ops && i < 15; i++) {
            char c0[32], c1[32], c2[32], c3[32], fl[32];
            sx_fmt_dur(c0, sizeof c0, ops[i].self_cpu_s);
            sx_fmt_dur(c1, sizeof c1, ops[i].cpu_total_s);
            sx_fmt_dur(c2, sizeof c2, ops[i].self_device_s);
            sx_fmt_dur(c3, sizeof c3, ops[i].device_total_s);
            sx_fmt_si(fl, sizeof fl, ops[i].flops, "");
            sbuf_printf(b, "  %-32.32s %8llu %10s %10s %10s %10s %10s\n", L(ops[i].name),
                        (unsigned long long)ops[i].calls, c0, c1, c2, c3,
                        ops[i].flops > 0 ? fl : "-");
        }
        char note[600];
        sm_ops_flops_note(m, ops, n_ops, note, sizeof note);
        if (note[0])
            sbuf_printf(b, "  Note: %s\n", L(note));
        sonde__free(ops);
    }
}

static int sx_txt_lines(sx_report *r, sbuf *b, int sort, size_t top, int wide,
                        sbuf_pool *pool)
{
    const sm_model *m = r->m;
    char d[32];
    sx_fmt_dur(d, sizeof d, (double)m->duration_ns / 1e9);
    const char *trigger = sm_info(m, "trigger.reason");
    if (trigger) { /* a flight recorder's dump says first why it was written */
        const char *kept = sm_info(m, "trigger.kept_s"), *after = sm_info(m, "trigger.after_s");
        sbuf_printf(b, "Flight recorder dump %s: %s (the %s s before the trigger, %s s after)\n",
                    L(sm_info(m, "trigger.index")), L(trigger), L(kept), L(after));
    }
    sbuf_printf(b, "sonde summary: %s  (%s, %llu sections, %zu section names, %llu steps, %zu "
                   "threads)\n",
                L(m->name), d, (unsigned long long)m->total_sections, m->n_stats,
                (unsigned long long)m->total_steps, sm_program_threads(m));
    if (txt_table(m, b, sort, top, wide, pool) != 0)
        return -1;
    txt_run_lines(m, b, pool);
    txt_system(m, b, pool);
    /* Diffusion figures and recommendations: computed here, or as a JSON report stated them */
    if (m->analysis_text) {
        sbuf_puts(b, m->analysis_text);
    } else {
        const sa_report *an = sx_analysis(r);
        if (!an)
            return -1;
        sx_txt_analysis(an, b);
    }
    txt_gpu(m, b, pool);
    const sm_profile *pr = &m->profile;
    if (pr->samples) { /* where the CPU time went, from the samples with stacks */
        sbuf_printf(b, "CPU samples: %llu at %u Hz (%llu lost; %s); the top functions by self "
                       "samples (NAME.folded has every stack):\n",
                    (unsigned long long)pr->samples, pr->hz, (unsigned long long)pr->lost,
                    pr->by_counter ? "by per-thread CPU-clock counters and SIGPROF, unwound from "
                                     ".eh_frame"
                    : pr->by_timer ? "by CPU-time timers and SIGPROF, unwound from .eh_frame"
                    : pr->cfi_unwound ? "by perf_event_open, along frame pointers, and the call "
                                        "frame information where those fell short"
                                      : "by perf_event_open, along frame pointers");
        if (pr->draws < pr->samples) /* timers paced by the kernel's tick: fewer draws */
            sbuf_printf(b, "  from %llu signals (a timer's signal comes at the kernel's tick "
                           "and counts the periods since the last): the shares below have the "
                           "precision of that many draws\n",
                        (unsigned long long)pr->draws);
        txt_processes(b, pr, pool);
        sbuf_printf(b, "  %-40s %-20s %7s %7s  %s\n", "function", "object", "self", "total",
                    "defined at");
        for (size_t i = 0; i < pr->n_funcs && i < 15 && pr->funcs[i].total; i++) {
            const sm_func *fn = &pr->funcs[i]; /* (those of off-CPU stacks alone: none, last) */
            char at[64] = "";
            if (fn->file) {
                const char *base = strrchr(fn->file, '/');
                snprintf(at, sizeof at, "%.40s:%u", base ? base + 1 : fn->file, fn->line);
            }
            sbuf_printf(b, "  %-40.40s %-20.20s %6.1f%% %6.1f%%  %s\n", L(fn->name), L(fn->object),
                        100.0 * (double)fn->self / (double)pr->samples,
                        100.0 * (double)fn->total / (double)pr->samples, L(at));
        }
        txt_python(b, pr, pool);
        if (pr->n_lines) /* where in the source, from the DWARF's line tables */
            sbuf_printf(b, "The source lines the samples were running (the DWARF's line tables):\n");
        for (size_t i = 0; i < pr->n_lines && i < 10; i++) {
            const sm_line *ln = &pr->lines[i];
            const char *base = strrchr(ln->file, '/');
            char at[64];
            snprintf(at, sizeof at, "%.50s:%u", base ? base + 1 : ln->file, ln->line);
            sbuf_printf(b, "  %-30.30s %-40.40s %6.1f%%\n", L(at), L(pr->funcs[ln->func].name),
                        100.0 * (double)ln->self / (double)pr->samples);
        }
        if (pr->n_sections) /* "inside decode: 61% in matmul" */
            sbuf_printf(b, "CPU samples by the innermost section open on their thread (%.1f%% of "
                           "them were inside one), with its top functions:\n",
                        100.0 * (double)pr->in_sections / (double)pr->samples);
        for (size_t i = 0; i < pr->n_sections && i < 10; i++) {
            const sm_psection *ps = &pr->sections[i];
            sbuf_printf(b, "  %-24.24s %6.1f%% ", L(ps->name),
                        100.0 * (double)ps->samples / (double)pr->samples);
            uint32_t fn[3];
            uint64_t count[3];
            size_t n_fn = sm_psection_top(ps, fn, count, 3);
            for (size_t j = 0; j < n_fn; j++)
                sbuf_printf(b, "%s %s %.1f%%", j ? "," : " in",
                            L(pr->funcs[ps->funcs[fn[j]].func].name),
                            100.0 * (double)count[j] / (double)ps->samples);
            sbuf_putc(b, '\n');
        }
    }
    txt_off_cpu(b, pr, pool); /* also for a program that only waited: no CPU sample */
    txt_ops(m, b, pool);
    if (m->short_spans)
        sbuf_printf(b, "Left out: %llu section instances shorter than min_duration_s\n",
                    (unsigned long long)m->short_spans);
    if (m->dropped_events)
        sbuf_printf(b, "Dropped events: %llu (the disk failed, or more threads recorded at once "
                       "than there were buffer chunks)\n", (unsigned long long)m->dropped_events);
    if (m->backpressure_chunks)
        sbuf_printf(b, "Back-pressure: the writer fell behind and recording threads wrote %llu "
                       "buffer chunks themselves, waiting %.3f s in all (a larger buffer_mb or a "
                       "faster disk avoids it)\n", (unsigned long long)m->backpressure_chunks,
                    (double)m->backpressure_ns / 1e9);
    if (m->trace.folded)
        sbuf_printf(b, "Trace: %llu of its %llu sections, those shorter than %.3f us, are folded "
                       "into slices \"NAME x N (T ms)\" (trace_max_events)\n",
                    (unsigned long long)m->trace.folded, (unsigned long long)m->trace.sections,
                    (double)m->trace.min_ns / 1e3);
    if (m->sections_end_lost)
        sbuf_printf(b, "Sections whose end was dropped: %llu (not in the table: their duration "
                       "is unknown)\n", (unsigned long long)m->sections_end_lost);
    for (size_t i = 0; i < m->n_warnings; i++)
        sbuf_printf(b, "Warning: %s\n", L(m->warnings[i]));
    sbuf_printf(b, "Recorded by sonde %s\n", m->sonde_version ? L(m->sonde_version) : "?");
    return b->oom ? -1 : 0;
}

#undef L
