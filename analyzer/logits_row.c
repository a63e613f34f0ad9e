/*
 * One logits row pair in float32, vectorized: the same numbers as
 * ulp__logits_row_stats() (logits.c, on doubles) for any row of a format
 * that float32 holds exactly (f32, bf16, f16, fp8), without converting the
 * row to doubles element by element.
 *
 * Three passes over the row, each a loop gcc vectorizes (this file is built
 * with -O3 and AVX2 / AVX-512 clones, as diff_metrics.c):
 *   1. per side: the largest non-NaN value and the count of non-NaN values;
 *   2. per side: the first index holding that value, how many hold it, and
 *      the largest value below it (the runner-up when it is unique);
 *   3. the largest |z_A - z_B| over finite pairs, in double.
 * Comparisons are exact in float32 and the margin is taken in double, so
 * nothing differs from the scalar definition (ties to the lowest index,
 * NaN never a candidate, inf - inf a tie).
 */
#include <math.h>
#include <string.h>

#include "diff_priv.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ULP_NO_CLONES) &&  \
    !defined(__SANITIZE_THREAD__)
#define ULP__CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ULP__CLONES
#endif

/* Pass 1: the largest non-NaN value (-inf when none) and how many are non-NaN. */
ULP__CLONES static float top_value(const float *restrict z, uint32_t n, uint32_t *nonnan)
{
    float m = -HUGE_VALF;
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        float v = z[i];
        m = v > m ? v : m;
        c += v == v;
    }
    *nonnan = c;
    return m;
}

/* Pass 2: the first index of `top`, how many equal it, the largest value below it. */
ULP__CLONES static float below_top(const float *restrict z, uint32_t n, float top, uint32_t *first,
                                   uint32_t *count)
{
    float m = -HUGE_VALF;
    uint32_t f = UINT32_MAX, c = 0;
    for (uint32_t i = 0; i < n; i++) {
        float v = z[i];
        uint32_t eq = v == top;
        uint32_t at = eq ? i : UINT32_MAX;
        f = at < f ? at : f;
        c += eq;
        float w = v < top ? v : -HUGE_VALF;
        m = w > m ? w : m;
    }
    *first = f;
    *count = c;
    return m;
}

/* Pass 3: the largest |a - b| in double over pairs where both are finite. */
ULP__CLONES static double max_perturbation(const float *restrict a, const float *restrict b,
                                           uint32_t n)
{
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        int fin = ((x & 0x7f800000u) != 0x7f800000u) & ((y & 0x7f800000u) != 0x7f800000u);
        double d = fabs((double)a[i] - (double)b[i]);
        d = fin ? d : 0.0;
        m = d > m ? d : m;
    }
    return m;
}

static void top2(const float *z, uint32_t n, int64_t *arg, double *margin)
{
    uint32_t nonnan, first, count;
    float top = top_value(z, n, &nonnan);
    if (nonnan == 0) {
        *arg = -1;
        *margin = (double)NAN;
        return;
    }
    float second = below_top(z, n, top, &first, &count);
    *arg = (int64_t)first;
    if (nonnan == 1)
        *margin = HUGE_VAL;
    else if (count > 1)
        *margin = 0.0; /* a tie, also of two infinities */
    else
        *margin = (double)top - (double)second;
}

void ulp__logits_row_f32(const float *za, const float *zb, uint64_t vocab, ulp__logits_row *out)
{
    /* Rows past 2^32 - 1 tokens do not exist; the scalar path would take them. */
    uint32_t n = (uint32_t)vocab;
    top2(za, n, &out->argmax_a, &out->margin_a);
    top2(zb, n, &out->argmax_b, &out->margin_b);
    out->max_perturbation = max_perturbation(za, zb, n);
}
