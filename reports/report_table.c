/*
 * The terminal report: a header, one aligned line per capture (at most 100
 * columns; long names keep their tail), then the summary sentences.
 * Colour (status only) when the caller asks for it, i.e. on a terminal.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report_priv.h"

#define TABLE_WIDTH 100
#define NAME_MIN    8

static const char *short_status(ulp_diff_status s)
{
    switch (s) {
    case ULP_DIFF_IDENTICAL:
        return "identical";
    case ULP_DIFF_DIFFERS:
        return "differs";
    case ULP_DIFF_SHAPE_MISMATCH:
        return "shape!=";
    case ULP_DIFF_DTYPE_MISMATCH:
        return "dtype!=";
    case ULP_DIFF_ONLY_IN_A:
        return "only in A";
    case ULP_DIFF_ONLY_IN_B:
        return "only in B";
    }
    return "?";
}

static const char *status_color(ulp_diff_status s)
{
    switch (s) {
    case ULP_DIFF_IDENTICAL:
        return "\033[32m";
    case ULP_DIFF_DIFFERS:
        return "\033[31m";
    default:
        return "\033[33m";
    }
}

static void fmt_pct(char *buf, size_t n, uint64_t k, uint64_t total)
{
    if (k == 0 || total == 0) {
        memcpy(buf, "0%", 3); /* buf: 16 bytes */
        return;
    }
    double p = 100.0 * (double)k / (double)total;
    if (k == total)
        snprintf(buf, n, "100%%");
    else if (p < 0.01)
        snprintf(buf, n, "<0.01%%");
    else if (p >= 99.99)
        snprintf(buf, n, ">99.99%%");
    else
        snprintf(buf, n, "%.2f%%", p);
}

/* A name that fits `w` columns: the tail, behind "...". */
static void fit_name(char *buf, size_t n, const char *s, size_t w)
{
    size_t len = strlen(s);
    if (len <= w) {
        memcpy(buf, s, len + 1 < n ? len + 1 : n); /* s is a buffer of n */
        buf[n - 1] = '\0';
        return;
    }
    snprintf(buf, n, "...%s", s + len - (w - 3));
}

/*
 * Prints `text` with every line folded at spaces to at most `width`
 * columns; continuation lines are indented four more than their line.
 */
static void wrap(FILE *f, const char *text, size_t width)
{
    const char *line = text;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        size_t indent = strspn(line, " ");
        size_t pad = 0; /* indent of the current output line */
        const char *p = line, *end = line + n;
        while ((size_t)(end - p) + pad > width) {
            /* The last space that keeps the piece within the width, past the indent. */
            const char *cut = NULL;
            for (const char *q = p + indent + 1; q < end && (size_t)(q - p) + pad <= width; q++)
                if (*q == ' ')
                    cut = q;
            if (cut == NULL)
                break; /* one long word: leave it */
            fprintf(f, "%*s%.*s\n", (int)pad, "", (int)(cut - p), p);
            p = cut + 1;
            pad = indent + 4;
            indent = 0;
        }
        fprintf(f, "%*s%.*s\n", (int)pad, "", (int)(end - p), p);
        line = nl ? nl + 1 : end;
    }
}

/* Column widths after the name: layer dtype status differing % max_ulp mean_ulp max|diff| ulp@max
 */
static const int colw[] = {5, 6, 9, 8, 6, 7, 7, 9, 7};
#define NCOL (sizeof colw / sizeof colw[0])

size_t ulp__table_width(const ulp__tally *t)
{
    int rest = 0;
    for (size_t c = 0; c < NCOL; c++)
        rest += 1 + colw[c];
    size_t wmax = (size_t)(TABLE_WIDTH - rest), wname = t->name_width;
    if (wname > wmax)
        wname = wmax;
    if (wname < NAME_MIN)
        wname = NAME_MIN;
    return wname;
}

/* A line being built: `%-*s` and `%*s` of printf(3), by hand. */
typedef struct line {
    char b[ULP__TABLE_LINE];
    size_t n;
} line;

static void put(line *l, const char *s, size_t len)
{
    if (len > sizeof l->b - 1 - l->n)
        len = sizeof l->b - 1 - l->n;
    memcpy(l->b + l->n, s, len);
    l->n += len;
}

static void pad(line *l, size_t len, int width)
{
    while (len < (size_t)width && l->n < sizeof l->b - 1) {
        l->b[l->n++] = ' ';
        len++;
    }
}

/* s, then spaces to `width` (%-*s), then `sep`. */
static void put_left(line *l, const char *s, int width, char sep)
{
    size_t len = strlen(s);
    put(l, s, len);
    pad(l, len, width);
    put(l, &sep, 1);
}

/* Spaces to `width`, then s (%*s), then `sep`. */
static void put_right(line *l, const char *s, int width, char sep)
{
    size_t len = strlen(s);
    pad(l, len, width);
    put(l, s, len);
    put(l, &sep, 1);
}

