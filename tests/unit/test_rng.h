/*
 * The report tests' random inputs: one xorshift64 per test file, seeded by
 * the file (define TEST_RNG_SEED before including this), so that every run
 * draws the same sequence.  Header-only; every function is static.
 */
#ifndef ULPPROF_TESTS_TEST_RNG_H
#define ULPPROF_TESTS_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef TEST_RNG_SEED
#error "define TEST_RNG_SEED before including test_rng.h"
#endif

static uint64_t g_rng = TEST_RNG_SEED;

/* The next 64 random bits. */
static inline uint64_t next(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* A number in [0, n); n > 0. */
static inline size_t pick(size_t n)
{
    return (size_t)(next() % n);
}

/* Up to `most` pieces drawn from pieces[0..n), joined in `buf`: a name. */
static inline char *rng_join(char *buf, const char *const *pieces, size_t n, size_t most)
{
    size_t count = pick(most + 1), k = 0;
    for (size_t i = 0; i < count; i++) {
        const char *s = pieces[pick(n)];
        size_t len = strlen(s);
        memcpy(buf + k, s, len);
        k += len;
    }
    buf[k] = '\0';
    return buf;
}

#endif
