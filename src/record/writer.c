/* writer.c - the writer thread and the .sonde file: header, records, chunk encoding, the
 * lock-free chunk stack, and the lock-free flush used by the signal handlers.
 *
 * Every record is one writev() on an O_APPEND descriptor, so records from the writer thread and
 * from a signal handler never interleave. Events carry their slot index in their thread's stream;
 * a range written twice (writer and handler racing) is de-duplicated by the reader. */
#define _GNU_SOURCE
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/buf.h"
#include "../util/fileio.h"
#include "record.h"
#include "../config/keys.h"
#include "../util/alloc.h"

/* ------------------------------------------------------------------------------------------
 * Chunk stack (Treiber stack of indices with an ABA tag in the high 32 bits)
 * ---------------------------------------------------------------------------------------- */
uint32_t sonde__chunk_pop(sonde_profiler *p)
{
    uint64_t head = atomic_load_explicit(&p->free_head, memory_order_acquire);
    for (;;) {
        uint32_t idx = (uint32_t)head;
        if (idx == SONDE_NO_CHUNK)
            return SONDE_NO_CHUNK;
        uint32_t next = atomic_load_explicit(&p->chunks[idx].next_free, memory_order_relaxed);
        uint64_t nh = (((head >> 32) + 1) << 32) | next;
        if (atomic_compare_exchange_weak_explicit(&p->free_head, &head, nh, memory_order_acq_rel,
                                                  memory_order_acquire))
            return idx;
    }
}

void sonde__chunk_push(sonde_profiler *p, uint32_t idx)
{
    atomic_store_explicit(&p->chunks[idx].state, CHUNK_FREE, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&p->free_head, memory_order_relaxed);
    for (;;) {
        atomic_store_explicit(&p->chunks[idx].next_free, (uint32_t)head, memory_order_relaxed);
        uint64_t nh = (((head >> 32) + 1) << 32) | idx;
        if (atomic_compare_exchange_weak_explicit(&p->free_head, &head, nh, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

/* ------------------------------------------------------------------------------------------
 * Records
 * ---------------------------------------------------------------------------------------- */
/* After the first failed write nothing more is written: the file stays readable up to it.
 * Async-signal-safe; the status message is set by the caller outside a handler. */
static void mark_failed(sonde_profiler *p)
{
    atomic_store(&p->io_failed, 1);
    atomic_store(&p->tally_on, 0); /* the file will not hold what it counts: no SUMMARY */
}

/* The disk is full or the file size limit is near: no more data is written, but the records
 * that end the file (statistics, warnings, END) still fit in the room kept for them, so the
 * report says what was dropped instead of "the process crashed". */
static void mark_full(sonde_profiler *p, int err)
{
    atomic_store(&p->full_errno, err);
    mark_failed(p);
}

/* Makes sure a data record of len bytes leaves SONDE_TAIL_ROOM bytes for the file's end: under
 * RLIMIT_FSIZE, and on the disk by reserving blocks past the end of the file with fallocate
 * (KEEP_SIZE: the file's size does not change) a step at a time. 0, or -1 with errno ENOSPC,
 * EDQUOT or EFBIG. A file system without fallocate keeps no room (the END record may then be
 * lost when the disk fills). Async-signal-safe. */
static int room_for(sonde_profiler *p, size_t len)
{
    uint64_t end = SONDE_FILE_HEADER_LEN + atomic_load_explicit(&p->bytes_written,
                                                                memory_order_relaxed);
    uint64_t need = end + len + SONDE_TAIL_ROOM;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur) {
        errno = EFBIG;
        return -1;
    }
    uint64_t have = atomic_load_explicit(&p->reserved_to, memory_order_relaxed);
    if (have == UINT64_MAX || need <= have)
        return 0;
    for (int k = 0; k < 2; k++) { /* a whole step ahead, else just this record */
        uint64_t to = k == 0 ? need + SONDE_RESERVE_STEP : need;
        int rc;
        do
            rc = fallocate(p->fd, FALLOC_FL_KEEP_SIZE, (off_t)end, (off_t)(to - end));
        while (rc != 0 && errno == EINTR);
        if (rc == 0) {
            atomic_store_explicit(&p->reserved_to, to, memory_order_relaxed);
            return 0;
        }
        if (errno != ENOSPC && errno != EDQUOT && errno != EFBIG) {
            atomic_store_explicit(&p->reserved_to, UINT64_MAX, memory_order_relaxed);
            return 0; /* no fallocate here (EOPNOTSUPP, ...): write without room kept */
        }
    }
    return -1;
}

static int out_of_room(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

void sonde__file_header(uint8_t *hdr)
{
    memcpy(hdr, SONDE_FILE_MAGIC, SONDE_FILE_MAGIC_LEN);
    sonde_put_u32le(hdr + 8, SONDE_FILE_VERSION);
    sonde_put_u32le(hdr + 12, 0);
}

void sonde__record_frame(uint8_t *hdr, unsigned type, const uint8_t *payload, size_t len)
{
    hdr[0] = (uint8_t)type;
    hdr[1] = hdr[2] = hdr[3] = 0;
    sonde_put_u32le(hdr + 4, (uint32_t)len);
    sonde_put_u32le(hdr + 8, (uint32_t)crc32(0L, payload, (uInt)len));
}

/* Writes one record. A tail record (the file's end, written at close) may use the room kept by
 * room_for after the disk filled; any other stops at the first failure. In flight-recorder mode
 * the record goes to its memory instead. Async-signal-safe (but for the flight recorder's). */
static int write_rec(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len,
                     int tail)
{
    if (sonde__flight_mem(p))
        return sonde__flight_put(p, type, payload, len);
    if (p->fd < 0)
        return -1;
    if (atomic_load_explicit(&p->io_failed, memory_order_relaxed) &&
        !(tail && atomic_load(&p->full_errno)))
        return -1;
    uint8_t hdr[SONDE_RECORD_HEADER_LEN];
    sonde__record_frame(hdr, type, payload, len);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)payload, len}};
    size_t total = sizeof hdr + len;
    if (!tail && room_for(p, total) != 0) {
        mark_full(p, errno);
        return -1;
    }
    ssize_t w;
    xfsz_guard g;
    xfsz_block(&g);
    do
        w = writev(p->fd, iov, 2);
    while (w < 0 && errno == EINTR);
    int e = errno;
    xfsz_restore(&g);
    errno = e;
    if (w < 0) {
        if (!tail && out_of_room(e)) /* nothing of it was written: the tail may still fit */
            mark_full(p, e);
        else
            mark_failed(p);
        errno = e;
        return -1;
    }
    if ((size_t)w < total) {
        /* A short write (disk nearly full): finish it, or leave a torn record the reader stops at. */
        size_t done = (size_t)w;
        xfsz_block(&g);
        int rc = done < sizeof hdr ? write_all(p->fd, hdr + done, sizeof hdr - done) : 0;
        size_t pdone = done > sizeof hdr ? done - sizeof hdr : 0;
        if (!rc)
            rc = write_all(p->fd, payload + pdone, len - pdone);
        e = errno;
        xfsz_restore(&g);
        errno = e;
        if (rc) {
            atomic_store(&p->full_errno, 0); /* torn: nothing after it could be read */
            mark_failed(p);
            errno = e;
            return -1;
        }
    }
    atomic_fetch_add_explicit(&p->bytes_written, total, memory_order_relaxed);
    return 0;
}

static int write_record_raw(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len)
{
    return write_rec(p, type, payload, len, 0);
}

int sonde__write_record(sonde_profiler *p, unsigned type, const uint8_t *payload, size_t len)
{
    int rc = write_record_raw(p, type, payload, len);
    if (rc && p->fd >= 0 && !atomic_load(&p->full_errno)) { /* a full disk is told at close */
        char msg[512];
        snprintf(msg, sizeof msg, "writing %s failed (%s); recording continues in memory only "
                 "and later events are dropped", p->path, strerror(errno));
        sonde__set_status(p, SONDE_EIO, msg);
    }
    return rc;
}

/* A string field: varint length, bytes. */
static size_t put_str(uint8_t *out, const char *s) { return str_put(out, s, SIZE_MAX); }

static int write_anchor_at(sonde_profiler *p, uint64_t tick, uint64_t mono, uint64_t real,
                           int tail)
{
    uint8_t buf[32];
    return write_rec(p, SONDE_R_ANCHOR, buf, sonde__anchor_put(buf, tick, mono, real), tail);
}

static int write_anchor(sonde_profiler *p)
{
    uint64_t tick, mono;
    sonde__clock_pair(&tick, &mono);
    return write_anchor_at(p, tick, mono, sonde__real_ns(), 0);
}

/* The file's first anchor: now, or the run's start when that came before the file (a forked
 * child's run starts at the fork; the reader keeps nothing older than the first anchor). */
static int write_first_anchor(sonde_profiler *p)
{
    if (!p->start_tick)
        return write_anchor(p);
    return write_anchor_at(p, p->start_tick, p->start_mono_ns, p->start_real_ns, 0);
}

/* Writes the sites registered since the last call. Async-signal-safe. */
static void write_sites(sonde_profiler *p, uint8_t *enc)
{
    uint32_t count = sonde__site_count();
    uint32_t from = atomic_load(&p->sites_written);
    for (uint32_t id = from; id < count; id++) {
        const sonde_site_rec *r = sonde__site_get(id);
        if (!r || !r->name)
            continue;
        size_t need = 40 + strlen(r->name) + (r->file ? strlen(r->file) : 0) +
                      (r->func ? strlen(r->func) : 0);
        if (need <= p->enc_cap) { /* a longer name is left out, and read back as "?" */
            size_t k = varint_put(enc, id);
            k += put_str(enc + k, r->name);
            k += put_str(enc + k, r->file);
            k += put_str(enc + k, r->func);
            k += varint_put(enc + k, (uint64_t)(r->line < 0 ? 0 : r->line));
            if (write_record_raw(p, SONDE_R_SITE, enc, k) != 0)
                return;
        }
        atomic_store(&p->sites_written, id + 1);
    }
}

/* Thread records for buffers not yet described. locked: hold p->lock while reading the names
 * (the writer thread); the signal handler takes no lock. */
static void write_threads(sonde_profiler *p, uint8_t *enc, int locked)
{
    if (locked)
        pthread_mutex_lock(&p->lock);
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        uint32_t t = tb->thread + 1;
        if (atomic_load(&tb->written_thread) == t)
            continue;
        size_t k = varint_put(enc, tb->thread);
        k += varint_put(enc + k, (uint64_t)atomic_load(&tb->tid));
        k += put_str(enc + k, tb->name);
        if (write_record_raw(p, SONDE_R_THREAD, enc, k) == 0)
            atomic_store(&tb->written_thread, t);
    }
    if (locked)
        pthread_mutex_unlock(&p->lock);
}

