/*
 * Row digests (FORMAT.md, "Digests"): XXH64 of a row's bytes, seeded with
 * the row's token position.  Written here from the published XXH64
 * specification; no dependency on libxxhash.
 */
#ifndef ULPPROF_COMMON_DIGEST_H
#define ULPPROF_COMMON_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* The name of the digest, the /digests group's `algorithm` attribute. */
#define ULP__DIGEST_ALGORITHM "xxh64, seed = row position"

/* XXH64 of `n` bytes at `p` with `seed`. */
uint64_t ulp__xxh64(const void *p, size_t n, uint64_t seed);

/*
 * The rows of a capture (FORMAT.md, "Rows and tokens") of rank `ndim` and
 * `shape`: with `positions`, its first row_rank axes index them; without,
 * its first axis (rank 0: one row).
 */
typedef struct ulp__digest_shape {
    int ndim;
    const int64_t *shape;
    int32_t row_rank;
    const int64_t *positions; /* NULL: none */
} ulp__digest_shape;

/* Rows of a capture: the product of its row axes' extents (1 for rank 0). */
uint64_t ulp__digest_row_count(const ulp__digest_shape *d);

/*
 * Fills out[0..rows) with the digest of each row of `d`'s tensor (`data`,
 * `elem` bytes an element): seed = the row's position when `d` has
 * positions, else its row index.
 */
void ulp__digest_rows(const ulp__digest_shape *d, const void *data, size_t elem, uint64_t *out);

#endif /* ULPPROF_COMMON_DIGEST_H */
