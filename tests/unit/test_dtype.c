/*
 * common/: the dtype table, bit classification, the ordered-integer map,
 * exact decoding, ulp_at and float32 -> narrow rounding, checked against an
 * independent implementation written here (field decoding with ldexp, the
 * compiler's _Float16, and round-to-nearest-even as a search by value over
 * every finite value of the format); the HDF5 file types against FORMAT.md;
 * the status map.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "format/h5types.h"
#include "ulpprof/dtype.h"
#include "ulpprof/status.h"

/* ---- The reference: a narrow float format described from FORMAT.md --------------- */

typedef struct ref_fmt {
    ulp_dtype dtype;
    int width; /* bits */
    int ebits, mbits, bias;
    int fn; /* e4m3fn: no infinities, only S.1111.111 is NaN */
} ref_fmt;

static const ref_fmt REF_BF16 = {ULP_DTYPE_BF16, 16, 8, 7, 127, 0};
static const ref_fmt REF_F16 = {ULP_DTYPE_F16, 16, 5, 10, 15, 0};
static const ref_fmt REF_E4M3 = {ULP_DTYPE_F8E4M3, 8, 4, 3, 7, 1};
static const ref_fmt REF_E5M2 = {ULP_DTYPE_F8E5M2, 8, 5, 2, 15, 0};
static const ref_fmt *const REF_FORMATS[] = {&REF_BF16, &REF_F16, &REF_E4M3, &REF_E5M2};

/* Decodes a pattern from its fields; sets *cls. */
static double ref_decode(const ref_fmt *f, uint32_t bits, ulp_fpclass *cls)
{
    uint32_t emax = (1u << f->ebits) - 1, mmax = (1u << f->mbits) - 1;
    int neg = (bits >> (f->width - 1)) & 1;
    uint32_t e = (bits >> f->mbits) & emax, m = bits & mmax;
    double v;
    if (!f->fn && e == emax) {
        *cls = m == 0 ? ULP_FPCLASS_INF : ULP_FPCLASS_NAN;
        v = m == 0 ? INFINITY : NAN;
    } else if (f->fn && e == emax && m == mmax) {
        *cls = ULP_FPCLASS_NAN;
        v = NAN;
    } else if (e == 0) {
        *cls = m == 0 ? ULP_FPCLASS_ZERO : ULP_FPCLASS_SUBNORMAL;
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    } else {
        *cls = ULP_FPCLASS_NORMAL;
        v = ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
    }
    return neg ? -v : v;
}

static int is_finite_class(ulp_fpclass c)
{
    return c == ULP_FPCLASS_ZERO || c == ULP_FPCLASS_SUBNORMAL || c == ULP_FPCLASS_NORMAL;
}

/* The non-negative finite values of a format, sorted by value (by qsort, not by bits). */
typedef struct vb {
    double v;
    uint32_t bits;
} vb;

static int vb_cmp(const void *a, const void *b)
{
    double x = ((const vb *)a)->v, y = ((const vb *)b)->v;
    return (x > y) - (x < y);
}

typedef struct ref_table {
    vb *pos;                /* non-negative finite values, ascending, + one overflow sentinel */
    size_t npos;            /* including the sentinel */
    uint32_t overflow_bits; /* what overflow gives (positive) */
} ref_table;

static void ref_table_build(const ref_fmt *f, ref_table *t)
{
    uint32_t n = 1u << f->width, half = n / 2;
    t->pos = calloc(half + 1, sizeof *t->pos);
    assert_non_null(t->pos);
    t->npos = 0;
    for (uint32_t b = 0; b < half; b++) {
        ulp_fpclass c;
        double v = ref_decode(f, b, &c);
        if (is_finite_class(c))
            t->pos[t->npos++] = (vb){v, b};
    }
    qsort(t->pos, t->npos, sizeof *t->pos, vb_cmp);
    /* The value the next pattern would have with an unbounded exponent: the
     * largest finite value plus one spacing.  Its bits decide ties: IEEE's
     * inf pattern has an even mantissa (0), e4m3fn's 0x7f is odd. */
    double max = t->pos[t->npos - 1].v, below = t->pos[t->npos - 2].v;
    uint32_t inf_bits = ((1u << f->ebits) - 1) << f->mbits;
    t->overflow_bits = f->fn ? inf_bits | ((1u << f->mbits) - 1) : inf_bits;
    uint32_t next_bits = t->pos[t->npos - 1].bits + 1;
    t->pos[t->npos] = (vb){max + (max - below), next_bits};
    t->npos++;
}

