/*
 * The packed layout of /digests (FORMAT.md, "Digests", `packed-1`): one
 * element of /digests/<name>/occurrences per occurrence of a name, its rows
 * [first, first + rows) of the row-aligned datasets `digest`, `position`
 * and `request`, its inputs [inputs_first, inputs_first + inputs_count) of
 * `inputs`.  Shared by the writer (writer_digest.c) and the reader
 * (snapshot_digests.c).
 */
#ifndef ULPPROF_FORMAT_DIGEST_TABLE_H
#define ULPPROF_FORMAT_DIGEST_TABLE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ulpprof/format.h"

#define ULP__DIGEST_LAYOUT "packed-1" /* /digests `layout`; absent: a dataset per occurrence */
#define ULP__DIGEST_STR    16         /* bytes of the `dtype` and `role` fields */

typedef struct ulp__digest_occ {
    int64_t occurrence, seq;
    uint64_t first, rows;
    int64_t time_ns, step; /* step 0 when !has_step */
    int32_t layer, ndim, row_rank;
    uint8_t has_step, has_layer, has_positions, has_requests;
    char dtype[ULP__DIGEST_STR], role[ULP__DIGEST_STR];
    int64_t shape[ULP_MAX_RANK]; /* the first ndim used, the rest 0 */
    uint64_t inputs_first;
    uint32_t inputs_count;
    uint8_t has_kernels, has_gemms, has_graph_replay;
    int64_t kernels[2], gemms[2], graph_replay[2];
    uint64_t device_ptr, stream; /* 0: none */
    /* Kept in full (FORMAT.md "Digests": the produced tokens and the fed token ids of a
     * digest-mode file): its rows' bytes are rows [first, first + rows) of `value`, and it is
     * the capture (name, kept_occurrence) of seq kept_seq.  Absent from files written before. */
    uint8_t kept;
    int64_t kept_seq, kept_occurrence;
} ulp__digest_occ;

/* 1 when the file's occurrence table `t` (a compound) has the fields of kept occurrences. */
int ulp__digest_occ_has_kept(hid_t t);

/* The memory compound of ulp__digest_occ (the file's is it packed); close with H5Tclose. */
hid_t ulp__digest_occ_type(void);

/* A NUL-terminated UTF-8 string type of `n` bytes, or variable-length when `vlen`. */
hid_t ulp__digest_str_type(size_t n, int vlen);

/* The compressed tables' filters (shuffle, deflate, Fletcher-32) set on dataset creation
 * list `pl`: 0, or -1 when HDF5 lacks one. */
herr_t ulp__digest_squeeze(hid_t pl);

#endif /* ULPPROF_FORMAT_DIGEST_TABLE_H */