size_t sonde__put_event(uint8_t *out, const sonde__ev *e, uint64_t prev)
{
    unsigned kind = e->tag & 15u;
    size_t k = varint_put(out, e->tag);
    k += varint_put(out + k, zigzag_enc((int64_t)(e->ts - prev)));
    if (sonde_kind_has_arg(kind))
        k += varint_put(out + k, e->arg);
    unsigned nv = sonde_kind_values(kind);
    for (unsigned j = 0; j < nv; j++) { /* its values: the slots after it, two a slot */
        const sonde__ev *s = &e[1 + j / 2];
        sonde_put_u64le(out + k, j % 2 == 0 ? s->ts : (uint64_t)s->tag | (uint64_t)s->arg << 32);
        k += 8;
    }
    return k;
}

/* ------------------------------------------------------------------------------------------
 * The tally of the events written, for the SUMMARY record (format/tally.h)
 * ---------------------------------------------------------------------------------------- */

void sonde__tally_off(sonde_profiler *p) { atomic_store(&p->tally_on, 0); }

void sonde__tally_free(sonde_profiler *p)
{
    atomic_store(&p->tally_on, 0);
    if (p->tally)
        sonde_tally_free(p->tally);
    sonde__free(p->tally);
    for (size_t i = 0; i < p->n_tally_th; i++)
        sonde_tally_thread_free(&p->tally_th[i]);
    sonde__free(p->tally_th);
    sonde__free(p->pass_order);
    p->pass_order = NULL;
    p->tally = NULL;
    p->tally_th = NULL;
    p->n_tally_th = p->cap_tally_th = 0;
}

/* A new tally for a new file (none for a flight recorder's: its files are written from its
 * ring). Out of memory: none, and the file has no SUMMARY. */
static void tally_start(sonde_profiler *p)
{
    sonde__tally_free(p);
    if (p->flight || !(p->tally = sonde__malloc(sizeof *p->tally)))
        return;
    p->pass_order = sonde__calloc(p->n_chunks ? p->n_chunks : 1, sizeof *p->pass_order);
    if (!p->pass_order || sonde_tally_init(p->tally)) {
        sonde__free(p->tally);
        p->tally = NULL;
        return;
    }
    atomic_store(&p->tally_on, 1);
}

