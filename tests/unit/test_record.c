/* test_record.c - the recording API end to end through the .sonde file and the model: nesting,
 * statistics, metadata, metrics, throughput, FLOPs, sessions, steps, counters, events, clear,
 * misuse, disabled profilers, configuration from the environment, file names. */
#define _GNU_SOURCE
#include "testutil.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/bench.h" /* bench_free_port */
#include "export/export.h"
#include "record/record.h"
#include "util/alloc.h"

static void sections_nest(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "nest");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_status(p), 0);
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(p, "outer");
        tu_spin_ms(2);
        {
            SONDE_SCOPE(p, "inner");
            tu_spin_ms(3);
        }
        assert_int_equal(sonde_begin(p, "runtime"), 0);
        tu_spin_ms(1);
        assert_int_equal(sonde_end(p), 0);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.n_spans, 9);
    const sm_stat *o = tu_stat(&m, "outer"), *in = tu_stat(&m, "inner"), *rt = tu_stat(&m, "runtime");
    assert_non_null(o);
    assert_non_null(in);
    assert_non_null(rt);
    assert_int_equal((int)o->count, 3);
    assert_int_equal((int)in->count, 3);
    assert_int_equal(in->min_depth, 1);
    assert_int_equal(o->min_depth, 0);
    /* self time of outer excludes its two children */
    assert_true(o->total_s >= in->total_s + rt->total_s);
    assert_true(fabs(o->self_s - (o->total_s - in->total_s - rt->total_s)) < 1e-6);
    /* inner spun 3 ms each time; its upper bound is outer's time around it (not a wall-clock
     * margin: a loaded machine may stop this thread for any time inside it) */
    assert_true(in->mean_s >= 0.003 && in->total_s <= o->total_s - rt->total_s + 1e-9);
    assert_true(o->self_s >= 0.006);
    for (size_t i = 0; i < m.n_spans; i++) {
        const sm_span *s = &m.spans[i];
        if (s->parent >= 0) {
            const sm_span *par = &m.spans[s->parent];
            assert_true(s->start_ns >= par->start_ns && s->end_ns <= par->end_ns);
            assert_string_equal(m.sites[par->site].name, "outer");
        }
    }
    /* call-site details are kept for macro sections */
    int found = 0;
    for (size_t i = 0; i < m.n_sites; i++)
        if (!strcmp(m.sites[i].name, "inner") && m.sites[i].file &&
            strstr(m.sites[i].file, "test_record.c") && !strcmp(m.sites[i].func, "sections_nest"))
            found = 1;
    assert_true(found);
    assert_int_equal((int)m.n_warnings, 0);
    sm_free(&m);
    tu_rmrf(dir);
}

static void attachments(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "attach");
    c.peak_flops = 1e12;
    sonde_profiler *p = sonde_create(&c);
    sonde_metadata(p, "model", "tiny"); /* no section, no session: the run */
    sonde_session_begin(p, "infer");
    sonde_metadata(p, "batch", "8"); /* the session */
    for (int i = 1; i <= 4; i++) {
        SONDE_SCOPE(p, "decode");
        char v[8];
        snprintf(v, sizeof v, "%d", i);
        sonde_metadata(p, "iter", v);
        tu_spin_ms(2);
        assert_int_equal(sonde_metric(p, "loss", (double)i), 0);
        assert_int_equal(sonde_throughput(p, 100, 0), 0);
        assert_int_equal(sonde_flops(p, 1e9), 0);
    }
    {
        SONDE_SCOPE(p, "prefill");
        sonde_throughput_unit(p, 50, 2.0, "frames");
    }
    sonde_session_end(p);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    const sm_stat *d = tu_stat(&m, "decode");
    assert_non_null(d);
    assert_true(d->units == 400);
    /* seconds <= 0: the sections' own durations */
    assert_true(fabs(d->units_s - d->total_s) < 1e-9);
    assert_true(d->flops == 4e9);
    assert_true(fabs(d->flops_time_s - d->total_s) < 1e-9);
    const sm_stat *pf = tu_stat(&m, "prefill");
    assert_string_equal(pf->unit, "frames");
    assert_true(pf->units == 50 && pf->units_s == 2.0);
    /* one rate per unit, the run's first */
    assert_int_equal((int)m.n_rates, 2);
    assert_string_equal(m.rates[0].unit, "tokens");
    assert_true(m.rates[0].units == 400);
    assert_string_equal(m.rates[1].unit, "frames");
    /* the metric kept count, mean, min, max on its section */
    int seen = 0;
    for (size_t i = 0; i < m.n_metrics; i++) {
        const sm_metric *x = &m.metrics[i];
        if (!strcmp(x->owner, "decode") && !strcmp(x->name, "loss")) {
            seen = 1;
            assert_int_equal((int)x->count, 4);
            assert_true(x->sum == 10 && x->min == 1 && x->max == 4 && x->last == 4);
        }
    }
    assert_true(seen);
    /* metadata on the run, the session and every instance */
    assert_true(m.run_meta >= 0);
    assert_string_equal(sm_str(&m, m.meta[m.run_meta].key), "model");
    assert_int_equal((int)m.n_sessions, 1);
    assert_string_equal(sm_str(&m, m.meta[m.sessions[0].meta].value), "8");
    int with_iter = 0;
    for (size_t i = 0; i < m.n_spans; i++)
        if (sm_span_extra(&m, &m.spans[i])->meta >= 0 &&
            !strcmp(sm_str(&m, m.meta[sm_span_extra(&m, &m.spans[i])->meta].key), "iter"))
            with_iter++;
    assert_int_equal(with_iter, 4);
    assert_int_equal(m.spans[0].session, 0);
    sm_free(&m);
    tu_rmrf(dir);
}

static void sessions_steps_counters_events(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "misc");
    sonde_profiler *p = sonde_create(&c);
    sonde_session_begin(p, "first");
    {
        SONDE_SCOPE(p, "a");
        tu_spin_ms(1);
    }
    sonde_session_begin(p, "second"); /* ends "first" */
    for (int i = 0; i < 5; i++) {
        SONDE_SCOPE(p, "step");
        tu_spin_ms(1);
        sonde_counter(p, "queue", i * 10);
        sonde_step(p);
    }
    sonde_event(p, "checkpoint");
    sonde_event(p, "checkpoint");
    sonde_session_end(p);
    assert_int_equal(sonde_session_end(p), SONDE_EUNBALANCED);
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)m.n_sessions, 2);
    assert_string_equal(sm_str(&m, m.sessions[0].name), "first");
    assert_string_equal(sm_str(&m, m.sessions[1].name), "second");
    assert_true(m.sessions[0].end_ns <= m.sessions[1].start_ns);
    for (size_t i = 0; i < m.n_spans; i++)
        assert_int_equal(m.spans[i].session,
                         strcmp(sm_str(&m, m.spans[i].site), "a") == 0 ? 0 : 1);
    assert_int_equal((int)m.n_steps, 5);
    for (int i = 0; i < 5; i++) /* numbered from 0, as PyTorch numbers steps */
        assert_int_equal((int)m.steps[i].number, i);
    assert_true(m.steps[0].start_ns == 0 && m.steps[1].start_ns == m.steps[0].t_ns);
    assert_int_equal(m.sessions[0].thread, 0); /* on the thread that began it */
    sm_steps_summary ss;
    sm_steps(&m, &ss);
    assert_int_equal((int)ss.count, 5);
    assert_true(ss.p50_s >= 0.001);
    assert_int_equal((int)m.n_counters, 1);
    assert_int_equal((int)m.counters[0].n, 5);
    assert_true(m.counters[0].max == 40 && m.counters[0].min == 0 && m.counters[0].last == 40);
    assert_int_equal((int)m.n_instants, 2);
    /* the unbalanced session end is a warning in the report */
    int warned = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        warned |= strstr(m.warnings[i], "without an open section or session") != NULL;
    assert_true(warned);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The quick start's pattern: work before the loop (a prefill), then steps. Without a begin mark
 * step 0 runs from the start of the run and holds the prefill; with SONDE_STEP (or
 * sonde_step_begin) each step holds only its own block. */
static void step_begin_marks(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    for (int marked = 0; marked < 2; marked++) {
        sonde_config c = tu_config(dir, marked ? "marked" : "unmarked");
        sonde_profiler *p = sonde_create(&c);
        {
            SONDE_SCOPE(p, "prefill");
            tu_spin_ms(2);
        }
        for (int i = 0; i < 4; i++) {
            if (marked) {
                SONDE_STEP(p);
                SONDE_SCOPE(p, "decode");
                tu_spin_ms(1);
            } else {
                SONDE_SCOPE(p, "decode");
                tu_spin_ms(1);
                sonde_step(p);
            }
        }
        sm_model m;
        tu_finish(p, &m);
        assert_int_equal((int)m.n_steps, 4);
        const sm_span *prefill = NULL;
        for (size_t i = 0; i < m.n_spans; i++)
            if (!strcmp(sm_str(&m, m.spans[i].site), "prefill"))
                prefill = &m.spans[i];
        assert_non_null(prefill);
        for (int i = 0; i < 4; i++) {
            assert_int_equal((int)m.steps[i].number, i);
            assert_int_equal(m.steps[i].begun, marked);
            assert_true(m.steps[i].start_ns < m.steps[i].t_ns);
        }
        if (marked) /* step 0 begins after the prefill ended: the prefill is in no step */
            assert_true(m.steps[0].start_ns >= prefill->end_ns);
        else
            assert_true(m.steps[0].start_ns == 0 && m.steps[0].start_ns < prefill->start_ns);
        /* each decode lies inside its step */
        int k = 0;
        for (size_t i = 0; i < m.n_spans; i++)
            if (!strcmp(sm_str(&m, m.spans[i].site), "decode")) {
                assert_true(m.spans[i].start_ns >= m.steps[k].start_ns);
                assert_true(m.spans[i].end_ns <= m.steps[k].t_ns || !marked);
                k++;
            }
        assert_int_equal(k, 4);
        sm_free(&m);
    }
    tu_rmrf(dir);
}

