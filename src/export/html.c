/* html.c - NAME.html: one self-contained file (no network fetch, no external file). This side
 * writes the page's text (summary cards, run metadata, recommendations, stages, tables, the
 * configuration folded away) and the run's data as one JSON block,
 * <script type="application/json" id="sonde-data">. The page's script and styles are
 * src/export/html/report.js and report.css, embedded into the library at build time
 * (cmake/embed.cmake); the script draws from the data the timeline (a row per thread, zoom and
 * pan), the counter charts on its time axis, the step breakdown and the flame graph
 * (docs/formats.md says what the data holds). Every string from the program is escaped: as
 * HTML in the text, and in the JSON with < > & written as \u003c \u003e \u0026, so no name can
 * close the block. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../analyze/analyze.h"
#include "export.h"
#include "../util/alloc.h"
#include "../util/sort.h"

/* The page's script and styles (generated from src/export/html/ by cmake/embed.cmake). */
extern const char sx_report_js[];
extern const char sx_report_css[];

#define CHART_POINTS 4000          /* samples kept per counter chart (each bucket's min and max) */
#define TOP_NAMES 8                /* sections a step's bar names; the rest are "other" */
#define MAX_STEPS 20000            /* steps in the step track and breakdown (the first ones) */
#define MAX_FLAME_STACKS 20000     /* distinct stacks in the flame graph, most samples first */
#define MAX_SPAN_META 100000       /* spans whose metadata the page carries, the first ones */
#define W 1000                     /* the bar charts' drawing width (they stretch to the page) */
#define CHART_H 80

static void esc(sbuf *b, const char *s)
{
    sbuf_html_str(b, s); /* out of memory: b->oom, which the report's writing checks */
}

/* As sx_fmt_dur, with microseconds written µs. */
static void fmt_dur(char *out, size_t cap, double s)
{
    sx_fmt_dur(out, cap, s);
    size_t n = strlen(out);
    if (n >= 3 && !strcmp(out + n - 3, " us") && n + 2 <= cap)
        memcpy(out + n - 2, "\xc2\xb5s", 4);
}

