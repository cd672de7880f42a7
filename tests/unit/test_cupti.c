/* test_cupti.c - CUDA activity without a GPU: CUPTI records built by hand with CUPTI's own
 * structs (cupti.h) go through sonde's conversion, the GPU record encoding and the reader's
 * parser, field by field; malformed GPU records are refused. */
#define _GNU_SOURCE
#include "testutil.h"

#include <cupti.h>

#include "model/model_build.h"
#include "monitor/monitor.h"
#include "stacks/stacks.h"

static void convert_kernel_memcpy_memset_api(void **state)
{
    (void)state;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000000;
    k.end = 1250000;
    k.deviceId = 1;
    k.streamId = 13;
    k.correlationId = 77;
    k.gridX = 64, k.gridY = 2, k.gridZ = 1;
    k.blockX = 256, k.blockY = 1, k.blockZ = 1;
    k.name = "void gemm<float>(float*)";
    sonde_gpu_rec r;
    assert_int_equal(sonde__cupti_convert(&k, -400000, &r), 1);
    assert_int_equal(r.kind, SONDE_GPU_KERNEL);
    assert_int_equal(r.device, 1);
    assert_int_equal(r.stream, 13);
    assert_int_equal(r.correlation, 77);
    assert_int_equal((int)r.start_ns, 600000); /* the clock offset applied */
    assert_int_equal((int)r.end_ns, 850000);
    assert_int_equal(r.grid[0], 64);
    assert_int_equal(r.grid[1], 2);
    assert_int_equal(r.block[0], 256);
    assert_string_equal(r.name, "void gemm<float>(float*)");

    CUpti_ActivityMemcpy6 c;
    memset(&c, 0, sizeof c);
    c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    c.bytes = 1u << 30;
    c.start = 5000;
    c.end = 0; /* CUPTI could not measure the end */
    c.correlationId = 78;
    assert_int_equal(sonde__cupti_convert(&c, 0, &r), 1);
    assert_int_equal(r.kind, SONDE_GPU_MEMCPY);
    assert_int_equal(r.copy_kind, 2);
    assert_true(r.bytes == (1u << 30));
    assert_true(r.end_ns == r.start_ns); /* never before its start */

    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 4096;
    s.start = 10;
    s.end = 20;
    assert_int_equal(sonde__cupti_convert(&s, 0, &r), 1);
    assert_int_equal(r.kind, SONDE_GPU_MEMSET);
    assert_int_equal((int)r.bytes, 4096);

    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.threadId = 4242;
    a.cbid = 211;
    a.correlationId = 77;
    a.start = 900000;
    a.end = 905000;
    assert_int_equal(sonde__cupti_convert(&a, 0, &r), 1);
    assert_int_equal(r.kind, SONDE_GPU_API);
    assert_int_equal(r.tid, 4242);
    assert_int_equal(r.cbid, 211);

    /* the driver's calls: its kernel launches alone (what cuBLAS and Triton launch through) */
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
    a.correlationId = 78;
    assert_int_equal(sonde__cupti_convert(&a, 0, &r), 1);
    assert_int_equal(r.kind, SONDE_GPU_API);
    assert_int_equal(r.correlation, 78);
    assert_int_equal(r.tid, 4242);
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    assert_int_equal(sonde__cupti_convert(&a, 0, &r), 1);
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent; /* the driver's other calls: not kept */
    assert_int_equal(sonde__cupti_convert(&a, 0, &r), 0);

    CUpti_Activity other = {CUPTI_ACTIVITY_KIND_MARKER};
    assert_int_equal(sonde__cupti_convert(&other, 0, &r), 0); /* not kept */
}

