/*
 * One logits row pair in float32, vectorized: the same numbers as
 * ulp__logits_row_stats() (logits.c, on doubles) for any row of a format
 * that float32 holds exactly (f32, bf16, f16, fp8), without converting the
 * row to doubles element by element.
 *
 * The row is taken in blocks that stay in L1, each with two loops that gcc
 * vectorizes (this file is built with -O3, once per instruction-set level
 * of isa.h, as diff_metrics.c), so that the row is read from memory once:
 *   1. both sides: the largest non-NaN value, the count of non-NaN values,
 *      and the largest |z_A - z_B| over finite pairs in float32, with the
 *      exact double maximum only for blocks that can beat the row's so far;
 *   2. per side, only for a block whose top reaches the row's so far (a
 *      few blocks a row): the first index holding the block's top value,
 *      how many hold it, and the largest value below it.
 * The blocks' top two merge into the row's (ties to the lowest index, a
 * repeated top is a tie).
 * Comparisons are exact in float32 and the margin is taken in double, so
 * nothing differs from the scalar definition (ties to the lowest index,
 * NaN never a candidate, inf - inf a tie).
 *
 * Nothing depends on where the blocks start or on the order they come in,
 * so a row may also be taken in parts (ulp__lpart: any runs of its
 * elements, in any order, merged with ulp__lpart_merge): the diff's worker
 * threads fold the logits rows into the chunks they compare
 * (logits_fuse.c).
 */
#include <math.h>
#include <string.h>

#include "diff_priv.h"
#include "isa.h"

/*
 * Floats compared as unsigned integers, so that the loops vectorize
 * without -ffast-math (gcc keeps a float max reduction scalar): -0 as +0,
 * the sign-magnitude bits turned into unsigned order; NaN is 0, below
 * every number (never a candidate).  Equal keys are equal floats.
 */
static inline uint32_t key_of(uint32_t u)
{
    u = u == 0x80000000u ? 0 : u;
    uint32_t neg = -(u >> 31);
    uint32_t k = (u ^ (neg >> 1)) ^ 0x80000000u;
    uint32_t isnan = (u & 0x7fffffffu) > 0x7f800000u;
    return k & (isnan - 1);
}

static inline float float_of(uint32_t k)
{
    uint32_t u = k >= 0x80000000u ? k ^ 0x80000000u : ~k;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Pass 1 over a block, both sides: the largest keys, how many are not NaN,
 * and the largest float32 |a - b| over pairs where both are finite (bits),
 * also over those whose float32 difference may be rounded (*inexact:
 * operands of different signs or binades). */
#define DEFINE_BLOCK_TOPS(NAME, ISA)                                                               \
    ULP__TARGET_##ISA static uint32_t NAME##_##ISA(                                                \
        const uint32_t *restrict a, const uint32_t *restrict b, uint32_t n, uint32_t *top_a,       \
        uint32_t *top_b, uint32_t *nn_a, uint32_t *nn_b, uint32_t *inexact)                        \
    {                                                                                              \
        uint32_t ma = 0, mb = 0;                                                                   \
        uint32_t ca = 0, cb = 0, mf = 0, mi = 0;                                                   \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            uint32_t bx = a[i], by = b[i];                                                         \
            uint32_t kx = key_of(bx), ky = key_of(by);                                             \
            ma = kx > ma ? kx : ma;                                                                \
            mb = ky > mb ? ky : mb;                                                                \
            ca += kx != 0;                                                                         \
            cb += ky != 0;                                                                         \
            uint32_t fin = -(uint32_t)(((bx & 0x7fffffffu) < 0x7f800000u) &                        \
                                       ((by & 0x7fffffffu) < 0x7f800000u));                        \
            float x, y;                                                                            \
            memcpy(&x, &bx, 4);                                                                    \
            memcpy(&y, &by, 4);                                                                    \
            float df = x - y;                                                                      \
            uint32_t bd;                                                                           \
            memcpy(&bd, &df, 4);                                                                   \
            bd &= 0x7fffffffu & fin;                                                               \
            mf = bd > mf ? bd : mf;                                                                \
            uint32_t exact = -(uint32_t)(((bx ^ by) >> 23) == 0); /* same sign and exponent */     \
            bd &= ~exact;                                                                          \
            mi = bd > mi ? bd : mi;                                                                \
        }                                                                                          \
        *top_a = ma;                                                                               \
        *top_b = mb;                                                                               \
        *nn_a = ca;                                                                                \
        *nn_b = cb;                                                                                \
        *inexact = mi;                                                                             \
        return mf;                                                                                 \
    }
