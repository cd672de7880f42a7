/* pybpf.c - the Python frames of a CPU sample read in the kernel, at the sample, by a BPF
 * program run on the cpu-clock event's overflow (stacks.h; config sample_python 1, 2).
 *
 * Read from the sampler's thread (pyframes.c), each sample of a Python thread wakes that thread,
 * which then reads the frames: on the VMs measured the wake-up alone is 20-40 us of CPU a sample,
 * 2-4% of a CPU at 999 Hz (docs/stacks.md, "What it costs"). Here the program attached to the
 * event (PERF_EVENT_IOC_SET_BPF; inherited with the event by the threads and processes it
 * follows) walks the sampled thread's frames in the interrupt that takes the sample, with
 * bpf_probe_read_user (a page not present, a freed frame: the read fails and the walk ends),
 * and writes each frame's code object, instruction, owner and check (its file's and qualified
 * name's addresses) into a BPF ring buffer the sampler drains with the samples, every 10 ms.
 * The frames are named there as the timers' frames are (sonde__py_resolve).
 *
 * The program is assembled here, one walk per CPython version with its offsets as constants
 * (pyframes.c's layouts; 3.12 and 3.13 share the frames' part), the walk unrolled (no loop for
 * the verifier to bound). A thread's
 * thread state is given to the program through a hash map (tid -> thread state, version) that
 * the sampler fills as it meets the threads; the program checks the state's native_thread_id
 * against the sampled thread before it reads further, and marks the record stale when it does
 * not match (the thread state freed, the tid reused), so that the sampler looks it up again.
 * Loading needs CAP_BPF and CAP_PERFMON (or root): refused, the sampler reads the frames
 * itself as before, and says why. */
#define _GNU_SOURCE
#include "stacks.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "../util/alloc.h"

#define HOPS 256                 /* frames walked at most (the C stack's entry frames too) */
/* Of a walk deeper than a record holds, the innermost KEEP_IN frames and the outermost KEEP_OUT
 * (the last walked, kept in turn in the record's last KEEP_OUT places: hop i at
 * KEEP_IN + (i - KEEP_IN) % KEEP_OUT), as a stack keeps them (stacks/table.c's with_frames:
 * TRUNC_INNER and MAX_FRAMES - TRUNC_INNER - 1), so that a deep stack keeps its root */
#define KEEP_IN SONDE_PYCUT_IN
#define KEEP_OUT 95
#define SLOTS (KEEP_IN + KEEP_OUT)
#define KFRAME 40                /* bytes of a frame in a record (sonde_pykframe) */
#define KHEAD 16                 /* a record's head: tid, frames, flags, time */
#define KREC (KHEAD + SLOTS * KFRAME)
#define RING_BYTES (2u << 20)    /* the ring buffer: 650 records of 80 frames, 20,000 of 10 */
#define MAX_INSNS 32768
#define THREADS 8192             /* threads the map holds (least recently used go first) */
#define STALE 1u                 /* a record's flag: the thread state is not the thread's */
#define MORE 2u                  /* a record's flag: frames beyond the walk's HOPS */
#define KEEP_NS 20000000ull      /* a record not taken is dropped when this much older */
#define OWN_NS 100000ull         /* a record is its sample's when this near its time */

_Static_assert(sizeof(sonde_pykframe) == KFRAME, "a record's frame");

/* A record as the program writes it (the ring's header before it). */
typedef struct krec {
    uint32_t tid;
    uint16_t n, flags;
    uint64_t t;
} krec;
_Static_assert(sizeof(krec) == KHEAD, "a record's head");

/* A record taken out of the ring, until its sample comes: its frames are frames[at, at + n). */
typedef struct pend {
    uint32_t tid, n, flags, used;
    uint32_t hops;               /* frames walked (n: those held, in order) */
    uint64_t t;
    size_t at;
} pend;

struct sonde_pybpf {
    int prog, threads, scratch, ring, lost;
    void *cons, *prod;            /* the ring's consumer page, and its producer page + data */
    size_t page;
    pend *pend;
    size_t n_pend, cap_pend;
    sonde_pykframe *frames;       /* the pending records' frames, in their order */
    size_t n_frames, cap_frames;
};

/* --- an assembler for the program --- */

