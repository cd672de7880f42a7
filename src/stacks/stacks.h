/* stacks.h - CPU samples with call stacks: the kernel's cpu-clock events through perf_event_open,
 * or CPU-time timers and SIGPROF in the threads, unwound from frame pointers or the call frame
 * information, with their Python frames, and the off-CPU periods; what the recorder calls
 * (internal.h is what this folder's files share). */
#ifndef SONDE_STACKS_H
#define SONDE_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <sonde/sonde.h>

struct perf_event_attr;
/* perf_event_open(a, pid, cpu), close-on-exec: the descriptor, or -1 (errno set). Every event
 * the samplers open (stacks.c, offcpu.c, cputimer.c) goes through it. */
int sonde__stk_open_event(struct perf_event_attr *a, pid_t pid, int cpu);
/* The kernel's cpu-clock event through perf_event_open: hz samples per second of CPU time of
 * each thread followed, each with its user-space call stack (the kernel walks the frame
 * pointers) and its time on CLOCK_MONOTONIC. The samples go out through write as SAMPLES
 * records while the program runs; the functions are named (ELF symbol tables) and written as
 * FUNCS and STACKS records when sampling stops (format.h, docs/formats.md). */
typedef struct sonde_stacks sonde_stacks;
/* Writes one record; 0, or nonzero when it could not. Called from the sampler's thread. */
typedef int (*sonde_stacks_write)(void *ctx, unsigned type, const uint8_t *payload, size_t len);
/* How the Python frames of the samples were read (sonde__stacks_finish): way 0 not at all (no
 * CPython met, or sample_python 0), 1 by the sampler's thread, 2 in the kernel (pybpf.c): the
 * kernel's program's runs and the time they took (0, 0 unless the kernel's BPF statistics were
 * on), and its records lost (its ring was full); 3 in the threads' signal handlers (the timers:
 * cputimer.c). */
typedef struct sonde_pyway {
    uint64_t way, kernel_runs, kernel_ns, kernel_lost;
} sonde_pyway;
/* pid > 0: a child that has not exec'd yet (it waits for its go), sampled from its exec with
 * its threads and its children. pid 0: this process from now on, every thread it has and
 * starts (its children's samples are left out). inline_frames: functions inlined at a sampled
 * address are frames of their own (config sample_inline). cfi: the samples carry the stack's
 * top, and where the kernel's frame-pointer walk falls short, the call frame information
 * unwinds it (config sample_cfi; unwind.c). python: a thread running CPython 3.11-3.13 has its
 * Python frames read at each sample (config sample_python; pyframes.c): 1 in the kernel where
 * it allows (pybpf.c), else by the sampler's thread; 2 the same, a warning when refused; 3 by
 * the sampler's thread; 0 not at all. off_cpu: the
 * context-switch event beside the samples, for the time threads spend blocked in the kernel
 * (OFFCPU records; config sample_off_cpu), where the kernel allows it (nothing otherwise).
 * Where the kernel refuses perf_event_open (perf_event_paranoid 3, seccomp), or timers asks
 * for them (config sample_in_thread; pid 0 only: NULL for a child), through timers on the
 * threads' CPU clocks (cputimer.c) instead, as the SAMPLES records' flag 2 says. NULL with the
 * reason in why when both are refused, or out of memory. */
sonde_stacks *sonde__stacks_start(pid_t pid, unsigned hz, int inline_frames, int cfi,
                                  int python, int off_cpu, int timers, sonde_stacks_write write,
                                  void *ctx, char *why, size_t cap);
/* Stops sampling (once the program has ended, for a child), writes the last samples, the
 * functions and the stacks, and frees s; *cpu_ns (when not NULL) gets the CPU time the
 * sampler's thread used, *cfi_unwound (when not NULL) the samples whose stack came from the
 * call frame information (unwind.c) rather than the frame pointers. 0, SONDE_ENOMEM (what could not be named is left out) or SONDE_EIO (a
 * record could not be written). */
