/* fuzz_env.c - libFuzzer target for the environment parser: the input is split into the values
 * of the SONDE_* variables; every value must be accepted or refused with a message, and a
 * refused one must leave the configuration unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sonde/sonde.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *vars[] = {"SONDE_ENABLED", "SONDE_OUTPUT_DIR", "SONDE_NAME",
                                 "SONDE_FORMATS", "SONDE_BUFFER_MB", "SONDE_UNIT",
                                 "SONDE_PEAK_FLOPS", "SONDE_FLUSH_INTERVAL_S",
                                 "SONDE_TRIGGER_SECTION_OVER_S", "SONDE_TRIGGER_COUNTER_BELOW"};
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char *save = NULL, *tok = strtok_r(s, "\n", &save);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (tok) {
            setenv(vars[i], tok, 1);
            tok = strtok_r(NULL, "\n", &save);
        } else {
            unsetenv(vars[i]);
        }
    }
    sonde_config c = sonde_config_default(), before = c;
    if (sonde_config_from_env(&c) != 0) {
        if (memcmp(&c, &before, sizeof c) != 0)
            abort();
        if (!sonde_last_error()[0])
            abort();
    }
    free(s);
    return 0;
}
