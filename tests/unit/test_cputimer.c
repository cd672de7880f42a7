/* test_cputimer.c - the timers on the threads' CPU clocks (stacks/cputimer.c), the sampler's
 * way where perf_event_open is refused: every thread's CPU time is sampled (threads begun after
 * the start too, once follow_new has run), each sample's periods add up to the CPU the threads
 * used, its first frame is the interrupted function and the next ones its callers, a second
 * sampler is refused, a program's own SIGPROF handler is left alone (set before the start, or
 * after it: the sampling moves to a real-time signal then, and stops when that is taken too),
 * and SIGPROF's action is restored at the end; a thread with a small stack is never overrun (the
 * handler unwinds only where the room it has measured is left, else keeps the interrupted
 * instruction alone). Also run under TSan (label threads): the handler and the ring. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"
#include "monitor/monitor.h"
#include "stacks/stacks.h"

#define THREADS 3

static _Thread_local volatile double g_sink;
static _Atomic int g_go;

/* Burns ms of this thread's CPU time; not inlined, so its frames are its own. */
__attribute__((noinline)) static void burn(double ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    double x = 0;
    do {
        for (int i = 0; i < 200000; i++)
            x += i * 0.5;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6 < ms);
    g_sink = x;
}

__attribute__((noinline)) static void caller(double ms)
{
    burn(ms);
    g_sink += 1;
}

static void *worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_go)) {
        struct timespec w = {0, 1000000};
        nanosleep(&w, NULL);
    }
    caller(300);
    return NULL;
}

typedef struct seen {
    uint64_t periods, in_burn, burn_then_caller;
    uint32_t tids[64];
    size_t n_tids;
} seen;

static uintptr_t g_burn_lo, g_burn_hi, g_caller_lo, g_caller_hi;

static void take(void *ctx, uint32_t tid, uint64_t t, const uint64_t *ip, uint32_t n,
                 uint32_t weight, const sonde_pyraw *py, uint32_t n_py,
                 const sonde_pycut *cut)
{
    seen *s = ctx;
    (void)t;
    (void)py, (void)cut;
    assert_int_equal(n_py, 0); /* no interpreter was handed to the timers */
    s->periods += weight;
    if (n && ip[0] >= g_burn_lo && ip[0] < g_burn_hi) {
        s->in_burn += weight;
        if (n > 1 && ip[1] - 1 >= g_caller_lo && ip[1] - 1 < g_caller_hi)
            s->burn_then_caller += weight;
    }
    for (size_t i = 0; i < s->n_tids; i++)
        if (s->tids[i] == tid)
            return;
    if (s->n_tids < 64)
        s->tids[s->n_tids++] = tid;
}

/* The functions' extents: from their address to the next function's, as laid out. */
static void extents(void)
{
    g_burn_lo = (uintptr_t)burn;
    g_caller_lo = (uintptr_t)caller;
    g_burn_hi = g_burn_lo + 4096;
    g_caller_hi = g_caller_lo + 4096;
    if (g_caller_lo > g_burn_lo && g_caller_lo < g_burn_hi)
        g_burn_hi = g_caller_lo;
    if (g_burn_lo > g_caller_lo && g_burn_lo < g_caller_hi)
        g_caller_hi = g_burn_lo;
}

/* Every thread's CPU time sampled, by timers (counters 0) or per-thread CPU-clock counters
 * (counters 1, where the kernel gives this thread one: as root, or perf_event_paranoid 2 or
 * lower, the counters are used and the test says so). */
