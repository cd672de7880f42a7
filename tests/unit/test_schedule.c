/* test_schedule.c - the step schedule: a table of which steps are recorded for many
 * combinations of skip_first/wait/warmup/active/repeat, PyTorch's algorithm as a second
 * reference over thousands more, and runs whose reports and per-cycle traces hold exactly the
 * active steps. Usage: test_schedule BUILD_DIR (for the fake libcudart). */
#define _GNU_SOURCE
#include "testutil.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "export/export.h"
#include "record/schedule.h"

static char g_build[1024];

/* torch.profiler.schedule, transcribed: the second reference. */
static int torch_action(unsigned skip_first, unsigned wait, unsigned warmup, unsigned active,
                        unsigned repeat, unsigned step)
{
    if (step < skip_first)
        return SCHED_NONE;
    step -= skip_first;
    unsigned num = wait + warmup + active;
    if (repeat > 0 && step / num >= repeat)
        return SCHED_NONE;
    unsigned mod = step % num;
    if (mod < wait)
        return SCHED_NONE;
    if (mod < wait + warmup)
        return SCHED_WARMUP;
    return SCHED_ACTIVE;
}

static void table(void **state)
{
    (void)state;
    /* N: not recorded, W: warmup (recorded, discarded), A: active (kept) */
    static const struct {
        unsigned skip, wait, warmup, active, repeat;
        const char *steps; /* from step 0 */
    } t[] = {
        {0, 0, 0, 1, 0, "AAAAAAAA"},
        {0, 1, 1, 2, 0, "NWAANWAANWAA"},
        {0, 1, 1, 2, 2, "NWAANWAANNNN"},
        {2, 1, 1, 2, 1, "NNNWAANNNN"},
        {0, 0, 1, 3, 1, "WAAANNNN"},
        {1, 0, 0, 1, 3, "NAAANNN"},
        {0, 2, 0, 1, 0, "NNANNANNA"},
        {3, 0, 2, 2, 2, "NNNWWAAWWAANNN"},
        {0, 5, 0, 1, 1, "NNNNNANNNN"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sonde_config c = sonde_config_default();
        c.skip_first = t[i].skip;
        c.wait = t[i].wait;
        c.warmup = t[i].warmup;
        c.active = t[i].active;
        c.repeat = t[i].repeat;
        assert_int_equal(sonde__schedule_check(&c), 0);
        for (size_t s = 0; t[i].steps[s]; s++) {
            int want = t[i].steps[s] == 'N' ? SCHED_NONE : t[i].steps[s] == 'W' ? SCHED_WARMUP
                                                                                : SCHED_ACTIVE;
            sched_action a = sonde__schedule_action(&c, s);
            if (a.action != want)
                fail_msg("row %zu step %zu: got %d, want %c", i, s, a.action, t[i].steps[s]);
        }
    }
    /* windows: start_step..end_step, end excluded */
    sonde_config c = sonde_config_default();
    c.start_step = 3;
    c.end_step = 5;
    for (unsigned s = 0; s < 8; s++)
        assert_int_equal(sonde__schedule_action(&c, s).action,
                         s >= 3 && s < 5 ? SCHED_ACTIVE : SCHED_NONE);
    assert_int_equal(sonde__schedule_action(&c, 4).cycle, 1);
    /* cycle numbers count from 1 */
    c = sonde_config_default();
    c.wait = 1;
    c.active = 1;
    assert_int_equal(sonde__schedule_action(&c, 1).cycle, 1);
    assert_int_equal(sonde__schedule_action(&c, 3).cycle, 2);
    /* no schedule: every step is active */
    c = sonde_config_default();
    assert_int_equal(sonde__schedule_action(&c, 12345).action, SCHED_ACTIVE);
}

static void against_torch(void **state)
{
    (void)state;
    for (unsigned skip = 0; skip < 4; skip++)
        for (unsigned wait = 0; wait < 4; wait++)
            for (unsigned warm = 0; warm < 4; warm++)
                for (unsigned act = 1; act < 4; act++)
                    for (unsigned rep = 0; rep < 4; rep++) {
                        sonde_config c = sonde_config_default();
                        c.skip_first = skip;
                        c.wait = wait;
                        c.warmup = warm;
                        c.active = act;
                        c.repeat = rep;
                        for (unsigned s = 0; s < 60; s++)
                            assert_int_equal(sonde__schedule_action(&c, s).action,
                                             torch_action(skip, wait, warm, act, rep, s));
                    }
}

static void inconsistent(void **state)
{
    (void)state;
    sonde_config c = sonde_config_default();
    c.warmup = 2;
    assert_int_equal(sonde__schedule_check(&c), SONDE_EINVAL);
    assert_string_equal(sonde_last_error(), "step schedule: active must be at least 1 when "
                                            "skip_first, wait, warmup or repeat is set");
    c = sonde_config_default();
    c.start_step = 5;
    c.end_step = 5;
    assert_int_equal(sonde__schedule_check(&c), SONDE_EINVAL);
    c.end_step = 9;
    c.active = 1;
    assert_int_equal(sonde__schedule_check(&c), SONDE_EINVAL);
    /* a profiler with an inconsistent schedule records every step and says why */
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config pc = tu_config(dir, "bad");
    pc.warmup = 1;
    sonde_profiler *p = sonde_create(&pc);
    assert_int_equal(sonde_status(p), SONDE_EINVAL);
    for (int i = 0; i < 3; i++) {
        SONDE_SCOPE(p, "s");
        sonde_step(p);
    }
    sm_model m;
    tu_finish(p, &m);
    assert_int_equal((int)tu_stat(&m, "s")->count, 3);
    assert_int_equal(m.scheduled, 0);
    sm_free(&m);
    tu_rmrf(dir);
}

typedef struct ready {
    int calls;
    int cycles[8];
    char paths[8][512];
} ready;

static void on_ready(sonde_profiler *p, const char *path, int cycle, void *user)
{
    (void)p;
    ready *r = user;
    if (r->calls < 8) {
        r->cycles[r->calls] = cycle;
        snprintf(r->paths[r->calls], sizeof r->paths[0], "%s", path);
    }
    r->calls++;
}

/* The steps (metadata "step") of the sections named "step" in a gzip'd trace, as a string. */
static void trace_steps(const char *path, char *out, size_t cap)
{
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);
    static char buf[1 << 20];
    int n = gzread(gz, buf, sizeof buf - 1);
    gzclose(gz);
    assert_true(n > 0);
    buf[n] = 0;
    out[0] = 0;
    for (char *q = buf; (q = strstr(q, "\"name\":\"step\"")); q++) {
        char *s = strstr(q, "\"step\":\"");
        char *eol = strchr(q, '\n');
        if (s && (!eol || s < eol)) {
            size_t k = strlen(out);
            snprintf(out + k, cap - k, "%s%d", k ? "," : "", atoi(s + 8));
        }
    }
}