/* File thread t's part of the tally, for its events from slot on: NULL when the tally is off,
 * or now turned off (out of memory; the thread's events counted so far end before another
 * slot, as they may when a pass finds a chunk full that another after it filled: the file is
 * whole, but a reader decodes the events in another order than they were counted). */
static sonde_tally_thread *tally_thread(sonde_profiler *p, uint32_t t, uint64_t slot)
{
    if (!atomic_load_explicit(&p->tally_on, memory_order_relaxed))
        return NULL;
    if (t >= p->cap_tally_th) {
        size_t n = (size_t)t + 1 > 2 * p->cap_tally_th ? (size_t)t + 1 : 2 * p->cap_tally_th;
        sonde_tally_thread *g = sonde__realloc(p->tally_th, n * sizeof *g);
        if (!g) {
            sonde__tally_off(p);
            return NULL;
        }
        memset(g + p->cap_tally_th, 0, (n - p->cap_tally_th) * sizeof *g);
        p->tally_th = g;
        p->cap_tally_th = n;
    }
    if (t >= p->n_tally_th)
        p->n_tally_th = (size_t)t + 1;
    sonde_tally_thread *th = &p->tally_th[t];
    if (th->seen && th->next_slot != slot) {
        sonde__tally_off(p);
        return NULL;
    }
    return th;
}

/* Event e of file thread t counted in the tally (th: t's part). 0, or -1 when the tally can no
 * longer be kept (out of memory, an id past what a reader takes): it is then off. */
static int tally_event(sonde_profiler *p, sonde_tally_thread *th, uint32_t t, const sonde__ev *e)
{
    unsigned kind = e->tag & 15u;
    uint32_t id = e->tag >> 4;
    if (id >= SONDE_MAX_ID || (kind == SONDE_K_METADATA && e->arg >= SONDE_MAX_ID) ||
        sonde_tally_event(p->tally, th, t, kind, id, e->ts, e->arg)) {
        sonde__tally_off(p);
        return -1;
    }
    return 0;
}

/* The SUMMARY record, where the tally holds what the file does (on: no write failed, nothing
 * dropped on the way, mark_failed). */
static void write_summary(sonde_profiler *p)
{
    if (!atomic_load(&p->tally_on))
        return;
    sbuf b;
    sbuf_init(&b);
    sonde_tally_encode(&b, p->tally, p->tally_th, p->n_tally_th);
    if (!b.oom && b.len <= SONDE_RECORD_MAX)
        write_rec(p, SONDE_R_SUMMARY, (const uint8_t *)b.data, b.len, 1);
    sbuf_free(&b);
}

/* Encodes events [from, to) of chunk c (at most ENC slots) as one EVENTS record and writes it,
 * counting them in the tally where it is on. Returns the slot index reached, or UINT32_MAX on an
 * I/O error. Async-signal-safe (a signal handler turns the tally off before it writes). */
static uint32_t write_events(sonde_profiler *p, const sonde_chunk *c, uint32_t from, uint32_t to,
                             uint8_t *enc)
{
    const uint32_t piece = (uint32_t)((p->enc_cap - 128) / 24); /* <= 24 bytes per slot */
    uint32_t stop = to - from > piece ? from + piece : to;
    size_t k = varint_put(enc, c->thread);
    k += varint_put(enc + k, c->tid);
    k += varint_put(enc + k, c->base + from);
    size_t nslots_at = k;
    k += 5; /* slot count, a padded 5-byte varint patched below */
    uint64_t prev = c->data[from].ts;
    sonde_put_u64le(enc + k, prev);
    k += 8;
    /* the flight recorder follows each thread's sections, to keep its run-wide events aside
     * and to apply its trigger_section_over_s rules */
    sonde_flight *fl = sonde__flight_mem(p);
    sonde__fr_thread *ft = fl ? sonde__flight_thread(p, c->thread) : NULL;
    sonde_tally_thread *tt = tally_thread(p, c->thread, c->base + from);
    /* the live metrics follow the sections the tally closes; from live_from on (the tally off),
     * by a walk of their own */
    void *lt = p->live ? sonde__live_thread(p, c->thread, c->base + from, tt != NULL) : NULL;
    uint32_t live_from = lt && !tt ? from : UINT32_MAX;
    uint32_t i = from;
    while (i < stop) {
        const sonde__ev *e = &c->data[i];
        unsigned kind = e->tag & 15u;
        if (kind <= SONDE_K_END) { /* section edges: most events, the short path */
            k += varint_put(enc + k, e->tag);
            k += varint_put(enc + k, zigzag_enc((int64_t)(e->ts - prev)));
            prev = e->ts;
            i++;
            if (ft)
                sonde__flight_edge(p, ft, e);
            if (!tt)
                continue;
            size_t open = tt->depth;
            if (tally_event(p, tt, c->thread, e)) {
                tt = NULL;
                live_from = lt ? i - 1 : UINT32_MAX;
            } else if (lt) { /* an END's closed sections lie above the depth it left */
                while (open > tt->depth) {
                    open--;
                    sonde__live_section(p, tt->open[open].id, tt->open[open].tick, e->ts);
                }
            }
            continue;
        }
        if (kind >= SONDE_K_COUNT)
            break; /* cannot happen for a published slot; never walk garbage */
        unsigned n = sonde_kind_slots(kind);
        if (i + n > to)
            break;
        if (fl)
            sonde__flight_event(p, e, n);
        k += sonde__put_event(enc + k, e, prev);
        prev = e->ts;
        if (tt && tally_event(p, tt, c->thread, e)) {
            tt = NULL;
            live_from = lt ? i : UINT32_MAX;
        } else if (lt && live_from == UINT32_MAX) {
            sonde__live_other(p, e);
        }
        i += n;
    }
    if (lt) {
        if (live_from != UINT32_MAX)
            sonde__live_events(p, lt, c->data + live_from, i - live_from,
                               c->thread < p->n_tally_th ? &p->tally_th[c->thread] : NULL);
        sonde__live_done(p, lt, c->base + i);
    }
    uint32_t nslots = i - from;
    if (tt)
        tt->next_slot = c->base + i;
    uint8_t *q = enc + nslots_at;
    for (int b = 0; b < 4; b++)
        q[b] = (uint8_t)(((nslots >> (7 * b)) & 0x7f) | 0x80);
    q[4] = (uint8_t)((nslots >> 28) & 0x7f);
    if (nslots == 0)
        return i;
    if (fl)
        sonde__flight_events_end(p, prev);
    if (write_record_raw(p, SONDE_R_EVENTS, enc, k) != 0)
        return UINT32_MAX;
    return i;
}

