/* minimal.c - the smallest useful sonde program: a session, nested sections, a metric and
 * throughput. Build against an install with: cc minimal.c $(pkg-config --cflags --libs sonde) */
#include <stdio.h>

#include <sonde/sonde.h>

static double work(int n)
{
    volatile double acc = 0;
    for (int i = 0; i < n; i++)
        acc += (double)i * 0.5;
    return acc;
}

static void load_model(sonde_profiler *p)
{
    SONDE_FUNCTION(p);
    work(200000);
}

int main(void)
{
    sonde_config cfg = sonde_config_default();
    cfg.name = "minimal";
    if (sonde_config_from_env(&cfg) != 0) {
        fprintf(stderr, "minimal: %s\n", sonde_last_error());
        return 2;
    }
    sonde_profiler *p = sonde_create(&cfg);
    if (!p)
        return 1;
    sonde_session_begin(p, "inference");
    load_model(p);
    for (int i = 0; i < 10; i++) {
        SONDE_SCOPE(p, "decode");
        sonde_metadata(p, "batch", "8");
        work(100000);
        sonde_metric(p, "loss", 1.0 / (i + 1));
        sonde_throughput(p, 64, 0);
        sonde_step(p);
    }
    sonde_session_end(p);
    printf("wrote %s\n", sonde_file_path(p) ? sonde_file_path(p) : "(nothing)");
    return sonde_destroy(p) == 0 ? 0 : 1;
}
