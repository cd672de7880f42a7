/* symbols.c - names for the CPU samples' addresses (sources.h): the function at an offset of a
 * mapped file, from its ELF symbol table (.symtab, else the one of the debug file its build id
 * names under /usr/lib/debug/.build-id/, else .dynsym; read with libelf) and, where the file
 * has DWARF of its own, the functions inlined at that address (libdw's scopes) and where each
 * is defined (DW_AT_decl_file and DW_AT_decl_line). Used once per distinct address, after
 * sampling. */
#define _GNU_SOURCE
#include "sources.h"

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
    uint64_t lo, hi; /* [lo, hi) in the file's addresses */
    char *name;
} ssym;

struct sonde_symfile {
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

/* How many of f's sorted symbols start at or below a: the last of them, index - 1, is the one
 * that may hold a. */
static size_t symbols_upto(const sonde_symfile *f, uint64_t a)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (f->syms[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
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

int sonde__sym_at(sonde_symfile *f, uint64_t off, sonde_symframe *out, int max)
{
    uint64_t a = file_address(f, off);
    int n = 0;
    Dwarf_Die cu, *sc = NULL;
    int ns = f->dwarf && cu_of(f->dwarf, a, &cu) ? dwarf_getscopes(&cu, a, &sc) : 0;
    /* Innermost first. Past an inlined instance, dwarf_getscopes goes on with the scopes of
     * its abstract definition: the scopes of the concrete instance (dwarf_getscopes_die) lead
     * to the function it was inlined into. */
    for (int i = 0; i < ns && n < max - 1;) {
        int tag = dwarf_tag(&sc[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_compile_unit ||
            tag == DW_TAG_partial_unit)
            break;
        if (tag != DW_TAG_inlined_subroutine) {
            i++;
            continue;
        }
        out[n] = (sonde_symframe){dwarf_name(&sc[i]), NULL, 0};
        if (out[n].name) { /* a nameless one is left out */
            decl_of(&sc[i], &out[n]);
            n++;
        }
        Dwarf_Die *outer = NULL;
        int no = dwarf_getscopes_die(&sc[i], &outer);
        free(sc);
        sc = outer;
        ns = no;
        i = 1; /* outer[0] is the instance itself */
    }
    /* the function holding them: its symbol, where the DWARF says it is defined */
    Dwarf_Die *fn = NULL;
    for (int i = 0; i < ns && !fn; i++)
        if (dwarf_tag(&sc[i]) == DW_TAG_subprogram)
            fn = &sc[i];
    out[n] = (sonde_symframe){symbol_at(f, a, fn), NULL, 0};
    if (!out[n].name)
        goto oom;
    if (fn)
        decl_of(fn, &out[n]);
    n++;
    free(sc);
    return n;
oom:
    free(sc);
    for (int i = 0; i < n; i++) {
        sonde__free(out[i].name);
        sonde__free(out[i].file);
    }
    return -1;
}
