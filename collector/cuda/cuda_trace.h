/*
 * The kernel trace: numbers kernel records into rows of /trace/kernels as
 * they arrive from CUPTI, and attributes them to captures.
 *
 * Attribution (FORMAT.md `kernels`): a capture on stream S, whose copy was
 * issued by the driver call with correlation id C, gets the rows of the
 * kernels launched on S with a correlation id below C that no earlier
 * capture on S took -- the kernels that produced the tensor since the
 * previous capture.  Correlation ids come from one process-wide counter in
 * CUPTI, in API-call order, so "below C" means "launched before the copy".
 * The range written is [first, last) over those rows; rows of other streams
 * may fall inside it when streams interleave.
 *
 * All functions are thread-safe.  Records arrive on CUPTI's threads, and
 * attribution happens on the device-capture thread after a flush.
 */
#ifndef ULPPROF_CUDA_TRACE_H
#define ULPPROF_CUDA_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_kernel.h"
#include "ulpprof/status.h"

typedef struct ulp__cuda_trace ulp__cuda_trace;

typedef struct ulp__cuda_trace_sink {
    void *ctx;
    /* Stores `n` kernels as rows [first_row, first_row + n).  Called under
     * the trace's lock, so rows reach the sink in row order. */
    ulp_status (*kernels)(void *ctx, const ulp__cuda_kernel *k, size_t n, uint64_t first_row);
} ulp__cuda_trace_sink;

/* `sink` is copied.  *out is NULL on error. */
ulp_status ulp__cuda_trace_create(const ulp__cuda_trace_sink *sink, ulp__cuda_trace **out);

/* NULL is accepted. */
void ulp__cuda_trace_free(ulp__cuda_trace *t);

/*
 * Adds one delivered batch: sorts `k` by correlation id (launch order) in
 * place, numbers the kernels as the next rows and hands them to the sink.
 * The names stay the caller's.  After a sink error the trace stops (later
 * batches are dropped, attribution says "unknown") and the error returns.
 */
ulp_status ulp__cuda_trace_add(ulp__cuda_trace *t, ulp__cuda_kernel *k, size_t n);

/*
 * Attributes to a capture the kernels of `stream_id` (or of every stream
 * when `any_stream`) with correlation id below `corr`, as [first, last)
 * rows.  An empty range is [rows, rows).  Returns 1 with `range` set, or 0
 * when the trace has stopped.
 */
int ulp__cuda_trace_attribute(ulp__cuda_trace *t, int any_stream, uint32_t stream_id, uint32_t corr,
                              int64_t range[2]);

/* Rows numbered so far. */
uint64_t ulp__cuda_trace_rows(ulp__cuda_trace *t);

#endif /* ULPPROF_CUDA_TRACE_H */
