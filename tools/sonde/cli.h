/* cli.h - what the sonde commands share: the command table entry, messages and exit codes,
 * loading a run from a .sonde file or a JSON report. */
#ifndef SONDE_CLI_H
#define SONDE_CLI_H

#include <stddef.h>

#include "model/model.h"

/* Exit codes of every command. */
enum { CLI_OK = 0, CLI_FINDING = 1, CLI_USAGE = 2 };

typedef struct cli_cmd {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    const char *summary;               /* one line for `sonde --help` */
    const char *usage;                 /* the command's --help text */
} cli_cmd;

/* The whole sonde command: argv[0] is the program, argv[1] the subcommand. Returns the exit
 * code. */
int sonde_cli_main(int argc, char **argv);
/* Prints "sonde CMD: message" to stderr and returns code. */
int cli_fail(int code, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints the command's usage to stdout (0) or, after an error, to stderr. */
int cli_usage(const cli_cmd *c, int to_stderr);
/* The entry of a command by name, or NULL. */
const cli_cmd *cli_find(const char *name);
/* An unknown option: the message names it and the closest valid one among opts (NULL-ended). */
int cli_bad_option(const char *cmd, const char *opt, const char *const *opts);

/* Reads a run from a .sonde file or from a NAME.json report (by content, not by name). 0, or 2
 * with the message printed. */
int cli_load(const char *cmd, const char *path, sm_model *m);
/* cli_load with a sink of the reading for a .sonde file (sm_read_file_fed; NULL: none). */
int cli_load_fed(const char *cmd, const char *path, const sm_feed *feed, sm_model *m);
/* 0 when path is a .sonde recording; else CLI_USAGE with what it is printed (a directory, a
 * JSON report, a CSV, a gzip'ed trace...) and what was expected. For the commands that read
 * recordings only (export). */
int cli_check_recording(const char *cmd, const char *path);
/* Under `sonde run NAME`, programs that link libsonde write NAME.pidN.sonde beside NAME.sonde:
 * given NAME.sonde at path, merges each of them into m (the whole run, as `sonde run` reported
 * it). A file that cannot be read is named on stderr and left out. The number joined, or -1
 * (out of memory, said on stderr). cli_load does this for every .sonde file. */
int cli_join_programs(const char *cmd, const char *path, sm_model *m);
/* The runs in directory dir, appended to (*v, *n, *cap: a growing array of allocated paths
 * "dir/NAME"): its NAME.json reports (sonde reports only: not memory snapshots, nor aggregate
 * or diff outputs, nor traces or other programs' JSON) or,
 * when it has none or with sonde_only, its .sonde files (not the RUN.pidN.sonde files that
 * loading RUN.sonde joins); regular files only (a FIFO would block the reader), in name order.
 * A directory with neither is read one level down, in its rank_* subdirectories (the per-rank
 * layout of the profiler decorator and Inferix: OUT/rank_N/), each as above, .sonde files
 * first. 0, or -1 with errno (ENOMEM, or why dir could not be read). */
int cli_dir_runs(const char *dir, int sonde_only, char ***v, size_t *n, size_t *cap);
/* The entries of (*v, *n, *cap) from from on that are `sonde run` recordings (RUN.json or
 * RUN.sonde) whose programs were ranks of a job (their profilers wrote RUN.pidN-rankR.sonde
 * beside it) replaced by those rank files, in name order: for aggregate and merge, the ranks of
 * a job run under `sonde run` (the whole run, launcher and ranks in one, is one run of "world
 * size 1" otherwise). 0, or -1 out of memory (errno ENOMEM). */
int cli_run_ranks(char ***v, size_t *n, size_t *cap, size_t from);
/* A JSON report of schema sonde-report v1 into a model that holds what it says: statistics,
 * throughput, steps, counters, warnings, facts; no instances. 0, or a SONDE_E* code with the
 * message (naming file, line and column) in sonde_last_error(). */
int cli_read_report(const char *path, const char *text, size_t n, sm_model *m);

/* 1 when path is (or leads to) a regular file: directory scans read nothing else (a FIFO would
 * block them). */
int cli_regular_file(const char *path);
/* CLI_OK, or CLI_USAGE with the message printed when out already is the file input (by device
 * and inode, whatever the names). Called for each input before anything is written. */
int cli_output_check(const char *cmd, const char *out, const char *input);
/* Writes data to out through a temporary file renamed over it (a symlink at out is replaced,
 * never followed). CLI_OK, or CLI_USAGE with the message printed. */
int cli_write_output(const char *cmd, const char *out, const char *data, size_t n);

int cmd_export(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_aggregate(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_analyze(int argc, char **argv);

#endif
