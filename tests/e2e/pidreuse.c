/* pidreuse.c - the test of `sonde trigger PID` against a reused pid: the signal must never reach
 * a process that took PID after the one sonde trigger checked had ended. Run as root at the
 * head of a PID namespace of its own (unshare --pid --fork --mount-proc), where the next pid can
 * be chosen (/proc/sys/kernel/ns_last_pid).
 * Usage: pidreuse SONDE FLIGHT DIR
 *   1. starts FLIGHT held DIR (a flight recorder whose SIGUSR2 stays blocked) and sends it
 *      SIGUSR2, which stays pending;
 *   2. starts SONDE trigger PID, which finds a sonde process that catches the signal, then
 *      waits (up to 2 s) for the pending one to be taken;
 *   3. meanwhile kills PID, reaps it and forks a newcomer at once with that pid;
 *   4. the newcomer, whose SIGUSR2 would end it, must live.
 * Exit 0 when it lived, 1 when the signal ended it, 2 when the test could not be set up. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: pidreuse SONDE FLIGHT DIR\n");
        return 2;
    }
    int out[2];
    if (pipe(out) != 0)
        return 2;
    pid_t p = fork();
    if (p == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execl(argv[2], argv[2], "held", argv[3], (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char buf[256] = "";
    size_t got = 0;
    while (got < sizeof buf - 1 && !strstr(buf, "ready")) {
        ssize_t n = read(out[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
    }
    if (p < 0 || !strstr(buf, "ready")) {
        fprintf(stderr, "pidreuse: the flight program did not start\n");
        return 2;
    }
    kill(p, SIGUSR2); /* blocked there: pending, so sonde trigger waits for it to be taken */
    char pid_s[16];
    snprintf(pid_s, sizeof pid_s, "%d", (int)p);
    pid_t t = fork();
    if (t == 0) {
        execl(argv[1], argv[1], "trigger", pid_s, (char *)NULL);
        _exit(127);
    }
    sleep_ms(400); /* sonde trigger has checked the process and waits for the pending signal */
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (!f || fprintf(f, "%d", (int)p - 1) < 0 || fclose(f) != 0) {
        fprintf(stderr, "pidreuse: cannot set ns_last_pid (not a PID namespace's root?)\n");
        return 2;
    }
    pid_t q = fork();
    if (q == 0) { /* the newcomer: SIGUSR2's default action would end it */
        sleep_ms(5000);
        _exit(0);
    }
    int ts = 0, qs = 0;
    waitpid(t, &ts, 0);
    sleep_ms(100);
    pid_t r = waitpid(q, &qs, WNOHANG);
    printf("newcomer %d %s pid %d; sonde trigger exited %d\n", (int)q,
           q == p ? "took" : "did not take", (int)p, WIFEXITED(ts) ? WEXITSTATUS(ts) : -1);
    if (r == q && WIFSIGNALED(qs)) {
        printf("the newcomer was ended by signal %d\n", WTERMSIG(qs));
        return 1;
    }
    kill(q, SIGKILL);
    waitpid(q, NULL, 0);
    return 0;
}
