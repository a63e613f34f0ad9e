/*
 * Interposed cuBLAS / cuBLASLt entry points: cublasLtMatmul, cublasGemmEx,
 * cublasGemmStridedBatchedEx, and the typed cublasSgemm_v2 and
 * cublasDgemm_v2 (PyTorch's f32 and f64 matmuls call them) with their
 * strided-batched forms (its bmm); cublasHgemm is declared for C++ only,
 * and half-precision callers mostly use cublasGemmEx.  They take effect
 * when libulpprof_cuda.so is preloaded (LD_PRELOAD, `ulpprof record
 * --gemms`): the program's
 * calls reach these definitions first, which describe the call
 * (cuda_gemm.h), forward it to the next definition (dlsym RTLD_NEXT, else
 * the already-loaded library), note the CUPTI correlation ids of the
 * kernels it launched, and log one /trace/gemms row.  Loaded only as the
 * CUDA/NVTX injection, they are never reached, or forward unchanged.
 *
 * libcublas calls cublasLtMatmul itself through the dynamic linker, so a
 * cublasGemmEx reaches the cublasLtMatmul wrapper too: the inner call's
 * algorithm goes into the outer call's row, which is the one logged.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cublas_api.h>

#include "cuda_cupti.h"
#include "cuda_gemm.h"
#include "cuda_inject.h"
#include "ulpprof/export.h"

/* The call being described on this thread, and its nesting depth. */
static __thread ulp__gemm_row *t_outer;
static __thread int t_depth;

/* The next definition of `name` that is not ours, or NULL. */
static void *next_symbol(const char *name, void *self)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p != NULL && p != self)
        return p;
    /* Not after us in the lookup order (we were not preloaded): the loaded
     * library itself.  Never loads one. */
    static const char *const libs[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublas.so.13",
                                       "libcublas.so.12", NULL};
    for (const char *const *l = libs; *l; l++) {
        void *h = dlopen(*l, RTLD_NOW | RTLD_NOLOAD);
        if (h == NULL)
            continue;
        p = dlsym(h, name);
        dlclose(h);
        if (p != NULL && p != self)
            return p;
    }
    return NULL;
}

/* The definition `var` caches, looked up once: next_symbol(name, self). */
static void *resolved(_Atomic(void *) *var, const char *name, void *self)
{
    void *p = atomic_load(var);
    if (p == NULL) {
        p = next_symbol(name, self);
        atomic_store(var, p);
    }
    return p;
}

static _Atomic(void *) g_desc_get, g_layout_get, g_algo_get, g_get_stream;

static int getters(ulp__cublaslt_getters *g)
{
    void *d = resolved(&g_desc_get, "cublasLtMatmulDescGetAttribute", NULL);
    void *l = resolved(&g_layout_get, "cublasLtMatrixLayoutGetAttribute", NULL);
    void *a = resolved(&g_algo_get, "cublasLtMatmulAlgoConfigGetAttribute", NULL);
    if (d == NULL || l == NULL || a == NULL)
        return -1;
    memcpy(&g->desc_get, &d, sizeof(d));
    memcpy(&g->layout_get, &l, sizeof(l));
    memcpy(&g->algo_get, &a, sizeof(a));
    return 0;
}

/* Whether this call is recorded: collection on, and not a nested call. */
static int begin(ulp__gemm_row *row)
{
    memset(row, 0, sizeof(*row));
    if (t_depth++ > 0 || !ulp__inject_enabled())
        return 0;
    t_outer = row;
    ulp__cupti_gemm_begin();
    return 1;
}

static void end(int recorded, ulp__gemm_row *row, cublasStatus_t st)
{
    t_depth--;
    if (!recorded)
        return;
    t_outer = NULL;
    ulp__cupti_gemm_end(&row->corr_first, &row->corr_last);
    row->status = (int32_t)st;
    ulp__inject_gemm(row);
}

static uint64_t handle_stream(cublasHandle_t h)
{
    void *p = resolved(&g_get_stream, "cublasGetStream_v2", NULL);
    cudaStream_t s = NULL;
    if (p != NULL) {
        cublasStatus_t (*fn)(cublasHandle_t, cudaStream_t *);
        memcpy(&fn, &p, sizeof(p));
        if (fn(h, &s) != CUBLAS_STATUS_SUCCESS)
            s = NULL;
    }
    return (uint64_t)(uintptr_t)s;
}

/* A cublas*Ex or typed call's row: its description and the handle's stream. */
static void describe(ulp__gemm_row *row, const char *api, cublasHandle_t h, cublasOperation_t ta,
                     cublasOperation_t tb, int m, int n, int k, int batch, cudaDataType_t at,
                     cudaDataType_t bt, cudaDataType_t ct, int compute, int algo)
{
    ulp__gemm_describe_ex(api, ta, tb, m, n, k, batch, at, bt, ct, compute, algo, row);
    row->stream = handle_stream(h);
}

