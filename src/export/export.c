/* export.c - the table of formats (extension, mask bit, writer) and the writing of report files
 * through a temporary name, gzip for the trace. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../analyze/analyze.h"
#include "../config/keys.h"
#include "../util/error.h"
#include "../util/fileio.h"
#include "../format/formats.h"
#include "export.h"
#include "../util/alloc.h"

typedef int (*sx_text_fn)(sx_report *, sbuf *);

void sx_report_init(sx_report *r, const sm_model *m)
{
    r->m = m;
    sm_config(m, &r->cfg);
    r->an = NULL;
}

const sa_report *sx_analysis(sx_report *r)
{
    if (r->an)
        return r->an;
    sa_report *an = sonde__calloc(1, sizeof *an);
    if (!an || sa_analyze(r->m, r->cfg.bottleneck_threshold, an) != 0) {
        sonde__free(an);
        return NULL;
    }
    return r->an = an;
}

int sx_alone(const sm_model *m, sbuf *b, int (*fn)(sx_report *, sbuf *))
{
    sx_report r;
    sx_report_init(&r, m);
    int rc = fn(&r, b);
    sx_report_free(&r);
    return rc;
}

void sx_report_free(sx_report *r)
{
    if (r->an) {
        sa_free(r->an);
        sonde__free(r->an);
        r->an = NULL;
    }
}

/* The formats without the analysis, in the table's form. */
static int csv_report(sx_report *r, sbuf *b) { return sx_csv(r->m, b); }
static int samples_report(sx_report *r, sbuf *b) { return sx_csv_samples(r->m, b); }

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

static int write_trace_gz_opts(const sm_model *m, const char *path, const sx_trace_opts *o)
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
    int rc = sx_trace_part(m, o, gz_sink, gz);
    if (gzclose(gz) != Z_OK)
        rc = -1;
    if (rc) {
        afile_abort(&af);
        errno = EIO;
        return -1;
    }
    return afile_commit(&af, 0);
}

static int write_trace_gz_range(const sm_model *m, const char *path, int64_t t0, int64_t t1)
{
    sx_trace_opts o = {t0, t1, 0, 0, NULL, -1, 1, 1, 0, 0, 1};
    return write_trace_gz_opts(m, path, &o);
}

static int write_trace_gz(const sm_model *m, const char *path)
{
    return write_trace_gz_range(m, path, INT64_MIN, INT64_MAX);
}

/* TensorBoard's trace: one file per window of the step schedule when there are several, as
 * torch's tensorboard_trace_handler writes one per cycle (HOST_PID.cycleN.pt.trace.json.gz). */
