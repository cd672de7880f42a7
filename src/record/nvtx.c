/* nvtx.c - sonde's sections, steps and sessions as NVTX ranges and marks in a "sonde" domain,
 * for Nsight Systems (option nvtx). NVTX3 is header-only: its loader, compiled in here, looks for
 * a tool through NVTX_INJECTION64_PATH (set by `nsys profile`) on the first call and makes every
 * call a no-op when none is attached. Built when CUDA's nvtx3/ headers were found
 * (SONDE_HAVE_NVTX); otherwise sonde__nvtx_reason says why there are no ranges. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

#include "record.h"

#ifdef SONDE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t g_domain;

static void make_domain(void)
{
    g_domain = nvtxDomainCreateA("sonde");
}

static void attrs(nvtxEventAttributes_t *a, const char *name)
{
    *a = (nvtxEventAttributes_t){0};
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a->messageType = NVTX_MESSAGE_TYPE_ASCII;
    a->message.ascii = name;
}

const char *sonde__nvtx_reason(void)
{
    return NULL;
}

void sonde__nvtx_push(const char *name)
{
    pthread_once(&g_once, make_domain);
    nvtxEventAttributes_t a;
    attrs(&a, name);
    nvtxDomainRangePushEx(g_domain, &a);
}

void sonde__nvtx_pop(void)
{
    pthread_once(&g_once, make_domain);
    nvtxDomainRangePop(g_domain);
}

void sonde__nvtx_mark(const char *name)
{
    pthread_once(&g_once, make_domain);
    nvtxEventAttributes_t a;
    attrs(&a, name);
    nvtxDomainMarkEx(g_domain, &a);
}

uint64_t sonde__nvtx_start(const char *name)
{
    pthread_once(&g_once, make_domain);
    nvtxEventAttributes_t a;
    attrs(&a, name);
    return nvtxDomainRangeStartEx(g_domain, &a);
}

void sonde__nvtx_end(uint64_t id)
{
    pthread_once(&g_once, make_domain);
    nvtxDomainRangeEnd(g_domain, id);
}

#else

const char *sonde__nvtx_reason(void)
{
    return "this libsonde was built without CUDA's nvtx3 headers, so it emits no NVTX ranges "
           "(rebuild with the CUDA toolkit installed, or SONDE_NVTX_INCLUDE=DIR)";
}

void sonde__nvtx_push(const char *name)
{
    (void)name;
}

void sonde__nvtx_pop(void)
{
}

void sonde__nvtx_mark(const char *name)
{
    (void)name;
}

uint64_t sonde__nvtx_start(const char *name)
{
    (void)name;
    return 0;
}

void sonde__nvtx_end(uint64_t id)
{
    (void)id;
}

#endif
