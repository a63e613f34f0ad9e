/* The rule of a capture descriptor.  Internal to the collector. */
#ifndef ULPPROF_FORMAT_CAPTURE_CHECK_H
#define ULPPROF_FORMAT_CAPTURE_CHECK_H

#include <stddef.h>

#include "capture_desc.h"
#include "ulpprof/capture.h"

/*
 * Checks a descriptor (name, dtype, rank, shape, role, kernel range, token
 * fields) and computes its byte size in *nbytes.  On error fills `why` (one
 * line, naming the capture) and returns ULP_EINVAL.
 */
ulp_status ulp__capture_check(const ulp__desc *d, size_t *nbytes, char *why, size_t n);

#endif /* ULPPROF_FORMAT_CAPTURE_CHECK_H */
