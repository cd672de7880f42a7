/* offcpu.c - off-CPU periods (OFFCPU records, docs/stacks.md "Off-CPU time"): the times the
 * sampled threads were blocked in the kernel (a lock, a queue, I/O, a sleep, the GIL), each with
 * the stack it blocked in, summed by stack into sm_profile.off, the longest first. */
#include <stdlib.h>
#include <string.h>

#include "model_build.h"
#include "../format/format.h"
#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/sort.h"
#include "../util/strmap.h"

int sm__offcpu_parse(sb_raw *raw, const uint8_t *p, const uint8_t *end)
{
    raw->off_followed = 1;
    uint64_t v[4], t = 0;
    while (p < end) {
        if (sm__get_var(&p, end, &v[0]) || sm__get_var(&p, end, &v[1]) ||
            sm__get_var(&p, end, &v[2]) || sm__get_var(&p, end, &v[3]) || v[0] > UINT32_MAX ||
            v[1] >= SM_MAX_ID)
            return -1;
        if (SONDE_GROW(raw->offs, raw->n_offs, raw->cap_offs))
            return -2;
        t += (uint64_t)zigzag_dec(v[2]);
        raw->offs[raw->n_offs++] = (sm_off_raw){(uint32_t)v[0], (uint32_t)v[1], t, v[3]};
    }
    return 0;
}

static int cmp_off(const void *a, const void *b)
{
    const sm_offstack *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns > y->ns ? -1 : 1;
    return strcmp(x->stack, y->stack);
}

