/*
 * Where the capture index's records lie in the file (index.h): the runs of
 * /index/records that pread(2) reads without HDF5.  The reader finds them
 * before it reads the records; the writer repeats them in the open map
 * (open_map.h).
 */
#ifndef ULPPROF_FORMAT_INDEX_RUNS_H
#define ULPPROF_FORMAT_INDEX_RUNS_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

/*
 * The `bytes` bytes of uint8 dataset `d` as runs of the file: one for a
 * contiguous dataset, one per run of adjacent chunks for an unfiltered
 * chunked one, in the dataset's order, each inside the file's first
 * `file_size` bytes: a new array *out of *n (p NULL; free()).  0, or -1
 * when the layout is another (compact, filtered, a chunk not written),
 * there are too many chunks, or memory runs out.
 */
int ulp__index_runs(hid_t d, uint64_t bytes, uint64_t file_size, ulp__index_mem **out, size_t *n);

#endif /* ULPPROF_FORMAT_INDEX_RUNS_H */
