/* test_ops.c - sonde_ops: another tracer's operators folded into the run (placed under their
 * sections, nested, memory and GPU work charged to them, the per-operator table), and its
 * errors. */
#define _GNU_SOURCE
#include <math.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "model/model_build.h"
#include "util/alloc.h"

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_until(uint64_t t)
{
    while (mono() < t) {
    }
}

static const sm_op *find_op(const sm_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_ops; i++)
        if (!strcmp(m->op_names[m->ops[i].name], name))
            return &m->ops[i];
    return NULL;
}

static const sm_op_row *find_row(const sm_op_row *v, size_t n, const char *name, const char *shp)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name) &&
            (!shp ? !v[i].shapes : v[i].shapes && !strcmp(v[i].shapes, shp)))
            return &v[i];
    return NULL;
}

static void folded_under_their_section(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "ops");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_begin(p, "forward"), 0);
    uint64_t t = mono();
    spin_until(t + 400000);
    assert_int_equal(sonde_end(p), 0);
    uint64_t after_end = mono();
    int self = (int)syscall(SYS_gettid);
    sonde_op ops[] = {
        /* given out of order: the model sorts them */
        {.kind = SONDE_OP_CPU, .name = "aten::addmm", .start_ns = t + 20000, .dur_ns = 100000,
         .id = 7, .flops = 1000, .shapes = "[[8], [4, 8], [8, 8]]"},
        {.kind = SONDE_OP_CPU, .name = "aten::linear", .start_ns = t + 10000, .dur_ns = 140000,
         .tid = self, .id = 6},
        {.kind = SONDE_OP_MEMORY, .start_ns = t + 30000, .device = -1, .bytes = 4096},
        {.kind = SONDE_OP_MEMORY, .start_ns = t + 35000, .device = 0, .bytes = 1 << 20},
        {.kind = SONDE_OP_KERNEL, .name = "gemm_kernel", .start_ns = t + 40000,
         .dur_ns = 50000, .device = 0, .stream = 7, .id = 7},
        {.kind = SONDE_OP_MEMCPY, .start_ns = t + 90000, .dur_ns = 5000, .device = 0,
         .stream = 7, .id = 7, .bytes = 256},
        {.kind = SONDE_OP_CPU, .name = "aten::addmm", .start_ns = t + 200000, .dur_ns = 50000,
         .id = 8, .flops = 3000, .shapes = "[[8], [2, 8], [8, 8]]"},
        /* its end sticks out of the section by 300 ns and what sonde_end took to return */
        {.kind = SONDE_OP_CPU, .name = "aten::relu", .start_ns = after_end - 20000,
         .dur_ns = 20300},
        /* a thread the run has not seen */
        {.kind = SONDE_OP_CPU, .name = "aten::mul", .start_ns = t + 5000, .dur_ns = 1000,
         .tid = 0x40000003},
    };
    assert_int_equal(sonde_ops(p, ops, sizeof ops / sizeof ops[0]), 0);
    /* the summary carries the operator table, as the reports do */
    sonde_summary_t *sum = sonde_summary(p);
    assert_non_null(sum);
    assert_int_equal(sum->n_ops, 4);
    const sonde_op_stats *os = NULL;
    for (size_t i = 0; i < sum->n_ops; i++)
        if (!strcmp(sum->ops[i].name, "aten::addmm"))
            os = &sum->ops[i];
    assert_non_null(os);
    assert_int_equal(os->calls, 2);
    assert_true(fabs(os->flops - 4000) < 1e-9);
    assert_true(fabs(os->cpu_total_s - 150e-6) < 1e-12);
    assert_true(fabs(os->self_cuda_s - 55e-6) < 1e-12);
    assert_int_equal(os->self_cpu_memory, 4096);
    assert_int_equal(os->self_cuda_memory, 1 << 20);
    assert_string_equal(sum->stats[0].name, "forward");
    for (size_t i = 1; i < sum->n_ops; i++) /* largest self CPU time first */
        assert_true(sum->ops[i - 1].self_cpu_s >= sum->ops[i].self_cpu_s);
    sonde_summary_free(sum);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);

    assert_int_equal(m.n_ops, 5);
    const sm_op *lin = find_op(&m, "aten::linear"), *mm = NULL, *relu = find_op(&m, "aten::relu");
    for (size_t i = 0; i < m.n_ops; i++)
        if (m.ops[i].id == 7)
            mm = &m.ops[i];
    assert_non_null(lin);
    assert_non_null(mm);
    assert_non_null(relu);
    assert_int_equal(m.n_spans, 1);
    const sm_span *fw = &m.spans[0];
    /* nesting: addmm inside linear, both inside the section, on the section's thread */
    assert_int_equal(mm->parent, (int32_t)(lin - m.ops));
    assert_int_equal(mm->depth, 1);
    assert_int_equal(lin->parent, -1);
    assert_int_equal(lin->span, 0);
    assert_int_equal(mm->span, 0);
    assert_int_equal(lin->thread, fw->thread);
    assert_int_equal(lin->end_ns - lin->start_ns, 140000);
    assert_int_equal(lin->child_ns, 100000);
    /* times on the run's clock: the section began before t, 10 us before the first operator */
    assert_true(fw->start_ns <= lin->start_ns);
    /* memory and GPU work charged to the operator running then */
    assert_int_equal(mm->host_bytes, 4096);
    assert_int_equal(mm->device_bytes, 1 << 20);
    assert_int_equal(mm->device_ns, 55000);
    assert_int_equal(lin->device_ns, 0);
    assert_int_equal(lin->device_total_ns, 55000);
    assert_int_equal(m.n_gpu, 2);
    assert_int_equal(m.gpu[0].kind, SM_GPU_KERNEL);
    assert_string_equal(m.gpu[0].name, "gemm_kernel");
    assert_int_equal(m.gpu[0].span, 0); /* launched inside "forward" */
    assert_int_equal(m.gpu[1].kind, SM_GPU_MEMCPY);
    assert_int_equal(m.gpu[1].bytes, 256);
    /* an end past the section's by at most 2 us is moved inside it; more is left alone */
    int64_t out = (int64_t)(after_end + 300) - (int64_t)m.start_mono_ns - fw->end_ns;
    if (out <= 0) /* the clocks put the section's end after the operator's: nothing to move */
        assert_true(relu->end_ns <= fw->end_ns);
    else if (out <= 2000)
        assert_int_equal(relu->end_ns, fw->end_ns);
    else
        assert_true(relu->end_ns > fw->end_ns);
    /* the unknown thread got a track of its own */
    const sm_op *mul = find_op(&m, "aten::mul");
    assert_non_null(mul);
    assert_string_equal(m.threads[mul->thread].name, "torch thread 3");
    assert_int_equal(mul->span, -1);

    sm_op_row *rows;
    size_t n;
    assert_int_equal(sm_ops_table(&m, 0, &rows, &n), 0);
    assert_int_equal(n, 4);
    const sm_op_row *r = find_row(rows, n, "aten::addmm", NULL);
    assert_non_null(r);
    assert_int_equal(r->calls, 2);
    assert_true(fabs(r->flops - 4000) < 1e-9);
    assert_true(fabs(r->cpu_total_s - 150e-6) < 1e-12);
    assert_true(fabs(r->self_device_s - 55e-6) < 1e-12);
    r = find_row(rows, n, "aten::linear", NULL);
    assert_true(fabs(r->self_cpu_s - 40e-6) < 1e-12);
    assert_true(fabs(r->device_total_s - 55e-6) < 1e-12);
    assert_true(fabs(r->self_device_s) < 1e-12);
    sonde__free(rows);
    assert_int_equal(sm_ops_table(&m, 1, &rows, &n), 0);
    assert_int_equal(n, 5);
    r = find_row(rows, n, "aten::addmm", "[[8], [2, 8], [8, 8]]");
    assert_non_null(r);
    assert_int_equal(r->calls, 1);
    assert_true(fabs(r->flops - 3000) < 1e-9);
    sonde__free(rows);
    sm_free(&m);
    tu_rmrf(dir);
}

