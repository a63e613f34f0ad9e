/*
 * Logits analysis of `ulpprof diff` (analyzer/logits.c): argmax, margins and
 * perturbation on constructed rows; total variation against a direct sum;
 * the same-draw sampling probability against a Monte-Carlo estimate of
 * inverse-CDF sampling driven by one uniform draw.  The same row statistics
 * taken in parts, in any order (analyzer/logits_row.c), and folded into
 * chunks of a tensor as the element pass reads them (logits_fuse.c), in
 * every format it takes, against the double path on whole rows.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzer/diff_priv.h"

static void test_logits__argmax_ties_and_margins(void **state)
{
    (void)state;
    ulp__logits_row r;
    const double za[] = {1.0, 3.0, 2.5, 3.0, -1.0};
    const double zb[] = {1.0, 3.0, 2.5, 3.25, -1.0};
    ulp__logits_row_stats(za, zb, 5, &r);
    assert_int_equal(r.argmax_a, 1); /* tie 1 vs 3: lowest index */
    assert_true(r.margin_a == 0.0);
    assert_int_equal(r.argmax_b, 3);
    assert_true(r.margin_b == 0.25);
    assert_true(r.max_perturbation == 0.25);

    /* NaN never wins; infinities compare as numbers; a lone value has an infinite margin. */
    const double na[] = {NAN, 2.0, 1.0}, nb[] = {5.0, HUGE_VAL, 1.0};
    ulp__logits_row_stats(na, nb, 3, &r);
    assert_int_equal(r.argmax_a, 1);
    assert_true(r.margin_a == 1.0);
    assert_int_equal(r.argmax_b, 1);
    assert_true(isinf(r.margin_b));
    assert_true(r.max_perturbation == 0.0); /* only index 2 is a finite pair */
    const double one[] = {4.0};
    ulp__logits_row_stats(one, one, 1, &r);
    assert_int_equal(r.argmax_a, 0);
    assert_true(isinf(r.margin_a));
    const double allnan[] = {NAN, NAN};
    ulp__logits_row_stats(allnan, allnan, 2, &r);
    assert_int_equal(r.argmax_a, -1);
    assert_true(isnan(r.margin_a));
    const double twoinf[] = {HUGE_VAL, HUGE_VAL, 0};
    ulp__logits_row_stats(twoinf, twoinf, 3, &r);
    assert_int_equal(r.argmax_a, 0);
    assert_true(r.margin_a == 0.0); /* a tie, not inf - inf */
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static void softmax(const double *z, int n, double t, double *p)
{
    double m = z[0], s = 0;
    for (int i = 1; i < n; i++)
        m = z[i] > m ? z[i] : m;
    for (int i = 0; i < n; i++)
        s += (p[i] = exp((z[i] - m) / t));
    for (int i = 0; i < n; i++)
        p[i] /= s;
}

static int draw(const double *p, int n, double u)
{
    double c = 0;
    for (int i = 0; i < n; i++) {
        c += p[i];
        if (u < c)
            return i;
    }
    return n - 1;
}

