/*
 * A stand-in for libcublas's cublasGemmEx, for the GEMM attribution test
 * without a GPU: like the real one (which imports cublasLtMatmul through
 * the dynamic linker), it calls cublasLtMatmul with a descriptor and an
 * algorithm of its own -- tile 256x64, stages 64x5, split-K 2, reduction
 * compute -- so the collector's wrapper sees a nested call.  The real
 * libcublasLt refuses it (no handle); cublasGemmEx returns that status.
 * cublasGetStream_v2 reports stream 0x5150.  Its cublasSgemm_v2 does the
 * same as its cublasGemmEx, and cublasGetMathMode says TF32 tensor-op math
 * (what PyTorch sets for allow_tf32), so the f32 rows name 32F_FAST_TF32;
 * its cublasDgemm_v2 and strided-batched calls only refuse.  Test-only:
 * ulpprof_lt_calls_fake (lt_calls.c) links it instead of libcublas.
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

__attribute__((visibility("default"))) cublasStatus_t cublasGetMathMode(cublasHandle_t h,
                                                                        cublasMath_t *mode)
{
    (void)h;
    *mode = CUBLAS_TF32_TENSOR_OP_MATH;
    return CUBLAS_STATUS_SUCCESS;
}

__attribute__((visibility("default"))) cublasStatus_t
cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const float *alpha, const float *A, int lda, const float *B, int ldb,
               const float *beta, float *C, int ldc)
{
    return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                        CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
}

__attribute__((visibility("default"))) cublasStatus_t
cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const double *alpha, const double *A, int lda, const double *B, int ldb,
               const double *beta, double *C, int ldc)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) cublasStatus_t
cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const float *alpha, const float *A, int lda, long long sa,
                          const float *B, int ldb, long long sb, const float *beta, float *C,
                          int ldc, long long sc, int batch)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda;
    (void)sa, (void)B, (void)ldb, (void)sb, (void)beta, (void)C, (void)ldc, (void)sc, (void)batch;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) cublasStatus_t
cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const double *alpha, const double *A, int lda, long long sa,
                          const double *B, int ldb, long long sb, const double *beta, double *C,
                          int ldc, long long sc, int batch)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)lda;
    (void)sa, (void)B, (void)ldb, (void)sb, (void)beta, (void)C, (void)ldc, (void)sc, (void)batch;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
