/*
 * ulpprof host capture API: record named tensors of a running program into a
 * snapshot file (FORMAT.md), for comparison with `ulpprof diff`.
 *
 * A capture copies the caller's bytes into a bounded queue and returns at
 * once; a background writer thread appends them to the HDF5 file and flushes
 * after each one, so that everything written stays readable if the program
 * is then killed.  When the queue holds its memory bound, the capturing
 * thread waits for the writer (back-pressure); memory never grows without
 * bound.  A session keeps half of that bound (128 MiB at most) populated
 * ahead of use, from before its open returns, so that the copy does not
 * pay the kernel's page faults.  All functions are thread-safe.  Errors
 * come back as a status and one line on stderr; nothing here aborts or
 * exits the host program.
 *
 * Signal handlers: the calls are not async-signal-safe (they allocate and
 * lock).  A call from a handler that interrupted this thread inside the
 * library is refused with ULP_EBUSY (silently) instead of deadlocking; one
 * that interrupted malloc(3) elsewhere can still deadlock in malloc.  Set a
 * flag in the handler and capture outside it.
 *
 * A kernel range given backwards or negative, and a /run or /env key over
 * 1,024 bytes or value over 16,384 bytes are refused at the call
 * (ULP_EINVAL); the requests around them are not affected.  Opening a
 * path that another live session or process writes is refused (ULP_EIO),
 * and that file is left as it is.
 *
 * Two ways to use it:
 *   - an explicit session:  ulp_session_open() ... ulp_session_capture() ...
 *     ulp_session_close();
 *   - the process-wide default session: ulp_capture_host() ..., opened
 *     explicitly by ulp_capture_open() or, at the first capture, from the
 *     environment (ULPPROF_OUTPUT, ULPPROF_LABEL, ULPPROF_ATTR,
 *     ULPPROF_OBSERVED, ULPPROF_QUEUE_MB), and closed by ulp_capture_close() or at exit.
 *
 * ULPPROF_OUTPUT may contain %p (pid), %r (rank, from RANK, LOCAL_RANK or
 * OMPI_COMM_WORLD_RANK, else 0), %h (host name), %l (label) and %% (a '%').
 * An expanded value never leaves the pattern's directory: '/' in it becomes
 * '_', and a value "." or ".." becomes "_" or "__".
 * ULPPROF_ATTR is "key=value,key=value"; a backslash escapes ',', '=' or '\'.
 * ULPPROF_OBSERVED is the same for /observed.
 *
 * Conditions and observations (FORMAT.md): /run holds the conditions the
 * user chose for the run (cache, batch_size, tp, ...); the determinism
 * ladder takes every /run key that differs between two runs for a changed
 * condition.  What the program observed about its run -- a timing, what a
 * GEMM library picked, a description derived from the conditions -- goes
 * to /observed (ulp_session_set_observed, `observed`), which is recorded
 * and shown but never compared as a condition.
 */
#ifndef ULPPROF_CAPTURE_H
#define ULPPROF_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/dtype.h"
#include "ulpprof/export.h"
#include "ulpprof/format.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ULP_LAYER_NONE          (-1)      /* a capture that is not a layer       */
#define ULP_STEP_NONE           INT64_MIN /* no step: the session's current step */
#define ULP_DEFAULT_QUEUE_BYTES ((size_t)256 << 20)

typedef struct ulp_session ulp_session;

/*
 * Structs the caller fills (this one, ulp_capture_desc, the options of
 * diff.h, ladder.h, plot.h, refmodel.h) start with `struct_size`, the sizeof
 * the caller was compiled with, which the _init() macro sets.  The library
 * reads only the fields that size covers and takes the defaults for the
 * rest, so fields appended in a later release leave older callers working
 * (CONTRIBUTING.md, "The public C API and its ABI").  A size of 0, or one
 * below the struct's first version (up to the field marked so), is refused
 * with ULP_EINVAL and one stderr line.
 */
typedef struct ulp_session_options {
    size_t struct_size;   /* sizeof(ulp_session_options), set by _init()                */
    const char *path;     /* output path, % expansions as above; NULL: $ULPPROF_OUTPUT
                             (the first version ends here)                             */
    const char *label;    /* run label; NULL: $ULPPROF_LABEL, else "run"               */
    const char *attrs;    /* "k=v,k=v" for /run; NULL: $ULPPROF_ATTR                   */
    size_t queue_bytes;   /* bytes the queue may hold; 0: $ULPPROF_QUEUE_MB or 256 MiB */
    const char *writer;   /* producer; NULL: "ulpprof-capture <version>"               */
    int record_env;       /* 1: fill /env with host facts and numerics env vars        */
    const char *observed; /* "k=v,k=v" for /observed; NULL: $ULPPROF_OBSERVED        */
    /* "data", "digest" or "both" (ulp_session_set_capture_mode); NULL:
     * $ULPPROF_CAPTURE_MODE, else "data".  A file opened for digests is laid
     * out for them from its creation, and smaller (FORMAT.md "Digests"). */
    const char *capture_mode;
} ulp_session_options;

