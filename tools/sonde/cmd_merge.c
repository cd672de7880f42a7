/* cmd_merge.c - `sonde merge`: one Chrome trace of every rank of a job. A process per rank
 * ("rank N (host)", sorted by rank), all on one time axis. Ranks of one boot of one machine (the
 * same boot_id) share CLOCK_MONOTONIC: they are placed by it, exactly. Between machines, the
 * wall-clock anchor each file took at its start, tightened by the sonde_sync instants when every
 * rank recorded the same number of them (the k-th sync of every rank is made to coincide with
 * rank 0's, on average; how far one rank's syncs disagree on its offset, the most of any rank,
 * is printed as the alignment's uncertainty: the barrier's exits vary by that). A forked
 * child's run (a DataLoader worker: its file names its parent's pid) is a worker of its parent's
 * rank, "rank N worker pid P (host)", after that rank, and takes no rank number of its own.
 * Ranks are read one at a time, so memory holds one rank's run at once. With --format sqlite
 * (or -o *.sqlite, *.db) the ranks go into one SQLite database instead (export/sqlite.c), each
 * run a row of `runs` with its rank, its label and its shift onto that time axis. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "export/export.h"
#include "record/record.h"
#include "util/fileio.h"
#include "util/sort.h"

typedef struct rank_file {
    char *path;
    int rank;
    int pid, parent_pid; /* parent_pid > 0: a forked child's run, a worker */
    uint64_t start_real_ns;
    uint64_t start_mono_ns;
    char boot[64];  /* boot_id ("" when the file does not say) */
    int64_t *syncs; /* the sonde_sync instants, ns from the run's start */
    size_t n_syncs;
} rank_file;

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* By rank; a rank's own run before its workers, the workers by pid. */
static int cmp_rank(const void *a, const void *b)
{
    const rank_file *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if ((x->parent_pid > 0) != (y->parent_pid > 0))
        return x->parent_pid > 0 ? 1 : -1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Ranks for the runs that say none (a job without a launcher's rank): the runs that are not
 * workers numbered in the order given; a worker takes its parent's (found by pid), else the next
 * number. Reads rank as each file said it (-1: none). */
static void number_ranks(rank_file *rf, size_t n)
{
    int next = 0;
    for (size_t i = 0; i < n; i++)
        if (rf[i].rank >= next)
            next = rf[i].rank + 1;
    for (size_t i = 0; i < n; i++)
        if (rf[i].rank < 0 && rf[i].parent_pid <= 0)
            rf[i].rank = next++;
    for (int pass = 0; pass < 8; pass++) /* a worker's worker: its parent's found first */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; rf[i].parent_pid > 0 && j < n; j++)
                if (j != i && rf[j].pid == rf[i].parent_pid && rf[j].rank >= 0)
                    rf[i].rank = rf[j].rank;
    for (size_t i = 0; i < n; i++)
        if (rf[i].rank < 0)
            rf[i].rank = next++;
}

static int gz_out(void *ctx, const char *d, size_t n)
{
    return gzwrite((gzFile)ctx, d, (unsigned)n) == (int)n ? 0 : -1;
}

static void free_ranks(rank_file *rf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rf[i].path);
        free(rf[i].syncs);
    }
    free(rf);
}

/* Appends path (owned from now on, freed on failure too). 0, or -1 out of memory. */
static int add_rank(rank_file **rf, size_t *n, char *path)
{
    rank_file *g = path ? realloc(*rf, (*n + 1) * sizeof *g) : NULL;
    if (!g) {
        free(path);
        return -1;
    }
    *rf = g;
    memset(&g[*n], 0, sizeof g[*n]);
    g[(*n)++].path = path;
    return 0;
}

/* The files to merge: FILES as given, and in a DIR its .sonde files (not the RUN.pidN.sonde of
 * programs under `sonde run`, nor FIFOs; a run whose programs were ranks: those ranks). CLI_OK,
 * or CLI_USAGE with the message printed. */
static int collect(int argc, char **argv, const char **out, const char **fmt, rank_file **rf,
                   size_t *n)
{
    static const char *const opts[] = {"-o", "--format", NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--format")) {
            if (i + 1 >= argc)
                return cli_fail(CLI_USAGE, "merge", "%s needs %s", argv[i],
                                argv[i][1] == 'o' ? "a file name" : "trace or sqlite");
            *(argv[i][1] == 'o' ? out : fmt) = argv[i + 1];
            i++;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cli_bad_option("merge", argv[i], opts);
        struct stat st;
        if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            if (add_rank(rf, n, strdup(argv[i])))
                return cli_fail(CLI_USAGE, "merge", "out of memory");
            continue;
        }
        char **runs = NULL; /* its .sonde files (cli_dir_runs): a trace needs the instances */
        size_t nr = 0, cap = 0;
        int rc = cli_dir_runs(argv[i], 1, &runs, &nr, &cap);
        if (!rc && cli_run_ranks(&runs, &nr, &cap, 0) != 0)
            rc = -1, errno = ENOMEM;
        int oom = rc && errno == ENOMEM;
        if (rc && !oom)
            cli_fail(0, "merge", "%s: %s (left out)", argv[i], strerror(errno));
        for (size_t k = 0; k < nr; k++) {
            if (oom)
                free(runs[k]);
            else if (add_rank(rf, n, runs[k])) /* it owns the path, or frees it */
                oom = 1;
        }
        free(runs);
        if (oom)
            return cli_fail(CLI_USAGE, "merge", "out of memory");
    }
    return CLI_OK;
}

