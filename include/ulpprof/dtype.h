/*
 * The element types of the snapshot format (FORMAT.md "Element storage").
 *
 * Every function here works on raw bit patterns: the bytes a producer had
 * are the bytes compared.  Floating-point classification, the ordered-integer
 * map behind ULP distance and the float32 -> narrow-float rounding live here
 * so that the writer, the analyzer and the tests share one definition.
 */
#ifndef ULPPROF_DTYPE_H
#define ULPPROF_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ulp_dtype {
    ULP_DTYPE_INVALID = -1,
    ULP_DTYPE_F64 = 0,
    ULP_DTYPE_F32,
    ULP_DTYPE_F16,
    ULP_DTYPE_BF16,
    ULP_DTYPE_F8E4M3,
    ULP_DTYPE_F8E5M2,
    ULP_DTYPE_I64,
    ULP_DTYPE_I32,
    ULP_DTYPE_I16,
    ULP_DTYPE_I8,
    ULP_DTYPE_U8,
    ULP_DTYPE_COUNT
} ulp_dtype;

/* What a bit pattern encodes. */
typedef enum ulp_fpclass {
    ULP_FPCLASS_ZERO = 0,
    ULP_FPCLASS_SUBNORMAL,
    ULP_FPCLASS_NORMAL,
    ULP_FPCLASS_INF,
    ULP_FPCLASS_NAN
} ulp_fpclass;

typedef struct ulp_dtype_info {
    const char *name;   /* FORMAT.md name: "bf16", "f8e4m3", ...              */
    uint32_t size;      /* bytes per element                                   */
    uint32_t is_float;  /* 1 for the six floating-point formats                */
    uint32_t is_signed; /* integers: 1 for i*, 0 for u8; floats: 1             */
    uint32_t exp_bits;  /* floats: exponent width; integers: 0                 */
    uint32_t man_bits;  /* floats: explicit mantissa width; integers: 0        */
    int32_t bias;       /* floats: exponent bias                               */
    uint32_t has_inf;   /* 0 for e4m3fn, which has no infinities               */
} ulp_dtype_info;

/* The table row for a dtype; NULL for an invalid one. */
ULP_API const ulp_dtype_info *ulp_dtype_get(ulp_dtype dtype);

/* Looks up a FORMAT.md name; ULP_DTYPE_INVALID when unknown.  Case-sensitive. */
ULP_API ulp_dtype ulp_dtype_from_name(const char *name);

/* The FORMAT.md name, or "invalid". */
ULP_API const char *ulp_dtype_name(ulp_dtype dtype);

/* Bytes per element; 0 for an invalid dtype. */
ULP_API size_t ulp_dtype_size(ulp_dtype dtype);

/*
 * The raw bits of one element, zero-extended into 64 bits.  `p` points to
 * little-endian storage of ulp_dtype_size(dtype) bytes.
 */
ULP_API uint64_t ulp_dtype_load_bits(ulp_dtype dtype, const void *p);

/* Classification of a bit pattern (integers are NORMAL or ZERO). */
ULP_API ulp_fpclass ulp_dtype_classify(ulp_dtype dtype, uint64_t bits);

/*
 * The ordered-integer map used for ULP distance (FORMAT.md): non-negative
 * values map to their bits, negative ones to minus their magnitude bits, so
 * +0 and -0 both map to 0 and adjacent finite values differ by one.
 * Only meaningful for finite values; integers map to their own value.
 */
ULP_API int64_t ulp_dtype_ordered(ulp_dtype dtype, uint64_t bits);

/* The value a bit pattern encodes, exactly (every format fits in a double). */
ULP_API double ulp_dtype_to_double(ulp_dtype dtype, uint64_t bits);

/*
 * Size of one ULP of `dtype` at magnitude |x|: the spacing between the
 * finite values of the format just at or below |x| (for |x| above the
 * largest finite value, the spacing at the top; for subnormals and zero,
 * the smallest subnormal).  Integers: 1.  Used to express an absolute
 * difference "in ULPs at the tensor's largest magnitude".
 */
ULP_API double ulp_dtype_ulp_at(ulp_dtype dtype, double x);

/*
 * float32 -> narrow float, round to nearest, ties to even, as the hardware
 * does: overflow gives inf (e4m3fn, which has none, gives NaN 0x7f/0xff),
 * underflow gives correctly rounded subnormals or signed zero, NaN stays
 * NaN (quiet, sign kept).  HDF5's own conversion gets several of these
 * wrong (docs/hdf5.md); always round here and write raw bits.
 */
ULP_API uint16_t ulp_f32_to_bf16(float f);
ULP_API uint16_t ulp_f32_to_f16(float f);
ULP_API uint8_t ulp_f32_to_f8e4m3(float f);
ULP_API uint8_t ulp_f32_to_f8e5m2(float f);

/* Exact widenings (every narrow value is representable in float32). */
ULP_API float ulp_bf16_to_f32(uint16_t h);
ULP_API float ulp_f16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_DTYPE_H */
