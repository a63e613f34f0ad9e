/*
 * The reference workload (workload/): the GEMM backends against
 * independent implementations of what they document, the paged prefix
 * cache, and the properties the demo relies on -- a repeat is bitwise
 * identical, split equals hit, with an M-independent GEMM hit equals miss,
 * with the emulated M-dependent GEMM they differ from layer 0 on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "refmodel_priv.h"
#include "ulpprof/refmodel.h"
#include "ulpprof/snapshot.h"

/* --- helpers ----------------------------------------------------------------- */

static char tmpdir[1024];

static int setup_tmp(void **state)
{
    (void)state;
    const char *base = getenv("ULPPROF_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0777);
    snprintf(tmpdir, sizeof tmpdir, "%s/refmodel-XXXXXX", base);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    /* bf16-valued, in [-1, 1): the model's GEMM inputs are bf16. */
    float f = (float)((int32_t)(*s >> 40) - (1 << 23)) * 0x1p-23f;
    return ulp__rm_round_bf16(f);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand(&seed);
}

/* --- GEMM backends ------------------------------------------------------------- */

/*
 * The TILED table of refmodel_gemm.c, written again from its documentation:
 * split-K 4 / 2 / 1 / 1 for M up to 16 / 64 / 256 / more, chunks rounded up
 * to a multiple of 16, two interleaved accumulators above 256 rows.
 */
static float tiled_reference(int m, int k, const float *arow, const float *b, int ldb, int col)
{
    int split = m <= 16 ? 4 : m <= 64 ? 2 : 1;
    int lanes = m > 256 ? 2 : 1;
    int chunk = (k + split - 1) / split;
    chunk = (chunk + 15) / 16 * 16;
    if (chunk == 0)
        chunk = 16;
    float total = 0.0f;
    int first = 1;
    for (int ks = 0; ks < k || first; ks += chunk) {
        int ke = ks + chunk < k ? ks + chunk : k;
        float lane[2] = {0.0f, 0.0f};
        for (int kk = ks; kk < ke; kk++) {
            float prod = arow[kk] * b[(size_t)kk * (size_t)ldb + (size_t)col];
            lane[(kk - ks) % lanes] = lane[(kk - ks) % lanes] + prod;
        }
        float sum = lanes == 2 ? lane[0] + lane[1] : lane[0];
        total = first ? sum : total + sum;
        first = 0;
    }
    return total;
}

static void test_refmodel__tiled_matches_documented_order(void **state)
{
    (void)state;
    const int ms[] = {1, 5, 16, 17, 40, 64, 65, 200, 256, 257, 300};
    const int ks[] = {0, 1, 15, 37, 256, 300};
    const int n = 19, lda_pad = 3, ldc_pad = 2;
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            int m = ms[mi], k = ks[ki], lda = k + lda_pad, ldc = n + ldc_pad;
            float *a = malloc(sizeof(float) * (size_t)(m * lda + 1));
            float *b = malloc(sizeof(float) * (size_t)(k * n + 1));
            float *c = malloc(sizeof(float) * (size_t)(m * ldc));
            fill(a, (size_t)(m * lda), 1 + (uint64_t)m);
            fill(b, (size_t)(k * n), 2 + (uint64_t)k);
            for (int i = 0; i < m * ldc; i++)
                c[i] = 12345.0f; /* padding must survive */
            ulp__rm_gemm(ULP_REFMODEL_GEMM_TILED, m, n, k, a, lda, b, n, c, ldc);
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < n; j++) {
                    float want = tiled_reference(m, k, a + (size_t)i * (size_t)lda, b, n, j);
                    float got = c[(size_t)i * (size_t)ldc + (size_t)j];
                    if (memcmp(&want, &got, 4) != 0)
                        fail_msg("M=%d K=%d (%d,%d): got %a want %a", m, k, i, j, (double)got,
                                 (double)want);
                }
                for (int j = n; j < ldc; j++)
                    assert_true(c[(size_t)i * (size_t)ldc + (size_t)j] == 12345.0f);
            }
            free(a), free(b), free(c);
        }
    }
}

