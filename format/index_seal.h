/*
 * Sealing a capture index (index.h, FORMAT.md "Capture index"): the
 * /index/seal dataset, created before the file is closed, and its hash,
 * written into it after.  The writer seals the files it closes; `ulpprof
 * repair` seals its copies.
 */
#ifndef ULPPROF_FORMAT_INDEX_SEAL_H
#define ULPPROF_FORMAT_INDEX_SEAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

/*
 * Creates /index/seal in `file` (and the /index group if missing): magic,
 * the records' `bytes` and `count`, a new stamp (ulp__index_stamp_now(),
 * also in *stamp), hash and size 0 until sealed; its file offset in
 * *seal_off.  0, or -1 on an HDF5 error.
 */
int ulp__index_seal_create(hid_t file, uint64_t bytes, uint64_t count, uint64_t *seal_off,
                           uint64_t *stamp);

/* A new seal's stamp: ulp__index_stamp_of(CLOCK_REALTIME_COARSE now) (index.h); 0 if the clock
 * fails. */
uint64_t ulp__index_stamp_now(void);

/* The stamp for a clock reading of `now` ns: the odd one of now - 1 and now - 2. */
uint64_t ulp__index_stamp_of(uint64_t now);

/*
 * Sets the mtime of the file open at `fd` to `stamp` (atime untouched):
 * the writer's very last change to the file, after the seal's hash and the
 * journal's closed mark.  Nothing when `stamp` is 0.  0, or -1.
 */
int ulp__index_stamp_set(int fd, uint64_t stamp);

/*
 * Hashes the closed file open at `fd` without the `n` ranges `skip` and
 * what ulp__index_add_unhashed() adds for `seal_off` and `jfirst` (`skip`
 * has room for n + 2), and writes hash and size into the seal at
 * `seal_off`.  0, or -1.
 */
int ulp__index_seal_write(int fd, uint64_t seal_off, uint64_t jfirst, ulp__index_range *skip,
                          size_t n);

#endif /* ULPPROF_FORMAT_INDEX_SEAL_H */
