/*
 * Element metrics of `ulpprof diff` (analyzer/diff_metrics.c) against an
 * independent computation, exhaustive where the format is small.
 *
 * The reference does not use the ordered-integer map: it decodes every bit
 * pattern to its value by the format's definition (or the compiler's own
 * _Float16 / float), sorts the finite values, and takes the ULP distance as
 * the difference of ranks (+0 and -0 share a rank).  For f32 and f64 the
 * pairs are built by stepping with nextafter(), so the distance is known by
 * construction.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzer/diff_priv.h"
#include "ulpprof/diff.h"

/* --- Reference ------------------------------------------------------------------------------ */

typedef struct ref_metrics {
    uint64_t differing, nonfinite, max_ulp, sign_changes;
    long double sum_ulp;
    uint64_t hist[ULP_DIFF_HIST_BINS];
    double max_abs_diff, max_abs;
    int64_t worst_flat, max_abs_diff_flat;
} ref_metrics;

/* Bin by walking the documented edges 0 | 1 | 2 | 3-4 | 5-8 | ... */
static int ref_bin(uint64_t d)
{
    if (d == 0)
        return 0;
    int k = 1;
    long double hi = 1;
    while ((long double)d > hi) {
        hi *= 2;
        k++;
    }
    return k;
}

typedef struct ref_elem {
    double v; /* value                                         */
    int finite;
    int neg;      /* sign bit                                      */
    int64_t rank; /* position among the format's finite values     */
} ref_elem;

/* The reference over a buffer, given per-element decode and rank functions. */
static void ref_compute(const ref_elem *ea, const ref_elem *eb, const uint64_t *bits_a,
                        const uint64_t *bits_b, uint64_t n, ref_metrics *r)
{
    memset(r, 0, sizeof *r);
    r->worst_flat = -1;
    r->max_abs_diff_flat = -1;
    int64_t first_dfin = -1, first_nf = -1, max_flat = -1;
    for (uint64_t i = 0; i < n; i++) {
        const ref_elem *x = &ea[i], *y = &eb[i];
        if (x->finite && fabs(x->v) > r->max_abs)
            r->max_abs = fabs(x->v);
        if (y->finite && fabs(y->v) > r->max_abs)
            r->max_abs = fabs(y->v);
        if (bits_a[i] == bits_b[i]) {
            r->hist[0]++;
            continue;
        }
        r->differing++;
        if (!(x->finite && y->finite)) {
            r->nonfinite++;
            if (first_nf < 0)
                first_nf = (int64_t)i;
            continue;
        }
        if (first_dfin < 0)
            first_dfin = (int64_t)i;
        uint64_t d =
            x->rank > y->rank ? (uint64_t)(x->rank - y->rank) : (uint64_t)(y->rank - x->rank);
        r->sum_ulp += (long double)d;
        r->hist[ref_bin(d)]++;
        if (d > r->max_ulp) {
            r->max_ulp = d;
            max_flat = (int64_t)i;
        }
        if (x->neg != y->neg && d != 0)
            r->sign_changes++;
        double ad = fabs(x->v - y->v);
        if (ad > 0 && (r->max_abs_diff_flat < 0 || ad > r->max_abs_diff)) {
            r->max_abs_diff = ad;
            r->max_abs_diff_flat = (int64_t)i;
        }
    }
    r->worst_flat = r->max_ulp ? max_flat : first_dfin >= 0 ? first_dfin : first_nf;
}

/* Spacing of the format at |x|, from its parameters (not dtype.c). */
static double ref_spacing(int man_bits, int emin, int emax, double x)
{
    double ax = fabs(x);
    int e = emin;
    if (ax != 0) {
        int fe;
        frexp(ax, &fe);
        e = fe - 1;
        e = e < emin ? emin : e > emax ? emax : e;
    }
    return ldexp(1.0, e - man_bits);
}

