/* profile.c - CPU samples with call stacks in the model: the SAMPLES, STACKS and FUNCS records
 * (src/stacks/stacks.c writes them) parsed, then built into sm_model.profile: the functions with
 * their self and total samples, the folded stacks, and per section the samples taken while it
 * was the innermost section open on the sample's thread, with their functions. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/buf.h"
#include "../util/strmap.h"
#include "model_build.h"

#define PF_MAX_FRAMES 4096   /* frames of one stack a reader accepts (the sampler keeps 128) */
#define PF_NAME_MAX 65536    /* bytes of a function, object or process name */

/* FUNCLOC's and LINES' entries, (varint id, str file, varint line)*: each id below n, the place
 * of the item id of an array (its char *file and unsigned line at those offsets; a place given
 * twice, the last). 0, -1 malformed, -2 out of memory. */
static int parse_places(const uint8_t *p, const uint8_t *end, void *items, size_t n, size_t size,
                        size_t file_at, size_t line_at)
{
    uint64_t id, line;
    while (p < end) {
        char *file = NULL;
        if (sm__get_var(&p, end, &id) || id >= n)
            return -1;
        int r = sm__get_str(&p, end, PF_NAME_MAX, &file);
        if (r)
            return r;
        if (sm__get_var(&p, end, &line) || line > UINT32_MAX) {
            sonde__free(file);
            return -1;
        }
        char *item = (char *)items + id * size;
        char **slot = (char **)(void *)(item + file_at);
        sonde__free(*slot);
        *slot = file;
        *(unsigned *)(void *)(item + line_at) = (unsigned)line;
    }
    return 0;
}

/* FRAMELINES' entries: each a stack read before, as many lines as it has functions. 0, -1
 * malformed, -2 out of memory. */
static int parse_frame_lines(sb_raw *raw, const uint8_t *p, const uint8_t *end)
{
    uint64_t id, n, line;
    while (p < end) {
        if (sm__get_var(&p, end, &id) || id >= raw->n_pstacks || sm__get_var(&p, end, &n))
            return -1;
        sm_pstack_raw *st = &raw->pstacks[id];
        if (n != st->n || !n)
            return -1;
        if (!st->flines && !(st->flines = sonde__malloc(n * sizeof *st->flines)))
            return -2;
        for (uint64_t k = 0; k < n; k++) {
            if (sm__get_var(&p, end, &line) || line > UINT32_MAX)
                return -1;
            st->flines[k] = (uint32_t)line;
        }
    }
    return 0;
}

int sm__profile_parse(sb_raw *raw, unsigned type, const uint8_t *p, const uint8_t *end)
{
    uint64_t v[4];
    if (type == SONDE_R_OFFCPU)
        return sm__offcpu_parse(raw, p, end);
    if (type == SONDE_R_FRAMELINES)
        return parse_frame_lines(raw, p, end);
    if (type == SONDE_R_SAMPLES) {
        if (sm__get_var(&p, end, &v[0]) || sm__get_var(&p, end, &v[1]) ||
            sm__get_var(&p, end, &v[2]) || v[0] > 1000000)
            return -1;
        raw->sample_hz = (unsigned)v[0];
        raw->samples_untimed |= !(v[1] & 1);
        raw->samples_by_timer |= (v[1] & 2) != 0;
        raw->samples_outside |= !(v[1] & 2);
        raw->samples_by_counter |= (v[1] & 4) != 0;
        raw->samples_lost += v[2];
        uint64_t t = 0;
        while (p < end) {
            if (sm__get_var(&p, end, &v[0]) || sm__get_var(&p, end, &v[1]) ||
                sm__get_var(&p, end, &v[2]) || v[0] > UINT32_MAX || v[1] >= SM_MAX_ID)
                return -1;
            if (SONDE_GROW(raw->samples, raw->n_samples, raw->cap_samples))
                return -2;
            t += (uint64_t)zigzag_dec(v[2]);
            raw->samples[raw->n_samples++] = (sm_sample_raw){(uint32_t)v[0], (uint32_t)v[1], t};
        }
        return 0;
    }
    if (type == SONDE_R_LINES) /* the innermost frames' lines of stacks read before */
        return parse_places(p, end, raw->pstacks, raw->n_pstacks, sizeof *raw->pstacks,
                            offsetof(sm_pstack_raw, file), offsetof(sm_pstack_raw, line));
    if (type == SONDE_R_FUNCLOC) /* where functions read before are defined */
        return parse_places(p, end, raw->pfuncs, raw->n_pfuncs, sizeof *raw->pfuncs,
                            offsetof(sm_pfunc_raw, file), offsetof(sm_pfunc_raw, line));
    if (type == SONDE_R_FUNCS) {
        while (p < end) {
            if (sm__get_var(&p, end, &v[0]) || v[0] != raw->n_pfuncs || v[0] >= SM_MAX_ID)
                return -1;
            if (SONDE_GROW(raw->pfuncs, raw->n_pfuncs, raw->cap_pfuncs))
                return -2;
            sm_pfunc_raw *f = &raw->pfuncs[raw->n_pfuncs];
            memset(f, 0, sizeof *f);
            int r = sm__get_str(&p, end, PF_NAME_MAX, &f->name);
            if (!r && (r = sm__get_str(&p, end, PF_NAME_MAX, &f->object)) != 0) {
                sonde__free(f->name);
                f->name = NULL;
            }
            if (r)
                return r;
            raw->n_pfuncs++;
        }
        return 0;
    }
    while (p < end) { /* STACKS */
        if (sm__get_var(&p, end, &v[0]) || v[0] != raw->n_pstacks || v[0] >= SM_MAX_ID ||
            sm__get_var(&p, end, &v[1]) || v[1] > UINT32_MAX)
            return -1;
        if (SONDE_GROW(raw->pstacks, raw->n_pstacks, raw->cap_pstacks))
            return -2;
        sm_pstack_raw *st = &raw->pstacks[raw->n_pstacks];
        memset(st, 0, sizeof *st);
        st->pid = (uint32_t)v[1];
        int r = sm__get_str(&p, end, PF_NAME_MAX, &st->process);
        if (r)
            return r;
        raw->n_pstacks++; /* owns its process name from here */
        if (sm__get_var(&p, end, &v[2]) || v[2] > PF_MAX_FRAMES)
            return -1;
        st->f = sonde__malloc((v[2] ? v[2] : 1) * sizeof *st->f);
        if (!st->f)
            return -2;
        for (uint64_t i = 0; i < v[2]; i++) {
            if (sm__get_var(&p, end, &v[3]) || v[3] >= SM_MAX_ID)
                return -1;
            st->f[i] = (uint32_t)v[3];
            st->n++;
        }
    }
    return 0;
}

