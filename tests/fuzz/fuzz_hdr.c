/*
 * libFuzzer target: the object header reader of files without ulpprof's
 * index, ulp__hdr_parse() (format/snapshot_hdr.c), on arbitrary bytes and
 * without HDF5: the reader's byte source is the input itself.
 *
 * Input: a 25-byte prefix, then the file image.  Prefix: u8 flags (bit 0:
 * offsets of 8 bytes, else 4; bit 1: lengths of 8 bytes, else 4), u64 the
 * file offset of HDF5 address 0 (the user block), u64 the address of a
 * dataset's object header, u64 the address of a second one (all little
 * endian).  The seeds (corpus/hdr/, tests/fuzz/make_hdr_seeds.py) are
 * h5py-written files with the address of one of their captures.
 *
 * Checks beyond the sanitizers, on every input:
 * - an answer is 1, 0 or -2; anything but 1 gives no role and no token
 *   block (nothing kept);
 * - an accepted header: a known dtype; rank 0..8, extents >= 0, `elements`
 *   their product and at most 2^48; seq >= 0; kernels and gemms ranges
 *   ordered; the data's offset either absent or at or past the user block
 *   with elements x size bytes inside the file (and none for 0 elements);
 *   a role, when given, at most 4096 bytes and found in the file image (a
 *   fixed-length value, or a global heap object: both are file bytes);
 *   token attributes: row_rank 1..ndim and rows the product of the leading
 *   extents, positions >= 0, no (request, position) twice, the inputs
 *   strings each found in the file image, all inside the token block (and
 *   no block without them);
 * - the global heap collection f keeps between calls is whole: its index
 *   points inside its bytes;
 * - the same header read again (the collection now cached) and read with a
 *   fresh reader gives the same answer and the same fields: the cache does
 *   not change what is read.
 * Broken checks abort.  FUZZ_HDR_PRINT=1 prints each answer (which seeds
 * are accepted).
 */
#define _GNU_SOURCE /* memmem */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_hdr.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

#define PREFIX 25

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct image {
    const uint8_t *p;
    size_t n;
} image;

static int image_read(void *ctx, void *buf, size_t n, uint64_t off)
{
    const image *im = ctx;
    /* the reader must ask only for what lies inside the file it was told of */
    CHECK(off <= im->n && n <= im->n - off);
    memcpy(buf, im->p + off, n);
    return 0;
}

static uint64_t u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 8; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static void check_heap(const ulp__hdr_file *f)
{
    if (f->heap_at == NULL)
        return;
    CHECK(f->heap_bytes != NULL && f->heap_n > 0);
    for (size_t i = 0; i < f->heap_n; i++)
        CHECK(f->heap_at[i] == 0 || (uint64_t)f->heap_at[i] + 8 + f->sl <= f->heap_size);
}

typedef struct answer {
    int rc;
    ulp_capture_info c;
    uint64_t offset;
    char *role;
    void *tokens;
} answer;

/* The token attributes of an accepted header (see the top). */
static void check_tokens(const image *im, const answer *a)
{
    const ulp_capture_info *c = &a->c;
    if (c->positions == NULL && c->inputs == NULL) {
        CHECK(a->tokens == NULL && c->requests == NULL && c->rows == 0 && c->row_rank == 0 &&
              c->n_inputs == 0);
        return;
    }
    CHECK(a->tokens != NULL);
    CHECK(c->positions != NULL || (c->requests == NULL && c->rows == 0 && c->row_rank == 0));
    if (c->positions != NULL) {
        CHECK((void *)c->positions == a->tokens);
        CHECK(c->row_rank >= 1 && c->row_rank <= c->ndim);
        uint64_t rows = 1;
        for (int k = 0; k < c->row_rank; k++)
            rows *= (uint64_t)c->shape[k];
        CHECK(c->rows == rows);
        for (uint64_t i = 0; i < rows; i++) {
            CHECK(c->positions[i] >= 0);
            for (uint64_t j = i + 1; j < rows && j < i + 64; j++) /* nearby pairs: cheap */
                CHECK(c->positions[i] != c->positions[j] ||
                      (c->requests != NULL && c->requests[i] != c->requests[j]));
        }
        CHECK(c->requests == NULL || c->requests == c->positions + rows);
    }
    CHECK((c->inputs == NULL) == (c->n_inputs == 0 && c->inputs == NULL));
    for (size_t i = 0; c->inputs != NULL && i < c->n_inputs; i++) {
        size_t len = strlen(c->inputs[i]);
        CHECK(len <= 4096);
        CHECK(len == 0 || memmem(im->p, im->n, c->inputs[i], len) != NULL);
    }
}

