/* presets.c - named sets of key values, applied through the key table. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "../util/error.h"
#include "keys.h"

typedef struct preset {
    const char *name;
    const char *const *values; /* "key=value" pairs, NULL-terminated */
} preset;

static const char *const development[] = {
    "collect_cpu=1", "collect_memory=1", "collect_gpu=1", "cpu_interval_s=0.5",
    "gpu_interval_s=0.2", "monitor_gpu_temperature=1", "monitor_gpu_power=1",
    "real_time_display=1", "display_interval_s=5", "formats=" SONDE__FORMATS_DEFAULT, NULL};
static const char *const production[] = {
    "collect_cpu=1", "collect_memory=1", "collect_gpu=1", "cpu_interval_s=5",
    "gpu_interval_s=2", "monitor_gpu_temperature=0", "monitor_gpu_power=0",
    "real_time_display=0", "formats=json", "buffer_mb=16", "max_data_points=2000", NULL};
static const char *const debugging[] = {
    "collect_cpu=1", "collect_memory=1", "collect_gpu=1", "cpu_interval_s=0.05",
    "gpu_interval_s=0.05", "monitor_gpu_temperature=1", "monitor_gpu_power=1",
    "real_time_display=1", "display_interval_s=1", "formats=all", "max_data_points=1000000",
    "flush_interval_s=0.1", "with_stack=1", "record_shapes=1", NULL};

static const preset g_presets[] = {
    {"development", development}, {"production", production}, {"debugging", debugging}};

int sonde__preset_values(const char *name, const char *const **values)
{
    for (size_t i = 0; i < sizeof g_presets / sizeof g_presets[0]; i++)
        if (name && !strcmp(name, g_presets[i].name)) {
            *values = g_presets[i].values;
            return 0;
        }
    return -1;
}

int sonde_config_preset(sonde_config *cfg, const char *name)
{
    if (!cfg)
        return sonde__fail(SONDE_EINVAL, "sonde_config_preset: cfg is NULL");
    const char *const *values;
    if (sonde__preset_values(name, &values))
        return sonde__fail(SONDE_EINVAL,
                           "unknown preset \"%s\" (expected development, production or debugging)",
                           name ? name : "(null)");
    sonde_config c = *cfg;
    for (size_t i = 0; values[i]; i++) {
        char key[64];
        const char *eq = strchr(values[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - values[i]), values[i]);
        char where[96];
        snprintf(where, sizeof where, "preset %s: %s", name, key);
        int rc = sonde__key_set(&c, sonde__key_find(key), eq + 1, where);
        if (rc)
            return rc;
    }
    *cfg = c;
    return 0;
}
