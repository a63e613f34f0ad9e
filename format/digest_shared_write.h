/*
 * A closed file's packed-1 /digests (group `src`) written as /digests of
 * `out` in layout packed-2 (digest_view.h; FORMAT.md "Digests"), its
 * `algorithm` attribute `algorithm`: 0, or -1 when a name's tables cannot
 * be read or HDF5 cannot write (the caller then drops the copy).
 * (digest_shared_write.c)
 */
#ifndef ULPPROF_FORMAT_DIGEST_SHARED_WRITE_H
#define ULPPROF_FORMAT_DIGEST_SHARED_WRITE_H

#include <hdf5.h>

int ulp__digests_write_shared(hid_t src, hid_t out, const char *algorithm);

#endif /* ULPPROF_FORMAT_DIGEST_SHARED_WRITE_H */
