/*
 * GEMM attribution: what each cuBLAS / cuBLASLt call computed and how --
 * M, N, K, transposes, data and compute types, the algorithm (tile,
 * stages, split-K and its reduction, swizzle, workspace) and the CUPTI
 * correlation ids of the kernels it launched -- as rows of /trace/gemms
 * (format/gemm_row.h), and the rows each capture follows.
 *
 * The interposed entry points (cuda_cublas.c) describe a call through
 * cuBLASLt's own attribute getters, passed in a table so that tests use
 * the real library's host-only descriptor functions without a GPU.
 * Rows are numbered in call order and handed to the sink in batches: when
 * a capture takes its range (so the rows reach the file before it), when
 * a batch is full, and at exit.
 */
#ifndef ULPPROF_CUDA_GEMM_H
#define ULPPROF_CUDA_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>

#include "format/gemm_row.h"
#include "ulpprof/status.h"

/* cuBLASLt's descriptor getters (cublasLt.h signatures). */
typedef struct ulp__cublaslt_getters {
    cublasStatus_t (*desc_get)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void *, size_t,
                               size_t *);
    cublasStatus_t (*layout_get)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, void *,
                                 size_t, size_t *);
    cublasStatus_t (*algo_get)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t,
                               void *, size_t, size_t *);
} ulp__cublaslt_getters;

/*
 * Describes a cublasLtMatmul call into `row` (seq, stream, corr_* and
 * status are the caller's): shapes from the layouts, M = rows(D),
 * N = cols(D), K = cols(op(A)); the algorithm from `algo`, or "heuristic"
 * with unknown tile when `algo` is NULL (cuBLASLt chooses inside).
 */
void ulp__gemm_describe_lt(const ulp__cublaslt_getters *g, cublasLtMatmulDesc_t desc,
                           cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                           const cublasLtMatmulAlgo_t *algo, size_t workspace, ulp__gemm_row *row);

/* Describes a cublasGemmEx-style call (`api` names it; batch >= 1). */
void ulp__gemm_describe_ex(const char *api, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                           int64_t n, int64_t k, int64_t batch, cudaDataType_t at,
                           cudaDataType_t bt, cudaDataType_t ct, int compute, int algo,
                           ulp__gemm_row *row);

/* Names written into rows (cuda_gemm_names.c, cuda_gemm.c). */
void ulp__gemm_tile_name(unsigned id, char *out, size_t size);
void ulp__gemm_stages_name(unsigned id, char *out, size_t size);
void ulp__gemm_cluster_name(unsigned id, char *out, size_t size);
void ulp__gemm_dtype_name(int cuda_type, char *out, size_t size);
void ulp__gemm_compute_name(int compute, char *out, size_t size);

/* --- the log of rows and their attribution to captures ----------------- */

typedef struct ulp__gemm_log ulp__gemm_log;

typedef struct ulp__gemm_sink {
    void *ctx;
    /* Stores rows [first, first + n) in order; called under the log's lock. */
    ulp_status (*rows)(void *ctx, const ulp__gemm_row *rows, size_t n);
} ulp__gemm_sink;

ulp_status ulp__gemm_log_create(const ulp__gemm_sink *sink, ulp__gemm_log **out);
void ulp__gemm_log_free(ulp__gemm_log *log); /* NULL accepted; flushes first */

/* Numbers `row` (sets row->seq) and queues it.  After a sink error the
 * log stops: rows are dropped and ranges are no longer given. */
void ulp__gemm_log_add(ulp__gemm_log *log, ulp__gemm_row *row);

/*
 * Takes the rows of `stream` (of every stream when `any_stream`) since
 * the previous take as [first, last), after handing the queued rows to
 * the sink.  Returns 1 with `range` set (an empty range is [n, n)), 0 when
 * the log has stopped.
 */
int ulp__gemm_log_take(ulp__gemm_log *log, int any_stream, uint64_t stream, int64_t range[2]);

/* Hands the queued rows to the sink. */
void ulp__gemm_log_flush(ulp__gemm_log *log);

uint64_t ulp__gemm_log_rows(ulp__gemm_log *log);

#endif /* ULPPROF_CUDA_GEMM_H */
