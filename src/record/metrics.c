/* metrics.c - live metrics for Prometheus (metrics_port): the writer follows the events it
 * writes (under wlock: each section's calls and duration as its tally closes them, or by a walk
 * of the events where the tally is off; the steps' times, throughput and FLOPs) into counters
 * a thread of its own serves at /metrics, with the sampler's latest figures and the dropped
 * events, in the OpenMetrics text format or
 * Prometheus's 0.0.4 (by the request's Accept header). Nothing runs on the recording threads:
 * the totals are what the writer sees, at its passes (flush_interval_s), so a scrape is at most
 * one pass behind. docs/monitoring.md, "Live metrics". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../format/tally.h"
#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/clock.h"
#include "../util/sites.h"
#include "../util/strmap.h"
#include "record.h"

#define PAGE 256                               /* sites a page of totals */
#define PAGES (SONDE_MAX_ID / PAGE)
#define UNITS 16                               /* throughput units kept apart */
static const double g_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                              0.25,  0.5,    1,     2.5,  5,     10,   30};
#define BUCKETS (sizeof g_le / sizeof g_le[0])

typedef struct live_site {
    _Atomic uint64_t calls, ticks;
} live_site;

/* A file thread's sections as its own walk follows them (sonde__live_events), where the tally
 * does not (it is off): open, the tally's kind of stack (its open, depth and cap_open only),
 * closed by the tally's rule (sonde_tally_closes). */
typedef struct live_thread {
    sonde_tally_thread open;
    int seen;
    int in_order;              /* this record's events come after the last one's */
    int via_tally;             /* its sections were followed through the tally up to now */
    uint64_t next_slot;
} live_thread;

/* The sections that end in one record, summed by site before they are published (a loop's
 * few names: most ends add to a slot already theirs): direct-mapped by id. */
#define ENDS 16
typedef struct ends {
    uint32_t id[ENDS];         /* 0: empty */
    uint64_t calls[ENDS], ticks[ENDS];
} ends;

/* A double the writer sums and the server reads: its bits, stored whole. */
typedef struct live_sum {
    double v;                  /* the writer's */
    _Atomic uint64_t bits;     /* published */
} live_sum;

struct sonde_live {
    live_site *_Atomic pages[PAGES];
    _Atomic uint32_t top;      /* ids below it may have totals */
    live_thread **th;          /* the writer's, by file thread (n_th entries) */
    ends x;                    /* the writer's: the record's ends, published at its end */
    size_t n_th;
    double tick_s;             /* seconds a tick (the clock's nominal rate) */
    uint64_t origin, last_end, begin;
    int begun;
    _Atomic uint64_t step_le[BUCKETS], steps, step_ticks;
    uint32_t unit_id[UNITS];   /* 0: the run's unit */
    _Atomic int n_units;
    live_sum units[UNITS], units_s[UNITS], flops;
    int listen_fd, wake_fd;
    pthread_t thread;
    int started;
};

static void sum_add(live_sum *s, double v)
{
    s->v += v;
    uint64_t b;
    memcpy(&b, &s->v, sizeof b);
    atomic_store_explicit(&s->bits, b, memory_order_relaxed);
}

