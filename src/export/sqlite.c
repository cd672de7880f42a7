/* sqlite.c - NAME.sqlite: a run as SQL tables (docs/formats.md, "NAME.sqlite": the schema, its
 * version and example queries), and `sonde merge --format sqlite`'s one database of many runs.
 * libsqlite3 is loaded when a database is first written (libsqlite3.so.0, or the library at
 * SONDE_SQLITE_LIBRARY), so that neither libsonde nor the Python extension needs its headers or
 * links it. Every section goes in, held or folded (sm_each_section: the file read again where the
 * model holds only some), through prepared statements in one transaction: memory beyond the
 * model stays SQLite's page cache and this file's nesting stack, whatever the run's size. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/dlopen.h"
#include "../util/error.h"
#include "../util/sort.h"
#include "../util/strmap.h"
#include "export.h"

#define SX_SQLITE_SCHEMA 1

/* ---- libsqlite3, loaded at run time ---------------------------------------------------- */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
enum {
    SQ_OK = 0,
    SQ_ROW = 100,
    SQ_DONE = 101,
    SQ_OPEN_READWRITE = 2,
    SQ_OPEN_CREATE = 4,
    SQ_OPEN_NOMUTEX = 0x8000 /* a connection of one thread: no lock per call */
};
#define SQ_TRANSIENT ((void (*)(void *))-1)

static struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close)(sqlite3 *);
    int (*exec)(sqlite3 *, const char *, void *, void *, char **);
    void (*free)(void *);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_null)(sqlite3_stmt *, int);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    const char *(*errmsg)(sqlite3 *);
    long long (*column_int64)(sqlite3_stmt *, int);
    long long (*last_insert_rowid)(sqlite3 *);
    const char *(*libversion)(void);
} sq;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_load_error[320]; /* "" once loaded */

static void load(void)
{
    static const char *const names[] = {"libsqlite3.so.0", "libsqlite3.so"};
    const char *tried;
    void *lib = sonde__dlopen_any("SONDE_SQLITE_LIBRARY", names, 2, &tried, g_load_error,
                                  sizeof g_load_error);
    if (!lib)
        return;
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(f) {"sqlite3_" #f, offsetof(__typeof__(sq), f)}
        SYM(open_v2),    SYM(close),  SYM(exec),  SYM(free),       SYM(prepare_v2),
        SYM(bind_int64), SYM(bind_double), SYM(bind_text), SYM(bind_null), SYM(step),
        SYM(reset),      SYM(finalize), SYM(errmsg), SYM(column_int64), SYM(libversion),
        SYM(last_insert_rowid),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(lib, syms[i].name);
        if (!f) {
            snprintf(g_load_error, sizeof g_load_error, "%s has no %s", tried, syms[i].name);
            return;
        }
        memcpy((char *)&sq + syms[i].off, &f, sizeof f);
    }
    g_load_error[0] = 0;
}

/* ---- the schema ------------------------------------------------------------------------ */
/* Times are integer nanoseconds from the run's start (runs.align_ns puts a run on a merged
 * database's one time axis); ids are the database's. */