/* Counts the events in [from, to) of a chunk (for the "dropped" figure on I/O failure). */
static uint64_t count_events(const sonde_chunk *c, uint32_t from, uint32_t to)
{
    uint64_t n = 0;
    for (uint32_t i = from; i < to; n++) {
        unsigned kind = c->data[i].tag & 15u;
        if (kind >= SONDE_K_COUNT)
            break;
        i += sonde_kind_slots(kind);
    }
    return n;
}

static void write_range(sonde_profiler *p, sonde_chunk *c, uint32_t to, uint8_t *enc)
{
    uint32_t from = atomic_load_explicit(&c->flushed, memory_order_relaxed);
    while (from < to) {
        uint32_t r = atomic_load_explicit(&p->io_failed, memory_order_relaxed)
                         ? UINT32_MAX
                         : write_events(p, c, from, to, enc);
        if (r == UINT32_MAX) {
            atomic_fetch_add_explicit(&p->dropped_io, count_events(c, from, to),
                                      memory_order_relaxed);
            from = to;
        } else if (r == from) {
            break;
        } else {
            from = r;
        }
        atomic_store_explicit(&c->flushed, from, memory_order_relaxed);
    }
}

/* Slots published in an ACTIVE chunk right now. */
static uint32_t committed(sonde_profiler *p, sonde_chunk *c)
{
    sonde_tbuf *tb = atomic_load_explicit(&c->owner, memory_order_relaxed);
    sonde__ev *cur = tb ? __atomic_load_n(&tb->hot.cur, __ATOMIC_ACQUIRE) : NULL;
    if (cur && cur >= c->data && cur <= c->data + p->chunk_slots)
        return (uint32_t)(cur - c->data);
    if (atomic_load_explicit(&c->state, memory_order_acquire) == CHUNK_FULL)
        return atomic_load_explicit(&c->final_count, memory_order_relaxed);
    return atomic_load_explicit(&c->flushed, memory_order_relaxed);
}

/* x before y: by thread, then slot. */
static int pass_before(const struct sonde_pass_slot *x, const struct sonde_pass_slot *y)
{
    return x->thread != y->thread ? x->thread < y->thread : x->base < y->base;
}

/* Sorts the n entries of v in place by pass_before, allocating nothing (a heap sort): glibc's
 * qsort allocates past a kilobyte, which would be an allocation on the writer's thread at each
 * pass. */
static void sort_pass(struct sonde_pass_slot *v, uint32_t n)
{
    for (uint32_t end = n, start = n / 2; end > 1;) {
        uint32_t root;
        if (start > 0) { /* building the heap */
            root = --start;
        } else { /* the largest to the end */
            struct sonde_pass_slot t = v[0];
            v[0] = v[--end];
            v[end] = t;
            root = 0;
        }
        for (;;) { /* sift down */
            uint32_t child = 2 * root + 1;
            if (child >= end)
                break;
            if (child + 1 < end && pass_before(&v[child], &v[child + 1]))
                child++;
            if (!pass_before(&v[root], &v[child]))
                break;
            struct sonde_pass_slot t = v[root];
            v[root] = v[child];
            v[child] = t;
            root = child;
        }
    }
}

/* The n chunks of p->pass_order (sorted) less those a thread's events counted so far do not
 * reach without a chunk left out (it was still being filled when the pass looked at it, and
 * the one after it full when the pass came to it: the pass was held up between them): they
 * wait for the next pass, once (a second time they are written as they are, and the tally,
 * seeing the slots skipped, turns off). Their count. Only a pass that leaves the chunks being
 * filled alone can leave one out: a flush, and the file's last pass, write every one. */
static uint32_t keep_in_sequence(sonde_profiler *p, uint32_t n)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < n;) {
        uint32_t t = p->pass_order[k].thread, end = k;
        while (end < n && p->pass_order[end].thread == t)
            end++;
        sonde_tally_thread *th = t < p->cap_tally_th ? &p->tally_th[t] : NULL;
        uint64_t next = th && th->seen ? th->next_slot : UINT64_MAX; /* (none yet: any) */
        int held = 0;
        for (; k < end; k++) {
            const struct sonde_pass_slot *o = &p->pass_order[k];
            uint64_t from = o->base + atomic_load_explicit(&p->chunks[o->idx].flushed,
                                                           memory_order_relaxed);
            if (!held && next != UINT64_MAX && from != next && th && !th->held_back) {
                held = 1; /* this one and the thread's after it wait */
                th->held_back = 1;
            }
            if (held)
                continue;
            if (th && from == next)
                th->held_back = 0;
            next = o->base + atomic_load_explicit(&p->chunks[o->idx].final_count,
                                                  memory_order_relaxed);
            p->pass_order[kept++] = *o;
        }
    }
    return kept;
}

/* The chunks a pass writes, in p->pass_order by thread and slot (*order), so that each thread's
 * events reach the file, and the tally, in their order (the chunk's index says nothing of it);
 * their count. Without the tally: every chunk, in index order (n_chunks, *order NULL). */
static uint32_t pass_order(sonde_profiler *p, int flush_active,
                           const struct sonde_pass_slot **order)
{
    *order = NULL;
    if (!p->pass_order || !atomic_load(&p->tally_on))
        return p->n_chunks;
    *order = p->pass_order;
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_chunks; i++) {
        sonde_chunk *c = &p->chunks[i];
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == CHUNK_FULL || (st == CHUNK_ACTIVE && flush_active))
            p->pass_order[n++] = (struct sonde_pass_slot){c->thread, i, c->base};
    }
    sort_pass(p->pass_order, n);
    /* (a pass that writes what is being filled misses none: it takes each chunk it finds
     * being filled, so a chunk after it cannot be full without it) */
    return flush_active ? n : keep_in_sequence(p, n);
}

#if defined(__x86_64__)
/* A chunk's n slots evicted from this core's caches, 4 slots a 64-byte line: with clflushopt
 * where the CPU has it (cpuid leaf 7, EBX bit 23), whose flushes of one buffer overlap, then a
 * fence so that they are done before the chunk is handed back; else clflush, one line at a
 * time (three times the writer's time: 50 against 153 M edges/s of its CPU in `make bench`). */