/*
 * Fills the caller's `opts` of `size` bytes (its sizeof) with the defaults
 * (everything from the environment) and sets struct_size; ULP_EINVAL for a
 * size below the first version's.  ulp_session_options_init(opts) passes
 * sizeof *opts; a binding without the macro (ctypes) calls this.
 */
ULP_API ulp_status ulp_session_options_init_sized(ulp_session_options *opts, size_t size);
#define ulp_session_options_init(opts)                                                             \
    ((void)ulp_session_options_init_sized((opts), sizeof *(opts)))

/*
 * Creates the snapshot file and starts its writer thread, and populates
 * the queue's reserve (above) meanwhile: it returns when both are done
 * (about 6 ms of a session thread's CPU for 128 MiB; more on a VM whose
 * host must back the memory again).  On success *out owns the session;
 * release it with ulp_session_close().  On error *out is NULL, `err` (may
 * be NULL) says why, and one line went to stderr.  ULP_EDISABLED when no
 * path was given and ULPPROF_OUTPUT is unset.
 */
ULP_API ulp_status ulp_session_open(const ulp_session_options *opts, ulp_session **out,
                                    ulp_error *err);

/* The expanded path of the file being written. */
ULP_API const char *ulp_session_path(const ulp_session *s);

/* Adds or replaces a string attribute of /run, /env or /observed (above). */
ULP_API ulp_status ulp_session_set_run(ulp_session *s, const char *key, const char *value);
ULP_API ulp_status ulp_session_set_env(ulp_session *s, const char *key, const char *value);
ULP_API ulp_status ulp_session_set_observed(ulp_session *s, const char *key, const char *value);

/* Sets the step recorded with later captures that give ULP_STEP_NONE. */
ULP_API ulp_status ulp_session_set_step(ulp_session *s, int64_t step);

/*
 * One tensor to capture.  Fields after `role` are optional (zero = absent);
 * the first version ends at `role`.  The CUDA collector's fields (kernel
 * and GEMM rows, device pointer, stream, graph replay) are not here: they
 * travel in ulp_capture_device_ext (ulpprof/capture_device.h).
 */
typedef struct ulp_capture_desc {
    size_t struct_size; /* sizeof(ulp_capture_desc), set by _init()         */
    const char *name;   /* UTF-8, no '/', not empty                         */
    const void *data;   /* host bytes, row-major; may be NULL if 0 elements */
    ulp_dtype dtype;
    int ndim;             /* 0..ULP_MAX_RANK                                  */
    const int64_t *shape; /* ndim extents, each >= 0; NULL if ndim == 0       */
    int32_t layer;        /* ULP_LAYER_NONE when not a layer                  */
    ulp_role role;        /* (the first version ends here)                    */
    int64_t step;         /* ULP_STEP_NONE: the session's step, if set        */
    int64_t time_ns;      /* 0: now                                           */

    /*
     * Token metadata (FORMAT.md, "Rows and tokens"), all optional.  The
     * tensor is viewed as rows: its first `row_rank` axes (1..ndim) index
     * the rows, the rest is one row.  `positions` holds one token position
     * (>= 0) per row, row-major over those axes (shape[0] x ... x
     * shape[row_rank-1] entries); `requests` (NULL: every row is request 0)
     * the request each row belongs to.  A (request, position) pair may
     * appear once per capture.  `inputs` names the captures this one was
     * computed from (n_inputs names, each a valid capture name).  All are
     * copied at the call.  ULP_EINVAL for a bad combination: requests
     * without positions, row_rank out of range, a negative position, a
     * repeated pair, or more rows than an attribute holds (16,000).
     */
    const int64_t *positions; /* NULL: no positions (row_rank ignored)  */
    const int64_t *requests;  /* NULL: all rows are request 0           */
    int32_t row_rank;         /* leading axes that index the rows       */
    int32_t n_inputs;         /* entries of `inputs`                    */
    const char *const *inputs;
} ulp_capture_desc;

/*
 * A descriptor of `size` bytes (the caller's sizeof) with the defaults: no
 * layer, activation, no step.  ULP_EINVAL for a size below the first
 * version's.  ulp_capture_desc_init(d) passes sizeof *d.
 */
ULP_API ulp_status ulp_capture_desc_init_sized(ulp_capture_desc *d, size_t size);
#define ulp_capture_desc_init(d) ((void)ulp_capture_desc_init_sized((d), sizeof *(d)))

/*
 * sizeof(ulp_capture_desc) and sizeof(ulp_session_options) in this library.
 * A binding that mirrors the structs by hand (Python's ctypes) passes its
 * own size to the _init_sized() functions, and refuses a library whose
 * struct is smaller than its mirror (an older library, which would refuse
 * the fields past its own size).  Fields are only ever appended, so a
 * larger size is a newer library that the binding can use.
 */
ULP_API size_t ulp_capture_desc_size(void);
ULP_API size_t ulp_session_options_size(void);

