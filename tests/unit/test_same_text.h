/*
 * The report writers' tests: a writer's text against its reference
 * writer's, byte for byte, failing with where they part.  Include after
 * cmocka.h.
 */
#ifndef ULPPROF_TESTS_TEST_SAME_TEXT_H
#define ULPPROF_TESTS_TEST_SAME_TEXT_H

#include <stddef.h>

/* Fails unless got[0..ng) equals want[0..nw), the reference `ref`'s text. */
static inline void assert_same_text(const char *what, const char *ref, const char *got, size_t ng,
                                    const char *want, size_t nw)
{
    size_t k = 0;
    while (k < ng && k < nw && got[k] == want[k])
        k++;
    if (k == ng && k == nw)
        return;
    size_t from = k > 60 ? k - 60 : 0;
    fail_msg("%s: differs at byte %zu of %zu/%zu:\n--- writer:\n%.120s\n--- %s:\n%.120s", what, k,
             ng, nw, got + from, ref, want + from);
}

#endif
