/* test_analyze.c - every recommendation rule with a run where it must fire and one where it must
 * not; the diffusion figures; the bottlenecks; the HTML report's escaping and sections. */
#define _GNU_SOURCE
#include "testutil.h"

#include <pthread.h>

#include <math.h>
#include <time.h>

#include "analyze/analyze.h"
#include "analyze/gpu.h"
#include "analyze/ranks.h"
#include "config/keys.h"
#include "export/export.h"

/* Steps that sleep rather than spin: their length needs no CPU, so two busy programs beside the
 * test move it by a wake-up's latency (about a millisecond), not by a share of a core. */
static void sleep_ms(double ms)
{
    struct timespec t = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* The findings of a model, as a string of rule names. */
static void fired(const sm_model *m, char *out, size_t cap)
{
    sa_report r;
    assert_int_equal(sa_analyze(m, 0.3, &r), 0);
    out[0] = 0;
    for (size_t i = 0; i < r.n_findings; i++) {
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%s%s", k ? "," : "", r.findings[i].rule);
        assert_true(strlen(r.findings[i].evidence) > 10); /* every finding states its evidence */
        assert_true(strlen(r.findings[i].advice) > 10);
    }
    sa_free(&r);
}

/* A model built by hand: counters as the sampler would record them. */
static void add_counter(sm_model *m, const char *name, const double *v, size_t n)
{
    m->counters = realloc(m->counters, (m->n_counters + 1) * sizeof *m->counters);
    sm_counter *c = &m->counters[m->n_counters++];
    memset(c, 0, sizeof *c);
    c->name = strdup(name);
    c->system = 1;
    c->n = c->samples = n;
    c->stride = 1;
    c->t_ns = calloc(n, sizeof *c->t_ns);
    c->v = calloc(n, sizeof *c->v);
    c->min = INFINITY;
    c->max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        c->t_ns[i] = (int64_t)i * 1000000;
        c->v[i] = v[i];
        c->sum += v[i];
        c->min = fmin(c->min, v[i]);
        c->max = fmax(c->max, v[i]);
    }
}

static void counter_rules(void **state)
{
    (void)state;
    char f[256];
    sm_model m;
    memset(&m, 0, sizeof m);
    m.duration_ns = 2000000000;
    double low[] = {10, 20, 15, 5}, high[] = {90, 95, 99, 97}, cpu[] = {98, 99, 97, 96};
    add_counter(&m, "gpu0 util %", low, 4);
    add_counter(&m, "cpu %", cpu, 4);
    fired(&m, f, sizeof f);
    assert_string_equal(f, "low_gpu_utilization,cpu_bound");
    sm_free(&m);

    memset(&m, 0, sizeof m);
    m.duration_ns = 2000000000;
    add_counter(&m, "gpu0 util %", high, 4);
    add_counter(&m, "gpu1 memory %", high, 4);
    add_counter(&m, "cpu %", low, 4);
    fired(&m, f, sizeof f);
    assert_string_equal(f, "gpu_memory_high");
    sm_free(&m);

    memset(&m, 0, sizeof m);
    m.duration_ns = 2000000000;
    double mem[] = {50, 60, 70, 80};
    add_counter(&m, "gpu0 memory %", mem, 4);
    m.sampler_cpu_ns = 100000000; /* 0.1 s of sampler CPU in a 2 s run: 5% */
    fired(&m, f, sizeof f);
    assert_string_equal(f, "profiler_overhead");
    m.sampler_cpu_ns = 10000000; /* 0.5% */
    fired(&m, f, sizeof f);
    assert_string_equal(f, "");
    sm_free(&m);
}

