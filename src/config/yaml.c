/* yaml.c - the configuration file: YAML through libyaml, the keys of the key table at top level
 * or under a `profiling:` mapping. Every error names the file, line, column and key, and says
 * what was expected; the configuration changes only when the whole file is valid. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "../util/error.h"
#include "../util/buf.h"
#include "keys.h"
#include "../util/alloc.h"

#define MAX_FILE (16u << 20)

typedef struct yctx {
    yaml_parser_t parser;
    const char *name;    /* the file, in messages */
    sonde_config cfg;    /* the working copy */
    unsigned seen[64];   /* keys set so far (index into the table) + 1, for duplicates */
    size_t n_seen;
} yctx;

void sonde__yaml_problem(const yaml_parser_t *p, const char *name, char *out, size_t cap)
{
    const yaml_mark_t *mk = p->problem_mark.line || p->problem_mark.column ? &p->problem_mark
                                                                         : &p->context_mark;
    snprintf(out, cap, "%s:%zu:%zu: YAML syntax error: %s%s%s", name, mk->line + 1,
             mk->column + 1, p->problem ? p->problem : "malformed", p->context ? " " : "",
             p->context ? p->context : "");
}

static int next(yctx *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->parser, ev))
        return 0;
    char msg[600];
    sonde__yaml_problem(&y->parser, y->name, msg, sizeof msg);
    return sonde__fail(SONDE_EINVAL, "%s", msg);
}

static int where_fail(yctx *y, const yaml_mark_t *m, const char *fmt, const char *a, const char *b)
{
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a, b);
    return sonde__fail(SONDE_EINVAL, "%s:%zu:%zu: %s", y->name, m->line + 1, m->column + 1, msg);
}

static int unknown_key(yctx *y, const yaml_mark_t *m, const char *key)
{
    const char *s = sonde__key_suggest(key);
    char hint[96] = "";
    if (s)
        snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", s);
    return where_fail(y, m, "unknown key \"%s\"%s", key, hint);
}

/* The value of one key: a scalar, a sequence of scalars (joined with commas) for the list keys
 * (formats, gpu_devices), or a mapping of scalars (key=value, joined with commas) for
 * session_tags. ev is the value's first event; consumed. */
static int set_value(yctx *y, const sonde_key *k, const char *key, const yaml_mark_t *km,
                     yaml_event_t *ev)
{
    char where[400];
    snprintf(where, sizeof where, "%s:%zu:%zu: %s", y->name, ev->start_mark.line + 1,
             ev->start_mark.column + 1, key);
    int rc = 0;
    (void)km;
    if (ev->type == YAML_SCALAR_EVENT) {
        const char *v = (const char *)ev->data.scalar.value;
        int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (plain && (!*v || !strcmp(v, "~") || !strcmp(v, "null"))) {
            if (k->type == KEY_STRING) { /* null: back to the default */
                *(const char **)(void *)((char *)&y->cfg + k->offset) = k->def;
            } else {
                char expect[SONDE__KEY_EXPECT_MAX];
                sonde__key_expect(k, expect, sizeof expect);
                rc = sonde__fail(SONDE_EINVAL, "%s: no value: expected %s", where, expect);
            }
        } else {
            rc = sonde__key_set(&y->cfg, k, v, where);
        }
        yaml_event_delete(ev);
        return rc;
    }
    int list = ev->type == YAML_SEQUENCE_START_EVENT &&
               (k->type == KEY_FORMATS || !strcmp(k->name, "gpu_devices"));
    int map = ev->type == YAML_MAPPING_START_EVENT && !strcmp(k->name, "session_tags");
    if (list || map) { /* [a, b] -> "a,b"; {experiment: v1, team: a} -> "experiment=v1,team=a" */
        yaml_event_type_t end = list ? YAML_SEQUENCE_END_EVENT : YAML_MAPPING_END_EVENT;
        sbuf text;
        sbuf_init(&text);
        yaml_event_delete(ev);
        for (int i = 0;; i++) {
            if ((rc = next(y, ev)))
                break;
            if (ev->type == end) {
                yaml_event_delete(ev);
                rc = text.oom ? sonde__fail(SONDE_ENOMEM, "%s: out of memory", where)
                              : sonde__key_set(&y->cfg, k, text.data ? text.data : "", where);
                break;
            }
            if (ev->type != YAML_SCALAR_EVENT) {
                rc = sonde__fail(SONDE_EINVAL, "%s:%zu:%zu: %s: a %s of plain values expected",
                                 y->name, ev->start_mark.line + 1, ev->start_mark.column + 1, key,
                                 list ? "list" : "mapping");
                yaml_event_delete(ev);
                break;
            }
            sbuf_puts(&text, map && i % 2 ? "=" : text.len ? "," : "");
            sbuf_puts(&text, (const char *)ev->data.scalar.value);
            yaml_event_delete(ev);
        }
        sbuf_free(&text);
        return rc;
    }
    if (ev->type == YAML_ALIAS_EVENT) {
        rc = sonde__fail(SONDE_EINVAL, "%s: an alias (*%s) is not a value: sonde configuration "
                         "files take no anchors or aliases", where,
                         (const char *)ev->data.alias.anchor);
        yaml_event_delete(ev);
        return rc;
    }
    char expect[SONDE__KEY_EXPECT_MAX];
    sonde__key_expect(k, expect, sizeof expect);
    rc = sonde__fail(SONDE_EINVAL, "%s: expected %s, found a %s", where, expect,
                     ev->type == YAML_MAPPING_START_EVENT ? "mapping" : "list");
    yaml_event_delete(ev); /* the node is not read on: its nesting could be deep (see below) */
    return rc;
}

