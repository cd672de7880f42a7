/* fuzz_pyframes.c - libFuzzer target for the Python frame reader (pyframes.c): any bytes as the
 * memory of an interpreter (its runtime, interpreters, thread states, frames, code objects,
 * strings, location tables), for 3.11, 3.12 or 3.13, must give a stack of frames read (or none)
 * and never a fault, a hang or a read outside what the reader asked for: the reader reads this
 * process's own memory with process_vm_readv, as it reads any other's.
 *
 * The input: byte 0 picks the version, byte 1 the thread id asked for, the rest is the arena,
 * the fake memory, at a 64 KiB-aligned place. An 8-byte word of the arena whose top two bytes
 * are 0xA5A5 is a pointer into the arena (its low 16 bits the offset), so that the fuzzer can
 * build chains; _PyRuntime is at the arena's start, PyCode_Type at offset 0x100. The arena's
 * last 1 KiB is also taken as frames the kernel's walk wrote (sonde_pykframe, pybpf.c), turned
 * into raw frames and named as the sampler does with them: the same rules hold. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "stacks/stacks.h"

#define ARENA 65536

static uint8_t arena[2 * ARENA];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t *base = (uint8_t *)(((uintptr_t)arena + ARENA - 1) & ~(uintptr_t)(ARENA - 1));
    size_t n = size - 2 < ARENA ? size - 2 : ARENA;
    memset(base, 0, ARENA);
    memcpy(base, data + 2, n);
    for (size_t i = 0; i + 8 <= ARENA; i += 8) {
        uint64_t w;
        memcpy(&w, base + i, 8);
        if (w >> 48 == 0xA5A5) {
            w = (uint64_t)(uintptr_t)base + (w & 0xffff);
            memcpy(base + i, &w, 8);
        }
    }
    sonde_pytab *t = sonde__pytab_new();
    sonde_pyproc *py = t ? sonde__py_attach_at(t, getpid(), 11 + data[0] % 3,
                                               (uint64_t)(uintptr_t)base,
                                               (uint64_t)(uintptr_t)base + 0x100)
                         : NULL;
    if (py) {
        sonde_pyframe f[64];
        int k = sonde__py_stack(py, data[1], f, 64);
        if (k < 0 || k > 64)
            abort();
        for (int i = 0; i < k; i++) {
            sonde_pycode c;
            if (f[i].code == SONDE_PYFRAME_CUT) { /* a deep stack's cut: after the innermost */
                if (i < SONDE_PYCUT_IN && f[i].line && !(f[i].line & SONDE_PYCUT_BEYOND))
                    abort();
                continue;
            }
            if (sonde__pytab_code(t, f[i].code, &c) || !c.name || !c.file)
                abort(); /* every frame given has its code read whole */
        }
        sonde_pykframe kf[1024 / sizeof(sonde_pykframe)];
        memcpy(kf, base + ARENA - sizeof kf, sizeof kf);
        sonde_pyraw raw[SONDE_PYRAW_MAX];
        int n_kf = (int)(sizeof kf / sizeof kf[0]);
        int m = sonde__py_from_kernel(py, kf, n_kf, raw, SONDE_PYRAW_MAX);
        if (m < 0 || m > n_kf)
            abort();
        k = sonde__py_resolve(py, raw, m, f);
        if (k < 0 || k > m)
            abort();
        for (int i = 0; i < k; i++) {
            sonde_pycode c;
            if (sonde__pytab_code(t, f[i].code, &c) || !c.name || !c.file)
                abort();
        }
    }
    sonde__py_detach(py);
    sonde__pytab_free(t);
    return 0;
}
