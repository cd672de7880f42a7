/* inlined.c - a hot function inlined into its caller, for the CPU sampler's DWARF names: built
 * at -O2 with -g and frame pointers (tests/CMakeLists.txt), inner_hot (always inlined) holds 90%
 * of the work, inside outer_work (never inlined), which main calls. The samples in inner_hot's
 * loop must be named inner_hot, with outer_work as its caller, and both defined in this file.
 * Usage: inlined ROUNDS */
#include <stdlib.h>

static volatile double g_sink;

static inline __attribute__((always_inline)) double inner_hot(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5 / (double)(i + 1);
    return x;
}

__attribute__((noinline)) static double outer_work(long n)
{
    double x = inner_hot(9 * n);
    for (long i = 0; i < n; i++) /* its own tenth */
        x -= (double)i / (double)(i + 3);
    return x;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    for (long r = 0; r < rounds; r++)
        g_sink = outer_work(2000000 + r); /* a call per round: not hoisted out */
    return 0;
}
