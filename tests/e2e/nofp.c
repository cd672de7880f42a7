/* nofp.c - code built without frame pointers (-O2 -fomit-frame-pointer, tests/CMakeLists.txt),
 * for the sampler's unwinding by call frame information: main calls level1, level1 calls
 * level2, level2 calls burn, which holds nearly all the time. A frame-pointer walk loses the
 * callers; the samples must show main;level1;level2;burn.
 * Usage: nofp ROUNDS */
#include <stdlib.h>

static volatile double g_sink;

__attribute__((noinline)) static double burn(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5 / (double)(i + 1);
    return x;
}

__attribute__((noinline)) static double level2(long n)
{
    double x = burn(n);
    g_sink = x; /* not a tail call: level2 stays on the stack */
    return x + 1;
}

__attribute__((noinline)) static double level1(long n)
{
    double x = level2(n);
    g_sink = x;
    return x + 1;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    for (long r = 0; r < rounds; r++)
        g_sink = level1(2000000 + r);
    return 0;
}