void sm__profile_free_raw(sb_raw *raw)
{
    for (size_t i = 0; i < raw->n_pfuncs; i++) {
        sonde__free(raw->pfuncs[i].name);
        sonde__free(raw->pfuncs[i].object);
        sonde__free(raw->pfuncs[i].file);
    }
    for (size_t i = 0; i < raw->n_pstacks; i++) {
        sonde__free(raw->pstacks[i].process);
        sonde__free(raw->pstacks[i].f);
        sonde__free(raw->pstacks[i].file);
        sonde__free(raw->pstacks[i].flines);
    }
    sonde__free(raw->pfuncs);
    sonde__free(raw->pstacks);
    sonde__free(raw->samples);
    sonde__free(raw->offs);
    raw->offs = NULL;
    raw->n_offs = 0;
    raw->pfuncs = NULL;
    raw->pstacks = NULL;
    raw->samples = NULL;
    raw->n_pfuncs = raw->n_pstacks = raw->n_samples = 0;
}

void sm_profile_free(sm_profile *p)
{
    for (size_t i = 0; i < p->n_funcs; i++) {
        sonde__free(p->funcs[i].name);
        sonde__free(p->funcs[i].object);
        sonde__free(p->funcs[i].file);
    }
    for (size_t i = 0; i < p->n_stacks; i++)
        sonde__free(p->stacks[i]);
    for (size_t i = 0; i < p->n_sections; i++) {
        sonde__free(p->sections[i].name);
        sonde__free(p->sections[i].funcs);
        sonde__free(p->sections[i].stacks);
    }
    sonde__free(p->funcs);
    sonde__free(p->stacks);
    sonde__free(p->counts);
    sonde__free(p->frames);
    sonde__free(p->first);
    sonde__free(p->sections);
    for (size_t i = 0; i < p->n_lines; i++)
        sonde__free(p->lines[i].file);
    sonde__free(p->lines);
    sonde__free(p->stack_lines);
    sonde__free(p->stack_flines);
    sonde__free(p->off_flines);
    sonde__free(p->flines);
    sonde__free(p->timed);
    sonde__free(p->nodes);
    sonde__free(p->leaf);
    sonde__free(p->python);
    for (size_t i = 0; i < p->n_off; i++) {
        sonde__free(p->off[i].stack);
        sonde__free(p->off[i].frames);
    }
    sonde__free(p->off);
    sonde__free(p->off_held);
    for (size_t i = 0; i < p->n_off_sections; i++)
        sonde__free(p->off_sections[i].name);
    sonde__free(p->off_sections);
    memset(p, 0, sizeof *p);
}

/* ---- a table of two counts by a 64-bit key (open addressing, capacity a power of two) ---- */
typedef struct pf_slot {
    uint64_t key;  /* key + 1; 0: empty */
    uint64_t a, b;
} pf_slot;
typedef struct pf_table {
    pf_slot *s;
    size_t n, cap;
} pf_table;

static uint64_t pf_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* key's slot, made (with zero counts) when new; NULL out of memory. */
static pf_slot *pf_slot_of(pf_table *t, uint64_t key)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        pf_slot *s = sonde__calloc(cap, sizeof *s);
        if (!s)
            return NULL;
        for (size_t i = 0; i < t->cap; i++)
            if (t->s[i].key) {
                size_t j = pf_hash(t->s[i].key) & (cap - 1);
                while (s[j].key)
                    j = (j + 1) & (cap - 1);
                s[j] = t->s[i];
            }
        sonde__free(t->s);
        t->s = s;
        t->cap = cap;
    }
    size_t j = pf_hash(key + 1) & (t->cap - 1);
    while (t->s[j].key && t->s[j].key != key + 1)
        j = (j + 1) & (t->cap - 1);
    if (!t->s[j].key) {
        t->s[j].key = key + 1;
        t->n++;
    }
    return &t->s[j];
}

/* Adds a and b to key's counts. 0, or -1 out of memory. */
static int pf_add(pf_table *t, uint64_t key, uint64_t a, uint64_t b)
{
    pf_slot *s = pf_slot_of(t, key);
    if (!s)
        return -1;
    s->a += a;
    s->b += b;
    return 0;
}

