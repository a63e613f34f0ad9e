/*
 * The reference workload's three GEMM backends.
 *
 * TILED is an EMULATION.  A GPU BLAS (cuBLAS, cuBLASLt) chooses its kernel
 * -- tile shape, split-K factor, reduction scheme -- from a heuristic keyed
 * on the problem shape, M included.  When M is small there are too few
 * output tiles to fill the machine, so the heuristic cuts K into chunks that
 * run in parallel and sums their partial results at the end.  The sum of the
 * same K products is then taken in a different order, and the fp32 result
 * can differ in the last bit.  That is the whole mechanism behind "a prefix
 * cache hit changes the logits": a hit computes the suffix with M = N mod 16
 * rows, a miss with M = N.  This backend reproduces the rule with a fixed,
 * documented table so that the divergence shows on every CPU:
 *
 *   M rows      emulated kernel     split-K   accumulation inside a chunk
 *   1..16       small-M  16 x 64       4      one fp32 accumulator, k ascending
 *   17..64      medium   64 x 64       2      one fp32 accumulator, k ascending
 *   65..256     large   128 x 128      1      one fp32 accumulator, k ascending
 *   257..       huge    256 x 128      1      two interleaved accumulators
 *                                             (even k, odd k), summed at the end
 *
 * Chunks are whole multiples of 16 along K (a k-tile); a K too short for
 * the split gets fewer chunks.  Partial sums are added in chunk order.  The
 * tile shape itself only changes the loop blocking, not the arithmetic.
 *
 * EXACT accumulates the exact fp32 products in fp64, k ascending, and rounds
 * once: no choice depends on M, so every output element is the same
 * function of its row of A and column of B in every call (batch-invariant).
 *
 * BLAS is the system OpenBLAS, unmodified.  It is loaded with dlopen() the
 * first time the backend is used, not linked: OpenBLAS starts its thread pool
 * when it is loaded, and the `ulpprof` program, which carries this model for
 * `ulpprof demo`, must not pay for (or compete with) those threads in `diff`.
 *
 * This file is compiled with -ffp-contract=off so that no compiler fuses a
 * multiply and an add behind our back: the TILED and EXACT results are the
 * same bits on every x86-64 and arm64 machine.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "refmodel_priv.h"

#ifdef ULP_REFMODEL_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define RM_IB 8   /* rows of A per block                                  */
#define RM_JB 256 /* columns of B per block (acc + partials stay in L1/L2) */
#define RM_KT 16  /* k-tile: split-K chunks are multiples of it           */

void ulp__rm_tile_for(int m, int k, ulp__rm_tile *out)
{
    (void)k;
    if (m <= 16) {
        out->name = "small-M 16x64, split-K 4";
        out->split_k = 4;
        out->lanes = 1;
    } else if (m <= 64) {
        out->name = "medium 64x64, split-K 2";
        out->split_k = 2;
        out->lanes = 1;
    } else if (m <= 256) {
        out->name = "large 128x128, split-K 1";
        out->split_k = 1;
        out->lanes = 1;
    } else {
        out->name = "huge 256x128, split-K 1, 2 k-lanes";
        out->split_k = 1;
        out->lanes = 2;
    }
}

static void gemm_tiled(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc)
{
    ulp__rm_tile t;
    ulp__rm_tile_for(m, k, &t);
    int chunk = (k + t.split_k - 1) / t.split_k;
    chunk = (chunk + RM_KT - 1) / RM_KT * RM_KT;
    if (chunk == 0)
        chunk = RM_KT;

    static _Thread_local float acc[RM_IB][RM_JB];
    static _Thread_local float part[2][RM_IB][RM_JB];

    for (int i0 = 0; i0 < m; i0 += RM_IB) {
        int ib = m - i0 < RM_IB ? m - i0 : RM_IB;
        for (int j0 = 0; j0 < n; j0 += RM_JB) {
            int jb = n - j0 < RM_JB ? n - j0 : RM_JB;
            int first = 1;
            for (int ks = 0; ks < k || first; ks += chunk) {
                int ke = ks + chunk < k ? ks + chunk : k;
                for (int l = 0; l < t.lanes; l++)
                    for (int r = 0; r < ib; r++)
                        memset(part[l][r], 0, sizeof(float) * (size_t)jb);
                for (int kk = ks; kk < ke; kk++) {
                    int lane = (kk - ks) % t.lanes;
                    const float *bk = b + (size_t)kk * (size_t)ldb + j0;
                    for (int r = 0; r < ib; r++) {
                        float av = a[(size_t)(i0 + r) * (size_t)lda + (size_t)kk];
                        float *p = part[lane][r];
                        for (int jj = 0; jj < jb; jj++)
                            p[jj] += av * bk[jj];
                    }
                }
                for (int r = 0; r < ib; r++) {
                    for (int jj = 0; jj < jb; jj++) {
                        float sum = part[0][r][jj];
                        if (t.lanes == 2)
                            sum += part[1][r][jj];
                        acc[r][jj] = first ? sum : acc[r][jj] + sum;
                    }
                }
                first = 0;
            }
            for (int r = 0; r < ib; r++)
                memcpy(c + (size_t)(i0 + r) * (size_t)ldc + j0, acc[r], sizeof(float) * (size_t)jb);
        }
    }
}