static const char g_schema[] =
    "PRAGMA user_version = 1;"
    "CREATE TABLE sonde_schema(version INTEGER NOT NULL, sonde_version TEXT);"
    "CREATE TABLE runs(run_id INTEGER PRIMARY KEY, name TEXT, rank INTEGER, world_size "
    "INTEGER, label TEXT, host TEXT, pid INTEGER, parent_pid INTEGER, program TEXT, cmdline "
    "TEXT, boot_id TEXT, start_unix_ns INTEGER, start_mono_ns INTEGER, duration_ns INTEGER, "
    "align_ns INTEGER, clean_end INTEGER, dropped_events INTEGER, sections INTEGER, unit TEXT, "
    "sonde_version TEXT, file TEXT);"
    "CREATE TABLE info(run_id INTEGER, key TEXT, value TEXT);"
    "CREATE TABLE names(name_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
    "CREATE TABLE threads(run_id INTEGER, thread INTEGER, tid INTEGER, pid INTEGER, name TEXT, "
    "sections INTEGER, PRIMARY KEY(run_id, thread));"
    "CREATE TABLE sessions(run_id INTEGER, session INTEGER, name_id INTEGER, thread INTEGER, "
    "start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, units REAL, flops REAL, metadata TEXT, "
    "PRIMARY KEY(run_id, session));"
    "CREATE TABLE steps(run_id INTEGER, step INTEGER, thread INTEGER, start_ns INTEGER, "
    "end_ns INTEGER, dur_ns INTEGER, active INTEGER);"
    "CREATE TABLE sections(id INTEGER PRIMARY KEY, run_id INTEGER, thread INTEGER, name_id "
    "INTEGER, depth INTEGER, parent INTEGER, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, "
    "session INTEGER, step INTEGER, units REAL, flops REAL, flags TEXT, metadata TEXT);"
    "CREATE TABLE instants(run_id INTEGER, thread INTEGER, name_id INTEGER, t_ns INTEGER, "
    "step INTEGER, args TEXT);"
    "CREATE TABLE counters(run_id INTEGER, name TEXT, unit TEXT, source TEXT, t_ns INTEGER, "
    "value REAL);"
    "CREATE TABLE operators(id INTEGER PRIMARY KEY, run_id INTEGER, thread INTEGER, name TEXT, "
    "shapes TEXT, parent INTEGER, section INTEGER, depth INTEGER, start_ns INTEGER, end_ns "
    "INTEGER, dur_ns INTEGER, self_ns INTEGER, flops REAL, device_ns INTEGER, device_total_ns "
    "INTEGER, host_bytes INTEGER, device_bytes INTEGER, correlation INTEGER);"
    "CREATE TABLE gpu(id INTEGER PRIMARY KEY, run_id INTEGER, kind TEXT, device INTEGER, "
    "stream INTEGER, name TEXT, start_ns INTEGER, end_ns INTEGER, dur_ns INTEGER, bytes "
    "INTEGER, copy_kind TEXT, correlation INTEGER, grid TEXT, block TEXT, launch_ns INTEGER, "
    "launch_thread INTEGER, section INTEGER);"
    "CREATE TABLE frames(run_id INTEGER, frame INTEGER, name TEXT, object TEXT, file TEXT, "
    "line INTEGER, python INTEGER, PRIMARY KEY(run_id, frame));"
    "CREATE TABLE stacks(run_id INTEGER, stack INTEGER, frame INTEGER, parent INTEGER, "
    "python_frame INTEGER, PRIMARY KEY(run_id, stack));"
    "CREATE TABLE samples(run_id INTEGER, t_ns INTEGER, tid INTEGER, pid INTEGER, thread "
    "INTEGER, stack INTEGER);";

/* Made once every run is in: the common queries' ways in (docs/formats.md). The sections' own
 * ones come first, since operators and GPU work find their section through them. */
static const char g_section_index[] =
    "CREATE INDEX IF NOT EXISTS sections_at ON sections(run_id, thread, start_ns);";
static const char g_indexes[] =
    "CREATE INDEX sections_name ON sections(name_id, run_id);"
    "CREATE INDEX sections_step ON sections(run_id, step);"
    "CREATE INDEX sections_parent ON sections(parent);"
    "CREATE INDEX steps_step ON steps(run_id, step);"
    "CREATE INDEX instants_t ON instants(run_id, t_ns);"
    "CREATE INDEX counters_name ON counters(name, run_id, t_ns);"
    "CREATE INDEX operators_section ON operators(section);"
    "CREATE INDEX gpu_section ON gpu(section);"
    "CREATE INDEX gpu_t ON gpu(run_id, device, stream, start_ns);"
    "CREATE INDEX samples_t ON samples(run_id, t_ns);";

/* The statements, each prepared once per database. */
#define SX_STATEMENTS(X)                                                                       \
    X(RUN, "INSERT INTO runs VALUES(NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")              \
    X(INFO, "INSERT INTO info VALUES(?,?,?)")                                                  \
    X(NAME, "INSERT INTO names VALUES(?,?)")                                                   \
    X(THREAD, "INSERT INTO threads VALUES(?,?,?,?,?,?)")                                       \
    X(SESSION, "INSERT INTO sessions VALUES(?,?,?,?,?,?,?,?,?,?)")                             \
    X(STEP, "INSERT INTO steps VALUES(?,?,?,?,?,?,?)")                                         \
    X(SECTION, "INSERT INTO sections VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")                   \
    X(PARENT, "UPDATE sections SET parent = ?1 WHERE id BETWEEN ?2 AND ?3 AND depth = ?4")     \
    X(FIND, "SELECT id FROM sections WHERE run_id = ? AND thread = ? AND start_ns = ? "        \
            "AND depth = ? LIMIT 1")                                                           \
    X(INSTANT, "INSERT INTO instants VALUES(?,?,?,?,?,?)")                                     \
    X(COUNTER, "INSERT INTO counters VALUES(?,?,?,?,?,?)")                                     \
    X(OP, "INSERT INTO operators VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")                  \
    X(GPU, "INSERT INTO gpu VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")                         \
    X(FRAME, "INSERT INTO frames VALUES(?,?,?,?,?,?,?)")                                       \
    X(STACK, "INSERT INTO stacks VALUES(?,?,?,?,?)")                                           \
    X(SAMPLE, "INSERT INTO samples VALUES(?,?,?,?,?,?)")
