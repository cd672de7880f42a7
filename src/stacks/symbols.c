/* symbols.c - names for the CPU samples' addresses (stacks.h): the function at an offset of a
 * mapped file, from its ELF symbol table (.symtab, else the one of the debug file its build id
 * names under /usr/lib/debug/.build-id/, else .dynsym; read with libelf) and, where the file
 * has DWARF of its own, the functions inlined at that address (libdw's scopes) and where each
 * is defined (DW_AT_decl_file and DW_AT_decl_line). Used once per distinct address, after
 * sampling. */
#define _GNU_SOURCE
#include "stacks.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/sort.h"
#include "../util/demangle.h"

typedef struct ssym {
    uint64_t lo, hi; /* [lo, hi) in the file's addresses (lo first: starts_upto) */
    char *name;
} ssym;

/* The code-holding DIEs of one compilation unit, functions and inlined instances, a row per
 * range, built once per unit the samples name: an address is then looked up by a binary search
 * and a short walk, where libdw's dwarf_getscopes and dwarf_getscopes_die walk the unit's DIEs
 * at every address (about 1 ms an address in pyenv's libpython3.11: 7-13% of a 1.5 s sampled
 * run's time went to naming its stacks). */
typedef struct scope_row {
    uint64_t lo, hi;  /* one of the DIE's ranges, [lo, hi) in the file's addresses */
    int32_t up;       /* the row of the function or instance it lies in (its first), -1: none */
    uint32_t depth;   /* how many such enclose it */
    Dwarf_Die die;
} scope_row;

typedef struct cu_scopes {
    Dwarf_Off cu;     /* the unit's DIE's offset */
    scope_row *rows;  /* in the DIEs' order (a row's up comes before it) */
    size_t n, cap;
    struct scope_ord {
        uint64_t lo; /* first: starts_upto */
        uint32_t depth, row;
    } *ord;           /* the rows by start, the enclosing one first where two start together */
    uint64_t *hi_max; /* the largest end among ord[0..k] */
} cu_scopes;

struct sonde_symfile {
    cu_scopes *cus;        /* the units looked into so far */
    size_t n_cus, cap_cus;
    uint32_t *cu_index;    /* open addressing by unit offset: index in cus + 1, 0 empty */
    size_t cap_index;      /* a power of two, at least twice n_cus (0: none yet) */
    ssym *syms;
    size_t n, cap;
    GElf_Phdr *loads;
    size_t n_loads;
    const char *base;      /* the file's name, without its directory (points into path) */
    char *path;
    int dwarf_fd;
    Dwarf *dwarf;          /* NULL: no DWARF found */
    int vdso;              /* the vDSO: code it does not export is all named "[vdso]" */
};

static int cmp_sym(const void *a, const void *b)
{
    const ssym *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* How many of the n rows of size bytes at v, sorted by their start (a uint64_t, each row's
 * first member), start at or below a: the last of them, index - 1, is the one that may hold a. */
static size_t starts_upto(const void *v, size_t n, size_t size, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t start;
        memcpy(&start, (const char *)v + mid * size, sizeof start);
        if (start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* How many of f's sorted symbols start at or below a (starts_upto). */
static size_t symbols_upto(const sonde_symfile *f, uint64_t a)
{
    return starts_upto(f->syms, f->n, sizeof *f->syms, a);
}

/* The function symbols of e (.symtab, else .dynsym), sorted. 0, or -1 out of memory. */
static int read_function_symbols(sonde_symfile *f, Elf *e)
{
    for (int pass = 0; pass < 2 && !f->n; pass++) { /* .symtab has the static functions */
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
                if (SONDE_GROW(f->syms, f->n, f->cap))
                    return -1;
                char *c = sonde__strdup(nm);
                if (!c)
                    return -1;
                f->syms[f->n++] = (ssym){sym.st_value, sym.st_value + sym.st_size, c};
            }
        }
    }
    sonde__sort(f->syms, f->n, sizeof *f->syms, cmp_sym);
    return 0;
}

/* The loaded segments of e and its function symbols (a stripped file's from its debug file).
 * 0, or -1 out of memory. */
static int debug_file_symbols(sonde_symfile *f, Elf *e);
static int has_section(Elf *e, const char *name);
static int read_symbols(sonde_symfile *f, Elf *e)
{
    size_t np = 0;
    if (elf_getphdrnum(e, &np) == 0 && np) {
        f->loads = sonde__calloc(np, sizeof *f->loads);
        if (!f->loads)
            return -1;
        for (size_t i = 0; i < np; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
                f->loads[f->n_loads++] = ph;
        }
    }
    if (read_function_symbols(f, e))
        return -1;
    return has_section(e, ".symtab") ? 0 : debug_file_symbols(f, e);
}

/* Whether e has a section of that name. */
static int has_section(Elf *e, const char *name)
{
    size_t shstr;
    Elf_Scn *scn = NULL;
    if (elf_getshdrstrndx(e, &shstr) != 0)
        return 0;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        const char *nm = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstr, sh.sh_name) : NULL;
        if (nm && !strcmp(nm, name))
            return 1;
    }
    return 0;
}