static double sum_get(live_sum *s)
{
    uint64_t b = atomic_load_explicit(&s->bits, memory_order_relaxed);
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ---- the writer's side (under wlock) --------------------------------------------------- */
static live_site *site_of(struct sonde_live *l, uint32_t id)
{
    if (id >= SONDE_MAX_ID)
        return NULL;
    live_site *pg = atomic_load_explicit(&l->pages[id / PAGE], memory_order_acquire);
    if (!pg) {
        if (!(pg = sonde__calloc(PAGE, sizeof *pg)))
            return NULL; /* out of memory: this site is not counted */
        atomic_store_explicit(&l->pages[id / PAGE], pg, memory_order_release);
    }
    if (id >= atomic_load_explicit(&l->top, memory_order_relaxed))
        atomic_store_explicit(&l->top, id + 1, memory_order_release);
    return &pg[id % PAGE];
}

/* calls sections of site id, ticks long in all, added to its published totals. */
static void site_add(struct sonde_live *l, uint32_t id, uint64_t calls, uint64_t ticks)
{
    live_site *s = site_of(l, id);
    if (!s)
        return;
    atomic_store_explicit(&s->calls, atomic_load_explicit(&s->calls, memory_order_relaxed) + calls,
                          memory_order_relaxed);
    atomic_store_explicit(&s->ticks, atomic_load_explicit(&s->ticks, memory_order_relaxed) + ticks,
                          memory_order_relaxed);
}

static inline void section_done(struct sonde_live *l, ends *x, uint32_t id, uint64_t begin,
                                uint64_t end)
{
    unsigned k = id % ENDS;
    if (x->id[k] != id) {
        if (x->id[k])
            site_add(l, x->id[k], x->calls[k], x->ticks[k]);
        x->id[k] = id;
        x->calls[k] = x->ticks[k] = 0;
    }
    x->calls[k]++;
    x->ticks[k] += end > begin ? end - begin : 0;
}

static void step_done(struct sonde_live *l, uint64_t begin, uint64_t end)
{
    uint64_t d = end > begin ? end - begin : 0;
    double s = (double)d * l->tick_s;
    for (size_t b = 0; b < BUCKETS; b++)
        if (s <= g_le[b])
            atomic_fetch_add_explicit(&l->step_le[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->step_ticks, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->steps, 1, memory_order_relaxed);
}

void *sonde__live_thread(sonde_profiler *p, uint32_t thread, uint64_t slot, int via_tally)
{
    if (atomic_load_explicit(&p->live_off, memory_order_relaxed))
        return NULL; /* before p->live is looked at: a handler does not hold wlock */
    struct sonde_live *l = p->live;
    live_thread *t = l ? SONDE_TABLE_AT(l->th, l->n_th, thread, NULL) : NULL;
    if (!t)
        return NULL;
    t->in_order = !t->seen || t->next_slot == slot;
    t->seen = 1;
    if (via_tally)
        t->via_tally = 1;
    return t;
}

void sonde__live_section(sonde_profiler *p, uint32_t id, uint64_t begin, uint64_t end)
{
    section_done(p->live, &p->live->x, id, begin, end);
}

/* A section open on thread t from now on: 0, or -1 out of memory (what t had open is then no
 * longer followed: its stack is emptied, as for events out of their order). */
static int live_push(live_thread *t, uint32_t id, uint64_t tick)
{
    if (t->open.depth == t->open.cap_open && sonde_tally_begin_grow(&t->open)) {
        t->open.depth = 0;
        return -1;
    }
    t->open.open[t->open.depth++] = (sonde_tally_open){id, tick};
    return 0;
}

/* One event of thread t (NULL: an event not a section's edge). */
static inline void live_event(struct sonde_live *l, live_thread *t, ends *x, const sonde__ev *e)
{
    unsigned kind = e->tag & 15u;
    uint32_t id = e->tag >> 4;
    if (kind == SONDE_K_BEGIN) {
        live_push(t, id, e->ts);
    } else if (kind == SONDE_K_END) { /* as the tally, and a reader, take it */
        size_t k = sonde_tally_closes(&t->open, id);
        for (size_t j = t->open.depth; j-- > k;)
            section_done(l, x, t->open.open[j].id, t->open.open[j].tick, e->ts);
        t->open.depth = k;
    } else if (kind == SONDE_K_STEP) {
        if (e->arg & SONDE_STEP_BEGIN) {
            l->begin = e->ts;
            l->begun = 1;
            return;
        }
        step_done(l, l->begun ? l->begin : l->last_end ? l->last_end : l->origin, e->ts);
        l->last_end = e->ts;
        l->begun = 0;
    } else if (kind == SONDE_K_THROUGHPUT || kind == SONDE_K_FLOPS) {
        double v[2];
        memcpy(v, e + 1, sizeof v); /* the values fill the slot after the event */
        if (kind == SONDE_K_FLOPS) {
            sum_add(&l->flops, v[0]);
            return;
        }
        int n = atomic_load_explicit(&l->n_units, memory_order_relaxed), u = 0;
        while (u < n && l->unit_id[u] != id)
            u++;
        if (u == n) {
            if (n == UNITS)
                return;
            l->unit_id[n] = id;
            atomic_store_explicit(&l->n_units, n + 1, memory_order_release);
        }
        sum_add(&l->units[u], v[0]);
        if (v[1] > 0)
            sum_add(&l->units_s[u], v[1]);
    }
}

void sonde__live_other(sonde_profiler *p, const sonde__ev *e)
{
    live_event(p->live, NULL, &p->live->x, e); /* not an edge: no thread's sections touched */
}

void sonde__live_done(sonde_profiler *p, void *thread, uint64_t slot_after)
{
    struct sonde_live *l = p->live;
    for (unsigned k = 0; k < ENDS; k++)
        if (l->x.id[k]) {
            site_add(l, l->x.id[k], l->x.calls[k], l->x.ticks[k]);
            l->x.id[k] = 0;
        }
    ((live_thread *)thread)->next_slot = slot_after;
}

void sonde__live_events(sonde_profiler *p, void *thread, const sonde__ev *ev, uint32_t n,
                        const sonde_tally_thread *counted)
{
    struct sonde_live *l = p->live;
    live_thread *t = thread;
    if (t->via_tally) { /* the tally went off: its open sections are this walk's to close */
        t->via_tally = 0;
        t->open.depth = 0;
        for (size_t j = 0; counted && t->in_order && j < counted->depth; j++)
            if (live_push(t, counted->open[j].id, counted->open[j].tick))
                break;
    } else if (!t->in_order) {
        t->open.depth = 0; /* its events out of their order: what was open is not followed */
    }
    for (uint32_t i = 0; i < n;) {
        unsigned kind = ev[i].tag & 15u;
        live_event(l, t, &l->x, &ev[i]);
        i += kind <= SONDE_K_END ? 1 : sonde_kind_slots(kind);
    }
}


/* ---- the page ---------------------------------------------------------------------------- */
/* A label value: backslash, quote and line feed escaped. */
static void label(sbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            sbuf_putc(b, '\\');
        if (*s == '\n')
            sbuf_puts(b, "\\n");
        else
            sbuf_putc(b, *s);
    }
}

typedef struct page {
    sbuf *b;
    int om;                    /* OpenMetrics (else Prometheus text 0.0.4) */
    const char *run, *rank;
} page;

/* A family's HELP and TYPE lines. A counter's family is named without _total in OpenMetrics,
 * with it in Prometheus's format. */
static void family(page *g, const char *name, const char *type, const char *help)
{
    size_t n = strlen(name);
    int total = !strcmp(type, "counter") && g->om && n > 6 && !strcmp(name + n - 6, "_total");
    sbuf_printf(g->b, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)(total ? n - 6 : n), name, help,
                (int)(total ? n - 6 : n), name, type);
}

