/* fuzz_perfmap.c - libFuzzer target for the perf map reader (symbols.c, sonde__sym_perfmap):
 * any bytes as /tmp/perf-PID.map must be read or skipped line by line, never past a line, and
 * every symbol read must name the addresses it holds. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "stacks/stacks.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a pid no process has (above pid_max's limit), this process's own file */
    int pid = 0x40000000 + (int)(getpid() & 0xffff);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", pid);
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    sonde_symfile *m = sonde__sym_perfmap(pid);
    unlink(path);
    if (!m)
        return 0;
    /* an address the map names is named, not numbered; one outside every symbol is not held */
    uint64_t probe[3] = {0, UINT64_MAX, size ? data[0] : 0};
    for (int i = 0; i < 3; i++) {
        sonde_symframe sf[1];
        int n = sonde__sym_at(m, probe[i], sf, 1);
        if (n < 0)
            continue;
        if (n != 1 || !sf[0].name)
            abort();
        char fallback[96]; /* what an address no symbol holds is called */
        snprintf(fallback, sizeof fallback, "%s+0x%llx", sonde__sym_base(m),
                 (unsigned long long)probe[i]);
        /* (unless the map itself names a symbol so: a CI run's fuzzing wrote
         * "0 1 perf-PID.map+0x0" for its own pid) */
        if (sonde__sym_holds(m, probe[i]) && !strcmp(sf[0].name, fallback) &&
            !memmem(data, size, fallback, strlen(fallback)))
            abort();
        sonde__free(sf[0].name);
        sonde__free(sf[0].file);
    }
    sonde__sym_close(m);
    return 0;
}