typedef struct asm_ {
    struct bpf_insn *in;
    int n, err;
    int label[1024];              /* each label's instruction (-1: not placed) */
    int n_labels;
    struct fix {
        int at, label;
    } fix[8192];
    int n_fix;
} asm_;

static void emit(asm_ *a, uint8_t code, int dst, int src, int16_t off, int32_t imm)
{
    if (a->n >= MAX_INSNS) {
        a->err = 1;
        return;
    }
    a->in[a->n++] = (struct bpf_insn){.code = code, .dst_reg = (uint8_t)dst,
                                      .src_reg = (uint8_t)src, .off = off, .imm = imm};
}

#define R0 BPF_REG_0
#define R1 BPF_REG_1
#define R2 BPF_REG_2
#define R3 BPF_REG_3
#define R4 BPF_REG_4
#define R6 BPF_REG_6
#define R7 BPF_REG_7
#define R8 BPF_REG_8
#define R9 BPF_REG_9
#define FP BPF_REG_10

static void mov_imm(asm_ *a, int d, int32_t v) { emit(a, BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, v); }
static void mov_reg(asm_ *a, int d, int s) { emit(a, BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0); }
static void add_imm(asm_ *a, int d, int32_t v) { emit(a, BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, v); }
static void mul_imm(asm_ *a, int d, int32_t v) { emit(a, BPF_ALU64 | BPF_MUL | BPF_K, d, 0, 0, v); }
static void ldx(asm_ *a, int size, int d, int s, int off)
{
    emit(a, BPF_LDX | BPF_MEM | (uint8_t)size, d, s, (int16_t)off, 0);
}
static void stx(asm_ *a, int size, int d, int off, int s)
{
    emit(a, BPF_STX | BPF_MEM | (uint8_t)size, d, s, (int16_t)off, 0);
}
static void st_imm(asm_ *a, int size, int d, int off, int32_t v)
{
    emit(a, BPF_ST | BPF_MEM | (uint8_t)size, d, 0, (int16_t)off, v);
}
static void call(asm_ *a, int fn) { emit(a, BPF_JMP | BPF_CALL, 0, 0, 0, fn); }
static void map_fd(asm_ *a, int d, int fd)
{
    emit(a, BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd);
    emit(a, 0, 0, 0, 0, 0);
}
/* A jump to label l: op BPF_JA (always), or a comparison of d with v (imm) or register s
 * (src >= 0), 64 bits wide or 32 (w32). */
static void jump(asm_ *a, int op, int d, int src, int32_t v, int l, int w32)
{
    if (a->n_fix >= (int)(sizeof a->fix / sizeof a->fix[0])) {
        a->err = 1;
        return;
    }
    a->fix[a->n_fix++] = (struct fix){a->n, l};
    emit(a, (uint8_t)((w32 ? BPF_JMP32 : BPF_JMP) | op | (src >= 0 ? BPF_X : BPF_K)), d,
         src >= 0 ? src : 0, 0, v);
}
static void place(asm_ *a, int l) { a->label[l] = a->n; }
/* A label of its own (placed later). */
static int new_label(asm_ *a)
{
    if (a->n_labels >= (int)(sizeof a->label / sizeof a->label[0])) {
        a->err = 1;
        return 0;
    }
    a->label[a->n_labels] = -1;
    return a->n_labels++;
}

static void resolve(asm_ *a)
{
    for (int i = 0; i < a->n_fix; i++) {
        int to = a->label[a->fix[i].label];
        if (to < 0 || to == a->fix[i].at) { /* backward only into a shared walk: no loop */
            a->err = 1;
            return;
        }
        a->in[a->fix[i].at].off = (int16_t)(to - a->fix[i].at - 1);
    }
}

/* bpf_probe_read_user(FP + at, n, from + off), from a register; r0 its result. */
static void read_user(asm_ *a, int at, int n, int from, int32_t off)
{
    mov_reg(a, R1, FP);
    add_imm(a, R1, at);
    mov_imm(a, R2, n);
    mov_reg(a, R3, from);
    if (off)
        add_imm(a, R3, off);
    call(a, BPF_FUNC_probe_read_user);
}

enum { L_KEEP, L_EMIT, L_STALE, L_WALK0 }; /* L_WALK0 + k: layout k's walk */
#define FR (-96)    /* the frame's first 80 bytes */
#define CHK (-120)  /* its code object's co_filename, co_name, co_qualname */
#define TMP (-16)   /* an 8-byte read */