static void run_steps(sonde_profiler *p, int n)
{
    for (int i = 0; i < n; i++) {
        {
            SONDE_SCOPE(p, "step");
            char v[16];
            snprintf(v, sizeof v, "%d", i);
            sonde_metadata(p, "step", v);
            sonde_begin(p, "runtime");
            sonde_end(p);
        }
        sonde_step(p);
    }
}

static void cycles_end_to_end(void **state)
{
    (void)state;
    char dir[256], lib[1200];
    tu_tmpdir(dir, sizeof dir);
    snprintf(lib, sizeof lib, "%s/libfake_cudart.so", g_build);
    setenv("SONDE_CUDART_LIBRARY", lib, 1);
    sonde_config c = tu_config(dir, "sched");
    c.wait = 1;
    c.warmup = 1;
    c.active = 2;
    c.repeat = 2;
    c.cuda_profiler_range = 1;
    ready r;
    memset(&r, 0, sizeof r);
    c.on_trace_ready = on_ready;
    c.on_trace_ready_user = &r;
    sonde_profiler *p = sonde_create(&c);
    run_steps(p, 12); /* N W A A N W A A N N N N */
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    /* the report keeps the active steps' sections only, and says which steps */
    assert_int_equal((int)tu_stat(&m, "step")->count, 4);
    assert_int_equal((int)tu_stat(&m, "runtime")->count, 4);
    char kept[64] = "";
    for (size_t i = 0; i < m.n_spans; i++)
        if (sm_span_extra(&m, &m.spans[i])->meta >= 0) {
            size_t k = strlen(kept);
            snprintf(kept + k, sizeof kept - k, "%s%s", k ? "," : "",
                     sm_str(&m, m.meta[sm_span_extra(&m, &m.spans[i])->meta].value));
        }
    assert_string_equal(kept, "2,3,6,7");
    assert_int_equal(m.scheduled, 1);
    assert_int_equal((int)m.n_windows, 2);
    assert_int_equal((int)m.windows[0].first_step, 2);
    assert_int_equal((int)m.windows[0].last_step, 3);
    assert_int_equal((int)m.windows[1].first_step, 6);
    assert_int_equal((int)m.windows[1].last_step, 7);
    assert_int_equal((int)m.n_steps, 12);
    sm_steps_summary ss;
    sm_steps(&m, &ss);
    assert_int_equal((int)ss.count, 4);
    /* one trace and one callback per window, holding that window's steps */
    assert_int_equal(r.calls, 2);
    assert_int_equal(r.cycles[0], 1);
    assert_int_equal(r.cycles[1], 2);
    char want[600], got[256];
    snprintf(want, sizeof want, "%s/sched-cycle1.trace.json.gz", dir);
    assert_string_equal(r.paths[0], want);
    trace_steps(r.paths[0], got, sizeof got);
    assert_string_equal(got, "2,3");
    trace_steps(r.paths[1], got, sizeof got);
    assert_string_equal(got, "6,7");
    /* cudaProfilerStart/Stop around each window */
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    int (*starts)(void) = (int (*)(void))(uintptr_t)dlsym(h, "fake_cudart_starts");
    int (*stops)(void) = (int (*)(void))(uintptr_t)dlsym(h, "fake_cudart_stops");
    assert_int_equal(starts(), 2);
    assert_int_equal(stops(), 2);
    dlclose(h);
    sm_free(&m);
    tu_rmrf(dir);
}

