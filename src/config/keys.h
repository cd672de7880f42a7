/* keys.h - the one table of configuration keys. Each key is declared once (name, type, field,
 * range, default, help) and drives the defaults, the environment, validation and the run's
 * recorded configuration; the YAML file and the --profile flags read the same table. */
#ifndef SONDE_CONFIG_KEYS_H
#define SONDE_CONFIG_KEYS_H

#include <stddef.h>
#include <stdio.h>

#include <sonde/sonde.h>

#include "../format/formats.h"

typedef enum { KEY_BOOL, KEY_UINT, KEY_DOUBLE, KEY_STRING, KEY_FORMATS, KEY_INT } sonde_key_type;

/* The report formats (format/formats.h, the one list: X(name, bit, ext, kind, writer), in the
 * order they are named to users): the key's help and errors, `sonde export`'s usage and the
 * parser come from it. */
#define SONDE__FORMATS(X) SONDE__FORMATS_ROWS(X)
#define SONDE__FORMAT_WORD(name, bit, ext, kind, writer) #name ", "
#define SONDE__FORMAT_ITEM(name, bit, ext, kind, writer) #name ","
/* "json, csv, ..., pprof, all or none": what `formats` accepts, in words */
#define SONDE__FORMAT_WORDS SONDE__FORMATS(SONDE__FORMAT_WORD) "all or none"
/* "json,csv,...,pprof,all": the same as a --format value's syntax */
#define SONDE__FORMAT_ITEMS SONDE__FORMATS(SONDE__FORMAT_ITEM) "all"
/* "    json: NAME.json\n" and so on, a line a format: the files they write */
#define SONDE__FORMAT_FILE(name, bit, ext, kind, writer) "    " #name ": NAME" ext "\n"
#define SONDE__FORMAT_FILES SONDE__FORMATS(SONDE__FORMAT_FILE)
/* The default formats (SONDE_FORMAT_REPORTS) as the key's text: the key table's default, the
 * presets and `sonde export`'s usage say it; test_config checks it names those bits. */
#define SONDE__FORMATS_DEFAULT "json,csv,txt,trace,html"

typedef struct sonde_key {
    const char *name;    /* the field's name, also the YAML key; env SONDE_<NAME upper-cased> */
    sonde_key_type type;
    size_t offset;       /* offsetof(sonde_config, field) */
    double lo, hi;       /* numeric range (KEY_UINT, KEY_DOUBLE) */
    const char *def;     /* default, as text; NULL for a string field that defaults to NULL */
    const char *help;
} sonde_key;

/* A key of the Inferix document's configuration (reference 001) that a sonde YAML file may use
 * in its place: its value sets `key` (after `value`, when the two differ), or, key NULL, is
 * accepted and sets nothing (a boolean for something sonde always does, or selects elsewhere;
 * `help` says which). */
typedef struct sonde_key_alias {
    const char *name;    /* the document's key ("display_interval") */
    const char *key;     /* sonde's key it sets ("display_interval_s"), or NULL */
    /* value -> the value for key: NULL when value is invalid, "" to set nothing; NULL: as is */
    const char *(*value)(const char *value);
    const char *help;
} sonde_key_alias;

/* The table and its length. */
const sonde_key *sonde__keys(size_t *n);
/* A key by name, or NULL. */
const sonde_key *sonde__key_find(const char *name);
/* The document's key name, or NULL; and the alias table (for `sonde config --list`). */
const sonde_key_alias *sonde__key_alias(const char *name);
const sonde_key_alias *sonde__key_aliases(size_t *n);
/* Applies alias a with value to c (where names the source in messages): the key it stands
 * for set, or, for an alias that sets nothing, value checked as a boolean. 0 or SONDE_EINVAL
 * with the message set; c unchanged on error. */
int sonde__key_alias_set(sonde_config *c, const sonde_key_alias *a, const char *value,
                         const char *where);
/* The key name closest to a mistyped one, or NULL when none is close. */
const char *sonde__key_suggest(const char *name);
/* The environment variable of a key ("SONDE_GPU_INTERVAL_S") into out. */
void sonde__key_env(const sonde_key *k, char *out, size_t cap);
/* A key's type in words ("number in 0.01..3600"), for messages and listings; it fits in
 * SONDE__KEY_EXPECT_MAX bytes. */
#define SONDE__KEY_EXPECT_MAX 160
void sonde__key_expect(const sonde_key *k, char *out, size_t cap);
/* Parses value for k and stores it in c. where names the source in messages ("SONDE_X",
 * "file.yaml:3:7: key"). Strings are copied into storage that lives as long as the process.
 * 0, or SONDE_EINVAL with the message set; c unchanged on error. */
int sonde__key_set(sonde_config *c, const sonde_key *k, const char *value, const char *where);

/* The flight recorder's rules, trigger_section_over_s ("NAME=S;NAME=S") and
 * trigger_counter_below ("NAME=VALUE,S;..."): each name, its value (counters) and seconds. */
#define SONDE_RULE_NAME 256
#define SONDE_RULES_MAX 8
typedef struct sonde_trigger_rule {
    char name[SONDE_RULE_NAME];
    double value, s;
} sonde_trigger_rule;
/* Parses the value of key which into up to cap rules (rules may be NULL: checked only). The
 * number of rules, or -1 with why (what is wrong, naming the item). */
int sonde__trigger_rules(const char *which, const char *value, sonde_trigger_rule *rules,
                         size_t cap, char *why, size_t why_cap);
/* The current value of k in c as text. */
void sonde__key_get(const sonde_config *c, const sonde_key *k, char *out, size_t cap);
/* Dense peak FLOP/s of a device sonde knows ("h100-sxm-bf16"), 0 when unknown. */
double sonde__device_peak(const char *name);
/* Checks every field against its key's range; 0 or SONDE_EINVAL naming the field. */
int sonde__config_validate(const sonde_config *c);
/* Replaces every invalid field with its default; returns how many there were, with the first
 * one's message in msg. */
int sonde__config_repair(sonde_config *c, char *msg, size_t cap);
/* The longest key=value item of session_tags. */
#define SONDE_TAG_MAX 511
/* Around fork() (record/fork.c): take 1 takes the lock of that message, take 0 gives it back
 * (a leaf: nothing else is taken under it). */
void sonde__env_fork(int take);
/* The message of the last sonde_config_from_env that failed, "" when the last one succeeded. */
void sonde__env_failure(char *out, size_t cap);
/* "json,csv,txt,trace" and the like; 0 or SONDE_EINVAL naming where. */
int sonde__parse_formats(const char *where, const char *s, unsigned *out);

/* The YAML loader on a buffer (the file loader and the fuzz target use it); name is the file
 * named in messages. Same contract as sonde_config_load_file. */
int sonde__config_load_mem(sonde_config *c, const char *data, size_t n, const char *name);
/* The message for the syntax error libyaml's parser stopped at, in the file name:
 * "NAME:LINE:COL: YAML syntax error: PROBLEM CONTEXT" (the configuration loader's and the
 * Python package's YAML reader's). */
struct yaml_parser_s;
void sonde__yaml_problem(const struct yaml_parser_s *p, const char *name, char *out, size_t cap);
/* The values of a preset as "key=value" strings (NULL-terminated); -1 for an unknown name. */
int sonde__preset_values(const char *name, const char *const **values);
/* Prints the --profile* flags and what they do. */
void sonde__flags_help(FILE *out);

#endif
