/* cmd_analyze.c - `sonde analyze gpu RUN`: where the GPU time of a run went and why the GPU
 * waited (src/analyze/gpu.c): each device's temporal breakdown and its streams' idle time as
 * Holistic Trace Analysis defines them, what the CPU was doing in the host waits (the launching
 * thread's sections and CPU samples), and the kernels by name. Text or JSON. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/gpu.h"
#include "cli.h"
#include "export/export.h"
#include "util/buf.h"

static const char *const g_kind[] = {"compute", "communication", "memory"};

static void pct(sbuf *o, double part, double whole)
{
    sbuf_printf(o, "%.1f%%", whole > 0 ? 100 * part / whole : 0);
}

static void text(sbuf *o, const sm_model *m, const sa_gpu *g, size_t top)
{
    sbuf_pool pool = {0};
    sbuf_printf(o, "sonde analyze gpu: %s\n", sbuf_oneline(&pool, m->name));
    for (size_t i = 0; i < g->n_dev; i++) {
        const sa_gpu_device *d = &g->dev[i];
        double idle = d->host_wait_s + d->kernel_wait_s + d->other_wait_s;
        sbuf_printf(o, "GPU %u: %zu entries over %.6f s: idle %.6f s (", d->device, d->entries,
                    d->span_s, d->idle_s);
        pct(o, d->idle_s, d->span_s);
        sbuf_printf(o, "), compute %.6f s (", d->compute_s);
        pct(o, d->compute_s, d->span_s);
        sbuf_printf(o, "), non-compute %.6f s (", d->non_compute_s);
        pct(o, d->non_compute_s, d->span_s);
        sbuf_printf(o, ")\n  of the busy time: communication (NCCL) %.6f s, memory (copies, sets) "
                       "%.6f s\n  its streams' idle: host wait %.6f s (", d->comm_s, d->memory_s,
                    d->host_wait_s);
        pct(o, d->host_wait_s, idle);
        sbuf_printf(o, "), kernel wait %.6f s (", d->kernel_wait_s);
        pct(o, d->kernel_wait_s, idle);
        sbuf_printf(o, "), other %.6f s (", d->other_wait_s);
        pct(o, d->other_wait_s, idle);
        sbuf_puts(o, ")\n");
    }
    sbuf_printf(o, "What the CPU was doing in the %zu host wait(s) of %.0f us or more (%.6f s), "
                   "on the thread that launched the work after each:\n", g->waits,
                (double)g->min_idle_ns / 1e3, g->waits_s);
    size_t shown[2] = {0, 0};
    for (size_t i = 0; i < g->n_causes; i++) {
        const sa_gpu_cause *c = &g->causes[i];
        if (shown[c->sample]++ >= top)
            continue;
        if (shown[c->sample] == 1)
            sbuf_puts(o, c->sample ? "  CPU samples (innermost Python frame, else function):\n"
                                   : "  sections (the innermost open):\n");
        if (c->sample)
            sbuf_printf(o, "    %-48.48s %6llu samples  %.6f s  in %zu wait(s)\n",
                        sbuf_oneline(&pool, c->what), (unsigned long long)c->samples, c->idle_s,
                        c->intervals);
        else
            sbuf_printf(o, "    %-48.48s %.6f s (", sbuf_oneline(&pool, c->what), c->idle_s);
        if (!c->sample) {
            pct(o, c->idle_s, g->waits_s);
            sbuf_printf(o, ")  in %zu wait(s)\n", c->intervals);
        }
    }
    sbuf_puts(o, "Kernels by total time:\n");
    sbuf_printf(o, "  %-40s %-13s %8s %12s %12s %12s %12s\n", "kernel", "kind", "calls", "total",
                "mean", "p50", "max");
    for (size_t i = 0; i < g->n_kernels && i < top; i++) {
        const sa_gpu_kernel *k = &g->kernels[i];
        char t[32], me[32], p50[32], mx[32];
        sx_fmt_dur(t, sizeof t, k->total_s);
        sx_fmt_dur(me, sizeof me, k->mean_s);
        sx_fmt_dur(p50, sizeof p50, k->p50_s);
        sx_fmt_dur(mx, sizeof mx, k->max_s);
        sbuf_printf(o, "  %-40.40s %-13s %8llu %12s %12s %12s %12s\n",
                    sbuf_oneline(&pool, k->name), g_kind[k->kind], (unsigned long long)k->calls,
                    t, me, p50, mx);
    }
    o->oom |= pool.oom;
    sbuf_pool_free(&pool);
}

static void num(sbuf *o, const char *key, double v)
{
    sbuf_printf(o, ",\"%s\":", key);
    sbuf_json_num(o, v);
}

static void json(sbuf *o, const sm_model *m, const sa_gpu *g)
{
    sbuf_puts(o, "{\"schema\":\"sonde-analyze-gpu\",\"schema_version\":1,\"run\":");
    sbuf_json_str(o, m->name);
    sbuf_printf(o, ",\"kernel_delay_ns\":%lld,\"min_idle_ns\":%lld,\"devices\":[",
                (long long)g->kernel_delay_ns, (long long)g->min_idle_ns);
    for (size_t i = 0; i < g->n_dev; i++) {
        const sa_gpu_device *d = &g->dev[i];
        sbuf_printf(o, "%s{\"device\":%u,\"entries\":%zu", i ? "," : "", d->device, d->entries);
        num(o, "span_s", d->span_s);
        num(o, "idle_s", d->idle_s);
        num(o, "compute_s", d->compute_s);
        num(o, "non_compute_s", d->non_compute_s);
        num(o, "communication_s", d->comm_s);
        num(o, "memory_s", d->memory_s);
        num(o, "host_wait_s", d->host_wait_s);
        num(o, "kernel_wait_s", d->kernel_wait_s);
        num(o, "other_wait_s", d->other_wait_s);
        sbuf_putc(o, '}');
    }
    sbuf_printf(o, "],\"host_waits\":%zu", g->waits);
    num(o, "host_waits_s", g->waits_s);
    sbuf_puts(o, ",\"causes\":[");
    for (size_t i = 0; i < g->n_causes; i++) {
        const sa_gpu_cause *c = &g->causes[i];
        sbuf_puts(o, i ? ",{\"what\":" : "{\"what\":");
        sbuf_json_str(o, c->what);
        sbuf_printf(o, ",\"from\":\"%s\",\"samples\":%llu,\"waits\":%zu",
                    c->sample ? "samples" : "section", (unsigned long long)c->samples,
                    c->intervals);
        num(o, "idle_s", c->idle_s);
        sbuf_putc(o, '}');
    }
    sbuf_puts(o, "],\"kernels\":[");
    for (size_t i = 0; i < g->n_kernels; i++) {
        const sa_gpu_kernel *k = &g->kernels[i];
        sbuf_puts(o, i ? ",{\"name\":" : "{\"name\":");
        sbuf_json_str(o, k->name);
        sbuf_printf(o, ",\"kind\":\"%s\",\"calls\":%llu", g_kind[k->kind],
                    (unsigned long long)k->calls);
        num(o, "total_s", k->total_s);
        num(o, "mean_s", k->mean_s);
        num(o, "p50_s", k->p50_s);
        num(o, "max_s", k->max_s);
        sbuf_putc(o, '}');
    }
    sbuf_puts(o, "]}\n");
}

/* A non-negative number of microseconds given to flag, in ns into *out. CLI_OK or CLI_USAGE. */
static int us_flag(const char *flag, const char *v, int64_t *out)
{
    char *end;
    double us = strtod(v, &end);
    if (end == v || *end || !(us >= 0) || us > 1e12)
        return cli_fail(CLI_USAGE, "analyze", "%s %s: expected microseconds, 0 or more", flag, v);
    *out = (int64_t)(us * 1e3);
    return CLI_OK;
}

