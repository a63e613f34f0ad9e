/*
 * Little-endian integer fields of the bytes this project lays out itself
 * (the capture journal, the capture index), whatever the host's order.
 */
#ifndef ULPPROF_COMMON_LE_H
#define ULPPROF_COMMON_LE_H

#include <stdint.h>
#include <string.h>

/*
 * One load or store each: gcc -O2 does not fuse the byte loops these
 * replaced (decoding 10,000 index records spent half its time in them).
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ULP__LE32(v) __builtin_bswap32(v)
#define ULP__LE64(v) __builtin_bswap64(v)
#else
#define ULP__LE32(v) (v)
#define ULP__LE64(v) (v)
#endif

static inline void ulp__le32_put(unsigned char *p, uint32_t v)
{
    v = ULP__LE32(v);
    memcpy(p, &v, 4);
}

static inline void ulp__le64_put(unsigned char *p, uint64_t v)
{
    v = ULP__LE64(v);
    memcpy(p, &v, 8);
}

static inline uint32_t ulp__le32_get(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ULP__LE32(v);
}

static inline uint64_t ulp__le64_get(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return ULP__LE64(v);
}

#endif /* ULPPROF_COMMON_LE_H */
