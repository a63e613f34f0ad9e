/*
 * The row datasets of the packed digest layout (FORMAT.md "Digests",
 * `packed-1`: `digest`, `position`, `request`, `value`, `occurrences`,
 * `inputs`) as their readers read them: the digests' (snapshot_digests.c)
 * and the kept captures' (snapshot_kept.c).  Not installed.
 */
#ifndef ULPPROF_FORMAT_DIGEST_ROWS_H
#define ULPPROF_FORMAT_DIGEST_ROWS_H

#include <hdf5.h>
#include <stdint.h>

/* The length of 1-D dataset `name` of `g`, opened into *ds (-1 there when absent); -1 when
 * it is not a 1-D dataset. */
int64_t ulp__digest_open_1d(hid_t g, const char *name, hid_t *ds);

/* 1 when dataset `ds`'s integers read as they are stored (ulp__h5_ints_sound). */
int ulp__digest_ds_sound(hid_t ds);

/* Rows [first, first + n) of `ds` (1-D, or 2-D of `width` columns when rank is 2) as memory
 * type `mt` into `out`; 0, or -1 when HDF5 fails. */
int ulp__digest_read_rows(hid_t ds, hid_t mt, int rank, uint64_t first, uint64_t n, uint64_t width,
                          void *out);

#endif /* ULPPROF_FORMAT_DIGEST_ROWS_H */
