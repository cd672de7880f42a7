/* sample.c - the sampler of sample.h. One perf event per CPU (an inherited per-task event cannot
 * be mapped, so perf record does the same) follows the program and everything it starts; a
 * thread drains their ring buffers every 10 ms. Each sample's addresses are placed in the
 * mappings of its process at once (file, offset), so a library unloaded later is still named;
 * distinct stacks are counted in a hash table, and names are looked up once per distinct
 * address at the end. */
#define _GNU_SOURCE
#include "sample.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/demangle.h"
#include "util/strmap.h"

#define RING_PAGES 64     /* data pages per CPU: 256 KiB */
#define MAX_FRAMES 128
#define MAX_CPUS 1024

/* A mapped file of a process: [start, end) maps the file from offset pgoff. */
typedef struct smap {
    uint64_t start, end, pgoff;
    uint32_t file;
} smap;

typedef struct sproc {
    int pid;
    char comm[16];
    smap *maps;
    size_t n_maps, cap_maps;
} sproc;

/* A frame: an offset in a file (file UINT32_MAX: an address no mapping held). */
typedef struct sframe {
    uint32_t file;
    uint64_t off;
} sframe;

typedef struct sstack {
    uint64_t hash, count;
    uint32_t proc, n;
    sframe *f;             /* outermost first */
} sstack;

struct cli_sampler {
    int fds[MAX_CPUS];
    void *rings[MAX_CPUS];
    int n_cpus;
    size_t ring_bytes;
    unsigned hz;
    pthread_t thread;
    atomic_int stop;
    int oom;
    uint64_t samples, lost;
    char **files;
    size_t n_files, cap_files;
    sproc *procs;
    size_t n_procs, cap_procs;
    sstack *table;         /* open addressing, cap a power of two */
    size_t n_stacks, cap_table;
    uint8_t rec[1 << 16];  /* a record that wraps around the ring's end, made whole */
};