/* float -> narrow, nearest-even, by searching the values. */
static uint32_t ref_round(const ref_fmt *f, const ref_table *t, float x)
{
    uint32_t sign = signbit(x) ? 1u << (f->width - 1) : 0;
    uint32_t inf_bits = ((1u << f->ebits) - 1) << f->mbits;
    if (isnan(x))
        return sign | (f->fn ? t->overflow_bits : inf_bits | (1u << (f->mbits - 1)));
    if (isinf(x))
        return sign | t->overflow_bits;
    double ax = fabs((double)x);
    /* Largest index with pos[i].v <= ax. */
    size_t lo = 0, hi = t->npos;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t->pos[mid].v <= ax)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t bits;
    if (t->pos[lo].v == ax || lo == t->npos - 1) {
        bits = lo == t->npos - 1 ? t->overflow_bits : t->pos[lo].bits;
    } else {
        double mid = (t->pos[lo].v + t->pos[lo + 1].v) / 2; /* exact: few significant bits */
        uint32_t lb = t->pos[lo].bits, hb = t->pos[lo + 1].bits;
        if (ax < mid)
            bits = lb;
        else if (ax > mid)
            bits = hb;
        else
            bits = (lb & 1) == 0 ? lb : hb;
        if (lo + 1 == t->npos - 1 && bits == hb)
            bits = t->overflow_bits;
    }
    return sign | bits;
}