__attribute__((target("clflushopt"))) static void evict_opt(const sonde__ev *d, uint32_t n)
{
    for (uint32_t k = 0; k < n; k += 4)
        __builtin_ia32_clflushopt(&d[k]);
    __builtin_ia32_sfence();
}

static void evict(const sonde__ev *d, uint32_t n)
{
    static int has_opt = -1; /* the writer's threads only: under wlock */
    if (has_opt < 0) {
        unsigned a, b = 0, c, e;
        has_opt = __get_cpuid_count(7, 0, &a, &b, &c, &e) && (b & (1u << 23));
    }
    if (has_opt) {
        evict_opt(d, n);
        return;
    }
    for (uint32_t k = 0; k < n; k += 4)
        __builtin_ia32_clflush(&d[k]);
}
#endif

void sonde__writer_pass(sonde_profiler *p, int flush_active)
{
    if (sonde__child_open(p) != 0)
        return; /* a forked child that has recorded nothing yet */
    if (p->ondemand && p->fd < 0)
        return; /* between windows: what comes is discarded at the next start */
    write_sites(p, p->enc);
    write_threads(p, p->enc, 1);
    const struct sonde_pass_slot *order;
    uint32_t n = pass_order(p, flush_active, &order);
    for (uint32_t at = 0; at < n; at++) {
        uint32_t i = order ? order[at].idx : at;
        sonde_chunk *c = &p->chunks[i];
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == CHUNK_FULL) {
            uint32_t cnt = atomic_load_explicit(&c->final_count, memory_order_relaxed);
            write_range(p, c, cnt, p->enc);
#if defined(__x86_64__)
            /* The chunk goes back to a recording thread, most likely the one on another core
             * that filled it: evict the lines this pass read, so that its stores find them in
             * memory (prefetched, as a sequential stream) rather than each asking this core's
             * cache for its line (a decorated Python call with the recording thread pinned
             * apart from the writer: 125 ns before, 75 after; docs/performance.md); 4 slots a
             * 64-byte line. */
            evict(c->data, cnt);
#endif
            atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
            sonde__chunk_push(p, i);
        } else if (st == CHUNK_ACTIVE && flush_active) {
            write_range(p, c, committed(p, c), p->enc);
        }
    }
    if (flush_active)
        write_anchor(p);
}

uint64_t sonde__file_end(sonde_profiler *p)
{
    /* bytes_written grows once a record is written whole: records written since lie past it */
    return SONDE_FILE_HEADER_LEN + atomic_load(&p->bytes_written);
}

void sonde__writer_discard(sonde_profiler *p)
{
    for (uint32_t i = 0; i < p->n_chunks; i++) {
        sonde_chunk *c = &p->chunks[i];
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == CHUNK_FULL) {
            atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
            sonde__chunk_push(p, i);
        } else if (st == CHUNK_ACTIVE) {
            atomic_store_explicit(&c->flushed, committed(p, c), memory_order_relaxed);
        }
    }
    atomic_store(&p->sites_written, 1);
    pthread_mutex_lock(&p->lock);
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next)) {
        atomic_store(&tb->written_thread, 0);
        atomic_store(&tb->dropped, 0);
    }
    pthread_mutex_unlock(&p->lock);
    atomic_store(&p->bytes_written, 0);
    atomic_store(&p->dropped_io, 0);
    atomic_store(&p->io_failed, 0);
    atomic_store(&p->full_errno, 0);
    atomic_store(&p->reserved_to, 0);
}

/* 1 when a chunk of c's thread with earlier events than c's is full and not yet written:
 * written before c, by a pass, so that the thread's events reach the file, and the tally, in
 * their order (asked only while the tally is on: passes keep that order only then). */
static int older_full(sonde_profiler *p, const sonde_chunk *c)
{
    for (uint32_t i = 0; i < p->n_chunks; i++) {
        const sonde_chunk *o = &p->chunks[i];
        /* (a full chunk's thread and base stay as they are while wlock is held) */
        if (o != c && atomic_load_explicit(&o->state, memory_order_acquire) == CHUNK_FULL &&
            o->thread == c->thread && o->base < c->base)
            return 1;
    }
    return 0;
}

uint32_t sonde__chunk_back_pressure(sonde_profiler *p, uint32_t own)
{
    uint64_t t0 = sonde__mono_ns();
    sonde__wlock(p);
    uint32_t got = SONDE_NO_CHUNK;
    if (sonde__child_open(p) == 0) {
        sonde_chunk *c = own == SONDE_NO_CHUNK ? NULL : &p->chunks[own];
        if (c && atomic_load_explicit(&c->state, memory_order_acquire) == CHUNK_FULL &&
            !(atomic_load(&p->tally_on) && older_full(p, c))) {
            /* still ours: the writer has not reached it. Write it here and keep it (FREE and
             * off the stack while wlock is held, so no pass pushes it; the caller makes it
             * ACTIVE again). */
            write_sites(p, p->enc);
            write_threads(p, p->enc, 1);
            write_range(p, c, atomic_load_explicit(&c->final_count, memory_order_relaxed),
                        p->enc);
            atomic_store_explicit(&c->owner, NULL, memory_order_relaxed);
            atomic_store_explicit(&c->state, CHUNK_FREE, memory_order_release);
            got = own;
        } else {
            /* the writer took it (or the thread had none): empty what other threads filled */
            got = sonde__chunk_pop(p);
            if (got == SONDE_NO_CHUNK) {
                sonde__writer_pass(p, 0);
                got = sonde__chunk_pop(p);
            }
        }
    }
    sonde__wunlock(p);
    if (got != SONDE_NO_CHUNK && got == own)
        atomic_fetch_add_explicit(&p->bp_chunks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->bp_ns, sonde__mono_ns() - t0, memory_order_relaxed);
    return got;
}

