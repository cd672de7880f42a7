/* output.c - what every command that writes a file shares: never over one of its own inputs,
 * always through a temporary file renamed into place (never through a planted symlink), and
 * only regular files read from directories. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "util/fileio.h"

int cli_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cli_output_check(const char *cmd, const char *out, const char *input)
{
    struct stat o, in;
    if (stat(out, &o) == 0 && stat(input, &in) == 0 && in.st_dev == o.st_dev &&
        in.st_ino == o.st_ino)
        return cli_fail(CLI_USAGE, cmd, "-o %s is the input %s; write elsewhere", out, input);
    return CLI_OK;
}

int cli_write_output(const char *cmd, const char *out, const char *data, size_t n)
{
    if (write_file_atomic(out, data, n) != 0)
        return cli_fail(CLI_USAGE, cmd, "cannot write %s: %s", out, strerror(errno));
    return CLI_OK;
}