/* A sample's name and labels: the run's, then key="value" (key NULL: none). */
static void sample(page *g, const char *name, const char *key, const char *value)
{
    sbuf_printf(g->b, "%s{run=\"", name);
    label(g->b, g->run);
    sbuf_printf(g->b, "\",rank=\"%s\"", g->rank);
    if (key) {
        sbuf_printf(g->b, ",%s=\"", key);
        label(g->b, value);
        sbuf_putc(g->b, '"');
    }
    sbuf_putc(g->b, '}');
}

static void value(page *g, double v) { sbuf_printf(g->b, " %.17g\n", v); }

/* Sites of one name (a macro's site and a run-time name alike) add up to one series. */
static void sections(page *g, struct sonde_live *l)
{
    uint32_t top = atomic_load_explicit(&l->top, memory_order_acquire);
    uint32_t named = sonde__site_count();
    strmap idx;
    strmap_init(&idx);
    struct row {
        const char *name;
        uint64_t calls, ticks;
    } *rows = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t id = 1; id < top && id < named; id++) {
        live_site *pg = atomic_load_explicit(&l->pages[id / PAGE], memory_order_acquire);
        uint64_t c = pg ? atomic_load_explicit(&pg[id % PAGE].calls, memory_order_relaxed) : 0;
        if (!c)
            continue;
        const char *name = sonde__site_get(id)->name;
        int k = strmap_get(&idx, name);
        if (k < 0) {
            if (SONDE_GROW(rows, n, cap) || strmap_put(&idx, name, (int)n)) {
                g->b->oom = 1;
                break;
            }
            rows[n] = (struct row){name, 0, 0};
            k = (int)n++;
        }
        rows[k].calls += c;
        rows[k].ticks += atomic_load_explicit(&pg[id % PAGE].ticks, memory_order_relaxed);
    }
    family(g, "sonde_section_calls_total", "counter", "Sections that ended, by name.");
    for (size_t k = 0; k < n; k++) {
        sample(g, "sonde_section_calls_total", "section", rows[k].name);
        value(g, (double)rows[k].calls);
    }
    family(g, "sonde_section_seconds_total", "counter", "Seconds in sections that ended, by name.");
    for (size_t k = 0; k < n; k++) {
        sample(g, "sonde_section_seconds_total", "section", rows[k].name);
        value(g, (double)rows[k].ticks * l->tick_s);
    }
    strmap_free(&idx);
    sonde__free(rows);
}

