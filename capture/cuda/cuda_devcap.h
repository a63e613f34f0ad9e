/*
 * Device-memory capture: the logic behind both the NVTX marks and
 * ulp_capture_device(), written against the ops table so that it runs
 * without a GPU in tests.
 *
 * On the application thread (inside the mark handler or the API call):
 *   known stream    -> skip if the stream is capturing a CUDA graph; take a
 *                      pinned staging buffer from the pool; issue
 *                      cuMemcpyDtoHAsync on that stream and record an event:
 *                      stream-ordered, and the application never blocks;
 *   unknown stream  -> skip if any graph capture is in progress; else
 *                      cuCtxSynchronize, then a synchronous cuMemcpyDtoH.
 * On the device-capture thread, in order: wait for the event, flush CUPTI
 * once per batch of finished copies, attribute kernels (cuda_trace.h), and
 * hand the staging buffer to the sink (the session's writer thread), which
 * returns it to the pool once written.
 */
#ifndef ULPPROF_CUDA_DEVCAP_H
#define ULPPROF_CUDA_DEVCAP_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_graphcap.h"
#include "cuda_ops.h"
#include "cuda_trace.h"
#include "format/capture_desc.h"
#include "ulpprof/capture.h"

typedef struct ulp__devcap ulp__devcap;

typedef struct ulp__devcap_sink {
    void *ctx;
    /*
     * Takes a finished capture.  `buf` (nbytes, may be NULL when 0) is
     * valid now; the sink calls release(rctx, buf) exactly once when done
     * with it, on every path, errors included.
     */
    ulp_status (*capture)(void *ctx, const ulp__desc *d, void *buf, size_t nbytes,
                          void (*release)(void *rctx, void *buf), void *rctx);
    /* The step a graph replay's captures get (the application's current
     * step when the graph was launched); NULL: ULP_STEP_NONE. */
    int64_t (*step_now)(void *ctx);
    /* Takes [first, last) of the /trace/gemms rows of `stream` (of every
     * stream when `any_stream`) since the previous capture that took them;
     * NULL, or 0 returned: no GEMM attribution. */
    int (*gemms)(void *ctx, int any_stream, CUstream stream, int64_t range[2]);
} ulp__devcap_sink;

typedef struct ulp__devcap_config {
    const ulp__cuda_ops *ops; /* required, must outlive the devcap */
    ulp__cuda_hooks hooks;    /* optional CUPTI hooks */
    ulp__devcap_sink sink;    /* required */
    ulp__cuda_trace *trace;   /* NULL: captures carry no `kernels` */
    size_t pool_bytes;        /* bound on pinned staging memory, bytes */
    size_t graph_bytes;       /* bound on pinned slots of graph taps, bytes;
                                 0: skip marks during capture.  At most
                                 pool_bytes / 2, so that one replay's
                                 staging always fits the pool. */
} ulp__devcap_config;

typedef struct ulp__devcap_stats {
    uint64_t captured;        /* handed to the sink */
    uint64_t skipped_graph;   /* a graph capture was in progress, no tap made */
    uint64_t graph_taps;      /* copy nodes added to captured graphs */
    uint64_t graph_bound;     /* taps refused: past the graph_bytes bound */
    uint64_t graph_harvested; /* captures harvested from graph replays */
    uint64_t synced;          /* unknown stream: context synchronized */
    uint64_t too_large;       /* larger than the whole staging pool */
    uint64_t failed;          /* a driver call failed */
} ulp__devcap_stats;

ulp_status ulp__devcap_create(const ulp__devcap_config *cfg, ulp__devcap **out);

/*
 * Captures `nbytes` at device address `ptr` described by `d` (d->data is
 * ignored; d->device_ptr and d->stream are filled in when 0).  `has_stream`
 * 0 means the stream is unknown.  Returns ULP_OK once the copy is issued
 * (or, on a stream capturing a CUDA graph, once the tap is in the graph),
 * ULP_EUNSUPPORTED when skipped during a graph capture (unknown stream, an
 * invalidated capture, or taps not available), ULP_ERANGE when the tensor
 * is larger than the pool or the graph slots' bound, ULP_EIO when a driver
 * call failed,
 * ULP_ECLOSED after ulp__devcap_shutdown().  Every outcome is counted in
 * the stats; nothing is printed here.
 */
ulp_status ulp__devcap_capture(ulp__devcap *dc, const ulp__desc *d, uint64_t ptr, size_t nbytes,
                               int has_stream, CUstream stream);

/* The graph taps (NULL when not available): the CUPTI layer reports the
 * graphs' life to it (end of capture, instantiation, destruction). */
ulp__graphcap *ulp__devcap_graphcap(ulp__devcap *dc);

/* The ops table it was created with. */
const ulp__cuda_ops *ulp__devcap_ops(ulp__devcap *dc);

/* Before a launch of `exec` on the application thread: waits until the
 * previous replay of `exec` is harvested (cuda_graphcap.h, the gate). */
void ulp__devcap_graph_launching(ulp__devcap *dc, CUgraphExec exec);

/*
 * After a successful launch of `exec` on `stream` (driver call correlation
 * id `corr`, 0 when unknown): queues the harvest of its taps, in order
 * with the captures around it.  A launch into another stream capture is
 * counted and not harvested.
 */
void ulp__devcap_graph_launched(ulp__devcap *dc, CUgraphExec exec, CUstream stream, uint32_t corr);

/* Waits until every issued capture has been handed to the sink. */
ulp_status ulp__devcap_flush(ulp__devcap *dc);

/* Flushes, then stops the thread; later captures return ULP_ECLOSED. */
void ulp__devcap_shutdown(ulp__devcap *dc);

/*
 * Shuts down and frees.  Pinned buffers the sink still holds are leaked
 * rather than freed under it.  NULL is accepted.
 */
void ulp__devcap_free(ulp__devcap *dc);

/* For a fork child: forget the parent's thread and queue without touching
 * them, and refuse later captures (the child cannot use the parent's CUDA
 * context anyway). */
void ulp__devcap_forget(ulp__devcap *dc);

void ulp__devcap_get_stats(ulp__devcap *dc, ulp__devcap_stats *out);

#endif /* ULPPROF_CUDA_DEVCAP_H */
