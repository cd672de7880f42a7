/* traced_fn.c - the function whose calls bench_autotrace measures; built with
 * -finstrument-functions (libsonde-autotrace) or -pg (uftrace), and plain for the floor. */
#include "traced_fn.h"

__attribute__((noinline)) int TRACED_FN(int x)
{
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}