void sonde__wlock(sonde_profiler *p)
{
    pthread_mutex_lock(&p->wlock);
    int me = (int)syscall(SYS_gettid), free_ = 0;
    /* a signal handler's flush is under way (on another thread): it ends in a few ms */
    while (!atomic_compare_exchange_weak(&p->wpass, &free_, me)) {
        if (free_) { /* not a spurious failure */
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        free_ = 0;
    }
}

void sonde__wunlock(sonde_profiler *p)
{
    atomic_store(&p->wpass, 0);
    pthread_mutex_unlock(&p->wlock);
}

/* The signal handler's side of the pass word: waits (at most 2 s) for a pass on another thread
 * to end and keeps the next one out. 1: taken (give it back with signal_pass_end); 0: not taken,
 * because the handler interrupted the pass's own thread (which waits for it) or the pass did not
 * end in time: the flush goes ahead, as it would without the word, since the process may be
 * about to end. Async-signal-safe (atomics, gettid, nanosleep). */
static int signal_pass_begin(sonde_profiler *p)
{
    int me = (int)syscall(SYS_gettid);
    for (int i = 0; i < 20000; i++) {
        int holder = 0;
        if (atomic_compare_exchange_strong(&p->wpass, &holder, SONDE_WPASS_SIGNAL))
            return 1;
        if (holder == me)
            return 0;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void signal_pass_end(sonde_profiler *p, int taken)
{
    if (taken)
        atomic_store(&p->wpass, 0);
}

static void signal_flush(sonde_profiler *p, int sig);

void sonde__signal_flush(sonde_profiler *p, int sig)
{
    /* what it writes is not followed by the live metrics; a process that goes on (a SIGINT the
     * program catches) has them follow again, each thread from its next record in order */
    atomic_store(&p->live_off, 1);
    signal_flush(p, sig);
    atomic_store(&p->live_off, 0);
}

static void signal_flush(sonde_profiler *p, int sig)
{
    sonde__tally_off(p); /* what it writes is not counted: the file has no SUMMARY */
    if (p->flight && !atomic_load(&p->finalized)) {
        int fd = sonde__flight_crash_open(p, sig);
        if (fd < 0)
            return;
        p->fd = fd; /* what threads still hold goes there too, below */
        atomic_store(&p->flight_direct, 1);
    }
    if (atomic_load(&p->finalized))
        return;
    /* no file yet: a forked child's may be in the making, by its writer's first pass (wait for
     * the pass) or by the handler (a SIGTERM before that pass: its own events only) */
    if (p->fd < 0 && !atomic_load(&p->child_pending) && !atomic_load(&p->wpass))
        return;
    int taken = signal_pass_begin(p);
    if (p->fd < 0 && sonde__child_open_in_signal(p) != 0) {
        signal_pass_end(p, taken);
        return;
    }
    write_sites(p, p->sig_enc);
    write_threads(p, p->sig_enc, 0);
    for (uint32_t i = 0; i < p->n_chunks; i++) {
        sonde_chunk *c = &p->chunks[i];
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == CHUNK_FULL)
            write_range(p, c, atomic_load_explicit(&c->final_count, memory_order_relaxed),
                        p->sig_enc);
        else if (st == CHUNK_ACTIVE)
            write_range(p, c, committed(p, c), p->sig_enc);
    }
    write_anchor(p);
    uint8_t rec[24]; /* the reader then says the run ended by this signal, not how it crashed */
    size_t n = varint_put(rec, (uint64_t)(sig > 0 ? sig : 0));
    n += varint_put(rec + n, sonde__ticks());
    write_rec(p, SONDE_R_SIGNAL, rec, n, 0);
    signal_pass_end(p, taken);
}

/* ------------------------------------------------------------------------------------------
 * The file and the thread
 * ---------------------------------------------------------------------------------------- */
static void read_cmdline(char *out, size_t cap)
{
    out[0] = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return;
    for (ssize_t i = 0; i < n - 1; i++)
        if (!out[i])
            out[i] = ' ';
    out[n] = 0;
}

/* The INFO record's payload, in b (p->enc_cap bytes); its length. */
static size_t info_payload(sonde_profiler *p, uint8_t *b)
{
    const sonde_clock_info *ck = sonde__clock();
    char host[256] = "", num[64], cmd[1024];
    gethostname(host, sizeof host - 1);
    read_cmdline(cmd, sizeof cmd);
    size_t k = 0;
    k += kv_put(b + k, "name", p->name);
    k += kv_put(b + k, "sonde_version", SONDE_VERSION_STRING);
    snprintf(num, sizeof num, "%d", (int)getpid());
    k += kv_put(b + k, "pid", num);
    k += kv_put(b + k, "host", host);
    char boot[64];
    sonde__boot_id(boot, sizeof boot);
    if (boot[0]) /* runs of one boot share CLOCK_MONOTONIC: sonde merge aligns them on it */
        k += kv_put(b + k, "system.boot_id", boot);
    k += kv_put(b + k, "program", program_invocation_short_name);
    k += kv_put(b + k, "cmdline", cmd);
    k += kv_put(b + k, "clock", ck->use_tsc ? "tsc" : "monotonic");
    snprintf(num, sizeof num, "%.3f", ck->ticks_per_s);
    k += kv_put(b + k, "ticks_per_s", num);
    snprintf(num, sizeof num, "%llu",
             (unsigned long long)(p->start_tick ? p->start_tick : sonde__ticks()));
    k += kv_put(b + k, "start_tick", num);
    k += kv_put(b + k, "unit", p->unit);
    snprintf(num, sizeof num, "%.6g", p->cfg.peak_flops);
    k += kv_put(b + k, "peak_flops", num);
    if (p->run_id[0])
        k += kv_put(b + k, "run.id", p->run_id);
    if (p->parent_pid > 0) { /* a forked child's run (a DataLoader worker): its parent's pid */
        snprintf(num, sizeof num, "%d", p->parent_pid);
        k += kv_put(b + k, "system.parent_pid", num);
    }
    /* The whole configuration, so every report can show what the run was asked to do. */
    size_t nk;
    const sonde_key *keys = sonde__keys(&nk);
    for (size_t i = 0; i < nk; i++) {
        char key[80], val[512];
        snprintf(key, sizeof key, "config.%s", keys[i].name);
        sonde__key_get(&p->cfg, &keys[i], val, sizeof val);
        if (k + strlen(key) + strlen(val) + 20 < p->enc_cap)
            k += kv_put(b + k, key, val);
    }
    return k;
}

static int write_info(sonde_profiler *p)
{
    return write_record_raw(p, SONDE_R_INFO, p->enc, info_payload(p, p->enc));
}

/* Out of memory while opening: recording stays off, and the status says so, so that
 * sonde_destroy reports it instead of ending quietly without reports. */
static int no_memory(sonde_profiler *p)
{
    static const char msg[] = "out of memory while creating the recording; profiling is off";
    sonde__set_status(p, SONDE_ENOMEM, msg);
    return sonde__fail(SONDE_ENOMEM, "%s", msg);
}

int sonde__writer_open(sonde_profiler *p)
{
    char msg[600];
    if (mkdir_p(p->output_dir) != 0) {
        snprintf(msg, sizeof msg, "cannot create output directory %s: %s; profiling is off",
                 p->output_dir, mkdir_p_error(errno));
        sonde__set_status(p, SONDE_EIO, msg);
        return sonde__fail(SONDE_EIO, "%s", msg);
    }
    if (p->flight) /* nothing is written before a trigger: the file's start is kept in memory */
        return write_info(p) != 0 || write_first_anchor(p) != 0 ? no_memory(p) : 0;
    /* Two runs with the same name never overwrite each other: NAME, NAME-2, ... NAME-999. */
    for (int k = 1; k < 1000; k++) {
        char stem[512];
        if (k == 1)
            snprintf(stem, sizeof stem, "%s.sonde", p->name);
        else
            snprintf(stem, sizeof stem, "%s-%d.sonde", p->name, k);
        char *path = path_join(p->output_dir, stem);
        if (!path)
            return no_memory(p);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno == EEXIST) {
            sonde__free(path);
            continue;
        }
        if (fd < 0) {
            snprintf(msg, sizeof msg, "cannot create %s: %s; profiling is off", path,
                     strerror(errno));
            sonde__free(path);
            sonde__set_status(p, SONDE_EIO, msg);
            return sonde__fail(SONDE_EIO, "%s", msg);
        }
        if (k > 1) {
            char *nn = sonde__malloc(strlen(p->name) + 8);
            if (!nn) {
                close(fd);
                unlink(path);
                sonde__free(path);
                return no_memory(p);
            }
            sprintf(nn, "%s-%d", p->name, k);
            sonde__free(p->name);
            p->name = nn;
            p->cfg.name = nn;
        }
        p->fd = fd;
        p->path = path;
        tally_start(p);
        uint8_t hdr[SONDE_FILE_HEADER_LEN];
        sonde__file_header(hdr);
        if (write_all(fd, hdr, sizeof hdr) != 0 || write_info(p) != 0 || write_first_anchor(p) != 0) {
            snprintf(msg, sizeof msg, "cannot write %s: %s; profiling is off", path,
                     strerror(errno));
            close(fd);
            p->fd = -1;
            sonde__set_status(p, SONDE_EIO, msg);
            return sonde__fail(SONDE_EIO, "%s", msg);
        }
        return 0;
    }
    snprintf(msg, sizeof msg, "no free file name for run %s in %s; profiling is off", p->name,
             p->output_dir);
    sonde__set_status(p, SONDE_EIO, msg);
    return sonde__fail(SONDE_EIO, "%s", msg);
}

/* A forked child's file, made ready where allocating is allowed (sonde__child_start, on the
 * thread of its first record) so that it can be created where it is not: its path
 * (DIR/NAME.sonde) and its first bytes (the header, INFO and the first anchor, framed as
 * write_rec frames them). 0, or -1 out of memory or when the directory cannot be made (the
 * writer's first pass then opens the file as any run's, and says why it cannot). */
int sonde__child_prepare(sonde_profiler *p)
{
    if (p->child_path || !p->start_tick || mkdir_p(p->output_dir) != 0)
        return p->child_path ? 0 : -1;
    char stem[512];
    snprintf(stem, sizeof stem, "%s.sonde", p->name);
    char *path = path_join(p->output_dir, stem);
    uint8_t *head = sonde__malloc(SONDE_FILE_HEADER_LEN + 2 * SONDE_RECORD_HEADER_LEN + 32 +
                                  p->enc_cap);
    if (!path || !head) {
        sonde__free(path);
        sonde__free(head);
        return -1;
    }
    sonde__file_header(head);
    size_t k = SONDE_FILE_HEADER_LEN;
    uint8_t *info = head + k + SONDE_RECORD_HEADER_LEN;
    size_t n = info_payload(p, info);
    sonde__record_frame(head + k, SONDE_R_INFO, info, n);
    k += SONDE_RECORD_HEADER_LEN + n;
    uint8_t *anchor = head + k + SONDE_RECORD_HEADER_LEN;
    n = sonde__anchor_put(anchor, p->start_tick, p->start_mono_ns, p->start_real_ns);
    sonde__record_frame(head + k, SONDE_R_ANCHOR, anchor, n);
    p->child_head_len = k + SONDE_RECORD_HEADER_LEN + n;
    p->child_head = head;
    p->child_path = path;
    return 0;
}

/* Creates the file sonde__child_prepare made ready and writes its first bytes. 0; -1 with
 * errno (EEXIST: a file of that name is there; the caller may look for another). Async-signal-
 * safe: a child ended by SIGTERM before its writer's first pass creates it in the handler. */
int sonde__child_create(sonde_profiler *p)
{
    if (!p->child_path) {
        errno = ENOENT;
        return -1;
    }
    int fd = open(p->child_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                  0644);
    if (fd < 0)
        return -1;
    xfsz_guard g;
    xfsz_block(&g);
    int rc = write_all(fd, p->child_head, p->child_head_len);
    int e = errno;
    xfsz_restore(&g);
    if (rc != 0) {
        unlink(p->child_path);
        close(fd);
        errno = e;
        return -1;
    }
    atomic_store(&p->bytes_written, p->child_head_len - SONDE_FILE_HEADER_LEN);
    p->path = p->child_path;
    p->child_path = NULL;
    p->fd = fd;
    return 0;
}

static void *writer_main(void *arg)
{
    sonde_profiler *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* host signals go to host threads */
    xfsz_all_blocked();
    pthread_setname_np(pthread_self(), "sonde-writer");
    double iv = p->cfg.flush_interval_s;
    uint64_t iv_ns = (uint64_t)(iv * 1e9);
    uint64_t last = sonde__mono_ns(), last_guard = last;
    for (int first = 1; !atomic_load(&p->stop); first = 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait_ns = iv_ns < 100000000u ? iv_ns : 100000000u;
        /* A forked child's first pass begins its file and its CPU samples (sonde__child_open):
         * 5 ms after its first record, so that its first moments are sampled (e2e pyframes: a
         * worker spinning 0.15 s of CPU, all but its first moments; after 100 ms, a third of
         * its samples were lost), while a fork that execs sooner (a shell's, within a
         * millisecond) still leaves no file. */
        if (first && atomic_load(&p->child_pending) && wait_ns > 5000000u)
            wait_ns = 5000000u;
        ts.tv_nsec += (long)(wait_ns % 1000000000u);
        ts.tv_sec += (time_t)(wait_ns / 1000000000u) + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        while (sem_timedwait(&p->wake, &ts) != 0 && errno == EINTR) {
        }
        if (atomic_load(&p->stop))
            break;
        uint64_t now = sonde__mono_ns();
        int periodic = now - last >= iv_ns;
        if (periodic)
            last = now;
        sonde__wlock(p);
        sonde__writer_pass(p, periodic);
        if (p->flight)
            sonde__flight_poll(p);
        sonde__wunlock(p);
        if (p->ondemand || p->flight)
            sonde__ondemand_poll(p);
        if (first || now - last_guard >= 100000000u) { /* two syscalls: not at every wake */
            last_guard = now;
            sonde__signals_guard();
        }
    }
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        atomic_store(&p->writer_cpu_ns, (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec);
    return NULL;
}

int sonde__writer_start(sonde_profiler *p)
{
    if (pthread_create(&p->writer, NULL, writer_main, p) != 0)
        return -1;
    /* named here too, so that whoever looks right after sonde_create (`sonde trigger`) sees it */
    pthread_setname_np(p->writer, "sonde-writer");
    p->writer_started = 1;
    return 0;
}

void sonde__writer_stop(sonde_profiler *p)
{
    if (!p->writer_started)
        return;
    atomic_store(&p->stop, 1);
    sem_post(&p->wake);
    pthread_join(p->writer, NULL);
    p->writer_started = 0;
}

static size_t put_stat(uint8_t *out, const char *k, uint64_t v)
{
    size_t n = put_str(out, k);
    return n + varint_put(out + n, v);
}

size_t sonde__stats_payload(sonde_profiler *p, uint8_t *b)
{
    uint64_t dropped = atomic_load(&p->dropped_io);
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next))
        dropped += atomic_load(&tb->dropped);
    size_t k = 0;
    k += put_stat(b + k, "dropped_events", dropped);
    k += put_stat(b + k, "threads", atomic_load(&p->n_threads));
    k += put_stat(b + k, "steps", atomic_load(&p->steps));
    k += put_stat(b + k, "bytes_written", atomic_load(&p->bytes_written));
    k += put_stat(b + k, "writer_cpu_ns", atomic_load(&p->writer_cpu_ns));
    k += put_stat(b + k, "sampler_cpu_ns", atomic_load(&p->sampler_cpu_ns));
    k += put_stat(b + k, "stacks_cpu_ns", p->stacks_cpu_ns);
    k += put_stat(b + k, "stacks_cfi_unwound", p->stacks_cfi);
    k += put_stat(b + k, "stacks_py_way", p->stacks_py.way);
    k += put_stat(b + k, "stacks_py_kernel_runs", p->stacks_py.kernel_runs);
    k += put_stat(b + k, "stacks_py_kernel_ns", p->stacks_py.kernel_ns);
    k += put_stat(b + k, "backpressure_chunks", atomic_load(&p->bp_chunks));
    k += put_stat(b + k, "backpressure_ns", atomic_load(&p->bp_ns));
    k += put_stat(b + k, "buffer_bytes", (uint64_t)p->n_chunks * p->chunk_slots * sizeof(sonde__ev));
    return k;
}

