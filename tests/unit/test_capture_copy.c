/*
 * The capture copy (capture/capture_copy.c): every byte lands, none
 * beside the destination is touched, for sizes on both sides of the switch
 * to streaming stores and for every alignment of source and destination
 * modulo 64 -- the unaligned head, the 64-byte body and the tail.  The
 * expected bytes are the source's, compared by memcmp, not by the copy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "capture/capture_copy.h"

#define GUARD 64 /* bytes checked untouched on each side of the destination */

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

/* One copy of `n` bytes, the source at `so` and the destination at `doff` past 64-byte alignment.
 */
static void check_copy(size_t n, size_t so, size_t doff)
{
    unsigned char *src = NULL, *dst = NULL;
    assert_int_equal(posix_memalign((void **)&src, 64, n + 128), 0);
    assert_int_equal(posix_memalign((void **)&dst, 64, n + 128 + 2 * GUARD), 0);
    fill(src, n + 128, (uint32_t)(n + so));
    memset(dst, 0xa5, n + 128 + 2 * GUARD);
    unsigned char *to = dst + GUARD + doff;
    ulp__capture_copy(to, src + so, n);
    assert_memory_equal(to, src + so, n);
    for (size_t i = 0; i < GUARD + doff; i++)
        assert_int_equal(dst[i], 0xa5);
    for (size_t i = GUARD + doff + n; i < n + 128 + 2 * GUARD; i++)
        assert_int_equal(dst[i], 0xa5);
    free(src);
    free(dst);
}

/* Small sizes: memcpy's side of the switch, and nothing for n = 0. */
static void test_small(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 15, 16, 63, 64, 65, 4096, 65537};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (size_t a = 0; a < 64; a += 7)
            check_copy(sizes[i], a, (a * 3) % 64);
}

/* Around and past the switch (256 KiB), every alignment of the destination's head. */
static void test_large_every_alignment(void **state)
{
    (void)state;
    static const size_t sizes[] = {(256 << 10) - 1, 256 << 10, (256 << 10) + 1, (256 << 10) + 63,
                                   (1 << 20) + 17};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (size_t d = 0; d < 64; d++)
            check_copy(sizes[i], (d * 5 + i) % 64, d);
}

/* A big tensor, as the capture benchmark copies: 8 MiB plus an odd tail. */
static void test_big(void **state)
{
    (void)state;
    check_copy((8 << 20) + 40, 8, 0);
    check_copy((8 << 20) + 40, 0, 33);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_large_every_alignment),
        cmocka_unit_test(test_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
