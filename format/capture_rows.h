/*
 * A capture's token metadata (FORMAT.md, "Rows and tokens"): the
 * `positions`, `requests` and `inputs` fields of ulp__desc, checked
 * at the call, copied into the queued item, and written as attributes of
 * the capture's dataset.  Internal to the collector.
 */
#ifndef ULPPROF_FORMAT_CAPTURE_ROWS_H
#define ULPPROF_FORMAT_CAPTURE_ROWS_H

#include <hdf5.h>
#include <stddef.h>

#include "capture_desc.h"
#include "ulpprof/capture.h"

/* Rows an HDF5 attribute can hold (the earliest file format keeps each
 * attribute in the object header, 64 KiB at most): int64 up to 8,000,
 * int32 (every value in range) up to 16,000. */
#define ULP__ROWS_MAX_I64 8000
#define ULP__ROWS_MAX_I32 16000

/*
 * Checks the token fields of a descriptor whose name, rank and shape are
 * already valid.  ULP_OK, or ULP_EINVAL with the reason in `why`.
 */
ulp_status ulp__capture_rows_check(const ulp__desc *d, char *why, size_t n);

/* Bytes ulp__capture_rows_copy() needs for a checked descriptor (0: none). */
size_t ulp__capture_rows_size(const ulp__desc *d);

/*
 * Copies the token fields of `src` into `mem` (ulp__capture_rows_size()
 * bytes, 8-byte aligned) and points dst's fields there.
 */
void ulp__capture_rows_copy(ulp__desc *dst, const ulp__desc *src, void *mem);

/* Writes the attributes `positions`, `requests`, `inputs` of `ds`; 0 on success. */
int ulp__capture_rows_write(hid_t ds, const ulp__desc *d);

#endif /* ULPPROF_FORMAT_CAPTURE_ROWS_H */