/* Whether two versions' frames and code objects lie alike (3.12's and 3.13's do): one walk of
 * the frames serves both. */
static int frames_alike(const sonde_pyoffsets *x, const sonde_pyoffsets *y)
{
    return x->fr_code == y->fr_code && x->fr_previous == y->fr_previous &&
           x->fr_instr == y->fr_instr && x->fr_owner == y->fr_owner &&
           x->fr_is_entry == y->fr_is_entry && x->co_filename == y->co_filename;
}

/* The walk of layout k (r7 the thread state, r6 the pid and tid, r9 the record): its thread
 * state's part, then the frames', at label frames (placed here when it is not yet). */
static void walk(asm_ *a, const sonde_pyoffsets *o, int frames)
{
    read_user(a, TMP, 8, R7, (int32_t)o->ts_tid);
    jump(a, BPF_JNE, R0, -1, 0, L_STALE, 0);
    ldx(a, BPF_W, R1, FP, TMP);
    jump(a, BPF_JNE, R1, R6, 0, L_STALE, 1); /* native_thread_id is not the sampled thread's */
    if (o->ts_status != UINT32_MAX) { /* the thread is in another interpreter now */
        read_user(a, TMP, 8, R7, (int32_t)o->ts_status);
        jump(a, BPF_JNE, R0, -1, 0, L_STALE, 0);
        ldx(a, BPF_W, R1, FP, TMP);
        emit(a, BPF_ALU64 | BPF_AND | BPF_K, R1, 0, 0, 8);
        jump(a, BPF_JEQ, R1, -1, 0, L_STALE, 0);
    }
    read_user(a, TMP, 8, R7, (int32_t)o->ts_frame);
    jump(a, BPF_JNE, R0, -1, 0, L_EMIT, 0);
    ldx(a, BPF_DW, R7, FP, TMP);
    if (o->cf_frame != UINT32_MAX) { /* 3.11, 3.12: the current frame is in the cframe */
        jump(a, BPF_JEQ, R7, -1, 0, L_EMIT, 0);
        read_user(a, TMP, 8, R7, (int32_t)o->cf_frame);
        jump(a, BPF_JNE, R0, -1, 0, L_EMIT, 0);
        ldx(a, BPF_DW, R7, FP, TMP);
    }
    if (a->label[frames] >= 0) {
        jump(a, BPF_JA, 0, -1, 0, frames, 0);
        return;
    }
    place(a, frames);
    for (int i = 0; i < HOPS; i++) {
        int at = KHEAD + (i < KEEP_IN ? i : KEEP_IN + (i - KEEP_IN) % KEEP_OUT) * KFRAME;
        jump(a, BPF_JEQ, R7, -1, 0, L_EMIT, 0);
        read_user(a, FR, 80, R7, 0);
        jump(a, BPF_JNE, R0, -1, 0, L_EMIT, 0);
        ldx(a, BPF_DW, R1, FP, FR + (int)o->fr_code);
        stx(a, BPF_DW, R9, at, R1);
        ldx(a, BPF_DW, R1, FP, FR + (int)o->fr_instr);
        stx(a, BPF_DW, R9, at + 8, R1);
        ldx(a, BPF_B, R1, FP, FR + (int)o->fr_owner);
        stx(a, BPF_B, R9, at + 32, R1);
        if (o->fr_is_entry >= 0) {
            ldx(a, BPF_B, R1, FP, FR + o->fr_is_entry);
            stx(a, BPF_B, R9, at + 33, R1);
        } else {
            st_imm(a, BPF_B, R9, at + 33, 0);
        }
        ldx(a, BPF_DW, R7, FP, FR + (int)o->fr_previous);
        st_imm(a, BPF_DW, R9, at + 16, 0); /* no check: the code could not be read */
        st_imm(a, BPF_DW, R9, at + 24, 0);
        ldx(a, BPF_DW, R3, R9, at);
        read_user(a, CHK, 24, R3, (int32_t)o->co_filename);
        st_imm(a, BPF_H, R9, 4, i + 1);
        int next = new_label(a);
        jump(a, BPF_JNE, R0, -1, 0, next, 0);
        ldx(a, BPF_DW, R1, FP, CHK);
        stx(a, BPF_DW, R9, at + 16, R1);
        ldx(a, BPF_DW, R1, FP, CHK + 16);
        stx(a, BPF_DW, R9, at + 24, R1);
        place(a, next);
    }
    jump(a, BPF_JEQ, R7, -1, 0, L_EMIT, 0); /* the last frame walked was the outermost */
    st_imm(a, BPF_H, R9, 6, MORE);
    jump(a, BPF_JA, 0, -1, 0, L_EMIT, 0);
}

