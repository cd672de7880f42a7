/* error.c - error codes, their names and the per-thread last-error message. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "fileio.h"
#include "../../include/sonde/sonde.h"

static _Thread_local char last_error[512];

const char *sonde_version(void) { return SONDE_VERSION_STRING; }

const char *sonde_strerror(int err)
{
    switch (err) {
    case SONDE_OK:
        return "success";
#define X(name, val, msg) case SONDE_##name: return msg;
        SONDE_ERRNO_MAP(X)
#undef X
    default:
        return "unknown error";
    }
}

const char *sonde_err_name(int err)
{
    switch (err) {
    case SONDE_OK:
        return "SONDE_OK";
#define X(name, val, msg) case SONDE_##name: return "SONDE_" #name;
        SONDE_ERRNO_MAP(X)
#undef X
    default:
        return "SONDE_E?";
    }
}

const char *sonde_last_error(void) { return last_error; }

void sonde__clear_error(void) { last_error[0] = 0; }

int sonde__fail(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return err;
}

int sonde__read_input(const char *path, size_t max, char **out, size_t *len)
{
    if (read_file_all(path, max, out, len) == 0)
        return 0;
    switch (errno) {
    case ENOENT:
        return sonde__fail(SONDE_ENOTFOUND, "%s: %s", path, strerror(ENOENT));
    case ENOMEM:
        return sonde__fail(SONDE_ENOMEM, "%s: out of memory", path);
    case EINVAL:
        return sonde__fail(SONDE_EIO, "%s: not a regular file", path);
    case EFBIG:
        return sonde__fail(SONDE_EIO, "%s: larger than %zu bytes", path, max);
    default:
        return sonde__fail(SONDE_EIO, "%s: %s", path, strerror(errno));
    }
}
