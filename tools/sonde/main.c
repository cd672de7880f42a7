/* main.c - the sonde command: one table of subcommands, help, version, and the closest command
 * for a mistyped one. Exit codes: 0 done, 1 a finding asked to fail on, 2 bad usage or input.
 * sonde_cli_main is the whole command; the executable's main (sonde_main.c) calls it, and so
 * does the Python extension (sonde.cli, `python -m sonde`). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config/keys.h"
#include "util/suggest.h"
#include <sonde/sonde.h>

static const cli_cmd g_cmds[] = {
    {"export", cmd_export, "write reports (json, csv, txt, trace, html, ...) from a .sonde file",
     "usage: sonde export FILE.sonde [--format LIST] [-o DIR] [--set KEY=VALUE]... [--quiet]\n"
     "  LIST: any of " SONDE__FORMAT_ITEMS "\n"
     "  Regenerates the reports the library wrote for the run, from its .sonde file: the same\n"
     "  files, byte for byte. Without --format, the formats the run was configured with (the\n"
     "  library's default: " SONDE__FORMATS_DEFAULT "). DIR defaults to the file's\n"
     "  directory. The files, in DIR (tensorboard's in DIR/plugins/profile/RUN/, named\n"
     "  HOST_PID.pt.trace.json.gz: tensorboard --logdir DIR):\n" SONDE__FORMAT_FILES
     "  --set KEY=VALUE changes a key the reports read as they are written: trace_max_events,\n"
     "  report_max_sections, report_max_records, html_max_spans, bottleneck_threshold,\n"
     "  max_data_points.\n"},
    {"summary", cmd_summary, "print the text summary of a run",
     "usage: sonde summary FILE(.sonde|.json) [--sort total|self|count|mean] [--top N] [--wide]\n"
     "       sonde summary FILE.sonde --table NAME\n"
     "  The table of NAME.txt, from a .sonde file or a NAME.json report: 100 columns wide;\n"
     "  --wide adds Min, Max and P90 and keeps names up to 40 characters. --table NAME prints\n"
     "  instead the table of a consumer of the reading (docs/architecture.md):\n"
     "    instants-by-section: how many instants (sonde_event) each section name had in it\n"},
    {"report", cmd_report, "write the HTML report of a run",
     "usage: sonde report FILE(.sonde|.json) [-o OUT.html]\n"
     "  The self-contained HTML report: from a .sonde file with the timeline and counter\n"
     "  charts, from a NAME.json report with what it holds. OUT defaults to NAME.html beside\n"
     "  FILE.\n"},
    {"config", cmd_config, "list the configuration keys, or check a YAML file",
     "usage: sonde config --list\n"
     "       sonde config --check FILE.yaml\n"
     "  --list prints every key: type, default, range, environment variable and flag.\n"
     "  --check validates a file; errors name the file, line, column and key.\n"},
    {"aggregate", cmd_aggregate, "one report from every rank of a distributed job",
     "usage: sonde aggregate DIR|FILES... [--format text|json|csv|markdown|html] [-o FILE]\n"
     "                       [--by section|session]\n"
     "  Per section (or session) name across ranks: count, min / mean / max / stddev of its\n"
     "  total time, the slowest rank and how far over the median it is; per-rank totals,\n"
     "  throughput summed over ranks, GPU figures per rank. Missing or duplicate ranks, reports\n"
     "  of different runs and sections some ranks lack are named. Where the ranks recorded\n"
     "  communication (collectives by name), who waited for whom step by step: each rank's\n"
     "  wait, the straggler that caused it, and the slowest rank judged without the wait.\n"
     "  --format html: a page with the ranks' compute, communication and wait as bars.\n"},
    {"analyze", cmd_analyze, "where the GPU time went and why the GPU waited",
     "usage: sonde analyze gpu RUN [--format text|json] [-o FILE] [--kernel-delay-us 30]\n"
     "                         [--min-idle-us 50] [--top 15]\n"
     "  Each GPU's time as idle, compute and non-compute (Holistic Trace Analysis's temporal\n"
     "  breakdown), its streams' idle time as host wait, kernel wait and other, what the CPU was\n"
     "  doing in the host waits of --min-idle-us or more (the launching thread's sections and\n"
     "  CPU samples), and the kernels by total time (docs/analysis.md).\n"},
    {"merge", cmd_merge, "one trace of every rank on one time axis",
     "usage: sonde merge DIR|FILES... -o merged.trace.json.gz\n"
     "       sonde merge DIR|FILES... -o job.sqlite [--format sqlite]\n"
     "  A process per rank (\"rank N (host)\", in rank order), every rank on one time axis from\n"
     "  its clock anchors, tightened by sonde_sync instants when every rank has them; counters\n"
     "  kept per rank. Reads one rank at a time. --format sqlite (the default for -o *.sqlite or\n"
     "  *.db): every rank's run in one SQLite database, a row of runs each (rank, label, align_ns:\n"
     "  its shift onto the one time axis; docs/formats.md).\n"},
    {"diff", cmd_diff, "compare runs section by section; gate CI on regressions",
     "usage: sonde diff BASE NEW [options]\n"
     "       sonde diff BASE... -- NEW... [options]\n"
     "  --threshold 5%  --fail-on-regression  --format text|json|markdown\n"
     "  --stat mean|p50|p90|p99  --test mann-whitney|welch  --per-instance  --min-runs N\n"
     "  --correction holm|bh|none  --strict\n"
     "  Each side: .sonde files, JSON reports, directories or globs. Each run gives one figure\n"
     "  per section (its mean time per instance); a section regressed when the new runs'\n"
     "  median is over the threshold above the base runs' and a Mann-Whitney U test across\n"
     "  runs gives p < 0.05, Holm-adjusted for the sections tested together (--correction);\n"
     "  a section not found changed says what change its runs could have shown. Run each\n"
     "  side 5 times or more; with one run a side a change over the\n"
     "  threshold is a regression (not tested). --fail-on-regression exits 1 on one; 2 is\n"
     "  misuse (and, with --strict, two sides that do not look like the same program).\n"},
    {"demo", cmd_demo, "run the built-in demo pipeline (as make demo does)",
     "usage: sonde demo [--steps N] [--blocks K] [--frames F] [--dim D] [--quiet] [--profile*]\n"
     "  A CPU pipeline shaped like diffusion video generation, profiled; prints its summary\n"
     "  and the files it wrote (./sonde-out by default).\n"},
    {"bench", cmd_bench, "run a command N times: the repeated runs sonde diff wants",
     "usage: sonde bench [--runs 5] [--warmup 1] [--name NAME] [-o DIR] -- CMD [ARGS...]\n"
     "  Runs CMD under sonde run: --warmup times into DIR/warmup, then --runs times into\n"
     "  DIR/NAME-1 ... NAME-N (a JSON report and a .sonde file each; DIR is ./sonde-bench),\n"
     "  and prints each section's mean time per instance over the runs: mean ± standard\n"
     "  deviation, min and max. sonde diff DIR -- OTHER_DIR compares two sets of runs.\n"},
    {"trigger", cmd_trigger, "a running program's flight recorder dump, or recording on demand",
     "usage: sonde trigger PID [--signal SIG]\n"
     "       sonde trigger PID --start [--for S] | --stop [--signal SIG]\n"
     "  Sends SIG (default SIGUSR2, the default trigger_signal) to PID: its flight recorder\n"
     "  (flight_recorder_s) writes the last seconds as NAME-triggerN.sonde and its reports;\n"
     "  with --start / --stop, a program with on_demand starts recording (for S seconds, or\n"
     "  until --stop) into NAME-ondemandN and writes its reports (docs/flight-recorder.md).\n"
     "  Refuses a process without sonde, or that does not catch SIG, which would end it.\n"},
    {"run", cmd_run, "profile any program: CPU, memory and GPUs of its process tree",
     "usage: sonde run [--name NAME] [-o DIR] [--interval S] [--preset NAME]\n"
     "                 [--format LIST] [--sample-hz N]\n"
     "                 [--sample-outside | --sample-in-thread | --sample-python-in-thread]\n"
     "                 [--display] [--quiet] [--flight-recorder S] [--metrics-port P]\n"
     "                 -- CMD [ARGS...]\n"
     "  Starts CMD without a shell, samples its whole process tree and the GPUs, forwards\n"
     "  SIGINT and SIGTERM to it, writes the reports when it exits, and exits with its status\n"
     "  (128+N when it died of signal N). A child that links libsonde records into the same\n"
     "  run. --sample-hz: CPU samples with call stacks a second (default 999; 0: off): the top\n"
     "  functions in the reports, every stack in NAME.folded and NAME.pb.gz (pprof)\n"
     "  (docs/stacks.md). --sample-outside (the default): taken by a sampler of sonde run's,\n"
     "  Python frames (CPython 3.11+) read from outside. --sample-in-thread: taken in the\n"
     "  program's own threads by libsonde.so preloaded into it (SONDE_LIBRARY: its path), no\n"
     "  sampler woken a sample, no off-CPU periods. --sample-python-in-thread: the tree's\n"
     "  CPython processes sample themselves so, the rest is sampled from outside. The threads\n"
     "  cost more than outside where signals are dear (docs/stacks.md, \"What it costs\").\n"
     "  --flight-recorder S: keep the last S seconds of its figures and write them only on\n"
     "  `sonde trigger PID-OF-SONDE-RUN` or when CMD fails, as NAME-triggerN.*\n"
     "  (docs/flight-recorder.md). --metrics-port P: the process tree's CPU, memory and GPU\n"
     "  figures for Prometheus at http://127.0.0.1:P/metrics while it runs (SONDE_METRICS_PORT\n"
     "  is not passed on: a program's own profiler does not compete for the port;\n"
     "  docs/monitoring.md, \"Live metrics\").\n"},
};
#define N_CMDS (sizeof g_cmds / sizeof g_cmds[0])

const cli_cmd *cli_find(const char *name)
{
    for (size_t i = 0; i < N_CMDS; i++)
        if (!strcmp(g_cmds[i].name, name))
            return &g_cmds[i];
    return NULL;
}

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sonde%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_usage(const cli_cmd *c, int to_stderr)
{
    fputs(c->usage, to_stderr ? stderr : stdout);
    return to_stderr ? CLI_USAGE : CLI_OK;
}

int cli_bad_option(const char *cmd, const char *opt, const char *const *opts)
{
    size_t n = 0;
    while (opts[n])
        n++;
    const char *s = suggest(opt, opts, n);
    if (s)
        return cli_fail(CLI_USAGE, cmd, "unknown option %s (did you mean %s?); see sonde %s --help",
                        opt, s, cmd);
    return cli_fail(CLI_USAGE, cmd, "unknown option %s; see sonde %s --help", opt, cmd);
}

static void help(FILE *out)
{
    fprintf(out, "sonde %s - profiler for ML inference and training pipelines\n\n"
                 "usage: sonde COMMAND [ARGS...]\n\ncommands:\n", sonde_version());
    for (size_t i = 0; i < N_CMDS; i++)
        fprintf(out, "  %-9s %s\n", g_cmds[i].name, g_cmds[i].summary);
    fprintf(out, "\n`sonde help COMMAND` or `sonde COMMAND --help` for a command's options.\n"
                 "Exit codes: 0 done, 1 a finding asked to fail on, 2 bad usage or input.\n");
}

int sonde_cli_main(int argc, char **argv)
{
    if (argc < 2) {
        help(stderr);
        return CLI_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        help(stdout);
        return CLI_OK;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
        printf("sonde %s\n", sonde_version());
        return CLI_OK;
    }
    if (!strcmp(a, "help")) {
        if (argc < 3) {
            help(stdout);
            return CLI_OK;
        }
        const cli_cmd *c = cli_find(argv[2]);
        if (!c)
            return cli_fail(CLI_USAGE, NULL, "no command \"%s\"; see sonde --help", argv[2]);
        return cli_usage(c, 0);
    }
    const cli_cmd *c = cli_find(a);
    if (!c) {
        const char *names[N_CMDS];
        for (size_t i = 0; i < N_CMDS; i++)
            names[i] = g_cmds[i].name;
        const char *s = a[0] != '-' ? suggest(a, names, N_CMDS) : NULL;
        if (s)
            return cli_fail(CLI_USAGE, NULL, "unknown command \"%s\" (did you mean \"%s\"?)", a, s);
        return cli_fail(CLI_USAGE, NULL, "unknown command \"%s\"; see sonde --help", a);
    }
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_usage(c, 0);
    return c->run(argc - 1, argv + 1);
}