/* A mapping of keys (its MAPPING_START already consumed). top: `profiling:` is allowed.
 * A node in the wrong place is an error at its first event and is never read through: libyaml's
 * scanner takes time quadratic in the nesting of flow collections ([[[[...), so reading a
 * 16 MB file of brackets would take hours (test_config's yaml_deep_nesting). Every node sonde
 * accepts is at most two levels deep. */
static int mapping(yctx *y, int top)
{
    yaml_event_t ev;
    for (;;) {
        int rc = next(y, &ev);
        if (rc)
            return rc;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            rc = sonde__fail(SONDE_EINVAL, "%s:%zu:%zu: a key must be a plain name", y->name,
                             ev.start_mark.line + 1, ev.start_mark.column + 1);
            yaml_event_delete(&ev);
            return rc;
        }
        char key[128];
        snprintf(key, sizeof key, "%s", (const char *)ev.data.scalar.value);
        yaml_mark_t km = ev.start_mark;
        yaml_event_delete(&ev);
        if ((rc = next(y, &ev)))
            return rc;
        if (top && !strcmp(key, "profiling")) {
            if (ev.type != YAML_MAPPING_START_EVENT) {
                rc = where_fail(y, &ev.start_mark, "profiling: expected a mapping of keys%s%s",
                                "", "");
                yaml_event_delete(&ev);
                return rc;
            }
            yaml_event_delete(&ev);
            if ((rc = mapping(y, 0)))
                return rc;
            continue;
        }
        const sonde_key *k = sonde__key_find(key);
        const sonde_key_alias *a = k ? NULL : sonde__key_alias(key);
        if (a) { /* the Inferix document's name for a sonde key: a plain value */
            char where[400];
            snprintf(where, sizeof where, "%s:%zu:%zu: %s", y->name, ev.start_mark.line + 1,
                     ev.start_mark.column + 1, key);
            rc = ev.type == YAML_SCALAR_EVENT
                     ? sonde__key_alias_set(&y->cfg, a, (const char *)ev.data.scalar.value,
                                            where)
                     : sonde__fail(SONDE_EINVAL, "%s: expected a plain value", where);
            yaml_event_delete(&ev);
            if (rc)
                return rc;
            continue;
        }
        if (!k) {
            rc = unknown_key(y, &km, key);
            yaml_event_delete(&ev);
            return rc;
        }
        unsigned idx = (unsigned)(k - sonde__keys(&(size_t){0}));
        for (size_t i = 0; i < y->n_seen; i++)
            if (y->seen[i] == idx + 1) {
                rc = where_fail(y, &km, "key \"%s\" is set twice%s", key, "");
                yaml_event_delete(&ev);
                return rc;
            }
        if (y->n_seen < 64)
            y->seen[y->n_seen++] = idx + 1;
        if ((rc = set_value(y, k, key, &km, &ev)))
            return rc;
    }
}

int sonde__config_load_mem(sonde_config *cfg, const char *data, size_t n, const char *name)
{
    yctx y;
    memset(&y, 0, sizeof y);
    y.name = name;
    y.cfg = *cfg;
    if (!yaml_parser_initialize(&y.parser))
        return sonde__fail(SONDE_ENOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)data, n);
    yaml_event_t ev;
    int rc, docs = 0;
    for (;;) {
        if ((rc = next(&y, &ev)))
            goto out;
        yaml_event_type_t t = ev.type;
        yaml_mark_t m = ev.start_mark;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_MAPPING_START_EVENT) {
            yaml_event_delete(&ev);
            if (++docs > 1) {
                rc = sonde__fail(SONDE_EINVAL, "%s:%zu:%zu: one document expected", name,
                                 m.line + 1, m.column + 1);
                goto out;
            }
            if ((rc = mapping(&y, 1)))
                goto out;
            continue;
        }
        if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT || t == YAML_ALIAS_EVENT) {
            rc = sonde__fail(SONDE_EINVAL, "%s:%zu:%zu: expected a mapping of keys (key: value), "
                                           "found %s", name, m.line + 1, m.column + 1,
                             t == YAML_SCALAR_EVENT ? "a plain value"
                             : t == YAML_ALIAS_EVENT ? "an alias" : "a list");
            yaml_event_delete(&ev);
            goto out;
        }
        yaml_event_delete(&ev); /* stream, document start and end */
    }
    *cfg = y.cfg;
    rc = 0;
out:
    yaml_parser_delete(&y.parser);
    return rc;
}

int sonde_config_load_file(sonde_config *cfg, const char *path)
{
    if (!cfg || !path)
        return sonde__fail(SONDE_EINVAL, "sonde_config_load_file: %s is NULL",
                           !cfg ? "cfg" : "path");
    char *buf;
    size_t got;
    int rc = sonde__read_input(path, MAX_FILE, &buf, &got);
    if (rc)
        return rc;
    rc = sonde__config_load_mem(cfg, buf, got, path);
    sonde__free(buf);
    return rc;
}
