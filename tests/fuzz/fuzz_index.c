/*
 * libFuzzer target: the capture index's record codec (format/index.c).
 *
 * The input is a run of records, as /index/records holds them.  Each
 * record the decoder accepts must lie inside the input, take the size its
 * fields say, keep its arrays and strings inside itself, and come back
 * field for field after encoding it again.  The reader trusts nothing else
 * of a record before checking it against the file (format/snapshot_index.c).
 * Any broken promise aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/index.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether [p, p + n) lies in [lo, lo + len). */
static int inside(const void *p, size_t n, const unsigned char *lo, size_t len)
{
    const unsigned char *q = p;
    return q >= lo && q <= lo + len && n <= (size_t)(lo + len - q);
}

static void same(const ulp__index_entry *a, const ulp__index_entry *b)
{
    CHECK(a->flags == b->flags && a->seq == b->seq && a->occurrence == b->occurrence);
    CHECK(a->oaddr == b->oaddr && a->offset == b->offset && a->dtype == b->dtype);
    CHECK(a->ndim == b->ndim && a->layer == b->layer && a->row_rank == b->row_rank);
    CHECK(a->step == b->step && a->device_ptr == b->device_ptr && a->stream == b->stream);
    CHECK(a->time_ns == b->time_ns && a->rows == b->rows);
    CHECK(memcmp(a->kernels, b->kernels, sizeof a->kernels) == 0);
    CHECK(memcmp(a->gemms, b->gemms, sizeof a->gemms) == 0);
    CHECK(memcmp(a->graph_replay, b->graph_replay, sizeof a->graph_replay) == 0);
    CHECK(memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0);
    CHECK(a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len + 1) == 0);
    CHECK(a->role_len == b->role_len && memcmp(a->role, b->role, a->role_len + 1) == 0);
    CHECK(a->n_inputs == b->n_inputs && a->inputs_len == b->inputs_len);
    CHECK(memcmp(a->inputs, b->inputs, a->inputs_len) == 0);
    size_t arr = (size_t)a->rows * 8;
    CHECK((a->positions == NULL) == (b->positions == NULL));
    CHECK(a->positions == NULL || memcmp(a->positions, b->positions, arr) == 0);
    CHECK((a->requests == NULL) == (b->requests == NULL));
    CHECK(a->requests == NULL || memcmp(a->requests, b->requests, arr) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Records sit 8-byte aligned in the reader's buffer. */
    unsigned char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    for (size_t at = 0; at < size;) {
        ulp__index_entry e, again;
        size_t len = ulp__index_record_decode(buf + at, size - at, &e);
        if (len == 0)
            break;
        const unsigned char *rec = buf + at;
        CHECK(len % 8 == 0 && len >= ULP__INDEX_FIXED && len <= size - at);
        CHECK(ulp__index_record_size(&e) == len);
        CHECK(e.ndim >= 0 && e.ndim <= ULP_MAX_RANK);
        CHECK(inside(e.name, e.name_len + 1, rec, len) && e.name[e.name_len] == '\0');
        CHECK(inside(e.role, e.role_len + 1, rec, len) && e.role[e.role_len] == '\0');
        CHECK(inside(e.inputs, e.inputs_len, rec, len));
        CHECK(e.positions == NULL || inside(e.positions, (size_t)e.rows * 8, rec, len));
        CHECK(e.requests == NULL || inside(e.requests, (size_t)e.rows * 8, rec, len));
        unsigned char *re = malloc(len);
        if (re == NULL)
            break;
        ulp__index_record_encode(re, &e);
        CHECK(ulp__index_record_decode(re, len, &again) == len);
        same(&e, &again);
        free(re);
        at += len;
    }
    free(buf);
    return 0;
}