static void check(const ref_metrics *r, const ulp_diff_metrics *m, uint64_t n, double spacing)
{
    assert_int_equal(m->differing, r->differing);
    assert_int_equal(m->nonfinite_mismatch, r->nonfinite);
    assert_true(m->max_ulp == r->max_ulp);
    assert_int_equal(m->sign_changes, r->sign_changes);
    uint64_t dfin = r->differing - r->nonfinite;
    double mean = dfin ? (double)(r->sum_ulp / (long double)dfin) : 0.0;
    assert_true(fabs(m->mean_ulp - mean) <= 1e-12 * (mean > 1 ? mean : 1));
    uint64_t total = 0;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++) {
        if (m->hist[k] != r->hist[k])
            fail_msg("hist[%d]: %llu, expected %llu", k, (unsigned long long)m->hist[k],
                     (unsigned long long)r->hist[k]);
        total += m->hist[k];
    }
    assert_int_equal(total + m->nonfinite_mismatch, n);
    if (m->max_abs_diff != r->max_abs_diff)
        fail_msg("max_abs_diff %.17g, expected %.17g", m->max_abs_diff, r->max_abs_diff);
    assert_true(m->max_abs == r->max_abs);
    assert_int_equal(m->worst_flat, r->worst_flat);
    assert_int_equal(m->max_abs_diff_flat, r->max_abs_diff_flat);
    assert_true(m->max_abs_diff_ulps_at_max == r->max_abs_diff / spacing);
}

/* --- Narrow formats: a value table for every pattern ---------------------------------------- */

typedef struct narrow {
    ulp_dtype dtype;
    int width, man_bits, exp_bits, bias, has_inf;
    uint32_t count; /* 2^width                        */
    ref_elem *tab;  /* [count]                        */
} narrow;

static double decode_fields(const narrow *f, uint32_t bits, int *finite)
{
    uint32_t sign = bits >> (f->width - 1);
    uint32_t e = (bits >> f->man_bits) & ((1u << f->exp_bits) - 1);
    uint32_t m = bits & ((1u << f->man_bits) - 1);
    uint32_t emax = (1u << f->exp_bits) - 1;
    double v;
    *finite = 1;
    if (f->has_inf && e == emax) {
        *finite = 0;
        v = m ? (double)NAN : HUGE_VAL;
    } else if (!f->has_inf && e == emax && m == (1u << f->man_bits) - 1) {
        *finite = 0;
        v = NAN;
    } else if (e == 0) {
        v = ldexp((double)m, 1 - f->bias - f->man_bits);
    } else {
        v = ldexp(1.0 + ldexp((double)m, -f->man_bits), (int)e - f->bias);
    }
    return sign ? -v : v;
}

static const ref_elem *sort_tab;

static int cmp_idx(const void *x, const void *y)
{
    double a = sort_tab[*(const uint32_t *)x].v, b = sort_tab[*(const uint32_t *)y].v;
    return a < b ? -1 : a > b ? 1 : 0;
}

static void narrow_init(narrow *f, ulp_dtype dt, int width, int man, int exp, int bias, int has_inf)
{
    f->dtype = dt;
    f->width = width;
    f->man_bits = man;
    f->exp_bits = exp;
    f->bias = bias;
    f->has_inf = has_inf;
    f->count = 1u << width;
    f->tab = calloc(f->count, sizeof *f->tab);
    uint32_t *order = calloc(f->count, sizeof *order);
    uint32_t nfin = 0;
    assert_non_null(f->tab);
    for (uint32_t b = 0; b < f->count; b++) {
        int fin;
        double v;
        if (dt == ULP_DTYPE_BF16) {
            uint32_t u = b << 16;
            float x;
            memcpy(&x, &u, 4);
            v = (double)x;
            fin = isfinite(x);
        } else if (dt == ULP_DTYPE_F16) {
            uint16_t h = (uint16_t)b;
            _Float16 x;
            memcpy(&x, &h, 2);
            v = (double)x;
            fin = isfinite(v);
        } else {
            v = decode_fields(f, b, &fin);
        }
        f->tab[b].v = v;
        f->tab[b].finite = fin;
        f->tab[b].neg = (int)(b >> (width - 1));
        if (fin)
            order[nfin++] = b;
    }
    /* The decoders must agree with the field decoding for the IEEE-like formats too. */
    for (uint32_t b = 0; b < f->count; b++) {
        int fin;
        double v = decode_fields(f, b, &fin);
        assert_int_equal(fin, f->tab[b].finite);
        if (fin)
            assert_true(v == f->tab[b].v);
    }
    sort_tab = f->tab;
    qsort(order, nfin, sizeof *order, cmp_idx);
    int64_t rank = 0;
    for (uint32_t i = 0; i < nfin; i++) {
        if (i > 0 && f->tab[order[i]].v != f->tab[order[i - 1]].v)
            rank++;
        f->tab[order[i]].rank = rank;
    }
    free(order);
}