#define STMT_ENUM(name, sql) ST_##name,
enum { SX_STATEMENTS(STMT_ENUM) ST_COUNT };
#undef STMT_ENUM

/* Where a section's nesting is found as the sections come in the order they ended (a run whose
 * model folds sections, read again): the ids since which every section of the thread is nested
 * in the next to end at a lower depth. At most one entry a depth. */
typedef struct sx_step_at {
    int64_t end, start, number;
} sx_step_at;

typedef struct nest {
    uint32_t depth;
    int64_t first;
} nest;

struct sx_db {
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    char *path;
    strmap names;
    int64_t n_names;
    int64_t next_section, next_op, next_gpu;
    /* the run being added */
    const sm_model *run;
    int64_t run_id, first_section;
    int by_end;                /* its sections come in the order they ended (sm_each_section) */
    int64_t sections_in;
    int64_t *name_of_site;     /* names.name_id of a site of the model handing sections, 0: not
                                  looked up yet */
    size_t n_name_of_site;
    const sm_model *sites_of;
    uint32_t nest_thread;
    nest *nest;
    size_t n_nest, cap_nest;
    sx_step_at *steps;         /* the run's steps by their ends */
    size_t n_steps;
    sbuf json;
    int failed;                /* a SONDE_E* code once something failed (said), else 0 */
};

static int db_fail(sx_db *d, const char *what)
{
    if (!d->failed)
        d->failed = sonde__fail(SONDE_EIO, "cannot write %s: %s: %s", d->path, what,
                                d->db ? sq.errmsg(d->db) : "no database");
    return -1;
}

static int oom(sx_db *d)
{
    if (!d->failed)
        d->failed = sonde__fail(SONDE_ENOMEM, "out of memory writing %s", d->path);
    return -1;
}

/* Runs statement k (its values bound), then resets it. 0, or -1 (the failure said). */
static int run_stmt(sx_db *d, int k)
{
    int rc = sq.step(d->st[k]);
    sq.reset(d->st[k]);
    return rc == SQ_DONE || rc == SQ_ROW ? 0 : db_fail(d, "a row");
}

static void bind_i(sx_db *d, int k, int col, int64_t v) { sq.bind_int64(d->st[k], col, v); }
static void bind_f(sx_db *d, int k, int col, double v) { sq.bind_double(d->st[k], col, v); }
static void bind_s(sx_db *d, int k, int col, const char *s)
{
    if (s)
        sq.bind_text(d->st[k], col, s, -1, SQ_TRANSIENT);
    else
        sq.bind_null(d->st[k], col);
}
/* An index into the run's own numbering, NULL when < 0. */
static void bind_ref(sx_db *d, int k, int col, int64_t v)
{
    if (v < 0)
        sq.bind_null(d->st[k], col);
    else
        sq.bind_int64(d->st[k], col, v);
}

static int exec(sx_db *d, const char *sql)
{
    char *err = NULL;
    if (sq.exec(d->db, sql, NULL, NULL, &err) == SQ_OK)
        return 0;
    if (!d->failed)
        d->failed = sonde__fail(SONDE_EIO, "cannot write %s: %s", d->path, err ? err : "?");
    sq.free(err);
    return -1;
}

/* The names.name_id of text, adding it. -1 on failure. */
static int64_t name_id(sx_db *d, const char *text)
{
    int k = strmap_get(&d->names, text);
    if (k >= 0)
        return k;
    if (d->n_names >= INT32_MAX || strmap_put(&d->names, text, (int)(d->n_names + 1)))
        return oom(d);
    int64_t id = ++d->n_names;
    bind_i(d, ST_NAME, 1, id);
    bind_s(d, ST_NAME, 2, text);
    return run_stmt(d, ST_NAME) ? -1 : id;
}

