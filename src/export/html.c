/* html.c - NAME.html: one self-contained file (no network fetch) with summary cards, the
 * recommendations and bottlenecks, a stage chart, a timeline of sections per thread with the
 * counters on the same time axis, per-step and per-block charts, a sortable statistics table,
 * system information and configuration. Charts are SVG written here; the one script is inline
 * and only sorts the table. Every string from the program is escaped. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../analyze/analyze.h"
#include "export.h"
#include "../util/alloc.h"

#define W 1000          /* chart width, px */
#define LANE 18         /* timeline lane height, px */
#define CHART_H 80      /* counter chart height, px */
#define CHART_POINTS 600 /* samples drawn per counter chart */
#define LABEL_W 120     /* timeline: room for the thread names on the left */
#define X(t, dur) (LABEL_W + (double)(t) / (dur) * (W - LABEL_W - 4))

static void esc(sbuf *b, const char *s)
{
    if (!s)
        return;
    for (; *s; s++) {
        switch (*s) {
        case '&': sbuf_puts(b, "&amp;"); break;
        case '<': sbuf_puts(b, "&lt;"); break;
        case '>': sbuf_puts(b, "&gt;"); break;
        case '"': sbuf_puts(b, "&quot;"); break;
        case '\'': sbuf_puts(b, "&#39;"); break;
        default: sbuf_putc(b, *s);
        }
    }
}

/* A stable colour per name. */
static unsigned hue(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 360;
}

