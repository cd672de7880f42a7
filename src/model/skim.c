/* skim.c - what the build must know before it builds a section (model_build.h's sm_skim): the
 * tally of the events (format/tally.h), from the file's SUMMARY record where it can be trusted
 * (sm__skim_summary), else from a first pass over every thread's events (sm__skim). One reader
 * of the file's threads in turn; or, where the events are many and on several threads, one a
 * CPU (at most 8, and the file's threads), each taking the next file thread not yet taken, each
 * with a decoder and a tally of its own, each filling its threads' parts, the tallies merged
 * after: the findings and the warnings are those one reader gives. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_build.h"
#include "../util/alloc.h"
#include "../util/env.h"

#define GROW SONDE_GROW

/* At most SB_MAX_DECODERS readers (sb_raw.dec_end's limit). */
#define MAX_READERS SB_MAX_DECODERS

/* One reader of the first pass. */
typedef struct skr {
    sonde_tally t;           /* its threads' run part */
    sonde_tally_thread *th;  /* every file thread's part, shared: each reader fills its own */
    uint64_t end_tick;       /* the last tick seen (a run that did not end cleanly) */
    int unclean;
    sb_raw *raw;
    void *dec;               /* its decoder */
    uint32_t thread;         /* the file thread being read */
    _Atomic size_t *next;    /* the next file thread to read, shared by the readers */
    int index, rc;
} skr;

static int skim_batch(void *ctx, const sb_batch *bt)
{
    skr *r = ctx;
    sonde_tally_thread *th = &r->th[r->thread];
    for (size_t i = 0; i < bt->n; i++) {
        const sb_ev *e = &bt->ev[i];
        if (r->unclean && e->tick > r->end_tick)
            r->end_tick = e->tick;
        if (sonde_tally_event(&r->t, th, r->thread, e->kind, e->id, e->tick, e->arg))
            return -1;
    }
    return 0;
}

/* Reader r failed (out of memory): the others stop too. */
static void *reader_failed(skr *r)
{
    r->rc = -1;
    atomic_store(r->next, r->raw->n_threads);
    return NULL;
}

/* Reads file threads, the next one not yet taken each time, until none is left. */
static void *reader_run(void *arg)
{
    skr *r = arg;
    sb_raw *raw = r->raw;
    for (;;) {
        size_t t = atomic_fetch_add(r->next, 1);
        if (t >= raw->n_threads)
            break;
        r->thread = (uint32_t)t;
        if (raw->events(r->dec, t, 1, skim_batch, r))
            return reader_failed(r);
    }
    return NULL;
}

void sm__skim_free(sm_skim *sk)
{
    sonde_tally_free(&sk->t);
    sonde__free(sk->sess);
    sonde__free(sk->modes);
    sonde__free(sk->own);
    memset(sk, 0, sizeof *sk);
}

static void free_threads(sonde_tally_thread *th, size_t n)
{
    for (size_t i = 0; th && i < n; i++)
        sonde_tally_thread_free(&th[i]);
    sonde__free(th);
}

/* sk from the run's tally t (taken: t is left empty) and its n threads' parts th (of the file's
 * n_threads; a thread past n had no events): the sessions and mode changes in the order of the
 * threads, each thread's own flag, and the sections open at a thread's end closed at the run's
 * (sk->end_tick, or cut_tick if later), counted in the histogram. 0, or -1 out of memory. */
static int skim_of(sm_skim *sk, sonde_tally *t, const sonde_tally_thread *th, size_t n,
                   size_t n_threads, uint64_t cut_tick)
{
    sk->t = *t;
    memset(t, 0, sizeof *t);
    size_t ns = 0, nm = 0;
    for (size_t i = 0; i < n; i++) {
        ns += th[i].n_sess;
        nm += th[i].n_modes;
    }
    sk->sess = sonde__malloc((ns ? ns : 1) * sizeof *sk->sess);
    sk->modes = sonde__malloc((nm ? nm : 1) * sizeof *sk->modes);
    sk->own = sonde__calloc(n_threads ? n_threads : 1, 1);
    if (!sk->sess || !sk->modes || !sk->own)
        return -1;
    sk->cap_sess = ns ? ns : 1;
    sk->cap_modes = nm ? nm : 1;
    uint64_t end = sk->end_tick > cut_tick ? sk->end_tick : cut_tick;
    for (size_t i = 0; i < n_threads; i++) {
        sk->own[i] = i >= n || !th[i].shared;
        if (i >= n)
            continue;
        if (th[i].n_sess) /* (a list never grown is NULL) */
            memcpy(sk->sess + sk->n_sess, th[i].sess, th[i].n_sess * sizeof *sk->sess);
        sk->n_sess += th[i].n_sess;
        if (th[i].n_modes)
            memcpy(sk->modes + sk->n_modes, th[i].modes, th[i].n_modes * sizeof *sk->modes);
        sk->n_modes += th[i].n_modes;
        for (size_t j = 0; j < th[i].depth; j++) /* (in any order: a count) */
            sonde_tally_count(&sk->t, th[i].open[j].tick, end);
    }
    return 0;
}

int sm_report_threads(int *chosen)
{
    const char *env = sonde__getenv("SONDE_READ_THREADS");
    long want = env && *env ? strtol(env, NULL, 10) : 0;
    if (chosen)
        *chosen = want >= 1;
    if (want < 1) { /* the CPUs this process may run on (taskset, a cpuset), else those online */
        cpu_set_t set;
        want = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                           : sysconf(_SC_NPROCESSORS_ONLN);
    }
    return want < 1 ? 1 : want > SM_REPORT_THREADS_MAX ? SM_REPORT_THREADS_MAX : (int)want;
}