static void test_refmodel__exact_is_rounded_fp64_sum(void **state)
{
    (void)state;
    const int m = 37, n = 300, k = 513;
    float *a = malloc(sizeof(float) * (size_t)(m * k));
    float *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    fill(a, (size_t)(m * k), 11);
    fill(b, (size_t)(k * n), 12);
    ulp__rm_gemm(ULP_REFMODEL_GEMM_EXACT, m, n, k, a, k, b, n, c, n);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int kk = 0; kk < k; kk++)
                s += (double)a[i * k + kk] * (double)b[kk * n + j];
            float want = (float)s;
            assert_memory_equal(&want, &c[i * n + j], 4);
        }
    }
    free(a), free(b), free(c);
}

/* Rows [off, off+s) computed inside an M = off+s+extra GEMM and alone. */
static size_t rows_differing(ulp_refmodel_gemm g, int m_big, int off, int s, int k, int n)
{
    float *a = malloc(sizeof(float) * (size_t)(m_big * k));
    float *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c1 = malloc(sizeof(float) * (size_t)(m_big * n));
    float *c2 = malloc(sizeof(float) * (size_t)(s * n));
    fill(a, (size_t)(m_big * k), 21);
    fill(b, (size_t)(k * n), 22);
    ulp__rm_gemm(g, m_big, n, k, a, k, b, n, c1, n);
    ulp__rm_gemm(g, s, n, k, a + (size_t)off * (size_t)k, k, b, n, c2, n);
    size_t d = 0;
    for (size_t i = 0; i < (size_t)(s * n); i++) {
        d += memcmp(&c1[(size_t)off * (size_t)n + i], &c2[i], 4) != 0;
        /* Whatever the order, the two results are close. */
        double x = (double)c1[(size_t)off * (size_t)n + i], y = (double)c2[i];
        assert_true(x - y < 1e-4 && y - x < 1e-4);
    }
    free(a), free(b), free(c1), free(c2);
    return d;
}

static void test_refmodel__exact_is_m_independent(void **state)
{
    (void)state;
    assert_int_equal(rows_differing(ULP_REFMODEL_GEMM_EXACT, 127, 112, 15, 256, 256), 0);
    assert_int_equal(rows_differing(ULP_REFMODEL_GEMM_EXACT, 526, 511, 15, 768, 64), 0);
    assert_int_equal(rows_differing(ULP_REFMODEL_GEMM_EXACT, 113, 112, 1, 256, 100), 0);
}

static void test_refmodel__tiled_is_m_dependent(void **state)
{
    (void)state;
    /* M=127 (split-K 1) vs M=15 (split-K 4): the mechanism the demo shows. */
    size_t d = rows_differing(ULP_REFMODEL_GEMM_TILED, 127, 112, 15, 256, 256);
    assert_true(d > 0);
    assert_true(d < 15 * 256);
    /* Same tier, same order: M=100 and M=80 both use split-K 1. */
    assert_int_equal(rows_differing(ULP_REFMODEL_GEMM_TILED, 100, 20, 80, 256, 64), 0);
}

static void test_refmodel__blas_agrees_with_exact(void **state)
{
    (void)state;
    if (strcmp(ulp_refmodel_blas_info(), "none") == 0)
        skip();
    const int m = 20, n = 70, k = 300;
    float *a = malloc(sizeof(float) * (size_t)(m * k));
    float *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c1 = malloc(sizeof(float) * (size_t)(m * n));
    float *c2 = malloc(sizeof(float) * (size_t)(m * n));
    fill(a, (size_t)(m * k), 31);
    fill(b, (size_t)(k * n), 32);
    ulp__rm_blas_threads(1);
    ulp__rm_gemm(ULP_REFMODEL_GEMM_BLAS, m, n, k, a, k, b, n, c1, n);
    ulp__rm_gemm(ULP_REFMODEL_GEMM_EXACT, m, n, k, a, k, b, n, c2, n);
    for (int i = 0; i < m * n; i++) {
        double d = (double)c1[i] - (double)c2[i];
        assert_true(d < 1e-4 && d > -1e-4);
    }
    assert_non_null(strstr(ulp_refmodel_blas_info(), "OpenBLAS"));
    free(a), free(b), free(c1), free(c2);
}

/* --- Prefix cache ------------------------------------------------------------------ */