static void misuse(void **state)
{
    (void)state;
    assert_int_equal(sonde_begin(NULL, "x"), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "NULL"));
    assert_int_equal(sonde_end(NULL), SONDE_EINVAL);
    assert_int_equal(sonde_destroy(NULL), SONDE_EINVAL);
    assert_int_equal(sonde_metric(NULL, "x", 1), SONDE_EINVAL);
    assert_string_equal(sonde_strerror(SONDE_EUNBALANCED), "section end without a matching begin");
    assert_string_equal(sonde_err_name(SONDE_ENOMEM), "SONDE_ENOMEM");

    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "misuse");
    sonde_profiler *p = sonde_create(&c);
    assert_int_equal(sonde_end(p), SONDE_EUNBALANCED);
    assert_int_equal(sonde_begin(p, NULL), SONDE_EINVAL);
    assert_int_equal(sonde_metric(p, "m", NAN), SONDE_EINVAL);
    assert_int_equal(sonde_counter(p, "c", INFINITY), SONDE_EINVAL);
    assert_int_equal(sonde_throughput(p, -1, 1), SONDE_EINVAL);
    /* a name, key or value over SONDE_MAX_NAME bytes is refused, and nothing is recorded */
    char *huge = malloc(SONDE_MAX_NAME + 2);
    assert_non_null(huge);
    memset(huge, 'n', SONDE_MAX_NAME + 1);
    huge[SONDE_MAX_NAME + 1] = 0;
    assert_int_equal(sonde_begin(p, huge), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "longer than 65535 bytes"));
    assert_int_equal(sonde_metadata(p, "k", huge), SONDE_EINVAL);
    assert_int_equal(sonde_event(p, huge), SONDE_EINVAL);
    /* issue 14.16: a unit too long is bad input, not an out-of-memory */
    assert_int_equal(sonde_throughput_unit(p, 1, 1, huge), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "the unit is longer than 65535 bytes"));
    huge[SONDE_MAX_NAME] = 0; /* exactly the limit is fine */
    assert_int_equal(sonde_event(p, huge), 0);
    free(huge);
    sonde_begin(p, "left open");
    sonde_begin(p, "nested open");
    sm_model m;
    assert_int_equal(tu_finish(p, &m), SONDE_EOPEN);
    assert_int_equal((int)m.n_spans, 2);
    assert_true(m.spans[0].flags & SM_SPAN_UNTERMINATED);
    int open_w = 0, unb_w = 0, nf_w = 0;
    for (size_t i = 0; i < m.n_warnings; i++) {
        open_w |= strstr(m.warnings[i], "left open > nested open") != NULL;
        unb_w |= strstr(m.warnings[i], "sonde_end") != NULL;
        nf_w |= strstr(m.warnings[i], "non-finite") != NULL;
    }
    assert_true(open_w && unb_w && nf_w);
    sm_free(&m);
    tu_rmrf(dir);
}

static void disabled_is_a_no_op(void **state)
{
    (void)state;
    char dir[256], sub[300];
    tu_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/never", dir);
    sonde_config c = tu_config(sub, "off");
    c.enabled = 0;
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    {
        SONDE_SCOPE(p, "x");
        assert_int_equal(sonde_begin(p, "y"), 0);
        assert_int_equal(sonde_end(p), 0);
        assert_int_equal(sonde_metric(p, "m", 1), 0);
        assert_int_equal(sonde_step(p), 0);
    }
    assert_null(sonde_file_path(p));
    assert_int_equal(sonde_export(p, NULL), SONDE_ESTATE);
    assert_int_equal(sonde_destroy(p), 0);
    struct stat st;
    assert_int_equal(stat(sub, &st), -1); /* nothing written, not even the directory */
    tu_rmrf(dir);
}

static void clear_discards_earlier(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "clear");
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 10; i++) {
        SONDE_SCOPE(p, "before");
    }
    sonde_metric(p, "old", 1);
    assert_int_equal(sonde_clear(p), 0);
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(p, "after");
    }
    sm_model m;
    tu_finish(p, &m);
    assert_null(tu_stat(&m, "before"));
    assert_int_equal((int)tu_stat(&m, "after")->count, 3);
    assert_int_equal((int)m.n_metrics, 0);
    sm_free(&m);
    tu_rmrf(dir);
}

/* min_duration_s: short instances are left out of the model and counted; a long parent keeps
 * its children's time as time in children; a short section that carries throughput stays. */
static void min_duration_leaves_out_short(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "short");
    c.min_duration_s = 0.002;
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(p, "long");
        for (int k = 0; k < 50; k++) {
            SONDE_SCOPE(p, "short");
        }
        tu_spin_ms(3);
    }
    sonde_begin(p, "short with units");
    sonde_throughput(p, 10, 0.5);
    sonde_end(p);
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)tu_stat(&m, "long")->count, 3);
    assert_null(tu_stat(&m, "short"));
    assert_int_equal((int)tu_stat(&m, "short with units")->count, 1);
    assert_int_equal((int)m.short_spans, 150);
    assert_int_equal((int)m.n_spans, 4);
    for (size_t i = 0; i < m.n_spans; i++)
        assert_int_equal(m.spans[i].parent, -1);
    assert_int_equal((int)m.threads[0].spans, 4);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_txt(&m, &b), 0);
    assert_non_null(strstr(b.data, "Left out: 150 section instances shorter than min_duration_s"));
    sbuf_reset(&b);
    assert_int_equal(sx_json(&m, &b), 0);
    assert_non_null(strstr(b.data, "\"short_sections_left_out\":150"));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The run's statistics are fed as each section closes while the model is built; sm_stats
 * computes them from the kept spans in start order. Both must agree on every figure: recursion
 * (a nested instance of a name is in its outer one's total, not again), a name past
 * SM_SKETCH_AT instances (running figures and its sketch), throughput over a section's own
 * duration, FLOPs, two threads, and sections left out under min_duration_s. */
static void *second_thread(void *arg)
{
    sonde_profiler *p = arg;
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(p, "rec");
        tu_spin_ms(0.3);
    }
    return NULL;
}

/* Two statistics tables are the same, figure by figure. */
static void stats_equal(const sm_stat *x, size_t nx, const sm_stat *y, size_t ny)
{
    assert_int_equal((int)nx, (int)ny);
    for (size_t i = 0; i < nx; i++) {
        const sm_stat *a = &x[i], *b = &y[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal((int)a->count, (int)b->count);
        assert_int_equal((int)a->threads, (int)b->threads);
        assert_int_equal(a->min_depth, b->min_depth);
        assert_int_equal(a->sketched, b->sketched);
        assert_true(a->min_s == b->min_s && a->max_s == b->max_s && a->p50_s == b->p50_s &&
                    a->p90_s == b->p90_s && a->p99_s == b->p99_s);
        assert_true(a->units == b->units && a->flops == b->flops);
        const double af[] = {a->total_s, a->self_s, a->mean_s, a->stddev_s, a->units_s,
                             a->flops_time_s, a->share};
        const double bf[] = {b->total_s, b->self_s, b->mean_s, b->stddev_s, b->units_s,
                             b->flops_time_s, b->share};
        for (size_t k = 0; k < sizeof af / sizeof af[0]; k++) /* summed in another order */
            assert_true(fabs(af[k] - bf[k]) <= 1e-9 * fabs(bf[k]) + 1e-15);
    }
}

static void build_stats_equal_span_stats(void **state)
{
    (void)state;
    for (int with_min = 0; with_min < 2; with_min++) {
        char dir[256];
        tu_tmpdir(dir, sizeof dir);
        sonde_config c = tu_config(dir, "feed");
        c.min_duration_s = with_min ? 0.0002 : 0;
        sonde_profiler *p = sonde_create(&c);
        assert_non_null(p);
        for (int i = 0; i < 4; i++) { /* rec inside rec inside rec */
            sonde_begin(p, "rec");
            tu_spin_ms(0.2);
            sonde_begin(p, "other");
            sonde_begin(p, "rec");
            tu_spin_ms(0.3);
            sonde_begin(p, "rec"); /* short: left out under min_duration_s */
            sonde_end(p);
            sonde_end(p);
            sonde_end(p);
            sonde_end(p);
        }
        for (int i = 0; i < (int)SM_SKETCH_AT + 2000; i++) {
            sonde_begin(p, "many");
            if (i % 1000 == 0)
                tu_spin_ms(0.3);
            sonde_end(p);
        }
        for (int i = 0; i < 3; i++) {
            sonde_begin(p, "gen");
            sonde_throughput(p, 100, 0);
            tu_spin_ms(0.1);
            sonde_end(p);
            sonde_begin(p, "mm");
            sonde_flops(p, 1e6);
            sonde_end(p);
        }
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, second_thread, p), 0);
        pthread_join(th, NULL);
        sm_model m;
        assert_int_equal(tu_finish(p, &m), 0);
        size_t n = 0;
        sm_stat *st = sm_stats(&m, SM_ALL_SPANS, (double)m.duration_ns / 1e9, &n);
        assert_non_null(st);
        assert_int_equal((int)n, 5);
        stats_equal(m.stats, m.n_stats, st, n);
        const sm_stat *rec = tu_stat(&m, "rec"), *many = tu_stat(&m, "many");
        /* a short one may be kept if the machine stalled it (a preemption): ranges */
        assert_true(with_min ? rec->count >= 11 && rec->count < 15 : rec->count == 15);
        assert_int_equal((int)rec->threads, 2);
        assert_true(rec->total_s < rec->mean_s * (double)rec->count); /* nested ones once */
        if (with_min)
            assert_true(many->count >= 12 && many->count < 1000 && !many->sketched);
        else
            assert_true(many->count == SM_SKETCH_AT + 2000 && many->sketched);
        assert_true(m.short_spans == (with_min ? 15 + SM_SKETCH_AT + 2000 - rec->count -
                                                     many->count : 0));
        assert_int_equal(tu_stat(&m, "gen")->units, 300);
        sm_stats_free(st, n);
        sm_free(&m);
        tu_rmrf(dir);
    }
}

