/* demangle.h - C++ names made readable through libstdc++'s __cxa_demangle, found in the process
 * (a C++ program has it) or, when the caller allows, loaded for the purpose (the sonde command
 * naming a C++ program's functions). */
#ifndef SONDE_UTIL_DEMANGLE_H
#define SONDE_UTIL_DEMANGLE_H

/* The demangled name (allocated with malloc), or NULL when name is not a mangled C++ name or no
 * demangler is at hand. load: may dlopen libstdc++.so.6 when the process has none. Not
 * thread-safe on its first call. */
char *sonde__demangle(const char *name, int load);

#endif
