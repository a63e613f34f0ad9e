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

/* The name column's width: the longest "name#occurrence", within the table. */
static size_t name_width(const ulp_diff_result *r)
{
    char occ[24];
    int rest = 0;
    for (size_t c = 0; c < NCOL; c++)
        rest += 1 + colw[c];
    size_t wmax = (size_t)(TABLE_WIDTH - rest), wname = 7; /* "capture" */
    for (size_t i = 0; i < r->n_rows; i++) {
        const ulp_diff_row *row = &r->rows[i];
        size_t len = strlen(row->name);
        if (row->occurrence)
            len += 1 + ulp__fmt_i64(occ, row->occurrence); /* "#occurrence" */
        wname = len > wname ? len : wname;
    }
    if (wname > wmax)
        wname = wmax;
    if (wname < NAME_MIN)
        wname = NAME_MIN;
    return wname;
}

/* "name" or "name#occurrence", cut to size - 1 bytes as snprintf(3) cuts it. */
static void full_name(char *buf, size_t size, const ulp_diff_row *row)
{
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
}

/* A line being built: `%-*s` and `%*s` of printf(3), by hand. */
typedef struct line {
    char b[1024];
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

static void print_row(FILE *f, const ulp_diff_row *row, size_t wname, int color)
{
    char full[320], name[320];
    char layer[24], diff[24], pct[16], mu[24], mean[24], mad[24], uam[24];
    full_name(full, sizeof full, row);
    fit_name(name, sizeof name, full, wname);
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
    /* One write of the whole line: printf's parsing of the formats below
     * was most of the table's time for 10,000 rows. */
    line l;
    l.n = 0;
    put_left(&l, name, (int)wname, ' ');
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
    fwrite(l.b, 1, l.n, f);
}

/*
 * Details a column cannot hold: NaN/inf mismatches row by row (each one
 * matters), sign changes row by row only while they are few -- past
 * that, one line says how many captures have them and where the most are.
 */
static void print_details(const ulp_diff_result *r, FILE *f)
{
    char full[320];
    size_t n_sign = 0, worst_sign = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (r->rows[i].m.sign_changes == 0)
            continue;
        if (n_sign++ == 0 || r->rows[i].m.sign_changes > r->rows[worst_sign].m.sign_changes)
            worst_sign = i;
    }
    int list_signs = n_sign <= 4;
    int head = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        const ulp_diff_row *row = &r->rows[i];
        int signs = list_signs && row->m.sign_changes != 0;
        if (row->m.nonfinite_mismatch == 0 && !signs)
            continue;
        if (!head)
            fputc('\n', f);
        head = 1;
        full_name(full, sizeof full, row);
        fprintf(f, "%s:", full);
        if (row->m.nonfinite_mismatch)
            fprintf(f, " %" PRIu64 " NaN/inf mismatch%s", row->m.nonfinite_mismatch,
                    row->m.nonfinite_mismatch == 1 ? "" : "es");
        if (signs)
            fprintf(f, "%s %" PRIu64 " sign change%s", row->m.nonfinite_mismatch ? "," : "",
                    row->m.sign_changes, row->m.sign_changes == 1 ? "" : "s");
        fputc('\n', f);
    }
    if (!list_signs) {
        const ulp_diff_row *w = &r->rows[worst_sign];
        full_name(full, sizeof full, w);
        fprintf(f, "%ssign changes in %zu captures, most in %s (%" PRIu64 ")\n", head ? "" : "\n",
                n_sign, full, w->m.sign_changes);
    }
}

ulp_status ulp__report_table(const ulp_diff_result *r, FILE *f, unsigned flags)
{
    int color = (flags & ULP_REPORT_COLOR) != 0;
    size_t wname = name_width(r);
    fprintf(f, "A: %s (%s)\nB: %s (%s)\n\n", r->path_a, r->label_a, r->path_b, r->label_b);
    if (r->n_rows > 0) {
        fprintf(f, "%-*s %*s %-*s %-*s %*s %*s %*s %*s %*s %*s\n", (int)wname, "capture", colw[0],
                "layer", colw[1], "dtype", colw[2], "status", colw[3], "differing", colw[4], "%",
                colw[5], "max_ulp", colw[6], "mean_ulp", colw[7], "max|diff|", colw[8], "ulp@max");
    }
    for (size_t i = 0; i < r->n_rows; i++)
        print_row(f, &r->rows[i], wname, color);
    print_details(r, f);
    fputc('\n', f);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL)
        return ULP_ENOMEM;
    ulp__report_summary(r, mem, "", "");
    if (fclose(mem) != 0) {
        free(text);
        return ULP_ENOMEM;
    }
    wrap(f, text, TABLE_WIDTH);
    free(text);
    return ferror(f) ? ULP_EIO : ULP_OK;
}
