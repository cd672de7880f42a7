/* keys.c - the table of configuration keys and the parsing, printing and validation it drives. */
#define _GNU_SOURCE
#include "keys.h"

#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/error.h"
#include "../util/sites.h"
#include "../util/suggest.h"

#define OFF(f) offsetof(sonde_config, f)

static const sonde_key g_keys[] = {
    {"enabled", KEY_BOOL, OFF(enabled), 0, 1, "1", "record at all; 0 makes every call a no-op"},
    {"name", KEY_STRING, OFF(name), 0, 0, NULL,
     "run name, the stem of every file (default PROGRAM-YYYYmmdd-HHMMSS)"},
    {"output_dir", KEY_STRING, OFF(output_dir), 0, 0, "./sonde-out", "directory for every file"},
    {"formats", KEY_FORMATS, OFF(formats), 0, 0, SONDE__FORMATS_DEFAULT,
     "reports written at the end: " SONDE__FORMAT_WORDS},
    {"buffer_mb", KEY_DOUBLE, OFF(buffer_mb), 1, 65536, "64", "bound on event buffer memory, MiB"},
    {"unit", KEY_STRING, OFF(unit), 0, 0, "tokens", "unit of sonde_throughput"},
    {"peak_flops", KEY_DOUBLE, OFF(peak_flops), 0, 1e30, "0",
     "device peak FLOP/s for utilization (0: unknown)"},
    {"peak_device", KEY_STRING, OFF(peak_device), 0, 0, NULL,
     "a device whose dense peak FLOP/s sonde knows, e.g. h100-sxm-bf16 (when peak_flops is 0)"},
    {"flush_interval_s", KEY_DOUBLE, OFF(flush_interval_s), 0.01, 3600, "1",
     "seconds between writes of what threads are still recording"},
    {"signal_handlers", KEY_BOOL, OFF(signal_handlers), 0, 1, "1",
     "flush on fatal signals, SIGTERM and SIGINT"},
    {"print_summary", KEY_BOOL, OFF(print_summary), 0, 1, "0",
     "print the text summary to stderr at the end"},
    {"collect_cpu", KEY_BOOL, OFF(collect_cpu), 0, 1, "1",
     "sample system and process CPU and the load average"},
    {"collect_memory", KEY_BOOL, OFF(collect_memory), 0, 1, "1",
     "sample system memory, process RSS, threads and I/O"},
    {"collect_gpu", KEY_BOOL, OFF(collect_gpu), 0, 1, "1", "sample every GPU through NVML"},
    {"cpu_interval_s", KEY_DOUBLE, OFF(cpu_interval_s), 0.01, 3600, "1",
     "seconds between CPU and memory samples"},
    {"gpu_interval_s", KEY_DOUBLE, OFF(gpu_interval_s), 0.01, 3600, "0.5",
     "seconds between GPU samples"},
    {"monitor_gpu_temperature", KEY_BOOL, OFF(monitor_gpu_temperature), 0, 1, "1",
     "sample GPU temperature"},
    {"monitor_gpu_power", KEY_BOOL, OFF(monitor_gpu_power), 0, 1, "1",
     "sample GPU power draw, limit and energy"},
    {"gpu_devices", KEY_STRING, OFF(gpu_devices), 0, 0, NULL,
     "GPU indices to sample, e.g. 0,2 (default all)"},
    {"max_data_points", KEY_UINT, OFF(max_data_points), 10, 10000000, "10000",
     "samples per counter kept in reports"},
    {"real_time_display", KEY_BOOL, OFF(real_time_display), 0, 1, "0",
     "show a live block on stderr"},
    {"display_interval_s", KEY_DOUBLE, OFF(display_interval_s), 0.1, 3600, "5",
     "seconds between live display redraws"},
    {"display_all_ranks", KEY_BOOL, OFF(display_all_ranks), 0, 1, "0",
     "show the live display in ranks other than 0"},
    {"skip_first", KEY_UINT, OFF(skip_first), 0, 1e9, "0", "steps not recorded before the first cycle"},
    {"wait", KEY_UINT, OFF(wait), 0, 1e9, "0", "steps not recorded at the start of each cycle"},
    {"warmup", KEY_UINT, OFF(warmup), 0, 1e9, "0", "steps recorded and discarded after wait"},
    {"active", KEY_UINT, OFF(active), 0, 1e9, "0",
     "steps kept after warmup (0 with wait and warmup 0: no schedule)"},
    {"repeat", KEY_UINT, OFF(repeat), 0, 1e9, "0", "cycles of wait+warmup+active (0: until the end)"},
    {"start_step", KEY_UINT, OFF(start_step), 0, 1e9, "0", "first step kept (a window instead of cycles)"},
    {"end_step", KEY_UINT, OFF(end_step), 0, 1e9, "0", "step the window ends at, excluded (0: no window)"},
    {"cuda_profiler_range", KEY_BOOL, OFF(cuda_profiler_range), 0, 1, "0",
     "cudaProfilerStart/Stop around each active window (libcudart loaded at run time)"},
    {"memory_every_n_steps", KEY_UINT, OFF(memory_every_n_steps), 0, 1e9, "0",
     "a memory snapshot into NAME.memory.json every N steps (0: none)"},
    {"with_stack", KEY_BOOL, OFF(with_stack), 0, 1, "0",
     "sections carry their source file, line and function in the trace; CPU samples with call "
     "stacks at 999 Hz unless sample_hz says otherwise"},
    {"sample_hz", KEY_INT, OFF(sample_hz), -1, 100000, "-1",
     "CPU samples with call stacks per second of CPU time, by section (-1: 999 with with_stack, "
     "else none; 0: none)"},
    {"sample_inline", KEY_BOOL, OFF(sample_inline), 0, 1, "1",
     "CPU samples: a function inlined where a sample was taken is a frame of its own (DWARF); "
     "0: the function that holds it, as perf report shows"},
    {"sample_cfi", KEY_BOOL, OFF(sample_cfi), 0, 1, "0",
     "CPU samples: where frame pointers fall short, unwind the stack from the call frame "
     "information (.eh_frame; costs more)"},
    {"sample_python", KEY_INT, OFF(sample_python), 0, 3, "1",
     "CPU samples: the Python frames of a CPython 3.11-3.13 thread, read in the kernel at the "
     "sample (BPF: root or CAP_BPF+CAP_PERFMON) where allowed, else by the sampler (a wake-up "
     "a sample); 2: in the kernel, said when refused; 3: by the sampler; 0: none"},
    {"sample_off_cpu", KEY_BOOL, OFF(sample_off_cpu), 0, 1, "1",
     "CPU samples: the time threads spend blocked in the kernel, by stack (a record per "
     "context switch; root or perf_event_paranoid 1 or lower)"},
    {"sample_in_thread", KEY_BOOL, OFF(sample_in_thread), 0, 1, "0",
     "CPU samples: a program's own taken in each thread by a signal of its CPU-clock counter "
     "(else timer), Python frames read there; no off-CPU periods"},
    {"record_shapes", KEY_BOOL, OFF(record_shapes), 0, 1, "0", "sonde_shape records shapes"},
    {"bottleneck_threshold", KEY_DOUBLE, OFF(bottleneck_threshold), 0.01, 1, "0.3",
     "share of its session above which a stage is a bottleneck"},
    {"html_max_spans", KEY_UINT, OFF(html_max_spans), 10, 10000000, "1000000",
     "spans the HTML timeline carries, the longest when there are more"},
    {"nvtx", KEY_BOOL, OFF(nvtx), 0, 1, "0",
     "sections, steps and sessions as NVTX ranges and marks, for Nsight Systems"},
    {"autotrace_max_depth", KEY_UINT, OFF(autotrace_max_depth), 1, 4096, "64",
     "function tracing: calls nested deeper are not traced"},
    {"session_tags", KEY_STRING, OFF(session_tags), 0, 0, NULL,
     "metadata of every session: key=value,key=value (in YAML also a mapping)"},
    {"autotrace_include", KEY_STRING, OFF(autotrace_include), 0, 0, NULL,
     "function tracing: only functions matching these globs (name, source or object file)"},
    {"autotrace_exclude", KEY_STRING, OFF(autotrace_exclude), 0, 0, NULL,
     "function tracing: never functions matching these globs"},
    {"autotrace_hot_calls", KEY_UINT, OFF(autotrace_hot_calls), 0, 1e9, "10000",
     "function tracing: after this many calls, a function whose calls mostly took under "
     "autotrace_hot_s is counted, not recorded (0: never)"},
    {"autotrace_hot_s", KEY_DOUBLE, OFF(autotrace_hot_s), 0, 1, "0.000001",
     "function tracing: the duration a hot function's calls mostly take under (their median)"},
    {"min_duration_s", KEY_DOUBLE, OFF(min_duration_s), 0, 3600, "0",
     "sections shorter than this are left out of reports (counted in the summary)"},
    {"cuda_activity", KEY_BOOL, OFF(cuda_activity), 0, 1, "0",
     "CUDA kernels, memcpy and memset from CUPTI, linked to the sections that launched them"},
    {"trace_python", KEY_BOOL, OFF(trace_python), 0, 1, "0",
     "Python: every Python function call a section (docs/python.md)"},
    {"trace_python_include", KEY_STRING, OFF(trace_python_include), 0, 0, NULL,
     "Python tracing: only functions matching these globs (qualified name, module or file)"},
    {"trace_python_exclude", KEY_STRING, OFF(trace_python_exclude), 0, 0, NULL,
     "Python tracing: never functions matching these globs"},
    {"trace_python_max_depth", KEY_UINT, OFF(trace_python_max_depth), 1, 4096, "1000",
     "Python tracing: calls nested deeper are not traced"},
    {"trace_python_c_calls", KEY_BOOL, OFF(trace_python_c_calls), 0, 1, "0",
     "Python tracing: C functions called from Python are sections too"},
    {"trace_python_hot_calls", KEY_UINT, OFF(trace_python_hot_calls), 0, 1e9, "100000",
     "Python tracing: after this many calls, a function whose calls mostly took under "
     "trace_python_hot_s is counted, not recorded (0: never)"},
    {"trace_python_hot_s", KEY_DOUBLE, OFF(trace_python_hot_s), 0, 1, "0.000002",
     "Python tracing: the duration a hot function's calls mostly take under (their median)"},
    {"trace_max_events", KEY_UINT, OFF(trace_max_events), 0, 1e9, "4000000",
     "sections a trace holds: the longest whole, the rest folded into slices (0: no limit)"},
    {"report_max_sections", KEY_UINT, OFF(report_max_sections), 0, 1e9, "4000000",
     "sections a report holds in memory: past it, the longest third, the rest folded (0: no limit)"},
    {"report_max_records", KEY_UINT, OFF(report_max_records), 0, 1e9, "1000000",
     "instants, steps and each counter's samples a report holds in memory: past it, every 2nd, "
     "4th, ... (0: no limit)"},
    {"metrics_port", KEY_UINT, OFF(metrics_port), 0, 65535, "0",
     "serve live metrics for Prometheus at http://metrics_address:PORT/metrics (0: off)"},
    {"metrics_address", KEY_STRING, OFF(metrics_address), 0, 0, "127.0.0.1",
     "the address the metrics endpoint listens on (0.0.0.0 or :: for other machines)"},
    {"flight_recorder_s", KEY_DOUBLE, OFF(flight_recorder_s), 0, 86400, "0",
     "flight recorder: keep the last S seconds in memory and write them only on a trigger "
     "(0: off; docs/flight-recorder.md)"},
    {"flight_recorder_after_s", KEY_DOUBLE, OFF(flight_recorder_after_s), 0, 3600, "1",
     "flight recorder: seconds recorded past a trigger before its dump is written"},
    {"flight_recorder_max", KEY_UINT, OFF(flight_recorder_max), 1, 1e6, "10",
     "flight recorder: dumps written at most (later triggers are counted)"},
    {"trigger_signal", KEY_INT, OFF(trigger_signal), 0, 64, "12",
     "flight recorder: the signal number that triggers a dump (12: SIGUSR2; 0: none)"},
    {"trigger_step_over_median", KEY_DOUBLE, OFF(trigger_step_over_median), 0, 1e6, "0",
     "flight recorder: a step over K times the median of the last 64 steps triggers (0: off)"},
    {"trigger_section_over_s", KEY_STRING, OFF(trigger_section_over_s), 0, 0, NULL,
     "flight recorder: NAME=S[;NAME=S]: a section NAME over S seconds triggers a dump"},
    {"trigger_counter_below", KEY_STRING, OFF(trigger_counter_below), 0, 0, NULL,
     "flight recorder: NAME=VALUE,S[;...]: a counter under VALUE for S seconds triggers a dump"},
    {"on_demand", KEY_BOOL, OFF(on_demand), 0, 1, "0",
     "record nothing until `sonde trigger PID --start [--for S]`, then a run of its own "
     "(NAME-ondemandN) until --stop"},
    {"rank", KEY_INT, OFF(rank), -1, 1000000, "-1", "this process's rank (-1: from the launcher)"},
    {"world_size", KEY_INT, OFF(world_size), -1, 1000000, "-1",
     "processes in the job (-1: from the launcher)"},
    {"local_rank", KEY_INT, OFF(local_rank), -1, 1000000, "-1",
     "rank on this machine (-1: from the launcher)"},
};
#define N_KEYS (sizeof g_keys / sizeof g_keys[0])