/* As torch's key_averages() (EventList._remove_dup_nodes): a call that is the only child of a
 * call of its name is folded into it, its children and its kernels taken by the parent; a
 * chain folds whole; a call with a sibling is a call of its own. The trace keeps every call. */
static void same_name_only_child_is_folded(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "dups");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_begin(p, "step"), 0);
    uint64_t t = mono();
    spin_until(t + 500000);
    assert_int_equal(sonde_end(p), 0);
    const uint64_t us = 1000;
    sonde_op ops[] = {
        {.kind = SONDE_OP_CPU, .name = "aten::div_", .start_ns = t + 10 * us, .dur_ns = 100 * us,
         .id = 8},
        {.kind = SONDE_OP_CPU, .name = "aten::div_", .start_ns = t + 20 * us, .dur_ns = 80 * us,
         .id = 9},
        {.kind = SONDE_OP_CPU, .name = "aten::empty", .start_ns = t + 30 * us, .dur_ns = 10 * us},
        {.kind = SONDE_OP_KERNEL, .name = "div_outer", .start_ns = t + 50 * us, .dur_ns = 7 * us,
         .id = 8},
        {.kind = SONDE_OP_KERNEL, .name = "div_inner", .start_ns = t + 60 * us, .dur_ns = 5 * us,
         .id = 9},
        /* a sibling keeps the inner mul a call of its own */
        {.kind = SONDE_OP_CPU, .name = "aten::mul", .start_ns = t + 200 * us, .dur_ns = 100 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::mul", .start_ns = t + 210 * us, .dur_ns = 40 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::add", .start_ns = t + 260 * us, .dur_ns = 20 * us},
        /* a chain of three: one call */
        {.kind = SONDE_OP_CPU, .name = "aten::add_", .start_ns = t + 310 * us, .dur_ns = 80 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::add_", .start_ns = t + 320 * us, .dur_ns = 60 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::add_", .start_ns = t + 330 * us, .dur_ns = 40 * us},
    };
    assert_int_equal(sonde_ops(p, ops, sizeof ops / sizeof ops[0]), 0);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal(m.n_ops, 9); /* every call kept for the trace */
    sm_op_row *rows;
    size_t n;
    assert_int_equal(sm_ops_table(&m, 0, &rows, &n), 0);
    assert_int_equal(n, 5);
    const sm_op_row *r = find_row(rows, n, "aten::div_", NULL);
    assert_int_equal(r->calls, 1);
    assert_true(fabs(r->cpu_total_s - 100e-6) < 1e-12);
    assert_true(fabs(r->self_cpu_s - 90e-6) < 1e-12);    /* less the folded call's child */
    assert_true(fabs(r->self_device_s - 5e-6) < 1e-12);  /* the folded call's kernel, lifted */
    assert_true(fabs(r->device_total_s - 12e-6) < 1e-12);
    r = find_row(rows, n, "aten::mul", NULL);
    assert_int_equal(r->calls, 2);
    assert_true(fabs(r->self_cpu_s - 80e-6) < 1e-12); /* 100 - 40 - 20, and 40 */
    r = find_row(rows, n, "aten::add_", NULL);
    assert_int_equal(r->calls, 1);
    assert_true(fabs(r->cpu_total_s - 80e-6) < 1e-12);
    assert_true(fabs(r->self_cpu_s - 80e-6) < 1e-12);
    assert_int_equal(find_row(rows, n, "aten::empty", NULL)->calls, 1);
    assert_int_equal(find_row(rows, n, "aten::add", NULL)->calls, 1);
    assert_int_equal((int)sm_ops_calls(rows, n), 6);
    sonde__free(rows);
    sm_free(&m);
    tu_rmrf(dir);
}