ULP__ISA_EACH(DEFINE_BLOCK_TOPS, block_tops)

/* The largest |a - b| in double over pairs where both are finite (scalar:
 * run only on the few blocks that can raise the row's maximum). */
static double block_pert(const uint32_t *a, const uint32_t *b, uint32_t n)
{
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((a[i] & 0x7f800000u) == 0x7f800000u || (b[i] & 0x7f800000u) == 0x7f800000u)
            continue;
        float x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        double d = fabs((double)x - (double)y);
        m = d > m ? d : m;
    }
    return m;
}

/*
 * Can a block beat the row's largest |a - b| so far (`run`, in double)?
 * The same reasoning as diff_metrics.c's may_grow(): float32 subtraction
 * rounds correctly and monotonically, so if `run` is a float32 value only a
 * larger float32 maximum, or an inexact difference at the same value, can;
 * otherwise anything within one float32 ULP of it is looked at.
 */
static int may_grow(double run, uint32_t maxf, uint32_t maxi)
{
    if (maxf == 0)
        return 0;
    float f = (float)run;
    uint32_t r;
    memcpy(&r, &f, 4);
    if (r == 0 || maxf > r)
        return 1;
    if ((double)f == run)
        return maxf == r && maxi == r;
    return maxf + 1 >= r;
}

/* Pass 2 over a block, one side: the first index of key `top`, how many
 * equal it, the largest key below it (0 when none). */
#define DEFINE_BELOW_TOP(NAME, ISA)                                                                \
    ULP__TARGET_##ISA static uint32_t NAME##_##ISA(const uint32_t *restrict z, uint32_t n,         \
                                                   uint32_t top, uint32_t *first, uint32_t *count) \
    {                                                                                              \
        uint32_t m = 0, c = 0, f = UINT32_MAX;                                                     \
        /* Masks, not conditions: gcc vectorizes this form only.  The first of                     \
         * them is a minimum (a search stopped at the first, scalar, took as                       \
         * long as pass 1). */                                                                     \
        for (uint32_t i = 0; i < n; i++) {                                                         \
            uint32_t k = key_of(z[i]);                                                             \
            uint32_t eq = -(uint32_t)(k == top);                                                   \
            c -= eq;                                                                               \
            uint32_t at = i | ~eq;                                                                 \
            f = at < f ? at : f;                                                                   \
            uint32_t w = k & -(uint32_t)(k < top);                                                 \
            m = w > m ? w : m;                                                                     \
        }                                                                                          \
        *first = f < n ? f : n;                                                                    \
        *count = c;                                                                                \
        return m;                                                                                  \
    }
ULP__ISA_EACH(DEFINE_BELOW_TOP, below_top)

/* Merges a block (starting at index `base`) whose largest non-NaN value is `btop`. */
static void top2_merge(ulp__lside *s, const uint32_t *z, uint32_t n, uint64_t base, uint32_t btop,
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
    uint32_t bsecond = ULP__ISA_CALL(below_top, z, n, btop, &bfirst, &bcount);
    if (s->nonnan == 0 || btop > s->top) {
        uint32_t old = s->nonnan ? s->top : 0;
        s->second = bsecond > old ? bsecond : old;
        s->top = btop;
        s->count = bcount;
        s->first = base + bfirst;
    } else {
        /* btop == s->top: the first of them, whichever part came first. */
        s->count += bcount;
        s->first = base + bfirst < s->first ? base + bfirst : s->first;
        s->second = bsecond > s->second ? bsecond : s->second;
    }
    s->nonnan += bnn;
}

