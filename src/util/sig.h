/* sig.h - a signal's action set to a plain handler (SIG_DFL, SIG_IGN or a function of one
 * argument), no flags and nothing blocked while it runs: async-signal-safe (sigaction only). */
#ifndef SONDE_UTIL_SIG_H
#define SONDE_UTIL_SIG_H

#include <signal.h>
#include <string.h>

static inline int sonde__sig_plain(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

#endif