static void narrow_free(narrow *f)
{
    free(f->tab);
}

static double narrow_spacing(const narrow *f, double x)
{
    int emin = 1 - f->bias;
    int emax = (f->has_inf ? (1 << f->exp_bits) - 2 : (1 << f->exp_bits) - 1) - f->bias;
    return ref_spacing(f->man_bits, emin, emax, x);
}

static void store(void *buf, int width, uint64_t i, uint32_t v)
{
    if (width == 8)
        ((uint8_t *)buf)[i] = (uint8_t)v;
    else
        ((uint16_t *)buf)[i] = (uint16_t)v;
}

/* Compares the whole buffer, then each pair alone. */
static void narrow_check_pairs(const narrow *f, const uint32_t *pa, const uint32_t *pb, uint64_t n,
                               int per_pair)
{
    size_t sz = (size_t)f->width / 8;
    void *a = malloc(n * sz + 1), *b = malloc(n * sz + 1);
    ref_elem *ea = malloc(n * sizeof *ea + 1), *eb = malloc(n * sizeof *eb + 1);
    uint64_t *ba = malloc(n * 8 + 8), *bb = malloc(n * 8 + 8);
    for (uint64_t i = 0; i < n; i++) {
        store(a, f->width, i, pa[i]);
        store(b, f->width, i, pb[i]);
        ea[i] = f->tab[pa[i]];
        eb[i] = f->tab[pb[i]];
        ba[i] = pa[i];
        bb[i] = pb[i];
    }
    ref_metrics r;
    ulp_diff_metrics m;
    ref_compute(ea, eb, ba, bb, n, &r);
    ulp_diff_buffers(f->dtype, a, b, n, 0, NULL, &m);
    check(&r, &m, n, narrow_spacing(f, r.max_abs));
    if (m.worst_flat >= 0) {
        assert_int_equal(m.worst_bits_a, pa[m.worst_flat]);
        assert_int_equal(m.worst_bits_b, pb[m.worst_flat]);
    }
    for (uint64_t i = 0; per_pair && i < n; i++) {
        ref_compute(&ea[i], &eb[i], &ba[i], &bb[i], 1, &r);
        ulp_diff_buffers(f->dtype, (char *)a + i * sz, (char *)b + i * sz, 1, 0, NULL, &m);
        check(&r, &m, 1, narrow_spacing(f, r.max_abs));
    }
    free(a);
    free(b);
    free(ea);
    free(eb);
    free(ba);
    free(bb);
}

static void fp8_all_pairs(ulp_dtype dt, int man, int exp, int bias, int has_inf)
{
    narrow f;
    narrow_init(&f, dt, 8, man, exp, bias, has_inf);
    uint32_t *pa = malloc(65536 * 4), *pb = malloc(65536 * 4);
    for (uint32_t i = 0; i < 65536; i++) {
        pa[i] = i >> 8;
        pb[i] = i & 0xff;
    }
    narrow_check_pairs(&f, pa, pb, 65536, 1);
    /* Same pairs in the opposite role. */
    narrow_check_pairs(&f, pb, pa, 65536, 0);
    free(pa);
    free(pb);
    narrow_free(&f);
}

static void test_diff_metrics__e4m3_all_pairs(void **state)
{
    (void)state;
    fp8_all_pairs(ULP_DTYPE_F8E4M3, 3, 4, 7, 0);
}

