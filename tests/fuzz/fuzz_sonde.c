/* fuzz_sonde.c - libFuzzer target for the .sonde reader: any bytes must give a model or a clean
 * error, and a model must export to every format without fault. */
#include <stddef.h>
#include <stdint.h>

#include "export/export.h"
#include "model/model.h"

static int null_sink(void *ctx, const char *d, size_t n)
{
    (void)ctx;
    (void)d;
    (void)n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sm_model m;
    if (sm_read_mem(data, size, "fuzz.sonde", &m) != 0)
        return 0;
    sbuf b;
    sbuf_init(&b);
    sx_json(&m, &b);
    sbuf_reset(&b);
    sx_csv(&m, &b);
    sbuf_reset(&b);
    sx_csv_instances(&m, &b);
    sbuf_reset(&b);
    sx_txt(&m, &b);
    sbuf_free(&b);
    sx_trace(&m, null_sink, NULL);
    sx_perfetto(&m, null_sink, NULL);
    sm_free(&m);
    return 0;
}
