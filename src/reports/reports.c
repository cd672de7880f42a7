/* reports.c - the layer above the recorder and the reading: what the library writes at a run's
 * end (sonde_destroy, sonde_export), at a step schedule's window end and for a flight recorder's
 * dump, by reading the run's .sonde file back through the reader the CLI uses and handing the
 * model to the exporters (export/); and sonde_summary, filled from the same model. The recorder
 * calls it through the hook sonde_create gives each profiler (sonde__reports), never through an
 * include: the exporters never see a profiler, the recorder never sees a model. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../export/export.h"
#include "../record/record.h"
#include "../util/alloc.h"
#include "reports.h"

/* The profiler's file read back, writing e's early reports as it is read (e NULL: none). Before
 * the run has ended (sonde_export while recording) the file has no END record yet: the model
 * says the run is in progress, and the reader's "did not end cleanly" warning gives way to one
 * saying the report holds the run so far. */
static int read_back(sonde_profiler *p, sx_early *e, const sm_part *part, sm_model *m)
{
    if (!p->path)
        return sonde__fail(SONDE_ESTATE, "nothing was recorded: %s",
                           p->status_msg[0] ? p->status_msg : "the profiler is disabled");
    int rc = e      ? sx_read_file(p->path, NULL, 0, e, m)
             : part ? sm_read_file_from(p->path, part, p->window_read, m)
                    : sm_read_file(p->path, m);
    if (rc || m->clean_end || atomic_load(&p->finalized))
        return rc;
    m->in_progress = 1;
    for (size_t i = 0; i < m->n_warnings; i++) {
        if (!strstr(m->warnings[i], "did not end cleanly"))
            continue;
        char *w = NULL;
        if (sonde__asprintf(&w, "exported while the run was recording: the run so far "
                                "(%.3f s)", (double)m->duration_ns / 1e9) < 0 || !w) {
            sx_early_drop(e);
            sm_free(m);
            return sonde__fail(SONDE_ENOMEM, "%s: out of memory", p->path);
        }
        sonde__free(m->warnings[i]);
        m->warnings[i] = w;
    }
    return 0;
}

/* The early reports of a reading whose reports are written in formats to dir as name: those of
 * the instances CSV's formats (sx_read_file), else none (NULL). */
static sx_early *early_for(sx_early *e, const char *dir, const char *name, unsigned formats)
{
    if (!(formats & (SONDE_FORMAT_INSTANCES | SONDE_FORMAT_CSV)))
        return NULL;
    *e = (sx_early){.dir = dir, .name = name, .formats = formats};
    return e;
}

static int write_reports(sonde_profiler *p, const char *path)
{
    sm_model m;
    sx_early early, *e = path ? NULL : early_for(&early, p->output_dir, p->name, p->cfg.formats);
    int rc = read_back(p, e, NULL, &m);
    if (rc)
        return rc;
    if (path)
        rc = sx_write_path(&m, path);
    else
        rc = sx_write_formats_early(&m, p->output_dir, p->name, p->cfg.formats, e);
    if (!path && p->cfg.print_summary && (p->cfg.rank <= 0 || p->cfg.display_all_ranks))
        sx_print_summary(&m);
    sm_free(&m);
    return rc;
}

static int write_dump_reports(sonde_profiler *p, const char *path, const char *stem)
{
    sm_model m;
    sx_early early, *e = early_for(&early, p->output_dir, stem, p->cfg.formats);
    int rc = e ? sx_read_file(path, NULL, 0, e, &m) : sm_read_file(path, &m);
    if (rc) {
        fprintf(stderr, "sonde: flight recorder: %s cannot be read back: %s; `sonde export %s` "
                        "may write its reports\n", path, sonde_last_error(), path);
        return rc;
    }
    rc = sx_write_formats_early(&m, p->output_dir, stem, p->cfg.formats, e);
    if (rc)
        fprintf(stderr, "sonde: flight recorder: the reports of %s were not all written: %s; "
                        "`sonde export %s` writes them again\n", path, sonde_last_error(), path);
    sm_free(&m);
    return rc;
}

static int write_cycle_trace(sonde_profiler *p, int cycle, const char *path)
{
    if (!p->window_read) /* else each window's reading walks the whole file again */
        p->window_read = sonde__calloc(1, sizeof *p->window_read);
    const sm_part part = {p->window_from, p->window_session, p->window_session_tick,
                          p->window_session_name, p->window_session_thread};
    sm_model m;
    int rc = read_back(p, NULL, &part, &m);
    if (rc)
        return rc;
    rc = sonde__fail(SONDE_ENOTFOUND, "no active window %d in %s", cycle, p->path);
    for (size_t i = 0; i < m.n_windows; i++)
        if (m.windows[i].cycle == cycle)
            rc = sx_write_trace_range(&m, path, m.windows[i].start_ns, m.windows[i].end_ns);
    sm_free(&m);
    return rc;
}

static void release(sonde_profiler *p)
{
    if (!p->window_read)
        return;
    sm_resume_free(p->window_read);
    sonde__free(p->window_read);
    p->window_read = NULL;
}

const struct sonde_reports sonde__reports = {write_reports, write_dump_reports, write_cycle_trace,
                                             release};