static void test_diff_metrics__e5m2_all_pairs(void **state)
{
    (void)state;
    fp8_all_pairs(ULP_DTYPE_F8E5M2, 2, 5, 15, 1);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Every pattern against 14 partners: itself, neighbours, its negation, specials, random. */
static void sixteen_bit_pairs(ulp_dtype dt, int man, int exp, int bias, uint32_t inf, uint32_t qnan)
{
    narrow f;
    narrow_init(&f, dt, 16, man, exp, bias, 1);
    const int per = 14;
    uint64_t n = 65536u * per;
    uint32_t *pa = malloc(n * 4), *pb = malloc(n * 4);
    uint64_t q = 0;
    for (uint32_t a = 0; a < 65536; a++) {
        const uint32_t partners[] = {
            a,
            a ^ 1,
            (a + 1) & 0xffff,
            (a - 1) & 0xffff,
            a ^ 0x8000,
            (a + 3) & 0xffff,
            (uint32_t)rnd() & 0xffff,
            (uint32_t)rnd() & 0xffff,
            (uint32_t)rnd() & 0xffff,
            0,
            0x8000,
            inf,
            qnan | 1,
            (a & 0x8000) | ((uint32_t)rnd() & 0x3ff),
        };
        for (int k = 0; k < per; k++) {
            pa[q] = a;
            pb[q] = partners[k];
            q++;
        }
    }
    narrow_check_pairs(&f, pa, pb, n, 1);
    /* Random blocks of neighbours, where the whole-buffer maxima are hard to get right. */
    for (uint64_t i = 0; i < n; i++) {
        pa[i] = (uint32_t)rnd() & 0x7fff;
        pb[i] = (rnd() % 100 == 0) ? (pa[i] + (uint32_t)(rnd() % 4)) & 0xffff : pa[i];
    }
    narrow_check_pairs(&f, pa, pb, n, 0);
    free(pa);
    free(pb);
    narrow_free(&f);
}

static void test_diff_metrics__bf16_patterns(void **state)
{
    (void)state;
    sixteen_bit_pairs(ULP_DTYPE_BF16, 7, 8, 127, 0x7f80, 0x7fc0);
}

static void test_diff_metrics__f16_patterns(void **state)
{
    (void)state;
    sixteen_bit_pairs(ULP_DTYPE_F16, 10, 5, 15, 0x7c00, 0x7e00);
}

/* --- f32 and f64: distances known by construction ----------------------------------------- */

static void test_diff_metrics__f32_stepped(void **state)
{
    (void)state;
    const uint64_t n = 200000;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    uint64_t *dist = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) {
        float x;
        switch (rnd() % 4) {
        case 0:
            x = (float)ldexp((double)(rnd() % 100000) / 1000.0 - 50.0, -(int)(rnd() % 140));
            break;
        case 1:
            x = (float)((double)(int64_t)(rnd() % 2000001 - 1000000) * 1e-3);
            break;
        case 2:
            x = FLT_MIN * (float)(rnd() % 5) * ((rnd() & 1) ? 1.0f : -1.0f);
            break;
        default:
            x = FLT_MAX * ((rnd() & 1) ? 1.0f : -1.0f) / (float)(1 + rnd() % 3);
            break;
        }
        uint64_t k = rnd() % 40;
        float dir = (rnd() & 1) ? HUGE_VALF : -HUGE_VALF;
        float y = x;
        uint64_t steps = 0;
        for (uint64_t s = 0; s < k && isfinite(nextafterf(y, dir)); s++) {
            float ny = nextafterf(y, dir);
            /* nextafter walks -0 -> +0 as a step; ULP distance counts them as one value. */
            if (!(ny == 0 && y == 0))
                steps++;
            y = ny;
        }
        a[i] = x;
        b[i] = y;
        dist[i] = steps;
    }
    /* A few specials and far pairs (their distance from the ranks of the extremes). */
    a[0] = FLT_MAX;
    b[0] = -FLT_MAX;
    a[1] = NAN;
    b[1] = 1.0f;
    a[2] = HUGE_VALF;
    b[2] = -HUGE_VALF;
    a[3] = -0.0f;
    b[3] = 0.0f;
    uint32_t fm;
    memcpy(&fm, &(float){FLT_MAX}, 4);
    dist[0] = 2 * (uint64_t)fm; /* both sides of zero: each has fm finite values above 0 */
    dist[1] = dist[2] = dist[3] = 0;
    ref_elem *ea = malloc(n * sizeof *ea), *eb = malloc(n * sizeof *eb);
    uint64_t *ba = malloc(n * 8), *bb = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, &b[i], 4);
        ba[i] = x;
        bb[i] = y;
        ea[i] = (ref_elem){(double)a[i], isfinite(a[i]), (int)signbit(a[i]), 0};
        eb[i] = (ref_elem){(double)b[i], isfinite(b[i]), (int)signbit(b[i]), (int64_t)dist[i]};
    }
    ref_metrics r;
    ulp_diff_metrics m;
    ref_compute(ea, eb, ba, bb, n, &r);
    ulp_diff_buffers(ULP_DTYPE_F32, a, b, n, 0, NULL, &m);
    check(&r, &m, n, ref_spacing(23, -126, 127, r.max_abs));
    assert_true(m.max_abs_diff == 2.0 * (double)FLT_MAX); /* overflows in float32 */
    /* Per pair, through the vector path in blocks of 64 equal pairs. */
    float pa[64], pb[64];
    for (uint64_t i = 0; i < 5000; i++) {
        for (int k = 0; k < 64; k++) {
            pa[k] = a[i];
            pb[k] = b[i];
        }
        ulp_diff_buffers(ULP_DTYPE_F32, pa, pb, 64, 0, NULL, &m);
        if (isfinite(a[i]) && isfinite(b[i]))
            assert_true(m.max_ulp == dist[i]);
    }
    free(a);
    free(b);
    free(dist);
    free(ea);
    free(eb);
    free(ba);
    free(bb);
}