const sonde_key *sonde__keys(size_t *n)
{
    *n = N_KEYS;
    return g_keys;
}

const sonde_key *sonde__key_find(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(g_keys[i].name, name))
            return &g_keys[i];
    return NULL;
}

int sonde__trigger_rules(const char *which, const char *value, sonde_trigger_rule *rules,
                        size_t cap, char *why, size_t why_cap)
{
    int counter = !strcmp(which, "trigger_counter_below");
    const char *form = counter ? "NAME=VALUE,SECONDS" : "NAME=SECONDS";
    int n = 0;
    for (const char *r = value; *r;) {
        size_t len = strcspn(r, ";");
        char item[SONDE_RULE_NAME + 64];
        if (len >= sizeof item) {
            snprintf(why, why_cap, "\"%.40s...\" is too long", r);
            return -1;
        }
        memcpy(item, r, len);
        item[len] = 0;
        r += len + (r[len] == ';');
        if (!len)
            continue;
        char *eq = strrchr(item, '=');
        if (!eq || eq == item) {
            snprintf(why, why_cap, "\"%s\" is not %s", item, form);
            return -1;
        }
        *eq = 0;
        if (strlen(item) >= SONDE_RULE_NAME) {
            snprintf(why, why_cap, "the name \"%.40s...\" is longer than %d bytes", item,
                     SONDE_RULE_NAME - 1);
            return -1;
        }
        char *end, *rest = eq + 1;
        double v = 0, secs;
        if (counter) {
            v = strtod(rest, &end);
            if (end == rest || *end != ',' || !isfinite(v)) {
                snprintf(why, why_cap, "\"%s=%s\" is not %s (the value, a comma, then the "
                         "seconds)", item, rest, form);
                return -1;
            }
            rest = end + 1;
        }
        secs = strtod(rest, &end);
        if (end == rest || *end || !isfinite(secs) || secs < 0) {
            snprintf(why, why_cap, "\"%s\" in \"%s\" is not a number of seconds >= 0 (%s)", rest,
                     item, form);
            return -1;
        }
        if ((size_t)n == SONDE_RULES_MAX) {
            snprintf(why, why_cap, "more than %d rules", SONDE_RULES_MAX);
            return -1;
        }
        if (rules && (size_t)n < cap) {
            sonde_trigger_rule *q = &rules[n];
            memcpy(q->name, item, strlen(item) + 1);
            q->value = v;
            q->s = secs;
        }
        n++;
    }
    return n;
}