/* The name_id of site id of m (the model that hands sections may be one of its own). */
static int64_t site_name(sx_db *d, const sm_model *m, uint32_t site)
{
    if (d->sites_of != m) {
        if (d->n_name_of_site) /* (never memset's NULL: none allocated yet) */
            memset(d->name_of_site, 0, d->n_name_of_site * sizeof *d->name_of_site);
        d->sites_of = m;
    }
    if (site >= d->n_name_of_site) {
        size_t n = m->n_sites > site ? m->n_sites : (size_t)site + 1;
        int64_t *g = sonde__realloc(d->name_of_site, n * sizeof *g);
        if (!g)
            return oom(d);
        memset(g + d->n_name_of_site, 0, (n - d->n_name_of_site) * sizeof *g);
        d->name_of_site = g;
        d->n_name_of_site = n;
    }
    if (!d->name_of_site[site])
        d->name_of_site[site] = name_id(d, sm_str(m, site));
    return d->name_of_site[site];
}

/* Key/value pairs (an sm_meta list) as a JSON object in d->json; NULL when there are none. */
static void meta_pair(const char *key, const char *value, void *ctx)
{
    sbuf *b = ctx;
    sbuf_putc(b, b->len ? ',' : '{');
    sbuf_json_str(b, key);
    sbuf_putc(b, ':');
    sbuf_json_str(b, value);
}
static const char *meta_json(sx_db *d, const sm_model *m, int32_t head)
{
    sbuf_reset(&d->json);
    if (head < 0)
        return NULL;
    sm_each_meta(m, head, meta_pair, &d->json);
    if (!d->json.len)
        return NULL;
    sbuf_putc(&d->json, '}');
    if (d->json.oom) {
        oom(d);
        return NULL;
    }
    return d->json.data;
}

