/* stats.c - two-sample tests for `sonde diff` (see stats.h). */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/sort.h"

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct obs {
    double v;
    int side; /* 0: base, 1: new */
} obs;

static int cmp_obs(const void *a, const void *b)
{
    return cmp_dbl(&((const obs *)a)->v, &((const obs *)b)->v);
}

/* The Hodges-Lehmann interval needs every pairwise difference: up to this many (32 MiB), past it
 * (instances by the hundred thousand with --per-instance) the interval is not given. */
#define HL_MAX_PAIRS (4u << 20)

void st_mean_var(const double *v, size_t n, double *mean, double *var)
{
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) { /* Welford: no cancellation for close values */
        double d = v[i] - m;
        m += d / (double)(i + 1);
        s += d * (v[i] - m);
    }
    *mean = n ? m : NAN;
    *var = n > 1 ? s / (double)(n - 1) : 0;
}

double st_median(double *v, size_t n)
{
    sonde__sort(v, n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- Student's t through the regularized incomplete beta function ---- */

/* The continued fraction of I_x(a, b), evaluated by the modified Lentz method. */
static double beta_fraction(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = 1 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m;
        /* the even step, then the odd one */
        double num = m * (b - m) * x / ((a - 1 + m2) * (a + m2));
        d = 1 + num * d;
        c = 1 + num / c;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = fabs(c) < tiny ? tiny : c;
        h *= d * c;
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));
        d = 1 + num * d;
        c = 1 + num / c;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = fabs(c) < tiny ? tiny : c;
        double step = d * c;
        h *= step;
        if (fabs(step - 1) < 1e-15)
            break;
    }
    return h;
}

/* I_x(a, b) */
static double inc_beta(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2))
        return front * beta_fraction(a, b, x) / a;
    return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double st_t_p(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (isinf(t))
        return 0;
    return inc_beta(df / 2, 0.5, df / (df + t * t));
}

