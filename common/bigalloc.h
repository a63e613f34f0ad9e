/*
 * Large arrays backed by huge pages where the kernel gives them.
 * Internal to the libraries.
 *
 * A fresh 4 KiB page costs a fault and its zeroing: ~1.3 us on this
 * project's machines, 0.33 ms a MiB.  Opening a snapshot of 10,000
 * captures fills ~5 MB of fresh memory (the capture descriptions, the
 * index records); in 2 MiB pages (MADV_HUGEPAGE) such memory costs ~0.05
 * ms a MiB.  The advice covers the 2 MiB-aligned pages of the array,
 * the last one too when the array fills one at least or at most a quarter
 * of the array's size of it lies past the end: resident memory stays
 * within 2 MiB or 1/4 of malloc's.  (`ulpprof diff` of 10,000 captures:
 * 1,580 -> 1,235 page faults, 19.1 -> 21.9 MiB peak RSS.)
 */
#ifndef ULPPROF_COMMON_BIGALLOC_H
#define ULPPROF_COMMON_BIGALLOC_H

#include <stddef.h>

/*
 * `bytes` bytes, zeroed when `zero`, in huge pages where the array is
 * large enough for one (else from malloc); release with free().  NULL when
 * out of memory.
 */
void *ulp__big_alloc(size_t bytes, int zero);

#endif /* ULPPROF_COMMON_BIGALLOC_H */