/* Operators that carry their tracer's own table's figures (SONDE_OP_F_TABLE: sonde.torch gives
 * torch's tree) are counted by them, where sonde's own nesting would decide otherwise: a
 * same-name pair torch does not fold stays two calls, a call torch leaves out is not a row, and
 * each call's self time is its recorded duration less its children's time there. */
static void the_tracer_s_table_decides(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "ops-table");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    assert_int_equal(sonde_begin(p, "step"), 0);
    uint64_t t = mono();
    spin_until(t + 400000);
    assert_int_equal(sonde_end(p), 0);
    const uint64_t us = 1000;
    const unsigned T = SONDE_OP_F_TABLE, L = SONDE_OP_F_LEFT_OUT;
    sonde_op ops[] = {
        /* sonde would fold the inner div_; torch's tree did not (a range of its own between) */
        {.kind = SONDE_OP_CPU, .name = "aten::div_", .start_ns = t + 10 * us, .dur_ns = 100 * us,
         .flags = T, .table_child_ns = 70 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::div_", .start_ns = t + 20 * us, .dur_ns = 80 * us,
         .flags = T, .table_child_ns = 0},
        /* a name torch never lists, and a fold torch made */
        {.kind = SONDE_OP_CPU, .name = "aten::is_leaf", .start_ns = t + 150 * us,
         .dur_ns = 5 * us, .flags = T | L},
        {.kind = SONDE_OP_CPU, .name = "aten::mul", .start_ns = t + 200 * us, .dur_ns = 100 * us,
         .flags = T, .table_child_ns = 60 * us},
        {.kind = SONDE_OP_CPU, .name = "aten::mul", .start_ns = t + 210 * us, .dur_ns = 60 * us,
         .flags = T | L, .table_child_ns = 0},
    };
    assert_int_equal(sonde_ops(p, ops, sizeof ops / sizeof ops[0]), 0);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal(m.n_ops, 5); /* the trace keeps every call */
    sm_op_row *rows;
    size_t n;
    assert_int_equal(sm_ops_table(&m, 0, &rows, &n), 0);
    assert_int_equal(n, 2);
    const sm_op_row *r = find_row(rows, n, "aten::div_", NULL);
    assert_int_equal(r->calls, 2);
    assert_true(fabs(r->cpu_total_s - 180e-6) < 1e-12);
    assert_true(fabs(r->self_cpu_s - 110e-6) < 1e-12); /* 100 - 70, and 80 */
    r = find_row(rows, n, "aten::mul", NULL);
    assert_int_equal(r->calls, 1);
    assert_true(fabs(r->cpu_total_s - 100e-6) < 1e-12);
    assert_true(fabs(r->self_cpu_s - 40e-6) < 1e-12);
    assert_null(find_row(rows, n, "aten::is_leaf", NULL));
    sonde__free(rows);
    sm_free(&m);
    tu_rmrf(dir);
}

