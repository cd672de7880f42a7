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

/* Record types: X(NAME, type) makes SONDE_R_NAME; the payloads are in docs/formats.md. A reader
 * skips a type it does not know, so a type is added without a new version. */
#define SONDE_RECORD_TYPES(X)                                                                      \
    X(INFO, 1)       /* (str key, str value)* : run information */                                 \
    X(SITE, 2)       /* varint id, str name, str file, str func, varint line */                    \
    X(THREAD, 3)     /* varint index, varint tid, str name */                                      \
    X(EVENTS, 4)     /* varint thread, varint tid, varint first_slot, varint nslots, u64           \
                        base_tick, then events (see below) */                                      \
    X(ANCHOR, 5)     /* varint tick, varint monotonic ns, varint realtime ns */                    \
    X(WARNING, 6)    /* str text */                                                                \
    X(STATS, 7)      /* (str key, varint value)* : counters of the recorder */                     \
    X(CLEAR, 8)      /* varint tick: later readers ignore everything before it */                  \
    X(END, 9)        /* varint tick: the run ended cleanly */                                      \
    X(GPU, 10)       /* CUDA activity entries: u8 kind (SONDE_GPU_ENTRY_KINDS), varint device,     \
                        stream, correlation, start (CLOCK_MONOTONIC ns), duration, then by kind:   \
                        kernel str name, 6 zigzag grid/block; memcpy varint bytes, u8 copy kind;   \
                        memset varint bytes; API varint tid, varint cbid */                        \
    X(OPS, 11)       /* operators of another tracer (sonde_ops): u8 kind (| SONDE_OPS_TABLE_BIT:   \
                        varint flags, varint table child ns follow), varint tid, zigzag device,    \
                        varint stream, varint id, varint start (CLOCK_MONOTONIC ns), varint        \
                        duration, zigzag bytes, f64 flops, str name, str shapes */                 \
    X(SAMPLES, 12)   /* CPU samples: varint hz, varint flags (1: times on CLOCK_MONOTONIC; 2:      \
                        taken in the threads by SIGPROF; 4: from per-thread counters), varint      \
                        samples lost since the last record, then per sample varint tid, varint     \
                        stack id, zigzag time - previous's */                                      \
    X(STACKS, 13)    /* (varint id, varint pid, str process, varint n, n x varint function id,     \
                        outermost first)*: the samples' distinct stacks, ids from 0 */             \
    X(FUNCS, 14)     /* (varint id, str name, str object)*: the stacks' functions, from 0 */       \
    X(FUNCLOC, 15)   /* (varint id, str file, varint line)*: where functions named before are      \
                        defined, for those the DWARF says */                                       \
    X(LINES, 16)     /* (varint stack id, str file, varint line)*: the source line of the          \
                        innermost frame of stacks written before, where the DWARF says */          \
    X(OFFCPU, 17)    /* off-CPU periods: (varint tid, varint stack id, varint zigzag(start ns -    \
                        the previous period's start), varint ns)*; one record at least, maybe      \
                        empty, when they were followed */                                          \
    X(FRAMELINES, 18) /* (varint stack id, varint n, n x varint line)*: the source line each       \
                        function of a stack written before was at (n its STACKS entry's count;     \
                        0: unknown), outermost first */                                            \
    X(SUMMARY, 19)   /* the tally of every event written before it (format/tally.h), by the        \
                        recorder's writer just before END: a reading of a file that ended cleanly  \
                        builds its model in one pass over the events */                           \
    X(SIGNAL, 20)    /* varint signal, varint tick: a signal handler wrote every event recorded    \
                        before tick (the flush on SIGTERM, SIGINT or a fatal signal); a file that  \
                        ends there without END was ended by that signal, or soon after */

enum {
#define SONDE_RECORD_TYPE_ENUM(name, type) SONDE_R_##name = type,
    SONDE_RECORD_TYPES(SONDE_RECORD_TYPE_ENUM)
#undef SONDE_RECORD_TYPE_ENUM
};
/* A record's type is its header's first byte. */
#define SONDE_RECORD_TYPE_FITS(name, type) _Static_assert((type) > 0 && (type) < 256, #name);
SONDE_RECORD_TYPES(SONDE_RECORD_TYPE_FITS)
#undef SONDE_RECORD_TYPE_FITS

/* A GPU record's entry kinds (its u8 kind), and the bytes of a kernel name it keeps and of one
 * entry at most. */
#define SONDE_GPU_ENTRY_KINDS(X) X(KERNEL, 1) X(MEMCPY, 2) X(MEMSET, 3) X(API, 4)
enum {
#define SONDE_GPU_KIND_ENUM(name, kind) SONDE_GPU_##name = kind,
    SONDE_GPU_ENTRY_KINDS(SONDE_GPU_KIND_ENUM)
#undef SONDE_GPU_KIND_ENUM
};
#define SONDE_GPU_NAME_MAX 4096
#define SONDE_GPU_ENTRY_MAX (SONDE_GPU_NAME_MAX + 128)

/* An OPS entry's kind byte with this bit: the tracer's own table's figures follow it (sonde_op
 * flags and table_child_ns). */
#define SONDE_OPS_TABLE_BIT 0x80u

/* Event kinds, the low 4 bits of an event's tag (the id above them). Each event in an EVENTS
 * record is: varint tag, varint zigzag(tick - previous tick), then varint arg for the kinds that
 * carry one, then raw little-endian doubles for the kinds that carry values.
 * X(NAME, kind, slots, values, arg): SONDE_K_NAME; the 16-byte slots of a thread buffer it takes
 * in memory; the doubles it stores after it; whether it carries an arg. */
