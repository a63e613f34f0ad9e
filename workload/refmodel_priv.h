/* Internals of the reference workload (workload/).  Not installed. */
#ifndef ULPPROF_REFMODEL_PRIV_H
#define ULPPROF_REFMODEL_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/refmodel.h"
#include "ulpprof/snapshot.h"

/* --- GEMM backends (refmodel_gemm.c) ------------------------------------- */

/*
 * The GEMM calls of a pass, as /trace/gemms rows (FORMAT.md): while a log
 * is set on the calling thread, every ulp__rm_gemm() appends one row (M, N,
 * K, types, compute type, the backend as api, its kernel as algo, the
 * emulation's tile and split-K).  `rows[0..n)` wait for the next capture,
 * which passes them to its session; `traced` counts the rows passed so far.
 */
typedef struct ulp__rm_gemm_log {
    ulp_gemm_info *rows;
    size_t n, cap;
    uint64_t seq;   /* calls logged, the next row's seq */
    int64_t traced; /* rows handed to the session       */
    int out_of_mem; /* a row could not be kept          */
} ulp__rm_gemm_log;

/* Sets the calling thread's log (NULL: none, calls are not logged). */
void ulp__rm_gemm_log_set(ulp__rm_gemm_log *log);
void ulp__rm_gemm_log_release(ulp__rm_gemm_log *log);

/* How the TILED emulation computes a GEMM with M rows. */
typedef struct ulp__rm_tile {
    const char *name; /* "small-M 16x64", ...                              */
    int split_k;      /* K is cut into this many chunks, summed at the end */
    int lanes;        /* interleaved accumulators along K inside a chunk   */
} ulp__rm_tile;

/* The tile the TILED backend picks for M rows and reduction length K. */
void ulp__rm_tile_for(int m, int k, ulp__rm_tile *out);

/*
 * C[m x n] = A[m x k] * B[k x n], row-major, leading dimensions in elements.
 * C is overwritten.  Every backend computes each element from its row of A
 * and column of B only; TILED's order depends on m, EXACT's does not.
 */
void ulp__rm_gemm(ulp_refmodel_gemm g, int m, int n, int k, const float *a, int lda, const float *b,
                  int ldb, float *c, int ldc);

/* Pins OpenBLAS to `threads` threads (no-op for other backends). */
void ulp__rm_blas_threads(int threads);
/* Loads OpenBLAS on first use; ULP_EUNSUPPORTED when it cannot be loaded. */
ulp_status ulp__rm_blas_load(ulp_error *err);

/* --- Weights (refmodel_weights.c) ----------------------------------------- */

/* bf16 bits, row-major [in x out] for projections so that y = x W. */
typedef struct ulp__rm_layer {
    uint16_t *attn_norm;         /* [hidden]                    */
    uint16_t *wq, *wk, *wv, *wo; /* [hidden x q_dim], [hidden x kv_dim] x2, [q_dim x hidden] */
    uint16_t *bq, *bk, *bv;      /* [q_dim], [kv_dim], [kv_dim] */
    uint16_t *mlp_norm;          /* [hidden]                    */
    uint16_t *wg, *wu, *wd;      /* [hidden x mlp] x2, [mlp x hidden] */
} ulp__rm_layer;

typedef struct ulp__rm_model {
    ulp_refmodel_dims d;
    uint16_t *embed;       /* [vocab x hidden]            */
    uint16_t *final_norm;  /* [hidden]                    */
    uint16_t *lm_head;     /* [hidden x vocab]            */
    ulp__rm_layer *layers; /* [layers]                    */
    uint16_t *arena;       /* every tensor above          */
    int tp;                /* emulated tensor-parallel degree of the row-parallel
                              GEMMs (ulp_refmodel_options.tp); <= 1: none        */
} ulp__rm_model;

ulp_status ulp__rm_model_init(ulp__rm_model *m, const ulp_refmodel_dims *d, uint64_t seed,
                              ulp_error *err);
void ulp__rm_model_release(ulp__rm_model *m);