static int count_slices(void *ctx, const char *data, size_t n);

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A CSV's lines sorted (rows come in another order when the file is read again); how many. */
static size_t csv_rows_sorted(sbuf *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        n += b->data[i] == '\n';
    char **line = malloc(n * sizeof *line), *p = b->data;
    assert_non_null(line);
    for (size_t i = 0; i < n; i++) { /* each line ended in place */
        char *nl = strchr(p, '\n');
        *nl = 0;
        line[i] = p;
        p = nl + 1;
    }
    qsort(line, n, sizeof *line, cmp_line);
    sbuf sorted;
    sbuf_init(&sorted);
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(&sorted, line[i]);
        sbuf_putc(&sorted, '\n');
    }
    free(line);
    sbuf_free(b);
    *b = sorted;
    return n;
}

/* 1 when the JSON gives the name "tagged" the metadata {"i": ["x", "y"]}. */
static int tagged_meta(const sm_model *m)
{
    sbuf j;
    sbuf_init(&j);
    assert_int_equal(sx_json(m, &j), 0);
    const char *at = strstr(j.data, "\"name\":\"tagged\"");
    const char *meta = at ? strstr(at, "\"metadata\":") : NULL;
    int ok = meta && !strncmp(meta, "\"metadata\":{\"i\":[\"x\",\"y\"]}", 26);
    sbuf_free(&j);
    return ok;
}

/* Held sections (report_max_sections): a run with more sections than the limit holds the
 * longest, and folds the rest as it is read (their metadata kept by name); its statistics, its
 * sessions' statistics and its counts are those of the whole run read with no limit, and the
 * folded runs account for every section not held. */
static void held_sections_report_the_whole_run(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "held");
    c.report_max_sections = 90; /* 30 held by their duration, at most */
    c.sample_hz = 999;          /* CPU samples, placed in sections as they are built */
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    sonde_session_begin(p, "warm");
    for (int i = 0; i < 40; i++) {
        sonde_begin(p, "step");
        tu_spin_ms(i % 8 ? 0.01 : 0.4);
        for (int k = 0; k < 5; k++) {
            sonde_begin(p, "leaf");
            if (k == 2) { /* recursive: once in the total */
                sonde_begin(p, "leaf");
                sonde_end(p);
            }
            sonde_end(p);
        }
        if (i % 10 == 0) { /* folded with its metadata, which its name keeps */
            sonde_begin(p, "tagged");
            sonde_metadata(p, "i", i % 20 ? "y" : "x");
            sonde_end(p);
        }
        sonde_end(p);
    }
    sonde_session_end(p);
    sonde_session_begin(p, "main");
    for (int i = 0; i < 300; i++) { /* short ones at the top level */
        sonde_begin(p, "tiny");
        sonde_end(p);
    }
    sonde_begin(p, "long");
    tu_spin_ms(1);
    sonde_end(p);
    for (int i = 0; i < 30; i++) { /* short sections that hold samples: folded */
        sonde_begin(p, "sampled");
        tu_cpu_spin_ms(1); /* samples follow CPU time: 30 ms of it, however loaded */
        sonde_end(p);
    }
    sonde_session_end(p);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, second_thread, p), 0);
    pthread_join(th, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    assert_int_equal(sonde_destroy(p), 0);
    sm_model h, f;
    assert_int_equal(sm_read_file(path, &h), 0);
    const sm_kv all = {"config.report_max_sections", "0"};
    assert_int_equal(sm_read_file_set(path, &all, 1, &f), 0);
    assert_int_equal((int)f.sections_folded, 0);
    assert_true(h.sections_folded > 0 && h.held_min_ns > 0);
    assert_int_equal((int)sm_sections(&h), (int)f.n_spans);
    assert_int_equal((int)sm_sections(&h), 40 * 7 + 4 + 301 + 30 + 3);
    assert_int_equal((int)h.total_sections, (int)f.total_sections);
    size_t by_duration = 0;
    for (size_t i = 0; i < h.n_spans; i++) {
        const sm_span *s = &h.spans[i];
        /* at least the cut, or in the histogram's bucket just under it (1.6% wide) */
        int long_enough = (double)(s->end_ns - s->start_ns) * 1.016 >= (double)h.held_min_ns;
        by_duration += long_enough;
        if (!long_enough && s->x < 0) { /* else a held section is nested in it */
            assert_true(i + 1 < h.n_spans && h.spans[i + 1].parent == (int32_t)i);
        }
    }
    assert_true(by_duration <= 30);
    uint64_t threads_h = 0, threads_f = 0, folded = 0;
    for (size_t t = 0; t < h.n_threads; t++) {
        threads_h += h.threads[t].spans;
        threads_f += f.threads[t].spans;
    }
    assert_int_equal((int)threads_h, (int)threads_f);
    for (size_t i = 0; i < h.n_folds; i++) {
        const sm_fold_run *r = &h.folds[i];
        assert_true(r->n >= 1 && r->folded >= r->n && r->end_ns >= r->start_ns);
        assert_true(r->box < (int32_t)h.n_spans && r->closer < (int32_t)h.n_spans);
        assert_true(r->closer < 0 || h.spans[r->closer].start_ns >= r->end_ns);
        assert_true(r->box < 0 || (h.spans[r->box].start_ns <= r->start_ns &&
                                   r->end_ns <= h.spans[r->box].end_ns));
        folded += r->folded;
    }
    assert_int_equal((int)folded, (int)h.sections_folded);
    assert_int_equal((int)h.trace.sections, (int)sm_sections(&h));
    assert_int_equal((int)h.trace.folded, (int)h.sections_folded);
    stats_equal(h.stats, h.n_stats, f.stats, f.n_stats);
    /* every CPU sample in the same section as when every section is held */
    assert_true(f.profile.in_sections > 0);
    assert_int_equal((int)h.profile.in_sections, (int)f.profile.in_sections);
    assert_int_equal((int)h.profile.n_sections, (int)f.profile.n_sections);
    for (size_t i = 0; i < f.profile.n_sections; i++) {
        assert_string_equal(h.profile.sections[i].name, f.profile.sections[i].name);
        assert_int_equal((int)h.profile.sections[i].samples, (int)f.profile.sections[i].samples);
    }
    assert_int_equal((int)h.n_sessions, 2);
    int32_t *sidx;
    size_t *sfirst;
    assert_int_equal(sm_session_spans(&f, &sidx, &sfirst), 0);
    for (int32_t i = 0; i < 2; i++) {
        const sm_session *se = &f.sessions[i];
        size_t n = 0, in = 0;
        for (size_t k = 0; k < f.n_spans; k++) /* the session's spans, as the bucket has them */
            if (f.spans[k].session == i)
                assert_int_equal(sidx[sfirst[i] + in++], (int)k);
        assert_int_equal((int)(sfirst[i + 1] - sfirst[i]), (int)in);
        sm_stat *st = sm_stats(&f, sm_session_sel(sidx, sfirst, (size_t)i),
                               (double)(se->end_ns - se->start_ns) / 1e9, &n);
        assert_non_null(st);
        assert_non_null(h.sessions[i].stats);
        stats_equal(h.sessions[i].stats, h.sessions[i].n_stats, st, n);
        sm_stats_free(st, n);
    }
    sonde__free(sidx);
    sonde__free(sfirst);
    size_t slices = 0;
    assert_int_equal(sx_trace(&h, count_slices, &slices), 0);
    assert_int_equal((int)slices, (int)(h.n_spans + h.n_folds));
    /* NAME.instances.csv reads the file again: every section's row, as the whole model's */
    sbuf ch, cf;
    sbuf_init(&ch);
    sbuf_init(&cf);
    assert_int_equal(sx_csv_instances(&h, &ch), 0);
    assert_int_equal(sx_csv_instances(&f, &cf), 0);
    assert_int_equal((int)csv_rows_sorted(&ch), 1 + (int)f.n_spans);
    assert_int_equal((int)csv_rows_sorted(&cf), 1 + (int)f.n_spans);
    assert_string_equal(ch.data, cf.data);
    sbuf_free(&ch);
    sbuf_free(&cf);
    /* ... or written as the file is read (sx_read_file): the bytes the second reading gives,
     * without it; a model that holds every section feeds none */
    char early[300], csv_path[400];
    snprintf(early, sizeof early, "%s/early", dir);
    sbuf want;
    sbuf_init(&want);
    assert_int_equal(sx_csv_instances(&h, &want), 0);
    sx_early e = {.dir = early, .formats = SONDE_FORMAT_INSTANCES};
    sm_model he;
    assert_int_equal(sx_read_file(path, NULL, 0, &e, &he), 0);
    assert_int_equal(he.fed, 1);
    assert_int_equal(e.open, 1);
    assert_int_equal(sx_write_formats_early(&he, early, he.name, SONDE_FORMAT_INSTANCES, &e), 0);
    snprintf(csv_path, sizeof csv_path, "%s/%s.instances.csv", early, he.name);
    char *got = NULL;
    size_t n_got = 0;
    assert_int_equal(sonde__read_input(csv_path, 1 << 26, &got, &n_got), 0);
    assert_int_equal((int)n_got, (int)want.len);
    assert_memory_equal(got, want.data, n_got);
    sonde__free(got);
    sbuf_free(&want);
    sm_free(&he);
    sx_early e_all = {.dir = early, .formats = SONDE_FORMAT_INSTANCES};
    assert_int_equal(sx_read_file(path, &all, 1, &e_all, &he), 0);
    assert_int_equal(he.fed, 0);
    assert_int_equal(e_all.open, 0);
    sm_free(&he);
    /* the JSON's metadata of a name: every instance's values, held or folded */
    assert_true(h.n_metasum > 0);
    size_t tagged_h = 0, tagged_f = 0;
    for (size_t i = 0; i < h.n_spans; i++)
        tagged_h += !strcmp(sm_str(&h, h.spans[i].site), "tagged");
    for (size_t i = 0; i < f.n_spans; i++)
        tagged_f += !strcmp(sm_str(&f, f.spans[i].site), "tagged");
    assert_int_equal((int)tagged_f, 4);
    assert_true(tagged_h < tagged_f); /* some folded: short, and nothing held in them */
    assert_int_equal(tagged_meta(&h), 1);
    assert_int_equal(tagged_meta(&f), 1);
    /* merged with another run (`sonde run` joins a program's children): the statistics combine
     * by name, as the whole runs' do */
    sm_model h2, f2;
    assert_int_equal(sm_read_file(path, &h2), 0);
    assert_int_equal(sm_read_file_set(path, &all, 1, &f2), 0);
    assert_int_equal(sm_merge(&h, &h2), 0);
    assert_int_equal(sm_merge(&f, &f2), 0);
    sm_free(&h2);
    sm_free(&f2);
    assert_int_equal((int)sm_sections(&h), (int)f.n_spans);
    assert_int_equal((int)h.trace.folded, (int)h.sections_folded);
    assert_int_equal((int)h.n_stats, (int)f.n_stats);
    for (size_t i = 0; i < f.n_stats; i++) {
        const sm_stat *a = tu_stat(&h, f.stats[i].name), *b = &f.stats[i];
        assert_non_null(a);
        assert_int_equal((int)a->count, (int)b->count);
        assert_int_equal((int)a->threads, (int)b->threads);
        assert_true(fabs(a->total_s - b->total_s) <= 1e-9 * b->total_s + 1e-15);
        assert_true(fabs(a->mean_s - b->mean_s) <= 1e-9 * b->mean_s + 1e-15);
        assert_true(fabs(a->stddev_s - b->stddev_s) <= 1e-6 * b->mean_s + 1e-12);
        assert_true(a->min_s == b->min_s && a->max_s == b->max_s);
    }
    slices = 0;
    assert_int_equal(sx_trace(&h, count_slices, &slices), 0);
    assert_int_equal((int)slices, (int)(h.n_spans + h.n_folds));
    assert_int_equal(tagged_meta(&h), 1);
    sm_free(&h);
    sm_free(&f);
    tu_rmrf(dir);
}

