/*
 * GEMM attribution (capture/cuda/cuda_gemm.c): calls described through
 * the real libcublasLt's host-only descriptor functions (no GPU needed to
 * create and read descriptors and algorithm configs), and the log that
 * numbers rows and gives each capture the rows of its stream.  Expected
 * values are the parameters set here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifdef ULP_HAVE_CUDA_CORE
#include "cuda_gemm.h"

static const ulp__cublaslt_getters real_getters = {
    cublasLtMatmulDescGetAttribute,
    cublasLtMatrixLayoutGetAttribute,
    cublasLtMatmulAlgoConfigGetAttribute,
};

static void test_cuda_gemm__describe_lt(void **state)
{
    (void)state;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    /* D (300 x 40) = op(A) (300 x 7168) B (7168 x 40), A not transposed. */
    assert_int_equal(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F), 0);
    cublasOperation_t tb = CUBLAS_OP_T;
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), 0);
    assert_int_equal(cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, 300, 7168, 300), 0);
    assert_int_equal(cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E5M2, 40, 7168, 40), 0);
    assert_int_equal(cublasLtMatrixLayoutCreate(&c, CUDA_R_16F, 300, 40, 300), 0);
    assert_int_equal(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, 300, 40, 300), 0);
    int32_t batch = 6;
    assert_int_equal(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                      sizeof(batch)),
                     0);
    cublasLtMatmulAlgo_t algo;
    memset(&algo, 0, sizeof(algo));
    uint32_t tile = CUBLASLT_MATMUL_TILE_256x128, stages = CUBLASLT_MATMUL_STAGES_128x2;
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, swz = 1, custom = 3;
    int32_t splitk = 8;
    uint16_t cluster = CUBLASLT_CLUSTER_SHAPE_2x1x1;
    struct {
        cublasLtMatmulAlgoConfigAttributes_t a;
        const void *v;
        size_t n;
    } set[] = {
        {CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile)},
        {CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages)},
        {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk)},
        {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red)},
        {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz)},
        {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom)},
        {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster)},
    };
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
        assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, set[i].a, set[i].v, set[i].n),
                         0);

    ulp__gemm_row r;
    memset(&r, 0, sizeof(r));
    ulp__gemm_describe_lt(&real_getters, desc, a, b, c, d, &algo, 4 << 20, &r);
    assert_string_equal(r.api, "cublasLtMatmul");
    assert_true(r.m == 300 && r.n == 40 && r.k == 7168 && r.batch == 6);
    assert_string_equal(r.transa, "N");
    assert_string_equal(r.transb, "T");
    assert_string_equal(r.a_type, "f8e4m3");
    assert_string_equal(r.b_type, "f8e5m2");
    assert_string_equal(r.c_type, "f16");
    assert_string_equal(r.d_type, "f32");
    assert_string_equal(r.compute, "32F_FAST_TF32");
    assert_string_equal(r.algo, "given");
    assert_string_equal(r.tile, "256x128");
    assert_string_equal(r.stages, "128x2");
    assert_int_equal(r.splitk, 8);
    assert_string_equal(r.reduction, "output");
    assert_int_equal(r.swizzle, 1);
    assert_int_equal(r.custom, 3);
    assert_string_equal(r.cluster, "2x1x1");
    assert_true(r.workspace == (4u << 20));

    /* No algorithm: cuBLASLt's heuristic, nothing known of the tile. */
    memset(&r, 0, sizeof(r));
    ulp__gemm_describe_lt(&real_getters, desc, a, b, c, d, NULL, 0, &r);
    assert_string_equal(r.algo, "heuristic");
    assert_string_equal(r.tile, "");
    assert_int_equal(r.splitk, 0);
    assert_int_equal(r.algo_id, -1);
    assert_true(r.m == 300 && r.k == 7168);

    /* A name a later cuBLASLt may add is written by value. */
    char buf[16];
    ulp__gemm_tile_name(60000, buf, sizeof(buf));
    assert_string_equal(buf, "#60000");
    ulp__gemm_dtype_name(1000, buf, sizeof(buf));
    assert_string_equal(buf, "R1000");

    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatmulDescDestroy(desc);
}

