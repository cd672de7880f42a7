/* checksums.c - the CRC-32 of a file's event records, summed on several threads at once
 * (model_build.h's sm__check_records). The reading (reader.c) walks the records on one thread;
 * an EVENTS record's sum, most of that walk's time for a large file, is left to this, each
 * thread taking the next run of records not yet taken and reading it with one pread: the sums
 * are shared between the threads, never summed twice. The bytes come through reader.c's
 * sm__bytes_at. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <zlib.h>

#include "model_build.h"
#include "../format/format.h"
#include "../util/alloc.h"

/* Records a thread takes at a time, and the most bytes it reads with one pread: a run of
 * records longer than that is read one record at a time. */
#define RUN_RECORDS 64
#define RUN_MAX_BYTES (8u << 20)
/* Fewer records than this are summed on the calling thread alone. */
#define SEVERAL_FROM 256

typedef struct checker {
    const uint8_t *data;
    int fd;
    const sb_sum *recs;
    size_t n;
    _Atomic size_t next;  /* the next run's first record */
    _Atomic int failed;   /* 1: a sum differs or a record could not be read; -1: out of memory */
} checker;

/* 0 when records [i, j)'s sums are right, else what c->failed is to be set to. */
static int check_run(const checker *c, size_t i, size_t j, uint8_t **buf, size_t *cap)
{
    uint64_t from = c->recs[i].at, to = c->recs[j - 1].at + c->recs[j - 1].len;
    if (to - from > RUN_MAX_BYTES && j - i > 1) { /* far apart, or large: one at a time */
        for (size_t k = i; k < j; k++) {
            int rc = check_run(c, k, k + 1, buf, cap);
            if (rc)
                return rc;
        }
        return 0;
    }
    const uint8_t *p = sm__bytes_at(c->data, c->fd, from, (size_t)(to - from), buf, cap);
    if (!p)
        return errno == ENOMEM ? -1 : 1;
    for (size_t k = i; k < j; k++) {
        const sb_sum *r = &c->recs[k];
        if ((uint32_t)crc32(0L, p + (r->at - from), r->len) != r->crc)
            return 1;
    }
    return 0;
}

static void *checker_run(void *arg)
{
    checker *c = arg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    while (!atomic_load(&c->failed)) {
        size_t i = atomic_fetch_add(&c->next, RUN_RECORDS);
        if (i >= c->n)
            break;
        size_t j = i + RUN_RECORDS < c->n ? i + RUN_RECORDS : c->n;
        int rc = check_run(c, i, j, &buf, &cap);
        if (rc) {
            int none = 0; /* the first failure stands: out of memory is not taken for a bad sum */
            atomic_compare_exchange_strong(&c->failed, &none, rc);
        }
    }
    sonde__free(buf);
    return NULL;
}

int sm__check_records(const uint8_t *data, int fd, const sb_sum *recs, size_t n, int threads)
{
    checker c = {.data = data, .fd = fd, .recs = recs, .n = n};
    atomic_init(&c.next, 0);
    atomic_init(&c.failed, 0);
    pthread_t th[SM_REPORT_THREADS_MAX];
    int started[SM_REPORT_THREADS_MAX] = {0};
    if (n < SEVERAL_FROM || threads < 1)
        threads = 1;
    if (threads > SM_REPORT_THREADS_MAX)
        threads = SM_REPORT_THREADS_MAX;
    for (int i = 1; i < threads; i++) /* one that does not start leaves its share to the rest */
        started[i] = pthread_create(&th[i], NULL, checker_run, &c) == 0;
    checker_run(&c);
    for (int i = 1; i < threads; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    return atomic_load(&c.failed);
}