static void test_refmodel__prefix_cache_reuses_blocks(void **state)
{
    (void)state;
    ulp_refmodel_dims d;
    assert_int_equal(ulp_refmodel_preset("tiny", &d), ULP_OK);
    d.layers = 1;
    ulp__rm_kvcache c;
    assert_int_equal(ulp__rm_kvcache_init(&c, &d, 16, NULL), ULP_OK);
    int32_t t1[40], t2[40];
    ulp__rm_prompt(5, 0, 40, d.vocab, t1);
    memcpy(t2, t1, sizeof t1);
    t2[20] ^= 1; /* differs in block 1 */

    ulp__rm_seq s1, s2, s3;
    assert_int_equal(ulp__rm_seq_init(&s1, &c, t1, 32, 0, 0, NULL), ULP_OK);
    s1.computed = 32; /* as if a forward pass had filled it */
    ulp__rm_seq_publish(&s1, &c);

    assert_int_equal(ulp__rm_seq_init(&s2, &c, t1, 40, 1, 32, NULL), ULP_OK);
    assert_int_equal(s2.computed, 32);
    assert_int_equal(s2.block_table[0], s1.block_table[0]);
    assert_int_equal(s2.block_table[1], s1.block_table[1]);
    assert_true(s2.block_table[2] != s1.block_table[0] && s2.block_table[2] != s1.block_table[1]);

    /* A different second block: only the first is reused; the cap limits reuse. */
    assert_int_equal(ulp__rm_seq_init(&s3, &c, t2, 40, 1, 32, NULL), ULP_OK);
    assert_int_equal(s3.computed, 16);
    ulp__rm_seq_release(&s3);
    assert_int_equal(ulp__rm_seq_init(&s3, &c, t1, 40, 1, 16, NULL), ULP_OK);
    assert_int_equal(s3.computed, 16);

    ulp__rm_seq_release(&s1);
    ulp__rm_seq_release(&s2);
    ulp__rm_seq_release(&s3);
    ulp__rm_kvcache_release(&c);
}

/* --- Model runs -------------------------------------------------------------------- */

/* The captures before token alignment (suffix rows, no positions); 0 for every position. */
static int g_suffix_only = 1;

static char *run_model(const char *tag, const char *mode, ulp_refmodel_gemm g, int layers)
{
    static char paths[16][1200];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, 1200, "%s/%s.h5", tmpdir, tag);
    ulp_refmodel_options o;
    ulp_refmodel_options_init(&o);
    o.dims.layers = layers;
    assert_int_equal(ulp_refmodel_mode_parse(mode, &o.mode, &o.batch), 0);
    o.gemm = g;
    o.out = p;
    o.prompt_len = 45; /* prefix 32, suffix 13 */
    o.suffix_only = g_suffix_only;
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ulp_refmodel_run(&o, &err);
    if (st != ULP_OK)
        fail_msg("%s: %s", tag, err.msg);
    return p;
}

/* Number of captures whose bits differ; -1 when the capture lists differ. */
static long captures_differing(const char *pa, const char *pb, int *first_layer)
{
    ulp_snapshot *a, *b;
    assert_int_equal(ulp_snapshot_open(pa, &a, NULL), ULP_OK);
    assert_int_equal(ulp_snapshot_open(pb, &b, NULL), ULP_OK);
    long nd = 0;
    *first_layer = -2;
    if (ulp_snapshot_capture_count(a) != ulp_snapshot_capture_count(b))
        nd = -1;
    for (size_t i = 0; nd >= 0 && i < ulp_snapshot_capture_count(a); i++) {
        const ulp_capture_info *ca = ulp_snapshot_capture(a, i);
        ptrdiff_t j = ulp_snapshot_find(b, ca->name, ca->occurrence);
        assert_true(j >= 0);
        const ulp_capture_info *cb = ulp_snapshot_capture(b, (size_t)j);
        assert_int_equal(ca->elements, cb->elements);
        size_t bytes = ca->elements * ulp_dtype_size(ca->dtype);
        void *x = malloc(bytes), *y = malloc(bytes);
        assert_int_equal(ulp_snapshot_read(a, i, 0, ca->elements, x, NULL), ULP_OK);
        assert_int_equal(ulp_snapshot_read(b, (size_t)j, 0, cb->elements, y, NULL), ULP_OK);
        if (memcmp(x, y, bytes) != 0) {
            if (nd == 0)
                *first_layer = ca->layer;
            nd++;
        }
        free(x), free(y);
    }
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return nd;
}

