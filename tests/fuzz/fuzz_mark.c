/*
 * libFuzzer target: the `ulp1` NVTX mark parser (capture/cuda/cuda_mark.c).
 *
 * The input is one NVTX message (made NUL-terminated).  Besides what the
 * sanitizers see, the target checks the parser's promises and aborts when
 * one breaks: a capture it accepts has a valid name, dtype and role, rank
 * 0..8, non-negative extents whose product is `elements`, `nbytes` =
 * elements * dtype size, and a non-null pointer when it has bytes; a refusal
 * comes with a one-line message; a message without the prefix is not ours.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/cuda/cuda_mark.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *msg = malloc(size + 1);
    if (msg == NULL)
        return 0;
    memcpy(msg, data, size);
    msg[size] = '\0';

    ulp__mark m;
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ulp__mark_parse(msg, &m, &err);
    int ours = strncmp(msg, ULP__MARK_PREFIX, strlen(ULP__MARK_PREFIX)) == 0;

    if (st != ULP_OK) {
        CHECK(st == ULP_EINVAL && err.status == st);
        size_t len = strnlen(err.msg, sizeof err.msg);
        CHECK(len > 0 && len < sizeof err.msg);
        CHECK(strchr(err.msg, '\n') == NULL || ours); /* details quote the mark */
    } else if (!ours) {
        CHECK(m.kind == ULP__MARK_NOT_OURS);
    } else if (m.kind == ULP__MARK_CAPTURE) {
        size_t nlen = strnlen(m.name, sizeof m.name);
        CHECK(nlen > 0 && nlen < sizeof m.name);
        CHECK(strchr(m.name, '/') == NULL);
        CHECK(ulp_dtype_size(m.dtype) > 0);
        CHECK(m.ndim >= 0 && m.ndim <= ULP_MAX_RANK);
        CHECK(ulp_role_name(m.role) != NULL);
        uint64_t n = 1;
        int overflow = 0;
        for (int i = 0; i < m.ndim; i++) {
            CHECK(m.shape[i] >= 0);
            if (__builtin_mul_overflow(n, (uint64_t)m.shape[i], &n))
                overflow = 1;
        }
        /* A zero extent makes the product 0 even when the others overflow. */
        CHECK(m.elements == (overflow && m.elements == 0 ? 0 : n));
        CHECK(m.nbytes == m.elements * ulp_dtype_size(m.dtype));
        CHECK(m.nbytes == 0 || m.ptr != 0);
        CHECK(m.layer >= ULP_LAYER_NONE);
    } else {
        CHECK(m.kind == ULP__MARK_STEP && m.step != ULP_STEP_NONE);
    }
    free(msg);
    return 0;
}
