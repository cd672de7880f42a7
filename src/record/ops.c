/* ops.c - sonde_ops: operators timed by another tracer (PyTorch's profiler), written into the
 * .sonde file as OPS records (docs/formats.md) for the model to fold into the run. */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/buf.h"
#include "record.h"

#define OPS_RECORD_BYTES (256u << 10) /* a record is written past this size */
/* one entry: kind, 8 varints and a zigzag of at most 10 bytes each, flops, two strings */
#define OPS_ENTRY_MAX (1 + 9 * 10 + 8 + 2 * 10 + SONDE_OP_NAME_MAX + SONDE_OP_SHAPES_MAX)

static size_t encode(const sonde_op *o, int tid, uint8_t *out)
{
    size_t k = 0;
    int table = o->kind == SONDE_OP_CPU && o->flags; /* the table's own figures follow */
    out[k++] = (uint8_t)(o->kind | (table ? SONDE_OPS_TABLE_BIT : 0));
    if (table) {
        k += varint_put(out + k, o->flags & SONDE_OP_F_ALL);
        k += varint_put(out + k, o->flags & SONDE_OP_F_TABLE ? o->table_child_ns : 0);
    }
    k += varint_put(out + k, (uint32_t)tid);
    k += varint_put(out + k, zigzag_enc(o->device));
    k += varint_put(out + k, o->stream);
    k += varint_put(out + k, o->id);
    k += varint_put(out + k, o->start_ns);
    k += varint_put(out + k, o->dur_ns);
    k += varint_put(out + k, zigzag_enc(o->bytes));
    uint64_t bits;
    memcpy(&bits, &o->flops, sizeof bits);
    sonde_put_u64le(out + k, bits);
    k += 8;
    k += str_put(out + k, o->name, SONDE_OP_NAME_MAX);
    k += str_put(out + k, o->kind == SONDE_OP_CPU ? o->shapes : NULL, SONDE_OP_SHAPES_MAX);
    return k;
}

static int flush(sonde_profiler *p, const uint8_t *buf, size_t n)
{
    if (!n)
        return 0;
    sonde__wlock(p);
    int rc = sonde__has_sink(p) ? sonde__write_record(p, SONDE_R_OPS, buf, n) : -1;
    sonde__wunlock(p);
    return rc ? sonde__fail(SONDE_EIO, "sonde_ops: the operators could not be written to %s",
                            p->path ? p->path : "the .sonde file")
              : 0;
}

int sonde_ops(sonde_profiler *p, const sonde_op *ops, size_t n)
{
    if (!p)
        return sonde__fail(SONDE_EINVAL, "sonde_ops: profiler is NULL");
    if (p->destroyed)
        return sonde__fail(SONDE_ESTATE, "sonde_ops: the profiler was destroyed by sonde_destroy");
    if (!n)
        return 0;
    if (!ops)
        return sonde__fail(SONDE_EINVAL, "sonde_ops: ops is NULL with n = %zu", n);
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind < SONDE_OP_CPU || ops[i].kind > SONDE_OP_MEMSET)
            return sonde__fail(SONDE_EINVAL, "sonde_ops: entry %zu: unknown kind %d", i,
                               ops[i].kind);
        if (ops[i].flags & ~SONDE_OP_F_ALL)
            return sonde__fail(SONDE_EINVAL, "sonde_ops: entry %zu (%s): unknown flags 0x%x", i,
                               ops[i].name ? ops[i].name : "?", ops[i].flags);
        if ((ops[i].flags & (SONDE_OP_F_TABLE | SONDE_OP_F_LEFT_OUT)) == SONDE_OP_F_LEFT_OUT)
            return sonde__fail(SONDE_EINVAL, "sonde_ops: entry %zu (%s): flags SONDE_OP_F_LEFT_OUT "
                               "without SONDE_OP_F_TABLE (only the table's own figures leave an "
                               "operator out)", i, ops[i].name ? ops[i].name : "?");
        if (ops[i].flags & SONDE_OP_F_TABLE && ops[i].table_child_ns > (uint64_t)INT64_MAX / 4)
            return sonde__fail(SONDE_EINVAL, "sonde_ops: entry %zu (%s): table_child_ns %llu is "
                               "out of range", i, ops[i].name ? ops[i].name : "?",
                               (unsigned long long)ops[i].table_child_ns);
        if (!isfinite(ops[i].flops) || ops[i].flops < 0)
            return sonde__fail(SONDE_EINVAL, "sonde_ops: entry %zu (%s): flops %g is not a "
                               "finite number >= 0", i, ops[i].name ? ops[i].name : "?",
                               ops[i].flops);
    }
    /* Like sonde_step, not bound to the schedule's windows: operators arrive after theirs. */
    if (!sonde__has_sink(p) || atomic_load(&p->finalized))
        return 0;
    uint8_t *buf = sonde__malloc(OPS_RECORD_BYTES + OPS_ENTRY_MAX);
    if (!buf)
        return sonde__fail(SONDE_ENOMEM, "sonde_ops: out of memory");
    int self = (int)syscall(SYS_gettid), rc = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        k += encode(&ops[i], ops[i].tid > 0 ? ops[i].tid : self, buf + k);
        if (k >= OPS_RECORD_BYTES) {
            rc = flush(p, buf, k);
            k = 0;
        }
    }
    if (!rc)
        rc = flush(p, buf, k);
    sonde__free(buf);
    return rc;
}

/* ---- CUDA activity's sink (monitor/monitor.h, sonde_gpu_sink): the run's file, threads and report ---- */
static int gpu_write(void *ctx, const uint8_t *payload, size_t n)
{
    sonde_profiler *p = ctx;
    pthread_mutex_lock(&p->wlock);
    int rc = sonde__has_sink(p) ? sonde__write_record(p, SONDE_R_GPU, payload, n) : -1;
    pthread_mutex_unlock(&p->wlock);
    return rc;
}

static uint32_t gpu_tid_of(void *ctx, uint32_t pthread_low)
{
    return sonde__tid_of_pthread(ctx, pthread_low);
}

static void gpu_warn(void *ctx, const char *msg)
{
    sonde__warn(ctx, "%s", msg);
}

sonde_gpu_sink sonde__gpu_sink(sonde_profiler *p)
{
    return (sonde_gpu_sink){p, p->name, gpu_write, gpu_tid_of, gpu_warn};
}
