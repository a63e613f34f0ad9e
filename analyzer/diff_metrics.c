/*
 * Element metrics of a tensor pair, on raw bits (FORMAT.md "Pairing and
 * comparison semantics").
 *
 * The floating-point formats up to 32 bits go through kernels instantiated
 * per format with its constants, which gcc vectorizes (this file is built
 * with -O3, once per instruction-set level of isa.h;
 * tests/perf/check_vec_diff.sh checks):
 *
 *  - k0, every block of BLOCK elements first: the common block, whose
 *    elements are all finite and whose pairs never differ in sign, needs
 *    neither finite masks nor the ordered transform (the distance is that
 *    of the magnitudes) nor sign counts; k0 keeps seven running reductions
 *    in the lanes' own width (the bins as counts of distances above 0, 1
 *    and 2; the sum re-added in 64 bits only where the lanes could
 *    overflow) and stores nothing: the distances (kd) are written only for
 *    the blocks whose later steps read them.  Any other block -- and a
 *    few after it (RETRY_AFTER) -- goes to k1.
 *  - k1, every other block: differing elements, nonfinite
 *    mismatches, sign changes, the ordered-integer ULP distance (sum, max,
 *    and stored per element in a small array that stays in L1), the largest
 *    finite magnitude.  For the 8- and 16-bit formats all of it runs in
 *    16-bit lanes.
 *  - sparse blocks (at most 1 in SPARSE_DIV elements differ, the common case
 *    of a first diverging layer): the few non-zero distances are found by
 *    scanning 64-bit words of that array; each gets its histogram bin and
 *    its exact |a - b| in double.
 *  - dense blocks: histogram bins by counting distances above each bin edge
 *    (vectorized), and k2, |a - b| in float32 compared as integer bits.
 *    Rounding is monotone, so the element whose exact difference is largest
 *    also has the largest float32 one: a block whose float32 maximum is
 *    below the running one cannot hold the maximum, and in a block that
 *    reaches it only the elements at that float32 value are recomputed
 *    exactly in double.
 *
 * Rarer work -- the index of the worst element, the first differing pair --
 * is done only for blocks that can change the running result.  f64 and the
 * integer types take a plain scalar loop.
 */
#include <math.h>
#include <string.h>

#include "diff_priv.h"
#include "isa.h"

#define BLOCK 1024

uint64_t ulp_diff_hist_lo(int k)
{
    if (k <= 0)
        return 0;
    if (k <= 2)
        return (uint64_t)k;
    return ((uint64_t)1 << (k - 2)) + 1;
}

uint64_t ulp_diff_hist_hi(int k)
{
    if (k <= 0)
        return 0;
    if (k >= ULP_DIFF_HIST_BINS - 1)
        return UINT64_MAX;
    return (uint64_t)1 << (k - 1);
}

static inline int hist_bin(uint64_t d)
{
    if (d <= 1)
        return (int)d;
    /* d in (2^(k-2), 2^(k-1)]  <=>  k = 1 + bit length of (d - 1). */
    return 1 + (64 - __builtin_clzll(d - 1));
}

int ulp_diff_hist_bin(uint64_t d)
{
    return hist_bin(d);
}

void ulp__acc_init(ulp__acc *acc)
{
    memset(acc, 0, sizeof *acc);
    acc->max_ulp_flat = -1;
    acc->first_dfin = -1;
    acc->first_nf = -1;
    acc->max_abs_diff_flat = -1;
}

void ulp_diff_unflatten(uint64_t flat, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int i = ndim - 1; i >= 0; i--) {
        uint64_t s = shape[i] > 0 ? (uint64_t)shape[i] : 1;
        idx[i] = (int64_t)(flat % s);
        flat /= s;
    }
}

static int is_finite_bits(ulp_dtype dtype, uint64_t bits)
{
    ulp_fpclass c = ulp_dtype_classify(dtype, bits);
    return c != ULP_FPCLASS_NAN && c != ULP_FPCLASS_INF;
}

/* Results of the first kernel over one block. */
typedef struct blk_res {
    uint32_t ndiff, nnf, nsign;
    uint32_t maxd;        /* largest ULP distance over finite pairs          */
    uint64_t sum;         /* sum of ULP distances                            */
    uint32_t maxmag;      /* largest magnitude bits over finite elements     */
    uint32_t h1, h2, h34; /* distances of 1, of 2, of 3 or 4 (histogram bins 1-3) */
} blk_res;

/*
 * float32 bits of the magnitude `m` (sign cleared) of a finite narrow
 * float with MANB mantissa bits and bias BIAS.  bf16 and f32 are direct
 * (DIRECT = 1); the others rebias normals and convert subnormals exactly
 * through an integer -> float conversion, never touching float32
 * subnormals (slow on some CPUs).
 */