sonde_profiler *sonde_create(const sonde_config *cfg_in)
{
    return sonde__create_watching(cfg_in, 0, "", &sonde__reports);
}

/* Copies s to *np (room was counted) and moves *np past it; returns the copy. */
static const char *put_str(char **np, const char *s)
{
    size_t l = strlen(s) + 1;
    memcpy(*np, s, l);
    const char *at = *np;
    *np += l;
    return at;
}

sonde_summary_t *sonde_summary(sonde_profiler *p)
{
    if (!p || p->destroyed) {
        sonde__fail(p ? SONDE_ESTATE : SONDE_EINVAL, "sonde_summary: %s",
                    p ? "the profiler was destroyed by sonde_destroy" : "profiler is NULL");
        return NULL;
    }
    if (p->fd >= 0) {
        sonde__wlock(p);
        sonde__writer_pass(p, 1);
        sonde__wunlock(p);
    }
    sm_model m;
    const char *why = NULL; /* nothing recorded: an empty summary that says why */
    if (!p->path) {
        memset(&m, 0, sizeof m);
        why = p->flight      ? "the flight recorder keeps the run in memory and writes it only on "
                               "a trigger (sonde_trigger; docs/flight-recorder.md)"
              : p->status_msg[0] ? p->status_msg
                               : "profiling is disabled (sonde_config.enabled = 0, SONDE_ENABLED=0)";
    } else if (read_back(p, NULL, NULL, &m)) {
        return NULL;
    }
    sonde_summary_t *s = sonde__calloc(1, sizeof *s);
    if (!s) {
        sm_free(&m);
        sonde__fail(SONDE_ENOMEM, "sonde_summary: out of memory");
        return NULL;
    }
    double units, units_s, flops, flops_s;
    sm_totals(&m, &units, &units_s, &flops, &flops_s);
    s->total_duration_s = (double)m.duration_ns / 1e9;
    s->sections = sm_sections(&m);
    s->steps = m.total_steps;
    s->units = units;
    s->units_per_s = units_s > 0 ? units / units_s : 0;
    s->flops = flops;
    s->flops_per_s = flops_s > 0 ? flops / flops_s : 0;
    s->dropped_events = m.dropped_events;
    uint64_t live_dropped = atomic_load(&p->dropped_io);
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next))
        live_dropped += atomic_load(&tb->dropped);
    if (live_dropped > s->dropped_events)
        s->dropped_events = live_dropped;
    s->warnings = m.n_warnings;
    s->n_stats = m.n_stats;
    sm_op_row *ops = NULL;
    size_t n_ops = 0;
    /* One block: the stats array, the operator rows, then the names. */
    size_t names = strlen(p->unit) + 1 + (why ? strlen(why) + 1 : 0);
    for (size_t i = 0; i < m.n_stats; i++)
        names += strlen(m.stats[i].name) + strlen(m.stats[i].unit) + 2;
    int table_rc = sm_ops_table(&m, 0, &ops, &n_ops); /* -1: out of memory, failed below */
    for (size_t i = 0; i < n_ops; i++)
        names += strlen(ops[i].name) + 1;
    size_t arrays = m.n_stats * sizeof *s->stats + n_ops * sizeof *s->ops;
    s->stats = table_rc ? NULL : sonde__calloc(1, arrays + names + 1);
    if (!s->stats) {
        sonde__free(ops);
        sonde__free(s);
        sm_free(&m);
        sonde__fail(SONDE_ENOMEM, "sonde_summary: out of memory");
        return NULL;
    }
    s->n_ops = n_ops;
    s->ops = n_ops ? (sonde_op_stats *)(s->stats + m.n_stats) : NULL;
    char *np = (char *)((sonde_op_stats *)(s->stats + m.n_stats) + n_ops);
    for (size_t i = 0; i < n_ops; i++) {
        const sm_op_row *r = &ops[i];
        sonde_op_stats *o = &s->ops[i];
        o->name = put_str(&np, r->name);
        o->calls = r->calls;
        o->self_cpu_s = r->self_cpu_s;
        o->cpu_total_s = r->cpu_total_s;
        o->self_cuda_s = r->self_device_s;
        o->cuda_total_s = r->device_total_s;
        o->flops = r->flops;
        o->self_cpu_memory = r->host_bytes;
        o->self_cuda_memory = r->device_bytes;
    }
    sonde__free(ops);
    s->unit = put_str(&np, p->unit);
    if (why)
        s->not_recorded = put_str(&np, why);
    for (size_t i = 0; i < m.n_stats; i++) {
        const sm_stat *x = &m.stats[i];
        sonde_section_stats *o = &s->stats[i];
        o->name = put_str(&np, x->name);
        o->unit = put_str(&np, x->unit);
#define COPY(f, kind, label, table, q) o->f = x->f;
        SONDE_SECTION_STATS(COPY)
#undef COPY
        o->share = x->share;
        o->units = x->units;
        o->flops = x->flops;
        sm_rates r = sm_stat_rates(x, p->cfg.peak_flops);
        o->units_per_s = r.units_per_s;
        o->flops_per_s = r.flops_per_s;
        o->mfu = r.mfu;
    }
    sm_free(&m);
    return s;
}

void sonde_summary_free(sonde_summary_t *s)
{
    if (!s)
        return;
    sonde__free(s->stats);
    sonde__free(s);
}