static void test_refmodel__captures_and_run_keys(void **state)
{
    (void)state;
    const char *p = run_model("layout", "hit", ULP_REFMODEL_GEMM_TILED, 3);
    ulp_snapshot *s;
    assert_int_equal(ulp_snapshot_open(p, &s, NULL), ULP_OK);
    assert_string_equal(ulp_snapshot_label(s), "hit");
    assert_int_equal(ulp_snapshot_capture_count(s), 3 * 3 + 1);
    const char *names[] = {"attn_out", "mlp_out", "out"};
    for (int l = 0; l < 3; l++) {
        for (int k = 0; k < 3; k++) {
            const ulp_capture_info *c = ulp_snapshot_capture(s, (size_t)(3 * l + k));
            char want[64];
            snprintf(want, sizeof want, "model.layers.%d.%s", l, names[k]);
            assert_string_equal(c->name, want);
            assert_int_equal(c->layer, l);
            assert_int_equal(c->dtype, ULP_DTYPE_BF16);
            assert_int_equal(c->ndim, 2);
            assert_int_equal(c->shape[0], 45 - 32);
            assert_int_equal(c->shape[1], 256);
            assert_string_equal(c->role, "activation");
        }
    }
    const ulp_capture_info *lg = ulp_snapshot_capture(s, 9);
    assert_string_equal(lg->name, "lm_head.logits");
    assert_string_equal(lg->role, "logits");
    assert_int_equal(lg->dtype, ULP_DTYPE_F32);
    assert_int_equal(lg->shape[0], 13);
    assert_int_equal(lg->shape[1], 8192);
    assert_string_equal(ulp_snapshot_run_get(s, "cache"), "hit");
    assert_string_equal(ulp_snapshot_run_get(s, "batch_size"), "1");
    assert_string_equal(ulp_snapshot_run_get(s, "block_size"), "16");
    assert_string_equal(ulp_snapshot_run_get(s, "gemm"), "tiled");
    assert_string_equal(ulp_snapshot_run_get(s, "prompt_len"), "45");
    assert_string_equal(ulp_snapshot_run_get(s, "prefix_len"), "32");
    assert_string_equal(ulp_snapshot_run_get(s, "seed"), "12");
    assert_string_equal(ulp_snapshot_run_get(s, "model"), "tiny");
    assert_non_null(ulp_snapshot_run_get(s, "threads"));
    /* What the GEMMs did is observed, not a condition: /observed, not /run. */
    assert_null(ulp_snapshot_run_get(s, "suffix_gemm"));
    assert_int_equal(ulp_snapshot_observed_count(s), 1);
    assert_string_equal(ulp_snapshot_observed(s, 0)->key, "suffix_gemm");
    assert_non_null(strstr(ulp_snapshot_observed(s, 0)->value, "M=13"));
    ulp_snapshot_close(s);
}

/* Reads capture i of `s` whole (bf16 bits); the caller frees. */
static uint16_t *read_bits(ulp_snapshot *s, size_t i)
{
    const ulp_capture_info *c = ulp_snapshot_capture(s, i);
    uint16_t *v = malloc(c->elements * sizeof *v + 1);
    assert_int_equal(ulp_snapshot_read(s, i, 0, c->elements, v, NULL), ULP_OK);
    return v;
}

/*
 * Every position of every pass: the hit's prefix pass (positions 0..31) and
 * its suffix pass (32..44) as occurrences 0 and 1 of each name, with
 * positions and inputs; the embedding; logits of the suffix only.  The
 * suffix rows are the bits the suffix-only captures hold.
 */