/* The rank whose boot rank i shares, the lowest such (i itself when none before it). */
static size_t boot_leader(const rank_file *rf, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (rf[i].boot[0] && !strcmp(rf[j].boot, rf[i].boot))
            return j;
    return i;
}

/* Each rank's shift onto one time axis (ns from the earliest start), and how in words. Ranks of
 * one boot keep their CLOCK_MONOTONIC distances; each boot's first rank is placed by the wall
 * clocks and, where every rank recorded the same number of syncs, by them. */
static void align(const rank_file *rf, size_t n, int64_t *shift, char *how, size_t cap)
{
    uint64_t base = rf[0].start_real_ns;
    for (size_t i = 1; i < n; i++)
        if (rf[i].start_real_ns < base)
            base = rf[i].start_real_ns;
    size_t boots = 0, ref = n; /* ref: the first run that is not a worker, the syncs' reference */
    for (size_t i = 0; i < n; i++) {
        shift[i] = (int64_t)(rf[i].start_real_ns - base);
        boots += boot_leader(rf, i) == i;
        if (ref == n && rf[i].parent_pid <= 0)
            ref = i;
    }
    /* the syncs, where every run but the workers (which take no part in barriers) has as many */
    int synced = boots > 1 && ref < n && rf[ref].n_syncs > 0;
    for (size_t i = 0; synced && i < n; i++)
        synced &= rf[i].parent_pid > 0 || rf[i].n_syncs == rf[ref].n_syncs;
    double spread = 0; /* how far a rank's syncs disagree on its offset, the most of any, ns */
    for (size_t i = 0; synced && i < n; i++) {
        if (rf[i].parent_pid > 0 || boot_leader(rf, i) != i ||
            boot_leader(rf, ref) == boot_leader(rf, i))
            continue;
        double d = 0, lo = 0, hi = 0;
        for (size_t k = 0; k < rf[ref].n_syncs; k++) {
            double dk = (double)(rf[ref].syncs[k] + shift[ref]) -
                        (double)(rf[i].syncs[k] + shift[i]);
            d += dk;
            lo = k == 0 || dk < lo ? dk : lo;
            hi = k == 0 || dk > hi ? dk : hi;
        }
        shift[i] += (int64_t)(d / (double)rf[ref].n_syncs);
        spread = hi - lo > spread ? hi - lo : spread;
    }
    for (size_t i = 0; i < n; i++) { /* one boot: its monotonic clock, from its first rank */
        size_t l = boot_leader(rf, i);
        if (l != i)
            shift[i] = shift[l] + (int64_t)(rf[i].start_mono_ns - rf[l].start_mono_ns);
    }
    if (boots == 1 && rf[0].boot[0])
        snprintf(how, cap, "aligned on one machine's monotonic clock");
    else if (synced)
        snprintf(how, cap, "aligned on sonde_sync (within %.0f us: the syncs disagree by that)%s",
                 spread / 1e3, boots < n ? ", ranks of one machine on its monotonic clock" : "");
    else
        snprintf(how, cap, "aligned on wall clocks%s",
                 boots < n ? ", ranks of one machine on its monotonic clock" : "");
}

/* Reads each rank's number, start and sync instants (one model at a time), then writes each
 * rank's part of the trace. CLI_OK, or CLI_USAGE with the message printed. */