/* Inferix's report_format: html, json or both. */
static const char *alias_report_format(const char *v)
{
    return !strcmp(v, "html") ? "html" : !strcmp(v, "json") ? "json"
                                       : !strcmp(v, "both") ? "json,html" : NULL;
}

static int parse_bool(const char *s, int *out);

/* Inferix's generate_final_report: false writes no report (the recording is kept). */
static const char *alias_final_report(const char *v)
{
    int on;
    return parse_bool(v, &on) ? NULL : on ? "" : "none";
}

static const sonde_key_alias g_aliases[] = {
    {"display_interval", "display_interval_s", NULL, "display_interval_s"},
    {"gpu_monitor_interval", "gpu_interval_s", NULL, "gpu_interval_s"},
    {"cpu_monitor_interval", "cpu_interval_s", NULL, "cpu_interval_s"},
    {"monitor_cpu_usage", "collect_cpu", NULL, "collect_cpu"},
    {"monitor_system_memory", "collect_memory", NULL, "collect_memory"},
    {"report_format", "formats", alias_report_format, "formats: html, json, or both (json,html)"},
    {"generate_final_report", "formats", alias_final_report, "false: formats none"},
    {"monitor_gpu_memory", NULL, NULL, "sonde samples GPU memory whenever collect_gpu is on"},
    {"monitor_gpu_utilization", NULL, NULL, "sonde samples utilization whenever collect_gpu is on"},
    {"save_raw_data", NULL, NULL, "NAME.sonde always keeps every sample (formats samples: CSV)"},
    {"profile_inference_steps", NULL, NULL, "selected by the program's calls (Python API)"},
    {"profile_vae_decode", NULL, NULL, "selected by the program's calls (Python API)"},
    {"profile_text_encoding", NULL, NULL, "selected by the program's calls (Python API)"},
    {"profile_diffusion_steps", NULL, NULL, "selected by the program's calls (Python API)"},
    {"profile_block_computation", NULL, NULL, "selected by the program's calls (Python API)"},
    {"profile_model_parameters", NULL, NULL, "selected by the program's calls (Python API)"},
};
#define N_ALIASES (sizeof g_aliases / sizeof g_aliases[0])