/* A stripped file's full symbol table, from the debug file its build id names (Debian's
 * -dbgsym and libc6-dbg packages put them under /usr/lib/debug/.build-id/): the static
 * functions' names. Its DWARF is left alone: those files' compressed debug sections cost tens
 * of milliseconds of CPU to inflate for libc alone, at every run. 0, or -1 out of memory. */
static int debug_file_symbols(sonde_symfile *f, Elf *e)
{
    const void *id = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(e, &id);
    if (n < 2 || n > 64)
        return 0;
    char path[64 + 2 * 64 + 16];
    int at = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/",
                      ((const unsigned char *)id)[0]);
    for (ssize_t i = 1; i < n && at > 0 && (size_t)at + 3 < sizeof path; i++)
        at += snprintf(path + at, sizeof path - (size_t)at, "%02x", ((const unsigned char *)id)[i]);
    snprintf(path + at, sizeof path - (size_t)at, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf *d = elf_begin(fd, ELF_C_READ, NULL);
    int rc = 0;
    if (d && has_section(d, ".symtab")) {
        for (size_t i = 0; i < f->n; i++) /* the .dynsym's, replaced by the fuller table */
            sonde__free(f->syms[i].name);
        f->n = 0;
        rc = read_function_symbols(f, d);
    }
    if (d)
        elf_end(d);
    close(fd);
    return rc;
}

/* The vDSO's symbols: the kernel maps the same image into every process of its ABI, so this
 * process's copy (AT_SYSINFO_EHDR; its size from /proc/self/maps) names another's addresses
 * too. An offset in the mapping is an address in the image (it is linked at 0). */
static int vdso_symbols(sonde_symfile *f)
{
    const char *image = (const char *)getauxval(AT_SYSINFO_EHDR);
    FILE *m = image ? fopen("/proc/self/maps", "re") : NULL;
    size_t size = 0;
    char line[512];
    while (m && fgets(line, sizeof line, m)) {
        unsigned long long lo, hi;
        if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &lo, &hi) == 2 &&
            lo == (unsigned long long)(uintptr_t)image)
            size = (size_t)(hi - lo);
    }
    if (m)
        fclose(m);
    if (!size)
        return 0;
    char *copy = sonde__malloc(size); /* libelf reads it as a file it may not write to */
    if (!copy)
        return -1;
    memcpy(copy, image, size);
    Elf *e = elf_memory(copy, size);
    int rc = e ? read_symbols(f, e) : 0;
    if (e)
        elf_end(e);
    sonde__free(copy);
    return rc;
}