/* The number of the run's step whose time holds t (its start included, its end not); -1. */
static int64_t step_at(const sx_db *d, int64_t t)
{
    size_t lo = 0, hi = d->n_steps;
    while (lo < hi) { /* the first step that ends after t */
        size_t mid = lo + (hi - lo) / 2;
        if (d->steps[mid].end > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < d->n_steps && d->steps[lo].start <= t ? d->steps[lo].number : -1;
}

/* ---- sections -------------------------------------------------------------------------- */
static const char *span_flags(const sm_span *s)
{
    return s->flags & SM_SPAN_END_LOST          ? "end_lost"
           : s->flags & SM_SPAN_UNTERMINATED    ? "unterminated"
           : s->flags & SM_SPAN_CLOSED_BY_OUTER ? "closed_by_outer"
                                                : NULL;
}

/* In the order they ended, a thread's sections that end before one at a lower depth are nested
 * in it: when section id (depth depth) comes, those since the first id of every entry deeper
 * than it are its own, and its direct children are those one deeper among them. */
static int link_by_end(sx_db *d, uint32_t thread, uint32_t depth, int64_t id)
{
    if (thread != d->nest_thread)
        d->n_nest = 0;
    d->nest_thread = thread;
    int64_t first = id;
    while (d->n_nest && d->nest[d->n_nest - 1].depth > depth)
        first = d->nest[--d->n_nest].first;
    if (first < id) {
        bind_i(d, ST_PARENT, 1, id);
        bind_i(d, ST_PARENT, 2, first);
        bind_i(d, ST_PARENT, 3, id - 1);
        bind_i(d, ST_PARENT, 4, (int64_t)depth + 1);
        if (run_stmt(d, ST_PARENT))
            return -1;
    }
    if (d->n_nest && d->nest[d->n_nest - 1].depth == depth)
        return 0; /* a sibling's entry: its first id is the earlier */
    if (SONDE_GROW(d->nest, d->n_nest, d->cap_nest))
        return oom(d);
    d->nest[d->n_nest++] = (nest){depth, first};
    return 0;
}

static int add_section(void *ctx, const sm_model *m, const sm_span *s)
{
    sx_db *d = ctx;
    if (d->failed)
        return -1;
    int64_t id = d->next_section++;
    int64_t name = site_name(d, m, s->site);
    const sm_span_x *x = sm_span_extra(m, s);
    const char *meta = meta_json(d, m, x->meta);
    if (name < 0 || d->failed)
        return -1;
    int k = ST_SECTION;
    bind_i(d, k, 1, id);
    bind_i(d, k, 2, d->run_id);
    bind_i(d, k, 3, m->threads[s->thread].index);
    bind_i(d, k, 4, name);
    bind_i(d, k, 5, s->depth);
    bind_ref(d, k, 6, d->by_end || s->parent < 0 ? -1 : d->first_section + s->parent);
    bind_i(d, k, 7, s->start_ns);
    bind_i(d, k, 8, s->end_ns);
    bind_i(d, k, 9, s->end_ns - s->start_ns);
    bind_ref(d, k, 10, s->session);
    bind_ref(d, k, 11, step_at(d, s->start_ns));
    bind_f(d, k, 12, x->units);
    bind_f(d, k, 13, x->flops);
    bind_s(d, k, 14, span_flags(s));
    bind_s(d, k, 15, meta);
    if (run_stmt(d, k))
        return -1;
    d->sections_in++;
    return d->by_end ? link_by_end(d, m->threads[s->thread].index, s->depth, id) : 0;
}

/* The database id of span i of the run's model: by its place where every section is held (and
 * went in in the model's order), else found by its thread, start and depth. -1: none. */
static int64_t section_id(sx_db *d, int32_t i)
{
    if (i < 0 || (size_t)i >= d->run->n_spans)
        return -1;
    if (!d->by_end)
        return d->first_section + i;
    const sm_span *s = &d->run->spans[i];
    bind_i(d, ST_FIND, 1, d->run_id);
    bind_i(d, ST_FIND, 2, d->run->threads[s->thread].index);
    bind_i(d, ST_FIND, 3, s->start_ns);
    bind_i(d, ST_FIND, 4, s->depth);
    int64_t id = sq.step(d->st[ST_FIND]) == SQ_ROW ? sq.column_int64(d->st[ST_FIND], 0) : -1;
    sq.reset(d->st[ST_FIND]);
    return id;
}

/* ---- the rest of a run ----------------------------------------------------------------- */
static int add_run_row(sx_db *d, const sx_db_run *r)
{
    const sm_model *m = d->run;
    const char *parent = sm_info(m, "system.parent_pid"), *file = m->path;
    if (file && strrchr(file, '/'))
        file = strrchr(file, '/') + 1;
    int k = ST_RUN, c = 1;
    bind_s(d, k, c++, m->name);
    bind_ref(d, k, c++, r->rank >= 0 ? r->rank : m->rank);
    bind_i(d, k, c++, m->world_size);
    bind_s(d, k, c++, r->label);
    bind_s(d, k, c++, sm_info(m, "system.hostname") ? sm_info(m, "system.hostname") : m->host);
    bind_i(d, k, c++, m->pid);
    bind_ref(d, k, c++, parent ? atoi(parent) : -1);
    bind_s(d, k, c++, m->program);
    bind_s(d, k, c++, m->cmdline);
    bind_s(d, k, c++, sm_info(m, "system.boot_id"));
    bind_i(d, k, c++, (int64_t)m->start_real_ns);
    bind_i(d, k, c++, (int64_t)m->start_mono_ns);
    bind_i(d, k, c++, m->duration_ns);
    bind_i(d, k, c++, r->align_ns);
    bind_i(d, k, c++, m->clean_end);
    bind_i(d, k, c++, (int64_t)m->dropped_events);
    bind_i(d, k, c++, (int64_t)sm_sections(m));
    bind_s(d, k, c++, m->unit);
    bind_s(d, k, c++, m->sonde_version);
    bind_s(d, k, c++, file);
    if (run_stmt(d, k))
        return -1;
    d->run_id = sq.last_insert_rowid(d->db);
    for (size_t i = 0; i < m->n_info; i++) {
        bind_i(d, ST_INFO, 1, d->run_id);
        bind_s(d, ST_INFO, 2, m->info[i].key);
        bind_s(d, ST_INFO, 3, m->info[i].value);
        if (run_stmt(d, ST_INFO))
            return -1;
    }
    return 0;
}

static int add_threads_sessions_steps(sx_db *d)
{
    const sm_model *m = d->run;
    for (size_t t = 0; t < m->n_threads; t++) {
        const sm_thread *th = &m->threads[t];
        int k = ST_THREAD;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, th->index);
        bind_i(d, k, 3, th->tid);
        bind_i(d, k, 4, th->pid ? th->pid : m->pid);
        bind_s(d, k, 5, th->name);
        bind_i(d, k, 6, (int64_t)th->spans);
        if (run_stmt(d, k))
            return -1;
    }
    for (size_t i = 0; i < m->n_sessions; i++) {
        const sm_session *s = &m->sessions[i];
        int64_t name = site_name(d, m, s->name);
        const char *meta = meta_json(d, m, s->meta);
        if (name < 0 || d->failed)
            return -1;
        int k = ST_SESSION;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, (int64_t)i);
        bind_i(d, k, 3, name);
        bind_i(d, k, 4, m->threads[s->thread].index);
        bind_i(d, k, 5, s->start_ns);
        bind_i(d, k, 6, s->end_ns);
        bind_i(d, k, 7, s->end_ns - s->start_ns);
        bind_f(d, k, 8, s->units);
        bind_f(d, k, 9, s->flops);
        bind_s(d, k, 10, meta);
        if (run_stmt(d, k))
            return -1;
    }
    for (size_t i = 0; i < m->n_steps; i++) {
        const sm_step *s = &m->steps[i];
        int k = ST_STEP;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, (int64_t)s->number);
        bind_i(d, k, 3, m->threads[s->thread].index);
        bind_i(d, k, 4, s->start_ns);
        bind_i(d, k, 5, s->t_ns);
        bind_i(d, k, 6, s->t_ns - s->start_ns);
        bind_i(d, k, 7, s->active);
        if (run_stmt(d, k))
            return -1;
    }
    return 0;
}