static void parse(ulp__hdr_file *f, uint64_t addr, answer *a)
{
    memset(a, 0, sizeof *a);
    a->rc = ulp__hdr_parse(f, addr, &a->c, &a->offset, &a->role, &a->tokens);
    CHECK(a->rc == 1 || a->rc == 0 || a->rc == -2);
    check_heap(f);
    if (getenv("FUZZ_HDR_PRINT") != NULL) /* which seeds the reader accepts */
        fprintf(stderr,
                "header at %" PRIu64 ": %d dtype %d rank %d elements %" PRIu64 " seq %" PRId64
                " offset %" PRIu64 " role %s\n",
                addr, a->rc, (int)a->c.dtype, a->c.ndim, a->c.elements, a->c.seq, a->offset,
                a->role != NULL ? a->role : "(none)");
    if (a->rc != 1) {
        CHECK(a->role == NULL && a->tokens == NULL);
        return;
    }
    const image *im = f->src.ctx;
    const ulp_capture_info *c = &a->c;
    size_t esz = ulp_dtype_size(c->dtype);
    CHECK(c->dtype != ULP_DTYPE_INVALID && esz > 0 && esz <= 8);
    CHECK(c->ndim >= 0 && c->ndim <= ULP_SNAPSHOT_MAX_RANK);
    uint64_t n = 1;
    for (int k = 0; k < c->ndim; k++) {
        CHECK(c->shape[k] >= 0 && (uint64_t)c->shape[k] <= ULP__MAX_ELEMENTS);
        CHECK(n == 0 || (uint64_t)c->shape[k] <= ULP__MAX_ELEMENTS / n);
        n *= (uint64_t)c->shape[k];
    }
    CHECK(c->elements == n && n <= ULP__MAX_ELEMENTS);
    CHECK(c->seq >= 0);
    CHECK(!c->has_kernels || (c->kernels[0] >= 0 && c->kernels[0] <= c->kernels[1]));
    CHECK(!c->has_gemms || (c->gemms[0] >= 0 && c->gemms[0] <= c->gemms[1]));
    check_tokens(im, a);
    if (a->offset != ULP__NO_OFFSET) {
        CHECK(n > 0 && a->offset >= f->base && a->offset <= im->n);
        CHECK(n * esz <= im->n - a->offset);
    }
    if (a->role != NULL) {
        size_t len = strlen(a->role);
        CHECK(len <= 4096);
        CHECK(len == 0 || memmem(im->p, im->n, a->role, len) != NULL);
    }
}

static void same(const answer *x, const answer *y)
{
    CHECK(x->rc == y->rc);
    if (x->rc != 1)
        return;
    ulp_capture_info cx = x->c, cy = y->c; /* the token pointers differ: their values may not */
    CHECK(cx.rows == cy.rows && cx.row_rank == cy.row_rank && cx.n_inputs == cy.n_inputs);
    CHECK((cx.positions == NULL) == (cy.positions == NULL));
    CHECK((cx.requests == NULL) == (cy.requests == NULL));
    CHECK((cx.inputs == NULL) == (cy.inputs == NULL));
    CHECK(cx.positions == NULL ||
          memcmp(cx.positions, cy.positions, cx.rows * sizeof *cx.positions) == 0);
    CHECK(cx.requests == NULL ||
          memcmp(cx.requests, cy.requests, cx.rows * sizeof *cx.requests) == 0);
    for (size_t i = 0; cx.inputs != NULL && i < cx.n_inputs; i++)
        CHECK(strcmp(cx.inputs[i], cy.inputs[i]) == 0);
    cx.positions = cy.positions = NULL;
    cx.requests = cy.requests = NULL;
    cx.inputs = cy.inputs = NULL;
    CHECK(memcmp(&cx, &cy, sizeof cx) == 0 && x->offset == y->offset);
    CHECK((x->role == NULL) == (y->role == NULL));
    CHECK(x->role == NULL || strcmp(x->role, y->role) == 0);
}

static void reader(ulp__hdr_file *f, const uint8_t *data, image *im)
{
    memset(f, 0, sizeof *f);
    f->sa = (data[0] & 1) ? 8 : 4;
    f->sl = (data[0] & 2) ? 8 : 4;
    f->base = u64(data + 1);
    f->src = (ulp__hdr_src){.read = image_read, .ctx = im, .size = im->n};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX)
        return 0;
    image im = {data + PREFIX, size - PREFIX};
    uint64_t addr[2] = {u64(data + 9), u64(data + 17)};
    ulp__hdr_file f, fresh;
    reader(&f, data, &im);
    answer a[2], again, cold;
    parse(&f, addr[0], &a[0]);
    parse(&f, addr[1], &a[1]);
    parse(&f, addr[0], &again);
    if (a[0].rc != -2 && again.rc != -2)
        same(&a[0], &again);
    /* a[1] was read with a[0]'s collection cached; a fresh reader has none */
    reader(&fresh, data, &im);
    parse(&fresh, addr[1], &cold);
    if (a[1].rc != -2 && cold.rc != -2)
        same(&a[1], &cold);
    ulp__hdr_release(&f);
    ulp__hdr_release(&fresh);
    answer *all[] = {&a[0], &a[1], &again, &cold};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(all[i]->role);
        free(all[i]->tokens);
    }
    return 0;
}
