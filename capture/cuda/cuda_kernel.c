/* Decoding CUPTI kernel activity records, and demangling kernel names. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernel.h"

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn demangler;
static pthread_once_t demangler_once = PTHREAD_ONCE_INIT;

static void demangler_find(void)
{
    /* A CUDA program almost always has libstdc++ loaded already; a plain C
     * one may not, and then we load it ourselves (it stays loaded). */
    void *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (sym == NULL) {
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h != NULL)
            sym = dlsym(h, "__cxa_demangle");
    }
    /* POSIX guarantees that a data pointer from dlsym converts to a
     * function pointer; go through memcpy to keep -Wpedantic quiet. */
    memcpy(&demangler, &sym, sizeof(sym));
}

char *ulp__cuda_demangle(const char *mangled)
{
    if (mangled == NULL)
        return strdup("");
    if (strncmp(mangled, "_Z", 2) == 0) {
        pthread_once(&demangler_once, demangler_find);
        if (demangler != NULL) {
            int status = -1;
            char *d = demangler(mangled, NULL, NULL, &status);
            if (status == 0 && d != NULL)
                return d;
            free(d);
        }
    }
    return strdup(mangled);
}

ulp_status ulp__cuda_kernel_decode(const CUpti_ActivityKernel10 *rec, ulp__cuda_kernel *out)
{
    memset(out, 0, sizeof(*out));
    out->correlation_id = rec->correlationId;
    out->grid[0] = rec->gridX;
    out->grid[1] = rec->gridY;
    out->grid[2] = rec->gridZ;
    out->block[0] = rec->blockX;
    out->block[1] = rec->blockY;
    out->block[2] = rec->blockZ;
    out->shared_static = rec->staticSharedMemory;
    out->shared_dynamic = rec->dynamicSharedMemory;
    out->registers = rec->registersPerThread;
    out->stream_id = rec->streamId;
    out->device = rec->deviceId;
    out->context_id = rec->contextId;
    out->start_ns = rec->start;
    out->end_ns = rec->end;
    out->graph_node_id = rec->graphNodeId;
    out->name = ulp__cuda_demangle(rec->name);
    return out->name != NULL ? ULP_OK : ULP_ENOMEM;
}

void ulp__cuda_kernels_release(ulp__cuda_kernel *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(k[i].name);
        k[i].name = NULL;
    }
}
