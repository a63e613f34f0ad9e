/*
 * Words for aligned rows (FORMAT.md, "Aligned diff"): the differing keys
 * as runs ("request 2, positions 88-95"), where a run came from
 * (introduced, carried in from an input, entered through something not
 * captured), and the shortest digits that tell two values apart.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_priv.h"

int ulp__next_run(const ulp_diff_row *row, size_t *k, ulp__key_run *run)
{
    size_t i = *k;
    while (i < row->n_keys && !row->keys[i].differs)
        i++;
    if (i >= row->n_keys) {
        *k = i;
        return 0;
    }
    const ulp_diff_key *s = &row->keys[i];
    run->request = s->request;
    run->first = run->last = s->position;
    run->origin = s->origin;
    run->input = s->origin_input;
    run->k0 = i;
    size_t j = i + 1;
    while (j < row->n_keys) {
        const ulp_diff_key *x = &row->keys[j];
        if (!x->differs || x->request != run->request || x->position != run->last + 1 ||
            x->origin != run->origin || x->origin_input != run->input)
            break;
        run->last = x->position;
        j++;
    }
    run->k1 = j;
    *k = j;
    return 1;
}

void ulp__fmt_run(char *buf, size_t n, const ulp_diff_row *row, const ulp__key_run *run)
{
    int many_requests =
        row->n_keys > 0 && row->keys[0].request != row->keys[row->n_keys - 1].request;
    char req[64] = "";
    if (many_requests || run->request != 0)
        snprintf(req, sizeof req, "request %" PRId64 ", ", run->request);
    if (run->first == run->last)
        snprintf(buf, n, "%sposition %" PRId64, req, run->first);
    else
        snprintf(buf, n, "%spositions %" PRId64 "-%" PRId64, req, run->first, run->last);
}

/* Appends one run to a list: "positions 3-5", then ", 9-12", a new request restating it. */
static size_t append_run(char *buf, size_t n, size_t w, const ulp_diff_row *row,
                         const ulp__key_run *run, const ulp__key_run *prev)
{
    if (w >= n)
        return w;
    if (prev != NULL && prev->request == run->request) {
        if (run->first == run->last)
            return w + (size_t)snprintf(buf + w, n - w, ", %" PRId64, run->first);
        return w +
               (size_t)snprintf(buf + w, n - w, ", %" PRId64 "-%" PRId64, run->first, run->last);
    }
    char one[96];
    ulp__fmt_run(one, sizeof one, row, run);
    return w + (size_t)snprintf(buf + w, n - w, "%s%s", prev != NULL ? "; " : "", one);
}

int ulp__fmt_runs(char *buf, size_t n, const ulp_diff_row *row, size_t *k, int same_origin,
                  size_t max, ulp__key_run *first)
{
    ulp__key_run run, prev = {0};
    size_t w = 0, shown = 0, more = 0, at = *k;
    buf[0] = '\0';
    while (ulp__next_run(row, &at, &run)) {
        if (shown > 0 && same_origin &&
            (run.origin != first->origin || run.input != first->input)) {
            at = run.k0; /* the next group starts here */
            break;
        }
        if (shown == 0)
            *first = run;
        if (shown < max)
            w = append_run(buf, n, w, row, &run, shown ? &prev : NULL);
        else
            more++;
        shown++;
        prev = run;
        *k = at;
    }
    if (shown > 0 && !same_origin)
        *k = at;
    if (shown > 0 && same_origin)
        first->k1 = prev.k1; /* the group's keys, for the words on where they came from */
    if (more && w < n)
        snprintf(buf + w, n - w, " and %zu more run%s", more, more > 1 ? "s" : "");
    return shown > 0;
}

