/*
 * The table's and the Markdown report's rows are built by hand (fixed-size
 * copies, a buffer a batch); they are byte for byte what their printf
 * writers wrote.  The references below are those writers as they were
 * (up to 4ec72d6: the table's columns as printf's "%*s"/"%-*s" of the same
 * strings, the Markdown rows' fputc/fprintf), held against
 * ulp__table_rest()/ulp__table_line() and ulp__markdown_rows() over random
 * hostile rows: names with | ` \ CR LF, UTF-8 valid and not, longer than
 * the name column; NaN, inf, -0.0, huge and tiny values, counts past
 * INT64_MAX; every status, in colour and not.
 */
#define _GNU_SOURCE
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reports/report_priv.h"
#define TEST_RNG_SEED 0x51ED270B27A3C6F1ULL
#include "test_rng.h"
#include "test_same_text.h"

/* ---- The references. ---- */

static const char *ref_short_status(ulp_diff_status s)
{
    static const char *const names[] = {
        "identical", "differs", "shape!=", "dtype!=", "only in A", "only in B"};
    return (int)s >= 0 && (int)s < 6 ? names[s] : "?";
}

static void ref_pct(char *buf, size_t n, uint64_t k, uint64_t total)
{
    double p = 100.0 * (double)k / (double)total;
    if (k == 0 || total == 0)
        snprintf(buf, n, "0%%");
    else if (k == total)
        snprintf(buf, n, "100%%");
    else if (p < 0.01)
        snprintf(buf, n, "<0.01%%");
    else if (p >= 99.99)
        snprintf(buf, n, ">99.99%%");
    else
        snprintf(buf, n, "%.2f%%", p);
}

/* "%.2f", "%.2g" from 1e5 on. */
static void ref_fixed2(char *buf, size_t n, double v)
{
    snprintf(buf, n, v >= 1e5 ? "%.2g" : "%.2f", v);
}

/* The table's line of a row, name column `wname` wide. */
static void ref_table_line(FILE *f, const ulp_diff_row *row, size_t wname, int color)
{
    char full[ULP__FULL_NAME], name[ULP__FULL_NAME];
    char layer[24], diff[24], pct[16], mu[24], mean[24], mad[24], uam[24];
    ulp__full_name(full, sizeof full, row);
    size_t len = strlen(full);
    if (len <= wname)
        snprintf(name, sizeof name, "%s", full);
    else
        snprintf(name, sizeof name, "...%s", full + len - (wname - 3));
    if (row->layer >= 0)
        snprintf(layer, sizeof layer, "%d", row->layer);
    else
        snprintf(layer, sizeof layer, "-");
    ulp_dtype dt = row->status == ULP_DIFF_ONLY_IN_B ? row->dtype_b : row->dtype_a;
    if (row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS) {
        snprintf(diff, sizeof diff, "%" PRIu64, row->m.differing);
        ref_pct(pct, sizeof pct, row->m.differing, row->elements);
        ulp__fmt_num(mu, sizeof mu, (double)row->m.max_ulp);
        ref_fixed2(mean, sizeof mean, row->m.mean_ulp);
        ulp__fmt_num(mad, sizeof mad, row->m.max_abs_diff);
        ref_fixed2(uam, sizeof uam, row->m.max_abs_diff_ulps_at_max);
    } else {
        strcpy(diff, "-");
        strcpy(pct, "-");
        strcpy(mu, "-");
        strcpy(mean, "-");
        strcpy(mad, "-");
        strcpy(uam, "-");
    }
    fprintf(f, "%-*s %*s %-*s ", (int)wname, name, 5, layer, 6, ulp_dtype_name(dt));
    if (color) {
        const char *sc = row->status == ULP_DIFF_IDENTICAL ? "\033[32m"
                         : row->status == ULP_DIFF_DIFFERS ? "\033[31m"
                                                           : "\033[33m";
        fprintf(f, "%s%-*s\033[0m ", sc, 9, ref_short_status(row->status));
    } else {
        fprintf(f, "%-*s ", 9, ref_short_status(row->status));
    }
    fprintf(f, "%*s %*s %*s %*s %*s %*s\n", 8, diff, 6, pct, 7, mu, 7, mean, 9, mad, 7, uam);
}

