/* runcfg.c - the run's recorded configuration as a sonde_config: each numeric and boolean key
 * decoded from its "config.KEY" fact through the key table's own parser, so that every report
 * and every step of the reading reads a key one way (its range and default included). */
#include <stdio.h>

#include "../config/keys.h"
#include "model.h"

void sm_config(const sm_model *m, sonde_config *out)
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
