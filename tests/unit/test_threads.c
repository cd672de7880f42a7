/* test_threads.c - many threads recording at once (run under TSan by make test): 8 threads x
 * 100,000 nested sections, every one of which must be in the report; threads that come and go
 * reuse buffers and lose nothing; a file read with its first pass (skim.c) and its build
 * (build_threads.c) on several threads, its checksums summed on several (checksums.c), gives the
 * model one thread gives, whole or cut short. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "export/export.h"
#include "format/format.h"
#include "format/tally.h"
#include "util/buf.h"

enum { THREADS = 8, PER_THREAD = 100000 };

static void *record(void *arg)
{
    sonde_profiler *p = arg;
    for (int i = 0; i < PER_THREAD / 2; i++) {
        SONDE_SCOPE(p, "outer");
        {
            SONDE_SCOPE(p, "inner");
        }
        if (i % 1000 == 0)
            sonde_counter(p, "progress", i);
    }
    return NULL;
}

static void eight_threads(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "threads");
    sonde_profiler *p = sonde_create(&c);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, record, p), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.n_spans, THREADS * PER_THREAD);
    assert_int_equal((int)tu_stat(&m, "outer")->count, THREADS * PER_THREAD / 2);
    assert_int_equal((int)tu_stat(&m, "inner")->count, THREADS * PER_THREAD / 2);
    assert_int_equal((int)tu_stat(&m, "inner")->threads, THREADS);
    assert_int_equal((int)m.dropped_events, 0);
    int with_spans = 0;
    for (size_t i = 0; i < m.n_threads; i++)
        if (m.threads[i].spans) {
            with_spans++;
            assert_int_equal((int)m.threads[i].spans, PER_THREAD);
        }
    assert_int_equal(with_spans, THREADS);
    /* every inner is inside an outer of the same thread */
    for (size_t i = 0; i < m.n_spans; i++)
        if (m.spans[i].depth == 1)
            assert_int_equal((int)m.spans[m.spans[i].parent].thread, (int)m.spans[i].thread);
    sm_free(&m);
    tu_rmrf(dir);
}

static void *short_lived(void *arg)
{
    sonde_profiler *p = arg;
    static _Atomic int serial;
    char name[32];
    snprintf(name, sizeof name, "churner-%d", atomic_fetch_add(&serial, 1));
    sonde_thread_name(p, name);
    for (int i = 0; i < 10; i++) {
        SONDE_SCOPE(p, "churn");
    }
    return NULL;
}

static void thread_churn(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "churn");
    c.flush_interval_s = 60; /* threads come and go between two writer passes */
    sonde_profiler *p = sonde_create(&c);
    enum { WAVES = 50, WIDTH = 4 };
    for (int w = 0; w < WAVES; w++) {
        pthread_t th[WIDTH];
        for (int i = 0; i < WIDTH; i++)
            pthread_create(&th[i], NULL, short_lived, p);
        for (int i = 0; i < WIDTH; i++)
            pthread_join(th[i], NULL);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)tu_stat(&m, "churn")->count, WAVES * WIDTH * 10);
    assert_int_equal((int)m.dropped_events, 0);
    /* a buffer is reused only once its thread's name is in the file: every thread that
     * recorded keeps the name it gave itself (the e2e pipeline once showed "thread 2") */
    int named = 0;
    for (size_t i = 0; i < m.n_threads; i++)
        if (m.threads[i].spans) {
            assert_non_null(m.threads[i].name);
            assert_memory_equal(m.threads[i].name, "churner-", 8);
            named++;
        }
    assert_int_equal(named, WAVES * WIDTH);
    sm_free(&m);
    tu_rmrf(dir);
}

/* A thread of read_on_several_threads: sessions, steps (thread 0 alone), instants of two names, a
 * counter, and nested sections of three lengths. */