static void steps(page *g, struct sonde_live *l)
{
    family(g, "sonde_step_seconds", "histogram", "Step durations (sonde_step).");
    char le[32];
    for (size_t b = 0; b < BUCKETS; b++) {
        snprintf(le, sizeof le, "%g", g_le[b]);
        sample(g, "sonde_step_seconds_bucket", "le", le);
        value(g, (double)atomic_load_explicit(&l->step_le[b], memory_order_relaxed));
    }
    uint64_t n = atomic_load_explicit(&l->steps, memory_order_relaxed);
    sample(g, "sonde_step_seconds_bucket", "le", "+Inf");
    value(g, (double)n);
    sample(g, "sonde_step_seconds_sum", NULL, NULL);
    value(g, (double)atomic_load_explicit(&l->step_ticks, memory_order_relaxed) * l->tick_s);
    sample(g, "sonde_step_seconds_count", NULL, NULL);
    value(g, (double)n);
}

static void throughput(page *g, struct sonde_live *l, const char *run_unit)
{
    int n = atomic_load_explicit(&l->n_units, memory_order_acquire);
    for (int pass = 0; pass < 2 && n; pass++) {
        const char *name = pass ? "sonde_throughput_seconds_total" : "sonde_throughput_units_total";
        family(g, name, "counter",
               pass ? "Seconds the throughput was measured over (sonde_throughput)."
                    : "Units processed (sonde_throughput), by unit.");
        for (int u = 0; u < n; u++) {
            uint32_t id = l->unit_id[u];
            sample(g, name, "unit", id ? sonde__site_get(id)->name : run_unit);
            value(g, sum_get(pass ? &l->units_s[u] : &l->units[u]));
        }
    }
    family(g, "sonde_flops_total", "counter", "Floating-point operations recorded (sonde_flops).");
    sample(g, "sonde_flops_total", NULL, NULL);
    value(g, sum_get(&l->flops));
}

/* The sampler's figure name as a metric of its own and its gpu label ("" none), or NULL. */
static const char *figure_metric(const char *fig, char *gpu, size_t cap)
{
    static const struct {
        const char *fig, *metric;
    } plain[] = {{"process cpu %", "sonde_process_cpu_percent"},
                 {"rss MiB", "sonde_process_rss_mib"},
                 {"cpu %", "sonde_system_cpu_percent"}};
    gpu[0] = 0;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(fig, plain[i].fig))
            return plain[i].metric;
    unsigned n;
    int at = 0;
    if (sscanf(fig, "gpu%u %n", &n, &at) != 1 || !at)
        return NULL;
    snprintf(gpu, cap, "%u", n);
    const char *tail = fig + at;
    return !strcmp(tail, "util %")       ? "sonde_gpu_utilization_percent"
           : !strcmp(tail, "memory MiB") ? "sonde_gpu_memory_mib"
           : !strcmp(tail, "power W")    ? "sonde_gpu_power_watts"
                                         : NULL;
}