/* CUDA activity: kernels by GPU time, and by the section that launched them. */
static void gpu_rows(sbuf *b, const char *id, const char *what, const sm_gpu_name *v, size_t n)
{
    sbuf_printf(b, "<table id=\"%s\" class=\"facts\"><thead><tr><th>%s</th><th>kernels</th>"
                   "<th>GPU time</th><th>mean</th><th>max</th></tr></thead><tbody>\n", id, what);
    for (size_t i = 0; i < n && i < 20; i++) {
        char t[32], mean[32], mx[32];
        sx_fmt_dur(t, sizeof t, v[i].total_s);
        sx_fmt_dur(mean, sizeof mean, v[i].count ? v[i].total_s / (double)v[i].count : 0);
        sx_fmt_dur(mx, sizeof mx, v[i].max_s);
        sbuf_puts(b, "<tr><td>");
        esc(b, v[i].name);
        sbuf_printf(b, "</td><td>%llu</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                    (unsigned long long)v[i].count, t, mean, mx);
    }
    sbuf_puts(b, "</tbody></table>\n");
}

static void gpu_tables(sbuf *b, const sm_gpu_sum *g)
{
    char t[32], bytes[32];
    sx_fmt_dur(t, sizeof t, g->memcpy_s);
    sx_fmt_si(bytes, sizeof bytes, (double)g->memcpy_bytes, "B");
    sbuf_printf(b, "<h2 id=\"cuda\">CUDA activity</h2>\n<p>%llu kernels, %llu copies (%s in %s), "
                   "%llu sets; %llu of them linked to the section that launched them.</p>\n",
                (unsigned long long)g->kernels, (unsigned long long)g->memcpys, bytes, t,
                (unsigned long long)g->memsets, (unsigned long long)g->linked);
    gpu_rows(b, "cuda-kernels", "kernel", g->by_kernel, g->n_by_kernel);
    if (g->n_by_section)
        gpu_rows(b, "cuda-sections", "launched in section", g->by_section, g->n_by_section);
}

/* The per-operator table (sonde_ops), as PyTorch's key_averages() table lays it out. */
static void ops_table(sbuf *b, const sm_model *m)
{
    sm_op_row *v;
    size_t n;
    if (sm_ops_table(m, 0, &v, &n) != 0)
        return;
    sbuf_printf(b, "<h2 id=\"operators\">Operators</h2>\n<p>%llu calls of %zu operators, "
                   "by self CPU time.</p>\n<table id=\"operators-table\" class=\"facts\">"
                   "<thead><tr><th>operator</th><th>calls</th><th>self CPU</th><th>CPU total</th>"
                   "<th>self CUDA</th><th>CUDA total</th><th>FLOPs</th><th>self CPU memory</th>"
                   "</tr></thead><tbody>\n", (unsigned long long)m->n_ops, n);
    for (size_t i = 0; i < n; i++) {
        char c0[32], c1[32], c2[32], c3[32], fl[32], mem[32];
        sx_fmt_dur(c0, sizeof c0, v[i].self_cpu_s);
        sx_fmt_dur(c1, sizeof c1, v[i].cpu_total_s);
        sx_fmt_dur(c2, sizeof c2, v[i].self_device_s);
        sx_fmt_dur(c3, sizeof c3, v[i].device_total_s);
        sx_fmt_si(fl, sizeof fl, v[i].flops, "");
        sx_fmt_si(mem, sizeof mem, (double)v[i].host_bytes, "B");
        sbuf_puts(b, "<tr><td>");
        esc(b, v[i].name);
        sbuf_printf(b, "</td><td>%llu</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                       "<td>%s</td><td>%s</td></tr>\n", (unsigned long long)v[i].calls, c0, c1,
                    c2, c3, v[i].flops > 0 ? fl : "-", v[i].host_bytes ? mem : "-");
    }
    sbuf_puts(b, "</tbody></table>\n");
    sonde__free(v);
}

static void card(sbuf *b, const char *value, const char *label)
{
    sbuf_puts(b, "<div class=\"card\"><div class=\"v\">");
    esc(b, value);
    sbuf_puts(b, "</div><div class=\"k\">");
    esc(b, label);
    sbuf_puts(b, "</div></div>\n");
}

/* A bar chart of values (seconds), one bar each, with a title per bar. */
static void bars(sbuf *b, const char *id, const double *v, const uint64_t *ids, size_t n,
                 const char *what)
{
    if (!n)
        return;
    double max = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > max)
            max = v[i];
    double bw = (double)W / (double)n;
    sbuf_printf(b, "<svg id=\"%s\" class=\"chart\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\">\n", id, W, CHART_H + 20, W, CHART_H + 20);
    for (size_t i = 0; i < n; i++) {
        double h = max > 0 ? v[i] / max * CHART_H : 0;
        char d[32];
        sx_fmt_dur(d, sizeof d, v[i]);
        sbuf_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                       "fill=\"#4a7bd0\"><title>%s %llu: %s</title></rect>\n",
                    (double)i * bw, CHART_H - h, bw > 2 ? bw - 1 : bw, h, what,
                    (unsigned long long)(ids ? ids[i] : i), d);
    }
    char d[32];
    sx_fmt_dur(d, sizeof d, max);
    sbuf_printf(b, "<text x=\"2\" y=\"%d\" class=\"axis\">%zu %ss, longest %s</text></svg>\n",
                CHART_H + 15, n, what, d);
}

/* Counter charts worth drawing under the timeline: the headline system figures and the
 * program's own counters. */
