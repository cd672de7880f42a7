/* flags.c - the --profile* command-line flags: recognised, applied through the key table and
 * removed from argv, every other argument left in order for the host's own parser. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/error.h"
#include "../util/suggest.h"
#include "keys.h"
#include "../util/alloc.h"

enum { F_SWITCH, F_VALUE, F_LIST };

typedef struct flag {
    const char *name;   /* without the leading "--" */
    int kind;           /* F_SWITCH: no value; F_VALUE: one; F_LIST: one or more words */
    const char *key;    /* the key it sets, NULL for the special ones */
    const char *arg;    /* the value's name in --profile-help */
    const char *help;
} flag;

static const flag g_flags[] = {
    {"profile", F_SWITCH, "enabled", NULL, "turn profiling on"},
    {"profile-name", F_VALUE, "name", "NAME", "run name, the stem of every file"},
    {"profile-dir", F_VALUE, "output_dir", "DIR", "directory for every file"},
    {"profile-activities", F_LIST, NULL, "CPU GPU MEM NVTX CUDA",
     "what to sample (CPU, GPU, MEM), NVTX ranges, CUDA activity (any subset)"},
    {"profile-with-stack", F_SWITCH, "with_stack", NULL,
     "source file, line and function of each section in the trace; CPU samples with stacks"},
    {"profile-sample-hz", F_VALUE, "sample_hz", "N",
     "CPU samples with call stacks per second of CPU time (0: none)"},
    {"profile-sample-inline", F_VALUE, "sample_inline", "0|1",
     "CPU samples: inlined functions as frames of their own (1, the default)"},
    {"profile-sample-cfi", F_SWITCH, "sample_cfi", NULL,
     "CPU samples: unwind code without frame pointers from its call frame information"},
    {"profile-sample-python", F_VALUE, "sample_python", "0|1|2|3",
     "CPU samples: the Python frames of CPython 3.11-3.13 threads (1, the default: in the "
     "kernel where allowed; 2: in the kernel; 3: by the sampler; 0: none)"},
    {"profile-sample-off-cpu", F_VALUE, "sample_off_cpu", "0|1",
     "CPU samples: threads' time blocked in the kernel, by stack (1, the default)"},
    {"profile-sample-in-thread", F_SWITCH, "sample_in_thread", NULL,
     "CPU samples: taken in each thread by a signal of its CPU-clock counter"},
    {"profile-record-shapes", F_SWITCH, "record_shapes", NULL, "record sonde_shape calls"},
    {"profile-trace-python", F_SWITCH, "trace_python", NULL,
     "Python programs: every Python function call a section"},
    {"profile-skip-first", F_VALUE, "skip_first", "N", "steps skipped before the first cycle"},
    {"profile-wait", F_VALUE, "wait", "N", "steps not recorded at the start of each cycle"},
    {"profile-warmup", F_VALUE, "warmup", "N", "steps recorded and discarded"},
    {"profile-active", F_VALUE, "active", "N", "steps kept in each cycle"},
    {"profile-repeat", F_VALUE, "repeat", "N", "cycles (0: until the end)"},
    {"profile-start-step", F_VALUE, "start_step", "N", "first step of a window"},
    {"profile-end-step", F_VALUE, "end_step", "N", "step the window ends at (excluded)"},
    {"profile-memory-every", F_VALUE, "memory_every_n_steps", "N",
     "a memory snapshot every N steps into NAME.memory.json"},
    {"profile-flight-recorder-s", F_VALUE, "flight_recorder_s", "S",
     "flight recorder: keep the last S seconds, write them only on a trigger"},
    {"profile-trigger-step-over-median", F_VALUE, "trigger_step_over_median", "K",
     "flight recorder: a step over K times the median of the last steps triggers a dump"},
    {"profile-config", F_VALUE, NULL, "FILE", "a YAML configuration file"},
    {"profile-preset", F_VALUE, NULL, "NAME", "development, production or debugging"},
    {"profile-help", F_SWITCH, NULL, NULL, "print these flags"},
};
#define N_FLAGS (sizeof g_flags / sizeof g_flags[0])