static uint32_t call_round(ulp_dtype d, float x)
{
    switch (d) {
    case ULP_DTYPE_BF16:
        return ulp_f32_to_bf16(x);
    case ULP_DTYPE_F16:
        return ulp_f32_to_f16(x);
    case ULP_DTYPE_F8E4M3:
        return ulp_f32_to_f8e4m3(x);
    case ULP_DTYPE_F8E5M2:
        return ulp_f32_to_f8e5m2(x);
    default:
        fail();
        return 0;
    }
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* xorshift64*, deterministic */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Checks one rounding; on mismatch prints the case (cmocka stops at the first). */
static void check_round(const ref_fmt *f, const ref_table *t, float x)
{
    uint32_t want = ref_round(f, t, x), got = call_round(f->dtype, x);
    if (want != got) {
        ulp_fpclass c;
        double wv = ref_decode(f, want, &c);
        if (c == ULP_FPCLASS_NAN && isnan(x)) {
            /* Any quiet NaN with the sign kept is right for IEEE formats. */
            ulp_fpclass gc;
            ref_decode(f, got, &gc);
            if (gc == ULP_FPCLASS_NAN && (got >> (f->width - 1)) == (want >> (f->width - 1)))
                return;
        }
        print_error("%s: f32 %a (0x%08x): got 0x%x, want 0x%x (%g)\n", ulp_dtype_name(f->dtype),
                    (double)x, f32_bits(x), got, want, wv);
        fail();
    }
}

/* ---- Table ------------------------------------------------------------------------ */

static void test_dtype__table_matches_format_md(void **state)
{
    (void)state;
    /* FORMAT.md "Element storage" and the usual definitions of the formats. */
    static const struct {
        const char *name;
        unsigned size, is_float, is_signed, exp, man;
        int bias;
        unsigned has_inf;
    } want[ULP_DTYPE_COUNT] = {
        [ULP_DTYPE_F64] = {"f64", 8, 1, 1, 11, 52, 1023, 1},
        [ULP_DTYPE_F32] = {"f32", 4, 1, 1, 8, 23, 127, 1},
        [ULP_DTYPE_F16] = {"f16", 2, 1, 1, 5, 10, 15, 1},
        [ULP_DTYPE_BF16] = {"bf16", 2, 1, 1, 8, 7, 127, 1},
        [ULP_DTYPE_F8E4M3] = {"f8e4m3", 1, 1, 1, 4, 3, 7, 0},
        [ULP_DTYPE_F8E5M2] = {"f8e5m2", 1, 1, 1, 5, 2, 15, 1},
        [ULP_DTYPE_I64] = {"i64", 8, 0, 1, 0, 0, 0, 0},
        [ULP_DTYPE_I32] = {"i32", 4, 0, 1, 0, 0, 0, 0},
        [ULP_DTYPE_I16] = {"i16", 2, 0, 1, 0, 0, 0, 0},
        [ULP_DTYPE_I8] = {"i8", 1, 0, 1, 0, 0, 0, 0},
        [ULP_DTYPE_U8] = {"u8", 1, 0, 0, 0, 0, 0, 0},
    };
    for (int d = 0; d < ULP_DTYPE_COUNT; d++) {
        const ulp_dtype_info *i = ulp_dtype_get((ulp_dtype)d);
        assert_non_null(i);
        assert_string_equal(i->name, want[d].name);
        assert_int_equal(i->size, want[d].size);
        assert_int_equal(i->is_float, want[d].is_float);
        assert_int_equal(i->is_signed, want[d].is_signed);
        assert_int_equal(i->exp_bits, want[d].exp);
        assert_int_equal(i->man_bits, want[d].man);
        assert_int_equal(i->bias, want[d].bias);
        assert_int_equal(i->has_inf, want[d].has_inf);
        if (i->is_float) /* sign + exponent + mantissa fill the storage */
            assert_int_equal(1 + i->exp_bits + i->man_bits, 8 * i->size);
        assert_int_equal(ulp_dtype_from_name(want[d].name), d);
        assert_string_equal(ulp_dtype_name((ulp_dtype)d), want[d].name);
        assert_int_equal(ulp_dtype_size((ulp_dtype)d), want[d].size);
    }
    assert_null(ulp_dtype_get(ULP_DTYPE_INVALID));
    assert_null(ulp_dtype_get(ULP_DTYPE_COUNT));
    assert_string_equal(ulp_dtype_name(ULP_DTYPE_INVALID), "invalid");
    assert_int_equal(ulp_dtype_size(ULP_DTYPE_INVALID), 0);
    const char *unknown[] = {"", "BF16", "f8e4m3fn", "float32", "f8", "u16", "bf16 ", NULL};
    for (int k = 0; k < (int)(sizeof unknown / sizeof unknown[0]); k++)
        assert_int_equal(ulp_dtype_from_name(unknown[k]), ULP_DTYPE_INVALID);
}

static void test_dtype__load_bits(void **state)
{
    (void)state;
    const uint8_t bytes[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
    assert_int_equal(ulp_dtype_load_bits(ULP_DTYPE_U8, bytes), 0x01);
    assert_int_equal(ulp_dtype_load_bits(ULP_DTYPE_F8E4M3, bytes + 7), 0xef);
    assert_int_equal(ulp_dtype_load_bits(ULP_DTYPE_BF16, bytes), 0x2301);
    assert_int_equal(ulp_dtype_load_bits(ULP_DTYPE_I32, bytes), 0x67452301u);
    assert_true(ulp_dtype_load_bits(ULP_DTYPE_F64, bytes) == 0xefcdab8967452301ull);
}

/* ---- Exhaustive narrow formats ------------------------------------------------------ */

static void exhaustive_decode(const ref_fmt *f)
{
    uint32_t n = 1u << f->width;
    for (uint32_t b = 0; b < n; b++) {
        ulp_fpclass want_c;
        double want = ref_decode(f, b, &want_c);
        ulp_fpclass got_c = ulp_dtype_classify(f->dtype, b);
        double got = ulp_dtype_to_double(f->dtype, b);
        if (got_c != want_c || !(got == want || (isnan(got) && isnan(want))) ||
            (want == 0 && signbit(got) != signbit(want))) {
            print_error("%s 0x%x: class %d/%d value %g/%g\n", ulp_dtype_name(f->dtype), b, got_c,
                        want_c, got, want);
            fail();
        }
    }
}

static void test_dtype__decode_exhaustive(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof REF_FORMATS / sizeof REF_FORMATS[0]; k++)
        exhaustive_decode(REF_FORMATS[k]);
    /* Landmarks, from the format definitions. */
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F8E4M3, 0x7e) == 448.0);
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F8E4M3, 0x01) == ldexp(1, -9));
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F8E5M2, 0x7b) == 57344.0);
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F8E5M2, 0x01) == ldexp(1, -16));
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F16, 0x7bff) == 65504.0);
    assert_true(ulp_dtype_to_double(ULP_DTYPE_F16, 0x0001) == ldexp(1, -24));
    assert_true(ulp_dtype_to_double(ULP_DTYPE_BF16, 0x7f7f) == 3.3895313892515355e38);
    assert_true(ulp_dtype_to_double(ULP_DTYPE_BF16, 0x0001) == ldexp(1, -133));
    assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F8E4M3, 0x78), ULP_FPCLASS_NORMAL); /* 256 */
    assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F8E4M3, 0xff), ULP_FPCLASS_NAN);
    assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F8E5M2, 0x7c), ULP_FPCLASS_INF);
}

static void test_dtype__f16_vs_compiler(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        _Float16 c;
        memcpy(&c, &h, 2);
        double want = (double)c;
        double got = ulp_dtype_to_double(ULP_DTYPE_F16, b);
        float w32 = ulp_f16_to_f32(h);
        assert_true(got == want || (isnan(got) && isnan(want)));
        assert_true((double)w32 == want || (isnan(w32) && isnan(want)));
        assert_int_equal(signbit(w32) != 0, (b >> 15) != 0);
        /* bf16 widening is a shift by construction of the format. */
        float bw = ulp_bf16_to_f32(h);
        assert_int_equal(f32_bits(bw), b << 16);
    }
}