static void gemm_exact(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc)
{
    static _Thread_local double part[RM_IB][RM_JB];

    for (int i0 = 0; i0 < m; i0 += RM_IB) {
        int ib = m - i0 < RM_IB ? m - i0 : RM_IB;
        for (int j0 = 0; j0 < n; j0 += RM_JB) {
            int jb = n - j0 < RM_JB ? n - j0 : RM_JB;
            for (int r = 0; r < ib; r++)
                memset(part[r], 0, sizeof(double) * (size_t)jb);
            for (int kk = 0; kk < k; kk++) {
                const float *bk = b + (size_t)kk * (size_t)ldb + j0;
                for (int r = 0; r < ib; r++) {
                    /* The product of two floats is exact in double. */
                    double av = (double)a[(size_t)(i0 + r) * (size_t)lda + (size_t)kk];
                    double *p = part[r];
                    for (int jj = 0; jj < jb; jj++)
                        p[jj] += av * (double)bk[jj];
                }
            }
            for (int r = 0; r < ib; r++) {
                float *cr = c + (size_t)(i0 + r) * (size_t)ldc + j0;
                for (int jj = 0; jj < jb; jj++)
                    cr[jj] = (float)part[r][jj];
            }
        }
    }
}

/* OpenBLAS, resolved at run time (see the top of this file). */
static struct {
    pthread_once_t once;
    void *handle;
#ifdef ULP_REFMODEL_HAVE_OPENBLAS /* cblas.h's types; without them, no sgemm to call */
    void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint,
                  blasint, float, const float *, blasint, const float *, blasint, float, float *,
                  blasint);
#endif
    void (*set_num_threads)(int);
    char *(*get_config)(void);
    char *(*get_corename)(void);
    const char *other; /* ULPPROF_BLAS, when set */
} blas = {.once = PTHREAD_ONCE_INIT};

#ifdef ULP_REFMODEL_HAVE_OPENBLAS
static void blas_load(void)
{
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
    /* ULPPROF_BLAS names another CBLAS library (docs/demo.md): the reference
     * BLAS, BLIS -- the same GEMMs by another implementation. */
    const char *other = getenv("ULPPROF_BLAS");
    if (other != NULL && other[0] != '\0') {
        blas.handle = dlopen(other, RTLD_NOW | RTLD_LOCAL);
        blas.other = other;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0] && blas.handle == NULL && !blas.other;
         i++)
        blas.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (blas.handle == NULL)
        return;
    /* POSIX allows converting dlsym's void * to a function pointer this way. */
    *(void **)&blas.sgemm = dlsym(blas.handle, "cblas_sgemm");
    *(void **)&blas.set_num_threads = dlsym(blas.handle, "openblas_set_num_threads");
    *(void **)&blas.get_config = dlsym(blas.handle, "openblas_get_config");
    *(void **)&blas.get_corename = dlsym(blas.handle, "openblas_get_corename");
    if (blas.sgemm == NULL || (blas.set_num_threads == NULL && blas.other == NULL)) {
        dlclose(blas.handle);
        blas.handle = NULL;
    }
}
#endif

ulp_status ulp__rm_blas_load(ulp_error *err)
{
#ifdef ULP_REFMODEL_HAVE_OPENBLAS
    pthread_once(&blas.once, blas_load);
    if (blas.handle != NULL)
        return ULP_OK;
    if (blas.other != NULL)
        return ulp__error(err, ULP_EUNSUPPORTED,
                          "cannot load ULPPROF_BLAS='%s' with cblas_sgemm: use --gemm tiled",
                          blas.other);
    return ulp__error(err, ULP_EUNSUPPORTED,
                      "cannot load OpenBLAS (libopenblas.so.0): use --gemm tiled");
#else
    return ulp__error(err, ULP_EUNSUPPORTED, "this build has no OpenBLAS: use --gemm tiled");
#endif
}

static _Thread_local ulp__rm_gemm_log *gemm_log;

void ulp__rm_gemm_log_set(ulp__rm_gemm_log *log)
{
    gemm_log = log;
}

void ulp__rm_gemm_log_release(ulp__rm_gemm_log *log)
{
    free(log->rows);
    log->rows = NULL;
    log->n = log->cap = 0;
}

#define COPY_STR(dst, src) snprintf((dst), sizeof(dst), "%.*s", (int)sizeof(dst) - 1, (src))

/*
 * The call's /trace/gemms row.  CBLAS row-major terms: C (m x n) = A (m x k)
 * B (k x n), so m is the token count.  The operands hold bf16 values (the
 * activations and weights are rounded before every GEMM); the product is
 * left in fp32 for the caller to round.
 */
