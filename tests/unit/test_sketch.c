/* test_sketch.c - the quantile sketch (model/sketch.c): every quantile within SM_SKETCH_ALPHA of
 * the instance at its rank, merging equal to sketching the union, and the statistics of a
 * recorded run taking their percentiles from it past SM_SKETCH_AT instances. */
#include <math.h>

#include "testutil.h"
#include "model/sketch.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A deterministic spread of durations over six decades, with repeats and zeros. */
static int64_t draw(uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = *seed >> 11;
    if (r % 97 == 0)
        return 0;
    return (int64_t)exp((double)(r % 1000000) / 1000000.0 * log(1e6)) * 7 + (int64_t)(r % 3);
}

/* The sketch's answer lies within alpha of the sorted v's instance at q's rank. */
static void assert_within(const sm_sketch *s, const int64_t *v, size_t n, double q)
{
    size_t lo = (size_t)floor(q * (double)(n - 1));
    double got = sm_sketch_quantile(s, q), want = (double)v[lo];
    double tol = SM_SKETCH_ALPHA * want * (1 + 1e-9);
    if (fabs(got - want) > tol)
        fail_msg("q %.4f: sketch %.1f, instance %.1f (rank %zu), tolerance %.3f", q, got, want,
                 lo, tol);
}

static void quantiles_within_alpha(void **state)
{
    (void)state;
    enum { N = 200000 };
    int64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    sm_sketch s;
    sm_sketch_init(&s);
    uint64_t seed = 42;
    for (size_t i = 0; i < N; i++) {
        v[i] = draw(&seed);
        assert_int_equal(sm_sketch_add(&s, v[i]), 0);
    }
    qsort(v, N, sizeof *v, cmp_i64);
    static const double qs[] = {0, 0.001, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1};
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++)
        assert_within(&s, v, N, qs[k]);
    assert_true(s.count == N && s.min_ns == v[0] && s.max_ns == v[N - 1]);
    /* bounded: the buckets between the shortest and longest, with some room */
    assert_true((int64_t)s.n < 2 * (sm_sketch_index(v[N - 1]) - sm_sketch_index(1) + 1) + 16);
    sm_sketch_free(&s);
    free(v);
}

/* The bucket comes from a table (no logarithm per instance): the same bucket as
 * ceil(log(ns) / log(gamma)) for every duration from 1 ns to 2 ms and for a million spread up to
 * 2^63 ns. */
static void index_matches_logarithm(void **state)
{
    (void)state;
    double lg = log((1 + SM_SKETCH_ALPHA) / (1 - SM_SKETCH_ALPHA));
    uint64_t seed = 1;
    for (long i = 0; i < 3000000; i++) {
        int64_t ns = i + 1;
        if (i >= 2000000) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            ns = (int64_t)(seed >> 1) >> (seed % 62); /* every binade */
            if (ns < 1)
                ns = 1;
        }
        int32_t want = (int32_t)ceil(log((double)ns) / lg);
        if (sm_sketch_index(ns) != want)
            fail_msg("%lld ns: bucket %d, the logarithm says %d", (long long)ns,
                     sm_sketch_index(ns), want);
    }
}

static void merge_equals_union(void **state)
{
    (void)state;
    sm_sketch a, b, all;
    sm_sketch_init(&a);
    sm_sketch_init(&b);
    sm_sketch_init(&all);
    uint64_t seed = 7;
    for (int i = 0; i < 50000; i++) {
        int64_t d = draw(&seed);
        assert_int_equal(sm_sketch_add(i % 3 ? &a : &b, i % 3 ? d : d * 1000), 0);
        assert_int_equal(sm_sketch_add(&all, i % 3 ? d : d * 1000), 0);
    }
    assert_int_equal(sm_sketch_merge(&a, &b), 0);
    assert_true(a.count == all.count && a.zeros == all.zeros);
    assert_true(a.min_ns == all.min_ns && a.max_ns == all.max_ns);
    for (double q = 0; q <= 1.0; q += 0.05)
        assert_true(sm_sketch_quantile(&a, q) == sm_sketch_quantile(&all, q));
    sm_sketch_free(&a);
    sm_sketch_free(&b);
    sm_sketch_free(&all);
}

static void constants_and_empty(void **state)
{
    (void)state;
    sm_sketch s;
    sm_sketch_init(&s);
    assert_true(sm_sketch_quantile(&s, 0.5) == 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sm_sketch_add(&s, 12345), 0);
    /* one value: min and max pin every quantile to it */
    assert_true(sm_sketch_quantile(&s, 0) == 12345 && sm_sketch_quantile(&s, 0.99) == 12345);
    sm_sketch_free(&s);
    sm_sketch_init(&s);
    for (int i = 0; i < 10; i++)
        assert_int_equal(sm_sketch_add(&s, 0), 0);
    assert_true(sm_sketch_quantile(&s, 0.5) == 0 && s.zeros == 10);
    sm_sketch_free(&s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A recorded run: "many" has more instances than SM_SKETCH_AT and takes its percentiles from
 * the sketch, within alpha of the exact ones; "few" keeps exact ones. */
static void stats_from_sketch(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "sk");
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    size_t n_many = SM_SKETCH_AT + 5000;
    for (size_t i = 0; i < n_many; i++) {
        sonde_begin(p, "many");
        sonde_end(p);
    }
    for (int i = 0; i < 100; i++) {
        sonde_begin(p, "few");
        sonde_end(p);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    const sm_stat *many = tu_stat(&m, "many"), *few = tu_stat(&m, "few");
    assert_non_null(many);
    assert_non_null(few);
    assert_true(many->sketch && many->sketched);
    assert_true(few->sketch && !few->sketched && few->sketch->count == 100);
    assert_int_equal(many->count, n_many);
    double *d = malloc(n_many * sizeof *d);
    assert_non_null(d);
    size_t k = 0;
    double sum = 0;
    for (size_t i = 0; i < m.n_spans; i++)
        if (!strcmp(m.sites[m.spans[i].site].name, "many")) {
            d[k] = (double)(m.spans[i].end_ns - m.spans[i].start_ns) / 1e9;
            sum += d[k++];
        }
    assert_int_equal(k, n_many);
    qsort(d, k, sizeof *d, cmp_double);
    const double qs[] = {0.5, 0.9, 0.99}, got[] = {many->p50_s, many->p90_s, many->p99_s};
    for (int j = 0; j < 3; j++) {
        size_t lo = (size_t)floor(qs[j] * (double)(k - 1));
        if (fabs(got[j] - d[lo]) > SM_SKETCH_ALPHA * d[lo] * (1 + 1e-9))
            fail_msg("p%g: %.9f s from the sketch, %.9f s exact", qs[j] * 100, got[j], d[lo]);
    }
    assert_true(many->min_s == d[0] && many->max_s == d[k - 1]);
    assert_true(fabs(many->mean_s - sum / (double)k) <= 1e-9 * many->mean_s);
    free(d);
    sm_free(&m);
    tu_rmrf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quantiles_within_alpha),
        cmocka_unit_test(index_matches_logarithm),
        cmocka_unit_test(merge_equals_union),
        cmocka_unit_test(constants_and_empty),
        cmocka_unit_test(stats_from_sketch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
