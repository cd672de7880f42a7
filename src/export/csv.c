/* csv.c - NAME.csv (one row per section name; its last column the sonde that recorded the run)
 * and NAME.instances.csv (one row per instance, written in pieces of about 1 MiB as it is
 * made). */
#define _GNU_SOURCE
#include "export.h"

int sx_csv(const sm_model *m, sbuf *b)
{
    sbuf_puts(b, "name");
#define HEAD(f, kind, label, table, q) sbuf_puts(b, "," #f);
    SONDE_SECTION_STATS(HEAD)
#undef HEAD
    sbuf_puts(b, ",share,threads,unit,units,units_per_s,flops,flops_per_s,mfu,sonde_version\n");
    for (size_t i = 0; i < m->n_stats; i++) {
        const sm_stat *s = &m->stats[i];
        sm_rates r = sm_stat_rates(s, m->peak_flops);
        sbuf_csv_str(b, s->name);
#define CELL_U64(f) sbuf_printf(b, ",%llu", (unsigned long long)s->f);
#define CELL_F64(f) sbuf_printf(b, ",%.9f", s->f);
#define CELL(f, kind, label, table, q) CELL_##kind(f)
        SONDE_SECTION_STATS(CELL)
#undef CELL
#undef CELL_F64
#undef CELL_U64
        sbuf_printf(b, ",%.6f,%u,", s->share, s->threads);
        sbuf_csv_str(b, s->unit);
        sbuf_printf(b, ",%.6g,%.6g,%.6g,%.6g,%.6g,", s->units, r.units_per_s, s->flops,
                    r.flops_per_s, r.mfu);
        sbuf_csv_str(b, m->sonde_version ? m->sonde_version : "");
        sbuf_putc(b, '\n');
    }
    return b->oom ? -1 : 0;
}

int sx_csv_samples(const sm_model *m, sbuf *b)
{
    sbuf_puts(b, "counter,unit,source,t_s,value\n");
    for (size_t c = 0; c < m->n_counters && !b->oom; c++) {
        const sm_counter *k = &m->counters[c];
        sbuf name;
        sbuf_init(&name);
        sbuf_csv_str(&name, k->name);
        if (name.oom) {
            b->oom = 1;
            break;
        }
        for (size_t i = 0; i < k->n; i++)
            sbuf_printf(b, "%s,%s,%s,%.9f,%.9g\n", name.data, sm_counter_unit(k->name),
                        k->system ? "sampler" : "program", (double)k->t_ns[i] / 1e9, k->v[i]);
        sbuf_free(&name);
    }
    return b->oom ? -1 : 0;
}

/* Appends to the sbuf ctx: sx_csv_instances into memory. */
static int sbuf_sink(void *ctx, const char *data, size_t n)
{
    return sbuf_add(ctx, data, n);
}

int sx_csv_instances(const sm_model *m, sbuf *out)
{
    return sx_csv_instances_stream(m, sbuf_sink, out);
}

/* One instance's row: its thread, name, depth, times, session, throughput, FLOPs, flags and
 * metadata (key=value pairs separated by ';' in one field); meta is scratch. */
static void instance_row(sbuf *b, sbuf *meta, const sm_model *m, const sm_span *s)
{
    sbuf_printf(b, "%u,", m->threads[s->thread].index);
    sbuf_csv_str(b, m->threads[s->thread].name);
    sbuf_putc(b, ',');
    sbuf_csv_str(b, sm_str(m, s->site));
    sbuf_printf(b, ",%u,%.9f,%.9f,%.9f,", s->depth, (double)s->start_ns / 1e9,
                (double)s->end_ns / 1e9, (double)(s->end_ns - s->start_ns) / 1e9);
    if (s->session >= 0)
        sbuf_csv_str(b, sm_str(m, m->sessions[s->session].name));
    const sm_span_x *x = sm_span_extra(m, s);
    sbuf_printf(b, ",%.6g,%.6g,%s,", x->units, x->flops,
                s->flags & SM_SPAN_END_LOST         ? "end_lost"
                : s->flags & SM_SPAN_UNTERMINATED   ? "unterminated"
                : s->flags & SM_SPAN_CLOSED_BY_OUTER ? "closed_by_outer"
                                                     : "");
    sbuf_reset(meta);
    for (int32_t k = x->meta; k >= 0; k = m->meta[k].next) {
        if (meta->len)
            sbuf_putc(meta, ';');
        sbuf_puts(meta, sm_str(m, m->meta[k].key));
        sbuf_putc(meta, '=');
        sbuf_puts(meta, sm_str(m, m->meta[k].value));
    }
    if (meta->oom)
        b->oom = 1;
    else if (meta->len)
        sbuf_csv_str(b, meta->data);
    sbuf_putc(b, '\n');
}

void sx_rows_begin(sx_rows *r, sx_sink sink, void *ctx)
{
    *r = (sx_rows){.sink = sink, .ctx = ctx};
    sbuf_init(&r->b);
    sbuf_init(&r->meta);
    sbuf_puts(&r->b, "thread,thread_name,name,depth,start_s,end_s,duration_s,session,units,flops,"
                     "flags,metadata\n");
}

int sx_rows_add(void *ctx, const sm_model *m, const sm_span *s)
{
    sx_rows *r = ctx;
    instance_row(&r->b, &r->meta, m, s);
    if (r->b.oom || sx_drain(&r->b, r->sink, r->ctx, SX_PIECE)) {
        r->err = 1; /* the writer says why (export.c) */
        return -1;
    }
    return 0;
}

int sx_rows_end(sx_rows *r)
{
    if (!r->err)
        r->err = sx_drain(&r->b, r->sink, r->ctx, 0) != 0;
    int oom = r->b.oom;
    sbuf_free(&r->b);
    sbuf_free(&r->meta);
    return r->err || oom ? -1 : 0;
}

int sx_csv_instances_stream(const sm_model *m, sx_sink sink, void *ctx)
{
    sx_rows r;
    sx_rows_begin(&r, sink, ctx);
    /* every section's row: when not every one is held, from the file read again, each thread's
     * in the order they ended (sx_read_file writes them as the file is read instead) */
    if (sm_each_section(m, sx_rows_add, &r))
        r.err = 1;
    return sx_rows_end(&r);
}
