/*
 * The CSV report (RFC 4180): one header line, then one line per row with
 * the JSON row keys.  Numbers keep full precision (%.17g); empty fields
 * where a value does not apply (layer absent, not compared).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report_priv.h"

static void csv_str(FILE *f, const char *s)
{
    /* A cell that starts with = + - @ (or a tab or CR) is a formula to a
     * spreadsheet: a leading ' makes it text (OWASP's advice). */
    if (strchr("=+-@\t\r", s[0]) != NULL && s[0] != '\0')
        fputc('\'', f);
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", v);
}

/* The aligned-row columns (empty but `aligned` for other rows) and the line's end. */
static void csv_aligned(FILE *f, const ulp_diff_row *row)
{
    fprintf(f, ",%d,", row->aligned);
    if (row->aligned)
        fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", row->positions_compared,
                row->positions_only_in_a, row->positions_only_in_b);
    else
        fputs(",,,", f);
    if (row->aligned && row->first_position >= 0)
        fprintf(f, "%" PRId64 ",%" PRId64, row->first_request, row->first_position);
    else
        fputc(',', f);
    fputc('\n', f);
}

void ulp__csv_head(FILE *f)
{
    fputs("name,occurrence,layer,role,seq_a,seq_b,dtype,dtype_b,shape,shape_b,status,elements,"
          "differing,differing_fraction,max_ulp,mean_ulp,max_abs_diff,max_abs,"
          "max_abs_diff_ulps_at_max,nonfinite_mismatch,sign_changes,worst_index,worst_a,worst_b,"
          "ulp_hist,aligned,positions_compared,positions_only_in_a,positions_only_in_b,"
          "first_request,first_position\n",
          f);
}

void ulp__csv_rows(const ulp_diff_row *rows, size_t n, FILE *f)
{
    char b[200];
    for (size_t i = 0; i < n; i++) {
        const ulp_diff_row *row = &rows[i];
        const ulp_diff_metrics *m = &row->m;
        int side_b = row->status == ULP_DIFF_ONLY_IN_B;
        int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;
        csv_str(f, row->name);
        fprintf(f, ",%" PRId64 ",", row->occurrence);
        if (row->layer >= 0)
            fprintf(f, "%d", row->layer);
        fputc(',', f);
        csv_str(f, row->role);
        fputc(',', f);
        if (row->seq_a >= 0)
            fprintf(f, "%" PRId64, row->seq_a);
        fputc(',', f);
        if (row->seq_b >= 0)
            fprintf(f, "%" PRId64, row->seq_b);
        fprintf(f, ",%s,", ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a));
        if (row->seq_a >= 0 && row->seq_b >= 0)
            fputs(ulp_dtype_name(row->dtype_b), f);
        fputc(',', f);
        ulp__fmt_shape(b, sizeof b, side_b ? row->ndim_b : row->ndim_a,
                       side_b ? row->shape_b : row->shape_a);
        csv_str(f, b);
        fputc(',', f);
        if (row->seq_a >= 0 && row->seq_b >= 0) {
            ulp__fmt_shape(b, sizeof b, row->ndim_b, row->shape_b);
            csv_str(f, b);
        }
        fprintf(f, ",%s,%" PRIu64 ",", ulp_diff_status_name(row->status), row->elements);
        if (!compared) {
            fputs(",,,,,,,,,,,,", f); /* the 13 metric fields, empty */
            csv_aligned(f, row);
            continue;
        }
        fprintf(f, "%" PRIu64 ",", m->differing);
        csv_num(f, row->elements ? (double)m->differing / (double)row->elements : 0.0);
        fprintf(f, ",%" PRIu64 ",", m->max_ulp);
        csv_num(f, m->mean_ulp);
        fputc(',', f);
        csv_num(f, m->max_abs_diff);
        fputc(',', f);
        csv_num(f, m->max_abs);
        fputc(',', f);
        csv_num(f, m->max_abs_diff_ulps_at_max);
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",", m->nonfinite_mismatch, m->sign_changes);
        if (m->worst_flat >= 0) {
            ulp__fmt_shape(b, sizeof b, row->ndim_a, m->worst_index);
            csv_str(f, b);
            fputc(',', f);
            csv_num(f, m->worst_a);
            fputc(',', f);
            csv_num(f, m->worst_b);
        } else {
            fputs(",,", f);
        }
        fputc(',', f);
        int top = 0;
        for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
            if (m->hist[k])
                top = k;
        for (int k = 0; k <= top; k++)
            fprintf(f, "%s%" PRIu64, k ? " " : "", m->hist[k]);
        csv_aligned(f, row);
    }
}

ulp_status ulp__report_csv(const ulp_diff_result *r, FILE *f)
{
    ulp__csv_head(f);
    ulp__csv_rows(r->rows, r->n_rows, f);
    return ferror(f) ? ULP_EIO : ULP_OK;
}
