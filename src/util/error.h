/* error.h - errors: the calling thread's last-error message behind sonde_last_error, the codes'
 * names, and reading a whole input file with its errno made a code and a message. The ground of
 * every folder (docs/architecture.md). */
#ifndef SONDE_UTIL_ERROR_H
#define SONDE_UTIL_ERROR_H

#include <stddef.h>

/* Sets the calling thread's last-error message (printf-style) and returns err. */
int sonde__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sonde__clear_error(void);
/* Reads a whole input file (read_file_all) and turns its errno into a sonde code and a message
 * naming path: SONDE_ENOTFOUND, SONDE_ENOMEM or SONDE_EIO. */
int sonde__read_input(const char *path, size_t max, char **out, size_t *len);


#endif
