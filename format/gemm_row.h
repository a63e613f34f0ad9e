/*
 * One row of /trace/gemms (FORMAT.md): a cuBLAS / cuBLASLt call as the CUDA
 * collector records it, written once for the writer and the reader.
 * ULP__GEMM_ROW_FIELDS lists the fields in the order of the file's
 * compound as X(name, kind, comment); from it come the C struct, the field
 * table and the HDF5 compound types.  Strings are fixed-length,
 * NUL-padded (no global heap to tear).  A reader matches fields by name:
 * a field added here is absent (0 or "") in older files.  The public
 * ulp_gemm_info (ulpprof/snapshot.h) has the same members.
 *
 * Kinds: U64, U32, I32, I64 (integers of that size), S4, S12, S16, S24,
 * S32 (strings of at most 3, 11, 15, 23, 31 bytes).
 */
#ifndef ULPPROF_FORMAT_GEMM_ROW_H
#define ULPPROF_FORMAT_GEMM_ROW_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* clang-format off */
#define ULP__GEMM_ROW_FIELDS(X)                                                         \
    X(seq,        U64, "call order, 0, 1, 2, ... in the process")                       \
    X(api,        S32, "entry point: cublasLtMatmul, cublasGemmEx, ...")                \
    X(stream,     U64, "cudaStream_t of the call")                                      \
    X(m,          I64, "rows of D (op(A) is m x k)")                                    \
    X(n,          I64, "columns of D")                                                  \
    X(k,          I64, "reduction length")                                              \
    X(batch,      I64, "batch count; 1 when not batched")                               \
    X(transa,     S4,  "N, T or C")                                                     \
    X(transb,     S4,  "N, T or C")                                                     \
    X(a_type,     S12, "bf16, f16, f32, f64, f8e4m3, f8e5m2, i8, ... or R<n>")          \
    X(b_type,     S12, "as a_type")                                                     \
    X(c_type,     S12, "as a_type")                                                     \
    X(d_type,     S12, "as a_type")                                                     \
    X(compute,    S24, "compute type: 32F, 32F_FAST_TF32, 16F, ...")                    \
    X(algo,       S12, "given (the caller's), heuristic (cuBLASLt chose), cublas")      \
    X(algo_id,    I32, "cuBLASLt algorithm id, or cublasGemmAlgo_t; -1 unknown")        \
    X(tile,       S16, "CTA tile MxN, '' unknown")                                      \
    X(stages,     S16, "K-tile x stages, '' unknown")                                   \
    X(splitk,     I32, "split-K factor; 0 unknown")                                     \
    X(reduction,  S12, "split-K reduction: none, inplace, compute, output, ''")         \
    X(swizzle,    I32, "CTA swizzling")                                                 \
    X(custom,     I32, "custom option")                                                 \
    X(cluster,    S16, "thread-block cluster, '' unknown")                              \
    X(epilogue,   I32, "cublasLtEpilogue_t")                                            \
    X(workspace,  U64, "workspace bytes given")                                         \
    X(corr_first, U32, "CUPTI correlation ids of the kernel launches the call made, ")  \
    X(corr_last,  U32, "  first and last (0, 0: none seen, e.g. during graph capture)") \
    X(status,     I32, "cublasStatus_t returned")
/* clang-format on */

#define ULP__GEMM_CTYPE_U64 uint64_t
#define ULP__GEMM_CTYPE_U32 uint32_t
#define ULP__GEMM_CTYPE_I32 int32_t
#define ULP__GEMM_CTYPE_I64 int64_t
#define ULP__GEMM_CTYPE_S4  char
#define ULP__GEMM_CTYPE_S12 char
#define ULP__GEMM_CTYPE_S16 char
#define ULP__GEMM_CTYPE_S24 char
#define ULP__GEMM_CTYPE_S32 char
#define ULP__GEMM_DIM_U64
#define ULP__GEMM_DIM_U32
#define ULP__GEMM_DIM_I32
#define ULP__GEMM_DIM_I64
#define ULP__GEMM_DIM_S4  [4]
#define ULP__GEMM_DIM_S12 [12]
#define ULP__GEMM_DIM_S16 [16]
#define ULP__GEMM_DIM_S24 [24]
#define ULP__GEMM_DIM_S32 [32]

#define ULP__GEMM_MEMBER(name, kind, comment) ULP__GEMM_CTYPE_##kind name ULP__GEMM_DIM_##kind;

typedef struct ulp__gemm_row {
    ULP__GEMM_ROW_FIELDS(ULP__GEMM_MEMBER)
} ulp__gemm_row;

typedef enum ulp__gemm_kind {
    ULP__GEMM_KIND_U64,
    ULP__GEMM_KIND_U32,
    ULP__GEMM_KIND_I32,
    ULP__GEMM_KIND_I64,
    ULP__GEMM_KIND_S4,
    ULP__GEMM_KIND_S12,
    ULP__GEMM_KIND_S16,
    ULP__GEMM_KIND_S24,
    ULP__GEMM_KIND_S32
} ulp__gemm_kind;

typedef struct ulp__gemm_field {
    const char *name;
    size_t offset; /* in ulp__gemm_row */
    ulp__gemm_kind kind;
} ulp__gemm_field;

extern const ulp__gemm_field ulp__gemm_fields[];
extern const size_t ulp__gemm_field_count;

/* Bytes of a string kind (0 for the integers). */
size_t ulp__gemm_kind_strlen(ulp__gemm_kind kind);

/* A new HDF5 type for `kind`: little-endian file type when `file`, else
 * native (strings are the same both ways).  Caller closes; < 0 on failure. */
hid_t ulp__gemm_field_type(ulp__gemm_kind kind, int file);

/* The compound of every field: packed in table order when `file`, else the
 * layout of ulp__gemm_row.  Caller closes; < 0 on failure. */
hid_t ulp__gemm_row_type(int file);

#endif /* ULPPROF_FORMAT_GEMM_ROW_H */