const sonde_key_alias *sonde__key_alias(const char *name)
{
    for (size_t i = 0; i < N_ALIASES; i++)
        if (!strcmp(g_aliases[i].name, name))
            return &g_aliases[i];
    return NULL;
}

const sonde_key_alias *sonde__key_aliases(size_t *n)
{
    *n = N_ALIASES;
    return g_aliases;
}

int sonde__key_alias_set(sonde_config *c, const sonde_key_alias *a, const char *value,
                         const char *where)
{
    const char *v = a->value ? a->value(value) : value;
    int on;
    if (!a->key || (v && !*v)) { /* sets nothing; the value is still checked */
        if (!a->key && parse_bool(value, &on))
            return sonde__fail(SONDE_EINVAL, "%s: \"%s\" is not a boolean (true or false)",
                               where, value);
        return 0;
    }
    if (!v)
        return sonde__fail(SONDE_EINVAL, "%s: \"%s\" is not valid (%s)", where, value, a->help);
    return sonde__key_set(c, sonde__key_find(a->key), v, where);
}

const char *sonde__key_suggest(const char *name)
{
    const char *names[N_KEYS];
    for (size_t i = 0; i < N_KEYS; i++)
        names[i] = g_keys[i].name;
    return suggest(name, names, N_KEYS);
}

