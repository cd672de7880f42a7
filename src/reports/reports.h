/* reports.h - the reports layer's hook (reports.c): what the recorder calls, through each
 * profiler's p->reports, to write a run's reports, a window's trace and a dump's reports.
 * sonde_create gives it to every profiler; `sonde run` gives it to its watching profiler. */
#ifndef SONDE_REPORTS_H
#define SONDE_REPORTS_H

#include "../record/record.h"

extern const struct sonde_reports sonde__reports;

#endif
