/* hotwork.h - the work of known shares for the CPU sampler's tests (hotspots.c, hotsections.c):
 * hot70, warm20 and cool10 spend 70%, 20% and 10% of a round's work, each in its own loop.
 * Built at -O0 with frame pointers (tests/CMakeLists.txt): a function without a frame hides its
 * caller from a frame-pointer walk. */
#ifndef SONDE_TEST_HOTWORK_H
#define SONDE_TEST_HOTWORK_H

static _Thread_local volatile double g_sink; /* per thread: no data race under TSan */

#define LOOP(n)                                                                                \
    do {                                                                                       \
        double x_ = 0;                                                                         \
        for (long i_ = 0; i_ < (n); i_++)                                                      \
            x_ += (double)i_ * 0.5;                                                            \
        g_sink = x_;                                                                           \
    } while (0)

__attribute__((noinline)) static void hot70(void) { LOOP(7000000); }
__attribute__((noinline)) static void warm20(void) { LOOP(2000000); }
__attribute__((noinline)) static void cool10(void) { LOOP(1000000); }

#endif
