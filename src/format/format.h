/* format.h - constants of the .sonde file format, shared by the writer and the reader.
 * docs/formats.md is the prose description; change both together and bump SONDE_FILE_VERSION. */
#ifndef SONDE_FORMAT_H
#define SONDE_FORMAT_H

#include <stdint.h>

#define SONDE_FILE_MAGIC "\x89SONDE\r\n" /* 8 bytes */
#define SONDE_FILE_MAGIC_LEN 8
#define SONDE_FILE_VERSION 2u /* 2: INSTANT carries an arg (its payload); 1 is read too. Record
                                 types added later need no new version: readers skip a type
                                 they do not know */
#define SONDE_FILE_HEADER_LEN 16   /* magic, u32 version, u32 reserved (little endian) */
#define SONDE_RECORD_HEADER_LEN 12 /* u8 type, u8 flags, u16 reserved, u32 length, u32 crc32 */
#define SONDE_RECORD_MAX (64u << 20)

/* Record types. */
enum {
    SONDE_R_INFO = 1,    /* (str key, str value)* : run information */
    SONDE_R_SITE = 2,    /* varint id, str name, str file, str func, varint line */
    SONDE_R_THREAD = 3,  /* varint index, varint tid, str name */
    SONDE_R_EVENTS = 4,  /* varint thread, varint tid, varint first_slot, varint nslots,
                            u64 base_tick, then events (see below) */
    SONDE_R_ANCHOR = 5,  /* varint tick, varint monotonic ns, varint realtime ns */
    SONDE_R_WARNING = 6, /* str text */
    SONDE_R_STATS = 7,   /* (str key, varint value)* : counters of the recorder */
    SONDE_R_CLEAR = 8,   /* varint tick: later readers ignore everything before it */
    SONDE_R_END = 9,     /* varint tick: the run ended cleanly */
    SONDE_R_GPU = 10,    /* CUDA activity entries (docs/formats.md): u8 kind, varint device,
                            stream, correlation, start (CLOCK_MONOTONIC ns), duration, then by
                            kind: kernel str name, 6 zigzag grid/block; memcpy varint bytes,
                            u8 copy kind; memset varint bytes; API varint tid, varint cbid */
    SONDE_R_OPS = 11,    /* operators of another tracer (sonde_ops; docs/formats.md): u8 kind
                            (| SONDE_OPS_TABLE_BIT: varint flags, varint table child ns follow),
                            varint tid, zigzag device, varint stream, varint id, varint start
                            (CLOCK_MONOTONIC ns), varint duration, zigzag bytes, f64 flops,
                            str name, str shapes */
    SONDE_R_SAMPLES = 12, /* CPU samples (sample_hz, sonde run): varint hz, varint flags (1: times
                            on CLOCK_MONOTONIC; 2: taken in the threads by SIGPROF; 4: from
                            per-thread counters), varint samples lost since the last record, then
                            per sample varint tid, varint stack id, zigzag time - previous's */
    SONDE_R_STACKS = 13, /* (varint id, varint pid, str process, varint n, n x varint function
                            id, outermost first)*: the samples' distinct stacks, ids from 0 */
    SONDE_R_FUNCS = 14,  /* (varint id, str name, str object)*: the stacks' functions, from 0 */
    SONDE_R_FUNCLOC = 15, /* (varint id, str file, varint line)*: where functions named before
                             are defined, for those the DWARF says */
    SONDE_R_LINES = 16,  /* (varint stack id, str file, varint line)*: the source line of the
                            innermost frame of stacks written before, where the DWARF says */
    SONDE_R_OFFCPU = 17, /* off-CPU periods (threads blocked in the kernel, docs/stacks.md):
                            (varint tid, varint stack id, varint zigzag(start ns - the previous
                            period's start), varint ns)*; one record at least, maybe empty,
                            when they were followed */
    SONDE_R_FRAMELINES = 18, /* (varint stack id, varint n, n x varint line)*: the source line
                                each function of a stack written before was at (n its STACKS
                                entry's count; 0: unknown), outermost first */
    SONDE_R_SUMMARY = 19, /* the tally of every event written before it (format/tally.h), by
                             the recorder's writer just before END: a reading of a file that
                             ended cleanly builds its model in one pass over the events */
};
/* A GPU record's entry kinds (its u8 kind), and the bytes of a kernel name it keeps and of one
 * entry at most. */
enum { SONDE_GPU_KERNEL = 1, SONDE_GPU_MEMCPY = 2, SONDE_GPU_MEMSET = 3, SONDE_GPU_API = 4 };
#define SONDE_GPU_NAME_MAX 4096
#define SONDE_GPU_ENTRY_MAX (SONDE_GPU_NAME_MAX + 128)

