/*
 * The CSV report (RFC 4180): one header line, then one line per row with
 * the JSON row keys.  Numbers keep full precision (%.17g); empty fields
 * where a value does not apply (layer absent, not compared).  New columns
 * go at the end: consumers index them.
 *
 * The rows are written into a buffer without printf (ulp__fmt_g17() for
 * the reals): fprintf of each field made CSV the slowest report, ten times
 * the table.  The bytes are fprintf's: tests/unit/test_report_csv_rows.c
 * holds them against the fprintf writer this replaced.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report_json_out.h"
#include "report_priv.h"
#include "ulpprof/sites.h"

/* The buffer of report_json_out.h, used for its bytes only. */
#define put(w, s) ulp__jw_raw((w), (s), sizeof(s) - 1)

static void put_str(ulp__jw *w, const char *s, size_t n)
{
    ulp__jw_raw(w, s, n);
}

static void put_u64(ulp__jw *w, uint64_t v)
{
    char t[24];
    put_str(w, t, ulp__fmt_u64(t, v));
}

static void put_i64(ulp__jw *w, int64_t v)
{
    char t[24];
    put_str(w, t, ulp__fmt_i64(t, v));
}

static void csv_str(ulp__jw *w, const char *s)
{
    /* A cell that starts with = + - @ (or a tab or CR) is a formula to a
     * spreadsheet: a leading ' makes it text (OWASP's advice). */
    if (strchr("=+-@\t\r", s[0]) != NULL && s[0] != '\0')
        put(w, "'");
    if (strpbrk(s, ",\"\r\n") == NULL) {
        put_str(w, s, strlen(s));
        return;
    }
    put(w, "\"");
    for (const char *q; (q = strchr(s, '"')) != NULL; s = q + 1) {
        put_str(w, s, (size_t)(q - s) + 1);
        put(w, "\""); /* each quote doubled */
    }
    put_str(w, s, strlen(s));
    put(w, "\"");
}

static void csv_num(ulp__jw *w, double v)
{
    char t[32];
    if (isnan(v))
        put(w, "nan");
    else if (isinf(v))
        put_str(w, v > 0 ? "inf" : "-inf", v > 0 ? 3 : 4);
    else
        put_str(w, t, ulp__fmt_g17(t, v, 0));
}

/* A shape cell, "[3,1,7]". */
static void csv_shape(ulp__jw *w, int ndim, const int64_t *shape)
{
    char b[200];
    ulp__fmt_shape(b, sizeof b, ndim, shape);
    csv_str(w, b);
}

/* The aligned-row columns (empty but `aligned` for other rows) and the line's end. */
static void csv_aligned(ulp__jw *w, const ulp_diff_row *row)
{
    put(w, ",");
    put_i64(w, row->aligned);
    put(w, ",");
    if (row->aligned) {
        put_u64(w, row->positions_compared);
        put(w, ",");
        put_u64(w, row->positions_only_in_a);
        put(w, ",");
        put_u64(w, row->positions_only_in_b);
        put(w, ",");
    } else {
        put(w, ",,,");
    }
    if (row->aligned && row->first_position >= 0) {
        put_i64(w, row->first_request);
        put(w, ",");
        put_i64(w, row->first_position);
    } else {
        put(w, ",");
    }
    /* Rows of two dtypes: compared_in, rounded_side, rounded_equal_fraction, max_abs_diff_fine. */
    if (row->rounded && row->status == ULP_DIFF_DIFFERS) {
        const char *cd = ulp_dtype_name(row->compared_dtype);
        put(w, ",");
        put_str(w, cd, strlen(cd));
        if (row->rounded_side)
            put(w, ",b,");
        else
            put(w, ",a,");
        csv_num(w, row->elements ? (double)row->rounded_equal / (double)row->elements : 1.0);
        put(w, ",");
        csv_num(w, row->max_abs_diff_fine);
    } else {
        put(w, ",,,,");
    }
}

/* A joined side's cells: its ranks and the whole captures they disagree on. */
static void csv_tp(ulp__jw *w, const ulp_tp_join_info *t)
{
    put(w, ",");
    if (t != NULL)
        put_u64(w, t->ranks);
    put(w, ",");
    if (t != NULL)
        put_u64(w, t->disagree);
}

/* The joined sides (ulp_tp_join()), NULL where a side is one snapshot. */
typedef struct csv_tp_sides {
    const ulp_tp_join_info *a, *b;
} csv_tp_sides;

/* The columns appended after max_abs_diff_fine (CSV consumers index
 * columns): the pairing by site, the layout, the joined sides (empty where
 * they do not apply). */
