/* cmd_trigger.c - `sonde trigger PID`: asks a running program's flight recorder for a dump, or
 * (--start [--for S], --stop) switches recording on and off in a program with on_demand, by the
 * signal it listens on (trigger_signal, SIGUSR2 unless configured otherwise), with the command
 * in sigqueue's value (a dump too, so that a program's own handler of the signal does not take
 * it). The signal is sent only to a process that runs sonde and catches it: one that does not
 * would be ended by it; and through a pidfd opened before those checks, so a pid reused in the
 * meantime never gets it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* Sends sig to pid (held by pidfd pfd; -1: by pid) with a SONDE_CTL_* command in sigqueue's
 * value, so the process tells it from a signal sonde did not send (a program with a handler of
 * its own for the signal gets those; docs/flight-recorder.md). -1 with errno set. */
static int send_command(long pid, int pfd, int sig, int cmd)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = cmd;
    if (pfd >= 0)
        return (int)syscall(SYS_pidfd_send_signal, pfd, sig, &info, 0);
    return sigqueue((pid_t)pid, sig, info.si_value);
}

/* The checks that make the signal safe to send, then the command (a dump, --start, --stop). */
static int check_and_send(long pid, int pfd, int sig, int start, int stop, long tenths)
{
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
    int cmd = stop ? SONDE_CTL_STOP : start ? (int)(SONDE_CTL_START | tenths << 2)
                                            : SONDE_CTL_TRIGGER;
    if (send_command(pid, pfd, sig, cmd) != 0)
        return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid,
                        errno == ESRCH ? "it ended before the signal was sent; nothing sent"
                                       : strerror(errno));
    if (!start && !stop)
        printf("sent signal %d (%s) to process %ld: its flight recorder writes NAME-triggerN.* "
               "in its output directory after flight_recorder_after_s\n", sig, strsignal(sig),
               pid);
    else if (stop)
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
    /* The process is held by a pidfd before it is looked at: if it ends and its pid is reused
     * during the checks (they may wait 2 s), the signal goes nowhere, never to the newcomer. */
    int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pfd < 0 && errno != ENOSYS)
        return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid,
                        errno == ESRCH ? "no such process" : strerror(errno));
    if (pfd < 0 && kill((pid_t)pid, 0) != 0) /* a kernel before 5.3: by pid, as before */
        return cli_fail(CLI_USAGE, "trigger", "process %ld: %s", pid,
                        errno == ESRCH ? "no such process" : strerror(errno));
    int rc = check_and_send(pid, pfd, sig, start, stop, tenths);
    if (pfd >= 0)
        close(pfd);
    return rc;
}
