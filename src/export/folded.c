/* folded.c - NAME.folded: the CPU samples' stacks in the format flame graph tools read (Brendan
 * Gregg's stackcollapse output, speedscope, inferno): one line per distinct stack, its frames
 * from the process through the outermost function to the innermost joined by ';', a space and
 * the number of samples. NAME.offcpu.folded: the same for the off-CPU periods, the number the
 * microseconds blocked (as offcputime's folded output counts). Written in pieces of about
 * 1 MiB. */
#include "export.h"

int sx_folded_stream(const sm_model *m, sx_sink sink, void *ctx)
{
    const sm_profile *p = &m->profile;
    sbuf b;
    sbuf_init(&b);
    int err = 0;
    for (size_t i = 0; i < p->n_stacks && !err && !b.oom; i++) {
        sbuf_puts(&b, p->stacks[i]);
        sbuf_putc(&b, ' ');
        sbuf_u64(&b, p->counts[i]);
        sbuf_putc(&b, '\n');
        err = sx_drain(&b, sink, ctx, SX_PIECE);
    }
    if (!err)
        err = sx_drain(&b, sink, ctx, 0);
    sbuf_free(&b);
    return err ? -1 : 0;
}

int sx_offcpu_folded_stream(const sm_model *m, sx_sink sink, void *ctx)
{
    const sm_profile *p = &m->profile;
    sbuf b;
    sbuf_init(&b);
    int err = 0;
    for (size_t i = 0; i < p->n_off && !err && !b.oom; i++) {
        uint64_t us = (p->off[i].ns + 500) / 1000;
        if (!us)
            continue;
        sbuf_puts(&b, p->off[i].stack);
        sbuf_putc(&b, ' ');
        sbuf_u64(&b, us);
        sbuf_putc(&b, '\n');
        err = sx_drain(&b, sink, ctx, SX_PIECE);
    }
    if (!err)
        err = sx_drain(&b, sink, ctx, 0);
    sbuf_free(&b);
    return err || b.oom ? -1 : 0;
}
