/* UTF-8 validity, for the writers that escape bytes that are not UTF-8. */
#ifndef ULPPROF_COMMON_UTF8_H
#define ULPPROF_COMMON_UTF8_H

#include <stddef.h>

/*
 * The length (1..4) of the valid UTF-8 sequence that starts at p, or 0 when
 * none does: a stray continuation byte, a truncated sequence, an overlong
 * form, a surrogate or a code point past U+10FFFF.  p[0] must not be NUL.
 */
size_t ulp__utf8_len(const unsigned char *p);

#endif /* ULPPROF_COMMON_UTF8_H */
