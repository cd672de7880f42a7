/* nvml.c - every GPU through NVML, loaded with dlopen at run time: no NVIDIA header or library
 * is needed to build sonde. The few types NVML's functions take are declared here. Versioned
 * symbols are resolved with fallbacks (nvmlInit_v2, then nvmlInit); a function that is missing or
 * answers NOT_SUPPORTED turns off that one figure on that device, not the device. nvmlInit runs
 * once per process, however many profilers sample. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "../util/alloc.h"
#include "../util/env.h"

/* ---- the NVML ABI, as documented in nvml.h ---- */
typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
};
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*mem_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
} nvml_api;

/* The process-wide load: the library, its functions, the outcome of nvmlInit. */
static struct {
    pthread_mutex_t lock;
    int tried;
    int ok;
    void *lib;
    nvml_api api;
    char why[256];
} g_nvml = {PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, {0}, ""};

/* Figures a device may lack; a bit each. */
enum {
    F_UTIL = 1 << 0, F_MEM = 1 << 1, F_TEMP = 1 << 2, F_POWER = 1 << 3, F_LIMIT = 1 << 4,
    F_SM_CLOCK = 1 << 5, F_MEM_CLOCK = 1 << 6, F_REASONS = 1 << 7, F_ENERGY = 1 << 8,
};
static const char *const g_fig_names[] = {"utilization", "memory", "temperature", "power",
                                          "power limit", "SM clock", "memory clock",
                                          "throttle reasons", "energy"};
#define N_FIGS 9

typedef struct nvml_dev {
    unsigned index;
    nvmlDevice_t h;
    unsigned off;                  /* F_* bits turned off */
    unsigned long long last_reasons;
    int reasons_seen;
} nvml_dev;

struct nvml_state {
    nvml_dev *dev;
    size_t n;
    int temperature, power;
    char handle_notes[256];        /* devices whose handle could not be opened */
    char notes[768];
};

static void *sym(void *lib, const char *a, const char *b)
{
    void *f = dlsym(lib, a);
    if (!f && b)
        f = dlsym(lib, b);
    return f;
}

/* Loads and initialises NVML once per process. Caller holds g_nvml.lock. */
static void load_once(void)
{
    if (g_nvml.tried)
        return;
    g_nvml.tried = 1;
    const char *path = sonde__getenv("SONDE_NVML_LIBRARY");
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    g_nvml.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_nvml.lib) {
        const char *e = dlerror();
        snprintf(g_nvml.why, sizeof g_nvml.why, "GPU metrics unavailable: cannot load %s (%s)",
                 path, e ? e : "unknown error");
        return;
    }
    nvml_api *a = &g_nvml.api;
    void *lib = g_nvml.lib;
    /* dlsym returns void *: POSIX guarantees it converts to a function pointer. */
