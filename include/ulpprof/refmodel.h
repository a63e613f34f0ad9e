/*
 * ulpprof reference workload: a small decoder-only transformer in C whose
 * prefill can run as a prefix-cache miss, a hit, a miss split at the last
 * block boundary (the fix), or batched with other prompts -- the paired runs
 * that `ulpprof diff` compares.
 *
 * Weights come from a seed (counter-based, so every machine gets the same
 * bits), are stored as bf16, and every GEMM accumulates in fp32.  Between
 * operations activations are stored as bf16, the residual stream included,
 * as a bf16 inference engine does.  Attention reads keys and values from a
 * paged KV cache (block size 16) with prefix reuse by block hash.
 *
 * Three GEMM backends (ulp_refmodel_gemm):
 *   - BLAS:  the system OpenBLAS (cblas_sgemm), pinned to `threads` threads;
 *   - TILED: an EMULATION of a cuBLAS-style heuristic -- the K split and the
 *            accumulation order depend on M (refmodel_gemm.c documents the
 *            table), so miss and hit diverge on every CPU;
 *   - EXACT: fp64 accumulation in a fixed order, rounded once: every output
 *            element is the same function of its row and column whatever M
 *            is, so hit equals miss.
 */
#ifndef ULPPROF_REFMODEL_H
#define ULPPROF_REFMODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ulp_refmodel_gemm {
    ULP_REFMODEL_GEMM_TILED = 0,
    ULP_REFMODEL_GEMM_BLAS,
    ULP_REFMODEL_GEMM_EXACT
} ulp_refmodel_gemm;

typedef enum ulp_refmodel_mode {
    ULP_REFMODEL_MISS = 0, /* all N tokens in one pass (M = N)                       */
    ULP_REFMODEL_HIT,      /* a previous request cached the prefix; only the
                              suffix is computed (M = N - cached)                    */
    ULP_REFMODEL_SPLIT,    /* a miss computed as prefix pass + suffix pass, so the
                              suffix GEMMs have the M of a hit (the proposed fix)    */
    ULP_REFMODEL_BATCH     /* the prompt batched with batch-1 other prompts          */
} ulp_refmodel_mode;

/* Model shapes. */
typedef struct ulp_refmodel_dims {
    const char *name; /* preset name                                             */
    int hidden;       /* d_model                                                 */
    int layers;
    int heads;    /* query heads                                             */
    int kv_heads; /* key/value heads (grouped-query attention)               */
    int head_dim; /* hidden / heads                                          */
    int mlp;      /* intermediate size of the SwiGLU MLP                     */
    int vocab;
    double rope_theta;
    double norm_eps;
} ulp_refmodel_dims;

/* Fills `dims` for a preset ("tiny", "qwen1.5b"); ULP_EINVAL when unknown. */
ULP_API ulp_status ulp_refmodel_preset(const char *name, ulp_refmodel_dims *dims);

/* Parses "miss", "hit", "split", "batch=B" (B >= 1); -1 when invalid. */
ULP_API int ulp_refmodel_mode_parse(const char *s, ulp_refmodel_mode *mode, int *batch);
/* Parses "tiled", "blas", "exact"; -1 when unknown. */
ULP_API int ulp_refmodel_gemm_parse(const char *s, ulp_refmodel_gemm *gemm);
ULP_API const char *ulp_refmodel_gemm_name(ulp_refmodel_gemm gemm);
ULP_API const char *ulp_refmodel_mode_name(ulp_refmodel_mode mode);

/* Defaults of the tiny preset and of `ulpprof demo`. */
#define ULP_REFMODEL_DEFAULT_SEED       12
#define ULP_REFMODEL_DEFAULT_PROMPT_LEN 127
#define ULP_REFMODEL_BLOCK_SIZE         16

/*
 * Sized as ulpprof/capture.h says (struct_size, set by _init()); the first
 * version ends at `dims`.  ulp_refmodel_dims itself is filled by the
 * library (ulp_refmodel_preset) into the caller's memory, so its layout is
 * frozen, as ulp_error's is: a new model shape goes in a new field here.
 */
typedef struct ulp_refmodel_options {
    size_t struct_size;     /* sizeof(ulp_refmodel_options), set by _init()      */
    ulp_refmodel_dims dims; /* (the first version ends here)                      */
    ulp_refmodel_mode mode;
    int batch; /* BATCH: prompts in the batch, this one last; else 1      */
    ulp_refmodel_gemm gemm;
    uint64_t seed;     /* weights and prompts                                      */
    int prompt_len;    /* N                                                        */
    int cached_tokens; /* tokens a hit takes from the cache (and where split
                          cuts); -1: N - N mod block_size.  A multiple of the
                          block size, 0 < cached < N                               */
    int logits_rows;   /* last rows of the suffix whose logits are computed and
                          captured; 0: every suffix row                            */
    int threads;       /* BLAS threads; 0: 1                                       */
    const char *out;   /* snapshot path                                            */
    const char *label; /* run label; NULL: the mode's name                         */
    int verbose;       /* 1: one line per phase on stderr                          */
    int tp;            /* tensor-parallel degree whose reduction order the
                          row-parallel GEMMs (attention output, MLP down) EMULATE:
                          K cut into `tp` shards, each shard's product rounded to
                          bf16 as a rank's output, the shards summed in rank order
                          (the all-reduce) in fp32 and rounded once; 0 or 1: none.
                          Must divide heads * head_dim and the MLP size        */
    int prefill_chunk; /* MISS: the prompt prefilled in steps of this many tokens
                          (chunked prefill); the captured suffix must lie in one
                          step; 0: one step                                    */
    int suffix_only;   /* 1: capture the suffix rows only, in one occurrence per
                          name (with their positions); 0: every position of every
                          pass of this prompt (a hit's prefix pass included),
                          with positions and inputs, and the embedding        */
} ulp_refmodel_options;

/*
 * Tiny preset, tiled GEMM, miss, default seed and prompt length, into the
 * caller's `opts` of `size` bytes (its sizeof); ULP_EINVAL below the first
 * version's size.  The macro passes sizeof *opts.
 */
ULP_API ulp_status ulp_refmodel_options_init_sized(ulp_refmodel_options *opts, size_t size);
#define ulp_refmodel_options_init(opts)                                                            \
    ((void)ulp_refmodel_options_init_sized((opts), sizeof *(opts)))

/*
 * Builds the model from the seed, runs the prefill `opts->mode` asks for
 * and writes the snapshot `opts->out`: per layer `model.layers.<i>.attn_out`,
 * `.mlp_out` and `.out` (bf16, [suffix_rows, hidden]) and `lm_head.logits`
 * (f32, role logits, [logits_rows, vocab]), with the conditions in /run.
 * The suffix rows are the prompt's last N - cached tokens in every mode;
 * each capture records its rows' token positions (FORMAT.md `positions`).
 * On error `err` (may be NULL) says why.
 */
ULP_API ulp_status ulp_refmodel_run(const ulp_refmodel_options *opts, ulp_error *err);

/*
 * Measures the GEMM backend alone: for every GEMM shape of the preset, are
 * the suffix rows' fp32 outputs the same bits when computed inside the miss
 * GEMM (M = N), alone as a hit computes them (M = N - cached), and inside a
 * batch of 4 prompts?  Prints one table to `out`.
 */
ULP_API ulp_status ulp_refmodel_probe(const ulp_refmodel_options *opts, FILE *out, ulp_error *err);

/* "OpenBLAS 0.3.21 ... (core Haswell)", for /run and the demo's summary. */
ULP_API const char *ulp_refmodel_blas_info(void);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_REFMODEL_H */
