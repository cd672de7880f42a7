/* cmd_run.c - `sonde run -- CMD`: profiles an unmodified program. Starts it without a shell,
 * samples its whole process tree (CPU, RSS summed over children, threads, I/O, each process on
 * its own tracks) and the GPUs, shows the live display, forwards SIGINT and SIGTERM sent to
 * sonde, writes the reports when it exits, and exits with its status (128+N for signal N). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config/keys.h"
#include "export/export.h"
#include "record/record.h"
#include "reports/reports.h"
#include "util/alloc.h"

static volatile sig_atomic_t g_child;

/* Where the CPU samples are taken, as the start line says it (choose_in_thread's 0, 1, 2) */
static const char *const g_where_said[] = {
    "", ", its CPU samples taken in its threads (no off-CPU time)",
    ", its Python processes' CPU samples taken in their threads"};

/* A signal sent to sonde by another process (kill, a job scheduler) goes on to the child. One
 * from the terminal already reached the child through the process group: not sent twice. */
static void forward(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (g_child > 0 && info && info->si_code == SI_USER)
        kill((pid_t)g_child, sig);
}

static char *default_name(const char *cmd)
{
    const char *base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    char *r = NULL;
    if (asprintf(&r, "%s-%s", *base ? base : "run", stamp) < 0)
        return NULL;
    return r;
}

/* The run's reports: its own file and those of the programs under it that link libsonde
 * (RUN.pidN.sonde), merged into one model on the run's clock. */
static void write_reports(const char *path, const char *dir, const char *name, unsigned formats,
                          int print_summary)
{
    sm_model m;
    if (sm_read_file(path, &m) != 0) {
        cli_fail(0, "run", "%s", sonde_last_error());
        return;
    }
    cli_join_programs("run", path, &m); /* what it could not join it said */
    if (formats && sx_write_formats(&m, dir, name, formats) != 0)
        cli_fail(0, "run", "%s", sonde_last_error());
    if (print_summary)
        sx_print_summary(&m);
    sm_free(&m);
}

/* The program's own account from the kernel (its rusage, the children it waited for included),
 * as the run's metadata: every report has it. */