/* Uniform in [-1, 1), a pure function of (seed, stream, index). */
float ulp__rm_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* Prompt tokens of prompt `which` (0: the target prompt). */
void ulp__rm_prompt(uint64_t seed, int which, int n, int vocab, int32_t *tokens);

/* --- Paged KV cache and forward pass (refmodel_forward.c) ----------------- */

typedef struct ulp__rm_kvcache {
    int block_size;
    int n_blocks; /* capacity                                        */
    int used;     /* blocks handed out                               */
    int layers, kv_dim;
    uint16_t *k, *v; /* [n_blocks][layers][block_size][kv_dim], bf16    */
    uint64_t *hash;  /* [n_blocks] prefix hash of a full cached block;
                        0: not reusable                                  */
} ulp__rm_kvcache;

ulp_status ulp__rm_kvcache_init(ulp__rm_kvcache *c, const ulp_refmodel_dims *d, int n_blocks,
                                ulp_error *err);
void ulp__rm_kvcache_release(ulp__rm_kvcache *c);

/* One sequence (request) of a forward step. */
typedef struct ulp__rm_seq {
    const int32_t *tokens;
    int n_tokens;
    int computed;     /* tokens whose K/V are in the cache                */
    int *block_table; /* [ceil(n_tokens / block_size)]                    */
} ulp__rm_seq;

/*
 * Prepares a sequence: allocates its block table and, when `reuse`, takes
 * the longest chain of cached full blocks that matches its tokens, at most
 * `max_reuse` tokens (sets `computed`).  Blocks come from the cache's pool.
 */
ulp_status ulp__rm_seq_init(ulp__rm_seq *s, ulp__rm_kvcache *c, const int32_t *tokens, int n,
                            int reuse, int max_reuse, ulp_error *err);
void ulp__rm_seq_release(ulp__rm_seq *s);
/* Publishes the sequence's full, computed blocks for prefix reuse. */
void ulp__rm_seq_publish(ulp__rm_seq *s, ulp__rm_kvcache *c);

/*
 * Tensors handed out by a forward step for the target sequence's rows:
 * `nrows` rows of token positions first_pos, first_pos + 1, ...
 */
typedef void (*ulp__rm_tap_fn)(void *ctx, const char *name, int layer, int is_logits,
                               const float *rows, int nrows, int ncols, int first_pos);

typedef struct ulp__rm_tap {
    int seq;         /* index of the target sequence in the step         */
    int lo, hi;      /* positions [lo, hi) of it whose rows are tapped:
                        those of them the step computes                  */
    int logits_rows; /* last rows of [lo, hi) that get logits, in the
                        step that computes position hi - 1               */
    ulp__rm_tap_fn fn;
    void *ctx;
    ulp__rm_gemm_log *gemms; /* NULL: the GEMMs are not logged; else the
                                tapped steps' calls are (ulp__rm_gemm_log) */
} ulp__rm_tap;

/*
 * One prefill step: for each sequence i, computes its next count[i] tokens
 * (positions computed .. computed + count[i] - 1) in one pass whose GEMMs
 * have M = sum(count) rows, writes their K/V into the cache and advances
 * `computed`.  When `tap` is not NULL, hands the per-layer tensors of the
 * target's rows in [lo, hi) that this step computes to tap->fn (the
 * embedding as layer -1 "embed"), and their logits when the step computes
 * position hi - 1.
 */
ulp_status ulp__rm_forward(const ulp__rm_model *m, ulp__rm_kvcache *c, ulp_refmodel_gemm g,
                           ulp__rm_seq *seqs, const int *count, int nseq, const ulp__rm_tap *tap,
                           ulp_error *err);

/*
 * refmodel_run.c: the caller's options read by their struct_size
 * (common/sized.h), the defaults for the rest; ULP_EINVAL, one stderr line
 * and `err`, for a bad size or NULL.
 */
ulp_status ulp__refmodel_options_read(ulp_refmodel_options *out, const ulp_refmodel_options *in,
                                      ulp_error *err);

/* Rounds an fp32 value to the nearest bf16 value (RNE), kept as fp32. */
float ulp__rm_round_bf16(float x);

#endif /* ULPPROF_REFMODEL_PRIV_H */
