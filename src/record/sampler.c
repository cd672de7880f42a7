/* sampler.c - the background sampler: one thread per profiler that reads the metric sources at
 * their intervals, records each reading as a counter in the same stream as the sections, and
 * draws the live display. It never blocks a host thread and takes no lock a host thread takes
 * on its recording path. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../config/keys.h"
#include "../monitor/monitor.h"
#include "../stacks/stacks.h"
#include "../util/buf.h"
#include "../util/fileio.h"
#include "record.h"
#include "../util/alloc.h"

typedef struct sampler {
    sonde_profiler *p;
    procfs_state *procfs;
    nvml_state *nvml;
    size_t n_gpus;
    sbuf info;             /* system facts, written as one INFO record */
    int display;           /* 1: this rank draws the live display */
    int tty;
    int drawn_lines;
    uint64_t last_steps;
    double last_display;
    int sample_gpu;        /* collect_gpu: NVML may be open for snapshots alone */
    procfs_state *snap_procfs; /* for snapshots when procfs sampling is off */
    sbuf snaps;            /* the snapshots so far, NAME.memory.json's entries */
    char *snap_path;
    double gpu_peak[64];   /* highest memory MiB seen per GPU index */
    double t0;
    struct sonde__latest pend[256]; /* figures of the round being sampled, not published yet */
    size_t n_pend;
} sampler;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Figure id's latest value, kept for the round (published with the rest of it by publish). */
static void set_latest(sampler *s, uint32_t id, double v)
{
    const char *stable = sonde__site_get(id)->name;
    size_t i = 0;
    while (i < s->n_pend && s->pend[i].name != stable)
        i++;
    if (i == s->n_pend && i < sizeof s->pend / sizeof s->pend[0])
        s->n_pend++;
    if (i < s->n_pend)
        s->pend[i] = (struct sonde__latest){stable, v, now_s() - s->t0};
}

/* The round's figures into the live query's table (sonde_current_metrics) at once: a reader
 * sees a whole round of a source, never some GPUs of it (the first snapshot once had three of
 * four fake GPUs' memory). */
static void publish(sampler *s)
{
    sonde_profiler *p = s->p;
    pthread_mutex_lock(&p->latest_lock);
    for (size_t k = 0; k < s->n_pend; k++) {
        size_t i = 0;
        while (i < p->n_latest && p->latest[i].name != s->pend[k].name)
            i++;
        if (i == p->n_latest && i < sizeof p->latest / sizeof p->latest[0])
            p->n_latest++;
        if (i < p->n_latest)
            p->latest[i] = s->pend[k];
    }
    pthread_mutex_unlock(&p->latest_lock);
    s->n_pend = 0;
}

static void on_counter(void *ctx, const char *name, double v)
{
    sampler *s = ctx;
    unsigned g;
    char tail[16];
    if (name[0] == 'g' && sscanf(name, "gpu%u %15[^\n]", &g, tail) == 2 && g < 64 &&
        !strcmp(tail, "memory MiB") && v > s->gpu_peak[g])
        s->gpu_peak[g] = v;
    uint32_t id = sonde__intern(name);
    if (!id || !isfinite(v))
        return;
    sonde__record(s->p, SONDE_K_COUNTER, id, 0, &v);
    set_latest(s, id, v);
}

static void on_event(void *ctx, const char *name)
{
    sampler *s = ctx;
    uint32_t id = sonde__intern(name);
    if (id)
        sonde__record(s->p, SONDE_K_INSTANT, id, 0, NULL);
}

/* System facts: "system.KEY" pairs of one INFO record. */
static void on_info(void *ctx, const char *key, const char *value)
{
    sampler *s = ctx;
    uint8_t tmp[16];
    char k[96];
    /* the totals in the live query too, beside the figures they are totals of */
    unsigned g;
    char rest[32], fig[48] = "";
    if (!strcmp(key, "memory_total_mib"))
        snprintf(fig, sizeof fig, "memory total MiB");
    else if (sscanf(key, "gpu%u_%31s", &g, rest) == 2 && !strcmp(rest, "memory_total_mib"))
        snprintf(fig, sizeof fig, "gpu%u memory total MiB", g);
    if (fig[0]) {
        char *end;
        double v = strtod(value, &end);
        uint32_t id = sonde__intern(fig);
        if (id && end != value && isfinite(v))
            set_latest(s, id, v);
    }
    snprintf(k, sizeof k, "system.%s", key);
    size_t kl = strlen(k), vl = strlen(value);
    sbuf_add(&s->info, tmp, varint_put(tmp, kl));
    sbuf_add(&s->info, k, kl);
    sbuf_add(&s->info, tmp, varint_put(tmp, vl));
    sbuf_add(&s->info, value, vl);
}

