/* cmd_summary.c - `sonde summary`: the text table, from a .sonde file or a JSON report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export/export.h"
#include "model/model.h"
#include "util/buf.h"
#include "util/suggest.h"

/* `--table NAME`: the reading of the recording at file fed to the consumer NAME, its table
 * printed. */
static int print_table(const char *file, const char *name)
{
    const sm_consumer *c = sm_consumer_find(name);
    if (!c) {
        const char *names[32];
        char all[512] = "";
        size_t n = 0;
        for (; sm_consumers[n] && n < 32; n++) {
            names[n] = sm_consumers[n]->name;
            size_t l = strlen(all);
            snprintf(all + l, sizeof all - l, "%s%s", n ? ", " : "", names[n]);
        }
        const char *close = suggest(name, names, n);
        return cli_fail(CLI_USAGE, "summary", "--table %s: no such table%s%s%s; the tables: %s",
                        name, close ? " (did you mean " : "", close ? close : "",
                        close ? "?)" : "", all);
    }
    int rc = cli_check_recording("summary", file);
    if (rc)
        return rc;
    void *st = c->start();
    if (!st)
        return cli_fail(CLI_USAGE, "summary", "out of memory");
    sm_model m;
    if (sm_read_file_ops(file, &c, &st, 1, &m) != 0) {
        c->stop(st);
        return cli_fail(CLI_USAGE, "summary", "%s", sonde_last_error());
    }
    sbuf b;
    sbuf_init(&b);
    rc = c->print(st, &m, &b);
    sbuf_text_safe(&b, 0);
    if (rc || b.oom)
        rc = cli_fail(CLI_USAGE, "summary", "out of memory");
    else
        fputs(b.data ? b.data : "", stdout);
    sbuf_free(&b);
    sm_free(&m);
    c->stop(st);
    return rc;
}

int cmd_summary(int argc, char **argv)
{
    static const char *const opts[] = {"--sort", "--top", "--wide", "--table", NULL};
    static const char *const sorts[] = {"total", "self", "count", "mean", NULL};
    const char *file = NULL, *table = NULL;
    int sort = SX_SORT_TOTAL;
    size_t top = 0;
    int wide = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--wide")) {
            wide = 1;
            continue;
        }
        if (!strcmp(a, "--table") || !strncmp(a, "--table=", 8)) {
            if (a[7] == '=')
                table = a + 8;
            else if (i + 1 < argc)
                table = argv[++i];
            else
                return cli_fail(CLI_USAGE, "summary", "--table needs a value");
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
    if (table)
        return print_table(file, table);
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
