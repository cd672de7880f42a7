/* fuzz_flags.c - libFuzzer target for the --profile* flag parser: the input's lines are argv.
 * The parser must accept or refuse with a message; on success every argument it did not take is
 * still there, in order; on failure argv and the configuration are unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char *argv[66], *copy[66];
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, "\n", &save); t && argc < 64; t = strtok_r(NULL, "\n", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    memcpy(copy, argv, sizeof argv);
    int n = argc;
    unsetenv("SONDE_CONFIG");
    sonde_config c = sonde_config_default(), before = c;
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    int rc = sonde_config_from_args(&c, &n, argv);
    fclose(stdout);
    stdout = saved;
    if (rc < 0) {
        if (n != argc || memcmp(&c, &before, sizeof c) != 0 || memcmp(argv, copy, sizeof argv))
            abort();
    } else {
        /* what is left is a subsequence of the input, in order, ending in NULL */
        int j = 0;
        for (int i = 0; i < n; i++) {
            while (j < argc && copy[j] != argv[i])
                j++;
            if (j == argc)
                abort();
            j++;
        }
        if (argv[n] != NULL || sonde__config_validate(&c) != 0)
            abort();
    }
    free(s);
    return 0;
}
