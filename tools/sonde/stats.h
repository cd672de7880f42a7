/* stats.h - the two-sample tests of `sonde diff`: Mann-Whitney U (exact for small samples without
 * ties, else the normal approximation with tie and continuity corrections) with the
 * Hodges-Lehmann confidence interval of the shift, and Welch's t-test with the confidence
 * interval of the difference of means. All two-sided. */
#ifndef SONDE_CLI_STATS_H
#define SONDE_CLI_STATS_H

#include <stddef.h>

typedef struct st_result {
    double p;            /* two-sided p-value; NAN when it cannot be computed */
    double lo, hi;       /* confidence interval of new - base at 1 - alpha (NAN: unbounded, or
                            Mann-Whitney with over 4 Mi pairs: not computed) */
    double min_p;        /* the smallest p these sample sizes can give (1 when none below 1) */
} st_result;

/* Mann-Whitney U between a (base) and b (new). 0, or -1 out of memory. */
int st_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double alpha,
                    st_result *r);
/* Welch's t-test from summaries: counts, means and sample variances (n - 1). 0, or -1 when a
 * side has fewer than 2 values. */
int st_welch(size_t na, double mean_a, double var_a, size_t nb, double mean_b, double var_b,
             double alpha, st_result *r);
/* Student's t: the two-sided p of |t| with df degrees of freedom, and the quantile q (0 < q < 1). */
double st_t_p(double t, double df);
double st_t_quantile(double q, double df);
/* Mean and sample variance (n - 1; 0 for n < 2) of v. */
void st_mean_var(const double *v, size_t n, double *mean, double *var);
/* The median of v (n > 0); sorts v. */
double st_median(double *v, size_t n);

#endif