static void exhaustive_ordered(const ref_fmt *f)
{
    uint32_t n = 1u << f->width;
    vb *all = calloc(n, sizeof *all);
    size_t m = 0;
    assert_non_null(all);
    for (uint32_t b = 0; b < n; b++) {
        ulp_fpclass c;
        double v = ref_decode(f, b, &c);
        if (is_finite_class(c))
            all[m++] = (vb){v, b};
    }
    qsort(all, m, sizeof *all, vb_cmp);
    for (size_t i = 0; i < m; i++) {
        int64_t o = ulp_dtype_ordered(f->dtype, all[i].bits);
        if (all[i].v == 0.0)
            assert_int_equal(o, 0); /* +0 and -0 */
        if (i > 0) {
            int64_t prev = ulp_dtype_ordered(f->dtype, all[i - 1].bits);
            /* neighbours by value are one apart; the two zeros are equal */
            assert_int_equal(o - prev, all[i].v == all[i - 1].v ? 0 : 1);
        }
    }
    free(all);
}

static void test_dtype__ordered_exhaustive(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof REF_FORMATS / sizeof REF_FORMATS[0]; k++)
        exhaustive_ordered(REF_FORMATS[k]);
}

static void exhaustive_ulp_at(const ref_fmt *f)
{
    ref_table t;
    ref_table_build(f, &t);
    size_t nf = t.npos - 1; /* finite values, without the sentinel */
    double min_sub = t.pos[1].v, top = t.pos[nf - 1].v - t.pos[nf - 2].v;
    for (size_t i = 0; i < nf; i++) {
        double x = t.pos[i].v;
        /* The spacing of the binade x lies in: to the next value up, or at the
         * top (and in the largest binade) the spacing below. */
        double want = i + 1 < nf ? t.pos[i + 1].v - x : top;
        if (x == 0)
            want = min_sub;
        assert_true(ulp_dtype_ulp_at(f->dtype, x) == want);
        assert_true(ulp_dtype_ulp_at(f->dtype, -x) == want);
        if (i + 1 < nf) { /* between two values: the lower one's binade */
            double mid = (x + t.pos[i + 1].v) / 2;
            assert_true(ulp_dtype_ulp_at(f->dtype, mid) == (x == 0 ? min_sub : want));
        }
    }
    assert_true(ulp_dtype_ulp_at(f->dtype, INFINITY) == top);
    assert_true(ulp_dtype_ulp_at(f->dtype, 1e300) == top);
    assert_true(ulp_dtype_ulp_at(f->dtype, 1e-300) == min_sub);
    assert_true(isnan(ulp_dtype_ulp_at(f->dtype, NAN)));
    free(t.pos);
}

static void test_dtype__ulp_at_exhaustive(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof REF_FORMATS / sizeof REF_FORMATS[0]; k++)
        exhaustive_ulp_at(REF_FORMATS[k]);
    assert_true(ulp_dtype_ulp_at(ULP_DTYPE_F32, 1.0) == ldexp(1, -23));
    assert_true(ulp_dtype_ulp_at(ULP_DTYPE_F64, 1.0) == ldexp(1, -52));
    assert_true(ulp_dtype_ulp_at(ULP_DTYPE_F32, 0.0) == ldexp(1, -149));
    assert_true(ulp_dtype_ulp_at(ULP_DTYPE_I32, 12345.0) == 1.0);
}

/* ---- float32 -> narrow rounding ------------------------------------------------------ */

