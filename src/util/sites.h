/* sites.h - the process-wide table of call sites and interned names (sites.c): ids are dense
 * (1, 2, ...), entries never move once published. The recorder's events name sites by id; the
 * configuration interns the strings it must keep (keys.c). */
#ifndef SONDE_UTIL_SITES_H
#define SONDE_UTIL_SITES_H

#include <stdint.h>

#include "../../include/sonde/sonde.h"

typedef struct sonde_site_rec {
    const char *name;
    const char *file;     /* NULL for run-time names */
    const char *func;
    int line;
} sonde_site_rec;
/* Registers a macro call site once; returns its id (> 0), or 0 when out of memory. */
uint32_t sonde__site_register(sonde_site *s);
/* Interns a run-time name; the same string always gives the same id. 0 with errno ENAMETOOLONG
 * for a name over SONDE_MAX_NAME bytes, ENOMEM when out of memory. */
uint32_t sonde__intern(const char *name);
/* Number of ids handed out + 1 (ids are 1..count-1). Acquire order. Async-signal-safe. */
uint32_t sonde__site_count(void);
/* The record of an id below sonde__site_count(); never NULL there. Async-signal-safe. */
const sonde_site_rec *sonde__site_get(uint32_t id);
/* Takes (lock=1) or releases the table's lock: held across fork() (fork.c). */
void sonde__sites_lock(int lock);

#endif
