/* fuzz_report.c - libFuzzer target for the JSON report reader of the sonde command: any bytes
 * must give a model or a clean error, and a model must print as a summary. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "../../tools/sonde/cli.h"
#include "export/export.h"

/* load.c's file-level helper reports through this; the reader itself never calls it */
int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
    (void)cmd;
    (void)fmt;
    return code;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sm_model m;
    if (cli_read_report("fuzz.json", (const char *)data, size, &m) != 0)
        return 0;
    sbuf b;
    sbuf_init(&b);
    sx_txt_opts(&m, &b, SX_SORT_SELF, 3, m.n_stats % 2);
    sbuf_free(&b);
    sm_free(&m);
    return 0;
}
