/* cputimer.c - CPU-time samples with call stacks taken in the sampled threads themselves: where
 * perf_event_open is refused (a perf_event_paranoid of 3, a container's seccomp profile), a
 * POSIX timer on each thread's CPU clock (timer_create with the thread's CPU-time clock id,
 * SIGEV_THREAD_ID) sends SIGPROF to the thread each 1/hz of CPU it uses; where a program asks
 * for it (config sample_in_thread) and the kernel allows it, a perf_event CPU-clock counter of
 * the thread's own does (F_SETSIG, F_SETOWN_EX), at any rate, not the kernel tick's. The handler
 * unwinds the interrupted thread's stack with libgcc's unwinder (backtrace(): the call frame
 * information of .eh_frame, so code built without frame pointers unwinds too) and puts the
 * sample in a lock-free ring (a bounded multi-producer queue, one sequence number per slot); the
 * sampler's thread takes them out (sonde__cputimer_drain) and, every 100 ms, starts timers or
 * counters for the threads begun since and drops those of the threads that ended.
 * Nothing in the handler allocates or locks: backtrace() is called once before the first timer
 * is armed, so libgcc is loaded, and the loader's lock it takes (dl_iterate_phdr) is recursive.
 * In a Python process the handler also reads the thread's Python frames (pyframes.c's
 * sonde__py_raw: process_vm_readv of its own memory, so a torn frame ends the walk and never
 * faults), from the thread state the sampler's thread found for it; the sampler names them as
 * it drains. One per process (the handler finds it through a global). x86-64 and AArch64.
 * The handler runs on the sampled thread's stack, which may have little room left (Python's
 * threading.stack_size allows 32 KiB): its Python frames are read in a scratch area taken from a
 * pool, not on the stack, and it unwinds only where the stack's mapping (the sampler's thread
 * reads /proc/self/maps when threads begin) leaves SONDE_CPUTIMER_STACK_NEED bytes below it;
 * else the sample holds the interrupted instruction and the Python frames alone
 * (sonde__cputimer_shallow). */
#define _GNU_SOURCE
#include "stacks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/sig.h"
#include "../util/sort.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define SLOTS 4096u /* a power of two: 16 ms of 1 kHz samples on 256 busy threads */

#define TSTATES 4096u /* threads whose Python thread state the handler can find (a power of two) */
#define SCRATCHES 64  /* handlers reading Python frames at once (each CPU runs one at a time) */
#define REFRESH 100 /* a counter's overflows allowed ahead: each handled signal allows one
                       more, so signals that came together while SIGPROF was blocked (one
                       pending signal stands for them all) cost at most that many, and a
                       counter stopped at the last is started again by the next handler */

typedef struct tslot {
    _Atomic uint64_t seq;      /* i: free for the producer of position i; i + 1: holds it */
    uint32_t tid, n;
    uint32_t weight;           /* expirations it stands for: 1 + the timer's overrun */
    uint32_t n_py;             /* Python frames read (0: none, or no Python read) */
    sonde_pycut cut;           /* what their walk left out (a deep stack's middle) */
    uint64_t t;
    uint64_t ip[SONDE_CPUTIMER_FRAMES];
    sonde_pyraw py[SONDE_CPUTIMER_PYFRAMES];
} tslot;

/* The mappings a thread's stack may be in (private, writable, no file: what pthread_create and
 * the kernel give stacks), in address order; grows: the main thread's, which grows down to
 * RLIMIT_STACK. */
typedef struct srange {
    uint64_t lo, hi;
} srange;
typedef struct stable {
    srange *r;
    size_t n, cap;
    uint64_t grows_lo, grows_hi; /* the main thread's stack as far as it may grow (0, 0: none) */
} stable;

typedef struct tthread {
    pid_t tid;
    timer_t timer;
    int fd;                    /* its CPU-clock counter (the counters' way), else -1 */
} tthread;