static void test_diff_metrics__f64_stepped(void **state)
{
    (void)state;
    const uint64_t n = 100000;
    double *a = malloc(n * 8), *b = malloc(n * 8);
    ref_elem *ea = malloc(n * sizeof *ea), *eb = malloc(n * sizeof *eb);
    uint64_t *ba = malloc(n * 8), *bb = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) {
        double x = ldexp((double)(int64_t)(rnd() % 2000001 - 1000000), -(int)(rnd() % 1100));
        uint64_t k = rnd() % 30, steps = 0;
        double dir = (rnd() & 1) ? HUGE_VAL : -HUGE_VAL, y = x;
        for (uint64_t s = 0; s < k; s++) {
            double ny = nextafter(y, dir);
            if (!(ny == 0 && y == 0))
                steps++;
            y = ny;
        }
        a[i] = x;
        b[i] = y;
        ea[i] = (ref_elem){x, 1, (int)signbit(x), 0};
        eb[i] = (ref_elem){y, 1, (int)signbit(y), (int64_t)steps};
    }
    a[5] = NAN;
    b[5] = NAN; /* same bits: identical */
    ea[5] = eb[5] = (ref_elem){NAN, 0, 0, 0};
    a[6] = HUGE_VAL;
    b[6] = 1;
    ea[6] = (ref_elem){HUGE_VAL, 0, 0, 0};
    eb[6] = (ref_elem){1, 1, 0, 0};
    for (uint64_t i = 0; i < n; i++) {
        memcpy(&ba[i], &a[i], 8);
        memcpy(&bb[i], &b[i], 8);
    }
    ref_metrics r;
    ulp_diff_metrics m;
    ref_compute(ea, eb, ba, bb, n, &r);
    ulp_diff_buffers(ULP_DTYPE_F64, a, b, n, 0, NULL, &m);
    check(&r, &m, n, ref_spacing(52, -1022, 1023, r.max_abs));
    /* The largest distance: -DBL_MAX vs DBL_MAX, 2^64 - 2^53 - 2. */
    double x = -DBL_MAX, y = DBL_MAX;
    ulp_diff_buffers(ULP_DTYPE_F64, &x, &y, 1, 0, NULL, &m);
    assert_true(m.max_ulp == 2 * (uint64_t)0x7fefffffffffffffull);
    assert_int_equal(ulp_diff_hist_bin(m.max_ulp), 65);
    assert_int_equal(m.hist[65], 1);
    free(a);
    free(b);
    free(ea);
    free(eb);
    free(ba);
    free(bb);
}

/* --- Integers ----------------------------------------------------------------------------------
 */

