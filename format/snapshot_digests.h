/*
 * Reading /digests (FORMAT.md, "Digests"): the row digests a digest-mode
 * capture wrote instead of its bytes.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_DIGESTS_H
#define ULPPROF_FORMAT_SNAPSHOT_DIGESTS_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/status.h"

/* One /digests/<name>/<occurrence>: rows, and each row's key and digest. */
typedef struct ulp__digest_entry {
    char *name;
    int64_t occurrence, seq;
    int32_t layer; /* its `layer` attribute; -1 when absent */
    uint64_t rows;
    int64_t *requests, *positions; /* `rows` each; positions NULL: row index */
    uint64_t *digests;
} ulp__digest_entry;

/*
 * Reads every digest of `path`: *n = 0 when it has no /digests.  *has_data
 * is 1 when /captures holds any dataset.  ULP_EIO / ULP_EFORMAT with `err`.
 */
ulp_status ulp__digests_read(const char *path, ulp__digest_entry **out, size_t *n, int *has_data,
                             ulp_error *err);

/*
 * 1 when `path` opens as HDF5 and has a /digests link, else 0: a cheap
 * test that answers before ulp__digests_read() walks the file's captures.
 */
int ulp__digests_present(const char *path);

void ulp__digests_free(ulp__digest_entry *e, size_t n);

#endif /* ULPPROF_FORMAT_SNAPSHOT_DIGESTS_H */
