/* export.c - the table of formats (extension, mask bit, writer) and the writing of report files
 * through a temporary name, gzip for the trace. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../record/record.h"
#include "../util/fileio.h"
#include "export.h"
#include "../util/alloc.h"

typedef int (*sx_text_fn)(const sm_model *, sbuf *);

static int gz_sink(void *ctx, const char *data, size_t n)
{
    gzFile gz = ctx;
    while (n) {
        unsigned piece = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        if (gzwrite(gz, data, piece) != (int)piece)
            return -1;
        data += piece;
        n -= piece;
    }
    return 0;
}

static int write_trace_gz_range(const sm_model *m, const char *path, int64_t t0, int64_t t1)
{
    afile af;
    if (afile_open(&af, path) != 0)
        return -1;
    int fd2 = dup(af.fd);
    gzFile gz = fd2 >= 0 ? gzdopen(fd2, "wb1") : NULL;
    if (!gz) {
        if (fd2 >= 0)
            close(fd2);
        afile_abort(&af);
        errno = ENOMEM;
        return -1;
    }
    int rc = sx_trace_range(m, t0, t1, gz_sink, gz);
    if (gzclose(gz) != Z_OK)
        rc = -1;
    if (rc) {
        afile_abort(&af);
        errno = EIO;
        return -1;
    }
    return afile_commit(&af, 0);
}

static int write_trace_gz(const sm_model *m, const char *path)
{
    return write_trace_gz_range(m, path, INT64_MIN, INT64_MAX);
}

int sx_write_trace_range(const sm_model *m, const char *path, int64_t t0, int64_t t1)
{
    xfsz_guard g;
    xfsz_block(&g);
    int rc = write_trace_gz_range(m, path, t0, t1);
    int e = errno;
    xfsz_restore(&g);
    errno = e;
    if (rc != 0)
        return sonde__fail(SONDE_EIO, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static int write_text(const sm_model *m, const char *path, sx_text_fn fn)
{
    sbuf b;
    sbuf_init(&b);
    if (fn(m, &b) != 0) {
        sbuf_free(&b);
        errno = ENOMEM;
        return -1;
    }
    int rc = write_file_atomic(path, b.data ? b.data : "", b.len);
    sbuf_free(&b);
    return rc;
}

/* One row per file a format writes. */
static const struct {
    unsigned bit;
    const char *ext;
    sx_text_fn text; /* NULL: the gzip trace */
} g_formats[] = {
    {SONDE_FORMAT_JSON, ".json", sx_json},
    {SONDE_FORMAT_CSV, ".csv", sx_csv},
    {SONDE_FORMAT_CSV, ".instances.csv", sx_csv_instances},
    {SONDE_FORMAT_TXT, ".txt", sx_txt},
    {SONDE_FORMAT_TRACE, ".trace.json.gz", NULL},
    {SONDE_FORMAT_SAMPLES, ".samples.csv", sx_csv_samples},
    {SONDE_FORMAT_HTML, ".html", sx_html},
};
#define N_FORMATS (sizeof g_formats / sizeof g_formats[0])

static int write_one(const sm_model *m, const char *path, size_t f)
{
    int rc = g_formats[f].text ? write_text(m, path, g_formats[f].text) : write_trace_gz(m, path);
    if (rc)
        return sonde__fail(errno == ENOMEM ? SONDE_ENOMEM : SONDE_EIO, "cannot write %s: %s", path,
                           strerror(errno));
    return 0;
}

static int write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats);

int sx_write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats)
{
    xfsz_guard g; /* a file-size limit makes a report fail, never the host */
    xfsz_block(&g);
    int rc = write_formats(m, dir, name, formats);
    xfsz_restore(&g);
    return rc;
}

static int write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats)
{
    int rc = 0;
    if (formats && mkdir_p(dir) != 0)
        return sonde__fail(SONDE_EIO, "cannot create %s: %s", dir, strerror(errno));
    for (size_t f = 0; f < N_FORMATS; f++) {
        if (!(formats & g_formats[f].bit))
            continue;
        size_t n = strlen(dir) + strlen(name) + strlen(g_formats[f].ext) + 2;
        char *path = sonde__malloc(n);
        if (!path)
            return sonde__fail(SONDE_ENOMEM, "out of memory");
        snprintf(path, n, "%s%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name,
                 g_formats[f].ext);
        int r = write_one(m, path, f);
        if (r && !rc)
            rc = r;
        sonde__free(path);
    }
    return rc;
}

void sx_print_summary(const sm_model *m)
{
    sbuf b;
    sbuf_init(&b);
    if (sx_txt(m, &b) == 0)
        fputs(b.data, stderr);
    sbuf_free(&b);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int write_path(const sm_model *m, const char *path);

int sx_write_path(const sm_model *m, const char *path)
{
    xfsz_guard g;
    xfsz_block(&g);
    int rc = write_path(m, path);
    xfsz_restore(&g);
    return rc;
}

static int write_path(const sm_model *m, const char *path)
{
    /* Longest extensions first, so x.instances.csv is not taken for x.csv. */
    static const size_t order[] = {4, 2, 5, 0, 1, 3, 6};
    for (size_t i = 0; i < N_FORMATS; i++) {
        size_t f = order[i];
        if (ends_with(path, g_formats[f].ext))
            return write_one(m, path, f);
    }
    if (ends_with(path, ".json.gz"))
        return write_one(m, path, 4);
    return sonde__fail(SONDE_EINVAL,
                       "%s: unknown report format (use .json, .csv, .instances.csv, .txt, "
                       ".samples.csv, .html or .trace.json.gz)", path);
}