/* Held records (report_max_records): past the bound a report holds a share of each kind, spread
 * over the run, while every count, the counters' figures and the step statistics stay those of
 * the whole run read with no bound: a flood of one instant thins it alone (a rare name and
 * sonde's own keep every one, with their payloads), the held steps' durations are exact, and a
 * counter holds every 2^k-th sample. */
static const sm_step *step_numbered(const sm_model *m, uint64_t number)
{
    for (size_t i = 0; i < m->n_steps; i++)
        if (m->steps[i].number == number)
            return &m->steps[i];
    return NULL;
}

static void held_records_count_every_one(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "records");
    c.report_max_records = 1000;
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    const char *k[] = {"why"}, *v[] = {"rare"};
    for (int i = 0; i < 6000; i++) {
        sonde_event(p, "tick");
        if (i % 2000 == 1000)
            assert_int_equal(sonde_event_args(p, "rare", k, v, 1), 0);
        if (i % 300 == 0)
            sonde_sync(p);
        if (i % 2 == 0) {
            if (i % 6 == 0)
                sonde_step_begin(p);
            tu_spin_ms(i % 1000 == 500 ? 0.3 : 0.001); /* a few slow steps */
            sonde_step(p);
        }
        sonde_counter(p, "queue", (double)i);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    assert_int_equal(sonde_destroy(p), 0);
    sm_model h, f;
    assert_int_equal(sm_read_file(path, &h), 0);
    const sm_kv all = {"config.report_max_records", "0"};
    assert_int_equal(sm_read_file_set(path, &all, 1, &f), 0);
    /* instants: 6000 ticks, 3 rare ones, 20 syncs */
    assert_int_equal((int)f.n_instants, 6023);
    assert_int_equal((int)f.instants_thinned, 0);
    assert_true(h.n_instants <= 1000 && h.n_instants > 250);
    assert_int_equal((int)(h.n_instants + h.instants_thinned), 6023);
    size_t rare = 0, sync = 0, tick = 0;
    for (size_t i = 0; i < h.n_instants; i++) {
        const char *name = sm_str(&h, h.instants[i].name);
        if (!strcmp(name, "rare")) {
            rare++;
            assert_true(h.instants[i].args >= 0);
            assert_string_equal(sm_str(&h, h.meta[h.instants[i].args].value), "rare");
        }
        sync += !strcmp(name, "sonde.sync");
        if (!strcmp(name, "tick")) {
            tick++;
            assert_int_equal((int)h.sites[h.instants[i].name].instants, 6000);
            assert_true(h.sites[h.instants[i].name].instants_every >= 8);
        }
    }
    assert_int_equal((int)rare, 3);
    assert_int_equal((int)sync, 20);
    assert_true(tick > 0 && tick <= 1000 - 23);
    /* steps: 3000, each third begun by sonde_step_begin */
    assert_int_equal((int)f.total_steps, 3000);
    assert_int_equal((int)h.total_steps, 3000);
    assert_true(h.n_steps > 0 && h.n_steps <= 500 && h.steps_every > 1);
    assert_int_equal((int)h.steps_summary.count, (int)f.steps_summary.count);
    double mean = f.steps_summary.mean_s;
    assert_true(fabs(h.steps_summary.mean_s - mean) <= 1e-9 * mean);
    assert_true(h.steps_summary.min_s == f.steps_summary.min_s);
    assert_true(h.steps_summary.max_s == f.steps_summary.max_s);
    assert_true(h.steps_summary.first_s == f.steps_summary.first_s);
    assert_int_equal((int)h.steps[0].number, 0);
    for (size_t i = 0; i < h.n_steps; i++) { /* the held ones as the whole run has them */
        const sm_step *full = step_numbered(&f, h.steps[i].number);
        assert_non_null(full);
        assert_true(full->t_ns == h.steps[i].t_ns && full->start_ns == h.steps[i].start_ns);
        assert_int_equal(full->begun, h.steps[i].begun);
    }
    /* the counter: 6000 samples of 0..5999 */
    const sm_counter *hq = NULL, *fq = NULL;
    for (size_t i = 0; i < h.n_counters; i++)
        if (!strcmp(h.counters[i].name, "queue"))
            hq = &h.counters[i];
    for (size_t i = 0; i < f.n_counters; i++)
        if (!strcmp(f.counters[i].name, "queue"))
            fq = &f.counters[i];
    assert_true(hq && fq);
    assert_int_equal((int)fq->n, 6000);
    assert_int_equal((int)hq->samples, 6000);
    assert_true(hq->n <= 1000 && hq->n >= 500 && hq->stride >= 8);
    for (size_t i = 0; i < hq->n; i++)
        assert_true(hq->v[i] == (double)(i * hq->stride));
    assert_true(sm_counter_mean(hq) == sm_counter_mean(fq) && sm_counter_mean(hq) == 2999.5);
    assert_true(hq->min == 0 && hq->max == 5999 && hq->last == 5999 && fq->last == 5999);
    /* the JSON says so */
    sbuf j = {0};
    assert_int_equal(sx_json(&h, &j), 0);
    assert_non_null(strstr(j.data, "\"name\":\"tick\",\"count\":6000,\"every\":"));
    assert_non_null(strstr(j.data, "\"name\":\"rare\",\"count\":3,\"occurrences\""));
    assert_non_null(strstr(j.data, "\"durations_every\":"));
    assert_non_null(strstr(j.data, "\"samples\":6000"));
    sbuf_free(&j);
    sm_free(&h);
    sm_free(&f);
    tu_rmrf(dir);
}

/* Runs merged (sonde run joins a program's children): each step keeps the duration its own run
 * gave it, from its sonde_step_begin; the merge does not pair the steps of one run with the
 * ends of the other's. */