/* Writes the facts gathered since the last call as one INFO record. */
static void flush_info(sampler *s)
{
    if (s->info.len && !s->info.oom)
        sonde__write_record(s->p, SONDE_R_INFO, (const uint8_t *)s->info.data, s->info.len);
    sbuf_reset(&s->info);
}

static double get(const sampler *s, const char *name, int *ok)
{
    sonde_profiler *p = s->p;
    double v = 0;
    *ok = 0;
    pthread_mutex_lock(&p->latest_lock);
    for (size_t i = 0; i < p->n_latest && !*ok; i++)
        if (!strcmp(p->latest[i].name, name)) {
            *ok = 1;
            v = p->latest[i].value;
        }
    pthread_mutex_unlock(&p->latest_lock);
    return v;
}

/* The live display: one compact block; redrawn in place on a terminal, appended otherwise. */
static void draw(sampler *s, double now)
{
    sonde_profiler *p = s->p;
    sbuf b;
    sbuf_init(&b);
    int lines = 0;
    uint32_t sess = atomic_load(&p->cur_session);
    const char *stage = NULL;
    sonde_tbuf *stb = atomic_load(&p->session_tb);
    if (stb) {
        int32_t d = __atomic_load_n(&stb->hot.depth, __ATOMIC_RELAXED);
        if (d > 0) {
            uint32_t id = __atomic_load_n(&stb->hot.stack[0], __ATOMIC_RELAXED);
            const sonde_site_rec *r = id < sonde__site_count() ? sonde__site_get(id) : NULL;
            stage = r ? r->name : NULL;
        }
    }
    uint64_t steps = atomic_load(&p->steps);
    double rate = now > s->last_display ? (double)(steps - s->last_steps) / (now - s->last_display) : 0;
    s->last_steps = steps;
    s->last_display = now;
    if (s->tty && s->drawn_lines)
        sbuf_printf(&b, "\033[%dA", s->drawn_lines);
    const char *clr = s->tty ? "\033[2K" : "";
    sbuf_printf(&b, "%s=== sonde: %s | %.1f s", clr, p->name, now - s->t0);
    if (sess)
        sbuf_printf(&b, " | session %s", sonde__site_get(sess)->name);
    if (stage)
        sbuf_printf(&b, " | stage %s", stage);
    if (steps) /* a program without steps (sonde run) is not told it made none */
        sbuf_printf(&b, " | %llu steps (%.2f/s)", (unsigned long long)steps, rate);
    sbuf_puts(&b, " ===\n");
    lines++;
    char name[64];
    for (size_t g = 0; g < 64; g++) {
        int ok_mem, ok_pct, ok_util, ok_temp, ok_pow, ok_lim;
        snprintf(name, sizeof name, "gpu%zu memory MiB", g);
        double mem = get(s, name, &ok_mem);
        snprintf(name, sizeof name, "gpu%zu memory %%", g);
        double pct = get(s, name, &ok_pct);
        snprintf(name, sizeof name, "gpu%zu util %%", g);
        double util = get(s, name, &ok_util);
        snprintf(name, sizeof name, "gpu%zu temperature C", g);
        double temp = get(s, name, &ok_temp);
        snprintf(name, sizeof name, "gpu%zu power W", g);
        double pw = get(s, name, &ok_pow);
        snprintf(name, sizeof name, "gpu%zu power limit W", g);
        double lim = get(s, name, &ok_lim);
        if (!ok_mem && !ok_util && !ok_temp && !ok_pow)
            continue;
        sbuf_printf(&b, "%sGPU%zu:", clr, g);
        if (ok_mem && ok_pct && pct > 0)
            sbuf_printf(&b, " Memory %.0fMB / %.0fMB (%.1f%%),", mem, mem * 100.0 / pct, pct);
        else if (ok_mem)
            sbuf_printf(&b, " Memory %.0fMB,", mem);
        if (ok_util)
            sbuf_printf(&b, " Util %.1f%%,", util);
        if (ok_temp)
            sbuf_printf(&b, " Temp %.0fC,", temp);
        if (ok_pow && ok_lim)
            sbuf_printf(&b, " Power %.0f/%.0fW,", pw, lim);
        else if (ok_pow)
            sbuf_printf(&b, " Power %.0fW,", pw);
        b.len--; /* the last comma */
        sbuf_putc(&b, '\n');
        lines++;
    }
    int ok_cpu, ok_pcpu, ok_used, ok_avail, ok_rss;
    double cpu = get(s, "cpu %", &ok_cpu), pcpu = get(s, "process cpu %", &ok_pcpu);
    double used = get(s, "memory used MiB", &ok_used), avail = get(s, "memory available MiB", &ok_avail);
    double rss = get(s, "rss MiB", &ok_rss);
    if (ok_cpu || ok_used || ok_rss) {
        sbuf_printf(&b, "%sCPU:", clr);
        if (ok_cpu)
            sbuf_printf(&b, " %.1f%%", cpu);
        if (ok_pcpu)
            sbuf_printf(&b, " (process %.1f%%)", pcpu);
        if (ok_used && ok_avail)
            sbuf_printf(&b, ", Memory %.0fMB / %.0fMB (%.1f%%)", used, used + avail,
                        100.0 * used / (used + avail));
        if (ok_rss)
            sbuf_printf(&b, ", RSS %.0fMB", rss);
        sbuf_putc(&b, '\n');
        lines++;
    }
    if (!b.oom) {
        ssize_t w = write(2, b.data, b.len); /* one write: the block stays whole */
        (void)w;
    }
    s->drawn_lines = lines;
    sbuf_free(&b);
}