static int merge(const char *out, int sqlite, rank_file *rf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sm_model m;
        if (sm_read_file(rf[i].path, &m) != 0)
            return cli_fail(CLI_USAGE, "merge", "%s", sonde_last_error());
        rf[i].rank = m.rank;
        rf[i].pid = m.pid;
        const char *parent = sm_info(&m, "system.parent_pid");
        rf[i].parent_pid = parent ? atoi(parent) : 0;
        rf[i].start_real_ns = m.start_real_ns;
        rf[i].start_mono_ns = m.start_mono_ns;
        const char *boot = sm_info(&m, "system.boot_id");
        snprintf(rf[i].boot, sizeof rf[i].boot, "%s", boot ? boot : "");
        rf[i].syncs = malloc((m.n_instants ? m.n_instants : 1) * sizeof *rf[i].syncs);
        for (size_t k = 0; rf[i].syncs && k < m.n_instants; k++)
            if (!strcmp(sm_str(&m, m.instants[k].name), "sonde.sync"))
                rf[i].syncs[rf[i].n_syncs++] = m.instants[k].t_ns;
        sm_free(&m);
        if (!rf[i].syncs)
            return cli_fail(CLI_USAGE, "merge", "out of memory");
    }
    number_ranks(rf, n);
    sonde__sort(rf, n, sizeof *rf, cmp_rank);
    int64_t *shift = calloc(n, sizeof *shift);
    if (!shift)
        return cli_fail(CLI_USAGE, "merge", "out of memory");
    char how[160];
    align(rf, n, shift, how, sizeof how);
    afile af;
    if (afile_open(&af, out) != 0) {
        free(shift);
        return cli_fail(CLI_USAGE, "merge", "cannot create %s: %s", out, strerror(errno));
    }
    gzFile gz = NULL;
    sx_db *db = NULL;
    int rc = 0;
    if (sqlite) {
        rc = sx_db_open(&db, af.tmp, out) ? cli_fail(CLI_USAGE, "merge", "%s",
                                                     sonde_last_error())
                                          : 0;
    } else {
        int fd2 = dup(af.fd);
        gz = fd2 >= 0 ? gzdopen(fd2, "wb1") : NULL;
        rc = gz ? 0 : -1;
        if (!gz && fd2 >= 0)
            close(fd2);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        sm_model m;
        if (sm_read_file(rf[i].path, &m) != 0) {
            rc = cli_fail(CLI_USAGE, "merge", "%s", sonde_last_error());
            break;
        }
        char label[512];
        const char *host = sm_info(&m, "system.hostname") ? sm_info(&m, "system.hostname") : m.host;
        int worker = rf[i].parent_pid > 0;
        if (worker)
            snprintf(label, sizeof label, "rank %d worker pid %d (%s)", rf[i].rank, rf[i].pid,
                     host ? host : "?");
        else
            snprintf(label, sizeof label, "rank %d (%s)", rf[i].rank, host ? host : "?");
        /* a worker's trace pid after every rank's (rank + 1): its own, its rank's sort index */
        sx_trace_opts o = {INT64_MIN, INT64_MAX, shift[i],
                           worker ? (int)(1000000 + i) : rf[i].rank + 1, label, rf[i].rank,
                           i == 0, i == n - 1, i > 0, 0, 0};
        sx_db_run run = {rf[i].rank, label, shift[i]};
        if (db ? sx_db_add(db, &m, &run) != 0 : sx_trace_part(&m, &o, gz_out, gz) != 0)
            rc = db ? cli_fail(CLI_USAGE, "merge", "%s", sonde_last_error())
                    : cli_fail(CLI_USAGE, "merge", "cannot write %s", out);
        sm_free(&m);
    }
    if (sqlite && sx_db_close(db, !rc) != 0 && !rc)
        rc = cli_fail(CLI_USAGE, "merge", "%s", sonde_last_error());
    free(shift);
    if (gz && gzclose(gz) != Z_OK && !rc)
        rc = cli_fail(CLI_USAGE, "merge", "cannot write %s", out);
    if (rc)
        afile_abort(&af);
    else if (afile_commit(&af, 0) != 0)
        rc = cli_fail(CLI_USAGE, "merge", "cannot write %s: %s", out, strerror(errno));
    size_t workers = 0;
    for (size_t i = 0; i < n; i++)
        workers += rf[i].parent_pid > 0;
    char workers_text[48] = "";
    if (workers)
        snprintf(workers_text, sizeof workers_text, " and %zu worker(s)", workers);
    if (!rc)
        printf("%s: %zu rank(s)%s, %s\n", out, n - workers, workers_text, how);
    return rc ? CLI_USAGE : CLI_OK;
}

int cmd_merge(int argc, char **argv)
{
    const char *out = NULL, *fmt = NULL;
    rank_file *rf = NULL;
    size_t n = 0;
    int rc = collect(argc, argv, &out, &fmt, &rf, &n);
    const char *given = NULL; /* the first DIR or FILE named */
    for (int i = 1; i < argc && !given; i++)
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--format"))
            i++;
        else if (argv[i][0] != '-' || !argv[i][1])
            given = argv[i];
    if (rc == CLI_OK && !n && given)
        rc = cli_fail(CLI_USAGE, "merge", "%s: no .sonde file there, nor in its rank_* "
                                          "directories", given);
    else if (rc == CLI_OK && (!out || !n))
        rc = !out && n ? cli_fail(CLI_USAGE, "merge", "-o merged.trace.json.gz is needed")
                       : cli_usage(cli_find("merge"), 1);
    for (size_t i = 0; i < n && rc == CLI_OK; i++)
        rc = cli_output_check("merge", out, rf[i].path);
    int sqlite = out && (ends_with(out, ".sqlite") || ends_with(out, ".db"));
    if (rc == CLI_OK && fmt && strcmp(fmt, "trace") && strcmp(fmt, "sqlite"))
        rc = cli_fail(CLI_USAGE, "merge", "--format %s: unknown (trace or sqlite)", fmt);
    else if (fmt)
        sqlite = !strcmp(fmt, "sqlite");
    if (rc == CLI_OK)
        rc = merge(out, sqlite, rf, n);
    free_ranks(rf, n);
    return rc;
}