/* The program: the sampled thread's record, its frames walked where the map knows its state. */
static int assemble(asm_ *a, int threads, int scratch, int ring, int lost,
                    const sonde_pyoffsets *o, int n_layouts)
{
    for (int i = 0; i < L_WALK0 + 2 * n_layouts; i++)
        a->label[i] = -1;
    a->n_labels = L_WALK0 + 2 * n_layouts; /* L_WALK0 + n_layouts + k: layout k's frames */
    call(a, BPF_FUNC_get_current_pid_tgid);
    mov_reg(a, R6, R0);
    stx(a, BPF_W, FP, -4, R6);
    map_fd(a, R1, threads);
    mov_reg(a, R2, FP);
    add_imm(a, R2, -4);
    call(a, BPF_FUNC_map_lookup_elem);
    jump(a, BPF_JEQ, R0, -1, 0, L_KEEP, 0); /* not a thread known to run Python */
    ldx(a, BPF_DW, R7, R0, 0);               /* its thread state */
    ldx(a, BPF_W, R8, R0, 8);                /* its layout */
    st_imm(a, BPF_W, FP, -8, 0);
    map_fd(a, R1, scratch);
    mov_reg(a, R2, FP);
    add_imm(a, R2, -8);
    call(a, BPF_FUNC_map_lookup_elem);
    jump(a, BPF_JEQ, R0, -1, 0, L_KEEP, 0);
    mov_reg(a, R9, R0);
    stx(a, BPF_W, R9, 0, R6);
    st_imm(a, BPF_W, R9, 4, 0); /* no frames, no flags */
    call(a, BPF_FUNC_ktime_get_ns);
    stx(a, BPF_DW, R9, 8, R0);
    for (int k = 0; k < n_layouts; k++)
        jump(a, BPF_JEQ, R8, -1, k, L_WALK0 + k, 0);
    jump(a, BPF_JA, 0, -1, 0, L_KEEP, 0);
    for (int k = 0; k < n_layouts; k++) {
        int j = 0;
        while (!frames_alike(&o[j], &o[k]))
            j++;
        place(a, L_WALK0 + k);
        walk(a, &o[k], L_WALK0 + n_layouts + j);
    }
    place(a, L_STALE);
    st_imm(a, BPF_W, R9, 4, (int32_t)(STALE << 16));
    place(a, L_EMIT);
    ldx(a, BPF_H, R3, R9, 4);
    jump(a, BPF_JGT, R3, -1, HOPS, L_KEEP, 0);
    int held = new_label(a);
    jump(a, BPF_JLE, R3, -1, SLOTS, held, 0);
    mov_imm(a, R3, SLOTS); /* a deeper walk's frames fill every place */
    place(a, held);
    mul_imm(a, R3, KFRAME);
    add_imm(a, R3, KHEAD);
    map_fd(a, R1, ring);
    mov_reg(a, R2, R9);
    mov_imm(a, R4, 0);
    call(a, BPF_FUNC_ringbuf_output);
    jump(a, BPF_JEQ, R0, -1, 0, L_KEEP, 0);
    st_imm(a, BPF_W, FP, -8, 0); /* the ring was full: counted */
    map_fd(a, R1, lost);
    mov_reg(a, R2, FP);
    add_imm(a, R2, -8);
    call(a, BPF_FUNC_map_lookup_elem);
    jump(a, BPF_JEQ, R0, -1, 0, L_KEEP, 0);
    mov_imm(a, R1, 1);
    emit(a, BPF_STX | BPF_ATOMIC | BPF_DW, R0, R1, 0, BPF_ADD);
    place(a, L_KEEP);
    mov_imm(a, R0, 1); /* the sample is written as ever */
    emit(a, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    resolve(a);
    return a->err ? -1 : 0;
}

/* --- the maps, the program, the ring --- */

static int sys_bpf(int cmd, union bpf_attr *attr)
{
    return (int)syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

static int make_map(unsigned type, unsigned key, unsigned value, unsigned entries)
{
    union bpf_attr at;
    memset(&at, 0, sizeof at);
    at.map_type = type;
    at.key_size = key;
    at.value_size = value;
    at.max_entries = entries;
    return sys_bpf(BPF_MAP_CREATE, &at);
}

void sonde__pybpf_forget(sonde_pybpf *b)
{
    if (!b)
        return;
    if (b->cons)
        munmap(b->cons, b->page);
    if (b->prod)
        munmap(b->prod, b->page + 2 * (size_t)RING_BYTES);
    int fds[5] = {b->prog, b->threads, b->scratch, b->ring, b->lost};
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

void sonde__pybpf_close(sonde_pybpf *b)
{
    if (!b)
        return;
    sonde__pybpf_forget(b);
    sonde__free(b->pend);
    sonde__free(b->frames);
    sonde__free(b);
}

/* Why the verifier refused the program: its log's last line, loading it again with the log
 * (not asked the first time: writing it costs as much as the verifying), into why after what. */
static void verifier_says(union bpf_attr *at, const char *what, char *why, size_t cap)
{
    size_t size = 1 << 16;
    char *log = sonde__calloc(1, size);
    if (!log) {
        snprintf(why, cap, "%s", what);
        return;
    }
    at->log_buf = (uint64_t)(uintptr_t)log;
    at->log_size = (uint32_t)size;
    at->log_level = 1;
    int fd = sys_bpf(BPF_PROG_LOAD, at);
    if (fd >= 0)
        close(fd); /* loaded this time: nothing to say */
    /* the last line that is not the verifier's counts ("processed N insns ...") */
    char *last = log;
    for (char *line = log; *line;) {
        char *end = line + strcspn(line, "\n");
        if (end > line && strncmp(line, "processed ", 10) && strncmp(line, "verification time", 17))
            last = line;
        line = *end ? end + 1 : end;
    }
    last[strcspn(last, "\n")] = 0;
    snprintf(why, cap, "%s%s%s", what, *last ? ": " : "", last);
    sonde__free(log);
}

sonde_pybpf *sonde__pybpf_open(char *why, size_t cap)
{
    sonde_pybpf *b = sonde__calloc(1, sizeof *b);
    asm_ *a = sonde__calloc(1, sizeof *a);
    struct bpf_insn *in = sonde__malloc(MAX_INSNS * sizeof *in);
    if (!b || !a || !in) {
        snprintf(why, cap, "out of memory");
        goto fail;
    }
    a->in = in;
    b->prog = b->threads = b->scratch = b->ring = b->lost = -1;
    b->page = (size_t)sysconf(_SC_PAGESIZE);
    sonde_pyoffsets o[8];
    int n_layouts = sonde__py_offsets(o, 8);
    b->threads = make_map(BPF_MAP_TYPE_LRU_HASH, 4, 16, THREADS);
    if (b->threads >= 0)
        b->scratch = make_map(BPF_MAP_TYPE_PERCPU_ARRAY, 4, KREC, 1);
    if (b->scratch >= 0)
        b->lost = make_map(BPF_MAP_TYPE_ARRAY, 4, 8, 1);
    if (b->lost >= 0)
        b->ring = make_map(BPF_MAP_TYPE_RINGBUF, 0, 0, RING_BYTES);
    if (b->ring < 0) {
        snprintf(why, cap, "bpf(BPF_MAP_CREATE): %s%s", strerror(errno),
                 errno == EPERM ? " (CAP_BPF and CAP_PERFMON, or root, are needed)" : "");
        goto fail;
    }
    if (assemble(a, b->threads, b->scratch, b->ring, b->lost, o, n_layouts)) {
        snprintf(why, cap, "the BPF program did not assemble");
        goto fail;
    }
    union bpf_attr at;
    memset(&at, 0, sizeof at);
    at.prog_type = BPF_PROG_TYPE_PERF_EVENT;
    at.insns = (uint64_t)(uintptr_t)in;
    at.insn_cnt = (uint32_t)a->n;
    at.license = (uint64_t)(uintptr_t)"GPL"; /* bpf_probe_read_user is for GPL programs */
    b->prog = sys_bpf(BPF_PROG_LOAD, &at);
    if (b->prog < 0) {
        char what[128];
        snprintf(what, sizeof what, "bpf(BPF_PROG_LOAD): %s%s", strerror(errno),
                 errno == EPERM ? " (CAP_BPF and CAP_PERFMON, or root, are needed)" : "");
        if (errno == EPERM)
            snprintf(why, cap, "%s", what);
        else
            verifier_says(&at, what, why, cap);
        goto fail;
    }
    b->cons = mmap(NULL, b->page, PROT_READ | PROT_WRITE, MAP_SHARED, b->ring, 0);
    b->prod = mmap(NULL, b->page + 2 * (size_t)RING_BYTES, PROT_READ, MAP_SHARED, b->ring,
                   (off_t)b->page);
    if (b->cons == MAP_FAILED || b->prod == MAP_FAILED) {
        if (b->cons == MAP_FAILED)
            b->cons = NULL;
        if (b->prod == MAP_FAILED)
            b->prod = NULL;
        snprintf(why, cap, "mmap of the BPF ring buffer: %s", strerror(errno));
        goto fail;
    }
    sonde__free(in);
    sonde__free(a);
    return b;
fail:
    sonde__free(in);
    sonde__free(a);
    sonde__pybpf_close(b);
    return NULL;
}

int sonde__pybpf_runs(const sonde_pybpf *b, uint64_t *ns, uint64_t *runs)
{
    struct bpf_prog_info info;
    memset(&info, 0, sizeof info);
    union bpf_attr at;
    memset(&at, 0, sizeof at);
    at.info.bpf_fd = (uint32_t)b->prog;
    at.info.info_len = sizeof info;
    at.info.info = (uint64_t)(uintptr_t)&info;
    if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &at) != 0)
        return -1;
    *ns = info.run_time_ns;
    *runs = info.run_cnt;
    return 0;
}

uint64_t sonde__pybpf_lost(const sonde_pybpf *b)
{
    uint32_t key = 0;
    uint64_t n = 0;
    union bpf_attr at;
    memset(&at, 0, sizeof at);
    at.map_fd = (uint32_t)b->lost;
    at.key = (uint64_t)(uintptr_t)&key;
    at.value = (uint64_t)(uintptr_t)&n;
    return sys_bpf(BPF_MAP_LOOKUP_ELEM, &at) == 0 ? n : 0;
}

int sonde__pybpf_attach(sonde_pybpf *b, int perf_fd)
{
    return ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, b->prog);
}

