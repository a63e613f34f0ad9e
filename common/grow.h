/*
 * Growing an array by doubling, written once.  Internal to the libraries.
 *
 *     if (ULP__GROW(rows, cap, n + 1) != 0) goto nomem;
 *     rows[n++] = row;
 */
#ifndef ULPPROF_COMMON_GROW_H
#define ULPPROF_COMMON_GROW_H

#include <stddef.h>

/*
 * Makes room for at least `need` elements of `size` bytes in the array whose
 * address is at `pp` (a `T **`) and whose capacity is *cap: doubles the
 * capacity (from 16) until it holds `need`, and reallocates.  0, or -1 when
 * out of memory or the size would overflow; then the array and *cap are
 * unchanged.  Elements past the old capacity are uninitialized.
 */
int ulp__grow(void *pp, size_t *cap, size_t need, size_t size);

/* ULP__GROW(ptr, cap, need): ulp__grow for a typed pointer lvalue. */
#define ULP__GROW(ptr, cap, need) ulp__grow(&(ptr), &(cap), (need), sizeof(*(ptr)))

#endif /* ULPPROF_COMMON_GROW_H */