sonde_symfile *sonde__sym_open(const char *path)
{
    sonde_symfile *f = sonde__calloc(1, sizeof *f);
    if (!f || !(f->path = sonde__strdup(path))) {
        sonde__free(f);
        return NULL;
    }
    f->dwarf_fd = -1;
    const char *slash = strrchr(f->path, '/');
    f->base = slash ? slash + 1 : f->path;
    elf_version(EV_CURRENT);
    if (!strcmp(path, "[vdso]")) {
        f->vdso = 1;
        if (vdso_symbols(f) == 0)
            return f;
        sonde__sym_close(f);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return f; /* gone: its addresses stay numbers */
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    int rc = e ? read_symbols(f, e) : 0;
    if (e && !rc && has_section(e, ".debug_info")) /* its own DWARF */
        f->dwarf = dwarf_begin(fd, DWARF_C_READ);
    if (e)
        elf_end(e);
    if (f->dwarf)
        f->dwarf_fd = fd; /* dwarf_begin reads it as it goes */
    else
        close(fd);
    if (rc) {
        sonde__sym_close(f);
        return NULL;
    }
    return f;
}

sonde_symfile *sonde__sym_perfmap(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", pid);
    FILE *in = fopen(path, "re");
    if (!in)
        return NULL;
    sonde_symfile *f = sonde__calloc(1, sizeof *f);
    if (!f || !(f->path = sonde__strdup(path))) {
        sonde__free(f);
        fclose(in);
        return NULL;
    }
    f->dwarf_fd = -1;
    f->base = f->path + 5; /* "perf-PID.map" */
    char line[4096];
    while (fgets(line, sizeof line, in)) { /* "START SIZE NAME", hexadecimal, as perf reads it */
        unsigned long long lo, size;
        int at = 0;
        if (sscanf(line, "%llx %llx %n", &lo, &size, &at) < 2 || !at || !size)
            continue;
        char *name = line + at;
        name[strcspn(name, "\n")] = 0;
        if (!*name || lo + size < lo)
            continue;
        char *c = SONDE_GROW(f->syms, f->n, f->cap) ? NULL : sonde__strdup(name);
        if (!c)
            break; /* out of memory: the names read so far */
        f->syms[f->n++] = (ssym){lo, lo + size, c};
    }
    fclose(in);
    sonde__sort(f->syms, f->n, sizeof *f->syms, cmp_sym);
    return f;
}

int sonde__sym_holds(const sonde_symfile *f, uint64_t off)
{
    size_t lo = symbols_upto(f, off);
    return lo && off < f->syms[lo - 1].hi;
}

const char *sonde__sym_base(const sonde_symfile *f)
{
    return f->base;
}

void sonde__sym_close(sonde_symfile *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        sonde__free(f->syms[i].name);
    sonde__free(f->syms);
    sonde__free(f->loads);
    for (size_t i = 0; i < f->n_cus; i++) {
        sonde__free(f->cus[i].rows);
        sonde__free(f->cus[i].ord);
        sonde__free(f->cus[i].hi_max);
    }
    sonde__free(f->cus);
    sonde__free(f->cu_index);
    if (f->dwarf)
        dwarf_end(f->dwarf);
    if (f->dwarf_fd >= 0)
        close(f->dwarf_fd);
    sonde__free(f->path);
    sonde__free(f);
}

/* The symbol table's name at file address a: the symbol whose range holds it (or, for a symbol
 * without a size, the nearest below), demangled; else the DWARF's name of the function there
 * (die, when not NULL: a stripped library whose debug file was found); else "FILE+0xADDRESS",
 * the address in the file as nm, objdump and perf report give it. Allocated; NULL out of
 * memory. */
static char *dwarf_name(Dwarf_Die *die);
static char *symbol_at(const sonde_symfile *f, uint64_t a, Dwarf_Die *die)
{
    size_t lo = symbols_upto(f, a);
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
    if (die && (r = dwarf_name(die)))
        return r;
    if (f->vdso) /* its static functions have no symbol anywhere: one row, not one a byte */
        return sonde__strdup("[vdso]");
    if (sonde__asprintf(&r, "%s+0x%llx", f->base, (unsigned long long)a) < 0)
        return NULL;
    return r;
}

/* A function's name in the DWARF: its linkage name demangled, else its name (both through its
 * abstract origin, for an inlined one). Allocated; NULL when it has none or out of memory. */
static char *dwarf_name(Dwarf_Die *die)
{
    Dwarf_Attribute at;
    const char *ln = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
        ln = dwarf_formstring(&at);
    if (ln) {
        char *d = sonde__demangle(ln, 1);
        if (d) {
            char *r = sonde__strdup(d);
            free(d);
            return r;
        }
    }
    const char *nm = dwarf_attr_integrate(die, DW_AT_name, &at) ? dwarf_formstring(&at) : NULL;
    return nm ? sonde__strdup(nm) : NULL;
}

/* Where die's function is defined. */
static void decl_of(Dwarf_Die *die, sonde_symframe *out)
{
    const char *file = dwarf_decl_file(die);
    int line = 0;
    if (file && dwarf_decl_line(die, &line) == 0 && line > 0) {
        out->file = sonde__strdup(file);
        out->line = out->file ? (unsigned)line : 0;
    }
}

/* The compilation unit holding file address a: through .debug_aranges, else (clang emits none
 * by default) each unit's own ranges in turn. */
static int cu_of(Dwarf *dbg, uint64_t a, Dwarf_Die *cu)
{
    if (dwarf_addrdie(dbg, a, cu))
        return 1;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        if (dwarf_offdie(dbg, off + hsize, cu) && dwarf_haspc(cu, a) > 0)
            return 1;
        off = next;
    }
    return 0;
}

/* The address in the file of offset off, through the segment holding it. */
static uint64_t file_address(const sonde_symfile *f, uint64_t off)
{
    for (size_t i = 0; i < f->n_loads; i++)
        if (off >= f->loads[i].p_offset && off < f->loads[i].p_offset + f->loads[i].p_filesz)
            return off - f->loads[i].p_offset + f->loads[i].p_vaddr;
    return off;
}

