/* analyze.h - what the reports conclude from a run: diffusion figures (steps/s, FPS, BPS,
 * series), bottlenecks, and recommendations from a table of rules, each firing only on measured
 * evidence that it states. */
#ifndef SONDE_ANALYZE_H
#define SONDE_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "../model/model.h"

/* A series of durations: diffusion steps, blocks, or step marks. */
typedef struct sa_series {
    size_t count;
    double total_s, mean_s, p50_s, p99_s, max_s;
    uint64_t slowest;        /* step number or block index of the slowest */
    double first_s;          /* the first one's duration */
} sa_series;

typedef struct sa_diffusion {
    sa_series steps, blocks;
    double steps_per_s;      /* diffusion steps over their seconds */
    double frames, fps, bps; /* frames and blocks over the blocks' seconds */
    double total_params;
    double timestep_first, timestep_last; /* of the first and last diffusion step (NaN: none) */
    double guidance_min, guidance_max;     /* guidance scales recorded (NaN: none) */
    double block_memory_peak_mb;           /* highest memory of a block (NaN: none recorded) */
} sa_diffusion;

void sa_series_of(const double *d, const uint64_t *ids, size_t n, sa_series *out);
void sa_diffusion_of(const sm_model *m, sa_diffusion *out);

typedef struct sa_finding {
    const char *rule;        /* the rule's name */
    char title[160];         /* what was found */
    char evidence[400];      /* the measurements it rests on */
    char advice[400];        /* why it matters and what to try */
} sa_finding;

typedef struct sa_bottleneck {
    char what[200];          /* "stage denoising: 87% of session generate" */
    double share;            /* 0..1 */
} sa_bottleneck;

typedef struct sa_report {
    sa_finding *findings;
    size_t n_findings;
    sa_bottleneck *bottlenecks;
    size_t n_bottlenecks;
    sa_diffusion diffusion;
} sa_report;

/* Runs every rule and finds the bottlenecks (stages over threshold of their session or run, the
 * top sections by self time, the busiest thread). 0, or -1 when out of memory. */
int sa_analyze(const sm_model *m, double threshold, sa_report *out);
void sa_free(sa_report *r);

/* The rule table, for listings and tests. */
typedef struct sa_rule {
    const char *name;
    int (*check)(const sm_model *m, sa_finding *f); /* 1: fired and filled f */
} sa_rule;
const sa_rule *sa_rules(size_t *n);

#endif
