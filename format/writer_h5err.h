/*
 * How the writer meets HDF5's failures: its error printing silenced around
 * the calls, and a failed call turned into one message and status.  Uses
 * nothing of the writer.  Not installed.
 */
#ifndef ULPPROF_FORMAT_WRITER_H5ERR_H
#define ULPPROF_FORMAT_WRITER_H5ERR_H

#include <hdf5.h>
#include <stddef.h>

#include "common/error.h"

/* Saves and silences the calling thread's HDF5 error printing; quiet_end restores it. */
typedef struct ulp__h5_quiet {
    H5E_auto2_t fn;
    void *data;
} ulp__h5_quiet;

void ulp__h5_quiet_begin(ulp__h5_quiet *q);
void ulp__h5_quiet_end(const ulp__h5_quiet *q);

/*
 * The innermost message of this thread's HDF5 error stack into `out`, as
 * the system's text where it carries errno.  Call right after the failing
 * HDF5 call: the next API call clears the stack.
 */
void ulp__h5_detail(char *out, size_t size);

/*
 * Fails with "cannot <what> in '<path>': <HDF5's innermost message>", as
 * ULP_ENOSPC when that message is a full disk, quota or file-size limit,
 * else ULP_EIO; on a full disk, HDF5's descriptor `fd` of the file (when
 * not negative) becomes a read-only one.  Call right after the failing
 * HDF5 call.
 */
ulp_status ulp__h5_fail(ulp_error *err, int fd, const char *path, const char *what);

#endif