int sonde__sym_line(sonde_symfile *f, uint64_t off, const char **file, unsigned *line)
{
    uint64_t a = file_address(f, off);
    Dwarf_Die cu;
    if (!f->dwarf || !cu_of(f->dwarf, a, &cu))
        return 0;
    Dwarf_Line *l = dwarf_getsrc_die(&cu, a);
    int n = 0;
    const char *src = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
    if (!src || dwarf_lineno(l, &n) != 0 || n <= 0)
        return 0;
    *file = src;
    *line = (unsigned)n;
    return 1;
}

/* Adds the rows of die (its ranges) under row up at depth; the first one's index into *first
 * (-1: it has no range). 0, or -1 out of memory. */
static int scope_add(cu_scopes *c, Dwarf_Die *die, int32_t up, uint32_t depth, int32_t *first)
{
    *first = -1;
    Dwarf_Addr base, lo, hi;
    for (ptrdiff_t it = 0; (it = dwarf_ranges(die, it, &base, &lo, &hi)) > 0;) {
        if (hi <= lo)
            continue;
        if (c->n >= INT32_MAX || SONDE_GROW(c->rows, c->n, c->cap))
            return -1;
        if (*first < 0)
            *first = (int32_t)c->n;
        c->rows[c->n++] = (scope_row){lo, hi, up, depth, *die};
    }
    return 0;
}

static int cmp_scope_ord(const void *a, const void *b)
{
    const struct scope_ord *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* The rows of unit cu's functions and inlined instances into c, walking its DIEs once (those
 * of the partial units it imports, as dwz makes them, where they stand), then ordered by start.
 * 0, or -1 out of memory. */
static int scopes_build(Dwarf_Die *cu, cu_scopes *c)
{
    struct walk {
        Dwarf_Die die;
        int32_t up;
        uint32_t depth;
    } *st = NULL;
    size_t n_st = 0, cap_st = 0, n_seen = 0, cap_seen = 0;
    Dwarf_Off *seen = NULL; /* the partial units imported so far: each once (a cycle ends) */
    Dwarf_Die kid;
    int rc = 0;
    if (dwarf_child(cu, &kid) == 0) {
        if (SONDE_GROW(st, n_st, cap_st))
            return -1;
        st[n_st++] = (struct walk){kid, -1, 0};
    }
    while (n_st && !rc) {
        struct walk w = st[--n_st];
        Dwarf_Die next, unit;
        Dwarf_Attribute at;
        if (dwarf_siblingof(&w.die, &next) == 0) { /* its next sibling, after its children */
            if (SONDE_GROW(st, n_st, cap_st)) {
                rc = -1;
                break;
            }
            st[n_st++] = (struct walk){next, w.up, w.depth};
        }
        int tag = dwarf_tag(&w.die);
        int32_t first = -1;
        if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) &&
            scope_add(c, &w.die, w.up, w.depth, &first)) {
            rc = -1;
            break;
        }
        int in;
        if (tag == DW_TAG_imported_unit) {
            in = dwarf_attr(&w.die, DW_AT_import, &at) && dwarf_formref_die(&at, &unit);
            for (size_t i = 0; in && i < n_seen; i++)
                in = seen[i] != dwarf_dieoffset(&unit);
            if (in && SONDE_GROW(seen, n_seen, cap_seen)) {
                rc = -1;
                break;
            }
            if (in)
                seen[n_seen++] = dwarf_dieoffset(&unit);
            in = in && dwarf_child(&unit, &kid) == 0;
        } else {
            in = dwarf_haschildren(&w.die) > 0 && dwarf_child(&w.die, &kid) == 0;
        }
        if (in) {
            if (SONDE_GROW(st, n_st, cap_st)) {
                rc = -1;
                break;
            }
            st[n_st++] = first >= 0 ? (struct walk){kid, first, w.depth + 1}
                                    : (struct walk){kid, w.up, w.depth};
        }
    }
    sonde__free(st);
    sonde__free(seen);
    if (rc)
        return -1;
    c->ord = sonde__malloc((c->n ? c->n : 1) * sizeof *c->ord);
    c->hi_max = sonde__malloc((c->n ? c->n : 1) * sizeof *c->hi_max);
    if (!c->ord || !c->hi_max)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        c->ord[i] = (struct scope_ord){c->rows[i].lo, c->rows[i].depth, (uint32_t)i};
    sonde__sort(c->ord, c->n, sizeof *c->ord, cmp_scope_ord);
    for (size_t k = 0; k < c->n; k++) {
        uint64_t hi = c->rows[c->ord[k].row].hi;
        c->hi_max[k] = k && c->hi_max[k - 1] > hi ? c->hi_max[k - 1] : hi;
    }
    return 0;
}

