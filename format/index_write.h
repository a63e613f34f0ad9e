/*
 * Writing a capture index and its open map (FORMAT.md "Capture index",
 * "Open map"): the one writer of /index/records, /index/seal, the seal's
 * hash and the map appended before it.  The snapshot writer (writer_index.c,
 * writer_map.c) and the repair copy (snapshot_copy_index.c) both write
 * through it, each from its own view of a capture.  Not installed.
 *
 * The index is a cache: nothing here fails a file.  A failure turns the
 * index off, and the file is read through its groups.
 */
#ifndef ULPPROF_FORMAT_INDEX_WRITE_H
#define ULPPROF_FORMAT_INDEX_WRITE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "open_map.h"

/* The records of an index being written. */
typedef struct ulp__index_writer {
    hid_t records; /* /index/records, once created                      */
    size_t spill;  /* records buffered before they go to the file       */
    unsigned char *buf;
    size_t used, cap;
    uint64_t bytes;           /* bytes in /index/records                           */
    uint64_t count;           /* records                                           */
    ulp__index_range *ranges; /* the captures' data, which the hash leaves out */
    size_t nranges, ranges_cap;
    int off; /* something failed: no index                        */
} ulp__index_writer;

/* What the seal needs once HDF5 has closed the file. */
typedef struct ulp__index_seal_job {
    uint64_t seal_off; /* file offset of /index/seal; 0: no seal */
    uint64_t stamp;    /* its stamp (format/index.h) */
    ulp__index_range *ranges;
    size_t nranges, ranges_cap;
    unsigned char *map; /* the open map to append, or NULL */
    size_t map_len;
} ulp__index_seal_job;

/*
 * An empty index.  `spill`: the records buffered before they are appended
 * to a growing, chunked /index/records; when all of them fit at the
 * finish, /index/records is contiguous, of their exact size (SIZE_MAX:
 * always).
 */
void ulp__index_writer_init(ulp__index_writer *x, size_t spill);

/*
 * Adds the record of `e` to the index of `file`; `data_bytes`: the bytes
 * of its data at e->offset (left out of the hash unless e->offset is
 * ULP__INDEX_NO_OFFSET).  A failure turns the index off.
 */
void ulp__index_writer_add(ulp__index_writer *x, hid_t file, const ulp__index_entry *e,
                           uint64_t data_bytes);

/* No index for this file; frees the buffers. */
void ulp__index_writer_off(ulp__index_writer *x);

/*
 * Before H5Fclose: the last records and /index/seal (hash 0) into `file`;
 * the job takes the ranges.  0, or -1: no index.
 */
int ulp__index_writer_finish(ulp__index_writer *x, hid_t file, ulp__index_seal_job *job);

/*
 * After ulp__index_writer_finish(): the open map `m` (its runs are found
 * here, those of /index/records) for the seal of `job`, in job->map; NULL
 * there when it cannot be made (the file then opens through HDF5).
 */
void ulp__index_writer_map(ulp__index_writer *x, ulp__open_map *m, ulp__index_seal_job *job);

/*
 * After H5Fclose, before any closed mark of the journal at `jfirst`
 * (ULP__INDEX_NO_JOURNAL: none): the map, then the hash, through `fd`.
 * Frees the job's buffers (its stamp stays).  0, or -1 when the seal is
 * not written.
 */
int ulp__index_writer_seal(int fd, uint64_t jfirst, ulp__index_seal_job *job);

/* Frees an unsealed job's buffers. */
void ulp__index_seal_job_drop(ulp__index_seal_job *job);

/* Closes /index/records and frees the buffers. */
void ulp__index_writer_release(ulp__index_writer *x);

#endif /* ULPPROF_FORMAT_INDEX_WRITE_H */