static void encode_parse_round_trip(void **state)
{
    (void)state;
    sonde_gpu_rec in[3];
    memset(in, 0, sizeof in);
    in[0].kind = SONDE_GPU_KERNEL;
    in[0].device = 3;
    in[0].stream = 9;
    in[0].correlation = 5;
    in[0].start_ns = 123456789;
    in[0].end_ns = 123456789 + 1000;
    in[0].name = "k";
    in[0].grid[0] = -1; /* zigzag keeps a sign */
    in[0].block[2] = 1024;
    in[1].kind = SONDE_GPU_MEMCPY;
    in[1].bytes = 1ull << 40;
    in[1].copy_kind = 8;
    in[1].start_ns = 5;
    in[1].end_ns = 3; /* an end before the start: duration 0 */
    in[2].kind = SONDE_GPU_API;
    in[2].tid = 77;
    in[2].cbid = 211;
    uint8_t buf[3 * SONDE_GPU_ENTRY_MAX];
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        n += sonde__gpu_encode(&in[i], buf + n);
    sb_raw raw;
    memset(&raw, 0, sizeof raw);
    assert_int_equal(sm__gpu_parse(&raw, buf, buf + n), 0);
    assert_int_equal((int)raw.n_gpu, 3);
    assert_string_equal(raw.gpu[0].name, "k");
    assert_int_equal(raw.gpu[0].device, 3);
    assert_int_equal(raw.gpu[0].stream, 9);
    assert_int_equal((int)raw.gpu[0].dur, 1000);
    assert_true(raw.gpu[0].start_mono == 123456789);
    assert_int_equal(raw.gpu[0].grid[0], -1);
    assert_int_equal(raw.gpu[0].block[2], 1024);
    assert_true(raw.gpu[1].bytes == 1ull << 40);
    assert_int_equal(raw.gpu[1].copy_kind, 8);
    assert_int_equal((int)raw.gpu[1].dur, 0);
    assert_int_equal(raw.gpu[2].tid, 77);
    sm__gpu_free_raw(&raw);
    /* every cut short of the whole is refused, never read past */
    for (size_t cut = 1; cut < n; cut++) {
        memset(&raw, 0, sizeof raw);
        int rc = sm__gpu_parse(&raw, buf, buf + cut);
        sm__gpu_free_raw(&raw);
        if (rc == 0) { /* only at an entry boundary */
            size_t a = sonde__gpu_encode(&in[0], buf + 0);
            size_t b = a + sonde__gpu_encode(&in[1], buf + a);
            assert_true(cut == a || cut == b);
        }
    }
    uint8_t bad[] = {9, 0, 0, 0, 0, 0}; /* an unknown kind */
    memset(&raw, 0, sizeof raw);
    assert_int_equal(sm__gpu_parse(&raw, bad, bad + sizeof bad), -1);
    sm__gpu_free_raw(&raw);
}

static char g_fake[1024];

/* CUPTI has one set of callbacks per process: a second profiler asking for CUDA activity is told
 * which one has it, in its report; once the first is destroyed, another may collect. */
static void one_collector_at_a_time(void **state)
{
    (void)state;
    setenv("SONDE_CUPTI_LIBRARY", g_fake, 1);
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "first");
    c.cuda_activity = 1;
    sonde_profiler *a = sonde_create(&c);
    c.name = "second";
    sonde_profiler *b = sonde_create(&c);
    sm_model m;
    tu_finish(b, &m);
    int warned = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        warned |= strstr(m.warnings[i], "cuda activity: another profiler (first) collects CUDA "
                                        "activity in this process") != NULL;
    assert_true(warned);
    sm_free(&m);
    tu_finish(a, &m);
    for (size_t i = 0; i < m.n_warnings; i++)
        assert_null(strstr(m.warnings[i], "cuda activity"));
    sm_free(&m);
    c.name = "third";
    sonde_profiler *t = sonde_create(&c);
    tu_finish(t, &m);
    for (size_t i = 0; i < m.n_warnings; i++)
        assert_null(strstr(m.warnings[i], "cuda activity"));
    sm_free(&m);
    tu_rmrf(dir);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cupti FAKE_LIBCUPTI\n");
        return 2;
    }
    snprintf(g_fake, sizeof g_fake, "%s", argv[1]);
    const struct CMUnitTest tests[] = {cmocka_unit_test(convert_kernel_memcpy_memset_api),
                                       cmocka_unit_test(encode_parse_round_trip),
                                       cmocka_unit_test(one_collector_at_a_time)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
