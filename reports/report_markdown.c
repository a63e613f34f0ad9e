/*
 * The Markdown report: a summary and tables ready to paste into a bug
 * report (GitHub-flavoured tables; `|` in names escaped).
 */
#include <inttypes.h>
#include <string.h>

#include "report_priv.h"

static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n' || *s == '\r')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

static void md_num(FILE *f, double v)
{
    char b[40];
    ulp__fmt_num(b, sizeof b, v);
    fputs(b, f);
}

void ulp__markdown_head(const ulp_diff_result *r, const ulp__tally *t, FILE *f)
{
    fprintf(f, "## ulpprof diff: `");
    md_text(f, r->path_a);
    fprintf(f, "` (%s) vs `", r->label_a);
    md_text(f, r->path_b);
    fprintf(f, "` (%s)\n\n", r->label_b);
    ulp__report_summary(r, t, f, "- ", "`");
    if (r->n_rows > 0) {
        fprintf(f, "\n| capture | occ | layer | dtype | shape | status | differing | max ULP | "
                   "mean ULP | max \\|diff\\| | ULPs at max \\|x\\| | NaN/inf mismatch | worst |\n"
                   "|---|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|---|\n");
    }
}

void ulp__markdown_rows(const ulp_diff_row *rows, size_t n, FILE *f)
{
    char b[200];
    for (size_t i = 0; i < n; i++) {
        const ulp_diff_row *row = &rows[i];
        int side_b = row->status == ULP_DIFF_ONLY_IN_B;
        fputs("| `", f);
        md_text(f, row->name);
        fprintf(f, "` | %" PRId64 " | ", row->occurrence);
        if (row->layer >= 0)
            fprintf(f, "%d", row->layer);
        else
            fputs("-", f);
        fprintf(f, " | %s", ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a));
        if (row->status == ULP_DIFF_DTYPE_MISMATCH)
            fprintf(f, " / %s", ulp_dtype_name(row->dtype_b));
        ulp__fmt_shape(b, sizeof b, side_b ? row->ndim_b : row->ndim_a,
                       side_b ? row->shape_b : row->shape_a);
        fprintf(f, " | %s", b);
        if (row->status == ULP_DIFF_SHAPE_MISMATCH) {
            ulp__fmt_shape(b, sizeof b, row->ndim_b, row->shape_b);
            fprintf(f, " / %s", b);
        }
        fprintf(f, " | %s | ", ulp_diff_status_name(row->status));
        if (row->status != ULP_DIFF_IDENTICAL && row->status != ULP_DIFF_DIFFERS) {
            fputs("- | - | - | - | - | - | - |\n", f);
            continue;
        }
        double pct = row->elements ? 100.0 * (double)row->m.differing / (double)row->elements : 0;
        fprintf(f, "%" PRIu64 " (%.3g%%) | %" PRIu64 " | %.3g | ", row->m.differing, pct,
                row->m.max_ulp, row->m.mean_ulp);
        md_num(f, row->m.max_abs_diff);
        fputs(" | ", f);
        md_num(f, row->m.max_abs_diff_ulps_at_max);
        fprintf(f, " | %" PRIu64 " | ", row->m.nonfinite_mismatch);
        if (row->m.worst_flat >= 0) {
            ulp__fmt_shape(b, sizeof b, row->ndim_a, row->m.worst_index);
            fprintf(f, "%s: ", b);
            md_num(f, row->m.worst_a);
            fputs(" vs ", f);
            md_num(f, row->m.worst_b);
        } else {
            fputs("-", f);
        }
        fputs(" |\n", f);
    }
}

ulp_status ulp__markdown_tail(const ulp_diff_result *r, FILE *f)
{
    for (size_t i = 0; i < r->n_logits; i++) {
        const ulp_diff_logits *lg = &r->logits[i];
        if (lg->n_flips == 0)
            continue;
        fprintf(f, "\n**Flipped rows of `");
        md_text(f, lg->name);
        fprintf(f,
                "` (%s)**\n\n| row | argmax A | argmax B | margin A | margin B | gap A | "
                "gap B | perturbation | ULPs |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
                ulp_dtype_name(lg->dtype));
        for (size_t k = 0; k < lg->n_flips; k++) {
            const ulp_diff_flip *fl = &lg->flips[k];
            fprintf(f, "| %" PRIu64 " | %" PRId64 " | %" PRId64 " | ", fl->row, fl->argmax_a,
                    fl->argmax_b);
            const double v[] = {fl->margin_a, fl->margin_b,         fl->gap_a,
                                fl->gap_b,    fl->gap_perturbation, fl->gap_perturbation_ulps};
            for (size_t q = 0; q < sizeof v / sizeof v[0]; q++) {
                md_num(f, v[q]);
                fputs(q + 1 < sizeof v / sizeof v[0] ? " | " : " |\n", f);
            }
        }
    }
    return ferror(f) ? ULP_EIO : ULP_OK;
}

ulp_status ulp__report_markdown(const ulp_diff_result *r, FILE *f)
{
    ulp__tally t;
    if (ulp__tally_result(&t, r) != ULP_OK)
        return ULP_ENOMEM;
    ulp__markdown_head(r, &t, f);
    ulp__markdown_rows(r->rows, r->n_rows, f);
    ulp__tally_release(&t);
    return ulp__markdown_tail(r, f);
}
