/*
 * NVTX injection: libulpprof_cuda.so is the library NVTX_INJECTION64_PATH
 * names.  NVTX calls InitializeInjectionNvtx2 once per module that uses
 * NVTX (the program, cuBLAS, libtorch, ...), each time with that module's
 * function table, so installing our handlers is per call and idempotent.
 * The handlers run on the application's thread, outside any CUDA call.
 * The NVTX loading facts this relies on: docs/cupti-nvtx.md.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "cuda_inject.h"
#include "ulpprof/export.h"

static void NVTX_API on_mark_a(const char *message)
{
    ulp__inject_mark(message);
}

static void NVTX_API on_mark_ex(const nvtxEventAttributes_t *a)
{
    if (a != NULL && a->messageType == NVTX_MESSAGE_TYPE_ASCII)
        ulp__inject_mark(a->message.ascii);
}

static void NVTX_API on_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    (void)domain;
    on_mark_ex(a);
}

/* Sets slot `cbid` of `module`'s table, when the table has it. */
static void install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module, unsigned cbid,
                    NvtxFunctionPointer fn)
{
    NvtxFunctionTable table = NULL;
    unsigned int last = 0;
    if (cb->GetModuleFunctionTable(module, &table, &last) == 0 || table == NULL || cbid > last)
        return;
    if (table[cbid] != NULL)
        *table[cbid] = fn;
}

ULP_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table);

ULP_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    /* Returning 0 makes NVTX unload us and turn every call into a no-op:
     * the cheapest answer when nothing is being recorded. */
    if (!ulp__inject_enabled() || get_table == NULL)
        return 0;
    const NvtxExportTableCallbacks *cb = get_table(NVTX_ETID_CALLBACKS);
    if (cb == NULL || cb->struct_size < sizeof(*cb))
        return 0;
    install(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)on_mark_a);
    install(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, (NvtxFunctionPointer)on_mark_ex);
    install(cb, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx,
            (NvtxFunctionPointer)on_domain_mark_ex);
    return 1;
}