static void test_logits__sampling_vs_monte_carlo(void **state)
{
    (void)state;
    enum { V = 40, DRAWS = 400000 };
    double za[V], zb[V], pa[V], pb[V], work[2 * V];
    const double temps[] = {0.5, 1.0, 2.0};
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < V; i++) {
            za[i] = 4.0 * uniform() - 2.0;
            zb[i] = za[i] + (trial < 3 ? 0.3 : 0.05) * (uniform() - 0.5);
        }
        for (size_t k = 0; k < sizeof temps / sizeof temps[0]; k++) {
            double t = temps[k], tv, pd;
            ulp__logits_sampling(za, zb, V, t, work, &tv, &pd);
            softmax(za, V, t, pa);
            softmax(zb, V, t, pb);
            double direct = 0;
            for (int i = 0; i < V; i++)
                direct += fabs(pa[i] - pb[i]);
            assert_true(fabs(tv - 0.5 * direct) < 1e-12);
            int differ = 0;
            for (int d = 0; d < DRAWS; d++) {
                double u = uniform();
                differ += draw(pa, V, u) != draw(pb, V, u);
            }
            double est = (double)differ / DRAWS;
            double sigma = sqrt(pd * (1 - pd) / DRAWS) + 1e-9;
            if (fabs(est - pd) > 5 * sigma)
                fail_msg("T=%g: exact %.6f, Monte Carlo %.6f (sigma %.2g)", t, pd, est, sigma);
            assert_true(pd >= tv - 1e-12); /* any coupling differs at least TV of the time */
        }
    }
    /* Identical rows never differ; a certain flip always does. */
    double tv, pd;
    ulp__logits_sampling(za, za, V, 1.0, work, &tv, &pd);
    assert_true(tv == 0 && pd == 0);
    const double x[] = {0, 1000}, y[] = {1000, 0};
    ulp__logits_sampling(x, y, 2, 1.0, work, &tv, &pd);
    assert_true(fabs(pd - 1.0) < 1e-12 && fabs(tv - 1.0) < 1e-12);
}

/* The two-token case by hand: p = (s, 1 - s) vs (q, 1 - q): P(differ) = |s - q| = TV. */
static void test_logits__two_tokens_by_hand(void **state)
{
    (void)state;
    double work[4], tv, pd;
    const double za[] = {0.0, 1.0}, zb[] = {0.5, 1.0};
    ulp__logits_sampling(za, zb, 2, 1.0, work, &tv, &pd);
    double s = 1.0 / (1.0 + exp(1.0)), q = 1.0 / (1.0 + exp(0.5));
    assert_true(fabs(pd - fabs(s - q)) < 1e-15);
    assert_true(fabs(tv - fabs(s - q)) < 1e-15);
}

/* The definition, written out here (FORMAT.md): first index of the largest
 * non-NaN value; margin top-1 minus top-2 (a repeated top is a tie, 0; a
 * lone candidate inf; none NaN); largest |a - b| over finite pairs. */
static void ref_top2(const float *z, size_t n, int64_t *arg, double *margin)
{
    int64_t best = -1;
    for (size_t i = 0; i < n; i++)
        if (!isnan(z[i]) && (best < 0 || z[i] > z[best]))
            best = (int64_t)i;
    *arg = best;
    if (best < 0) {
        *margin = (double)NAN;
        return;
    }
    int64_t second = -1;
    for (size_t i = 0; i < n; i++)
        if ((int64_t)i != best && !isnan(z[i]) && (second < 0 || z[i] > z[second]))
            second = (int64_t)i;
    if (second < 0)
        *margin = HUGE_VAL;
    else if (z[second] == z[best])
        *margin = 0.0;
    else
        *margin = (double)z[best] - (double)z[second];
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd64(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static float draw_logit(int kind)
{
    uint64_t r = rnd64();
    switch (kind == 0 ? r % 10 : 9) {
    case 0:
        return NAN;
    case 1:
        return HUGE_VALF;
    case 2:
        return -HUGE_VALF;
    case 3:
        return 2.0f; /* ties */
    default:
        return (float)((int64_t)(r >> 40) % 2001 - 1000) / 64.0f;
    }
}

static void same_double(double got, double want)
{
    if (isnan(want))
        assert_true(isnan(got));
    else
        assert_true(got == want);
}

/* The float32 kernels and the double path against the definition, rows of every size class. */
static void test_logits__row_kernels_vs_definition(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65, 1000, 151936};
    size_t nmax = 151936;
    float *a = malloc(nmax * 4), *b = malloc(nmax * 4);
    double *da = malloc(nmax * 8), *db = malloc(nmax * 8);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int rep = 0; rep < 40; rep++) {
            size_t n = sizes[s];
            int plain = rep % 2; /* half the rows without specials */
            for (size_t i = 0; i < n; i++) {
                a[i] = draw_logit(!plain);
                b[i] = rnd64() % 4 ? a[i] : draw_logit(!plain);
            }
            if (rep == 2)
                for (size_t i = 0; i < n; i++)
                    a[i] = NAN;
            if (rep == 4)
                for (size_t i = 0; i < n; i++)
                    a[i] = -HUGE_VALF;
            if (rep == 6 || rep == 7) /* distinct values: a unique top, the runner-up elsewhere */
                for (size_t i = 0; i < n; i++)
                    a[i] = b[i] = (float)((i * 7919 + (size_t)rep) % n) * (rep == 6 ? 1.0f : -1.0f);
            int64_t arg;
            double margin, pert = 0;
            for (size_t i = 0; i < n; i++) {
                da[i] = a[i];
                db[i] = b[i];
                if (isfinite(a[i]) && isfinite(b[i]) && fabs(da[i] - db[i]) > pert)
                    pert = fabs(da[i] - db[i]);
            }
            ulp__logits_row rf, rd;
            ulp__logits_row_f32(a, b, n, &rf);
            ulp__logits_row_stats(da, db, n, &rd);
            ref_top2(a, n, &arg, &margin);
            assert_int_equal(rf.argmax_a, arg);
            assert_int_equal(rd.argmax_a, arg);
            same_double(rf.margin_a, margin);
            same_double(rd.margin_a, margin);
            ref_top2(b, n, &arg, &margin);
            assert_int_equal(rf.argmax_b, arg);
            assert_int_equal(rd.argmax_b, arg);
            same_double(rf.margin_b, margin);
            same_double(rd.margin_b, margin);
            assert_true(rf.max_perturbation == pert);
            assert_true(rd.max_perturbation == pert);
        }
    }
    free(a);
    free(b);
    free(da);
    free(db);
}

