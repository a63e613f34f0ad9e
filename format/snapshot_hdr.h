/*
 * A capture described from its dataset's object header bytes, without
 * opening it through HDF5 (snapshot_hdr.c): the groups' reader's fast way
 * for files that carry no capture index (written by h5py or another tool).
 * Not installed.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_HDR_H
#define ULPPROF_FORMAT_SNAPSHOT_HDR_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot_types.h"

/* Where a header's bytes come from: the snapshot's file, or a buffer. */
typedef struct ulp__hdr_src {
    /* reads n bytes at file offset `off` into buf: 0, or -1 */
    int (*read)(void *ctx, void *buf, size_t n, uint64_t off);
    void *ctx;
    uint64_t size; /* bytes in the file: nothing at or past it is read */
} ulp__hdr_src;

/* What the header reader needs of the file, found once per snapshot. */
typedef struct ulp__hdr_file {
    ulp__hdr_src src;
    unsigned sa, sl; /* sizes of offsets and lengths (the superblock's): 4 or 8; 0: not read */
    uint64_t base;   /* file offset of HDF5 address 0 (the user block's size) */
    /* the global heap collection read last: its address, and where each of
     * its objects starts (0: none), so that a lookup does not walk it */
    uint64_t heap;
    unsigned char *heap_bytes; /* its bytes, heap_size of them */
    uint64_t heap_size;
    uint32_t *heap_at;
    size_t heap_n;
} ulp__hdr_file;

/*
 * Describes the dataset whose object header is at HDF5 address `addr` of
 * f's byte source into `c` and its file offset of element 0 into *offset
 * (ULP__NO_OFFSET when it has none), as ulp__capture_read() would, when the
 * header is one this reads whole: a version 1 header, a contiguous
 * unfiltered layout, no shared message, attributes in the header and each
 * of a type HDF5 would accept, and every value valid.  The role attribute,
 * when present, comes back in *role (malloc'd, the caller's; NULL when
 * absent, and whenever this does not answer 1).  The token attributes
 * (`positions`, `requests` of a little-endian integer type, `inputs` of
 * strings) are read and checked as ulp__snapshot_read_rows() does, into
 * one block *tokens (malloc'd, the caller's, that c->positions,
 * c->requests and c->inputs point into; NULL when none, and whenever this
 * does not answer 1).  c->role, c->occurrence and c->name are the
 * caller's, and so is weighing the declared size against the file's.
 * 1 described, 0 not (nothing kept: HDF5 reads it, and says what is
 * wrong), -2 out of memory.  Reads nothing but f's source: no HDF5.
 */
int ulp__hdr_parse(ulp__hdr_file *f, uint64_t addr, ulp_capture_info *c, uint64_t *offset,
                   char **role, void **tokens);

/* Frees what f holds. */
void ulp__hdr_release(ulp__hdr_file *f);

#endif /* ULPPROF_FORMAT_SNAPSHOT_HDR_H */