static void test_cuda_gemm__describe_ex(void **state)
{
    (void)state;
    ulp__gemm_row r;
    memset(&r, 0, sizeof(r));
    ulp__gemm_describe_ex("cublasGemmStridedBatchedEx", CUBLAS_OP_C, CUBLAS_OP_N, 5, 6, 7, 9,
                          CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC,
                          CUBLAS_GEMM_DEFAULT_TENSOR_OP, &r);
    assert_string_equal(r.api, "cublasGemmStridedBatchedEx");
    assert_string_equal(r.transa, "C");
    assert_true(r.m == 5 && r.n == 6 && r.k == 7 && r.batch == 9);
    assert_string_equal(r.a_type, "bf16");
    assert_string_equal(r.d_type, "f32");
    assert_string_equal(r.compute, "32F_PEDANTIC");
    assert_string_equal(r.algo, "cublas");
    assert_int_equal(r.algo_id, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
}

/* --- the log ----------------------------------------------------------- */

static ulp__gemm_row got[16];
static size_t ngot, nbatches;
static int sink_fails;

static ulp_status sink_rows(void *ctx, const ulp__gemm_row *rows, size_t n)
{
    (void)ctx;
    if (sink_fails)
        return ULP_EIO;
    assert_true(ngot + n <= 16);
    memcpy(&got[ngot], rows, n * sizeof(*rows));
    ngot += n;
    nbatches++;
    return ULP_OK;
}

static void add(ulp__gemm_log *log, uint64_t stream, int64_t m)
{
    ulp__gemm_row r;
    memset(&r, 0, sizeof(r));
    r.stream = stream;
    r.m = m;
    ulp__gemm_log_add(log, &r);
}

static void expect_take(ulp__gemm_log *log, int any, uint64_t stream, int64_t first, int64_t last)
{
    int64_t range[2] = {-1, -1};
    assert_int_equal(ulp__gemm_log_take(log, any, stream, range), 1);
    if (range[0] != first || range[1] != last)
        fail_msg("take(%d, %llu): [%lld, %lld), expected [%lld, %lld)", any,
                 (unsigned long long)stream, (long long)range[0], (long long)range[1],
                 (long long)first, (long long)last);
}

static void test_cuda_gemm__log(void **state)
{
    (void)state;
    ngot = nbatches = 0;
    sink_fails = 0;
    ulp__gemm_sink sink = {NULL, sink_rows};
    ulp__gemm_log *log = NULL;
    assert_int_equal(ulp__gemm_log_create(&sink, &log), ULP_OK);
    add(log, 1, 10);              /* row 0 */
    add(log, 2, 20);              /* row 1 */
    add(log, 1, 11);              /* row 2 */
    assert_int_equal(ngot, 0);    /* queued until a capture takes them */
    expect_take(log, 0, 1, 0, 3); /* stream 1: rows 0 and 2 (row 1 inside) */
    assert_int_equal(ngot, 3);    /* in the file before the capture */
    for (size_t i = 0; i < 3; i++)
        assert_true(got[i].seq == i);
    assert_true(got[1].m == 20 && got[1].stream == 2);
    expect_take(log, 0, 1, 3, 3); /* nothing new on stream 1 */
    expect_take(log, 0, 2, 1, 2); /* stream 2 still has its row */
    expect_take(log, 0, 2, 3, 3);
    add(log, 3, 30);              /* row 3 */
    add(log, 2, 21);              /* row 4 */
    expect_take(log, 1, 0, 3, 5); /* any stream: both */
    expect_take(log, 0, 3, 5, 5); /* taken by the any-stream capture */
    assert_int_equal(ulp__gemm_log_rows(log), 5);
    /* A sink error stops the log: no range is given for later rows. */
    sink_fails = 1;
    add(log, 1, 12);
    int64_t range[2];
    assert_int_equal(ulp__gemm_log_take(log, 0, 1, range), 0);
    add(log, 1, 13);
    assert_int_equal(ulp__gemm_log_rows(log), 6);
    ulp__gemm_log_free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_gemm__describe_lt),
        cmocka_unit_test(test_cuda_gemm__describe_ex),
        cmocka_unit_test(test_cuda_gemm__log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void)
{
    printf("SKIPPED: test_cuda_gemm needs the CUDA collector core (ULPPROF_WITH_CUDA=ON)\n");
    return 0;
}
#endif