static int chart_worthy(const sm_counter *c)
{
    if (!c->system)
        return 1;
    static const char *keep[] = {"cpu %", "process cpu %", "rss MiB", "memory used MiB"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (!strcmp(c->name, keep[i]))
            return 1;
    unsigned g;
    char t[32];
    return sscanf(c->name, "gpu%u %31[^\n]", &g, t) == 2 &&
           (!strcmp(t, "util %") || !strcmp(t, "memory MiB") || !strcmp(t, "temperature C") ||
            !strcmp(t, "power W"));
}

typedef struct span_ref {
    double dur;
    size_t i;
} span_ref;

static int cmp_longest(const void *a, const void *b)
{
    double x = ((const span_ref *)a)->dur, y = ((const span_ref *)b)->dur;
    return x > y ? -1 : x < y;
}

static void timeline(sbuf *b, const sm_model *m, size_t max_spans)
{
    double dur = (double)m->duration_ns;
    if (dur <= 0)
        return;
    /* the longest spans, at most max_spans of them */
    span_ref *refs = sonde__malloc((m->n_spans ? m->n_spans : 1) * sizeof *refs);
    if (!refs) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < m->n_spans; i++)
        refs[i] = (span_ref){(double)(m->spans[i].end_ns - m->spans[i].start_ns), i};
    size_t shown = m->n_spans;
    if (shown > max_spans) {
        qsort(refs, m->n_spans, sizeof *refs, cmp_longest);
        shown = max_spans;
    }
    /* one lane per depth per thread that has a shown span */
    int *lane0 = sonde__calloc(m->n_threads + 1, sizeof *lane0);
    int *depths = sonde__calloc(m->n_threads + 1, sizeof *depths);
    if (!lane0 || !depths) {
        sonde__free(refs);
        sonde__free(lane0);
        sonde__free(depths);
        b->oom = 1;
        return;
    }
    for (size_t k = 0; k < shown; k++) {
        const sm_span *s = &m->spans[refs[k].i];
        if (s->depth + 1 > depths[s->thread])
            depths[s->thread] = s->depth + 1;
    }
    int lanes = 0;
    for (size_t t = 0; t < m->n_threads; t++) {
        lane0[t] = lanes;
        lanes += depths[t];
    }
    int h = lanes * LANE + 20;
    if (m->n_spans > shown)
        sbuf_printf(b, "<p class=\"note\">Showing the %zu longest of %zu sections "
                       "(html_max_spans).</p>\n", shown, m->n_spans);
    sbuf_printf(b, "<svg id=\"timeline-svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\">\n", W, h, W, h);
    for (size_t t = 0; t < m->n_threads; t++) {
        if (!depths[t])
            continue;
        sbuf_printf(b, "<text x=\"2\" y=\"%d\" class=\"lane\">", lane0[t] * LANE + 12);
        char tn[20]; /* short enough for the label column */
        snprintf(tn, sizeof tn, "%s", m->threads[t].name);
        esc(b, tn);
        sbuf_puts(b, "</text>\n");
    }
    for (size_t k = 0; k < shown; k++) {
        const sm_span *s = &m->spans[refs[k].i];
        double x = X(s->start_ns, dur), w = X(s->end_ns, dur) - x;
        const char *name = sm_str(m, s->site);
        char d[32];
        sx_fmt_dur(d, sizeof d, (double)(s->end_ns - s->start_ns) / 1e9);
        sbuf_printf(b, "<rect class=\"span\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"hsl(%u,55%%,60%%)\"><title>", x,
                    (lane0[s->thread] + s->depth) * LANE + 2, w < 0.5 ? 0.5 : w, LANE - 3,
                    hue(name));
        esc(b, name);
        sbuf_printf(b, " - %s</title></rect>\n", d);
    }
    char d[32];
    sx_fmt_dur(d, sizeof d, dur / 1e9);
    sbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"axis\" text-anchor=\"end\">%s</text>"
                   "</svg>\n", W - 2, h - 4, d);
    /* counters on the same time axis */
    size_t keep[CHART_POINTS + 2];
    for (size_t c = 0; c < m->n_counters; c++) {
        const sm_counter *k = &m->counters[c];
        if (!k->n || !chart_worthy(k))
            continue;
        if (!k->t_ns) { /* read from a JSON report: its figures, no samples to draw */
            sbuf_puts(b, "<div class=\"counter\"><div class=\"cname\">");
            esc(b, k->name);
            sbuf_printf(b, " <span class=\"range\">min %.4g, mean %.4g, max %.4g, last %.4g "
                           "(%zu samples; a JSON report keeps no samples to draw)</span></div></div>\n",
                        k->min, k->sum / (double)k->n, k->max, k->last, k->n);
            continue;
        }
        double lo = k->min, hi = k->max > k->min ? k->max : k->min + 1;
        sbuf_puts(b, "<div class=\"counter\"><div class=\"cname\">");
        esc(b, k->name);
        sbuf_printf(b, " <span class=\"range\">%.4g .. %.4g</span></div>", k->min, k->max);
        sbuf_printf(b, "<svg class=\"chart counter-chart\" width=\"%d\" height=\"%d\" "
                       "viewBox=\"0 0 %d %d\"><polyline fill=\"none\" stroke=\"hsl(%u,60%%,40%%)\" "
                       "points=\"", W, CHART_H, W, CHART_H, hue(k->name));
        size_t nk = sm_downsample(k, CHART_POINTS, keep);
        for (size_t q = 0; q < nk; q++) {
            size_t i = keep[q];
            sbuf_printf(b, "%.1f,%.1f ", X(k->t_ns[i], dur),
                        CHART_H - 2 - (k->v[i] - lo) / (hi - lo) * (CHART_H - 4));
        }
        sbuf_puts(b, "\"/></svg></div>\n");
    }
    sonde__free(refs);
    sonde__free(lane0);
    sonde__free(depths);
}

