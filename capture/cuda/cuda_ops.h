/*
 * The driver calls the collector makes, behind a table of function
 * pointers: the injection library fills it from libcuda.so.1 at run time
 * (dlopen/dlsym, never linked), and tests fill it with fakes that treat a
 * CUdeviceptr as a host address and log every call.
 *
 * Only cuda.h's types are used here; nothing links the driver.
 */
#ifndef ULPPROF_CUDA_OPS_H
#define ULPPROF_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

typedef struct ulp__cuda_ops {
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_set_current)(CUcontext ctx);
    CUresult (*ctx_synchronize)(void);
    CUresult (*stream_is_capturing)(CUstream stream, CUstreamCaptureStatus *status);
    CUresult (*stream_synchronize)(CUstream stream);
    CUresult (*mem_host_alloc)(void **p, size_t bytes, unsigned int flags);
    CUresult (*mem_free_host)(void *p);
    CUresult (*event_create)(CUevent *ev, unsigned int flags);
    CUresult (*event_destroy)(CUevent ev);
    CUresult (*event_record)(CUevent ev, CUstream stream);
    CUresult (*event_query)(CUevent ev);
    CUresult (*event_synchronize)(CUevent ev);
    CUresult (*memcpy_dtoh_async)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*memcpy_dtoh)(void *dst, CUdeviceptr src, size_t bytes);
    /* Captures inside CUDA graphs (cuda_graphcap.h); may be NULL, and then
     * marks made during stream capture are skipped and counted. */
    CUresult (*stream_get_capture_info)(CUstream stream, CUstreamCaptureStatus *status,
                                        cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                        const CUgraphEdgeData **edges, size_t *ndeps);
    CUresult (*thread_exchange_capture_mode)(CUstreamCaptureMode *mode);
    /* Facts for /env; may be NULL. */
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*device_get_name)(char *name, int len, CUdevice dev);
    CUresult (*driver_get_version)(int *version);
} ulp__cuda_ops;

/*
 * Optional hooks into CUPTI (cuda_cupti.c); every member may be NULL, and
 * then the collector captures without kernel attribution.
 */
typedef struct ulp__cuda_hooks {
    void *ctx;
    /* The CUPTI stream id of `stream` in `c`; 0 on success. */
    int (*stream_id)(void *ctx, CUcontext c, CUstream stream, uint32_t *id);
    /* Bracket the collector's own copy; copy_end returns the correlation id
     * CUPTI gave that driver call, or 0 when it saw none. */
    void (*copy_begin)(void *ctx);
    uint32_t (*copy_end)(void *ctx);
    /* 1 while any stream capture (CUDA graph) is in progress in the process. */
    int (*capture_active)(void *ctx);
    /* Delivers every kernel record CUPTI holds to the trace, synchronously. */
    void (*flush)(void *ctx);
} ulp__cuda_hooks;

#endif /* ULPPROF_CUDA_OPS_H */