/* CUDA activity: kernels by GPU time, and by the section that launched them. */
static void gpu_rows(sbuf *b, const char *id, const char *what, const sm_gpu_name *v, size_t n)
{
    sbuf_printf(b, "<table id=\"%s\" class=\"facts\"><thead><tr><th>%s</th><th>kernels</th>"
                   "<th>GPU time</th><th>mean</th><th>max</th></tr></thead><tbody>\n", id, what);
    for (size_t i = 0; i < n && i < 20; i++) {
        char t[32], mean[32], mx[32];
        fmt_dur(t, sizeof t, v[i].total_s);
        fmt_dur(mean, sizeof mean, v[i].count ? v[i].total_s / (double)v[i].count : 0);
        fmt_dur(mx, sizeof mx, v[i].max_s);
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
    fmt_dur(t, sizeof t, g->memcpy_s);
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
                   "</tr></thead><tbody>\n", (unsigned long long)sm_ops_calls(v, n), n);
    for (size_t i = 0; i < n; i++) {
        char c0[32], c1[32], c2[32], c3[32], fl[32], mem[32];
        fmt_dur(c0, sizeof c0, v[i].self_cpu_s);
        fmt_dur(c1, sizeof c1, v[i].cpu_total_s);
        fmt_dur(c2, sizeof c2, v[i].self_device_s);
        fmt_dur(c3, sizeof c3, v[i].device_total_s);
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

/* Off-CPU time (docs/stacks.md "Off-CPU time"): where the sampled threads were blocked in the
 * kernel, the 20 longest stacks, each by what it waits in and its innermost Python function. */
static void off_cpu_table(sbuf *b, const sm_model *m)
{
    const sm_profile *pr = &m->profile;
    char d[32];
    fmt_dur(d, sizeof d, (double)pr->off_ns / 1e9);
    sbuf_printf(b, "<h2 id=\"off-cpu\">Off-CPU time</h2>\n<p class=\"note\">%s in %llu "
                   "period(s) the sampled threads were blocked in the kernel (locks, queues, I/O, "
                   "sleeps), by where, the longest first (NAME.offcpu.folded has every stack).</p>"
                   "\n<table id=\"off-cpu-table\" class=\"facts\"><thead><tr><th>time</th>"
                   "<th>periods</th><th>waits in</th><th>Python function</th></tr></thead>"
                   "<tbody>\n", d, (unsigned long long)pr->off_periods);
    for (size_t i = 0; i < pr->n_off && i < 20; i++) {
        const sm_offstack *x = &pr->off[i];
        fmt_dur(d, sizeof d, (double)x->ns / 1e9);
        sbuf_printf(b, "<tr><td>%s</td><td>%llu</td><td>", d, (unsigned long long)x->periods);
        esc(b, x->waits_in);
        sbuf_puts(b, "</td><td>");
        esc(b, x->python ? x->python : "-");
        sbuf_puts(b, "</td></tr>\n");
    }
    sbuf_puts(b, "</tbody></table>\n");
}

static void card(sbuf *b, const char *value, const char *label)
{
    sbuf_puts(b, "<div class=\"card\"><div class=\"v\">");
    esc(b, value);
    sbuf_puts(b, "</div><div class=\"k\">");
    esc(b, label);
    sbuf_puts(b, "</div></div>\n");
}


/* A bar chart of values (seconds), one bar each with its title, stretched to the page's width;
 * its caption below. */
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
    sbuf_printf(b, "<svg id=\"%s\" class=\"chart bars\" viewBox=\"0 0 %d %d\" "
                   "preserveAspectRatio=\"none\">\n", id, W, CHART_H);
    for (size_t i = 0; i < n; i++) {
        double h = max > 0 ? v[i] / max * CHART_H : 0;
        char d[32];
        fmt_dur(d, sizeof d, v[i]);
        sbuf_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\">"
                       "<title>%s %llu: %s</title></rect>\n",
                    (double)i * bw, CHART_H - h, bw > 2 ? bw - 1 : bw, h, what,
                    (unsigned long long)(ids ? ids[i] : i), d);
    }
    char d[32];
    fmt_dur(d, sizeof d, max);
    sbuf_printf(b, "</svg>\n<p class=\"caption\">%zu %ss, longest %s</p>\n", n, what, d);
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


/* ---- the run's data for the page's script (docs/formats.md, "NAME.html") ---- */

/* The sites the page names, each once, numbered in the order first named. */
/* The page's names: section names (sites) and operator names, each given an index the first
 * time it is written. */
typedef struct hnames {
    int32_t *of;               /* site -> index, -1: not named yet */
    int32_t *op_of;            /* operator name (sm_model.op_names) -> index, -1: not yet */
    uint32_t *site;            /* index -> site, when op[index] < 0 */
    int32_t *op;               /* index -> operator name, -1: a site */
    size_t n;
} hnames;

static int32_t name_ix(hnames *nm, uint32_t site)
{
    if (nm->of[site] < 0) {
        nm->of[site] = (int32_t)nm->n;
        nm->op[nm->n] = -1;
        nm->site[nm->n++] = site;
    }
    return nm->of[site];
}

static int32_t op_name_ix(hnames *nm, uint32_t name)
{
    if (nm->op_of[name] < 0) {
        nm->op_of[name] = (int32_t)nm->n;
        nm->site[nm->n] = 0;
        nm->op[nm->n++] = (int32_t)name;
    }
    return nm->op_of[name];
}

/* One bar of the timeline: a section (op 0, i into sm_model.spans) or a CPU operator (op 1,
 * i into sm_model.ops), drawn at depth: an operator one below the section it ran in, and one
 * more for each operator it is nested in. */
typedef struct hspan {
    int64_t start;
    uint32_t thread;
    uint16_t depth;
    uint8_t op;
    size_t i;
} hspan;

static int cmp_hspan(const void *a, const void *b)
{
    const hspan *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static void i64(sbuf *b, int64_t v)
{
    if (v < 0) {
        sbuf_putc(b, '-');
        v = -v;
    }
    sbuf_u64(b, (uint64_t)v);
}

typedef int64_t (*dur_fn)(const sm_model *m, size_t i);

static int64_t span_dur(const sm_model *m, size_t i)
{
    return m->spans[i].end_ns - m->spans[i].start_ns;
}

static int64_t op_dur(const sm_model *m, size_t i)
{
    return m->ops[i].end_ns - m->ops[i].start_ns;
}

/* Of k items (dur(m, i) long), which room of them are the longest: *cut the shortest kept,
 * *ties how many as long as the cut are kept (the first ones). k <= room: every one
 * (*cut INT64_MIN). 0, or -1 out of memory. */
static int longest_cut(const sm_model *m, size_t k, size_t room, dur_fn dur, int64_t *cut,
                       size_t *ties)
{
    *cut = INT64_MIN;
    *ties = 0;
    if (k <= room)
        return 0;
    int64_t *d = sonde__malloc(k * sizeof *d);
    if (!d)
        return -1;
    for (size_t i = 0; i < k; i++)
        d[i] = dur(m, i);
    *cut = room ? sm_kth_largest(d, k, room) : INT64_MAX;
    sonde__free(d);
    size_t above = 0;
    for (size_t i = 0; i < k; i++)
        above += dur(m, i) > *cut;
    *ties = room - above;
    return 0;
}

/* Whether an item d long is kept under (cut, ties), the ties counted down. */
static int kept(int64_t d, int64_t cut, size_t *ties)
{
    return d > cut || (d == cut && *ties && (*ties)--);
}

/* The CPU operators (sonde.torch's, sm_model.ops) added to the n bars of *v: every one, or the
 * room longest (ties: the first ones); *v grown. The new length, or (size_t)-1 out of memory. */
static size_t add_ops(const sm_model *m, size_t room, hspan **v, size_t n)
{
    size_t k = m->n_ops < room ? m->n_ops : room;
    int64_t cut;
    size_t ties;
    if (!k)
        return n;
    if (longest_cut(m, m->n_ops, room, op_dur, &cut, &ties))
        return (size_t)-1;
    hspan *g = sonde__realloc(*v, (n + k) * sizeof *g);
    if (!g)
        return (size_t)-1;
    *v = g;
    for (size_t i = 0, added = 0; i < m->n_ops && added < k; i++) {
        const sm_op *o = &m->ops[i];
        if (!kept(op_dur(m, i), cut, &ties))
            continue;
        uint32_t depth = o->depth;
        if (o->span >= 0 && (size_t)o->span < m->n_spans)
            depth += (uint32_t)m->spans[o->span].depth + 1u;
        g[n + added++] = (hspan){o->start_ns, o->thread, (uint16_t)(depth < 65535 ? depth : 65535),
                                 1, i};
    }
    return n + k;
}

/* The spans the timeline draws: every one, or the max_spans longest (ties: the first ones,
 * so a section is never left out while one inside it is drawn), then the operators in the
 * room left; in order of start. Allocated, *n its length; NULL out of memory. */
static hspan *shown_spans(const sm_model *m, size_t max_spans, size_t *n)
{
    size_t k = 0;
    int64_t cut;
    size_t ties;
    hspan *v = sonde__malloc((m->n_spans ? m->n_spans : 1) * sizeof *v);
    if (!v || longest_cut(m, m->n_spans, max_spans, span_dur, &cut, &ties)) {
        sonde__free(v);
        return NULL;
    }
    for (size_t i = 0; i < m->n_spans && k < max_spans; i++) {
        if (!kept(span_dur(m, i), cut, &ties))
            continue;
        const sm_span *s = &m->spans[i];
        v[k++] = (hspan){s->start_ns, s->thread, s->depth, 0, i};
    }
    k = add_ops(m, max_spans > k ? max_spans - k : 0, &v, k);
    if (k == (size_t)-1) {
        sonde__free(v);
        return NULL;
    }
    sonde__sort(v, k, sizeof *v, cmp_hspan);
    *n = k;
    return v;
}

static void span_arrays(sbuf *d, const sm_model *m, const hspan *v, size_t n, hnames *nm)
{
    static const char *keys[] = {"t", "d", "c", "k", "h", "z"};
    for (int a = 0; a < 6; a++) {
        sbuf_printf(d, ",\"%s\":[", keys[a]);
        int64_t prev = 0;
        for (size_t i = 0; i < n && !d->oom; i++) {
            const sm_span *s = v[i].op ? NULL : &m->spans[v[i].i];
            const sm_op *o = v[i].op ? &m->ops[v[i].i] : NULL;
            int64_t t0 = s ? s->start_ns : o->start_ns, t1 = s ? s->end_ns : o->end_ns;
            if (i)
                sbuf_putc(d, ',');
            switch (a) {
            case 0: i64(d, t0 - prev); prev = t0; break; /* from the last */
            case 1: i64(d, t1 - t0); break;
            case 2: i64(d, s ? s->child_ns : o->child_ns); break;
            case 3:
                sbuf_u64(d, (uint64_t)(s ? name_ix(nm, s->site) : op_name_ix(nm, o->name)));
                break;
            case 4: sbuf_u64(d, v[i].thread); break;
            default: sbuf_u64(d, v[i].depth); break;
            }
        }
        sbuf_putc(d, ']');
    }
    /* metadata: [index in these arrays, {key: value}] for the spans that have some */
    sbuf_puts(d, ",\"meta\":[");
    size_t with = 0;
    for (size_t i = 0; i < n && with < MAX_SPAN_META; i++) {
        if (v[i].op)
            continue;
        int32_t meta = sm_span_extra(m, &m->spans[v[i].i])->meta;
        if (meta < 0)
            continue;
        sbuf_printf(d, "%s[%zu,{", with++ ? "," : "", i);
        sm_each_meta(m, meta, sx_json_kv, d);
        sbuf_puts(d, "}]");
    }
    sbuf_putc(d, ']');
}

static int cmp_step_start(const void *a, const void *b)
{
    const sm_step *x = *(const sm_step *const *)a, *y = *(const sm_step *const *)b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* The step track and the step breakdown: per step (the first MAX_STEPS of the active ones),
 * the time of the sections outermost in it (begun in it, their parent begun before it) by
 * name, the TOP_NAMES names of most time apart and the rest as "other". */
static void steps_json(sbuf *d, const sm_model *m, hnames *nm)
{
    size_t n = 0;
    const sm_step **st = sonde__malloc((m->n_steps ? m->n_steps : 1) * sizeof *st);
    double *tot = sonde__calloc(m->n_sites ? m->n_sites : 1, sizeof *tot);
    uint32_t top[TOP_NAMES];
    size_t n_top = 0;
    double *cell = NULL;
    if (!st || !tot) {
        d->oom = 1;
        goto out;
    }
    for (size_t i = 0; i < m->n_steps && n < MAX_STEPS; i++)
        if (m->steps[i].active)
            st[n++] = &m->steps[i];
    sonde__sort(st, n, sizeof *st, cmp_step_start);
    sbuf_puts(d, ",\"steps\":[");
    for (size_t i = 0; i < n; i++) {
        sbuf_printf(d, "%s[%llu,", i ? "," : "", (unsigned long long)st[i]->number);
        i64(d, st[i]->start_ns);
        sbuf_putc(d, ',');
        i64(d, st[i]->t_ns);
        sbuf_putc(d, ']');
    }
    sbuf_putc(d, ']');
    if (!n || !m->n_spans)
        goto out;
    cell = sonde__calloc(n * (TOP_NAMES + 1), sizeof *cell);
    int32_t *step_of = sonde__malloc(m->n_spans * sizeof *step_of);
    if (!cell || !step_of) {
        sonde__free(step_of);
        d->oom = 1;
        goto out;
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        const sm_span *s = &m->spans[i];
        step_of[i] = -1;
        size_t lo = 0, hi = n; /* the last step begun at or before the span */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (st[mid]->start_ns <= s->start_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (!lo || s->start_ns >= st[lo - 1]->t_ns)
            continue;
        if (s->parent >= 0 && m->spans[s->parent].start_ns >= st[lo - 1]->start_ns)
            continue; /* nested in a section of the same step: its parent counts it */
        step_of[i] = (int32_t)(lo - 1);
        tot[s->site] += (double)(s->end_ns - s->start_ns);
    }
    for (size_t k = 0; k < TOP_NAMES; k++) { /* the names of most time, most first */
        double best = 0;
        size_t at = SIZE_MAX;
        for (size_t j = 0; j < m->n_sites; j++)
            if (tot[j] > best) {
                best = tot[j];
                at = j;
            }
        if (at == SIZE_MAX)
            break;
        top[n_top++] = (uint32_t)at;
        tot[at] = -1 - (double)n_top; /* taken; its column below */
    }
    for (size_t i = 0; i < m->n_spans; i++) {
        if (step_of[i] < 0)
            continue;
        const sm_span *s = &m->spans[i];
        size_t col = tot[s->site] < 0 ? (size_t)(-tot[s->site] - 2) : TOP_NAMES; /* other */
        cell[(size_t)step_of[i] * (TOP_NAMES + 1) + col] += (double)(s->end_ns - s->start_ns);
    }
    sonde__free(step_of);
    sbuf_puts(d, ",\"breakdown\":{\"names\":[");
    for (size_t k = 0; k < n_top; k++)
        sbuf_printf(d, "%s%d", k ? "," : "", name_ix(nm, top[k]));
    sbuf_puts(d, "],\"ns\":[");
    for (size_t i = 0; i < n && !d->oom; i++) {
        sbuf_puts(d, i ? ",[" : "[");
        for (size_t k = 0; k <= n_top; k++) {
            if (k)
                sbuf_putc(d, ',');
            sbuf_u64(d, (uint64_t)cell[i * (TOP_NAMES + 1) + (k < n_top ? k : TOP_NAMES)]);
        }
        sbuf_putc(d, ']');
    }
    sbuf_puts(d, "]}");
out:
    sonde__free(cell);
    sonde__free(st);
    sonde__free(tot);
}

typedef struct stack_ref {
    uint64_t count;
    uint32_t i;
} stack_ref;

static int cmp_stack_ref(const void *a, const void *b)
{
    const stack_ref *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The off-CPU periods for the flame graph's off-CPU scope (only where they were followed and
 * some were seen): ",\"off\":{...}", their time (ns) and, by stack, the MAX_FLAME_STACKS
 * longest (the model's order), each its functions outermost first and its time. */
static void off_json(sbuf *d, const sm_profile *p)
{
    if (!p->n_off)
        return;
    size_t k = p->n_off < MAX_FLAME_STACKS ? p->n_off : MAX_FLAME_STACKS;
    sbuf_printf(d, ",\"off\":{\"ns\":%llu,\"periods\":%llu,\"stacks\":[",
                (unsigned long long)p->off_ns, (unsigned long long)p->off_periods);
    for (size_t i = 0; i < k && !d->oom; i++) {
        sbuf_puts(d, i ? ",[" : "[");
        for (uint32_t f = 0; f < p->off[i].n_frames; f++) {
            if (f)
                sbuf_putc(d, ',');
            sbuf_u64(d, p->off[i].frames[f]);
        }
        sbuf_putc(d, ']');
    }
    sbuf_puts(d, "],\"stack_ns\":[");
    for (size_t i = 0; i < k; i++) {
        if (i)
            sbuf_putc(d, ',');
        sbuf_u64(d, p->off[i].ns);
    }
    sbuf_puts(d, "]}");
}

/* The CPU samples for the flame graphs: functions, the distinct stacks (MAX_FLAME_STACKS of
 * most samples; their functions outermost first), and per section its stacks among those. */
static void profile_json(sbuf *d, const sm_model *m)
{
    const sm_profile *p = &m->profile;
    if (!p->samples || !p->n_stacks)
        return;
    stack_ref *r = sonde__malloc(p->n_stacks * sizeof *r);
    int32_t *at = sonde__malloc(p->n_stacks * sizeof *at);
    if (!r || !at) {
        d->oom = 1;
        goto out;
    }
    for (size_t i = 0; i < p->n_stacks; i++) {
        r[i] = (stack_ref){p->counts[i], (uint32_t)i};
        at[i] = -1;
    }
    sonde__sort(r, p->n_stacks, sizeof *r, cmp_stack_ref);
    size_t k = p->n_stacks < MAX_FLAME_STACKS ? p->n_stacks : MAX_FLAME_STACKS;
    uint64_t shown = 0;
    for (size_t i = 0; i < k; i++) {
        at[r[i].i] = (int32_t)i;
        shown += r[i].count;
    }
    sbuf_printf(d, ",\"profile\":{\"samples\":%llu,\"shown\":%llu,\"hz\":%u,\"funcs\":[",
                (unsigned long long)p->samples, (unsigned long long)shown, p->hz);
    for (size_t i = 0; i < p->n_funcs; i++) {
        if (i)
            sbuf_putc(d, ',');
        sbuf_json_str(d, p->funcs[i].name);
    }
    sbuf_puts(d, "],\"stacks\":[");
    for (size_t i = 0; i < k && !d->oom; i++) {
        sbuf_puts(d, i ? ",[" : "[");
        for (size_t f = p->first[r[i].i]; f < p->first[r[i].i + 1]; f++) {
            if (f > p->first[r[i].i])
                sbuf_putc(d, ',');
            sbuf_u64(d, p->frames[f]);
        }
        sbuf_putc(d, ']');
    }
    sbuf_puts(d, "],\"counts\":[");
    for (size_t i = 0; i < k; i++) {
        if (i)
            sbuf_putc(d, ',');
        sbuf_u64(d, r[i].count);
    }
    sbuf_puts(d, "],\"sections\":[");
    for (size_t s = 0; s < p->n_sections; s++) {
        const sm_psection *ps = &p->sections[s];
        if (s)
            sbuf_putc(d, ',');
        sbuf_puts(d, "{\"name\":");
        sbuf_json_str(d, ps->name);
        sbuf_printf(d, ",\"samples\":%llu,\"stacks\":[", (unsigned long long)ps->samples);
        size_t w = 0;
        for (size_t i = 0; i < ps->n_stacks; i++) {
            if (ps->stacks[i].stack >= p->n_stacks || at[ps->stacks[i].stack] < 0)
                continue;
            sbuf_printf(d, "%s%d,", w++ ? "," : "", at[ps->stacks[i].stack]);
            sbuf_u64(d, ps->stacks[i].count);
        }
        sbuf_puts(d, "]}");
    }
    sbuf_putc(d, ']');
    off_json(d, p);
    sbuf_putc(d, '}');
out:
    sonde__free(r);
    sonde__free(at);
}

/* Whether a counter's values have a natural zero to draw from (%, memory, power). */
static int zero_based(const char *unit)
{
    static const char *u[] = {"%", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB", "W", "mW"};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        if (!strcmp(unit, u[i]))
            return 1;
    return 0;
}

static void counters_json(sbuf *d, const sm_model *m)
{
    size_t keep[CHART_POINTS + 2];
    sbuf_puts(d, ",\"counters\":[");
    int first = 1;
    for (size_t c = 0; c < m->n_counters; c++) {
        const sm_counter *k = &m->counters[c];
        if (!k->n || !k->t_ns || !chart_worthy(k))
            continue;
        const char *unit = sm_counter_unit(k->name);
        sbuf_puts(d, first ? "{\"name\":" : ",{\"name\":");
        first = 0;
        sbuf_json_str(d, k->name);
        sbuf_puts(d, ",\"unit\":");
        sbuf_json_str(d, unit);
        sbuf_printf(d, ",\"zero\":%s,\"n\":%zu,\"t\":[", zero_based(unit) ? "true" : "false",
                    (size_t)k->samples);
        size_t nk = sm_downsample(k, CHART_POINTS, keep);
        int64_t prev = 0;
        for (size_t q = 0; q < nk; q++) {
            if (q)
                sbuf_putc(d, ',');
            i64(d, k->t_ns[keep[q]] - prev);
            prev = k->t_ns[keep[q]];
        }
        sbuf_puts(d, "],\"v\":[");
        for (size_t q = 0; q < nk; q++) {
            if (q)
                sbuf_putc(d, ',');
            sbuf_json_num(d, k->v[keep[q]]);
        }
        sbuf_puts(d, "]}");
    }
    sbuf_putc(d, ']');
}

/* The statistics the page shows for a selected span's name: "stat_cols", the labels of the
 * table's duration columns (sx_stat_cols), and "stats", each name's count then those figures in
 * seconds. */
static void stats_json(sbuf *d, const sm_model *m)
{
    sbuf_puts(d, ",\"stat_cols\":[");
    int first = 1;
    for (size_t c = 0; c < sx_n_stat_cols; c++)
        if (sx_stat_cols[c].table) {
            if (!first)
                sbuf_putc(d, ',');
            first = 0;
            sbuf_json_str(d, sx_stat_cols[c].label);
        }
    sbuf_puts(d, "],\"stats\":{");
    for (size_t i = 0; i < m->n_stats; i++) {
        const sm_stat *s = &m->stats[i];
        if (i)
            sbuf_putc(d, ',');
        sbuf_json_str(d, s->name);
        sbuf_printf(d, ":[%llu", (unsigned long long)s->count);
        for (size_t c = 0; c < sx_n_stat_cols; c++)
            if (sx_stat_cols[c].table) {
                sbuf_putc(d, ',');
                sbuf_json_num(d, sx_stat_col_s(s, &sx_stat_cols[c]));
            }
        sbuf_putc(d, ']');
    }
    sbuf_putc(d, '}');
}

/* The whole data block into d (JSON, not yet made safe for the page). */
static void data_json(sbuf *d, const sm_model *m, size_t max_spans)
{
    size_t names = m->n_sites + m->n_op_names + 1;
    hnames nm = {sonde__malloc((m->n_sites ? m->n_sites : 1) * sizeof *nm.of),
                 sonde__malloc((m->n_op_names ? m->n_op_names : 1) * sizeof *nm.op_of),
                 sonde__malloc(names * sizeof *nm.site), sonde__malloc(names * sizeof *nm.op), 0};
    size_t n = 0;
    hspan *v = nm.of && nm.op_of && nm.site && nm.op ? shown_spans(m, max_spans, &n) : NULL;
    if (!v) {
        d->oom = 1;
        goto out;
    }
    for (size_t i = 0; i < m->n_sites; i++)
        nm.of[i] = -1;
    for (size_t i = 0; i < m->n_op_names; i++)
        nm.op_of[i] = -1;
    sbuf_puts(d, "{\"version\":1,\"name\":");
    sbuf_json_str(d, m->name);
    sbuf_puts(d, ",\"duration_ns\":");
    i64(d, m->duration_ns);
    sbuf_puts(d, ",\"threads\":[");
    for (size_t t = 0; t < m->n_threads; t++) {
        sbuf_puts(d, t ? ",{\"name\":" : "{\"name\":");
        sbuf_json_str(d, m->threads[t].name ? m->threads[t].name : "");
        sbuf_printf(d, ",\"tid\":%u,\"pid\":%d}", m->threads[t].tid, m->threads[t].pid);
    }
    sbuf_printf(d, "],\"spans\":{\"total\":%llu,\"n\":%zu", (unsigned long long)sm_sections(m), n);
    span_arrays(d, m, v, n, &nm);
    sbuf_puts(d, "},\"sessions\":[");
    for (size_t i = 0; i < m->n_sessions; i++) {
        const sm_session *s = &m->sessions[i];
        sbuf_puts(d, i ? ",[" : "[");
        sbuf_json_str(d, sm_str(m, s->name));
        sbuf_putc(d, ',');
        i64(d, s->start_ns);
        sbuf_putc(d, ',');
        i64(d, s->end_ns);
        sbuf_putc(d, ']');
    }
    sbuf_putc(d, ']');
    steps_json(d, m, &nm);
    counters_json(d, m);
    stats_json(d, m);
    profile_json(d, m);
    sbuf_puts(d, ",\"names\":[");
    for (size_t i = 0; i < nm.n; i++) {
        if (i)
            sbuf_putc(d, ',');
        sbuf_json_str(d, nm.op[i] >= 0 ? m->op_names[nm.op[i]] : sm_str(m, nm.site[i]));
    }
    sbuf_puts(d, "]}");
out:
    sonde__free(v);
    sonde__free(nm.of);
    sonde__free(nm.op_of);
    sonde__free(nm.site);
    sonde__free(nm.op);
}

/* d into b, with < > & as JSON escapes: inside <script> no string can end the block. */
static void put_script_json(sbuf *b, const sbuf *d)
{
    size_t from = 0;
    for (size_t i = 0; i < d->len; i++) {
        const char *e = d->data[i] == '<' ? "\\u003c" : d->data[i] == '>' ? "\\u003e"
                        : d->data[i] == '&' ? "\\u0026" : NULL;
        if (!e)
            continue;
        sbuf_add(b, d->data + from, i - from);
        sbuf_puts(b, e);
        from = i + 1;
    }
    sbuf_add(b, d->data + from, d->len - from);
}

/* ---- the page's text ---- */

typedef struct stage_key {
    uint64_t key;              /* thread << 32 | site */
    int64_t ns;
} stage_key;

static int cmp_stage_key(const void *a, const void *b)
{
    const stage_key *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

typedef struct stage_row {
    uint32_t thread, site;
    uint64_t count;
    int64_t ns;
} stage_row;

static int cmp_stage_row(const void *a, const void *b)
{
    const stage_row *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->ns != y->ns)
        return x->ns > y->ns ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

/* The stages: each thread's top-level sections by total time, as a share of the run (one thread's
 * top-level sections never overlap, so no bar passes 100%). */
static void stages(sbuf *b, const sm_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        n += m->spans[i].depth == 0;
    if (!n || m->duration_ns <= 0)
        return;
    stage_key *k = sonde__malloc(n * sizeof *k);
    stage_row *r = sonde__malloc(n * sizeof *r);
    if (!k || !r) {
        sonde__free(k);
        sonde__free(r);
        b->oom = 1;
        return;
    }
    n = 0;
    for (size_t i = 0; i < m->n_spans; i++)
        if (m->spans[i].depth == 0)
            k[n++] = (stage_key){(uint64_t)m->spans[i].thread << 32 | m->spans[i].site,
                                 m->spans[i].end_ns - m->spans[i].start_ns};
    sonde__sort(k, n, sizeof *k, cmp_stage_key);
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nr || r[nr - 1].thread != (uint32_t)(k[i].key >> 32) ||
            r[nr - 1].site != (uint32_t)k[i].key)
            r[nr++] = (stage_row){(uint32_t)(k[i].key >> 32), (uint32_t)k[i].key, 0, 0};
        r[nr - 1].count++;
        r[nr - 1].ns += k[i].ns;
    }
    sonde__sort(r, nr, sizeof *r, cmp_stage_row);
    sbuf_puts(b, "<div id=\"stage-chart\" class=\"stages\">\n");
    for (size_t i = 0; i < nr; i++) {
        if (!i || r[i].thread != r[i - 1].thread) {
            const sm_thread *t = &m->threads[r[i].thread];
            sbuf_puts(b, "<div class=\"stage-thread\">");
            if (t->name && t->name[0])
                esc(b, t->name);
            else
                sbuf_printf(b, "tid %u", t->tid);
            sbuf_puts(b, "</div>\n");
        }
        double share = (double)r[i].ns / (double)m->duration_ns;
        char d[32];
        fmt_dur(d, sizeof d, (double)r[i].ns / 1e9);
        const char *name = sm_str(m, r[i].site);
        sbuf_puts(b, "<div class=\"stage\"><span class=\"stage-name\">");
        esc(b, name);
        sbuf_printf(b, "</span><span class=\"stage-track\"><span class=\"stage-bar\" "
                       "style=\"width:%.2f%%\" data-name=\"", share > 1 ? 100 : 100 * share);
        esc(b, name);
        sbuf_printf(b, "\"></span></span><span class=\"stage-value\">%s &middot; %.1f%% of the "
                       "run &middot; %llu&times;</span></div>\n", d, 100 * share,
                    (unsigned long long)r[i].count);
    }
    sbuf_puts(b, "</div>\n");
    sonde__free(k);
    sonde__free(r);
}

static void timeline(sbuf *b, const sm_model *m, size_t max_spans)
{
    size_t shown = m->n_spans < max_spans ? m->n_spans : max_spans;
    if (sm_sections(m) > shown)
        sbuf_printf(b, "<p class=\"note\">Showing the %zu longest of %llu sections "
                       "(%s).</p>\n", shown, (unsigned long long)sm_sections(m),
                    m->n_spans > max_spans ? "html_max_spans" : "report_max_sections");
    if (m->n_ops) { /* drawn in the room the sections leave */
        size_t room = max_spans > shown ? max_spans - shown : 0;
        sbuf_printf(b, "<p class=\"note\">Operators are drawn under the sections they ran in: "
                       "%zu of %zu%s.</p>\n", m->n_ops < room ? m->n_ops : room, m->n_ops,
                    m->n_ops > room ? ", the longest (html_max_spans)" : "");
    }
    sbuf_puts(b, "<div class=\"toolbar\"><input id=\"search\" type=\"search\" "
                 "placeholder=\"Highlight sections by name\" aria-label=\"search sections\">"
                 "<button id=\"zoom-reset\" type=\"button\">Whole run</button>"
                 "<span id=\"view-range\" class=\"note\"></span>"
                 "<span class=\"note hint\">wheel or pinch: zoom &middot; drag: pan &middot; "
                 "shift+drag or drag on the axis: zoom to a range &middot; click: select</span>"
                 "</div>\n<div id=\"legend\" class=\"legend\"></div>\n"
                 "<div id=\"timeline-view\" class=\"timeline\"><noscript><p class=\"note\">The "
                 "timeline, the counter charts and the flame graph are drawn by the page's "
                 "script.</p></noscript></div>\n<div id=\"selection\" class=\"selection\" "
                 "hidden></div>\n");
    for (size_t c = 0; c < m->n_counters; c++) { /* read from a JSON report: figures alone */
        const sm_counter *k = &m->counters[c];
        if (!k->samples || k->t_ns || !chart_worthy(k))
            continue;
        sbuf_puts(b, "<p class=\"note counter-figures\">");
        esc(b, k->name);
        sbuf_printf(b, ": min %.4g, mean %.4g, max %.4g, last %.4g (%zu samples; a JSON report "
                       "keeps no samples to draw)</p>\n", k->min, sm_counter_mean(k), k->max,
                    k->last, (size_t)k->samples);
    }
}

static void stats_table(sbuf *b, const sm_model *m)
{
    /* Name, Count, the duration columns of the statistics' list (sx_stat_cols), then these */
    static const char *after[] = {"Share", "Throughput", "FLOP/s"};
    sbuf_puts(b, "<div class=\"scroll\"><table id=\"stats-table\" class=\"sortable\"><thead><tr>"
                 "<th data-type=\"text\">Name</th><th data-type=\"num\">Count</th>");
    for (size_t c = 0; c < sx_n_stat_cols; c++)
        if (sx_stat_cols[c].table)
            sbuf_printf(b, "<th data-type=\"num\">%s</th>", sx_stat_cols[c].label);
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++)
        sbuf_printf(b, "<th data-type=\"num\">%s</th>", after[i]);
    sbuf_puts(b, "</tr></thead><tbody>\n");
    for (size_t i = 0; i < m->n_stats; i++) {
        const sm_stat *s = &m->stats[i];
        sbuf_puts(b, "<tr><td>");
        esc(b, s->name);
        sbuf_printf(b, "</td><td data-v=\"%llu\">%llu</td>", (unsigned long long)s->count,
                    (unsigned long long)s->count);
        for (size_t c = 0; c < sx_n_stat_cols; c++) {
            if (!sx_stat_cols[c].table)
                continue;
            char d[32];
            double v = sx_stat_col_s(s, &sx_stat_cols[c]);
            fmt_dur(d, sizeof d, v);
            sbuf_printf(b, "<td data-v=\"%.9g\">%s</td>", v, d);
        }
        sbuf_printf(b, "<td data-v=\"%.6g\">%.1f%%</td>", s->share, 100 * s->share);
        sm_rates rates = sm_stat_rates(s, 0);
        double ups = rates.units_per_s;
        sbuf_printf(b, "<td data-v=\"%.6g\">", ups);
        if (ups > 0) {
            char r[48]; /* 173.8 K token/s, not 173767.12 token/s */
            sx_fmt_si(r, sizeof r, ups, "");
            esc(b, r);
            sbuf_putc(b, ' ');
            esc(b, s->unit);
            sbuf_puts(b, "/s");
        }
        double fps = rates.flops_per_s;
        char f[48] = "";
        if (fps > 0)
            sx_fmt_si(f, sizeof f, fps, "FLOP/s");
        sbuf_printf(b, "</td><td data-v=\"%.6g\">%s</td></tr>\n", fps, f);
    }
    sbuf_puts(b, "</tbody></table></div>\n");
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
    sbuf_printf(b, "<h2 id=\"events\">Events</h2>\n<p>%zu events",
                (size_t)(m->n_instants + m->instants_thinned));
    if (m->instants_thinned)
        sbuf_printf(b, ", %zu held (report_max_records)", m->n_instants);
    if (kept < m->n_instants)
        sbuf_printf(b, "; the first %zu are listed (NAME.json has every one held, up to "
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


/* sx_html's parts. The head: title, style, the run's host, start time and sonde version. */
static void html_head(sbuf *b, const sm_model *m)
{
    sbuf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width\"><title>sonde: ");
    esc(b, m->name);
    sbuf_printf(b, "</title><style>\n%s</style></head><body>\n<h1>sonde report: ", sx_report_css);
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
    if (m->in_progress)
        sbuf_puts(b, " &middot; <b>exported while recording: the run so far</b>");
    else if (!m->clean_end)
        sbuf_puts(b, " &middot; <b>the run did not end cleanly</b>");
    sbuf_puts(b, "</p>\n");
    const char *trigger = sm_info(m, "trigger.reason");
    if (trigger) { /* a flight recorder's dump: why it was written */
        sbuf_puts(b, "<p class=\"meta\" id=\"trigger\"><b>Flight recorder dump ");
        esc(b, sm_info(m, "trigger.index"));
        sbuf_puts(b, ":</b> ");
        esc(b, trigger);
        sbuf_puts(b, " (the ");
        esc(b, sm_info(m, "trigger.kept_s"));
        sbuf_puts(b, " s before the trigger, ");
        esc(b, sm_info(m, "trigger.after_s"));
        sbuf_puts(b, " s after)</p>\n");
    }
}

/* The cards: the run's headline figures (gs: the GPU summary, or NULL). */
static void html_cards(sbuf *b, const sm_model *m, const sa_report *an, const sm_gpu_sum *gs)
{
    char v[96], d[32];
    double dur = (double)m->duration_ns / 1e9;
    sbuf_puts(b, "<div class=\"cards\" id=\"cards\">\n");
    fmt_dur(d, sizeof d, dur);
    card(b, d, "duration");
    snprintf(v, sizeof v, "%llu", (unsigned long long)m->total_sections);
    card(b, v, "sections");
    for (size_t i = 0; i < m->n_rates; i++)
        if (m->rates[i].units > 0 && m->rates[i].seconds > 0) {
            char lab[96];
            sx_fmt_si(v, sizeof v, m->rates[i].units / m->rates[i].seconds, "");
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
    if (an->diffusion.blocks.count) {
        snprintf(v, sizeof v, "%.2f", an->diffusion.fps);
        card(b, v, "FPS (frames/s)");
        snprintf(v, sizeof v, "%.2f", an->diffusion.bps);
        card(b, v, "BPS (blocks/s)");
    }
    if (an->diffusion.total_params > 0) {
        sx_fmt_si(v, sizeof v, an->diffusion.total_params, "");
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
    if (gs) {
        fmt_dur(d, sizeof d, gs->kernel_s);
        snprintf(v, sizeof v, "%llu (%s)", (unsigned long long)gs->kernels, d);
        card(b, v, "CUDA kernels (GPU time)");
    }
    sbuf_puts(b, "</div>\n");
}

/* What the analysis found: recommendations with their evidence, and the bottlenecks. */
static void html_findings(sbuf *b, const sa_report *an)
{
    sbuf_puts(b, "<h2 id=\"recommendations\">Recommendations</h2>\n");
    if (!an->n_findings)
        sbuf_puts(b, "<p class=\"note\">No rule found anything to recommend in this run.</p>\n");
    else
        sbuf_puts(b, "<ul class=\"findings\">\n");
    for (size_t i = 0; i < an->n_findings; i++) {
        sbuf_puts(b, "<li data-rule=\"");
        esc(b, an->findings[i].rule);
        sbuf_puts(b, "\"><b>");
        esc(b, an->findings[i].title);
        sbuf_puts(b, "</b><div class=\"ev\">Evidence: ");
        esc(b, an->findings[i].evidence);
        sbuf_puts(b, "</div><div class=\"adv\">");
        esc(b, an->findings[i].advice);
        sbuf_puts(b, "</div></li>\n");
    }
    if (an->n_findings)
        sbuf_puts(b, "</ul>\n");
    sbuf_puts(b, "<h2 id=\"bottlenecks\">Bottlenecks</h2>\n<ul>\n");
    for (size_t i = 0; i < an->n_bottlenecks; i++) {
        sbuf_puts(b, "<li>");
        esc(b, an->bottlenecks[i].what);
        sbuf_puts(b, "</li>\n");
    }
    sbuf_puts(b, "</ul>\n");
}

int sx_html(const sm_model *m, sbuf *b) { return sx_alone(m, b, sx_html_report); }

/* The charts of the active steps, the diffusion steps and the blocks (sx_html_report). */
static void step_charts(sbuf *b, const sm_model *m, const sa_report *an)
{
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
                        an->diffusion.steps_per_s, an->diffusion.steps.mean_s,
                        an->diffusion.steps.p50_s, an->diffusion.steps.p99_s,
                        (unsigned long long)an->diffusion.steps.slowest, an->diffusion.steps.max_s);
            bars(b, "dstep-chart", vals, ids, m->n_dsteps, "diffusion step");
        }
        if (m->n_blocks) {
            for (size_t i = 0; i < m->n_blocks; i++) {
                vals[i] = m->blocks[i].seconds;
                ids[i] = m->blocks[i].index;
            }
            sbuf_printf(b, "<h2 id=\"blocks\">Blocks</h2>\n<p>%.2f FPS, %.2f BPS, mean %.3f s, "
                           "p50 %.3f s, p99 %.3f s, slowest block %llu (%.3f s)</p>\n",
                        an->diffusion.fps, an->diffusion.bps, an->diffusion.blocks.mean_s,
                        an->diffusion.blocks.p50_s, an->diffusion.blocks.p99_s,
                        (unsigned long long)an->diffusion.blocks.slowest, an->diffusion.blocks.max_s);
            bars(b, "block-chart", vals, ids, m->n_blocks, "block");
        }
    } else {
        b->oom = 1;
    }
    sonde__free(vals);
    sonde__free(ids);
}

int sx_html_report(sx_report *r, sbuf *b)
{
    const sm_model *m = r->m;
    size_t max_spans = r->cfg.html_max_spans;
    const sa_report *an = sx_analysis(r);
    if (!an)
        return -1;
    char v[96], d[32];
    html_head(b, m);
    sm_gpu_sum gs;
    int have_gpu = m->n_gpu && sm_gpu_summarize(m, &gs) == 0;
    html_cards(b, m, an, have_gpu ? &gs : NULL);
    /* the run's own metadata (model dimensions and the like) at the top */
    size_t at = b->len;
    sbuf_puts(b, "<table id=\"run-table\" class=\"facts run\"><tbody>\n");
    size_t rows = b->len;
    sm_each_run_meta(m, html_meta_row, b);
    if (b->len == rows)
        b->len = at; /* none */
    else
        sbuf_puts(b, "</tbody></table>\n");
    html_findings(b, an);
    sbuf_puts(b, "<h2 id=\"timeline\">Timeline</h2>\n");
    timeline(b, m, max_spans);
    if (m->n_steps)
        sbuf_puts(b, "<h2 id=\"step-breakdown-title\">Step breakdown</h2>\n<p class=\"note\">Per "
                     "step, the time of the sections outermost in it by name (threads add up: a "
                     "bar may pass the step's length, marked by its outline).</p>\n"
                     "<div id=\"step-breakdown\" class=\"figure\"></div>\n");
    if (m->profile.samples) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)m->profile.samples);
        char drawn[96] = ""; /* a timer's signal at the kernel's tick counts as several */
        if (m->profile.draws < m->profile.samples)
            snprintf(drawn, sizeof drawn, " from %llu signals at the kernel's tick",
                     (unsigned long long)m->profile.draws);
        sbuf_printf(b, "<h2 id=\"flame-title\">CPU samples</h2>\n<p class=\"note\">%s samples "
                       "at %u Hz%s, as a flame graph (callers above callees; width: samples). "
                       "Click a frame to zoom into it; select a section to see its own%s.</p>\n"
                       "<div class=\"toolbar\"><select id=\"flame-scope\" aria-label=\"samples "
                       "of\"></select></div>\n<div id=\"flame\" class=\"figure\"></div>\n",
                    v, m->profile.hz, drawn,
                    m->profile.n_off ? ", or the off-CPU time (where the threads were blocked "
                                       "in the kernel; width: time)" : "");
    }
    if (m->profile.off_followed)
        off_cpu_table(b, m);
    sbuf_puts(b, "<h2 id=\"stages\">Stages</h2>\n<p class=\"note\">Each thread's top-level "
                 "sections by total time.</p>\n");
    stages(b, m);
    if (m->n_sessions) {
        sbuf_puts(b, "<h2 id=\"sessions\">Sessions</h2>\n<table id=\"sessions-table\" "
                     "class=\"facts\"><tbody>\n");
        for (size_t i = 0; i < m->n_sessions; i++) {
            const sm_session *s = &m->sessions[i];
            fmt_dur(d, sizeof d, (double)(s->end_ns - s->start_ns) / 1e9);
            sbuf_puts(b, "<tr><th>");
            esc(b, sm_str(m, s->name));
            sbuf_printf(b, "</th><td>%s from %.3f s</td></tr>\n", d, (double)s->start_ns / 1e9);
        }
        sbuf_puts(b, "</tbody></table>\n");
    }
    if (have_gpu) {
        gpu_tables(b, &gs);
        sm_gpu_sum_free(&gs);
    }
    if (m->n_ops)
        ops_table(b, m);
    step_charts(b, m, an);
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
    sbuf_puts(b, "<h2 id=\"system\">System</h2>\n");
    facts_table(b, m, "system.", "system-table");
    size_t n_config = 0;
    for (size_t i = 0; i < m->n_info; i++)
        n_config += !strncmp(m->info[i].key, "config.", 7) &&
                    sm_info(m, m->info[i].key) == m->info[i].value;
    sbuf_printf(b, "<details id=\"configuration\"><summary>Configuration (%zu keys)</summary>\n",
                n_config);
    facts_table(b, m, "config.", "config-table");
    sbuf_puts(b, "</details>\n<script type=\"application/json\" id=\"sonde-data\">");
    sbuf data;
    sbuf_init(&data);
    data_json(&data, m, max_spans);
    if (data.oom)
        b->oom = 1;
    else
        put_script_json(b, &data);
    sbuf_free(&data);
    sbuf_printf(b, "</script>\n<script>\n%s</script>\n</body></html>\n", sx_report_js);
    return b->oom ? -1 : 0;
}
