/* config.c - configuration defaults and the environment (SONDE_*). The configuration issue
 * turns this into one table of keys driving presets, YAML and flags too. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../record/record.h"

sonde_config sonde_config_default(void)
{
    sonde_config c;
    memset(&c, 0, sizeof c);
    c.enabled = 1;
    c.name = NULL;
    c.output_dir = "./sonde-out";
    c.formats = SONDE_FORMAT_ALL;
    c.buffer_mb = 64;
    c.unit = "tokens";
    c.peak_flops = 0;
    c.flush_interval_s = 1.0;
    c.signal_handlers = 1;
    c.print_summary = 0;
    return c;
}

static int parse_bool(const char *var, const char *s, int *out)
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
    return sonde__fail(SONDE_EINVAL, "%s=\"%s\": expected 1/0, true/false, yes/no or on/off", var,
                       s);
}

static int parse_double(const char *var, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return sonde__fail(SONDE_EINVAL, "%s=\"%s\": expected a number", var, s);
    if (v < lo || v > hi)
        return sonde__fail(SONDE_EINVAL, "%s=\"%s\": out of range %g..%g", var, s, lo, hi);
    *out = v;
    return 0;
}

/* "json,csv,txt,trace" or "all" or "none". */
int sonde__parse_formats(const char *where, const char *s, unsigned *out)
{
    static const struct { const char *name; unsigned bit; } fmts[] = {
        {"json", SONDE_FORMAT_JSON}, {"csv", SONDE_FORMAT_CSV}, {"txt", SONDE_FORMAT_TXT},
        {"summary", SONDE_FORMAT_TXT}, {"trace", SONDE_FORMAT_TRACE}, {"all", SONDE_FORMAT_ALL},
        {"none", 0}};
    unsigned bits = 0;
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n) {
            size_t i;
            for (i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
                if (strlen(fmts[i].name) == n && strncasecmp(p, fmts[i].name, n) == 0)
                    break;
            if (i == sizeof fmts / sizeof fmts[0])
                return sonde__fail(SONDE_EINVAL,
                                   "%s=\"%s\": unknown format \"%.*s\" (expected json, csv, txt, "
                                   "trace, all or none)", where, s, (int)n, p);
            bits |= fmts[i].bit;
        }
        p += n;
        p += strspn(p, ", ");
    }
    *out = bits;
    return 0;
}

int sonde_config_from_env(sonde_config *cfg)
{
    if (!cfg)
        return sonde__fail(SONDE_EINVAL, "sonde_config_from_env: cfg is NULL");
    sonde_config c = *cfg; /* all or nothing */
    const char *v;
    int rc;
    if ((v = getenv("SONDE_ENABLED")) && *v && (rc = parse_bool("SONDE_ENABLED", v, &c.enabled)))
        return rc;
    if ((v = getenv("SONDE_OUTPUT_DIR")) && *v)
        c.output_dir = v;
    if ((v = getenv("SONDE_NAME")) && *v) {
        if (strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, ".."))
            return sonde__fail(SONDE_EINVAL, "SONDE_NAME=\"%s\": a run name may not hold '/'", v);
        c.name = v;
    }
    if ((v = getenv("SONDE_FORMATS")) && *v &&
        (rc = sonde__parse_formats("SONDE_FORMATS", v, &c.formats)))
        return rc;
    if ((v = getenv("SONDE_BUFFER_MB")) && *v &&
        (rc = parse_double("SONDE_BUFFER_MB", v, 1, 65536, &c.buffer_mb)))
        return rc;
    if ((v = getenv("SONDE_UNIT")) && *v)
        c.unit = v;
    if ((v = getenv("SONDE_PEAK_FLOPS")) && *v &&
        (rc = parse_double("SONDE_PEAK_FLOPS", v, 0, 1e30, &c.peak_flops)))
        return rc;
    if ((v = getenv("SONDE_FLUSH_INTERVAL_S")) && *v &&
        (rc = parse_double("SONDE_FLUSH_INTERVAL_S", v, 0.01, 3600, &c.flush_interval_s)))
        return rc;
    *cfg = c;
    return 0;
}
