/*
 * The exit guard for a failed H5Fclose.
 *
 * When H5Fclose fails (a full disk: its metadata cannot be written), HDF5
 * 1.10 frees the file but keeps its id.  At exit, HDF5's own handler
 * (H5_term_library) closes every remaining id and calls into the freed
 * file: SIGSEGV in H5F__close_cb, or "infinite loop closing library", and
 * the host's unflushed stdout is lost.  This guard runs before HDF5's
 * handler (exit handlers run in reverse order of registration, and it is
 * registered after H5open()); once a close has failed it flushes every
 * stdio stream and ends the process with the status exit() was given,
 * skipping HDF5's handler.  Handlers registered before the first snapshot
 * was opened are skipped too, but only in that case; the snapshot keeps
 * every capture flushed before (it is read through its capture journal).
 */
#include <hdf5.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "writer.h"

static atomic_int close_failed;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

#if defined(__GLIBC__)
static void guard(int status, void *arg)
{
    (void)arg;
    if (atomic_load(&close_failed)) {
        fflush(NULL);
        _exit(status);
    }
}

static void guard_register(void)
{
    H5open();
    on_exit(guard, NULL);
}
#else
static void guard(void)
{
    if (atomic_load(&close_failed)) {
        fflush(NULL);
        _exit(0); /* without on_exit(3) the status is not known */
    }
}

static void guard_register(void)
{
    H5open();
    atexit(guard);
}
#endif

void ulp__writer_exit_guard(void)
{
    pthread_once(&guard_once, guard_register);
}

void ulp__writer_close_failed(void)
{
    atomic_store(&close_failed, 1);
}
