/*
 * The dtype table and the bit-level arithmetic of FORMAT.md: classification,
 * the ordered-integer map behind ULP distance, exact widening to double and
 * round-to-nearest-even narrowing from float32.
 *
 * The narrow float formats are handled by one generic description (exponent
 * and mantissa widths, bias, whether the all-ones exponent means inf/NaN),
 * so bf16, fp16 and both fp8 formats share one rounding routine.
 */
#include <math.h>
#include <string.h>

#include "ulpprof/dtype.h"

/* clang-format off */
static const ulp_dtype_info dtype_table[ULP_DTYPE_COUNT] = {
    /*                name      size float signed exp man  bias inf */
    [ULP_DTYPE_F64]    = {"f64",    8, 1, 1, 11, 52, 1023, 1},
    [ULP_DTYPE_F32]    = {"f32",    4, 1, 1,  8, 23,  127, 1},
    [ULP_DTYPE_F16]    = {"f16",    2, 1, 1,  5, 10,   15, 1},
    [ULP_DTYPE_BF16]   = {"bf16",   2, 1, 1,  8,  7,  127, 1},
    [ULP_DTYPE_F8E4M3] = {"f8e4m3", 1, 1, 1,  4,  3,    7, 0},
    [ULP_DTYPE_F8E5M2] = {"f8e5m2", 1, 1, 1,  5,  2,   15, 1},
    [ULP_DTYPE_I64]    = {"i64",    8, 0, 1,  0,  0,    0, 0},
    [ULP_DTYPE_I32]    = {"i32",    4, 0, 1,  0,  0,    0, 0},
    [ULP_DTYPE_I16]    = {"i16",    2, 0, 1,  0,  0,    0, 0},
    [ULP_DTYPE_I8]     = {"i8",     1, 0, 1,  0,  0,    0, 0},
    [ULP_DTYPE_U8]     = {"u8",     1, 0, 0,  0,  0,    0, 0},
};
/* clang-format on */

const ulp_dtype_info *ulp_dtype_get(ulp_dtype dtype)
{
    if ((int)dtype < 0 || dtype >= ULP_DTYPE_COUNT)
        return NULL;
    return &dtype_table[dtype];
}

ulp_dtype ulp_dtype_from_name(const char *name)
{
    if (name == NULL)
        return ULP_DTYPE_INVALID;
    for (int i = 0; i < ULP_DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0)
            return (ulp_dtype)i;
    return ULP_DTYPE_INVALID;
}

/* ulp_dtype_get()'s check inline: a diff asks for a size some fifteen times a row. */
const char *ulp_dtype_name(ulp_dtype dtype)
{
    return (int)dtype >= 0 && dtype < ULP_DTYPE_COUNT ? dtype_table[dtype].name : "invalid";
}

