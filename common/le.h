/*
 * Little-endian integer fields of the bytes this project lays out itself
 * (the capture journal, the capture index), whatever the host's order.
 */
#ifndef ULPPROF_COMMON_LE_H
#define ULPPROF_COMMON_LE_H

#include <stdint.h>

static inline void ulp__le32_put(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void ulp__le64_put(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t ulp__le32_get(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t ulp__le64_get(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif /* ULPPROF_COMMON_LE_H */
