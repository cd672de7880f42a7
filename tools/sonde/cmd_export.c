/* cmd_export.c - `sonde export`: every report the library writes, regenerated from a .sonde file
 * through the same reader and exporters, so the files are the same. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "config/keys.h"
#include "export/export.h"
#include "record/record.h"

static void print_path(const char *path, void *ctx)
{
    (void)ctx;
    printf("%s\n", path);
}

/* The keys the reports read from the run's recorded configuration when they are written, so
 * `--set` can change them; the others act while recording or reading. */
static const char *const g_report_keys[] = {"trace_max_events",     "report_max_sections",
                                            "report_max_records",   "html_max_spans",
                                            "bottleneck_threshold", "max_data_points", NULL};

/* --set KEY=VALUE: KEY checked against the reports' keys, VALUE through the key's own rules;
 * its value as the run's configuration would record it into out. 0, or CLI_USAGE with the
 * message printed. */
static int parse_set(const char *arg, char *key, size_t key_cap, char *out, size_t cap)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= key_cap)
        return cli_fail(CLI_USAGE, "export", "--set %s: expected KEY=VALUE", arg);
    snprintf(key, key_cap, "%.*s", (int)(eq - arg), arg);
    int known = 0;
    for (size_t i = 0; g_report_keys[i]; i++)
        known |= !strcmp(g_report_keys[i], key);
    const sonde_key *k = sonde__key_find(key);
    const char *near = k ? NULL : sonde__key_suggest(key);
    if (!k)
        return cli_fail(CLI_USAGE, "export", "--set %s: no such key%s%s", key,
                        near ? "; did you mean " : "", near ? near : "");
    if (!known) {
        char list[160] = "";
        for (size_t i = 0; g_report_keys[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     g_report_keys[i]);
        return cli_fail(CLI_USAGE, "export", "--set %s: acts while recording or reading the "
                        "file, not as the reports are written; sonde export can set %s", key, list);
    }
    sonde_config c = sonde_config_default();
    char where[160];
    snprintf(where, sizeof where, "--set %s", key);
    if (sonde__key_set(&c, k, eq + 1, where) != 0)
        return cli_fail(CLI_USAGE, "export", "%s", sonde_last_error());
    sonde__key_get(&c, k, out, cap);
    return 0;
}

int cmd_export(int argc, char **argv)
{
    static const char *const opts[] = {"--format", "-o", "--quiet", "--set", NULL};
    const char *file = NULL, *dir = NULL, *fmt = NULL; /* NULL: the formats the run wrote */
    int quiet = 0;
    enum { MAX_SETS = 8 };
    char set_key[MAX_SETS][64], set_val[MAX_SETS][64];
    size_t n_sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--format") || !strcmp(a, "-o") || !strcmp(a, "--set")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "export", "%s needs a value", a);
            if (!strcmp(a, "-o"))
                dir = argv[++i];
            else if (!strcmp(a, "--format"))
                fmt = argv[++i];
            else if (n_sets == MAX_SETS)
                return cli_fail(CLI_USAGE, "export", "at most %d --set", MAX_SETS);
            else if (parse_set(argv[++i], set_key[n_sets], sizeof set_key[0], set_val[n_sets],
                               sizeof set_val[0]))
                return CLI_USAGE;
            else
                n_sets++;
        } else if (!strncmp(a, "--format=", 9)) {
            fmt = a + 9;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_bad_option("export", a, opts);
        } else if (!file) {
            file = a;
        } else {
            return cli_fail(CLI_USAGE, "export", "one FILE.sonde at a time (got %s and %s)", file, a);
        }
    }
    if (!file)
        return cli_usage(cli_find("export"), 1);
    unsigned formats = 0;
    if (fmt && sonde__parse_formats("--format", fmt, &formats))
        return cli_fail(CLI_USAGE, "export", "%s", sonde_last_error());
    struct stat st;
    int big = stat(file, &st) == 0 && st.st_size > (8 << 20) && isatty(2) && !quiet;
    if (big)
        fprintf(stderr, "sonde export: reading %s (%.1f MiB)...", file, (double)st.st_size / 1048576.0);
    char set_fact[MAX_SETS][80];
    sm_kv sets[MAX_SETS];
    for (size_t i = 0; i < n_sets; i++) { /* over the run's own configuration, before the build:
                                             report_max_sections and report_max_records
                                             decide what it holds */
        snprintf(set_fact[i], sizeof set_fact[i], "config.%.63s", set_key[i]);
        sets[i] = (sm_kv){set_fact[i], set_val[i]};
    }
    char *d = NULL;
    if (!dir) { /* beside the .sonde file, as the library writes them */
        d = strdup(file);
        char *slash = d ? strrchr(d, '/') : NULL;
        if (slash)
            *slash = 0;
        dir = slash ? d : ".";
    }
    /* the instances CSV of a run the model does not hold whole is written as the file is read */
    sx_early early = {.dir = dir, .formats = fmt ? formats : 0};
    sm_model m;
    if (sx_read_file(file, sets, n_sets, &early, &m) != 0) {
        if (big)
            fputc('\n', stderr);
        free(d);
        /* not a recording: named as what it is (a directory, a JSON report...); only then, so
         * that a recording is opened once */
        if (cli_check_recording("export", file) != 0)
            return CLI_USAGE;
        return cli_fail(CLI_USAGE, "export", "%s", sonde_last_error());
    }
    if (cli_join_programs("export", file, &m) < 0) { /* a `sonde run` recording: the whole run */
        sx_early_drop(&early);
        free(d);
        sm_free(&m);
        return CLI_USAGE;
    }
    if (!fmt) /* the run's own formats, as the library wrote them; every one when unknown */
        formats = sx_run_formats(&m);
    if (big)
        fprintf(stderr, " writing...");
    int rc = sx_write_formats_early(&m, dir, m.name, formats, &early);
    if (big)
        fprintf(stderr, " done\n");
    if (rc) {
        free(d);
        sm_free(&m);
        return cli_fail(CLI_USAGE, "export", "%s", sonde_last_error());
    }
    if (!quiet) {
        sx_each_path(&m, dir, m.name, formats, print_path, NULL);
        for (size_t i = 0; i < m.n_warnings; i++)
            if (strstr(m.warnings[i], "torn") || strstr(m.warnings[i], "checksum"))
                fprintf(stderr, "sonde export: warning: %s\n", m.warnings[i]);
    }
    free(d);
    sm_free(&m);
    return CLI_OK;
}
