/*
 * Comparing runs by their row digests (FORMAT.md, "Digests"): which
 * (capture, request, position) rows differ, the first of them in the order
 * the captures were written, and the selection to capture in full next.
 * A side captured in full is compared through the digests of its rows.
 */
#ifndef ULPPROF_DIGEST_H
#define ULPPROF_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/diff.h"
#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Differing positions [first, last] of one request. */
typedef struct ulp_digest_range {
    int64_t request, first, last;
} ulp_digest_range;

/* One capture name. */
typedef struct ulp_digest_name {
    char *name;
    int64_t seq;       /* its first seq in A (B when only in B)          */
    uint64_t compared; /* (request, position) keys both sides have       */
    uint64_t differing, only_a, only_b;
    int has_first;
    int64_t first_request, first_position; /* the first differing key   */
    size_t nranges;
    ulp_digest_range *ranges; /* per request, in request order     */
    int32_t layer;            /* its layer (A's; B's when only in B), -1: none */
} ulp_digest_name;

/*
 * Where the token streams of one request part (FORMAT.md "Parted token
 * streams"): found on the fed token ids (a capture of role input, an
 * integer dtype, positions, one element per row), which digest mode keeps
 * in full, and the produced `tokens`.
 */
typedef struct ulp_digest_part {
    char *source;              /* the fed token ids' capture name                    */
    int64_t request;           /* A's request number (B's compared under it)         */
    int64_t position;          /* the first position both fed with different tokens  */
    int64_t token_a, token_b;  /* the tokens fed there                               */
    int64_t step_a, step_b;    /* the `step` of the fed ids' captures there; -1 none */
    int64_t produced_step;     /* the index, among the request's produced tokens in A,
                                  of the one fed at `position` (A's `tokens` row at the
                                  greatest position below it); -1 when A has none    */
    double margin_a, margin_b; /* top-1 minus top-2 of that `tokens` row in A and in
                                  B (NaN when absent)                                */
} ulp_digest_part;

/* Filled by the library, freed by ulp_digest_result_free(): fields are appended. */
typedef struct ulp_digest_result {
    size_t nnames;
    ulp_digest_name *names;   /* in A's seq order, then B's names  */
    int digests_a, digests_b; /* 1: that side is digest-only      */
    ptrdiff_t first;          /* the first name that differs, or -1 */
    int identical;            /* no row differs, no key on one side (the parts aside) */
    /* B's requests renumbered onto A's by their fed token ids, as ulp_diff_result's
     * (FORMAT.md "Requests paired by their tokens"): every key above is A's. */
    size_t n_request_pairs;
    ulp_diff_request_pair *request_pairs; /* sorted by b; NULL when none renumbered   */
    /* Per request whose fed tokens differ, ascending: where its streams part. */
    size_t nparts;
    ulp_digest_part *parts;
} ulp_digest_result;

/* 1 when `path` holds digests and no captured tensor; 0 otherwise or on error. */
ULP_API int ulp_digest_only(const char *path);

/* Compares two snapshot files by row digests, B's requests paired with A's by their fed
 * token ids (as ulpprof diff pairs full captures), and finds where the token streams part.
 * The rows after a part are compared (they count as differing).  ULP_EINVAL when nothing
 * is compared. */
ULP_API ulp_status ulp_digest_compare(const char *a, const char *b, ulp_digest_result **out,
                                      ulp_error *err);
/* As ulp_digest_compare, of one request's rows with positions: A's `request_a` against B's
 * `request_b` (the same prompt numbered otherwise), reported under `request_a`; it pairs no
 * requests and finds no parts (n_request_pairs and nparts 0). */
ULP_API ulp_status ulp_digest_compare_request(const char *a, int64_t request_a, const char *b,
                                              int64_t request_b, ulp_digest_result **out,
                                              ulp_error *err);
ULP_API void ulp_digest_result_free(ulp_digest_result *r);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_DIGEST_H */
