/*
 * CUPTI bound at run time (cuda_cupti.h).
 *
 * Callbacks: the driver calls the collector makes for its own copies
 * (cuMemcpyDtoH[Async]_v2) report their correlation id to the thread that
 * made them, and stream-capture begin/end calls (driver and runtime) keep a
 * count of graph captures in progress.  Activity: CONCURRENT_KERNEL records
 * arrive in malloc'd buffers on CUPTI's threads, are decoded and numbered
 * by the trace, and the buffer is freed; nothing here calls CUDA.
 * The CUPTI facts this relies on: docs/cupti-nvtx.md.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "common/error.h"
#include "common/grow.h"
#include "cuda_cupti.h"
#include "cuda_graphcb.h"

#define BUFFER_BYTES    ((size_t)1 << 20)
#define FLUSH_PERIOD_MS 1000

#define FN(name) __typeof__(name) *name
static struct {
    void *lib;
    FN(cuptiSubscribe);
    FN(cuptiUnsubscribe);
    FN(cuptiEnableCallback);
    FN(cuptiActivityRegisterCallbacks);
    FN(cuptiActivityEnable);
    FN(cuptiActivityFlushAll);
    FN(cuptiActivityFlushPeriod);
    FN(cuptiActivityGetNextRecord);
    FN(cuptiActivityGetNumDroppedRecords);
    FN(cuptiGetStreamIdEx);
    FN(cuptiGetVersion);
    FN(cuptiGetResultString);
} api;
#undef FN

static CUpti_SubscriberHandle g_sub;
static ulp__cuda_trace *g_trace;
static atomic_int g_active;
static atomic_int g_drv_captures, g_rt_captures;
static atomic_uint_least64_t g_dropped;
static _Atomic(ulp__devcap *) g_devcap;

static __thread int t_in_copy;
static __thread uint32_t t_copy_corr;
static __thread int t_in_gemm;
static __thread uint32_t t_gemm_first, t_gemm_last;

/* Kernel launches, for the kernels of a cuBLAS call (both domains: the
 * runtime's launches carry the runtime call's correlation id). */
static const CUpti_CallbackId launch_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};
static const CUpti_CallbackId launch_runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
};

static void note_launch(const CUpti_CallbackData *cb)
{
    if (!t_in_gemm || cb->callbackSite != CUPTI_API_ENTER || cb->correlationId == 0)
        return;
    if (t_gemm_first == 0 || cb->correlationId < t_gemm_first)
        t_gemm_first = cb->correlationId;
    if (cb->correlationId > t_gemm_last)
        t_gemm_last = cb->correlationId;
}

static const char *result_str(CUptiResult r)
{
    const char *s = NULL;
    if (api.cuptiGetResultString == NULL || api.cuptiGetResultString(r, &s) != CUPTI_SUCCESS ||
        s == NULL)
        return "unknown CUPTI error";
    return s;
}

