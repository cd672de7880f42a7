/* fuzz_yaml.c - libFuzzer target for the YAML configuration loader: any bytes must load or be
 * refused with a message naming the place, and a refused file leaves the configuration
 * unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sonde_config c = sonde_config_default(), before = c;
    if (sonde__config_load_mem(&c, (const char *)data, size, "fuzz.yaml") != 0) {
        if (memcmp(&c, &before, sizeof c) != 0 || strncmp(sonde_last_error(), "fuzz.yaml", 9))
            abort();
    } else if (sonde__config_validate(&c) != 0) {
        abort(); /* a file that loads never leaves an invalid configuration */
    }
    return 0;
}
