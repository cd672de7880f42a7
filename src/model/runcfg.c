/* runcfg.c - the run's recorded facts ("system.*", "config.*", sm_info) and its configuration
 * as a sonde_config: each numeric and boolean key decoded from its "config.KEY" fact through the
 * key table's own parser, so that every report and every step of the reading reads a key one
 * way (its range and default included). */
#include <stdio.h>
#include <string.h>

#include "../config/keys.h"
#include "../util/alloc.h"
#include "model.h"

static void decode(const sm_model *m, sonde_config *out);

int sm_set_info(sm_model *m, const char *key, const char *value)
{
    char *k = sonde__strdup(key), *v = sonde__strdup(value);
    sm_kv *grown = k && v ? sonde__realloc(m->info, (m->n_info + 1) * sizeof *m->info) : NULL;
    if (!grown) {
        sonde__free(k);
        sonde__free(v);
        return -1;
    }
    m->info = grown;
    m->info[m->n_info].key = k;
    m->info[m->n_info++].value = v;
    if (m->cfg_read && !strncmp(key, "config.", 7)) /* the decoded configuration follows */
        sm_config_read(m);
    return 0;
}

const char *sm_info(const sm_model *m, const char *key)
{
    for (size_t i = m->n_info; i-- > 0;) /* the latest wins */
        if (!strcmp(m->info[i].key, key))
            return m->info[i].value;
    return NULL;
}

static void decode(const sm_model *m, sonde_config *out)
{
    *out = sonde_config_default();
    size_t n;
    const sonde_key *keys = sonde__keys(&n);
    char fact[96], where[128];
    for (size_t i = 0; i < n; i++) {
        const sonde_key *k = &keys[i];
        if (k->type == KEY_STRING || k->type == KEY_FORMATS)
            continue; /* strings are read as facts (sm_info); formats by the CLI */
        snprintf(fact, sizeof fact, "config.%s", k->name);
        const char *v = sm_info(m, fact);
        snprintf(where, sizeof where, "%s: %s", m->path ? m->path : "run", fact);
        if (v) /* a value the key refuses (a damaged or hand-made file) leaves the default */
            (void)sonde__key_set(out, k, v, where);
    }
}

void sm_config(const sm_model *m, sonde_config *out)
{
    if (m->cfg_read)
        *out = m->cfg;
    else
        decode(m, out);
}

void sm_config_read(sm_model *m)
{
    decode(m, &m->cfg);
    m->cfg_read = 1;
}