static void *open_cupti(void)
{
    const char *env = getenv("ULPPROF_CUPTI_LIBRARY");
    if (env != NULL && *env != '\0')
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
#ifdef ULP_CUPTI_BUILD_PATH
    /* The toolkit's lib directory is rarely on the loader path. */
    if (h == NULL)
        h = dlopen(ULP_CUPTI_BUILD_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    return h;
}

static int bind_cupti(void *h)
{
    struct {
        const char *name;
        void *slot;
    } t[] = {
        {"cuptiSubscribe", &api.cuptiSubscribe},
        {"cuptiUnsubscribe", &api.cuptiUnsubscribe},
        {"cuptiEnableCallback", &api.cuptiEnableCallback},
        {"cuptiActivityRegisterCallbacks", &api.cuptiActivityRegisterCallbacks},
        {"cuptiActivityEnable", &api.cuptiActivityEnable},
        {"cuptiActivityFlushAll", &api.cuptiActivityFlushAll},
        {"cuptiActivityFlushPeriod", &api.cuptiActivityFlushPeriod},
        {"cuptiActivityGetNextRecord", &api.cuptiActivityGetNextRecord},
        {"cuptiActivityGetNumDroppedRecords", &api.cuptiActivityGetNumDroppedRecords},
        {"cuptiGetStreamIdEx", &api.cuptiGetStreamIdEx},
        {"cuptiGetVersion", &api.cuptiGetVersion},
        {"cuptiGetResultString", &api.cuptiGetResultString},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        void *p = dlsym(h, t[i].name);
        if (p == NULL)
            return -1;
        memcpy(t[i].slot, &p, sizeof(p));
    }
    return 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* A fresh buffer per request: CUPTI hands them out per thread. */
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer != NULL ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    size_t cap = 0, n = 0;
    ulp__cuda_kernel *k = NULL;
    CUpti_Activity *rec = NULL;
    while (valid > 0 && api.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        if (ULP__GROW(k, cap, n + 1) != 0)
            break;
        if (ulp__cuda_kernel_decode((const CUpti_ActivityKernel10 *)(const void *)rec, &k[n]) ==
            ULP_OK)
            n++;
    }
    if (k != NULL && n > 0 && g_trace != NULL)
        ulp__cuda_trace_add(g_trace, k, n);
    if (k != NULL)
        ulp__cuda_kernels_release(k, n);
    free(k);
    size_t dropped = 0;
    if (api.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        atomic_fetch_add(&g_dropped, dropped);
    free(buffer);
}

static void count_capture(atomic_int *counter, int begin, int ok)
{
    if (begin) {
        if (ok)
            atomic_fetch_add(counter, 1);
        return;
    }
    /* An end call finishes the capture even when it reports the capture
     * invalidated; never go below zero. */
    int v = atomic_load(counter);
    while (v > 0 && !atomic_compare_exchange_weak(counter, &v, v - 1))
        ;
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *cbdata)
{
    (void)userdata;
    /* Graph taps first; the capture counting below sees the same calls. */
    ulp__graphcb_handle(atomic_load(&g_devcap), domain, cbid, cbdata);
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
            api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        return;
    }
    const CUpti_CallbackData *cb = cbdata;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
            note_launch(cb);
            return;
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
            if (t_in_copy && cb->callbackSite == CUPTI_API_ENTER)
                t_copy_corr = cb->correlationId;
            return;
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
            if (cb->callbackSite == CUPTI_API_EXIT)
                count_capture(&g_drv_captures, 1,
                              *(const CUresult *)cb->functionReturnValue == CUDA_SUCCESS);
            return;
        case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
            if (cb->callbackSite == CUPTI_API_EXIT)
                count_capture(&g_drv_captures, 0, 1);
            return;
        default:
            return;
        }
    }
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
            note_launch(cb);
            return;
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030:
            if (cb->callbackSite == CUPTI_API_EXIT)
                count_capture(&g_rt_captures, 1, *(const int *)cb->functionReturnValue == 0);
            return;
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000:
            if (cb->callbackSite == CUPTI_API_EXIT)
                count_capture(&g_rt_captures, 0, 1);
            return;
        default:
            return;
        }
    }
}

static const CUpti_CallbackId driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
};

static const CUpti_CallbackId runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000,
};