static const flag *find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (strlen(g_flags[i].name) == len && !strncmp(g_flags[i].name, name, len))
            return &g_flags[i];
    return NULL;
}

void sonde__flags_help(FILE *out)
{
    fprintf(out, "sonde profiling flags (removed from the program's arguments):\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", g_flags[i].name, g_flags[i].arg ? " " : "",
                 g_flags[i].arg ? g_flags[i].arg : "");
        fprintf(out, "  %-36s %s\n", left, g_flags[i].help);
    }
    fprintf(out, "Both --flag value and --flag=value. Precedence, lowest first: the program's "
                 "settings,\n--profile-preset, --profile-config, SONDE_* variables, the other "
                 "flags.\n");
}

/* One recognised flag and its value(s), in argv order. */
typedef struct hit {
    const flag *f;
    char value[1024];
} hit;

/* The words --profile-activities takes: CPU, GPU and MEM sample; NVTX emits NVTX ranges; CUDA
 * collects kernels and copies through CUPTI. */
static const struct {
    const char *word;
    size_t offset;
} g_acts[] = {{"CPU", offsetof(sonde_config, collect_cpu)},
              {"GPU", offsetof(sonde_config, collect_gpu)},
              {"MEM", offsetof(sonde_config, collect_memory)},
              {"MEMORY", offsetof(sonde_config, collect_memory)},
              {"NVTX", offsetof(sonde_config, nvtx)},
              {"CUDA", offsetof(sonde_config, cuda_activity)}};
#define N_ACTS (sizeof g_acts / sizeof g_acts[0])

static int is_activity(const char *w)
{
    for (size_t i = 0; i < N_ACTS; i++)
        if (!strcasecmp(w, g_acts[i].word))
            return 1;
    return 0;
}

static int set_activities(sonde_config *c, const char *list)
{
    int on[N_ACTS] = {0}, any = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n) {
            size_t i;
            for (i = 0; i < N_ACTS; i++)
                if (strlen(g_acts[i].word) == n && !strncasecmp(p, g_acts[i].word, n))
                    break;
            if (i == N_ACTS)
                return sonde__fail(SONDE_EINVAL,
                                   "--profile-activities: unknown activity \"%.*s\" (expected "
                                   "CPU, GPU, MEM, NVTX or CUDA)", (int)n, p);
            on[i] = any = 1;
        }
        p += n;
        p += strspn(p, ", ");
    }
    if (!any)
        return sonde__fail(SONDE_EINVAL,
                           "--profile-activities needs at least one of CPU, GPU, MEM, NVTX, CUDA");
    /* What is named is on, the rest off (MEM and MEMORY are one field). */
    for (size_t i = 0; i < N_ACTS; i++)
        *(int *)(void *)((char *)c + g_acts[i].offset) = 0;
    for (size_t i = 0; i < N_ACTS; i++)
        if (on[i])
            *(int *)(void *)((char *)c + g_acts[i].offset) = 1;
    return 0;
}

