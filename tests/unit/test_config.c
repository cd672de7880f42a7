/* test_config.c - presets, the YAML file (good files, and a corpus of bad ones each with the exact
 * message expected in its first line), the --profile* flags (every other argument survives in
 * order), the environment, and the precedence between them.
 * Usage: test_config DATA_DIR (tests/data). */
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <time.h>

#include "config/keys.h"

static char g_data[1024];

int sonde_config_load_mem_test(void);

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/yaml/%s", g_data, rel);
}

static void presets(void **state)
{
    (void)state;
    sonde_config c = sonde_config_default();
    assert_int_equal(sonde_config_preset(&c, "production"), 0);
    assert_true(c.cpu_interval_s == 5 && c.gpu_interval_s == 2);
    assert_int_equal(c.monitor_gpu_temperature, 0);
    assert_int_equal(c.monitor_gpu_power, 0);
    assert_int_equal(c.real_time_display, 0);
    assert_int_equal(c.formats, SONDE_FORMAT_JSON);
    assert_true(c.buffer_mb == 16);
    assert_int_equal(sonde_config_preset(&c, "development"), 0);
    assert_int_equal(c.real_time_display, 1);
    assert_int_equal(c.formats, SONDE_FORMAT_REPORTS);
    /* the default formats' text names the default bits, and is the default */
    unsigned bits = 0;
    assert_int_equal(sonde__parse_formats("test", SONDE__FORMATS_DEFAULT, &bits), 0);
    assert_int_equal(bits, SONDE_FORMAT_REPORTS);
    assert_int_equal(sonde_config_default().formats, SONDE_FORMAT_REPORTS);
    assert_int_equal(c.formats, SONDE_FORMAT_REPORTS);
    assert_int_equal(sonde_config_preset(&c, "debugging"), 0);
    assert_int_equal(c.formats, SONDE_FORMAT_ALL);
    assert_true(c.cpu_interval_s == 0.05);
    assert_int_equal(c.with_stack, 1);
    sonde_config before = c;
    assert_int_equal(sonde_config_preset(&c, "turbo"), SONDE_EINVAL);
    assert_string_equal(sonde_last_error(),
                        "unknown preset \"turbo\" (expected development, production or debugging)");
    assert_memory_equal(&c, &before, sizeof c);
    /* every preset value is a valid key and value of the table */
    static const char *names[] = {"development", "production", "debugging"};
    for (int i = 0; i < 3; i++) {
        const char *const *v;
        assert_int_equal(sonde__preset_values(names[i], &v), 0);
        for (; *v; v++) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(strchr(*v, '=') - *v), *v);
            assert_non_null(sonde__key_find(key));
        }
    }
}

static void yaml_good(void **state)
{
    (void)state;
    char p[1200];
    sonde_config c = sonde_config_default();
    path_of(p, sizeof p, "good/top.yaml");
    assert_int_equal(sonde_config_load_file(&c, p), 0);
    assert_string_equal(c.name, "nightly");
    assert_string_equal(c.output_dir, "/tmp/sonde-nightly");
    assert_int_equal(c.formats, SONDE_FORMAT_JSON | SONDE_FORMAT_TRACE);
    assert_true(c.buffer_mb == 32 && c.gpu_interval_s == 0.25);
    assert_string_equal(c.gpu_devices, "0,2");
    assert_int_equal(c.warmup, 1);
    assert_int_equal(c.active, 3);
    c = sonde_config_default();
    c.name = "set-in-code";
    path_of(p, sizeof p, "good/profiling.yaml");
    assert_int_equal(sonde_config_load_file(&c, p), 0);
    assert_int_equal(c.real_time_display, 1);
    assert_int_equal(c.monitor_gpu_power, 0);
    assert_int_equal(c.formats, SONDE_FORMAT_JSON | SONDE_FORMAT_CSV);
    assert_string_equal(c.output_dir, "./profiling_reports");
    assert_null(c.name); /* name: ~ is the default (none) */
    /* strings outlive the file */
    assert_int_equal(sonde_config_load_mem_test(), 0);
    /* the Inferix document's file, its own key names included */
    c = sonde_config_default();
    path_of(p, sizeof p, "good/inferix.yaml");
    assert_int_equal(sonde_config_load_file(&c, p), 0);
    assert_true(c.display_interval_s == 5.0 && c.gpu_interval_s == 0.5 &&
                c.cpu_interval_s == 1.0);
    assert_int_equal(c.formats, SONDE_FORMAT_JSON | SONDE_FORMAT_HTML); /* report_format both */
    assert_true(c.collect_cpu && c.collect_memory && c.real_time_display);
    assert_int_equal(c.max_data_points, 10000);
    static const char off[] = "profiling:\n  generate_final_report: false\n"
                              "  monitor_cpu_usage: false\n  save_raw_data: true\n";
    c = sonde_config_default();
    assert_int_equal(sonde__config_load_mem(&c, off, sizeof off - 1, "off.yaml"), 0);
    assert_int_equal(c.formats, 0);
    assert_false(c.collect_cpu);
}