static void every_thread(int counters)
{
    extents();
    char why[256] = "";
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    sonde_cputimer *t = sonde__cputimer_start(999, counters, why, sizeof why);
    assert_non_null(t);
    if (counters) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.exclude_kernel = a.exclude_hv = 1;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        if (fd >= 0)
            close(fd);
        assert_int_equal(sonde__cputimer_counters(t), fd >= 0); /* where allowed, they are */
        print_message("cputimer: %s\n", fd >= 0 ? "per-thread counters"
                                                 : "counters refused here: timers");
    } else {
        assert_int_equal(sonde__cputimer_counters(t), 0);
    }
    char why2[256] = "";
    assert_null(sonde__cputimer_start(999, 0, why2, sizeof why2)); /* one per process */
    assert_non_null(strstr(why2, "another profiler of this process samples already"));
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) /* begun after the start: found by follow_new */
        assert_int_equal(pthread_create(&th[i], NULL, worker, NULL), 0);
    assert_int_equal(sonde__cputimer_follow_new(t), 0);
    atomic_store(&g_go, 1);
    caller(300);
    seen s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < THREADS; i++) {
        sonde__cputimer_drain(t, take, &s); /* the ring holds 4096: drained as they go */
        pthread_join(th[i], NULL);
    }
    /* the threads that ended are followed no more: their timers or counters gone (TSan's own
     * thread is followed too: the count before is not THREADS + 1 there) */
    size_t followed = sonde__cputimer_followed(t);
    assert_true(followed >= THREADS + 1);
    /* a joined thread can still be listed in /proc/self/task for a moment (the kernel clears
     * its tid for pthread_join before it releases the task: a fresh-clone CI beside other
     * suites saw one): looked at again, as the sampler does every 100 ms, for up to 5 s */
    for (int tries = 0; tries < 500; tries++) {
        assert_int_equal(sonde__cputimer_follow_new(t), 0);
        if (sonde__cputimer_followed(t) <= followed - THREADS)
            break;
        struct timespec w = {0, 10 * 1000 * 1000};
        nanosleep(&w, NULL);
    }
    assert_int_equal(sonde__cputimer_followed(t), followed - THREADS);
    sonde__cputimer_disarm(t);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    sonde__cputimer_drain(t, take, &s);
    double cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
    double sampled_ms = (double)s.periods * 1000.0 / 999.0;
    print_message("cputimer: %.0f ms of CPU, %llu periods (%.0f ms), %llu in burn, %llu lost, "
                  "%zu threads\n", cpu_ms, (unsigned long long)s.periods, sampled_ms,
                  (unsigned long long)s.in_burn,
                  (unsigned long long)sonde__cputimer_lost(t), s.n_tids);
    assert_int_equal(s.n_tids, THREADS + 1);
    /* the periods measure the CPU used (1.2 s here), within the kernel tick's granularity;
     * TSan takes a signal only when the thread enters its runtime (the burning loop calls
     * nothing): the timers' overruns count the periods meanwhile, the counters' signals came
     * together into one */
    assert_true(sampled_ms < 1.1 * cpu_ms);
    if (!counters || !TU_UNDER_TSAN)
        assert_true(sampled_ms > 0.8 * cpu_ms);
    assert_true(s.in_burn > 0.8 * (double)s.periods);
    /* TSan runs a handler later, from its own runtime, with no signal frame to unwind through:
     * the interrupted pc alone there */
    if (!TU_UNDER_TSAN)
        assert_true(s.burn_then_caller > 0.8 * (double)s.in_burn);
    sonde__cputimer_stop(t);
    struct sigaction now;
    sigaction(SIGPROF, NULL, &now);
    assert_true(now.sa_handler == SIG_DFL);
}

static void cpu_samples_of_every_thread(void **state)
{
    (void)state;
    every_thread(0);
}

static void cpu_samples_by_counters(void **state)
{
    (void)state;
    every_thread(1);
}

static _Atomic long g_prof_calls;

static void on_prof(int sig)
{
    (void)sig;
    atomic_fetch_add(&g_prof_calls, 1);
}