static int by_end(const void *a, const void *b)
{
    const sx_step_at *x = a, *y = b;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The run's steps by their ends, for step_at. 0, or -1 out of memory. */
static int index_steps(sx_db *d)
{
    const sm_model *m = d->run;
    d->n_steps = 0;
    if (!m->n_steps)
        return 0;
    sx_step_at *a = sonde__realloc(d->steps, m->n_steps * sizeof *a);
    if (!a)
        return oom(d);
    d->steps = a;
    for (size_t i = 0; i < m->n_steps; i++)
        a[i] = (sx_step_at){m->steps[i].t_ns, m->steps[i].start_ns, (int64_t)m->steps[i].number};
    sonde__sort(a, m->n_steps, sizeof *a, by_end);
    d->n_steps = m->n_steps;
    return 0;
}

static int add_instants_counters(sx_db *d)
{
    const sm_model *m = d->run;
    for (size_t i = 0; i < m->n_instants; i++) {
        const sm_instant *e = &m->instants[i];
        int64_t name = site_name(d, m, e->name);
        const char *args = meta_json(d, m, e->args);
        if (name < 0 || d->failed)
            return -1;
        int k = ST_INSTANT;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, m->threads[e->thread].index);
        bind_i(d, k, 3, name);
        bind_i(d, k, 4, e->t_ns);
        bind_ref(d, k, 5, step_at(d, e->t_ns));
        bind_s(d, k, 6, args);
        if (run_stmt(d, k))
            return -1;
    }
    for (size_t c = 0; c < m->n_counters; c++) {
        const sm_counter *k = &m->counters[c];
        for (size_t i = 0; i < k->n; i++) {
            bind_i(d, ST_COUNTER, 1, d->run_id);
            bind_s(d, ST_COUNTER, 2, k->name);
            bind_s(d, ST_COUNTER, 3, sm_counter_unit(k->name));
            bind_s(d, ST_COUNTER, 4, k->system ? "sampler" : "program");
            bind_i(d, ST_COUNTER, 5, k->t_ns[i]);
            bind_f(d, ST_COUNTER, 6, k->v[i]);
            if (run_stmt(d, ST_COUNTER))
                return -1;
        }
    }
    return 0;
}

static int add_ops(sx_db *d)
{
    const sm_model *m = d->run;
    int64_t first = d->next_op;
    for (size_t i = 0; i < m->n_ops; i++) {
        const sm_op *o = &m->ops[i];
        int k = ST_OP, c = 1;
        bind_i(d, k, c++, d->next_op++);
        bind_i(d, k, c++, d->run_id);
        bind_i(d, k, c++, m->threads[o->thread].index);
        bind_s(d, k, c++, m->op_names[o->name]);
        bind_s(d, k, c++, o->shapes >= 0 ? m->op_names[o->shapes] : NULL);
        bind_ref(d, k, c++, o->parent >= 0 ? first + o->parent : -1);
        bind_ref(d, k, c++, section_id(d, o->span));
        bind_i(d, k, c++, o->depth);
        bind_i(d, k, c++, o->start_ns);
        bind_i(d, k, c++, o->end_ns);
        bind_i(d, k, c++, o->end_ns - o->start_ns);
        bind_i(d, k, c++, o->end_ns - o->start_ns - o->child_ns);
        bind_f(d, k, c++, o->flops);
        bind_i(d, k, c++, o->device_ns);
        bind_i(d, k, c++, o->device_total_ns);
        bind_i(d, k, c++, o->host_bytes);
        bind_i(d, k, c++, o->device_bytes);
        bind_i(d, k, c++, (int64_t)o->id);
        if (run_stmt(d, k))
            return -1;
    }
    return 0;
}