static void top2_finish(const ulp__lside *s, int64_t *arg, double *margin)
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
        *margin = (double)float_of(s->top) - (double)float_of(s->second);
}

/* Blocks of this many elements: both passes over a block run in L1. */
#define ROW_BLOCK 2048

void ulp__lpart_init(ulp__lpart *p)
{
    memset(p, 0, sizeof *p);
}

void ulp__lpart_add(ulp__lpart *p, const float *za, const float *zb, uint64_t n, uint64_t first)
{
    /* The rows as bits: the loops compare integers (key_of). */
    const uint32_t *ua = (const uint32_t *)(const void *)za;
    const uint32_t *ub = (const uint32_t *)(const void *)zb;
    for (uint64_t at = 0; at < n; at += ROW_BLOCK) {
        uint32_t m = (uint32_t)(n - at < ROW_BLOCK ? n - at : ROW_BLOCK);
        uint32_t ta, tb, na, nb, maxi;
        uint32_t maxf = ULP__ISA_CALL(block_tops, ua + at, ub + at, m, &ta, &tb, &na, &nb, &maxi);
        if (may_grow(p->pert, maxf, maxi)) {
            double d = block_pert(ua + at, ub + at, m);
            p->pert = d > p->pert ? d : p->pert;
        }
        top2_merge(&p->a, ua + at, m, first + at, ta, na);
        top2_merge(&p->b, ub + at, m, first + at, tb, nb);
    }
}

/* Merges one side's top two of another part of the row into `d`. */
static void side_merge(ulp__lside *d, const ulp__lside *s)
{
    if (s->nonnan == 0)
        return;
    if (d->nonnan == 0) {
        *d = *s;
        return;
    }
    if (s->top > d->top) {
        d->second = s->second > d->top ? s->second : d->top;
        d->top = s->top;
        d->count = s->count;
        d->first = s->first;
    } else if (s->top == d->top) {
        d->count += s->count;
        d->first = s->first < d->first ? s->first : d->first;
        d->second = s->second > d->second ? s->second : d->second;
    } else {
        d->second = s->top > d->second ? s->top : d->second;
    }
    d->nonnan += s->nonnan;
}

void ulp__lpart_merge(ulp__lpart *dst, const ulp__lpart *src)
{
    side_merge(&dst->a, &src->a);
    side_merge(&dst->b, &src->b);
    dst->pert = src->pert > dst->pert ? src->pert : dst->pert;
}

void ulp__lpart_finish(const ulp__lpart *p, ulp__logits_row *out)
{
    top2_finish(&p->a, &out->argmax_a, &out->margin_a);
    top2_finish(&p->b, &out->argmax_b, &out->margin_b);
    out->max_perturbation = p->pert;
}

void ulp__logits_row_f32(const float *za, const float *zb, uint64_t vocab, ulp__logits_row *out)
{
    ulp__lpart p;
    ulp__lpart_init(&p);
    ulp__lpart_add(&p, za, zb, vocab, 0);
    ulp__lpart_finish(&p, out);
}

void ulp__logits_widen(ulp_dtype dt, const void *raw, uint64_t n, float *out)
{
    const unsigned char *p = raw;
    if (dt == ULP_DTYPE_F32) {
        memcpy(out, p, n * 4); /* a mapped run need not be 4-byte aligned */
    } else if (dt == ULP_DTYPE_BF16) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &u, 4);
        }
    } else {
        size_t sz = ulp_dtype_size(dt);
        for (uint64_t i = 0; i < n; i++)
            out[i] = (float)ulp_dtype_to_double(dt, ulp_dtype_load_bits(dt, p + i * sz));
    }
}
