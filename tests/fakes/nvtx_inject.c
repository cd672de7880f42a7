/* nvtx_inject.c - an NVTX injection library for the tests, loaded the way Nsight Systems loads
 * its own: the application's NVTX code dlopens the file named by NVTX_INJECTION64_PATH and calls
 * InitializeInjectionNvtx2, which installs these handlers in NVTX's function tables. Each call is
 * appended to the file named by NVTX_TEST_LOG, one line per call:
 *   domain NAME | push DOMAIN TID NAME | pop DOMAIN TID | mark DOMAIN NAME |
 *   start DOMAIN ID NAME | end DOMAIN ID
 * DOMAIN is the name given to nvtxDomainCreateA. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *g_log;
static uint64_t g_next_range = 1;

#define MAX_DOMAINS 16
static char g_domain_names[MAX_DOMAINS][64];
static int g_n_domains;

static const char *domain_name(nvtxDomainHandle_t d)
{
    intptr_t i = (intptr_t)d - 1;
    return i >= 0 && i < g_n_domains ? g_domain_names[i] : "(default)";
}

static const char *message(const nvtxEventAttributes_t *a)
{
    if (!a || a->messageType != NVTX_MESSAGE_TYPE_ASCII || !a->message.ascii)
        return "(not ascii)";
    return a->message.ascii;
}

static void logf_locked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_locked(const char *fmt, ...)
{
    if (!g_log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_log, fmt, ap);
    va_end(ap);
    fflush(g_log);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    pthread_mutex_lock(&g_lock);
    nvtxDomainHandle_t h = NULL;
    if (g_n_domains < MAX_DOMAINS) {
        snprintf(g_domain_names[g_n_domains], sizeof g_domain_names[0], "%s", name);
        h = (nvtxDomainHandle_t)(intptr_t)(++g_n_domains);
        logf_locked("domain %s\n", name);
    }
    pthread_mutex_unlock(&g_lock);
    return h;
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&g_lock);
    logf_locked("push %s %ld %s\n", domain_name(d), (long)syscall(SYS_gettid), message(a));
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d)
{
    pthread_mutex_lock(&g_lock);
    logf_locked("pop %s %ld\n", domain_name(d), (long)syscall(SYS_gettid));
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void NVTX_API mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&g_lock);
    logf_locked("mark %s %s\n", domain_name(d), message(a));
    pthread_mutex_unlock(&g_lock);
}

static nvtxRangeId_t NVTX_API range_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&g_lock);
    uint64_t id = g_next_range++;
    logf_locked("start %s %llu %s\n", domain_name(d), (unsigned long long)id, message(a));
    pthread_mutex_unlock(&g_lock);
    return id;
}

static void NVTX_API range_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    pthread_mutex_lock(&g_lock);
    logf_locked("end %s %llu\n", domain_name(d), (unsigned long long)id);
    pthread_mutex_unlock(&g_lock);
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const char *path = getenv("NVTX_TEST_LOG");
    g_log = path ? fopen(path, "a") : NULL;
    if (!g_log)
        return 0; /* NVTX then makes every call a no-op */
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable core2 = NULL;
    unsigned int size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &size) ||
        size < NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *core2[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *core2[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
    *core2[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    *core2[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
    *core2[NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)range_start;
    *core2[NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)range_end;
    logf_locked("init\n");
    return 1;
}
