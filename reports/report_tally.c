/*
 * What the reports' sentences need of all the rows -- counts, the notes'
 * figures, the table's name width and details -- gathered row by row, so
 * that a report can be written from rows that come in batches
 * (report_stream.c) exactly as from a whole result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "report_priv.h"

void ulp__tally_init(ulp__tally *t)
{
    memset(t, 0, sizeof *t);
    t->name_width = 7; /* "capture" */
    for (int k = 0; k < 3; k++)
        t->lo[k] = UINT64_MAX;
}

void ulp__tally_release(ulp__tally *t)
{
    for (size_t i = 0; i < t->n_details; i++)
        free(t->details[i].name);
    free(t->details);
    free(t->positions_first);
    free(t->worst_sign_name);
    free(t->rounded_equal_name);
    free(t->rounded_fine_name);
    memset(t, 0, sizeof *t);
}

/* Paired by site: "site@layer A's name = B's name" (docs/sites.md). */
static size_t site_name(char *buf, size_t size, const ulp_diff_row *row)
{
    char site[64] = "";
    if (row->site != NULL && row->layer >= 0)
        snprintf(site, sizeof site, "%s@%d ", row->site, (int)row->layer);
    else if (row->site != NULL)
        snprintf(site, sizeof site, "%s ", row->site);
    char lay[200] = "";
    if (row->layout != NULL)
        snprintf(lay, sizeof lay, " [%s: %s]", row->layout_side ? "B" : "A", row->layout);
    int n;
    if (row->name_b != NULL && strcmp(row->name_b, row->name) != 0)
        n = snprintf(buf, size, "%s%s = %s%s", site, row->name, row->name_b, lay);
    else
        n = snprintf(buf, size, "%s%s", site, row->name);
    return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

size_t ulp__full_name(char *buf, size_t size, const ulp_diff_row *row)
{
    if (row->site != NULL || row->name_b != NULL)
        return site_name(buf, size, row);
    char occ[24];
    size_t len = strlen(row->name), k = 0;
    if (row->occurrence) {
        occ[0] = '#';
        k = 1 + ulp__fmt_i64(occ + 1, row->occurrence);
    }
    size_t n = len < size - 1 ? len : size - 1;
    memcpy(buf, row->name, n);
    size_t m = k < size - 1 - n ? k : size - 1 - n;
    memcpy(buf + n, occ, m);
    buf[n + m] = '\0';
    return n + m;
}

/* The table's details: NaN/inf mismatches row by row, sign changes row by
 * row while there are at most 4 rows with them (report_table.c). */
static void tally_details(ulp__tally *t, const ulp_diff_row *row)
{
    char full[ULP__FULL_NAME];
    uint64_t signs = row->m.sign_changes;
    if (signs != 0 && (t->n_sign++ == 0 || signs > t->worst_sign)) {
        t->worst_sign = signs;
        ulp__full_name(full, sizeof full, row);
        free(t->worst_sign_name);
        if ((t->worst_sign_name = strdup(full)) == NULL)
            t->oom = 1;
    }
    if (signs != 0 && t->n_sign == 5) {
        /* Past 4, the sign changes are one line: rows kept only for theirs go. */
        size_t n = 0;
        for (size_t i = 0; i < t->n_details; i++) {
            if (t->details[i].nonfinite != 0)
                t->details[n++] = t->details[i];
            else
                free(t->details[i].name);
        }
        t->n_details = n;
    }
    if (row->m.nonfinite_mismatch == 0 && (signs == 0 || t->n_sign > 4))
        return;
    if (ULP__GROW(t->details, t->cap_details, t->n_details + 1) != 0) {
        t->oom = 1;
        return;
    }
    ulp__full_name(full, sizeof full, row);
    ulp__detail *d = &t->details[t->n_details];
    if ((d->name = strdup(full)) == NULL) {
        t->oom = 1;
        return;
    }
    d->nonfinite = row->m.nonfinite_mismatch;
    d->signs = signs;
    t->n_details++;
}

/* A compared row of two dtypes: the least share that rounds equal, the largest fine |a - b|. */
static void tally_rounded(ulp__tally *t, const ulp_diff_row *row)
{
    char full[ULP__FULL_NAME];
    if (!row->rounded || row->status != ULP_DIFF_DIFFERS)
        return;
    ulp_dtype fine = row->rounded_side ? row->dtype_b : row->dtype_a;
    if (t->n_rounded++ == 0) {
        t->rounded_fine = fine;
        t->rounded_coarse = row->compared_dtype;
        t->rounded_side = row->rounded_side;
        t->rounded_equal_min = 2;
    } else if (fine != t->rounded_fine || row->compared_dtype != t->rounded_coarse ||
               row->rounded_side != t->rounded_side) {
        t->rounded_mixed = 1;
    }
    double eq = row->elements ? (double)row->rounded_equal / (double)row->elements : 1.0;
    if (eq < t->rounded_equal_min) {
        t->rounded_equal_min = eq;
        ulp__full_name(full, sizeof full, row);
        free(t->rounded_equal_name);
        if ((t->rounded_equal_name = strdup(full)) == NULL)
            t->oom = 1;
    }
    if (row->max_abs_diff_fine > t->rounded_fine_max) {
        t->rounded_fine_max = row->max_abs_diff_fine;
        ulp__full_name(full, sizeof full, row);
        free(t->rounded_fine_name);
        if ((t->rounded_fine_name = strdup(full)) == NULL)
            t->oom = 1;
    }
}

void ulp__tally_rows(ulp__tally *t, const ulp_diff_row *rows, size_t n)
{
    char occ[24];
    for (size_t i = 0; i < n; i++) {
        const ulp_diff_row *row = &rows[i];
        t->rows++;
        t->ndiff += row->status == ULP_DIFF_DIFFERS;
        t->nshape += row->status == ULP_DIFF_SHAPE_MISMATCH;
        t->ndtype += row->status == ULP_DIFF_DTYPE_MISMATCH;
        t->nident += row->status == ULP_DIFF_IDENTICAL;
        if (row->positions_in != NULL && t->positions_only++ == 0) {
            t->positions_side = row->positions_in;
            if ((t->positions_first = strdup(row->name)) == NULL)
                t->oom = 1;
        }
        t->sliced += row->sliced != 0;
        if (row->aligned) {
            uint64_t v[3] = {row->positions_compared, row->positions_only_in_a,
                             row->positions_only_in_b};
            for (int k = 0; k < 3; k++) {
                t->lo[k] = v[k] < t->lo[k] ? v[k] : t->lo[k];
                t->hi[k] = v[k] > t->hi[k] ? v[k] : t->hi[k];
            }
            t->aligned++;
        }
        size_t len = strlen(row->name);
        if (row->site != NULL || row->name_b != NULL) {
            char full[600];
            len = ulp__full_name(full, sizeof full, row);
        } else if (row->occurrence) {
            len += 1 + ulp__fmt_i64(occ, row->occurrence); /* "#occurrence" */
        }
        t->name_width = len > t->name_width ? len : t->name_width;
        tally_details(t, row);
        tally_rounded(t, row);
    }
}

ulp_status ulp__tally_result(ulp__tally *t, const ulp_diff_result *r)
{
    ulp__tally_init(t);
    ulp__tally_rows(t, r->rows, r->n_rows);
    if (t->oom) {
        ulp__tally_release(t);
        return ULP_ENOMEM;
    }
    return ULP_OK;
}