static void a_programs_handler_is_left_alone(void **state)
{
    (void)state;
    struct sigaction mine, now;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_prof;
    sigemptyset(&mine.sa_mask);
    assert_int_equal(sigaction(SIGPROF, &mine, NULL), 0);
    char why[256] = "";
    assert_null(sonde__cputimer_start(999, 0, why, sizeof why));
    assert_non_null(strstr(why, "SIGPROF already has a handler in this program"));
    sigaction(SIGPROF, NULL, &now);
    assert_true(now.sa_handler == on_prof);
    signal(SIGPROF, SIG_DFL);
}

static long drain_count(sonde_cputimer *t)
{
    seen s;
    memset(&s, 0, sizeof s);
    return (long)sonde__cputimer_drain(t, take, &s);
}

/* The periods of 1/hz the samples taken since the last drain stand for (a timer's signal comes
 * at the kernel's tick and stands for those since the last: CONFIG_HZ 250 gives about four a
 * signal at 999 Hz). */
static uint64_t drain_periods(sonde_cputimer *t)
{
    seen s;
    memset(&s, 0, sizeof s);
    sonde__cputimer_drain(t, take, &s);
    return s.periods;
}

/* A program that gives SIGPROF a handler of its own after the sampling began (a profiler on
 * setitimer, Python's signal.signal): once the sampler's thread has looked
 * (sonde__cputimer_displaced), every timer or counter sends a free real-time signal instead and
 * the samples go on, the program's handler gets no signal of ours; when the program takes that
 * one too, everything stops for good (no timer left, none armed again, no sample); and stopping
 * leaves both of its handlers in place (restoring the default under its own timer would end the
 * program by SIGPROF). */
static void a_handler_set_later_moves_the_sampling(int counters)
{
    char why[256] = "";
    sonde_cputimer *t = sonde__cputimer_start(999, counters, why, sizeof why);
    assert_non_null(t);
    if (counters && !sonde__cputimer_counters(t))
        fprintf(stderr, "test_cputimer: no per-thread counters here: timers instead\n");
    /* sampled on SIGPROF first (a timer's expirations come at the kernel's tick, lumped under
     * load: 4 periods for 30 ms of CPU once beside two busy loops, so as long as it takes) */
    uint64_t first = 0;
    for (int i = 0; i < 20 && !first; i++) {
        caller(30);
        first = drain_periods(t);
    }
    assert_true(first > 0);
    assert_int_equal(sonde__cputimer_displaced(t), 0); /* still ours */
    assert_int_equal(sonde__cputimer_signal(t), SIGPROF);
    struct sigaction mine, now;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_prof;
    sigemptyset(&mine.sa_mask);
    assert_int_equal(sigaction(SIGPROF, &mine, NULL), 0);
    assert_int_equal(sonde__cputimer_displaced(t), 1);
    int rt = sonde__cputimer_signal(t);
    assert_true(rt >= SIGRTMIN && rt <= SIGRTMAX);
    assert_true(sonde__cputimer_followed(t) > 0);
    drain_count(t); /* those taken before */
    long before = atomic_load(&g_prof_calls);
    caller(200); /* 200 periods of 1/999 s */
    assert_int_equal(sonde__cputimer_displaced(t), 1);
    /* the samples go on: the 200 ms of CPU as 200 periods, 80 at least however loaded (the
     * timers, at the kernel's tick, gave 66 of 100 once beside two busy loops) */
    uint64_t periods = drain_periods(t);
    fprintf(stderr, "cputimer: after the move to signal %d, %llu periods for 200 ms of CPU\n", rt,
            (unsigned long long)periods);
    assert_true(periods >= 80);
    assert_true(atomic_load(&g_prof_calls) - before <= 1); /* at most one sent before the move */
    /* the program takes the real-time signal too: stopped for good */
    assert_int_equal(sigaction(rt, &mine, NULL), 0);
    assert_int_equal(sonde__cputimer_displaced(t), 2);
    assert_int_equal(sonde__cputimer_followed(t), 0);
    drain_count(t);
    before = atomic_load(&g_prof_calls);
    caller(100);
    assert_int_equal(sonde__cputimer_follow_new(t), 0);
    assert_int_equal(sonde__cputimer_followed(t), 0);
    caller(30);
    assert_int_equal(drain_count(t), 0);
    assert_true(atomic_load(&g_prof_calls) - before <= 1);
    assert_int_equal(sonde__cputimer_displaced(t), 2);
    sonde__cputimer_stop(t);
    sigaction(SIGPROF, NULL, &now);
    assert_true(now.sa_handler == on_prof);
    sigaction(rt, NULL, &now);
    assert_true(now.sa_handler == on_prof);
    signal(SIGPROF, SIG_DFL);
    signal(rt, SIG_DFL);
    atomic_store(&g_prof_calls, 0);
}