ulp_status ulp__cupti_start(ulp__cuda_trace *trace, int gemms, ulp_error *err)
{
    if (atomic_load(&g_active))
        return ULP_OK;
    void *h = open_cupti();
    if (h == NULL)
        return ulp__error(err, ULP_ENOENT, "cannot load CUPTI (libcupti.so.13): %s", dlerror());
    if (bind_cupti(h) != 0) {
        dlclose(h);
        memset(&api, 0, sizeof(api));
        return ulp__error(err, ULP_EUNSUPPORTED, "libcupti lacks a required function");
    }
    api.lib = h;
    CUptiResult r = api.cuptiSubscribe(&g_sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS)
        return ulp__error(err, ULP_EUNSUPPORTED, "cannot subscribe to CUPTI: %s%s", result_str(r),
                          r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                              ? " (another profiler owns it)"
                              : "");
    /* The callbacks are an optimization of attribution and graph safety;
     * the trace works without them. */
    for (size_t i = 0; i < sizeof(driver_cbids) / sizeof(driver_cbids[0]); i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
    for (size_t i = 0; i < sizeof(runtime_cbids) / sizeof(runtime_cbids[0]); i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_cbids[i]);
    api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    /* Every launch then pays a callback: only when GEMM calls are seen. */
    for (size_t i = 0; gemms && i < sizeof(launch_driver_cbids) / sizeof(launch_driver_cbids[0]);
         i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, launch_driver_cbids[i]);
    for (size_t i = 0; gemms && i < sizeof(launch_runtime_cbids) / sizeof(launch_runtime_cbids[0]);
         i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, launch_runtime_cbids[i]);
    for (size_t i = 0; i < ulp__graphcb_driver_count; i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, ulp__graphcb_driver_ids[i]);
    for (size_t i = 0; i < ulp__graphcb_resource_count; i++)
        api.cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RESOURCE, ulp__graphcb_resource_ids[i]);

    g_trace = trace;
    r = api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS)
        r = api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        g_trace = NULL;
        /* Leave CUPTI to whoever else wants it (torch.profiler, Nsight). */
        api.cuptiUnsubscribe(g_sub);
        return ulp__error(err, ULP_EUNSUPPORTED, "cannot enable the CUPTI kernel trace: %s",
                          result_str(r));
    }
    /* Complete buffers reach the file within a second, so a process that
     * never runs its exit handlers (os._exit in a fork child) loses little. */
    api.cuptiActivityFlushPeriod(FLUSH_PERIOD_MS);
    atomic_store(&g_active, 1);
    return ULP_OK;
}

void ulp__cupti_set_devcap(ulp__devcap *dc)
{
    atomic_store(&g_devcap, dc);
}

void ulp__cupti_gemm_begin(void)
{
    t_in_gemm = 1;
    t_gemm_first = t_gemm_last = 0;
}

void ulp__cupti_gemm_end(uint32_t *first, uint32_t *last)
{
    t_in_gemm = 0;
    *first = t_gemm_first;
    *last = t_gemm_last;
}

int ulp__cupti_active(void)
{
    return atomic_load(&g_active);
}

static int hook_stream_id(void *ctx, CUcontext c, CUstream stream, uint32_t *id)
{
    (void)ctx;
    return api.cuptiGetStreamIdEx(c, stream, 0, id) == CUPTI_SUCCESS ? 0 : -1;
}

static void hook_copy_begin(void *ctx)
{
    (void)ctx;
    t_in_copy = 1;
    t_copy_corr = 0;
}

static uint32_t hook_copy_end(void *ctx)
{
    (void)ctx;
    t_in_copy = 0;
    return t_copy_corr;
}

static int hook_capture_active(void *ctx)
{
    (void)ctx;
    return atomic_load(&g_drv_captures) > 0 || atomic_load(&g_rt_captures) > 0;
}

static void hook_flush(void *ctx)
{
    (void)ctx;
    api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void ulp__cupti_hooks(ulp__cuda_hooks *out)
{
    memset(out, 0, sizeof(*out));
    if (!atomic_load(&g_active))
        return;
    out->stream_id = hook_stream_id;
    out->copy_begin = hook_copy_begin;
    out->copy_end = hook_copy_end;
    out->capture_active = hook_capture_active;
    out->flush = hook_flush;
}

void ulp__cupti_flush(int forced)
{
    if (atomic_load(&g_active))
        api.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

uint64_t ulp__cupti_dropped(void)
{
    return atomic_load(&g_dropped);
}

uint32_t ulp__cupti_version(void)
{
    uint32_t v = 0;
    if (api.cuptiGetVersion != NULL && api.cuptiGetVersion(&v) != CUPTI_SUCCESS)
        v = 0;
    return v;
}