/* on_trace_ready that steps the profiler again and forks: neither deadlocks (issue 36 #5; both
 * waited on step_lock, held while the callback ran). */
static int g_reentered, g_child_ok;
static void ready_reenter(sonde_profiler *p, const char *path, int cycle, void *user)
{
    (void)path;
    (void)cycle;
    (void)user;
    sonde_step(p); /* a step from inside the callback */
    g_reentered++;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        g_child_ok++;
}

static void callback_steps_and_forks(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "reenter");
    c.active = 1;
    c.repeat = 2;
    c.on_trace_ready = ready_reenter;
    sonde_profiler *p = sonde_create(&c);
    run_steps(p, 6);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal(g_reentered, 2);
    assert_int_equal(g_child_ok, 2);
    sm_free(&m);
    tu_rmrf(dir);
}

static void window_and_paused_sections(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "window");
    c.start_step = 0;
    c.end_step = 1;
    sonde_profiler *p = sonde_create(&c);
    assert_int_equal(sonde_begin(p, "outer"), 0); /* step 0: recorded */
    sonde_step(p);                                /* step 1: recording off */
    assert_int_equal(sonde_begin(p, "inner"), 0); /* not recorded, remembered */
    assert_int_equal(sonde_end(p), 0);            /* ends inner, not outer */
    {
        SONDE_SCOPE(p, "scoped while off");
    }
    assert_int_equal(sonde_end(p), 0); /* outer's end is recorded although recording is off */
    sonde_step(p);
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal((int)m.n_spans, 1);
    assert_string_equal(sm_str(&m, m.spans[0].site), "outer");
    assert_int_equal(m.spans[0].flags, 0);
    assert_true(m.spans[0].end_ns > m.steps[0].t_ns); /* it ended after step 0's mark */
    assert_int_equal((int)m.n_windows, 1);
    sm_free(&m);
    tu_rmrf(dir);
}

/* A gzip'd file's bytes in *out (malloc'd), its length in *n. */
static void gunzip(const char *path, char **out, size_t *n)
{
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);
    size_t cap = 1 << 16, k = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    int got;
    while ((got = gzread(gz, b + k, (unsigned)(cap - k))) > 0) {
        k += (size_t)got;
        if (k == cap) {
            b = realloc(b, cap *= 2);
            assert_non_null(b);
        }
    }
    gzclose(gz);
    *out = b;
    *n = k;
}

typedef struct same {
    int compared;
    const char *dir;
} same;

/* on_trace_ready: the window's trace, written from the window's part of the file, is the one
 * the whole file read back at that moment gives for the window's time range. */