struct sonde_cputimer {
    unsigned hz;
    int counters;              /* per-thread perf_event CPU-clock counters signal each period
                                  (sonde__cputimer_start's counters), not POSIX timers */
    _Atomic int stopping;      /* disarming: the handler lets no counter go on */
    _Atomic uint64_t head;     /* the next position a producer takes */
    uint64_t tail;             /* the next position the consumer reads */
    _Atomic uint64_t lost;     /* samples dropped: the ring was full */
    tthread *threads;          /* the threads with a timer */
    size_t n_threads, cap_threads;
    int sig;                   /* the signal the timers and counters send: SIGPROF, or a free
                                  real-time one once the program took SIGPROF
                                  (sonde__cputimer_displaced) */
    struct sigaction old;      /* sig's action before ours */
    int displaced;             /* the program took sig and no other could be had: every timer
                                  and counter stopped for good (sonde__cputimer_displaced) */
    /* Python frames (sonde__cputimer_python): the interpreter read, and each thread's thread
     * state, published by the sampler's thread (one writer), found by the handler by tid */
    _Atomic(const sonde_pyproc *) py;
    _Atomic uint32_t ts_tid[TSTATES];
    _Atomic uint64_t ts_addr[TSTATES];
    /* Where the stacks are (stack_room): two tables, the handlers reading the one st_cur names
     * (counted in st_readers), the sampler's thread writing the other once no handler reads it,
     * then naming it; st_stale: a handler found its stack in no mapping of the table */
    stable st[2];
    _Atomic int st_cur, st_loaded, st_stale;
    uint64_t st_read_ns;       /* when the sampler's thread last read them */
    _Atomic unsigned st_readers[2];
    _Atomic uint64_t shallow;  /* samples without their native stack: too little room to unwind */
    _Atomic uint64_t scratch_used; /* bit i: scratch[i] taken by a handler */
    sonde_pyscratch scratch[SCRATCHES];
    tslot slots[SLOTS];
};