static void a_handler_set_later_moves_the_timers(void **state)
{
    (void)state;
    a_handler_set_later_moves_the_sampling(0);
}

static void a_handler_set_later_moves_the_counters(void **state)
{
    (void)state;
    a_handler_set_later_moves_the_sampling(1);
}

/* A thread on a stack of STACK_SIZE bytes of its own, above a guard page, filled with a pattern:
 * it goes down until room bytes are left below it, then burns CPU there. */
#define STACK_SIZE (128 * 1024)
#define FILL 0xA5
typedef struct deep {
    uint8_t *lo;            /* the stack's lowest usable byte */
    size_t room;
    _Atomic int ready;
    _Atomic uintptr_t burn_sp; /* the frame burning */
    _Atomic uint32_t tid;
    _Atomic uint64_t t0, t1;   /* when it burned there (CLOCK_MONOTONIC, ns) */
} deep;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static uintptr_t sp_now(void)
{
    return (uintptr_t)__builtin_frame_address(0);
}

__attribute__((noinline)) static void descend(deep *d)
{
    volatile char pad[512];
    pad[0] = pad[511] = 1;
    if (sp_now() - (uintptr_t)d->lo > d->room + sizeof pad) {
        descend(d);
    } else {
        atomic_store(&d->burn_sp, sp_now());
        atomic_store(&d->ready, 1);
        while (!atomic_load(&g_go)) {
        }
        atomic_store(&d->t0, now_ns());
        caller(300);
        atomic_store(&d->t1, now_ns());
    }
    g_sink += pad[0] + pad[511]; /* no tail call */
}

static void *deep_worker(void *arg)
{
    deep *d = arg;
    atomic_store(&d->tid, (uint32_t)syscall(SYS_gettid));
    descend(d);
    return NULL;
}

typedef struct deep_seen {
    uint32_t tid;
    uint64_t t0, t1;       /* when it burned deep in its stack */
    uint64_t whole, alone; /* the thread's samples then (not those of its way back up and its
                              end, with room to spare) with their callers, with the instruction
                              alone */
} deep_seen;

static void take_deep(void *ctx, uint32_t tid, uint64_t t, const uint64_t *ip, uint32_t n,
                      uint32_t weight, const sonde_pyraw *py, uint32_t n_py,
                 const sonde_pycut *cut)
{
    deep_seen *s = ctx;
    (void)ip, (void)weight, (void)py, (void)n_py, (void)cut;
    if (tid == s->tid && n && t >= s->t0 && t <= s->t1)
        *(n > 1 ? &s->whole : &s->alone) += 1;
}

/* The thread left room bytes of its STACK_SIZE: its samples, and the bytes below its burning
 * frame that the handler wrote (the pattern overwritten). */
