/*
 * Logits analysis of `ulpprof diff` (analyzer/logits.c): argmax, margins and
 * perturbation on constructed rows; total variation against a direct sum;
 * the same-draw sampling probability against a Monte-Carlo estimate of
 * inverse-CDF sampling driven by one uniform draw.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits__argmax_ties_and_margins),
        cmocka_unit_test(test_logits__sampling_vs_monte_carlo),
        cmocka_unit_test(test_logits__two_tokens_by_hand),
        cmocka_unit_test(test_logits__row_kernels_vs_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
