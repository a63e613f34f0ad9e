/*
 * Introduced, carried in, or entered through something not captured: for
 * every differing key (request r, position p) of an aligned row, its
 * inputs (the names its captures list) are looked at on request r,
 * positions 0..p -- the residual path reads position p, attention reads
 * the earlier positions through the KV cache.
 *   - carried in: an input differs on one of those keys;
 *   - not captured: no input differs where compared, but an input was not
 *     compared on all of them (one side never captured them, e.g. the
 *     prefix a cache hit computed in an earlier request);
 *   - introduced: every input was compared on all of them and is identical;
 *   - unknown: the capture lists no inputs.
 * An input without positions counts as compared everywhere when its whole
 * tensors are identical, as differing when they differ.
 */
#include <string.h>

#include "diff_priv.h"

static const char *const origin_names[] = {
    [ULP_DIFF_ORIGIN_NONE] = NULL,
    [ULP_DIFF_ORIGIN_INTRODUCED] = "introduced",
    [ULP_DIFF_ORIGIN_CARRIED_IN] = "carried_in",
    [ULP_DIFF_ORIGIN_NOT_CAPTURED] = "not_captured",
    [ULP_DIFF_ORIGIN_UNKNOWN] = "unknown",
};

const char *ulp_diff_origin_name(ulp_diff_origin origin)
{
    if ((int)origin < 0 || (size_t)origin >= sizeof origin_names / sizeof origin_names[0])
        return NULL;
    return origin_names[origin];
}

/* The row named `name`, aligned ones first; NULL when none. */
static const ulp_diff_row *find_row(const ulp_diff_result *r, const char *name)
{
    const ulp_diff_row *plain = NULL;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (strcmp(r->rows[i].name, name) != 0)
            continue;
        if (r->rows[i].aligned)
            return &r->rows[i];
        if (plain == NULL)
            plain = &r->rows[i];
    }
    return plain;
}

/* First key index of `in` not before (req, pos). */
static size_t lower_bound(const ulp_diff_row *in, int64_t req, int64_t pos)
{
    size_t lo = 0, hi = in->n_keys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const ulp_diff_key *k = &in->keys[mid];
        if (k->request < req || (k->request == req && k->position < pos))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef enum verdict { SAME = 0, MISSING = 1, DIFFERS = 2 } verdict;

/*
 * What input row `in` says about key (req, pos): DIFFERS, MISSING (some
 * position 0..pos not compared; *miss_first, *miss_last the first gap) or
 * SAME.
 */
static verdict look(const ulp_diff_row *in, int64_t req, int64_t pos, int64_t *miss_first,
                    int64_t *miss_last)
{
    if (in == NULL) {
        *miss_first = 0;
        *miss_last = pos;
        return MISSING;
    }
    if (!in->aligned) {
        if (in->status == ULP_DIFF_DIFFERS)
            return DIFFERS;
        if (in->status == ULP_DIFF_IDENTICAL)
            return SAME;
        *miss_first = 0;
        *miss_last = pos;
        return MISSING;
    }
    size_t s = lower_bound(in, req, 0), e = lower_bound(in, req, pos + 1);
    for (size_t k = s; k < e; k++)
        if (in->keys[k].differs)
            return DIFFERS;
    if ((int64_t)(e - s) == pos + 1)
        return SAME;
    /* The first position of 0..pos the input lacks, and the run it starts. */
    int64_t want = 0;
    for (size_t k = s; k < e && in->keys[k].position == want; k++)
        want++;
    *miss_first = want;
    size_t k = s + (size_t)want;
    *miss_last = k < e ? in->keys[k].position - 1 : pos;
    return MISSING;
}

static void classify_row(const ulp_diff_result *r, ulp_diff_row *row)
{
    const ulp_diff_row *ins[64];
    size_t nin = row->n_inputs < 64 ? row->n_inputs : 64;
    for (size_t i = 0; i < nin; i++)
        ins[i] = find_row(r, row->inputs[i]);
    int first = 1;
    for (size_t k = 0; k < row->n_keys; k++) {
        ulp_diff_key *key = &row->keys[k];
        if (!key->differs)
            continue;
        verdict worst = SAME;
        int64_t mf = 0, ml = 0;
        for (size_t i = 0; i < nin && worst != DIFFERS; i++) {
            int64_t f = 0, l = 0;
            verdict v = look(ins[i], key->request, key->position, &f, &l);
            if (v > worst) {
                worst = v;
                key->origin_input = (int)i;
                mf = f;
                ml = l;
            }
        }
        key->origin = nin == 0           ? ULP_DIFF_ORIGIN_UNKNOWN
                      : worst == DIFFERS ? ULP_DIFF_ORIGIN_CARRIED_IN
                      : worst == MISSING ? ULP_DIFF_ORIGIN_NOT_CAPTURED
                                         : ULP_DIFF_ORIGIN_INTRODUCED;
        if (first) {
            row->origin = key->origin;
            if (key->origin == ULP_DIFF_ORIGIN_NOT_CAPTURED) {
                row->capture_next = row->inputs[key->origin_input];
                row->capture_request = key->request;
                row->capture_first = mf;
                row->capture_last = ml;
            }
            first = 0;
        }
    }
}

void ulp__origin_run(ulp_diff_result *r)
{
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].aligned && r->rows[i].positions_differing > 0)
            classify_row(r, &r->rows[i]);
}