static void merged_runs_keep_their_steps(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "stepped");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    for (int i = 0; i < 6; i++) {
        tu_spin_ms(1); /* outside every step */
        sonde_step_begin(p);
        tu_spin_ms(0.2);
        sonde_step(p);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    assert_int_equal(sonde_destroy(p), 0);
    sm_model a, b, one;
    assert_int_equal(sm_read_file(path, &a), 0);
    assert_int_equal(sm_read_file(path, &b), 0);
    assert_int_equal(sm_read_file(path, &one), 0);
    assert_int_equal((int)one.n_steps, 6);
    assert_int_equal(sm_merge(&a, &b), 0);
    sm_free(&b);
    assert_int_equal((int)a.n_steps, 12);
    for (size_t i = 0; i < a.n_steps; i++) { /* each copy's step as the run has it */
        const sm_step *s = &a.steps[i], *o = &one.steps[i / 2];
        assert_true(s->begun);
        assert_true(s->t_ns - s->start_ns == o->t_ns - o->start_ns);
    }
    /* no step spans the time outside the steps: the longest is the run's own longest (a bound
     * in ms failed on a loaded machine, where a 0.2 ms step can be preempted past it) */
    assert_true(a.steps_summary.max_s == one.steps_summary.max_s);
    assert_true(a.steps_summary.min_s == one.steps_summary.min_s);
    sm_free(&a);
    sm_free(&one);
    tu_rmrf(dir);
}

/* An event's key/value payload travels with the event, not with the open section, into the
 * model, the JSON, the trace and the HTML; the limits are errors that record nothing. */
static int to_sbuf(void *ctx, const char *data, size_t n)
{
    return sbuf_add(ctx, data, n);
}

/* The trace budget holds however the folded runs fall: here every kept step has a run of its
 * own children and a run of the folded steps before it, two runs per kept section, which the
 * first budget (half of it kept) let reach 1.5 times the budget. */
static int count_slices(void *ctx, const char *data, size_t n)
{
    static const char sec[] = "\"cat\":\"section\"", fold[] = "\"cat\":\"folded\"";
    size_t *count = ctx;
    for (size_t i = 0; i + sizeof sec - 1 <= n; i++)
        if (!memcmp(data + i, sec, sizeof sec - 1) || !memcmp(data + i, fold, sizeof fold - 1))
            (*count)++;
    return 0;
}

static void trace_budget_holds(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "budget");
    c.trace_max_events = 300;
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 1000; i++) {
        sonde_begin(p, i % 2 ? "short" : "long");
        if (i % 2 == 0) {
            tu_spin_ms(0.02);
            for (int k = 0; k < 3; k++) {
                sonde_begin(p, "child");
                sonde_end(p);
            }
        }
        sonde_end(p);
    }
    sm_model m;
    tu_finish(p, &m);
    size_t n = 0;
    assert_int_equal(sx_trace(&m, count_slices, &n), 0);
    assert_true(m.trace.folded > 0);
    if (n > 300)
        fail_msg("%zu sections and folded slices in a trace of budget 300", n);
    sm_free(&m);
    tu_rmrf(dir);
}

static void event_args_travel_with_the_event(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "evargs");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    const char *keys[] = {"progress", "stage", "progress"};
    const char *vals[] = {"0.25", "denoise \"x\"", "0.5"};
    sonde_begin(p, "generate");
    assert_int_equal(sonde_event_args(p, "milestone", keys, vals, 3), 0);
    sonde_metadata(p, "batch", "8"); /* after the event: the section's */
    assert_int_equal(sonde_event_args(p, "plain", NULL, NULL, 0), 0);
    sonde_end(p);
    sonde_begin(p, "again"); /* a key set twice: once, at its last value, in the trace too */
    sonde_metadata(p, "round", "1");
    sonde_metadata(p, "round", "2");
    sonde_end(p);
    const char *many[SONDE_EVENT_ARGS_MAX + 1];
    for (int i = 0; i <= SONDE_EVENT_ARGS_MAX; i++)
        many[i] = "k";
    assert_int_equal(sonde_event_args(p, "too many", many, many, SONDE_EVENT_ARGS_MAX + 1),
                     SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "at most 64"));
    assert_int_equal(sonde_event_args(p, "null key", keys, NULL, 1), SONDE_EINVAL);
    const char *nk[] = {NULL};
    assert_int_equal(sonde_event_args(p, "null key", nk, vals, 1), SONDE_EINVAL);
    assert_int_equal(sonde_event_args(p, "full", many, many, SONDE_EVENT_ARGS_MAX), 0);
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)m.n_instants, 3);
    assert_string_equal(sm_str(&m, m.instants[0].name), "milestone");
    assert_true(m.instants[0].args >= 0);
    assert_int_equal(m.instants[1].args, -1);
    /* the section has batch only */
    assert_int_equal((int)m.n_spans, 2);
    int32_t k = sm_span_extra(&m, &m.spans[0])->meta;
    assert_true(k >= 0);
    assert_string_equal(sm_str(&m, m.meta[k].key), "batch");
    assert_int_equal(m.meta[k].next, -1);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_json(&m, &b), 0);
    assert_non_null(strstr(b.data, "{\"name\":\"milestone\",\"count\":1,\"occurrences\":[{\"t_s\":"));
    assert_non_null(strstr(b.data, "\"args\":{\"progress\":\"0.5\",\"stage\":\"denoise \\\"x\\\"\"}}],"
                                   "\"left_out\":0}"));
    assert_non_null(strstr(b.data, "{\"name\":\"plain\",\"count\":1,"));
    sbuf_reset(&b);
    assert_int_equal(sx_trace(&m, to_sbuf, &b), 0);
    assert_non_null(strstr(b.data, "\"args\":{\"progress\":\"0.5\",\"stage\":\"denoise \\\"x\\\"\"}}"));
    assert_non_null(strstr(b.data, "\"args\":{\"round\":\"2\"}"));
    assert_null(strstr(b.data, "\"round\":\"1\""));
    sbuf_reset(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    assert_non_null(strstr(b.data, "<h2 id=\"events\">Events</h2>\n<p>3 events</p>"));
    assert_non_null(strstr(b.data, "<span class=\"arg\">stage=denoise &quot;x&quot;</span>"));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Many events: the JSON keeps max_data_points occurrences per name and counts the rest, the
 * HTML lists the first 500 and says so. */
static void many_events_are_capped_and_counted(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "many");
    c.max_data_points = 10;
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    for (int i = 0; i < 501; i++)
        assert_int_equal(sonde_event(p, "tick"), 0);
    sm_model m;
    tu_finish(p, &m);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_json(&m, &b), 0);
    assert_non_null(strstr(b.data, "{\"name\":\"tick\",\"count\":501,"));
    assert_non_null(strstr(b.data, "\"left_out\":491}"));
    sbuf_reset(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    assert_non_null(strstr(b.data, "<p>501 events; the first 500 are listed"));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The reader hands a thread's events to the model a few thousand at a time: a section, an
 * event's arguments and the values of metrics and counters are whole across the batches. Each
 * round is 10 events, so the 4,096-event batches end at every even (or every odd) offset in a
 * round, inside an event's arguments among them. */
static void events_cross_the_reader_batches(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "batches");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    const int rounds = 5000;
    for (int i = 0; i < rounds; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d", i);
        const char *keys[] = {"a", "round", "z"}, *vals[] = {"x", v, "y"};
        assert_int_equal(sonde_begin(p, "outer"), 0);
        assert_int_equal(sonde_event_args(p, "tick", keys, vals, 3), 0);
        assert_int_equal(sonde_metric(p, "loss", (double)i), 0);
        assert_int_equal(sonde_counter(p, "queue", (double)i), 0);
        assert_int_equal(sonde_begin(p, "inner"), 0);
        assert_int_equal(sonde_end(p), 0);
        assert_int_equal(sonde_end(p), 0);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.n_warnings, 0);
    assert_int_equal((int)m.n_spans, 2 * rounds);
    for (size_t i = 0; i < m.n_spans; i++) { /* outer, inner, outer, ... each inner in its outer */
        const sm_span *s = &m.spans[i];
        assert_string_equal(sm_str(&m, s->site), i % 2 ? "inner" : "outer");
        assert_int_equal(s->parent, i % 2 ? (int32_t)i - 1 : -1);
    }
    assert_int_equal((int)m.n_instants, rounds);
    for (size_t i = 0; i < m.n_instants; i++) {
        int n = 0;
        for (int32_t k = m.instants[i].args; k >= 0; k = m.meta[k].next, n++)
            if (!strcmp(sm_str(&m, m.meta[k].key), "round"))
                assert_int_equal(atoi(sm_str(&m, m.meta[k].value)), (int)i);
        assert_int_equal(n, 3);
    }
    const sm_metric *loss = NULL;
    for (size_t i = 0; i < m.n_metrics; i++)
        if (!strcmp(m.metrics[i].name, "loss"))
            loss = &m.metrics[i];
    assert_non_null(loss);
    assert_int_equal((int)loss->count, rounds);
    assert_true(loss->sum == (double)rounds * (rounds - 1) / 2 && loss->last == rounds - 1);
    const sm_counter *q = NULL;
    for (size_t i = 0; i < m.n_counters; i++)
        if (!strcmp(m.counters[i].name, "queue"))
            q = &m.counters[i];
    assert_non_null(q);
    assert_int_equal((int)q->n, rounds);
    for (size_t i = 0; i < q->n; i++)
        assert_true(q->v[i] == (double)i);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Calls through a handle after sonde_destroy (another thread that has not heard yet) return
 * SONDE_ESTATE and record nothing; SONDE_SCOPE is a no-op; a second destroy is an error. */
static void *late_caller(void *arg)
{
    sonde_profiler *p = arg;
    long bad = 0;
    bad += sonde_begin(p, "late") != SONDE_ESTATE;
    bad += sonde_end(p) != SONDE_ESTATE;
    bad += sonde_metric(p, "m", 1) != SONDE_ESTATE;
    bad += sonde_step(p) != SONDE_ESTATE;
    bad += sonde_session_begin(p, "s") != SONDE_ESTATE;
    bad += sonde_export(p, NULL) != SONDE_ESTATE;
    bad += sonde_status(p) != SONDE_ESTATE;
    bad += sonde_summary(p) != NULL;
    bad += sonde_config_of(p) != NULL;
    for (int i = 0; i < 1000; i++) {
        SONDE_SCOPE(p, "late scope");
    }
    return (void *)bad;
}

static void calls_after_destroy(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "late");
    sonde_profiler *p = sonde_create(&c);
    pthread_t th;
    for (int i = 0; i < 10; i++) {
        SONDE_SCOPE(p, "early");
    }
    assert_int_equal(sonde_destroy(p), 0);
    assert_int_equal(pthread_create(&th, NULL, late_caller, p), 0);
    void *bad;
    pthread_join(th, &bad);
    assert_int_equal((long)bad, 0);
    assert_int_equal(sonde_destroy(p), SONDE_ESTATE);
    assert_string_equal(sonde_last_error(), "sonde_destroy: the profiler was destroyed by sonde_destroy");
    /* what was recorded before is all in the file, nothing after */
    sm_model m;
    char path[4200];
    snprintf(path, sizeof path, "%s/late.sonde", dir);
    assert_int_equal(sm_read_file(path, &m), 0);
    assert_int_equal((int)tu_stat(&m, "early")->count, 10);
    assert_null(tu_stat(&m, "late"));
    assert_null(tu_stat(&m, "late scope"));
    sm_free(&m);
    tu_rmrf(dir);
}