/* Rules over recorded runs: first step slow, step variance, dominant stage, throttling. */
static void run_rules(void **state)
{
    (void)state;
    char dir[256], f[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "rules");
    sonde_profiler *p = sonde_create(&c);
    {
        SONDE_SCOPE(p, "main");
        for (int i = 0; i < 12; i++) {
            SONDE_SCOPE(p, "step");
            sleep_ms(i == 0 ? 60 : (i == 7 ? 30 : 10)); /* slow first step, one slow step */
            sonde_step(p);
        }
    }
    tu_spin_ms(1);
    sonde_event(p, "gpu0 clocks: SwThermalSlowdown");
    sm_model m;
    tu_finish(p, &m);
    fired(&m, f, sizeof f);
    assert_string_equal(f, "gpu_throttled,first_step_slow,step_time_variance,hot_self_time");
    sm_free(&m);

    /* even steps and no stage dominating: nothing fires */
    p = sonde_create(&c);
    /* 9 even steps of 20 ms, slept: a late wake-up on a loaded machine does not make one step
     * twice another */
    for (int s = 0; s < 3; s++) {
        sonde_begin(p, s == 0 ? "a" : s == 1 ? "b" : "c");
        for (int i = 0; i < 3; i++) {
            sleep_ms(20);
            sonde_step(p);
        }
        sonde_end(p);
    }
    sonde_event(p, "gpu0 clocks: not throttled");
    tu_finish(p, &m);
    fired(&m, f, sizeof f);
    assert_string_equal(f, "");
    sm_free(&m);
    tu_rmrf(dir);
}

/* Advice that says something: the hot-code rule names the section whose own code holds the time,
 * never a wrapper around it; a stage alone in its session, a single-child wrapper and a section
 * that is the whole run are not bottlenecks. */
/* A thread that sleeps 150 ms inside one "matmul" section (two at once overlap). */
static void *burn_matmul(void *arg)
{
    sonde_profiler *p = arg;
    SONDE_SCOPE(p, "matmul");
    sleep_ms(150);
    return NULL;
}

static void advice_points_at_self_time(void **state)
{
    (void)state;
    char dir[256], f[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "advice");
    sonde_profiler *p = sonde_create(&c);
    sonde_session_begin(p, "setup");
    {
        SONDE_SCOPE(p, "load");
        sleep_ms(5);
    }
    sonde_session_begin(p, "generate");
    for (int i = 0; i < 4; i++) {
        SONDE_SCOPE(p, "token"); /* a wrapper: its one child holds its time */
        SONDE_SCOPE(p, "matmul");
        sleep_ms(15);
    }
    sonde_session_end(p);
    sm_model m;
    tu_finish(p, &m);
    sa_report r;
    assert_int_equal(sa_analyze(&m, 0.3, &r), 0);
    int hot = 0;
    for (size_t i = 0; i < r.n_findings; i++)
        if (!strcmp(r.findings[i].rule, "hot_self_time")) {
            hot = 1;
            if (!strstr(r.findings[i].title, "\"matmul\""))
                fail_msg("hot_self_time names %s", r.findings[i].title);
            assert_non_null(strstr(r.findings[i].advice, "no nested sections"));
        }
    assert_true(hot);
    for (size_t i = 0; i < r.n_bottlenecks; i++) {
        const char *w = r.bottlenecks[i].what;
        if (strstr(w, "stage load") || strstr(w, "stage token") || strstr(w, "self time: token"))
            fail_msg("a bottleneck that restates the table: %s", w);
    }
    sa_free(&r);
    sm_free(&m);
    /* the same section on two threads at once: its self time sums past the run's wall time,
     * and the finding says so instead of "186% of the run"; a leaf's evidence says all of its
     * time is its own instead of "(100% of its own ...)" */
    c = tu_config(dir, "overlap");
    p = sonde_create(&c);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, burn_matmul, p), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    tu_finish(p, &m);
    assert_int_equal(sa_analyze(&m, 0.3, &r), 0);
    hot = 0;
    for (size_t i = 0; i < r.n_findings; i++)
        if (!strcmp(r.findings[i].rule, "hot_self_time")) {
            hot = 1;
            const sm_stat *s = NULL;
            for (size_t k = 0; k < m.n_stats; k++)
                if (!strcmp(m.stats[k].name, "matmul"))
                    s = &m.stats[k];
            assert_non_null(s);
            if (s->self_s > (double)m.duration_ns / 1e9)
                assert_non_null(strstr(r.findings[i].title, "x the run's wall time in its own "
                                                            "code, summed over the threads"));
            assert_null(strstr(r.findings[i].title, "% of the run"));
            assert_non_null(strstr(r.findings[i].evidence, "all of its time: no nested section"));
            assert_null(strstr(r.findings[i].evidence, "100%"));
        }
    assert_true(hot);
    sa_free(&r);
    sm_free(&m);
    /* a run that is one section (as under `sonde run`): nothing to say about it */
    c = tu_config(dir, "whole");
    p = sonde_create(&c);
    {
        SONDE_SCOPE(p, "run");
        sleep_ms(200); /* long beside sonde_create and sonde_destroy, even on a loaded machine */
    }
    tu_finish(p, &m);
    fired(&m, f, sizeof f);
    assert_string_equal(f, "");
    assert_int_equal(sa_analyze(&m, 0.3, &r), 0);
    for (size_t i = 0; i < r.n_bottlenecks; i++)
        if (strstr(r.bottlenecks[i].what, "run"))
            fail_msg("a bottleneck about the whole run: %s", r.bottlenecks[i].what);
    sa_free(&r);
    sm_free(&m);
    tu_rmrf(dir);
}