int sonde__stacks_finish(sonde_stacks *s, uint64_t *cpu_ns, uint64_t *cfi_unwound,
                         sonde_pyway *pyway);
/* In a forked child, whose copy of the sampler has no thread while the parent's goes on:
 * closes the copy's descriptors and unmaps its buffers, and leaves its memory (the parent's
 * thread may have been changing it at the fork). NULL is ignored. */
void sonde__stacks_forget(sonde_stacks *s);

/* pyframes.c - the Python frames of a running CPython 3.11, 3.12 or 3.13 thread, read from the
 * sampler's thread with process_vm_readv (this process or a child), never stopping the program:
 * memory that is not what it should be (a frame torn or freed while read) ends the stack there.
 * The code objects met, of every process, are kept in one table until the stacks are named. */
typedef struct sonde_pytab sonde_pytab;
typedef struct sonde_pyproc sonde_pyproc;
typedef struct sonde_pycode {
    const char *name;    /* the qualified name (co_qualname) */
    const char *file;    /* co_filename */
    unsigned first_line; /* where it is defined (co_firstlineno) */
} sonde_pycode;
/* sonde_pyframe.code of a frame standing for frames a walk left out (line: how many, or
 * SONDE_PYCUT_BEYOND and the walk's limit for those beyond it, at the root). */
#define SONDE_PYFRAME_CUT UINT32_MAX
typedef struct sonde_pyframe {
    uint32_t code;       /* its code in the table */
    uint32_t line;       /* the line it was running (0: unknown) */
    uint32_t entry;      /* 1: the first (outermost) frame of one activation of the evaluation
                            loop (_PyEval_EvalFrameDefault), C code calling into Python */
} sonde_pyframe;
/* NULL out of memory. */
sonde_pytab *sonde__pytab_new(void);
void sonde__pytab_free(sonde_pytab *t);
/* Code id of the table into *out (its strings live as long as the table); -1 no such id. */
int sonde__pytab_code(const sonde_pytab *t, uint32_t id, sonde_pycode *out);
/* The interpreter of process pid (the file of its mappings whose symbols hold _PyRuntime), its
 * codes going into tab; NULL with the reason in why where it has none, of another version or
 * build, or its memory cannot be read (*found then 1: a CPython is there, its frames are not
 * read). */
sonde_pyproc *sonde__py_attach(sonde_pytab *tab, int pid, char *why, size_t cap, int *found);
/* The same, for a process whose interpreter (3.minor) has its _PyRuntime and PyCode_Type at
 * these addresses (the fuzzer's fake one); NULL for a version not read, or out of memory. */
sonde_pyproc *sonde__py_attach_at(sonde_pytab *tab, int pid, unsigned minor, uint64_t runtime,
                                  uint64_t code_type);
/* Offset off of the interpreter's file is inside _PyEval_EvalFrameDefault (where its symbols
 * say; 0 where they do not). */
int sonde__py_is_eval(const sonde_pyproc *py, uint64_t off);
/* The file holding the interpreter (the python executable or libpython; NULL from _at). */
const char *sonde__py_path(const sonde_pyproc *py);
/* The Python frames thread tid is running now, innermost first, at most cap; 0 when it runs
 * no Python (or is no Python thread). sonde__py_tstate, sonde__py_raw and sonde__py_resolve
 * in one. */
int sonde__py_stack(sonde_pyproc *py, int tid, sonde_pyframe *inner, int cap);
/* What a walk of a deep stack left out: it keeps the innermost SONDE_PYCUT_IN frames and the
 * outermost that fit (the root), as a stack keeps them (a sample's 128 frames). */
#define SONDE_PYCUT_IN 32
typedef struct sonde_pycut {
    uint32_t between;    /* frames walked and not kept, after the innermost (0: none) */
    int beyond;          /* the walk's limit, where it stopped there with frames still beyond
                            (0: it reached the outermost) */
} sonde_pycut;
/* The line of the SONDE_PYFRAME_CUT frame at the root of a walk that stopped at its limit:
 * this bit and the limit (a cut's between the innermost and the outermost: the count). */
