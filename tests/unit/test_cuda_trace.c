/*
 * CUPTI record decoding (capture/cuda/cuda_kernel.c) from synthetic
 * CUpti_ActivityKernel10 records, name demangling, and the trace's row
 * numbering (capture/cuda/cuda_trace.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef ULP_HAVE_CUDA_CORE
#include "cuda_kernel.h"
#include "cuda_trace.h"

static void test_cuda_trace__decode(void **state)
{
    (void)state;
    CUpti_ActivityKernel10 r;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.correlationId = 4242;
    r.gridX = 132, r.gridY = 2, r.gridZ = 1;
    r.blockX = 384, r.blockY = 1, r.blockZ = 1;
    r.staticSharedMemory = 1024;
    r.dynamicSharedMemory = 232448;
    r.registersPerThread = 168;
    r.streamId = 13;
    r.deviceId = 3;
    r.contextId = 1;
    r.start = 1000000123;
    r.end = 1000004567;
    r.graphNodeId = 77;
    r.name = "_Z6vecAddPKfS0_Pfi";
    ulp__cuda_kernel k;
    assert_int_equal(ulp__cuda_kernel_decode(&r, &k), ULP_OK);
    assert_int_equal(k.correlation_id, 4242);
    assert_int_equal(k.grid[0], 132);
    assert_int_equal(k.grid[1], 2);
    assert_int_equal(k.grid[2], 1);
    assert_int_equal(k.block[0], 384);
    assert_int_equal(k.block[1], 1);
    assert_int_equal(k.block[2], 1);
    assert_int_equal(k.shared_static, 1024);
    assert_int_equal(k.shared_dynamic, 232448);
    assert_int_equal(k.registers, 168);
    assert_int_equal(k.stream_id, 13);
    assert_int_equal(k.device, 3);
    assert_true(k.start_ns == 1000000123ull && k.end_ns == 1000004567ull);
    assert_true(k.graph_node_id == 77);
    /* The demangled form, as c++filt prints it. */
    assert_string_equal(k.name, "vecAdd(float const*, float const*, float*, int)");
    /* The record's name is CUPTI's: decoding copies it. */
    assert_ptr_not_equal(k.name, r.name);
    ulp__cuda_kernels_release(&k, 1);
    assert_null(k.name);

    /* extern "C" kernels and cuBLAS's own names are not mangled. */
    r.name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_cublas";
    assert_int_equal(ulp__cuda_kernel_decode(&r, &k), ULP_OK);
    assert_string_equal(k.name, r.name);
    ulp__cuda_kernels_release(&k, 1);
    r.name = NULL;
    assert_int_equal(ulp__cuda_kernel_decode(&r, &k), ULP_OK);
    assert_string_equal(k.name, "");
    ulp__cuda_kernels_release(&k, 1);
}

static void test_cuda_trace__demangle(void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } cases[] = {
        {"_Z6vecAddPKfS0_Pfi", "vecAdd(float const*, float const*, float*, int)"},
        {"_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE",
         "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(cutlass::gemm::kernel::Gemm::Params)"},
        {"_Z7rmsnormPK13__nv_bfloat16PS_i", "rmsnorm(__nv_bfloat16 const*, __nv_bfloat16*, int)"},
        {"_Zbroken", "_Zbroken"}, /* not a valid mangling: kept as is */
        {"plain_c_kernel", "plain_c_kernel"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *d = ulp__cuda_demangle(cases[i].in);
        assert_non_null(d);
        assert_string_equal(d, cases[i].out);
        free(d);
    }
}

static uint32_t seen_corr[32];
static uint64_t seen_first[8];
static size_t nseen, nbatches;

static ulp_status sink(void *ctx, const ulp__cuda_kernel *k, size_t n, uint64_t first)
{
    (void)ctx;
    seen_first[nbatches++] = first;
    for (size_t i = 0; i < n; i++)
        seen_corr[nseen++] = k[i].correlation_id;
    return ULP_OK;
}

static void test_cuda_trace__rows(void **state)
{
    (void)state;
    ulp__cuda_trace *t;
    ulp__cuda_trace_sink s = {NULL, sink};
    assert_int_equal(ulp__cuda_trace_create(&s, &t), ULP_OK);
    /* A batch is numbered in launch (correlation) order. */
    ulp__cuda_kernel b1[3];
    memset(b1, 0, sizeof(b1));
    b1[0].correlation_id = 9, b1[1].correlation_id = 2, b1[2].correlation_id = 5;
    assert_int_equal(ulp__cuda_trace_add(t, b1, 3), ULP_OK);
    /* One graph launch: many kernels with one id, in start order. */
    ulp__cuda_kernel b2[3];
    memset(b2, 0, sizeof(b2));
    b2[0].correlation_id = 20, b2[0].start_ns = 300;
    b2[1].correlation_id = 20, b2[1].start_ns = 100;
    b2[2].correlation_id = 20, b2[2].start_ns = 200;
    b2[0].grid[0] = 3, b2[1].grid[0] = 1, b2[2].grid[0] = 2;
    assert_int_equal(ulp__cuda_trace_add(t, b2, 3), ULP_OK);
    assert_true(b2[0].grid[0] == 1 && b2[1].grid[0] == 2 && b2[2].grid[0] == 3);
    assert_int_equal(nseen, 6);
    uint32_t want[6] = {2, 5, 9, 20, 20, 20};
    assert_memory_equal(seen_corr, want, sizeof(want));
    assert_true(seen_first[0] == 0 && seen_first[1] == 3);
    assert_true(ulp__cuda_trace_rows(t) == 6);
    /* Every stream's kernels below 21: rows 0..5. */
    int64_t r[2];
    assert_int_equal(ulp__cuda_trace_attribute(t, 1, 0, 21, r), 1);
    assert_true(r[0] == 0 && r[1] == 6);
    ulp__cuda_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_trace__decode),
        cmocka_unit_test(test_cuda_trace__demangle),
        cmocka_unit_test(test_cuda_trace__rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("SKIPPED: test_cuda_trace needs the CUDA collector core (ULPPROF_WITH_CUDA=ON)\n");
    return 0;
}
#endif