static void test_refmodel__all_positions(void **state)
{
    (void)state;
    const char *so = run_model("hit-suffix", "hit", ULP_REFMODEL_GEMM_TILED, 2);
    g_suffix_only = 0;
    const char *p = run_model("hit-all", "hit", ULP_REFMODEL_GEMM_TILED, 2);
    const char *pm = run_model("miss-all", "miss", ULP_REFMODEL_GEMM_TILED, 2);
    g_suffix_only = 1;
    ulp_snapshot *s, *sm, *ss;
    assert_int_equal(ulp_snapshot_open(p, &s, NULL), ULP_OK);
    assert_int_equal(ulp_snapshot_open(pm, &sm, NULL), ULP_OK);
    assert_int_equal(ulp_snapshot_open(so, &ss, NULL), ULP_OK);
    /* Per pass: embed + 2 layers x 3; the suffix pass adds the logits. */
    assert_int_equal(ulp_snapshot_capture_count(s), 7 + 8);
    assert_int_equal(ulp_snapshot_capture_count(sm), 8);
    for (size_t i = 0; i < 15; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        int suffix = i >= 7;
        assert_int_equal(c->occurrence, suffix ? 1 - (strcmp(c->name, "lm_head.logits") == 0) : 0);
        assert_int_equal(c->row_rank, 1);
        assert_int_equal(c->rows, (uint64_t)c->shape[0]);
        assert_int_equal(c->shape[0], suffix ? 13 : 32);
        for (uint64_t r = 0; r < c->rows; r++)
            assert_int_equal(c->positions[r], (int64_t)r + (suffix ? 32 : 0));
        assert_null(c->requests);
    }
    const ulp_capture_info *e = ulp_snapshot_capture(s, 0);
    assert_string_equal(e->name, "model.embed_tokens");
    assert_int_equal(e->n_inputs, 0);
    const ulp_capture_info *a0 = ulp_snapshot_capture(s, 1);
    assert_string_equal(a0->name, "model.layers.0.attn_out");
    assert_int_equal(a0->n_inputs, 1);
    assert_string_equal(a0->inputs[0], "model.embed_tokens");
    const ulp_capture_info *o1 = ulp_snapshot_capture(s, 6);
    assert_string_equal(o1->name, "model.layers.1.out");
    assert_int_equal(o1->n_inputs, 3);
    assert_string_equal(o1->inputs[0], "model.layers.1.attn_out");
    assert_string_equal(o1->inputs[1], "model.layers.0.out");
    assert_string_equal(o1->inputs[2], "model.layers.1.mlp_out");
    const ulp_capture_info *lg = ulp_snapshot_capture(s, 14);
    assert_string_equal(lg->name, "lm_head.logits");
    assert_int_equal(lg->n_inputs, 1);
    assert_string_equal(lg->inputs[0], "model.layers.1.out");
    /* The suffix pass holds the suffix-only run's bits; the miss's rows 32..44 too (its own). */
    for (size_t k = 0; k < 6; k++) {
        uint16_t *all = read_bits(s, 8 + k), *suf = read_bits(ss, k);
        assert_memory_equal(all, suf, 13 * 256 * sizeof *all);
        free(all);
        free(suf);
    }
    const ulp_capture_info *m0 = ulp_snapshot_capture(sm, 2);
    assert_string_equal(m0->name, "model.layers.0.mlp_out");
    assert_int_equal(m0->shape[0], 45);
    ulp_snapshot_close(s);
    ulp_snapshot_close(sm);
    ulp_snapshot_close(ss);
}

static void test_refmodel__repeat_and_split_are_bitwise(void **state)
{
    (void)state;
    int fl;
    const char *m1 = run_model("miss1", "miss", ULP_REFMODEL_GEMM_TILED, 4);
    const char *m2 = run_model("miss2", "miss", ULP_REFMODEL_GEMM_TILED, 4);
    assert_int_equal(captures_differing(m1, m2, &fl), 0);
    const char *h = run_model("hit", "hit", ULP_REFMODEL_GEMM_TILED, 4);
    const char *sp = run_model("split", "split", ULP_REFMODEL_GEMM_TILED, 4);
    assert_int_equal(captures_differing(sp, h, &fl), 0);
    /* The emulated M-dependent GEMM: miss and hit differ, from layer 0. */
    assert_true(captures_differing(m1, h, &fl) > 0);
    assert_int_equal(fl, 0);
    /* batch=1 is a miss. */
    const char *b1 = run_model("b1", "batch=1", ULP_REFMODEL_GEMM_TILED, 4);
    assert_int_equal(captures_differing(m1, b1, &fl), 0);
}

static void test_refmodel__exact_gemm_hit_equals_miss(void **state)
{
    (void)state;
    int fl;
    const char *m = run_model("xmiss", "miss", ULP_REFMODEL_GEMM_EXACT, 4);
    const char *h = run_model("xhit", "hit", ULP_REFMODEL_GEMM_EXACT, 4);
    const char *b = run_model("xbatch", "batch=3", ULP_REFMODEL_GEMM_EXACT, 4);
    assert_int_equal(captures_differing(m, h, &fl), 0);
    assert_int_equal(captures_differing(m, b, &fl), 0);
    /* Exact and tiled are different kernels: their results differ. */
    const char *t = run_model("tmiss", "miss", ULP_REFMODEL_GEMM_TILED, 4);
    assert_true(captures_differing(m, t, &fl) > 0);
}