void sonde__key_env(const sonde_key *k, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "SONDE_%s", k->name);
    for (size_t i = 6; i < n && i < cap; i++)
        out[i] = (char)toupper((unsigned char)out[i]);
}

void sonde__key_expect(const sonde_key *k, char *out, size_t cap)
{
    switch (k->type) {
    case KEY_BOOL:
        snprintf(out, cap, "a boolean (1/0, true/false, yes/no, on/off)");
        break;
    case KEY_UINT:
    case KEY_INT:
        snprintf(out, cap, "an integer in %.0f..%.0f", k->lo, k->hi);
        break;
    case KEY_DOUBLE:
        snprintf(out, cap, "a number in %g..%g", k->lo, k->hi);
        break;
    case KEY_STRING:
        snprintf(out, cap, "a string");
        break;
    case KEY_FORMATS:
        snprintf(out, cap, "a list of " SONDE__FORMAT_WORDS);
        break;
    }
}

int sonde__parse_formats(const char *where, const char *s, unsigned *out)
{
#define FORMAT_ROW(name, bit, ext, kind, writer) {#name, bit},
    static const struct { const char *name; unsigned bit; } fmts[] = {
        SONDE__FORMATS(FORMAT_ROW)
        {"summary", SONDE_FORMAT_TXT}, /* the text report's other name */
        {"all", SONDE_FORMAT_ALL},
        {"none", 0}};
#undef FORMAT_ROW
    unsigned bits = 0;
    const char *p = s;
    p += strspn(p, ", []");
    while (*p) {
        size_t n = strcspn(p, ", []");
        size_t i;
        for (i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
            if (strlen(fmts[i].name) == n && strncasecmp(p, fmts[i].name, n) == 0)
                break;
        if (i == sizeof fmts / sizeof fmts[0]) {
            char word[32];
            const char *names[sizeof fmts / sizeof fmts[0]];
            for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++)
                names[k] = fmts[k].name;
            snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), p);
            for (char *c = word; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            const char *near = suggest(word, names, sizeof names / sizeof names[0]);
            return sonde__fail(SONDE_EINVAL, "%s: unknown format \"%.*s\"%s%s%s (expected "
                               SONDE__FORMAT_WORDS ")", where, (int)n, p,
                               near ? " (did you mean \"" : "", near ? near : "",
                               near ? "\"?)" : "");
        }
        bits |= fmts[i].bit;
        p += n;
        p += strspn(p, ", []");
    }
    *out = bits;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* A copy of s that lives as long as the process (interned, so repeated values cost nothing). */