static void rusage_metadata(sonde_profiler *p, const struct rusage *ru)
{
    char v[64];
    snprintf(v, sizeof v, "%.6f", (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6);
    sonde_metadata(p, "cpu_user_s", v);
    snprintf(v, sizeof v, "%.6f", (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6);
    sonde_metadata(p, "cpu_system_s", v);
    snprintf(v, sizeof v, "%.1f", (double)ru->ru_maxrss / 1024.0);
    sonde_metadata(p, "peak_rss_mib", v);
    snprintf(v, sizeof v, "%ld", ru->ru_majflt);
    sonde_metadata(p, "page_faults_major", v);
    snprintf(v, sizeof v, "%ld", ru->ru_minflt);
    sonde_metadata(p, "page_faults_minor", v);
    snprintf(v, sizeof v, "%ld", ru->ru_nvcsw);
    sonde_metadata(p, "context_switches_voluntary", v);
    snprintf(v, sizeof v, "%ld", ru->ru_nivcsw);
    sonde_metadata(p, "context_switches_involuntary", v);
}

/* --sample-in-thread: the libsonde.so to preload into the program (src/record/inject.c) into
 * out: $SONDE_LIBRARY, else the one beside the object this code is in (the Python package's
 * sonde command: sonde/libsonde.so beside sonde/_sonde*.so), else the installed one beside this
 * sonde (../LIBDIR), else the one of the build tree it was built in. 0, or -1 with what was
 * looked for in why. */
static int find_library(char *out, size_t cap, char *why, size_t why_cap)
{
    const char *env = getenv("SONDE_LIBRARY");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        if (access(out, R_OK) == 0)
            return 0;
        snprintf(why, why_cap, "SONDE_LIBRARY=%s: %s", env, strerror(errno));
        return -1;
    }
    Dl_info self;
    const char *cut = dladdr((void *)find_library, &self) && self.dli_fname
                          ? strrchr(self.dli_fname, '/') : NULL;
    if (cut) {
        snprintf(out, cap, "%.*s/libsonde.so", (int)(cut - self.dli_fname), self.dli_fname);
        if (access(out, R_OK) == 0)
            return 0;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = 0, strrchr(exe, '/')) : NULL;
    if (slash) {
        *slash = 0;
        snprintf(out, cap, "%s/../%s/libsonde.so.%s", exe, SONDE_INSTALL_LIBDIR, SONDE_SOVERSION);
        if (access(out, R_OK) == 0)
            return 0;
    }
    snprintf(out, cap, "%s", SONDE_BUILD_LIBRARY);
    if (access(out, R_OK) == 0)
        return 0;
    snprintf(why, why_cap, "libsonde.so not found (looked for %.*s%slibsonde.so, "
             "%s/../%s/libsonde.so.%s and %s); set SONDE_LIBRARY to its path",
             cut ? (int)(cut + 1 - self.dli_fname) : 0, cut ? self.dli_fname : "",
             cut ? "" : "?/", slash ? exe : "?", SONDE_INSTALL_LIBDIR, SONDE_SOVERSION,
             SONDE_BUILD_LIBRARY);
    return -1;
}

/* Where the CPU samples (at hz a second, 0: none) are taken, into *in_thread: 0 from outside
 * (a sampler thread of sonde run's, Python frames read from outside); 1 in the program's
 * threads, by libsonde.so preloaded into it (its path into lib), the run taking none from outside
 * (docs/stacks.md, "sonde run --sample-in-thread"); 2 both: the tree's CPython processes sample
 * themselves in their threads, the run samples the rest from outside without reading Python
 * frames, and the merge keeps one sample of each moment (sm__profile_merge). where: the flags'
 * (0 --sample-outside, 1 --sample-in-thread, 2 --sample-python-in-thread), or -1: as c's
 * sample_in_thread says (SONDE_SAMPLE_IN_THREAD), from outside where unset. From outside is the
 * default for every program, Python's too: the threads measured dearer on both machines tried
 * (docs/stacks.md, "What it costs"). 0, or the status to exit with (said) where the threads were
 * asked for and libsonde.so is not found. */
static int choose_in_thread(const sonde_config *c, int where, unsigned hz, char *lib, size_t cap,
                            int *in_thread)
{
    char nolib[4400];
    if (where < 0)
        where = c->sample_in_thread > 0;
    *in_thread = hz ? where : 0;
    if (*in_thread && find_library(lib, cap, nolib, sizeof nolib))
        return cli_fail(CLI_USAGE, "run", "%s: %s",
                        where == 2 ? "--sample-python-in-thread" : "--sample-in-thread", nolib);
    return 0;
}

/* The program's environment for --sample-in-thread: libsonde.so preloaded (before any the
 * user preloads) and the rate its profiler samples at (inject.c); py_only: only its CPython
 * processes sample themselves. 0, or -1 (ENOMEM). */
static int preload_env(const char *lib, unsigned hz, int py_only)
{
    const char *had = getenv("LD_PRELOAD");
    char *v = NULL, num[16];
    if (sonde__asprintf(&v, "%s%s%s", lib, had && *had ? ":" : "", had ? had : "") < 0 || !v)
        return -1;
    snprintf(num, sizeof num, "%u", hz);
    int rc = setenv("LD_PRELOAD", v, 1) || setenv("SONDE_RUN_SAMPLE_HZ", num, 1) ||
                     (py_only ? setenv("SONDE_RUN_SAMPLE_PYTHON_ONLY", "1", 1)
                              : unsetenv("SONDE_RUN_SAMPLE_PYTHON_ONLY"))
                 ? -1
                 : 0;
    sonde__free(v);
    return rc;
}

/* Forks the child that runs cmd: it waits on go until the profiler watches it (reading
 * "DIR\0NAME\0", where a program that links libsonde records into this run), then execs, with
 * no shell; exec's errno comes back on fail. preload: the libsonde.so that takes its CPU samples
 * in its threads (--sample-in-thread; NULL: none), in its CPython processes alone (py_only). The
 * child's pid, or -1 (pipe) or -2 (fork) with errno set. */
static pid_t spawn_waiting(char **cmd, int go[2], int fail[2], const char *preload, unsigned hz,
                           int py_only)
{
    if (pipe2(go, O_CLOEXEC) || pipe2(fail, O_CLOEXEC))
        return -1;
    pid_t child = fork();
    if (child < 0)
        return -2;
    if (child == 0) {
        close(go[1]);
        close(fail[0]);
        char msg[2048];
        size_t got = 0;
        ssize_t r;
        while (got < sizeof msg - 1 && (r = read(go[0], msg + got, sizeof msg - 1 - got)) > 0)
            got += (size_t)r;
        msg[got] = 0;
        if (!got)
            _exit(127);
        if (msg[0]) {
            setenv("SONDE_RUN_DIR", msg, 1);
            setenv("SONDE_RUN_NAME", msg + strlen(msg) + 1, 1);
            if (preload && preload_env(preload, hz, py_only))
                _exit(127);
        }
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(fail[1], &e, sizeof e); /* tell sonde why */
        (void)w;
        _exit(127);
    }
    return child;
}

/* Tells the waiting child to exec (msg, n bytes on go). A SIGTERM forwarded while sonde was
 * still starting may have ended the child already: the write then fails with EPIPE instead of
 * SIGPIPE ending sonde (blocked on this thread, the signal the write raises is taken back), and
 * wait_child reports the child's own end. SIGPIPE is not ignored: the program would inherit
 * that through exec. */
static void tell_go(int fd, const char *msg, size_t n)
{
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t w = write(fd, msg, n);
    if (w < 0 && errno == EPIPE) {
        struct timespec none = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &none) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Waits for the child (through EINTR); how it ended in how, its exit code as a shell gives it. */
static int wait_child(pid_t child, struct rusage *ru, char *how, size_t cap)
{
    int status = 0;
    memset(ru, 0, sizeof *ru);
    while (wait4(child, &status, 0, ru) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) {
        snprintf(how, cap, "exit %d", WEXITSTATUS(status));
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        snprintf(how, cap, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    snprintf(how, cap, "status %d", status);
    return 1;
}

/* --preset, --interval, --format, --name, --flight-recorder and --metrics-port (each NULL when
 * not given) into c. 0, or CLI_USAGE with the message printed. */
static int apply_flags(sonde_config *c, const char *preset, const char *interval,
                       const char *format, const char *name, const char *flight,
                       const char *metrics_port)
{
    if (metrics_port &&
        sonde__key_set(c, sonde__key_find("metrics_port"), metrics_port, "--metrics-port"))
        return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    if (preset && sonde_config_preset(c, preset) != 0)
        return cli_fail(CLI_USAGE, "run", "--preset: %s", sonde_last_error());
    if (interval) {
        const sonde_key *k = sonde__key_find("cpu_interval_s");
        if (sonde__key_set(c, k, interval, "--interval") ||
            sonde__key_set(c, sonde__key_find("gpu_interval_s"), interval, "--interval"))
            return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    }
    if (format && sonde__key_set(c, sonde__key_find("formats"), format, "--format"))
        return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    if (name && sonde__key_set(c, sonde__key_find("name"), name, "--name"))
        return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    if (flight && sonde__key_set(c, sonde__key_find("flight_recorder_s"), flight,
                                 "--flight-recorder"))
        return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    if (flight && c->flight_recorder_s <= 0)
        return cli_fail(CLI_USAGE, "run", "--flight-recorder %s: expected seconds > 0", flight);
    return 0;
}

/* The run's id (128 random bits as hex) into SONDE_RUN_ID: this process's profiler writes it in
 * its INFO and each program that joins the run in its own, so `sonde export RUN.sonde` merges
 * only the RUN.pidN.sonde files that carry it. 0, or -1 with errno set. */
static int set_run_id(void)
{
    unsigned char rnd[16];
    char run_id[2 * sizeof rnd + 1];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return -1;
    for (size_t k = 0; k < sizeof rnd; k++)
        snprintf(run_id + 2 * k, 3, "%02x", rnd[k]);
    return setenv("SONDE_RUN_ID", run_id, 1);
}

/* What `sonde run` was asked (parse_args). */
typedef struct run_args {
    const char *name, *preset, *interval, *format, *dir, *hz_text, *flight, *metrics_port;
    int display, quiet, where; /* where: choose_in_thread's */
    char **cmd;                /* the program and its arguments, after -- */
    unsigned hz;               /* CPU samples a second, with their stacks: 0 turns them off */
} run_args;

/* The command line into ra. 0, or CLI_USAGE said. */
static int parse_args(int argc, char **argv, run_args *ra)
{
    static const char *const opts[] = {"--name", "-o", "--interval", "--preset", "--format",
                                       "--sample-hz", "--display", "--quiet",
                                       "--flight-recorder", "--sample-in-thread",
                                       "--sample-python-in-thread", "--sample-outside",
                                       "--metrics-port", NULL};
    *ra = (run_args){.where = -1, .hz = 999};
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--name") ? &ra->name : !strcmp(a, "-o") ? &ra->dir
                          : !strcmp(a, "--interval") ? &ra->interval
                          : !strcmp(a, "--preset") ? &ra->preset
                          : !strcmp(a, "--format") ? &ra->format
                          : !strcmp(a, "--sample-hz") ? &ra->hz_text
                          : !strcmp(a, "--flight-recorder") ? &ra->flight
                          : !strcmp(a, "--metrics-port") ? &ra->metrics_port : NULL;
        if (slot) {
            if (i + 1 >= argc || !strcmp(argv[i + 1], "--"))
                return cli_fail(CLI_USAGE, "run", "%s needs a value", a);
            *slot = argv[++i];
        } else if (!strcmp(a, "--display")) {
            ra->display = 1;
        } else if (!strcmp(a, "--sample-in-thread") || !strcmp(a, "--sample-outside") ||
                   !strcmp(a, "--sample-python-in-thread")) {
            ra->where = !strcmp(a, "--sample-in-thread") ? 1
                        : !strcmp(a, "--sample-outside") ? 0 : 2;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            ra->quiet = 1;
        } else if (a[0] == '-') {
            return cli_bad_option("run", a, opts);
        } else {
            return cli_fail(CLI_USAGE, "run", "the command goes after --: sonde run [options] -- %s",
                            a);
        }
    }
    if (i >= argc - 1)
        return cli_fail(CLI_USAGE, "run", "no command: sonde run [options] -- CMD [ARGS...]");
    ra->cmd = argv + i + 1;
    if (ra->hz_text) {
        char *end = NULL;
        unsigned long v = strtoul(ra->hz_text, &end, 10);
        if (!*ra->hz_text || *end || v > 10000)
            return cli_fail(CLI_USAGE, "run", "--sample-hz %s: expected 0 (off) to 10000",
                            ra->hz_text);
        ra->hz = (unsigned)v;
    }
    return 0;
}

/* What runs, where its reports go, and, with the flight recorder, how to have them written. */
static void say_started(sonde_profiler *p, const sonde_config *c, const char *prog, pid_t child,
                        int in_thread)
{
    const char *out = c->output_dir ? c->output_dir : "./sonde-out";
    if (sonde_file_path(p)) /* a long run is not silent until its end */
        fprintf(stderr, "sonde run: profiling %s (pid %d)%s; reports in %s/%s.* when it exits\n",
                prog, (int)child, g_where_said[in_thread], out, sonde_name(p));
    if (c->flight_recorder_s > 0)
        fprintf(stderr, "sonde run: flight recorder on %s (pid %d): the last %g s are written to "
                        "%s/%s-triggerN.* on `sonde trigger %d` or when it fails\n", prog,
                (int)child, c->flight_recorder_s, out, sonde_name(p), (int)getpid());
}

int cmd_run(int argc, char **argv)
{
    sonde_config c = sonde_config_default();
    if (sonde_config_from_env(&c) != 0)
        return cli_fail(CLI_USAGE, "run", "%s", sonde_last_error());
    if (set_run_id() != 0)
        return cli_fail(CLI_USAGE, "run", "cannot make the run's id: %s", strerror(errno));
    run_args ra;
    int bad_args = parse_args(argc, argv, &ra);
    if (bad_args)
        return bad_args;
    char **cmd = ra.cmd;
    unsigned hz = ra.hz;
    int quiet = ra.quiet;
    const char *dir = ra.dir;
    int bad_flag = apply_flags(&c, ra.preset, ra.interval, ra.format, ra.name, ra.flight,
                               ra.metrics_port);
    if (bad_flag)
        return bad_flag;
    unsetenv("SONDE_METRICS_PORT"); /* the endpoint is this process's: the program's is not */
    if (c.flight_recorder_s > 0)
        hz = 0; /* the window keeps counters; CPU samples are not kept in it yet */
    if (dir)
        c.output_dir = dir;
    if (ra.display)
        c.real_time_display = 1;
    if (!c.enabled) /* the command runs all the same; a run that writes nothing is said */
        fprintf(stderr, "sonde run: profiling is off (SONDE_ENABLED=0, or enabled: false in "
                        "SONDE_CONFIG): %s runs without it and nothing is written\n", cmd[0]);
    /* looked for before anything is allocated or started */
    char lib[4200];
    int in_thread, bad = choose_in_thread(&c, ra.where, hz, lib, sizeof lib, &in_thread);
    if (bad)
        return bad;
    char *auto_name = NULL;
    if (!c.name) {
        auto_name = default_name(cmd[0]);
        c.name = auto_name;
    }
    c.signal_handlers = 0; /* sonde run handles its own signals */
    /* Written here, once the program's own files are merged in (a watching profiler writes no
     * reports); the file records them, with the CPU samples' own, so that `sonde export FILE`
     * writes the same files again (those of samples only when there are samples). */
    unsigned formats =
        c.formats ? c.formats | SONDE_FORMAT_FOLDED | SONDE_FORMAT_PPROF | SONDE_FORMAT_OFFCPU : 0;
    int print_summary = c.print_summary;
    c.formats = formats;
    c.print_summary = 0;
    c.collect_cpu = c.collect_memory = 1;

    int go[2], fail[2];
    pid_t child = spawn_waiting(cmd, go, fail, in_thread ? lib : NULL, hz, in_thread == 2);
    if (child < 0) {
        int e = errno;
        free(auto_name);
        return cli_fail(CLI_USAGE, "run", "%s: %s", child == -1 ? "pipe" : "fork", strerror(e));
    }
    close(go[0]);
    close(fail[1]);
    g_child = child;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    sonde_profiler *p = sonde__create_watching(&c, child, "", &sonde__reports);
    if (!p) {
        kill(child, SIGKILL);
        free(auto_name);
        return cli_fail(CLI_USAGE, "run", "out of memory");
    }
    if (sonde_status(p) == SONDE_EIO)
        fprintf(stderr, "sonde run: %s; the program runs unprofiled\n", sonde_last_error());
    char cmdline[1024] = "";
    for (size_t k = 0, n = 0; cmd[k] && n < sizeof cmdline - 1; k++)
        n += (size_t)snprintf(cmdline + n, sizeof cmdline - n, "%s%s", k ? " " : "", cmd[k]);
    if (hz && in_thread != 1 && sonde_file_path(p)) { /* attached before the exec: sampled from its
                                                     start */
        char why[256];
        if (sonde__stacks_attach(p, child, hz, in_thread != 2 ? c.sample_python : 0, why,
                                 sizeof why) != 0 && !quiet)
            fprintf(stderr, "sonde run: no CPU samples: %s\n", why);
    }
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)child);
    int fr = c.flight_recorder_s > 0;
    if (!fr)
        sonde_begin(p, "run");
    sonde_metadata(p, "command", cmdline); /* the run's, in the flight recorder's every dump */
    sonde_metadata(p, "pid", pidtxt);
    if (fr)
        sonde_begin(p, "run");
    char msg[2048];
    size_t ml = 0;
    if (sonde_file_path(p)) /* a run that records: children that link libsonde join it */
        ml = (size_t)snprintf(msg, sizeof msg, "%s%c%s", c.output_dir, 0, sonde_name(p)) + 1;
    else
        msg[ml++] = 0;
    tell_go(go[1], msg, ml);
    close(go[1]);
    int exec_errno = 0;
    if (read(fail[0], &exec_errno, sizeof exec_errno) != (ssize_t)sizeof exec_errno)
        exec_errno = 0; /* closed by exec: the program runs */
    close(fail[0]);
    if (!quiet && !exec_errno)
        say_started(p, &c, cmd[0], child, in_thread);

    struct rusage ru;
    char how[64];
    int code = wait_child(child, &ru, how, sizeof how);
    g_child = 0;
    sonde_metadata(p, "exit", how);
    sonde_end(p);
    if (fr && code && !exec_errno) { /* the program failed: its last seconds are written */
        char why[160];
        snprintf(why, sizeof why, "%s ended with %s", cmd[0], how);
        sonde_trigger(p, why);
    }
    if (!exec_errno)
        rusage_metadata(p, &ru);
    const char *path = sonde_file_path(p);
    char *dirpath = NULL, *runname = strdup(sonde_name(p)), *runpath = NULL;
    if (path) {
        dirpath = strdup(c.output_dir);
        runpath = strdup(path);
    }
    int rc = sonde_destroy(p); /* the CPU samples, stacks and functions written first */
    if (runpath && dirpath && runname && !exec_errno)
        write_reports(runpath, dirpath, runname, formats, print_summary);
    if (exec_errno) { /* nothing ran: no reports, one line */
        if (runpath)
            unlink(runpath);
        fprintf(stderr, "sonde run: cannot run %s: %s\n", cmd[0], strerror(exec_errno));
        code = 127;
    }
    free(runpath);
    if (!quiet && dirpath && runname && !exec_errno)
        fprintf(stderr, "sonde run: %s ended with %s; reports in %s/%s.*\n", cmd[0], how, dirpath,
                runname);
    if (rc && rc != SONDE_EOPEN)
        fprintf(stderr, "sonde run: %s\n", sonde_strerror(rc));
    free(dirpath);
    free(runname);
    free(auto_name);
    return code;
}
