/* cmd_report.c - `sonde report`: the self-contained HTML report, from a .sonde file (everything:
 * the timeline and the counter charts too) or a NAME.json report (what it holds). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export/export.h"
#include "record/record.h"

int cmd_report(int argc, char **argv)
{
    static const char *const opts[] = {"-o", NULL};
    const char *file = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "report", "-o needs a file name");
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_bad_option("report", argv[i], opts);
        } else if (!file) {
            file = argv[i];
        } else {
            return cli_fail(CLI_USAGE, "report", "one file at a time (got %s and %s)", file, argv[i]);
        }
    }
    if (!file)
        return cli_usage(cli_find("report"), 1);
    sm_model m;
    int rc = cli_load("report", file, &m);
    if (rc)
        return rc;
    char *path = NULL;
    if (!out) { /* beside the input: DIR/NAME.html */
        const char *slash = strrchr(file, '/');
        if (asprintf(&path, "%.*s%s%s.html", slash ? (int)(slash - file) : 0, file,
                     slash ? "/" : "", m.name) < 0)
            path = NULL;
        out = path;
    }
    if (!out) {
        sm_free(&m);
        return cli_fail(CLI_USAGE, "report", "out of memory");
    }
    size_t ol = strlen(out);
    if (ol < 5 || strcmp(out + ol - 5, ".html")) {
        sm_free(&m);
        free(path);
        return cli_fail(CLI_USAGE, "report", "%s: the report's name must end in .html", out);
    }
    rc = cli_output_check("report", out, file);
    if (rc) {
        sm_free(&m);
        free(path);
        return rc;
    }
    rc = sx_write_path(&m, out);
    sm_free(&m);
    if (rc) {
        free(path);
        return cli_fail(CLI_USAGE, "report", "%s", sonde_last_error());
    }
    printf("%s\n", out);
    free(path);
    return CLI_OK;
}