#define SONDE_PYCUT_BEYOND 0x80000000u
/* A frame as read, not yet named: its code object's and instruction's addresses. From
 * sonde__py_raw, the top byte of each holds half of a check of the code object as it was read
 * (its file's and name's addresses): sonde__py_resolve ends the frames at one whose code object
 * is another by the time it is named. */
typedef struct sonde_pyraw {
    uint64_t code;
    uint64_t instr;      /* bit 0 (instructions are 2-byte aligned): SONDE_PYRAW_ENTRY */
} sonde_pyraw;
#define SONDE_PYRAW_ENTRY ((uint64_t)1) /* the first frame of an activation of the evaluation loop */
/* The address of thread tid's thread state (0: no Python thread), as sonde__py_stack finds it
 * (the thread states walked again at most every 50 ms for a thread that has none). */
uint64_t sonde__py_tstate(sonde_pyproc *py, int tid);
#define SONDE_PYRAW_MAX 64 /* frames sonde__py_raw reads at most */
/* What sonde__py_raw works in: the window on the thread's data stack it reads at once, its
 * thread state, and each frame's check as read. 12 KiB, kept off the sampled thread's stack (a
 * signal handler takes one from a pool: cputimer.c), whose room may be small. */
typedef struct sonde_pyscratch {
    uint8_t win[8192];
    uint8_t ts[512];
    uint8_t id[SONDE_PYRAW_MAX][24];
    struct iovec lv[SONDE_PYRAW_MAX], rv[SONDE_PYRAW_MAX];
} sonde_pyscratch;
/* Thread tid's frames now, innermost first, at most cap (and SONDE_PYRAW_MAX; deeper: the
 * innermost SONDE_PYCUT_IN and the outermost, what was left out between in *cut), from its thread
 * state at tstate, read with process_vm_readv into w, each with its code object's check
 * (sonde_pyraw); -1 when tstate is not tid's (any more). Changes nothing of py, allocates
 * nothing and reads into w, not its stack: a signal handler of the sampled thread may call it
 * (cputimer.c, whose test_cputimer measures the handler's whole use of the stack), and its
 * frames are named later. */
int sonde__py_raw(const sonde_pyproc *py, int tid, uint64_t tstate, sonde_pyraw *raw, int cap,
                  sonde_pyscratch *w, sonde_pycut *cut);
/* Frames as read (n of them, innermost first) named: their code objects read (cached by address
 * and head) into inner; how many (a code object no longer there ends them). */
int sonde__py_resolve(sonde_pyproc *py, const sonde_pyraw *raw, int n, sonde_pyframe *inner);
/* The same for a deep walk's frames (cut: what it left out after the first n_in of raw): the
 * innermost named, then a SONDE_PYFRAME_CUT frame and the outermost (where every innermost one
 * was named), and one more at the root when the walk stopped at its limit; into inner (room for
 * n + 2); how many. */
int sonde__py_resolve_cut(sonde_pyproc *py, const sonde_pyraw *raw, int n, int n_in,
                          const sonde_pycut *cut, sonde_pyframe *inner);
void sonde__py_detach(sonde_pyproc *py);
/* Where a walk of the frames in the kernel (pybpf.c) finds what it reads, per version. */
typedef struct sonde_pyoffsets {
    unsigned minor;
    uint32_t ts_tid, ts_frame;   /* PyThreadState.native_thread_id, .cframe or .current_frame */
    uint32_t cf_frame;           /* _PyCFrame.current_frame; UINT32_MAX: ts_frame is the frame */
    uint32_t fr_code, fr_previous, fr_instr, fr_owner; /* _PyInterpreterFrame */
    int fr_is_entry;             /* 3.11's is_entry; -1: none */
    uint32_t co_filename;        /* then co_name and co_qualname, 24 bytes in all */
    uint32_t ts_status;          /* PyThreadState._status, its bit 8 set on the state its thread
                                    entered last (UINT32_MAX: none to read, 3.11) */
} sonde_pyoffsets;
/* The versions read, at most cap of them, into o; how many. A process's is its layout
 * (sonde__py_layout): its index there. */
