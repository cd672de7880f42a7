/* cmd_config.c - `sonde config`: every configuration key from the one table, or the check of a
 * YAML file. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config/keys.h"

/* The --profile flag that sets a key, from the flag table's naming ("" when none). */
static const char *flag_of(const char *key)
{
    static const struct { const char *key, *flag; } f[] = {
        {"enabled", "--profile"}, {"name", "--profile-name"}, {"output_dir", "--profile-dir"},
        {"with_stack", "--profile-with-stack"}, {"sample_hz", "--profile-sample-hz"},
        {"record_shapes", "--profile-record-shapes"},
        {"skip_first", "--profile-skip-first"}, {"wait", "--profile-wait"},
        {"warmup", "--profile-warmup"}, {"active", "--profile-active"},
        {"repeat", "--profile-repeat"}, {"start_step", "--profile-start-step"},
        {"end_step", "--profile-end-step"}, {"memory_every_n_steps", "--profile-memory-every"},
        {"collect_cpu", "--profile-activities CPU"}, {"collect_gpu", "--profile-activities GPU"},
        {"collect_memory", "--profile-activities MEM"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (!strcmp(f[i].key, key))
            return f[i].flag;
    return "";
}

int cmd_config(int argc, char **argv)
{
    static const char *const opts[] = {"--list", "--check", NULL};
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        size_t n;
        const sonde_key *k = sonde__keys(&n);
        sonde_config d = sonde_config_default();
        printf("%-24s %-46s %-20s %-30s %s\n", "KEY", "TYPE", "DEFAULT", "ENVIRONMENT", "FLAG");
        for (size_t i = 0; i < n; i++) {
            char type[SONDE__KEY_EXPECT_MAX], def[64], env[64];
            sonde__key_expect(&k[i], type, sizeof type);
            sonde__key_get(&d, &k[i], def, sizeof def);
            sonde__key_env(&k[i], env, sizeof env);
            if (!def[0])
                snprintf(def, sizeof def, "(none)");
            printf("%-24s %-46s %-20s %-30s %s\n", k[i].name, type, def, env, flag_of(k[i].name));
            printf("%-24s   %s\n", "", k[i].help);
        }
        const sonde_key_alias *a = sonde__key_aliases(&n);
        printf("\nIn a YAML file, the Inferix document's names are read too:\n");
        for (size_t i = 0; i < n; i++)
            printf("%-24s %s%s\n", a[i].name, a[i].key ? "-> " : "accepted, sets nothing: ",
                   a[i].key && !a[i].value ? a[i].key : a[i].help);
        printf("\nAlso: SONDE_CONFIG (a YAML file), SONDE_NVML_LIBRARY, SONDE_CUDART_LIBRARY;\n"
               "--profile-config FILE, --profile-preset development|production|debugging.\n");
        return CLI_OK;
    }
    if (argc == 3 && !strcmp(argv[1], "--check")) {
        sonde_config c = sonde_config_default();
        if (sonde_config_load_file(&c, argv[2]) != 0)
            return cli_fail(CLI_USAGE, "config", "%s", sonde_last_error());
        printf("%s: valid\n", argv[2]);
        return CLI_OK;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && strcmp(argv[i], "--list") && strcmp(argv[i], "--check"))
            return cli_bad_option("config", argv[i], opts);
    return cli_usage(cli_find("config"), 1);
}
