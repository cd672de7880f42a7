/* config.c - configuration defaults and the environment (SONDE_*), both driven by the key table
 * in keys.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/record.h"
#include "keys.h"

sonde_config sonde_config_default(void)
{
    sonde_config c;
    memset(&c, 0, sizeof c);
    size_t n;
    const sonde_key *k = sonde__keys(&n);
    for (size_t i = 0; i < n; i++) {
        if (!k[i].def)
            continue; /* a string that defaults to NULL */
        if (k[i].type == KEY_STRING)
            *(const char **)(void *)((char *)&c + k[i].offset) = k[i].def;
        else
            sonde__key_set(&c, &k[i], k[i].def, "default");
    }
    return c;
}

int sonde_config_from_env(sonde_config *cfg)
{
    if (!cfg)
        return sonde__fail(SONDE_EINVAL, "sonde_config_from_env: cfg is NULL");
    sonde_config c = *cfg; /* all or nothing */
    const char *file = getenv("SONDE_CONFIG");
    if (file && *file) {
        int rc = sonde_config_load_file(&c, file);
        if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "SONDE_CONFIG: %s", sonde_last_error());
            return sonde__fail(rc, "%s", msg);
        }
    }
    size_t n;
    const sonde_key *k = sonde__keys(&n);
    for (size_t i = 0; i < n; i++) {
        char var[64];
        sonde__key_env(&k[i], var, sizeof var);
        const char *v = getenv(var);
        if (!v || !*v)
            continue;
        int rc = sonde__key_set(&c, &k[i], v, var);
        if (rc)
            return rc;
    }
    *cfg = c;
    return 0;
}
