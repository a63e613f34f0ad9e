/*
 * Which captures every capture mode keeps in full (FORMAT.md "Digests"):
 * the produced tokens and the fed token ids, a few bytes a position, by
 * which the diff of digest-only runs, or of a selective re-capture, finds
 * where two token streams part.  Not installed.
 */
#ifndef ULPPROF_FORMAT_CAPTURE_KEPT_H
#define ULPPROF_FORMAT_CAPTURE_KEPT_H

#include "capture_desc.h"

/* The produced tokens (named `tokens`), or fed token ids: role input, an
 * integer dtype, positions, one element a row. */
int ulp__desc_kept_in_full(const ulp__desc *d);

#endif /* ULPPROF_FORMAT_CAPTURE_KEPT_H */
