/* rank.c - the rank of this process in a distributed job, from the launchers' environment. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "record.h"
#include "../util/env.h"

static int env_int(const char *a, const char *b, const char *c, const char *d)
{
    const char *names[] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        const char *v = names[i] ? sonde__getenv(names[i]) : NULL;
        if (v && *v) {
            char *end;
            long x = strtol(v, &end, 10);
            if (!*end && x >= 0 && x < 1000000)
                return (int)x;
        }
    }
    return -1;
}

void sonde__detect_rank(sonde_config *c)
{
    /* explicit configuration wins; then torchrun, Open MPI, MPICH/PMI, Slurm */
    if (c->rank < 0)
        c->rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID");
    if (c->world_size < 0)
        c->world_size = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS");
    if (c->local_rank < 0)
        c->local_rank = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                "SLURM_LOCALID");
}

void sonde_job_rank(int *rank, int *world_size, int *local_rank)
{
    sonde_config c = sonde_config_default();
    c.rank = c.world_size = c.local_rank = -1;
    sonde__detect_rank(&c);
    if (rank)
        *rank = c.rank;
    if (world_size)
        *world_size = c.world_size;
    if (local_rank)
        *local_rank = c.local_rank;
}