/* Takes the memory snapshots asked for by sonde_step and rewrites NAME.memory.json whole,
 * through a temporary file, so a crash never leaves half of it. */
static void snapshots(sampler *s)
{
    sonde_profiler *p = s->p;
    uint64_t steps[64];
    unsigned n;
    pthread_mutex_lock(&p->step_lock);
    n = p->snap_n;
    memcpy(steps, p->snap_queue, n * sizeof steps[0]);
    p->snap_n = 0;
    pthread_mutex_unlock(&p->step_lock);
    if (!n)
        return;
    procfs_state *pf = s->procfs ? s->procfs : s->snap_procfs;
    for (unsigned i = 0; i < n; i++) {
        procfs_mem hm;
        sbuf *b = &s->snaps;
        if (b->len)
            sbuf_puts(b, ",\n");
        sbuf_printf(b, "{\"step\": %llu, \"time_s\": %.6f, \"memory\": {",
                    (unsigned long long)steps[i], now_s() - s->t0);
        int first = 1;
        if (pf && procfs_memory(pf, &hm) == 0) {
            sbuf_printf(b, "\"host\": {\"rss_bytes\": %llu, \"peak_rss_bytes\": %llu, "
                           "\"system_used_bytes\": %llu, \"system_total_bytes\": %llu}",
                        hm.rss, hm.rss_peak, hm.sys_used, hm.sys_total);
            first = 0;
        }
        for (size_t g = 0; s->nvml && g < s->n_gpus; g++) {
            unsigned idx;
            unsigned long long used, total;
            if (nvml_memory(s->nvml, g, &idx, &used, &total) != 0)
                continue;
            double mib = (double)used / 1048576.0;
            if (idx < 64 && mib > s->gpu_peak[idx])
                s->gpu_peak[idx] = mib;
            double peak = idx < 64 ? s->gpu_peak[idx] * 1048576.0 : (double)used;
            sbuf_printf(b, "%s\"cuda:%u\": {\"bytes_in_use\": %llu, \"peak_bytes_in_use\": "
                           "%.0f, \"bytes_limit\": %llu}", first ? "" : ", ", idx, used, peak,
                        total);
            first = 0;
        }
        sbuf_puts(b, "}}");
    }
    if (s->snaps.oom || !s->snap_path)
        return;
    sbuf f;
    sbuf_init(&f);
    sbuf_puts(&f, "[\n");
    sbuf_add(&f, s->snaps.data, s->snaps.len);
    sbuf_puts(&f, "\n]\n");
    if (f.oom || write_file_atomic(s->snap_path, f.data, f.len) != 0)
        sonde__warn(p, "cannot write %s: %s", s->snap_path, strerror(errno));
    sbuf_free(&f);
}

