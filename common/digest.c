/*
 * XXH64 (Yann Collet's xxHash, 64-bit variant), from its specification:
 * four lanes of 8-byte words, each lane a chain of multiply-rotate
 * rounds, merged in lane order, the length added, the tail folded in
 * word by word and byte by byte, then the avalanche.  Every input word
 * enters one chain at its own step, so moving a word moves its effect:
 * unlike a xor-sum of elements, a permuted row hashes differently.
 */
#include "digest.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian hosts only (as the whole format) */
}

static inline uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t round64(uint64_t acc, uint64_t w)
{
    acc += w * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static inline uint64_t merge(uint64_t acc, uint64_t v)
{
    acc ^= round64(0, v);
    return acc * P1 + P4;
}

uint64_t ulp__xxh64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const unsigned char *limit = end - 32;
        do {
            v1 = round64(v1, rd64(p));
            v2 = round64(v2, rd64(p + 8));
            v3 = round64(v3, rd64(p + 16));
            v4 = round64(v4, rd64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        h = merge(h, v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    while (p + 8 <= end) {
        h ^= round64(0, rd64(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
    }
    if (p + 4 <= end) {
        h ^= (uint64_t)rd32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)(*p) * P5;
        h = rotl(h, 11) * P1;
        p++;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t ulp__digest_row_count(const ulp__digest_shape *d)
{
    int rr = d->positions != NULL ? d->row_rank : (d->ndim > 0 ? 1 : 0);
    uint64_t rows = 1;
    for (int i = 0; i < rr; i++)
        rows *= (uint64_t)d->shape[i];
    return rows;
}

void ulp__digest_rows(const ulp__digest_shape *d, const void *data, size_t elem, uint64_t *out)
{
    int rr = d->positions != NULL ? d->row_rank : (d->ndim > 0 ? 1 : 0);
    uint64_t rows = ulp__digest_row_count(d), row_elems = 1;
    for (int i = rr; i < d->ndim; i++)
        row_elems *= (uint64_t)d->shape[i];
    size_t row_bytes = (size_t)(row_elems * elem);
    const unsigned char *p = data;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t seed = d->positions != NULL ? (uint64_t)d->positions[r] : r;
        out[r] = ulp__xxh64(p + r * row_bytes, row_bytes, seed);
    }
}