static void ref_md_text(FILE *f, const char *s)
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

static void ref_md_num(FILE *f, double v)
{
    char b[40];
    ulp__fmt_num(b, sizeof b, v);
    fputs(b, f);
}

/* report_markdown.c's rows as fprintf wrote them. */
static void ref_md_rows(const ulp_diff_row *rows, size_t n, FILE *f)
{
    char b[200];
    for (size_t i = 0; i < n; i++) {
        const ulp_diff_row *row = &rows[i];
        int side_b = row->status == ULP_DIFF_ONLY_IN_B;
        fputs("| `", f);
        ref_md_text(f, row->name);
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
        ref_md_num(f, row->m.max_abs_diff);
        fputs(" | ", f);
        ref_md_num(f, row->m.max_abs_diff_ulps_at_max);
        fprintf(f, " | %" PRIu64 " | ", row->m.nonfinite_mismatch);
        if (row->m.worst_flat >= 0) {
            ulp__fmt_shape(b, sizeof b, row->ndim_a, row->m.worst_index);
            fprintf(f, "%s: ", b);
            ref_md_num(f, row->m.worst_a);
            fputs(" vs ", f);
            ref_md_num(f, row->m.worst_b);
        } else {
            fputs("-", f);
        }
        fputs(" |\n", f);
    }
}

/* ---- Random hostile rows. ---- */

/* Pieces of names: what Markdown escapes, what the table cuts, UTF-8 valid and not. */
static const char *const pieces[] = {"a",
                                     "layers.0.mlp",
                                     "|",
                                     "`",
                                     "\\",
                                     "\n",
                                     "\r",
                                     "\r\n",
                                     "\t",
                                     " ",
                                     "#",
                                     "%s",
                                     "\xc3\xa9",
                                     "\xe2\x82",
                                     "\xff",
                                     "\x7f",
                                     "model.layers.",
                                     "out_proj",
                                     "attn|x`y",
                                     "01234567890123456789"};

static char *hostile(char *buf)
{
    return rng_join(buf, pieces, sizeof pieces / sizeof pieces[0], 12);
}

static double any_double(void)
{
    static const double special[] = {0.0,  -0.0,     1.0,       -1.0,    0.5,      2.0 / 3,
                                     99.5, 999.0,    999.5,     1000.0,  1e5,      99999.994,
                                     1e-5, 1e300,    DBL_MAX,   DBL_MIN, 4.9e-324, NAN,
                                     -NAN, INFINITY, -INFINITY, 0.391,   100.0,    1e7};
    uint64_t bits;
    double v;
    switch (pick(5)) {
    case 0:
        return special[pick(sizeof special / sizeof special[0])];
    case 1:
        bits = next();
        memcpy(&v, &bits, sizeof v);
        return v;
    case 2:
        return (double)pick(2000);
    case 3:
        return ldexp((double)(next() >> 11), (int)pick(120) - 90);
    default:
        return (double)(next() % 1000000) / (double)(1 + next() % 1000);
    }
}

static uint64_t any_u64(void)
{
    static const uint64_t special[] = {0, 1, 9, 10, 999, 1000, INT64_MAX, UINT64_MAX};
    return pick(3) == 0 ? special[pick(sizeof special / sizeof special[0])] : next() >> pick(64);
}

typedef struct row_mem {
    char name[ULP__FULL_NAME];
} row_mem;

