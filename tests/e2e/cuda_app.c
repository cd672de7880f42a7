/* cuda_app.c - a program "using CUDA" for the CUDA activity test: sections that launch kernels,
 * copies and a set through the fake CUPTI's test calls (tests/fakes/fake_cupti.c, named by
 * SONDE_CUPTI_LIBRARY), configured from the environment (SONDE_CUDA_ACTIVITY=1). With another
 * CUPTI (or none) it records its sections alone. CUDA_APP_DECODE (3) decode steps, each an
 * attn_kernel of CUDA_APP_ATTN_US (100) microseconds. Usage: cuda_app OUTDIR NAME */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <sonde/sonde.h>

static void (*launch)(const char *, int, int, double);
static void (*copy)(uint64_t, int);
static void (*set)(uint64_t);

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cuda_app OUTDIR NAME\n");
        return 2;
    }
    const char *lib = getenv("SONDE_CUPTI_LIBRARY");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL; /* sonde loaded it already? */
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = argv[1];
    cfg.name = argv[2];
    cfg.formats = SONDE_FORMAT_JSON | SONDE_FORMAT_TRACE | SONDE_FORMAT_TXT | SONDE_FORMAT_HTML;
    cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "cuda_app: %s\n", sonde_last_error());
        return 2;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p)
        return 1;
    if (!h && lib)
        h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        *(void **)(&launch) = dlsym(h, "fake_cupti_launch");
        *(void **)(&copy) = dlsym(h, "fake_cupti_memcpy");
        *(void **)(&set) = dlsym(h, "fake_cupti_memset");
    }
    sonde_session_begin(p, "infer");
    sonde_begin(p, "prefill");
    nap_us(200);
    if (copy)
        copy(1 << 20, 1); /* HtoD */
    for (int i = 0; i < 2; i++) {
        if (launch)
            /* as CUPTI names a C++ kernel: mangled (the reports demangle it) */
            launch("_Z11gemm_kernelPKfS0_Pfi", 128, 256, 300);
        nap_us(500);
    }
    sonde_end(p);
    int decode = getenv("CUDA_APP_DECODE") ? atoi(getenv("CUDA_APP_DECODE")) : 3;
    double attn_us = getenv("CUDA_APP_ATTN_US") ? atof(getenv("CUDA_APP_ATTN_US")) : 100;
    for (int i = 0; i < decode; i++) {
        sonde_begin(p, "decode");
        /* the launch well inside its section: CUPTI's clock is placed on the run's to within
         * the tightest of eight paired reads, which a loaded machine can leave microseconds off */
        nap_us(200);
        if (launch)
            launch("attn_kernel", 64, 128, attn_us);
        nap_us(300);
        sonde_end(p);
    }
    sonde_session_end(p);
    if (set)
        set(4096); /* outside every section */
    return sonde_destroy(p) == 0 ? 0 : 1;
}
