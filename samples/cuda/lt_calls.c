/*
 * A CPU-only program that makes real cuBLASLt and cuBLAS calls (which fail
 * without a GPU, after the collector saw them) and announces host tensors
 * with `ulp1` NVTX marks, so the GEMM attribution can be exercised end to
 * end on a machine without a GPU:
 *
 *   ulpprof record --gemms -o miss.h5 -- ./ulpprof_lt_calls --mode miss
 *
 * Per layer l (--layers N, default 2): one cublasLtMatmul with an explicit
 * algorithm, bf16 in and out, f32 compute, on stream 0x1000 + l; then one
 * cublasGemmEx; then the mark of "model.layers.<l>.out" (f32[2,4], element
 * i = (i - 3) * 0.5 + l, and in --mode hit element 4 of layer 0 is one ULP
 * above).  The shapes and algorithms are the cache miss/hit pair of
 * docs/capture.md: miss M=127 N=64 K=96, tile 128x128, stages 64x3, split-K 1,
 * reduction none; hit M=15, tile 64x64, stages 64x4, split-K 4, inplace.
 * The last layer's matmul passes no algorithm (cuBLASLt's heuristic).
 * With --typed, each layer then also makes the typed calls, before its
 * mark: cublasSgemm_v2 (T N, M x 24 x 8), cublasDgemm_v2 (N T, M x 12 x 4),
 * cublasSgemmStridedBatched (N N, M x 16 x 8, batch 3) and
 * cublasDgemmStridedBatched (T T, M x 6 x 2, batch 2), M as above.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_api.h>
#include <nvtx3/nvToolsExt.h>

static int check(cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "lt_calls: %s: status %d\n", what, (int)s);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int hit = 0, layers = 2, typed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
            hit = strcmp(argv[++i], "hit") == 0;
        else if (strcmp(argv[i], "--typed") == 0)
            typed = 1;
        else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = atoi(argv[++i]);
    }
    const uint64_t m = hit ? 15 : 127, n = 64, k = 96;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasOperation_t ta = CUBLAS_OP_T;
    /* op(A) = A^T is m x k: A is stored k x m. */
    if (check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc") ||
        check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
              "transa") ||
        check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, m, (int64_t)k), "A") ||
        check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, n, (int64_t)k), "B") ||
        check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, m, n, (int64_t)m), "C"))
        return 2;
    cublasLtMatmulAlgo_t algo;
    memset(&algo, 0, sizeof(algo));
    uint32_t tile = hit ? CUBLASLT_MATMUL_TILE_64x64 : CUBLASLT_MATMUL_TILE_128x128;
    uint32_t stages = hit ? CUBLASLT_MATMUL_STAGES_64x4 : CUBLASLT_MATMUL_STAGES_64x3;
    int32_t splitk = hit ? 4 : 1;
    uint32_t red = hit ? CUBLASLT_REDUCTION_SCHEME_INPLACE : CUBLASLT_REDUCTION_SCHEME_NONE;
    uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_1x1x1;
    if (check(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                   sizeof(tile)),
              "tile") ||
        check(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                                   sizeof(stages)),
              "stages") ||
        check(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                   sizeof(splitk)),
              "splitk") ||
        check(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                   &red, sizeof(red)),
              "reduction") ||
        check(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                   &cluster, sizeof(cluster)),
              "cluster"))
        return 2;

    float out[8];
    for (int l = 0; l < layers; l++) {
        cudaStream_t stream = (cudaStream_t)(uintptr_t)(0x1000 + l);
        /* No GPU, no handle: cuBLASLt refuses after the collector saw it. */
        cublasStatus_t s = cublasLtMatmul(NULL, desc, NULL, NULL, a, NULL, b, NULL, NULL, c, NULL,
                                          c, l == layers - 1 ? NULL : &algo, NULL, 1 << 20, stream);
        printf("layer %d: cublasLtMatmul -> %d\n", l, (int)s);
        s = cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, 32, 16, NULL, NULL, CUDA_R_16F,
                         (int)m, NULL, CUDA_R_16F, 16, NULL, NULL, CUDA_R_32F, (int)m,
                         CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
        printf("layer %d: cublasGemmEx -> %d\n", l, (int)s);
        if (typed) {
            int mi = (int)m;
            s = cublasSgemm_v2(NULL, CUBLAS_OP_T, CUBLAS_OP_N, mi, 24, 8, NULL, NULL, 8, NULL, 8,
                               NULL, NULL, mi);
            printf("layer %d: cublasSgemm_v2 -> %d\n", l, (int)s);
            s = cublasDgemm_v2(NULL, CUBLAS_OP_N, CUBLAS_OP_T, mi, 12, 4, NULL, NULL, mi, NULL, 12,
                               NULL, NULL, mi);
            printf("layer %d: cublasDgemm_v2 -> %d\n", l, (int)s);
            s = cublasSgemmStridedBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, mi, 16, 8, NULL, NULL, mi,
                                          8L * mi, NULL, 8, 128, NULL, NULL, mi, 16L * mi, 3);
            printf("layer %d: cublasSgemmStridedBatched -> %d\n", l, (int)s);
            s = cublasDgemmStridedBatched(NULL, CUBLAS_OP_T, CUBLAS_OP_T, mi, 6, 2, NULL, NULL, 2,
                                          2L * mi, NULL, 6, 12, NULL, NULL, mi, 6L * mi, 2);
            printf("layer %d: cublasDgemmStridedBatched -> %d\n", l, (int)s);
        }
        for (int i = 0; i < 8; i++)
            out[i] = (float)(i - 3) * 0.5f + (float)l;
        if (hit && l == 0)
            out[4] = nextafterf(out[4], INFINITY);
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "ulp1|name=model.layers.%d.out|ptr=%p|dtype=f32|shape=2,4|layer=%d|dev=host", l,
                 (void *)out, l);
        nvtxMarkA(msg);
    }
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
    return 0;
}