static void yaml_bad_corpus(void **state)
{
    (void)state;
    char dir[1200];
    path_of(dir, sizeof dir, "bad");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".yaml"))
            continue;
        char p[2400], line[512], expect[3000];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        assert_non_null(fgets(line, sizeof line, f));
        fclose(f);
        line[strcspn(line, "\n")] = 0;
        const char *want = strstr(line, "# expect: FILE");
        if (!want)
            fail_msg("%s: first line must be '# expect: FILE...'", p);
        snprintf(expect, sizeof expect, "%s%s", p, want + strlen("# expect: FILE"));
        sonde_config c = sonde_config_default(), before = c;
        int rc = sonde_config_load_file(&c, p);
        assert_int_equal(rc, SONDE_EINVAL);
        if (strcmp(sonde_last_error(), expect) != 0)
            fail_msg("%s\n  got:      %s\n  expected: %s", e->d_name, sonde_last_error(), expect);
        assert_memory_equal(&c, &before, sizeof c); /* all or nothing */
        n++;
    }
    closedir(d);
    assert_true(n >= 10);
    sonde_config c = sonde_config_default();
    assert_int_equal(sonde_config_load_file(&c, "/nonexistent/sonde.yaml"), SONDE_ENOTFOUND);
    assert_string_equal(sonde_last_error(), "/nonexistent/sonde.yaml: No such file or directory");
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Issue 14.10: 200,000 nested flow brackets (where a value, a list item, a mapping or an unknown
 * key's value is expected) are refused at once: libyaml's scanner takes time quadratic in the
 * nesting when the whole node is read (37 s of CPU for 200 KB before the fix). CPU time, not wall
 * time, so a loaded machine cannot fail it; the bound is 200 times what the fix takes. */
static void yaml_deep_nesting(void **state)
{
    (void)state;
    static const char *const heads[] = {"profiling: ", "buffer_mb: ", "formats: [json, ",
                                        "session_tags: {a: ", "no_such_key: ", "profiling:\n  x: "};
    const size_t depth = 200000;
    char *doc = malloc(depth + 64);
    assert_non_null(doc);
    double t0 = cpu_s();
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
        for (int open = 0; open < 2; open++) {
            size_t k = (size_t)snprintf(doc, 64, "%s", heads[h]);
            memset(doc + k, open ? '{' : '[', depth);
            sonde_config c = sonde_config_default();
            int rc = sonde__config_load_mem(&c, doc, k + depth, "deep.yaml");
            if (rc != SONDE_EINVAL)
                fail_msg("%s%c...: rc %d (%s)", heads[h], open ? '{' : '[', rc, sonde_last_error());
        }
    double used = cpu_s() - t0;
    free(doc);
    if (used > 2.0)
        fail_msg("12 deeply nested files took %.1f s of CPU", used);
}

/* argv helper: a writable copy of the words with the NULL C gives argv. */
typedef struct args {
    char *v[32];
    int n;
} args;

static void mk(args *a, const char *const *w)
{
    a->n = 0;
    for (; *w; w++)
        a->v[a->n++] = (char *)*w;
    a->v[a->n] = NULL;
}

static void flags_strip_and_keep_order(void **state)
{
    (void)state;
    static const char *const w[] = {"train", "--lr", "0.1", "--profile", "data.txt",
                                    "--profile-name", "run7", "--epochs=3",
                                    "--profile-activities", "cpu", "GPU", "input.bin",
                                    "--profile-warmup=2", "--profile-active", "4", "-v",
                                    "--profile-with-stack", "--", "--profile-dir", NULL};
    args a;
    mk(&a, w);
    sonde_config c = sonde_config_default();
    c.enabled = 0;
    /* issue 14.16: "--" ends the flags; it and the words after it are the program's, so
     * "--profile-dir" there is an argument, not a flag missing its value */
    assert_int_equal(sonde_config_from_args(&c, &a.n, a.v), 0);
    static const char *const rest[] = {"train", "--lr", "0.1", "data.txt", "--epochs=3",
                                       "input.bin", "-v", "--", "--profile-dir"};
    assert_int_equal(a.n, 9);
    for (int i = 0; i < 9; i++)
        assert_string_equal(a.v[i], rest[i]);
    assert_null(a.v[9]);
    assert_int_equal(c.enabled, 1);
    assert_string_equal(c.name, "run7");
    assert_int_equal(c.collect_cpu, 1);
    assert_int_equal(c.collect_gpu, 1);
    assert_int_equal(c.collect_memory, 0);
    assert_int_equal(c.warmup, 2);
    assert_int_equal(c.active, 4);
    assert_int_equal(c.with_stack, 1);
}

static void flags_errors(void **state)
{
    (void)state;
    struct { const char *const w[6]; const char *msg; } cases[] = {
        {{"p", "--profile-wait", "soon", NULL}, "--profile-wait: \"soon\" is not an integer in 0..1000000000"},
        {{"p", "--profile-warmpu", "1", NULL}, "unknown flag --profile-warmpu (did you mean --profile-warmup?)"},
        {{"p", "--profile=1", NULL}, "--profile takes no value"},
        {{"p", "--profile-activities", "TPU", NULL}, "--profile-activities needs a value (CPU GPU MEM NVTX CUDA)"},
        {{"p", "--profile-activities=CPU,TPU", NULL}, "--profile-activities: unknown activity \"TPU\" (expected CPU, GPU, MEM, NVTX or CUDA)"},
        {{"p", "--profile-preset", "fast", NULL}, "--profile-preset: unknown preset \"fast\" (expected development, production or debugging)"},
        {{"p", "--profile-name", "a/b", NULL}, "--profile-name: \"a/b\" is not a run name (non-empty, without '/')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        args a;
        mk(&a, cases[i].w);
        int n0 = a.n;
        sonde_config c = sonde_config_default(), before = c;
        assert_int_equal(sonde_config_from_args(&c, &a.n, a.v), SONDE_EINVAL);
        if (strcmp(sonde_last_error(), cases[i].msg))
            fail_msg("case %zu: got \"%s\"", i, sonde_last_error());
        assert_int_equal(a.n, n0);
        assert_memory_equal(&c, &before, sizeof c);
    }
    /* --profile-help prints and returns 1 */
    static const char *const w[] = {"p", "--profile-help", "x", NULL};
    args a;
    mk(&a, w);
    sonde_config c = sonde_config_default();
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    int rc = sonde_config_from_args(&c, &a.n, a.v);
    fclose(stdout);
    stdout = saved;
    assert_int_equal(rc, 1);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.v[1], "x");
}

static void precedence(void **state)
{
    (void)state;
    /* preset < YAML < environment < flags */
    char dir[256], yaml[400];
    tu_tmpdir(dir, sizeof dir);
    snprintf(yaml, sizeof yaml, "%s/cfg.yaml", dir);
    FILE *f = fopen(yaml, "w");
    fprintf(f, "profiling:\n  cpu_interval_s: 3\n  gpu_interval_s: 3\n  buffer_mb: 8\n");
    fclose(f);
    setenv("SONDE_GPU_INTERVAL_S", "7", 1);
    char cfgflag[450];
    snprintf(cfgflag, sizeof cfgflag, "--profile-config=%s", yaml);
    const char *w[] = {"p", "--profile-preset", "production", cfgflag, "--profile-name",
                       "flagged", NULL};
    args a;
    mk(&a, w);
    sonde_config c = sonde_config_default();
    c.name = "in-code";
    assert_int_equal(sonde_config_from_args(&c, &a.n, a.v), 0);
    assert_int_equal(c.formats, SONDE_FORMAT_JSON); /* preset, not overridden */
    assert_true(c.cpu_interval_s == 3);             /* YAML over preset (5) */
    assert_true(c.gpu_interval_s == 7);             /* environment over YAML */
    assert_true(c.buffer_mb == 8);                  /* YAML over preset (16) */
    assert_string_equal(c.name, "flagged");         /* flags over everything */
    unsetenv("SONDE_GPU_INTERVAL_S");
    /* SONDE_CONFIG: the file below the variables */
    setenv("SONDE_CONFIG", yaml, 1);
    setenv("SONDE_BUFFER_MB", "12", 1);
    c = sonde_config_default();
    assert_int_equal(sonde_config_from_env(&c), 0);
    assert_true(c.cpu_interval_s == 3 && c.buffer_mb == 12);
    /* a bad file through SONDE_CONFIG names the variable and the file */
    f = fopen(yaml, "w");
    fprintf(f, "buffer_mb: [1, 2]\n");
    fclose(f);
    assert_int_equal(sonde_config_from_env(&c), SONDE_EINVAL);
    char expect[600];
    snprintf(expect, sizeof expect,
             "SONDE_CONFIG: %s:1:12: buffer_mb: expected a number in 1..65536, found a list", yaml);
    assert_string_equal(sonde_last_error(), expect);
    unsetenv("SONDE_CONFIG");
    unsetenv("SONDE_BUFFER_MB");
    tu_rmrf(dir);
}

static void key_table(void **state)
{
    (void)state;
    size_t n;
    const sonde_key *k = sonde__keys(&n);
    sonde_config d = sonde_config_default();
    assert_int_equal(sonde__config_validate(&d), 0);
    for (size_t i = 0; i < n; i++) {
        /* every key round-trips through its text form */
        char v[600];
        sonde__key_get(&d, &k[i], v, sizeof v);
        sonde_config c = d;
        if (k[i].type != KEY_STRING || v[0])
            assert_int_equal(sonde__key_set(&c, &k[i], v, "roundtrip"), 0);
        char env[64];
        sonde__key_env(&k[i], env, sizeof env);
        assert_int_equal(strncmp(env, "SONDE_", 6), 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(k[i].name, k[j].name);
    }
}

/* --profile-activities: what is named is on, the rest off; NVTX is the nvtx key. */
static void activities(void **state)
{
    (void)state;
    static const struct {
        const char *words[4];
        int cpu, gpu, mem, nvtx;
    } cases[] = {{{"NVTX", NULL}, 0, 0, 0, 1},
                 {{"cpu", "nvtx", NULL}, 1, 0, 0, 1},
                 {{"CPU", "GPU", "MEM", NULL}, 1, 1, 1, 0},
                 {{"memory", NULL}, 0, 0, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *w[8] = {"prog", "--profile-activities"};
        int n = 2;
        for (int k = 0; cases[i].words[k]; k++)
            w[n++] = cases[i].words[k];
        w[n++] = "input.txt"; /* not an activity: the program's own */
        args a;
        mk(&a, w);
        sonde_config c = sonde_config_default();
        c.nvtx = !cases[i].nvtx; /* the flag sets it either way */
        assert_int_equal(sonde_config_from_args(&c, &a.n, a.v), 0);
        assert_int_equal(a.n, 2);
        assert_string_equal(a.v[1], "input.txt");
        assert_int_equal(c.collect_cpu, cases[i].cpu);
        assert_int_equal(c.collect_gpu, cases[i].gpu);
        assert_int_equal(c.collect_memory, cases[i].mem);
        assert_int_equal(c.nvtx, cases[i].nvtx);
    }
}

/* The format list (SONDE__FORMATS) is the only one: every name parses to its bit, the bits are
 * SONDE_FORMAT_ALL exactly, each prints back as its name (all thirteen: the printer once knew 7), and
 * "all" round-trips through the key. */
static void format_list(void **state)
{
    (void)state;
#define ROW(name, bit, ext, kind, writer) {#name, bit},
    static const struct { const char *name; unsigned bit; } rows[] = {SONDE__FORMATS(ROW)};
#undef ROW
    unsigned seen = 0;
    char v[256];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        sonde_config c = sonde_config_default();
        assert_int_equal(sonde_config_set(&c, "formats", rows[i].name), 0);
        assert_int_equal(c.formats, rows[i].bit);
        sonde_config_get(&c, "formats", v, sizeof v);
        assert_string_equal(v, rows[i].name);
        assert_int_equal(seen & rows[i].bit, 0); /* no bit twice */
        seen |= rows[i].bit;
    }
    assert_int_equal(seen, SONDE_FORMAT_ALL);
    sonde_config c = sonde_config_default();
    assert_int_equal(sonde_config_set(&c, "formats", "all"), 0);
    sonde_config_get(&c, "formats", v, sizeof v);
    assert_string_equal(v, "json,csv,txt,trace,samples,html,tensorboard,perfetto,folded,pprof,"
                           "instances,offcpu,sqlite");
    assert_int_equal(sonde_config_set(&c, "formats", "pdf"), SONDE_EINVAL);
    assert_non_null(strstr(sonde_last_error(), "(expected " SONDE__FORMAT_WORDS ")"));
}

/* The public key-by-name calls: what a binding (python/sonde) sets through. */
static void set_get_by_key(void **state)
{
    (void)state;
    sonde_config c = sonde_config_default();
    char v[64];
    assert_int_equal(sonde_config_set(&c, "gpu_interval_s", "0.25"), 0);
    assert_true(c.gpu_interval_s == 0.25);
    assert_int_equal(sonde_config_get(&c, "gpu_interval_s", v, sizeof v), 4);
    assert_string_equal(v, "0.25");
    assert_int_equal(sonde_config_set(&c, "formats", "json,trace"), 0);
    assert_int_equal(c.formats, SONDE_FORMAT_JSON | SONDE_FORMAT_TRACE);
    sonde_config_get(&c, "formats", v, sizeof v);
    assert_string_equal(v, "json,trace");
    char name[] = "mine";
    assert_int_equal(sonde_config_set(&c, "name", name), 0);
    name[0] = 'X'; /* copied */
    assert_string_equal(c.name, "mine");
    assert_int_equal(sonde_config_set(&c, "name", NULL), 0);
    assert_null(c.name);
    assert_int_equal(sonde_config_get(&c, "name", v, sizeof v), 0);
    assert_string_equal(v, "");
    /* truncation reports the whole length, as snprintf */
    assert_int_equal(sonde_config_set(&c, "output_dir", "/a/rather/long/dir"), 0);
    assert_int_equal(sonde_config_get(&c, "output_dir", v, 5), 18);
    assert_string_equal(v, "/a/r");

    sonde_config before = c;
    assert_int_equal(sonde_config_set(&c, "gpu_intervl_s", "1"), SONDE_ENOTFOUND);
    assert_string_equal(sonde_last_error(),
                        "sonde_config_set: unknown key \"gpu_intervl_s\" (did you mean "
                        "\"gpu_interval_s\"?)");
    assert_int_equal(sonde_config_set(&c, "buffer_mb", "0"), SONDE_EINVAL);
    assert_string_equal(sonde_last_error(),
                        "sonde_config_set: buffer_mb: 0 is out of range: expected a number in "
                        "1..65536");
    assert_int_equal(sonde_config_set(&c, "enabled", "maybe"), SONDE_EINVAL);
    assert_int_equal(sonde_config_set(&c, "enabled", NULL), SONDE_EINVAL);
    assert_int_equal(sonde_config_set(NULL, "enabled", "1"), SONDE_EINVAL);
    assert_int_equal(sonde_config_get(&c, "nope", v, sizeof v), SONDE_ENOTFOUND);
    assert_memory_equal(&before, &c, sizeof c);
}

int sonde_config_load_mem_test(void)
{
    sonde_config c = sonde_config_default();
    char text[] = "name: temporary\n";
    int rc = sonde__config_load_mem(&c, text, strlen(text), "mem.yaml");
    memset(text, 'x', sizeof text - 1); /* the caller's buffer is gone */
    return rc || strcmp(c.name, "temporary");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_config DATA_DIR\n");
        return 2;
    }
    snprintf(g_data, sizeof g_data, "%s", argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(presets), cmocka_unit_test(yaml_good), cmocka_unit_test(yaml_bad_corpus),
        cmocka_unit_test(yaml_deep_nesting),
        cmocka_unit_test(flags_strip_and_keep_order), cmocka_unit_test(flags_errors),
        cmocka_unit_test(precedence), cmocka_unit_test(key_table),
        cmocka_unit_test(set_get_by_key), cmocka_unit_test(activities),
        cmocka_unit_test(format_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
