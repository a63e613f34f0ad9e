/*
 * The snapshot writer: one HDF5 file in the format of FORMAT.md, written by
 * one thread at a time (the session's writer thread, or a test).
 *
 * Crash safety (docs/hdf5.md): the file uses HDF5's earliest file
 * format and is flushed with H5Fflush(H5F_SCOPE_GLOBAL) right after it is
 * created and after every dataset, attribute set and trace batch, so that a
 * process killed with SIGKILL leaves a file that opens with plain HDF5 calls
 * and holds everything written before the last flush (and each capture
 * either complete or not named at all, see ulp__writer_add()).
 *
 * Tensors are contiguous and uncompressed, written with memory type = file
 * type, so the bytes in the file are exactly the producer's bits and the
 * analyzer can pread() them at H5Dget_offset().
 *
 * Internal to the collector.  Every entry point saves and restores the
 * calling thread's HDF5 error printing, so a host program that uses HDF5
 * itself keeps its own settings.
 */
#ifndef ULPPROF_FORMAT_WRITER_H
#define ULPPROF_FORMAT_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "capture_desc.h" /* ulp__desc */
#include "gemm_row.h"     /* ulp__gemm_row */
#include "kernel_row.h"   /* ulp__kernel_row */
#include "ulpprof/capture.h"

typedef struct ulp__writer ulp__writer;

/* Which attribute-only group ulp__writer_set_attr() writes to. */
typedef enum ulp__writer_group {
    ULP__WRITER_RUN = 0,     /* /run: the run's conditions            */
    ULP__WRITER_ENV = 1,     /* /env                                  */
    ULP__WRITER_OBSERVED = 2 /* /observed: facts observed, no condition */
} ulp__writer_group;
#define ULP__WRITER_NGROUPS 3

/*
 * Creates (truncates) `path` with the root attributes (format,
 * format_version, label, writer, created_unix_ns) and the groups /run, /env
 * and /captures, and flushes it.  On success *out owns the writer (release
 * with ulp__writer_close()); on error *out is NULL and `err` says why.
 */
ulp_status ulp__writer_create(const char *path, const char *label, const char *writer_name,
                              int64_t created_unix_ns, ulp__writer **out, ulp_error *err);

/*
 * ulp__writer_create() for a file of the kind `flags` says.
 * ULP__WRITER_DIGEST_FILE: one whose captures go to /digests (digest
 * mode, known when the file is created): HDF5's structures for /captures
 * are sized for a few names, not thousands (FORMAT.md "Digests", file
 * size).  Any capture can still be written to it.
 */
#define ULP__WRITER_DIGEST_FILE 1u /* also: compacted at a clean close (below) */
ulp_status ulp__writer_create_as(const char *path, const char *label, const char *writer_name,
                                 int64_t created_unix_ns, unsigned flags, ulp__writer **out,
                                 ulp_error *err);

/*
 * A digest file's clean close (ulp__writer_close of a ULP__WRITER_DIGEST_FILE
 * writer, after the closed mark, its descriptor closed): the file at `path`,
 * still the one `written` describes, is replaced by the tight copy
 * ulp_snapshot_copy() makes of it, once that copy reads back the same,
 * captures, digests and all; otherwise, and for a file over 64 MiB or with
 * ULPPROF_COMPACT=0, it is left as it is.  Never an error: either file is
 * whole.  (writer_compact.c)
 */
struct stat;
void ulp__writer_compact(const char *path, const struct stat *written);

/* No rewrite at its close (ulp__writer_compact) for this writer's file: a failed one. */
void ulp__writer_no_rewrite(ulp__writer *w);

/*
 * Adds or replaces a string attribute of /run, /env or /observed (created
 * at its first attribute: files without observations have no such group),
 * then flushes.
 */
ulp_status ulp__writer_set_attr(ulp__writer *w, ulp__writer_group group, const char *key,
                                const char *value, ulp_error *err);

/*
 * Stores one tensor as /captures/<d->name>/<occurrence> with the next seq
 * (returned in *seq, may be NULL) and flushes.  `data` holds `nbytes` =
 * elements * ulp_dtype_size(d->dtype) bytes (d->data is ignored); it may be
 * NULL when nbytes is 0.  d->step == ULP_STEP_NONE writes no `step`; the
 * other optional attributes are written when present (layer != -1,
 * has_kernels, device_ptr != 0, stream != 0); role and time_ns always.
 * The capture appears atomically: the dataset is written and flushed while
 * anonymous, named in the capture journal, then linked and flushed, so a
 * file killed at any instant never names a tensor whose bytes or
 * attributes are not on disk.  A capture of a name that has a group waits
 * for its batch, flushed, journaled and linked together when the batch is
 * full (ulp__writer_set_link_batch, or 1 MiB of data) or at
 * ulp__writer_sync(): two flushes per batch.  A new name's first capture
 * goes at once, after the batch (three flushes).  On an HDF5 failure
 * nothing new stays named; a failure of the batch is returned by the
 * capture that filled it.
 */