static void log_call(ulp_refmodel_gemm g, int m, int n, int k)
{
    ulp__rm_gemm_log *log = gemm_log;
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 256;
        ulp_gemm_info *rows = realloc(log->rows, cap * sizeof *rows);
        if (rows == NULL) {
            log->out_of_mem = 1;
            return;
        }
        log->rows = rows;
        log->cap = cap;
    }
    ulp_gemm_info *r = &log->rows[log->n++];
    memset(r, 0, sizeof *r);
    r->seq = log->seq++;
    r->m = m;
    r->n = n;
    r->k = k;
    r->batch = 1;
    COPY_STR(r->transa, "N");
    COPY_STR(r->transb, "N");
    COPY_STR(r->a_type, "bf16");
    COPY_STR(r->b_type, "bf16");
    COPY_STR(r->c_type, "f32");
    COPY_STR(r->d_type, "f32");
    r->algo_id = -1;
    switch (g) {
    case ULP_REFMODEL_GEMM_BLAS: {
        COPY_STR(r->api, "cblas_sgemm");
        COPY_STR(r->compute, "32F");
        /* The BLAS's kernel is its core type (OpenBLAS's dynamic dispatch). */
        const char *core = NULL;
#ifdef ULP_REFMODEL_HAVE_OPENBLAS
        core = blas.get_corename ? blas.get_corename() : NULL;
#endif
        COPY_STR(r->algo, core ? core : "");
        break;
    }
    case ULP_REFMODEL_GEMM_EXACT:
        COPY_STR(r->api, "refmodel exact");
        COPY_STR(r->compute, "64F");
        COPY_STR(r->algo, "exact");
        r->splitk = 1;
        COPY_STR(r->reduction, "none");
        break;
    case ULP_REFMODEL_GEMM_TILED: {
        ulp__rm_tile t;
        ulp__rm_tile_for(m, k, &t);
        COPY_STR(r->api, "refmodel tiled");
        COPY_STR(r->compute, "32F");
        /* "small-M 16x64, split-K 4" -> algo small-M, tile 16x64. */
        char kind[48];
        snprintf(kind, sizeof kind, "%.*s", (int)strcspn(t.name, ","), t.name);
        char *sp = strrchr(kind, ' ');
        if (sp != NULL) {
            *sp = '\0';
            COPY_STR(r->tile, sp + 1);
        }
        COPY_STR(r->algo, kind);
        if (t.lanes > 1 &&
            snprintf(r->stages, sizeof r->stages, "%d k-lanes", t.lanes) >= (int)sizeof r->stages)
            r->stages[0] = '\0'; /* cannot happen: a lane count has at most a few digits */
        r->splitk = t.split_k;
        COPY_STR(r->reduction, "none");
        break;
    }
    }
}

void ulp__rm_gemm(ulp_refmodel_gemm g, int m, int n, int k, const float *a, int lda, const float *b,
                  int ldb, float *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (gemm_log != NULL)
        log_call(g, m, n, k);
    switch (g) {
    case ULP_REFMODEL_GEMM_BLAS:
#ifdef ULP_REFMODEL_HAVE_OPENBLAS
        if (blas.sgemm != NULL) {
            blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
                       0.0f, c, ldc);
            return;
        }
#endif
        break; /* refused earlier by ulp__rm_blas_load(); fall back to be safe */
    case ULP_REFMODEL_GEMM_EXACT:
        gemm_exact(m, n, k, a, lda, b, ldb, c, ldc);
        return;
    case ULP_REFMODEL_GEMM_TILED:
        break;
    }
    gemm_tiled(m, n, k, a, lda, b, ldb, c, ldc);
}

void ulp__rm_blas_threads(int threads)
{
    if (blas.set_num_threads != NULL)
        blas.set_num_threads(threads > 0 ? threads : 1);
}

const char *ulp_refmodel_blas_info(void)
{
    if (ulp__rm_blas_load(NULL) != ULP_OK)
        return "none";
    static _Thread_local char buf[256];
    if (blas.get_config == NULL && blas.other != NULL) {
        snprintf(buf, sizeof buf, "CBLAS %s", blas.other);
        return buf;
    }
    const char *cfg = blas.get_config ? blas.get_config() : NULL;
    const char *core = blas.get_corename ? blas.get_corename() : NULL;
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> keep the version. */
    char ver[64] = "OpenBLAS";
    if (cfg && strncmp(cfg, "OpenBLAS ", 9) == 0) {
        size_t len = strcspn(cfg + 9, " ");
        if (len > 40)
            len = 40;
        memcpy(ver + 8, " ", 1);
        memcpy(ver + 9, cfg + 9, len);
        ver[9 + len] = '\0';
    }
    snprintf(buf, sizeof buf, "%s (core %s)", ver, core ? core : "unknown");
    return buf;
}