int sonde__py_offsets(sonde_pyoffsets *o, int cap);
int sonde__py_layout(const sonde_pyproc *py);
/* A frame as the kernel's walk wrote it: its code object, instruction, owner and 3.11's
 * is_entry, and its code's co_filename and co_qualname then (0, 0: they could not be read). */
typedef struct sonde_pykframe {
    uint64_t code, instr, file, qual;
    uint8_t owner, is_entry, pad[6];
} sonde_pykframe;
/* The kernel's frames (n, innermost first) as sonde__py_raw gives them (with their checks, the
 * C stack's entry frames left out), at most cap; how many. */
int sonde__py_from_kernel(const sonde_pyproc *py, const sonde_pykframe *f, int n,
                          sonde_pyraw *raw, int cap);

/* pybpf.c - the Python frames read in the kernel at each sample by a BPF program on the
 * cpu-clock event (config sample_python 1 or 2), drained with the samples. */
typedef struct sonde_pybpf sonde_pybpf;
/* The maps, the program (loaded) and its ring; NULL with the reason in why (not allowed: it
 * needs CAP_BPF and CAP_PERFMON, or root; a kernel before 5.8; out of memory). */
sonde_pybpf *sonde__pybpf_open(char *why, size_t cap);
/* The program run at each overflow of perf event perf_fd (and of the events it is inherited
 * by). 0, or -1 (errno). */
int sonde__pybpf_attach(sonde_pybpf *b, int perf_fd);
/* Thread tid's thread state for the program (tstate 0: none), its version's layout index
 * (sonde__py_layout). 0, or -1 (errno). */
int sonde__pybpf_thread(sonde_pybpf *b, uint32_t tid, uint64_t tstate, int layout);
/* The ring's records into the pending ones, those taken and those 20 ms older than done (the
 * time up to which the samples were drained: theirs came, or never will) dropped first. 0, or
 * -1 out of memory (records lost). */
int sonde__pybpf_read(sonde_pybpf *b, uint64_t done);
/* The record of thread tid's sample or switch at time t (the one nearest t, within 100 us):
 * its frames into *f (valid until the next read), how many, and what a deep walk left out into
 * *cut (its innermost 32 frames and outermost 95 held); -1: none (the thread not known to
 * the program, the ring was full, or no record that near), -2: the thread state given was not
 * the thread's. Its thread's earlier records are dropped with it. */
int sonde__pybpf_take(sonde_pybpf *b, uint32_t tid, uint64_t t, const sonde_pykframe **f,
                      sonde_pycut *cut);
/* The time of thread tid's newest record not taken yet (0: none). */
uint64_t sonde__pybpf_newest(const sonde_pybpf *b, uint32_t tid);
/* The program's runs so far and the time they took (counted while the kernel's BPF statistics
 * are on: kernel.bpf_stats_enabled, or a BPF_ENABLE_STATS descriptor; else 0, 0). 0, or -1. */
int sonde__pybpf_runs(const sonde_pybpf *b, uint64_t *ns, uint64_t *runs);
/* The records the program could not write: its ring was full (their samples keep their native
 * frames). */
uint64_t sonde__pybpf_lost(const sonde_pybpf *b);
void sonde__pybpf_close(sonde_pybpf *b);
/* In a child forked while it was open: its descriptors closed, its memory left as it is. */
void sonde__pybpf_forget(sonde_pybpf *b);

/* unwind.c - a sample's stack unwound from the files' call frame information (libdwfl), from
 * the registers and the top of the user stack the kernel copied into it. */
