/*
 * ulpprof numeric contract (docs/contract.md): a JSON file that writes down
 * what a producer of tensors promises about its numerics -- the ladder
 * levels it claims, over which scope and domain, and the bit-relevant
 * choices behind them (GEMM dtypes, compute type and configuration per M,
 * reductions, collectives, quantization, scheduler, KV cache, sampling) --
 * each field marked observed (read from snapshots), declared (written by
 * hand) or unobservable (neither), with a `numerical_policy` digest over
 * the bit-relevant fields.
 *
 * emit fills a contract from runs (snapshot files or per-rank directories,
 * as the ladder takes them) and a declaration; check holds a contract
 * against runs, field by field and claim by claim (through the ladder);
 * compare says what two producers' contracts differ in and the highest
 * level they can still promise together.
 */
#ifndef ULPPROF_CONTRACT_H
#define ULPPROF_CONTRACT_H

#include <stddef.h>
#include <stdio.h>

#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ULP_CONTRACT_VERSION 1 /* the file's "ulpprof_contract" */

typedef struct ulp_contract ulp_contract;

/*
 * Reads and validates a contract file.  A file that breaks the schema is
 * ULP_EFORMAT with `err` naming the file, the field and the problem in one
 * line; a newer version ULP_EVERSION.
 */
ULP_API ulp_status ulp_contract_read(const char *path, ulp_contract **out, ulp_error *err);

/*
 * A contract observed from `n` runs (n >= 1), merged with `declared` (may
 * be NULL): observed fields keep the declaration beside them, declared
 * fields nothing observed are marked declared, the rest unobservable;
 * claims and tolerances come from the declaration.  `producer` names it
 * (NULL: the first run's label).
 */
ULP_API ulp_status ulp_contract_emit(const char *const *runs, size_t n,
                                     const ulp_contract *declared, const char *producer,
                                     ulp_contract **out, ulp_error *err);

/* Writes `c` as indented JSON with sorted keys. */
ULP_API ulp_status ulp_contract_write(const ulp_contract *c, FILE *f, ulp_error *err);

/* "sha256:<64 hex digits>" over the bit-relevant fields (owned by `c`). */
ULP_API const char *ulp_contract_digest(const ulp_contract *c);

typedef enum ulp_contract_verdict {
    ULP_CONTRACT_KEPT = 0,    /* every field agrees and every claim is kept     */
    ULP_CONTRACT_BROKEN = 1,  /* some field or claim is broken                  */
    ULP_CONTRACT_UNTESTED = 2 /* nothing broken, but some claim no pair tests   */
} ulp_contract_verdict;

/*
 * Holds `c` against the runs (n >= 1) and prints the field-by-field and
 * claim-by-claim report on `out`.  *verdict says the result; a run that
 * cannot be read is an error.
 */
ULP_API ulp_status ulp_contract_check(const ulp_contract *c, const char *const *runs, size_t n,
                                      FILE *out, ulp_contract_verdict *verdict, ulp_error *err);

/*
 * Prints the fields where `a` and `b` differ and the highest ladder level
 * the two producers can still promise together, with the reason; *level
 * gets it (-1: none, 7: nothing bit-relevant differs).
 */
ULP_API ulp_status ulp_contract_compare(const ulp_contract *a, const ulp_contract *b, FILE *out,
                                        int *level, ulp_error *err);

/*
 * ulp_contract_compare() as one JSON document on `out`: both sides'
 * producer and numerical_policy, `level` (-1: none), `level_name`,
 * `reason`, and `differences`, each {rung, text, a, b} with `field` (a
 * plain field) or `kind`, `sites` (every GEMM site it was found at) and
 * `count` (docs/contract.md).
 */
ULP_API ulp_status ulp_contract_compare_json(const ulp_contract *a, const ulp_contract *b,
                                             FILE *out, int *level, ulp_error *err);

/*
 * The contract's word on one compared pair (`r`, of runs `path_a` and
 * `path_b`), into v->contract_verdict and v->contract_text: "bug" when a
 * claim covers both runs, the pair varies only conditions of that claim's
 * rung, and the runs differ (the claim is named); "kept" when such claims
 * exist and the runs are identical; "not promised" when no claim covers
 * the pair (the reason is given).
 */
struct ulp_diff_result;
struct ulp_diff_verdict;
ULP_API ulp_status ulp_contract_judge(const ulp_contract *c, const char *path_a, const char *path_b,
                                      const struct ulp_diff_result *r, struct ulp_diff_verdict *v,
                                      ulp_error *err);

/* Frees a contract.  NULL is accepted. */
/*
 * The contract's word on every pair of a ladder, as ulp_contract_judge() gives
 * it for one: into each pair's contract_word ("bug", "kept", "not promised")
 * and contract_text.  Runs of other ranks are never covered by a claim.
 */
struct ulp_ladder_result;
ULP_API ulp_status ulp_contract_judge_ladder(const ulp_contract *c, struct ulp_ladder_result *r,
                                             ulp_error *err);

ULP_API void ulp_contract_free(ulp_contract *c);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_CONTRACT_H */
