/* symbols.h - code addresses to function names, source files and object files, through
 * elfutils' libdwfl (the ELF symbol tables, static functions included, and DWARF line tables
 * when present), with C++ names demangled. Not thread-safe: the caller serialises. */
#ifndef SONDE_AUTOTRACE_SYMBOLS_H
#define SONDE_AUTOTRACE_SYMBOLS_H

typedef struct at_symbol {
    char *name;    /* demangled function name, or "0xADDR" when unknown; allocated */
    char *source;  /* source file (needs -g), or NULL; allocated */
    char *object;  /* executable or shared object holding it, or NULL; allocated */
    int line;      /* line of the function's first instruction, 0 when unknown */
} at_symbol;

#define AT_HIDDEN __attribute__((visibility("hidden"), no_instrument_function))

/* 0, or -1 when out of memory (out is then empty). */
AT_HIDDEN int at_resolve(void *addr, at_symbol *out);
AT_HIDDEN void at_symbol_free(at_symbol *s);
/* A C++ name demangled (allocated), or NULL when it is not mangled or no demangler is loaded. */
AT_HIDDEN char *at_demangle(const char *name);

#endif