/* A section closed inside a range flagged SONDE_OP_F_HOOK_RANGE that began inside it (a
 * gradient hook run in autograd's AccumulateGrad) ends where the range ends; the same range
 * unflagged, or one that began before the section, moves nothing. The ranges run 20 ms past the
 * sections' ends and the sections are 30 ms apart, so a thread preempted for a while (a loaded
 * machine) changes none of the three cases, nor does the TSC-to-monotonic conversion's error. */
static void hook_range_holds_the_section_s_end(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "ops-hook");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    const uint64_t us = 1000;
    uint64_t before[3], after[3], ended[3];
    const char *names[] = {"flagged", "unflagged", "began-before"};
    for (int i = 0; i < 3; i++) {
        before[i] = mono();
        assert_int_equal(sonde_begin(p, names[i]), 0);
        after[i] = mono();
        spin_until(after[i] + 300 * us);
        assert_int_equal(sonde_end(p), 0);
        ended[i] = mono();
        struct timespec gap = {0, 30 * 1000 * 1000};
        nanosleep(&gap, NULL);
    }
    uint64_t end0 = 0;
    sonde_op ops[3];
    for (int i = 0; i < 3; i++) /* inside the section (after its begin, before its end), or
                                   before it began; each ends 20 ms past the section */
        ops[i] = (sonde_op){.kind = SONDE_OP_CPU, .name = "range",
                            .start_ns = i == 2 ? before[i] - 50 * us : after[i] + 250 * us,
                            .dur_ns = ended[i] + 20000 * us - (i == 2 ? before[i] - 50 * us
                                                                      : after[i] + 250 * us),
                            .flags = SONDE_OP_F_TABLE | (i == 1 ? 0 : SONDE_OP_F_HOOK_RANGE)};
    assert_int_equal(sonde_ops(p, ops, 3), 0);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    for (size_t i = 0; i < m.n_spans; i++) {
        const sm_span *s = &m.spans[i];
        const char *nm = sm_str(&m, s->site);
        int k = !strcmp(nm, "flagged") ? 0 : !strcmp(nm, "unflagged") ? 1 : 2;
        int64_t range_end = (int64_t)(ops[k].start_ns + ops[k].dur_ns - m.start_mono_ns);
        if (k == 0) {
            assert_int_equal(s->end_ns, range_end);
            end0 = 1;
        } else { /* where it ended, not moved 20 ms on to the range's end. The section's end
                    is a TSC tick the reader converts with the file's anchors, the test's
                    ended[] a clock_gettime read: on a loaded machine the two differ by more
                    than the few ns between them (a CI run's section ended past ended[]), so the
                    bound is 10 ms, half the way to where a moved end would be */
            assert_true(s->end_ns < (int64_t)(ended[k] - m.start_mono_ns) + 10000 * (int64_t)us);
            assert_true(s->end_ns < range_end - 10000 * (int64_t)us);
        }
    }
    assert_int_equal(end0, 1);
    sm_free(&m);
    tu_rmrf(dir);
}

