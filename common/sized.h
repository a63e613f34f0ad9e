/*
 * Structs the caller fills and the library reads (the option and descriptor
 * structs of include/ulpprof): each starts with `size_t struct_size`, the
 * sizeof the caller was compiled with, so that a field appended in a later
 * release is read only from callers that know it.  Internal to ulpprof.
 */
#ifndef ULPPROF_COMMON_SIZED_H
#define ULPPROF_COMMON_SIZED_H

#include <stddef.h>

#include "ulpprof/status.h"

/*
 * What every *_init_sized() does.  `p` is the caller's struct of `size`
 * bytes (its sizeof), `defaults` the library's own (`full` bytes, as its
 * _init() fills it).  Zeroes the caller's bytes, copies the defaults of
 * the fields both know, and sets struct_size to `size`.  A NULL `p` or a
 * size below `min` (the first version's size) is refused: ULP_EINVAL and
 * one stderr line naming `what` (the struct's name).
 */
ulp_status ulp__sized_init(void *p, size_t size, const void *defaults, size_t full, size_t min,
                           const char *what);

/*
 * Reads the caller's struct `in` into the library's `out` (`full` bytes):
 * the defaults, then the first in->struct_size bytes of `in` over them, so
 * a field past the caller's size keeps its default; out->struct_size is
 * `full`.  Refused (ULP_EINVAL, one stderr line naming `what`, and `err`
 * when not NULL): a size of 0 or below `min`, and a size past `full` whose
 * extra bytes are not all zero (a field this library does not know, set).
 */
ulp_status ulp__sized_read(void *out, const void *defaults, size_t full, size_t min, const void *in,
                           const char *what, ulp_error *err);

/* The first version's size of a struct: up to and including `field`. */
#define ULP__SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

#endif /* ULPPROF_COMMON_SIZED_H */
