/*
 * ulpprof snapshot reader: opens and validates a snapshot file (FORMAT.md)
 * and reads its tensors' raw bits in bounded chunks.
 *
 * Opening validates everything a comparison relies on -- `format`,
 * `format_version`, required attributes, dtype against storage size, rank,
 * occurrence names, unique `seq`, datasets that fit inside the file -- and
 * refuses a file that breaks the contract with a status and a message naming
 * the file, the capture and the problem.  Captures are listed in `seq` order.
 *
 * A snapshot may be read from several threads at once with
 * ulp_snapshot_read(): contiguous datasets are read with pread(2) at their
 * file offset, outside HDF5's global lock.
 */
#ifndef ULPPROF_SNAPSHOT_H
#define ULPPROF_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/dtype.h"
#include "ulpprof/export.h"
#include "ulpprof/format.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format's one limit (ulpprof/format.h), under the name this API had. */
#define ULP_SNAPSHOT_MAX_RANK ULP_MAX_RANK

typedef struct ulp_snapshot ulp_snapshot;

/* One string attribute of /run, /env or /observed. */
typedef struct ulp_kv {
    const char *key;
    const char *value; /* non-string attributes are rendered as text */
} ulp_kv;

typedef struct ulp_capture_info {
    const char *name;   /* group name under /captures              */
    int64_t occurrence; /* dataset name, parsed                    */
    int64_t seq;
    int32_t layer;    /* -1 when absent                          */
    const char *role; /* "activation" when absent                */
    ulp_dtype dtype;
    int ndim; /* 0..8                                    */
    int64_t shape[ULP_SNAPSHOT_MAX_RANK];
    uint64_t elements; /* product of shape (1 for a scalar)       */
    int has_step;
    int64_t step;
    int has_kernels;
    int64_t kernels[2];  /* [first, last) rows of /trace/kernels    */
    uint64_t device_ptr; /* 0 when absent                           */
    uint64_t stream;     /* 0 when absent                           */
    int64_t time_ns;     /* 0 when absent                           */

    /* Token metadata (FORMAT.md, "Rows and tokens"), owned by the snapshot. */
    int row_rank;             /* leading axes indexing rows; 0: no positions */
    uint64_t rows;            /* product of shape[0..row_rank)               */
    const int64_t *positions; /* `rows` positions, or NULL                   */
    const int64_t *requests;  /* `rows` requests, or NULL: all request 0     */
    size_t n_inputs;
    const char *const *inputs; /* names of the captures it consumed, or NULL */

    int has_gemms;
    int64_t gemms[2]; /* [first, last) rows of /trace/gemms             */
    int has_graph_replay;
    int64_t graph_replay[2]; /* [graph id, replay index] of a CUDA graph    */
} ulp_capture_info;

/* One row of /trace/kernels, with its name resolved. */
typedef struct ulp_kernel_info {
    uint64_t seq;
    uint32_t correlation_id;
    const char *name; /* demangled; "" when name_id is out of range */
    int32_t grid[3];
    int32_t block[3];
    int32_t shared_static;
    int32_t shared_dynamic;
    int32_t registers;
    uint64_t stream;
    uint32_t device;
    uint64_t start_ns;
    uint64_t end_ns;
} ulp_kernel_info;

/*
 * One row of /trace/gemms (FORMAT.md): a cuBLAS / cuBLASLt call.  Strings
 * are NUL-terminated; "" (and 0 for splitk) when unknown or absent.
 */
typedef struct ulp_gemm_info {
    uint64_t seq;
    char api[32]; /* cublasLtMatmul, cublasGemmEx, ...            */
    uint64_t stream;
    int64_t m, n, k, batch;
    char transa[4], transb[4]; /* N, T, C                                  */
    char a_type[12], b_type[12], c_type[12], d_type[12];
    char compute[24];
    char algo[12]; /* given, heuristic, cublas                    */
    int32_t algo_id;
    char tile[16];   /* "128x128"                                  */
    char stages[16]; /* "64x3"                                     */
    int32_t splitk;
    char reduction[12];
    int32_t swizzle;
    int32_t custom;
    char cluster[16];
    int32_t epilogue;
    uint64_t workspace;             /* bytes                       */
    uint32_t corr_first, corr_last; /* kernels the call launched   */
    int32_t status;                 /* cublasStatus_t               */
} ulp_gemm_info;