static void *sampler_main(void *arg)
{
    sampler *s = arg;
    sonde_profiler *p = s->p;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    xfsz_all_blocked();
    pthread_setname_np(pthread_self(), "sonde-sampler");
    const sonde_config *c = &p->cfg;
    sonde_emit e = {s, on_counter, on_event, on_info};

    if (c->collect_cpu || c->collect_memory) {
        s->procfs = procfs_open(p->watch_pid, c->collect_cpu, c->collect_memory);
        if (s->procfs)
            procfs_describe(s->procfs, &e);
    }
    if (c->memory_every_n_steps) {
        if (!s->procfs)
            s->snap_procfs = procfs_open(0, 0, 0);
        char name[600];
        snprintf(name, sizeof name, "%s.memory.json", p->name);
        s->snap_path = path_join(p->output_dir, name);
    }
    s->sample_gpu = c->collect_gpu;
    if (c->collect_gpu || c->memory_every_n_steps) {
        char why[300];
        s->nvml = nvml_open(c, why, sizeof why);
        if (s->nvml) {
            nvml_describe(s->nvml, &e);
            s->n_gpus = nvml_device_count(s->nvml);
        } else {
            on_info(s, "gpu_status", why); /* the report's one line on why there is no GPU */
        }
    }
    flush_info(s);
    publish(s);

    double t = now_s();
    double next_cpu = t, next_gpu = t;
    /* the first block as soon as there are figures to show (after the first CPU sample), not a
     * whole display interval into the run */
    double next_display = t + (c->display_interval_s < c->cpu_interval_s ? c->display_interval_s
                                                                        : c->cpu_interval_s);
    s->last_display = t;
    while (!atomic_load(&p->sampler_stop)) {
        t = now_s();
        if (s->procfs && t >= next_cpu) {
            procfs_sample(s->procfs, &e);
            publish(s);
            flush_info(s); /* processes seen for the first time (sonde run) */
            next_cpu += c->cpu_interval_s;
            if (next_cpu < t) /* fell behind (a stopped process): skip, do not burst */
                next_cpu = t + c->cpu_interval_s;
        }
        if (s->nvml && s->sample_gpu && t >= next_gpu) {
            nvml_sample(s->nvml, &e);
            publish(s);
            next_gpu += c->gpu_interval_s;
            if (next_gpu < t)
                next_gpu = t + c->gpu_interval_s;
        }
        snapshots(s);
        if (s->display && t >= next_display) {
            draw(s, t);
            next_display = t + c->display_interval_s;
        }
        double wake = 1e300;
        if (s->procfs && next_cpu < wake)
            wake = next_cpu;
        if (s->nvml && s->sample_gpu && next_gpu < wake)
            wake = next_gpu;
        if (s->display && next_display < wake)
            wake = next_display;
        if (wake == 1e300)
            wake = t + 3600;
        double dt = wake - now_s();
        if (dt <= 0)
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double secs = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + dt;
        ts.tv_sec = (time_t)secs;
        ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (sem_timedwait(&p->sampler_wake, &ts) != 0 && errno == EINTR) {
        }
    }
    snapshots(s); /* those asked for before the stop */
    if (s->nvml && s->sample_gpu) {
        const char *notes = nvml_notes(s->nvml);
        if (notes[0]) {
            on_info(s, "gpu_notes", notes);
            flush_info(s);
        }
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        atomic_store(&p->sampler_cpu_ns, (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec);
    return NULL;
}

int sonde__sampler_start(sonde_profiler *p)
{
    const sonde_config *c = &p->cfg;
    int display = c->real_time_display && (c->display_all_ranks || c->rank <= 0);
    if (!c->collect_cpu && !c->collect_memory && !c->collect_gpu && !display &&
        !c->memory_every_n_steps)
        return 0;
    sampler *s = sonde__calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->p = p;
    s->display = display;
    s->tty = isatty(2);
    s->t0 = now_s();
    sbuf_init(&s->info);
    sbuf_init(&s->snaps);
    if (sem_init(&p->sampler_wake, 0, 0) != 0 ||
        pthread_create(&p->sampler, NULL, sampler_main, s) != 0) {
        sonde__free(s);
        return -1;
    }
    p->sampler_state = s;
    p->sampler_started = 1;
    return 0;
}

void sonde__sampler_stop(sonde_profiler *p)
{
    if (!p->sampler_started)
        return;
    atomic_store(&p->sampler_stop, 1);
    sem_post(&p->sampler_wake);
    pthread_join(p->sampler, NULL);
    sonde__sampler_forget(p);
}

void sonde__sampler_forget(sonde_profiler *p)
{
    p->sampler_started = 0;
    sampler *s = p->sampler_state;
    if (!s)
        return;
    procfs_close(s->procfs);
    procfs_close(s->snap_procfs);
    nvml_close(s->nvml);
    sbuf_free(&s->info);
    sbuf_free(&s->snaps);
    sonde__free(s->snap_path);
    sonde__free(s);
    p->sampler_state = NULL;
    sem_destroy(&p->sampler_wake);
}
