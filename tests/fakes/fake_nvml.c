/* fake_nvml.c - a stand-in for libnvidia-ml.so, built by the tests and loaded through
 * SONDE_NVML_LIBRARY so that sonde's real dlopen path runs. Fixed readings per device i:
 *   utilization 40 + 10i %, memory utilization 20 + i %, memory used (1000 + 1000i) MiB of
 *   24576 MiB (reserved 512 MiB), temperature 60 + i C, power 150 + i W, power limit 300 W
 *   (device 1: NOT_SUPPORTED), SM clock 1500 MHz, memory clock 5000 MHz, throttle reasons:
 *   device 0 SwPowerCap, others none. nvmlDeviceGetTotalEnergyConsumption is not exported.
 * Builds: default (versioned names), -DFAKE_OLD (unversioned names only), -DFAKE_BROKEN (no
 * device count). Environment: FAKE_NVML_DEVICES (default 2), FAKE_NVML_FAIL_INIT=1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

struct fake_dev {
    unsigned index;
};
static struct fake_dev g_devs[16];
static int g_init_calls;

static unsigned n_devices(void)
{
    const char *v = getenv("FAKE_NVML_DEVICES");
    unsigned n = v ? (unsigned)atoi(v) : 2;
    return n > 16 ? 16 : n;
}

EXPORT int fake_nvml_init_calls(void) { return g_init_calls; }

static nvmlReturn_t do_init(void)
{
    g_init_calls++;
    const char *d = getenv("FAKE_NVML_INIT_DELAY_MS"); /* nvmlInit can take seconds */
    if (d && atoi(d) > 0) {
        struct timespec ts = {atoi(d) / 1000, (long)(atoi(d) % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    const char *f = getenv("FAKE_NVML_FAIL_INIT");
    if (f && *f == '1')
        return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
    for (unsigned i = 0; i < 16; i++)
        g_devs[i].index = i;
    return 0;
}

__attribute__((unused)) static nvmlReturn_t do_count(unsigned int *n)
{
    *n = n_devices();
    return 0;
}

static nvmlReturn_t do_handle(unsigned int i, nvmlDevice_t *d)
{
    if (i >= n_devices())
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = &g_devs[i];
    return 0;
}

static void fill_mem(nvmlDevice_t d, unsigned long long *total, unsigned long long *used)
{
    *total = 24576ull << 20;
    *used = (1000ull + 1000ull * d->index) << 20;
}

#ifdef FAKE_OLD
EXPORT nvmlReturn_t nvmlInit(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return do_count(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return do_handle(i, d); }
#else
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
#ifndef FAKE_BROKEN
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { return do_count(n); }
#endif
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) { return do_handle(i, d); }
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    if (m->version != (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))
        return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    fill_mem(d, &m->total, &m->used);
    m->reserved = 512ull << 20;
    m->free = m->total - m->used - m->reserved;
    return 0;
}
#endif

EXPORT nvmlReturn_t nvmlShutdown(void) { return 0; }
EXPORT const char *nvmlErrorString(nvmlReturn_t r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
    snprintf(buf, len, "999.99");
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len)
{
    snprintf(buf, len, "Fake GPU %u", d->index);
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len)
{
    snprintf(buf, len, "GPU-fake-%04u", d->index);
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    u->gpu = 40 + 10 * d->index;
    u->memory = 20 + d->index;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    fill_mem(d, &m->total, &m->used);
    m->free = m->total - m->used;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    if (sensor != 0)
        return 2;
    *t = 60 + d->index;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    *mw = 150000 + 1000 * d->index;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    if (d->index == 1)
        return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *mw = 300000;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
    (void)d;
    if (type == 1) /* NVML_CLOCK_SM */
        *mhz = 1500;
    else if (type == 2) /* NVML_CLOCK_MEM */
        *mhz = 5000;
    else
        return 2;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r)
{
    *r = d->index == 0 ? 0x4ull : 0;
    return 0;
}
