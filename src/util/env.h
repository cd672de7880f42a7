/* env.h - the one way libsonde reads its environment. */
#ifndef SONDE_UTIL_ENV_H
#define SONDE_UTIL_ENV_H

/* The value of environment variable name, or NULL when it is unset or when the process runs
 * with AT_SECURE (setuid, setgid, file capabilities): its caller's environment is then not
 * trusted (a SONDE_NVML_LIBRARY would load the caller's code with the program's rights, a
 * SONDE_CONFIG would print a file the caller cannot read, a SONDE_OUTPUT_DIR would write the
 * program's files where the caller chooses). The first variable so ignored is said once on
 * stderr. Thread-safe as getenv is. */
const char *sonde__getenv(const char *name);

#endif