static size_t sample_deep(size_t room, deep_seen *out, uint64_t *shallow)
{
    uint8_t *map = mmap(NULL, STACK_SIZE + 4096, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map, 4096, PROT_NONE), 0); /* the guard: its own mapping */
    deep d = {.lo = map + 4096, .room = room};
    memset(d.lo, FILL, STACK_SIZE);
    char why[256] = "";
    sonde_cputimer *t = sonde__cputimer_start(999, 1, why, sizeof why);
    assert_non_null(t);
    pthread_attr_t at;
    pthread_attr_init(&at);
    assert_int_equal(pthread_attr_setstack(&at, d.lo, STACK_SIZE), 0);
    pthread_t th;
    atomic_store(&g_go, 0);
    assert_int_equal(pthread_create(&th, &at, deep_worker, &d), 0);
    pthread_attr_destroy(&at);
    while (!atomic_load(&d.ready)) {
        struct timespec w = {0, 1000000};
        nanosleep(&w, NULL);
    }
    assert_int_equal(sonde__cputimer_follow_new(t), 0); /* its stack read, its timer armed */
    atomic_store(&g_go, 1);
    pthread_join(th, NULL);
    deep_seen s = {atomic_load(&d.tid), atomic_load(&d.t0), atomic_load(&d.t1), 0, 0};
    sonde__cputimer_disarm(t);
    sonde__cputimer_drain(t, take_deep, &s);
    *shallow = sonde__cputimer_shallow(t);
    sonde__cputimer_stop(t);
    const uint8_t *low = d.lo;
    while (low < d.lo + STACK_SIZE && *low == FILL)
        low++;
    size_t used = (size_t)(atomic_load(&d.burn_sp) - (uintptr_t)low);
    munmap(map, STACK_SIZE + 4096);
    *out = s;
    return used;
}

/* A thread with plenty of room: its samples unwound, within SONDE_CPUTIMER_STACK_NEED of
 * stack below the signal's frame (the handler, the unwinder). Deep in a
 * small stack (6 KiB left, the signal's frame taking 3.4 KiB with AVX-512 state): the
 * instruction alone, and the stack never overrun (the unwinder's frames would reach the guard
 * page: the test would end by SIGSEGV; 10 KiB in the ASan build). */
static void small_stacks_are_never_overrun(void **state)
{
    (void)state;
    if (TU_UNDER_TSAN) { /* TSan runs handlers from its own runtime, on the thread's stack */
        print_message("cputimer: small stacks not checked under TSan\n");
        return;
    }
    deep_seen s;
    uint64_t shallow;
    size_t used = sample_deep(64 * 1024, &s, &shallow);
    unsigned long frame = getauxval(AT_MINSIGSTKSZ); /* the kernel's signal frame here */
    print_message("cputimer: 64 KiB left: %llu samples unwound, %llu alone; the handler used "
                  "%zu bytes below the frame, the signal's frame %lu of them\n",
                  (unsigned long long)s.whole, (unsigned long long)s.alone, used, frame);
    assert_true(s.whole > 0);
    assert_true(s.alone <= s.whole / 10);
    assert_true(used < (frame ? frame : 4096) + SONDE_CPUTIMER_STACK_NEED);
    /* ASan's clock_gettime, which the handler calls, takes 4 KiB more */
    size_t room = TU_UNDER_ASAN ? 10 * 1024 : 6 * 1024;
    used = sample_deep(room, &s, &shallow);
    print_message("cputimer: %zu KiB left: %llu samples unwound, %llu alone (%llu shallow); the "
                  "handler used %zu bytes below the frame\n", room / 1024,
                  (unsigned long long)s.whole, (unsigned long long)s.alone,
                  (unsigned long long)shallow, used);
    assert_true(s.alone > 0);
    assert_int_equal(s.whole, 0);
    assert_true(shallow >= s.alone);
    assert_true(used < room);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_samples_of_every_thread),
        cmocka_unit_test(cpu_samples_by_counters),
        cmocka_unit_test(a_programs_handler_is_left_alone),
        cmocka_unit_test(a_handler_set_later_moves_the_timers),
        cmocka_unit_test(a_handler_set_later_moves_the_counters),
        cmocka_unit_test(small_stacks_are_never_overrun),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
