/*
 * The capture journal's kept-capture record (FORMAT.md "Capture journal",
 * kind 3): a capture that digest mode keeps in full in /digests (the
 * produced tokens, the fed token ids), written whole into the journal when
 * the writer accepts it, so that a killed writer's file keeps it whatever
 * a later flush did to /digests.
 *
 * The record is a journal record (format/journal.h) whose fixed fields are
 * seq = kept_seq, occurrence = kept_occurrence, addr = time_ns (as u64),
 * and whose name field (its length in the name-length field, so that a
 * reader that does not know kind 3 steps over it) is this payload:
 *   varint  id: the name's number, 0, 1, ... in the order first defined
 *   u8      flags: 1 defines the name (below follows), 2 has_step,
 *           4 has_positions, 8 has_requests, 16 device fields follow
 *   defines: varint name length, name; u8 dtype (ulp_dtype); u8 role
 *           (ulp_role); u8 has_layer, then zigzag layer when 1; varint
 *           input count, each varint length and bytes.  What a name's
 *           later records refer to, by id, until the id is defined again
 *   u8 ndim, u8 row_rank (as the occurrence table's), ndim varint axes
 *   has_step: zigzag step
 *   has_positions: the rows' positions (rows = the product of the first
 *           row_rank axes): zigzag p[0], then zigzag p[i] - p[i-1] - 1
 *   has_requests: zigzag r[0], then zigzag r[i] - r[i-1]
 *   device: u8 has_kernels | has_gemms << 1 | has_graph_replay << 2, the
 *           pairs present as zigzag varints, varint device_ptr, varint stream
 *   the rest: the capture's bytes as stored (rows x row width x dtype size)
 * Varints are LEB128 (7 bits a byte, low first, at most 10 bytes); zigzag
 * maps n to 2n (n >= 0) or -2n-1.  A payload that does not parse to its end
 * exactly is not a record this writer wrote.
 */
#ifndef ULPPROF_FORMAT_JOURNAL_KEPT_H
#define ULPPROF_FORMAT_JOURNAL_KEPT_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/dtype.h"
#include "ulpprof/format.h"

enum {
    ULP__JKEPT_DEFINES = 1,
    ULP__JKEPT_STEP = 2,
    ULP__JKEPT_POSITIONS = 4,
    ULP__JKEPT_REQUESTS = 8,
    ULP__JKEPT_DEVICE = 16
};

/* One kept capture's payload, decoded; pointers point into the payload. */
typedef struct ulp__journal_kept {
    uint32_t id;
    unsigned flags; /* ULP__JKEPT_* */
    /* ULP__JKEPT_DEFINES: the name and its unchanging fields. */
    const char *name;
    size_t name_len;
    unsigned dtype, role;
    int has_layer;
    int32_t layer;
    uint32_t n_inputs;
    const unsigned char *inputs; /* n_inputs of (varint length, bytes) */
    size_t inputs_bytes;
    /* Every record. */
    int ndim, row_rank;
    int64_t shape[ULP_MAX_RANK];
    int64_t step;
    uint64_t rows; /* the product of the first row_rank axes */
    const unsigned char *pos_code, *req_code;
    size_t pos_bytes, req_bytes;
    uint8_t has_kernels, has_gemms, has_graph_replay;
    int64_t kernels[2], gemms[2], graph_replay[2];
    uint64_t device_ptr, stream;
    const unsigned char *data;
    size_t data_bytes;
} ulp__journal_kept;

/*
 * The most bytes the payload of `k` (its flags, definition fields, ndim,
 * shape and data_bytes set) takes with `inputs`' k->n_inputs strings; 0 if
 * that overflows.
 */
size_t ulp__journal_kept_bound(const ulp__journal_kept *k, const char *const *inputs);

/*
 * Encodes `k` (k->inputs, k->pos_code, k->req_code unused) with its rows'
 * `positions` and `requests` (k->rows each, when its flags say so) and the
 * definition's `inputs` into `out` (ulp__journal_kept_bound() bytes); returns
 * the payload's length.
 */
size_t ulp__journal_kept_encode(unsigned char *out, const ulp__journal_kept *k,
                                const int64_t *positions, const int64_t *requests,
                                const char *const *inputs);

/*
 * Decodes the payload at `p` (`n` bytes) into *k: 0, or -1 when it is not
 * one this writer wrote (short, absurd ranks or counts, trailing bytes not
 * its data).  Every length is bounded by `n`.
 */
int ulp__journal_kept_decode(const unsigned char *p, size_t n, ulp__journal_kept *k);

/* The k->rows positions and requests of a decoded record (either may be NULL). */
void ulp__journal_kept_rows(const ulp__journal_kept *k, int64_t *positions, int64_t *requests);

/*
 * The next input name of a definition: from *cur (start at k->inputs) up to
 * `end` (k->inputs + k->inputs_bytes); sets *s, *len and moves *cur.  0, or
 * -1 past the end (decode checked them: never for the n_inputs first).
 */
int ulp__journal_kept_input(const unsigned char **cur, const unsigned char *end, const char **s,
                            size_t *len);

#endif /* ULPPROF_FORMAT_JOURNAL_KEPT_H */