int sonde__writer_close(sonde_profiler *p)
{
    sonde__wlock(p);
    sonde__child_open(p);
    if (p->fd < 0) {
        sonde__wunlock(p);
        return 0;
    }
    /* Retire what every thread still holds, so its chunk is written whole. */
    sonde__writer_pass(p, 1);
    write_summary(p);
    uint64_t dropped = atomic_load(&p->dropped_io);
    for (sonde_tbuf *tb = atomic_load(&p->threads); tb; tb = atomic_load(&tb->next))
        dropped += atomic_load(&tb->dropped);
    uint8_t *b = p->enc;
    size_t k = sonde__stats_payload(p, b);
    int full = atomic_load(&p->full_errno);
    char fullmsg[512];
    if (full) {
        /* the disk filled: say so in the file (the tail fits in the room kept for it) */
        snprintf(fullmsg, sizeof fullmsg, "writing %s stopped after %llu bytes: %s; the %llu "
                 "events recorded after that were dropped", p->path,
                 (unsigned long long)(SONDE_FILE_HEADER_LEN + atomic_load(&p->bytes_written)),
                 strerror(full), (unsigned long long)dropped);
        sonde__set_status(p, SONDE_EIO, fullmsg);
    }
    write_rec(p, SONDE_R_STATS, b, k, 1);
    pthread_mutex_lock(&p->lock);
    if (p->status_msg[0]) {
        k = put_str(b, p->status_msg);
        write_rec(p, SONDE_R_WARNING, b, k, 1);
    }
    if (full && strncmp(p->status_msg, fullmsg, sizeof p->status_msg - 1) != 0) {
        fprintf(stderr, "sonde: %s\n", fullmsg); /* an earlier error took the status */
        k = put_str(b, fullmsg);
        write_rec(p, SONDE_R_WARNING, b, k, 1);
    }
    for (int i = 0; i < p->n_warnings; i++) {
        if (strlen(p->warnings[i]) + 16 > p->enc_cap)
            continue;
        k = put_str(b, p->warnings[i]);
        write_rec(p, SONDE_R_WARNING, b, k, 1);
    }
    pthread_mutex_unlock(&p->lock);
    uint64_t tick, mono;
    sonde__clock_pair(&tick, &mono);
    write_anchor_at(p, tick, mono, sonde__real_ns(), 1);
    uint64_t end = atomic_load(&p->user_end); /* the program's run, not sonde's closing work */
    k = varint_put(b, end ? end : sonde__ticks());
    int rc = write_rec(p, SONDE_R_END, b, k, 1);
    /* give back the blocks reserved past the end (a truncate to the same size frees them) */
    uint64_t reserved = atomic_load(&p->reserved_to);
    struct stat st;
    if (reserved != UINT64_MAX && reserved && fstat(p->fd, &st) == 0)
        (void)!ftruncate(p->fd, st.st_size);
    if (close(p->fd) != 0)
        rc = -1;
    p->fd = -1;
    sonde__wunlock(p);
    if (full)
        return -1; /* the status says what was dropped */
    if (rc || atomic_load(&p->io_failed)) {
        char msg[512];
        snprintf(msg, sizeof msg, "writing %s failed; the file holds what was written before",
                 p->path);
        sonde__set_status(p, SONDE_EIO, msg);
        return -1;
    }
    return 0;
}
