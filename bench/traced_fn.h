/* traced_fn.h - one tiny function under three names: plain, instrumented, profiled (-pg). */
#ifndef SONDE_BENCH_TRACED_FN_H
#define SONDE_BENCH_TRACED_FN_H
#ifndef TRACED_FN
#define TRACED_FN tiny_traced
#endif
int tiny_plain(int x);
int tiny_traced(int x);
int tiny_pg(int x);
#endif