static int write_tensorboard_gz(const sm_model *m, const char *path)
{
    sx_trace_opts o = {INT64_MIN, INT64_MAX, 0, 0, NULL, -1, 1, 1, 0, 1, 0};
    static const char ext[] = ".pt.trace.json.gz";
    size_t n = strlen(path), e = sizeof ext - 1;
    if (m->n_windows < 2 || n < e || strcmp(path + n - e, ext))
        return write_trace_gz_opts(m, path, &o);
    for (size_t i = 0; i < m->n_windows; i++) {
        char *one = NULL;
        if (sonde__asprintf(&one, "%.*s.cycle%d%s", (int)(n - e), path, m->windows[i].cycle,
                            ext) < 0) {
            errno = ENOMEM;
            return -1;
        }
        o.t0 = m->windows[i].start_ns;
        o.t1 = m->windows[i].end_ns;
        int rc = write_trace_gz_opts(m, one, &o);
        sonde__free(one);
        if (rc)
            return rc;
    }
    return 0;
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

static int fd_sink(void *ctx, const char *data, size_t n)
{
    return write_all(*(int *)ctx, data, n);
}

int sx_drain(sbuf *b, sx_sink sink, void *ctx, size_t at)
{
    if (b->oom)
        return -1;
    if (!b->len || b->len < at)
        return 0;
    int rc = sink(ctx, b->data, b->len) != 0 ? -1 : 0;
    sbuf_reset(b);
    return rc;
}

typedef int (*sx_stream_fn)(const sm_model *, sx_sink, void *);

/* A format written as it is made (NAME.instances.csv, NAME.pftrace, NAME.folded, NAME.pb.gz),
 * straight to the file. */
static int write_stream(const sm_model *m, const char *path, sx_stream_fn fn)
{
    afile af;
    if (afile_open(&af, path) != 0)
        return -1;
    errno = 0;
    if (fn(m, fd_sink, &af.fd) != 0) {
        int e = errno ? errno : EIO; /* ENOMEM, or the write's: ENOSPC, EFBIG, EIO */
        afile_abort(&af);
        errno = e;
        return -1;
    }
    return afile_commit(&af, 0);
}

static int write_text(sx_report *r, const char *path, sx_text_fn fn)
{
    sbuf b;
    sbuf_init(&b);
    if (fn(r, &b) != 0) {
        sbuf_free(&b);
        errno = ENOMEM;
        return -1;
    }
    int rc = write_file_atomic(path, b.data ? b.data : "", b.len);
    sbuf_free(&b);
    return rc;
}

/* One row per file a format writes, from the one list (format/formats.h): made in memory
 * (text), written as it is made (stream), or a gzip trace (neither), TensorBoard's in its own
 * directory (sx_tensorboard_path). */
enum { FMT_TEXT, FMT_STREAM, FMT_FILE, FMT_TRACE, FMT_TENSORBOARD };
static const struct {
    unsigned bit;
    const char *ext;
    sx_text_fn text;
    sx_stream_fn stream;
    int (*file)(const sm_model *m, const char *path); /* 0 or a SONDE_E* code, said */
    int tensorboard;
} g_formats[] = {
#define FMT_WRITER_TEXT(w) w, NULL, NULL
#define FMT_WRITER_STREAM(w) NULL, w, NULL
#define FMT_WRITER_FILE(w) NULL, NULL, w
#define FMT_WRITER_TRACE(w) NULL, NULL, NULL
#define FMT_WRITER_TENSORBOARD(w) NULL, NULL, NULL
#define FORMAT_ROW(name, bit, ext, kind, writer)                                               \
    {bit, ext, FMT_WRITER_##kind(writer), FMT_##kind == FMT_TENSORBOARD},
    SONDE__FORMATS_ROWS(FORMAT_ROW)
#undef FORMAT_ROW
};
#define N_FORMATS (sizeof g_formats / sizeof g_formats[0])

static int write_one(sx_report *rep, const char *path, size_t f)
{
    const sm_model *m = rep->m;
    if (g_formats[f].file)
        return g_formats[f].file(m, path);
    int rc = g_formats[f].text          ? write_text(rep, path, g_formats[f].text)
             : g_formats[f].stream      ? write_stream(m, path, g_formats[f].stream)
             : g_formats[f].tensorboard ? write_tensorboard_gz(m, path)
                                        : write_trace_gz(m, path);
    if (rc)
        return sonde__fail(errno == ENOMEM ? SONDE_ENOMEM : SONDE_EIO, "cannot write %s: %s", path,
                           strerror(errno));
    return 0;
}

static int write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats);

/* csv brings NAME.instances.csv for a run of at most SONDE_INSTANCES_CSV_AUTO sections
 * (beyond, `instances` asks for it). */
static unsigned with_instances(unsigned formats, uint64_t sections)
{
    return (formats & SONDE_FORMAT_CSV) && sections <= SONDE_INSTANCES_CSV_AUTO
               ? formats | SONDE_FORMAT_INSTANCES
               : formats;
}

/* The formats a run has something to write in: the CPU samples' only when there are some, so
 * `formats: all` leaves no empty NAME.folded or NAME.pb.gz, the off-CPU periods' only when
 * they were followed; and the instances CSV as with_instances says. */
static unsigned writable(const sm_model *m, unsigned formats)
{
    formats = with_instances(formats, sm_sections(m));
    if (!m->profile.off_followed)
        formats &= ~SONDE_FORMAT_OFFCPU;
    return m->profile.samples ? formats : formats & ~(SONDE_FORMAT_FOLDED | SONDE_FORMAT_PPROF);
}

int sx_write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats)
{
    return sx_write_formats_early(m, dir, name, formats, NULL);
}

unsigned sx_run_formats(const sm_model *m)
{
    const char *run = sm_info(m, "config.formats");
    unsigned f = 0;
    if (!run || sonde__parse_formats("config.formats", run, &f) || !f)
        f = SONDE_FORMAT_REPORTS;
    return f;
}