/* Fisher-Yates over idx[0..n). */
static void shuffle(size_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rnd64() % i), t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

/* A row cut into random runs (some of one element, some across the
 * kernels' 2048-element blocks), taken in a random order, each into its
 * own part or several into one, merged into partials that merge again:
 * the definition's numbers. */
static void test_logits__parts_in_any_order(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 2, 3, 17, 2047, 2048, 2049, 5003, 151936};
    enum { MAXCUT = 12 };
    size_t nmax = 151936;
    float *a = malloc(nmax * 4), *b = malloc(nmax * 4);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int rep = 0; rep < 24; rep++) {
            size_t n = sizes[s];
            for (size_t i = 0; i < n; i++) {
                a[i] = draw_logit(rep % 2);
                b[i] = rnd64() % 4 ? a[i] : draw_logit(rep % 2);
            }
            if (rep == 4 || rep == 5) /* the top repeated far apart: ties across parts */
                for (size_t i = 0; i < n; i += 1 + n / 5)
                    a[i] = b[n - 1 - i] = 1e6f;
            size_t cut[MAXCUT + 1], ncut = 1 + (size_t)(rnd64() % MAXCUT);
            cut[0] = 0;
            for (size_t k = 1; k < ncut; k++)
                cut[k] = (size_t)(rnd64() % (n + 1));
            cut[ncut] = n;
            for (size_t k = 1; k < ncut; k++) /* sorted: runs [cut[k], cut[k + 1]) */
                for (size_t q = k; q > 0 && cut[q] < cut[q - 1]; q--) {
                    size_t t = cut[q];
                    cut[q] = cut[q - 1];
                    cut[q - 1] = t;
                }
            size_t order[MAXCUT];
            for (size_t k = 0; k < ncut; k++)
                order[k] = k;
            shuffle(order, ncut);
            ulp__lpart left, right, all;
            ulp__lpart_init(&left);
            ulp__lpart_init(&right);
            for (size_t k = 0; k < ncut; k++) {
                size_t r = order[k];
                ulp__lpart p, *into = k % 2 ? &left : &right;
                if (rep % 4 < 2) { /* runs out of order into one part */
                    ulp__lpart_add(into, a + cut[r], b + cut[r], cut[r + 1] - cut[r], cut[r]);
                    continue;
                }
                ulp__lpart_init(&p);
                ulp__lpart_add(&p, a + cut[r], b + cut[r], cut[r + 1] - cut[r], cut[r]);
                ulp__lpart_merge(into, &p);
            }
            ulp__lpart_init(&all);
            ulp__lpart_merge(&all, rep % 3 ? &left : &right);
            ulp__lpart_merge(&all, rep % 3 ? &right : &left);
            ulp__logits_row got;
            ulp__lpart_finish(&all, &got);
            int64_t arg;
            double margin, pert = 0;
            for (size_t i = 0; i < n; i++)
                if (isfinite(a[i]) && isfinite(b[i]) && fabs((double)a[i] - (double)b[i]) > pert)
                    pert = fabs((double)a[i] - (double)b[i]);
            ref_top2(a, n, &arg, &margin);
            assert_int_equal(got.argmax_a, arg);
            same_double(got.margin_a, margin);
            ref_top2(b, n, &arg, &margin);
            assert_int_equal(got.argmax_b, arg);
            same_double(got.margin_b, margin);
            assert_true(got.max_perturbation == pert);
        }
    }
    free(a);
    free(b);
}