#define SONDE_EVENT_KINDS(X)                                                                       \
    X(BEGIN, 0, 1, 0, 0)         /* id: site */                                                    \
    X(END, 1, 1, 0, 0)           /* id: site, 0 for "innermost" */                                 \
    X(INSTANT, 2, 1, 0, 1)       /* id: name; arg (version 2): n, its payload: the n METADATA      \
                                    events that follow it on its thread are its key/value          \
                                    arguments (version 1 had no arg: sonde_kind_has_arg_v) */      \
    X(COUNTER, 3, 2, 1, 0)       /* id: name; 1 double */                                          \
    X(METRIC, 4, 2, 1, 0)        /* id: name; 1 double */                                          \
    X(THROUGHPUT, 5, 2, 2, 0)    /* id: unit name, 0 for the run's unit; 2 doubles: units,         \
                                    seconds (<= 0: the section's own duration) */                  \
    X(FLOPS, 6, 2, 1, 0)         /* 1 double */                                                    \
    X(METADATA, 7, 1, 0, 1)      /* id: key; arg: value string id */                               \
    X(STEP, 8, 1, 0, 1)          /* arg: steps ended so far (n: step n-1 ends), or                 \
                                    SONDE_STEP_BEGIN | n: step n begins (sonde_step_begin) */      \
    X(SESSION_BEGIN, 9, 1, 0, 0) /* id: name */                                                    \
    X(SESSION_END, 10, 1, 0, 0)                                                                    \
    X(GAP, 11, 1, 0, 1)          /* arg: events dropped on this thread just before */              \
    X(MODE, 12, 1, 0, 1)         /* arg: schedule action (0 off, 1 warmup, 2 active) | cycle << 2  \
                                    (its id: the step) */                                          \
    X(DSTEP, 13, 3, 4, 1)        /* arg: step; 4 doubles: seconds, timestep, block size,           \
                                    guidance */                                                    \
    X(BLOCK, 14, 3, 4, 1)        /* arg: block index; 4 doubles: seconds, frames, memory MiB, 0 */ \
    X(PARAMS, 15, 2, 1, 0)       /* id: model name; 1 double: parameter count */

enum {
#define SONDE_EVENT_KIND_ENUM(name, kind, slots, values, arg) SONDE_K_##name = kind,
    SONDE_EVENT_KINDS(SONDE_EVENT_KIND_ENUM)
#undef SONDE_EVENT_KIND_ENUM
    SONDE_K_COUNT
};
/* A kind fits the tag's 4 bits, its values fit the slots after its first (two doubles a
 * slot), and the list counts up from 0 (the enum's last + 1 is the count). */
#define SONDE_EVENT_KIND_FITS(name, kind, slots, values, arg)                                     \
    _Static_assert((kind) < 16 && (kind) < SONDE_K_COUNT, #name " fits a tag's 4 bits");         \
    _Static_assert((slots) >= 1 && (values) <= 2 * ((slots) - 1), #name "'s values fit its slots");
SONDE_EVENT_KINDS(SONDE_EVENT_KIND_FITS)
#undef SONDE_EVENT_KIND_FITS
_Static_assert(SONDE_K_COUNT <= 16, "event kinds fit a tag's 4 bits");

#define SONDE_STEP_BEGIN 0x80000000u /* STEP arg bit: a step begins */

/* Slots (16-byte units of a thread buffer) an event of each kind takes in memory. */
static inline unsigned sonde_kind_slots(unsigned kind)
{
    static const unsigned char slots[SONDE_K_COUNT] = {
#define SONDE_EVENT_KIND_SLOTS(name, k, n, values, arg) [k] = n,
        SONDE_EVENT_KINDS(SONDE_EVENT_KIND_SLOTS)
#undef SONDE_EVENT_KIND_SLOTS
    };
    return kind < SONDE_K_COUNT ? slots[kind] : 1;
}
static inline int sonde_kind_has_arg(unsigned kind)
{
    static const unsigned char has[SONDE_K_COUNT] = {
#define SONDE_EVENT_KIND_ARG(name, k, slots, values, a) [k] = a,
        SONDE_EVENT_KINDS(SONDE_EVENT_KIND_ARG)
#undef SONDE_EVENT_KIND_ARG
    };
    return kind < SONDE_K_COUNT && has[kind];
}
/* The same in a file of the given version (version 1 had no INSTANT arg). */
static inline int sonde_kind_has_arg_v(unsigned kind, uint32_t version)
{
    return sonde_kind_has_arg(kind) && !(version < 2 && kind == SONDE_K_INSTANT);
}
/* Doubles stored after the event. */
static inline unsigned sonde_kind_values(unsigned kind)
{
    static const unsigned char values[SONDE_K_COUNT] = {
#define SONDE_EVENT_KIND_VALUES(name, k, slots, n, arg) [k] = n,
        SONDE_EVENT_KINDS(SONDE_EVENT_KIND_VALUES)
#undef SONDE_EVENT_KIND_VALUES
    };
    return kind < SONDE_K_COUNT ? values[kind] : 0;
}

/* Value j of an event lives in slot 1 + j / 2: in ts for even j, in tag | arg << 32 for odd. */
#define SONDE_MAX_VALUES 4
#define SONDE_EVENT_KIND_MAX(name, kind, slots, values, arg)                                      \
    _Static_assert((values) <= SONDE_MAX_VALUES, #name "'s values fit a decoded event");
SONDE_EVENT_KINDS(SONDE_EVENT_KIND_MAX)
#undef SONDE_EVENT_KIND_MAX

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