/*
 * Opens and validates a snapshot.  On success *out owns it (release with
 * ulp_snapshot_close()).  On error *out is NULL and `err`, if not NULL,
 * holds a one-line message naming `path` and the problem.
 */
ULP_API ulp_status ulp_snapshot_open(const char *path, ulp_snapshot **out, ulp_error *err);

/*
 * ulp_snapshot_open(), but without waiting for the check of the file's
 * capture index: in a sealed file of 1,024 captures or more, the hash goes
 * on on a second thread -- or, in a file nothing wrote to since it was
 * sealed, which needs no hash, the decoding of its index -- and a program
 * can open its next file meanwhile.  Until ulp_snapshot_confirm() has
 * returned ULP_OK the captures may be missing or come from an index the
 * file no longer matches (edited by another program since): confirm before
 * reading anything of it.  Its failures are ulp_snapshot_open()'s.
 */
ULP_API ulp_status ulp_snapshot_open_deferred(const char *path, ulp_snapshot **out, ulp_error *err);

/*
 * Waits for the check of a snapshot from ulp_snapshot_open_deferred()
 * (ULP_OK at once for any other).  When the index turned out stale, *s is
 * closed and the file opened again by ulp_snapshot_open(), with its result:
 * on error *s is NULL and `err` says why.
 */
ULP_API ulp_status ulp_snapshot_confirm(ulp_snapshot **s, ulp_error *err);

/*
 * How many links every ulp_snapshot_open() of this process has listed and
 * captures it has read so far, counting up while an open runs: a watchdog can tell a large file
 * that is being read (the count moves) from one HDF5 is stuck on.  Safe to
 * call from a signal handler (a lock-free atomic load).
 */
ULP_API uint64_t ulp_snapshot_open_progress(void);

/*
 * ulp_snapshot_open_deferred() of a snapshot that is to be streamed
 * through ulp_diff_stream(), in memory that does not grow with its capture
 * count: a file of 12,288 captures or more whose capture index needs no
 * hash is described in pages of captures, made as they are asked for, and
 * ulp_diff_stream() frees those of the captures it has gone past.  What
 * the caller promises: no pointer from ulp_snapshot_capture() of it is kept
 * across ulp_diff_stream(), and no other thread uses it while that runs
 * (asked for again afterwards, a capture is described again).  What it
 * accepts: ulp_snapshot_capture() returns NULL where a description cannot
 * be made again (the file changed since the open, or memory ran out).
 * Confirm it as a deferred open.  `ulpprof diff` opens its files so.
 */
ULP_API ulp_status ulp_snapshot_open_stream(const char *path, ulp_snapshot **out, ulp_error *err);

/* Closes the file and frees everything the snapshot returned.  NULL is accepted. */
ULP_API void ulp_snapshot_close(ulp_snapshot *s);

/*
 * What the reader found damaged and read around, as one line (owned by the
 * snapshot), or NULL for an intact file.  Today: a capture index that a
 * writer killed in the middle of updating it left unreadable, whose
 * captures were read through the capture journal (FORMAT.md).  The CLI
 * prints it on stderr as a warning.
 */
ULP_API const char *ulp_snapshot_warning(const ulp_snapshot *s);

/*
 * Writes a clean copy of `s` to `path` (which must not exist): every capture
 * the reader found, with its bytes and attributes, /run, /env, /trace when
 * it was read, and the root attributes.  For a file read through its
 * capture journal this is the copy h5py and other HDF5 tools can read.
 * On error nothing is left at `path`.
 */
ULP_API ulp_status ulp_snapshot_copy(const ulp_snapshot *s, const char *path, ulp_error *err);

/*
 * Writes the digest-only rendition of `s` to `path` (which must not exist):
 * the file a capture of the same tensors in mode "digest" writes
 * (FORMAT.md "Digests"): each capture's row digests in /digests, the
 * produced `tokens` and fed token ids also in /captures, /run, /env,
 * /observed and the root attributes; no kernel trace.  ULP_EINVAL for a
 * file whose /digests cover other captures than its data (a "both" capture
 * with a selection).  On error nothing is left at `path`.
 */