double st_t_quantile(double q, double df)
{
    if (!(q > 0 && q < 1) || !(df > 0))
        return NAN;
    if (q < 0.5)
        return -st_t_quantile(1 - q, df);
    double want = 2 * (1 - q); /* the two-sided p at the quantile */
    double lo = 0, hi = 1;
    while (st_t_p(hi, df) > want && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = (lo + hi) / 2;
        if (st_t_p(mid, df) > want)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* The standard normal quantile q (bisection on erfc). */
static double z_quantile(double q)
{
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (0.5 * erfc(-mid / sqrt(2.0)) < q)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

int st_welch(size_t na, double mean_a, double var_a, size_t nb, double mean_b, double var_b,
             double alpha, st_result *r)
{
    r->p = r->lo = r->hi = NAN;
    r->min_p = 0;
    if (na < 2 || nb < 2)
        return -1;
    double d = mean_b - mean_a;
    double sa = var_a / (double)na, sb = var_b / (double)nb, se2 = sa + sb;
    if (!(se2 > 0)) { /* no spread on either side: any difference is certain */
        r->p = d == 0 ? 1 : 0;
        r->lo = r->hi = d;
        return 0;
    }
    double df = se2 * se2 / (sa * sa / (double)(na - 1) + sb * sb / (double)(nb - 1));
    r->p = st_t_p(d / sqrt(se2), df);
    double q = st_t_quantile(1 - alpha / 2, df);
    r->lo = d - q * sqrt(se2);
    r->hi = d + q * sqrt(se2);
    return 0;
}

/* ---- Mann-Whitney U ---- */

/* The number of arrangements of m base and n new values (no ties) giving each U = 0..m*n: the
 * coefficients of the Gaussian binomial [m+n choose m](q), built as the product over k = 1..m of
 * (1 - q^(n+k)) / (1 - q^k). Exact in doubles while C(m+n, m) < 2^53 (m + n <= 50). */
static double *u_counts(size_t m, size_t n)
{
    size_t len = m * n + n + m + 2;
    double *c = calloc(len, sizeof *c);
    if (!c)
        return NULL;
    c[0] = 1;
    size_t deg = 0;
    for (size_t k = 1; k <= m; k++) {
        size_t up = n + k;
        for (size_t i = deg + up + 1; i-- > up;) /* times (1 - q^up) */
            c[i] -= c[i - up];
        deg += up;
        for (size_t i = k; i <= deg; i++) /* divided by (1 - q^k): exact */
            c[i] += c[i - k];
        deg -= k;
    }
    return c;
}

int st_mann_whitney(const double *a, size_t na, const double *b, size_t nb, double alpha,
                    st_result *r)
{
    r->p = r->lo = r->hi = NAN;
    r->min_p = 1;
    if (!na || !nb)
        return 0;
    size_t n = na + nb;
    int pairs = na <= HL_MAX_PAIRS / nb;
    obs *o = malloc(n * sizeof *o);
    double *diff = pairs ? malloc(na * nb * sizeof *diff) : NULL;
    if (!o || (pairs && !diff)) {
        free(o);
        free(diff);
        return -1;
    }
    for (size_t i = 0; i < na; i++)
        o[i] = (obs){a[i], 0};
    for (size_t i = 0; i < nb; i++)
        o[na + i] = (obs){b[i], 1};
    sonde__sort(o, n, sizeof *o, cmp_obs); /* ranks: ties share their mean rank */
    double ra = 0, ties = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && o[j].v == o[i].v)
            j++;
        double rank = (double)(i + 1 + j) / 2, t = (double)(j - i);
        for (size_t k = i; k < j; k++)
            if (o[k].side == 0)
                ra += rank;
        ties += t * t * t - t;
        i = j;
    }
    free(o);
    double n1 = (double)na, n2 = (double)nb, N = (double)n, mn = n1 * n2;
    double ua = ra - n1 * (n1 + 1) / 2; /* pairs where base > new */
    double u = fmin(ua, mn - ua);
    size_t k = 0;
    for (size_t i = 0; pairs && i < na; i++)
        for (size_t j = 0; j < nb; j++)
            diff[k++] = b[j] - a[i];
    if (k)
        sonde__sort(diff, k, sizeof *diff, cmp_dbl);
    long crit = -1; /* the largest c with P(U <= c) <= alpha / 2 under no difference */
    double *cnt = n <= 50 && ties == 0 ? u_counts(na, nb) : NULL;
    if (cnt) {
        double total = 0, cum = 0;
        for (size_t i = 0; i <= na * nb; i++)
            total += cnt[i];
        for (size_t i = 0; i <= (size_t)u; i++)
            cum += cnt[i];
        r->p = fmin(1, 2 * cum / total);
        r->min_p = fmin(1, 2 * cnt[0] / total);
        cum = 0;
        for (size_t i = 0; i <= na * nb && (cum += cnt[i]) / total <= alpha / 2; i++)
            crit = (long)i;
        free(cnt);
    } else {
        double sigma = sqrt(n1 * n2 / 12.0 * ((N + 1) - ties / (N * (N - 1))));
        double mu = mn / 2;
        double s0 = sqrt(n1 * n2 * (N + 1) / 12.0);
        r->p = sigma > 0 ? erfc(fmax(0, fabs(ua - mu) - 0.5) / sigma / sqrt(2.0)) : 1;
        /* the least p these sample sizes allow (every new value on one side of every base
         * value, no ties): a property of the sizes, not of these values, which may all tie */
        r->min_p = erfc(fmax(0, mu - 0.5) / s0 / sqrt(2.0));
        crit = (long)floor(mu - z_quantile(1 - alpha / 2) * s0);
        if (crit >= (long)(mn / 2))
            crit = -1;
    }
    if (crit >= 0 && pairs) { /* Hodges-Lehmann: order statistics of the pairwise differences */
        r->lo = diff[crit];
        r->hi = diff[k - 1 - (size_t)crit];
    }
    free(diff);
    return 0;
}