static void rounding_for(const ref_fmt *f)
{
    ref_table t;
    ref_table_build(f, &t);
    size_t nf = t.npos - 1;
    for (size_t i = 0; i < nf; i++) {
        for (int neg = 0; neg < 2; neg++) {
            double s = neg ? -1.0 : 1.0;
            float x = (float)(s * t.pos[i].v); /* exact: every narrow value fits */
            assert_true((double)x == s * t.pos[i].v);
            check_round(f, &t, x);
            uint32_t want_exact = (neg ? 1u << (f->width - 1) : 0) | t.pos[i].bits;
            assert_int_equal(call_round(f->dtype, x), want_exact);
            /* the midpoint to the next value (the sentinel included: overflow),
             * and one float32 ulp either side of it */
            double mid = (t.pos[i].v + t.pos[i + 1].v) / 2;
            float fm = (float)(s * mid);
            assert_true((double)fm == s * mid);
            check_round(f, &t, fm);
            check_round(f, &t, nextafterf(fm, INFINITY));
            check_round(f, &t, nextafterf(fm, -INFINITY));
            check_round(f, &t, nextafterf(x, INFINITY));
            check_round(f, &t, nextafterf(x, -INFINITY));
        }
    }
    /* Random float32 patterns, all classes, and random values inside the range. */
    double maxv = t.pos[nf - 1].v;
    for (int k = 0; k < 400000; k++) {
        uint64_t r = rng();
        check_round(f, &t, f32_from_bits((uint32_t)r));
        float v = (float)ldexp((double)(r >> 40) / (double)(1 << 24), (int)(r % 40) - 30);
        if ((double)v <= maxv * 2)
            check_round(f, &t, (r >> 39) & 1 ? -v : v);
    }
    /* Specials. */
    uint32_t sign = 1u << (f->width - 1);
    uint32_t inf_bits = ((1u << f->ebits) - 1) << f->mbits;
    uint32_t nan_fn = inf_bits | ((1u << f->mbits) - 1);
    assert_int_equal(call_round(f->dtype, INFINITY), f->fn ? nan_fn : inf_bits);
    assert_int_equal(call_round(f->dtype, -INFINITY), sign | (f->fn ? nan_fn : inf_bits));
    assert_int_equal(call_round(f->dtype, FLT_MAX), f->fn ? nan_fn : inf_bits);
    assert_int_equal(call_round(f->dtype, 0.0f), 0);
    assert_int_equal(call_round(f->dtype, -0.0f), sign);
    assert_int_equal(call_round(f->dtype, f32_from_bits(1)), 0); /* underflow to +0 */
    assert_int_equal(call_round(f->dtype, -f32_from_bits(1)), sign);
    float half_min = (float)(t.pos[1].v / 2); /* tie between 0 (even) and min subnormal */
    assert_int_equal(call_round(f->dtype, half_min), 0);
    assert_int_equal(call_round(f->dtype, nextafterf(half_min, 1.0f)), 1);
    for (int neg = 0; neg < 2; neg++) {
        float qn = f32_from_bits((neg ? 0x80000000u : 0) | 0x7fc00001u);
        float sn = f32_from_bits((neg ? 0x80000000u : 0) | 0x7f800001u);
        uint32_t a = call_round(f->dtype, qn), b = call_round(f->dtype, sn);
        assert_int_equal(ulp_dtype_classify(f->dtype, a), ULP_FPCLASS_NAN);
        assert_int_equal(ulp_dtype_classify(f->dtype, b), ULP_FPCLASS_NAN);
        assert_int_equal(a >> (f->width - 1), (uint32_t)neg);
        assert_int_equal(b >> (f->width - 1), (uint32_t)neg);
        if (!f->fn) /* quiet: the top mantissa bit set */
            assert_true(b & (1u << (f->mbits - 1)));
    }
    free(t.pos);
}

static void test_dtype__round_bf16(void **state)
{
    (void)state;
    rounding_for(&REF_BF16);
    /* Cases HDF5's own conversion gets wrong (docs/hdf5.md): ties to even,
     * overflow to inf. */
    assert_int_equal(ulp_f32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80); /* tie, even down */
    assert_int_equal(ulp_f32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82); /* tie, even up */
    assert_int_equal(ulp_f32_to_bf16(f32_from_bits(0x7f7fffffu)), 0x7f80);
}

static void test_dtype__round_f16(void **state)
{
    (void)state;
    rounding_for(&REF_F16);
    /* And against the compiler's conversion (round to nearest even). */
    for (int k = 0; k < 1000000; k++) {
        float x = f32_from_bits((uint32_t)rng());
        _Float16 h = (_Float16)x;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        uint16_t got = ulp_f32_to_f16(x);
        if (isnan(x))
            assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F16, got), ULP_FPCLASS_NAN);
        else
            assert_int_equal(got, hb);
    }
    assert_int_equal(ulp_f32_to_f16(65520.0f), 0x7c00); /* midpoint above max -> inf */
    assert_int_equal(ulp_f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7bff);
}

static void test_dtype__round_f8e4m3(void **state)
{
    (void)state;
    rounding_for(&REF_E4M3);
    assert_int_equal(ulp_f32_to_f8e4m3(448.0f), 0x7e);
    assert_int_equal(ulp_f32_to_f8e4m3(464.0f), 0x7e);                   /* tie: 0x7e is even */
    assert_int_equal(ulp_f32_to_f8e4m3(nextafterf(464.0f, 1e9f)), 0x7f); /* NaN */
    assert_int_equal(ulp_f32_to_f8e4m3(-1e9f), 0xff);
}