static _Atomic(sonde_cputimer *) g_owner;
static _Atomic int g_inflight; /* handlers running now */

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t interrupted_pc(const void *ucv)
{
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uint64_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

/* The place of thread tid in the thread-state table (open addressing), or TSTATES. */
static size_t ts_slot(const sonde_cputimer *t, uint32_t tid, int insert)
{
    size_t h = (size_t)(tid * 2654435761u) & (TSTATES - 1);
    for (size_t k = 0; k < TSTATES; k++, h = (h + 1) & (TSTATES - 1)) {
        uint32_t at = atomic_load_explicit(&((sonde_cputimer *)t)->ts_tid[h], memory_order_acquire);
        if (at == tid || (!at && insert))
            return h;
        if (!at)
            return TSTATES;
    }
    return TSTATES;
}

/* Thread tid's Python frames now, from the thread state the sampler's thread found for it, into
 * slot s (none when none is known yet, or it is no longer tid's: the sampler looks again), read
 * in a scratch area of the pool (none when every one is taken). */
static void python_frames(sonde_cputimer *t, uint32_t tid, tslot *s)
{
    s->n_py = 0;
    const sonde_pyproc *py = atomic_load_explicit(&t->py, memory_order_acquire);
    size_t h = py ? ts_slot(t, tid, 0) : TSTATES;
    uint64_t tstate = h < TSTATES ? atomic_load_explicit(&t->ts_addr[h], memory_order_acquire) : 0;
    if (!tstate)
        return;
    uint64_t used = atomic_load_explicit(&t->scratch_used, memory_order_relaxed);
    int k;
    do {
        if (!~used)
            return;
        k = __builtin_ctzll(~used);
    } while (!atomic_compare_exchange_weak_explicit(&t->scratch_used, &used,
                                                    used | (UINT64_C(1) << k),
                                                    memory_order_acquire, memory_order_relaxed));
    int n = sonde__py_raw(py, (int)tid, tstate, s->py, SONDE_CPUTIMER_PYFRAMES, &t->scratch[k],
                          &s->cut);
    atomic_fetch_and_explicit(&t->scratch_used, ~(UINT64_C(1) << k), memory_order_release);
    s->n_py = n > 0 ? (uint32_t)n : 0;
}

/* Bytes of stack below sp, as the table of stacks has it: UINT64_MAX before the table is first
 * read (or when it could not be), 0 when sp is in no mapping of it (the sampler's thread is
 * asked to read it again). No lock, no call: a handler asks. */
static uint64_t stack_room(sonde_cputimer *t, uint64_t sp)
{
    if (!atomic_load(&t->st_loaded))
        return UINT64_MAX;
    int i;
    for (;;) {
        i = atomic_load(&t->st_cur);
        atomic_fetch_add(&t->st_readers[i], 1);
        if (atomic_load(&t->st_cur) == i)
            break;
        atomic_fetch_sub(&t->st_readers[i], 1); /* switched meanwhile: it may be being written */
    }
    const stable *tb = &t->st[i];
    uint64_t room = 0;
    if (sp >= tb->grows_lo && sp < tb->grows_hi) {
        room = sp - tb->grows_lo;
    } else {
        size_t lo = 0, hi = tb->n;
        while (lo < hi) { /* the first range ending above sp */
            size_t mid = lo + (hi - lo) / 2;
            if (tb->r[mid].hi <= sp)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < tb->n && tb->r[lo].lo <= sp)
            room = sp - tb->r[lo].lo;
    }
    atomic_fetch_sub(&t->st_readers[i], 1);
    if (!room)
        atomic_store(&t->st_stale, 1);
    return room;
}

/* The table of stacks not in use written again from /proc/self/maps, then put in use. 0, or -1
 * (errno set; the table in use stays). The sampler's thread alone calls it. */
static int stacks_read(sonde_cputimer *t)
{
    int o = 1 - atomic_load(&t->st_cur);
    /* handlers that took it before the last switch: a moment, unless their thread was stopped
     * in one (SIGSTOP, a debugger), when the table in use stays for now */
    for (int i = 0; atomic_load(&t->st_readers[o]); i++) {
        if (i == 1000) {
            errno = EBUSY;
            return -1;
        }
        struct timespec w = {0, 100000};
        nanosleep(&w, NULL);
    }
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    stable *tb = &t->st[o];
    tb->n = 0;
    tb->grows_lo = tb->grows_hi = 0;
    char line[512];
    int rc = 0, whole = 1;
    while (fgets(line, sizeof line, f)) {
        int head = whole; /* the line's beginning, not the rest of a long path */
        whole = strchr(line, '\n') != NULL;
        unsigned long long lo, hi, ino;
        char perms[8];
        int at = 0;
        if (!head ||
            sscanf(line, "%llx-%llx %7s %*s %*s %llu %n", &lo, &hi, perms, &ino, &at) < 4 ||
            perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || ino)
            continue;
        const char *path = line + at;
        if (!strncmp(path, "[stack]", 7)) {
            struct rlimit rl;
            uint64_t lim = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                               ? (uint64_t)rl.rlim_cur : UINT64_C(1) << 30;
            tb->grows_hi = hi;
            tb->grows_lo = hi - lo > lim || hi < lim ? lo : hi - lim;
            continue;
        }
        if (*path != '\n' && *path && strncmp(path, "[anon:", 6))
            continue; /* the heap, the vDSO's data: no thread's stack */
        if (SONDE_GROW(tb->r, tb->n, tb->cap)) {
            errno = ENOMEM;
            rc = -1;
            break;
        }
        tb->r[tb->n++] = (srange){lo, hi};
    }
    fclose(f);
    if (rc)
        return -1;
    atomic_store(&t->st_stale, 0);
    t->st_read_ns = mono_ns();
    atomic_store(&t->st_cur, o);
    atomic_store(&t->st_loaded, 1);
    return 0;
}

/* The interrupted thread's frames into s->ip, from the instruction at pc; how many. Apart from
 * the handler, so that its frames are on the stack only where there is room for them. */
__attribute__((noinline)) static uint32_t unwind(tslot *s, uint64_t pc)
{
    void *frames[SONDE_CPUTIMER_FRAMES + 8];
    int n = backtrace(frames, (int)(sizeof frames / sizeof frames[0]));
    int from = n; /* the unwinder goes through this handler and the signal's trampoline first */
    for (int i = 0; i < n; i++)
        if ((uint64_t)(uintptr_t)frames[i] == pc) {
            from = i;
            break;
        }
    uint32_t k = 0;
    if (from == n && pc) /* the unwinder could not pass the signal frame: the pc alone */
        s->ip[k++] = pc;
    for (int i = from; i < n && k < SONDE_CPUTIMER_FRAMES; i++)
        s->ip[k++] = (uint64_t)(uintptr_t)frames[i];
    return k;
}

static void on_sigprof(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved = errno;
    atomic_fetch_add(&g_inflight, 1);
    sonde_cputimer *t = atomic_load_explicit(&g_owner, memory_order_acquire);
    int counter = si->si_code == POLL_IN || si->si_code == POLL_HUP; /* a counter's overflow */
    if (!t || (t->counters ? !counter : si->si_code != SI_TIMER))
        goto out;
    uint64_t pos = atomic_load_explicit(&t->head, memory_order_relaxed);
    tslot *s;
    for (;;) {
        s = &t->slots[pos & (SLOTS - 1)];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (seq == pos) {
            if (atomic_compare_exchange_weak_explicit(&t->head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed))
                break;
        } else if (seq < pos) { /* full: the consumer has not taken this slot's last sample */
            atomic_fetch_add_explicit(&t->lost, 1, memory_order_relaxed);
            goto out;
        } else {
            pos = atomic_load_explicit(&t->head, memory_order_relaxed);
        }
    }
    uint64_t pc = interrupted_pc(ucv);
    if (stack_room(t, (uint64_t)(uintptr_t)__builtin_frame_address(0)) >= SONDE_CPUTIMER_STACK_NEED) {
        s->n = unwind(s, pc);
    } else { /* unwinding could overrun the stack: the instruction alone */
        s->n = pc ? 1 : 0;
        s->ip[0] = pc;
        atomic_fetch_add_explicit(&t->shallow, 1, memory_order_relaxed);
    }
    /* CPU-time timers expire on the kernel's tick (CONFIG_HZ, 250 on Debian): past that rate a
     * signal stands for the expirations since the last, which si_overrun counts (a counter's
     * signal is one overflow: its siginfo holds si_band there) */
    s->weight = 1 + (!counter && si->si_overrun > 0
                         ? (si->si_overrun < 1000 ? (uint32_t)si->si_overrun : 1000u) : 0u);
    s->tid = (uint32_t)syscall(SYS_gettid);
    s->t = mono_ns();
    python_frames(t, s->tid, s);
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
out:
    if (t && counter && t->counters && !atomic_load(&t->stopping)) /* one overflow more */
        ioctl(si->si_fd, PERF_EVENT_IOC_REFRESH, 1);
    atomic_fetch_sub(&g_inflight, 1);
    errno = saved;
}

/* Until no handler runs (those begun before g_owner was cleared or the counters stopped). */
static void wait_handlers(void)
{
    while (atomic_load(&g_inflight)) {
        struct timespec w = {0, 100000};
        nanosleep(&w, NULL);
    }
}

/* Thread i's timer deleted or counter closed (the counter goes with its descriptor). Only for
 * a thread that has ended, whose counter signals no one, or once every counter is stopped and
 * the handlers waited for (disarm): a running handler could otherwise refresh a descriptor
 * whose number a new counter took. */
static void unfollow(sonde_cputimer *t, size_t i)
{
    if (t->threads[i].fd >= 0)
        close(t->threads[i].fd);
    else
        timer_delete(t->threads[i].timer);
}

/* A CPU-clock counter on thread tid (user time only: perf_event_paranoid 2 allows it on the
 * process's own threads) whose every overflow, each 1/hz s of its CPU, sends it SIGPROF
 * (POLL_IN; POLL_HUP when the overflows allowed ahead, REFRESH, are used up). The descriptor,
 * or -1 (errno set). */
static int counter_of(const sonde_cputimer *t, pid_t tid)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 1000000000ull / t->hz;
    a.exclude_kernel = a.exclude_hv = 1;
    a.disabled = 1;
    int fd = sonde__stk_open_event(&a, tid, -1);
    if (fd < 0)
        return -1;
    struct f_owner_ex owner = {F_OWNER_TID, tid};
    if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || fcntl(fd, F_SETSIG, t->sig) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0 || ioctl(fd, PERF_EVENT_IOC_REFRESH, REFRESH) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* A timer on thread tid's CPU clock (the kernel's clock id for a thread's CPU time, as glibc's
 * pthread_getcpuclockid makes it), or its counter (counter_of), sending t->sig to that thread,
 * which is not followed yet. 0, or -1 (errno set; ESRCH-like failures of a thread that has just
 * ended are 0). */