int cmd_analyze(int argc, char **argv)
{
    static const char *const opts[] = {"--format", "-o", "--kernel-delay-us", "--min-idle-us",
                                       "--top", NULL};
    const char *file = NULL, *out = NULL, *format = "text";
    int64_t delay = SA_GPU_KERNEL_DELAY_NS, min_idle = 50000;
    long top = 15;
    if (argc < 2 || strcmp(argv[1], "gpu"))
        return argc < 2 ? cli_usage(cli_find("analyze"), 1)
                        : cli_fail(CLI_USAGE, "analyze", "%s: unknown analysis (gpu)", argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int valued = !strcmp(a, "--format") || !strcmp(a, "-o") ||
                     !strcmp(a, "--kernel-delay-us") || !strcmp(a, "--min-idle-us") ||
                     !strcmp(a, "--top");
        if (valued && i + 1 >= argc)
            return cli_fail(CLI_USAGE, "analyze", "%s needs a value", a);
        int rc = CLI_OK;
        if (!strcmp(a, "--format"))
            format = argv[++i];
        else if (!strcmp(a, "-o"))
            out = argv[++i];
        else if (!strcmp(a, "--kernel-delay-us"))
            rc = us_flag(a, argv[++i], &delay);
        else if (!strcmp(a, "--min-idle-us"))
            rc = us_flag(a, argv[++i], &min_idle);
        else if (!strcmp(a, "--top")) {
            char *end;
            top = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || top < 1)
                rc = cli_fail(CLI_USAGE, "analyze", "--top %s: expected a count, 1 or more",
                              argv[i]);
        } else if (a[0] == '-' && a[1])
            return cli_bad_option("analyze", a, opts);
        else if (!file)
            file = a;
        else
            return cli_fail(CLI_USAGE, "analyze", "one run at a time (got %s and %s)", file, a);
        if (rc != CLI_OK)
            return rc;
    }
    int js = !strcmp(format, "json");
    if (!js && strcmp(format, "text"))
        return cli_fail(CLI_USAGE, "analyze", "--format %s: expected text or json", format);
    if (!file)
        return cli_usage(cli_find("analyze"), 1);
    sm_model m;
    int rc = cli_load("analyze", file, &m);
    if (rc)
        return rc;
    sa_gpu g;
    if (sa_gpu_of(&m, delay, min_idle, &g) != 0) {
        sm_free(&m);
        return cli_fail(CLI_USAGE, "analyze", "out of memory");
    }
    if (!g.n_dev) {
        sa_gpu_free(&g);
        sm_free(&m);
        return cli_fail(CLI_USAGE, "analyze", "%s: no CUDA activity in the run (cuda_activity "
                        "records it: docs/integrations.md)", file);
    }
    sbuf o;
    sbuf_init(&o);
    if (js)
        json(&o, &m, &g);
    else
        text(&o, &m, &g, (size_t)top);
    rc = o.oom ? cli_fail(CLI_USAGE, "analyze", "out of memory") : CLI_OK;
    if (rc == CLI_OK && out && (rc = cli_output_check("analyze", out, file)) == CLI_OK)
        rc = cli_write_output("analyze", out, o.data ? o.data : "", o.len);
    else if (rc == CLI_OK)
        fputs(o.data ? o.data : "", stdout);
    sbuf_free(&o);
    sa_gpu_free(&g);
    sm_free(&m);
    return rc;
}
