/* instants_by_section.c - a consumer of the reading (consumers.c): how many instants
 * (sonde_event) each section name had inside it, the innermost section open on the instant's
 * thread; those outside every section under "(no section)". Its table: a line a section name,
 * the most instants first, with its three most frequent instant names. */
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/sort.h"
#include "model.h"

typedef struct pair {
    uint32_t section, instant; /* site ids (0: no section) */
    uint64_t count;
} pair;

typedef struct state {
    pair *v;
    size_t n, cap;
    size_t *slot;    /* open addressing over v by (section, instant) */
    size_t n_slot;   /* a power of two, at least twice n */
} state;

static void *start(void)
{
    return sonde__calloc(1, sizeof(state));
}

static size_t hash(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17);
}

static int grow_slots(state *s)
{
    size_t n = s->n_slot ? s->n_slot * 2 : 64;
    size_t *slot = sonde__malloc(n * sizeof *slot);
    if (!slot)
        return -1;
    for (size_t i = 0; i < n; i++)
        slot[i] = SIZE_MAX;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = hash(s->v[k].section, s->v[k].instant) & (n - 1);
        while (slot[i] != SIZE_MAX)
            i = (i + 1) & (n - 1);
        slot[i] = k;
    }
    sonde__free(s->slot);
    s->slot = slot;
    s->n_slot = n;
    return 0;
}

static int on_instant(void *st, const sm_model *m, const sm_event *e)
{
    (void)m;
    state *s = st;
    if ((s->n + 1) * 2 > s->n_slot && grow_slots(s))
        return -1;
    size_t i = hash(e->open, e->id) & (s->n_slot - 1);
    for (; s->slot[i] != SIZE_MAX; i = (i + 1) & (s->n_slot - 1)) {
        pair *p = &s->v[s->slot[i]];
        if (p->section == e->open && p->instant == e->id) {
            p->count++;
            return 0;
        }
    }
    if (SONDE_GROW(s->v, s->n, s->cap))
        return -1;
    s->v[s->n] = (pair){e->open, e->id, 1};
    s->slot[i] = s->n++;
    return 0;
}

/* One section name's line: its instants, then its pairs (by count) for the top names. */
typedef struct row {
    const char *name;
    uint64_t total;
    size_t first, n; /* its pairs in the sorted v */
} row;

static const sm_model *g_m; /* the sorts' model, whose names they compare */

static const char *name_of(const sm_model *m, uint32_t site)
{
    return site ? sm_str(m, site) : "(no section)";
}

/* Pairs by section name, then instant name (sites of one name are one section). */
static int cmp_names(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    int c = strcmp(name_of(g_m, x->section), name_of(g_m, y->section));
    return c ? c : strcmp(sm_str(g_m, x->instant), sm_str(g_m, y->instant));
}

/* Pairs by count, the most first, then by instant name. */
static int cmp_count(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(sm_str(g_m, x->instant), sm_str(g_m, y->instant));
}

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int print(void *st, const sm_model *m, sbuf *out)
{
    state *s = st;
    g_m = m;
    /* one pair per (section name, instant name): the sites of a name merged */
    sonde__sort(s->v, s->n, sizeof *s->v, cmp_names);
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (n && !cmp_names(&s->v[n - 1], &s->v[i]))
            s->v[n - 1].count += s->v[i].count;
        else
            s->v[n++] = s->v[i];
    }
    s->n = n;
    row *rows = sonde__malloc((n ? n : 1) * sizeof *rows);
    if (!rows)
        return -1;
    size_t n_rows = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = name_of(m, s->v[i].section);
        if (!n_rows || strcmp(rows[n_rows - 1].name, name))
            rows[n_rows++] = (row){name, 0, i, 0};
        rows[n_rows - 1].total += s->v[i].count;
        rows[n_rows - 1].n++;
    }
    for (size_t r = 0; r < n_rows; r++)
        sonde__sort(s->v + rows[r].first, rows[r].n, sizeof *s->v, cmp_count);
    sonde__sort(rows, n_rows, sizeof *rows, cmp_row);
    sbuf_printf(out, "%-32s %10s  %s\n", "section", "instants", "most frequent");
    for (size_t r = 0; r < n_rows; r++) {
        sbuf_printf(out, "%-32s %10llu ", rows[r].name, (unsigned long long)rows[r].total);
        for (size_t k = 0; k < rows[r].n && k < 3; k++) {
            const pair *p = &s->v[rows[r].first + k];
            sbuf_printf(out, "%s %s x%llu", k ? "," : "", sm_str(m, p->instant),
                        (unsigned long long)p->count);
        }
        sbuf_putc(out, '\n');
    }
    sonde__free(rows);
    return out->oom ? -1 : 0;
}

static void stop(void *st)
{
    state *s = st;
    if (!s)
        return;
    sonde__free(s->v);
    sonde__free(s->slot);
    sonde__free(s);
}

const sm_consumer sm_instants_by_section = {
    .name = "instants-by-section",
    .help = "how many instants (sonde_event) each section name had inside it",
    .start = start,
    .on = {[SONDE_K_INSTANT] = on_instant},
    .print = print,
    .stop = stop,
};