static void bad_input_is_refused(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "ops-bad");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    sonde_op o = {.kind = 9, .name = "x", .start_ns = mono(), .dur_ns = 1};
    assert_int_equal(sonde_ops(p, &o, 1), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "entry 0: unknown kind 9"));
    o.kind = SONDE_OP_CPU;
    o.flops = NAN;
    assert_int_equal(sonde_ops(p, &o, 1), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "entry 0 (x): flops"));
    o.flops = 0;
    o.flags = 8;
    assert_int_equal(sonde_ops(p, &o, 1), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "entry 0 (x): unknown flags 0x8"));
    o.flags = SONDE_OP_F_LEFT_OUT; /* left out of a table it has no figures of */
    assert_int_equal(sonde_ops(p, &o, 1), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "entry 0 (x): flags SONDE_OP_F_LEFT_OUT without"));
    o.flags = 0;
    assert_int_equal(sonde_ops(p, NULL, 2), SONDE_EINVAL);
    assert_int_equal(sonde_ops(NULL, &o, 1), SONDE_EINVAL);
    assert_int_equal(sonde_ops(p, NULL, 0), 0);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal(m.n_ops, 0); /* nothing of a refused call was recorded */
    sm_free(&m);
    /* disabled: a no-op */
    c.enabled = 0;
    p = sonde_create(&c);
    o.flops = 1;
    assert_int_equal(sonde_ops(p, &o, 1), 0);
    sonde_destroy(p);
    tu_rmrf(dir);
}

/* Issue 36 #15: a GPU record with times at the ends of their range (a damaged or crafted file)
 * overflowed int64 while it was placed on the run's clock (UBSan: signed overflow in gpu.c);
 * the times are now held to the range. */
static void gpu_record_times_saturate(void **state)
{
    (void)state;
    sm_gpu_raw g[3];
    memset(g, 0, sizeof g);
    g[0].kind = g[1].kind = g[2].kind = 1; /* kernels (SONDE_GPU_KERNEL, format.h) */
    g[0].start_mono = UINT64_MAX;          /* starts at the end of time, lasts forever */
    g[0].dur = UINT64_MAX;
    g[1].start_mono = 0;                   /* long before the run's origin */
    g[1].dur = 5;
    g[2].start_mono = 2000;                /* an ordinary one: 1 us after the origin, 2 us */
    g[2].dur = 2000;
    sb_raw raw;
    memset(&raw, 0, sizeof raw);
    raw.gpu = g;
    raw.n_gpu = 3;
    sm_model m;
    memset(&m, 0, sizeof m);
    m.start_mono_ns = (uint64_t)INT64_MAX + 1000; /* beyond what int64 holds */
    assert_int_equal(sm__gpu_build(&raw, &m), 0);
    assert_int_equal(m.n_gpu, 3);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < m.n_gpu; i++) {
        assert_true(m.gpu[i].end_ns >= m.gpu[i].start_ns);
        lo = m.gpu[i].start_ns < lo ? m.gpu[i].start_ns : lo;
        hi = m.gpu[i].end_ns > hi ? m.gpu[i].end_ns : hi;
    }
    assert_true(lo == INT64_MIN && hi > INT64_MAX / 2); /* held to the range, order kept */
    sonde__free(m.gpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(folded_under_their_section),
        cmocka_unit_test(same_name_only_child_is_folded),
        cmocka_unit_test(the_tracer_s_table_decides),
        cmocka_unit_test(hook_range_holds_the_section_s_end),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(gpu_record_times_saturate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