static sproc *proc_of(cli_sampler *s, int pid, int make)
{
    for (size_t i = 0; i < s->n_procs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    if (!make || SONDE_GROW(s->procs, s->n_procs, s->cap_procs)) {
        s->oom |= make;
        return NULL;
    }
    sproc *p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    return p;
}

static uint32_t file_id(cli_sampler *s, const char *path)
{
    for (size_t i = 0; i < s->n_files; i++)
        if (!strcmp(s->files[i], path))
            return (uint32_t)i;
    char *c = sonde__strdup(path);
    if (!c || SONDE_GROW(s->files, s->n_files, s->cap_files)) {
        sonde__free(c);
        s->oom = 1;
        return UINT32_MAX;
    }
    s->files[s->n_files] = c;
    return (uint32_t)s->n_files++;
}

/* A new mapping replaces what it overlaps (only whole ones: a partial unmap keeps the rest). */
static void add_map(cli_sampler *s, int pid, uint64_t start, uint64_t len, uint64_t pgoff,
                    const char *path)
{
    if (path[0] != '/') /* [vdso], [heap], anonymous memory: no file to name a function */
        return;
    sproc *p = proc_of(s, pid, 1);
    uint32_t f = file_id(s, path);
    if (!p || f == UINT32_MAX)
        return;
    size_t k = 0;
    for (size_t i = 0; i < p->n_maps; i++)
        if (p->maps[i].end <= start || p->maps[i].start >= start + len)
            p->maps[k++] = p->maps[i];
    p->n_maps = k;
    if (SONDE_GROW(p->maps, p->n_maps, p->cap_maps)) {
        s->oom = 1;
        return;
    }
    p->maps[p->n_maps++] = (smap){start, start + len, pgoff, f};
}

static sframe place(const sproc *p, uint64_t ip)
{
    for (size_t i = 0; p && i < p->n_maps; i++)
        if (ip >= p->maps[i].start && ip < p->maps[i].end)
            return (sframe){p->maps[i].file, ip - p->maps[i].start + p->maps[i].pgoff};
    return (sframe){UINT32_MAX, ip};
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* Counts one stack (frames innermost first, as the kernel gives them). */
static void count_stack(cli_sampler *s, uint32_t proc, const sframe *inner, uint32_t n)
{
    uint64_t h = mix(proc, n);
    for (uint32_t i = 0; i < n; i++)
        h = mix(mix(h, inner[i].file), inner[i].off);
    if (s->n_stacks * 2 >= s->cap_table) { /* grow to keep the table half empty */
        size_t cap = s->cap_table ? 2 * s->cap_table : 1024;
        sstack *t = sonde__calloc(cap, sizeof *t);
        if (!t) {
            s->oom = 1;
            return;
        }
        for (size_t i = 0; i < s->cap_table; i++)
            if (s->table[i].count) {
                size_t j = s->table[i].hash & (cap - 1);
                while (t[j].count)
                    j = (j + 1) & (cap - 1);
                t[j] = s->table[i];
            }
        sonde__free(s->table);
        s->table = t;
        s->cap_table = cap;
    }
    size_t j = h & (s->cap_table - 1);
    for (; s->table[j].count; j = (j + 1) & (s->cap_table - 1)) {
        sstack *e = &s->table[j];
        if (e->hash != h || e->proc != proc || e->n != n)
            continue;
        uint32_t i = 0;
        while (i < n && e->f[n - 1 - i].file == inner[i].file &&
               e->f[n - 1 - i].off == inner[i].off)
            i++;
        if (i == n) {
            e->count++;
            return;
        }
    }
    sframe *f = sonde__malloc((n ? n : 1) * sizeof *f);
    if (!f) {
        s->oom = 1;
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        f[i] = inner[n - 1 - i];
    s->table[j] = (sstack){h, 1, proc, n, f};
    s->n_stacks++;
}

/* One record of the ring (PERF_RECORD_*). */
static void record(cli_sampler *s, const struct perf_event_header *h)
{
    const uint8_t *b = (const uint8_t *)(h + 1), *end = (const uint8_t *)h + h->size;
    switch (h->type) {
    case PERF_RECORD_SAMPLE: { /* pid, tid, time, nr, ips[nr] */
        if (end - b < 24)
            return;
        uint32_t pid;
        uint64_t nr;
        memcpy(&pid, b, 4);
        memcpy(&nr, b + 16, 8);
        const uint8_t *ips = b + 24;
        if (nr > (uint64_t)(end - ips) / 8)
            return;
        s->samples++;
        sproc *p = proc_of(s, (int)pid, 1);
        if (!p)
            return;
        sframe fr[MAX_FRAMES];
        uint32_t n = 0;
        for (uint64_t i = 0; i < nr && n < MAX_FRAMES; i++) {
            uint64_t ip;
            memcpy(&ip, ips + 8 * i, 8);
            if (ip >= (uint64_t)PERF_CONTEXT_MAX) /* a context marker (user, kernel) */
                continue;
            /* a return address points after its call: one byte back is inside the call */
            fr[n] = place(p, n ? ip - 1 : ip);
            n++;
        }
        count_stack(s, (uint32_t)(p - s->procs), fr, n);
        break;
    }
    case PERF_RECORD_MMAP2: { /* pid, tid, addr, len, pgoff, maj, min, ino, ino_gen, prot,
                                 flags, filename */
        if (end - b < 64)
            return;
        uint32_t pid;
        uint64_t addr, len, pgoff;
        memcpy(&pid, b, 4);
        memcpy(&addr, b + 8, 8);
        memcpy(&len, b + 16, 8);
        memcpy(&pgoff, b + 24, 8);
        const char *name = (const char *)(b + 64);
        if (!memchr(name, 0, (size_t)(end - (const uint8_t *)name)))
            return;
        add_map(s, (int)pid, addr, len, pgoff, name);
        break;
    }
    case PERF_RECORD_COMM: { /* pid, tid, comm */
        uint32_t pid, tid;
        if (end - b < 9)
            return;
        memcpy(&pid, b, 4);
        memcpy(&tid, b + 4, 4);
        sproc *p = proc_of(s, (int)pid, 1);
        if (p && pid == tid) /* the process's name, not a thread's */
            snprintf(p->comm, sizeof p->comm, "%.*s", (int)(end - b - 8), (const char *)(b + 8));
        break;
    }
    case PERF_RECORD_FORK: { /* pid, ppid, tid, ptid: a new process starts with its parent's
                                mappings */
        uint32_t pid, ppid;
        if (end - b < 16)
            return;
        memcpy(&pid, b, 4);
        memcpy(&ppid, b + 4, 4);
        if (pid == ppid)
            return; /* a thread */
        sproc *child = proc_of(s, (int)pid, 1);
        sproc *parent = proc_of(s, (int)ppid, 0); /* after: making child may move procs */
        if (!child || !parent || child->n_maps || !parent->n_maps)
            return;
        smap *maps = sonde__malloc(parent->n_maps * sizeof *maps);
        if (!maps) {
            s->oom = 1;
            return;
        }
        memcpy(maps, parent->maps, parent->n_maps * sizeof *maps);
        sonde__free(child->maps);
        child->maps = maps;
        child->n_maps = child->cap_maps = parent->n_maps;
        memcpy(child->comm, parent->comm, sizeof child->comm);
        break;
    }
    case PERF_RECORD_LOST: {
        uint64_t lost;
        if (end - b >= 16) {
            memcpy(&lost, b + 8, 8);
            s->lost += lost;
        }
        break;
    }
    default:
        break;
    }
}

/* Everything the kernel has put in ring c since the last call. */
static void drain(cli_sampler *s, int c)
{
    struct perf_event_mmap_page *pg = s->rings[c];
    const uint8_t *data = (const uint8_t *)pg + pg->data_offset;
    uint64_t size = pg->data_size;
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), tail = pg->data_tail;
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        for (size_t i = 0; i < sizeof h; i++)
            ((uint8_t *)&h)[i] = data[(tail + i) % size];
        if (h.size < sizeof h || tail + h.size > head)
            break;
        for (size_t i = 0; i < h.size; i++) /* whole, wherever the ring wraps */
            s->rec[i] = data[(tail + i) % size];
        record(s, (const struct perf_event_header *)s->rec);
        tail += h.size;
    }
    __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

static void *reader(void *arg)
{
    cli_sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, NULL);
        for (int c = 0; c < s->n_cpus; c++)
            drain(s, c);
    }
    for (int c = 0; c < s->n_cpus; c++)
        drain(s, c);
    return NULL;
}