/* A SONDE_SCOPE open when sonde_destroy runs ends afterwards: on the destroying thread, and on a
 * worker still inside its scope. Its end goes nowhere (no write into freed chunks: ASan checks
 * it in `make test`), and the report, written at destroy, has the scopes closed (issue 36 #1). */
static pthread_mutex_t g_gate = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_inside; /* release/acquire: the worker's scope opened before the test goes on */

static void *scoped_worker(void *arg)
{
    sonde_profiler *p = arg;
    SONDE_SCOPE(p, "worker scope");
    atomic_store_explicit(&g_inside, 1, memory_order_release);
    pthread_mutex_lock(&g_gate); /* held by the test until sonde_destroy has returned */
    pthread_mutex_unlock(&g_gate);
    return NULL;
}

static void scope_outlives_destroy(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "outlive");
    sonde_profiler *p = sonde_create(&c);
    pthread_mutex_lock(&g_gate);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, scoped_worker, p), 0);
    while (!atomic_load_explicit(&g_inside, memory_order_acquire))
        usleep(1000);
    {
        SONDE_SCOPE(p, "main scope");
        assert_int_equal(sonde_destroy(p), SONDE_EOPEN); /* both scopes still open */
    } /* ends here, after the destroy */
    pthread_mutex_unlock(&g_gate); /* the worker's scope ends now */
    pthread_join(th, NULL);
    sm_model m;
    char path[4200];
    snprintf(path, sizeof path, "%s/outlive.sonde", dir);
    assert_int_equal(sm_read_file(path, &m), 0);
    assert_int_equal((int)tu_stat(&m, "main scope")->count, 1);
    assert_int_equal((int)tu_stat(&m, "worker scope")->count, 1);
    sm_free(&m);
    tu_rmrf(dir);
}

static void export_and_summary(void **state)
{
    (void)state;
    char dir[256], path[512];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "exp");
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 4; i++) {
        SONDE_SCOPE(p, "work");
        tu_spin_ms(1);
        sonde_throughput(p, 10, 0.5);
    }
    static const char *exts[] = {".json", ".csv", ".instances.csv", ".txt", ".trace.json.gz",
                                 ".samples.csv"};
    for (size_t i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/mid%s", dir, exts[i]);
        assert_int_equal(sonde_export(p, path), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size > 20);
    }
    snprintf(path, sizeof path, "%s/mid.xml", dir);
    assert_int_equal(sonde_export(p, path), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "mid.xml"));
    sonde_summary_t *s = sonde_summary(p);
    assert_non_null(s);
    assert_int_equal((int)s->sections, 4);
    assert_int_equal((int)s->n_stats, 1);
    assert_string_equal(s->stats[0].name, "work");
    assert_int_equal((int)s->stats[0].count, 4);
    assert_true(s->units == 40 && fabs(s->units_per_s - 20) < 1e-9);
    assert_string_equal(s->unit, "tokens");
    assert_true(s->stats[0].p50_s >= 0.001);
    assert_true(s->total_duration_s >= s->stats[0].total_s);
    sonde_summary_free(s);
    /* every configured format at destroy */
    sonde_destroy(p);
    c.formats = SONDE_FORMAT_ALL;
    c.record_shapes = 1;
    p = sonde_create(&c);
    assert_string_equal(sonde_name(p), "exp-2"); /* the name was taken: suffixed */
    sonde_event(p, "e");
    sonde_counter(p, "queue", 3);
    {
        SONDE_SCOPE(p, "shaped");
        int64_t dims[] = {8, 77, 512};
        assert_int_equal(sonde_shape(p, "input", dims, 3), 0);
    }
    char json[600];
    snprintf(json, sizeof json, "%s/exp-2.json", dir);
    assert_int_equal(sonde_destroy(p), 0);
    char nosamples[600]; /* no CPU samples: no empty NAME.folded or NAME.pb.gz */
    snprintf(nosamples, sizeof nosamples, "%s/exp-2.folded", dir);
    assert_int_equal(access(nosamples, F_OK), -1);
    snprintf(nosamples, sizeof nosamples, "%s/exp-2.pb.gz", dir);
    assert_int_equal(access(nosamples, F_OK), -1);
    snprintf(nosamples, sizeof nosamples, "%s/exp-2.pftrace", dir); /* but every other one */
    assert_int_equal(access(nosamples, F_OK), 0);
    FILE *jf = fopen(json, "r");
    static char jbuf[1 << 16];
    size_t jn = fread(jbuf, 1, sizeof jbuf - 1, jf);
    fclose(jf);
    jbuf[jn] = 0;
    assert_non_null(strstr(jbuf, "\"metadata\":{\"input\":[\"[8, 77, 512]\"]}"));
    for (size_t i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/exp-2%s", dir, exts[i]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
    }
    tu_rmrf(dir);
}

/* The bytes of dir/name, NUL-terminated (the test fails when it cannot be read). */
static char *file_of(const char *dir, const char *name, size_t *n)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *got = NULL;
    assert_int_equal(sonde__read_input(path, 1 << 26, &got, n), 0);
    return got;
}

/* The reports made from the model alone (the trace, the .pftrace) are written on threads of
 * their own beside the text ones (export.c's write_formats): the same bytes as written in turn,
 * and failures told as in turn: the first failing format's code, the last one's text, the
 * others written. */
static void reports_written_on_several_threads(void **state)
{
    (void)state;
    char dir[256], one[400], three[400], bad[400], blocker[500];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "par");
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 200; i++) {
        sonde_begin(p, i % 2 ? "even" : "odd");
        sonde_counter(p, "queue", i);
        sonde_end(p);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    unsigned fmts = SONDE_FORMAT_JSON | SONDE_FORMAT_TXT | SONDE_FORMAT_CSV |
                    SONDE_FORMAT_TRACE | SONDE_FORMAT_PERFETTO | SONDE_FORMAT_SAMPLES;
    snprintf(one, sizeof one, "%s/one", dir);
    snprintf(three, sizeof three, "%s/three", dir);
    setenv("SONDE_READ_THREADS", "1", 1);
    assert_int_equal(sx_write_formats(&m, one, "r", fmts), 0);
    setenv("SONDE_READ_THREADS", "3", 1);
    assert_int_equal(sx_write_formats(&m, three, "r", fmts), 0);
    static const char *const names[] = {"r.json", "r.txt", "r.csv", "r.trace.json.gz",
                                        "r.pftrace", "r.samples.csv"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n1, n3;
        char *a = file_of(one, names[i], &n1), *b = file_of(three, names[i], &n3);
        assert_true(n1 > 20);
        assert_int_equal(n1, n3);
        assert_memory_equal(a, b, n1);
        sonde__free(a);
        sonde__free(b);
    }
    /* the trace's and the .pftrace's places taken by directories: both fail, on two threads */
    snprintf(bad, sizeof bad, "%s/bad", dir);
    assert_int_equal(mkdir(bad, 0755), 0);
    snprintf(blocker, sizeof blocker, "%s/r.trace.json.gz", bad);
    assert_int_equal(mkdir(blocker, 0755), 0);
    snprintf(blocker, sizeof blocker, "%s/r.pftrace", bad);
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_equal(sx_write_formats(&m, bad, "r", fmts), SONDE_EIO);
    assert_non_null(strstr(sonde_last_error(), "r.pftrace"));
    size_t n;
    sonde__free(file_of(bad, "r.json", &n)); /* the others written */
    assert_true(n > 20);
    sonde__free(file_of(bad, "r.samples.csv", &n));
    unsetenv("SONDE_READ_THREADS");
    sm_free(&m);
    tu_rmrf(dir);
}

/* A folded run's label, as the trace and the .pftrace name it: printf's text, made without it
 * (budget.c). */
