/*
 * ulpprof device capture API (libulpprof_cuda.so): record named tensors that
 * live in CUDA device memory into the process's default snapshot (the one
 * ULPPROF_OUTPUT names, as for ulp_capture_host()).
 *
 * A capture is stream-ordered: it enqueues a copy of the tensor into a
 * pinned staging buffer on `stream`, after the work already queued there,
 * and returns without waiting; a background thread waits for the copy and
 * hands the bytes to the snapshot's writer thread.  With the stream
 * ULP_STREAM_UNKNOWN the context is synchronized first and the copy is
 * synchronous.  While a CUDA graph is being captured the call issues no
 * CUDA work at all and returns ULP_EUNSUPPORTED (the capture is skipped and
 * counted in the report printed at exit).
 *
 * The same library is the CUDA and NVTX injection of `ulpprof record`; there
 * it also records the kernel trace, and each capture gets the `kernels` rows
 * launched on its stream since the previous capture on that stream.
 *
 * Nothing here aborts or exits: errors are returned, and a missing driver
 * or CUPTI disables the feature with one line on stderr.  Thread-safe.
 */
#ifndef ULPPROF_CAPTURE_DEVICE_H
#define ULPPROF_CAPTURE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/capture.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What the CUDA collector records of a capture beyond ulp_capture_desc
 * (FORMAT.md: `kernels`, `gemms`, `graph_replay`, `device_ptr`, `stream`),
 * kept out of the descriptor every host caller fills.  Sized as the
 * descriptor is (ulpprof/capture.h): struct_size is the caller's sizeof,
 * set by ulp_capture_device_ext_init(); the first version ends at
 * `kernels`.  Zero is "absent" for every field.
 */
typedef struct ulp_capture_device_ext {
    size_t struct_size;      /* sizeof(ulp_capture_device_ext), set by _init()      */
    int has_kernels;         /* 1: `kernels` holds [first, last) of /trace/kernels */
    int64_t kernels[2];      /* (the first version ends here)                     */
    uint64_t device_ptr;     /* 0: not recorded                                    */
    uint64_t stream;         /* 0: not recorded                                    */
    int has_gemms;           /* 1: `gemms` holds [first, last) of /trace/gemms     */
    int64_t gemms[2];        /*                                                    */
    int has_graph_replay;    /* 1: harvested from a CUDA graph replay              */
    int64_t graph_replay[2]; /* [graph (stream-capture id), replay index]         */
} ulp_capture_device_ext;

/*
 * The next three are in the host library (libulpprof_capture), so that a
 * producer of its own (a test, a replay of a trace) can write these
 * attributes through a host session.
 *
 * ulp_capture_device_ext_init_sized(): every field absent, struct_size =
 * `size`; ULP_EINVAL below the first version's size.
 */
ULP_API ulp_status ulp_capture_device_ext_init_sized(ulp_capture_device_ext *x, size_t size);
#define ulp_capture_device_ext_init(x) ((void)ulp_capture_device_ext_init_sized((x), sizeof *(x)))

/* sizeof(ulp_capture_device_ext) in this library (for ctypes, as ulp_capture_desc_size()). */
ULP_API size_t ulp_capture_device_ext_size(void);

/*
 * ulp_session_capture() with the extension's attributes written too (`x`
 * NULL: none).  ULP_EINVAL also for a kernel range given backwards or
 * negative, and for a bad struct_size of either struct.
 */
ULP_API ulp_status ulp_session_capture_ext(ulp_session *s, const ulp_capture_desc *d,
                                           const ulp_capture_device_ext *x);

/* A CUstream / cudaStream_t value meaning "stream not known: synchronize". */
#define ULP_STREAM_UNKNOWN ((void *)(~(uintptr_t)0))

/*
 * Captures the row-major tensor at device address `device_ptr` (a
 * cudaMalloc'd pointer or a CUdeviceptr cast to a pointer), ordered on
 * `stream` (a cudaStream_t or CUstream; NULL is the legacy default stream).
 * The calling thread's current CUDA context must own the memory.
 * Returns ULP_OK once the copy is enqueued, ULP_EDISABLED (silently) when
 * ULPPROF_OUTPUT is unset, ULP_EUNSUPPORTED during graph capture, ULP_EIO
 * when there is no CUDA driver or context or a driver call failed,
 * ULP_ERANGE when the tensor is larger than the staging pool
 * (ULPPROF_PINNED_MB, default 1024), ULP_EINVAL for bad arguments.
 */
ULP_API ulp_status ulp_capture_device(const char *name, const void *device_ptr, ulp_dtype dtype,
                                      int ndim, const int64_t *shape, int32_t layer, ulp_role role,
                                      void *stream);

/*
 * The same with a full descriptor: d->data is the device address; the
 * optional fields (step, time_ns, positions, ...) are honoured; the
 * kernels and GEMMs come from the trace's attribution when there is one.
 */
ULP_API ulp_status ulp_capture_device_desc(const ulp_capture_desc *d, void *stream);

/*
 * Waits until every device capture issued so far has reached the
 * snapshot's writer, then flushes the snapshot (ulp_capture_flush()).
 */
ULP_API ulp_status ulp_capture_device_flush(void);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_CAPTURE_DEVICE_H */