#define NARROW_TO_F32(m, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, out)                                 \
    do {                                                                                           \
        if (DIRECT) {                                                                              \
            (out) = (m) << (SHIFT);                                                                \
        } else {                                                                                   \
            uint32_t nb_ = ((m) << (23 - (MANB))) + ((uint32_t)(127 - (BIAS)) << 23);              \
            float sf_ = (float)(int32_t)(m) * (float)(SUBSCALE);                                   \
            uint32_t sb_;                                                                          \
            memcpy(&sb_, &sf_, 4);                                                                 \
            uint32_t nm_ = -(uint32_t)(((m) >> (MANB)) != 0);                                      \
            (out) = (nb_ & nm_) | (sb_ & ~nm_);                                                    \
        }                                                                                          \
    } while (0)

/*
 * k0's distance of x and y: the larger one `hi` and |x - y| `d`, both
 * right only where the signs are equal (k0 gives up on any other block).
 * With AVX2 and AVX-512: unsigned max and min of the raw bits.  SSE2 has
 * neither: the magnitudes' signed difference (and for 32-bit lanes, whose
 * signed max SSE2 lacks too, the larger one from that difference's sign).
 */
#define K0_DIST_UNSIGNED(W, L, SL, MAG, x, y, hi, d)                                               \
    do {                                                                                           \
        (hi) = (x) > (y) ? (x) : (y);                                                              \
        (d) = (L)((hi) - ((x) < (y) ? (x) : (y)));                                                 \
    } while (0)
#define K0_DIST_V4 K0_DIST_UNSIGNED
#define K0_DIST_V3 K0_DIST_UNSIGNED
#define K0_DIST_BASE(W, L, SL, MAG, x, y, hi, d)                                                   \
    do {                                                                                           \
        if ((W) == 32) {                                                                           \
            SL mx_ = (SL)((x) & (MAG)), my_ = (SL)((y) & (MAG));                                   \
            SL df_ = (SL)(mx_ - my_), s_ = (SL)(df_ >> ((W)-1));                                   \
            (hi) = (L)(my_ + (df_ & ~s_));                                                         \
            (d) = (L)((df_ ^ s_) - s_);                                                            \
        } else {                                                                                   \
            SL mx_ = (SL)((x) & (MAG)), my_ = (SL)((y) & (MAG));                                   \
            SL df_ = (SL)(mx_ - my_), nd_ = (SL)(my_ - mx_);                                       \
            (hi) = (L)(mx_ > my_ ? mx_ : my_);                                                     \
            (d) = (L)(df_ > nd_ ? df_ : nd_);                                                      \
        }                                                                                          \
    } while (0)

/*
 * The kernels of one format.  T: storage type; W: bits; NF: smallest
 * magnitude that is inf or NaN; L: lane type of the distances (16 bits
 * hold every distance of the 8- and 16-bit formats); SUMT: block sum type.
 *
 * NAME_k1 (every block): counts, ULP distances (stored in dv), their sum
 * and max, the largest finite magnitude.  Ordered value = (mag ^ -s) + s.
 * NAME_k2 (dense blocks only): float32 |a - b| of finite pairs, stored in
 * fv, and its max.  NAME_val: one element's value, for the sparse path.
 */