static void sampled(page *g, sonde_profiler *p)
{
    sonde_current_metric cur[256];
    int n = sonde_current_metrics(p, cur, sizeof cur / sizeof cur[0]);
    if (n > (int)(sizeof cur / sizeof cur[0]))
        n = (int)(sizeof cur / sizeof cur[0]);
    static const char *const named[] = {"sonde_process_cpu_percent", "sonde_process_rss_mib",
                                        "sonde_system_cpu_percent", "sonde_gpu_utilization_percent",
                                        "sonde_gpu_memory_mib", "sonde_gpu_power_watts"};
    char gpu[16];
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        int any = 0;
        for (int i = 0; i < n; i++) {
            const char *m = figure_metric(cur[i].name, gpu, sizeof gpu);
            if (!m || strcmp(m, named[k]))
                continue;
            if (!any++)
                family(g, m, "gauge", "The sampler's latest reading (docs/monitoring.md).");
            sample(g, m, gpu[0] ? "gpu" : NULL, gpu);
            value(g, cur[i].value);
        }
    }
    if (n > 0)
        family(g, "sonde_sampled", "gauge",
               "Every figure the sampler reads, its latest value, by its name.");
    for (int i = 0; i < n; i++) {
        sample(g, "sonde_sampled", "figure", cur[i].name);
        value(g, cur[i].value);
    }
}

/* The page of every metric, in the OpenMetrics format (om) or Prometheus's text format. */
static void make_page(sonde_profiler *p, struct sonde_live *l, int om, sbuf *b)
{
    char rank[16] = "";
    if (p->cfg.rank >= 0)
        snprintf(rank, sizeof rank, "%d", p->cfg.rank);
    page g = {b, om, p->name ? p->name : "?", rank};
    family(&g, "sonde_info", "gauge", "The run this profiler records.");
    sample(&g, "sonde_info", "version", SONDE_VERSION_STRING);
    value(&g, 1);
    sections(&g, l);
    steps(&g, l);
    throughput(&g, l, p->unit ? p->unit : "units");
    uint64_t dropped = 0;
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next))
        dropped += atomic_load_explicit(&tb->dropped, memory_order_relaxed);
    family(&g, "sonde_dropped_events_total", "counter",
           "Events dropped: the buffers were full (buffer_mb).");
    sample(&g, "sonde_dropped_events_total", NULL, NULL);
    value(&g, (double)dropped);
    sampled(&g, p);
    if (om)
        sbuf_puts(b, "# EOF\n");
}

/* ---- the server ------------------------------------------------------------------------ */
static int send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply(int fd, const char *status, const char *type, const char *body, size_t n,
                  int head)
{
    char h[320];
    int k = snprintf(h, sizeof h, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                                  "Connection: close\r\n\r\n", status, type, n);
    if (send_all(fd, h, (size_t)k) == 0 && !head)
        send_all(fd, body, n);
}