size_t ulp_dtype_size(ulp_dtype dtype)
{
    return (int)dtype >= 0 && dtype < ULP_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

uint64_t ulp_dtype_load_bits(ulp_dtype dtype, const void *p)
{
    /* Storage is little-endian (FORMAT.md); so is every host we build for. */
    switch (ulp_dtype_size(dtype)) {
    case 1: {
        uint8_t v;
        memcpy(&v, p, 1);
        return v;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    default:
        return 0;
    }
}

static uint64_t low_mask(uint32_t bits)
{
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

ulp_fpclass ulp_dtype_classify(ulp_dtype dtype, uint64_t bits)
{
    const ulp_dtype_info *d = ulp_dtype_get(dtype);
    if (d == NULL)
        return ULP_FPCLASS_NAN;
    bits &= low_mask(8 * d->size);
    if (!d->is_float)
        return bits == 0 ? ULP_FPCLASS_ZERO : ULP_FPCLASS_NORMAL;
    uint64_t man = bits & low_mask(d->man_bits);
    uint64_t exp = (bits >> d->man_bits) & low_mask(d->exp_bits);
    uint64_t exp_max = low_mask(d->exp_bits);
    if (exp == exp_max) {
        if (d->has_inf)
            return man == 0 ? ULP_FPCLASS_INF : ULP_FPCLASS_NAN;
        /* e4m3fn: only S.1111.111 is NaN; the rest of the top binade is finite. */
        if (man == low_mask(d->man_bits))
            return ULP_FPCLASS_NAN;
    }
    if (exp == 0)
        return man == 0 ? ULP_FPCLASS_ZERO : ULP_FPCLASS_SUBNORMAL;
    return ULP_FPCLASS_NORMAL;
}

int64_t ulp_dtype_ordered(ulp_dtype dtype, uint64_t bits)
{
    const ulp_dtype_info *d = ulp_dtype_get(dtype);
    if (d == NULL)
        return 0;
    uint32_t width = 8 * d->size;
    bits &= low_mask(width);
    uint64_t sign = (uint64_t)1 << (width - 1);
    if (d->is_float) {
        int64_t mag = (int64_t)(bits & (sign - 1));
        return (bits & sign) ? -mag : mag;
    }
    if (d->is_signed && (bits & sign))
        return (int64_t)(bits | ~low_mask(width)); /* sign-extend */
    return (int64_t)bits;
}

double ulp_dtype_to_double(ulp_dtype dtype, uint64_t bits)
{
    const ulp_dtype_info *d = ulp_dtype_get(dtype);
    if (d == NULL)
        return (double)NAN;
    if (!d->is_float)
        return (double)ulp_dtype_ordered(dtype, bits);
    if (dtype == ULP_DTYPE_F64) {
        double v;
        memcpy(&v, &bits, sizeof v);
        return v;
    }
    if (dtype == ULP_DTYPE_F32) {
        uint32_t b = (uint32_t)bits;
        float v;
        memcpy(&v, &b, sizeof v);
        return (double)v;
    }
    if (dtype == ULP_DTYPE_BF16 && ((bits >> 7) & 0xff) != 0xff) {
        /* A finite bf16 is the float32 of its bits shifted: exact, and a
         * diff's rows call this for each of them. */
        uint32_t b = (uint32_t)(bits & 0xffff) << 16;
        float v;
        memcpy(&v, &b, sizeof v);
        return (double)v;
    }
    uint32_t width = 8 * d->size;
    bits &= low_mask(width);
    int negative = (int)((bits >> (width - 1)) & 1);
    uint64_t man = bits & low_mask(d->man_bits);
    int exp = (int)((bits >> d->man_bits) & low_mask(d->exp_bits));
    double v;
    switch (ulp_dtype_classify(dtype, bits)) {
    case ULP_FPCLASS_NAN:
        v = (double)NAN;
        break;
    case ULP_FPCLASS_INF:
        v = (double)INFINITY;
        break;
    case ULP_FPCLASS_ZERO:
        v = 0.0;
        break;
    case ULP_FPCLASS_SUBNORMAL:
        v = ldexp((double)man, 1 - d->bias - (int)d->man_bits);
        break;
    default:
        v = ldexp((double)(man | ((uint64_t)1 << d->man_bits)), exp - d->bias - (int)d->man_bits);
        break;
    }
    return negative ? -v : v;
}

/* Largest finite value's unbiased exponent. */
static int max_exponent(const ulp_dtype_info *d)
{
    int top = (int)low_mask(d->exp_bits);
    /* IEEE formats reserve the all-ones exponent; e4m3fn uses it for finite values. */
    return (d->has_inf ? top - 1 : top) - d->bias;
}

double ulp_dtype_ulp_at(ulp_dtype dtype, double x)
{
    const ulp_dtype_info *d = ulp_dtype_get(dtype);
    if (d == NULL || isnan(x))
        return (double)NAN;
    if (!d->is_float)
        return 1.0;
    int emin = 1 - d->bias;
    int emax = max_exponent(d);
    double ax = fabs(x);
    int e;
    if (ax == 0.0 || isinf(ax)) {
        e = ax == 0.0 ? emin : emax;
    } else {
        /* The exponent from the bits: frexp and ldexp were most of a
         * diff row's finishing.  A subnormal double lies below every
         * format's emin (float64's too). */
        uint64_t b;
        memcpy(&b, &ax, sizeof b);
        int be = (int)(b >> 52);
        e = be == 0 ? emin : be - 1023;
        if (e < emin)
            e = emin;
        if (e > emax)
            e = emax;
    }
    int r = e - (int)d->man_bits;
    if (r < -1022 || r > 1023)
        return ldexp(1.0, r);
    uint64_t rb = (uint64_t)(r + 1023) << 52;
    double v;
    memcpy(&v, &rb, sizeof v);
    return v;
}

/*
 * float32 -> a narrow float format, round to nearest, ties to even.
 * The value is mant * 2^(e2) exactly; the target quantum at the value's
 * binade (or the subnormal quantum) decides how many bits are dropped.
 * Adding the rounded significand to the biased exponent field lets a carry
 * out of the mantissa bump the exponent, and a subnormal round up into the
 * smallest normal, without special cases.
 */
static uint32_t f32_to_narrow(float f, const ulp_dtype_info *d)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t width = 8 * d->size;
    uint32_t sign = (u >> 31) << (width - 1);
    uint32_t exp32 = (u >> 23) & 0xff;
    uint32_t man32 = u & 0x7fffff;
    uint32_t exp_all = (uint32_t)low_mask(d->exp_bits);
    uint32_t inf_bits = exp_all << d->man_bits;
    uint32_t nan_bits = d->has_inf ? inf_bits | ((uint32_t)1 << (d->man_bits - 1))
                                   : inf_bits | (uint32_t)low_mask(d->man_bits);

    if (exp32 == 0xff) {
        if (man32 != 0) {
            if (!d->has_inf)
                return sign | nan_bits;
            /* Keep the top payload bits, and make the NaN quiet. */
            uint32_t payload = man32 >> (23 - d->man_bits);
            return sign | nan_bits | payload;
        }
        return sign | (d->has_inf ? inf_bits : nan_bits);
    }
    if (exp32 == 0 && man32 == 0)
        return sign;

    uint64_t mant = exp32 ? (man32 | 0x800000u) : man32;
    int e2 = (exp32 ? (int)exp32 : 1) - 150; /* value = mant * 2^e2 */
    int msb = 63 - __builtin_clzll(mant);
    int unbiased = msb + e2;
    int emin = 1 - d->bias;
    int target = unbiased < emin ? emin : unbiased;
    int shift = (target - (int)d->man_bits) - e2;

    uint64_t r;
    if (shift <= 0) {
        r = mant << -shift; /* exact: the target has enough precision */
    } else if (shift > 40) {
        r = 0; /* below half the smallest quantum */
    } else {
        r = mant >> shift;
        uint64_t rem = mant & low_mask((uint32_t)shift);
        uint64_t half = (uint64_t)1 << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
    }
    /* bits = ((target - emin) << man_bits) + r, with carries flowing up. */
    uint64_t bits = ((uint64_t)(target - emin) << d->man_bits) + r;
    uint64_t max_finite = d->has_inf ? (uint64_t)inf_bits - 1 : (uint64_t)nan_bits - 1;
    if (bits > max_finite)
        return sign | (d->has_inf ? inf_bits : nan_bits);
    return sign | (uint32_t)bits;
}

uint16_t ulp_f32_to_bf16(float f)
{
    return (uint16_t)f32_to_narrow(f, &dtype_table[ULP_DTYPE_BF16]);
}

uint16_t ulp_f32_to_f16(float f)
{
    return (uint16_t)f32_to_narrow(f, &dtype_table[ULP_DTYPE_F16]);
}

uint8_t ulp_f32_to_f8e4m3(float f)
{
    return (uint8_t)f32_to_narrow(f, &dtype_table[ULP_DTYPE_F8E4M3]);
}

uint8_t ulp_f32_to_f8e5m2(float f)
{
    return (uint8_t)f32_to_narrow(f, &dtype_table[ULP_DTYPE_F8E5M2]);
}

float ulp_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ulp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf, or NaN with its payload */
    } else if (exp != 0) {
        u = sign | ((exp - 15 + 127) << 23) | (man << 13);
    } else {
        /* Zero or subnormal: exact in float32, and in the double used here. */
        float f = (float)ldexp((double)man, -24);
        memcpy(&u, &f, sizeof u);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
