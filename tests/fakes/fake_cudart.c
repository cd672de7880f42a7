/* fake_cudart.c - stands in for libcudart.so (SONDE_CUDART_LIBRARY): counts the calls to
 * cudaProfilerStart and cudaProfilerStop, and returns an error for a start while started. */
#define EXPORT __attribute__((visibility("default")))

static int g_starts, g_stops, g_open;

EXPORT int cudaProfilerStart(void)
{
    if (g_open)
        return 1; /* cudaErrorInvalidValue: the test would see a double start */
    g_open = 1;
    g_starts++;
    return 0;
}

EXPORT int cudaProfilerStop(void)
{
    g_open = 0;
    g_stops++;
    return 0;
}

EXPORT int fake_cudart_starts(void) { return g_starts; }
EXPORT int fake_cudart_stops(void) { return g_stops; }