static void *varied(void *arg)
{
    sonde_profiler *p = ((void **)arg)[0];
    int me = (int)(intptr_t)((void **)arg)[1];
    char sess[32];
    snprintf(sess, sizeof sess, "session-%d", me);
    sonde_session_begin(p, sess);
    for (int i = 0; i < 3000; i++) {
        if (me == 0 && i % 100 == 0)
            sonde_step(p);
        SONDE_SCOPE(p, "outer");
        sonde_event(p, i % 3 ? "tick" : "tock");
        {
            SONDE_SCOPE(p, "inner");
            if (i % 50 == 0)
                tu_spin_ms(0.05 * (me + 1));
        }
        if (i % 500 == 0)
            sonde_counter(p, "progress", i);
    }
    sonde_session_end(p);
    return NULL;
}

/* The model of path read with SONDE_READ_THREADS set to how. */
static void read_with(const char *path, const char *how, sm_model *m)
{
    setenv("SONDE_READ_THREADS", how, 1);
    assert_int_equal(sm_read_file(path, m), 0);
    unsetenv("SONDE_READ_THREADS");
}

/* n threads recording into p at once, each handed {p, its index}: the first n_first running
 * first, the others varied; returns once all have ended. */
static void run_threads(sonde_profiler *p, int n, int n_first, void *(*first)(void *))
{
    pthread_t th[THREADS];
    void *args[THREADS][2];
    assert_true(n <= THREADS);
    for (int i = 0; i < n; i++) {
        args[i][0] = p;
        args[i][1] = (void *)(intptr_t)i;
        assert_int_equal(pthread_create(&th[i], NULL, i < n_first ? first : varied, args[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* A run named name in a new directory dir (256 bytes) with report_max_sections and
 * report_max_records as given (0: the default), recorded by run_threads' threads; its file's path
 * into path (4096 bytes). */
static void record_threads(char *dir, char *path, const char *name, unsigned max_sections,
                           unsigned max_records, int n, int n_first, void *(*first)(void *))
{
    tu_tmpdir(dir, 256);
    sonde_config c = tu_config(dir, name);
    if (max_sections)
        c.report_max_sections = max_sections;
    if (max_records)
        c.report_max_records = max_records;
    sonde_profiler *p = sonde_create(&c);
    snprintf(path, 4096, "%s", sonde_file_path(p));
    run_threads(p, n, n_first, first);
    assert_int_equal(sonde_destroy(p), 0);
}

/* b as a has it, field by field: what the first pass's findings decide, and what the build on
 * several threads (build_threads.c) merges. */
static void same_stats(const sm_stat *x, const sm_stat *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(x[i].name, y[i].name);
        assert_int_equal(x[i].count, y[i].count);
        assert_int_equal(x[i].threads, y[i].threads);
        assert_int_equal(x[i].min_depth, y[i].min_depth);
        assert_int_equal(x[i].sketched, y[i].sketched);
#define SAME(f, kind, label, table, q) assert_true(x[i].f == y[i].f);
        SONDE_SECTION_STATS(SAME)
#undef SAME
        assert_true(x[i].share == y[i].share);
    }
}

static void same_model(const sm_model *a, const sm_model *b)
{
    const sm_model one = *a, two = *b;
    assert_int_equal(one.n_spans, two.n_spans);
    assert_int_equal(one.sections_folded, two.sections_folded);
    assert_int_equal(one.sections_end_lost, two.sections_end_lost);
    assert_int_equal(one.held_min_ns, two.held_min_ns);
    assert_int_equal(one.duration_ns, two.duration_ns);
    assert_int_equal(one.n_sessions, two.n_sessions);
    for (size_t i = 0; i < one.n_sessions; i++) {
        assert_int_equal(one.sessions[i].name, two.sessions[i].name);
        assert_int_equal(one.sessions[i].n_stats, two.sessions[i].n_stats);
        same_stats(one.sessions[i].stats, two.sessions[i].stats, one.sessions[i].n_stats);
    }
    assert_int_equal(one.n_instants, two.n_instants);
    assert_int_equal(one.n_steps, two.n_steps);
    assert_int_equal(one.n_stats, two.n_stats);
    same_stats(one.stats, two.stats, one.n_stats);
    assert_int_equal(one.n_threads, two.n_threads);
    for (size_t i = 0; i < one.n_threads; i++)
        assert_int_equal(one.threads[i].spans, two.threads[i].spans);
    for (size_t i = 0; i < one.n_spans; i++)
        assert_memory_equal(&one.spans[i], &two.spans[i], sizeof one.spans[i]);
    assert_int_equal(one.n_folds, two.n_folds);
    for (size_t i = 0; i < one.n_folds; i++) { /* field by field: sm_fold_run has padding */
        const sm_fold_run *x = &one.folds[i], *y = &two.folds[i];
        assert_int_equal(x->thread, y->thread);
        assert_int_equal(x->site, y->site);
        assert_int_equal(x->mixed, y->mixed);
        assert_int_equal(x->start_ns, y->start_ns);
        assert_int_equal(x->end_ns, y->end_ns);
        assert_int_equal(x->n, y->n);
        assert_int_equal(x->sum_ns, y->sum_ns);
        assert_int_equal(x->box, y->box);
        assert_int_equal(x->closer, y->closer);
        assert_int_equal(x->folded, y->folded);
    }
    assert_int_equal(one.n_warnings, two.n_warnings);
    for (size_t i = 0; i < one.n_warnings; i++)
        assert_string_equal(one.warnings[i], two.warnings[i]);
}

/* path read with SONDE_READ_THREADS set to how: the model one has, field by field. */
static void same_read_by(const sm_model *one, const char *path, const char *how)
{
    sm_model two;
    read_with(path, how, &two);
    same_model(one, &two);
    sm_free(&two);
}

/* The first pass on several threads, each reading file threads into findings of its own, merged
 * in thread order (skim.c): the same model as one reader's, where it matters most, with a cut on
 * the sections held (report_max_sections), on the instants (report_max_records), sessions on
 * every thread and steps on one. */
static void read_on_several_threads(void **state)
{
    (void)state;
    char dir[256], path[4096];
    record_threads(dir, path, "two", 3000, 500, THREADS, 0, NULL);
    sm_model one;
    read_with(path, "1", &one);
    assert_true(one.sections_folded > 0); /* the cut came from the merged histogram */
    assert_true(one.n_steps > 0);
    assert_int_equal(one.n_sessions, THREADS);
    assert_int_equal(one.n_spans + one.sections_folded, THREADS * 3000 * 2);
    /* two readers, and five (more than this VM's CPUs: whatever the machine, several threads
     * each) */
    same_read_by(&one, path, "2");
    same_read_by(&one, path, "5");
    sm_free(&one);
    tu_rmrf(dir);
}

/* A thread of build_on_several_threads with sections alone: nested, recursive, of varied
 * lengths; the last of them leaves one open. */
static void *sections_only(void *arg)
{
    sonde_profiler *p = ((void **)arg)[0];
    int me = (int)(intptr_t)((void **)arg)[1];
    for (int i = 0; i < 4000; i++) {
        SONDE_SCOPE(p, "layer");
        sonde_begin(p, i % 3 ? "matmul" : "layer"); /* a name nested in itself */
        if (i % 97 == me)
            tu_spin_ms(0.02 * (me + 1));
        sonde_end(p);
    }
    if (me == 4)
        sonde_begin(p, "left-open");
    return NULL;
}

/* The build on several threads (build_threads.c): file threads with sections alone built each
 * on a thread of its own, merged in thread order, beside a thread with sessions, steps, instants
 * and a counter built in turn: the same model, field for field, as one thread builds, with
 * sections folded (report_max_sections) and each session's statistics fed as they close. */
static void build_on_several_threads(void **state)
{
    (void)state;
    char dir[256], path[4096];
    enum { OWN = 5 };
    record_threads(dir, path, "own", 2000, 0, OWN + 1, OWN, sections_only);
    sm_model one;
    read_with(path, "1", &one);
    assert_true(one.sections_folded > 0);
    assert_true(one.n_folds > 0);
    assert_int_equal(one.n_spans + one.sections_folded, OWN * 8000 + 1 + 3000 * 2);
    const sm_stat *layer = tu_stat(&one, "layer");
    assert_int_equal((int)layer->count, OWN * (4000 + 4000 / 3 + 1));
    assert_int_equal((int)layer->threads, OWN);
    assert_true(layer->sketched); /* past SM_SKETCH_AT: merged from several sketches and sums */
    same_read_by(&one, path, "2");
    same_read_by(&one, path, "3");
    same_read_by(&one, path, "8");
    /* its reports written with the trace and the .pftrace on threads of their own (export.c),
     * reading the model beside the text reports (under TSan in make test) */
    setenv("SONDE_READ_THREADS", "4", 1);
    assert_int_equal(sx_write_formats(&one, dir, "w",
                                      SONDE_FORMAT_JSON | SONDE_FORMAT_TXT | SONDE_FORMAT_TRACE |
                                          SONDE_FORMAT_PERFETTO | SONDE_FORMAT_TENSORBOARD),
                     0);
    unsetenv("SONDE_READ_THREADS");
    /* the reading's steps timed (make bench-scale prints them): each within the whole */
    double t0 = tu_now_s();
    sm_model timed;
    read_with(path, "2", &timed);
    double whole = tu_now_s() - t0;
    const double walk = timed.read_times.walk_s, first = timed.read_times.first_pass_s,
                 build = timed.read_times.build_s;
    assert_true(walk >= 0 && first > 0 && build > 0);
    assert_true(walk + first + build <= whole);
    sm_free(&timed);
    sm_free(&one);
    tu_rmrf(dir);
}

/* How many threads write the reports (export.c's sx_write_threads, which bench_scale prints):
 * the calling one with the text formats, and one a CPU more for the files written apart, as
 * far as there are such files (one of them the calling thread's when it has no text file). */
static void write_threads_rule(void **state)
{
    (void)state;
    const unsigned text = SONDE_FORMAT_JSON | SONDE_FORMAT_TXT;
    setenv("SONDE_READ_THREADS", "4", 1);
    assert_int_equal(sx_write_threads(text), 1);
    assert_int_equal(sx_write_threads(text | SONDE_FORMAT_TRACE), 2);
    assert_int_equal(sx_write_threads(text | SONDE_FORMAT_TRACE | SONDE_FORMAT_PERFETTO), 3);
    assert_int_equal(sx_write_threads(SONDE_FORMAT_TRACE), 1);
    assert_int_equal(sx_write_threads(SONDE_FORMAT_TRACE | SONDE_FORMAT_PERFETTO), 2);
    setenv("SONDE_READ_THREADS", "2", 1);
    assert_int_equal(sx_write_threads(text | SONDE_FORMAT_TRACE | SONDE_FORMAT_PERFETTO), 2);
    setenv("SONDE_READ_THREADS", "1", 1);
    assert_int_equal(sx_write_threads(text | SONDE_FORMAT_TRACE | SONDE_FORMAT_PERFETTO), 1);
    unsetenv("SONDE_READ_THREADS");
}

/* Flips a byte in the middle of the payload of the file's k-th EVENTS record (from 0): its
 * checksum then fails. 1 when there was such a record. */
static int spoil_events_record(const char *path, int k)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    long off = SONDE_FILE_HEADER_LEN;
    uint8_t h[SONDE_RECORD_HEADER_LEN];
    int found = 0;
    while (!found && fseek(f, off, SEEK_SET) == 0 && fread(h, 1, sizeof h, f) == sizeof h) {
        uint32_t len = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 |
                       (uint32_t)h[7] << 24;
        if (h[0] == SONDE_R_EVENTS && k-- == 0) {
            long at = off + SONDE_RECORD_HEADER_LEN + (long)len / 2;
            int c;
            assert_int_equal(fseek(f, at, SEEK_SET), 0);
            assert_true((c = fgetc(f)) != EOF);
            assert_int_equal(fseek(f, at, SEEK_SET), 0);
            assert_true(fputc(c ^ 0x5a, f) != EOF);
            found = 1;
        }
        off += SONDE_RECORD_HEADER_LEN + (long)len;
    }
    fclose(f);
    return found;
}

/* A file whose reading stops at a record that fails its checksum, threads' events cut off
 * mid-run and their sections left open: the first pass and the build on several threads give
 * the model, and the warning, one thread gives. */
static void a_cut_file_on_several_threads(void **state)
{
    (void)state;
    char dir[256], path[4096];
    record_threads(dir, path, "cut", 2000, 0, THREADS, THREADS, sections_only);
    sm_model whole;
    read_with(path, "1", &whole);
    assert_true(spoil_events_record(path, 3));
    sm_model one;
    read_with(path, "1", &one);
    int said = 0;
    for (size_t i = 0; i < one.n_warnings; i++)
        said |= strstr(one.warnings[i], "fails its checksum: read up to it") != NULL;
    assert_true(said);
    assert_true(sm_sections(&one) < sm_sections(&whole)); /* read up to it */
    same_read_by(&one, path, "2");
    same_read_by(&one, path, "8");
    sm_free(&one);
    sm_free(&whole);
    tu_rmrf(dir);
}

/* path read with SONDE_READ_SUMMARY set to how (NULL: unset) and SONDE_READ_THREADS to threads:
 * the model into m, the reading's code returned. */
static int read_summary_by(const char *path, const char *how, const char *threads, sm_model *m)
{
    if (how)
        setenv("SONDE_READ_SUMMARY", how, 1);
    setenv("SONDE_READ_THREADS", threads, 1);
    int rc = sm_read_file(path, m);
    unsetenv("SONDE_READ_SUMMARY");
    unsetenv("SONDE_READ_THREADS");
    return rc;
}

/* The file's SUMMARY record's payload replaced by what edit makes of it (it may change it in
 * place, or return other bytes in *out with their length): the file rewritten around it, its
 * checksum summed anew. */
typedef size_t (*summary_edit)(uint8_t *payload, size_t len, uint8_t **out);
static void edit_summary(const char *path, summary_edit edit)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[64 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n < sizeof buf);
    size_t off = SONDE_FILE_HEADER_LEN;
    while (off + SONDE_RECORD_HEADER_LEN <= n && buf[off] != SONDE_R_SUMMARY)
        off += SONDE_RECORD_HEADER_LEN + sonde_get_u32le(buf + off + 4);
    assert_true(off + SONDE_RECORD_HEADER_LEN <= n); /* the writer wrote one */
    size_t len = sonde_get_u32le(buf + off + 4), rest = off + SONDE_RECORD_HEADER_LEN + len;
    uint8_t *payload = buf + off + SONDE_RECORD_HEADER_LEN, *out = NULL;
    size_t nl = edit(payload, len, &out);
    f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t h[SONDE_RECORD_HEADER_LEN] = {SONDE_R_SUMMARY};
    const uint8_t *np = out ? out : payload;
    sonde_put_u32le(h + 4, (uint32_t)nl);
    sonde_put_u32le(h + 8, (uint32_t)crc32(0L, np, (uInt)nl));
    assert_int_equal(fwrite(buf, 1, off, f), off);
    assert_int_equal(fwrite(h, 1, sizeof h, f), sizeof h);
    assert_int_equal(fwrite(np, 1, nl, f), nl);
    assert_int_equal(fwrite(buf + rest, 1, n - rest, f), n - rest);
    fclose(f);
    free(out);
}

/* A payload that is not one: a later version's number. */
static size_t summary_garbled(uint8_t *payload, size_t len, uint8_t **out)
{
    (void)out;
    payload[0] = 0x7f;
    return len;
}

/* The same payload saying that no thread has events of the kinds every thread's build shares. */
static size_t summary_all_own(uint8_t *payload, size_t len, uint8_t **out)
{
    sonde_tally t;
    sonde_tally_thread *th = NULL;
    size_t n = 0;
    assert_int_equal(sonde_tally_init(&t), 0);
    assert_int_equal(sonde_tally_decode(payload, payload + len, 1000, &t, &th, &n), 0);
    for (size_t i = 0; i < n; i++)
        th[i].shared = 0;
    sbuf b;
    sbuf_init(&b);
    sonde_tally_encode(&b, &t, th, n);
    assert_false(b.oom);
    for (size_t i = 0; i < n; i++)
        sonde_tally_thread_free(&th[i]);
    free(th);
    sonde_tally_free(&t);
    *out = (uint8_t *)b.data;
    return b.len;
}

/* A run the recorder wrote ends with a SUMMARY record (format/tally.h): read with it, each event
 * is decoded once, and the model is the one the first pass over the events gives, field for
 * field (held sections, held instants, sessions, steps, threads built apart), on one thread and
 * on several. A malformed record is said and the events are read twice; a record that says a
 * thread has sections alone when it has instants fails the reading (a build on a helper would
 * share what it may not) or, where no helper built that thread, gives the true model. */
static void summary_reads_as_the_first_pass(void **state)
{
    (void)state;
    char dir[256], path[4096], own_dir[256], own_path[4096];
    record_threads(dir, path, "sum", 3000, 500, THREADS, 0, NULL);
    record_threads(own_dir, own_path, "sumown", 2000, 0, 6, 5, sections_only);
    const char *const paths[] = {path, own_path};
    for (int k = 0; k < 2; k++) {
        sm_model two;
        assert_int_equal(read_summary_by(paths[k], "0", "1", &two), 0);
        assert_false(two.read_times.one_pass);
        assert_true(two.sections_folded > 0);
        const char *const threads[] = {"1", "2", "5"};
        for (int i = 0; i < 3; i++) {
            sm_model one;
            assert_int_equal(read_summary_by(paths[k], NULL, threads[i], &one), 0);
            assert_true(one.read_times.one_pass);
            same_model(&two, &one);
            sm_free(&one);
        }
        sm_free(&two);
    }
    sm_model truth;
    assert_int_equal(read_summary_by(path, "0", "1", &truth), 0);
    sm_model m;
    edit_summary(path, summary_all_own);
    int failed = 0;
    for (int i = 0; i < 4; i++) { /* which threads a helper builds is the helpers' race */
        int rc = read_summary_by(path, NULL, "4", &m);
        if (rc) {
            assert_int_equal(rc, SONDE_EFORMAT);
            assert_non_null(strstr(sonde_last_error(), "does not say what its events hold"));
            failed++;
        } else {
            assert_true(m.read_times.one_pass);
            same_model(&truth, &m);
            sm_free(&m);
        }
    }
    printf("a summary that lied about threads: %d readings of 4 refused\n", failed);
    edit_summary(path, summary_garbled);
    assert_int_equal(read_summary_by(path, NULL, "2", &m), 0);
    assert_false(m.read_times.one_pass);
    assert_int_equal(m.n_warnings, truth.n_warnings + 1);
    int said = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        said += strstr(m.warnings[i], "its SUMMARY record is malformed") != NULL;
    assert_int_equal(said, 1);
    sm_free(&m);
    sm_free(&truth);
    tu_rmrf(dir);
    tu_rmrf(own_dir);
}

/* Sections enough on each thread for a file of hundreds of EVENTS records. */
static void *many_sections(void *arg)
{
    sonde_profiler *p = ((void **)arg)[0];
    for (int i = 0; i < 70000; i++) {
        SONDE_SCOPE(p, "outer");
        SONDE_SCOPE(p, "inner");
    }
    return NULL;
}

/* The offset of path's k-th EVENTS record (its header) into *off and its length into *len;
 * k -1: the last. 0, or -1 where there is no such record. */
static int events_record(const char *path, long k, long *off, uint32_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    long at = SONDE_FILE_HEADER_LEN, seen = -1;
    uint8_t h[SONDE_RECORD_HEADER_LEN];
    while (fseek(f, at, SEEK_SET) == 0 && fread(h, 1, sizeof h, f) == sizeof h) {
        uint32_t l = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 |
                     (uint32_t)h[7] << 24;
        if (h[0] == SONDE_R_EVENTS) {
            seen++;
            if (k < 0 || seen == k) {
                *off = at;
                *len = l;
            }
            if (seen == k)
                break;
        }
        at += SONDE_RECORD_HEADER_LEN + (long)l;
    }
    fclose(f);
    return k < 0 ? (seen >= 0 ? 0 : -1) : (seen == k ? 0 : -1);
}

/* Copies from to to, byte for byte. */
static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

/* 1 when one of m's warnings holds text. */
static int warned(const sm_model *m, const char *text)
{
    for (size_t i = 0; i < m->n_warnings; i++)
        if (strstr(m->warnings[i], text))
            return 1;
    return 0;
}

/* The EVENTS records' checksums summed on several threads after the records are walked
 * (checksums.c): a file of hundreds of records gives the model one thread gives whole; with a
 * record three quarters in that fails its checksum (the walk went past it: the file is read
 * again, each record summed before it is read, and stops there); with a block header that
 * cannot be read under a right checksum (said and skipped, as one thread does); and with its
 * last EVENTS record torn off. */
static void checksums_on_several_threads(void **state)
{
    (void)state;
    char dir[256], path[4096], copy[4200];
    record_threads(dir, path, "sums", 0, 0, THREADS, THREADS, many_sections);
    long n = 0, off;
    uint32_t len;
    while (events_record(path, n, &off, &len) == 0)
        n++;
    assert_true(n >= 256); /* several threads sum them (checksums.c's SEVERAL_FROM) */
    sm_model whole;
    read_with(path, "1", &whole);
    assert_int_equal(whole.n_warnings, 0);
    same_read_by(&whole, path, "2");
    same_read_by(&whole, path, "8");

    snprintf(copy, sizeof copy, "%s.spoilt", path);
    copy_file(path, copy);
    assert_true(spoil_events_record(copy, (int)(n * 3 / 4)));
    sm_model one;
    read_with(copy, "1", &one);
    assert_true(warned(&one, "fails its checksum: read up to it"));
    assert_true(one.n_spans + one.sections_folded < whole.n_spans + whole.sections_folded);
    same_read_by(&one, copy, "2");
    same_read_by(&one, copy, "8");
    sm_free(&one);

    /* a block header of eleven 0xff bytes (a varint longer than any), its checksum made right */
    copy_file(path, copy);
    assert_int_equal(events_record(copy, n / 2, &off, &len), 0);
    FILE *f = fopen(copy, "r+b");
    assert_non_null(f);
    uint8_t *body = malloc(len);
    assert_non_null(body);
    assert_int_equal(fseek(f, off + SONDE_RECORD_HEADER_LEN, SEEK_SET), 0);
    assert_int_equal(fread(body, 1, len, f), len);
    memset(body, 0xff, 11);
    uint32_t crc = (uint32_t)crc32(0L, body, len);
    uint8_t le[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
    assert_int_equal(fseek(f, off + 8, SEEK_SET), 0);
    assert_int_equal(fwrite(le, 1, 4, f), 4);
    assert_int_equal(fseek(f, off + SONDE_RECORD_HEADER_LEN, SEEK_SET), 0);
    assert_int_equal(fwrite(body, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(body);
    read_with(copy, "1", &one);
    assert_true(warned(&one, "malformed record of type"));
    assert_false(warned(&one, "fails its checksum"));
    same_read_by(&one, copy, "2");
    same_read_by(&one, copy, "8");
    sm_free(&one);

    copy_file(path, copy);
    assert_int_equal(events_record(copy, -1, &off, &len), 0);
    assert_int_equal(truncate(copy, off + SONDE_RECORD_HEADER_LEN + len / 2), 0);
    read_with(copy, "1", &one);
    assert_true(warned(&one, "torn last record"));
    same_read_by(&one, copy, "2");
    same_read_by(&one, copy, "8");
    sm_free(&one);
    sm_free(&whole);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(eight_threads),
                                       cmocka_unit_test(thread_churn),
                                       cmocka_unit_test(read_on_several_threads),
                                       cmocka_unit_test(build_on_several_threads),
                                       cmocka_unit_test(write_threads_rule),
                                       cmocka_unit_test(a_cut_file_on_several_threads),
                                       cmocka_unit_test(checksums_on_several_threads),
                                       cmocka_unit_test(summary_reads_as_the_first_pass)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