static void test_diff_metrics__int8_all_pairs(void **state)
{
    (void)state;
    int8_t a[65536], b[65536];
    uint8_t ua[65536], ub[65536];
    for (int i = 0; i < 65536; i++) {
        a[i] = (int8_t)(i >> 8);
        b[i] = (int8_t)(i & 0xff);
        ua[i] = (uint8_t)(i >> 8);
        ub[i] = (uint8_t)(i & 0xff);
    }
    ulp_diff_metrics m, mu;
    ulp_diff_buffers(ULP_DTYPE_I8, a, b, 65536, 0, NULL, &m);
    ulp_diff_buffers(ULP_DTYPE_U8, ua, ub, 65536, 0, NULL, &mu);
    uint64_t hist[ULP_DIFF_HIST_BINS] = {0}, histu[ULP_DIFF_HIST_BINS] = {0};
    long double sum = 0, sumu = 0;
    for (int i = 0; i < 65536; i++) {
        int d = abs((int)a[i] - (int)b[i]), du = abs((int)ua[i] - (int)ub[i]);
        hist[ref_bin((uint64_t)d)]++;
        histu[ref_bin((uint64_t)du)]++;
        sum += d;
        sumu += du;
    }
    assert_int_equal(m.differing, 65536 - 256);
    assert_int_equal(m.max_ulp, 255);
    assert_int_equal(mu.max_ulp, 255);
    assert_true(m.max_abs == 128);
    assert_true(m.max_abs_diff == 255);
    assert_true(fabs(m.mean_ulp - (double)(sum / (65536 - 256))) < 1e-12);
    assert_true(fabs(mu.mean_ulp - (double)(sumu / (65536 - 256))) < 1e-12);
    assert_memory_equal(m.hist, hist, sizeof hist);
    assert_memory_equal(mu.hist, histu, sizeof histu);
    int64_t x = INT64_MIN, y = INT64_MAX;
    ulp_diff_buffers(ULP_DTYPE_I64, &x, &y, 1, 0, NULL, &m);
    assert_true(m.max_ulp == UINT64_MAX);
    assert_int_equal(m.hist[65], 1);
}

/* --- Specials, shapes, chunking ----------------------------------------------------------------
 */

static void test_diff_metrics__specials(void **state)
{
    (void)state;
    ulp_diff_metrics m;
    /* +0 vs -0: differs, 0 ULP, no sign change, worst there. */
    uint16_t a[4] = {0x3f80, 0x0000, 0x7fc0, 0x7f80}, b[4] = {0x3f80, 0x8000, 0x7fc0, 0x7f80};
    ulp_diff_buffers(ULP_DTYPE_BF16, a, b, 4, 0, NULL, &m);
    assert_int_equal(m.differing, 1);
    assert_int_equal(m.max_ulp, 0);
    assert_int_equal(m.sign_changes, 0);
    assert_int_equal(m.nonfinite_mismatch, 0);
    assert_int_equal(m.worst_flat, 1);
    assert_int_equal(m.hist[0], 4);
    assert_true(m.mean_ulp == 0);
    assert_true(m.max_abs_diff == 0);
    assert_int_equal(m.max_abs_diff_flat, -1);
    /* NaN payloads differ; a NaN against a number is a nonfinite mismatch. */
    uint16_t c[3] = {0x7fc0, 0xffc1, 0x3f80}, d[3] = {0x7fc1, 0xffc1, 0x7f80};
    ulp_diff_buffers(ULP_DTYPE_BF16, c, d, 3, 0, NULL, &m);
    assert_int_equal(m.differing, 2);
    assert_int_equal(m.nonfinite_mismatch, 2);
    assert_int_equal(m.max_ulp, 0);
    assert_int_equal(m.worst_flat, 0);
    assert_true(m.max_abs == 1.0);
    /* e4m3: 0x7e (448) is finite, 0x7f is NaN, no infinities. */
    uint8_t e[3] = {0x7e, 0x7e, 0xfe}, g[3] = {0x7f, 0x7d, 0x7e};
    ulp_diff_buffers(ULP_DTYPE_F8E4M3, e, g, 3, 0, NULL, &m);
    assert_int_equal(m.nonfinite_mismatch, 1);
    assert_int_equal(m.max_ulp, 2 * 0x7e);
    assert_int_equal(m.sign_changes, 1);
    assert_true(m.max_abs == 448);
    assert_true(m.max_abs_diff == 896);
    assert_int_equal(m.worst_flat, 2);
    /* Zero crossing in bf16: tiny values, a huge ordered distance, a small |diff|. */
    uint16_t z1[1] = {0x0001}, z2[1] = {0x8001};
    ulp_diff_buffers(ULP_DTYPE_BF16, z1, z2, 1, 0, NULL, &m);
    assert_int_equal(m.max_ulp, 2);
    assert_int_equal(m.sign_changes, 1);
    assert_true(m.max_abs_diff_ulps_at_max == 2.0);
    uint16_t z3[1] = {0x3c00}, z4[1] = {0xbc00}; /* 2^-7 vs -2^-7 */
    ulp_diff_buffers(ULP_DTYPE_BF16, z3, z4, 1, 0, NULL, &m);
    assert_int_equal(m.max_ulp, 2 * 0x3c00);
    assert_true(m.max_abs_diff_ulps_at_max == 256.0); /* 2^-6 / 2^-14 */
    /* Empty and scalar. */
    ulp_diff_buffers(ULP_DTYPE_F32, a, b, 0, 0, NULL, &m);
    assert_int_equal(m.differing, 0);
    assert_int_equal(m.worst_flat, -1);
    assert_int_equal(m.hist[0], 0);
    float s1 = 1.0f, s2 = nextafterf(1.0f, 2.0f);
    ulp_diff_buffers(ULP_DTYPE_F32, &s1, &s2, 1, 0, NULL, &m);
    assert_int_equal(m.max_ulp, 1);
    assert_int_equal(m.hist[1], 1);
    /* Multi-index of the worst element. */
    uint16_t big[2 * 3 * 5] = {0}, big2[2 * 3 * 5] = {0};
    big2[1 * 15 + 2 * 5 + 4] = 7;
    ulp_diff_buffers(ULP_DTYPE_F16, big, big2, 30, 3, (const int64_t[]){2, 3, 5}, &m);
    assert_int_equal(m.worst_index[0], 1);
    assert_int_equal(m.worst_index[1], 2);
    assert_int_equal(m.worst_index[2], 4);
    assert_int_equal(m.max_ulp, 7);
    assert_int_equal(m.hist[ulp_diff_hist_bin(7)], 1);
}

