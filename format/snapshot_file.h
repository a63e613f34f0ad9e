/*
 * The HDF5 file of an open snapshot (snapshot_file.c).  Not installed.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_FILE_H
#define ULPPROF_FORMAT_SNAPSHOT_FILE_H

#include <hdf5.h>

#include "ulpprof/snapshot.h"

/* HDF5's read-only open of s->path with the reader's cache settings; -1 on failure. */
hid_t ulp__snap_open_h5(const ulp_snapshot *s);

/*
 * The snapshot's HDF5 file, opened now if it was opened from its map; -1
 * when HDF5 cannot open it.  Callers that may run on several threads hold
 * s->h5->lock.
 */
hid_t ulp__snap_file(const ulp_snapshot *s);

#endif /* ULPPROF_FORMAT_SNAPSHOT_FILE_H */
