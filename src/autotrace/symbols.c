/* symbols.c - address to symbol through libdwfl: the process's modules are reported from
 * /proc/self/maps once, and again when an address falls outside every known module (a library
 * loaded later with dlopen) or inside one that has no symbol there (a library unloaded since,
 * whose addresses another now holds). */
#define _GNU_SOURCE
#include "symbols.h"
#include "../util/demangle.h"

#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static Dwfl *g_dwfl;
static char *g_debuginfo_path;

static const Dwfl_Callbacks g_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &g_debuginfo_path,
};

static int report(void)
{
    if (!g_dwfl) {
        g_dwfl = dwfl_begin(&g_callbacks);
        if (!g_dwfl)
            return -1;
    }
    /* a whole new report: modules still mapped are kept (and what was read of them), those
     * unmapped are dropped, so a stale module can never answer for a new library's address
     * (libdw itself loads and unloads libdebuginfod, leaving a hole a dlopen may fill) */
    dwfl_report_begin(g_dwfl);
    int rc = dwfl_linux_proc_report(g_dwfl, getpid());
    dwfl_report_end(g_dwfl, NULL, NULL);
    return rc == 0 ? 0 : -1;
}

char *at_demangle(const char *name)
{
    return sonde__demangle(name, 0); /* the traced program's own libstdc++, never loaded */
}

/* The source line of a through the unit whose ranges hold it: the path when the module has no
 * .debug_aranges (clang emits none), where dwfl_module_getsrc finds nothing. */
static const char *src_by_units(Dwfl_Module *mod, Dwarf_Addr a, int *lineno)
{
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
    if (!dw)
        return NULL;
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t unit_type;
    while (dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0) {
        if (dwarf_haspc(&cudie, a - bias) <= 0)
            continue;
        Dwarf_Line *ln = dwarf_getsrc_die(&cudie, a - bias);
        if (!ln)
            return NULL;
        dwarf_lineno(ln, lineno);
        return dwarf_linesrc(ln, NULL, NULL);
    }
    return NULL;
}

int at_resolve(void *addr, at_symbol *out)
{
    memset(out, 0, sizeof *out);
    Dwarf_Addr a = (Dwarf_Addr)(uintptr_t)addr;
    Dwfl_Module *mod = NULL;
    if (g_dwfl || report() == 0)
        mod = dwfl_addrmodule(g_dwfl, a);
    GElf_Off off = 0;
    GElf_Sym s;
    const char *sym = mod ? dwfl_module_addrinfo(mod, a, &off, &s, NULL, NULL, NULL) : NULL;
    if (!sym && report() == 0) { /* loaded, or unloaded, since the last report */
        mod = dwfl_addrmodule(g_dwfl, a);
        sym = mod ? dwfl_module_addrinfo(mod, a, &off, &s, NULL, NULL, NULL) : NULL;
    }
    if (mod) {
        const char *obj = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        if (obj && !(out->object = strdup(obj)))
            goto oom;
        Dwfl_Line *line = dwfl_module_getsrc(mod, a);
        int lineno = 0;
        const char *src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)
                               : src_by_units(mod, a, &lineno);
        if (src) {
            if (!(out->source = strdup(src)))
                goto oom;
            out->line = lineno;
        }
    }
    if (sym) {
        out->name = at_demangle(sym);
        if (!out->name && !(out->name = strdup(sym)))
            goto oom;
    } else {
        char buf[64];
        snprintf(buf, sizeof buf, "0x%" PRIxPTR, (uintptr_t)addr);
        if (!(out->name = strdup(buf)))
            goto oom;
    }
    return 0;
oom:
    at_symbol_free(out);
    return -1;
}

void at_symbol_free(at_symbol *s)
{
    free(s->name);
    free(s->source);
    free(s->object);
    memset(s, 0, sizeof *s);
}