static int follow(sonde_cputimer *t, pid_t tid)
{
    if (t->counters) {
        int fd = counter_of(t, tid);
        if (fd < 0)
            return errno == ESRCH ? 0 : -1; /* ESRCH: the thread is gone */
        if (SONDE_GROW(t->threads, t->n_threads, t->cap_threads)) {
            close(fd);
            errno = ENOMEM;
            return -1;
        }
        t->threads[t->n_threads++] = (tthread){tid, 0, fd};
        return 0;
    }
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6); /* per thread, scheduler time */
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = t->sig;
    ev.sigev_notify_thread_id = tid;
    timer_t id;
    if (timer_create(clock, &ev, &id) != 0)
        return errno == EINVAL || errno == ESRCH ? 0 : -1; /* EINVAL: the thread is gone */
    long ns = 1000000000L / (long)t->hz;
    struct itimerspec it = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
    if (timer_settime(id, 0, &it, NULL) != 0 || SONDE_GROW(t->threads, t->n_threads, t->cap_threads)) {
        int e = errno ? errno : ENOMEM;
        timer_delete(id);
        errno = e;
        return -1;
    }
    t->threads[t->n_threads++] = (tthread){tid, id, -1};
    return 0;
}

/* A followed thread's id and its place in t->threads. */
typedef struct tid_at {
    pid_t tid;
    size_t i;
} tid_at;