static void test_refmodel__blas_repeat_and_split(void **state)
{
    (void)state;
    if (strcmp(ulp_refmodel_blas_info(), "none") == 0)
        skip();
    int fl;
    const char *m1 = run_model("bmiss1", "miss", ULP_REFMODEL_GEMM_BLAS, 3);
    const char *m2 = run_model("bmiss2", "miss", ULP_REFMODEL_GEMM_BLAS, 3);
    assert_int_equal(captures_differing(m1, m2, &fl), 0);
    const char *h = run_model("bhit", "hit", ULP_REFMODEL_GEMM_BLAS, 3);
    const char *sp = run_model("bsplit", "split", ULP_REFMODEL_GEMM_BLAS, 3);
    assert_int_equal(captures_differing(sp, h, &fl), 0);
    ulp_snapshot *s;
    assert_int_equal(ulp_snapshot_open(h, &s, NULL), ULP_OK);
    assert_non_null(strstr(ulp_snapshot_run_get(s, "blas"), "OpenBLAS"));
    assert_string_equal(ulp_snapshot_run_get(s, "threads"), "1");
    ulp_snapshot_close(s);
}

static void test_refmodel__bad_options(void **state)
{
    (void)state;
    ulp_refmodel_options o;
    ulp_refmodel_options_init(&o);
    char p[1200];
    snprintf(p, sizeof p, "%s/bad.h5", tmpdir);
    o.out = p;
    ulp_error err;
    o.cached_tokens = 20; /* not a multiple of 16 */
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);
    assert_non_null(strstr(err.msg, "multiple of 16"));
    o.cached_tokens = -1;
    o.prompt_len = 16; /* nothing left for a suffix */
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);
    o.prompt_len = 1;
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);
    o.prompt_len = 45;
    o.out = "/nonexistent-dir/x.h5";
    assert_true(ulp_refmodel_run(&o, &err) != ULP_OK);
    assert_true(err.msg[0] != '\0');

    o.out = p;
    o.prompt_len = 127;
    o.tp = 3; /* divides neither the attention width 256 nor the MLP size 768 */
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);
    assert_non_null(strstr(err.msg, "tensor-parallel degree 3"));
    o.tp = 1;
    o.prefill_chunk = 120; /* steps [0,120) and [120,127) cut the suffix [112,127) */
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);
    assert_non_null(strstr(err.msg, "must not cut the captured suffix [112, 127)"));
    o.prefill_chunk = 64;
    o.mode = ULP_REFMODEL_HIT; /* chunking is a way to run a miss */
    assert_int_equal(ulp_refmodel_run(&o, &err), ULP_EINVAL);

    ulp_refmodel_mode mode;
    int batch;
    assert_int_equal(ulp_refmodel_mode_parse("batch=0", &mode, &batch), -1);
    assert_int_equal(ulp_refmodel_mode_parse("batch=", &mode, &batch), -1);
    assert_int_equal(ulp_refmodel_mode_parse("batch=8", &mode, &batch), 0);
    assert_int_equal(batch, 8);
    assert_int_equal(ulp_refmodel_mode_parse("hot", &mode, &batch), -1);
    ulp_refmodel_gemm g;
    assert_int_equal(ulp_refmodel_gemm_parse("cublas", &g), -1);
    ulp_refmodel_dims d;
    assert_int_equal(ulp_refmodel_preset("qwen1.5b", &d), ULP_OK);
    assert_int_equal(d.hidden, 1536);
    assert_int_equal(d.layers, 28);
    assert_int_equal(d.heads, 12);
    assert_int_equal(d.kv_heads, 2);
    assert_int_equal(d.mlp, 8960);
    assert_int_equal(d.vocab, 151936);
    assert_int_equal(ulp_refmodel_preset("gpt5", &d), ULP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refmodel__tiled_matches_documented_order),
        cmocka_unit_test(test_refmodel__exact_is_rounded_fp64_sum),
        cmocka_unit_test(test_refmodel__exact_is_m_independent),
        cmocka_unit_test(test_refmodel__tiled_is_m_dependent),
        cmocka_unit_test(test_refmodel__blas_agrees_with_exact),
        cmocka_unit_test(test_refmodel__prefix_cache_reuses_blocks),
        cmocka_unit_test(test_refmodel__captures_and_run_keys),
        cmocka_unit_test(test_refmodel__all_positions),
        cmocka_unit_test(test_refmodel__repeat_and_split_are_bitwise),
        cmocka_unit_test(test_refmodel__exact_gemm_hit_equals_miss),
        cmocka_unit_test(test_refmodel__blas_repeat_and_split),
        cmocka_unit_test(test_refmodel__bad_options),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
