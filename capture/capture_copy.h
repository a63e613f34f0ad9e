/* The copy of a capture's bytes into staging memory.  Internal to the collector. */
#ifndef ULPPROF_CAPTURE_CAPTURE_COPY_H
#define ULPPROF_CAPTURE_CAPTURE_COPY_H

#include <stddef.h>

/*
 * Copies `n` bytes of a capture from the caller's `src` to the staging
 * block at `dst`, which nothing on this thread reads again: large copies
 * bypass the caches (capture_copy.c says when and why).  The bytes are
 * visible to the writer thread once the caller publishes the item.
 */
void ulp__capture_copy(void *dst, const void *src, size_t n);

#endif /* ULPPROF_CAPTURE_CAPTURE_COPY_H */