static size_t row_of_bit(unsigned bit);
static char *format_path(const sm_model *m, const char *dir, const char *name, size_t f);

/* sm_feed.want of sx_read_file: once the first pass has found more sections than the model
 * holds, the instances CSV is begun when the formats write it (with_instances, from the first
 * pass's count), and fed every section as it closes. */
static int early_want(void *ctx, const sm_model *m, uint64_t sections)
{
    sx_early *e = ctx;
    unsigned f = with_instances(e->formats ? e->formats : sx_run_formats(m), sections);
    if (!(f & SONDE_FORMAT_INSTANCES))
        return 0;
    char *path = format_path(m, e->dir, e->name ? e->name : m->name,
                             row_of_bit(SONDE_FORMAT_INSTANCES));
    /* where it cannot be begun here, sx_write_formats_early writes it as before and says why */
    int ok = path && mkdir_p(e->dir) == 0 && afile_open(&e->af, path) == 0;
    sonde__free(path);
    if (!ok)
        return 0;
    e->open = 1;
    sx_rows_begin(&e->rows, fd_sink, &e->af.fd);
    return 1;
}

static int early_row(void *ctx, const sm_model *m, const sm_span *s)
{
    sx_early *e = ctx;
    if (e->err) /* the file failed: the reading goes on for the other reports */
        return 0;
    errno = 0; /* a failed write sets it; out of memory may not */
    if (sx_rows_add(&e->rows, m, s) != 0)
        e->err = errno ? errno : ENOMEM;
    return 0;
}

void sx_early_drop(sx_early *e)
{
    if (!e || !e->open)
        return;
    e->open = 0;
    sx_rows_end(&e->rows);
    afile_abort(&e->af);
}

int sx_read_file(const char *path, const sm_kv *set, size_t n_set, sx_early *e, sm_model *m)
{
    const sm_feed feed = {early_want, early_row, e};
    e->open = e->err = 0;
    xfsz_guard g; /* the early rows are written while the file is read */
    xfsz_block(&g);
    int rc = sm_read_file_fed(path, set, n_set, &feed, m);
    xfsz_restore(&g);
    if (rc)
        sx_early_drop(e);
    return rc;
}

int sx_write_formats_early(const sm_model *m, const char *dir, const char *name,
                           unsigned formats, sx_early *e)
{
    xfsz_guard g; /* a file-size limit makes a report fail, never the host */
    xfsz_block(&g);
    unsigned w = writable(m, formats);
    int rc = 0;
    if (e && e->open && !(w & SONDE_FORMAT_INSTANCES)) {
        sx_early_drop(e);
    } else if (e && e->open) {
        e->open = 0;
        w &= ~SONDE_FORMAT_INSTANCES;
        char *where = sonde__strdup(e->af.path);
        errno = 0;
        int bad = sx_rows_end(&e->rows) != 0 || e->err;
        if (bad) { /* a row's write failed as the file was read, the last rows', or memory */
            int err = e->err ? e->err : errno ? errno : ENOMEM;
            afile_abort(&e->af);
            errno = err;
        } else {
            bad = afile_commit(&e->af, 0) != 0;
        }
        if (bad)
            rc = sonde__fail(errno == ENOMEM ? SONDE_ENOMEM : SONDE_EIO, "cannot write %s: %s",
                             where ? where : "the instances CSV", strerror(errno));
        sonde__free(where);
    }
    int r = write_formats(m, dir, name, w);
    xfsz_restore(&g);
    return rc ? rc : r;
}

/* Where row f of the table writes: DIR/NAME.ext, or TensorBoard's own place. Allocated; NULL
 * when out of memory. */
static char *format_path(const sm_model *m, const char *dir, const char *name, size_t f)
{
    if (g_formats[f].tensorboard)
        return sx_tensorboard_path(m, dir, name);
    char *path = NULL;
    if (sonde__asprintf(&path, "%s%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
                        name, g_formats[f].ext) < 0)
        return NULL;
    return path;
}

