/*
 * The state of an open snapshot (struct ulp_snapshot) and where each
 * capture's bytes live: types only, no function.  Every part of the reader
 * reads them; a part that calls nothing else of the reader includes this
 * and its own header, not snapshot_priv.h.  Not installed.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_TYPES_H
#define ULPPROF_FORMAT_SNAPSHOT_TYPES_H

#include <hdf5.h>
#include <pthread.h>
#include <stdint.h>

#include "ulpprof/snapshot.h"

/* A tensor larger than this many elements is an absurd shape, not data
 * (the groups' reader and the capture index's refuse it alike). */
#define ULP__MAX_ELEMENTS ((uint64_t)1 << 48)

/* Where the bytes of one capture live. */
typedef struct ulp__capture_src {
    char *h5path;    /* "/captures/<name>/<occurrence>"; NULL when the
                        capture was found through the journal           */
    uint64_t oaddr;  /* object header address (for h5path == NULL); of a
                        capture kept in /digests, ULP__KEPT_JOURNAL when
                        the journal holds it and its name's table does not */
    uint64_t offset; /* contiguous: file offset of element 0; else ULP__NO_OFFSET */
} ulp__capture_src;
#define ULP__NO_OFFSET    UINT64_MAX
#define ULP__KEPT_JOURNAL UINT64_MAX

/*
 * The H5Dread path's state, behind a pointer so that the const snapshot of
 * ulp_snapshot_read() can lock it: the dataset last read stays open, with a
 * chunk cache that holds its chunks, so that reading a compressed tensor in
 * slabs does not inflate each chunk again for every slab.
 */
typedef struct ulp__h5_reader {
    pthread_mutex_t lock;
    hid_t dset; /* open dataset of capture `idx`, or -1            */
    size_t idx;
} ulp__h5_reader;

struct ulp_snapshot {
    char *path;
    hid_t file;
    int fd;                   /* for pread(2) of contiguous datasets    */
    ulp__h5_reader *h5;       /* serializes the H5Dread path            */
    uint64_t file_size;       /* bytes, at open                         */
    uint64_t mtime_ns;        /* st_mtim at open, ns since the epoch    */
    unsigned long fileno;     /* HDF5's number of the open file         */
    const unsigned char *map; /* read-only mapping of the whole file, or NULL */

    char *label;
    char *writer;
    int32_t format_version;
    int64_t created_unix_ns;

    ulp_kv *run;
    size_t nrun;
    ulp_kv *env;
    size_t nenv;
    ulp_kv *observed; /* /observed: what was observed, no condition */
    size_t nobserved;

    struct ulp__lazy *lazy; /* the table in pages (snapshot_pages.c), or
                               NULL: caps, srcs and by_name hold it     */
    ulp_capture_info *caps; /* in seq order                           */
    ulp__capture_src *srcs; /* parallel to caps                       */
    size_t *by_name;        /* capture indices sorted by (name, occ)  */
    size_t ncaps;
    /* The bytes of captures kept in /digests (snapshot_kept.c), parallel to
     * caps (NULL: in /captures); NULL when there are none. */
    const unsigned char **kept_mem;
    int has_kept;          /* some: the table is never made in pages */
    int unclosed;          /* its journal has no closed mark (its writer was killed) */
    size_t kept_journaled; /* kept captures read through the journal (snapshot_kept_journal.c) */
    int past_eof;          /* opened though HDF5's end of allocation lies past the file's end */

    ulp_kernel_info *kernels;
    size_t nkernels;
    int has_kernel_trace; /* /trace/kernels exists (maybe with no rows) */
    ulp_gemm_info *gemms;
    size_t ngemms;
    char **kernel_names;
    size_t nkernel_names;

    char *warning; /* what was damaged and worked around, or NULL */

    char **strs; /* every string the snapshot owns         */
    size_t nstrs, cap_strs;

    /* snapshot_summary.h, one allocation; NULL until asked */
    struct ulp__snapshot_summary *summary;
    int stream;   /* ulp_snapshot_open_stream(): pages, which a diff may trim */
    int from_map; /* opened from its open map: s->file opened when first needed */

    int defer_check;                /* ulp_snapshot_open_deferred()'s open   */
    struct ulp__index_check *check; /* its seal hash, still running, or NULL */
};

/* The bytes of capture i when it is kept in /digests, else NULL. */
static inline const unsigned char *ulp__snap_kept(const ulp_snapshot *s, size_t i)
{
    return s->kept_mem != NULL && i < s->ncaps ? s->kept_mem[i] : NULL;
}

#endif /* ULPPROF_FORMAT_SNAPSHOT_TYPES_H */