int sonde__pybpf_thread(sonde_pybpf *b, uint32_t tid, uint64_t tstate, int layout)
{
    union bpf_attr at;
    memset(&at, 0, sizeof at);
    at.map_fd = (uint32_t)b->threads;
    at.key = (uint64_t)(uintptr_t)&tid;
    if (!tstate)
        return sys_bpf(BPF_MAP_DELETE_ELEM, &at) == 0 || errno == ENOENT ? 0 : -1;
    uint64_t value[2] = {tstate, (uint64_t)(uint32_t)layout};
    at.value = (uint64_t)(uintptr_t)value;
    at.flags = BPF_ANY;
    return sys_bpf(BPF_MAP_UPDATE_ELEM, &at);
}

/* Records taken, and those older than done by KEEP_NS, dropped; the rest kept in order, their
 * frames moved down with them. */
static void trim(sonde_pybpf *b, uint64_t done)
{
    size_t k = 0, nf = 0;
    for (size_t i = 0; i < b->n_pend; i++) {
        pend p = b->pend[i];
        if (p.used || p.t + KEEP_NS < done)
            continue;
        if (p.n && p.at != nf)
            memmove(b->frames + nf, b->frames + p.at, p.n * sizeof *b->frames);
        p.at = nf;
        nf += p.n;
        b->pend[k++] = p;
    }
    b->n_pend = k;
    b->n_frames = nf;
}

