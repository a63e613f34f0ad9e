/*
 * Where one capture name's digest tables lie (FORMAT.md "Digests"): in
 * layout `packed-1`, its own datasets under /digests/<name>, whole; in
 * `packed-2`, its ranges of the datasets every name shares, which the
 * `names` table gives.  A name's occurrences give their rows and inputs
 * relative to the name's own ranges in both, so that one reader serves
 * both (snapshot_digests.c, snapshot_kept.c).  Not installed.
 */
#ifndef ULPPROF_FORMAT_DIGEST_VIEW_H
#define ULPPROF_FORMAT_DIGEST_VIEW_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#define ULP__DIGEST_LAYOUT_SHARED "packed-2" /* /digests `layout` of the shared datasets */

/* One name's datasets (-1: absent) and ranges: elements [base, base + n) of each. */
typedef struct ulp__digest_view {
    hid_t occ, digest, position, request, inputs, value;
    uint64_t occ_base, nocc;       /* of occ                                   */
    uint64_t row_base, nrows;      /* of digest, position, request (and value) */
    uint64_t inputs_base, ninputs; /* of inputs                                */
    int owned;                     /* the view closes them (packed-1)          */
} ulp__digest_view;

/*
 * packed-1: the view of /digests/<name>, group `g`: its datasets opened,
 * their lengths the ranges.  NULL, or what is wrong with it (a lacking or
 * not 1-D dataset, row datasets of different lengths); close it anyway.
 */
const char *ulp__digest_view_group(hid_t g, ulp__digest_view *v);
void ulp__digest_view_close(ulp__digest_view *v);

/* One element of packed-2's `names`. */
typedef struct ulp__digest_name {
    char *name; /* variable-length UTF-8 */
    uint64_t occurrences_first, occurrences, rows_first, rows, inputs_first, inputs;
    uint8_t has_value; /* value/<name> holds its kept rows */
} ulp__digest_name;

/* The memory compound of ulp__digest_name; close with H5Tclose. */
hid_t ulp__digest_name_type(void);

/* packed-2's /digests, open: the shared datasets (inputs -1 when absent) and the names. */
typedef struct ulp__digests_shared {
    hid_t occ, digest, position, request, inputs, values;
    uint64_t nocc, nrows, ninputs;
    ulp__digest_name *names;
    size_t n;
} ulp__digests_shared;

/*
 * Opens packed-2 /digests `g` and reads its names: NULL, or what is wrong
 * (a lacking dataset, row datasets of different lengths, a name without a
 * name, a range past its dataset, a name whose `value` is not there); close
 * it anyway.
 */
const char *ulp__digests_shared_open(hid_t g, ulp__digests_shared *d);
/* Name i's view (not owned: the shared datasets close with d); its value opened. */
const char *ulp__digests_shared_view(const ulp__digests_shared *d, size_t i, ulp__digest_view *v);
void ulp__digests_shared_close(ulp__digests_shared *d);

#endif /* ULPPROF_FORMAT_DIGEST_VIEW_H */