static void any_row(ulp_diff_row *r, row_mem *mem)
{
    memset(r, 0, sizeof *r);
    r->name = hostile(mem->name);
    r->role = "activation";
    r->occurrence = pick(3) ? 0 : pick(4) ? (int64_t)pick(200) : (int64_t)next();
    r->status = (ulp_diff_status)pick(6);
    r->layer = pick(3) ? (int32_t)(pick(4) ? pick(100) : next() >> 33) : -1;
    r->dtype_a = r->status == ULP_DIFF_ONLY_IN_B ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->dtype_b = r->status == ULP_DIFF_ONLY_IN_A ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->ndim_a = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    r->ndim_b = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    for (int k = 0; k < ULP_SNAPSHOT_MAX_RANK; k++) {
        r->shape_a[k] = (int64_t)pick(5000);
        r->shape_b[k] = (int64_t)pick(5000);
    }
    r->elements = pick(8) ? any_u64() : 0;
    if (pick(4) == 0 && r->elements > 0)
        r->m.differing = pick(2) ? r->elements : r->elements - 1 - pick(2) % r->elements;
    else
        r->m.differing = any_u64();
    r->m.max_ulp = any_u64();
    r->m.mean_ulp = any_double();
    r->m.max_abs_diff = any_double();
    r->m.max_abs_diff_ulps_at_max = any_double();
    r->m.nonfinite_mismatch = any_u64();
    r->m.worst_flat = pick(4) ? (int64_t)(next() >> 2) : -1;
    for (int k = 0; k < r->ndim_a; k++)
        r->m.worst_index[k] = (int64_t)pick(1000);
    r->m.worst_a = any_double();
    r->m.worst_b = any_double();
}

/* ---- The tests. ---- */

static void test_report_text_rows__table(void **state)
{
    (void)state;
    row_mem mem;
    for (int round = 0; round < 20000; round++) {
        ulp_diff_row row;
        any_row(&row, &mem);
        size_t wname = pick(40) == 0 ? 250 + pick(400) : 8 + pick(20); /* both paths */
        int color = (int)pick(2);
        char *want = NULL, rest[ULP__TABLE_LINE], got[ULP__TABLE_LINE], full[ULP__FULL_NAME];
        size_t nw;
        FILE *f = open_memstream(&want, &nw);
        assert_non_null(f);
        ref_table_line(f, &row, wname, color);
        assert_int_equal(fclose(f), 0);
        size_t nf = ulp__full_name(full, sizeof full, &row);
        assert_int_equal(nf, strlen(full));
        size_t nr = ulp__table_rest(&row, color, rest);
        size_t ng = ulp__table_line(got, full, nf, wname, rest, nr);
        char what[64];
        snprintf(what, sizeof what, "table round %d", round);
        assert_same_text(what, "printf", got, ng, want, nw);
        free(want);
    }
}

static char *md_text_of(const ulp_diff_row *rows, size_t n, int ref, size_t *len)
{
    char *b = NULL;
    FILE *f = open_memstream(&b, len);
    assert_non_null(f);
    if (ref)
        ref_md_rows(rows, n, f);
    else
        ulp__markdown_rows(rows, n, f);
    assert_int_equal(fclose(f), 0);
    return b;
}

/* Batches of random rows, some longer than the writer's buffer. */
static void test_report_text_rows__markdown(void **state)
{
    (void)state;
    enum { BATCH = 120 };
    ulp_diff_row *rows = calloc(BATCH, sizeof *rows);
    row_mem *mem = calloc(BATCH, sizeof *mem);
    assert_non_null(rows);
    assert_non_null(mem);
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + pick(BATCH);
        for (size_t i = 0; i < n; i++)
            any_row(&rows[i], &mem[i]);
        size_t ng, nw;
        char *got = md_text_of(rows, n, 0, &ng);
        char *want = md_text_of(rows, n, 1, &nw);
        char what[64];
        snprintf(what, sizeof what, "markdown round %d (%zu rows)", round, n);
        assert_same_text(what, "fprintf", got, ng, want, nw);
        free(got);
        free(want);
    }
    /* A name past the 8 KiB buffer, '|' on its edges. */
    char *big = malloc(20001);
    assert_non_null(big);
    for (size_t k = 0; k < 20000; k++)
        big[k] = k % 8191 == 0 ? '|' : (char)('a' + k % 26);
    big[20000] = '\0';
    any_row(&rows[0], &mem[0]);
    rows[0].name = big;
    size_t ng, nw;
    char *got = md_text_of(rows, 1, 0, &ng);
    char *want = md_text_of(rows, 1, 1, &nw);
    assert_same_text("long name", "fprintf", got, ng, want, nw);
    free(got);
    free(want);
    free(big);
    free(rows);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_text_rows__table),
        cmocka_unit_test(test_report_text_rows__markdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