static int cmp_tid_at(const void *a, const void *b)
{
    pid_t x = ((const tid_at *)a)->tid, y = ((const tid_at *)b)->tid;
    return (x > y) - (x < y);
}

int sonde__cputimer_follow_new(sonde_cputimer *t)
{
    if (t->displaced) /* the signal is the program's now: no thread gets a timer again */
        return 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    size_t known = t->n_threads;
    uint8_t *alive = sonde__calloc(known + 1, 1); /* those still listed */
    tid_at *by = sonde__malloc((known + 1) * sizeof *by); /* the followed threads by id: each
                                                             listed one found in log time */
    if (!alive || !by) {
        sonde__free(alive);
        sonde__free(by);
        closedir(d);
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < known; i++)
        by[i] = (tid_at){t->threads[i].tid, i};
    sonde__sort(by, known, sizeof *by, cmp_tid_at);
    /* the stacks read again before a thread begun since is armed (its stack is then in the
     * table), and when a handler found its stack in none, at most once a second for that (a
     * thread on a stack of the heap's would find none every time) */
    if (atomic_load(&t->st_stale) && mono_ns() - t->st_read_ns > 1000000000ull)
        stacks_read(t);
    int stacks_due = 1; /* once a look, for the threads begun since */
    while ((e = readdir(d))) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0)
            continue;
        tid_at key = {(pid_t)tid, 0};
        const tid_at *hit = known ? bsearch(&key, by, known, sizeof *by, cmp_tid_at) : NULL;
        if (hit) {
            alive[hit->i] = 1;
            continue;
        }
        if (stacks_due) { /* a thread begun since */
            stacks_read(t); /* (where it cannot, the table in use stays) */
            stacks_due = 0;
        }
        if (follow(t, (pid_t)tid) != 0)
            rc = -1;
    }
    closedir(d);
    sonde__free(by);
    /* the threads that ended: their timers deleted, their counters closed (a thread id used
     * again is a new thread, which gets its own: a dead thread's counter never fires) */
    size_t k = 0;
    for (size_t i = 0; i < t->n_threads; i++) {
        if (i < known && !alive[i])
            unfollow(t, i);
        else
            t->threads[k++] = t->threads[i];
    }
    t->n_threads = k;
    sonde__free(alive);
    return rc;
}

