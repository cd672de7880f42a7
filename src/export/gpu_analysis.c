/* gpu_analysis.c - sonde analyze gpu's figures (src/analyze/gpu.c) as text and as JSON: the
 * command's output, and the part of NAME.txt and NAME.json a run with CUDA activity carries. */
#include "export.h"

#include "../analyze/gpu.h"

static const char *const g_kind[] = {"compute", "communication", "memory"};

static void pct(sbuf *o, double part, double whole)
{
    sbuf_printf(o, "%.1f%%", whole > 0 ? 100 * part / whole : 0);
}

/* The steps of device d with the most idle time, the k first (k at most 16), into at. */
static size_t idlest_steps(const sa_gpu_device *d, size_t k, size_t *at)
{
    size_t n = 0;
    k = k > 16 ? 16 : k;
    for (size_t i = 0; i < d->n_steps; i++) {
        size_t j = n < k ? n++ : k;
        if (j == k && d->steps[i].idle_s <= d->steps[at[k - 1]].idle_s)
            continue;
        if (j == k)
            j = k - 1;
        while (j > 0 && d->steps[at[j - 1]].idle_s < d->steps[i].idle_s) {
            at[j] = at[j - 1];
            j--;
        }
        at[j] = i;
    }
    return n;
}

/* Device d's overlap, launch delays and its idlest steps, as lines. */
static void device_more_txt(sbuf *o, const sa_gpu_device *d, size_t top)
{
    if (d->comm_s > 0) {
        sbuf_printf(o, "  communication overlapped by compute: %.6f s of %.6f s (", d->comm_overlap_s,
                    d->comm_s);
        pct(o, d->comm_overlap_s, d->comm_s);
        sbuf_puts(o, ")\n");
    }
    if (d->launches)
        sbuf_printf(o, "  launch delay (runtime call to start) of %zu: mean %.1f us, p50 %.1f us, "
                       "p99 %.1f us, max %.1f us; %zu over %d us\n", d->launches,
                    d->launch_mean_s * 1e6, d->launch_p50_s * 1e6, d->launch_p99_s * 1e6,
                    d->launch_max_s * 1e6, d->slow_launches, SA_GPU_LAUNCH_DELAY_NS / 1000);
    size_t at[16], n = idlest_steps(d, top < 5 ? top : 5, at);
    if (n && d->steps[at[0]].idle_s > 0) {
        sbuf_puts(o, "  the steps with the most idle:");
        for (size_t i = 0; i < n && d->steps[at[i]].idle_s > 0; i++) {
            const sa_gpu_step *s = &d->steps[at[i]];
            sbuf_printf(o, "%s step %llu %.6f s of %.6f s", i ? "," : "",
                        (unsigned long long)s->number, s->idle_s, s->span_s);
        }
        sbuf_putc(o, '\n');
    }
}

void sx_gpu_analysis_txt(sbuf *o, const char *run, const sa_gpu *g, size_t top)
{
    sbuf_pool pool = {0};
    if (run)
        sbuf_printf(o, "sonde analyze gpu: %s\n", sbuf_oneline(&pool, run));
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
        device_more_txt(o, d, top);
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
    if (!run) { /* in NAME.txt, whose CUDA line lists the kernels already */
        o->oom |= pool.oom;
        sbuf_pool_free(&pool);
        return;
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

void sx_gpu_analysis_json(sbuf *o, const char *run, const sa_gpu *g, size_t top)
{
    if (run) {
        sbuf_puts(o, "{\"schema\":\"sonde-analyze-gpu\",\"schema_version\":1,\"run\":");
        sbuf_json_str(o, run);
        sbuf_putc(o, ',');
    } else {
        sbuf_putc(o, '{');
    }
    sbuf_printf(o, "\"kernel_delay_ns\":%lld,\"min_idle_ns\":%lld,\"devices\":[",
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
        num(o, "communication_overlapped_s", d->comm_overlap_s);
        sbuf_printf(o, ",\"launches\":{\"count\":%zu,\"over_cutoff\":%zu,\"cutoff_ns\":%d",
                    d->launches, d->slow_launches, SA_GPU_LAUNCH_DELAY_NS);
        num(o, "mean_s", d->launch_mean_s);
        num(o, "p50_s", d->launch_p50_s);
        num(o, "p99_s", d->launch_p99_s);
        num(o, "max_s", d->launch_max_s);
        sbuf_puts(o, "},\"steps\":[");
        size_t at[16], n = top < d->n_steps ? idlest_steps(d, top, at) : d->n_steps;
        for (size_t k = 0; k < n; k++) { /* every step, or the idlest (top of them) */
            const sa_gpu_step *s = &d->steps[top < d->n_steps ? at[k] : k];
            sbuf_printf(o, "%s{\"number\":%llu", k ? "," : "", (unsigned long long)s->number);
            num(o, "span_s", s->span_s);
            num(o, "idle_s", s->idle_s);
            num(o, "compute_s", s->compute_s);
            num(o, "non_compute_s", s->non_compute_s);
            sbuf_putc(o, '}');
        }
        sbuf_putc(o, ']');
        sbuf_putc(o, '}');
    }
    sbuf_printf(o, "],\"host_waits\":%zu", g->waits);
    num(o, "host_waits_s", g->waits_s);
    sbuf_puts(o, ",\"causes\":[");
    size_t shown[2] = {0, 0}, n = 0;
    for (size_t i = 0; i < g->n_causes; i++) {
        const sa_gpu_cause *c = &g->causes[i];
        if (shown[c->sample]++ >= top)
            continue;
        sbuf_puts(o, n++ ? ",{\"what\":" : "{\"what\":");
        sbuf_json_str(o, c->what);
        sbuf_printf(o, ",\"from\":\"%s\",\"samples\":%llu,\"waits\":%zu",
                    c->sample ? "samples" : "section", (unsigned long long)c->samples,
                    c->intervals);
        num(o, "idle_s", c->idle_s);
        sbuf_putc(o, '}');
    }
    sbuf_puts(o, "],\"kernels\":[");
    for (size_t i = 0; i < g->n_kernels && i < top; i++) {
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
    sbuf_puts(o, run ? "]}\n" : "]}");
}