/* An OPS entry's kind byte with this bit: the tracer's own table's figures follow it (sonde_op
 * flags and table_child_ns). */
#define SONDE_OPS_TABLE_BIT 0x80u

/* Event kinds, the low 4 bits of an event's tag (the id above them). Each event in an EVENTS
 * record is: varint tag, varint zigzag(tick - previous tick), then varint arg for the kinds that
 * carry one, then raw little-endian doubles for the kinds that carry values. */
enum {
    SONDE_K_BEGIN = 0,      /* id: site */
    SONDE_K_END = 1,        /* id: site, 0 for "innermost" */
    SONDE_K_INSTANT = 2,    /* id: name; arg (version 2): n, its payload: the n METADATA events
                               that follow it on its thread are its key/value arguments */
    SONDE_K_COUNTER = 3,    /* id: name; 1 double */
    SONDE_K_METRIC = 4,     /* id: name; 1 double */
    SONDE_K_THROUGHPUT = 5, /* id: unit name, 0 for the run's unit; 2 doubles: units, seconds (<= 0: the section's own duration) */
    SONDE_K_FLOPS = 6,      /* 1 double */
    SONDE_K_METADATA = 7,   /* id: key; arg: value string id */
    SONDE_K_STEP = 8,       /* arg: steps ended so far (n: step n-1 ends), or
                               SONDE_STEP_BEGIN | n: step n begins (sonde_step_begin) */
    SONDE_K_SESSION_BEGIN = 9, /* id: name */
    SONDE_K_SESSION_END = 10,
    SONDE_K_GAP = 11,       /* arg: events dropped on this thread just before */
    SONDE_K_MODE = 12,      /* arg: schedule action (0 off, 1 warmup, 2 active) | cycle << 2 */
    SONDE_K_DSTEP = 13,     /* arg: step; 4 doubles: seconds, timestep, block size, guidance */
    SONDE_K_BLOCK = 14,     /* arg: block index; 4 doubles: seconds, frames, memory MiB, 0 */
    SONDE_K_PARAMS = 15,    /* id: model name; 1 double: parameter count */
    SONDE_K_COUNT
};

#define SONDE_STEP_BEGIN 0x80000000u /* STEP arg bit: a step begins */

/* Slots (16-byte units of a thread buffer) an event of each kind takes in memory. */
static inline unsigned sonde_kind_slots(unsigned kind)
{
    switch (kind) {
    case SONDE_K_COUNTER: case SONDE_K_METRIC: case SONDE_K_THROUGHPUT: case SONDE_K_FLOPS:
    case SONDE_K_PARAMS:
        return 2;
    case SONDE_K_DSTEP: case SONDE_K_BLOCK:
        return 3;
    default:
        return 1;
    }
}
static inline int sonde_kind_has_arg(unsigned kind)
{
    return kind == SONDE_K_METADATA || kind == SONDE_K_INSTANT || kind == SONDE_K_STEP || kind == SONDE_K_GAP ||
           kind == SONDE_K_MODE || kind == SONDE_K_DSTEP || kind == SONDE_K_BLOCK;
}
/* The same in a file of the given version (version 1 had no INSTANT arg). */
static inline int sonde_kind_has_arg_v(unsigned kind, uint32_t version)
{
    return sonde_kind_has_arg(kind) && !(version < 2 && kind == SONDE_K_INSTANT);
}
/* Doubles stored after the event. */
static inline unsigned sonde_kind_values(unsigned kind)
{
    switch (kind) {
    case SONDE_K_COUNTER: case SONDE_K_METRIC: case SONDE_K_FLOPS: case SONDE_K_PARAMS:
        return 1;
    case SONDE_K_THROUGHPUT:
        return 2;
    case SONDE_K_DSTEP: case SONDE_K_BLOCK:
        return 4;
    default:
        return 0;
    }
}

/* Value j of an event lives in slot 1 + j / 2: in ts for even j, in tag | arg << 32 for odd. */
#define SONDE_MAX_VALUES 4

static inline void sonde_put_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t sonde_get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void sonde_put_u64le(uint8_t *p, uint64_t v)
{
    sonde_put_u32le(p, (uint32_t)v);
    sonde_put_u32le(p + 4, (uint32_t)(v >> 32));
}
static inline uint64_t sonde_get_u64le(const uint8_t *p)
{
    return (uint64_t)sonde_get_u32le(p) | (uint64_t)sonde_get_u32le(p + 4) << 32;
}

/* The instant event that carries a hot function's calls counted but not recorded (Python tracing,
 * libsonde-autotrace): arguments "section" (its name), "calls" and "total_s". The model folds it
 * into that section's statistics (stats.c, sm__fold_aggregated). */
#define SONDE_AGGREGATED_EVENT "sonde.aggregated"

#endif
