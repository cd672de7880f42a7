/* unwind.c - a sample's stack unwound from the call frame information (.eh_frame, .debug_frame)
 * of the files mapped in its process, through elfutils' libdwfl: for code built without frame
 * pointers, whose callers a frame-pointer walk skips. The kernel copies the sampled thread's
 * registers and the top of its user stack into the sample (PERF_SAMPLE_REGS_USER,
 * PERF_SAMPLE_STACK_USER); the sampler's thread unwinds them here, reading the stack from that
 * copy and the code's rules from the files. One Dwfl per process, its files reported as they
 * are mapped. x86-64 only (elsewhere sonde__unwind_new returns NULL and frame pointers serve). */
#define _GNU_SOURCE
#include "stacks.h"

#include <elfutils/libdwfl.h>
#include <string.h>

#include "../util/alloc.h"

#if defined(__x86_64__)

typedef struct uproc {
    int pid;
    Dwfl *dwfl;
    uint64_t *bases;           /* the files reported, by the address of their offset 0 */
    size_t n_bases, cap_bases;
} uproc;

struct sonde_unwinder {
    uproc *procs;
    size_t n_procs, cap_procs;
    /* the sample being unwound */
    int tid;
    Dwarf_Word regs[17];       /* DWARF's order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip */
    const uint8_t *stack;
    uint64_t stack_size, sp;
    uint64_t *ips;
    int n, max;
};

static const Dwfl_Callbacks g_offline = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    sonde_unwinder *u = arg;
    if (*thread_argp)
        return 0;
    *thread_argp = u;
    return u->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    sonde_unwinder *u = arg;
    *thread_argp = u;
    return tid == u->tid;
}

/* The stack as the kernel copied it: [sp, sp + size). */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    sonde_unwinder *u = arg;
    if (addr < u->sp || addr - u->sp + sizeof *result > u->stack_size)
        return false;
    memcpy(result, u->stack + (addr - u->sp), sizeof *result);
    return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    sonde_unwinder *u = arg;
    return dwfl_thread_state_registers(thread, 0, 17, u->regs);
}

static const Dwfl_Thread_Callbacks g_thread_cb = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

sonde_unwinder *sonde__unwind_new(void)
{
    return sonde__calloc(1, sizeof(sonde_unwinder));
}

void sonde__unwind_free(sonde_unwinder *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->n_procs; i++) {
        if (u->procs[i].dwfl)
            dwfl_end(u->procs[i].dwfl);
        sonde__free(u->procs[i].bases);
    }
    sonde__free(u->procs);
    sonde__free(u);
}

/* The process's Dwfl, with every file of maps reported (those mapped since, too). */
static uproc *proc_for(sonde_unwinder *u, int pid, const sonde_umap *maps, size_t n_maps)
{
    uproc *p = NULL;
    for (size_t i = 0; i < u->n_procs && !p; i++)
        if (u->procs[i].pid == pid)
            p = &u->procs[i];
    if (!p) {
        if (SONDE_GROW(u->procs, u->n_procs, u->cap_procs))
            return NULL;
        p = &u->procs[u->n_procs];
        memset(p, 0, sizeof *p);
        p->pid = pid;
        if (!(p->dwfl = dwfl_begin(&g_offline)))
            return NULL;
        u->n_procs++;
    }
    int added = 0;
    for (size_t i = 0; i < n_maps; i++) {
        uint64_t base = maps[i].start - maps[i].pgoff;
        size_t k = 0;
        while (k < p->n_bases && p->bases[k] != base)
            k++;
        if (k < p->n_bases)
            continue;
        if (!added++)
            dwfl_report_begin_add(p->dwfl);
        if (SONDE_GROW(p->bases, p->n_bases, p->cap_bases))
            break;
        p->bases[p->n_bases++] = base; /* once, whether libdwfl takes it or not */
        const char *slash = strrchr(maps[i].path, '/');
        dwfl_report_elf(p->dwfl, slash ? slash + 1 : maps[i].path, maps[i].path, -1, base, false);
    }
    if (added) {
        dwfl_report_end(p->dwfl, NULL, NULL);
        if (dwfl_pid(p->dwfl) < 0)
            dwfl_attach_state(p->dwfl, NULL, pid, &g_thread_cb, u);
    }
    return dwfl_pid(p->dwfl) < 0 ? NULL : p;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    sonde_unwinder *u = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(state, &pc, &activation) || u->n >= u->max)
        return DWARF_CB_ABORT;
    u->ips[u->n++] = pc; /* return addresses stay as they are: the caller takes one byte off */
    return DWARF_CB_OK;
}

int sonde__unwind(sonde_unwinder *u, int pid, int tid, const sonde_umap *maps, size_t n_maps,
                  const uint64_t *perf_regs, const uint8_t *stack, uint64_t size, uint64_t *ips,
                  int max)
{
    /* perf's order (sonde__unwind_regs_mask): ax bx cx dx si di bp sp ip r8-r15 */
    static const int to_dwarf[17] = {0, 3, 2, 1, 4, 5, 6, 7, 16, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int i = 0; i < 17; i++)
        u->regs[to_dwarf[i]] = perf_regs[i];
    u->tid = tid;
    u->stack = stack;
    u->stack_size = size;
    u->sp = perf_regs[7];
    u->ips = ips;
    u->n = 0;
    u->max = max;
    uproc *p = proc_for(u, pid, maps, n_maps);
    if (!p)
        return 0;
    dwfl_getthread_frames(p->dwfl, tid, frame_cb, u); /* ends where the CFI or the copy ends */
    return u->n;
}

uint64_t sonde__unwind_regs_mask(void)
{
    return 0xff01ffull; /* ax..ip (bits 0-8) and r8..r15 (16-23) */
}

#else

sonde_unwinder *sonde__unwind_new(void)
{
    return NULL;
}

void sonde__unwind_free(sonde_unwinder *u)
{
    (void)u;
}

int sonde__unwind(sonde_unwinder *u, int pid, int tid, const sonde_umap *maps, size_t n_maps,
                  const uint64_t *perf_regs, const uint8_t *stack, uint64_t size, uint64_t *ips,
                  int max)
{
    (void)u, (void)pid, (void)tid, (void)maps, (void)n_maps, (void)perf_regs, (void)stack;
    (void)size, (void)ips, (void)max;
    return 0;
}

uint64_t sonde__unwind_regs_mask(void)
{
    return 0;
}

#endif