static void same_as_whole(sonde_profiler *p, const char *path, int cycle, void *user)
{
    same *w = user;
    sm_model m;
    assert_int_equal(sm_read_file(sonde_file_path(p), &m), 0);
    char whole[600];
    snprintf(whole, sizeof whole, "%s/whole-cycle%d.trace.json.gz", w->dir, cycle);
    int found = 0;
    for (size_t i = 0; i < m.n_windows; i++)
        if (m.windows[i].cycle == cycle) {
            found = 1;
            assert_int_equal(sx_write_trace_range(&m, whole, m.windows[i].start_ns,
                                                  m.windows[i].end_ns), 0);
        }
    assert_true(found);
    sm_free(&m);
    char *a, *b;
    size_t na, nb;
    gunzip(path, &a, &na);
    gunzip(whole, &b, &nb);
    if (na != nb || memcmp(a, b, na)) {
        size_t at = 0;
        while (at < na && at < nb && a[at] == b[at])
            at++;
        fail_msg("cycle %d: the window's trace differs from the whole file's at byte %zu:\n"
                 "window: %.300s\nwhole:  %.300s", cycle, at, a + (at > 80 ? at - 80 : 0),
                 b + (at > 80 ? at - 80 : 0));
    }
    free(a);
    free(b);
    w->compared++;
}

/* Each window's trace is read from the part of the file the window wrote (issue 59: the whole
 * file read again at each window's end made a long run's steps ever slower), and holds what a
 * reading of the whole file gives for it: sections (one begun in the step before the window and
 * ended in it left out, as before), their metadata, instants with arguments, counters, steps, a
 * name first seen late in the run, the sessions open across windows, one ending in one. */
static void window_read_from_its_part(void **state)
{
    (void)state;
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "part");
    c.wait = 0;
    c.warmup = 1;
    c.active = 2;
    c.repeat = 0;
    same w = {0, dir};
    c.on_trace_ready = same_as_whole;
    c.on_trace_ready_user = &w;
    sonde_profiler *p = sonde_create(&c);
    assert_non_null(p);
    sonde_metadata(p, "model", "tiny");
    sonde_session_begin(p, "train");
    for (int step = 0; step < 48; step++) {
        if (step % 4 == 1)
            sonde_begin(p, "across"); /* begun before a window, ended in it */
        for (int k = 0; k < 30; k++) {
            SONDE_SCOPE(p, "layer");
            char v[16];
            snprintf(v, sizeof v, "%d", k);
            sonde_metadata(p, "k", v);
            sonde_begin(p, step >= 25 ? "late name" : "inner");
            sonde_counter(p, "queue", (double)k);
            sonde_end(p);
        }
        const char *key = "step", *val = step % 2 ? "odd" : "even";
        sonde_event_args(p, "tick", &key, &val, 1);
        if (step % 4 == 2)
            sonde_end(p);
        if (step == 31) { /* a session begun before this window ends in it, another begins */
            sonde_session_end(p);
            sonde_session_begin(p, "eval");
        }
        sonde_step(p);
    }
    sm_model m;
    assert_int_equal(tu_finish(p, &m), 0);
    assert_int_equal(w.compared, 16);
    assert_int_equal((int)m.n_windows, 16);
    /* the sessions begun windows before are there (the recorder says which was open) */
    char path[600], *t;
    size_t n;
    const char *has[][2] = {{"5", "train"}, {"11", "train"}, {"11", "eval"}, {"16", "eval"}};
    for (size_t i = 0; i < sizeof has / sizeof has[0]; i++) {
        snprintf(path, sizeof path, "%s/part-cycle%s.trace.json.gz", dir, has[i][0]);
        gunzip(path, &t, &n);
        char want[64];
        snprintf(want, sizeof want, "\"cat\":\"session\",\"name\":\"%s\"", has[i][1]);
        t[n ? n - 1 : 0] = 0;
        if (!strstr(t, want))
            fail_msg("%s holds no %s session", path, has[i][1]);
        free(t);
    }
    sm_free(&m);
    tu_rmrf(dir);
}

/* sm_read_file_from with what earlier readings noted (sm_resume): a part read from the file's
 * start is the whole file's reading; a later part reads the run's description from the noted
 * places; notes made on another file are found out (a noted place holds no whole record, or
 * holds another one) and the reading starts over, giving what a fresh one gives. */