static void test_diff_metrics__hist_bins(void **state)
{
    (void)state;
    for (uint64_t d = 0; d < 200000; d++)
        assert_int_equal(ulp_diff_hist_bin(d), ref_bin(d));
    for (int s = 1; s < 64; s++) {
        uint64_t p = (uint64_t)1 << s;
        assert_int_equal(ulp_diff_hist_bin(p - 1), ref_bin(p - 1));
        assert_int_equal(ulp_diff_hist_bin(p), ref_bin(p));
        assert_int_equal(ulp_diff_hist_bin(p + 1), ref_bin(p + 1));
    }
    assert_int_equal(ulp_diff_hist_bin(UINT64_MAX), 65);
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++) {
        assert_int_equal(ulp_diff_hist_bin(ulp_diff_hist_lo(k)), k);
        assert_int_equal(ulp_diff_hist_bin(ulp_diff_hist_hi(k)), k);
    }
    assert_int_equal(ulp_diff_hist_lo(3), 3);
    assert_int_equal(ulp_diff_hist_hi(3), 4);
    assert_int_equal(ulp_diff_hist_lo(4), 5);
    assert_int_equal(ulp_diff_hist_hi(4), 8);
}

/*
 * The largest |a - b| is reported exactly (in double) while the kernels
 * screen blocks with float32 differences: pairs whose float32 differences
 * round to the same value as the running maximum but whose exact
 * differences are larger, in a later block, must still win; an exact tie
 * keeps the earlier index.  In a sparse and in a dense background (both
 * paths), for f32 and bf16.
 */
static void test_diff_metrics__max_abs_rounding(void **state)
{
    (void)state;
    const uint64_t n = 8 * 1024;
    for (int dense = 0; dense < 2; dense++) {
        /* f32: 1 - 0 = 1 exactly at [7]; 1 - (-2^-28) and 1 - (-2^-27) both round to 1.0f. */
        float *a = malloc(n * 4), *b = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) {
            a[i] = 0.5f;
            b[i] = dense || i % 500 == 0 ? nextafterf(0.5f, 1.0f) : 0.5f;
        }
        a[7] = 1.0f;
        b[7] = 0.0f;
        a[2 * 1024 + 5] = 1.0f;
        b[2 * 1024 + 5] = -0x1p-28f;
        a[5 * 1024 + 3] = 1.0f; /* the maximum */
        b[5 * 1024 + 3] = -0x1p-27f;
        a[6 * 1024 + 9] = -0x1p-27f; /* a tie, later: loses */
        b[6 * 1024 + 9] = 1.0f;
        ulp_diff_metrics m;
        ulp_diff_buffers(ULP_DTYPE_F32, a, b, n, 0, NULL, &m);
        assert_true(m.max_abs_diff == 1.0 + 0x1p-27);
        assert_int_equal(m.max_abs_diff_flat, 5 * 1024 + 3);
        /* The running maximum itself inexact in float32 (1 + 2^-30 first). */
        b[7] = -0x1p-30f;
        ulp_diff_buffers(ULP_DTYPE_F32, a, b, n, 0, NULL, &m);
        assert_true(m.max_abs_diff == 1.0 + 0x1p-27);
        assert_int_equal(m.max_abs_diff_flat, 5 * 1024 + 3);
        free(a);
        free(b);
        /* bf16: 1.0 = 0x3f80; -2^-20 = 0xb580, -2^-19 = 0xb600 (exponent gaps past 15). */
        uint16_t *x = malloc(n * 2), *y = malloc(n * 2);
        for (uint64_t i = 0; i < n; i++) {
            x[i] = 0x3f00;
            y[i] = dense || i % 500 == 0 ? 0x3f01 : 0x3f00;
        }
        x[7] = 0x3f80;
        y[7] = 0x0000;
        x[2 * 1024 + 5] = 0x3f80;
        y[2 * 1024 + 5] = 0xb580;
        x[5 * 1024 + 3] = 0x3f80;
        y[5 * 1024 + 3] = 0xb600;
        x[6 * 1024 + 9] = 0xb600;
        y[6 * 1024 + 9] = 0x3f80;
        ulp_diff_buffers(ULP_DTYPE_BF16, x, y, n, 0, NULL, &m);
        assert_true(m.max_abs_diff == 1.0 + 0x1p-19);
        assert_int_equal(m.max_abs_diff_flat, 5 * 1024 + 3);
        free(x);
        free(y);
    }
}

