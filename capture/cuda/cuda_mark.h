/*
 * The `ulp1` NVTX mark protocol (capture/cuda/PROTOCOL.md): a pure parser
 * from a mark's text to what it asks the collector to do.  No CUDA, no I/O,
 * no allocation, so it can be fuzzed and tested on any machine.
 */
#ifndef ULPPROF_CUDA_MARK_H
#define ULPPROF_CUDA_MARK_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/capture.h"
#include "ulpprof/dtype.h"
#include "ulpprof/status.h"

#define ULP__MARK_PREFIX     "ulp1|"
#define ULP__MARK_MAX_LEN    8192  /* longer messages are malformed */
#define ULP__MARK_NAME_MAX   1024  /* bytes of a capture name, '\0' included */
#define ULP__MARK_MAX_ROWS   16000 /* rows a mark may give positions for */
#define ULP__MARK_MAX_INPUTS 32    /* names in `in=` */

typedef enum ulp__mark_kind {
    ULP__MARK_NOT_OURS = 0, /* not an ulpprof mark: ignore it silently */
    ULP__MARK_CAPTURE,      /* ev=capture: copy a tensor */
    ULP__MARK_STEP          /* ev=step: set the session's step */
} ulp__mark_kind;

typedef enum ulp__mark_mem {
    ULP__MARK_MEM_CUDA = 0, /* ptr is a device address (dev=cuda[:N]) */
    ULP__MARK_MEM_HOST      /* ptr is a host address (dev=host|cpu) */
} ulp__mark_mem;

typedef struct ulp__mark {
    ulp__mark_kind kind;
    char name[ULP__MARK_NAME_MAX];
    uint64_t ptr; /* 0 only for an empty tensor */
    ulp_dtype dtype;
    int ndim;                    /* 0..ULP_MAX_RANK */
    int64_t shape[ULP_MAX_RANK]; /* elements per axis, row-major */
    uint64_t elements;           /* product of shape (1 for rank 0) */
    uint64_t nbytes;             /* elements * dtype size */
    ulp__mark_mem mem;
    int device;      /* CUDA ordinal, -1 when not given */
    int has_stream;  /* 0: stream unknown, sync the context */
    uint64_t stream; /* CUstream value; 0 = legacy default */
    int32_t layer;   /* ULP_LAYER_NONE when absent */
    ulp_role role;
    int64_t step;          /* ULP_STEP_NONE when absent */
    unsigned unknown_keys; /* keys ignored for forward compatibility */
    /* Token metadata (PROTOCOL.md "Tokens"), checked, as written: expand
     * with ulp__mark_list_expand(); "" when absent. */
    int row_rank;                    /* 0 without positions */
    uint64_t rows;                   /* product of the first row_rank extents */
    char pos[ULP__MARK_NAME_MAX];    /* e.g. "0-95" or "3,7,9-12" */
    char req[ULP__MARK_NAME_MAX];    /* one value for every row, or one per row */
    char inputs[ULP__MARK_NAME_MAX]; /* comma-separated capture names */
    int n_inputs;
} ulp__mark;

/*
 * Parses one NVTX message.  Returns ULP_OK with out->kind set
 * (ULP__MARK_NOT_OURS for any message without the "ulp1|" prefix, which the
 * caller ignores), or ULP_EINVAL for a malformed ulpprof mark, with the
 * reason in `err` (may be NULL).  `msg` may be NULL (not ours).
 */
ulp_status ulp__mark_parse(const char *msg, ulp__mark *out, ulp_error *err);

/*
 * Expands a checked integer list ("0-95", "3,7,9-12") into out[0..n): its
 * values in order; a list of one value fills all n.  Pure; no allocation.
 */
void ulp__mark_list_expand(const char *list, int64_t *out, uint64_t n);

#endif /* ULPPROF_CUDA_MARK_H */