static int cmp_held_ns(const void *a, const void *b)
{
    const sm_offperiod *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns > y->ns ? -1 : 1;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static int cmp_held_t(const void *a, const void *b)
{
    const sm_offperiod *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Of the periods held, the longest SM_OFF_HELD_MAX alone (in no order). */
static void keep_longest(sm_profile *pr)
{
    if (pr->n_off_held <= SM_OFF_HELD_MAX)
        return;
    sonde__sort(pr->off_held, pr->n_off_held, sizeof *pr->off_held, cmp_held_ns);
    pr->n_off_held = SM_OFF_HELD_MAX;
}

/* The longest SM_OFF_HELD_MAX periods, in time order, for the trace; their stacks renumbered
 * after the stacks' sort (id -> place). */
static int hold_periods(sm_profile *pr)
{
    if (!pr->n_off_held)
        return 0;
    uint32_t *place = sonde__malloc(pr->n_off * sizeof *place);
    if (!place)
        return -1;
    for (size_t i = 0; i < pr->n_off; i++)
        place[pr->off[i].id] = (uint32_t)i;
    for (size_t i = 0; i < pr->n_off_held; i++)
        pr->off_held[i].off = place[pr->off_held[i].off];
    sonde__free(place);
    keep_longest(pr);
    sonde__sort(pr->off_held, pr->n_off_held, sizeof *pr->off_held, cmp_held_t);
    return 0;
}

static int cmp_offsection(const void *a, const void *b)
{
    const sm_offsection *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns > y->ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Period o's time added to the section of its name (site), found in names or appended. 0, or -1
 * out of memory. */
static int in_section(sm_profile *pr, strmap *names, size_t *cap, const char *name,
                      const sm_off_raw *o)
{
    int k = strmap_get(names, name);
    if (k < 0) {
        if (SONDE_GROW(pr->off_sections, pr->n_off_sections, *cap))
            return -1;
        sm_offsection *x = &pr->off_sections[pr->n_off_sections];
        *x = (sm_offsection){sonde__strdup(name), 0, 0};
        if (!x->name || strmap_put(names, name, (int)pr->n_off_sections)) {
            sonde__free(x->name);
            return -1;
        }
        k = (int)pr->n_off_sections++;
    }
    pr->off_sections[k].ns += o->ns;
    pr->off_sections[k].periods++;
    pr->off_in_sections_ns += o->ns;
    return 0;
}

/* Off-CPU period o of raw stack st, which became stack k (its id), into the variant of its
 * frames' lines (FRAMELINES; seen: "k,line,..." -> variant). 0, or -1 out of memory. */
static int off_lines(sm_profile *pr, strmap *seen, size_t *cap, sbuf *key,
                     const sm_pstack_raw *st, int k, const sm_off_raw *o)
{
    if (!st->flines || st->n != pr->off[k].n_frames) /* (a ';' in a process name folds stacks
                                                        of other depths together) */
        return 0;
    int e = sm__flines_find(seen, key, (uint32_t)k, st);
    if (e == -2)
        return -1;
    if (e < 0) {
        if (SONDE_GROW(pr->off_flines, pr->n_off_flines, *cap) ||
            strmap_put(seen, key->data, (int)pr->n_off_flines))
            return -1;
        e = (int)pr->n_off_flines++;
        pr->off_flines[e] = (sm_off_flines){(uint32_t)k, 0, 0, pr->n_flines};
        if (sm__add_flines(pr, st))
            return -1;
    }
    pr->off_flines[e].ns += o->ns;
    pr->off_flines[e].periods++;
    return 0;
}

static int cmp_off_flines(const void *a, const void *b)
{
    const sm_off_flines *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

int sm__offcpu_build(const sb_raw *raw, sm_model *m, const uint32_t *at, const int32_t *site)
{
    sm_profile *pr = &m->profile;
    pr->off_followed = raw->off_followed;
    strmap seen, names, lines;
    strmap_init(&seen);
    strmap_init(&names);
    strmap_init(&lines);
    sbuf line, key;
    sbuf_init(&line);
    sbuf_init(&key);
    size_t cap = 0, cap_held = 0, cap_sections = 0, cap_lines = 0;
    int rc = 0;
    for (size_t i = 0; i < raw->n_offs && !rc; i++) {
        const sm_off_raw *o = &raw->offs[i];
        if (o->stack >= raw->n_pstacks)
            continue; /* a stack the file does not have: left out, as samples are */
        const sm_pstack_raw *st = &raw->pstacks[o->stack];
        int bad = 0;
        for (uint32_t k = 0; k < st->n; k++)
            bad |= st->f[k] >= raw->n_pfuncs;
        if (bad)
            continue;
        sbuf_reset(&line);
        sm__fold_line(&line, st, pr->funcs, at);
        if (line.oom) {
            rc = -1;
            break;
        }
        pr->off_ns += o->ns;
        pr->off_periods++;
        int k = strmap_get(&seen, line.data);
        if (k < 0) {
            if (SONDE_GROW(pr->off, pr->n_off, cap)) {
                rc = -1;
                break;
            }
            sm_offstack *x = &pr->off[pr->n_off];
            memset(x, 0, sizeof *x);
            x->id = (uint32_t)pr->n_off;
            x->waits_in = st->n ? pr->funcs[at[st->f[st->n - 1]]].name : "?";
            for (uint32_t f = st->n; f-- > 0 && !x->python;)
                if (pr->funcs[at[st->f[f]]].python)
                    x->python = pr->funcs[at[st->f[f]]].name;
            x->frames = sonde__malloc((st->n ? st->n : 1) * sizeof *x->frames);
            if (!x->frames || !(x->stack = sonde__strdup(line.data)) ||
                strmap_put(&seen, line.data, (int)pr->n_off)) {
                sonde__free(x->frames);
                sonde__free(x->stack);
                rc = -1;
                break;
            }
            for (uint32_t f = 0; f < st->n; f++)
                x->frames[f] = at[st->f[f]];
            x->n_frames = st->n;
            k = (int)pr->n_off++;
        }
        pr->off[k].ns += o->ns;
        pr->off[k].periods++;
        if (off_lines(pr, &lines, &cap_lines, &key, st, k, o)) {
            rc = -1;
            break;
        }
        if (site && site[i] >= 0 && (size_t)site[i] < m->n_sites &&
            in_section(pr, &names, &cap_sections, m->sites[site[i]].name, o)) {
            rc = -1;
            break;
        }
        if (SONDE_GROW(pr->off_held, pr->n_off_held, cap_held)) {
            rc = -1;
            break;
        }
        pr->off_held[pr->n_off_held++] =
            (sm_offperiod){(int64_t)(o->t_mono - m->start_mono_ns), (int64_t)o->ns, o->tid,
                           st->pid, (uint32_t)k};
        if (pr->n_off_held >= 2 * SM_OFF_HELD_MAX) /* never twice what is kept */
            keep_longest(pr);
    }
    if (!rc && pr->n_off)
        sonde__sort(pr->off, pr->n_off, sizeof *pr->off, cmp_off);
    if (!rc) /* by stack id (strmap's indexes are taken: nothing looks them up after) */
        sonde__sort(pr->off_flines, pr->n_off_flines, sizeof *pr->off_flines, cmp_off_flines);
    if (!rc && pr->n_off_sections)
        sonde__sort(pr->off_sections, pr->n_off_sections, sizeof *pr->off_sections,
                    cmp_offsection);
    if (!rc)
        rc = hold_periods(pr);
    sbuf_free(&line);
    sbuf_free(&key);
    strmap_free(&seen);
    strmap_free(&names);
    strmap_free(&lines);
    return rc;
}