static void csv_tail(ulp__jw *w, const ulp_diff_row *row, const csv_tp_sides *tp)
{
    put(w, ",");
    if (row->site != NULL)
        csv_str(w, row->site);
    put(w, ",");
    if (row->name_b != NULL)
        csv_str(w, row->name_b);
    put(w, ",");
    if (row->site != NULL || row->name_b != NULL)
        put_str(w, row->site != NULL ? "site" : "name", 4);
    put(w, ",");
    if (row->layout != NULL) {
        put_str(w, row->layout_side ? "b" : "a", 1);
        put(w, ",");
        csv_str(w, row->layout);
    } else {
        put(w, ",");
    }
    csv_tp(w, tp->a);
    csv_tp(w, tp->b);
    put(w, "\n");
}

void ulp__csv_head(FILE *f)
{
    fputs("name,occurrence,layer,role,seq_a,seq_b,dtype,dtype_b,shape,shape_b,status,elements,"
          "differing,differing_fraction,max_ulp,mean_ulp,max_abs_diff,max_abs,"
          "max_abs_diff_ulps_at_max,nonfinite_mismatch,sign_changes,worst_index,worst_a,worst_b,"
          "ulp_hist,aligned,positions_compared,positions_only_in_a,positions_only_in_b,"
          "first_request,first_position,compared_in,rounded_side,rounded_equal_fraction,"
          "max_abs_diff_fine,site,name_b,paired_by,layout_side,layout,tp_ranks_a,"
          "tp_whole_disagree_a,tp_ranks_b,tp_whole_disagree_b\n",
          f);
}

/* The 13 metric fields of a compared row, each after its comma. */
static void csv_metrics(ulp__jw *w, const ulp_diff_row *row)
{
    const ulp_diff_metrics *m = &row->m;
    put_u64(w, m->differing);
    put(w, ",");
    csv_num(w, row->elements ? (double)m->differing / (double)row->elements : 0.0);
    put(w, ",");
    put_u64(w, m->max_ulp);
    put(w, ",");
    csv_num(w, m->mean_ulp);
    put(w, ",");
    csv_num(w, m->max_abs_diff);
    put(w, ",");
    csv_num(w, m->max_abs);
    put(w, ",");
    csv_num(w, m->max_abs_diff_ulps_at_max);
    put(w, ",");
    put_u64(w, m->nonfinite_mismatch);
    put(w, ",");
    put_u64(w, m->sign_changes);
    put(w, ",");
    if (m->worst_flat >= 0) {
        csv_shape(w, row->ndim_a, m->worst_index);
        put(w, ",");
        csv_num(w, m->worst_a);
        put(w, ",");
        csv_num(w, m->worst_b);
    } else {
        put(w, ",,");
    }
    put(w, ",");
    int top = 0;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
        if (m->hist[k])
            top = k;
    for (int k = 0; k <= top; k++) {
        if (k)
            put(w, " ");
        put_u64(w, m->hist[k]);
    }
}

static void csv_row(ulp__jw *w, const ulp_diff_row *row, const csv_tp_sides *tp)
{
    int side_b = row->status == ULP_DIFF_ONLY_IN_B;
    int both = row->seq_a >= 0 && row->seq_b >= 0;
    csv_str(w, row->name);
    put(w, ",");
    put_i64(w, row->occurrence);
    put(w, ",");
    if (row->layer >= 0)
        put_i64(w, row->layer);
    put(w, ",");
    csv_str(w, row->role);
    put(w, ",");
    if (row->seq_a >= 0)
        put_i64(w, row->seq_a);
    put(w, ",");
    if (row->seq_b >= 0)
        put_i64(w, row->seq_b);
    put(w, ",");
    const char *dt = ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a);
    put_str(w, dt, strlen(dt));
    put(w, ",");
    if (both) {
        dt = ulp_dtype_name(row->dtype_b);
        put_str(w, dt, strlen(dt));
    }
    put(w, ",");
    csv_shape(w, side_b ? row->ndim_b : row->ndim_a, side_b ? row->shape_b : row->shape_a);
    put(w, ",");
    if (both)
        csv_shape(w, row->ndim_b, row->shape_b);
    put(w, ",");
    const char *st = ulp_diff_status_name(row->status);
    put_str(w, st, strlen(st));
    put(w, ",");
    put_u64(w, row->elements);
    put(w, ",");
    if (row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS)
        csv_metrics(w, row);
    else
        put(w, ",,,,,,,,,,,,"); /* the 13 metric fields, empty */
    csv_aligned(w, row);
    csv_tail(w, row, tp);
}

void ulp__csv_rows(const ulp_diff_row *rows, size_t n, const ulp_tp_join_info *tp_a,
                   const ulp_tp_join_info *tp_b, FILE *f)
{
    const csv_tp_sides tp = {tp_a, tp_b};
    ulp__jw w;
    ulp__jw_init(&w, f, 0);
    for (size_t i = 0; i < n; i++)
        csv_row(&w, &rows[i], &tp);
    ulp__jw_flush(&w);
}

ulp_status ulp__report_csv(const ulp_diff_result *r, FILE *f)
{
    ulp__csv_head(f);
    ulp__csv_rows(r->rows, r->n_rows, r->tp_join_a, r->tp_join_b, f);
    return ferror(f) ? ULP_EIO : ULP_OK;
}