cli_sampler *cli_sampler_start(pid_t pid, unsigned hz, char *why, size_t cap)
{
    cli_sampler *s = sonde__calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    s->hz = hz;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = hz;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
    a.exclude_kernel = a.exclude_hv = a.exclude_callchain_kernel = 1;
    a.inherit = 1;
    a.mmap = a.mmap2 = a.comm = a.task = 1;
    a.disabled = 1;
    a.enable_on_exec = 1;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    s->ring_bytes = (size_t)(1 + RING_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    for (long c = 0; c < n && c < MAX_CPUS; c++) {
        int fd = (int)syscall(SYS_perf_event_open, &a, pid, (int)c, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ENODEV || errno == EINVAL) /* an offline CPU */
                continue;
            snprintf(why, cap, "perf_event_open: %s%s", strerror(errno),
                     errno == EACCES || errno == EPERM
                         ? " (kernel.perf_event_paranoid must be 2 or less; docs/stacks.md)"
                         : "");
            goto fail;
        }
        void *ring = mmap(NULL, s->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ring == MAP_FAILED) {
            snprintf(why, cap, "mmap of the sample buffer: %s", strerror(errno));
            close(fd);
            goto fail;
        }
        s->fds[s->n_cpus] = fd;
        s->rings[s->n_cpus++] = ring;
    }
    if (!s->n_cpus) {
        snprintf(why, cap, "perf_event_open: no CPU accepted the event");
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, reader, s) != 0) {
        snprintf(why, cap, "cannot start the sampler's thread");
        goto fail;
    }
    return s;
fail:
    for (int c = 0; c < s->n_cpus; c++) {
        munmap(s->rings[c], s->ring_bytes);
        close(s->fds[c]);
    }
    sonde__free(s);
    return NULL;
}

/* ---- names ---- */

typedef struct ssym {
    uint64_t lo, hi; /* [lo, hi) in the file's addresses */
    char *name;
} ssym;

typedef struct sfile {
    ssym *syms;
    size_t n, cap;
    GElf_Phdr *loads;
    size_t n_loads;
    const char *base;
} sfile;

static int cmp_sym(const void *a, const void *b)
{
    const ssym *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The function symbols of a file (.symtab, else .dynsym) and its loaded segments. */
static int load_file(const char *path, sfile *out)
{
    memset(out, 0, sizeof *out);
    const char *slash = strrchr(path, '/');
    out->base = slash ? slash + 1 : path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* gone: its addresses stay numbers */
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e) {
        close(fd);
        return 0;
    }
    size_t np = 0;
    if (elf_getphdrnum(e, &np) == 0 && np) {
        out->loads = sonde__calloc(np, sizeof *out->loads);
        if (!out->loads)
            goto oom;
        for (size_t i = 0; i < np; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
                out->loads[out->n_loads++] = ph;
        }
    }
    for (int pass = 0; pass < 2 && !out->n; pass++) { /* .symtab has the static functions */
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) ||
                !sh.sh_entsize)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            size_t count = sh.sh_size / sh.sh_entsize;
            for (size_t i = 0; d && i < count; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(d, (int)i, &sym) || !sym.st_value ||
                    (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
                     GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC))
                    continue;
                const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
                if (!nm || !*nm)
                    continue;
                if (SONDE_GROW(out->syms, out->n, out->cap))
                    goto oom;
                char *c = sonde__strdup(nm);
                if (!c)
                    goto oom;
                out->syms[out->n++] = (ssym){sym.st_value, sym.st_value + sym.st_size, c};
            }
        }
    }
    if (out->n)
        qsort(out->syms, out->n, sizeof *out->syms, cmp_sym);
    elf_end(e);
    close(fd);
    return 0;