#define DEFINE_KERNELS(NAME, T, W, MANB, BIAS, SUBSCALE, NF, DIRECT, SHIFT, L, SL, SUMT, ISA)      \
    /* For k0's blocks (finite, no sign differs): the distance is that of the magnitudes. */       \
    ULP__TARGET_##ISA static void NAME##_kd_##ISA(const T *restrict a, const T *restrict b,        \
                                                  unsigned n, L *restrict dv)                      \
    {                                                                                              \
        for (unsigned i = 0; i < n; i++) {                                                         \
            L x = a[i], y = b[i];                                                                  \
            dv[i] = (L)((x > y ? x : y) - (x < y ? x : y));                                        \
        }                                                                                          \
    }                                                                                              \
    ULP__TARGET_##ISA static uint64_t NAME##_ksum_##ISA(const T *restrict a, const T *restrict b,  \
                                                        unsigned n)                                \
    {                                                                                              \
        uint64_t sum = 0;                                                                          \
        for (unsigned i = 0; i < n; i++) {                                                         \
            L x = a[i], y = b[i];                                                                  \
            sum += (L)((x > y ? x : y) - (x < y ? x : y));                                         \
        }                                                                                          \
        return sum;                                                                                \
    }                                                                                              \
    ULP__TARGET_##ISA __attribute__((noinline)) static int NAME##_k0_##ISA(                        \
        const T *restrict a, const T *restrict b, unsigned n, blk_res *r)                          \
    {                                                                                              \
        L orx = 0, maxm = 0, maxd = 0, sum = 0, c1 = 0, c2 = 0, c3 = 0;                            \
        const L MAG = (L)((((uint64_t)1 << ((W)-1)) - 1));                                         \
        _Pragma("GCC unroll 2") for (unsigned i = 0; i < n; i++)                                   \
        {                                                                                          \
            L x = a[i], y = b[i];                                                                  \
            orx |= x ^ y;                                                                          \
            L hi, d;                                                                               \
            K0_DIST_##ISA(W, L, SL, MAG, x, y, hi, d);                                             \
            SL mh = (SL)(hi & MAG);                                                                \
            maxm = mh > (SL)maxm ? (L)mh : maxm;                                                   \
            maxd = (SL)d > (SL)maxd ? d : maxd;                                                    \
            sum += d;                                                                              \
            c1 += (SL)d > 0;                                                                       \
            c2 += (SL)d > 1;                                                                       \
            c3 += (SL)d > 2;                                                                       \
        }                                                                                          \
        if ((orx >> ((W)-1)) != 0 || maxm >= (NF))                                                 \
            return 0;                                                                              \
        r->sum = sum;                                                                              \
        if ((uint64_t)maxd * n > (L) ~(L)0)                                                        \
            r->sum = NAME##_ksum_##ISA(a, b, n);                                                   \
        r->ndiff = c1;                                                                             \
        r->nnf = 0;                                                                                \
        r->nsign = 0;                                                                              \
        r->maxd = maxd;                                                                            \
        r->maxmag = maxm;                                                                          \
        r->h1 = (uint32_t)c1 - c2;                                                                 \
        r->h2 = (uint32_t)c2 - c3;                                                                 \
        r->h34 = c3;                                                                               \
        return 1;                                                                                  \
    }                                                                                              \
    ULP__TARGET_##ISA static void NAME##_k1_##ISA(const T *restrict a, const T *restrict b,        \
                                                  unsigned n, L *restrict dv, blk_res *r)          \
    {                                                                                              \
        L ndiff = 0, nnf = 0, nsign = 0, maxd = 0, maxmag = 0, h1 = 0, h2 = 0, h34 = 0;            \
        SUMT sum = 0;                                                                              \
        const L MAG = (L)((((uint64_t)1 << ((W)-1)) - 1));                                         \
        for (unsigned i = 0; i < n; i++) {                                                         \
            L x = a[i], y = b[i];                                                                  \
            L mx = x & MAG, my = y & MAG;                                                          \
            L sx = (L) - (L)(x >> ((W)-1)), sy = (L) - (L)(y >> ((W)-1));                          \
            L fx = (L) - (L)(mx < (NF)), fy = (L) - (L)(my < (NF));                                \
            L fin = fx & fy;                                                                       \
            L ne = x != y;                                                                         \
            ndiff += ne;                                                                           \
            nnf += ne & (L)~fin;                                                                   \
            SL ox = (SL)((L)((mx ^ sx) - sx));                                                     \
            SL oy = (SL)((L)((my ^ sy) - sy));                                                     \
            L d = ox > oy ? (L)((L)ox - (L)oy) : (L)((L)oy - (L)ox);                               \
            d &= fin;                                                                              \
            dv[i] = d;                                                                             \
            sum += d;                                                                              \
            maxd = d > maxd ? d : maxd;                                                            \
            h1 += d == 1;                                                                          \
            h2 += d == 2;                                                                          \
            h34 += (L)(d - 3) <= 1;                                                                \
            nsign += (L)(sx ^ sy) & (L)(d != 0);                                                   \
            L gx = mx & fx, gy = my & fy;                                                          \
            maxmag = gx > maxmag ? gx : maxmag;                                                    \
            maxmag = gy > maxmag ? gy : maxmag;                                                    \
        }                                                                                          \
        r->ndiff = ndiff;                                                                          \
        r->nnf = nnf;                                                                              \
        r->nsign = nsign;                                                                          \
        r->maxd = maxd;                                                                            \
        r->sum = sum;                                                                              \
        r->maxmag = maxmag;                                                                        \
        r->h1 = h1;                                                                                \
        r->h2 = h2;                                                                                \
        r->h34 = h34;                                                                              \
    }                                                                                              \
    ULP__TARGET_##ISA static uint32_t NAME##_k2_##ISA(const T *restrict a, const T *restrict b,    \
                                                      unsigned n, uint32_t *inexact)               \
    {                                                                                              \
        uint32_t maxf = 0, maxi = 0;                                                               \
        const uint32_t MAG = (uint32_t)(((uint64_t)1 << ((W)-1)) - 1);                             \
        const uint32_t GAP = (W) == 32 ? 0 : 22 - (MANB);                                          \
        for (unsigned i = 0; i < n; i++) {                                                         \
            uint32_t x = a[i], y = b[i];                                                           \
            uint32_t mx = x & MAG, my = y & MAG;                                                   \
            uint32_t fin = -(uint32_t)((mx < (NF)) & (my < (NF)));                                 \
            uint32_t bx, by;                                                                       \
            NARROW_TO_F32(mx, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, bx);                            \
            NARROW_TO_F32(my, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, by);                            \
            bx |= (x >> ((W)-1)) << 31;                                                            \
            by |= (y >> ((W)-1)) << 31;                                                            \
            float vx, vy;                                                                          \
            memcpy(&vx, &bx, 4);                                                                   \
            memcpy(&vy, &by, 4);                                                                   \
            float df = vx - vy;                                                                    \
            uint32_t db;                                                                           \
            memcpy(&db, &df, 4);                                                                   \
            db &= 0x7fffffffu & fin;                                                               \
            maxf = db > maxf ? db : maxf;                                                          \
            uint32_t ex = mx >> (MANB), ey = my >> (MANB);                                         \
            ex += ex == 0;                                                                         \
            ey += ey == 0;                                                                         \
            uint32_t gap = ex > ey ? ex - ey : ey - ex;                                            \
            uint32_t exact = -(uint32_t)((gap <= GAP) & ((W) < 32 || ((x ^ y) >> ((W)-1)) == 0));  \
            db &= ~exact;                                                                          \
            maxi = db > maxi ? db : maxi;                                                          \
        }                                                                                          \
        *inexact = maxi;                                                                           \
        return maxf;                                                                               \
    }                                                                                              \
    ULP__TARGET_##ISA static double NAME##_k3_##ISA(const T *restrict a, const T *restrict b,      \
                                                    unsigned n)                                    \
    {                                                                                              \
        double maxd = 0;                                                                           \
        const uint32_t MAG = (uint32_t)(((uint64_t)1 << ((W)-1)) - 1);                             \
        for (unsigned i = 0; i < n; i++) {                                                         \
            uint32_t x = a[i], y = b[i];                                                           \
            uint32_t mx = x & MAG, my = y & MAG;                                                   \
            uint32_t bx, by;                                                                       \
            NARROW_TO_F32(mx, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, bx);                            \
            NARROW_TO_F32(my, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, by);                            \
            bx |= (x >> ((W)-1)) << 31;                                                            \
            by |= (y >> ((W)-1)) << 31;                                                            \
            float vx, vy;                                                                          \
            memcpy(&vx, &bx, 4);                                                                   \
            memcpy(&vy, &by, 4);                                                                   \
            double d = fabs((double)vx - (double)vy);                                              \
            d = ((mx < (NF)) & (my < (NF))) ? d : 0.0;                                             \
            maxd = d > maxd ? d : maxd;                                                            \
        }                                                                                          \
        return maxd;                                                                               \
    }