/* A record's n frames (of hops walked) from its places r into out, innermost first: a walk
 * deeper than SLOTS left its outermost KEEP_OUT in turn in the last places (walk's slot rule),
 * put back in order here. */
static void put_frames(sonde_pykframe *out, const uint8_t *r, uint32_t n, uint32_t hops)
{
    if (hops <= SLOTS || n < SLOTS) {
        memcpy(out, r, n * sizeof *out);
        return;
    }
    memcpy(out, r, KEEP_IN * sizeof *out);
    for (uint32_t j = 0; j < KEEP_OUT; j++) {
        uint32_t hop = hops - KEEP_OUT + j;
        memcpy(out + KEEP_IN + j, r + (KEEP_IN + (hop - KEEP_IN) % KEEP_OUT) * KFRAME,
               sizeof *out);
    }
}

int sonde__pybpf_read(sonde_pybpf *b, uint64_t done)
{
    trim(b, done);
    uint64_t cons = __atomic_load_n((uint64_t *)b->cons, __ATOMIC_ACQUIRE),
             prod = __atomic_load_n((uint64_t *)b->prod, __ATOMIC_ACQUIRE);
    const uint8_t *data = (const uint8_t *)b->prod + b->page;
    int oom = 0;
    while (cons < prod) {
        uint32_t len = __atomic_load_n((const uint32_t *)(const void *)(data + (cons &
                                       (RING_BYTES - 1))), __ATOMIC_ACQUIRE);
        if (len & BPF_RINGBUF_BUSY_BIT)
            break; /* still being written */
        const uint8_t *r = data + (cons & (RING_BYTES - 1)) + BPF_RINGBUF_HDR_SZ; /* mapped
                                                                twice: never cut at the end */
        uint32_t size = len & ~(uint32_t)BPF_RINGBUF_DISCARD_BIT;
        krec h;
        if (!(len & BPF_RINGBUF_DISCARD_BIT) && size >= KHEAD) {
            memcpy(&h, r, KHEAD);
            uint32_t n = h.n <= (size - KHEAD) / KFRAME ? h.n : (size - KHEAD) / KFRAME;
            if (SONDE_RESERVE(b->frames, b->n_frames, n, b->cap_frames) ||
                SONDE_GROW(b->pend, b->n_pend, b->cap_pend)) {
                oom = 1;
            } else {
                if (n) /* frames may be NULL yet (no record held any) */
                    put_frames(b->frames + b->n_frames, r + KHEAD, n, h.n);
                b->pend[b->n_pend++] = (pend){h.tid, n, h.flags, 0, h.n, h.t, b->n_frames};
                b->n_frames += n;
            }
        }
        cons += (BPF_RINGBUF_HDR_SZ + size + 7) & ~7ull;
    }
    __atomic_store_n((uint64_t *)b->cons, cons, __ATOMIC_RELEASE);
    return oom ? -1 : 0;
}