static const char *stable(const char *s)
{
    uint32_t id = sonde__intern(s);
    return id ? sonde__site_get(id)->name : NULL;
}

/* Dense peak FLOP/s of devices, from their vendors' data sheets (no sparsity). */
static const struct {
    const char *name;
    double flops;
} g_devices[] = {
    {"h100-sxm-bf16", 989.4e12}, {"h100-sxm-fp8", 1978.9e12}, {"h100-pcie-bf16", 756.5e12},
    {"h200-bf16", 989.4e12},     {"a100-bf16", 312e12},       {"a100-tf32", 156e12},
    {"a100-fp32", 19.5e12},      {"l40s-bf16", 362.05e12},    {"a10-bf16", 125e12},
    {"v100-fp16", 125e12},       {"rtx4090-bf16", 165.2e12},
};

double sonde__device_peak(const char *name)
{
    for (size_t i = 0; name && i < sizeof g_devices / sizeof g_devices[0]; i++)
        if (!strcasecmp(name, g_devices[i].name))
            return g_devices[i].flops;
    return 0;
}

static int device_names(char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < sizeof g_devices / sizeof g_devices[0] && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", g_devices[i].name);
    return 0;
}

int sonde__key_set(sonde_config *c, const sonde_key *k, const char *value, const char *where)
{
    char expect[SONDE__KEY_EXPECT_MAX];
    sonde__key_expect(k, expect, sizeof expect);
    char *field = (char *)c + k->offset;
    if (!value)
        value = "";
    switch (k->type) {
    case KEY_BOOL: {
        int b;
        if (parse_bool(value, &b))
            return sonde__fail(SONDE_EINVAL, "%s: \"%s\" is not %s", where, value, expect);
        *(int *)(void *)field = b;
        return 0;
    }
    case KEY_UINT:
    case KEY_INT:
    case KEY_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        while (end && isspace((unsigned char)*end))
            end++;
        if (end == value || *end || errno || !isfinite(v) ||
            (k->type != KEY_DOUBLE && v != floor(v)))
            return sonde__fail(SONDE_EINVAL, "%s: \"%s\" is not %s", where, value, expect);
        if (v < k->lo || v > k->hi)
            return sonde__fail(SONDE_EINVAL, "%s: %s is out of range: expected %s", where, value,
                               expect);
        if (k->type == KEY_UINT)
            *(unsigned *)(void *)field = (unsigned)v;
        else if (k->type == KEY_INT)
            *(int *)(void *)field = (int)v;
        else
            *(double *)(void *)field = v;
        return 0;
    }
    case KEY_STRING: {
        if (!strcmp(k->name, "name") && (strchr(value, '/') || !*value || !strcmp(value, ".") ||
                                         !strcmp(value, "..")))
            return sonde__fail(SONDE_EINVAL,
                               "%s: \"%s\" is not a run name (non-empty, without '/')", where,
                               value);
        if (!strcmp(k->name, "peak_device") && !sonde__device_peak(value)) {
            char names[512];
            device_names(names, sizeof names);
            return sonde__fail(SONDE_EINVAL, "%s: unknown device \"%s\" (known: %s)", where, value,
                               names);
        }
        if (!strcmp(k->name, "trigger_section_over_s") ||
            !strcmp(k->name, "trigger_counter_below")) {
            char why[200];
            if (sonde__trigger_rules(k->name, value, NULL, 0, why, sizeof why) < 0)
                return sonde__fail(SONDE_EINVAL, "%s: %s", where, why);
        }
        if (!strcmp(k->name, "session_tags"))
            for (const char *t = value; *t;) { /* each item key=value, the key not empty */
                size_t n = strcspn(t, ",");
                const char *eq = memchr(t, '=', n);
                if (!eq || eq == t)
                    return sonde__fail(SONDE_EINVAL, "%s: \"%.*s\" is not key=value (expected "
                                       "key=value,key=value)", where, (int)n, t);
                if (n > SONDE_TAG_MAX) /* sonde_session_begin copies each into a buffer */
                    return sonde__fail(SONDE_EINVAL, "%s: \"%.40s...\" is longer than %d bytes",
                                       where, t, SONDE_TAG_MAX);
                t += n + (t[n] == ',');
            }
        errno = 0;
        const char *s = stable(value);
        if (!s && errno == ENAMETOOLONG)
            return sonde__fail(SONDE_EINVAL, "%s: \"%.40s...\" is longer than %d bytes", where,
                               value, SONDE_MAX_NAME);
        if (!s)
            return sonde__fail(SONDE_ENOMEM, "%s: out of memory", where);
        *(const char **)(void *)field = s;
        return 0;
    }
    case KEY_FORMATS: {
        unsigned bits;
        int rc = sonde__parse_formats(where, value, &bits);
        if (rc)
            return rc;
        *(unsigned *)(void *)field = bits;
        return 0;
    }
    }
    return SONDE_EINVAL;
}

