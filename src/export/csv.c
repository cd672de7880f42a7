/* csv.c - NAME.csv (one row per section name) and NAME.instances.csv (one row per instance,
 * written in pieces of about 1 MiB as it is made). */
#define _GNU_SOURCE
#include "export.h"

int sx_csv(const sm_model *m, sbuf *b)
{
    sbuf_puts(b, "name,count,total_s,self_s,mean_s,min_s,max_s,stddev_s,p50_s,p90_s,p99_s,"
                 "share,threads,unit,units,units_per_s,flops,flops_per_s,mfu\n");
    for (size_t i = 0; i < m->n_stats; i++) {
        const sm_stat *s = &m->stats[i];
        double fps = s->flops_time_s > 0 ? s->flops / s->flops_time_s : 0;
        sbuf_csv_str(b, s->name);
        sbuf_printf(b, ",%llu,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.6f,%u,",
                    (unsigned long long)s->count, s->total_s, s->self_s, s->mean_s, s->min_s,
                    s->max_s, s->stddev_s, s->p50_s, s->p90_s, s->p99_s, s->share, s->threads);
        sbuf_csv_str(b, s->unit);
        sbuf_printf(b, ",%.6g,%.6g,%.6g,%.6g,%.6g\n", s->units, s->units_s > 0 ? s->units / s->units_s : 0, s->flops, fps,
                    m->peak_flops > 0 ? fps / m->peak_flops : 0);
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

int sx_csv_instances_stream(const sm_model *m, sx_sink sink, void *ctx)
{
    sbuf buf, meta;
    sbuf_init(&buf);
    sbuf_init(&meta);
    sbuf *b = &buf;
    int err = 0;
    sbuf_puts(b, "thread,thread_name,name,depth,start_s,end_s,duration_s,session,units,flops,"
                 "flags,metadata\n");
    for (size_t i = 0; i < m->n_spans && !b->oom && !err; i++) {
        const sm_span *s = &m->spans[i];
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
        /* metadata as key=value pairs separated by ';' in one field */
        sbuf_reset(&meta);
        for (int32_t k = x->meta; k >= 0; k = m->meta[k].next) {
            if (meta.len)
                sbuf_putc(&meta, ';');
            sbuf_puts(&meta, sm_str(m, m->meta[k].key));
            sbuf_putc(&meta, '=');
            sbuf_puts(&meta, sm_str(m, m->meta[k].value));
        }
        if (meta.oom)
            b->oom = 1;
        else if (meta.len)
            sbuf_csv_str(b, meta.data);
        sbuf_putc(b, '\n');
        err = sx_drain(b, sink, ctx, SX_PIECE); /* written as it goes: never the whole file */
    }
    if (!err)
        err = sx_drain(b, sink, ctx, 0);
    sbuf_free(&buf);
    sbuf_free(&meta);
    return err ? -1 : 0;
}