#define LOAD(field, n1, n2) *(void **)(&a->field) = sym(lib, n1, n2)
    LOAD(init, "nvmlInit_v2", "nvmlInit");
    LOAD(error_string, "nvmlErrorString", NULL);
    LOAD(count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    LOAD(handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    LOAD(driver_version, "nvmlSystemGetDriverVersion", NULL);
    LOAD(name, "nvmlDeviceGetName", NULL);
    LOAD(uuid, "nvmlDeviceGetUUID", NULL);
    LOAD(util, "nvmlDeviceGetUtilizationRates", NULL);
    LOAD(mem_v2, "nvmlDeviceGetMemoryInfo_v2", NULL);
    LOAD(mem, "nvmlDeviceGetMemoryInfo", NULL);
    LOAD(temperature, "nvmlDeviceGetTemperature", NULL);
    LOAD(power, "nvmlDeviceGetPowerUsage", NULL);
    LOAD(power_limit, "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit");
    LOAD(clock, "nvmlDeviceGetClockInfo", NULL);
    LOAD(reasons, "nvmlDeviceGetCurrentClocksEventReasons",
         "nvmlDeviceGetCurrentClocksThrottleReasons");
    LOAD(energy, "nvmlDeviceGetTotalEnergyConsumption", NULL);
#undef LOAD
    const char *missing = !a->init ? "nvmlInit_v2 (or nvmlInit)"
                          : !a->count ? "nvmlDeviceGetCount_v2 (or nvmlDeviceGetCount)"
                          : !a->handle ? "nvmlDeviceGetHandleByIndex_v2 (or _ByIndex)"
                                       : NULL;
    if (missing) {
        snprintf(g_nvml.why, sizeof g_nvml.why,
                 "GPU metrics unavailable: %s lacks %s", path, missing);
        return;
    }
    nvmlReturn_t r = a->init();
    if (r != NVML_SUCCESS) {
        const char *es = a->error_string ? a->error_string(r) : NULL;
        const char *hint = r == NVML_ERROR_DRIVER_NOT_LOADED ? " (is the NVIDIA driver loaded?)"
                           : r == NVML_ERROR_NO_PERMISSION  ? " (no permission)"
                                                            : "";
        snprintf(g_nvml.why, sizeof g_nvml.why, "GPU metrics unavailable: nvmlInit failed: %s (%d)%s",
                 es ? es : "error", r, hint);
        return;
    }
    g_nvml.ok = 1;
}

/* "0,2" -> indices; NULL or "all": every device. */
static int parse_devices(const char *spec, unsigned count, unsigned *out, size_t *n, char *why,
                         size_t cap)
{
    *n = 0;
    if (!spec || !*spec || !strcmp(spec, "all")) {
        for (unsigned i = 0; i < count; i++)
            out[(*n)++] = i;
        return 0;
    }
    const char *p = spec;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0) {
            snprintf(why, cap, "GPU metrics unavailable: gpu_devices \"%s\" is not a list of "
                               "indices like 0,2", spec);
            return -1;
        }
        if ((unsigned long)v >= count) {
            snprintf(why, cap, "GPU metrics unavailable: gpu_devices names GPU %ld but there "
                               "are %u", v, count);
            return -1;
        }
        size_t i;
        for (i = 0; i < *n && out[i] != (unsigned)v; i++) {
        }
        if (i == *n && *n < 64)
            out[(*n)++] = (unsigned)v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return 0;
}

void nvml_fork(int take)
{
    if (take)
        pthread_mutex_lock(&g_nvml.lock);
    else
        pthread_mutex_unlock(&g_nvml.lock);
}

nvml_state *nvml_open(const sonde_config *cfg, char *why, size_t cap)
{
    why[0] = 0;
    pthread_mutex_lock(&g_nvml.lock);
    load_once();
    int ok = g_nvml.ok;
    if (!ok)
        snprintf(why, cap, "%s", g_nvml.why);
    pthread_mutex_unlock(&g_nvml.lock);
    if (!ok)
        return NULL;
    nvml_api *a = &g_nvml.api;
    unsigned count = 0;
    nvmlReturn_t r = a->count(&count);
    if (r != NVML_SUCCESS) {
        snprintf(why, cap, "GPU metrics unavailable: nvmlDeviceGetCount failed (%d)", r);
        return NULL;
    }
    if (count == 0) {
        snprintf(why, cap, "GPU metrics unavailable: NVML reports no GPU");
        return NULL;
    }
    unsigned idx[64];
    size_t n;
    if (parse_devices(cfg->gpu_devices, count > 64 ? 64 : count, idx, &n, why, cap))
        return NULL;
    nvml_state *s = sonde__calloc(1, sizeof *s);
    if (!s || !(s->dev = sonde__calloc(n, sizeof *s->dev))) {
        sonde__free(s);
        snprintf(why, cap, "GPU metrics unavailable: out of memory");
        return NULL;
    }
    s->temperature = cfg->monitor_gpu_temperature;
    s->power = cfg->monitor_gpu_power;
    for (size_t i = 0; i < n; i++) {
        nvml_dev *d = &s->dev[s->n];
        d->index = idx[i];
        if (a->handle(idx[i], &d->h) != NVML_SUCCESS) {
            size_t k = strlen(s->handle_notes);
            snprintf(s->handle_notes + k, sizeof s->handle_notes - k, "%sGPU %u: no handle",
                     k ? "; " : "", idx[i]);
            continue;
        }
        if (!a->util) d->off |= F_UTIL;
        if (!a->mem_v2 && !a->mem) d->off |= F_MEM;
        if (!a->temperature || !s->temperature) d->off |= F_TEMP;
        if (!a->power || !s->power) d->off |= F_POWER;
        if (!a->power_limit || !s->power) d->off |= F_LIMIT;
        if (!a->clock) d->off |= F_SM_CLOCK | F_MEM_CLOCK;
        if (!a->reasons) d->off |= F_REASONS;
        if (!a->energy || !s->power) d->off |= F_ENERGY;
        s->n++;
    }
    if (!s->n) {
        snprintf(why, cap, "GPU metrics unavailable: no GPU handle could be opened");
        nvml_close(s);
        return NULL;
    }
    return s;
}

