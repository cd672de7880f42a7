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

int cmd_export(int argc, char **argv)
{
    static const char *const opts[] = {"--format", "-o", "--quiet", NULL};
    const char *file = NULL, *dir = NULL, *fmt = NULL; /* NULL: the formats the run wrote */
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--format") || !strcmp(a, "-o")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "export", "%s needs a value", a);
            if (!strcmp(a, "-o"))
                dir = argv[++i];
            else
                fmt = argv[++i];
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
    sm_model m;
    if (sm_read_file(file, &m) != 0) {
        if (big)
            fputc('\n', stderr);
        return cli_fail(CLI_USAGE, "export", "%s", sonde_last_error());
    }
    if (cli_join_programs("export", file, &m) < 0) { /* a `sonde run` recording: the whole run */
        sm_free(&m);
        return CLI_USAGE;
    }
    if (!fmt) { /* the run's own formats, as the library wrote them; every one when unknown */
        const char *run = sm_info(&m, "config.formats");
        if (!run || sonde__parse_formats("config.formats", run, &formats) || !formats)
            sonde__parse_formats("default", "json,csv,txt,trace,html", &formats);
    }
    if (big)
        fprintf(stderr, " writing...");
    char *d = NULL;
    if (!dir) { /* beside the .sonde file, as the library writes them */
        d = strdup(file);
        char *slash = d ? strrchr(d, '/') : NULL;
        if (slash)
            *slash = 0;
        dir = slash ? d : ".";
    }
    int rc = sx_write_formats(&m, dir, m.name, formats);
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