/* A random element of `dt` as raw bits: mostly finite, some NaN / inf, some repeats. */
static uint64_t draw_bits(ulp_dtype dt, uint64_t prev)
{
    uint64_t r = rnd64();
    size_t sz = ulp_dtype_size(dt);
    if (r % 16 == 0)
        return prev; /* ties */
    uint64_t bits = (r >> 8) & (sz == 4 ? 0xffffffffu : sz == 2 ? 0xffffu : 0xffu);
    if (sz == 4 && r % 5 != 0) /* most f32 values of a logits' size, not all bit patterns */
        bits = (bits & 0x807fffffu) | (uint32_t)(120 + (r >> 50) % 16) << 23;
    return bits;
}

/*
 * A [rows, vocab] tensor of each format the element pass folds, fed in
 * chunks of random sizes (smaller than a row, across rows, of one element)
 * in a random order, f32 also from addresses that are not 4-byte aligned:
 * every row's statistics equal the double path's on the whole row.
 */
static void test_logits__fused_chunks_vs_rows(void **state)
{
    (void)state;
    static const ulp_dtype dts[] = {ULP_DTYPE_F32, ULP_DTYPE_BF16, ULP_DTYPE_F16, ULP_DTYPE_F8E4M3,
                                    ULP_DTYPE_F8E5M2};
    static const int64_t shapes[][2] = {{1, 1},    {3, 1},    {1, 5000},
                                        {7, 4099}, {5, 2048}, {2, 30011}};
    enum { MAXCHUNK = 64 };
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            ulp_dtype dt = dts[d];
            size_t sz = ulp_dtype_size(dt);
            uint64_t R = (uint64_t)shapes[s][0], V = (uint64_t)shapes[s][1], n = R * V;
            /* One spare byte before each side: misaligned views. */
            unsigned char *ra = malloc(n * sz + 8), *rb = malloc(n * sz + 8);
            uint64_t pa = 0, pb = 0;
            for (uint64_t i = 0; i < n; i++) {
                pa = draw_bits(dt, pa);
                pb = rnd64() % 3 ? pa : draw_bits(dt, pb);
                memcpy(ra + 1 + i * sz, &pa, sz); /* little-endian */
                memcpy(rb + 1 + i * sz, &pb, sz);
            }
            ulp_diff_options opts;
            ulp_diff_options_init(&opts);
            assert_true(ulp__logits_fusable(dt, 2, shapes[s], &opts));
            ulp__logits_fuse f;
            assert_int_equal(ulp__logits_fuse_init(&f, 3, dt, 2, shapes[s]), ULP_OK);
            assert_true(f.rows == R && f.vocab == V);
            uint64_t at[MAXCHUNK + 1];
            size_t nch = 1 + (size_t)(rnd64() % MAXCHUNK);
            at[0] = 0;
            for (size_t k = 1; k < nch; k++)
                at[k] = rnd64() % (n + 1);
            at[nch] = n;
            for (size_t k = 1; k < nch; k++)
                for (size_t q = k; q > 0 && at[q] < at[q - 1]; q--) {
                    uint64_t t = at[q];
                    at[q] = at[q - 1];
                    at[q - 1] = t;
                }
            size_t order[MAXCHUNK];
            for (size_t k = 0; k < nch; k++)
                order[k] = k;
            shuffle(order, nch);
            unsigned char *xa = malloc(n * sz + 8), *xb = malloc(n * sz + 8);
            for (size_t k = 0; k < nch; k++) {
                uint64_t lo = at[order[k]], len = at[order[k] + 1] - lo;
                /* Aligned in every other chunk (the f32 in-place path), else off by one. */
                size_t off = k % 2;
                memcpy(xa + off, ra + 1 + lo * sz, len * sz);
                memcpy(xb + off, rb + 1 + lo * sz, len * sz);
                ulp__logits_fuse_add(&f, xa + off, xb + off, len, lo);
            }
            double *za = malloc(V * 8), *zb = malloc(V * 8);
            for (uint64_t r = 0; r < R; r++) {
                for (uint64_t i = 0; i < V; i++) {
                    const unsigned char *qa = ra + 1 + (r * V + i) * sz,
                                        *qb = rb + 1 + (r * V + i) * sz;
                    za[i] = ulp_dtype_to_double(dt, ulp_dtype_load_bits(dt, qa));
                    zb[i] = ulp_dtype_to_double(dt, ulp_dtype_load_bits(dt, qb));
                }
                ulp__logits_row got, want;
                ulp__lpart_finish(&f.part[r], &got);
                ulp__logits_row_stats(za, zb, V, &want);
                assert_int_equal(got.argmax_a, want.argmax_a);
                assert_int_equal(got.argmax_b, want.argmax_b);
                same_double(got.margin_a, want.margin_a);
                same_double(got.margin_b, want.margin_b);
                assert_true(got.max_perturbation == want.max_perturbation);
            }
            ulp__logits_fuse_release(&f);
            free(za);
            free(zb);
            free(xa);
            free(xb);
            free(ra);
            free(rb);
        }
    }
}