static int add_gpu(sx_db *d)
{
    static const char *const kinds[] = {"?", "kernel", "memcpy", "memset"};
    const sm_model *m = d->run;
    char grid[48], block[48];
    for (size_t i = 0; i < m->n_gpu; i++) {
        const sm_gpu *g = &m->gpu[i];
        int kernel = g->kind == SM_GPU_KERNEL;
        snprintf(grid, sizeof grid, "%d,%d,%d", g->grid[0], g->grid[1], g->grid[2]);
        snprintf(block, sizeof block, "%d,%d,%d", g->block[0], g->block[1], g->block[2]);
        int k = ST_GPU, c = 1;
        bind_i(d, k, c++, d->next_gpu++);
        bind_i(d, k, c++, d->run_id);
        bind_s(d, k, c++, kinds[g->kind <= 3 ? g->kind : 0]);
        bind_i(d, k, c++, g->device);
        bind_i(d, k, c++, g->stream);
        bind_s(d, k, c++, g->name);
        bind_i(d, k, c++, g->start_ns);
        bind_i(d, k, c++, g->end_ns);
        bind_i(d, k, c++, g->end_ns - g->start_ns);
        bind_i(d, k, c++, (int64_t)g->bytes);
        bind_s(d, k, c++, g->kind == SM_GPU_MEMCPY ? sm_gpu_copy_kind(g->copy_kind) : NULL);
        bind_i(d, k, c++, g->correlation);
        bind_s(d, k, c++, kernel ? grid : NULL);
        bind_s(d, k, c++, kernel ? block : NULL);
        bind_ref(d, k, c++, g->launch_ns);
        int32_t lt = g->launch_thread;
        bind_ref(d, k, c++, lt >= 0 ? (int64_t)m->threads[lt].index : -1);
        bind_ref(d, k, c++, section_id(d, g->span));
        if (run_stmt(d, k))
            return -1;
    }
    return 0;
}

/* The innermost Python frame on stack node i's path (a frames.frame), -1: none; py memoizes
 * (-2: not known yet). */
static int64_t python_frame(const sm_profile *p, int64_t *py, uint32_t i)
{
    uint32_t at = i;
    while (at != UINT32_MAX && py[at] == -2) { /* up to the first known or Python node */
        if (p->funcs[p->nodes[at].func].python)
            py[at] = p->nodes[at].func;
        else
            at = p->nodes[at].parent;
    }
    int64_t v = at == UINT32_MAX ? -1 : py[at];
    for (uint32_t j = i; j != at; j = p->nodes[j].parent) /* the path below it takes it */
        py[j] = v;
    return py[i];
}

static int add_profile(sx_db *d)
{
    const sm_profile *p = &d->run->profile;
    for (size_t f = 0; f < p->n_funcs; f++) {
        const sm_func *fn = &p->funcs[f];
        int k = ST_FRAME;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, (int64_t)f);
        bind_s(d, k, 3, fn->name);
        bind_s(d, k, 4, fn->object);
        bind_s(d, k, 5, fn->file);
        bind_ref(d, k, 6, fn->line ? (int64_t)fn->line : -1);
        bind_i(d, k, 7, fn->python);
        if (run_stmt(d, k))
            return -1;
    }
    int64_t *py = p->n_nodes ? sonde__malloc(p->n_nodes * sizeof *py) : NULL;
    if (p->n_nodes && !py)
        return oom(d);
    for (size_t i = 0; i < p->n_nodes; i++)
        py[i] = -2;
    int rc = 0;
    for (size_t i = 0; i < p->n_nodes && !rc; i++) {
        int k = ST_STACK;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, (int64_t)i);
        bind_i(d, k, 3, p->nodes[i].func);
        bind_ref(d, k, 4, p->nodes[i].parent == UINT32_MAX ? -1 : (int64_t)p->nodes[i].parent);
        bind_ref(d, k, 5, python_frame(p, py, (uint32_t)i));
        rc = run_stmt(d, k);
    }
    sonde__free(py);
    for (size_t i = 0; i < p->n_timed && !rc; i++) {
        const sm_psample *s = &p->timed[i];
        int64_t thread = -1;
        for (size_t t = d->run->n_threads; t-- > 0 && thread < 0;) /* the latest with its tid */
            if (d->run->threads[t].tid == s->tid &&
                (!d->run->threads[t].pid || d->run->threads[t].pid == (int)s->pid))
                thread = d->run->threads[t].index;
        int k = ST_SAMPLE;
        bind_i(d, k, 1, d->run_id);
        bind_i(d, k, 2, s->t_ns);
        bind_i(d, k, 3, s->tid);
        bind_i(d, k, 4, s->pid);
        bind_ref(d, k, 5, thread);
        bind_ref(d, k, 6, s->stack < p->n_stacks && p->leaf ? (int64_t)p->leaf[s->stack] : -1);
        rc = run_stmt(d, k);
    }
    return rc;
}