typedef struct sonde_unwinder sonde_unwinder;
typedef struct sonde_umap {
    uint64_t start, end, pgoff;
    const char *path;
} sonde_umap;
/* NULL out of memory, or where it is not built (x86-64 only). */
sonde_unwinder *sonde__unwind_new(void);
/* The registers to ask the kernel for (perf_event_attr.sample_regs_user); 0: none. */
uint64_t sonde__unwind_regs_mask(void);
/* Thread tid of process pid (whose files are mapped as maps says) stopped with perf_regs (the
 * mask's registers in perf's order) and the stack's top [sp, sp + size): its frames, innermost
 * first (the pc, then return addresses), at most max into ips. Returns how many (0 when none
 * could be found). */
int sonde__unwind(sonde_unwinder *u, int pid, int tid, const sonde_umap *maps, size_t n_maps,
                  const uint64_t *perf_regs, const uint8_t *stack, uint64_t size, uint64_t *ips,
                  int max);
void sonde__unwind_free(sonde_unwinder *u);

/* symbols.c - names for the samples' addresses: an ELF file's symbol table and, where it has
 * DWARF (its own, or /usr/lib/debug/.build-id/), the functions inlined at an address and
 * where each function is defined. */
typedef struct sonde_symfile sonde_symfile;
typedef struct sonde_symframe {
    char *name;                /* allocated */
    char *file;                /* where the function is defined (allocated), NULL: unknown */
    unsigned line;             /* 0: unknown */
} sonde_symframe;
/* The file at path, read once; NULL only out of memory (a file that cannot be read names its
 * addresses by number: "FILE+0xADDRESS"). */
sonde_symfile *sonde__sym_open(const char *path);
/* The functions at file offset off, innermost first: those inlined there, then the function
 * that holds them (its symbol table name). Fills out (up to max) and returns how many (1 or
 * more), or -1 out of memory; the caller frees each name and file. */
int sonde__sym_at(sonde_symfile *f, uint64_t off, sonde_symframe *out, int max);
/* The source line at file offset off (the file's own DWARF line table): 1 with *file (not to
 * be freed; valid until sonde__sym_close) and *line set, else 0. */
int sonde__sym_line(sonde_symfile *f, uint64_t off, const char **file, unsigned *line);
/* The names a just-in-time compiler gives its code in /tmp/perf-PID.map ("START SIZE NAME" a
 * line, hexadecimal; Python 3.12's perf trampolines, V8, the JVM's perf-map-agent), as a
 * symbol file whose offsets are the process's addresses; NULL when there is none (or out of
 * memory). "[vdso]" given to sonde__sym_open names the vDSO's functions. */
sonde_symfile *sonde__sym_perfmap(int pid);
/* 1 when a symbol of f holds offset off (the perf map's: an address). */
int sonde__sym_holds(const sonde_symfile *f, uint64_t off);
/* The file's name without its directory. */
const char *sonde__sym_base(const sonde_symfile *f);
void sonde__sym_close(sonde_symfile *f);

/* cputimer.c - the sampler's way where perf_event_open is refused: a timer on each thread's CPU
 * clock sends it SIGPROF, whose handler unwinds its stack (.eh_frame, through libgcc) into a
 * lock-free ring. One per process. */
#define SONDE_CPUTIMER_FRAMES 64
#define SONDE_CPUTIMER_PYFRAMES 64
/* Room below the handler's frame that it unwinds in: past it, a sample holds the interrupted
 * instruction and its Python frames alone (sonde__cputimer_shallow). The handler and the
 * unwinder have used 2.2 KiB below the signal's frame (the kernel's, 3.4 KiB with AVX-512
 * state), 8.0 KiB in the ASan build (test_cputimer measures it each run). */
