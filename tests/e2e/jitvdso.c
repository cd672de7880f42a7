/* jitvdso.c - code no file holds, named where the system can name it, for run.sh stacks:
 * section "jit" runs a loop copied into anonymous executable memory and named in
 * /tmp/perf-PID.map, as a just-in-time compiler names its code; section "vdso" calls
 * clock_gettime, which runs in the kernel's vDSO. Usage: jitvdso DIR (x86-64; elsewhere it
 * prints "skip" and exits 0). Sampled at 999 Hz; reports json and folded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

#if defined(__x86_64__)
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
#endif

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jitvdso DIR\n");
        return 2;
    }
#if !defined(__x86_64__)
    puts("skip");
    return 0;
#else
    /* loop: dec %rdi; jnz loop; ret */
    static const unsigned char code[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
    unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("jitvdso: mmap");
        return 1;
    }
    memcpy(mem + 64, code, sizeof code);
    char map[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", (int)getpid());
    FILE *f = fopen(map, "w");
    if (!f) {
        perror(map);
        return 1;
    }
    fprintf(f, "%lx %x jit_spin_loop\n", (unsigned long)(mem + 64), (unsigned)sizeof code);
    fclose(f);
    void (*spin)(unsigned long) = (void (*)(unsigned long))(void *)(mem + 64);

    sonde_config c = sonde_config_default();
    c.output_dir = argv[1];
    c.name = "jitvdso";
    c.formats = SONDE_FORMAT_JSON;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    c.sample_hz = 999;
    sonde_profiler *p = sonde_create(&c);
    double t0 = cpu_s();
    sonde_begin(p, "jit");
    while (cpu_s() - t0 < 0.4)
        spin(20000000ul);
    sonde_end(p);
    t0 = cpu_s();
    sonde_begin(p, "vdso");
    struct timespec ts;
    while (cpu_s() - t0 < 0.4)
        for (int i = 0; i < 10000; i++)
            clock_gettime(CLOCK_MONOTONIC, &ts);
    sonde_end(p);
    int rc = sonde_destroy(p); /* the stacks are named here: the perf map must still be there */
    unlink(map);
    return rc == 0 ? 0 : 1;
#endif
}