/* ---- the database ---------------------------------------------------------------------- */
int sx_db_open(sx_db **out, const char *file, const char *path)
{
    *out = NULL;
    pthread_once(&g_once, load);
    if (g_load_error[0])
        return sonde__fail(SONDE_EIO, "cannot write %s: the sqlite format needs libsqlite3: %s",
                           path, g_load_error);
    sx_db *d = sonde__calloc(1, sizeof *d);
    if (!d || !(d->path = sonde__strdup(path))) {
        sonde__free(d);
        return sonde__fail(SONDE_ENOMEM, "out of memory writing %s", path);
    }
    strmap_init(&d->names);
    sbuf_init(&d->json);
    d->next_section = d->next_op = d->next_gpu = 1;
    *out = d;
    const int flags = SQ_OPEN_READWRITE | SQ_OPEN_CREATE | SQ_OPEN_NOMUTEX;
    if (sq.open_v2(file, &d->db, flags, NULL) != SQ_OK)
        return db_fail(d, "cannot open it"), d->failed;
    /* a new file, put in place whole by its caller: no journal, no syncs */
    if (exec(d, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = "
                "EXCLUSIVE; BEGIN;") ||
        exec(d, g_schema))
        return d->failed;
    static const char *const sql[ST_COUNT] = {
#define STMT_SQL(name, text) text,
        SX_STATEMENTS(STMT_SQL)
#undef STMT_SQL
    };
    for (int k = 0; k < ST_COUNT; k++)
        if (sq.prepare_v2(d->db, sql[k], -1, &d->st[k], NULL) != SQ_OK)
            return db_fail(d, sql[k]), d->failed;
    char version[64];
    snprintf(version, sizeof version, "INSERT INTO sonde_schema VALUES(%d, '%s');",
             SX_SQLITE_SCHEMA, SONDE_VERSION_STRING);
    return exec(d, version) ? d->failed : 0;
}

int sx_db_add(sx_db *d, const sm_model *m, const sx_db_run *r)
{
    if (d->failed)
        return d->failed;
    d->run = m;
    d->first_section = d->next_section;
    d->by_end = sm_each_section_by_end(m);
    d->sections_in = 0;
    d->n_nest = 0;
    d->nest_thread = UINT32_MAX;
    d->sites_of = NULL;
    int rc = add_run_row(d, r) || add_threads_sessions_steps(d) || index_steps(d) ? -1 : 0;
    if (!rc && sm_each_section(m, add_section, d) != 0 && !d->failed)
        d->failed = SONDE_EIO; /* the file could not be read again: sonde_last_error says why */
    if (!d->failed)
        rc = exec(d, g_section_index) || add_instants_counters(d) || add_ops(d) || add_gpu(d) ||
             add_profile(d);
    d->run = NULL;
    d->sites_of = NULL;
    if (rc && !d->failed)
        d->failed = SONDE_EIO;
    return d->failed;
}

int sx_db_close(sx_db *d, int commit)
{
    if (!d)
        return commit ? SONDE_EIO : 0;
    int rc = d->failed;
    if (!rc && commit && (exec(d, g_indexes) || exec(d, "COMMIT;")))
        rc = d->failed;
    for (int k = 0; k < ST_COUNT; k++)
        if (d->st[k])
            sq.finalize(d->st[k]);
    if (d->db && sq.close(d->db) != SQ_OK && !rc && commit)
        rc = (db_fail(d, "closing it"), d->failed);
    strmap_free(&d->names);
    sbuf_free(&d->json);
    sonde__free(d->name_of_site);
    sonde__free(d->nest);
    sonde__free(d->steps);
    sonde__free(d->path);
    sonde__free(d);
    return rc;
}

int sx_sqlite_file(const sm_model *m, const char *path)
{
    afile af;
    if (afile_open(&af, path) != 0)
        return sonde__fail(SONDE_EIO, "cannot write %s: %s", path, strerror(errno));
    sx_db *d;
    sx_db_run r = {.rank = -1, .label = NULL, .align_ns = 0};
    int rc = sx_db_open(&d, af.tmp, path);
    if (!rc)
        rc = sx_db_add(d, m, &r);
    int c = sx_db_close(d, rc == 0);
    rc = rc ? rc : c;
    if (rc) {
        afile_abort(&af);
        return rc;
    }
    if (afile_commit(&af, 0) != 0)
        return sonde__fail(SONDE_EIO, "cannot write %s: %s", path, strerror(errno));
    return 0;
}
