/* bench_off.c - the benchmark loop compiled with -DSONDE_DISABLE: what a compiled-out
 * SONDE_SCOPE costs (nothing but the loop). */
#include <sonde/sonde.h>

void bench_compiled_out(long n);

void bench_compiled_out(long n)
{
    sonde_profiler *p = 0;
    for (long i = 0; i < n; i++) {
        SONDE_SCOPE(p, "bench");
        __asm__ __volatile__("" ::: "memory");
    }
    (void)p;
}
