/*
 * Pairs of different float dtypes (FORMAT.md "Different dtypes"): an f32
 * side against a bf16 one, f16 against f8e4m3, f64 against f32, ...
 *
 * Where one format holds every value of the other, the finer side is
 * rounded to the coarser format, to nearest with ties to even, as a cast
 * does (numpy, ml_dtypes, torch's .to()), and the two sides are compared
 * as bit patterns of the coarser format: the same element metrics as any
 * pair (ULPs there, the worst element, the histogram).  Beside them, the
 * largest |fine - coarse| over pairs where both are finite, the coarse
 * value widened exactly, in double: how far the two runs' values lie apart
 * before the rounding hides it.
 *
 * Rounding, per source format:
 *   f32 -> bf16, f16, f8e4m3, f8e5m2: ulp_f32_to_*() (common/dtype.c);
 *   bf16, f16 -> f8*: widened to f32 exactly, then the same;
 *   f64 -> anything: from the double's own bits (round_f64 below), never
 *     through f32, which would round twice.
 * Overflow: formats with infinities give inf; f8e4m3 (e4m3fn, no
 * infinities) gives NaN, as its casts do, not the largest finite value
 * (no saturation).  Values below half the smallest subnormal give a zero
 * of their sign.  NaN stays NaN with its sign (quiet; e4m3fn's one NaN).
 *
 * The pass is the diff's simplest: rows in order on the calling thread,
 * copied reads of CROSS_CHUNK elements a side.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

/* Elements read a side at a time (512 KiB of f64). */
#define CROSS_CHUNK ((uint64_t)1 << 16)

/* Rank of a float format by the values it holds: a lower one's values are
 * all values of a higher one when both are on one chain. */
static int holds(ulp_dtype fine, ulp_dtype coarse)
{
    switch (coarse) {
    case ULP_DTYPE_F32:
        return fine == ULP_DTYPE_F64;
    case ULP_DTYPE_F16:
    case ULP_DTYPE_BF16:
        return fine == ULP_DTYPE_F64 || fine == ULP_DTYPE_F32;
    case ULP_DTYPE_F8E4M3:
    case ULP_DTYPE_F8E5M2:
        return fine == ULP_DTYPE_F64 || fine == ULP_DTYPE_F32 || fine == ULP_DTYPE_F16 ||
               fine == ULP_DTYPE_BF16;
    default:
        return 0;
    }
}

int ulp__cross_coarser(ulp_dtype a, ulp_dtype b, ulp_dtype *coarse, int *rounded_side)
{
    if (a == b)
        return 0;
    if (holds(a, b)) {
        *coarse = b;
        *rounded_side = 0;
        return 1;
    }
    if (holds(b, a)) {
        *coarse = a;
        *rounded_side = 1;
        return 1;
    }
    return 0; /* bf16 against f16, e4m3 against e5m2, integers: neither holds the other */
}