void sonde__key_get(const sonde_config *c, const sonde_key *k, char *out, size_t cap)
{
    const char *field = (const char *)c + k->offset;
    switch (k->type) {
    case KEY_BOOL:
        snprintf(out, cap, "%d", *(const int *)(const void *)field ? 1 : 0);
        break;
    case KEY_UINT:
        snprintf(out, cap, "%u", *(const unsigned *)(const void *)field);
        break;
    case KEY_INT:
        snprintf(out, cap, "%d", *(const int *)(const void *)field);
        break;
    case KEY_DOUBLE:
        snprintf(out, cap, "%g", *(const double *)(const void *)field);
        break;
    case KEY_STRING: {
        const char *s = *(const char *const *)(const void *)field;
        snprintf(out, cap, "%s", s ? s : "");
        break;
    }
    case KEY_FORMATS: {
        unsigned f = *(const unsigned *)(const void *)field;
#define FORMAT_ROW(name, bit, ext, kind, writer) {#name, bit},
        static const struct { const char *name; unsigned bit; } names[] = {
            SONDE__FORMATS(FORMAT_ROW)};
#undef FORMAT_ROW
        size_t k2 = 0;
        out[0] = 0;
        for (unsigned b = 1; b & SONDE_FORMAT_ALL; b <<= 1) /* in bit order */
            for (size_t i = 0; i < sizeof names / sizeof *names; i++)
                if ((f & b) && names[i].bit == b)
                    k2 += (size_t)snprintf(out + k2, k2 < cap ? cap - k2 : 0, "%s%s",
                                           k2 ? "," : "", names[i].name);
        if (!f)
            snprintf(out, cap, "none");
        break;
    }
    }
}

