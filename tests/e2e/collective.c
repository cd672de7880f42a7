/* collective.c - a job whose ranks wait for a straggler in a collective, for sonde aggregate's
 * rank analysis (the e2e case `ranks`). Usage: collective DIR NAME WORLD SLOW STEPS
 *
 * Forks WORLD ranks (NAME-rankN in DIR), which run STEPS steps (each begun by sonde_step_begin)
 * of "step" holding "forward" (5 ms; rank SLOW 25 ms) and "backward" (5 ms, then "allreduce":
 * a barrier of every rank, then 2 ms). Planted: rank SLOW is the last into every allreduce, the
 * others wait about 20 ms a step in it for rank SLOW; no rank computes more than another
 * elsewhere. The sleeps may wake late on a loaded machine (the tests' bounds allow for it).
 * Exit 0, or 1 with a message. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int rank_main(const char *dir, const char *name, int rank, int world, int slow, int steps,
                     pthread_barrier_t *all)
{
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = dir;
    cfg.name = name;
    cfg.formats = SONDE_FORMAT_JSON;
    cfg.collect_gpu = cfg.collect_cpu = cfg.collect_memory = 0;
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world);
    if (sonde_config_set(&cfg, "rank", r) || sonde_config_set(&cfg, "world_size", w)) {
        fprintf(stderr, "collective: %s\n", sonde_last_error());
        return 1;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p) {
        fprintf(stderr, "collective: %s\n", sonde_last_error());
        return 1;
    }
    pthread_barrier_wait(all); /* every rank starts its steps together */
    for (int s = 0; s < steps; s++) {
        sonde_step_begin(p);
        sonde_begin(p, "step");
        sonde_begin(p, "forward");
        nap_ms(rank == slow ? 25 : 5);
        sonde_end(p);
        sonde_begin(p, "backward");
        nap_ms(5);
        sonde_begin(p, "allreduce");
        pthread_barrier_wait(all);
        nap_ms(2);
        sonde_end(p);
        sonde_end(p);
        sonde_end(p);
        sonde_step(p);
    }
    return sonde_destroy(p) ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: collective DIR NAME WORLD SLOW STEPS\n");
        return 1;
    }
    int world = atoi(argv[3]), slow = atoi(argv[4]), steps = atoi(argv[5]);
    if (world < 2 || world > 64 || steps < 1) {
        fprintf(stderr, "collective: WORLD 2..64 and STEPS >= 1\n");
        return 1;
    }
    pthread_barrier_t *all = mmap(NULL, sizeof *all, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_barrierattr_t at;
    if (all == MAP_FAILED || pthread_barrierattr_init(&at) ||
        pthread_barrierattr_setpshared(&at, PTHREAD_PROCESS_SHARED) ||
        pthread_barrier_init(all, &at, (unsigned)world)) {
        fprintf(stderr, "collective: no barrier shared by the ranks\n");
        return 1;
    }
    for (int r = 0; r < world; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("collective: fork");
            return 1;
        }
        if (pid == 0)
            _exit(rank_main(argv[1], argv[2], r, world, slow, steps, all));
    }
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
            failed = 1;
    }
    if (failed)
        fprintf(stderr, "collective: a rank failed\n");
    return failed;
}
