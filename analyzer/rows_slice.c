/*
 * `--rows`: compare a slice of the token axis of captures without
 * positions (head:N, tail:N, A:B), and the hint a shape mismatch gets when
 * the two shapes differ on one axis only.  The token axis is the
 * next-to-last one ([T, H], [B, T, H], [B, heads, T, d]) or the only one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

static int parse_i64(const char *s, const char *end, int64_t *out)
{
    if (s == end || *s == '-' || *s == '+')
        return -1;
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    if (errno || stop != end)
        return -1;
    *out = v;
    return 0;
}

ulp_status ulp__rows_parse(const char *spec, ulp__rows_spec *out, ulp_error *err)
{
    memset(out, 0, sizeof *out);
    if (spec == NULL)
        return ULP_OK;
    const char *end = spec + strlen(spec);
    const char *colon = strchr(spec, ':');
    int64_t x, y;
    if (colon != NULL && strncmp(spec, "head:", 5) == 0 && parse_i64(spec + 5, end, &x) == 0) {
        out->mode = 1;
        out->n = x;
    } else if (colon != NULL && strncmp(spec, "tail:", 5) == 0 &&
               parse_i64(spec + 5, end, &x) == 0) {
        out->mode = 2;
        out->n = x;
    } else if (colon != NULL && parse_i64(spec, colon, &x) == 0 &&
               parse_i64(colon + 1, end, &y) == 0 && y >= x) {
        out->mode = 3;
        out->first = x;
        out->n = y - x;
    } else {
        return ulp__error(err, ULP_EINVAL,
                          "--rows '%s' is not head:N, tail:N or A:B (0 <= A <= B, rows [A, B))",
                          spec);
    }
    if (out->n == 0)
        return ulp__error(err, ULP_EINVAL, "--rows '%s' selects no row", spec);
    return ULP_OK;
}

int ulp__token_axis(int ndim)
{
    return ndim >= 2 ? ndim - 2 : ndim - 1;
}

/* The one axis on which two shapes of one rank differ; -1 when none or several. */
static int differing_axis(const ulp_capture_info *ca, const ulp_capture_info *cb)
{
    if (ca->ndim != cb->ndim)
        return -1;
    int axis = -1;
    for (int k = 0; k < ca->ndim; k++) {
        if (ca->shape[k] != cb->shape[k]) {
            if (axis >= 0)
                return -1;
            axis = k;
        }
    }
    return axis;
}

char *ulp__rows_hint(const ulp_capture_info *ca, const ulp_capture_info *cb)
{
    int axis = differing_axis(ca, cb);
    if (axis < 0)
        return NULL;
    char buf[400];
    int64_t ta = ca->shape[axis], tb = cb->shape[axis];
    int64_t n = ta < tb ? ta : tb;
    if (axis == ulp__token_axis(ca->ndim))
        snprintf(buf, sizeof buf,
                 "the shapes differ only on the token axis (axis %d: %" PRId64 " vs %" PRId64
                 " rows): --rows tail:%" PRId64 " compares the last %" PRId64
                 " rows of each, --rows head:%" PRId64
                 " the first; capture positions to compare the same tokens",
                 axis, ta, tb, n, n, n);
    else
        snprintf(buf, sizeof buf,
                 "the shapes differ only on axis %d (%" PRId64 " vs %" PRId64
                 ", a batch?): capture positions and requests so that the same request's "
                 "rows are compared",
                 axis, ta, tb);
    return strdup(buf);
}

int ulp__rows_slice(const ulp__rows_spec *spec, const ulp_capture_info *ca, size_t ia,
                    const ulp_capture_info *cb, size_t ib, ulp_diff_row *row, ulp__segs *segs)
{
    int t = ulp__token_axis(ca->ndim);
    if (t < 0 || ca->ndim != cb->ndim)
        return 0;
    for (int k = 0; k < ca->ndim; k++) {
        if (k != t && ca->shape[k] != cb->shape[k]) {
            row->status = ULP_DIFF_SHAPE_MISMATCH;
            row->hint = ulp__rows_hint(ca, cb);
            return -1;
        }
    }
    int64_t ta = ca->shape[t], tb = cb->shape[t], n = spec->n;
    int64_t sa = spec->first, sb = spec->first;
    if (spec->mode == 2) {
        sa = ta - n;
        sb = tb - n;
    }
    if (sa < 0 || sb < 0 || sa + n > ta || sb + n > tb) {
        char buf[300];
        snprintf(buf, sizeof buf,
                 "--rows selects rows [%" PRId64 ", %" PRId64 ") but A has %" PRId64
                 " and B %" PRId64 " rows on axis %d",
                 sa < sb ? sa : sb, (sa < sb ? sa : sb) + n, ta, tb, t);
        row->status = ULP_DIFF_SHAPE_MISMATCH;
        row->hint = strdup(buf);
        return -1;
    }
    uint64_t outer = 1, inner = 1;
    for (int k = 0; k < t; k++)
        outer *= (uint64_t)ca->shape[k];
    for (int k = t + 1; k < ca->ndim; k++)
        inner *= (uint64_t)ca->shape[k];
    for (uint64_t o = 0; o < outer && inner > 0; o++) {
        ulp__segment seg = {ia,
                            ib,
                            (o * (uint64_t)ta + (uint64_t)sa) * inner,
                            (o * (uint64_t)tb + (uint64_t)sb) * inner,
                            (uint64_t)n * inner,
                            o * (uint64_t)n * inner};
        if (ulp__segs_push(segs, &seg) < 0)
            return -2;
    }
    row->sliced = 1;
    row->token_axis = t;
    row->slice_first_a = sa;
    row->slice_first_b = sb;
    row->slice_rows = n;
    row->shape_a[t] = row->shape_b[t] = n;
    row->elements = outer * (uint64_t)n * inner;
    return 1;
}