void nvml_close(nvml_state *s)
{
    if (!s)
        return;
    sonde__free(s->dev);
    sonde__free(s);
    /* NVML stays initialised for the life of the process: nvmlInit runs once. */
}

size_t nvml_device_count(const nvml_state *s) { return s ? s->n : 0; }

static void mem_read(nvml_dev *d, unsigned long long *used, unsigned long long *total,
                     unsigned long long *reserved, nvmlReturn_t *rc)
{
    nvml_api *a = &g_nvml.api;
    *reserved = 0;
    if (a->mem_v2) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = NVML_MEMORY_V2_VERSION;
        *rc = a->mem_v2(d->h, &m);
        if (*rc == NVML_SUCCESS) {
            *used = m.used;
            *total = m.total;
            *reserved = m.reserved;
            return;
        }
        if (!a->mem)
            return;
    }
    nvmlMemory_t m;
    *rc = a->mem(d->h, &m);
    *used = m.used;
    *total = m.total;
}

int nvml_memory(nvml_state *s, size_t i, unsigned *index, unsigned long long *used,
                unsigned long long *total)
{
    if (i >= s->n || (s->dev[i].off & F_MEM))
        return -1;
    unsigned long long reserved;
    nvmlReturn_t rc = -1;
    mem_read(&s->dev[i], used, total, &reserved, &rc);
    *index = s->dev[i].index;
    return rc == NVML_SUCCESS ? 0 : -1;
}

void nvml_describe(nvml_state *s, const sonde_emit *e)
{
    nvml_api *a = &g_nvml.api;
    char buf[128], key[64], val[160];
    if (a->driver_version && a->driver_version(buf, sizeof buf) == NVML_SUCCESS)
        e->info(e->ctx, "gpu_driver", buf);
    snprintf(val, sizeof val, "%zu", s->n);
    e->info(e->ctx, "gpu_count", val);
    for (size_t i = 0; i < s->n; i++) {
        nvml_dev *d = &s->dev[i];
        if (a->name && a->name(d->h, buf, sizeof buf) == NVML_SUCCESS) {
            snprintf(key, sizeof key, "gpu%u_name", d->index);
            e->info(e->ctx, key, buf);
        }
        if (a->uuid && a->uuid(d->h, buf, sizeof buf) == NVML_SUCCESS) {
            snprintf(key, sizeof key, "gpu%u_uuid", d->index);
            e->info(e->ctx, key, buf);
        }
        unsigned long long used = 0, total = 0, reserved = 0;
        nvmlReturn_t rc = -1;
        if (!(d->off & F_MEM)) {
            mem_read(d, &used, &total, &reserved, &rc);
            if (rc == NVML_SUCCESS) {
                snprintf(key, sizeof key, "gpu%u_memory_total_mib", d->index);
                snprintf(val, sizeof val, "%.0f", (double)total / 1048576.0);
                e->info(e->ctx, key, val);
                if (reserved) {
                    snprintf(key, sizeof key, "gpu%u_memory_reserved_mib", d->index);
                    snprintf(val, sizeof val, "%.0f", (double)reserved / 1048576.0);
                    e->info(e->ctx, key, val);
                }
            }
        }
    }
}

/* The outcome of one NVML call for figure f: 1 when its value can be used. NOT_SUPPORTED turns
 * the figure off for this device; other errors skip this sample only. */
static int usable(nvml_state *s, nvml_dev *d, unsigned f, nvmlReturn_t rc)
{
    (void)s;
    if (rc == NVML_SUCCESS)
        return 1;
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NO_PERMISSION)
        d->off |= f;
    return 0;
}

static const struct {
    unsigned long long bit;
    const char *word;
} g_reasons[] = {
    {0x1, "GpuIdle"}, {0x2, "ApplicationsClocksSetting"}, {0x4, "SwPowerCap"},
    {0x8, "HwSlowdown"}, {0x10, "SyncBoost"}, {0x20, "SwThermalSlowdown"},
    {0x40, "HwThermalSlowdown"}, {0x80, "HwPowerBrakeSlowdown"}, {0x100, "DisplayClockSetting"},
};

