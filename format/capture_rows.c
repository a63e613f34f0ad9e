/*
 * Token metadata of a capture: check, copy, write (capture_rows.h).
 */
#include "capture_rows.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_name.h"
#include "row_key.h"

/* Rows of a descriptor with positions: the product of its leading extents. */
static uint64_t row_count(const ulp__desc *d)
{
    uint64_t rows = 1;
    for (int i = 0; i < d->row_rank; i++)
        rows *= (uint64_t)d->shape[i];
    return rows;
}

static int fits_i32(const int64_t *v, uint64_t n)
{
    for (uint64_t i = 0; v != NULL && i < n; i++)
        if (v[i] < INT32_MIN || v[i] > INT32_MAX)
            return 0;
    return 1;
}

static ulp_status check_inputs(const ulp__desc *d, char *why, size_t n)
{
    if (d->n_inputs < 0 || (d->n_inputs > 0 && d->inputs == NULL)) {
        snprintf(why, n, "capture '%.200s': %d inputs without names", d->name, (int)d->n_inputs);
        return ULP_EINVAL;
    }
    for (int32_t i = 0; i < d->n_inputs; i++) {
        if (d->inputs[i] == NULL || !ulp__capture_name_ok(d->inputs[i])) {
            snprintf(why, n, "capture '%.200s': input %d is not a valid capture name", d->name,
                     (int)i);
            return ULP_EINVAL;
        }
    }
    return ULP_OK;
}

ulp_status ulp__capture_rows_check(const ulp__desc *d, char *why, size_t n)
{
    if (check_inputs(d, why, n) != ULP_OK)
        return ULP_EINVAL;
    if (d->positions == NULL) {
        if (d->requests != NULL) {
            snprintf(why, n, "capture '%.200s': requests without positions", d->name);
            return ULP_EINVAL;
        }
        return ULP_OK;
    }
    if (d->row_rank < 1 || d->row_rank > d->ndim) {
        snprintf(why, n, "capture '%.200s': row_rank %d is not in 1..%d (the tensor's rank)",
                 d->name, (int)d->row_rank, d->ndim);
        return ULP_EINVAL;
    }
    uint64_t rows = row_count(d);
    int narrow = fits_i32(d->positions, rows) && fits_i32(d->requests, rows);
    if (rows > ULP__ROWS_MAX_I32 || (rows > ULP__ROWS_MAX_I64 && !narrow)) {
        snprintf(why, n,
                 "capture '%.200s': %" PRIu64 " rows are more than a positions attribute holds "
                 "(%d, or %d when every value fits in int32); capture the rows in slices",
                 d->name, rows, ULP__ROWS_MAX_I64, ULP__ROWS_MAX_I32);
        return ULP_EINVAL;
    }
    for (uint64_t i = 0; i < rows; i++) {
        if (d->positions[i] < 0) {
            snprintf(why, n,
                     "capture '%.200s': position %" PRId64 " of row %" PRIu64 " is negative",
                     d->name, d->positions[i], i);
            return ULP_EINVAL;
        }
    }
    int64_t request = 0, position = 0;
    int rc = ulp__row_key_repeat(d->requests, d->positions, rows, &request, &position);
    if (rc < 0) {
        snprintf(why, n, "capture '%.200s': out of memory checking positions", d->name);
        return ULP_EINVAL;
    }
    if (rc > 0) {
        snprintf(why, n,
                 "capture '%.200s': request %" PRId64 ", position %" PRId64 " appears twice",
                 d->name, request, position);
        return ULP_EINVAL;
    }
    return ULP_OK;
}

size_t ulp__capture_rows_size(const ulp__desc *d)
{
    size_t bytes = 0;
    if (d->positions != NULL) {
        size_t rows = (size_t)row_count(d);
        bytes += rows * sizeof(int64_t) * (d->requests != NULL ? 2 : 1);
    }
    if (d->n_inputs > 0) {
        bytes += (size_t)d->n_inputs * sizeof(char *);
        for (int32_t i = 0; i < d->n_inputs; i++)
            bytes += strlen(d->inputs[i]) + 1;
    }
    return bytes;
}

void ulp__capture_rows_copy(ulp__desc *dst, const ulp__desc *src, void *mem)
{
    char *p = mem;
    dst->positions = NULL;
    dst->requests = NULL;
    dst->inputs = NULL;
    if (src->positions != NULL) {
        size_t bytes = (size_t)row_count(src) * sizeof(int64_t);
        memcpy(p, src->positions, bytes);
        dst->positions = (const int64_t *)(void *)p;
        p += bytes;
        if (src->requests != NULL) {
            memcpy(p, src->requests, bytes);
            dst->requests = (const int64_t *)(void *)p;
            p += bytes;
        }
    }
    if (src->n_inputs > 0) {
        char **names = (char **)(void *)p;
        p += (size_t)src->n_inputs * sizeof(char *);
        for (int32_t i = 0; i < src->n_inputs; i++) {
            size_t len = strlen(src->inputs[i]) + 1;
            memcpy(p, src->inputs[i], len);
            names[i] = p;
            p += len;
        }
        dst->inputs = (const char *const *)names;
    }
}

/* An integer array attribute shaped like the rows; int32 when `narrow`. */
static int write_ints(hid_t ds, const char *name, const ulp__desc *d, const int64_t *v, int narrow)
{
    hsize_t dims[ULP_MAX_RANK];
    for (int i = 0; i < d->row_rank; i++)
        dims[i] = (hsize_t)d->shape[i];
    hid_t space = H5Screate_simple(d->row_rank, dims, NULL);
    if (space < 0)
        return -1;
    hid_t ftype = narrow ? H5T_STD_I32LE : H5T_STD_I64LE;
    hid_t a = H5Acreate2(ds, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, v) >= 0 ? 0 : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    return rc;
}

/* `inputs`: fixed-length UTF-8 strings (object header, as every string we write). */
static int write_inputs(hid_t ds, const ulp__desc *d)
{
    size_t width = 1;
    for (int32_t i = 0; i < d->n_inputs; i++)
        if (strlen(d->inputs[i]) + 1 > width)
            width = strlen(d->inputs[i]) + 1;
    char *buf = calloc((size_t)d->n_inputs, width);
    hsize_t n = (hsize_t)d->n_inputs;
    hid_t t = H5Tcopy(H5T_C_S1);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t a = -1;
    int rc = -1;
    if (buf != NULL && t >= 0 && space >= 0 && H5Tset_size(t, width) >= 0 &&
        H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0) {
        for (int32_t i = 0; i < d->n_inputs; i++)
            memcpy(buf + (size_t)i * width, d->inputs[i], strlen(d->inputs[i]));
        a = H5Acreate2(ds, "inputs", t, space, H5P_DEFAULT, H5P_DEFAULT);
        rc = a >= 0 && H5Awrite(a, t, buf) >= 0 ? 0 : -1;
    }
    if (a >= 0)
        H5Aclose(a);
    if (space >= 0)
        H5Sclose(space);
    if (t >= 0)
        H5Tclose(t);
    free(buf);
    return rc;
}

int ulp__capture_rows_write(hid_t ds, const ulp__desc *d)
{
    if (d->positions != NULL) {
        uint64_t rows = row_count(d);
        int narrow = rows > ULP__ROWS_MAX_I64;
        if (write_ints(ds, "positions", d, d->positions, narrow) < 0)
            return -1;
        if (d->requests != NULL && write_ints(ds, "requests", d, d->requests, narrow) < 0)
            return -1;
    }
    if (d->n_inputs > 0 && write_inputs(ds, d) < 0)
        return -1;
    return 0;
}