#define DEFINE_VALUES(NAME, W, MANB, BIAS, SUBSCALE, DIRECT, SHIFT)                                \
    /* The spacing of the format at magnitude bits m: |a - b| <= distance * spacing at the         \
     * larger magnitude, since every step between them is at most that wide. */                    \
    static inline double NAME##_spacing(uint32_t m)                                                \
    {                                                                                              \
        int e = (int)(m >> (MANB));                                                                \
        return ldexp(1.0, (e ? e : 1) - (BIAS) - (MANB));                                          \
    }                                                                                              \
    static inline double NAME##_val(uint32_t x)                                                    \
    {                                                                                              \
        uint32_t mx = x & (uint32_t)(((uint64_t)1 << ((W)-1)) - 1), bx;                            \
        NARROW_TO_F32(mx, DIRECT, SHIFT, MANB, BIAS, SUBSCALE, bx);                                \
        bx |= (x >> ((W)-1)) << 31;                                                                \
        float v;                                                                                   \
        memcpy(&v, &bx, 4);                                                                        \
        return (double)v;                                                                          \
    }

/* clang-format off */
#define DEFINE_FORMAT(NAME, T, W, MANB, BIAS, SUBSCALE, NF, DIRECT, SHIFT, L, SL, SUMT) \
    DEFINE_VALUES(NAME, W, MANB, BIAS, SUBSCALE, DIRECT, SHIFT) \
    ULP__ISA_EACH(DEFINE_KERNELS, NAME, T, W, MANB, BIAS, SUBSCALE, NF, DIRECT, SHIFT, L, SL, SUMT)
DEFINE_FORMAT(bf16, uint16_t, 16, 7, 127, 1.0, 0x7f80u, 1, 16, uint16_t, int16_t, uint32_t)
DEFINE_FORMAT(f32, uint32_t, 32, 23, 127, 1.0, 0x7f800000u, 1, 0, uint32_t, int32_t, uint64_t)
DEFINE_FORMAT(f16, uint16_t, 16, 10, 15, 0x1p-24, 0x7c00u, 0, 0, uint16_t, int16_t, uint32_t)
DEFINE_FORMAT(e4m3, uint8_t, 8, 3, 7, 0x1p-9, 0x7fu, 0, 0, uint16_t, int16_t, uint32_t)
DEFINE_FORMAT(e5m2, uint8_t, 8, 2, 15, 0x1p-16, 0x7cu, 0, 0, uint16_t, int16_t, uint32_t)
/* clang-format on */

/* Counts of dv[i] >= lo(k) for the bins 1..K, turned into bin counts. */
#define DEFINE_HIST(NAME, L, ISA)                                                                  \
    ULP__TARGET_##ISA static void NAME##_##ISA(uint64_t *hist, const L *restrict dv, unsigned n,   \
                                               uint32_t maxd)                                      \
    {                                                                                              \
        int top = hist_bin(maxd);                                                                  \
        uint32_t prev = 0;                                                                         \
        for (int k = top; k >= 1; k--) {                                                           \
            L lo = (L)ulp_diff_hist_lo(k);                                                         \
            uint32_t c = 0;                                                                        \
            for (unsigned i = 0; i < n; i++)                                                       \
                c += dv[i] >= lo;                                                                  \
            hist[k] += c - prev;                                                                   \
            prev = c;                                                                              \
        }                                                                                          \
    }