static void test_dtype__round_f8e5m2(void **state)
{
    (void)state;
    rounding_for(&REF_E5M2);
    assert_int_equal(ulp_f32_to_f8e5m2(57344.0f), 0x7b);
    assert_int_equal(ulp_f32_to_f8e5m2(61440.0f), 0x7c); /* tie above max: inf */
    assert_int_equal(ulp_f32_to_f8e5m2(nextafterf(61440.0f, 0.0f)), 0x7b);
}

/* ---- Wide floats and integers on edge patterns ---------------------------------------- */

static void test_dtype__f32_f64_edges(void **state)
{
    (void)state;
    static const struct {
        uint32_t bits;
        ulp_fpclass cls;
        int64_t ordered;
    } f32[] = {
        {0x00000000u, ULP_FPCLASS_ZERO, 0},
        {0x80000000u, ULP_FPCLASS_ZERO, 0},
        {0x00000001u, ULP_FPCLASS_SUBNORMAL, 1},
        {0x80000001u, ULP_FPCLASS_SUBNORMAL, -1},
        {0x007fffffu, ULP_FPCLASS_SUBNORMAL, 0x7fffff},
        {0x00800000u, ULP_FPCLASS_NORMAL, 0x800000},
        {0x3f800000u, ULP_FPCLASS_NORMAL, 0x3f800000},
        {0xbf800000u, ULP_FPCLASS_NORMAL, -0x3f800000},
        {0x7f7fffffu, ULP_FPCLASS_NORMAL, 0x7f7fffff},
        {0xff7fffffu, ULP_FPCLASS_NORMAL, -0x7f7fffff},
        {0x7f800000u, ULP_FPCLASS_INF, 0x7f800000},
        {0xff800000u, ULP_FPCLASS_INF, -0x7f800000},
        {0x7fc00000u, ULP_FPCLASS_NAN, 0x7fc00000},
        {0x7f800001u, ULP_FPCLASS_NAN, 0x7f800001},
        {0xffffffffu, ULP_FPCLASS_NAN, -0x7fffffff},
    };
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) {
        assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F32, f32[i].bits), f32[i].cls);
        if (f32[i].cls != ULP_FPCLASS_NAN && f32[i].cls != ULP_FPCLASS_INF)
            assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_F32, f32[i].bits), f32[i].ordered);
        double want = (double)f32_from_bits(f32[i].bits),
               got = ulp_dtype_to_double(ULP_DTYPE_F32, f32[i].bits);
        assert_true(got == want || (isnan(got) && isnan(want)));
        /* the f32 -> f32 view agrees with fpclassify */
        int fc = fpclassify(f32_from_bits(f32[i].bits));
        ulp_fpclass c = fc == FP_ZERO        ? ULP_FPCLASS_ZERO
                        : fc == FP_SUBNORMAL ? ULP_FPCLASS_SUBNORMAL
                        : fc == FP_NORMAL    ? ULP_FPCLASS_NORMAL
                        : fc == FP_INFINITE  ? ULP_FPCLASS_INF
                                             : ULP_FPCLASS_NAN;
        assert_int_equal(c, f32[i].cls);
    }
    /* 1.0 and its neighbours: one apart */
    assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_F32, 0x3f800001u) -
                         ulp_dtype_ordered(ULP_DTYPE_F32, 0x3f800000u),
                     1);
    assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_F32, 0x00000001u) -
                         ulp_dtype_ordered(ULP_DTYPE_F32, 0x80000001u),
                     2);

    static const double f64v[] = {
        0.0,       -0.0, 4.9406564584124654e-324, -4.9406564584124654e-324, 2.2250738585072014e-308,
        1.0,       -1.0, 1.7976931348623157e308,  -1.7976931348623157e308,  INFINITY,
        -INFINITY, NAN};
    for (size_t i = 0; i < sizeof f64v / sizeof f64v[0]; i++) {
        uint64_t b;
        memcpy(&b, &f64v[i], 8);
        double got = ulp_dtype_to_double(ULP_DTYPE_F64, b);
        assert_memory_equal(&got, &f64v[i], 8);
        int fc = fpclassify(f64v[i]);
        ulp_fpclass want = fc == FP_ZERO        ? ULP_FPCLASS_ZERO
                           : fc == FP_SUBNORMAL ? ULP_FPCLASS_SUBNORMAL
                           : fc == FP_NORMAL    ? ULP_FPCLASS_NORMAL
                           : fc == FP_INFINITE  ? ULP_FPCLASS_INF
                                                : ULP_FPCLASS_NAN;
        assert_int_equal(ulp_dtype_classify(ULP_DTYPE_F64, b), want);
        if (isfinite(f64v[i])) {
            int64_t mag = (int64_t)(b & 0x7fffffffffffffffull);
            assert_true(ulp_dtype_ordered(ULP_DTYPE_F64, b) == (signbit(f64v[i]) ? -mag : mag));
        }
    }
    /* next after 1.0 is one ordered step up */
    double one = 1.0, next = nextafter(1.0, 2.0);
    uint64_t b1, b2;
    memcpy(&b1, &one, 8);
    memcpy(&b2, &next, 8);
    assert_true(ulp_dtype_ordered(ULP_DTYPE_F64, b2) - ulp_dtype_ordered(ULP_DTYPE_F64, b1) == 1);
}