/* "occurrence 0" or "occurrences 0, 3" of the keys [k0, k1) on one side. */
static void fmt_occurrences(char *buf, size_t n, const ulp_diff_row *row, size_t k0, size_t k1,
                            int side_b)
{
    int64_t seen[4];
    int ns = 0, more = 0;
    for (size_t k = k0; k < k1; k++) {
        int64_t o = side_b ? row->keys[k].occurrence_b : row->keys[k].occurrence_a;
        int dup = 0;
        for (int q = 0; q < ns; q++)
            dup |= seen[q] == o;
        if (dup)
            continue;
        if (ns < 4)
            seen[ns++] = o;
        else
            more = 1;
    }
    size_t w = (size_t)snprintf(buf, n, "occurrence%s ", ns > 1 ? "s" : "");
    for (int q = 0; q < ns && w < n; q++) {
        /* The positions that pass computed (of the keys both runs have). */
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t k = 0; k < row->n_keys; k++) {
            const ulp_diff_key *key = &row->keys[k];
            if ((side_b ? key->occurrence_b : key->occurrence_a) != seen[q] ||
                key->request != row->keys[k0].request)
                continue;
            lo = key->position < lo ? key->position : lo;
            hi = key->position > hi ? key->position : hi;
        }
        w += (size_t)snprintf(buf + w, n - w, "%s%" PRId64 " (positions %" PRId64 "-%" PRId64 ")",
                              q ? ", " : "", seen[q], lo, hi);
    }
    if (more && w < n)
        snprintf(buf + w, n - w, ", ...");
}

void ulp__fmt_origin(char *buf, size_t n, const ulp_diff_row *row, const ulp__key_run *run)
{
    const char *in =
        run->input >= 0 && (size_t)run->input < row->n_inputs ? row->inputs[run->input] : "?";
    char oa[200], ob[200];
    fmt_occurrences(oa, sizeof oa, row, run->k0, run->k1, 0);
    fmt_occurrences(ob, sizeof ob, row, run->k0, run->k1, 1);
    switch (run->origin) {
    case ULP_DIFF_ORIGIN_INTRODUCED:
        snprintf(buf, n,
                 "introduced here: every captured input is identical on the positions these "
                 "depend on (A computed them in %s, B in %s)",
                 oa, ob);
        break;
    case ULP_DIFF_ORIGIN_CARRIED_IN:
        snprintf(buf, n, "carried in: input '%s' already differs at or before these positions", in);
        break;
    case ULP_DIFF_ORIGIN_NOT_CAPTURED:
        snprintf(buf, n,
                 "entered through something not captured: input '%s' was not compared on every "
                 "earlier position of the request (e.g. a cached prefix one run computed in an "
                 "earlier pass)",
                 in);
        break;
    case ULP_DIFF_ORIGIN_UNKNOWN:
        snprintf(buf, n,
                 "origin unknown: the capture lists no inputs (A computed these rows in %s, B "
                 "in %s)",
                 oa, ob);
        break;
    default:
        snprintf(buf, n, "identical");
        break;
    }
}

/* Whether printing `v` with `p` significant digits reads back as the same `bits` of `dt`. */
static int reads_back(const char *s, ulp_dtype dt, uint64_t bits, double v)
{
    double d = strtod(s, NULL);
    switch (dt) {
    case ULP_DTYPE_F64:
        return d == v;
    case ULP_DTYPE_F32:
        return (float)d == (float)v;
    case ULP_DTYPE_BF16:
        return ulp_f32_to_bf16((float)d) == (uint16_t)bits;
    case ULP_DTYPE_F16:
        return ulp_f32_to_f16((float)d) == (uint16_t)bits;
    case ULP_DTYPE_F8E4M3:
        return ulp_f32_to_f8e4m3((float)d) == (uint8_t)bits;
    case ULP_DTYPE_F8E5M2:
        return ulp_f32_to_f8e5m2((float)d) == (uint8_t)bits;
    default:
        return d == v;
    }
}

void ulp__fmt_value(char *buf, size_t n, ulp_dtype dt, uint64_t bits, double v)
{
    if (!isfinite(v) || v == 0) {
        ulp__fmt_num(buf, n, v);
        if (v == 0 && signbit(v))
            snprintf(buf, n, "-0");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (reads_back(buf, dt, bits, v))
            return;
    }
}
