/* stages.c - a run whose stages take set times (sleeps, which a busy machine disturbs far less
 * than computation), for the end-to-end test of `sonde diff`. STAGES_SLOW=STAGE=FRACTION makes
 * one stage that much slower. Usage: stages DIR NAME */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sonde/sonde.h>

static double slow(const char *stage)
{
    const char *v = getenv("STAGES_SLOW");
    size_t n = strlen(stage);
    return v && !strncmp(v, stage, n) && v[n] == '=' ? atof(v + n + 1) : 0;
}

static void nap(double ms)
{
    struct timespec ts = {0, (long)(ms * 1e6)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv)
{
    sonde_config c = sonde_config_default();
    c.output_dir = argc > 1 ? argv[1] : "./sonde-out";
    c.name = argc > 2 ? argv[2] : "stages";
    c.formats = SONDE_FORMAT_JSON;
    c.collect_cpu = c.collect_memory = c.collect_gpu = 0;
    sonde_profiler *p = sonde_create(&c);
    {
        SONDE_SCOPE(p, "load");
        nap(20 * (1 + slow("load")));
    }
    sonde_session_begin(p, "generate");
    for (int i = 0; i < 20; i++) {
        SONDE_SCOPE(p, "step");
        nap(10 * (1 + slow("step")));
    }
    sonde_session_end(p);
    for (int i = 0; i < 8; i++) {
        SONDE_SCOPE(p, "decode");
        nap(8 * (1 + slow("decode")));
    }
    return sonde_destroy(p);
}