int sx_each_path(const sm_model *m, const char *dir, const char *name, unsigned formats,
                 void (*fn)(const char *path, void *ctx), void *ctx)
{
    formats = writable(m, formats);
    for (size_t f = 0; f < N_FORMATS; f++) {
        if (!(formats & g_formats[f].bit))
            continue;
        char *path = format_path(m, dir, name, f);
        if (!path)
            return sonde__fail(SONDE_ENOMEM, "out of memory");
        fn(path, ctx);
        sonde__free(path);
    }
    return 0;
}

/* One file of a write: its format's row, its path, and how its writing ended (rc, and the
 * error's text: the last error is its writing thread's). */
typedef struct wfile {
    size_t f;
    char *path;
    int rc;
    char err[512];
} wfile;

/* The files written from the model alone (no text format: the trace, the .pftrace, the
 * streams), which any of the write's threads may take, the next untaken each time. */
typedef struct wpool {
    sx_report *rep;
    wfile *files;
    size_t apart[N_FORMATS];
    size_t n_apart;
    _Atomic size_t next;
} wpool;

static void write_file(sx_report *rep, wfile *w)
{
    w->rc = write_one(rep, w->path, w->f);
    if (w->rc)
        snprintf(w->err, sizeof w->err, "%s", sonde_last_error());
}

static void *write_apart(void *arg)
{
    wpool *p = arg;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n_apart;)
        write_file(p->rep, &p->files[p->apart[i]]);
    return NULL;
}

/* The threads besides the calling one that write n_apart files apart from n_text text ones:
 * one a CPU more (sm_report_threads), no more than there are files apart for them (one is the
 * calling thread's where it has no text file to write). */
static int helpers_for(size_t n_apart, size_t n_text)
{
    int helpers = sm_report_threads(NULL) - 1;
    size_t most = n_apart - (n_text ? 0 : n_apart > 0);
    return (size_t)helpers > most ? (int)most : helpers;
}

int sx_write_threads(unsigned formats)
{
    size_t n_apart = 0, n_text = 0;
    for (size_t f = 0; f < N_FORMATS; f++)
        if (formats & g_formats[f].bit)
            *(g_formats[f].text ? &n_text : &n_apart) += 1;
    return 1 + helpers_for(n_apart, n_text);
}

/* The formats' files: the text ones (which share the report context and its analysis) on this
 * thread, in turn; the others taken by this thread and by the helpers (helpers_for), each
 * writing a file of its own from the model, which none changes. The
 * failures are told in the formats' order, as writing them in turn tells them: the code of the
 * first, the text of the last. */
