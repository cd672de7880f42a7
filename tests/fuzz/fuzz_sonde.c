/* fuzz_sonde.c - libFuzzer target for the .sonde reader: any bytes must give a model or a clean
 * error, and a model must export to every format without fault.
 *
 * Its mutator knows the file's records (issue 36 #12): most mutants change one record's payload
 * and give it back a valid length and CRC, so that the reader goes past the checksum into the
 * record's meaning; INFO records have a value of one of their keys (config.* included: the
 * reports read them back) replaced by an extreme number or mutated bytes. The rest are plain
 * byte mutations. The reading feeds the instances CSV's rows as it goes, as sx_read_file does.
 * One input in two is read again with the first pass on two or three threads (skim.c), which
 * must give the model and the warnings one thread gives: a difference is a finding. One in
 * three is also read in two parts, as a step schedule's windows are (read_parts). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export/export.h"
#include "format/format.h"
#include "model/model.h"
#include "util/buf.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

#define MAX_RECORDS 4096
#define SCRATCH (1u << 20)

static const char *const g_nasty[] = {
    "18446744073709551615", "18446744073709551616", "4294967295", "4294967296", "2147483648",
    "-1", "0", "1", "1e308", "-1e308", "1e-308", "nan", "inf", "-inf", "", "0x10", " 7",
    "99999999999999999999999999", "0.5", "-0",
};

static uint32_t next_rand(uint32_t *r)
{
    *r = *r * 1103515245u + 12345u;
    return *r >> 8;
}

/* A varint at *p (below end), or -1. */
static int get_var(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* A new INFO payload into out (cap bytes): pair k's value replaced. Its length, 0 if it cannot. */
static size_t info_mutant(const uint8_t *p, size_t len, uint8_t *out, size_t cap, uint32_t *r)
{
    const uint8_t *end = p + len;
    const uint8_t *pairs[512][2];
    size_t lens[512][2], n = 0;
    while (p < end && n < 512) {
        for (int j = 0; j < 2; j++) {
            uint64_t l;
            if (get_var(&p, end, &l) || l > (uint64_t)(end - p))
                return 0;
            pairs[n][j] = p;
            lens[n][j] = (size_t)l;
            p += l;
        }
        n++;
    }
    if (!n)
        return 0;
    size_t k = next_rand(r) % n, o = 0;
    char val[256];
    size_t vl;
    if (next_rand(r) % 4) {
        const char *v = g_nasty[next_rand(r) % (sizeof g_nasty / sizeof g_nasty[0])];
        vl = strlen(v);
        memcpy(val, v, vl);
    } else {
        vl = lens[k][1] < sizeof val ? lens[k][1] : sizeof val;
        memcpy(val, pairs[k][1], vl);
        vl = LLVMFuzzerMutate((uint8_t *)val, vl, sizeof val);
    }
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < 2; j++) {
            const uint8_t *s = i == k && j == 1 ? (const uint8_t *)val : pairs[i][j];
            size_t l = i == k && j == 1 ? vl : lens[i][j];
            if (o + 10 + l > cap)
                return 0;
            o += varint_put(out + o, l);
            memcpy(out + o, s, l);
            o += l;
        }
    return o;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint32_t r = seed;
    size_t offs[MAX_RECORDS], n = 0;
    for (size_t off = SONDE_FILE_HEADER_LEN;
         off + SONDE_RECORD_HEADER_LEN <= size && n < MAX_RECORDS;) {
        uint32_t len = sonde_get_u32le(data + off + 4);
        if (len > size - off - SONDE_RECORD_HEADER_LEN)
            break;
        offs[n++] = off;
        off += SONDE_RECORD_HEADER_LEN + len;
    }
    if (!n || next_rand(&r) % 5 == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    static uint8_t payload[SCRATCH];
    size_t at = offs[next_rand(&r) % n];
    unsigned type = data[at];
    uint32_t len = sonde_get_u32le(data + at + 4);
    const uint8_t *old = data + at + SONDE_RECORD_HEADER_LEN;
    size_t room = max_size > size ? max_size - size : 0, nl = 0;
    if (type == SONDE_R_INFO && next_rand(&r) % 2)
        nl = info_mutant(old, len, payload, len + room < SCRATCH ? len + room : SCRATCH, &r);
    if (!nl) {
        if (len > SCRATCH)
            return LLVMFuzzerMutate(data, size, max_size);
        memcpy(payload, old, len);
        size_t cap = len + room < SCRATCH ? len + room : SCRATCH;
        nl = len ? LLVMFuzzerMutate(payload, len, cap) : 0;
    }
    if (nl > len + room)
        return size;
    /* splice: the record's new payload, its length and CRC; what follows moves */
    size_t tail = at + SONDE_RECORD_HEADER_LEN + len;
    memmove(data + at + SONDE_RECORD_HEADER_LEN + nl, data + tail, size - tail);
    memcpy(data + at + SONDE_RECORD_HEADER_LEN, payload, nl);
    sonde_put_u32le(data + at + 4, (uint32_t)nl);
    sonde_put_u32le(data + at + 8, (uint32_t)crc32(0L, payload, (uInt)nl));
    return size - len + nl;
}

static int null_sink(void *ctx, const char *d, size_t n)
{
    (void)ctx;
    (void)d;
    (void)n;
    return 0;
}

/* data read into m with the first pass on readers threads (SONDE_READ_THREADS), feeding the
 * instances CSV's rows as it goes. */
static int read_fed(const uint8_t *data, size_t size, const char *readers, sm_model *m)
{
    sx_rows rows;
    sx_rows_begin(&rows, null_sink, NULL);
    /* on every input whose configuration folds sections (report_max_sections): rows of a model
     * still being built */
    const sm_feed feed = {sm_feed_whenever_folded, sx_rows_add, &rows};
    setenv("SONDE_READ_THREADS", readers, 1);
    int rc = sm_read_mem_fed(data, size, "fuzz.sonde", &feed, m);
    sx_rows_end(&rows);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The warnings of x and y the same, in any order: where the SUMMARY record stood for the first
 * pass, the build names malformed blocks, each file thread's on the thread that built it. */
static int same_warnings_unordered(const sm_model *x, const sm_model *y)
{
    char **a = malloc((x->n_warnings + 1) * sizeof *a);
    char **b = malloc((y->n_warnings + 1) * sizeof *b);
    if (!a || !b)
        abort();
    memcpy(a, x->warnings, x->n_warnings * sizeof *a);
    memcpy(b, y->warnings, y->n_warnings * sizeof *b);
    qsort(a, x->n_warnings, sizeof *a, cmp_str);
    qsort(b, y->n_warnings, sizeof *b, cmp_str);
    int same = 1;
    for (size_t i = 0; i < x->n_warnings; i++)
        same &= !strcmp(a[i], b[i]);
    free(a);
    free(b);
    return same;
}

/* data read with the first pass and the build on several threads: what one thread's reading gave
 * (m, rc). A SUMMARY record that says a thread has sections alone when it has other events may
 * fail the reading on several threads alone (a helper met one): the one thing that may differ. */
static void two_readers(const uint8_t *data, size_t size, int rc, const sm_model *m)
{
    sm_model two;
    int rc2 = read_fed(data, size, size & 2 ? "3" : "2", &two);
    if (rc2 != rc && !(rc == 0 && m->read_times.one_pass && rc2 == SONDE_EFORMAT &&
                       strstr(sonde_last_error(), "its SUMMARY record does not say")))
        abort();
    if (rc || rc2)
        return;
    if (two.n_spans != m->n_spans || two.sections_folded != m->sections_folded ||
        two.held_min_ns != m->held_min_ns || two.duration_ns != m->duration_ns ||
        two.n_stats != m->n_stats || two.n_sessions != m->n_sessions ||
        two.n_instants != m->n_instants || two.n_steps != m->n_steps ||
        two.n_warnings != m->n_warnings || two.read_times.one_pass != m->read_times.one_pass)
        abort();
    for (size_t i = 0; i < m->n_warnings && !m->read_times.one_pass; i++)
        if (strcmp(two.warnings[i], m->warnings[i]))
            abort();
    if (m->read_times.one_pass && !same_warnings_unordered(m, &two))
        abort();
    for (size_t i = 0; i < m->n_stats; i++) /* the build's merged statistics: the same bits */
        if (two.stats[i].count != m->stats[i].count || two.stats[i].threads != m->stats[i].threads ||
            memcmp(&two.stats[i].total_s, &m->stats[i].total_s, sizeof m->stats[i].total_s) ||
            memcmp(&two.stats[i].self_s, &m->stats[i].self_s, sizeof m->stats[i].self_s) ||
            memcmp(&two.stats[i].stddev_s, &m->stats[i].stddev_s, sizeof m->stats[i].stddev_s))
            abort();
    /* and the sections built on helper threads (build_threads.c), their indices moved */
    if (m->n_spans && memcmp(two.spans, m->spans, m->n_spans * sizeof *m->spans))
        abort();
    for (size_t i = 0; i < m->n_threads; i++)
        if (two.threads[i].spans != m->threads[i].spans)
            abort();
    sm_free(&two);
}

/* The input read as a step schedule's windows are (sm_read_mem_from): from an offset its last
 * bytes pick, then from a later one with what the first reading noted, with a session said to
 * be open; each model exported as a window's trace is. */
static void read_parts(const uint8_t *data, size_t size)
{
    if (size < 24)
        return;
    uint64_t pick = sonde_get_u64le(data + size - 8);
    sm_resume rs = {0};
    for (int i = 0; i < 2; i++) {
        sm_part part = {SONDE_FILE_HEADER_LEN + (pick & 0xffff) * (uint64_t)(i + 1) % size,
                        (int)(pick >> 16 & 1), pick >> 17 & 0xffff, (uint32_t)(pick >> 33 & 0xff),
                        (uint32_t)(pick >> 41 & 3)};
        sm_model m;
        if (sm_read_mem_from(data, size, "part", &part, &rs, &m) == 0) {
            sx_trace(&m, null_sink, NULL);
            sm_free(&m);
        }
    }
    sm_resume_free(&rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sm_model m;
    int rc = read_fed(data, size, "1", &m);
    if (size & 1)
        two_readers(data, size, rc, &m);
    if (size % 3 == 0)
        read_parts(data, size);
    if (rc != 0)
        return 0;
    sbuf b;
    sbuf_init(&b);
    sx_json(&m, &b);
    sbuf_reset(&b);
    sx_csv(&m, &b);
    sbuf_reset(&b);
    sx_csv_instances(&m, &b);
    sbuf_reset(&b);
    sx_txt(&m, &b);
    sbuf_free(&b);
    sx_trace(&m, null_sink, NULL);
    sx_perfetto(&m, null_sink, NULL);
    sm_free(&m);
    return 0;
}