int sm__threads_for(uint64_t bytes)
{
    int chosen, want = sm_report_threads(&chosen);
    return chosen || bytes >= SM_SEVERAL_FROM_BYTES ? want : 1;
}

int sm__readers_for(const sb_raw *raw)
{
    if (raw->n_threads < 2 || !raw->dec_new)
        return 1;
    int want = sm__threads_for(raw->bytes);
    return (size_t)want > raw->n_threads ? (int)raw->n_threads : want;
}

int sm__skim(sb_raw *raw, uint64_t cut_tick, sm_skim *sk)
{
    skr r[MAX_READERS];
    pthread_t th[MAX_READERS];
    int started[MAX_READERS] = {0};
    int n = sm__readers_for(raw), rc = -1;
    _Atomic size_t next = 0;
    sonde_tally_thread *parts = sonde__calloc(raw->n_threads ? raw->n_threads : 1, sizeof *parts);
    memset(r, 0, sizeof r);
    if (!parts)
        goto out;
    for (int i = 0; i < n; i++) {
        if (sonde_tally_init(&r[i].t))
            goto out;
        r[i].th = parts;
        r[i].end_tick = sk->end_tick;
        r[i].unclean = !sk->clean_end;
        r[i].raw = raw;
        r[i].next = &next;
        r[i].index = i;
        /* several: each its own decoder, keeping its warnings apart until dec_end */
        r[i].dec = n == 1 ? raw->events_src : raw->dec_new(raw->events_src);
        if (!r[i].dec)
            goto out;
    }
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, reader_run, &r[i]) == 0;
    reader_run(&r[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            reader_run(&r[i]); /* no thread to be had: what is left, in turn */
    }
    for (int i = 0; i < n; i++)
        if (r[i].rc || (i && sonde_tally_merge(&r[0].t, &r[i].t)))
            goto out;
    for (int i = 0; i < n; i++)
        sk->end_tick = r[i].end_tick > sk->end_tick ? r[i].end_tick : sk->end_tick;
    rc = skim_of(sk, &r[0].t, parts, raw->n_threads, raw->n_threads, cut_tick);
out:
    if (n > 1) {
        void *decs[MAX_READERS];
        for (int i = 0; i < n; i++)
            decs[i] = r[i].dec;
        if (raw->dec_end(raw->events_src, decs, n))
            rc = -1;
    }
    for (int i = 0; i < n; i++)
        sonde_tally_free(&r[i].t);
    free_threads(parts, raw->n_threads);
    return rc;
}

/* 1 when SONDE_READ_SUMMARY says not to read the SUMMARY record ("0"). */
static int summary_refused(void)
{
    const char *v = sonde__getenv("SONDE_READ_SUMMARY");
    return v && !strcmp(v, "0");
}

int sm__skim_summary(sb_raw *raw, uint64_t cut_tick, sm_skim *sk)
{
    if (!raw->summary || raw->summary_stale || !raw->clean_end || raw->opts.from ||
        raw->opts.part || summary_refused())
        return 1;
    sonde_tally t;
    sonde_tally_thread *th = NULL;
    size_t n = 0;
    if (sonde_tally_init(&t))
        return -1;
    int rc = sonde_tally_decode(raw->summary, raw->summary + raw->summary_len, raw->n_threads,
                                &t, &th, &n);
    if (!rc)
        rc = skim_of(sk, &t, th, n, raw->n_threads, cut_tick);
    sonde_tally_free(&t);
    free_threads(th, n);
    if (rc > 0) {
        sm__skim_free(sk);
        return 2;
    }
    if (rc)
        return rc;
    /* the site table is sized by the largest id named (SITE records sorted and each once) */
    uint32_t top = raw->n_sites && raw->sites[raw->n_sites - 1].id > sk->t.max_id
                       ? raw->sites[raw->n_sites - 1].id
                       : sk->t.max_id;
    if ((size_t)top + 1 > 2 * raw->n_sites + 65536) {
        /* ids build_sites renumbers: an event whose id the record left out would index past the
         * table, so only the events' own ids, as a first pass finds them, may do it */
        sm__skim_free(sk);
        sk->clean_end = raw->clean_end;
        sk->end_tick = raw->end_tick;
        return 1;
    }
    raw->id_bound = top + 1; /* an event past the site table: a malformed block */
    sk->summary = 1;
    return 0;
}

int sm__skim_open_session(sm_skim *sk, const sm_part *part, size_t n_threads)
{
    if (!part || !part->open || part->name >= SM_MAX_ID || part->thread >= n_threads)
        return 0;
    for (size_t i = 0; i < sk->n_sess; i++)
        if (sk->sess[i].begin && sk->sess[i].tick == part->tick &&
            sk->sess[i].name == part->name)
            return 0; /* its begin is in the part */
    if (GROW(sk->sess, sk->n_sess, sk->cap_sess))
        return -1;
    sk->sess[sk->n_sess++] = (sonde_tally_sess){part->tick, part->name, part->thread, 1};
    if (part->name > sk->t.max_id)
        sk->t.max_id = part->name;
    sk->t.used[part->name >> 6] |= 1ull << (part->name & 63);
    return 0;
}
