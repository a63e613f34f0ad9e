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
 *   - unknown: the capture lists no inputs (its own name, when listed,
 *     does not count).
 * An input without positions counts as compared everywhere when its whole
 * tensors are identical, as differing when they differ.
 */
#include <stddef.h>
#include <stdlib.h>
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

/* The row named `name`, aligned ones first; -1 when none. */
static ptrdiff_t find_row(const ulp_diff_result *r, const char *name)
{
    ptrdiff_t plain = -1;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (strcmp(r->rows[i].name, name) != 0)
            continue;
        if (r->rows[i].aligned)
            return (ptrdiff_t)i;
        if (plain < 0)
            plain = (ptrdiff_t)i;
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

/* An input as the classification sees it. */
typedef struct input {
    const ulp_diff_row *row; /* NULL: never captured                          */
    const uint64_t *cum;     /* aligned: cum[k] differing keys in keys[0..k)  */
} input;

/*
 * What an input says about key (req, pos): DIFFERS, MISSING (some position
 * 0..pos not compared) or SAME.  Two binary searches per key, so that a row
 * of K keys costs K log K, not K^2.
 */
static verdict look(const input *in, int64_t req, int64_t pos)
{
    if (in->row == NULL)
        return MISSING;
    if (!in->row->aligned)
        return in->row->status == ULP_DIFF_DIFFERS     ? DIFFERS
               : in->row->status == ULP_DIFF_IDENTICAL ? SAME
                                                       : MISSING;
    if (in->cum == NULL)
        return MISSING;
    size_t s = lower_bound(in->row, req, 0), e = lower_bound(in->row, req, pos + 1);
    if (in->cum[e] != in->cum[s])
        return DIFFERS;
    return (int64_t)(e - s) == pos + 1 ? SAME : MISSING;
}

/* The first run of positions 0..pos of request req that the input lacks. */
static void first_gap(const input *in, int64_t req, int64_t pos, int64_t *first, int64_t *last)
{
    *first = 0;
    *last = pos;
    if (in->row == NULL || !in->row->aligned)
        return;
    size_t s = lower_bound(in->row, req, 0), e = lower_bound(in->row, req, pos + 1);
    int64_t want = 0;
    size_t k = s;
    while (k < e && in->row->keys[k].position == want) {
        want++;
        k++;
    }
    *first = want;
    *last = k < e ? in->row->keys[k].position - 1 : pos;
}

static void classify_row(const ulp_diff_result *r, uint64_t *const *cums, ulp_diff_row *row)
{
    input ins[64];
    int at[64]; /* ins[j] is row->inputs[at[j]] */
    size_t nin = 0;
    /* A capture that lists itself among its inputs (a damaged or careless
     * writer) is not where its own difference came from: that input is
     * passed over, and one listing only itself lists none. */
    for (size_t i = 0; i < row->n_inputs && nin < 64; i++) {
        if (strcmp(row->inputs[i], row->name) == 0)
            continue;
        ptrdiff_t k = find_row(r, row->inputs[i]);
        ins[nin].row = k >= 0 ? &r->rows[k] : NULL;
        ins[nin].cum = k >= 0 ? cums[k] : NULL;
        at[nin++] = (int)i;
    }
    int first = 1;
    for (size_t k = 0; k < row->n_keys; k++) {
        ulp_diff_key *key = &row->keys[k];
        if (!key->differs)
            continue;
        verdict worst = SAME;
        size_t worst_j = 0;
        for (size_t i = 0; i < nin && worst != DIFFERS; i++) {
            verdict v = look(&ins[i], key->request, key->position);
            if (v > worst) {
                worst = v;
                worst_j = i;
                key->origin_input = at[i];
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
                first_gap(&ins[worst_j], key->request, key->position, &row->capture_first,
                          &row->capture_last);
            }
            first = 0;
        }
    }
}

void ulp__origin_run(ulp_diff_result *r)
{
    /* Per aligned row: cumulative counts of its differing keys. */
    uint64_t **cums = calloc(r->n_rows + 1, sizeof *cums);
    if (cums == NULL)
        return; /* the origins stay "none": nothing is claimed */
    for (size_t i = 0; i < r->n_rows; i++) {
        const ulp_diff_row *row = &r->rows[i];
        if (!row->aligned || (cums[i] = malloc((row->n_keys + 1) * sizeof **cums)) == NULL)
            continue;
        cums[i][0] = 0;
        for (size_t k = 0; k < row->n_keys; k++)
            cums[i][k + 1] = cums[i][k] + (row->keys[k].differs != 0);
    }
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].aligned && r->rows[i].positions_differing > 0)
            classify_row(r, cums, &r->rows[i]);
    for (size_t i = 0; i < r->n_rows; i++)
        free(cums[i]);
    free(cums);
}