ULP_API ulp_status ulp_snapshot_copy_digests(const ulp_snapshot *s, const char *path,
                                             ulp_error *err);

/* Root attributes (owned by the snapshot). */
ULP_API const char *ulp_snapshot_path(const ulp_snapshot *s);
ULP_API const char *ulp_snapshot_label(const ulp_snapshot *s);
ULP_API const char *ulp_snapshot_writer(const ulp_snapshot *s); /* "" when absent */
ULP_API int32_t ulp_snapshot_format_version(const ulp_snapshot *s);
ULP_API int64_t ulp_snapshot_created_unix_ns(const ulp_snapshot *s); /* 0 when absent */

/* /run and /env attributes, sorted by key. */
ULP_API size_t ulp_snapshot_run_count(const ulp_snapshot *s);
ULP_API const ulp_kv *ulp_snapshot_run(const ulp_snapshot *s, size_t i);
ULP_API size_t ulp_snapshot_env_count(const ulp_snapshot *s);
ULP_API const ulp_kv *ulp_snapshot_env(const ulp_snapshot *s, size_t i);
/*
 * /observed attributes, sorted by key: what the writer observed about the
 * run (FORMAT.md), which no ladder or diff takes for a condition.  None in
 * files written before /observed, or by writers that observe nothing.
 */
ULP_API size_t ulp_snapshot_observed_count(const ulp_snapshot *s);
ULP_API const ulp_kv *ulp_snapshot_observed(const ulp_snapshot *s, size_t i);
/* The value of a /run key, or NULL. */
ULP_API const char *ulp_snapshot_run_get(const ulp_snapshot *s, const char *key);

/* Captures in `seq` order. */
ULP_API size_t ulp_snapshot_capture_count(const ulp_snapshot *s);
ULP_API const ulp_capture_info *ulp_snapshot_capture(const ulp_snapshot *s, size_t i);

/* Index of the capture with this name and occurrence, or -1. */
ULP_API ptrdiff_t ulp_snapshot_find(const ulp_snapshot *s, const char *name, int64_t occurrence);

/*
 * Reads `count` elements starting at element `first` (row-major) of capture
 * `i` into `buf`, as raw bits (ulp_dtype_size() bytes each, little-endian).
 * Thread-safe.  ULP_ERANGE when the range passes the end of the tensor,
 * ULP_EIO / ULP_ETRUNC when the file cannot deliver the bytes.
 */
ULP_API ulp_status ulp_snapshot_read(const ulp_snapshot *s, size_t i, uint64_t first,
                                     uint64_t count, void *buf, ulp_error *err);

/*
 * Like ulp_snapshot_read(), without the copy where it can: *out points into
 * a read-only mapping of the file (contiguous datasets) or, otherwise, to
 * `buf`, which must hold `count` elements and is then filled.  A mapped view
 * stays valid until the snapshot is closed; pass it to
 * ulp_snapshot_view_release() once done so that the process's resident
 * memory stays bounded.  Thread-safe.
 */
ULP_API ulp_status ulp_snapshot_view(const ulp_snapshot *s, size_t i, uint64_t first,
                                     uint64_t count, void *buf, const void **out, ulp_error *err);
ULP_API void ulp_snapshot_view_release(const ulp_snapshot *s, const void *p, uint64_t bytes);

/* Kernel trace (/trace), empty when the file has none. */
ULP_API size_t ulp_snapshot_kernel_count(const ulp_snapshot *s);
/* 1 when the file has /trace/kernels (a recorded trace, perhaps of no launch). */
ULP_API int ulp_snapshot_has_kernel_trace(const ulp_snapshot *s);
ULP_API const ulp_kernel_info *ulp_snapshot_kernel(const ulp_snapshot *s, size_t i);

/* GEMM calls (/trace/gemms), empty when the file has none. */
ULP_API size_t ulp_snapshot_gemm_count(const ulp_snapshot *s);
ULP_API const ulp_gemm_info *ulp_snapshot_gemm(const ulp_snapshot *s, size_t i);
/* The GEMM call that launched kernel row `i` (its correlation id within
 * the call's [corr_first, corr_last]), or NULL. */
ULP_API const ulp_gemm_info *ulp_snapshot_kernel_gemm(const ulp_snapshot *s, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_SNAPSHOT_H */