static void stats_table(sbuf *b, const sm_model *m)
{
    static const char *cols[] = {"Name", "Count", "Total", "Self", "Mean", "Min", "Max", "P50",
                                 "P99", "Share", "Throughput", "FLOP/s"};
    sbuf_puts(b, "<table id=\"stats-table\" class=\"sortable\"><thead><tr>");
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        sbuf_printf(b, "<th data-type=\"%s\">%s</th>", i ? "num" : "text", cols[i]);
    sbuf_puts(b, "</tr></thead><tbody>\n");
    for (size_t i = 0; i < m->n_stats; i++) {
        const sm_stat *s = &m->stats[i];
        sbuf_puts(b, "<tr><td>");
        esc(b, s->name);
        sbuf_printf(b, "</td><td data-v=\"%llu\">%llu</td>", (unsigned long long)s->count,
                    (unsigned long long)s->count);
        double v[7] = {s->total_s, s->self_s, s->mean_s, s->min_s, s->max_s, s->p50_s, s->p99_s};
        for (int c = 0; c < 7; c++) {
            char d[32];
            sx_fmt_dur(d, sizeof d, v[c]);
            sbuf_printf(b, "<td data-v=\"%.9g\">%s</td>", v[c], d);
        }
        sbuf_printf(b, "<td data-v=\"%.6g\">%.1f%%</td>", s->share, 100 * s->share);
        double ups = s->units_s > 0 ? s->units / s->units_s : 0;
        sbuf_printf(b, "<td data-v=\"%.6g\">", ups);
        if (ups > 0) {
            sbuf_printf(b, "%.2f ", ups);
            esc(b, s->unit);
            sbuf_puts(b, "/s");
        }
        double fps = s->flops_time_s > 0 ? s->flops / s->flops_time_s : 0;
        char f[48] = "";
        if (fps > 0)
            sx_fmt_si(f, sizeof f, fps, "FLOP/s");
        sbuf_printf(b, "</td><td data-v=\"%.6g\">%s</td></tr>\n", fps, f);
    }
    sbuf_puts(b, "</tbody></table>\n");
}

static void html_meta_row(const char *key, const char *value, void *ctx)
{
    sbuf *b = ctx;
    sbuf_puts(b, "<tr><th>");
    esc(b, key);
    sbuf_puts(b, "</th><td>");
    esc(b, value);
    sbuf_puts(b, "</td></tr>\n");
}

static void facts_table(sbuf *b, const sm_model *m, const char *prefix, const char *id)
{
    size_t pl = strlen(prefix);
    sbuf_printf(b, "<table id=\"%s\" class=\"facts\"><tbody>\n", id);
    for (size_t i = 0; i < m->n_info; i++) {
        if (strncmp(m->info[i].key, prefix, pl) || sm_info(m, m->info[i].key) != m->info[i].value)
            continue;
        html_meta_row(m->info[i].key + pl, m->info[i].value, b);
    }
    sbuf_puts(b, "</tbody></table>\n");
}