static void diffusion_figures(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "diff");
    sonde_profiler *p = sonde_create(&c);
    for (int s = 0; s < 4; s++)
        assert_int_equal(sonde_diffusion_step(p, s, 1000.0 - s * 250, 8, 0.5 + 0.5 * (s == 3), 7.5), 0);
    for (int b = 0; b < 5; b++) {
        SONDE_SCOPE(p, "block");
        tu_spin_ms(3);
        assert_int_equal(sonde_block(p, b, 16, 0, 512), 0); /* seconds from the section */
    }
    assert_int_equal(sonde_model_params(p, "unet", 8.6e8), 0);
    assert_int_equal(sonde_model_params(p, "vae", 8.4e7), 0);
    assert_int_equal(sonde_block(p, -1, 16, 1, 0), SONDE_EINVAL);
    sm_model m;
    tu_finish(p, &m);
    sa_diffusion d;
    sa_diffusion_of(&m, &d);
    assert_int_equal((int)d.steps.count, 4);
    assert_true(fabs(d.steps.total_s - 2.5) < 1e-9);
    assert_true(fabs(d.steps_per_s - 4 / 2.5) < 1e-9);
    assert_int_equal((int)d.steps.slowest, 3);
    assert_int_equal((int)d.blocks.count, 5);
    assert_true(d.frames == 80);
    const sm_stat *blk = tu_stat(&m, "block");
    assert_true(fabs(d.blocks.total_s - blk->total_s) < 1e-9); /* the sections' durations */
    assert_true(fabs(d.fps - 80 / blk->total_s) < 1e-6);
    assert_true(fabs(d.bps - 5 / blk->total_s) < 1e-6);
    assert_true(d.total_params == 8.6e8 + 8.4e7);
    /* the JSON report carries them */
    sbuf b;
    sbuf_init(&b);
    sx_json(&m, &b);
    assert_non_null(strstr(b.data, "\"diffusion\":{\"steps\":{\"count\":4,"));
    assert_non_null(strstr(b.data, "\"models\":[{\"name\":\"unet\",\"params\":860000000}"));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