typedef cublasStatus_t (*lt_matmul_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,
                                       const void *, cublasLtMatrixLayout_t, const void *,
                                       cublasLtMatrixLayout_t, const void *, const void *,
                                       cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                       const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
static _Atomic(void *) g_lt_matmul;

ULP_API cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                      const void *alpha, const void *A, cublasLtMatrixLayout_t ad,
                                      const void *B, cublasLtMatrixLayout_t bd, const void *beta,
                                      const void *C, cublasLtMatrixLayout_t cd, void *D,
                                      cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo,
                                      void *ws, size_t ws_bytes, cudaStream_t stream)
{
    void *p = resolved(&g_lt_matmul, "cublasLtMatmul", (void *)cublasLtMatmul);
    if (p == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_matmul_fn real;
    memcpy(&real, &p, sizeof(p));
    ulp__cublaslt_getters g;
    int have_getters = getters(&g) == 0;
    ulp__gemm_row *outer = t_depth > 0 ? t_outer : NULL;
    if (outer != NULL && have_getters && strcmp(outer->algo, "cublas") == 0) {
        /* cuBLAS's own call: its algorithm is the outer call's (still
         * "cublas": cuBLAS chose it). */
        ulp__gemm_row inner;
        memset(&inner, 0, sizeof(inner));
        ulp__gemm_describe_lt(&g, desc, ad, bd, cd, dd, algo, ws_bytes, &inner);
        outer->algo_id = inner.algo_id;
        memcpy(outer->tile, inner.tile, sizeof(outer->tile));
        memcpy(outer->stages, inner.stages, sizeof(outer->stages));
        outer->splitk = inner.splitk;
        memcpy(outer->reduction, inner.reduction, sizeof(outer->reduction));
        outer->swizzle = inner.swizzle;
        outer->custom = inner.custom;
        memcpy(outer->cluster, inner.cluster, sizeof(outer->cluster));
        outer->workspace = inner.workspace;
        outer->epilogue = inner.epilogue;
    }
    ulp__gemm_row row;
    int rec = begin(&row);
    if (rec && have_getters) {
        ulp__gemm_describe_lt(&g, desc, ad, bd, cd, dd, algo, ws_bytes, &row);
        row.stream = (uint64_t)(uintptr_t)stream;
    } else if (rec) {
        snprintf(row.api, sizeof(row.api), "cublasLtMatmul");
    }
    cublasStatus_t st =
        real(h, desc, alpha, A, ad, B, bd, beta, C, cd, D, dd, algo, ws, ws_bytes, stream);
    end(rec, &row, st);
    return st;
}

typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                     int, const void *, const void *, cudaDataType, int,
                                     const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static _Atomic(void *) g_gemm_ex;

ULP_API cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                    int m, int n, int k, const void *alpha, const void *A,
                                    cudaDataType at, int lda, const void *B, cudaDataType bt,
                                    int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                    cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    void *p = resolved(&g_gemm_ex, "cublasGemmEx", (void *)cublasGemmEx);
    if (p == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    gemm_ex_fn real;
    memcpy(&real, &p, sizeof(p));
    ulp__gemm_row row;
    int rec = begin(&row);
    if (rec)
        describe(&row, "cublasGemmEx", h, ta, tb, m, n, k, 1, at, bt, ct, (int)compute, (int)algo);
    cublasStatus_t st =
        real(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
    end(rec, &row, st);
    return st;
}

typedef cublasStatus_t (*gemm_sb_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                     int, const void *, const void *, cudaDataType, int, long long,
                                     const void *, cudaDataType, int, long long, const void *,
                                     void *, cudaDataType, int, long long, int, cublasComputeType_t,
                                     cublasGemmAlgo_t);
static _Atomic(void *) g_gemm_sb;

ULP_API cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    void *p =
        resolved(&g_gemm_sb, "cublasGemmStridedBatchedEx", (void *)cublasGemmStridedBatchedEx);
    if (p == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    gemm_sb_fn real;
    memcpy(&real, &p, sizeof(p));
    ulp__gemm_row row;
    int rec = begin(&row);
    if (rec)
        describe(&row, "cublasGemmStridedBatchedEx", h, ta, tb, m, n, k, batch, at, bt, ct,
                 (int)compute, (int)algo);
    cublasStatus_t st = real(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct,
                             ldc, sc, batch, compute, algo);
    end(rec, &row, st);
    return st;
}

/* --- the typed calls ------------------------------------------------------------ */

static _Atomic(void *) g_get_math;

/*
 * The compute type a typed call runs with, which the handle's math mode
 * decides (cuBLAS's documentation of cublasMath_t): pedantic, TF32 tensor
 * cores for single precision, or the type's own.
 */
static int typed_compute(cublasHandle_t h, cudaDataType_t t)
{
    void *p = resolved(&g_get_math, "cublasGetMathMode", NULL);
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
    if (p != NULL) {
        cublasStatus_t (*fn)(cublasHandle_t, cublasMath_t *);
        memcpy(&fn, &p, sizeof(p));
        if (fn(h, &mode) != CUBLAS_STATUS_SUCCESS)
            mode = CUBLAS_DEFAULT_MATH;
    }
    int pedantic = ((unsigned)mode & 0xfu) == CUBLAS_PEDANTIC_MATH;
    int tf32 = ((unsigned)mode & 0xfu) == CUBLAS_TF32_TENSOR_OP_MATH;
    switch (t) {
    case CUDA_R_64F:
        return pedantic ? CUBLAS_COMPUTE_64F_PEDANTIC : CUBLAS_COMPUTE_64F;
    default:
        return pedantic ? CUBLAS_COMPUTE_32F_PEDANTIC
               : tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                        : CUBLAS_COMPUTE_32F;
    }
}

/* begin() for a typed call: its row, described, when it is recorded. */
static int typed_begin(ulp__gemm_row *row, const char *api, cublasHandle_t h, cublasOperation_t ta,
                       cublasOperation_t tb, int m, int n, int k, int batch, cudaDataType_t t)
{
    int rec = begin(row);
    if (rec)
        describe(row, api, h, ta, tb, m, n, k, batch, t, t, t, typed_compute(h, t),
                 CUBLAS_GEMM_DEFAULT);
    return rec;
}

/*
 * One typed GEMM entry point: its parameters, the call forwarded with them,
 * and its row.  T is the element type, DT its cudaDataType.
 */
#define TYPED_GEMM(NAME, T, DT)                                                                    \
    typedef cublasStatus_t (*NAME##_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, \
                                        int, int, const T *, const T *, int, const T *, int,       \
                                        const T *, T *, int);                                      \
    static _Atomic(void *) g_##NAME;                                                               \
    ULP_API cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,      \
                                int m, int n, int k, const T *alpha, const T *A, int lda,          \
                                const T *B, int ldb, const T *beta, T *C, int ldc)                 \
    {                                                                                              \
        void *p = resolved(&g_##NAME, #NAME, (void *)NAME);                                        \
        if (p == NULL)                                                                             \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
        NAME##_fn real;                                                                            \
        memcpy(&real, &p, sizeof(p));                                                              \
        ulp__gemm_row row;                                                                         \
        int rec = typed_begin(&row, #NAME, h, ta, tb, m, n, k, 1, DT);                             \
        cublasStatus_t st = real(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);         \
        end(rec, &row, st);                                                                        \
        return st;                                                                                 \
    }

#define TYPED_GEMM_STRIDED(NAME, T, DT)                                                            \
    typedef cublasStatus_t (*NAME##_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, \
                                        int, int, const T *, const T *, int, long long, const T *, \
                                        int, long long, const T *, T *, int, long long, int);      \
    static _Atomic(void *) g_##NAME;                                                               \
    ULP_API cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,      \
                                int m, int n, int k, const T *alpha, const T *A, int lda,          \
                                long long sa, const T *B, int ldb, long long sb, const T *beta,    \
                                T *C, int ldc, long long sc, int batch)                            \
    {                                                                                              \
        void *p = resolved(&g_##NAME, #NAME, (void *)NAME);                                        \
        if (p == NULL)                                                                             \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
        NAME##_fn real;                                                                            \
        memcpy(&real, &p, sizeof(p));                                                              \
        ulp__gemm_row row;                                                                         \
        int rec = typed_begin(&row, #NAME, h, ta, tb, m, n, k, batch, DT);                         \
        cublasStatus_t st =                                                                        \
            real(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);      \
        end(rec, &row, st);                                                                        \
        return st;                                                                                 \
    }

TYPED_GEMM(cublasSgemm_v2, float, CUDA_R_32F)
TYPED_GEMM(cublasDgemm_v2, double, CUDA_R_64F)
TYPED_GEMM_STRIDED(cublasSgemmStridedBatched, float, CUDA_R_32F)
TYPED_GEMM_STRIDED(cublasDgemmStridedBatched, double, CUDA_R_64F)

/* 1 when this library's cublasLtMatmul is the one the process calls (preloaded). */
static int interposing(void)
{
    void *p = dlsym(RTLD_DEFAULT, "cublasLtMatmul");
    void *self;
    lt_matmul_fn f = cublasLtMatmul;
    memcpy(&self, &f, sizeof(self));
    return p == self;
}

/* At load, before libcuda's first cuInit calls InitializeInjection. */
__attribute__((constructor)) static void register_gemm_source(void)
{
    ulp__inject_gemm_source(interposing);
}