static const char g_style[] =
    "body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    ".meta,.note{color:#666}.cards{display:flex;flex-wrap:wrap;gap:10px}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}"
    ".card .v{font-size:18px;font-weight:600}.card .k{color:#666;font-size:12px}"
    ".chart{display:block;background:#fafafa;border:1px solid #eee;margin:4px 0}"
    ".axis,.lane{font-size:11px;fill:#555}.cname{font-size:12px;margin-top:6px}"
    ".range{color:#888}table{border-collapse:collapse;font-size:13px}"
    "td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}"
    "td:first-child,th:first-child{text-align:left}th{cursor:pointer;background:#f3f3f3}"
    ".facts th{cursor:default;text-align:left;font-weight:normal;color:#555}"
    ".facts td{text-align:left}li{margin-bottom:8px}.ev{color:#555}.adv{color:#333}"
    ".stage{font-size:12px}";

/* Sorts the statistics table by the clicked column (numbers by data-v); marks the page ready
 * once the whole document has been parsed and the script has run. */
static const char g_script[] =
    "document.querySelectorAll('table.sortable th').forEach(function(th,col){"
    "th.addEventListener('click',function(){var tb=th.closest('table').tBodies[0];"
    "var rows=Array.prototype.slice.call(tb.rows);var num=th.dataset.type==='num';"
    "var dir=th.dataset.dir==='asc'?-1:1;th.dataset.dir=dir===1?'asc':'desc';"
    "rows.sort(function(a,b){var x=a.cells[col],y=b.cells[col];"
    "if(num)return dir*(parseFloat(y.dataset.v)-parseFloat(x.dataset.v));"
    "return dir*x.textContent.localeCompare(y.textContent);});"
    "rows.forEach(function(r){tb.appendChild(r);});});});"
    "document.body.setAttribute('data-ready','1');";

/* Instant events in time order (the first HTML_MAX_EVENTS), with their arguments. */
#define HTML_MAX_EVENTS 500
static void html_arg(const char *key, const char *value, void *ctx)
{
    sbuf *b = ctx;
    sbuf_puts(b, "<span class=\"arg\">");
    esc(b, key);
    sbuf_putc(b, '=');
    esc(b, value);
    sbuf_puts(b, "</span> ");
}

static void events_table(sbuf *b, const sm_model *m)
{
    if (!m->n_instants)
        return;
    size_t kept = m->n_instants < HTML_MAX_EVENTS ? m->n_instants : HTML_MAX_EVENTS;
    sbuf_printf(b, "<h2 id=\"events\">Events</h2>\n<p>%zu events", m->n_instants);
    if (kept < m->n_instants)
        sbuf_printf(b, "; the first %zu are listed (NAME.json has every one, up to "
                       "max_data_points per name)", kept);
    sbuf_puts(b, "</p>\n<table id=\"events-table\"><thead><tr><th>time (s)</th><th>thread</th>"
                 "<th>event</th><th>arguments</th></tr></thead><tbody>\n");
    for (size_t k = 0; k < kept; k++) {
        const sm_instant *e = &m->instants[k]; /* the model's are in time order */
        sbuf_printf(b, "<tr><td>%.6f</td><td>", (double)e->t_ns / 1e9);
        esc(b, e->thread < m->n_threads && m->threads[e->thread].name ? m->threads[e->thread].name
                                                                       : "?");
        sbuf_puts(b, "</td><td>");
        esc(b, sm_str(m, e->name));
        sbuf_puts(b, "</td><td>");
        if (e->args >= 0)
            sm_each_meta(m, e->args, html_arg, b);
        sbuf_puts(b, "</td></tr>\n");
    }
    sbuf_puts(b, "</tbody></table>\n");
}

int sx_html(const sm_model *m, sbuf *b)
{
    const char *th = sm_info(m, "config.bottleneck_threshold");
    const char *mx = sm_info(m, "config.html_max_spans");
    double threshold = th ? atof(th) : 0.3;
    size_t max_spans = mx ? (size_t)strtoull(mx, NULL, 10) : 2000;
    if (threshold <= 0)
        threshold = 0.3;
    if (max_spans < 10)
        max_spans = 10;
    sa_report an;
    if (sa_analyze(m, threshold, &an) != 0)
        return -1;
    double dur = (double)m->duration_ns / 1e9;
    char v[96], d[32];
    sbuf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width\"><title>sonde: ");
    esc(b, m->name);
    sbuf_printf(b, "</title><style>%s</style></head><body>\n<h1>sonde report: ", g_style);
    esc(b, m->name);
    sbuf_puts(b, "</h1>\n<p class=\"meta\">");
    char iso[64] = "";
    time_t secs = (time_t)(m->start_real_ns / 1000000000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(iso, sizeof iso, "%Y-%m-%d %H:%M:%S UTC", &tm);
    esc(b, m->host);
    sbuf_puts(b, " &middot; ");
    esc(b, iso);
    sbuf_puts(b, " &middot; sonde ");
    esc(b, m->sonde_version);
    if (!m->clean_end)
        sbuf_puts(b, " &middot; <b>the run did not end cleanly</b>");
    sbuf_puts(b, "</p>\n<div class=\"cards\" id=\"cards\">\n");
    sx_fmt_dur(d, sizeof d, dur);
    card(b, d, "duration");
    snprintf(v, sizeof v, "%llu", (unsigned long long)m->total_sections);
    card(b, v, "sections");
    for (size_t i = 0; i < m->n_rates; i++)
        if (m->rates[i].units > 0 && m->rates[i].seconds > 0) {
            char lab[96];
            snprintf(v, sizeof v, "%.2f", m->rates[i].units / m->rates[i].seconds);
            snprintf(lab, sizeof lab, "%s/s", m->rates[i].unit);
            card(b, v, lab);
        }
    if (m->total_flops > 0 && m->total_flops_s > 0) {
        double fps = m->total_flops / m->total_flops_s;
        sx_fmt_si(v, sizeof v, fps, "FLOP/s");
        card(b, v, "achieved compute");
        if (m->peak_flops > 0) {
            snprintf(v, sizeof v, "%.1f%%", 100 * fps / m->peak_flops);
            card(b, v, "MFU (of peak)");
        }
    }
    if (m->steps_summary.count) {
        snprintf(v, sizeof v, "%.2f", m->steps_summary.per_s);
        card(b, v, "steps/s");
    }
    if (an.diffusion.blocks.count) {
        snprintf(v, sizeof v, "%.2f", an.diffusion.fps);
        card(b, v, "FPS (frames/s)");
        snprintf(v, sizeof v, "%.2f", an.diffusion.bps);
        card(b, v, "BPS (blocks/s)");
    }
    if (an.diffusion.total_params > 0) {
        sx_fmt_si(v, sizeof v, an.diffusion.total_params, "");
        card(b, v, "parameters");
    }
    for (size_t i = 0; i < m->n_counters; i++) {
        const sm_counter *c = &m->counters[i];
        if (c->system && (!strcmp(c->name, "rss peak MiB"))) {
            snprintf(v, sizeof v, "%.0f MiB", c->max);
            card(b, v, "peak RSS");
        }
        unsigned g;
        char t[32];
        if (c->system && sscanf(c->name, "gpu%u %31[^\n]", &g, t) == 2 && !strcmp(t, "memory MiB")) {
            char lab[48];
            snprintf(v, sizeof v, "%.0f MiB", c->max);
            snprintf(lab, sizeof lab, "peak memory GPU %u", g);
            card(b, v, lab);
        }
    }
    sm_gpu_sum gs;
    int have_gpu = m->n_gpu && sm_gpu_summarize(m, &gs) == 0;
    if (have_gpu) {
        sx_fmt_dur(d, sizeof d, gs.kernel_s);
        snprintf(v, sizeof v, "%llu (%s)", (unsigned long long)gs.kernels, d);
        card(b, v, "CUDA kernels (GPU time)");
    }
    sbuf_puts(b, "</div>\n<h2 id=\"recommendations\">Recommendations</h2>\n");
    if (!an.n_findings)
        sbuf_puts(b, "<p class=\"note\">No rule found anything to recommend in this run.</p>\n");
    else
        sbuf_puts(b, "<ul class=\"findings\">\n");
    for (size_t i = 0; i < an.n_findings; i++) {
        sbuf_puts(b, "<li data-rule=\"");
        esc(b, an.findings[i].rule);
        sbuf_puts(b, "\"><b>");
        esc(b, an.findings[i].title);
        sbuf_puts(b, "</b><div class=\"ev\">Evidence: ");
        esc(b, an.findings[i].evidence);
        sbuf_puts(b, "</div><div class=\"adv\">");
        esc(b, an.findings[i].advice);
        sbuf_puts(b, "</div></li>\n");
    }
    if (an.n_findings)
        sbuf_puts(b, "</ul>\n");
    sbuf_puts(b, "<h2 id=\"bottlenecks\">Bottlenecks</h2>\n<ul>\n");
    for (size_t i = 0; i < an.n_bottlenecks; i++) {
        sbuf_puts(b, "<li>");
        esc(b, an.bottlenecks[i].what);
        sbuf_puts(b, "</li>\n");
    }
    sbuf_puts(b, "</ul>\n");
    if (m->n_sessions) {
        sbuf_puts(b, "<h2 id=\"sessions\">Sessions</h2>\n<table id=\"sessions-table\" "
                     "class=\"facts\"><tbody>\n");
        for (size_t i = 0; i < m->n_sessions; i++) {
            const sm_session *s = &m->sessions[i];
            sx_fmt_dur(d, sizeof d, (double)(s->end_ns - s->start_ns) / 1e9);
            sbuf_puts(b, "<tr><th>");
            esc(b, sm_str(m, s->name));
            sbuf_printf(b, "</th><td>%s from %.3f s</td></tr>\n", d, (double)s->start_ns / 1e9);
        }
        sbuf_puts(b, "</tbody></table>\n");
    }
    sbuf_puts(b, "<h2 id=\"stages\">Stages</h2>\n");
    /* stage chart: top-level sections by total time */
    size_t ns = 0;
    for (size_t i = 0; i < m->n_stats; i++)
        ns += m->stats[i].min_depth == 0;
    if (ns) {
        double max = 0;
        for (size_t i = 0; i < m->n_stats; i++)
            if (m->stats[i].min_depth == 0 && m->stats[i].total_s > max)
                max = m->stats[i].total_s;
        sbuf_printf(b, "<svg id=\"stage-chart\" class=\"chart\" width=\"%d\" height=\"%zu\" "
                       "viewBox=\"0 0 %d %zu\">\n", W, ns * 22 + 4, W, ns * 22 + 4);
        size_t row = 0;
        for (size_t i = 0; i < m->n_stats; i++) {
            const sm_stat *s = &m->stats[i];
            if (s->min_depth != 0)
                continue;
            double w = max > 0 ? s->total_s / max * (W - 320) : 0;
            sx_fmt_dur(d, sizeof d, s->total_s);
            sbuf_printf(b, "<text x=\"4\" y=\"%zu\" class=\"stage\">", row * 22 + 16);
            esc(b, s->name);
            sbuf_printf(b, "</text><rect x=\"200\" y=\"%zu\" width=\"%.1f\" height=\"16\" "
                           "fill=\"hsl(%u,55%%,60%%)\"><title>", row * 22 + 4, w < 1 ? 1 : w,
                        hue(s->name));
            esc(b, s->name);
            sbuf_printf(b, " - %s</title></rect><text x=\"%.1f\" y=\"%zu\" class=\"stage\">%s "
                           "(%.1f%%)</text>\n", d, 206 + w, row * 22 + 16, d, 100 * s->share);
            row++;
        }
        sbuf_puts(b, "</svg>\n");
    }
    if (have_gpu) {
        gpu_tables(b, &gs);
        sm_gpu_sum_free(&gs);
    }
    if (m->n_ops)
        ops_table(b, m);
    sbuf_puts(b, "<h2 id=\"timeline\">Timeline</h2>\n");
    timeline(b, m, max_spans);
    size_t nd = m->n_steps > m->n_blocks ? m->n_steps : m->n_blocks;
    if (m->n_dsteps > nd)
        nd = m->n_dsteps;
    double *vals = sonde__malloc((nd ? nd : 1) * sizeof *vals);
    uint64_t *ids = sonde__malloc((nd ? nd : 1) * sizeof *ids);
    if (vals && ids) {
        if (m->n_steps) {
            size_t k = 0;
            for (size_t i = 0; i < m->n_steps; i++) {
                if (m->steps[i].active) {
                    vals[k] = sm_step_s(&m->steps[i]);
                    ids[k++] = m->steps[i].number;
                }
            }
            sbuf_puts(b, "<h2 id=\"steps\">Steps</h2>\n");
            bars(b, "step-chart", vals, ids, k, "step");
        }
        if (m->n_dsteps) {
            for (size_t i = 0; i < m->n_dsteps; i++) {
                vals[i] = m->dsteps[i].seconds;
                ids[i] = m->dsteps[i].step;
            }
            sbuf_printf(b, "<h2 id=\"diffusion-steps\">Diffusion steps</h2>\n<p>%.2f steps/s, "
                           "mean %.3f s, p50 %.3f s, p99 %.3f s, slowest step %llu (%.3f s)</p>\n",
                        an.diffusion.steps_per_s, an.diffusion.steps.mean_s,
                        an.diffusion.steps.p50_s, an.diffusion.steps.p99_s,
                        (unsigned long long)an.diffusion.steps.slowest, an.diffusion.steps.max_s);
            bars(b, "dstep-chart", vals, ids, m->n_dsteps, "diffusion step");
        }
        if (m->n_blocks) {
            for (size_t i = 0; i < m->n_blocks; i++) {
                vals[i] = m->blocks[i].seconds;
                ids[i] = m->blocks[i].index;
            }
            sbuf_printf(b, "<h2 id=\"blocks\">Blocks</h2>\n<p>%.2f FPS, %.2f BPS, mean %.3f s, "
                           "p50 %.3f s, p99 %.3f s, slowest block %llu (%.3f s)</p>\n",
                        an.diffusion.fps, an.diffusion.bps, an.diffusion.blocks.mean_s,
                        an.diffusion.blocks.p50_s, an.diffusion.blocks.p99_s,
                        (unsigned long long)an.diffusion.blocks.slowest, an.diffusion.blocks.max_s);
            bars(b, "block-chart", vals, ids, m->n_blocks, "block");
        }
    }
    sonde__free(vals);
    sonde__free(ids);
    if (m->n_params) {
        sbuf_puts(b, "<h2 id=\"models\">Models</h2>\n<table class=\"facts\"><tbody>\n");
        for (size_t i = 0; i < m->n_params; i++) {
            sbuf_puts(b, "<tr><th>");
            esc(b, m->params[i].model);
            char n[32]; /* as the parameters card writes them: 15.19 M */
            sx_fmt_si(n, sizeof n, m->params[i].count, "");
            sbuf_printf(b, "</th><td>%s parameters</td></tr>\n", n);
        }
        sbuf_puts(b, "</tbody></table>\n");
    }
    events_table(b, m);
    sbuf_puts(b, "<h2 id=\"statistics\">Statistics</h2>\n<p class=\"note\">Click a column to "
                 "sort.</p>\n");
    stats_table(b, m);
    if (m->n_warnings) {
        sbuf_puts(b, "<h2 id=\"warnings\">Warnings</h2>\n<ul>\n");
        for (size_t i = 0; i < m->n_warnings; i++) {
            sbuf_puts(b, "<li>");
            esc(b, m->warnings[i]);
            sbuf_puts(b, "</li>\n");
        }
        sbuf_puts(b, "</ul>\n");
    }
    sbuf_puts(b, "<h2 id=\"run-metadata\">Run</h2>\n<table id=\"run-table\" class=\"facts\"><tbody>\n");
    sm_each_run_meta(m, html_meta_row, b);
    sbuf_puts(b, "</tbody></table>\n");
    sbuf_puts(b, "<h2 id=\"system\">System</h2>\n");
    facts_table(b, m, "system.", "system-table");
    sbuf_puts(b, "<h2 id=\"configuration\">Configuration</h2>\n");
    facts_table(b, m, "config.", "config-table");
    sbuf_printf(b, "<script>%s</script>\n</body></html>\n", g_script);
    sa_free(&an);
    return b->oom ? -1 : 0;
}