uint64_t sonde__pybpf_newest(const sonde_pybpf *b, uint32_t tid)
{
    uint64_t t = 0;
    for (size_t i = 0; i < b->n_pend; i++)
        if (b->pend[i].tid == tid && !b->pend[i].used && b->pend[i].t > t)
            t = b->pend[i].t;
    return t;
}

int sonde__pybpf_take(sonde_pybpf *b, uint32_t tid, uint64_t t, const sonde_pykframe **f,
                      sonde_pycut *cut)
{
    /* A thread's records come in its order. The sample's own is the one nearest its time,
     * within OWN_NS either side: written just before the time was taken on some kernels, just
     * after on others (6.x takes it before the program runs: 1-3.5 us after, measured here).
     * Taking "the last at or before t" there gave each sample the previous one's frames (1 ms
     * older at 999 Hz; a thread's first sleep of a run, the frames of an import 14 ms before:
     * issue 61 #17). The earlier ones are dropped with it; none that near: no frames. */
    pend *hit = NULL;
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i < b->n_pend; i++) {
        pend *p = &b->pend[i];
        if (p->tid != tid || p->used)
            continue;
        if (p->t > t && p->t - t > OWN_NS)
            break;
        uint64_t d = p->t > t ? p->t - t : t - p->t;
        if (d >= best)
            break; /* further from t from here on */
        if (hit)
            hit->used = 1;
        hit = p;
        best = d;
    }
    if (!hit || best > OWN_NS)
        return -1;
    hit->used = 1;
    *f = hit->n ? b->frames + hit->at : NULL;
    cut->between = hit->hops > hit->n ? hit->hops - hit->n : 0;
    cut->beyond = hit->flags & MORE ? HOPS : 0;
    return hit->flags & STALE ? -2 : (int)hit->n;
}