/* The slot of unit offset off in f's index: its own, or the empty one it would take. */
static size_t cu_slot(const sonde_symfile *f, Dwarf_Off off)
{
    size_t h = (size_t)((off * 0x9E3779B97F4A7C15ull) >> 20) & (f->cap_index - 1);
    while (f->cu_index[h] && f->cus[f->cu_index[h] - 1].cu != off)
        h = (h + 1) & (f->cap_index - 1);
    return h;
}

/* Room in f's index for one unit more (grown and filled again at half full). 0, -1 out of
 * memory. */
static int cu_index_room(sonde_symfile *f)
{
    if (2 * (f->n_cus + 1) <= f->cap_index)
        return 0;
    size_t cap = f->cap_index ? f->cap_index * 2 : 64;
    uint32_t *t = sonde__calloc(cap, sizeof *t);
    if (!t)
        return -1;
    sonde__free(f->cu_index);
    f->cu_index = t;
    f->cap_index = cap;
    for (size_t i = 0; i < f->n_cus; i++)
        f->cu_index[cu_slot(f, f->cus[i].cu)] = (uint32_t)i + 1;
    return 0;
}

/* The rows of f's unit cu, built when first asked for; NULL out of memory. */
static const cu_scopes *scopes_of(sonde_symfile *f, Dwarf_Die *cu)
{
    Dwarf_Off off = dwarf_dieoffset(cu);
    if (f->cap_index) {
        size_t h = cu_slot(f, off);
        if (f->cu_index[h])
            return &f->cus[f->cu_index[h] - 1];
    }
    if (cu_index_room(f) || SONDE_GROW(f->cus, f->n_cus, f->cap_cus))
        return NULL;
    cu_scopes *c = &f->cus[f->n_cus];
    *c = (cu_scopes){.cu = off};
    if (scopes_build(cu, c)) {
        sonde__free(c->rows);
        sonde__free(c->ord);
        sonde__free(c->hi_max);
        return NULL;
    }
    f->cu_index[cu_slot(f, off)] = (uint32_t)f->n_cus + 1;
    f->n_cus++;
    return c;
}

/* The innermost row of c holding file address a, NULL: none. Of the rows starting at or below
 * a, the last that also ends above it: nested ranges, so the deepest of those holding a. */
static const scope_row *scope_at(const cu_scopes *c, uint64_t a)
{
    for (size_t k = starts_upto(c->ord, c->n, sizeof *c->ord, a); k-- > 0 && c->hi_max[k] > a;)
        if (a < c->rows[c->ord[k].row].hi)
            return &c->rows[c->ord[k].row];
    return NULL;
}

int sonde__sym_at(sonde_symfile *f, uint64_t off, sonde_symframe *out, int max)
{
    uint64_t a = file_address(f, off);
    int n = 0;
    Dwarf_Die cu;
    const cu_scopes *c = NULL;
    if (f->dwarf && cu_of(f->dwarf, a, &cu) && !(c = scopes_of(f, &cu)))
        return -1;
    /* innermost first: each inlined instance holding a, out to the function they lie in */
    const scope_row *r = c ? scope_at(c, a) : NULL;
    for (; r && n < max - 1; r = r->up >= 0 ? &c->rows[r->up] : NULL) {
        Dwarf_Die d = r->die;
        if (dwarf_tag(&d) != DW_TAG_inlined_subroutine)
            break;
        out[n] = (sonde_symframe){dwarf_name(&d), NULL, 0};
        if (out[n].name) { /* a nameless one is left out */
            decl_of(&d, &out[n]);
            n++;
        }
    }
    /* the function holding them: its symbol, where the DWARF says it is defined */
    Dwarf_Die fn;
    for (; r; r = r->up >= 0 ? &c->rows[r->up] : NULL) {
        fn = r->die;
        if (dwarf_tag(&fn) == DW_TAG_subprogram)
            break;
    }
    out[n] = (sonde_symframe){symbol_at(f, a, r ? &fn : NULL), NULL, 0};
    if (!out[n].name) {
        for (int i = 0; i < n; i++) {
            sonde__free(out[i].name);
            sonde__free(out[i].file);
        }
        return -1;
    }
    if (r)
        decl_of(&fn, &out[n]);
    return n + 1;
}
