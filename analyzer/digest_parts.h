/*
 * Where the token streams of two snapshots part (ulpprof/digest.h's
 * ulp_digest_part), and which request of B is which of A: both from the
 * fed token ids (gen_prompts.h), which digest mode keeps in full, as
 * `ulpprof diff` pairs the requests of full captures (requests.c).  What
 * the digest comparison (digest_compare.c) reports and the ladder's digest
 * pairs leave out.
 */
#ifndef ULPPROF_ANALYZER_DIGEST_PARTS_H
#define ULPPROF_ANALYZER_DIGEST_PARTS_H

#include <stddef.h>

#include "ulpprof/digest.h"
#include "ulpprof/snapshot.h"

/* B's requests renumbered onto A's by their fed token ids (A's ids' name, which B's must
 * hold too); *v NULL, *n 0 when nothing is renumbered or a side records no ids. */
ulp_status ulp__digest_requests(const ulp_snapshot *sa, const ulp_snapshot *sb,
                                ulp_diff_request_pair **v, size_t *n, ulp_error *err);

/* Per request (A's numbers; B's through pairs[0..npairs)), ascending: the first position
 * both fed with different tokens, into *out[0..*n) (NULL, 0 when none part). */
ulp_status ulp__digest_parts_find(const ulp_snapshot *sa, const ulp_snapshot *sb,
                                  const ulp_diff_request_pair *pairs, size_t npairs,
                                  ulp_digest_part **out, size_t *n, ulp_error *err);
void ulp__digest_parts_free(ulp_digest_part *v, size_t n);

#endif /* ULPPROF_ANALYZER_DIGEST_PARTS_H */
