/*
 * The HDF5 compound type of a /trace table row (kernel_row.h, gemm_row.h),
 * built once from a field table: in memory at the fields' offsets in the C
 * struct, in the file packed in table order, little-endian.
 */
#ifndef ULPPROF_FORMAT_ROW_TYPE_H
#define ULPPROF_FORMAT_ROW_TYPE_H

#include <hdf5.h>
#include <stddef.h>

/*
 * Field i of a table: its name and offset in the C struct, and a new HDF5
 * type for it (the file's when `file`, else the native one), or a negative
 * id on failure.
 */
typedef hid_t (*ulp__row_field_fn)(size_t i, int file, const char **name, size_t *offset);

/* The compound of `n` fields (`mem_size`: sizeof the C struct); a negative id on failure. */
hid_t ulp__row_type(size_t n, size_t mem_size, int file, ulp__row_field_fn field);

#endif /* ULPPROF_FORMAT_ROW_TYPE_H */
