/*
 * One row of /trace/kernels (FORMAT.md), written once for the writer and
 * the reader.  ULP__KERNEL_ROW_FIELDS lists the fields in the order of the
 * file's compound, each as X(name, kind, comment); from it come the C
 * struct, the field table and the HDF5 compound types.  The file stores a
 * packed little-endian compound of these names; a reader matches fields by
 * name, so a field added here is optional to old readers and absent (0) in
 * old files.  Internal to the ulpprof libraries.
 *
 * Kinds: U64, U32, I32 (integers of that size), I32X3 (3 int32).
 */
#ifndef ULPPROF_FORMAT_KERNEL_ROW_H
#define ULPPROF_FORMAT_KERNEL_ROW_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* clang-format off */
#define ULP__KERNEL_ROW_FIELDS(X)                                              \
    X(seq,            U64,   "launch order, 0, 1, 2, ... in the process")      \
    X(correlation_id, U32,   "CUPTI correlation id")                           \
    X(name_id,        U32,   "row of /trace/names; set by the writer")         \
    X(grid,           I32X3, "blocks")                                         \
    X(block,          I32X3, "threads per block")                              \
    X(shared_static,  I32,   "bytes")                                          \
    X(shared_dynamic, I32,   "bytes")                                          \
    X(registers,      I32,   "per thread")                                     \
    X(stream,         U64,   "stream id or handle")                            \
    X(device,         U32,   "device ordinal")                                 \
    X(start_ns,       U64,   "GPU timestamp, ns")                              \
    X(end_ns,         U64,   "GPU timestamp, ns")
/* clang-format on */

#define ULP__KERNEL_CTYPE_U64   uint64_t
#define ULP__KERNEL_CTYPE_U32   uint32_t
#define ULP__KERNEL_CTYPE_I32   int32_t
#define ULP__KERNEL_CTYPE_I32X3 int32_t
#define ULP__KERNEL_DIM_U64
#define ULP__KERNEL_DIM_U32
#define ULP__KERNEL_DIM_I32
#define ULP__KERNEL_DIM_I32X3 [3]

#define ULP__KERNEL_MEMBER(name, kind, comment)                                                    \
    ULP__KERNEL_CTYPE_##kind name ULP__KERNEL_DIM_##kind;

/* A row as the CUDA collector records a launch; `name_id` is filled in by the writer. */
typedef struct ulp__kernel_row {
    ULP__KERNEL_ROW_FIELDS(ULP__KERNEL_MEMBER)
} ulp__kernel_row;

typedef enum ulp__kernel_kind {
    ULP__KERNEL_KIND_U64,
    ULP__KERNEL_KIND_U32,
    ULP__KERNEL_KIND_I32,
    ULP__KERNEL_KIND_I32X3
} ulp__kernel_kind;

typedef struct ulp__kernel_field {
    const char *name;
    size_t offset; /* in ulp__kernel_row */
    ulp__kernel_kind kind;
} ulp__kernel_field;

/* The fields of ULP__KERNEL_ROW_FIELDS, in its order. */
extern const ulp__kernel_field ulp__kernel_fields[];
extern const size_t ulp__kernel_field_count;

/*
 * A new HDF5 type for field kind `kind`: the file's little-endian one when
 * `file`, else the native one.  The caller closes it; negative on failure.
 */
hid_t ulp__kernel_field_type(ulp__kernel_kind kind, int file);

/*
 * A new compound type of every field: `file` packed little-endian in the
 * table's order (the type /trace/kernels is written with), else the memory
 * layout of ulp__kernel_row.  The caller closes it; negative on failure.
 */
hid_t ulp__kernel_row_type(int file);

#endif /* ULPPROF_FORMAT_KERNEL_ROW_H */
