/*
 * A stand-in for libcublas's cublasGemmEx, for the GEMM attribution test
 * without a GPU: like the real one (which imports cublasLtMatmul through
 * the dynamic linker), it calls cublasLtMatmul with a descriptor and an
 * algorithm of its own -- tile 256x64, stages 64x5, split-K 2, reduction
 * compute -- so the collector's wrapper sees a nested call.  The real
 * libcublasLt refuses it (no handle); cublasGemmEx returns that status.
 * cublasGetStream_v2 reports stream 0x5150.  Test-only: ulpprof_lt_calls_fake
 * (lt_calls.c) links it instead of libcublas.
 */
#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_api.h>

__attribute__((visibility("default"))) cublasStatus_t cublasGetStream_v2(cublasHandle_t h,
                                                                         cudaStream_t *s)
{
    (void)h;
    *s = (cudaStream_t)(uintptr_t)0x5150;
    return CUBLAS_STATUS_SUCCESS;
}

__attribute__((visibility("default"))) cublasStatus_t
cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
             const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
             cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
             cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)h, (void)ldb, (void)ldc, (void)bt, (void)algo;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    if (cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return CUBLAS_STATUS_INTERNAL_ERROR;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatrixLayoutCreate(&la, at, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda);
    cublasLtMatrixLayoutCreate(&lb, bt, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, k);
    cublasLtMatrixLayoutCreate(&lc, ct, m, n, m);
    cublasLtMatmulAlgo_t a;
    memset(&a, 0, sizeof(a));
    uint32_t tile = CUBLASLT_MATMUL_TILE_256x64, stages = CUBLASLT_MATMUL_STAGES_64x5;
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    int32_t splitk = 2;
    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                         sizeof(stages));
    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                         sizeof(splitk));
    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red,
                                         sizeof(red));
    cublasStatus_t st = cublasLtMatmul(NULL, desc, alpha, A, la, B, lb, beta, C, lc, C, lc, &a,
                                       NULL, 0, (cudaStream_t)(uintptr_t)0x5150);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    return st;
}