static void test_dtype__integers(void **state)
{
    (void)state;
    static const struct {
        ulp_dtype d;
        uint64_t bits;
        int64_t value;
    } cases[] = {
        {ULP_DTYPE_I8, 0x00, 0},
        {ULP_DTYPE_I8, 0x7f, 127},
        {ULP_DTYPE_I8, 0x80, -128},
        {ULP_DTYPE_I8, 0xff, -1},
        {ULP_DTYPE_U8, 0xff, 255},
        {ULP_DTYPE_U8, 0x80, 128},
        {ULP_DTYPE_I16, 0x8000, -32768},
        {ULP_DTYPE_I16, 0x7fff, 32767},
        {ULP_DTYPE_I16, 0xffff, -1},
        {ULP_DTYPE_I32, 0x80000000u, INT32_MIN},
        {ULP_DTYPE_I32, 0x7fffffffu, INT32_MAX},
        {ULP_DTYPE_I32, 0xfffffffeu, -2},
        {ULP_DTYPE_I64, 0x8000000000000000ull, INT64_MIN},
        {ULP_DTYPE_I64, 0x7fffffffffffffffull, INT64_MAX},
        {ULP_DTYPE_I64, 0xffffffffffffffffull, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_true(ulp_dtype_ordered(cases[i].d, cases[i].bits) == cases[i].value);
        assert_true(ulp_dtype_to_double(cases[i].d, cases[i].bits) == (double)cases[i].value);
        assert_int_equal(ulp_dtype_classify(cases[i].d, cases[i].bits),
                         cases[i].value == 0 ? ULP_FPCLASS_ZERO : ULP_FPCLASS_NORMAL);
    }
    /* exhaustive for the 8-bit ones */
    for (int b = 0; b < 256; b++) {
        assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_I8, (uint64_t)b), (int8_t)b);
        assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_U8, (uint64_t)b), b);
    }
    for (int b = 0; b < 65536; b++)
        assert_int_equal(ulp_dtype_ordered(ULP_DTYPE_I16, (uint64_t)b), (int16_t)b);
}

/* ---- HDF5 file types (FORMAT.md) --------------------------------------------------------- */

static void test_dtype__h5_file_types(void **state)
{
    (void)state;
    ulp__h5_silence();
    static const struct {
        ulp_dtype d;
        int is_float;
        size_t size;
        size_t spos, epos, esize, mpos, msize, ebias;
    } floats[] = {
        {ULP_DTYPE_F64, 1, 8, 63, 52, 11, 0, 52, 1023},
        {ULP_DTYPE_F32, 1, 4, 31, 23, 8, 0, 23, 127},
        {ULP_DTYPE_F16, 1, 2, 15, 10, 5, 0, 10, 15},
        {ULP_DTYPE_BF16, 1, 2, 15, 7, 8, 0, 7, 127},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        hid_t t = ulp__h5_file_type(floats[i].d);
        assert_true(t >= 0);
        assert_int_equal(H5Tget_class(t), H5T_FLOAT);
        assert_int_equal(H5Tget_size(t), floats[i].size);
        assert_int_equal(H5Tget_precision(t), 8 * floats[i].size);
        assert_int_equal(H5Tget_order(t), H5T_ORDER_LE);
        size_t spos, epos, esize, mpos, msize;
        assert_true(H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0);
        assert_int_equal(spos, floats[i].spos);
        assert_int_equal(epos, floats[i].epos);
        assert_int_equal(esize, floats[i].esize);
        assert_int_equal(mpos, floats[i].mpos);
        assert_int_equal(msize, floats[i].msize);
        assert_int_equal(H5Tget_ebias(t), floats[i].ebias);
        assert_int_equal(H5Tget_norm(t), H5T_NORM_IMPLIED);
        assert_true(ulp__h5_type_fits(t, floats[i].d));
        H5Tclose(t);
    }
    hid_t t = ulp__h5_file_type(ULP_DTYPE_F64);
    assert_true(H5Tequal(t, H5T_IEEE_F64LE) > 0);
    H5Tclose(t);
    t = ulp__h5_file_type(ULP_DTYPE_F32);
    assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
    H5Tclose(t);
    static const struct {
        ulp_dtype d;
        hid_t want;
    } ints[] = {
        {ULP_DTYPE_F8E4M3, 0}, {ULP_DTYPE_F8E5M2, 0}, {ULP_DTYPE_U8, 0},  {ULP_DTYPE_I8, 1},
        {ULP_DTYPE_I16, 2},    {ULP_DTYPE_I32, 3},    {ULP_DTYPE_I64, 4},
    };
    hid_t std[] = {H5T_STD_U8LE, H5T_STD_I8LE, H5T_STD_I16LE, H5T_STD_I32LE, H5T_STD_I64LE};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        t = ulp__h5_file_type(ints[i].d);
        assert_true(t >= 0);
        assert_true(H5Tequal(t, std[ints[i].want]) > 0);
        assert_true(ulp__h5_type_fits(t, ints[i].d));
        H5Tclose(t);
    }
    assert_true(ulp__h5_file_type(ULP_DTYPE_INVALID) < 0);
    /* what a reader accepts: same size, little-endian, float or integer */
    assert_true(ulp__h5_type_fits(H5T_STD_U16LE, ULP_DTYPE_BF16));
    assert_false(ulp__h5_type_fits(H5T_IEEE_F32LE, ULP_DTYPE_BF16));
    assert_false(ulp__h5_type_fits(H5T_IEEE_F32BE, ULP_DTYPE_F32));
    assert_false(ulp__h5_type_fits(H5T_C_S1, ULP_DTYPE_U8));
    assert_false(ulp__h5_type_fits(H5T_STD_U8LE, ULP_DTYPE_INVALID));
}

