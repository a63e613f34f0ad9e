/*
 * Internal side of the capture session (include/ulpprof/capture.h holds the
 * public one): hooks for a second producer, the CUDA/CUPTI collector, which
 * copies device memory asynchronously and records kernel launches.
 *
 * How a session works.  Every request -- a host capture, a deferred capture,
 * a kernel batch, a /run or /env attribute -- becomes one item of a single
 * FIFO, consumed by one writer thread that owns the HDF5 file.  So requests
 * from one thread are written in the order they were made, and `seq` is
 * assigned by the writer in queue order (dense: 0, 1, 2, ... with no gaps,
 * even when a deferred capture is dropped).  Items are admitted in arrival
 * order (a ticket), and an item is admitted only while the bytes held by
 * queued items stay within the session's bound; an item larger than the
 * whole bound is admitted alone, once the queue is empty, so nothing can
 * deadlock.  The capturing thread waits (back-pressure) until then.
 *
 * Every write to the file -- creating it, captures, closing it -- happens
 * on the writer thread, which runs with all signals blocked (so SIGXFSZ
 * past a file-size limit never reaches the host).  In a child forked from
 * a capturing process the inherited sessions are dead copies: calls return
 * ULP_ECLOSED (one stderr line), close returns ULP_OK, nothing reaches the
 * parent's file.
 *
 * After a write error (disk full, file too large, ...) the session fails:
 * one stderr line `ulpprof: capture to 'PATH' failed: ...`, later requests
 * return ULP_ENOSPC (disk full) or ULP_EIO, queued ones are dropped (their release callbacks still
 * run), and what was flushed before stays readable.
 */
#ifndef ULPPROF_CAPTURE_SESSION_H
#define ULPPROF_CAPTURE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "format/capture_desc.h"
#include "format/gemm_row.h"
#include "format/kernel_row.h"
#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"

/*
 * The least a queued item counts against the bound (a capture counts its
 * payload bytes, at least this), so that a flood of empty captures is
 * bounded too.
 */
#define ULP__SESSION_ITEM_OVERHEAD 256

/*
 * Queues a capture whose bytes are still being produced, typically by a
 * cudaMemcpyAsync into a pinned staging buffer.
 *
 * `d` is validated and copied as for ulp_session_capture() (d->data is
 * ignored); `buf` must hold `nbytes` = elements * dtype size bytes once
 * ready(ctx) has returned 0.  On the writer thread, in queue order, the
 * session calls ready(ctx) (e.g. cudaEventSynchronize), writes `buf`, then
 * calls release(ctx, buf) (e.g. return the buffer to its pool).
 *
 * Ownership: ready(ctx) is called exactly once and then release(ctx, buf)
 * exactly once on EVERY path -- after the write, when ready() returns
 * non-zero (the capture is dropped, the session records ULP_EIO as its
 * first error and prints one stderr line for the first drop, but keeps
 * running), when the session has failed, and when this function itself
 * returns an error (then both run on the calling thread before it
 * returns).  `ready` may be NULL (the bytes are ready now); `release` may
 * be NULL (nothing to release).
 *
 * Back-pressure: `nbytes` count against the queue bound like a host
 * capture, and this call waits for room before queueing.  Since `buf` is
 * already allocated by then, a producer that allocates staging buffers
 * should bound its own pool (release() returns buffers to it).
 *
 * Returns ULP_OK once queued, ULP_EINVAL for a bad descriptor or size,
 * ULP_ECLOSED after close, ULP_EIO when the session has failed.
 */
ulp_status ulp__session_capture_deferred(ulp_session *s, const ulp__desc *d, void *buf,
                                         size_t nbytes, int (*ready)(void *ctx),
                                         void (*release)(void *ctx, void *buf), void *ctx);

/*
 * Queues `n` kernel launch rows for /trace/kernels (FORMAT.md); rows and
 * names are copied, so the caller may reuse them at once.  names[i] is the
 * demangled name of rows[i] (NULL: ""); the writer interns it into
 * /trace/names and sets name_id (rows[i].name_id is ignored).  Each call is
 * one batch: appended in order after everything queued before it, then
 * flushed, so a kill loses at most the batches not yet written.
 * Row r of /trace/kernels is the r-th row ever passed here, so a producer
 * that counts its rows can put [first, last) into ulp__desc.kernels.
 * Returns as ulp__session_capture_deferred() does (n == 0 is a no-op).
 */
ulp_status ulp__session_trace_kernels(ulp_session *s, const ulp__kernel_row *rows,
                                      const char *const *names, size_t n);

/*
 * Queues `n` GEMM call rows for /trace/gemms (FORMAT.md), copied; one
 * batch, appended in order and flushed, as ulp__session_trace_kernels().
 * Row r of /trace/gemms is the r-th row ever passed here.
 */
ulp_status ulp__session_trace_gemms(ulp_session *s, const ulp__gemm_row *rows, size_t n);

/*
 * The descriptor of the one-call capture functions (ulp_capture_host,
 * ulp_capture_device): the defaults of ulp_capture_desc_init() and these.
 */
ulp__desc ulp__capture_desc_make(const char *name, const void *data, ulp_dtype dtype, int ndim,
                                 const int64_t *shape, int32_t layer, ulp_role role);

/*
 * The writer's descriptor from the caller's descriptor and device extension
 * (`x` may be NULL: none), each read by its struct_size (common/sized.h).
 * ULP_EINVAL, with one stderr line, for a bad size.
 */
ulp_status ulp__desc_from(ulp__desc *out, const ulp_capture_desc *d,
                          const ulp_capture_device_ext *x);

/* ulp_session_capture() of the writer's descriptor. */
ulp_status ulp__session_capture(ulp_session *s, const ulp__desc *d);

/* 1 when the session has failed (later requests return ULP_ENOSPC or ULP_EIO), else 0. */
int ulp__session_failed(ulp_session *s);

/* Bytes currently charged to queued items (for tests and diagnostics). */
size_t ulp__session_queued_bytes(ulp_session *s);

/* The queue bound in bytes. */
size_t ulp__session_queue_bound(const ulp_session *s);

#endif /* ULPPROF_CAPTURE_SESSION_H */