ULP__ISA_EACH(DEFINE_HIST, hist16, uint16_t)
ULP__ISA_EACH(DEFINE_HIST, hist32, uint32_t)

/*
 * Sparse or dense, per block, by cost.  Measured with
 * tests/perf/bench_density.c (AVX-512, bf16 and f32): the sparse path
 * costs about 13-16 ns per differing element (it branches on each), the
 * dense one about 0.2 ns per element for k2 plus 0.02 ns per histogram
 * bin in use.  Sparse when ndiff * 13 <= m * (0.2 + 0.02 * passes), in
 * whole numbers; choosing by cost rather than by a fixed share of
 * differing elements leaves no density at which the slower path runs.
 */
#define SPARSE_COST 650
#define DENSE_K2    10

/*
 * Can a block hold an element whose |a - b| (in double, as reported)
 * exceeds the running maximum?  `maxf`: the block's largest float32
 * |a - b| (bits); `maxi`: the same over the elements whose float32
 * difference may be rounded (k2 proves the others exact: operands of the
 * same sign and binade for f32, a small exponent gap for the narrower
 * formats).  float32 subtraction rounds the exact difference correctly and
 * rounding is monotone, so when the running maximum is itself a float32,
 * only a larger maxf, or an inexact element at the same value, can beat
 * it.  Otherwise rounding twice (to double, then to float32) may move a
 * value by one float32 ULP, so anything within one ULP is looked at.
 */
static int may_grow(const ulp__acc *acc, uint32_t maxf, uint32_t maxi)
{
    if (maxf == 0)
        return 0;
    float f = (float)acc->max_abs_diff;
    uint32_t run;
    memcpy(&run, &f, 4);
    if (run == 0 || maxf > run)
        return 1;
    if ((double)f == acc->max_abs_diff)
        return maxf == run && maxi == run;
    return maxf + 1 >= run;
}

/*
 * The per-block work after the first kernel (see the file comment).
 * Sparse blocks visit their few elements with a non-zero distance through
 * 64-bit words of dv (histogram bin, float32 |a - b|); dense blocks count
 * the histogram in vectorized passes and run k2.  Either way only a block
 * whose float32 maximum reaches the running one is visited again, to find
 * its elements at that maximum and their exact |a - b| in double.
 */
/* dv of a block that k0 took: its distances, from the magnitudes (k0 proved the signs equal). */
#define NEED_DV(NAME, ISA)                                                                         \
    do {                                                                                           \
        if (!have_dv) {                                                                            \
            NAME##_kd_##ISA(pa, pb, m, dv);                                                        \
            have_dv = 1;                                                                           \
        }                                                                                          \
    } while (0)

/*
 * After a block k0 could not take, the next RETRY_AFTER go straight to k1,
 * twice as many after each further refusal, up to RETRY_MAX: on a tensor
 * where no block suits k0 (a NaN or a zero crossing in each), k0 runs on
 * one block in RETRY_MAX + 1.
 */
#define RETRY_AFTER 8
#define RETRY_MAX   64