static void fold_labels(void **state)
{
    (void)state;
    char name[600];
    memset(name, 'n', 500);
    name[500] = 0;
    sm_site sites[2] = {{.name = "matmul"}, {.name = name}};
    sm_model m;
    memset(&m, 0, sizeof m);
    m.sites = sites;
    m.n_sites = 2;
    char want[512];
    const sm_fold_run runs[] = {{.site = 0, .n = 35, .sum_ns = 2499},
                                {.site = 0, .mixed = 1, .n = 1234567, .sum_ns = 12345678901ull},
                                {.site = 0, .n = 0, .sum_ns = 0},
                                {.site = 1, .n = 18446744073709551615ull, .sum_ns = 500}};
    sbuf got;
    sbuf_init(&got);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const sm_fold_run *r = &runs[i];
        unsigned long long us = (unsigned long long)(r->sum_ns + 500) / 1000;
        if (r->mixed)
            snprintf(want, sizeof want, "%llu sections (%llu.%03llu ms)",
                     (unsigned long long)r->n, us / 1000, us % 1000);
        else
            snprintf(want, sizeof want, "%.400s x %llu (%llu.%03llu ms)",
                     m.sites[r->site].name, (unsigned long long)r->n, us / 1000, us % 1000);
        sbuf_reset(&got);
        assert_int_equal(sm_fold_label(&m, r, &got), 0);
        assert_string_equal(got.data, want);
    }
    sbuf_free(&got);
}

static void unwritable_dir_degrades(void **state)
{
    (void)state;
    char dir[256], sub[300];
    tu_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/file", dir);
    FILE *f = fopen(sub, "w");
    fclose(f);
    snprintf(sub, sizeof sub, "%s/file/below", dir); /* a regular file in the way */
    sonde_config c = tu_config(sub, "nowhere");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_status(p), SONDE_EIO);
    {
        SONDE_SCOPE(p, "still fine");
        assert_int_equal(sonde_metric(p, "x", 1), 0);
    }
    assert_int_equal(sonde_destroy(p), SONDE_EIO);
    tu_rmrf(dir);
}

/* Issue 36 #6: a unit longer than a name may be (here 200 KiB; it overflowed the header's
 * buffer at 192 KiB) is refused with a status and a warning, the run goes on in "tokens", and
 * a key's value that long is "longer than 65535 bytes", not "out of memory". */
static void overlong_unit_is_refused(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    size_t n = 200 * 1024;
    char *unit = malloc(n + 1);
    assert_non_null(unit);
    memset(unit, 'u', n);
    unit[n] = 0;
    sonde_config c = tu_config(dir, "longunit");
    c.unit = unit;
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_status(p), SONDE_EINVAL);
    {
        SONDE_SCOPE(p, "work");
        assert_int_equal(sonde_throughput(p, 5, 1.0), 0);
    }
    sm_model m;
    tu_finish(p, &m);
    assert_string_equal(m.unit, "tokens");
    int warned = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        warned |= strstr(m.warnings[i], "longer than 65535 bytes") != NULL;
    assert_true(warned);
    sm_free(&m);
    sonde_config k = sonde_config_default();
    unit[70 * 1024] = 0;
    assert_int_equal(sonde_config_set(&k, "unit", unit), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "is longer than 65535 bytes"));
    free(unit);
    tu_rmrf(dir);
}

static void config_env(void **state)
{
    (void)state;
    sonde_config c = sonde_config_default();
    assert_int_equal(c.enabled, 1);
    assert_string_equal(c.output_dir, "./sonde-out");
    assert_true(c.buffer_mb == 64);
    setenv("SONDE_ENABLED", "off", 1);
    setenv("SONDE_OUTPUT_DIR", "/tmp/x", 1);
    setenv("SONDE_NAME", "envrun", 1);
    setenv("SONDE_FORMATS", "json,trace", 1);
    setenv("SONDE_BUFFER_MB", "8", 1);
    assert_int_equal(sonde_config_from_env(&c), 0);
    assert_int_equal(c.enabled, 0);
    assert_string_equal(c.output_dir, "/tmp/x");
    assert_string_equal(c.name, "envrun");
    assert_int_equal(c.formats, SONDE_FORMAT_JSON | SONDE_FORMAT_TRACE);
    assert_true(c.buffer_mb == 8);
    sonde_config before = c;
    setenv("SONDE_BUFFER_MB", "0.5", 1);
    assert_int_equal(sonde_config_from_env(&c), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "SONDE_BUFFER_MB"));
    assert_memory_equal(&c, &before, sizeof c); /* unchanged on error */
    setenv("SONDE_BUFFER_MB", "8", 1);
    setenv("SONDE_FORMATS", "json,pdf", 1);
    assert_int_equal(sonde_config_from_env(&c), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "pdf"));
    setenv("SONDE_FORMATS", "all", 1);
    setenv("SONDE_ENABLED", "maybe", 1);
    assert_int_equal(sonde_config_from_env(&c), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "SONDE_ENABLED"));
    unsetenv("SONDE_ENABLED");
    unsetenv("SONDE_OUTPUT_DIR");
    unsetenv("SONDE_NAME");
    unsetenv("SONDE_FORMATS");
    unsetenv("SONDE_BUFFER_MB");
    /* a bad struct value: the profiler still works, with the default and a warning */
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    c = tu_config(dir, "badcfg");
    c.buffer_mb = -3;
    sonde_profiler *p = sonde_create(&c);
    assert_int_equal(sonde_status(p), SONDE_EINVAL);
    {
        SONDE_SCOPE(p, "ok");
    }
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)tu_stat(&m, "ok")->count, 1);
    assert_non_null(strstr(m.warnings[0], "buffer_mb"));
    sm_free(&m);
    tu_rmrf(dir);
}

/* More threads than chunks: the ones without a chunk drop and count, never wait. */
typedef struct hold {
    sonde_profiler *p;
    pthread_barrier_t *bar;
} hold;

static void *holder(void *arg)
{
    hold *h = arg;
    for (int i = 0; i < 100; i++) {
        SONDE_SCOPE(h->p, "held");
    }
    pthread_barrier_wait(h->bar); /* everyone still owns its chunk here */
    pthread_barrier_wait(h->bar);
    return NULL;
}

/* n threads running fn, each holding its buffer chunk until holders_stop. */
typedef struct holders {
    pthread_t th[32];
    hold h[32];
    pthread_barrier_t bar;
    int n;
} holders;

static void holders_start(holders *hs, sonde_profiler *p, int n, void *(*fn)(void *))
{
    hs->n = n;
    pthread_barrier_init(&hs->bar, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        hs->h[i].p = p;
        hs->h[i].bar = &hs->bar;
        pthread_create(&hs->th[i], NULL, fn, &hs->h[i]);
    }
    pthread_barrier_wait(&hs->bar); /* each has recorded and still holds its chunk */
}

static void holders_stop(holders *hs)
{
    pthread_barrier_wait(&hs->bar);
    for (int i = 0; i < hs->n; i++)
        pthread_join(hs->th[i], NULL);
    pthread_barrier_destroy(&hs->bar);
}

static void full_buffers_drop_and_count(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "drops");
    c.buffer_mb = 1; /* 16 chunks of 64 KiB */
    sonde_profiler *p = sonde_create(&c);
    holders hs;
    holders_start(&hs, p, 20, holder);
    sonde_summary_t *s = sonde_summary(p);
    assert_non_null(s);
    /* 4 threads found no chunk: each dropped section is one event (its end is never recorded) */
    assert_int_equal((int)s->dropped_events, 400);
    assert_int_equal((int)s->sections, 1600);
    sonde_summary_free(s);
    holders_stop(&hs);
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)m.dropped_events, 400);
    assert_int_equal((int)tu_stat(&m, "held")->count, 1600);
    int warned = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        warned |= strstr(m.warnings[i], "dropped") != NULL;
    assert_true(warned);
    sm_free(&m);
    tu_rmrf(dir);
}

/* A sonde_begin dropped for lack of buffer space drops its sonde_end too, so the end cannot close
 * the enclosing section. A drop happens only to a thread that holds no chunk while every chunk
 * is held by another live thread (back-pressure recycles a thread's own chunk otherwise). */
static void *hold_one_chunk(void *arg)
{
    hold *h = arg;
    sonde_event(h->p, "holding");
    pthread_barrier_wait(h->bar);
    pthread_barrier_wait(h->bar);
    return NULL;
}

static void dropped_begin_drops_its_end(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "dropend");
    c.buffer_mb = 1; /* 16 chunks of 4096 slots */
    sonde_profiler *p = sonde_create(&c);
    holders hs;
    holders_start(&hs, p, 16, hold_one_chunk); /* every chunk is taken before this thread records */
    assert_int_equal(sonde_begin(p, "outer"), SONDE_EDROPPED);
    assert_int_equal(sonde_begin(p, "inner"), SONDE_EDROPPED);
    assert_int_equal(sonde_end(p), SONDE_EDROPPED); /* inner's */
    assert_int_equal(sonde_end(p), SONDE_EDROPPED); /* outer's */
    holders_stop(&hs);
    /* the exited threads' chunks come back once written (by the writer, or by this thread) */
    int rc = SONDE_EDROPPED;
    for (int tries = 0; tries < 500 && rc != 0; tries++) {
        rc = sonde_begin(p, "after");
        if (rc)
            usleep(10000);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(sonde_begin(p, "inner"), 0);
    assert_int_equal(sonde_end(p), 0);
    assert_int_equal(sonde_end(p), 0);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_null(tu_stat(&m, "outer"));
    assert_int_equal((int)tu_stat(&m, "after")->count, 1);
    assert_int_equal((int)tu_stat(&m, "inner")->count, 1);
    for (size_t i = 0; i < m.n_spans; i++)
        assert_int_equal(m.spans[i].flags, 0); /* each closed by its own end */
    assert_true(m.dropped_events >= 2);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Back-pressure: while the writer cannot write (its lock held here), threads that fill every
 * chunk write their own and go on; nothing is dropped and every section is in the report. */
enum { BP_THREADS = 3, BP_SECTIONS = 60000 };

static void *bp_record(void *arg)
{
    sonde_profiler *p = arg;
    for (int i = 0; i < BP_SECTIONS; i++) {
        SONDE_SCOPE(p, "pressed");
    }
    return NULL;
}

static void writer_behind_is_back_pressure(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "pressure");
    c.buffer_mb = 1; /* 16 chunks of 4096 slots: 3 x 60,000 sections need 59 of them */
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    pthread_mutex_lock(&p->wlock); /* the writer thread stops here */
    pthread_t th[BP_THREADS];
    for (int i = 0; i < BP_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, bp_record, p), 0);
    /* wait (at most 10 s) until the free chunks are gone and a thread waits on the lock */
    for (int i = 0; i < 1000 && (uint32_t)atomic_load(&p->free_head) != SONDE_NO_CHUNK; i++)
        usleep(10000);
    usleep(20000);
    pthread_mutex_unlock(&p->wlock);
    for (int i = 0; i < BP_THREADS; i++)
        pthread_join(th[i], NULL);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.dropped_events, 0);
    assert_int_equal((int)tu_stat(&m, "pressed")->count, BP_THREADS * BP_SECTIONS);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Two threads in the same section at once: throughput and FLOP/s count wall time once. */
