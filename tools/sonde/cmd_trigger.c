/* cmd_trigger.c - `sonde trigger PID`: asks a running program's flight recorder for a dump, or
 * (--start [--for S], --stop) switches recording on and off in a program with on_demand, by the
 * signal it listens on (trigger_signal, SIGUSR2 unless configured otherwise): a plain signal for
 * a dump, a command in sigqueue's value for the others. The signal is sent only to a process
 * that runs sonde and catches it: one that does not would be ended by it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "record/record.h"

/* A signal by number, or by name with or without SIG (USR1, SIGUSR2, RTMIN+3). -1 when not. */
static int parse_signal(const char *s)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (end != s && !*end)
        return n > 0 && n < NSIG ? (int)n : -1;
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    static const struct { const char *name; int sig; } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"URG", SIGURG},
        {"WINCH", SIGWINCH}, {"PWR", SIGPWR},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(s, names[i].name))
            return names[i].sig;
    if (!strncasecmp(s, "RTMIN+", 6)) {
        n = strtol(s + 6, &end, 10);
        if (end != s + 6 && !*end && n >= 0 && SIGRTMIN + n <= SIGRTMAX)
            return SIGRTMIN + (int)n;
    }
    return -1;
}

/* sig's bit in the signal mask that the line starting with key ("SigCgt:", "ShdPnd:") of
 * /proc/PID/status shows: 1, 0, or -1 unknown. */
static int status_bit(long pid, const char *key, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int r = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl))
            continue;
        unsigned long long mask = strtoull(line + kl, NULL, 16);
        r = (mask >> (sig - 1)) & 1u;
        break;
    }
    fclose(f);
    return r;
}

/* Whether pid catches sig (SigCgt): 1 yes, 0 no, -1 unknown. */
static int catches(long pid, int sig) { return status_bit(pid, "SigCgt:", sig); }

/* Waits, up to 2 s, until no instance of sig sent to pid waits to be taken (ShdPnd): a signal
 * sent while another is pending is merged into it, so two commands sent together (a dump, then
 * --stop) lost the second. 1 when none is pending (or it cannot be told), 0 when one still is. */
static int wait_taken(long pid, int sig)
{
    for (int i = 0; i < 2000; i++) {
        if (status_bit(pid, "ShdPnd:", sig) != 1)
            return 1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

/* After sending: returns once pid has taken the signal, so that the next `sonde trigger` is not
 * merged into it; where it has not within 2 s, says so (CLI_OK still: it was sent). */
static int taken(long pid, int sig)
{
    if (!wait_taken(pid, sig))
        fprintf(stderr, "sonde trigger: process %ld has not taken signal %d yet (it blocks it?): "
                        "it acts on it when it does\n", pid, sig);
    return CLI_OK;
}

/* Whether pid runs a sonde profiler: one of its threads is sonde's writer. */
static int runs_sonde(long pid)
{
    char path[96], comm[64];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%ld/task/%.20s/comm", pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, "sonde-writer", 12))
            found = 1;
        fclose(f);
    }
    closedir(d);
    return found;
}

int cmd_trigger(int argc, char **argv)
{
    static const char *const opts[] = {"--signal", "--start", "--stop", "--for", NULL};
    const char *pid_s = NULL, *sig_s = "SIGUSR2", *for_s = NULL;
    int start = 0, stop = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--start")) {
            start = 1;
        } else if (!strcmp(a, "--stop")) {
            stop = 1;
        } else if (!strncmp(a, "--signal=", 9) || !strncmp(a, "--for=", 6)) {
            *(a[2] == 's' ? &sig_s : &for_s) = strchr(a, '=') + 1;
        } else if (!strcmp(a, "--signal") || !strcmp(a, "--for")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "trigger", "%s needs a value", a);
            *(a[2] == 's' ? &sig_s : &for_s) = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_bad_option("trigger", a, opts);
        } else if (!pid_s) {
            pid_s = a;
        } else {
            return cli_fail(CLI_USAGE, "trigger", "one process at a time (got %s and %s)", pid_s,
                            a);
        }
    }
    if (!pid_s)
        return cli_usage(cli_find("trigger"), 1);
    char *end;
    long pid = strtol(pid_s, &end, 10);
    if (end == pid_s || *end || pid <= 0)
        return cli_fail(CLI_USAGE, "trigger", "%s: expected a process id (a positive integer)",
                        pid_s);
    if (start && stop)
        return cli_fail(CLI_USAGE, "trigger", "--start and --stop together: one at a time");
    if (for_s && !start)
        return cli_fail(CLI_USAGE, "trigger", "--for goes with --start");
    long tenths = 0;
    if (for_s) {
        double secs = strtod(for_s, &end);
        if (end == for_s || *end || !(secs >= 0.1 && secs <= 1e7))
            return cli_fail(CLI_USAGE, "trigger", "--for %s: expected seconds, 0.1 to 1e7",
                            for_s);
        tenths = (long)(secs * 10 + 0.5);
    }
    int sig = parse_signal(sig_s);
    if (sig < 0)
        return cli_fail(CLI_USAGE, "trigger", "--signal %s: expected a signal number or a name "
                                              "such as SIGUSR2 or RTMIN+1", sig_s);
    if (kill((pid_t)pid, 0) != 0)
        return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid,
                        errno == ESRCH ? "no such process" : strerror(errno));
    if (!runs_sonde(pid))
        return cli_fail(CLI_USAGE, "trigger", "process %ld runs no sonde profiler (it has no "
                        "sonde-writer thread); nothing sent", pid);
    int c = catches(pid, sig);
    if (c == 0)
        return cli_fail(CLI_USAGE, "trigger", "process %ld does not catch signal %d (%s): it is "
                        "not running sonde's flight recorder with trigger_signal %d, and the "
                        "signal would end it; nothing sent", pid, sig, strsignal(sig), sig);
    if (!wait_taken(pid, sig))
        return cli_fail(CLI_USAGE, "trigger", "process %ld has not taken the signal %d sent to "
                        "it before for 2 s (it blocks it?): one sent now would be merged into "
                        "that one; nothing sent", pid, sig);
    if (!start && !stop) {
        if (kill((pid_t)pid, sig) != 0)
            return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid, strerror(errno));
        printf("sent signal %d (%s) to process %ld: its flight recorder writes NAME-triggerN.* "
               "in its output directory after flight_recorder_after_s\n", sig, strsignal(sig),
               pid);
        return taken(pid, sig);
    }
    union sigval v;
    v.sival_int = stop ? SONDE_CTL_STOP : (int)(SONDE_CTL_START | tenths << 2);
    if (sigqueue((pid_t)pid, sig, v) != 0)
        return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid, strerror(errno));
    if (stop)
        printf("asked process %ld to stop recording: it writes NAME-ondemandN.* in its output "
               "directory\n", pid);
    else if (tenths)
        printf("asked process %ld to record for %.1f s (on_demand): NAME-ondemandN.* in its "
               "output directory\n", pid, tenths / 10.0);
    else
        printf("asked process %ld to record (on_demand) until sonde trigger %ld --stop\n", pid,
               pid);
    return taken(pid, sig);
}
