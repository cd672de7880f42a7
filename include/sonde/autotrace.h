/* sonde/autotrace.h - function tracing: every function entry and exit of a program built with
 * -finstrument-functions becomes a sonde section, named after the function.
 *
 *   cc -g -finstrument-functions app.c -lsonde-autotrace -lsonde
 *
 * Linking libsonde-autotrace is all it takes: at the first traced call it creates a profiler from
 * the environment (SONDE_* variables, SONDE_CONFIG), which writes its reports at exit. A program
 * that has its own profiler calls sonde_autotrace_attach(p) instead, before the calls to trace.
 * Names are resolved from the ELF symbol tables of the executable and every shared object
 * (static functions included, C++ names demangled) and, with -g, carry their source file and
 * line. The configuration keys autotrace_include, autotrace_exclude (comma-separated glob
 * patterns on the function name, source file or object file), autotrace_max_depth,
 * autotrace_hot_calls, autotrace_hot_s and min_duration_s choose what is kept
 * (docs/autotrace.md). Not compiled with
 * -finstrument-functions itself; sonde's own inline helpers are never traced. */
#ifndef SONDE_AUTOTRACE_H
#define SONDE_AUTOTRACE_H

#include <sonde/sonde.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Traces into p from now on, with p's autotrace_* keys (sonde_config_of). Functions already
 * open keep their sections in the profiler they began in. SONDE_EINVAL for NULL. */
int sonde_autotrace_attach(sonde_profiler *p);

/* Stops tracing and returns the profiler traced into (NULL when none), after writing into it the
 * totals of the hot functions (below). Call it before sonde_destroy of an attached profiler,
 * when no traced function runs on another thread; a profiler still attached at exit gets the
 * totals from an atexit handler. */
sonde_profiler *sonde_autotrace_detach(void);

/* Counters since the start: functions resolved, of which excluded by the filters; calls not
 * traced because they were nested deeper than autotrace_max_depth or the table of functions
 * was full; exits that did not match the innermost entry (longjmp; repaired); functions found
 * hot: most of their first autotrace_hot_calls calls took under autotrace_hot_s, so later calls are
 * counted and summed, not recorded (a "sonde.aggregated" event per function at detach or exit;
 * the reports' aggregated_calls). */
typedef struct sonde_autotrace_stats {
    uint64_t functions, excluded, too_deep, table_full, mismatched_exits, hot_functions;
} sonde_autotrace_stats;
void sonde_autotrace_get_stats(sonde_autotrace_stats *out);

#ifdef __cplusplus
}
#endif

#endif