typedef struct par {
    sonde_profiler *p;
    pthread_barrier_t *bar;
} par;

static void *parallel_section(void *arg)
{
    par *a = arg;
    {
        SONDE_SCOPE(a->p, "parallel");
        pthread_barrier_wait(a->bar); /* both sections open from here: they overlap however */
        tu_spin_ms(30);               /* late either thread is scheduled */
        sonde_throughput_unit(a->p, 100, 0, "frames");
        sonde_flops(a->p, 1e9);
    }
    return NULL;
}

static void overlapping_sections_count_wall_time_once(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "overlap");
    sonde_profiler *p = sonde_create(&c);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    par a = {p, &bar};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, parallel_section, &a);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    sm_model m;
    tu_finish(p, &m);
    const sm_stat *x = tu_stat(&m, "parallel");
    assert_int_equal((int)x->count, 2);
    assert_true(x->units == 200 && x->flops == 2e9);
    /* both instances are open for the 30 ms after the barrier: their wall time is at least
     * that much under their summed time */
    assert_true(x->units_s >= 0.030 && x->units_s <= x->total_s - 0.030 + 1e-6);
    assert_true(fabs(x->flops_time_s - x->units_s) < 1e-9);
    assert_string_equal(m.rates[1].unit, "frames");
    assert_true(fabs(m.rates[1].seconds - x->units_s) < 1e-9);
    double u, us, f, fs;
    sm_totals(&m, &u, &us, &f, &fs);
    assert_true(f == 2e9 && fabs(fs - x->flops_time_s) < 1e-9);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The run's configuration is decoded once, when the model is built, and follows a fact set
 * over it afterwards (sonde export --set); sm_config copies it (issue 59). */
static void config_decoded_once(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "cfg");
    c.trace_max_events = 1234;
    c.max_data_points = 77;
    sonde_profiler *p = sonde_create(&c);
    sonde_begin(p, "x");
    sonde_end(p);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_true(m.cfg_read);
    assert_int_equal((int)m.cfg.trace_max_events, 1234);
    assert_int_equal((int)sm_trace_max_events(&m), 1234);
    assert_int_equal((int)sm_max_data_points(&m), 77);
    assert_int_equal(sm_set_info(&m, "config.trace_max_events", "99"), 0);
    assert_int_equal((int)sm_trace_max_events(&m), 99);
    assert_int_equal(sm_set_info(&m, "config.trace_max_events", "not a number"), 0);
    assert_int_equal((int)sm_trace_max_events(&m), (int)sonde_config_default().trace_max_events);
    assert_int_equal((int)sm_max_data_points(&m), 77); /* the others stay */
    sm_free(&m);
    tu_rmrf(dir);
}

/* A consumer of the reading (issue 59): the per-section count of instants is fed each instant
 * the reading keeps, with the section open on its thread; a name's sites count as one section
 * and the instants outside every section as "(no section)". */
static void instants_by_section_consumer(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "cons");
    sonde_profiler *p = sonde_create(&c);
    sonde_event(p, "boot");
    for (int i = 0; i < 3; i++) {
        sonde_begin(p, "load");
        sonde_event(p, "chunk");
        sonde_event(p, "chunk");
        sonde_begin(p, "parse"); /* the innermost open section takes the instant */
        sonde_event(p, "token");
        sonde_end(p);
        sonde_end(p);
    }
    {
        SONDE_SCOPE(p, "load"); /* a second site of the name "load" */
        sonde_event(p, "retry");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    assert_int_equal(sonde_destroy(p), 0);
    const sm_consumer *cons = sm_consumer_find("instants-by-section");
    assert_non_null(cons);
    assert_null(sm_consumer_find("no-such-table"));
    void *st = cons->start();
    assert_non_null(st);
    sm_model m;
    assert_int_equal(sm_read_file_ops(path, &cons, &st, 1, &m), 0);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(cons->print(st, &m, &b), 0);
    assert_string_equal(b.data, "section                            instants  most frequent\n"
                                "load                                      7  chunk x6, retry x1\n"
                                "parse                                     3  token x3\n"
                                "(no section)                              1  boot x1\n");
    sbuf_free(&b);
    cons->stop(st);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The page the profiler on port serves at /metrics, read whole into page (NUL-ended). */
static void scrape(unsigned port, char *page, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *ask = "GET /metrics HTTP/1.0\r\n\r\n";
    assert_int_equal(write(fd, ask, strlen(ask)), (ssize_t)strlen(ask));
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fd, page + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    page[n] = 0;
    close(fd);
}

/* The live metrics (metrics_port) count every section once, whether they follow it through the
 * writer's tally or, once the tally is off (a signal handler's flush, memory refused), by a walk
 * of their own: a section open when the tally goes off is counted as it ends, with its whole
 * duration. Mode 0: off in the middle, between two writer passes; 1: off from the start. */
static void live_metrics_outlive_the_tally(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        char dir[256];
        tu_tmpdir(dir, sizeof dir);
        sonde_config c = tu_config(dir, "live");
        unsigned port = bench_free_port();
        assert_true(port > 0);
        c.metrics_port = (int)port;
        c.flush_interval_s = 60; /* the passes are the test's */
        sonde_profiler *p = sonde_create(&c);
        assert_non_null(p);
        assert_non_null(p->live);
        if (mode)
            sonde__tally_off(p);
        assert_int_equal(sonde_begin(p, "outer"), 0);
        for (int i = 0; i < 10; i++) {
            assert_int_equal(sonde_begin(p, "inner"), 0);
            assert_int_equal(sonde_end(p), 0);
        }
        sonde__wlock(p);
        sonde__writer_pass(p, 1);
        sonde__wunlock(p);
        assert_int_equal(atomic_load(&p->tally_on), !mode);
        sonde__tally_off(p);
        tu_spin_ms(5);
        for (int i = 0; i < 10; i++) {
            assert_int_equal(sonde_begin(p, "inner"), 0);
            assert_int_equal(sonde_end(p), 0);
        }
        assert_int_equal(sonde_end(p), 0);
        sonde__wlock(p);
        sonde__writer_pass(p, 1);
        sonde__wunlock(p);
        char page[1 << 16];
        scrape(port, page, sizeof page);
        assert_non_null(strstr(page, "sonde_section_calls_total{run=\"live\",rank=\"\","
                                     "section=\"inner\"} 20\n"));
        assert_non_null(strstr(page, "sonde_section_calls_total{run=\"live\",rank=\"\","
                                     "section=\"outer\"} 1\n"));
        const char *key = "sonde_section_seconds_total{run=\"live\",rank=\"\",section=\"outer\"} ";
        const char *at = strstr(page, key);
        assert_non_null(at);
        double outer_s = strtod(at + strlen(key), NULL);
        assert_true(outer_s >= 0.005); /* from its begin, before the tally went off */
        assert_int_equal(sonde_destroy(p), 0);
        tu_rmrf(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sections_nest),
        cmocka_unit_test(attachments),
        cmocka_unit_test(sessions_steps_counters_events),
        cmocka_unit_test(step_begin_marks),
        cmocka_unit_test(misuse),
        cmocka_unit_test(disabled_is_a_no_op),
        cmocka_unit_test(clear_discards_earlier), cmocka_unit_test(min_duration_leaves_out_short),
        cmocka_unit_test(build_stats_equal_span_stats),
        cmocka_unit_test(held_sections_report_the_whole_run),
        cmocka_unit_test(calls_after_destroy),
        cmocka_unit_test(scope_outlives_destroy),
        cmocka_unit_test(export_and_summary),
        cmocka_unit_test(reports_written_on_several_threads),
        cmocka_unit_test(fold_labels),
        cmocka_unit_test(event_args_travel_with_the_event),
        cmocka_unit_test(many_events_are_capped_and_counted),
        cmocka_unit_test(events_cross_the_reader_batches),
        cmocka_unit_test(unwritable_dir_degrades), cmocka_unit_test(overlong_unit_is_refused),
        cmocka_unit_test(config_env), cmocka_unit_test(config_decoded_once),
        cmocka_unit_test(instants_by_section_consumer),
        cmocka_unit_test(full_buffers_drop_and_count),
        cmocka_unit_test(overlapping_sections_count_wall_time_once),
        cmocka_unit_test(dropped_begin_drops_its_end),
        cmocka_unit_test(writer_behind_is_back_pressure),
        cmocka_unit_test(trace_budget_holds),
        cmocka_unit_test(held_records_count_every_one),
        cmocka_unit_test(merged_runs_keep_their_steps),
        cmocka_unit_test(live_metrics_outlive_the_tally),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
