/* consumers.c - the consumers of the reading a user can name (sm_consumer, model.h): a row each.
 * Adding one is its file (a handler per event kind it wants, and its table) and its row here;
 * `sonde summary FILE --table NAME` feeds it the reading of FILE and prints its table. */
#include <string.h>

#include "model.h"

extern const sm_consumer sm_instants_by_section; /* instants_by_section.c */

const sm_consumer *const sm_consumers[] = {
    &sm_instants_by_section,
    NULL,
};

const sm_consumer *sm_consumer_find(const char *name)
{
    for (size_t i = 0; sm_consumers[i]; i++)
        if (!strcmp(sm_consumers[i]->name, name))
            return sm_consumers[i];
    return NULL;
}
