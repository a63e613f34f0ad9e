/*
 * The terminal report: a header, one aligned line per capture (at most 100
 * columns; long names keep their tail), then the summary sentences.
 * Colour (status only) when the caller asks for it, i.e. on a terminal.
 */
#include <inttypes.h>
#include <math.h>
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

static void pad(line *l, size_t len, size_t width)
{
    size_t k = len < width ? width - len : 0, room = sizeof l->b - 1 - l->n;
    k = k < room ? k : room;
    memset(l->b + l->n, ' ', k);
    l->n += k;
}

/* s, then spaces to `width` (%-*s), then `sep`. */
static void put_left(line *l, const char *s, size_t len, size_t width, char sep)
{
    put(l, s, len);
    pad(l, len, width);
    put(l, &sep, 1);
}

/*
 * A column of a row's line: its text in FIELD bytes (at most FIELD - 1 of
 * them), copied whole, and padding of at most 16 spaces, stored whole:
 * fixed-size copies, where a row's nine columns had cost twice the
 * numbers' formatting.  The nine columns, their padding and the colour
 * take well under ULP__TABLE_LINE - FIELD bytes, so nothing is cut.
 */
#define FIELD 32
/* What printf wrote the numbers into (and cut them to): 24 bytes, 16 for
 * the percentage. */
#define NUM_BYTES 24
#define PCT_BYTES 16
typedef struct field {
    char s[FIELD];
    size_t n;
} field;

/* Spaces to `width` (at most 16), then f (%*s), then `sep`. */
static char *right(char *p, const field *f, int width, char sep)
{
    memcpy(p, "                ", 16);
    p += f->n < (size_t)width ? (size_t)width - f->n : 0;
    memcpy(p, f->s, FIELD);
    p += f->n;
    *p++ = sep;
    return p;
}

/* f, then spaces to `width` (at most 16) (%-*s), then `sep`. */
static char *left(char *p, const field *f, int width, char sep)
{
    memcpy(p, f->s, FIELD);
    p += f->n;
    memcpy(p, "                ", 16);
    p += f->n < (size_t)width ? (size_t)width - f->n : 0;
    *p++ = sep;
    return p;
}

/* The field of a short string (a name from a table). */
static void text(field *f, const char *s)
{
    size_t n = strlen(s);
    f->n = n < FIELD - 1 ? n : FIELD - 1;
    memcpy(f->s, s, f->n);
    f->s[f->n] = '\0';
}

/* "%.2f", or "%.2g" from 1e5 on. */
static void fixed2(field *f, double v)
{
    if (v == 0 && !signbit(v)) { /* most rows */
        memcpy(f->s, "0.00", 5);
        f->n = 4;
        return;
    }
    if (v >= 1e5)
        snprintf(f->s, NUM_BYTES, "%.2g", v);
    else
        ulp__fmt_fixed2(f->s, NUM_BYTES, v);
    f->n = strlen(f->s);
}

static void num(field *f, double v)
{
    if (v == 0) { /* either zero: ulp__fmt_num writes "0" for both */
        memcpy(f->s, "0", 2);
        f->n = 1;
        return;
    }
    ulp__fmt_num(f->s, NUM_BYTES, v);
    f->n = strlen(f->s);
}

size_t ulp__table_rest(const ulp_diff_row *row, int color, char *buf)
{
    field layer, dtype, status, diff, pct, mu, mean, mad, uam;
    if (row->layer >= 0)
        layer.n = ulp__fmt_i64(layer.s, row->layer);
    else
        text(&layer, "-");
    ulp_dtype dt = row->status == ULP_DIFF_ONLY_IN_B ? row->dtype_b : row->dtype_a;
    int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;
    /* A row of two dtypes: the coarser one, which its numbers are in. */
    text(&dtype, ulp_dtype_name(compared && row->rounded ? row->compared_dtype : dt));
    text(&status,
         compared && row->rounded && row->m.differing == 0 ? "rounds=" : short_status(row->status));
    if (compared) {
        diff.n = ulp__fmt_u64(diff.s, row->m.differing);
        fmt_pct(pct.s, PCT_BYTES, row->m.differing, row->elements);
        pct.n = strlen(pct.s);
        num(&mu, (double)row->m.max_ulp);
        fixed2(&mean, row->m.mean_ulp);
        num(&mad, row->m.max_abs_diff);
        fixed2(&uam, row->m.max_abs_diff_ulps_at_max);
    } else {
        text(&diff, "-");
        pct = mu = mean = mad = uam = diff;
    }
    /* Built by hand: printf's parsing of the formats below was most of the
     * table's time for 10,000 rows. */
    char *p = buf;
    p = right(p, &layer, colw[0], ' ');
    p = left(p, &dtype, colw[1], ' ');
    if (color) {
        const char *sc = status_color(row->status);
        memcpy(p, sc, 5); /* "\033[3Xm" */
        p = left(p + 5, &status, colw[2], '\033');
        memcpy(p, "[0m ", 4);
        p += 4;
    } else {
        p = left(p, &status, colw[2], ' ');
    }
    p = right(p, &diff, colw[3], ' ');
    p = right(p, &pct, colw[4], ' ');
    p = right(p, &mu, colw[5], ' ');
    p = right(p, &mean, colw[6], ' ');
    p = right(p, &mad, colw[7], ' ');
    p = right(p, &uam, colw[8], '\n');
    return (size_t)(p - buf);
}

size_t ulp__table_line(char *out, const char *full, size_t nf, size_t wname, const char *rest,
                       size_t n)
{
    line l;
    l.n = 0;
    if (wname < 256) {
        /* The common case, straight into out: the name column (wname + 1
         * bytes), then as much of the rest as a line holds. */
        if (nf <= wname) {
            memcpy(out, full, nf);
            memset(out + nf, ' ', wname - nf);
        } else {
            /* A name that does not fit: its tail, behind "...". */
            memcpy(out, "...", 3);
            memcpy(out + 3, full + nf - (wname - 3), wname - 3);
        }
        out[wname] = ' ';
        size_t room = ULP__TABLE_LINE - 1 - (wname + 1);
        n = n < room ? n : room;
        memcpy(out + wname + 1, rest, n);
        return wname + 1 + n;
    }
    if (nf <= wname) {
        put_left(&l, full, nf, wname, ' ');
    } else {
        put(&l, "...", 3);
        put_left(&l, full + nf - (wname - 3), wname - 3, wname - 3, ' ');
    }
    put(&l, rest, n);
    memcpy(out, l.b, l.n);
    return l.n;
}

static void print_row(FILE *f, const ulp_diff_row *row, size_t wname, int color)
{
    char full[ULP__FULL_NAME], rest[ULP__TABLE_LINE], out[ULP__TABLE_LINE];
    size_t nf = ulp__full_name(full, sizeof full, row);
    size_t n = ulp__table_rest(row, color, rest);
    /* One write of the whole line. */
    fwrite(out, 1, ulp__table_line(out, full, nf, wname, rest, n), f);
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
    /* A write that found no memory sets the error; glibc's close may then
     * still fail to shrink the buffer, and leave text NULL with 0. */
    int lost = ferror(mem);
    if (fclose(mem) != 0 || lost || text == NULL) {
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
