/* cmd_summary.c - `sonde summary`: the text table, from a .sonde file or a JSON report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export/export.h"

int cmd_summary(int argc, char **argv)
{
    static const char *const opts[] = {"--sort", "--top", "--wide", NULL};
    static const char *const sorts[] = {"total", "self", "count", "mean", NULL};
    const char *file = NULL;
    int sort = SX_SORT_TOTAL;
    size_t top = 0;
    int wide = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--wide")) {
            wide = 1;
            continue;
        }
        if (!strncmp(a, "--sort=", 7) || !strncmp(a, "--top=", 6)) {
            v = strchr(a, '=') + 1;
        } else if (!strcmp(a, "--sort") || !strcmp(a, "--top")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "summary", "%s needs a value", a);
            v = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_bad_option("summary", a, opts);
        } else if (!file) {
            file = a;
            continue;
        } else {
            return cli_fail(CLI_USAGE, "summary", "one file at a time (got %s and %s)", file, a);
        }
        if (!strncmp(a, "--sort", 6)) {
            int k = -1;
            for (int s = 0; sorts[s]; s++)
                if (!strcmp(v, sorts[s]))
                    k = s;
            if (k < 0)
                return cli_fail(CLI_USAGE, "summary",
                                "--sort %s: expected total, self, count or mean", v);
            sort = k;
        } else {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 1)
                return cli_fail(CLI_USAGE, "summary", "--top %s: expected a positive integer", v);
            top = (size_t)n;
        }
    }
    if (!file)
        return cli_usage(cli_find("summary"), 1);
    sm_model m;
    int rc = cli_load("summary", file, &m);
    if (rc)
        return rc;
    sbuf b;
    sbuf_init(&b);
    if (sx_txt_opts(&m, &b, sort, top, wide) != 0) {
        sbuf_free(&b);
        sm_free(&m);
        return cli_fail(CLI_USAGE, "summary", "out of memory");
    }
    fputs(b.data, stdout);
    sbuf_free(&b);
    sm_free(&m);
    return CLI_OK;
}