/* on_sigprof made sig's action, its action before kept in t->old, and t->sig set: 0; 1 when sig
 * has an action of the program's (left as it is); -1 when sigaction failed (errno). */
static int install(sonde_cputimer *t, int sig)
{
    struct sigaction sa, before;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, NULL, &before) != 0)
        return -1;
    if ((before.sa_flags & SA_SIGINFO) ||
        (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN))
        return 1;
    if (sigaction(sig, &sa, NULL) != 0)
        return -1;
    t->old = before;
    t->sig = sig;
    return 0;
}

sonde_cputimer *sonde__cputimer_start(unsigned hz, int counters, char *why, size_t cap)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
    snprintf(why, cap, "timer_create sampling is built for x86-64 and AArch64 only");
    (void)hz;
    return NULL;
#else
    if (!hz || hz > 100000) {
        snprintf(why, cap, "timer_create: a rate of %u Hz", hz);
        return NULL;
    }
    sonde_cputimer *t = sonde__calloc(1, sizeof *t);
    if (!t) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    t->hz = hz;
    t->sig = SIGPROF;
    if (counters) { /* where the kernel gives this thread a counter, every thread gets one */
        int fd = counter_of(t, (pid_t)syscall(SYS_gettid));
        t->counters = fd >= 0;
        if (fd >= 0)
            close(fd);
    }
    for (uint64_t i = 0; i < SLOTS; i++)
        atomic_init(&t->slots[i].seq, i);
    sonde_cputimer *none = NULL;
    if (!atomic_compare_exchange_strong(&g_owner, &none, t)) {
        snprintf(why, cap, "timer_create: another profiler of this process samples already");
        sonde__free(t);
        return NULL;
    }
    void *warm[4];
    backtrace(warm, 4); /* loads libgcc's unwinder now, not in the handler */
    int got = install(t, SIGPROF);
    if (got == 1) {
        snprintf(why, cap, "timer_create: SIGPROF already has a handler in this program");
        atomic_store(&g_owner, NULL);
        sonde__free(t);
        return NULL;
    }
    if (got != 0 || sonde__cputimer_follow_new(t) != 0 || !t->n_threads) {
        snprintf(why, cap, "timer_create: %s", strerror(errno ? errno : ENOENT));
        sonde__cputimer_stop(t);
        return NULL;
    }
    return t;
#endif
}

size_t sonde__cputimer_drain(sonde_cputimer *t, sonde_cputimer_fn fn, void *ctx)
{
    size_t n = 0;
    for (;;) {
        tslot *s = &t->slots[t->tail & (SLOTS - 1)];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != t->tail + 1)
            return n;
        fn(ctx, s->tid, s->t, s->ip, s->n, s->weight, s->py, s->n_py, &s->cut);
        atomic_store_explicit(&s->seq, t->tail + SLOTS, memory_order_release);
        t->tail++;
        n++;
    }
}

void sonde__cputimer_python(sonde_cputimer *t, const sonde_pyproc *py)
{
    atomic_store_explicit(&t->py, py, memory_order_release);
}

void sonde__cputimer_tstate(sonde_cputimer *t, uint32_t tid, uint64_t tstate)
{
    size_t h = ts_slot(t, tid, 1);
    if (h == TSTATES && tstate) {
        /* full: 4096 threads have come (most gone, in a program that makes threads all along).
         * Emptied, for the threads sampled from now on to be put back as they come. A handler
         * reading it meanwhile finds its thread missing, or another's state, which
         * sonde__py_raw refuses (its thread id is not the handler's): no frames, no harm. */
        for (size_t i = 0; i < TSTATES; i++) {
            atomic_store_explicit(&t->ts_tid[i], 0, memory_order_release);
            atomic_store_explicit(&t->ts_addr[i], 0, memory_order_release);
        }
        h = ts_slot(t, tid, 1);
    }
    if (h == TSTATES || (!tstate && !atomic_load(&t->ts_tid[h])))
        return; /* nothing to say of a thread not in it */
    atomic_store_explicit(&t->ts_addr[h], tstate, memory_order_release);
    atomic_store_explicit(&t->ts_tid[h], tid, memory_order_release);
}