static void resume_across_files(void **state)
{
    (void)state;
    char dir[256], a[4096], b[4096];
    tu_tmpdir(dir, sizeof dir);
    for (int k = 0; k < 2; k++) {
        sonde_config c = tu_config(dir, k ? "other" : "one");
        sonde_profiler *p = sonde_create(&c);
        for (int i = 0; i < 50 + 30 * k; i++) {
            sonde_begin(p, k ? "b-section" : "a-section");
            sonde_event(p, "tick");
            sonde_end(p);
            sonde_step(p);
        }
        snprintf(k ? b : a, sizeof a, "%s", sonde_file_path(p));
        assert_int_equal(sonde_destroy(p), 0);
    }
    sm_model whole, m;
    assert_int_equal(sm_read_file(a, &whole), 0);
    sm_resume rs = {0};
    sm_part all = {SONDE_FILE_HEADER_LEN, 0, 0, 0, 0};
    assert_int_equal(sm_read_file_from(a, &all, &rs, &m), 0);
    assert_int_equal((int)m.n_spans, (int)whole.n_spans);
    assert_int_equal((int)m.n_spans, 50);
    sm_free(&m);
    struct stat st;
    assert_int_equal(stat(a, &st), 0);
    sm_part end = {(uint64_t)st.st_size, 0, 0, 0, 0}; /* no event past it: names, no sections */
    assert_int_equal(sm_read_file_from(a, &end, &rs, &m), 0);
    assert_int_equal((int)m.n_spans, 0);
    int named = 0;
    for (size_t i = 0; i < m.n_sites; i++)
        named |= !strcmp(sm_str(&m, (uint32_t)i), "a-section");
    assert_true(named);
    sm_free(&m);
    assert_true(rs.walked > SONDE_FILE_HEADER_LEN);
    /* the notes of file a used on file b (b is longer: its end is past where a's walk
     * stopped, so a's noted places are read in b): b's reading as a fresh one gives it */
    sm_model fresh;
    sm_resume none = {0};
    assert_int_equal(stat(b, &st), 0);
    assert_true((uint64_t)st.st_size > rs.walked);
    sm_part tail = {(uint64_t)st.st_size - 200, 0, 0, 0, 0};
    assert_true(tail.from >= rs.walked); /* a's places are walked in b, not started over */
    assert_int_equal(sm_read_file_from(b, &tail, &none, &fresh), 0);
    assert_int_equal(sm_read_file_from(b, &tail, &rs, &m), 0);
    assert_int_equal((int)m.n_spans, (int)fresh.n_spans);
    assert_int_equal((int)m.n_sites, (int)fresh.n_sites);
    for (size_t i = 1; i < m.n_sites; i++)
        assert_string_equal(sm_str(&m, (uint32_t)i), sm_str(&fresh, (uint32_t)i));
    sm_free(&m);
    sm_free(&fresh);
    sm_free(&whole);
    sm_resume_free(&rs);
    sm_resume_free(&none);
    tu_rmrf(dir);
}

static void cudart_missing(void **state)
{
    (void)state;
    setenv("SONDE_CUDART_LIBRARY", "/nonexistent/libcudart.so", 1);
    char dir[256];
    tu_tmpdir(dir, sizeof dir);
    sonde_config c = tu_config(dir, "nocuda");
    c.active = 1;
    c.cuda_profiler_range = 1;
    sonde_profiler *p = sonde_create(&c);
    run_steps(p, 2);
    sm_model m;
    tu_finish(p, &m);
    int noted = 0;
    for (size_t i = 0; i < m.n_warnings; i++)
        noted |= strstr(m.warnings[i], "cuda_profiler_range unavailable: cannot load "
                                       "/nonexistent/libcudart.so") != NULL;
    assert_true(noted);
    assert_int_equal((int)tu_stat(&m, "step")->count, 2); /* the run goes on */
    sm_free(&m);
    tu_rmrf(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_schedule BUILD_DIR [cudart_missing]\n");
        return 2;
    }
    snprintf(g_build, sizeof g_build, "%s", argv[1]);
    /* libcudart is loaded once per process: the missing-library case runs in its own */
    if (argc > 2 && !strcmp(argv[2], "cudart_missing")) {
        const struct CMUnitTest t[] = {cmocka_unit_test(cudart_missing)};
        return cmocka_run_group_tests_name("cudart_missing", t, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table), cmocka_unit_test(against_torch),
        cmocka_unit_test(inconsistent), cmocka_unit_test(cycles_end_to_end),
        cmocka_unit_test(callback_steps_and_forks),
        cmocka_unit_test(window_and_paused_sections),
        cmocka_unit_test(window_read_from_its_part),
        cmocka_unit_test(resume_across_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
