/*
 * ulpprof verdicts (docs/verdicts.md): whether the divergence of a pair of
 * snapshots is what reduction-order rounding makes, or not ("not rounding:
 * looks like a defect", with the evidence); the near-tie density of its
 * logits; for a pair on the cache rung, whether one side really took
 * positions from its cache; and, with a numeric contract
 * (ulpprof/contract.h), whether the divergence breaks a claim.
 *
 * ulp_diff_verdict_compute() reads the result of ulp_diff_run() or
 * ulp_diff_stream() (the fields both keep) and the two snapshots' capture
 * descriptions (positions, GEMM rows, /run); it reads no tensor data.
 */
#ifndef ULPPROF_VERDICT_H
#define ULPPROF_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/diff.h"
#include "ulpprof/export.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ulp_verdict_kind {
    ULP_VERDICT_IDENTICAL = 0, /* nothing diverges: nothing to judge                */
    ULP_VERDICT_ROUNDING,      /* consistent with reduction-order rounding          */
    ULP_VERDICT_DEFECT,        /* not rounding: looks like a defect                 */
    ULP_VERDICT_UNKNOWN        /* diverges where no bound applies (shape or dtype
                                  mismatch, a capture only one side has)          */
} ulp_verdict_kind;

/* "identical", "rounding", "defect", "unknown" (FORMAT.md JSON names). */
ULP_API const char *ulp_verdict_kind_name(ulp_verdict_kind k);

typedef enum ulp_cache_witness {
    ULP_WITNESS_NOT_CACHE = 0, /* the pair is not on the cache rung (no cache/split key) */
    ULP_WITNESS_TAKEN,         /* a side's last pass attended positions it never computed */
    ULP_WITNESS_NONE,          /* neither did: the pair does not test the cache rung      */
    ULP_WITNESS_UNKNOWN        /* no capture with positions holds the last position       */
} ulp_cache_witness;

/* "not_cache", "taken", "none", "unknown". */
ULP_API const char *ulp_cache_witness_name(ulp_cache_witness w);

typedef struct ulp_diff_verdict {
    ulp_verdict_kind kind;
    char *summary; /* one sentence: "rounding: ..." / "not rounding: looks like a defect: ..." */
    /* The bound at the first divergence (has_bound: a finite differing capture). */
    int has_bound;
    char *site; /* the first diverging capture                              */
    int32_t layer;
    double max_abs_diff; /* there                                        */
    double scale;        /* S: max |value| there, both sides                 */
    int64_t k;           /* reduction length K                               */
    const char *k_from;  /* "gemms", "model_shape", "last_axis", "default"   */
    const char *acc;     /* accumulation format: "fp32", "fp16", "tf32", "fp64" */
    double u_acc;        /* its unit roundoff                                */
    double ulp_out;      /* one ULP of the capture's dtype at S              */
    double bound;        /* ULP__VERDICT_OUT_ULPS * ulp_out + C * K * u_acc * S */
    double ratio;        /* max_abs_diff / bound                             */
    /* Growth from the first divergence to the last activation (amplification). */
    int has_growth;
    double growth; /* max_abs_diff at the last / at the first               */
    /* The evidence of a defect, one sentence each (empty for rounding). */
    size_t n_evidence;
    char **evidence;
    /* Near-tie density at the logits (over every logits capture). */
    int has_logits;
    uint64_t logits_rows;
    double perturbation; /* P: max over rows of max |z_A - z_B|              */
    uint64_t near_ties;  /* rows with margin_a < 2P: rows P can flip          */
    uint64_t exact_ties; /* rows where margin_a or margin_b is 0              */
    uint64_t flips;      /* argmax flips                                     */
    uint64_t flips_near; /* of them, in near-tie rows                        */
    uint64_t jump_rows;  /* rows whose max |dz| is above 16 * median and above
                            their margin, when others are not: a jump at some
                            positions only                                   */
    /* The cache-hit witness. */
    ulp_cache_witness witness;
    char *witness_text;
    /* With a contract (set by ulp_contract_judge()); NULL without one. */
    char *contract_verdict; /* "bug", "not promised", "kept"                    */
    char *contract_text;
} ulp_diff_verdict;

/* Judges `r`, the comparison of `a` and `b`; *out owns a new verdict. */
ULP_API ulp_status ulp_diff_verdict_compute(const ulp_snapshot *a, const ulp_snapshot *b,
                                            const ulp_diff_result *r, ulp_diff_verdict **out,
                                            ulp_error *err);

/* Frees a verdict.  NULL is accepted. */
ULP_API void ulp_diff_verdict_free(ulp_diff_verdict *v);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_VERDICT_H */