static int write_formats(const sm_model *m, const char *dir, const char *name, unsigned formats)
{
    if (formats && mkdir_p(dir) != 0)
        return sonde__fail(SONDE_EIO, "cannot create %s: %s", dir, mkdir_p_error(errno));
    wfile files[N_FORMATS];
    wpool p = {.files = files};
    size_t n = 0, n_text = 0;
    int rc = 0;
    for (size_t f = 0; f < N_FORMATS; f++) {
        if (!(formats & g_formats[f].bit))
            continue;
        wfile *w = &files[n];
        *w = (wfile){.f = f, .path = format_path(m, dir, name, f)};
        if (!w->path) {
            rc = sonde__fail(SONDE_ENOMEM, "out of memory");
            goto out;
        }
        n++;
        if (g_formats[f].tensorboard) { /* plugins/profile/RUN/ under dir, no symlink
                                                   followed */
            char *slash = strrchr(w->path, '/');
            *slash = 0;
            if (mkdir_beneath(dir, w->path + strlen(dir)) != 0) {
                w->rc = sonde__fail(SONDE_EIO, "cannot create %s: %s%s", w->path,
                                    strerror(errno),
                                    errno == ELOOP ? " (a symlink on the way; not followed)" : "");
                snprintf(w->err, sizeof w->err, "%s", sonde_last_error());
            }
            *slash = '/';
            if (w->rc)
                continue;
        }
        if (g_formats[f].text)
            n_text++;
        else
            p.apart[p.n_apart++] = n - 1;
    }
    sx_report rep; /* one configuration and one analysis for every file */
    sx_report_init(&rep, m);
    p.rep = &rep;
    int helpers = helpers_for(p.n_apart, n_text);
    pthread_t th[SM_REPORT_THREADS_MAX];
    int started = 0;
    for (; started < helpers; started++)
        if (pthread_create(&th[started], NULL, write_apart, &p) != 0)
            break; /* no thread to be had: this one writes what is left */
    for (size_t i = 0; i < n; i++)
        if (g_formats[files[i].f].text && !files[i].rc)
            write_file(&rep, &files[i]);
    write_apart(&p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    sx_report_free(&rep);
    for (size_t i = 0; i < n; i++)
        if (files[i].rc) {
            int r = sonde__fail(files[i].rc, "%s", files[i].err);
            if (!rc)
                rc = r;
        }
out:
    for (size_t i = 0; i < n; i++)
        sonde__free(files[i].path);
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

char *sx_tensorboard_path(const sm_model *m, const char *dir, const char *name)
{
    /* The ranks of a job are workers of one run: NAME-rankN -> run NAME, as torch's
     * tensorboard_trace_handler writes every rank into one directory. */
    size_t run_len = strlen(name);
    if (m->rank >= 0 && m->world_size > 1) {
        char suffix[32];
        int k = snprintf(suffix, sizeof suffix, "-rank%d", m->rank);
        const char *at = strstr(name, suffix);
        if (at && (at[k] == 0 || at[k] == '-'))
            run_len = (size_t)(at - name);
    }
    /* The worker is HOST_PID, the name torch gives it, in characters safe in a file name. */
    const char *host = sm_info(m, "system.hostname") ? sm_info(m, "system.hostname") : m->host;
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "%s%splugins/profile/%.*s/", dir,
                dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", (int)run_len, name);
    for (const char *c = host && *host ? host : "host"; *c; c++)
        sbuf_putc(&b, (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                              (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'
                          ? *c
                          : '-');
    sbuf_printf(&b, "_%d.pt.trace.json.gz", m->pid > 0 ? m->pid : 0);
    if (b.oom) {
        sbuf_free(&b);
        return NULL;
    }
    return b.data;
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

/* The row of the table a path names: the longest extension it ends with (x.instances.csv is
 * not x.csv), or SIZE_MAX. */
static size_t row_of_path(const char *path)
{
    size_t best = SIZE_MAX;
    for (size_t f = 0; f < N_FORMATS; f++)
        if (ends_with(path, g_formats[f].ext) &&
            (best == SIZE_MAX || strlen(g_formats[f].ext) > strlen(g_formats[best].ext)))
            best = f;
    return best;
}

static size_t row_of_bit(unsigned bit)
{
    for (size_t f = 0; f < N_FORMATS; f++)
        if (g_formats[f].bit == bit)
            return f;
    return SIZE_MAX;
}

static int write_path(const sm_model *m, const char *path)
{
    size_t f = row_of_path(path);
    if (f == SIZE_MAX && ends_with(path, ".json.gz")) /* any other gzipped JSON: the trace */
        f = row_of_bit(SONDE_FORMAT_TRACE);
    if (f != SIZE_MAX) {
        sx_report rep;
        sx_report_init(&rep, m);
        int rc = write_one(&rep, path, f);
        sx_report_free(&rep);
        return rc;
    }
    sbuf exts;
    sbuf_init(&exts);
    for (size_t i = 0; i < N_FORMATS; i++)
        sbuf_printf(&exts, "%s%s", i ? (i + 1 < N_FORMATS ? ", " : " or ") : "", g_formats[i].ext);
    int rc = sonde__fail(SONDE_EINVAL, "%s: unknown report format (use %s)", path,
                         exts.oom ? "a report's extension" : exts.data);
    sbuf_free(&exts);
    return rc;
}

/* the durations only: a count is no column of seconds */
#define TABLE_U64(table) 0
#define TABLE_F64(table) table
#define STAT_COL(f, kind, label, table, q) {label, offsetof(sm_stat, f), TABLE_##kind(table)},
const sx_stat_col sx_stat_cols[] = {SONDE_SECTION_STATS(STAT_COL)};
#undef STAT_COL
#undef TABLE_F64
#undef TABLE_U64
const size_t sx_n_stat_cols = sizeof sx_stat_cols / sizeof sx_stat_cols[0];

double sx_stat_col_s(const sm_stat *s, const sx_stat_col *c)
{
    double v;
    memcpy(&v, (const char *)s + c->off, sizeof v);
    return v;
}
