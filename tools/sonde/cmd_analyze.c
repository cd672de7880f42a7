/* cmd_analyze.c - `sonde analyze gpu RUN`: where the GPU time of a run went and why the GPU
 * waited (src/analyze/gpu.c): each device's temporal breakdown and its streams' idle time as
 * Holistic Trace Analysis defines them, what the CPU was doing in the host waits (the launching
 * thread's sections and CPU samples), and the kernels by name. Text or JSON. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/gpu.h"
#include "cli.h"
#include "export/export.h"

/* A non-negative number of microseconds given to flag, in ns into *out. CLI_OK or CLI_USAGE. */
static int us_flag(const char *flag, const char *v, int64_t *out)
{
    char *end;
    double us = strtod(v, &end);
    if (end == v || *end || !(us >= 0) || us > 1e12)
        return cli_fail(CLI_USAGE, "analyze", "%s %s: expected microseconds, 0 or more", flag, v);
    *out = (int64_t)(us * 1e3);
    return CLI_OK;
}

int cmd_analyze(int argc, char **argv)
{
    static const char *const opts[] = {"--format", "-o", "--kernel-delay-us", "--min-idle-us",
                                       "--top", NULL};
    const char *file = NULL, *out = NULL, *format = "text";
    int64_t delay = SA_GPU_KERNEL_DELAY_NS, min_idle = SA_GPU_MIN_IDLE_NS;
    long top = 15;
    if (argc < 2 || strcmp(argv[1], "gpu"))
        return argc < 2 ? cli_usage(cli_find("analyze"), 1)
                        : cli_fail(CLI_USAGE, "analyze", "%s: unknown analysis (gpu)", argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int valued = !strcmp(a, "--format") || !strcmp(a, "-o") ||
                     !strcmp(a, "--kernel-delay-us") || !strcmp(a, "--min-idle-us") ||
                     !strcmp(a, "--top");
        if (valued && i + 1 >= argc)
            return cli_fail(CLI_USAGE, "analyze", "%s needs a value", a);
        int rc = CLI_OK;
        if (!strcmp(a, "--format"))
            format = argv[++i];
        else if (!strcmp(a, "-o"))
            out = argv[++i];
        else if (!strcmp(a, "--kernel-delay-us"))
            rc = us_flag(a, argv[++i], &delay);
        else if (!strcmp(a, "--min-idle-us"))
            rc = us_flag(a, argv[++i], &min_idle);
        else if (!strcmp(a, "--top")) {
            char *end;
            top = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || top < 1)
                rc = cli_fail(CLI_USAGE, "analyze", "--top %s: expected a count, 1 or more",
                              argv[i]);
        } else if (a[0] == '-' && a[1])
            return cli_bad_option("analyze", a, opts);
        else if (!file)
            file = a;
        else
            return cli_fail(CLI_USAGE, "analyze", "one run at a time (got %s and %s)", file, a);
        if (rc != CLI_OK)
            return rc;
    }
    int js = !strcmp(format, "json");
    if (!js && strcmp(format, "text"))
        return cli_fail(CLI_USAGE, "analyze", "--format %s: expected text or json", format);
    if (!file)
        return cli_usage(cli_find("analyze"), 1);
    sm_model m;
    int rc = cli_load("analyze", file, &m);
    if (rc)
        return rc;
    sa_gpu g;
    if (sa_gpu_of(&m, delay, min_idle, &g) != 0) {
        sm_free(&m);
        return cli_fail(CLI_USAGE, "analyze", "out of memory");
    }
    if (!g.n_dev) {
        sa_gpu_free(&g);
        sm_free(&m);
        return cli_fail(CLI_USAGE, "analyze", "%s: no CUDA activity in the run (cuda_activity "
                        "records it: docs/integrations.md)", file);
    }
    sbuf o;
    sbuf_init(&o);
    if (js)
        sx_gpu_analysis_json(&o, m.name, &g, (size_t)-1);
    else
        sx_gpu_analysis_txt(&o, m.name, &g, (size_t)top);
    rc = o.oom ? cli_fail(CLI_USAGE, "analyze", "out of memory") : CLI_OK;
    if (rc == CLI_OK && out && (rc = cli_output_check("analyze", out, file)) == CLI_OK)
        rc = cli_write_output("analyze", out, o.data ? o.data : "", o.len);
    else if (rc == CLI_OK)
        fputs(o.data ? o.data : "", stdout);
    sbuf_free(&o);
    sa_gpu_free(&g);
    sm_free(&m);
    return rc;
}
