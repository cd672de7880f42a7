/* monitor.h - what the sampler thread watches beside the program: procfs (CPU, memory, load,
 * the process), NVML (GPUs), libcudart's profiler range and CUPTI's CUDA activity. A source
 * reports through the callbacks it is given (sonde_emit: named counters such as "cpu %" and
 * "gpu0 memory MiB", and the machine's facts once; sonde_gpu_sink: GPU records), never to a
 * profiler (docs/architecture.md). */
#ifndef SONDE_MONITOR_H
#define SONDE_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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
/* Around fork() (record/fork.c's handlers): take 1 takes the lock NVML's loading holds (the
 * sampler may be inside nvmlInit, which can take seconds), take 0 gives it back, in the parent
 * and in the child, so that the child never starts with it held by a thread it does not have.
 * A leaf: nothing else is taken while it is held. cudart_fork and sonde__cupti_fork alike. */
void nvml_fork(int take);

/* ---- libcudart (cudart.c) ---- */
/* cudaProfilerStart (start 1) or cudaProfilerStop, loading libcudart once per process
 * (SONDE_CUDART_LIBRARY, else libcudart.so and its versions). 0, or -1 with the reason. */
int cudart_profiler(int start, char *why, size_t cap);
void cudart_fork(int take);

/* ---- CUDA activity (cupti.c) ---- */
/* The GPU record's entry kinds and bounds are the file format's (format/format.h). */
#define SONDE_GPU_RECORD_BYTES (256u << 10)      /* a GPU record is written past this size */

/* One activity record of CUPTI's, as sonde keeps it; times on CLOCK_MONOTONIC. */
typedef struct sonde_gpu_rec {
    uint8_t kind;              /* SONDE_GPU_* */
    uint8_t copy_kind;         /* memcpy: CUPTI's copy kind (1 HtoD, 2 DtoH, 8 DtoD, ...) */
    uint32_t device, stream, correlation;
    uint64_t start_ns, end_ns;
    const char *name;          /* kernel: its name (borrowed) */
    int32_t grid[3], block[3]; /* kernel */
    uint64_t bytes;            /* memcpy, memset */
    uint32_t tid, cbid;        /* runtime API call: thread and callback id */
} sonde_gpu_rec;

/* Appends r's entry of a GPU record (docs/formats.md) to out (SONDE_GPU_ENTRY_MAX bytes free);
 * returns its length. */
size_t sonde__gpu_encode(const sonde_gpu_rec *r, uint8_t *out);
/* Where CUDA activity goes: the recorder's callbacks (record/ops.c, sonde__gpu_sink), ctx handed
 * back to each. write puts one GPU record of n payload bytes into the run's file (0, or -1);
 * tid_of turns the low 32 bits of a pthread_t into the kernel tid of that thread of the run (0:
 * none of its threads); warn puts a line in the run's report; name is the run's, for the reason
 * another run is refused. */
typedef struct sonde_gpu_sink {
    void *ctx;
    const char *name;
    int (*write)(void *ctx, const uint8_t *payload, size_t n);
    uint32_t (*tid_of)(void *ctx, uint32_t pthread_low);
    void (*warn)(void *ctx, const char *msg);
} sonde_gpu_sink;
/* Starts collecting kernels, memcpy, memset and runtime API calls into s (cuda_activity). 0,
 * or -1 with the reason in why (no libcupti, a CUPTI error, another profiler collects). */
int sonde__cupti_start(const sonde_gpu_sink *s, char *why, size_t cap);
/* Flushes CUPTI's buffers into the sink of ctx and stops, when that sink collects. */
void sonde__cupti_stop(const void *ctx);
void sonde__cupti_fork(int take);
/* CUPTI record -> sonde_gpu_rec, with offset_ns added to its times; 0 for a kind sonde does not
 * keep. Only where CUPTI's headers were found at build time. */
int sonde__cupti_convert(const void *record, int64_t offset_ns, sonde_gpu_rec *out);
/* Every record of a completed CUPTI buffer into s, an API call's thread as its kernel thread id
 * when it is one of the run's threads (CUPTI gives the low 32 bits of its pthread_t). */
int sonde__gpu_write(const sonde_gpu_sink *s, uint8_t *buffer, size_t valid, int64_t offset_ns);

#endif