ulp_status ulp__writer_add(ulp__writer *w, const ulp__desc *d, const void *data, size_t nbytes,
                           int64_t *seq, ulp_error *err);

/*
 * Stores the row digests of one capture (FORMAT.md, "Digests", the packed
 * layout): `rows` uint64 values and each row's position and request,
 * appended to /digests/<d->name>/{digest,position,request}, and one
 * element of /digests/<d->name>/occurrences with the capture's metadata
 * (dtype, seq -- a counter of the digests' own -- role, layer, step,
 * shape, inputs...).  The tensor's bytes are not written.  Buffered in
 * memory (about 1 MiB a name at most) until ulp__writer_flush or close;
 * not journaled nor indexed: digests are durable once the file is closed
 * or flushed.
 */
ulp_status ulp__writer_add_digests(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                   uint64_t rows, ulp_error *err);

/*
 * As ulp__writer_add_digests, for a capture that digest mode keeps in full
 * (ulp__desc_kept_in_full(): the produced tokens, fed token ids): its
 * `nbytes` bytes at `data` are also kept, as rows of
 * /digests/<d->name>/value beside its digests, and it is a capture of the
 * file (a seq and an occurrence of the captures' counters) that readers
 * see as if it were in /captures.  It is written whole to the capture
 * journal first (a kept-capture record, format/journal_kept.h), before its
 * rows wait for the next flush: a kill from then on leaves it in the file.
 * A capture whose dtype or row width is not its name's first kept one's is
 * written to /captures instead (with its digests), as ulp__writer_add
 * writes it.
 */
ulp_status ulp__writer_add_kept(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                uint64_t rows, const void *data, size_t nbytes, ulp_error *err);

/*
 * Appends `n` kernel rows to /trace/kernels (created at the first call),
 * interning names[i] (NULL: "") into /trace/names, and flushes.  `names`
 * may be NULL only when n == 0.  The rows are not modified.
 */
ulp_status ulp__writer_append_kernels(ulp__writer *w, const ulp__kernel_row *rows,
                                      const char *const *names, size_t n, ulp_error *err);

/*
 * Appends `n` GEMM call rows to /trace/gemms (FORMAT.md; created at the
 * first call, in /trace), then flushes.  Row r is the r-th row ever
 * passed here.
 */
ulp_status ulp__writer_append_gemms(ulp__writer *w, const ulp__gemm_row *rows, size_t n,
                                    ulp_error *err);

/* Number of /trace/kernels rows written so far. */
uint64_t ulp__writer_kernel_count(const ulp__writer *w);

/* Number of captures written so far (the next seq). */
int64_t ulp__writer_capture_count(const ulp__writer *w);

/*
 * The file descriptor HDF5 writes through (sec2 driver), or -1.  Used by the
 * session's fork handler to keep a forked child from writing to the file.
 */
int ulp__writer_fd(const ulp__writer *w);

/*
 * Flushes the captures that wait for their batch (see ulp__writer_add),
 * names them in the journal, links them and flushes.  A failure leaves
 * the file without its closed mark, read through the journal.
 */
ulp_status ulp__writer_sync(ulp__writer *w, ulp_error *err);

/* Captures written that wait for their batch. */
size_t ulp__writer_unlinked_count(const ulp__writer *w);

/*
 * ulp__writer_sync, after the digests that wait in memory are appended to
 * their datasets (and flushed when no capture waits): what a flush of the
 * session asks.  The writer's own syncs (a batch due, a new name) leave the
 * digests waiting: appending them at every sync cost more than a dataset
 * per digest did.
 */
ulp_status ulp__writer_flush(ulp__writer *w, ulp_error *err);

/* Digest occurrences that wait in memory for a flush or the close. */
size_t ulp__writer_digests_pending(const ulp__writer *w);

/* Lets up to `n` captures wait for their batch (1, the default: none waits). */
void ulp__writer_set_link_batch(ulp__writer *w, size_t n);

/* Closes the file and frees the writer.  NULL is accepted. */
ulp_status ulp__writer_close(ulp__writer *w, ulp_error *err);

/*
 * writer_exit.c: the guard against HDF5 1.10's crash at exit after a failed
 * H5Fclose.  ulp__writer_exit_guard() registers it once (it calls H5open()
 * first, so that it runs before HDF5's own exit handler); register it before
 * any exit handler of yours that closes sessions.  ulp__writer_create()
 * calls it; ulp__writer_close_failed() arms it.
 */
void ulp__writer_exit_guard(void);
void ulp__writer_close_failed(void);

#endif /* ULPPROF_FORMAT_WRITER_H */