#define SONDE_CPUTIMER_STACK_NEED 12288
typedef struct sonde_cputimer sonde_cputimer;
/* A sample: the thread, its time (CLOCK_MONOTONIC, ns), its frames innermost first (the
 * interrupted instruction, then return addresses), how many periods of 1/hz of CPU it stands
 * for (more than 1 past the kernel's tick rate), and its Python frames as read then (n_py of
 * them, innermost first, what a deep stack's walk left out in cut; sonde__cputimer_python). */
typedef void (*sonde_cputimer_fn)(void *ctx, uint32_t tid, uint64_t t, const uint64_t *ip,
                                  uint32_t n, uint32_t weight, const sonde_pyraw *py,
                                  uint32_t n_py, const sonde_pycut *cut);
/* Arms a timer at hz on every thread of this process; NULL with the reason in why. counters:
 * each thread's CPU time counted by a perf_event CPU-clock counter of its own instead, whose
 * overflows signal it (SIGPROF, F_SETOWN_EX to the thread), where the kernel allows them (the
 * process's own threads, user time only: perf_event_paranoid 2 does): any rate, not the kernel
 * tick's, one sample a signal. */
sonde_cputimer *sonde__cputimer_start(unsigned hz, int counters, char *why, size_t cap);
/* Arms timers on the threads begun since (the sampler's thread calls it every 100 ms). 0, or
 * -1 when a timer could not be made. */
int sonde__cputimer_follow_new(sonde_cputimer *t);
/* Hands each sample taken since the last call to fn; returns how many. One caller at a time. */
size_t sonde__cputimer_drain(sonde_cputimer *t, sonde_cputimer_fn fn, void *ctx);
/* Samples dropped because the ring was full. */
uint64_t sonde__cputimer_lost(const sonde_cputimer *t);
/* Samples that hold the interrupted instruction (and the Python frames) alone: the thread's
 * stack had too little room below the handler to unwind in (a thread made with a small stack,
 * deep in it), or lay in no mapping the sampler's thread had read yet. */
uint64_t sonde__cputimer_shallow(const sonde_cputimer *t);
/* 1: t samples by per-thread CPU-clock counters (sonde__cputimer_start's counters, where the
 * kernel allows them), 0: by timers. */
int sonde__cputimer_counters(const sonde_cputimer *t);
/* The threads with a timer or a counter now. */
size_t sonde__cputimer_followed(const sonde_cputimer *t);
/* From now on each sample also reads its thread's Python frames through py (this process's
 * interpreter; it must outlive t's timers: sonde__cputimer_disarm or _stop first), from the
 * thread state published for its thread by sonde__cputimer_tstate (none until then). */
void sonde__cputimer_python(sonde_cputimer *t, const sonde_pyproc *py);
/* Thread tid's thread state is at tstate (0: none, or not known any more). The sampler's thread
 * alone calls it. */
void sonde__cputimer_tstate(sonde_cputimer *t, uint32_t tid, uint64_t tstate);
/* Whether the program has set an action of its own for t's signal (for SIGPROF: a profiler on
 * setitimer(ITIMER_PROF), Python's signal.signal), whose action is never touched after, so the
 * program's handler gets its own signals alone: 0 not; 1 it took SIGPROF (now or before), and
 * every thread's timer or counter sends a free real-time signal instead (sonde__cputimer_signal),
 * the samples going on; 2 it took the signal and no other could be had: every timer and counter
 * is stopped for good. The sampler's thread asks it each time it drains (10 ms). */
int sonde__cputimer_displaced(sonde_cputimer *t);
/* The signal t's timers and counters send (SIGPROF, or the one they moved to). */
int sonde__cputimer_signal(const sonde_cputimer *t);
/* Deletes the timers and restores SIGPROF's action (where it is still ours): no sample is taken
 * after it returns (what the ring holds can still be drained). */
void sonde__cputimer_disarm(sonde_cputimer *t);
/* Disarms and frees t. NULL is ignored. */
void sonde__cputimer_stop(sonde_cputimer *t);
/* In a forked child: the copy no longer receives samples; its memory is left. */
void sonde__cputimer_forget(sonde_cputimer *t);

#endif
