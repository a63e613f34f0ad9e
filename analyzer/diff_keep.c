/*
 * The rows a result of ulp_diff_stream() keeps: those its fields point at
 * -- the first divergence, the amplification's first and last rows (the
 * last moves while the rows come), the logits rows -- while every other
 * row is released as soon as its batch went to the caller.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "diff_priv.h"

void ulp__diff_keep_init(ulp__diff_keep *k)
{
    memset(k, 0, sizeof *k);
}

static int named(size_t g, const size_t *refs, size_t nrefs)
{
    for (size_t q = 0; q < nrefs; q++)
        if (refs[q] == g)
            return 1;
    return 0;
}

/* Forgets what a row owns (moved or released): ulp__diff_row_release() of
 * it then frees nothing.  Cheaper than zeroing its 1.2 KiB. */
static void disown(ulp_diff_row *row)
{
    row->kernels_a = row->kernels_b = NULL;
    row->n_kernels_a = row->n_kernels_b = 0;
    row->keys = NULL;
    row->inputs = NULL;
    row->n_inputs = 0;
    row->hint = NULL;
    row->gemms_a = row->gemms_b = NULL;
}

/* Whether row g is a logits row: *at walks r->logits[lg0..], whose row
 * indices ascend, as g does from call to call. */
static int logits_row(const ulp_diff_result *r, size_t *at, size_t g)
{
    while (*at < r->n_logits && r->logits[*at].row_index < g)
        (*at)++;
    return *at < r->n_logits && r->logits[*at].row_index == g;
}

int ulp__diff_keep_batch(ulp__diff_keep *k, ulp_diff_result *r, size_t base, size_t lg0,
                         const size_t *refs, size_t nrefs)
{
    size_t want = 0, at = lg0;
    for (size_t i = 0; i < r->n_rows; i++)
        want += logits_row(r, &at, base + i) || named(base + i, refs, nrefs);
    size_t cap_index = k->cap, cap_logits = k->cap;
    if (want > 0 && (ULP__GROW(k->rows, k->cap, k->n + want) != 0 ||
                     ULP__GROW(k->index, cap_index, k->n + want) != 0 ||
                     ULP__GROW(k->logits, cap_logits, k->n + want) != 0))
        return -1;
    /* Rows kept before that nothing names any more: the amplification's last row moved on. */
    size_t n = 0;
    for (size_t q = 0; q < k->n; q++) {
        if (k->logits[q] || named(k->index[q], refs, nrefs)) {
            k->rows[n] = k->rows[q];
            k->index[n] = k->index[q];
            k->logits[n++] = k->logits[q];
        } else {
            ulp__diff_row_release(&k->rows[q]);
        }
    }
    k->n = n;
    at = lg0;
    for (size_t i = 0; i < r->n_rows; i++) {
        size_t g = base + i;
        int lg = logits_row(r, &at, g);
        if (lg || named(g, refs, nrefs)) {
            k->rows[k->n] = r->rows[i];
            k->index[k->n] = g;
            k->logits[k->n++] = (unsigned char)lg;
        } else {
            ulp__diff_row_release(&r->rows[i]);
        }
        disown(&r->rows[i]);
    }
    return 0;
}

void ulp__diff_keep_finish(ulp__diff_keep *k, ulp_diff_result *r, size_t total)
{
    for (size_t i = 0; i < r->n_rows; i++)
        ulp__diff_row_release(&r->rows[i]);
    free(r->rows);
    free(k->logits);
    r->rows = k->rows;
    r->kept_index = k->index;
    r->n_kept = k->n;
    r->n_rows = total;
    r->streamed = 1;
    memset(k, 0, sizeof *k);
}
