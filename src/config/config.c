/* config.c - configuration defaults and the environment (SONDE_*), both driven by the key table
 * in keys.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/record.h"
#include "keys.h"

/* python/sonde keeps a sonde_config in this many bytes of opaque storage (python/sonde/_native.py,
 * CONFIG_BYTES) and reaches its fields only through sonde_config_set/get. */
_Static_assert(sizeof(sonde_config) <= 1024, "sonde_config outgrew python/sonde's storage");

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

int sonde_config_set(sonde_config *cfg, const char *key, const char *value)
{
    if (!cfg || !key)
        return sonde__fail(SONDE_EINVAL, "sonde_config_set: %s is NULL", cfg ? "key" : "cfg");
    const sonde_key *k = sonde__key_find(key);
    if (!k) {
        const char *s = sonde__key_suggest(key);
        return sonde__fail(SONDE_ENOTFOUND, "sonde_config_set: unknown key \"%s\"%s%s%s", key,
                           s ? " (did you mean \"" : "", s ? s : "", s ? "\"?)" : "");
    }
    if (!value && k->type == KEY_STRING) { /* back to "not set" (the default's NULL) */
        *(const char **)(void *)((char *)cfg + k->offset) = NULL;
        return 0;
    }
    char where[96];
    snprintf(where, sizeof where, "sonde_config_set: %s", k->name);
    if (!value)
        return sonde__fail(SONDE_EINVAL, "%s: value is NULL", where);
    return sonde__key_set(cfg, k, value, where);
}

int sonde_config_get(const sonde_config *cfg, const char *key, char *out, size_t cap)
{
    if (!cfg || !key || (!out && cap))
        return sonde__fail(SONDE_EINVAL, "sonde_config_get: %s is NULL",
                           !cfg ? "cfg" : !key ? "key" : "out");
    const sonde_key *k = sonde__key_find(key);
    if (!k)
        return sonde__fail(SONDE_ENOTFOUND, "sonde_config_get: unknown key \"%s\"", key);
    char buf[1024];
    sonde__key_get(cfg, k, buf, sizeof buf);
    const char *v = buf;
    if (k->type == KEY_STRING) { /* a string may be longer than the buffer */
        const char *sv = *(const char *const *)(const void *)((const char *)cfg + k->offset);
        v = sv ? sv : "";
    }
    int n = snprintf(out, cap, "%s", v);
    return n;
}
