/* serving.c - a serving loop whose live metrics are known, for the metrics endpoint (the e2e case
 * `metrics`). Usage: serving DIR STEPS STOP_FILE
 *
 * Run "serving" (DIR/serving.*), configured from the environment (SONDE_METRICS_PORT, ...).
 * STEPS steps, each begun by sonde_step_begin: "request" holding "prefill" and four "decode"
 * (each sleeping 1 ms), 128 tokens over 0.01 s (sonde_throughput) and 1e9 FLOPs; then it prints
 * "ready" and waits until STOP_FILE exists (at most 120 s), so that the endpoint can be scraped
 * while it runs. Planted totals: request and prefill STEPS calls, decode 4 * STEPS, 128 * STEPS
 * tokens over 0.01 * STEPS s, 1e9 * STEPS FLOPs, STEPS steps. Exit 0, or 1 with a message. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <sonde/sonde.h>

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: serving DIR STEPS STOP_FILE\n");
        return 1;
    }
    sonde_config cfg = sonde_config_default();
    cfg.output_dir = argv[1];
    cfg.name = "serving";
    cfg.formats = SONDE_FORMAT_JSON;
    cfg.collect_gpu = 0;
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "serving: %s\n", sonde_last_error());
        return 1;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p) {
        fprintf(stderr, "serving: %s\n", sonde_last_error());
        return 1;
    }
    int steps = atoi(argv[2]);
    for (int s = 0; s < steps; s++) {
        sonde_step_begin(p);
        sonde_begin(p, "request");
        sonde_begin(p, "prefill");
        nap_ms(1);
        sonde_end(p);
        for (int k = 0; k < 4; k++) {
            sonde_begin(p, "decode");
            nap_ms(1);
            sonde_end(p);
        }
        sonde_throughput_unit(p, 128, 0.01, "tokens");
        sonde_flops(p, 1e9);
        sonde_end(p);
        sonde_step(p);
    }
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < 2400 && access(argv[3], F_OK) != 0; i++)
        nap_ms(50);
    int rc = sonde_destroy(p);
    if (rc)
        fprintf(stderr, "serving: %s\n", sonde_last_error());
    return rc ? 1 : 0;
}