static void html_escapes_and_sections(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "<b>run</b>");
    c.name = "escape";
    sonde_profiler *p = sonde_create(&c);
    {
        SONDE_SCOPE(p, "stage");
        sonde_begin(p, "<script>alert(1)</script>");
        sonde_metadata(p, "k", "\"quoted\" & <tag>");
        tu_spin_ms(1);
        sonde_end(p);
        sonde_step(p);
    }
    sm_model m;
    tu_finish(p, &m);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    assert_null(strstr(b.data, "<script>alert"));
    assert_non_null(strstr(b.data, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_int_equal(strncmp(b.data, "<!DOCTYPE html>", 15), 0);
    static const char *ids[] = {"id=\"cards\"", "id=\"recommendations\"", "id=\"stage-chart\"",
                                "id=\"timeline-view\"", "id=\"step-chart\"", "id=\"stats-table\"",
                                "id=\"system-table\"", "id=\"config-table\"", "id=\"sonde-data\""};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (!strstr(b.data, ids[i]))
            fail_msg("HTML lacks %s", ids[i]);
    /* self-contained: nothing is fetched */
    assert_null(strstr(b.data, "http://"));
    assert_null(strstr(b.data, "https://"));
    assert_null(strstr(b.data, " src="));
    /* two scripts: the data (JSON, where no name can end the block) and the page's code */
    const char *d = strstr(b.data, "<script type=\"application/json\" id=\"sonde-data\">");
    assert_non_null(d);
    const char *d_end = strstr(d, "</script>");
    assert_non_null(d_end);
    assert_non_null(strstr(d, "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"));
    assert_non_null(strstr(d, "\"k\":\"\\\"quoted\\\" \\u0026 \\u003ctag\\u003e\""));
    assert_true(strstr(d, "\\u003c/script\\u003e") < d_end);
    const char *s1 = strstr(d_end, "<script>");
    assert_non_null(s1);
    assert_null(strstr(s1 + 1, "<script"));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

static void mfu_from_a_device(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "mfu");
    assert_int_equal(sonde__key_set(&c, sonde__key_find("peak_device"), "h100-sxm-bf16", "t"), 0);
    sonde_profiler *p = sonde_create(&c);
    {
        SONDE_SCOPE(p, "matmul");
        tu_spin_ms(5);
        sonde_flops(p, 1e12);
    }
    sm_model m;
    tu_finish(p, &m);
    assert_true(m.peak_flops == 989.4e12);
    const sm_stat *s = tu_stat(&m, "matmul");
    double fps = s->flops / s->flops_time_s;
    assert_true(fps > 1e12 * 0.5 && fps < 1e12 / 0.004); /* 1e12 FLOPs over about 5 ms */
    sbuf b;
    sbuf_init(&b);
    sx_json(&m, &b);
    assert_non_null(strstr(b.data, "\"peak_flops\":989400000000000"));
    assert_non_null(strstr(b.data, "\"mfu\":0.")); /* achieved over the device's peak */
    sbuf_free(&b);
    assert_int_equal(sonde__key_set(&c, sonde__key_find("peak_device"), "tpu9", "SONDE_PEAK_DEVICE"),
                     SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "unknown device \"tpu9\" (known: h100-sxm-bf16,"));
    sm_free(&m);
    tu_rmrf(dir);
}

