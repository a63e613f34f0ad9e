/* Binding the CUDA driver at run time (cuda_driver.h). */
#include <dlfcn.h>
#include <string.h>

#include "common/error.h"
#include "cuda_driver.h"

/* cuda.h maps several names to versioned symbols (cuMemcpyDtoH ->
 * cuMemcpyDtoH_v2, ...); the table names the exact symbols, with the
 * legacy-stream (non-_ptsz) semantics the collector relies on. */
typedef struct sym {
    const char *name;
    size_t offset;
    int required;
} sym;

#define OP(field, name, req)                                                                       \
    {                                                                                              \
        name, offsetof(ulp__cuda_ops, field), req                                                  \
    }

static const sym syms[] = {
    OP(ctx_get_current, "cuCtxGetCurrent", 1),
    OP(ctx_set_current, "cuCtxSetCurrent", 1),
    OP(ctx_synchronize, "cuCtxSynchronize", 1),
    OP(stream_is_capturing, "cuStreamIsCapturing", 1),
    OP(stream_synchronize, "cuStreamSynchronize", 1),
    OP(mem_host_alloc, "cuMemHostAlloc", 1),
    OP(mem_free_host, "cuMemFreeHost", 1),
    OP(event_create, "cuEventCreate", 1),
    OP(event_destroy, "cuEventDestroy_v2", 1),
    OP(event_record, "cuEventRecord", 1),
    OP(event_query, "cuEventQuery", 1),
    OP(event_synchronize, "cuEventSynchronize", 1),
    OP(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", 1),
    OP(memcpy_dtoh, "cuMemcpyDtoH_v2", 1),
    OP(stream_get_capture_info, "cuStreamGetCaptureInfo_v3", 0),
    OP(thread_exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", 0),
    OP(ctx_get_device, "cuCtxGetDevice", 0),
    OP(device_get_name, "cuDeviceGetName", 0),
    OP(driver_get_version, "cuDriverGetVersion", 0),
};

ulp_status ulp__cuda_driver_bind(ulp__cuda_ops *ops, int load, ulp_error *err)
{
    memset(ops, 0, sizeof(*ops));
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL && load)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return ulp__error(err, ULP_ENOENT, "no CUDA driver (libcuda.so.1) in this process");
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = dlsym(h, syms[i].name);
        if (p == NULL && syms[i].required) {
            memset(ops, 0, sizeof(*ops));
            return ulp__error(err, ULP_EUNSUPPORTED, "libcuda.so.1 lacks %s", syms[i].name);
        }
        /* A data pointer from dlsym converts to a function pointer (POSIX). */
        memcpy((char *)ops + syms[i].offset, &p, sizeof(p));
    }
    /* The handle stays open: the driver is never unloaded under us. */
    return ULP_OK;
}
