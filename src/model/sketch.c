/* sketch.c - the quantile sketch of sketch.h. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "sketch.h"
#include "../util/alloc.h"

/* ln(gamma), gamma = (1 + alpha) / (1 - alpha) */
static double ln_gamma(void)
{
    return log((1 + SM_SKETCH_ALPHA) / (1 - SM_SKETCH_ALPHA));
}

/* The bucket of a duration without a logarithm per call: a table gives, for each binade of
 * the duration (its power of two) split in 64 by its leading mantissa bits, the first bucket
 * that part can fall in (the bucket of its least value: one sixty-fourth of a binade spans
 * 0.78 buckets), and the buckets' upper bounds γ^i settle it in at most two comparisons. */
#define SUB_BITS 6
#define N_BOUNDS 2400 /* γ^2399 > 2^63 */
static int32_t g_first[64 << SUB_BITS];
static double g_bound[N_BOUNDS]; /* γ^i */
/* The bucket of each duration under N_SMALL ns, found once: the sections that come by the
 * billion are short, and a load is cheaper than the walk's chain of dependent loads. */
#define N_SMALL 1024
static int16_t g_small[N_SMALL];

static int32_t walk_index(int64_t ns);
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

static void tables(void)
{
    double lg = ln_gamma();
    for (int i = 0; i < N_BOUNDS; i++)
        g_bound[i] = exp(lg * i);
    for (int e = 0; e < 64; e++)
        for (int k = 0; k < (1 << SUB_BITS); k++) {
            double lo = ldexp(1.0 + (double)k / (1 << SUB_BITS), e); /* the part's least */
            int32_t i = (int32_t)floor(log(lo) / lg) - 2; /* below it, whatever log's rounding */
            if (i < 0)
                i = 0;
            while (i < N_BOUNDS - 1 && g_bound[i] < lo) /* its bucket, as sm_sketch_index finds */
                i++;
            g_first[e << SUB_BITS | k] = i;
        }
    for (int ns = 1; ns < N_SMALL; ns++)
        g_small[ns] = (int16_t)walk_index(ns);
}

/* 1 once the tables are built: the check on every call is a load, not a call into libc. */
static int g_tables_ready;

static void tables_once(void)
{
    tables();
    __atomic_store_n(&g_tables_ready, 1, __ATOMIC_RELEASE);
}

/* The tables built, once (a load once they are). */
static void need_tables(void)
{
    if (!__atomic_load_n(&g_tables_ready, __ATOMIC_ACQUIRE))
        pthread_once(&g_tables_once, tables_once);
}

void sm_sketch_init(sm_sketch *s)
{
    memset(s, 0, sizeof *s);
    s->min_ns = INT64_MAX;
    s->max_ns = INT64_MIN;
}

/* sm_sketch_index of ns > 0, g_first and g_bound built. */
static int32_t walk_index(int64_t ns)
{
    /* the binade and the 64th of it from the integer's bits: what ilogb and ldexp give for
     * every duration a double holds exactly (< 2^53 ns); above, the rounding of x can only put
     * x past the part these bits name, and the comparisons below walk on to its bucket */
    uint64_t u = (uint64_t)ns;
    int e = 63 - __builtin_clzll(u);
    unsigned k = (unsigned)(e >= SUB_BITS ? u >> (e - SUB_BITS) : u << (SUB_BITS - e)) &
                 ((1u << SUB_BITS) - 1);
    double x = (double)ns;
    int32_t i = g_first[e << SUB_BITS | (int)k];
    while (i < N_BOUNDS - 1 && g_bound[i] < x) /* the first bucket whose bound holds x */
        i++;
    return i;
}

/* sm_sketch_index of ns > 0, the tables built. */
static inline int32_t index_of(int64_t ns)
{
    return ns < N_SMALL ? g_small[ns] : walk_index(ns);
}

int32_t sm_sketch_index(int64_t ns)
{
    need_tables();
    return ns > 0 ? index_of(ns) : 0;
}

/* Makes bucket i held, growing bins to either side with room to spare. */
static int reach(sm_sketch *s, int32_t i)
{
    if (s->n && i >= s->lo && i < s->lo + (int32_t)s->n)
        return 0;
    int32_t lo = s->n ? (i < s->lo ? i : s->lo) : i;
    int32_t hi = s->n ? (i >= s->lo + (int32_t)s->n ? i + 1 : s->lo + (int32_t)s->n) : i + 1;
    int32_t slack = (hi - lo) / 4 + 8; /* fewer moves as the range widens */
    if (s->n && i < s->lo)
        lo -= slack;
    else
        hi += slack;
    uint64_t *b = sonde__calloc((size_t)(hi - lo), sizeof *b);
    if (!b)
        return -1;
    if (s->n)
        memcpy(b + (s->lo - lo), s->bins, s->n * sizeof *b);
    sonde__free(s->bins);
    s->bins = b;
    s->lo = lo;
    s->n = (uint32_t)(hi - lo);
    return 0;
}

int sm_sketch_add_bucket(sm_sketch *s, int32_t i, uint64_t count)
{
    if (reach(s, i))
        return -1;
    s->bins[i - s->lo] += count;
    s->count += count;
    return 0;
}

int sm_sketch_add(sm_sketch *s, int64_t ns)
{
    if (ns <= 0) {
        s->zeros++;
        s->count++;
        ns = 0;
    } else {
        need_tables();
        int32_t i = index_of(ns);
        uint32_t at = (uint32_t)(i - s->lo);
        if (s->n && at < s->n) { /* most: a bucket held already */
            s->bins[at]++;
            s->count++;
        } else if (sm_sketch_add_bucket(s, i, 1)) {
            return -1;
        }
    }
    if (ns < s->min_ns)
        s->min_ns = ns;
    if (ns > s->max_ns)
        s->max_ns = ns;
    return 0;
}

int sm_sketch_merge(sm_sketch *into, const sm_sketch *from)
{
    if (from->n && (reach(into, from->lo) || reach(into, from->lo + (int32_t)from->n - 1)))
        return -1;
    for (uint32_t k = 0; k < from->n; k++)
        into->bins[from->lo + (int32_t)k - into->lo] += from->bins[k];
    into->count += from->count;
    into->zeros += from->zeros;
    if (from->min_ns < into->min_ns)
        into->min_ns = from->min_ns;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
    return 0;
}

double sm_sketch_quantile(const sm_sketch *s, double q)
{
    if (!s->count)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    uint64_t rank = (uint64_t)floor(q * (double)(s->count - 1));
    if (rank < s->zeros)
        return 0;
    uint64_t seen = s->zeros;
    double g = exp(ln_gamma()), v = (double)s->max_ns;
    for (uint32_t k = 0; k < s->n; k++) {
        seen += s->bins[k];
        if (seen > rank) { /* the bucket's centre in relative terms: within alpha of all in it */
            v = 2 * pow(g, s->lo + (int32_t)k) / (g + 1);
            break;
        }
    }
    if (v < (double)s->min_ns)
        v = (double)s->min_ns;
    if (v > (double)s->max_ns)
        v = (double)s->max_ns;
    return v;
}

void sm_sketch_free(sm_sketch *s)
{
    sonde__free(s->bins);
    s->bins = NULL;
    s->n = 0;
}