#define DEFINE_ADD(NAME, T, L, HIST, ISA)                                                          \
    ULP__TARGET_##ISA static void NAME##_add_##ISA(ulp__acc *acc, ulp_dtype dtype, const T *a,     \
                                                   const T *b, uint64_t n, uint64_t base)          \
    {                                                                                              \
        L dv[BLOCK] __attribute__((aligned(64)));                                                  \
        unsigned retry = 0, wait = RETRY_AFTER; /* blocks left before k0 is tried again */         \
        for (uint64_t off = 0; off < n; off += BLOCK) {                                            \
            unsigned m = (unsigned)(n - off < BLOCK ? n - off : BLOCK);                            \
            const T *pa = a + off, *pb = b + off;                                                  \
            uint64_t at = base + off;                                                              \
            blk_res r;                                                                             \
            int have_dv = 0;                                                                       \
            if (retry == 0 && NAME##_k0_##ISA(pa, pb, m, &r)) {                                    \
                wait = RETRY_AFTER;                                                                \
            } else {                                                                               \
                if (retry == 0) {                                                                  \
                    retry = wait;                                                                  \
                    wait = wait < RETRY_MAX ? 2 * wait : RETRY_MAX;                                \
                } else {                                                                           \
                    retry--;                                                                       \
                }                                                                                  \
                NAME##_k1_##ISA(pa, pb, m, dv, &r);                                                \
                have_dv = 1;                                                                       \
            }                                                                                      \
            if (r.maxmag > acc->max_mag_bits)                                                      \
                acc->max_mag_bits = r.maxmag;                                                      \
            if (r.ndiff == 0)                                                                      \
                continue;                                                                          \
            acc->differing += r.ndiff;                                                             \
            acc->nonfinite += r.nnf;                                                               \
            acc->sign_changes += r.nsign;                                                          \
            acc->sum_ulp += r.sum;                                                                 \
            if (r.maxd > acc->max_ulp) {                                                           \
                NEED_DV(NAME, ISA);                                                                \
                for (unsigned i = 0; i < m; i++) {                                                 \
                    if (dv[i] == r.maxd) {                                                         \
                        acc->max_ulp = r.maxd;                                                     \
                        acc->max_ulp_flat = (int64_t)(at + i);                                     \
                        acc->max_ulp_bits_a = pa[i];                                               \
                        acc->max_ulp_bits_b = pb[i];                                               \
                        break;                                                                     \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            if ((acc->first_dfin < 0 && r.ndiff > r.nnf) || (acc->first_nf < 0 && r.nnf > 0))      \
                first_diffs(acc, dtype, pa, pb, m, at, r.nnf > 0);                                 \
            if (r.maxd == 0)                                                                       \
                continue;                                                                          \
            /* Can this block beat the running max |a - b|?  Its bound: the largest distance       \
             * times the spacing at its largest magnitude (exact in double). */                    \
            int want_abs = acc->max_abs_diff_flat < 0 ||                                           \
                           (double)r.maxd * NAME##_spacing(r.maxmag) > acc->max_abs_diff;          \
            /* Distances of at most 4 ULP, the common case: k1 counted their bins. */              \
            int hist_done = r.maxd <= 4;                                                           \
            if (hist_done) {                                                                       \
                acc->hist[1] += r.h1;                                                              \
                acc->hist[2] += r.h2;                                                              \
                acc->hist[3] += r.h34;                                                             \
                if (!want_abs)                                                                     \
                    continue;                                                                      \
            }                                                                                      \
            NEED_DV(NAME, ISA);                                                                    \
            unsigned passes = hist_done ? 0 : (unsigned)hist_bin(r.maxd) + 1;                      \
            if ((uint64_t)r.ndiff * SPARSE_COST <=                                                 \
                (uint64_t)m * ((want_abs ? DENSE_K2 : 0) + passes)) {                              \
                /* Four 64-bit words of distances at a time; most are zero. */                     \
                unsigned per = 32 / sizeof(L);                                                     \
                for (unsigned i = 0; i < m; i += per) {                                            \
                    uint64_t w[4] = {0, 0, 0, 0};                                                  \
                    if (i + per <= m)                                                              \
                        memcpy(w, &dv[i], 32);                                                     \
                    else                                                                           \
                        memcpy(w, &dv[i], (m - i) * sizeof(L));                                    \
                    if ((w[0] | w[1] | w[2] | w[3]) == 0)                                          \
                        continue;                                                                  \
                    for (unsigned k = 0; k < 4; k++) {                                             \
                        uint64_t x = w[k];                                                         \
                        while (x) {                                                                \
                            unsigned lane = (unsigned)__builtin_ctzll(x) / (8 * sizeof(L));        \
                            unsigned q = i + k * (8 / sizeof(L)) + lane;                           \
                            x &= ~((uint64_t)(L) ~(L)0 << (lane * 8 * sizeof(L)));                 \
                            if (!hist_done)                                                        \
                                acc->hist[hist_bin(dv[q])]++;                                      \
                            if (!want_abs)                                                         \
                                continue;                                                          \
                            double d = fabs(NAME##_val(pa[q]) - NAME##_val(pb[q]));                \
                            if (d > acc->max_abs_diff) {                                           \
                                acc->max_abs_diff = d;                                             \
                                acc->max_abs_diff_flat = (int64_t)(at + q);                        \
                            }                                                                      \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            } else {                                                                               \
                if (!hist_done)                                                                    \
                    HIST##_##ISA(acc->hist, dv, m, r.maxd);                                        \
                if (!want_abs)                                                                     \
                    continue;                                                                      \
                /* float32 |a - b| first; the exact maximum in double only where it                \
                 * can reach the running one (see may_grow). */                                    \
                uint32_t maxi, maxf = NAME##_k2_##ISA(pa, pb, m, &maxi);                           \
                if (!may_grow(acc, maxf, maxi))                                                    \
                    continue;                                                                      \
                double d = NAME##_k3_##ISA(pa, pb, m);                                             \
                if (d > acc->max_abs_diff) {                                                       \
                    for (unsigned i = 0; i < m; i++) {                                             \
                        if (dv[i] != 0 && fabs(NAME##_val(pa[i]) - NAME##_val(pb[i])) == d) {      \
                            acc->max_abs_diff = d;                                                 \
                            acc->max_abs_diff_flat = (int64_t)(at + i);                            \
                            break;                                                                 \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* The first differing finite pair and the first nonfinite mismatch (rare: once per tensor). */
static void first_diffs(ulp__acc *acc, ulp_dtype dtype, const void *a, const void *b, unsigned n,
                        uint64_t base, int want_nf)
{
    size_t sz = ulp_dtype_size(dtype);
    const unsigned char *pa = a, *pb = b;
    for (unsigned i = 0; i < n; i++) {
        uint64_t x = ulp_dtype_load_bits(dtype, pa + i * sz);
        uint64_t y = ulp_dtype_load_bits(dtype, pb + i * sz);
        if (x == y)
            continue;
        if (is_finite_bits(dtype, x) && is_finite_bits(dtype, y)) {
            if (acc->first_dfin < 0)
                acc->first_dfin = (int64_t)(base + i);
        } else if (acc->first_nf < 0) {
            acc->first_nf = (int64_t)(base + i);
        }
        if (acc->first_dfin >= 0 && (acc->first_nf >= 0 || !want_nf))
            break;
    }
}

ULP__ISA_EACH(DEFINE_ADD, bf16, uint16_t, uint16_t, hist16)
ULP__ISA_EACH(DEFINE_ADD, f16, uint16_t, uint16_t, hist16)
ULP__ISA_EACH(DEFINE_ADD, e4m3, uint8_t, uint16_t, hist16)
ULP__ISA_EACH(DEFINE_ADD, e5m2, uint8_t, uint16_t, hist16)
ULP__ISA_EACH(DEFINE_ADD, f32, uint32_t, uint32_t, hist32)

/* f64: scalar, with the same definitions. */
static void add_f64(ulp__acc *acc, const void *a, const void *b, uint64_t n, uint64_t base)
{
    const unsigned char *pa = a, *pb = b;
    const uint64_t mag_mask = 0x7fffffffffffffffull, nf = 0x7ff0000000000000ull;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x, y;
        memcpy(&x, pa + 8 * i, 8);
        memcpy(&y, pb + 8 * i, 8);
        uint64_t mx = x & mag_mask, my = y & mag_mask;
        int fx = mx < nf, fy = my < nf;
        double vx, vy;
        memcpy(&vx, &x, 8);
        memcpy(&vy, &y, 8);
        if (fx && fabs(vx) > acc->max_abs)
            acc->max_abs = fabs(vx);
        if (fy && fabs(vy) > acc->max_abs)
            acc->max_abs = fabs(vy);
        if (x == y)
            continue;
        acc->differing++;
        int64_t flat = (int64_t)(base + i);
        if (!(fx && fy)) {
            acc->nonfinite++;
            if (acc->first_nf < 0)
                acc->first_nf = flat;
            continue;
        }
        if (acc->first_dfin < 0)
            acc->first_dfin = flat;
        int64_t ox = (x >> 63) ? -(int64_t)mx : (int64_t)mx;
        int64_t oy = (y >> 63) ? -(int64_t)my : (int64_t)my;
        uint64_t d = ox > oy ? (uint64_t)ox - (uint64_t)oy : (uint64_t)oy - (uint64_t)ox;
        acc->sum_ulp += d;
        acc->hist[hist_bin(d)] += d != 0;
        if (d > acc->max_ulp) {
            acc->max_ulp = d;
            acc->max_ulp_flat = flat;
            acc->max_ulp_bits_a = x;
            acc->max_ulp_bits_b = y;
        }
        if (d != 0 && ((x ^ y) >> 63))
            acc->sign_changes++;
        double ad = fabs(vx - vy);
        if (ad > 0 && (acc->max_abs_diff_flat < 0 || ad > acc->max_abs_diff)) {
            acc->max_abs_diff = ad;
            acc->max_abs_diff_flat = flat;
        }
    }
}

/* Integers: every value is finite; the "ULP" distance is |a - b|. */
static void add_int(ulp__acc *acc, ulp_dtype dtype, const void *a, const void *b, uint64_t n,
                    uint64_t base)
{
    size_t sz = ulp_dtype_size(dtype);
    const unsigned char *pa = a, *pb = b;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = ulp_dtype_load_bits(dtype, pa + i * sz);
        uint64_t y = ulp_dtype_load_bits(dtype, pb + i * sz);
        int64_t ox = ulp_dtype_ordered(dtype, x), oy = ulp_dtype_ordered(dtype, y);
        double ax = fabs((double)ox), ay = fabs((double)oy);
        if (ax > acc->max_abs)
            acc->max_abs = ax;
        if (ay > acc->max_abs)
            acc->max_abs = ay;
        if (x == y)
            continue;
        int64_t flat = (int64_t)(base + i);
        acc->differing++;
        if (acc->first_dfin < 0)
            acc->first_dfin = flat;
        uint64_t d = ox > oy ? (uint64_t)ox - (uint64_t)oy : (uint64_t)oy - (uint64_t)ox;
        acc->sum_ulp += d;
        acc->hist[hist_bin(d)]++;
        if (d > acc->max_ulp) {
            acc->max_ulp = d;
            acc->max_ulp_flat = flat;
            acc->max_ulp_bits_a = x;
            acc->max_ulp_bits_b = y;
        }
        if ((ox < 0) != (oy < 0))
            acc->sign_changes++;
        if ((double)d > acc->max_abs_diff) {
            acc->max_abs_diff = (double)d;
            acc->max_abs_diff_flat = flat;
        }
    }
}

void ulp__acc_add(ulp__acc *acc, ulp_dtype dtype, const void *a, const void *b, uint64_t n,
                  uint64_t base)
{
    acc->elements += n;
    switch (dtype) {
    case ULP_DTYPE_BF16:
        ULP__ISA_CALL(bf16_add, acc, dtype, a, b, n, base);
        break;
    case ULP_DTYPE_F16:
        ULP__ISA_CALL(f16_add, acc, dtype, a, b, n, base);
        break;
    case ULP_DTYPE_F32:
        ULP__ISA_CALL(f32_add, acc, dtype, a, b, n, base);
        break;
    case ULP_DTYPE_F8E4M3:
        ULP__ISA_CALL(e4m3_add, acc, dtype, a, b, n, base);
        break;
    case ULP_DTYPE_F8E5M2:
        ULP__ISA_CALL(e5m2_add, acc, dtype, a, b, n, base);
        break;
    case ULP_DTYPE_F64:
        add_f64(acc, a, b, n, base);
        break;
    default:
        add_int(acc, dtype, a, b, n, base);
        break;
    }
}

/* Is index `s` an earlier valid index than `d`? */
static int earlier(int64_t s, int64_t d)
{
    return s >= 0 && (d < 0 || s < d);
}

void ulp__acc_merge(ulp__acc *dst, const ulp__acc *src)
{
    dst->elements += src->elements;
    dst->differing += src->differing;
    dst->nonfinite += src->nonfinite;
    dst->sign_changes += src->sign_changes;
    dst->sum_ulp += src->sum_ulp;
    if (src->max_ulp > dst->max_ulp ||
        (src->max_ulp == dst->max_ulp && earlier(src->max_ulp_flat, dst->max_ulp_flat))) {
        dst->max_ulp = src->max_ulp;
        dst->max_ulp_flat = src->max_ulp_flat;
        dst->max_ulp_bits_a = src->max_ulp_bits_a;
        dst->max_ulp_bits_b = src->max_ulp_bits_b;
    }
    if (earlier(src->first_dfin, dst->first_dfin))
        dst->first_dfin = src->first_dfin;
    if (earlier(src->first_nf, dst->first_nf))
        dst->first_nf = src->first_nf;
    if (src->max_abs_diff_flat >= 0 &&
        (dst->max_abs_diff_flat < 0 || src->max_abs_diff > dst->max_abs_diff ||
         (src->max_abs_diff == dst->max_abs_diff &&
          src->max_abs_diff_flat < dst->max_abs_diff_flat))) {
        dst->max_abs_diff = src->max_abs_diff;
        dst->max_abs_diff_flat = src->max_abs_diff_flat;
    }
    if (src->max_abs > dst->max_abs)
        dst->max_abs = src->max_abs;
    if (src->max_mag_bits > dst->max_mag_bits)
        dst->max_mag_bits = src->max_mag_bits;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
        dst->hist[k] += src->hist[k];
}

void ulp__acc_finish(const ulp__acc *acc, ulp_dtype dtype, int ndim, const int64_t *shape,
                     ulp_diff_metrics *m)
{
    memset(m, 0, sizeof *m);
    m->differing = acc->differing;
    m->nonfinite_mismatch = acc->nonfinite;
    m->max_ulp = acc->max_ulp;
    m->sign_changes = acc->sign_changes;
    uint64_t dfin = acc->differing - acc->nonfinite;
    m->mean_ulp = dfin ? (double)acc->sum_ulp / (double)dfin : 0.0;
    uint64_t rest = 0;
    /* Bins from 1 on count differing pairs: none in most rows of a diff. */
    for (int k = 1; acc->differing != 0 && k < ULP_DIFF_HIST_BINS; k++) {
        m->hist[k] = acc->hist[k];
        rest += acc->hist[k];
    }
    m->hist[0] = acc->elements - acc->nonfinite - rest;
    m->max_abs_diff = acc->max_abs_diff;
    m->max_abs = acc->max_abs;
    double mag = ulp_dtype_to_double(dtype, acc->max_mag_bits);
    if (mag > m->max_abs)
        m->max_abs = mag;
    double u = ulp_dtype_ulp_at(dtype, m->max_abs);
    m->max_abs_diff_ulps_at_max = u > 0 ? acc->max_abs_diff / u : 0.0;
    if (acc->max_ulp > 0)
        m->worst_flat = acc->max_ulp_flat;
    else if (acc->first_dfin >= 0)
        m->worst_flat = acc->first_dfin;
    else
        m->worst_flat = acc->first_nf;
    if (m->worst_flat >= 0)
        ulp_diff_unflatten((uint64_t)m->worst_flat, ndim, shape, m->worst_index);
    m->max_abs_diff_flat = acc->max_abs_diff_flat;
    m->worst_a = m->worst_b = 0.0;
}

void ulp_diff_buffers(ulp_dtype dtype, const void *a, const void *b, uint64_t n, int ndim,
                      const int64_t *shape, ulp_diff_metrics *out)
{
    ulp__acc acc;
    ulp__acc_init(&acc);
    ulp__acc_add(&acc, dtype, a, b, n, 0);
    ulp__acc_finish(&acc, dtype, ndim, shape, out);
    if (out->worst_flat >= 0) {
        size_t sz = ulp_dtype_size(dtype);
        const unsigned char *pa = a, *pb = b;
        out->worst_bits_a = ulp_dtype_load_bits(dtype, pa + (size_t)out->worst_flat * sz);
        out->worst_bits_b = ulp_dtype_load_bits(dtype, pb + (size_t)out->worst_flat * sz);
        out->worst_a = ulp_dtype_to_double(dtype, out->worst_bits_a);
        out->worst_b = ulp_dtype_to_double(dtype, out->worst_bits_b);
    }
}