/* What the element pass folds, and what keeps a pass of its own. */
static void test_logits__fusable(void **state)
{
    (void)state;
    ulp_diff_options opts;
    ulp_diff_options_init(&opts);
    const int64_t rv[2] = {4, 10}, none[2] = {0, 10}, novocab[2] = {4, 0};
    assert_true(ulp__logits_fusable(ULP_DTYPE_F32, 2, rv, &opts));
    assert_true(ulp__logits_fusable(ULP_DTYPE_BF16, 1, rv + 1, &opts));
    assert_false(ulp__logits_fusable(ULP_DTYPE_F64, 2, rv, &opts)); /* wider than float32 */
    assert_false(ulp__logits_fusable(ULP_DTYPE_I32, 2, rv, &opts));
    assert_false(ulp__logits_fusable(ULP_DTYPE_F32, 2, none, &opts));
    assert_false(ulp__logits_fusable(ULP_DTYPE_F32, 2, novocab, &opts));
    assert_false(ulp__logits_fusable(ULP_DTYPE_F32, 0, rv, &opts)); /* a scalar */
    opts.n_temperatures = 1;                                        /* sampling needs whole rows */
    opts.temperatures[0] = 1.0;
    assert_false(ulp__logits_fusable(ULP_DTYPE_F32, 2, rv, &opts));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits__argmax_ties_and_margins),
        cmocka_unit_test(test_logits__sampling_vs_monte_carlo),
        cmocka_unit_test(test_logits__two_tokens_by_hand),
        cmocka_unit_test(test_logits__row_kernels_vs_definition),
        cmocka_unit_test(test_logits__parts_in_any_order),
        cmocka_unit_test(test_logits__fused_chunks_vs_rows),
        cmocka_unit_test(test_logits__fusable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
