/*
 * Row digests (FORMAT.md, "Digests"): XXH64 of a row's bytes, seeded with
 * the row's token position.  Written here from the published XXH64
 * specification; no dependency on libxxhash.
 */
#ifndef ULPPROF_COMMON_DIGEST_H
#define ULPPROF_COMMON_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/capture.h"

/* The name of the digest, the /digests group's `algorithm` attribute. */
#define ULP__DIGEST_ALGORITHM "xxh64, seed = row position"

/* XXH64 of `n` bytes at `p` with `seed`. */
uint64_t ulp__xxh64(const void *p, size_t n, uint64_t seed);

/* Rows of a capture: the product of its first row_rank extents (1 for rank 0). */
uint64_t ulp__digest_row_count(const ulp_capture_desc *d);

/*
 * Fills out[0..rows) with the digest of each row of `d`'s tensor (`data`,
 * `elem` bytes an element): seed = the row's position when `d` has
 * positions, else its row index.
 */
void ulp__digest_rows(const ulp_capture_desc *d, const void *data, size_t elem, uint64_t *out);

#endif /* ULPPROF_COMMON_DIGEST_H */