/* ---- Status map ------------------------------------------------------------------------------ */

static void test_dtype__status_map(void **state)
{
    (void)state;
    static const struct {
        ulp_status st;
        int code;
        const char *name;
    } all[] = {
#define XX(name, code, msg) {ULP_##name, code, "ULP_" #name},
        ULP_STATUS_MAP(XX)
#undef XX
    };
    size_t n = sizeof all / sizeof all[0];
    assert_true(n >= 21);
    assert_int_equal(ULP_OK, 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal((int)all[i].st, all[i].code);
        if (i > 0)
            assert_true(all[i].code < 0);
        const char *msg = ulp_status_str(all[i].st);
        assert_non_null(msg);
        assert_true(strlen(msg) > 0);
        assert_string_not_equal(msg, "unknown status");
        assert_string_equal(ulp_status_name(all[i].st), all[i].name);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(all[i].code, all[j].code);
            assert_string_not_equal(msg, ulp_status_str(all[j].st));
        }
    }
    assert_string_equal(ulp_status_str((ulp_status)-999), "unknown status");
    assert_string_equal(ulp_status_name((ulp_status)-999), "ULP_UNKNOWN");
    assert_string_equal(ulp_status_str(ULP_ENOTHDF5), "not an HDF5 file");

    ulp_error e;
    assert_int_equal(ulp__error(&e, ULP_EFORMAT, "cannot open '%s': %s", "x.h5", "two\nlines"),
                     ULP_EFORMAT);
    assert_int_equal(e.status, ULP_EFORMAT);
    assert_string_equal(e.msg, "cannot open 'x.h5': two lines");
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ulp__error(&e, ULP_EIO, "%s", big);
    assert_int_equal(strlen(e.msg), ULP_ERROR_MSG_MAX - 1);
    assert_int_equal(ulp__error(NULL, ULP_EIO, "x"), ULP_EIO);
    ulp_error_clear(&e);
    assert_int_equal(e.status, ULP_OK);
    assert_string_equal(e.msg, "");
    ulp_error_clear(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype__table_matches_format_md),
        cmocka_unit_test(test_dtype__load_bits),
        cmocka_unit_test(test_dtype__decode_exhaustive),
        cmocka_unit_test(test_dtype__f16_vs_compiler),
        cmocka_unit_test(test_dtype__ordered_exhaustive),
        cmocka_unit_test(test_dtype__ulp_at_exhaustive),
        cmocka_unit_test(test_dtype__round_bf16),
        cmocka_unit_test(test_dtype__round_f16),
        cmocka_unit_test(test_dtype__round_f8e4m3),
        cmocka_unit_test(test_dtype__round_f8e5m2),
        cmocka_unit_test(test_dtype__f32_f64_edges),
        cmocka_unit_test(test_dtype__integers),
        cmocka_unit_test(test_dtype__h5_file_types),
        cmocka_unit_test(test_dtype__status_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