/*
 * Copies the tensor into the queue and returns; the writer thread stores it
 * as /captures/<name>/<occurrence> with the next `seq`.  Captures from one
 * thread keep their order.  ULP_EINVAL for a bad descriptor, ULP_ECLOSED
 * after close, ULP_ENOSPC when the writer has failed because the disk (or a
 * quota or file-size limit) is full, ULP_EIO when it failed otherwise: later
 * captures are refused with the same status, earlier ones stay in the file.
 */
ULP_API ulp_status ulp_session_capture(ulp_session *s, const ulp_capture_desc *d);

/*
 * Appends `n` GEMM call rows to /trace/gemms (FORMAT.md), copied, in order
 * after everything queued before: a producer that runs its own GEMMs (a CPU
 * BLAS, an emulation) records them as the CUDA collector records cuBLAS.
 * Row r of /trace/gemms is the r-th row ever passed here, so a producer that
 * counts its rows can give a capture the [first, last) of its GEMMs in
 * ulp_capture_desc.gemms.  `seq` is taken as given.  n == 0 is a no-op;
 * ULP_EINVAL without rows; otherwise as ulp_session_capture().
 */
struct ulp_gemm_info;
ULP_API ulp_status ulp_session_trace_gemms(ulp_session *s, const struct ulp_gemm_info *rows,
                                           size_t n);

/*
 * sizeof(ulp_gemm_info) in this library.  ulp_session_trace_gemms() reads
 * an array of them, so their size is its stride: the layout of
 * ulp_gemm_info is frozen (a new column would come with a new function
 * that takes the row size), and a binding that mirrors it (Python's
 * ctypes) uses the function only where this size equals its mirror's.
 */
ULP_API size_t ulp_gemm_info_size(void);

/* Waits until every capture queued so far is in the file and flushed. */
ULP_API ulp_status ulp_session_flush(ulp_session *s);

/*
 * Writes what is queued, closes the file and frees the session.  NULL is
 * accepted.  Returns the first error the writer met, if any.
 */
ULP_API ulp_status ulp_session_close(ulp_session *s);

/* --- Digests and selections (FORMAT.md, "Digests") ---------------------- */

/* What a capture writes: its bytes, the digests of its rows, or both. */
typedef enum ulp_capture_mode {
    ULP_CAPTURE_DATA = 0,   /* /captures only (the default)              */
    ULP_CAPTURE_DIGEST = 1, /* /digests only: one 64-bit digest a row     */
    ULP_CAPTURE_BOTH = 2    /* both                                      */
} ulp_capture_mode;

/*
 * Sets the mode of later captures; the default is the options'
 * capture_mode, else ULPPROF_CAPTURE_MODE ("data", "digest", "both") at
 * open, else data.  The digests are computed
 * on the calling thread, from the caller's bytes (ulp_row_digest).
 */
ULP_API ulp_status ulp_session_set_capture_mode(ulp_session *s, ulp_capture_mode mode);

/*
 * Restricts the data (not the digests) of later captures to a selection:
 * after the first call, only names selected are written, and of a capture
 * with positions only its rows whose request is `request` and position is
 * in [first, last] (first = 0, last = INT64_MAX: every row; request
 * ULP_SELECT_ANY_REQUEST: any request).  Such a capture is written as
 * [rows selected, row axes...] with those rows' positions and requests.
 * Calls add up.  ULPPROF_SELECT at open is a list of "NAME" or
 * "NAME@REQUEST:FIRST-LAST" separated by ',' (the last '@' splits).
 */
#define ULP_SELECT_ANY_REQUEST INT64_MIN
ULP_API ulp_status ulp_session_select(ulp_session *s, const char *name, int64_t request,
                                      int64_t first, int64_t last);
/* The ULPPROF_SELECT syntax above; ULP_EINVAL (and one stderr line) when it does not parse. */
ULP_API ulp_status ulp_session_select_spec(ulp_session *s, const char *spec);

/* The digest of one row: XXH64 of its `n` bytes with seed = `position`. */
ULP_API uint64_t ulp_row_digest(const void *bytes, size_t n, int64_t position);

/* --- The process-wide default session ------------------------------------ */

/* Opens the default session explicitly (path and label may be NULL). */
ULP_API ulp_status ulp_capture_open(const char *path, const char *label);

/*
 * Captures into the default session, opening it from the environment at the
 * first call.  ULP_EDISABLED (silently) when ULPPROF_OUTPUT is unset.
 */
ULP_API ulp_status ulp_capture_host(const char *name, const void *ptr, ulp_dtype dtype, int ndim,
                                    const int64_t *shape, int32_t layer, ulp_role role);

ULP_API ulp_status ulp_capture_set_run(const char *key, const char *value);
ULP_API ulp_status ulp_capture_set_observed(const char *key, const char *value);
ULP_API ulp_status ulp_capture_set_step(int64_t step);
ULP_API ulp_status ulp_capture_flush(void);

/*
 * Closes the default session (also done at exit).  Returns its first error.
 * Calls made while it runs, from other threads, are refused (ULP_ECLOSED),
 * so it ends even while they capture without pause.
 */
ULP_API ulp_status ulp_capture_close(void);

/* The default session, or NULL when none is open. */
ULP_API ulp_session *ulp_capture_session(void);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_CAPTURE_H */
