/* The (request, position) keys of a capture's rows (FORMAT.md, "Rows and
 * tokens"), for the writer that refuses and the reader that checks them. */
#ifndef ULPPROF_FORMAT_ROW_KEY_H
#define ULPPROF_FORMAT_ROW_KEY_H

#include <stdint.h>

/*
 * Whether a (request, position) pair appears twice among `rows` rows
 * (`requests` NULL: every request is 0): 1 with the smallest such pair in
 * *request and *position, 0 when none repeats, -1 out of memory.
 */
int ulp__row_key_repeat(const int64_t *requests, const int64_t *positions, uint64_t rows,
                        int64_t *request, int64_t *position);

#endif /* ULPPROF_FORMAT_ROW_KEY_H */
