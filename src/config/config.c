/* config.c - configuration defaults and the environment (SONDE_*), both driven by the key table
 * in keys.c. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/alloc.h"
#include "../util/suggest.h"
#include "keys.h"
#include "../util/env.h"

extern char **environ;

/* SONDE_* variables that are not keys but are read by some part of sonde. */
static const char *const g_other_vars[] = {
    "SONDE_CONFIG",         "SONDE_NVML_LIBRARY", "SONDE_CUDART_LIBRARY", "SONDE_CUPTI_LIBRARY",
    "SONDE_RUN_DIR",        "SONDE_RUN_NAME",     "SONDE_AUTOTRACE",      "SONDE_RUN_SAMPLE_HZ",
    "SONDE_LIBRARY",        "SONDE_RUN_SAMPLE_PYTHON_ONLY", "SONDE_READ_THREADS",
    "SONDE_RUN_ID",         "SONDE_READ_SUMMARY",   "SONDE_BOOT_ID",
};
#define N_OTHER (sizeof g_other_vars / sizeof g_other_vars[0])

/* The message of the last sonde_config_from_env that failed, until one succeeds: sonde_create
 * repeats it on stderr, since a program that drops the return code would otherwise never hear
 * that its environment was not applied. */
static pthread_mutex_t g_env_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_env_failed[600];

void sonde__env_fork(int take)
{
    if (take)
        pthread_mutex_lock(&g_env_lock);
    else
        pthread_mutex_unlock(&g_env_lock);
}

void sonde__env_failure(char *out, size_t cap)
{
    pthread_mutex_lock(&g_env_lock);
    snprintf(out, cap, "%s", g_env_failed);
    pthread_mutex_unlock(&g_env_lock);
}

static int env_result(int rc)
{
    pthread_mutex_lock(&g_env_lock);
    snprintf(g_env_failed, sizeof g_env_failed, "%s", rc ? sonde_last_error() : "");
    pthread_mutex_unlock(&g_env_lock);
    return rc;
}

/* 1 when the letters of a (underscores aside) appear in b in order: an abbreviation of b
 * (OUTDIR of OUTPUT_DIR). */
static int abbreviates(const char *a, const char *b)
{
    for (; *a; a++) {
        if (*a == '_')
            continue;
        while (*b && *b != *a)
            b++;
        if (!*b++)
            return 0;
    }
    return 1;
}

/* The variable a mistyped one most likely meant: the shortest it abbreviates, else the closest
 * by edit distance, else NULL. */
static const char *closest_var(const char *var, const char *const *cands, size_t n)
{
    const char *best = NULL;
    for (size_t i = 0; i < n && strlen(var) >= 9; i++) /* 3 letters at least after SONDE_ */
        if (abbreviates(var + 6, cands[i] + 6) && (!best || strlen(cands[i]) < strlen(best)))
            best = cands[i];
    return best ? best : suggest(var, cands, n);
}

/* Once per process: each SONDE_* variable that no part of sonde reads, named on stderr with the
 * closest one that exists (SONDE_OUTDIR -> SONDE_OUTPUT_DIR), since it is otherwise ignored. */
static void warn_unknown_vars(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1))
        return;
    size_t n;
    const sonde_key *k = sonde__keys(&n);
    char(*names)[64] = sonde__calloc(n + N_OTHER, sizeof *names);
    const char **cands = sonde__calloc(n + N_OTHER, sizeof *cands);
    if (!names || !cands) {
        sonde__free(names);
        sonde__free(cands);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sonde__key_env(&k[i], names[i], sizeof names[i]);
        cands[i] = names[i];
    }
    for (size_t i = 0; i < N_OTHER; i++)
        cands[n + i] = g_other_vars[i];
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (len <= 6 || len >= 64 || strncmp(*e, "SONDE_", 6))
            continue;
        char var[64];
        memcpy(var, *e, len);
        var[len] = 0;
        size_t i = 0;
        while (i < n + N_OTHER && strcmp(cands[i], var))
            i++;
        if (i < n + N_OTHER)
            continue;
        const char *s = closest_var(var, cands, n + N_OTHER);
        fprintf(stderr, "sonde: %s is not a sonde variable and is ignored%s%s%s\n", var,
                s ? " (did you mean " : "", s ? s : "", s ? "?)" : "; `sonde config --list` lists them");
    }
    sonde__free(names);
    sonde__free(cands);
}

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
    warn_unknown_vars();
    sonde_config c = *cfg; /* all or nothing */
    const char *file = sonde__getenv("SONDE_CONFIG");
    if (file && *file) {
        int rc = sonde_config_load_file(&c, file);
        if (rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "SONDE_CONFIG: %s", sonde_last_error());
            return env_result(sonde__fail(rc, "%s", msg));
        }
    }
    size_t n;
    const sonde_key *k = sonde__keys(&n);
    for (size_t i = 0; i < n; i++) {
        char var[64];
        sonde__key_env(&k[i], var, sizeof var);
        const char *v = sonde__getenv(var);
        if (!v || !*v)
            continue;
        int rc = sonde__key_set(&c, &k[i], v, var);
        if (rc)
            return env_result(rc);
    }
    *cfg = c;
    return env_result(0);
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