oom:
    elf_end(e);
    close(fd);
    return -1;
}

static void free_file(sfile *f)
{
    for (size_t i = 0; i < f->n; i++)
        sonde__free(f->syms[i].name);
    sonde__free(f->syms);
    sonde__free(f->loads);
}

/* The name of the function at file offset off: through the segment holding it, the address in
 * the file, then the symbol whose range holds it (or, for a symbol without a size, the nearest
 * below); "FILE+0xADDRESS" when none does. Allocated; NULL out of memory. */
static char *name_at(const sfile *f, uint64_t off)
{
    uint64_t a = off;
    for (size_t i = 0; i < f->n_loads; i++)
        if (off >= f->loads[i].p_offset && off < f->loads[i].p_offset + f->loads[i].p_filesz) {
            a = off - f->loads[i].p_offset + f->loads[i].p_vaddr;
            break;
        }
    size_t lo = 0, hi = f->n;
    while (lo < hi) { /* the last symbol starting at or below a */
        size_t mid = (lo + hi) / 2;
        if (f->syms[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    char *r = NULL;
    if (lo && (a < f->syms[lo - 1].hi || f->syms[lo - 1].hi == f->syms[lo - 1].lo)) {
        char *d = sonde__demangle(f->syms[lo - 1].name, 1); /* C++ names as written */
        if (d) {
            r = sonde__strdup(d);
            free(d);
            return r;
        }
        return sonde__strdup(f->syms[lo - 1].name);
    }
    /* the address in the file, as nm, objdump and perf report give it */
    if (sonde__asprintf(&r, "%s+0x%llx", f->base, (unsigned long long)a) < 0)
        return NULL;
    return r;
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
typedef struct sfunc_at {
    sm_func f;
    uint32_t was;
} sfunc_at;

static int cmp_func_at(const void *a, const void *b)
{
    return cmp_func(&((const sfunc_at *)a)->f, &((const sfunc_at *)b)->f);
}

/* The functions by self samples, most first, and the stacks' frames pointing at them anew. */
static int sort_funcs(sm_profile *p)
{
    sfunc_at *v = sonde__malloc(p->n_funcs * sizeof *v);
    uint32_t *at = sonde__malloc(p->n_funcs * sizeof *at);
    if (!v || !at) {
        sonde__free(v);
        sonde__free(at);
        return -1;
    }
    for (size_t i = 0; i < p->n_funcs; i++)
        v[i] = (sfunc_at){p->funcs[i], (uint32_t)i};
    qsort(v, p->n_funcs, sizeof *v, cmp_func_at);
    for (size_t i = 0; i < p->n_funcs; i++) {
        p->funcs[i] = v[i].f;
        at[v[i].was] = (uint32_t)i;
    }
    for (size_t i = 0; p->first && i < p->first[p->n_stacks]; i++)
        p->frames[i] = at[p->frames[i]];
    sonde__free(v);
    sonde__free(at);
    return 0;
}

int cli_sampler_finish(cli_sampler *s, sm_profile *out)
{
    memset(out, 0, sizeof *out);
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    for (int c = 0; c < s->n_cpus; c++) {
        munmap(s->rings[c], s->ring_bytes);
        close(s->fds[c]);
    }
    int rc = s->oom ? -1 : 0;
    out->samples = s->samples;
    out->lost = s->lost;
    out->hz = s->hz;
    elf_version(EV_CURRENT);
    sfile *files = sonde__calloc(s->n_files + 1, sizeof *files);
    if (!files)
        rc = -1;
    for (size_t i = 0; files && i < s->n_files; i++)
        if (load_file(s->files[i], &files[i]))
            rc = -1;
    /* Each distinct frame named once: a function table with self and total. */
    strmap names, lines;
    strmap_init(&names);
    strmap_init(&lines);
    sbuf line;
    sbuf_init(&line);
    out->stacks = sonde__calloc(s->n_stacks + 1, sizeof *out->stacks);
    out->counts = sonde__calloc(s->n_stacks + 1, sizeof *out->counts);
    out->first = sonde__calloc(s->n_stacks + 2, sizeof *out->first);
    size_t cap_funcs = 0, n_frames = 0, cap_frames = 0;
    uint32_t *ks = NULL; /* this stack's functions */
    size_t cap_ks = 0, n_ks = 0;
    int *seen = NULL; /* functions already counted in this sample's total */
    size_t cap_seen = 0;
    if (!out->stacks || !out->counts || !out->first)
        rc = -1;
    for (size_t t = 0; t < s->cap_table && !rc; t++) {
        const sstack *st = &s->table[t];
        if (!st->count)
            continue;
        sbuf_reset(&line);
        const sproc *p = &s->procs[st->proc];
        sbuf_puts(&line, p->comm[0] ? p->comm : "?");
        size_t n_seen = 0;
        n_ks = 0;
        for (uint32_t i = 0; i < st->n && !rc; i++) {
            const sframe *fr = &st->f[i];
            char *nm = NULL;
            if (fr->file == UINT32_MAX)
                rc = sonde__asprintf(&nm, "0x%llx", (unsigned long long)fr->off) < 0 ? -1 : 0;
            else if (!(nm = name_at(&files[fr->file], fr->off)))
                rc = -1;
            if (rc)
                break;
            sbuf_putc(&line, ';');
            for (const char *c = nm; *c; c++) /* the folded format's separators, replaced */
                sbuf_putc(&line, *c == ';' || *c == ' ' || *c == '\n' ? '_' : *c);
            int k = strmap_get(&names, nm);
            if (k < 0) {
                if (SONDE_GROW(out->funcs, out->n_funcs, cap_funcs)) {
                    sonde__free(nm);
                    rc = -1;
                    break;
                }
                k = (int)out->n_funcs;
                out->funcs[k] = (sm_func){nm, sonde__strdup(fr->file == UINT32_MAX
                                                                ? "?"
                                                                : files[fr->file].base),
                                          0, 0};
                out->n_funcs++;
                if (!out->funcs[k].object || strmap_put(&names, nm, k)) {
                    rc = -1;
                    break;
                }
            } else {
                sonde__free(nm);
            }
            if (SONDE_GROW(ks, n_ks, cap_ks)) {
                rc = -1;
                break;
            }
            ks[n_ks++] = (uint32_t)k;
            if (i == st->n - 1)
                out->funcs[k].self += st->count;
            size_t q = 0;
            while (q < n_seen && seen[q] != k)
                q++;
            if (q == n_seen) { /* once per stack, however deep the recursion */
                if (SONDE_GROW(seen, n_seen, cap_seen)) {
                    rc = -1;
                    break;
                }
                seen[n_seen++] = k;
                out->funcs[k].total += st->count;
            }
        }
        if (!rc && line.oom)
            rc = -1;
        if (rc)
            break;
        /* stacks that differ only in where in each function they were are one line */
        int at = strmap_get(&lines, line.data);
        if (at >= 0) {
            out->counts[at] += st->count;
            continue;
        }
        out->stacks[out->n_stacks] = sonde__strdup(line.data);
        out->counts[out->n_stacks] = st->count;
        if (!out->stacks[out->n_stacks] || strmap_put(&lines, line.data, (int)out->n_stacks))
            rc = -1;
        for (size_t q = 0; q < n_ks && !rc; q++) {
            if (SONDE_GROW(out->frames, n_frames, cap_frames))
                rc = -1;
            else
                out->frames[n_frames++] = ks[q];
        }
        out->n_stacks += out->stacks[out->n_stacks] != NULL;
        out->first[out->n_stacks] = n_frames;
    }
    sonde__free(ks);
    if (!rc && out->n_funcs && sort_funcs(out))
        rc = -1;
    sonde__free(seen);
    sbuf_free(&line);
    strmap_free(&names);
    strmap_free(&lines);
    for (size_t i = 0; files && i < s->n_files; i++)
        free_file(&files[i]);
    sonde__free(files);
    for (size_t i = 0; i < s->n_files; i++)
        sonde__free(s->files[i]);
    sonde__free(s->files);
    for (size_t i = 0; i < s->n_procs; i++)
        sonde__free(s->procs[i].maps);
    sonde__free(s->procs);
    for (size_t i = 0; i < s->cap_table; i++)
        sonde__free(s->table[i].f);
    sonde__free(s->table);
    sonde__free(s);
    if (rc)
        sm_profile_free(out);
    return rc;
}
