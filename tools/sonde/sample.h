/* sample.h - CPU sampling of a program `sonde run` starts (issue 19, first part): the kernel's
 * cpu-clock event through perf_event_open on every CPU for the program, its threads and its
 * children, each sample with its user-space call stack (the kernel walks the frame pointers).
 * Mappings come from the kernel's MMAP2 records, so addresses are resolved to functions after the
 * program has gone, from the ELF symbol tables of the files it had mapped. */
#ifndef SONDE_CLI_SAMPLE_H
#define SONDE_CLI_SAMPLE_H

#include <sys/types.h>

#include "model/model.h"

typedef struct cli_sampler cli_sampler;

/* Starts sampling pid, which must not have exec'd yet (it waits for its go): counting begins at
 * its exec. hz: samples per second of CPU time. NULL when the kernel refuses (why says so:
 * perf_event_paranoid, no perf_event_open) or out of memory. */
cli_sampler *cli_sampler_start(pid_t pid, unsigned hz, char *why, size_t cap);
/* Stops sampling once the program has ended, resolves the stacks to functions into the profile
 * (sm_profile, owned by the model after) and frees the sampler. 0, or -1 out of memory. */
int cli_sampler_finish(cli_sampler *s, sm_profile *out);

#endif