size_t ulp__table_rest(const ulp_diff_row *row, int color, char *buf)
{
    char layer[24], diff[24], pct[16], mu[24], mean[24], mad[24], uam[24];
    if (row->layer >= 0)
        ulp__fmt_i64(layer, row->layer);
    else
        strcpy(layer, "-");
    ulp_dtype dt = row->status == ULP_DIFF_ONLY_IN_B ? row->dtype_b : row->dtype_a;
    int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;
    if (compared) {
        ulp__fmt_u64(diff, row->m.differing);
        fmt_pct(pct, sizeof pct, row->m.differing, row->elements);
        ulp__fmt_num(mu, sizeof mu, (double)row->m.max_ulp);
        ulp__fmt_fixed2(mean, sizeof mean, row->m.mean_ulp);
        if (row->m.mean_ulp >= 1e5)
            snprintf(mean, sizeof mean, "%.2g", row->m.mean_ulp);
        ulp__fmt_num(mad, sizeof mad, row->m.max_abs_diff);
        ulp__fmt_fixed2(uam, sizeof uam, row->m.max_abs_diff_ulps_at_max);
        if (row->m.max_abs_diff_ulps_at_max >= 1e5)
            snprintf(uam, sizeof uam, "%.2g", row->m.max_abs_diff_ulps_at_max);
    } else {
        strcpy(diff, "-");
        strcpy(pct, "-");
        strcpy(mu, "-");
        strcpy(mean, "-");
        strcpy(mad, "-");
        strcpy(uam, "-");
    }
    /* Built by hand: printf's parsing of the formats below was most of the
     * table's time for 10,000 rows. */
    line l;
    l.n = 0;
    put_right(&l, layer, colw[0], ' ');
    put_left(&l, ulp_dtype_name(dt), colw[1], ' ');
    if (color) {
        const char *sc = status_color(row->status);
        put(&l, sc, strlen(sc));
        put_left(&l, short_status(row->status), colw[2], '\033');
        put(&l, "[0m ", 4);
    } else {
        put_left(&l, short_status(row->status), colw[2], ' ');
    }
    put_right(&l, diff, colw[3], ' ');
    put_right(&l, pct, colw[4], ' ');
    put_right(&l, mu, colw[5], ' ');
    put_right(&l, mean, colw[6], ' ');
    put_right(&l, mad, colw[7], ' ');
    put_right(&l, uam, colw[8], '\n');
    memcpy(buf, l.b, l.n);
    return l.n;
}

void ulp__table_line(FILE *f, const char *full, size_t wname, const char *rest, size_t n)
{
    char name[ULP__FULL_NAME];
    fit_name(name, sizeof name, full, wname);
    line l;
    l.n = 0;
    put_left(&l, name, (int)wname, ' ');
    put(&l, rest, n);
    /* One write of the whole line. */
    fwrite(l.b, 1, l.n, f);
}

static void print_row(FILE *f, const ulp_diff_row *row, size_t wname, int color)
{
    char full[ULP__FULL_NAME], rest[ULP__TABLE_LINE];
    ulp__full_name(full, sizeof full, row);
    size_t n = ulp__table_rest(row, color, rest);
    ulp__table_line(f, full, wname, rest, n);
}

/*
 * Details a column cannot hold: NaN/inf mismatches row by row (each one
 * matters), sign changes row by row only while they are few -- past
 * that, one line says how many captures have them and where the most are.
 */
static void print_details(const ulp__tally *t, FILE *f)
{
    int list_signs = t->n_sign <= 4;
    int head = 0;
    for (size_t i = 0; i < t->n_details; i++) {
        const ulp__detail *d = &t->details[i];
        int signs = list_signs && d->signs != 0;
        if (d->nonfinite == 0 && !signs)
            continue;
        if (!head)
            fputc('\n', f);
        head = 1;
        fprintf(f, "%s:", d->name);
        if (d->nonfinite)
            fprintf(f, " %" PRIu64 " NaN/inf mismatch%s", d->nonfinite,
                    d->nonfinite == 1 ? "" : "es");
        if (signs)
            fprintf(f, "%s %" PRIu64 " sign change%s", d->nonfinite ? "," : "", d->signs,
                    d->signs == 1 ? "" : "s");
        fputc('\n', f);
    }
    if (!list_signs)
        fprintf(f, "%ssign changes in %zu captures, most in %s (%" PRIu64 ")\n", head ? "" : "\n",
                t->n_sign, t->worst_sign_name ? t->worst_sign_name : "", t->worst_sign);
}

void ulp__table_head(const ulp_diff_result *r, size_t wname, FILE *f)
{
    fprintf(f, "A: %s (%s)\nB: %s (%s)\n\n", r->path_a, r->label_a, r->path_b, r->label_b);
    if (r->n_rows > 0) {
        fprintf(f, "%-*s %*s %-*s %-*s %*s %*s %*s %*s %*s %*s\n", (int)wname, "capture", colw[0],
                "layer", colw[1], "dtype", colw[2], "status", colw[3], "differing", colw[4], "%",
                colw[5], "max_ulp", colw[6], "mean_ulp", colw[7], "max|diff|", colw[8], "ulp@max");
    }
}

ulp_status ulp__table_tail(const ulp_diff_result *r, const ulp__tally *t, FILE *f)
{
    print_details(t, f);
    fputc('\n', f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL)
        return ULP_ENOMEM;
    ulp__report_summary(r, t, mem, "", "");
    if (fclose(mem) != 0) {
        free(text);
        return ULP_ENOMEM;
    }
    wrap(f, text, TABLE_WIDTH);
    free(text);
    return ferror(f) ? ULP_EIO : ULP_OK;
}

ulp_status ulp__report_table(const ulp_diff_result *r, FILE *f, unsigned flags)
{
    int color = (flags & ULP_REPORT_COLOR) != 0;
    ulp__tally t;
    if (ulp__tally_result(&t, r) != ULP_OK)
        return ULP_ENOMEM;
    size_t wname = ulp__table_width(&t);
    ulp__table_head(r, wname, f);
    for (size_t i = 0; i < r->n_rows; i++)
        print_row(f, &r->rows[i], wname, color);
    ulp_status st = ulp__table_tail(r, &t, f);
    ulp__tally_release(&t);
    return st;
}
