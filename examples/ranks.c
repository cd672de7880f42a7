/* ranks.c - an MPI job profiled with sonde: each rank computes, rank 2 more slowly (a
 * straggler), then all exchange. sonde finds the rank from Open MPI's environment and writes
 * OUTDIR/ranks-rankN.*; `sonde aggregate` and `sonde merge` put the ranks together.
 * Run: mpirun -np 4 ./ranks [OUTDIR] */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

#include <sonde/sonde.h>

static void spin_ms(double ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6 < ms);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sonde_config c = sonde_config_default();
    c.name = "ranks";
    c.output_dir = argc > 1 ? argv[1] : "./sonde-out";
    c.formats = SONDE_FORMAT_JSON;
    c.collect_gpu = 0;
    sonde_config_from_env(&c);
    sonde_profiler *p = sonde_create(&c);
    double sum = 0;
    for (int step = 0; step < 4; step++) {
        {
            SONDE_SCOPE(p, "compute");
            spin_ms(rank == 2 ? 40 : 20);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        sonde_sync(p); /* every rank leaves the barrier at about the same instant */
        {
            SONDE_SCOPE(p, "exchange");
            double mine = rank + step, all = 0;
            MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            sum += all;
        }
        sonde_step(p);
    }
    int rc = sonde_destroy(p);
    if (rank == 0)
        printf("ranks: %d ranks, checksum %.0f\n", size, sum);
    MPI_Finalize();
    return rc == 0 ? 0 : 1;
}
