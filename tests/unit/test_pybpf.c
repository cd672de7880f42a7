/* test_pybpf.c - the Python frames read in the kernel (stacks/pybpf.c): the BPF program,
 * attached to a cpu-clock event of this thread, walks a thread state and frames planted in this
 * process's memory with each version's offsets (pyframes.c's), and its records give, for each
 * sample, every frame's code object, instruction, owner and entry flag and its code's file and
 * qualified name; pyframes.c turns them into the frames the sampler names (the C stack's entry
 * frames left out, the frame inward of each marked as an activation's first). A thread state
 * that is not the sampled thread's gives a stale record, a chain into unmapped memory ends the
 * walk (no fault), a thread the program does not know gives no record, a lost count of zero.
 * Needs CAP_BPF and CAP_PERFMON (root: CI is); elsewhere each test checks that the kernel
 * refused the maps (not the verifier the program), says why and is skipped. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "monitor/monitor.h"
#include "stacks/stacks.h"

#define FRAMES 5
#define AREA (1 << 16)

static uint8_t *g_mem; /* the planted interpreter's memory */

static void put64(uint64_t at, uint64_t v)
{
    memcpy(g_mem + at, &v, 8);
}

static uint64_t addr(uint64_t at)
{
    return (uint64_t)(uintptr_t)g_mem + at;
}

/* A thread state for thread tid with FRAMES frames (the third owned by the C stack where the
 * version has such, else the third marked is_entry), frame i's code object at 0x8000 + i *
 * 0x200 with file 0xF00 + i and qualified name 0xA00 + i, its instruction code + 0x100 + 2 * i;
 * the outermost frame's previous is prev_last. Returns the thread state's address. */
static uint64_t plant(const sonde_pyoffsets *o, int tid, uint64_t prev_last)
{
    memset(g_mem, 0, AREA);
    put64(o->ts_tid, (uint64_t)tid);
    if (o->ts_status != UINT32_MAX)
        put64(o->ts_status, 0x1b); /* initialized, bound, bound_gilstate, active */
    uint64_t first = addr(0x2000);
    if (o->cf_frame != UINT32_MAX) {
        put64(o->ts_frame, addr(0x1000));
        put64(0x1000 + o->cf_frame, first);
    } else {
        put64(o->ts_frame, first);
    }
    for (int i = 0; i < FRAMES; i++) {
        uint64_t f = 0x2000 + (uint64_t)i * 0x100, code = 0x8000 + (uint64_t)i * 0x200;
        put64(f + o->fr_code, addr(code));
        put64(f + o->fr_instr, addr(code) + 0x100 + 2 * (uint64_t)i);
        put64(f + o->fr_previous, i + 1 < FRAMES ? addr(f + 0x100) : prev_last);
        if (i == 2 && o->minor >= 12)
            g_mem[f + o->fr_owner] = 3; /* FRAME_OWNED_BY_CSTACK */
        if (i == 2 && o->fr_is_entry >= 0)
            g_mem[f + (uint32_t)o->fr_is_entry] = 1;
        put64(code + o->co_filename, 0xF00 + (uint64_t)i);
        put64(code + o->co_filename + 16, 0xA00 + (uint64_t)i);
    }
    return addr(0);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static volatile double g_sink;

/* This thread sampled 10,000 times a second of its CPU for 30 ms through b's program. */
static void sample_self(sonde_pybpf *b)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 100000;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    a.exclude_kernel = a.exclude_hv = 1;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(sonde__pybpf_attach(b, fd), 0);
    assert_int_equal(ioctl(fd, PERF_EVENT_IOC_ENABLE, 0), 0);
    struct timespec s, e;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &s);
    double x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += i * 0.5;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &e);
    } while ((e.tv_sec - s.tv_sec) * 1000000000l + (e.tv_nsec - s.tv_nsec) < 30000000l);
    g_sink = x;
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    close(fd);
}

/* The record of tid's last sample, taken at that sample's time as the sampler takes it (the
 * kernel may take the time just after the record is written, or just before: 2 us later here).
 * A sample 1 ms after it (the next one at 999 Hz) is not given it: once it was, and every
 * sample got the previous one's frames (issue 61 #17). */
static int take_last(sonde_pybpf *b, int tid, const sonde_pykframe **f)
{
    uint64_t t = sonde__pybpf_newest(b, (uint32_t)tid);
    sonde_pycut cut;
    if (!t)
        return sonde__pybpf_take(b, (uint32_t)tid, now_ns(), f, &cut);
    assert_int_equal(sonde__pybpf_take(b, (uint32_t)tid, t + 1000000, f, &cut), -1);
    int n = sonde__pybpf_take(b, (uint32_t)tid, t + 2000, f, &cut);
    assert_int_equal(cut.between, 0);
    assert_int_equal(cut.beyond, 0);
    return n;
}

/* The program, or NULL when this process may not load it (then said why, and skipped): not
 * root, or a kernel without BPF maps for anyone (no bpf(), a lockdown); the verifier refusing
 * the program is a failure. */
static sonde_pybpf *open_or_skip(void)
{
    char why[512] = "";
    sonde_pybpf *b = sonde__pybpf_open(why, sizeof why);
    if (!b) {
        print_message("pybpf: %s\n", why);
        assert_non_null(strstr(why, "bpf(BPF_MAP_CREATE)"));
        skip();
    }
    return b;
}