int sonde_config_from_args(sonde_config *cfg, int *argc, char **argv)
{
    if (!cfg || !argc || !argv)
        return sonde__fail(SONDE_EINVAL, "sonde_config_from_args: %s is NULL",
                           !cfg ? "cfg" : !argc ? "argc" : "argv");
    int n = *argc;
    hit *hits = sonde__calloc((size_t)(n > 0 ? n : 1), sizeof *hits);
    char **keep = sonde__calloc((size_t)n + 1, sizeof *keep);
    if (!hits || !keep) {
        sonde__free(hits);
        sonde__free(keep);
        return sonde__fail(SONDE_ENOMEM, "sonde_config_from_args: out of memory");
    }
    size_t nh = 0;
    int nk = 0, rc = 0, help = 0;
    if (n > 0)
        keep[nk++] = argv[0];
    /* 1. Recognise, without changing anything yet. */
    for (int i = 1; i < n; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) { /* the end of options: it and all after it are the program's */
            while (i < n)
                keep[nk++] = argv[i++];
            break;
        }
        if (strncmp(a, "--profile", 9) != 0 || (a[9] != 0 && a[9] != '-' && a[9] != '=')) {
            keep[nk++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) - 2 : strlen(a) - 2;
        const flag *f = find(a + 2, len);
        if (!f) {
            const char *names[N_FLAGS];
            for (size_t k = 0; k < N_FLAGS; k++)
                names[k] = g_flags[k].name;
            char word[128];
            snprintf(word, sizeof word, "%.*s", (int)len, a + 2);
            const char *s = suggest(word, names, N_FLAGS);
            rc = sonde__fail(SONDE_EINVAL, "unknown flag --%s%s%s%s", word,
                             s ? " (did you mean --" : "", s ? s : "", s ? "?)" : "");
            goto out;
        }
        hit *h = &hits[nh++];
        h->f = f;
        if (f->kind == F_SWITCH) {
            if (eq) {
                rc = sonde__fail(SONDE_EINVAL, "--%s takes no value", f->name);
                goto out;
            }
            continue;
        }
        if (eq) {
            snprintf(h->value, sizeof h->value, "%s", eq + 1);
        } else if (f->kind == F_VALUE) {
            if (i + 1 >= n) {
                rc = sonde__fail(SONDE_EINVAL, "--%s needs a value (%s)", f->name, f->arg);
                goto out;
            }
            snprintf(h->value, sizeof h->value, "%s", argv[++i]);
        } else { /* F_LIST: the following words that are activities; the program's own
                    arguments after them stay */
            size_t k = 0;
            while (i + 1 < n && is_activity(argv[i + 1]) && k < sizeof h->value - 8)
                k += (size_t)snprintf(h->value + k, sizeof h->value - k, "%s%s", k ? "," : "",
                                      argv[++i]);
        }
        if (f->kind != F_SWITCH && !h->value[0]) {
            rc = sonde__fail(SONDE_EINVAL, "--%s needs a value (%s)", f->name, f->arg);
            goto out;
        }
    }
    /* 2. Apply in the order of precedence on a working copy: preset, file, environment, flags. */
    sonde_config c = *cfg;
    static const struct {
        const char *flag;
        int (*apply)(sonde_config *, const char *);
    } layers[] = {{"profile-preset", sonde_config_preset}, {"profile-config", sonde_config_load_file}};
    int layered = 0;
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++)
        for (size_t i = 0; i < nh; i++) {
            if (strcmp(hits[i].f->name, layers[l].flag))
                continue;
            if ((rc = layers[l].apply(&c, hits[i].value))) {
                char msg[600];
                snprintf(msg, sizeof msg, "--%s: %s", layers[l].flag, sonde_last_error());
                rc = sonde__fail(rc, "%s", msg);
                goto out;
            }
            layered = 1;
        }
    if (layered && (rc = sonde_config_from_env(&c)))
        goto out;
    for (size_t i = 0; i < nh; i++) {
        const flag *f = hits[i].f;
        char where[64];
        snprintf(where, sizeof where, "--%s", f->name);
        if (f->key) {
            const sonde_key *k = sonde__key_find(f->key);
            rc = sonde__key_set(&c, k, f->kind == F_SWITCH ? "1" : hits[i].value, where);
        } else if (!strcmp(f->name, "profile-activities")) {
            rc = set_activities(&c, hits[i].value);
        } else if (!strcmp(f->name, "profile-help")) {
            help = 1;
        }
        if (rc)
            goto out;
    }
    *cfg = c;
    for (int i = 0; i < nk; i++)
        argv[i] = keep[i];
    argv[nk] = NULL;
    *argc = nk;
    if (help) {
        sonde__flags_help(stdout);
        rc = 1;
    }
out:
    sonde__free(hits);
    sonde__free(keep);
    return rc;
}
