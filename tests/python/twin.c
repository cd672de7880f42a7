/* twin.c - the C program that tests/python/test_sonde.py's workload mirrors call for call: the
 * Python binding must write the same report as a C program does. Usage: twin OUTDIR NAME */
#include <stdio.h>
#include <time.h>

#include <sonde/sonde.h>

static void nap(void)
{
    struct timespec ts = {0, 2000000}; /* 2 ms */
    nanosleep(&ts, NULL);
}

static void work(sonde_profiler *p)
{
    sonde_begin(p, "work");
    nap();
    sonde_end(p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: twin OUTDIR NAME\n");
        return 2;
    }
    sonde_config cfg = sonde_config_default();
    cfg.name = argv[2];
    cfg.output_dir = argv[1];
    cfg.collect_cpu = cfg.collect_memory = cfg.collect_gpu = 0;
    cfg.formats = SONDE_FORMAT_JSON;
    sonde_profiler *p = sonde_create(&cfg);
    if (!p)
        return 1;
    sonde_metadata(p, "model", "tiny");
    sonde_session_begin(p, "generate");
    sonde_begin(p, "load");
    sonde_metadata(p, "weights", "w.bin");
    sonde_model_params(p, "tiny", 1234);
    nap();
    sonde_end(p);
    for (int i = 0; i < 5; i++) {
        sonde_begin(p, "decode");
        sonde_metadata(p, "batch", i % 2 ? "1" : "0");
        sonde_begin(p, "attention");
        sonde_flops(p, 1e6);
        nap();
        sonde_end(p);
        sonde_metric(p, "loss", 1.0 / (i + 1));
        sonde_throughput(p, 16, 0);
        sonde_end(p);
        sonde_step(p);
    }
    sonde_event(p, "checkpoint");
    const char *keys[] = {"progress", "stage"}, *values[] = {"0.5", "decode"};
    sonde_event_args(p, "milestone", keys, values, 2);
    for (int i = 1; i <= 3; i++)
        sonde_counter(p, "queue", i);
    for (int i = 0; i < 3; i++)
        work(p);
    sonde_session_end(p);
    sonde_session_begin(p, "post");
    sonde_begin(p, "write");
    sonde_throughput_unit(p, 3, 0.01, "frames");
    sonde_end(p);
    sonde_session_end(p);
    return sonde_destroy(p) ? 1 : 0;
}
