/*
 * The Markdown report: a summary and tables ready to paste into a bug
 * report (GitHub-flavoured tables; `|` in names escaped).
 */
#include <inttypes.h>
#include <math.h>
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

/*
 * A batch of rows gathered in a buffer and written a block at a time:
 * fputc per name byte and ten fprintf calls a row were most of the
 * Markdown report's time (10,000 rows: 4.7 ms, the table 1.3).  Each
 * piece is what the printf format it replaces prints.
 */
typedef struct mdbuf {
    FILE *f;
    size_t n;
    char b[8192];
} mdbuf;

static void mb_put(mdbuf *m, const char *s, size_t len)
{
    while (len > 0) {
        if (m->n == sizeof m->b) {
            fwrite(m->b, 1, m->n, m->f);
            m->n = 0;
        }
        size_t k = sizeof m->b - m->n < len ? sizeof m->b - m->n : len;
        memcpy(m->b + m->n, s, k);
        m->n += k;
        s += k;
        len -= k;
    }
}

static void mb_str(mdbuf *m, const char *s)
{
    mb_put(m, s, strlen(s));
}

/* md_text() into the buffer. */
static void mb_text(mdbuf *m, const char *s)
{
    for (;;) {
        size_t k = strcspn(s, "|\n\r");
        mb_put(m, s, k);
        s += k;
        if (*s == '\0')
            return;
        if (*s == '|')
            mb_put(m, "\\|", 2);
        else
            mb_put(m, " ", 1);
        s++;
    }
}

static void mb_u64(mdbuf *m, uint64_t v)
{
    char b[24];
    mb_put(m, b, ulp__fmt_u64(b, v));
}

static void mb_i64(mdbuf *m, int64_t v)
{
    char b[24];
    mb_put(m, b, ulp__fmt_i64(b, v));
}

/* "%.3g": integers from 0 to 999 are their digits (+0.0 "0"). */
static void mb_g3(mdbuf *m, double v)
{
    char b[40];
    if (v >= 0 && v < 1000 && v == (double)(uint64_t)v && !signbit(v)) {
        mb_u64(m, (uint64_t)v);
        return;
    }
    snprintf(b, sizeof b, "%.3g", v);
    mb_str(m, b);
}

static void mb_num(mdbuf *m, double v)
{
    char b[40];
    ulp__fmt_num(b, sizeof b, v);
    mb_str(m, b);
}

static void mb_shape(mdbuf *m, int ndim, const int64_t *shape)
{
    char b[200];
    ulp__fmt_shape(b, sizeof b, ndim, shape);
    mb_str(m, b);
}

static void markdown_row(mdbuf *m, const ulp_diff_row *row)
{
    int side_b = row->status == ULP_DIFF_ONLY_IN_B;
    mb_put(m, "| `", 3);
    if (row->site != NULL || row->name_b != NULL) {
        char full[600];
        ulp__full_name(full, sizeof full, row);
        mb_text(m, full);
    } else {
        mb_text(m, row->name);
    }
    mb_put(m, "` | ", 4);
    mb_i64(m, row->occurrence);
    mb_put(m, " | ", 3);
    if (row->layer >= 0)
        mb_i64(m, row->layer);
    else
        mb_put(m, "-", 1);
    mb_put(m, " | ", 3);
    mb_str(m, ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a));
    if (row->status == ULP_DIFF_DTYPE_MISMATCH || row->rounded) {
        mb_put(m, " / ", 3);
        mb_str(m, ulp_dtype_name(row->dtype_b));
    }
    if (row->rounded && row->status == ULP_DIFF_DIFFERS) {
        mb_str(m, " (in ");
        mb_str(m, ulp_dtype_name(row->compared_dtype));
        mb_put(m, ")", 1);
    }
    mb_put(m, " | ", 3);
    mb_shape(m, side_b ? row->ndim_b : row->ndim_a, side_b ? row->shape_b : row->shape_a);
    if (row->status == ULP_DIFF_SHAPE_MISMATCH) {
        mb_put(m, " / ", 3);
        mb_shape(m, row->ndim_b, row->shape_b);
    }
    mb_put(m, " | ", 3);
    mb_str(m, ulp_diff_status_name(row->status));
    mb_put(m, " | ", 3);
    if (row->status != ULP_DIFF_IDENTICAL && row->status != ULP_DIFF_DIFFERS) {
        mb_str(m, "- | - | - | - | - | - | - |\n");
        return;
    }
    double pct = row->elements ? 100.0 * (double)row->m.differing / (double)row->elements : 0;
    mb_u64(m, row->m.differing);
    mb_put(m, " (", 2);
    mb_g3(m, pct);
    mb_put(m, "%) | ", 5);
    mb_u64(m, row->m.max_ulp);
    mb_put(m, " | ", 3);
    mb_g3(m, row->m.mean_ulp);
    mb_put(m, " | ", 3);
    mb_num(m, row->m.max_abs_diff);
    mb_put(m, " | ", 3);
    mb_num(m, row->m.max_abs_diff_ulps_at_max);
    mb_put(m, " | ", 3);
    mb_u64(m, row->m.nonfinite_mismatch);
    mb_put(m, " | ", 3);
    if (row->m.worst_flat >= 0) {
        mb_shape(m, row->ndim_a, row->m.worst_index);
        mb_put(m, ": ", 2);
        mb_num(m, row->m.worst_a);
        mb_put(m, " vs ", 4);
        mb_num(m, row->m.worst_b);
    } else {
        mb_put(m, "-", 1);
    }
    mb_put(m, " |\n", 3);
}

void ulp__markdown_rows(const ulp_diff_row *rows, size_t n, FILE *f)
{
    mdbuf m;
    m.f = f;
    m.n = 0;
    for (size_t i = 0; i < n; i++)
        markdown_row(&m, &rows[i]);
    fwrite(m.b, 1, m.n, f);
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
                "` (%s)**\n\n| row | request | position | argmax A | argmax B | tied | "
                "margin A | margin B | gap A | gap B | perturbation | ULPs "
                "|\n|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|--:|--:|\n",
                ulp_dtype_name(lg->dtype));
        for (size_t k = 0; k < lg->n_flips; k++) {
            const ulp_diff_flip *fl = &lg->flips[k];
            fprintf(f, "| %" PRIu64 " | ", fl->row);
            if (fl->position >= 0)
                fprintf(f, "%" PRId64 " | %" PRId64 " | ", fl->request, fl->position);
            else
                fputs("- | - | ", f);
            fprintf(f, "%" PRId64 " | %" PRId64 " | %s | ", fl->argmax_a, fl->argmax_b,
                    fl->tied_a && fl->tied_b ? "A, B"
                    : fl->tied_a             ? "A"
                    : fl->tied_b             ? "B"
                                             : "");
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