/* One request on fd: GET or HEAD /metrics, read within 2 s and 8 KiB. */
static void serve_one(sonde_profiler *p, struct sonde_live *l, int fd)
{
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[8192];
    size_t n = 0;
    while (n < sizeof req - 1) {
        ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = 0;
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    req[n] = 0;
    static const char text[] = "text/plain; charset=utf-8";
    char method[8] = "", path[256] = "";
    if (sscanf(req, "%7s %255s", method, path) != 2) {
        static const char bad[] = "a request line was expected: GET /metrics HTTP/1.1\n";
        reply(fd, "400 Bad Request", text, bad, sizeof bad - 1, 0);
        return;
    }
    int head = !strcmp(method, "HEAD");
    if (strcmp(method, "GET") && !head) {
        static const char m[] = "only GET and HEAD\n";
        reply(fd, "405 Method Not Allowed", text, m, sizeof m - 1, 0);
        return;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = 0;
    if (strcmp(path, "/metrics")) {
        static const char nf[] = "not found: sonde serves /metrics\n";
        reply(fd, "404 Not Found", text, nf, sizeof nf - 1, head);
        return;
    }
    /* OpenMetrics when the scraper asks for it (Prometheus does), else Prometheus's format */
    int om = strcasestr(req, "application/openmetrics-text") != NULL;
    sbuf b;
    sbuf_init(&b);
    make_page(p, l, om, &b);
    if (b.oom) {
        static const char e[] = "out of memory\n";
        reply(fd, "500 Internal Server Error", text, e, sizeof e - 1, head);
    } else {
        reply(fd, "200 OK",
              om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                 : "text/plain; version=0.0.4; charset=utf-8",
              b.data, b.len, head);
    }
    sbuf_free(&b);
}

static void *serve(void *arg)
{
    sonde_profiler *p = arg;
    struct sonde_live *l = p->live;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* host signals go to host threads */
    pthread_setname_np(pthread_self(), "sonde-metrics");
    struct pollfd f[2] = {{l->listen_fd, POLLIN, 0}, {l->wake_fd, POLLIN, 0}};
    for (;;) {
        if (poll(f, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (f[1].revents)
            break;
        if (!(f[0].revents & POLLIN))
            continue;
        int c = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        serve_one(p, l, c);
        close(c);
    }
    return NULL;
}

/* The listening socket on address:port, or -1 with why said. */
static int listen_on(const char *address, unsigned port, char *why, size_t cap)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof *v6;
    } else {
        snprintf(why, cap, "metrics_address %s: not an IPv4 or IPv6 address", address);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0) {
        int e = errno;
        snprintf(why, cap, "metrics_port %u: cannot listen on %s port %u: %s%s", port, address,
                 port, strerror(e),
                 e == EADDRINUSE ? " (another program, or another profiler, has it)" : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int sonde__metrics_start(sonde_profiler *p, char *why, size_t cap)
{
    const char *address = p->cfg.metrics_address ? p->cfg.metrics_address : "127.0.0.1";
    struct sonde_live *l = sonde__calloc(1, sizeof *l);
    if (!l) {
        snprintf(why, cap, "metrics_port: out of memory");
        return -1;
    }
    l->listen_fd = listen_on(address, p->cfg.metrics_port, why, cap);
    l->wake_fd = l->listen_fd >= 0 ? eventfd(0, EFD_CLOEXEC) : -1;
    if (l->listen_fd < 0 || l->wake_fd < 0) {
        if (l->listen_fd >= 0) {
            snprintf(why, cap, "metrics_port: eventfd: %s", strerror(errno));
            close(l->listen_fd);
        }
        sonde__free(l);
        return -1;
    }
    const sonde_clock_info *ci = sonde__clock();
    l->tick_s = ci->ticks_per_s > 0 ? 1.0 / ci->ticks_per_s : 1e-9;
    l->origin = sonde__ticks();
    sonde__wlock(p); /* the writer follows its events from its next pass */
    p->live = l;
    sonde__wunlock(p);
    if (pthread_create(&l->thread, NULL, serve, p) != 0) {
        snprintf(why, cap, "metrics_port: cannot start its thread");
        sonde__metrics_stop(p);
        return -1;
    }
    l->started = 1;
    return 0;
}

void sonde__metrics_stop(sonde_profiler *p)
{
    struct sonde_live *l = p->live;
    if (!l)
        return;
    uint64_t one = 1;
    int woke = !l->started || write(l->wake_fd, &one, sizeof one) == (ssize_t)sizeof one;
    if (l->started && woke)
        pthread_join(l->thread, NULL);
    sonde__wlock(p);
    p->live = NULL;
    sonde__wunlock(p);
    if (!woke)
        return; /* its thread could not be told to stop: it keeps what it reads */
    close(l->listen_fd);
    close(l->wake_fd);
    for (size_t i = 0; i < PAGES; i++)
        sonde__free(atomic_load(&l->pages[i]));
    for (size_t i = 0; i < l->n_th; i++) {
        if (l->th[i])
            sonde_tally_thread_free(&l->th[i]->open);
        sonde__free(l->th[i]);
    }
    sonde__free(l->th);
    sonde__free(l);
}

void sonde__metrics_forget(sonde_profiler *p)
{
    /* a forked child: the thread did not come across, the port stays the parent's */
    struct sonde_live *l = p->live;
    if (!l)
        return;
    close(l->listen_fd);
    close(l->wake_fd);
    p->live = NULL; /* the copy of its memory is left: a lock of the parent's may guard it */
}