/* Splitting a tensor into chunks merged in any order gives the same metrics. */
static void test_diff_metrics__chunk_merge(void **state)
{
    (void)state;
    const uint64_t n = 100003;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    for (uint64_t i = 0; i < n; i++) {
        a[i] = (uint16_t)(rnd() & 0x7fff);
        uint64_t r = rnd() % 1000;
        b[i] = r < 5 ? (uint16_t)(a[i] + r) : r == 5 ? 0x7fc0 : a[i];
    }
    a[77777] = 0x4000; /* ties of the maximum in several chunks */
    b[77777] = 0x4004;
    a[3] = 0x4000;
    b[3] = 0x4004;
    ulp_diff_metrics whole, parts;
    ulp_diff_buffers(ULP_DTYPE_BF16, a, b, n, 0, NULL, &whole);
    const uint64_t cuts[] = {0, 1, 4000, 4001, 50000, 77777, 77778, 99999, n};
    const size_t nc = sizeof cuts / sizeof cuts[0] - 1;
    ulp__acc acc[16], total;
    for (size_t c = 0; c < nc; c++) {
        ulp__acc_init(&acc[c]);
        ulp__acc_add(&acc[c], ULP_DTYPE_BF16, a + cuts[c], b + cuts[c], cuts[c + 1] - cuts[c],
                     cuts[c]);
    }
    ulp__acc_init(&total);
    for (size_t c = nc; c-- > 0;)
        ulp__acc_merge(&total, &acc[c]);
    ulp__acc_finish(&total, ULP_DTYPE_BF16, 0, NULL, &parts);
    assert_int_equal(parts.differing, whole.differing);
    assert_int_equal(parts.nonfinite_mismatch, whole.nonfinite_mismatch);
    assert_int_equal(parts.max_ulp, whole.max_ulp);
    assert_true(parts.mean_ulp == whole.mean_ulp);
    assert_memory_equal(parts.hist, whole.hist, sizeof parts.hist);
    assert_true(parts.max_abs_diff == whole.max_abs_diff);
    assert_int_equal(parts.max_abs_diff_flat, whole.max_abs_diff_flat);
    assert_int_equal(parts.worst_flat, whole.worst_flat);
    assert_true(parts.max_abs == whole.max_abs);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_metrics__hist_bins),
        cmocka_unit_test(test_diff_metrics__specials),
        cmocka_unit_test(test_diff_metrics__e4m3_all_pairs),
        cmocka_unit_test(test_diff_metrics__e5m2_all_pairs),
        cmocka_unit_test(test_diff_metrics__bf16_patterns),
        cmocka_unit_test(test_diff_metrics__f16_patterns),
        cmocka_unit_test(test_diff_metrics__f32_stepped),
        cmocka_unit_test(test_diff_metrics__f64_stepped),
        cmocka_unit_test(test_diff_metrics__int8_all_pairs),
        cmocka_unit_test(test_diff_metrics__chunk_merge),
        cmocka_unit_test(test_diff_metrics__max_abs_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