/* The message for an invalid field of c under key k, or 0 when it is valid. */
static int check_field(const sonde_config *c, const sonde_key *k)
{
    const char *field = (const char *)c + k->offset;
    double v;
    switch (k->type) {
    case KEY_DOUBLE:
        v = *(const double *)(const void *)field;
        break;
    case KEY_UINT:
        v = *(const unsigned *)(const void *)field;
        break;
    case KEY_INT:
        v = *(const int *)(const void *)field;
        break;
    case KEY_FORMATS: {
        unsigned f = *(const unsigned *)(const void *)field;
        if (f & ~SONDE_FORMAT_ALL)
            return sonde__fail(SONDE_EINVAL, "sonde_config.formats: unknown bits 0x%x",
                               f & ~SONDE_FORMAT_ALL);
        return 0;
    }
    case KEY_STRING: {
        const char *s = *(const char *const *)(const void *)field;
        if (!strcmp(k->name, "name") && s &&
            (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")))
            return sonde__fail(SONDE_EINVAL,
                               "sonde_config.name: \"%s\" must be non-empty and hold no '/'", s);
        return 0;
    }
    default:
        return 0;
    }
    if (!(v >= k->lo && v <= k->hi)) {
        char expect[SONDE__KEY_EXPECT_MAX];
        sonde__key_expect(k, expect, sizeof expect);
        return sonde__fail(SONDE_EINVAL, "sonde_config.%s: %g is out of range: expected %s",
                           k->name, v, expect);
    }
    /* A fault's signal as the trigger would be taken for a trigger when the fault comes, and the
     * faulting instruction run again, forever; SIGKILL and SIGSTOP cannot be caught. */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS,
                                SIGKILL, SIGSTOP};
    int signal_key = !strcmp(k->name, "trigger_signal");
    for (size_t i = 0; signal_key && i < sizeof fatal / sizeof *fatal; i++)
        if ((int)v == fatal[i])
            return sonde__fail(SONDE_EINVAL, "sonde_config.trigger_signal: %d (%s) is a fault's "
                               "or an uncatchable signal: a trigger signal is one sent on "
                               "purpose, such as 10 (SIGUSR1) or 12 (SIGUSR2)", (int)v,
                               strsignal((int)v));
    return 0;
}

int sonde__config_validate(const sonde_config *c)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        int rc = check_field(c, &g_keys[i]);
        if (rc)
            return rc;
    }
    return 0;
}

int sonde__config_repair(sonde_config *c, char *msg, size_t cap)
{
    int bad = 0;
    msg[0] = 0;
    sonde_config d = sonde_config_default();
    for (size_t i = 0; i < N_KEYS; i++) {
        const sonde_key *k = &g_keys[i];
        if (!check_field(c, k))
            continue;
        if (!bad++)
            snprintf(msg, cap, "%s; using the default %s", sonde_last_error(),
                     k->def ? k->def : "(none)");
        size_t sz = k->type == KEY_DOUBLE ? sizeof(double)
                    : k->type == KEY_STRING ? sizeof(const char *)
                    : k->type == KEY_BOOL || k->type == KEY_INT ? sizeof(int)
                                                                : sizeof(unsigned);
        memcpy((char *)c + k->offset, (const char *)&d + k->offset, sz);
    }
    return bad;
}
