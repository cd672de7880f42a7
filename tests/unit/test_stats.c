/* test_stats.c - the tests of `sonde diff` (tools/sonde/stats.c) against values computed
 * independently: Student's t quantiles from printed tables, exact Mann-Whitney p-values by
 * counting arrangements (2/C(10,5) for two separated samples of 5), Welch's t-test by hand. */
#include "testutil.h"

#include <math.h>

#include "../tools/sonde/stats.h"

static void t_distribution(void **state)
{
    (void)state;
    /* two-sided 95% critical values: 12.706 (1 df), 2.776 (4), 2.306 (8), 2.086 (20), 1.960 (inf) */
    assert_true(fabs(st_t_quantile(0.975, 1) - 12.7062) < 1e-3);
    assert_true(fabs(st_t_quantile(0.975, 4) - 2.77645) < 1e-4);
    assert_true(fabs(st_t_quantile(0.975, 8) - 2.30600) < 1e-4);
    assert_true(fabs(st_t_quantile(0.975, 20) - 2.08596) < 1e-4);
    assert_true(fabs(st_t_quantile(0.975, 1e7) - 1.95996) < 1e-4);
    assert_true(fabs(st_t_quantile(0.025, 8) + 2.30600) < 1e-4);
    /* p of t = 2.306 at 8 df is 0.05; t = 0 gives 1 */
    assert_true(fabs(st_t_p(2.306004, 8) - 0.05) < 1e-5);
    assert_true(fabs(st_t_p(0, 5) - 1) < 1e-12);
    assert_true(isnan(st_t_p(NAN, 5)));
}

static void mann_whitney(void **state)
{
    (void)state;
    const double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
    st_result r;
    assert_int_equal(st_mann_whitney(a, 5, b, 5, 0.05, &r), 0);
    /* every new value above every base value: 1 arrangement in C(10,5) = 252, two-sided */
    assert_true(fabs(r.p - 2.0 / 252) < 1e-12);
    assert_true(fabs(r.min_p - 2.0 / 252) < 1e-12);
    /* the shift is 5 (all pairwise differences 1..9, median 5); the 95% interval is within */
    assert_true(r.lo >= 1 && r.lo <= 5 && r.hi >= 5 && r.hi <= 9);
    /* the same samples: p = 1 (U at its mean) and the interval holds 0 */
    assert_int_equal(st_mann_whitney(a, 5, a, 5, 0.05, &r), 0);
    assert_true(r.p > 0.99 && r.lo <= 0 && r.hi >= 0);
    /* three runs a side can never reach p < 0.05: the smallest p is 2/C(6,3) = 0.1 */
    assert_int_equal(st_mann_whitney(a, 3, b, 3, 0.05, &r), 0);
    assert_true(fabs(r.min_p - 0.1) < 1e-12 && fabs(r.p - 0.1) < 1e-12);
    assert_true(isnan(r.lo) && isnan(r.hi)); /* no 95% interval from 3 and 3 */
    /* interleaved: 1 3 5 7 9 against 2 4 6 8 10: U = 10 of 25, exact p = 0.6905 */
    const double c[] = {1, 3, 5, 7, 9}, d[] = {2, 4, 6, 8, 10};
    assert_int_equal(st_mann_whitney(c, 5, d, 5, 0.05, &r), 0);
    assert_true(fabs(r.p - 0.690476) < 1e-5);
    /* ties and large samples: the normal approximation, p tiny for a clear shift */
    double x[60], y[60];
    for (int i = 0; i < 60; i++) {
        x[i] = i % 10;
        y[i] = 20 + i % 10;
    }
    assert_int_equal(st_mann_whitney(x, 60, y, 60, 0.05, &r), 0);
    assert_true(r.p < 1e-15 && r.lo > 0);
    /* issue 36 #18: 300 identical runs a side: p = 1, yet the sizes could reach p < 0.05 (the
     * least p was taken from these tied values and said 1: "cannot reach, run more") */
    double same[300];
    for (int i = 0; i < 300; i++)
        same[i] = 0.01;
    assert_int_equal(st_mann_whitney(same, 300, same, 300, 0.05, &r), 0);
    assert_true(r.p > 0.99 && r.min_p < 1e-10);
    /* --per-instance sizes: 3,000 a side is ranked by sorting (not pair by pair), and its 9 Mi
     * pairwise differences are past what the interval may take: p, and no interval */
    double *big = malloc(6000 * sizeof *big);
    assert_non_null(big);
    for (int i = 0; i < 6000; i++)
        big[i] = i < 3000 ? i % 100 : 50 + i % 100;
    assert_int_equal(st_mann_whitney(big, 3000, big + 3000, 3000, 0.05, &r), 0);
    assert_true(r.p < 1e-15 && isnan(r.lo) && isnan(r.hi));
    free(big);
}

static void welch(void **state)
{
    (void)state;
    st_result r;
    /* 1..5 against 6..10: means 3 and 8, variances 2.5, t = 5 at 8 df, p = 0.001053 */
    assert_int_equal(st_welch(5, 3, 2.5, 5, 8, 2.5, 0.05, &r), 0);
    assert_true(fabs(r.p - 0.00105) < 1e-5);
    assert_true(fabs(r.lo - (5 - 2.306004)) < 1e-4 && fabs(r.hi - (5 + 2.306004)) < 1e-4);
    /* unequal variances: Welch-Satterthwaite degrees of freedom (by hand: t = 1.414, df = 4.878,
     * p = 0.217) */
    assert_int_equal(st_welch(5, 10, 1, 5, 12, 9, 0.05, &r), 0);
    double se = sqrt(1.0 / 5 + 9.0 / 5), df = se * se * se * se /
                                                ((1.0 / 25) / 4 + (81.0 / 25) / 4);
    assert_true(fabs(r.p - st_t_p(2 / se, df)) < 1e-12);
    assert_true(r.p > 0.21 && r.p < 0.225);
    /* no spread: a difference is certain, none is nothing */
    assert_int_equal(st_welch(3, 1, 0, 3, 2, 0, 0.05, &r), 0);
    assert_true(r.p == 0 && r.lo == 1 && r.hi == 1);
    assert_int_equal(st_welch(1, 1, 0, 3, 2, 0, 0.05, &r), -1);
    double v[] = {2, 4, 4, 4, 5, 5, 7, 9}, m, var;
    st_mean_var(v, 8, &m, &var);
    assert_true(fabs(m - 5) < 1e-12 && fabs(var - 32.0 / 7) < 1e-12);
    assert_true(st_median(v, 8) == 4.5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(t_distribution),
                                       cmocka_unit_test(mann_whitney), cmocka_unit_test(welch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