int sonde__cputimer_counters(const sonde_cputimer *t) { return t->counters; }

size_t sonde__cputimer_followed(const sonde_cputimer *t) { return t->n_threads; }

uint64_t sonde__cputimer_lost(const sonde_cputimer *t)
{
    return atomic_load(&((sonde_cputimer *)t)->lost);
}

uint64_t sonde__cputimer_shallow(const sonde_cputimer *t)
{
    return atomic_load(&((sonde_cputimer *)t)->shallow);
}

/* 1 when t's signal's action is on_sigprof (a program may have set one of its own since). */
static int action_ours(const sonde_cputimer *t)
{
    struct sigaction cur;
    return sigaction(t->sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == on_sigprof;
}

/* Every timer deleted and counter closed: none signals after it returns. */
static void stop_all(sonde_cputimer *t)
{
    if (t->counters) { /* no handler refreshes a counter after this, nor a closed descriptor */
        atomic_store(&t->stopping, 1);
        for (size_t i = 0; i < t->n_threads; i++)
            ioctl(t->threads[i].fd, PERF_EVENT_IOC_DISABLE, 0);
        wait_handlers();
    }
    for (size_t i = 0; i < t->n_threads; i++)
        unfollow(t, i);
    t->n_threads = 0;
}

/* t's signal's action put back where it is still ours (a program's own is left as it is:
 * restoring the default under its running itimer would end it by SIGPROF). */
static void restore(sonde_cputimer *t)
{
    if (!action_ours(t))
        return;
    /* a signal already sent but not yet taken would meet the default action, which ends the
     * process: ignoring it first discards it (queued real-time ones too) */
    sonde__sig_plain(t->sig, SIG_IGN);
    sigaction(t->sig, &t->old, NULL);
}

/* No handler runs past this: the timers deleted, the signal's action restored (restore), the
 * handlers already running waited for. */
static void disarm(sonde_cputimer *t)
{
    stop_all(t);
    if (!t->displaced)
        restore(t);
    atomic_store(&g_owner, NULL);
    wait_handlers();
}

/* The highest real-time signal whose action is the default (the program uses none of it), or
 * -1. */
static int free_rt_signal(void)
{
    for (int s = SIGRTMAX; s >= SIGRTMIN; s--) {
        struct sigaction cur;
        if (sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == SIG_DFL)
            return s;
    }
    return -1;
}

int sonde__cputimer_displaced(sonde_cputimer *t)
{
    if (t->displaced)
        return 2;
    if (!t->n_threads || action_ours(t))
        return t->sig == SIGPROF ? 0 : 1;
    stop_all(t);
    /* SIGPROF taken: the timers and counters move to a free real-time signal, every thread
     * armed again on it (its pending SIGPROFs go to the program's handler) */
    int s = t->sig == SIGPROF ? free_rt_signal() : -1;
    if (s > 0 && install(t, s) == 0) {
        atomic_store(&t->stopping, 0);
        sonde__cputimer_follow_new(t);
        if (t->n_threads)
            return 1;
        restore(t);
    }
    t->displaced = 1;
    return 2;
}

int sonde__cputimer_signal(const sonde_cputimer *t) { return t->sig; }

void sonde__cputimer_disarm(sonde_cputimer *t)
{
    if (t && t->n_threads)
        disarm(t);
}

void sonde__cputimer_stop(sonde_cputimer *t)
{
    if (!t)
        return;
    disarm(t);
    sonde__free(t->threads);
    sonde__free(t->st[0].r);
    sonde__free(t->st[1].r);
    sonde__free(t);
}

void sonde__cputimer_forget(sonde_cputimer *t)
{
    /* a forked child has none of the timers; its memory is left as it is, as the sampler's */
    if (!t)
        return;
    atomic_store(&g_owner, NULL);
    /* a handler running on another thread at the fork counted itself in: that thread is not in
     * the child, and its count would stop the child's own sampler from ever disarming */
    atomic_store(&g_inflight, 0);
    if (action_ours(t))
        sigaction(t->sig, &t->old, NULL);
}
