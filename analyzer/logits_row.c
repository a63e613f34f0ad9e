/*
 * One logits row pair in float32, vectorized: the same numbers as
 * ulp__logits_row_stats() (logits.c, on doubles) for any row of a format
 * that float32 holds exactly (f32, bf16, f16, fp8), without converting the
 * row to doubles element by element.
 *
 * The row is taken in blocks that stay in L1, each with two loops that gcc
 * vectorizes (this file is built with -O3 and AVX2 / AVX-512 clones, as
 * diff_metrics.c), so that the row is read from memory once:
 *   1. both sides: the largest non-NaN value, the count of non-NaN values,
 *      and the largest |z_A - z_B| over finite pairs, in double;
 *   2. per side, only for a block whose top reaches the row's so far (a
 *      few blocks a row): the first index holding the block's top value,
 *      how many hold it, and the largest value below it.
 * The blocks' top two merge into the row's (ties to the lowest index, a
 * repeated top is a tie).
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

/* Pass 1 over a block, both sides: the largest non-NaN values, how many are
 * non-NaN, and the largest |a - b| in double over pairs where both are finite. */
ULP__CLONES static double block_tops(const float *restrict a, const float *restrict b, uint32_t n,
                                     float *top_a, float *top_b, uint32_t *nn_a, uint32_t *nn_b)
{
    float ma = -HUGE_VALF, mb = -HUGE_VALF;
    uint32_t ca = 0, cb = 0;
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        float x = a[i], y = b[i];
        ma = x > ma ? x : ma;
        mb = y > mb ? y : mb;
        ca += x == x;
        cb += y == y;
        uint32_t bx, by;
        memcpy(&bx, &x, 4);
        memcpy(&by, &y, 4);
        int fin = ((bx & 0x7f800000u) != 0x7f800000u) & ((by & 0x7f800000u) != 0x7f800000u);
        double d = fabs((double)x - (double)y);
        d = fin ? d : 0.0;
        m = d > m ? d : m;
    }
    *top_a = ma;
    *top_b = mb;
    *nn_a = ca;
    *nn_b = cb;
    return m;
}

/* Pass 2 over a block, one side: the first index of `top`, how many equal it,
 * the largest value below it. */
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

/* The running top two of one side of a row. */
typedef struct top2_state {
    float top, second; /* -inf until seen                      */
    uint64_t count;    /* elements equal to top                 */
    uint64_t first;    /* index of the first of them            */
    uint64_t nonnan;
} top2_state;

/* Merges a block (starting at index `base`) whose largest non-NaN value is `btop`. */
static void top2_merge(top2_state *s, const float *z, uint32_t n, uint64_t base, float btop,
                       uint32_t bnn)
{
    if (bnn == 0)
        return;
    if (s->nonnan > 0 && btop < s->top) {
        /* The common case once the row's top is seen: one runner-up candidate. */
        s->second = btop > s->second ? btop : s->second;
        s->nonnan += bnn;
        return;
    }
    uint32_t bfirst, bcount;
    float bsecond = below_top(z, n, btop, &bfirst, &bcount);
    if (s->nonnan == 0 || btop > s->top) {
        float old = s->nonnan ? s->top : -HUGE_VALF;
        s->second = bsecond > old ? bsecond : old;
        s->top = btop;
        s->count = bcount;
        s->first = base + bfirst;
    } else {
        s->count += bcount; /* btop == s->top */
        s->second = bsecond > s->second ? bsecond : s->second;
    }
    s->nonnan += bnn;
}

static void top2_finish(const top2_state *s, int64_t *arg, double *margin)
{
    if (s->nonnan == 0) {
        *arg = -1;
        *margin = (double)NAN;
        return;
    }
    *arg = (int64_t)s->first;
    if (s->nonnan == 1)
        *margin = HUGE_VAL;
    else if (s->count > 1)
        *margin = 0.0; /* a tie, also of two infinities */
    else
        *margin = (double)s->top - (double)s->second;
}

/* Blocks of this many elements: both passes over a block run in L1. */
#define ROW_BLOCK 2048

void ulp__logits_row_f32(const float *za, const float *zb, uint64_t vocab, ulp__logits_row *out)
{
    top2_state sa = {-HUGE_VALF, -HUGE_VALF, 0, 0, 0}, sb = sa;
    double pert = 0;
    for (uint64_t base = 0; base < vocab; base += ROW_BLOCK) {
        uint32_t n = (uint32_t)(vocab - base < ROW_BLOCK ? vocab - base : ROW_BLOCK);
        float ta, tb;
        uint32_t na, nb;
        double d = block_tops(za + base, zb + base, n, &ta, &tb, &na, &nb);
        pert = d > pert ? d : pert;
        top2_merge(&sa, za + base, n, base, ta, na);
        top2_merge(&sb, zb + base, n, base, tb, nb);
    }
    top2_finish(&sa, &out->argmax_a, &out->margin_a);
    top2_finish(&sb, &out->argmax_b, &out->margin_b);
    out->max_perturbation = pert;
}
