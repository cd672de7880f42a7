/* sources.h - metric sources sampled by the sampler thread: procfs (CPU, memory, load, the
 * process) and NVML (GPUs). A source reports its samples through an emit callback as named
 * counters ("cpu %", "gpu0 memory MiB") and describes the machine once (system info). */
#ifndef SONDE_SOURCES_H
#define SONDE_SOURCES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sonde/sonde.h>

/* Where samples and facts go. */
typedef struct sonde_emit {
    void *ctx;
    void (*counter)(void *ctx, const char *name, double value);
    void (*event)(void *ctx, const char *name);            /* an instant (throttle changes) */
    void (*info)(void *ctx, const char *key, const char *value); /* a system fact */
} sonde_emit;

/* ---- procfs (procfs.c) ---- */
typedef struct procfs_state procfs_state;
/* Opens the procfs source for process pid (0: this process). NULL when out of memory. */
procfs_state *procfs_open(pid_t pid, int cpu, int memory);
/* Facts: CPU model, cores, memory, kernel, host. */
void procfs_describe(procfs_state *s, const sonde_emit *e);
/* One sample of every figure that is on; the first call primes the CPU deltas. */
void procfs_sample(procfs_state *s, const sonde_emit *e);
void procfs_close(procfs_state *s);
/* Memory in bytes right now: process RSS and its peak, system used and total. 0, or -1. */
typedef struct procfs_mem {
    unsigned long long rss, rss_peak, sys_used, sys_total;
} procfs_mem;
int procfs_memory(procfs_state *s, procfs_mem *out);

/* ---- NVML (nvml.c) ---- */
typedef struct nvml_state nvml_state;
/* Loads NVML (SONDE_NVML_LIBRARY, default libnvidia-ml.so.1) once per process and selects the
 * devices of cfg->gpu_devices. On failure returns NULL with the reason, in one line, in why. */
nvml_state *nvml_open(const sonde_config *cfg, char *why, size_t cap);
void nvml_describe(nvml_state *s, const sonde_emit *e);
void nvml_sample(nvml_state *s, const sonde_emit *e);
/* Figures that turned out unavailable, one line (for the report), or "" when none. */
const char *nvml_notes(const nvml_state *s);
size_t nvml_device_count(const nvml_state *s);
/* Memory of the i-th sampled device (its NVML index in *index): bytes used and total. 0, or -1
 * when the device cannot say. */
int nvml_memory(nvml_state *s, size_t i, unsigned *index, unsigned long long *used,
                unsigned long long *total);
void nvml_close(nvml_state *s);

/* ---- libcudart (cudart.c) ---- */
/* cudaProfilerStart (start 1) or cudaProfilerStop, loading libcudart once per process
 * (SONDE_CUDART_LIBRARY, else libcudart.so and its versions). 0, or -1 with the reason. */
int cudart_profiler(int start, char *why, size_t cap);

#endif