static void test_walk(void **state)
{
    (void)state;
    sonde_pyoffsets o[8];
    int n = sonde__py_offsets(o, 8);
    assert_int_equal(n, 3);
    int tid = (int)syscall(SYS_gettid);
    for (int k = 0; k < n; k++) {
        sonde_pybpf *b = open_or_skip();
        uint64_t ts = plant(&o[k], tid, 0);
        assert_int_equal(sonde__pybpf_thread(b, (uint32_t)tid, ts, k), 0);
        sample_self(b);
        assert_int_equal(sonde__pybpf_read(b, 0), 0);
        const sonde_pykframe *f = NULL;
        int got = take_last(b, tid, &f);
        print_message("3.%u: the last record has %d frames\n", o[k].minor, got);
        assert_int_equal(got, FRAMES);
        for (int i = 0; i < FRAMES; i++) {
            uint64_t code = addr(0x8000 + (uint64_t)i * 0x200);
            assert_true(f[i].code == code);
            assert_true(f[i].instr == code + 0x100 + 2 * (uint64_t)i);
            assert_true(f[i].file == 0xF00 + (uint64_t)i);
            assert_true(f[i].qual == 0xA00 + (uint64_t)i);
            assert_int_equal(f[i].owner, i == 2 && o[k].minor >= 12 ? 3 : 0);
            assert_int_equal(f[i].is_entry, i == 2 && o[k].fr_is_entry >= 0 ? 1 : 0);
        }
        assert_true(sonde__pybpf_lost(b) == 0);
        /* as the sampler gets them: 3.12 and 3.13 leave the C stack's frame out and mark the
         * frame inward of it as its activation's first; 3.11 keeps its is_entry frame */
        sonde_pytab *t = sonde__pytab_new();
        sonde_pyproc *py = sonde__py_attach_at(t, getpid(), o[k].minor, addr(0x4000),
                                               addr(0x4100));
        assert_non_null(py);
        assert_int_equal(sonde__py_layout(py), k);
        sonde_pykframe kf[FRAMES]; /* f lives until the next read */
        memcpy(kf, f, sizeof kf);
        sonde_pyraw raw[FRAMES];
        int m = sonde__py_from_kernel(py, kf, FRAMES, raw, FRAMES);
        assert_int_equal(m, o[k].minor >= 12 ? FRAMES - 1 : FRAMES);
        for (int i = 0; i < m; i++) {
            int from = o[k].minor >= 12 && i >= 2 ? i + 1 : i;
            int entry = o[k].minor >= 12 ? i == 1 : i == 2;
            assert_true((raw[i].code & ((UINT64_C(1) << 56) - 1)) == kf[from].code);
            assert_int_equal((int)(raw[i].instr & SONDE_PYRAW_ENTRY), entry);
            assert_true(raw[i].code >> 56 || raw[i].instr >> 56); /* a check is carried */
        }
        /* a frame whose code could not be read ends them */
        kf[1].file = kf[1].qual = 0;
        assert_int_equal(sonde__py_from_kernel(py, kf, FRAMES, raw, FRAMES), 1);
        assert_int_equal(sonde__pybpf_read(b, 0), 0);
        assert_int_equal(take_last(b, tid, &f), -1); /* taken */
        sonde__py_detach(py);
        sonde__pytab_free(t);
        sonde__pybpf_close(b);
    }
}

static void test_stale_torn_unknown(void **state)
{
    (void)state;
    sonde_pyoffsets o[8];
    sonde__py_offsets(o, 8);
    int tid = (int)syscall(SYS_gettid);
    sonde_pybpf *b = open_or_skip();
    /* the state planted is another thread's: stale */
    uint64_t ts = plant(&o[1], tid + 1, 0);
    assert_int_equal(sonde__pybpf_thread(b, (uint32_t)tid, ts, 1), 0);
    sample_self(b);
    assert_int_equal(sonde__pybpf_read(b, 0), 0);
    const sonde_pykframe *f;
    assert_int_equal(take_last(b, tid, &f), -2);
    /* the thread's own state, but the thread is in a sub-interpreter now (bound_gilstate
     * clear, 3.12's layout): stale too, so that the sampler gives the program the one it is in */
    ts = plant(&o[1], tid, 0);
    put64(o[1].ts_status, 0x3);
    assert_int_equal(sonde__pybpf_thread(b, (uint32_t)tid, ts, 1), 0);
    sample_self(b);
    assert_int_equal(sonde__pybpf_read(b, 0), 0);
    assert_int_equal(take_last(b, tid, &f), -2);
    /* the outermost frame's previous points at a page never mapped: the walk ends there */
    void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(hole != MAP_FAILED);
    ts = plant(&o[1], tid, (uint64_t)(uintptr_t)hole);
    sample_self(b);
    assert_int_equal(sonde__pybpf_read(b, 0), 0);
    assert_int_equal(take_last(b, tid, &f), FRAMES);
    munmap(hole, 4096);
    /* a thread the program was not given: no record */
    assert_int_equal(sonde__pybpf_thread(b, (uint32_t)tid, 0, 0), 0);
    sample_self(b);
    assert_int_equal(sonde__pybpf_read(b, 0), 0);
    assert_int_equal(take_last(b, tid, &f), -1);
    sonde__pybpf_close(b);
}

int main(void)
{
    g_mem = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_mem == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_stale_torn_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