static uint64_t low_mask(unsigned n)
{
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

/* A double's bits to the narrower float format `d`, to nearest, ties to even. */
static uint64_t round_f64(uint64_t u, const ulp_dtype_info *d)
{
    unsigned width = 8 * d->size;
    uint64_t sign = (u >> 63) << (width - 1);
    uint64_t exp64 = (u >> 52) & 0x7ff;
    uint64_t man64 = u & low_mask(52);
    uint64_t exp_all = low_mask(d->exp_bits);
    uint64_t inf_bits = exp_all << d->man_bits;
    uint64_t nan_bits = d->has_inf ? inf_bits | ((uint64_t)1 << (d->man_bits - 1))
                                   : inf_bits | low_mask(d->man_bits);
    if (exp64 == 0x7ff) {
        if (man64 == 0)
            return sign | (d->has_inf ? inf_bits : nan_bits);
        if (!d->has_inf)
            return sign | nan_bits;
        return sign | nan_bits | (man64 >> (52 - d->man_bits)); /* quiet, top payload bits */
    }
    if (exp64 == 0 && man64 == 0)
        return sign;
    uint64_t mant = exp64 ? (man64 | ((uint64_t)1 << 52)) : man64;
    int e2 = (exp64 ? (int)exp64 : 1) - 1075; /* value = mant * 2^e2 */
    int msb = 63 - __builtin_clzll(mant);
    int emin = 1 - d->bias;
    int target = msb + e2 < emin ? emin : msb + e2;
    int shift = target - (int)d->man_bits - e2;
    uint64_t r;
    if (shift <= 0) {
        r = mant << -shift; /* exact */
    } else if (shift > 60) {
        r = 0; /* below half the smallest quantum (mant < 2^53) */
    } else {
        r = mant >> shift;
        uint64_t rem = mant & low_mask((unsigned)shift);
        uint64_t half = (uint64_t)1 << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
    }
    /* A carry out of the mantissa moves into the exponent field. */
    uint64_t bits = ((uint64_t)(target - emin) << d->man_bits) + r;
    uint64_t max_finite = d->has_inf ? inf_bits - 1 : nan_bits - 1;
    if (bits > max_finite)
        return sign | (d->has_inf ? inf_bits : nan_bits);
    return sign | bits;
}

uint64_t ulp__cross_round(ulp_dtype from, ulp_dtype to, uint64_t bits)
{
    if (from == ULP_DTYPE_F64)
        return round_f64(bits, ulp_dtype_get(to));
    float f = (float)ulp_dtype_to_double(from, bits); /* exact: f32, bf16, f16 */
    switch (to) {
    case ULP_DTYPE_BF16:
        return ulp_f32_to_bf16(f);
    case ULP_DTYPE_F16:
        return ulp_f32_to_f16(f);
    case ULP_DTYPE_F8E4M3:
        return ulp_f32_to_f8e4m3(f);
    case ULP_DTYPE_F8E5M2:
        return ulp_f32_to_f8e5m2(f);
    default:
        return bits;
    }
}

static void store_bits(ulp_dtype dt, uint64_t v, unsigned char *p)
{
    size_t sz = ulp_dtype_size(dt);
    for (size_t k = 0; k < sz; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* Scratch of one pass: raw chunks of both sides, and their coarse bits. */
typedef struct cross_buf {
    unsigned char *ra, *rb, *ca, *cb;
} cross_buf;

/* Elements [0, n) of ra / rb into ca / cb as the coarse format's bits, and
 * the fine-format |a - b| into *fine / *fine_flat (view index base + i). */
static void to_coarse(const ulp_diff_row *row, cross_buf *x, uint64_t n, uint64_t base,
                      double *fine, int64_t *fine_flat)
{
    ulp_dtype cd = row->compared_dtype, da = row->dtype_a, db = row->dtype_b;
    size_t sa = ulp_dtype_size(da), sb = ulp_dtype_size(db), sc = ulp_dtype_size(cd);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ba = ulp_dtype_load_bits(da, x->ra + i * sa);
        uint64_t bb = ulp_dtype_load_bits(db, x->rb + i * sb);
        uint64_t ka = row->rounded_side == 0 ? ulp__cross_round(da, cd, ba) : ba;
        uint64_t kb = row->rounded_side == 1 ? ulp__cross_round(db, cd, bb) : bb;
        store_bits(cd, ka, x->ca + i * sc);
        store_bits(cd, kb, x->cb + i * sc);
        double va = ulp_dtype_to_double(da, ba), vb = ulp_dtype_to_double(db, bb);
        if (!isfinite(va) || !isfinite(vb))
            continue;
        double d = fabs(va - vb);
        if (d > *fine) {
            *fine = d;
            *fine_flat = (int64_t)(base + i);
        }
    }
}

/* Marks the aligned keys whose elements [base, base + n) hold a difference. */
static void mark_keys(ulp_diff_row *row, const ulp__diff_pair *p, const cross_buf *x, uint64_t n,
                      uint64_t base)
{
    if (!row->aligned || p->rowlen == 0)
        return;
    size_t sc = ulp_dtype_size(row->compared_dtype);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = (base + i) / p->rowlen;
        if (k < row->n_keys && !row->keys[k].differs &&
            memcmp(x->ca + i * sc, x->cb + i * sc, sc) != 0)
            row->keys[k].differs = 1;
    }
}

/* The coarse bits of both sides at view element v (the worst element when
 * the pass did not keep it). */
static ulp_status coarse_at(const ulp_snapshot *a, const ulp_snapshot *b, const ulp__diff_pair *ps,
                            size_t np, ulp_diff_row *row, uint64_t v, ulp_error *err)
{
    unsigned char xa[8] = {0}, xb[8] = {0};
    for (size_t q = 0; q < np; q++) {
        const ulp__diff_pair *p = &ps[q];
        if (v < p->base || v - p->base >= p->len)
            continue;
        ulp_status st = ulp_snapshot_read(a, p->ia, p->off_a + (v - p->base), 1, xa, err);
        if (st == ULP_OK)
            st = ulp_snapshot_read(b, p->ib, p->off_b + (v - p->base), 1, xb, err);
        if (st != ULP_OK)
            return st;
        uint64_t ba = ulp_dtype_load_bits(row->dtype_a, xa);
        uint64_t bb = ulp_dtype_load_bits(row->dtype_b, xb);
        ulp_dtype cd = row->compared_dtype;
        row->m.worst_bits_a = row->rounded_side == 0 ? ulp__cross_round(row->dtype_a, cd, ba) : ba;
        row->m.worst_bits_b = row->rounded_side == 1 ? ulp__cross_round(row->dtype_b, cd, bb) : bb;
        break;
    }
    return ULP_OK;
}

/* One rounded row, its pairs ps[0..np). */
static ulp_status cross_row(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_row *row,
                            const ulp__diff_pair *ps, size_t np, cross_buf *x, ulp_error *err)
{
    ulp__acc acc;
    ulp__acc_init(&acc);
    double fine = 0;
    int64_t fine_flat = -1;
    for (size_t q = 0; q < np; q++) {
        const ulp__diff_pair *p = &ps[q];
        for (uint64_t done = 0; done < p->len;) {
            uint64_t n = p->len - done < CROSS_CHUNK ? p->len - done : CROSS_CHUNK;
            ulp_status st = ulp_snapshot_read(a, p->ia, p->off_a + done, n, x->ra, err);
            if (st == ULP_OK)
                st = ulp_snapshot_read(b, p->ib, p->off_b + done, n, x->rb, err);
            if (st != ULP_OK)
                return st;
            to_coarse(row, x, n, p->base + done, &fine, &fine_flat);
            ulp__acc_add(&acc, row->compared_dtype, x->ca, x->cb, n, p->base + done);
            mark_keys(row, p, x, n, p->base + done);
            done += n;
        }
    }
    acc.elements = row->elements;
    ulp_dtype cd = row->compared_dtype;
    ulp__acc_finish(&acc, cd, row->ndim_a, row->shape_a, &row->m);
    row->status = ULP_DIFF_DIFFERS; /* different formats are never identical */
    row->rounded_equal = row->elements - row->m.differing;
    row->max_abs_diff_fine = fine;
    row->max_abs_diff_fine_flat = fine_flat;
    if (acc.max_ulp > 0 && row->m.worst_flat == acc.max_ulp_flat) {
        row->m.worst_bits_a = acc.max_ulp_bits_a;
        row->m.worst_bits_b = acc.max_ulp_bits_b;
    } else if (row->m.worst_flat >= 0) {
        ulp_status st = coarse_at(a, b, ps, np, row, (uint64_t)row->m.worst_flat, err);
        if (st != ULP_OK)
            return st;
    }
    if (row->m.worst_flat >= 0) {
        row->m.worst_a = ulp_dtype_to_double(cd, row->m.worst_bits_a);
        row->m.worst_b = ulp_dtype_to_double(cd, row->m.worst_bits_b);
    }
    ulp__diff_finish_keys(row, ps[0].rowlen);
    return ULP_OK;
}

ulp_status ulp__diff_cross(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_result *r,
                           const ulp__diff_pair *pairs, size_t npairs, ulp_error *err)
{
    if (npairs == 0)
        return ULP_OK;
    cross_buf x;
    x.ra = malloc(CROSS_CHUNK * 8);
    x.rb = malloc(CROSS_CHUNK * 8);
    x.ca = malloc(CROSS_CHUNK * 8);
    x.cb = malloc(CROSS_CHUNK * 8);
    ulp_status st = ULP_OK;
    if (!x.ra || !x.rb || !x.ca || !x.cb)
        st = ulp__error(err, ULP_ENOMEM, "out of memory for the rounded comparison");
    for (size_t lo = 0, hi; lo < npairs && st == ULP_OK; lo = hi) {
        for (hi = lo + 1; hi < npairs && pairs[hi].row == pairs[lo].row;)
            hi++;
        ulp_diff_row *row = &r->rows[pairs[lo].row];
        st = cross_row(a, b, row, pairs + lo, hi - lo, &x, err);
        r->bytes_read +=
            row->elements * (ulp_dtype_size(row->dtype_a) + ulp_dtype_size(row->dtype_b));
    }
    free(x.ra);
    free(x.rb);
    free(x.ca);
    free(x.cb);
    return st;
}
