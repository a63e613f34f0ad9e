/*
 * Reading a capture's token metadata (FORMAT.md, "Rows and tokens"):
 * `positions` and `requests` shaped like the capture's leading axes, and the
 * `inputs` it names.  Anything that would make the aligned comparison guess
 * -- a shape that is not a prefix of the capture's, a negative position, a
 * repeated (request, position) -- is refused here, with the capture named.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/row_key.h"
#include "snapshot_priv.h"

/* The rank of attribute `aname` if its extents are the leading extents of
 * the capture: 1..ndim; 0 when absent; -1 when they are not. */
static int leading_rank(hid_t d, const char *aname, const ulp_capture_info *c)
{
    if (H5Aexists(d, aname) <= 0)
        return 0;
    hid_t a = H5Aopen(d, aname, H5P_DEFAULT);
    hid_t space = a >= 0 ? H5Aget_space(a) : -1;
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[ULP_MAX_RANK];
    if (rank < 1 || rank > c->ndim || H5Sget_simple_extent_dims(space, dims, NULL) != rank)
        rank = -1;
    for (int i = 0; rank > 0 && i < rank; i++)
        if (dims[i] != (hsize_t)c->shape[i])
            rank = -1;
    if (space >= 0)
        H5Sclose(space);
    if (a >= 0)
        H5Aclose(a);
    return rank;
}

/* Reads one int64 array attribute of `rows` entries, kept by the snapshot. */
static ulp_status read_keys(ulp_snapshot *s, hid_t d, const char *aname, const char *name,
                            const char *occ, uint64_t rows, int64_t **out, ulp_error *err)
{
    const char *why = NULL;
    int64_t *v = malloc((rows ? rows : 1) * sizeof *v);
    if (v == NULL || ulp__snap_keep(s, (char *)v) == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (ulp__attr_read_i64_array(d, aname, v, (size_t)rows, &why) != 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute '%s' %s", aname,
                              why ? why : "is absent");
    *out = v;
    return ULP_OK;
}

ulp_status ulp__rows_check_keys(const ulp_snapshot *s, const ulp_capture_info *c, const char *name,
                                const char *occ, ulp_error *err)
{
    for (uint64_t i = 0; i < c->rows; i++)
        if (c->positions[i] < 0)
            return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                                  "position %" PRId64 " of row %" PRIu64 " is negative",
                                  c->positions[i], i);
    int64_t request = 0, position = 0;
    int rc = ulp__row_key_repeat(c->requests, c->positions, c->rows, &request, &position);
    if (rc < 0)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (rc > 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "request %" PRId64 ", position %" PRId64
                              " appears twice in 'positions'/'requests'",
                              request, position);
    return ULP_OK;
}

static ulp_status read_inputs(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                              ulp_capture_info *c, ulp_error *err)
{
    const char *why = NULL;
    char **v = NULL;
    size_t n = 0;
    int rc = ulp__attr_read_str_array(d, "inputs", &v, &n, &why);
    if (rc < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'inputs' %s", why);
    if (rc > 0)
        return ULP_OK;
    int oom = ulp__snap_keep(s, (char *)v) == NULL;
    for (size_t i = 0; i < n; i++)
        if (!oom && ulp__snap_keep(s, v[i]) == NULL)
            oom = 1;
    if (oom)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    c->inputs = (const char *const *)v;
    c->n_inputs = n;
    return ULP_OK;
}

ulp_status ulp__snapshot_read_rows(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                                   ulp_capture_info *c, ulp_error *err)
{
    c->row_rank = 0;
    c->rows = 0;
    c->positions = NULL;
    c->requests = NULL;
    c->inputs = NULL;
    c->n_inputs = 0;
    ulp_status st = read_inputs(s, d, name, occ, c, err);
    if (st != ULP_OK)
        return st;

    int prank = leading_rank(d, "positions", c);
    int rrank = leading_rank(d, "requests", c);
    if (prank < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "attribute 'positions' is not shaped like the leading axes of the "
                              "tensor");
    if (rrank < 0 || (rrank > 0 && rrank != prank))
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "attribute 'requests' is not shaped like 'positions'%s",
                              prank == 0 ? " (which is absent)" : "");
    if (prank == 0)
        return ULP_OK;
    c->row_rank = prank;
    c->rows = 1;
    for (int i = 0; i < prank; i++)
        c->rows *= (uint64_t)c->shape[i];
    int64_t *pos = NULL, *req = NULL;
    if ((st = read_keys(s, d, "positions", name, occ, c->rows, &pos, err)) != ULP_OK)
        return st;
    if (rrank > 0 && (st = read_keys(s, d, "requests", name, occ, c->rows, &req, err)) != ULP_OK)
        return st;
    c->positions = pos;
    c->requests = req;
    return ulp__rows_check_keys(s, c, name, occ, err);
}