static void html_stays_light(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "big");
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 200000; i++) {
        SONDE_SCOPE(p, "tiny");
    }
    sm_model m;
    tu_finish(p, &m);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    /* every section carried, at about 15 bytes each (10^6 in 15 MB: the e2e html test) */
    assert_non_null(strstr(b.data, "\"spans\":{\"total\":200000,\"n\":200000,"));
    assert_null(strstr(b.data, "Showing the"));
    assert_true(b.len < 200000u * 20u);
    sbuf_free(&b);
    sm_free(&m);
    /* html_max_spans: the longest that many, and the page says so */
    c = tu_config(dir, "capped");
    c.html_max_spans = 2000;
    p = sonde_create(&c);
    for (int i = 0; i < 200000; i++) {
        SONDE_SCOPE(p, "tiny");
    }
    tu_finish(p, &m);
    sbuf_init(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    assert_non_null(strstr(b.data, "\"spans\":{\"total\":200000,\"n\":2000,"));
    assert_non_null(strstr(b.data, "Showing the 2000 longest of 200000 sections"));
    assert_true(b.len < 1u << 20);
    sbuf_free(&b);
    sm_free(&m);
    /* the longest are drawn, a section with the one inside it: outer (20 ms) and inner
     * (10 ms) among 10 of 100,002, whose names are those of the drawn spans */
    c = tu_config(dir, "longest");
    c.html_max_spans = 10;
    p = sonde_create(&c);
    for (int i = 0; i < 50000; i++) {
        SONDE_SCOPE(p, "tiny");
    }
    sonde_begin(p, "outer");
    tu_spin_ms(10);
    sonde_begin(p, "inner");
    tu_spin_ms(10);
    sonde_end(p);
    sonde_end(p);
    for (int i = 0; i < 50000; i++) {
        SONDE_SCOPE(p, "tiny");
    }
    tu_finish(p, &m);
    sbuf_init(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    assert_non_null(strstr(b.data, "\"spans\":{\"total\":100002,\"n\":10,"));
    const char *names = strstr(b.data, ",\"names\":[");
    assert_non_null(names);
    assert_non_null(strstr(names, "\"outer\""));
    assert_non_null(strstr(names, "\"inner\""));
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

/* The step breakdown in the page's data: per step the time of the sections outermost in it,
 * by name; a section nested in another of the same step is its parent's time, not its own. */
static void html_step_breakdown(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "steps");
    sonde_profiler *p = sonde_create(&c);
    for (int step = 0; step < 2; step++) {
        sonde_step_begin(p);
        sonde_begin(p, "forward");
        sonde_begin(p, "attention"); /* nested: forward's time */
        tu_spin_ms(2);
        sonde_end(p);
        sonde_end(p);
        sonde_begin(p, "backward");
        tu_spin_ms(step ? 4 : 1);
        sonde_end(p);
        sonde_step(p);
    }
    sm_model m;
    tu_finish(p, &m);
    sbuf b;
    sbuf_init(&b);
    assert_int_equal(sx_html(&m, &b), 0);
    const char *bd = strstr(b.data, "\"breakdown\":{\"names\":[");
    assert_non_null(bd);
    int k[2];
    unsigned long long v[2][3];
    int at = 0;
    assert_int_equal(sscanf(bd, "\"breakdown\":{\"names\":[%d,%d],\"ns\":[%n", &k[0], &k[1], &at), 2);
    assert_true(at > 0);
    assert_int_equal(sscanf(bd + at, "[%llu,%llu,%llu],[%llu,%llu,%llu]", &v[0][0], &v[0][1],
                            &v[0][2], &v[1][0], &v[1][1], &v[1][2]), 6);
    /* the two names, "forward" and "backward", in the order of their time (which a loaded
     * machine may swap), and nothing else */
    const char *names = strstr(b.data, "\"names\":[\"");
    assert_non_null(names);
    char nm[2][32] = {"", ""};
    int idx = 0;
    for (const char *q = names + 9; *q && *q != ']'; q++) {
        if (*q == ',') {
            idx++;
            continue;
        }
        if (*q != '"')
            continue;
        int len = 0;
        while (q[1 + len] && q[1 + len] != '"')
            len++;
        for (int j = 0; j < 2; j++)
            if (idx == k[j])
                snprintf(nm[j], sizeof nm[j], "%.*s", len, q + 1);
        q += len + 1;
    }
    int fwd = !strcmp(nm[0], "forward") ? 0 : 1, bwd = 1 - fwd;
    assert_string_equal(nm[fwd], "forward");
    assert_string_equal(nm[bwd], "backward");
    /* (sections are timed by the TSC, the spins by CLOCK_MONOTONIC: 5% apart at most) */
    for (int i = 0; i < 2; i++) {
        assert_true(v[i][fwd] >= 1900000); /* forward: 2 ms spun in attention, nested in it */
        assert_int_equal(v[i][2], 0);      /* no other name */
    }
    assert_true(v[0][bwd] >= 950000 && v[1][bwd] >= 3800000);
    sbuf_free(&b);
    sm_free(&m);
    tu_rmrf(dir);
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 20,000 sessions (an inference server's requests): the analysis groups the top-level
 * sections by session in one pass. Looking through every section once per session made it
 * about 10^9 steps here, hundreds of times the CPU of reading the file. */
static void many_sessions_stay_linear(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "sessions");
    sonde_profiler *p = sonde_create(&c);
    for (int i = 0; i < 20000; i++) {
        sonde_session_begin(p, "request");
        sonde_begin(p, "serve");
        tu_spin_ms(0.001);
        sonde_end(p);
        sonde_session_end(p);
    }
    sonde_begin(p, "load"); /* outside sessions: two stages of the run */
    tu_spin_ms(30);
    sonde_end(p);
    sonde_begin(p, "warmup");
    tu_spin_ms(20);
    sonde_end(p);
    char path[4096];
    snprintf(path, sizeof path, "%s", sonde_file_path(p));
    assert_int_equal(sonde_destroy(p), 0);
    double t0 = cpu_s();
    sm_model m;
    assert_int_equal(sm_read_file(path, &m), 0); /* builds the model, once */
    double read_s = cpu_s() - t0;
    assert_int_equal(m.n_sessions, 20000);
    sa_report r;
    t0 = cpu_s();
    /* (a threshold of 1%: under ASan or on a loaded machine the 20,000 sessions' wall time
     * grows, and load's 30 ms fall under 30% of the run: CI saw it) */
    assert_int_equal(sa_analyze(&m, 0.01, &r), 0);
    double analyze_s = cpu_s() - t0;
    int found = 0;
    for (size_t i = 0; i < r.n_bottlenecks; i++)
        found |= strstr(r.bottlenecks[i].what, "stage load:") != NULL;
    assert_true(found);
    if (analyze_s > read_s + 0.05)
        fail_msg("the analysis took %.3f s of CPU, reading the file %.3f s", analyze_s, read_s);
    sa_free(&r);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Names of collectives are told from the rest. */
static void comm_names(void **state)
{
    (void)state;
    const char *yes[] = {"c10d::allreduce_", "gloo:all_reduce", "nccl:all_gather",
                         "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all-reduce", "Barrier",
                         "record_param_comms", "reduce_scatter_tensor", "dist.broadcast"};
    const char *no[] = {"forward", "aten::linear", "reduce_mean", "gather_inputs", "send_batch",
                        "backward", "optimizer.step"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(sa_is_comm_name(yes[i]));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(sa_is_comm_name(no[i]));
}

#define MS 1000000LL
/* Two ranks, two steps of 30 ms, planted to the nanosecond: rank 0 is in "allreduce" (a section
 * inside "backward") from 10 ms into each step to its end, rank 1 (the straggler) only its last
 * 5 ms, in an operator "gloo:all_reduce" (no section); rank 0 waited 15 ms a step, from 10 to
 * 25 ms, for rank 1. */
static void ranks_wait_for_the_straggler(void **state)
{
    (void)state;
    sm_site sites[2] = {{.name = "backward", .stat = 0}, {.name = "allreduce", .stat = 1}};
    sm_span s0[4] = {
        {.site = 0, .parent = -1, .x = -1, .start_ns = 5 * MS, .end_ns = 30 * MS},
        {.site = 1, .parent = 0, .x = -1, .depth = 1, .start_ns = 10 * MS, .end_ns = 30 * MS},
        {.site = 0, .parent = -1, .x = -1, .start_ns = 35 * MS, .end_ns = 60 * MS},
        {.site = 1, .parent = 2, .x = -1, .depth = 1, .start_ns = 40 * MS, .end_ns = 60 * MS}};
    sm_step steps[2] = {{.number = 0, .start_ns = 0, .t_ns = 30 * MS, .active = 1},
                        {.number = 1, .start_ns = 30 * MS, .t_ns = 60 * MS, .active = 1}};
    char *ops_names[1] = {"gloo:all_reduce"};
    sm_op ops[2] = {{.name = 0, .parent = -1, .span = -1, .start_ns = 25 * MS, .end_ns = 30 * MS},
                    {.name = 0, .parent = -1, .span = -1, .start_ns = 55 * MS, .end_ns = 60 * MS}};
    sm_model m[2];
    memset(m, 0, sizeof m);
    for (int r = 0; r < 2; r++) {
        m[r].sites = sites;
        m[r].n_sites = 2;
        m[r].steps = steps;
        m[r].n_steps = 2;
    }
    m[0].spans = s0;
    m[0].n_spans = 4;
    m[1].ops = ops;
    m[1].n_ops = 2;
    m[1].op_names = ops_names;
    m[1].n_op_names = 1;
    const sm_model *ms[2] = {&m[0], &m[1]};
    sa_ranks r;
    assert_int_equal(sa_ranks_of(ms, 2, &r), 0);
    assert_int_equal((int)r.n_steps, 2);
    assert_true(r.has_comm);
    assert_int_equal((int)r.straggler, 1);
    assert_true(fabs(r.rank[0].wait_s - 0.030) < 1e-12);
    assert_true(fabs(r.rank[0].comm_s - 0.040) < 1e-12);
    assert_true(fabs(r.rank[1].comm_s - 0.010) < 1e-12);
    assert_true(r.rank[1].wait_s == 0);
    assert_true(fabs(r.rank[1].caused_s - 0.030) < 1e-12);
    assert_int_equal((int)r.rank[1].straggler_steps, 2);
    assert_int_equal((int)r.rank[0].cause, 1);
    /* the wait lies in the first 15 ms of each allreduce: backward and allreduce hold it all */
    assert_true(fabs(sa_ranks_wait_in(&r, 0, &s0[0]) - 0.015) < 1e-12);
    assert_true(fabs(sa_ranks_wait_in(&r, 0, &s0[3]) - 0.015) < 1e-12);
    sa_ranks_free(&r);
    /* balanced: the two spend alike (within 2% of a step) in their collectives */
    ops[0].start_ns = 10 * MS + MS / 2;
    ops[1].start_ns = 40 * MS + MS / 2;
    assert_int_equal(sa_ranks_of(ms, 2, &r), 0);
    assert_true(r.has_comm);
    assert_true(r.straggler == SIZE_MAX);
    assert_true(r.rank[0].wait_s == 0 && r.rank[1].wait_s == 0);
    sa_ranks_free(&r);
}
#undef MS

#define US 1000LL
/* A device's time planted to the nanosecond: on stream 7 gemm [0, 100) us, relu [110, 150)
 * launched before gemm ended (a 10 us gap: kernel wait), an NCCL allreduce [200, 300) launched
 * early too (a 50 us gap: other), gemm [400, 500) launched at 350 (after the allreduce ended:
 * a 100 us host wait, in which the launching thread was in "data_wait" from 280 to 380 and took
 * two samples in load_batch); on stream 9 a copy [50, 250); on stream 8 a compute kernel
 * [250, 270) under the allreduce. Two steps: [0, 250) and [250, 500) us. */
static void gpu_time_and_its_waits(void **state)
{
    (void)state;
    sm_gpu g[6] = {
        {.kind = SM_GPU_KERNEL, .stream = 7, .start_ns = 0, .end_ns = 100 * US, .name = "gemm",
         .launch_ns = -50 * US, .launch_thread = 0, .span = -1},
        {.kind = SM_GPU_MEMCPY, .stream = 9, .start_ns = 50 * US, .end_ns = 250 * US,
         .launch_ns = 0, .launch_thread = 0, .span = -1},
        {.kind = SM_GPU_KERNEL, .stream = 7, .start_ns = 110 * US, .end_ns = 150 * US,
         .name = "relu", .launch_ns = 20 * US, .launch_thread = 0, .span = -1},
        {.kind = SM_GPU_KERNEL, .stream = 7, .start_ns = 200 * US, .end_ns = 300 * US,
         .name = "ncclKernel_AllReduce_RING", .launch_ns = 40 * US, .launch_thread = 0,
         .span = -1},
        {.kind = SM_GPU_KERNEL, .stream = 7, .start_ns = 400 * US, .end_ns = 500 * US,
         .name = "gemm", .launch_ns = 350 * US, .launch_thread = 0, .span = -1},
        {.kind = SM_GPU_KERNEL, .stream = 8, .start_ns = 250 * US, .end_ns = 270 * US,
         .name = "add", .launch_ns = 240 * US, .launch_thread = 0, .span = -1}};
    sm_step steps[2] = {{.number = 0, .start_ns = 0, .t_ns = 250 * US},
                        {.number = 1, .start_ns = 250 * US, .t_ns = 500 * US}};
    sm_site sites[1] = {{.name = "data_wait", .stat = 0}};
    sm_span spans[1] = {{.site = 0, .parent = -1, .x = -1, .start_ns = 280 * US,
                         .end_ns = 380 * US}};
    sm_thread threads[1] = {{.index = 0, .tid = 42, .name = "main"}};
    sm_func funcs[2] = {{.name = "main", .object = "app"},
                        {.name = "load_batch", .object = "data.py", .python = 1}};
    uint32_t frames[2] = {0, 1};
    size_t first[2] = {0, 2};
    sm_psample timed[3] = {{310 * US, 42, 1, 0}, {320 * US, 42, 1, 0}, {390 * US, 43, 1, 0}};
    sm_model m;
    memset(&m, 0, sizeof m);
    m.gpu = g;
    m.n_gpu = 6;
    m.steps = steps;
    m.n_steps = 2;
    m.sites = sites;
    m.n_sites = 1;
    m.spans = spans;
    m.n_spans = 1;
    m.threads = threads;
    m.n_threads = 1;
    m.profile.funcs = funcs;
    m.profile.n_funcs = 2;
    m.profile.frames = frames;
    m.profile.first = first;
    m.profile.n_stacks = 1;
    m.profile.timed = timed;
    m.profile.n_timed = 3;
    m.profile.hz = 100;
    sa_gpu a;
    assert_int_equal(sa_gpu_of(&m, SA_GPU_KERNEL_DELAY_NS, 50 * US, &a), 0);
    assert_int_equal((int)a.n_dev, 1);
    const sa_gpu_device *d = &a.dev[0];
#define NS(x) llround((x) * 1e9)
    assert_int_equal(d->entries, 6);
    assert_int_equal(NS(d->span_s), 500 * US);
    assert_int_equal(NS(d->idle_s), 100 * US);        /* [300, 400) */
    assert_int_equal(NS(d->compute_s), 260 * US);     /* gemm, relu, add, gemm */
    assert_int_equal(NS(d->non_compute_s), 140 * US); /* the rest of [0, 300) */
    assert_int_equal(NS(d->comm_overlap_s), 20 * US); /* add under the allreduce */
    /* launch delays (the first gemm's call, before the run, is not seen: a negative time is
     * none): the copy 50, relu 90, the allreduce 160, gemm 50, add 10 us; one over 100 */
    assert_int_equal((int)d->launches, 5);
    assert_int_equal((int)d->slow_launches, 1);
    assert_int_equal(NS(d->launch_mean_s), 72 * US);
    assert_int_equal(NS(d->launch_p50_s), 50 * US);
    assert_int_equal(NS(d->launch_max_s), 160 * US);
    /* step 0 all busy, 140 us of compute; step 1 idle 100 us, compute 120 us */
    assert_int_equal((int)d->n_steps, 2);
    assert_int_equal(NS(d->steps[0].idle_s), 0);
    assert_int_equal(NS(d->steps[0].compute_s), 140 * US);
    assert_int_equal(NS(d->steps[0].non_compute_s), 110 * US);
    assert_int_equal(NS(d->steps[1].idle_s), 100 * US);
    assert_int_equal(NS(d->steps[1].compute_s), 120 * US);
    assert_int_equal(NS(d->comm_s), 100 * US);
    assert_int_equal(NS(d->memory_s), 200 * US);
    assert_int_equal(NS(d->host_wait_s), 100 * US);
    assert_int_equal(NS(d->kernel_wait_s), 10 * US);
    assert_int_equal(NS(d->other_wait_s), 50 * US);
    assert_int_equal((int)a.waits, 1);
    /* the host wait's 100 us: 80 in data_wait, 20 in no section; load_batch's two samples (the
     * third is another thread's) */
    assert_int_equal((int)a.n_causes, 3);
    assert_string_equal(a.causes[0].what, "data_wait");
    assert_int_equal(NS(a.causes[0].idle_s), 80 * US);
    assert_string_equal(a.causes[1].what, "(no section)");
    assert_int_equal(NS(a.causes[1].idle_s), 20 * US);
    assert_string_equal(a.causes[2].what, "load_batch (data.py)");
    assert_true(a.causes[2].sample && a.causes[2].samples == 2);
    /* the kernels by total: gemm 2 x 100 us, the allreduce, relu, add */
    assert_int_equal((int)a.n_kernels, 4);
    assert_string_equal(a.kernels[0].name, "gemm");
    assert_int_equal((int)a.kernels[0].calls, 2);
    assert_int_equal(NS(a.kernels[0].p50_s), 100 * US);
    assert_int_equal(a.kernels[1].kind, SA_GPU_COMM);
    assert_string_equal(a.kernels[2].name, "relu");
#undef NS
    /* the JSON with the top one of each list: the idlest step alone, step 1 */
    sbuf b;
    sbuf_init(&b);
    sx_gpu_analysis_json(&b, NULL, &a, 1);
    assert_non_null(strstr(b.data, "\"steps\":[{\"number\":1,"));
    assert_null(strstr(b.data, "\"number\":0"));
    sbuf_free(&b);
    sa_gpu_free(&a);
}
#undef US

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counter_rules), cmocka_unit_test(run_rules),
        cmocka_unit_test(comm_names), cmocka_unit_test(ranks_wait_for_the_straggler),
        cmocka_unit_test(gpu_time_and_its_waits),
        cmocka_unit_test(advice_points_at_self_time),
        cmocka_unit_test(diffusion_figures), cmocka_unit_test(html_escapes_and_sections),
        cmocka_unit_test(mfu_from_a_device), cmocka_unit_test(html_stays_light),
        cmocka_unit_test(html_step_breakdown),
        cmocka_unit_test(many_sessions_stay_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