static int cmp_func(const void *a, const void *b)
{
    const sm_func *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A function and its place before the sort. */
typedef struct pf_at {
    sm_func f;
    uint32_t was;
} pf_at;

static int cmp_at(const void *a, const void *b)
{
    return cmp_func(&((const pf_at *)a)->f, &((const pf_at *)b)->f);
}

/* The functions by self samples, most first; at[old index] = new index. 0, or -1. */
static int sort_funcs(sm_profile *p, uint32_t *at)
{
    pf_at *v = sonde__malloc((p->n_funcs ? p->n_funcs : 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < p->n_funcs; i++)
        v[i] = (pf_at){p->funcs[i], (uint32_t)i};
    sonde__sort(v, p->n_funcs, sizeof *v, cmp_at);
    for (size_t i = 0; i < p->n_funcs; i++) {
        p->funcs[i] = v[i].f;
        at[v[i].was] = (uint32_t)i;
    }
    for (size_t i = 0; p->first && i < p->first[p->n_stacks]; i++)
        p->frames[i] = at[p->frames[i]];
    sonde__free(v);
    return 0;
}

/* The functions and folded stacks: count[i] samples of raw stack i, which becomes folded stack
 * folded[i]. */
static int build_stacks(sb_raw *raw, sm_profile *pr, const uint64_t *count, uint32_t *folded)
{
    pr->funcs = sonde__calloc(raw->n_pfuncs ? raw->n_pfuncs : 1, sizeof *pr->funcs);
    pr->stacks = sonde__calloc(raw->n_pstacks + 1, sizeof *pr->stacks);
    pr->counts = sonde__calloc(raw->n_pstacks + 1, sizeof *pr->counts);
    pr->first = sonde__calloc(raw->n_pstacks + 2, sizeof *pr->first);
    uint64_t *mark = sonde__calloc(raw->n_pfuncs ? raw->n_pfuncs : 1, sizeof *mark);
    if (!pr->funcs || !pr->stacks || !pr->counts || !pr->first || !mark) {
        sonde__free(mark);
        return -1;
    }
    for (size_t i = 0; i < raw->n_pfuncs; i++) { /* copies: raw is kept (sm__profile_keep) */
        const sm_pfunc_raw *f = &raw->pfuncs[i];
        sm_func *g = &pr->funcs[pr->n_funcs++];
        *g = (sm_func){sonde__strdup(f->name ? f->name : "?"), NULL, NULL, f->line, 0, 0, 0,
                       f->object && f->file && !strcmp(f->object, f->file)};
        if ((f->object && !(g->object = sonde__strdup(f->object))) ||
            (f->file && !(g->file = sonde__strdup(f->file))) || !g->name) {
            sonde__free(mark);
            return -1;
        }
    }
    strmap lines;
    strmap_init(&lines);
    sbuf line;
    sbuf_init(&line);
    size_t n_frames = 0, cap_frames = 0;
    int rc = 0;
    for (size_t i = 0; i < raw->n_pstacks && !rc; i++) {
        const sm_pstack_raw *st = &raw->pstacks[i];
        if (!count[i])
            continue;
        sbuf_reset(&line);
        sm__fold_line(&line, st, pr->funcs, NULL);
        for (uint32_t k = st->n; k-- > 0;) /* the innermost Python frame's own sample */
            if (pr->funcs[st->f[k]].python) {
                pr->funcs[st->f[k]].own += count[i];
                break;
            }
        for (uint32_t k = 0; k < st->n; k++) {
            sm_func *fn = &pr->funcs[st->f[k]];
            if (k == st->n - 1)
                fn->self += count[i];
            if (mark[st->f[k]] != i + 1) { /* once per stack, however deep the recursion */
                mark[st->f[k]] = i + 1;
                fn->total += count[i];
            }
        }
        if (line.oom) {
            rc = -1;
            break;
        }
        /* stacks that differ only in where in each function they were are one line */
        int at = strmap_get(&lines, line.data);
        if (at >= 0) {
            pr->counts[at] += count[i];
            folded[i] = (uint32_t)at;
            continue;
        }
        folded[i] = (uint32_t)pr->n_stacks;
        pr->stacks[pr->n_stacks] = sonde__strdup(line.data);
        pr->counts[pr->n_stacks] = count[i];
        if (!pr->stacks[pr->n_stacks] || strmap_put(&lines, line.data, (int)pr->n_stacks)) {
            sonde__free(pr->stacks[pr->n_stacks]);
            rc = -1;
            break;
        }
        for (uint32_t k = 0; k < st->n && !rc; k++) {
            if (SONDE_GROW(pr->frames, n_frames, cap_frames))
                rc = -1;
            else
                pr->frames[n_frames++] = st->f[k];
        }
        pr->first[++pr->n_stacks] = n_frames;
    }
    sonde__free(mark);
    sbuf_free(&line);
    strmap_free(&lines);
    return rc;
}

size_t sm_psection_python(const sm_psection *ps, uint32_t *top, size_t k)
{
    size_t n = 0;
    for (size_t j = 0; j < ps->n_funcs; j++) { /* insertion into the k kept, most first */
        if (!ps->funcs[j].own)
            continue;
        size_t at = n < k ? n++ : k;
        while (at > 0 && ps->funcs[top[at - 1]].own < ps->funcs[j].own) {
            if (at < k)
                top[at] = top[at - 1];
            at--;
        }
        if (at < k)
            top[at] = (uint32_t)j;
    }
    return n;
}

void sm__fold_line(sbuf *line, const sm_pstack_raw *st, const sm_func *funcs, const uint32_t *at)
{
    sbuf_puts(line, st->process[0] ? st->process : "?");
    for (uint32_t k = 0; k < st->n; k++) {
        sbuf_putc(line, ';');
        for (const char *c = funcs[at ? at[st->f[k]] : st->f[k]].name; *c; c++)
            sbuf_putc(line, *c == ';' || *c == ' ' || *c == '\n' ? '_' : *c);
    }
}

size_t sm_psection_top(const sm_psection *ps, uint32_t *top, uint64_t *count, size_t k)
{
    size_t n = sm_psection_python(ps, top, k);
    for (size_t j = 0; j < n; j++)
        count[j] = ps->funcs[top[j]].own;
    if (n)
        return n;
    for (; n < k && n < ps->n_funcs && ps->funcs[n].self; n++) { /* by self, most first */
        top[n] = (uint32_t)n;
        count[n] = ps->funcs[n].self;
    }
    return n;
}

typedef struct own_at {
    uint64_t own;
    uint32_t func;
} own_at;

static int cmp_own(const void *a, const void *b)
{
    const own_at *x = a, *y = b;
    if (x->own != y->own)
        return x->own > y->own ? -1 : 1;
    return x->func < y->func ? -1 : x->func > y->func;
}

/* pr->python: the Python functions (after sort_funcs), most own samples first. 0, or -1. */
static int build_python(sm_profile *pr)
{
    size_t n = 0;
    for (size_t i = 0; i < pr->n_funcs; i++) /* (one only off-CPU stacks hold has none) */
        n += pr->funcs[i].python && pr->funcs[i].total;
    if (!n)
        return 0;
    own_at *v = sonde__malloc(n * sizeof *v);
    if (!v || !(pr->python = sonde__malloc(n * sizeof *pr->python))) {
        sonde__free(v);
        return -1;
    }
    n = 0;
    for (size_t i = 0; i < pr->n_funcs; i++)
        if (pr->funcs[i].python && pr->funcs[i].total)
            v[n++] = (own_at){pr->funcs[i].own, (uint32_t)i};
    sonde__sort(v, n, sizeof *v, cmp_own);
    for (size_t i = 0; i < n; i++)
        pr->python[i] = v[i].func;
    pr->n_python = n;
    sonde__free(v);
    return 0;
}

typedef struct pf_thread {
    uint32_t tid, index;
} pf_thread;

static int cmp_thread(const void *a, const void *b)
{
    uint32_t x = ((const pf_thread *)a)->tid, y = ((const pf_thread *)b)->tid;
    return x < y ? -1 : x > y;
}

/* Where a sample or an off-CPU period's start lies: the innermost section open on its thread
 * then, placed as the sections were built when not all are held (raw->sample_site), else
 * found now in the model's spans. */
typedef struct placer {
    const sb_raw *raw;
    const sm_model *m;
    pf_thread *th;             /* the model's threads by thread id */
    sm_nested spans;
    size_t *first;             /* sm__thread_firsts, when not placed while building */
} placer;

static int cmp_thread(const void *a, const void *b);

static int placer_init(placer *pl, const sb_raw *raw, const sm_model *m)
{
    memset(pl, 0, sizeof *pl);
    pl->raw = raw;
    pl->m = m;
    pl->spans = SM_SPANS(m);
    pl->th = sonde__malloc((m->n_threads ? m->n_threads : 1) * sizeof *pl->th);
    int spans = !raw->sample_site; /* some points are found in the spans */
    for (size_t i = 0; !spans && i < raw->n_samples + raw->n_offs; i++)
        spans = raw->sample_site[i] == SM_UNPLACED;
    if (spans)
        pl->first = sm__thread_firsts(&pl->spans, m->n_threads);
    if (!pl->th || (spans && !pl->first))
        return -1;
    for (size_t i = 0; i < m->n_threads; i++)
        pl->th[i] = (pf_thread){m->threads[i].tid, (uint32_t)i};
    sonde__sort(pl->th, m->n_threads, sizeof *pl->th, cmp_thread);
    return 0;
}

static void placer_free(placer *pl)
{
    sonde__free(pl->th);
    sonde__free(pl->first);
}

/* The site of the innermost section open at point `point` (a sample's index, or n_samples plus
 * an off-CPU period's) of thread tid at t_mono, taken in process pid (a stack's); -1: none, or
 * a thread of another process than the model's thread of that id. */
static int32_t placer_site(const placer *pl, size_t point, uint32_t tid, uint32_t pid,
                           uint64_t t_mono)
{
    const sm_model *m = pl->m;
    pf_thread key = {tid, 0};
    const pf_thread *hit = bsearch(&key, pl->th, m->n_threads, sizeof *pl->th, cmp_thread);
    int tpid = hit ? m->threads[hit->index].pid : 0;
    if (!hit || (tpid && (uint32_t)tpid != pid))
        return -1;
    if (pl->raw->sample_site && pl->raw->sample_site[point] != SM_UNPLACED)
        return pl->raw->sample_site[point];
    int32_t sp = sm__innermost_at(&pl->spans, pl->first, hit->index,
                                  (int64_t)(t_mono - m->start_mono_ns));
    return sp < 0 ? -1 : (int32_t)m->spans[sp].site;
}

static int cmp_section(const void *a, const void *b)
{
    const sm_psection *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples > y->samples ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_in(const void *a, const void *b)
{
    const sm_func_in *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int cmp_stack_in(const void *a, const void *b)
{
    const sm_stack_in *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Spreads a table keyed section << 32 | item over the sections: into each one's funcs (the
 * function with its self and total samples) or, with stacks, its stacks (the stack with its
 * samples). 0, or -1 out of memory. */
static int spread(const pf_table *t, sm_profile *pr, int stacks)
{
    size_t *n = sonde__calloc(pr->n_sections + 1, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->s[i].key)
            n[(t->s[i].key - 1) >> 32]++;
    for (size_t i = 0; i < pr->n_sections; i++) {
        sm_psection *ps = &pr->sections[i];
        void *v = sonde__malloc((n[i] + 1) * (stacks ? sizeof(sm_stack_in) : sizeof(sm_func_in)));
        if (!v) {
            sonde__free(n);
            return -1;
        }
        if (stacks)
            ps->stacks = v;
        else
            ps->funcs = v;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->s[i].key)
            continue;
        uint64_t k = t->s[i].key - 1;
        sm_psection *ps = &pr->sections[k >> 32];
        if (stacks)
            ps->stacks[ps->n_stacks++] = (sm_stack_in){(uint32_t)k, t->s[i].a};
        else
            ps->funcs[ps->n_funcs++] = (sm_func_in){(uint32_t)k, t->s[i].a, t->s[i].b, 0};
    }
    sonde__free(n);
    return 0;
}

/* Each sample in the innermost section open on its thread at its time, grouped by the
 * section's name: first (section, stack) pairs counted, then each pair's functions and its
 * folded stack. */
static int build_sections(sb_raw *raw, sm_model *m, const placer *pl, const uint32_t *at,
                          const uint32_t *folded)
{
    sm_profile *pr = &m->profile;
    uint64_t *mark = sonde__calloc(pr->n_funcs ? pr->n_funcs : 1, sizeof *mark);
    pf_table pairs = {0}, fns = {0}, stacks = {0}, owns = {0};
    size_t cap_sections = 0;
    strmap names;
    strmap_init(&names);
    int rc = -1;
    if (!mark)
        goto out;
    for (size_t i = 0; i < raw->n_samples; i++) {
        const sm_sample_raw *s = &raw->samples[i]; /* its stack is one of the file's */
        int32_t site = placer_site(pl, i, s->tid, raw->pstacks[s->stack].pid, s->t_mono);
        if (site < 0)
            continue;
        const char *name = m->sites[site].name;
        int sec = strmap_get(&names, name);
        if (sec < 0) {
            if (SONDE_GROW(pr->sections, pr->n_sections, cap_sections))
                goto out;
            sec = (int)pr->n_sections;
            pr->sections[sec] = (sm_psection){sonde__strdup(name), 0, NULL, 0, NULL, 0};
            pr->n_sections++;
            if (!pr->sections[sec].name || strmap_put(&names, name, sec))
                goto out;
        }
        pr->sections[sec].samples++;
        pr->in_sections++;
        if (pf_add(&pairs, (uint64_t)sec << 32 | s->stack, 1, 0))
            goto out;
    }
    /* each pair's functions: (section, function) -> self and total samples */
    for (size_t i = 0; i < pairs.cap; i++) {
        if (!pairs.s[i].key)
            continue;
        uint64_t k = pairs.s[i].key - 1, c = pairs.s[i].a, sec = k >> 32;
        const sm_pstack_raw *st = &raw->pstacks[(uint32_t)k];
        if (pf_add(&stacks, sec << 32 | folded[(uint32_t)k], c, 0))
            goto out;
        for (uint32_t f = 0; f < st->n; f++) {
            uint32_t fn = at[st->f[f]];
            uint64_t self = f == st->n - 1 ? c : 0, total = mark[fn] != i + 1 ? c : 0;
            mark[fn] = i + 1; /* a total once per stack, however deep the recursion */
            if ((self || total) && pf_add(&fns, sec << 32 | fn, self, total))
                goto out;
        }
        for (uint32_t f = st->n; f-- > 0;) /* the innermost Python frame owns the samples */
            if (pr->funcs[at[st->f[f]]].python) {
                if (pf_add(&owns, sec << 32 | at[st->f[f]], c, 0))
                    goto out;
                break;
            }
    }
    if (spread(&fns, pr, 0) || spread(&stacks, pr, 1))
        goto out;
    for (size_t i = 0; i < owns.cap; i++) { /* each owner is among its section's functions */
        if (!owns.s[i].key)
            continue;
        uint64_t k = owns.s[i].key - 1;
        sm_psection *ps = &pr->sections[k >> 32];
        for (size_t j = 0; j < ps->n_funcs; j++)
            if (ps->funcs[j].func == (uint32_t)k)
                ps->funcs[j].own = owns.s[i].a;
    }
    for (size_t i = 0; i < pr->n_sections; i++) {
        sonde__sort(pr->sections[i].funcs, pr->sections[i].n_funcs, sizeof(sm_func_in), cmp_in);
        sonde__sort(pr->sections[i].stacks, pr->sections[i].n_stacks, sizeof(sm_stack_in),
                    cmp_stack_in);
    }
    sonde__sort(pr->sections, pr->n_sections, sizeof *pr->sections, cmp_section);
    rc = 0;
out:
    sonde__free(fns.s);
    sonde__free(stacks.s);
    sonde__free(owns.s);
    sonde__free(mark);
    sonde__free(pairs.s);
    strmap_free(&names);
    return rc;
}

static int cmp_line(const void *a, const void *b)
{
    const sm_line *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->line < y->line ? -1 : x->line > y->line);
}

static int cmp_stack_line(const void *a, const void *b)
{
    const sm_stack_line *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* A line with its place before sorting, so each raw stack's line can follow the sort. */
typedef struct line_at {
    sm_line l;
    uint32_t before;
} line_at;

static int cmp_line_at(const void *a, const void *b)
{
    return cmp_line(&((const line_at *)a)->l, &((const line_at *)b)->l);
}

/* Function f (sorted) is defined in file. */
static int same_file(const sm_profile *pr, uint32_t f, const char *file)
{
    return f < pr->n_funcs && pr->funcs[f].file && !strcmp(pr->funcs[f].file, file);
}

/* The source lines the samples were running, by (function, file, line), and which of them each
 * folded stack ran: count[i] samples of raw stack i, which became folded stack folded[i]; at[]
 * the functions' order after sorting. 0, or -1 out of memory. */
static int build_lines(const sb_raw *raw, sm_profile *pr, const uint64_t *count,
                       const uint32_t *at, const uint32_t *folded)
{
    strmap seen;
    strmap_init(&seen);
    sbuf key;
    sbuf_init(&key);
    line_at *v = NULL;
    size_t cap = 0, n = 0;
    uint32_t *line_of = sonde__malloc((raw->n_pstacks + 1) * sizeof *line_of); /* before sort */
    uint32_t *after = NULL;
    int rc = line_of ? 0 : -1;
    for (size_t i = 0; i < raw->n_pstacks && !rc; i++) {
        const sm_pstack_raw *st = &raw->pstacks[i];
        line_of[i] = UINT32_MAX;
        if (!count[i] || !st->file || !st->n)
            continue;
        /* the line's function: the innermost, unless it is defined in another file and an outer
         * one in the line's (the interpreter's C code running a line of Python) */
        uint32_t fn = at[st->f[st->n - 1]];
        for (uint32_t k = st->n; k-- > 0 && !same_file(pr, fn, st->file);)
            if (same_file(pr, at[st->f[k]], st->file)) {
                fn = at[st->f[k]];
                break;
            }
        sbuf_reset(&key);
        sbuf_printf(&key, "%u\t%u\t%s", fn, st->line, st->file);
        int k = key.oom ? -2 : strmap_get(&seen, key.data);
        if (k == -2 || (k < 0 && SONDE_GROW(v, n, cap))) {
            rc = -1;
            break;
        }
        if (k < 0) {
            k = (int)n;
            v[n++] = (line_at){{fn, sonde__strdup(st->file), st->line, 0}, (uint32_t)k};
            if (!v[k].l.file || strmap_put(&seen, key.data, k)) {
                rc = -1;
                break;
            }
        }
        v[k].l.self += count[i];
        line_of[i] = (uint32_t)k;
    }
    if (!rc && n) {
        sonde__sort(v, n, sizeof *v, cmp_line_at);
        pr->lines = sonde__malloc(n * sizeof *pr->lines);
        after = sonde__malloc(n * sizeof *after); /* place before sort -> after */
        rc = pr->lines && after ? 0 : -1;
    }
    for (size_t k = 0; k < n; k++) {
        if (!rc) {
            pr->lines[pr->n_lines++] = v[k].l;
            after[v[k].before] = (uint32_t)k;
            v[k].l.file = NULL; /* now pr->lines' */
        }
        sonde__free(v[k].l.file);
    }
    if (!rc && n) /* a stack's samples per line, one entry per (folded stack, line) */
        pr->stack_lines = sonde__malloc(raw->n_pstacks * sizeof *pr->stack_lines);
    if (!rc && n && !pr->stack_lines)
        rc = -1;
    for (size_t i = 0; i < raw->n_pstacks && !rc && n; i++)
        if (line_of[i] != UINT32_MAX)
            pr->stack_lines[pr->n_stack_lines++] =
                (sm_stack_line){folded[i], after[line_of[i]], count[i]};
    if (pr->n_stack_lines) { /* raw stacks of one folded stack on one line: one entry */
        sonde__sort(pr->stack_lines, pr->n_stack_lines, sizeof *pr->stack_lines, cmp_stack_line);
        size_t kept = 1;
        for (size_t i = 1; i < pr->n_stack_lines; i++) {
            sm_stack_line *last = &pr->stack_lines[kept - 1], *e = &pr->stack_lines[i];
            if (e->stack == last->stack && e->line == last->line)
                last->count += e->count;
            else
                pr->stack_lines[kept++] = *e;
        }
        pr->n_stack_lines = kept;
    }
    sonde__free(v);
    sonde__free(after);
    sonde__free(line_of);
    sbuf_free(&key);
    strmap_free(&seen);
    return rc;
}

int sm__flines_find(const strmap *seen, sbuf *key, uint32_t owner, const sm_pstack_raw *st)
{
    sbuf_reset(key);
    sbuf_printf(key, "%u", owner);
    for (uint32_t k = 0; k < st->n; k++)
        sbuf_printf(key, ",%u", st->flines[k]);
    return key->oom ? -2 : strmap_get(seen, key->data);
}

int sm__add_flines(sm_profile *pr, const sm_pstack_raw *st)
{
    for (uint32_t k = 0; k < st->n; k++) {
        if (SONDE_GROW(pr->flines, pr->n_flines, pr->cap_flines))
            return -1;
        pr->flines[pr->n_flines++] = st->flines[k];
    }
    return 0;
}

static int cmp_stack_flines(const void *a, const void *b)
{
    const sm_stack_flines *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at; /* in order of first appearance */
}

/* The lines every frame of each folded stack ran (FRAMELINES), one entry per distinct (folded
 * stack, lines): count[i] samples of raw stack i, which became folded stack folded[i]. 0, or -1
 * out of memory. */
static int build_frame_lines(const sb_raw *raw, sm_profile *pr, const uint64_t *count,
                             const uint32_t *folded)
{
    strmap seen;
    strmap_init(&seen);
    sbuf key;
    sbuf_init(&key);
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < raw->n_pstacks && !rc; i++) {
        const sm_pstack_raw *st = &raw->pstacks[i];
        if (!count[i] || !st->flines || st->n != pr->first[folded[i] + 1] - pr->first[folded[i]])
            continue; /* (a process named with a ';' can fold stacks of other depths together) */
        int e = sm__flines_find(&seen, &key, folded[i], st);
        if (e == -2) {
            rc = -1;
            break;
        }
        if (e >= 0) {
            pr->stack_flines[e].count += count[i];
            continue;
        }
        if (SONDE_GROW(pr->stack_flines, pr->n_stack_flines, cap) ||
            strmap_put(&seen, key.data, (int)pr->n_stack_flines)) {
            rc = -1;
            break;
        }
        pr->stack_flines[pr->n_stack_flines++] = (sm_stack_flines){folded[i], count[i],
                                                                   pr->n_flines};
        if (sm__add_flines(pr, st))
            rc = -1;
    }
    if (!rc) /* by stack (strmap's indexes are taken: nothing looks them up after) */
        sonde__sort(pr->stack_flines, pr->n_stack_flines, sizeof *pr->stack_flines,
                    cmp_stack_flines);
    sbuf_free(&key);
    strmap_free(&seen);
    return rc;
}

static int cmp_psample(const void *a, const void *b)
{
    const sm_psample *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The samples in order of time, and the tree of the stacks' frames (a node per distinct
 * caller chain), for the trace. 0, or -1 out of memory. */
static int build_timed(const sb_raw *raw, sm_model *m, const uint32_t *folded)
{
    sm_profile *pr = &m->profile;
    pr->timed = sonde__malloc((raw->n_samples ? raw->n_samples : 1) * sizeof *pr->timed);
    pr->leaf = sonde__malloc((pr->n_stacks ? pr->n_stacks : 1) * sizeof *pr->leaf);
    if (!pr->timed || !pr->leaf)
        return -1;
    for (size_t i = 0; i < raw->n_samples; i++) {
        const sm_sample_raw *s = &raw->samples[i];
        pr->timed[i] = (sm_psample){(int64_t)(s->t_mono - m->start_mono_ns), s->tid,
                                    raw->pstacks[s->stack].pid, folded[s->stack]};
    }
    pr->n_timed = raw->n_samples;
    sonde__sort(pr->timed, pr->n_timed, sizeof *pr->timed, cmp_psample);
    pf_table nodes = {0}; /* (parent + 1) << 32 | function -> node + 1 */
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < pr->n_stacks && !rc; i++) {
        uint64_t parent = UINT32_MAX;
        for (size_t f = pr->first[i]; f < pr->first[i + 1] && !rc; f++) {
            uint64_t key = ((parent + 1) & 0xffffffffull) << 32 | pr->frames[f];
            pf_slot *node = pf_slot_of(&nodes, key);
            if (!node) {
                rc = -1;
                break;
            }
            if (!node->a) { /* new: its node */
                if (SONDE_GROW(pr->nodes, pr->n_nodes, cap)) {
                    rc = -1;
                    break;
                }
                pr->nodes[pr->n_nodes++] = (sm_pnode){pr->frames[f], (uint32_t)parent};
                node->a = pr->n_nodes;
            }
            parent = node->a - 1;
        }
        pr->leaf[i] = (uint32_t)parent;
    }
    sonde__free(nodes.s);
    return rc;
}

/* Sample i of raw kept as the kept-th (its place in sample_site with it); samples_kept ends the
 * pass. */
static void sample_keep(sb_raw *raw, size_t i, size_t *kept)
{
    if (raw->sample_site)
        raw->sample_site[*kept] = raw->sample_site[i];
    raw->samples[(*kept)++] = raw->samples[i];
}

/* The samples kept (sample_keep) are raw's: the off-CPU periods' places moved after theirs. */
static void samples_kept(sb_raw *raw, size_t kept)
{
    if (raw->sample_site && kept < raw->n_samples)
        memmove(raw->sample_site + kept, raw->sample_site + raw->n_samples,
                raw->n_offs * sizeof *raw->sample_site);
    raw->n_samples = kept;
}

int sm__profile_build(sb_raw *raw, sm_model *m)
{
    if (!raw->n_samples && !raw->n_pstacks)
        return 0;
    sm_profile *pr = &m->profile;
    pr->hz = raw->sample_hz;
    pr->lost = raw->samples_lost;
    pr->cpu_ns = raw->stacks_cpu_ns;
    pr->cfi_unwound = raw->stacks_cfi;
    pr->py_way = (unsigned)raw->stacks_py_way;
    pr->py_kernel_runs = raw->stacks_py_kernel_runs;
    pr->py_kernel_ns = raw->stacks_py_kernel_ns;
    pr->untimed = raw->samples_untimed;
    pr->by_timer = raw->samples_by_timer;
    pr->by_counter = raw->samples_by_timer && raw->samples_by_counter;
    /* a stack naming a function the file does not have is left out, with its samples */
    uint64_t *count = sonde__calloc(raw->n_pstacks + 1, sizeof *count);
    uint32_t *at = sonde__malloc((raw->n_pfuncs + 1) * sizeof *at);
    uint8_t *bad = sonde__calloc(raw->n_pstacks + 1, 1);
    uint32_t *folded = sonde__calloc(raw->n_pstacks + 1, sizeof *folded);
    int32_t *off_site = NULL; /* each off-CPU period's section (NULL: samples without times) */
    placer pl;
    memset(&pl, 0, sizeof pl);
    int rc = -1;
    if (!count || !at || !bad || !folded)
        goto out;
    for (size_t i = 0; i < raw->n_pstacks; i++)
        for (uint32_t k = 0; k < raw->pstacks[i].n; k++)
            bad[i] |= raw->pstacks[i].f[k] >= raw->n_pfuncs;
    size_t kept = 0;
    uint64_t draws = 0, last_t = 0;
    uint32_t last_tid = 0;
    for (size_t i = 0; i < raw->n_samples; i++) {
        const sm_sample_raw *r = &raw->samples[i];
        if (r->stack < raw->n_pstacks && !bad[r->stack]) {
            /* a timer's signal is written as its weight in samples of one thread and time */
            draws += !kept || raw->samples_untimed || r->tid != last_tid || r->t_mono != last_t;
            last_tid = r->tid;
            last_t = r->t_mono;
            count[r->stack]++;
            sample_keep(raw, i, &kept); /* the places found while building follow them */
        }
    }
    pr->draws = draws;
    pr->unnamed = raw->samples_unnamed + (raw->n_samples - kept);
    raw->samples_unnamed = pr->unnamed; /* a build again (sm__profile_merge) counts them too */
    samples_kept(raw, kept);
    pr->samples = kept;
    if (build_stacks(raw, pr, count, folded) || sort_funcs(pr, at) || build_python(pr) ||
        build_lines(raw, pr, count, at, folded) || build_frame_lines(raw, pr, count, folded))
        goto out;
    if (!pr->untimed) {
        if (placer_init(&pl, raw, m) || build_sections(raw, m, &pl, at, folded) ||
            build_timed(raw, m, folded) ||
            !(off_site = sonde__malloc((raw->n_offs + 1) * sizeof *off_site)))
            goto out;
        for (size_t i = 0; i < raw->n_offs; i++) { /* where each off-CPU period began */
            const sm_off_raw *o = &raw->offs[i];
            off_site[i] = o->stack < raw->n_pstacks
                              ? placer_site(&pl, raw->n_samples + i, o->tid,
                                            raw->pstacks[o->stack].pid, o->t_mono)
                              : -1;
        }
    }
    if (sm__offcpu_build(raw, m, at, off_site))
        goto out;
    rc = 0;
out:
    placer_free(&pl);
    sonde__free(off_site);
    sonde__free(count);
    sonde__free(at);
    sonde__free(bad);
    sonde__free(folded);
    return rc;
}

int sm__profile_keep(sb_raw *raw, sm_model *m)
{
    if (!raw->n_samples && !raw->n_pstacks && !raw->n_offs)
        return 0;
    sb_raw *k = sonde__calloc(1, sizeof *k);
    if (!k)
        return -1;
#define MOVE(f) (k->f = raw->f, raw->f = 0)
    MOVE(samples), MOVE(n_samples), MOVE(cap_samples), MOVE(sample_site);
    MOVE(pstacks), MOVE(n_pstacks), MOVE(cap_pstacks), MOVE(pfuncs), MOVE(n_pfuncs);
    MOVE(cap_pfuncs), MOVE(offs), MOVE(n_offs), MOVE(cap_offs);
#undef MOVE
    k->samples_lost = raw->samples_lost;
    k->stacks_cpu_ns = raw->stacks_cpu_ns;
    k->stacks_cfi = raw->stacks_cfi;
    k->stacks_py_way = raw->stacks_py_way;
    k->stacks_py_kernel_runs = raw->stacks_py_kernel_runs;
    k->stacks_py_kernel_ns = raw->stacks_py_kernel_ns;
    k->samples_unnamed = raw->samples_unnamed;
    k->sample_hz = raw->sample_hz;
    k->samples_untimed = raw->samples_untimed;
    k->samples_by_timer = raw->samples_by_timer;
    k->samples_by_counter = raw->samples_by_counter;
    k->samples_outside = raw->samples_outside;
    k->off_followed = raw->off_followed;
    m->praw = k;
    return 0;
}

/* Function i of raw as the key two runs' functions are matched by: its name, object and where it
 * is defined. */
static void pf_func_key(sbuf *key, const sm_pfunc_raw *f)
{
    sbuf_reset(key);
    sbuf_printf(key, "%s\t%s\t%s\t%u", f->name ? f->name : "", f->object ? f->object : "",
                f->file ? f->file : "", f->line);
}

/* b's functions appended to a's, each one a has already matched to it instead: fmap[b's id] =
 * a's. 0, or -1 out of memory. */
static int pf_merge_funcs(sb_raw *a, sb_raw *b, uint32_t *fmap)
{
    strmap have;
    strmap_init(&have);
    sbuf key;
    sbuf_init(&key);
    int rc = SONDE_RESERVE(a->pfuncs, a->n_pfuncs, b->n_pfuncs, a->cap_pfuncs);
    for (size_t i = 0; !rc && i < a->n_pfuncs; i++) {
        pf_func_key(&key, &a->pfuncs[i]);
        rc = key.oom || strmap_put(&have, key.data, (int)i) ? -1 : 0;
    }
    for (size_t i = 0; !rc && i < b->n_pfuncs; i++) {
        sm_pfunc_raw *f = &b->pfuncs[i];
        pf_func_key(&key, f);
        int at = key.oom ? -2 : strmap_get(&have, key.data);
        if (at == -2) {
            rc = -1;
        } else if (at >= 0) {
            fmap[i] = (uint32_t)at;
        } else { /* a function of its own: moved, its strings with it */
            fmap[i] = (uint32_t)a->n_pfuncs;
            a->pfuncs[a->n_pfuncs++] = *f;
            memset(f, 0, sizeof *f);
            rc = strmap_put(&have, key.data, (int)fmap[i]) ? -1 : 0;
        }
    }
    sbuf_free(&key);
    strmap_free(&have);
    return rc;
}

/* The places of a's points (its samples, then its off-CPU periods) after b's were appended: each
 * side's as it had them (b's sites moved by site0), or SM_UNPLACED where a side had none (it held
 * every section: the merged spans place them). ns0, no0: a's samples and periods before. */
static int pf_merge_sites(sb_raw *a, const sb_raw *b, size_t ns0, size_t no0, uint32_t site0)
{
    if (!a->sample_site && !b->sample_site)
        return 0;
    size_t n = a->n_samples + a->n_offs;
    int32_t *site = sonde__malloc((n ? n : 1) * sizeof *site);
    if (!site)
        return -1;
    const size_t from[4] = {0, 0, ns0, b->n_samples}, len[4] = {ns0, b->n_samples, no0, b->n_offs};
    size_t at = 0;
    for (int part = 0; part < 4; part++) { /* a's samples, b's, a's periods, b's */
        const int32_t *had = part & 1 ? b->sample_site : a->sample_site;
        for (size_t i = 0; i < len[part]; i++) {
            int32_t v = had ? had[from[part] + i] : SM_UNPLACED;
            site[at++] = (part & 1) && v >= 0 ? v + (int32_t)site0 : v;
        }
    }
    sonde__free(a->sample_site);
    a->sample_site = site;
    return 0;
}

/* A thread's samples taken in it: from t0 to t1 (pf_drop_taken_inside). */
typedef struct pf_span {
    uint32_t pid, tid;
    uint64_t t0, t1;
} pf_span;

static int cmp_span(const void *x, const void *y)
{
    const pf_span *a = x, *b = y;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* The span of b's thread (pid, tid) in sp (sorted), NULL: none. */
static pf_span *span_of(pf_span *sp, size_t n, uint32_t pid, uint32_t tid)
{
    pf_span key = {pid, tid, 0, 0};
    return bsearch(&key, sp, n, sizeof *sp, cmp_span);
}

/* Where b's samples were taken in the threads of processes that a sampled from outside (sonde
 * run's way with a Python program: its CPython processes sample themselves, the run samples the
 * whole tree without their Python frames), the moments both took: a's samples of each such
 * thread from b's first sample of it to its last are left out, so each moment is counted once,
 * with its Python frames; a's samples of other threads (one begun since the process last looked
 * for new ones), of a thread before it was sampled in it (a shell's image before it exec'd
 * Python), or of a process killed before it wrote its samples, stay. Asked of a's samples from
 * outside (samples_outside), whatever way most of a's are after earlier merges: the run's file,
 * then each process's. a's places (sample_site) follow. 0, or -1 out of memory. */
static int pf_drop_taken_inside(sb_raw *a, const sb_raw *b)
{
    if (!b->samples_by_timer || !a->samples_outside || !a->n_samples || !b->n_samples)
        return 0;
    pf_span *sp = sonde__malloc(b->n_samples * sizeof *sp);
    if (!sp)
        return -1;
    size_t n_sp = 0;
    for (size_t i = 0; i < b->n_samples; i++) { /* one a sample, then one a thread */
        const sm_sample_raw *x = &b->samples[i];
        if (x->stack < b->n_pstacks)
            sp[n_sp++] = (pf_span){b->pstacks[x->stack].pid, x->tid, x->t_mono, x->t_mono};
    }
    sonde__sort(sp, n_sp, sizeof *sp, cmp_span);
    size_t k = 0;
    for (size_t i = 0; i < n_sp; i++) {
        if (k && !cmp_span(&sp[k - 1], &sp[i])) {
            pf_span *t = &sp[k - 1];
            t->t0 = sp[i].t0 < t->t0 ? sp[i].t0 : t->t0;
            t->t1 = sp[i].t1 > t->t1 ? sp[i].t1 : t->t1;
        } else {
            sp[k++] = sp[i];
        }
    }
    n_sp = k;
    size_t kept = 0;
    for (size_t i = 0; i < a->n_samples; i++) {
        const sm_sample_raw *x = &a->samples[i];
        const pf_span *t =
            x->stack < a->n_pstacks ? span_of(sp, n_sp, a->pstacks[x->stack].pid, x->tid) : NULL;
        if (!t || x->t_mono < t->t0 || x->t_mono > t->t1)
            sample_keep(a, i, &kept);
    }
    sonde__free(sp);
    samples_kept(a, kept);
    return 0;
}

/* The stacks of process pid, a rank of a job, named with its rank: "python3 (rank 0)", so that
 * the ranks a launcher started under `sonde run` stand apart in the folded stacks, the flame
 * graphs and pprof's process label, where all were "python3". 0, or -1 out of memory. */
static int label_rank(sb_raw *a, int pid, int rank, int *changed)
{
    if (rank < 0 || pid <= 0)
        return 0;
    for (size_t i = 0; i < a->n_pstacks; i++) {
        sm_pstack_raw *st = &a->pstacks[i];
        if (st->pid != (uint32_t)pid || strstr(st->process, " (rank "))
            continue;
        char *l;
        if (sonde__asprintf(&l, "%s (rank %d)", st->process[0] ? st->process : "?", rank) < 0)
            return -1;
        sonde__free(st->process);
        st->process = l;
        *changed = 1;
    }
    return 0;
}

int sm__profile_merge(sm_model *d, sm_model *s, uint32_t site0)
{
    sb_raw *b = s->praw;
    const sm_profile *dp = &d->profile;
    int changed = 0;
    if (!b && d->praw) { /* no samples of its own: d's of its process named by its rank */
        if (label_rank(d->praw, s->pid, s->rank, &changed))
            return -1;
        if (!changed)
            return 0;
        sm_profile_free(&d->profile);
        return sm__profile_build(d->praw, d);
    }
    if (!b || (!d->praw && (dp->samples || dp->n_stacks || dp->n_off)))
        return 0; /* nothing to add, or d's profile was read back from a JSON report */
    if (!d->praw && !(d->praw = sonde__calloc(1, sizeof *d->praw)))
        return -1;
    sb_raw *a = d->praw;
    if (pf_drop_taken_inside(a, b))
        return -1;
    size_t st0 = a->n_pstacks, ns0 = a->n_samples, no0 = a->n_offs, nb = b->n_pstacks;
    for (size_t i = 0; i < st0; i++) /* a function a lacks stays one it lacks once b's join */
        for (uint32_t k = 0; k < a->pstacks[i].n; k++)
            if (a->pstacks[i].f[k] >= a->n_pfuncs)
                a->pstacks[i].f[k] = UINT32_MAX;
    uint32_t *fmap = sonde__malloc((b->n_pfuncs + 1) * sizeof *fmap);
    if (!fmap || pf_merge_funcs(a, b, fmap) ||
        SONDE_RESERVE(a->pstacks, a->n_pstacks, b->n_pstacks, a->cap_pstacks) ||
        SONDE_RESERVE(a->samples, a->n_samples, b->n_samples, a->cap_samples) ||
        SONDE_RESERVE(a->offs, a->n_offs, b->n_offs, a->cap_offs)) {
        sonde__free(fmap);
        return -1;
    }
    for (size_t i = 0; i < b->n_pstacks; i++) { /* moved, with their strings and arrays */
        sm_pstack_raw *st = &a->pstacks[a->n_pstacks++];
        *st = b->pstacks[i];
        for (uint32_t k = 0; k < st->n; k++) /* a function it lacks stays one (left out) */
            st->f[k] = st->f[k] < b->n_pfuncs ? fmap[st->f[k]] : UINT32_MAX;
    }
    b->n_pstacks = 0;
    sonde__free(fmap);
    for (size_t i = 0; i < b->n_samples; i++) {
        sm_sample_raw x = b->samples[i];
        x.stack = x.stack < nb ? x.stack + (uint32_t)st0 : UINT32_MAX;
        a->samples[a->n_samples++] = x;
    }
    for (size_t i = 0; i < b->n_offs; i++) {
        sm_off_raw x = b->offs[i];
        x.stack = x.stack < nb ? x.stack + (uint32_t)st0 : UINT32_MAX;
        a->offs[a->n_offs++] = x;
    }
    if (pf_merge_sites(a, b, ns0, no0, site0))
        return -1;
    if (b->n_samples > ns0) { /* how the samples were taken: the way most were */
        a->sample_hz = b->sample_hz;
        a->samples_by_timer = b->samples_by_timer;
        a->samples_by_counter = b->samples_by_counter;
    }
    a->samples_untimed |= b->samples_untimed && b->n_samples;
    a->samples_lost += b->samples_lost;
    a->stacks_cpu_ns += b->stacks_cpu_ns;
    a->stacks_cfi += b->stacks_cfi;
    if (b->stacks_py_way > a->stacks_py_way) /* one read in the kernel: the merge says so */
        a->stacks_py_way = b->stacks_py_way;
    a->stacks_py_kernel_runs += b->stacks_py_kernel_runs;
    a->stacks_py_kernel_ns += b->stacks_py_kernel_ns;
    a->samples_unnamed += b->samples_unnamed;
    a->off_followed |= b->off_followed;
    a->samples_outside |= b->samples_outside;
    if (label_rank(a, d->pid, d->rank, &changed) || label_rank(a, s->pid, s->rank, &changed))
        return -1;
    sm_profile_free(&d->profile);
    return sm__profile_build(a, d);
}