void nvml_sample(nvml_state *s, const sonde_emit *e)
{
    nvml_api *a = &g_nvml.api;
    char name[64];
#define EMIT(fmt, v)                                                                            \
    do {                                                                                        \
        snprintf(name, sizeof name, fmt, d->index);                                             \
        e->counter(e->ctx, name, (v));                                                          \
    } while (0)
    for (size_t i = 0; i < s->n; i++) {
        nvml_dev *d = &s->dev[i];
        unsigned v;
        if (!(d->off & F_UTIL)) {
            nvmlUtilization_t u;
            if (usable(s, d, F_UTIL, a->util(d->h, &u))) {
                EMIT("gpu%u util %%", u.gpu);
                EMIT("gpu%u memory util %%", u.memory);
            }
        }
        if (!(d->off & F_MEM)) {
            unsigned long long used = 0, total = 0, reserved = 0;
            nvmlReturn_t rc = -1;
            mem_read(d, &used, &total, &reserved, &rc);
            if (usable(s, d, F_MEM, rc)) {
                EMIT("gpu%u memory MiB", (double)used / 1048576.0);
                EMIT("gpu%u memory %%", total ? 100.0 * (double)used / (double)total : 0);
            }
        }
        if (!(d->off & F_TEMP) && usable(s, d, F_TEMP, a->temperature(d->h, NVML_TEMPERATURE_GPU, &v)))
            EMIT("gpu%u temperature C", v);
        if (!(d->off & F_POWER) && usable(s, d, F_POWER, a->power(d->h, &v)))
            EMIT("gpu%u power W", v / 1000.0);
        if (!(d->off & F_LIMIT) && usable(s, d, F_LIMIT, a->power_limit(d->h, &v)))
            EMIT("gpu%u power limit W", v / 1000.0);
        if (!(d->off & F_SM_CLOCK) && usable(s, d, F_SM_CLOCK, a->clock(d->h, NVML_CLOCK_SM, &v)))
            EMIT("gpu%u sm clock MHz", v);
        if (!(d->off & F_MEM_CLOCK) && usable(s, d, F_MEM_CLOCK, a->clock(d->h, NVML_CLOCK_MEM, &v)))
            EMIT("gpu%u memory clock MHz", v);
        unsigned long long ull;
        if (!(d->off & F_ENERGY) && usable(s, d, F_ENERGY, a->energy(d->h, &ull)))
            EMIT("gpu%u energy J", (double)ull / 1000.0);
        if (!(d->off & F_REASONS) && usable(s, d, F_REASONS, a->reasons(d->h, &ull))) {
            /* GpuIdle alone is not throttling worth a word; any other reason is. */
            unsigned long long shown = ull & ~0x1ull;
            if (!d->reasons_seen || shown != d->last_reasons) {
                char words[256];
                size_t k = (size_t)snprintf(words, sizeof words, "gpu%u clocks: ", d->index);
                if (!shown)
                    snprintf(words + k, sizeof words - k, "not throttled");
                for (size_t r = 0; r < sizeof g_reasons / sizeof g_reasons[0]; r++)
                    if ((shown & g_reasons[r].bit) && k < sizeof words)
                        k += (size_t)snprintf(words + k, sizeof words - k, "%s%s",
                                              words[k - 1] == ' ' ? "" : ", ", g_reasons[r].word);
                if (d->reasons_seen || shown)
                    e->event(e->ctx, words);
                d->last_reasons = shown;
                d->reasons_seen = 1;
            }
        }
    }
#undef EMIT
}

const char *nvml_notes(const nvml_state *s)
{
    nvml_state *w = (nvml_state *)s;
    size_t k = (size_t)snprintf(w->notes, sizeof w->notes, "%s", s->handle_notes);
    for (size_t i = 0; i < s->n; i++) {
        const nvml_dev *d = &s->dev[i];
        unsigned off = d->off;
        if (!s->temperature) off &= ~(unsigned)F_TEMP;
        if (!s->power) off &= ~(unsigned)(F_POWER | F_LIMIT | F_ENERGY);
        if (!off)
            continue;
        k += (size_t)snprintf(w->notes + k, k < sizeof w->notes ? sizeof w->notes - k : 0,
                              "%sGPU %u lacks", k ? "; " : "", d->index);
        int first = 1;
        for (int f = 0; f < N_FIGS; f++)
            if (off & (1u << f)) {
                k += (size_t)snprintf(w->notes + k, k < sizeof w->notes ? sizeof w->notes - k : 0,
                                      "%s %s", first ? "" : ",", g_fig_names[f]);
                first = 0;
            }
    }
    return w->notes;
}
