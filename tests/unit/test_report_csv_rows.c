/*
 * reports/report_csv.c writes the CSV report's rows without printf; they
 * are byte for byte what its fprintf writer wrote.  The reference below is
 * that writer as it was (up to 94bef78), held against ulp__csv_rows() over
 * random hostile rows (names with commas, quotes, CR and LF, leading
 * = + - @, UTF-8 valid and not; NaN, inf, -0.0, denormals, DBL_MAX; counts
 * past INT64_MAX), whole and in batches; ulp__fmt_g17() against
 * snprintf's "%.17g" over many values, and ulp__fmt_shape() against the
 * snprintf one it replaced.
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
#define TEST_RNG_SEED 0x9E3779B97F4A7C15ULL
#include "test_rng.h"
#include "test_same_text.h"

/* ---- The reference: report_csv.c's rows as fprintf wrote them. ---- */

/* report_text.c's ulp__fmt_shape() as it was, with snprintf. */
static void ref_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t w = 0;
    w += (size_t)snprintf(buf, n, "[");
    for (int k = 0; k < ndim && w < n; k++)
        w += (size_t)snprintf(buf + w, n - w, "%s%" PRId64, k ? "," : "", shape[k]);
    if (w < n)
        snprintf(buf + w, n - w, "]");
}

static void ref_str(FILE *f, const char *s)
{
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

static void ref_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", v);
}

static void ref_aligned(FILE *f, const ulp_diff_row *row)
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
    if (row->rounded && row->status == ULP_DIFF_DIFFERS) {
        fprintf(f, ",%s,%s,", ulp_dtype_name(row->compared_dtype), row->rounded_side ? "b" : "a");
        ref_num(f, row->elements ? (double)row->rounded_equal / (double)row->elements : 1.0);
        fputc(',', f);
        ref_num(f, row->max_abs_diff_fine);
    } else {
        fputs(",,,,", f);
    }
    /* Appended since: site, name_b, paired_by, layout_side, layout, and the
     * joined sides' four cells, which a stream's rows leave empty. */
    fputc(',', f);
    if (row->site)
        ref_str(f, row->site);
    fputc(',', f);
    if (row->name_b)
        ref_str(f, row->name_b);
    fputc(',', f);
    if (row->site || row->name_b)
        fputs(row->site ? "site" : "name", f);
    fputc(',', f);
    if (row->layout) {
        fprintf(f, "%s,", row->layout_side ? "b" : "a");
        ref_str(f, row->layout);
    } else {
        fputc(',', f);
    }
    fputs(",,,,\n", f);
}

static void ref_metrics(FILE *f, const ulp_diff_row *row)
{
    const ulp_diff_metrics *m = &row->m;
    char b[200];
    fprintf(f, "%" PRIu64 ",", m->differing);
    ref_num(f, row->elements ? (double)m->differing / (double)row->elements : 0.0);
    fprintf(f, ",%" PRIu64 ",", m->max_ulp);
    ref_num(f, m->mean_ulp);
    fputc(',', f);
    ref_num(f, m->max_abs_diff);
    fputc(',', f);
    ref_num(f, m->max_abs);
    fputc(',', f);
    ref_num(f, m->max_abs_diff_ulps_at_max);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",", m->nonfinite_mismatch, m->sign_changes);
    if (m->worst_flat >= 0) {
        ref_shape(b, sizeof b, row->ndim_a, m->worst_index);
        ref_str(f, b);
        fputc(',', f);
        ref_num(f, m->worst_a);
        fputc(',', f);
        ref_num(f, m->worst_b);
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
}

static void ref_rows(const ulp_diff_row *rows, size_t n, FILE *f)
{
    char b[200];
    for (size_t i = 0; i < n; i++) {
        const ulp_diff_row *row = &rows[i];
        int side_b = row->status == ULP_DIFF_ONLY_IN_B;
        int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;
        ref_str(f, row->name);
        fprintf(f, ",%" PRId64 ",", row->occurrence);
        if (row->layer >= 0)
            fprintf(f, "%d", row->layer);
        fputc(',', f);
        ref_str(f, row->role);
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
        ref_shape(b, sizeof b, side_b ? row->ndim_b : row->ndim_a,
                  side_b ? row->shape_b : row->shape_a);
        ref_str(f, b);
        fputc(',', f);
        if (row->seq_a >= 0 && row->seq_b >= 0) {
            ref_shape(b, sizeof b, row->ndim_b, row->shape_b);
            ref_str(f, b);
        }
        fprintf(f, ",%s,%" PRIu64 ",", ulp_diff_status_name(row->status), row->elements);
        if (compared)
            ref_metrics(f, row);
        else
            fputs(",,,,,,,,,,,,", f);
        ref_aligned(f, row);
    }
}

/* ---- Random hostile rows. ---- */

/* Pieces of names: what CSV quotes or marks, UTF-8 valid and not. */
static const char *const pieces[] = {"a",
                                     "layers.0.mlp",
                                     ",",
                                     "\"",
                                     "\"\"",
                                     "\n",
                                     "\r",
                                     "\r\n",
                                     "\t",
                                     "=",
                                     "+",
                                     "-",
                                     "@",
                                     "'",
                                     " ",
                                     "\\",
                                     "\001",
                                     "\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\x80",
                                     "\xff",
                                     "\xe2\x82",
                                     "%s",
                                     "%n",
                                     "#1",
                                     ";",
                                     "=SUM(A1)",
                                     "a,\"b\"\nc"};

/* A name of up to 12 pieces in buf (ULP__FULL_NAME bytes). */
static char *hostile(char *buf)
{
    return rng_join(buf, pieces, sizeof pieces / sizeof pieces[0], 12);
}

static double any_double(void)
{
    static const double special[] = {0.0,      -0.0,
                                     1.0,      -1.0,
                                     0.5,      0.1,
                                     1.0 / 3,  1e-6,
                                     9.99e-7,  1e-5,
                                     1e16,     1e17,
                                     1e100,    123456789.0,
                                     1e38,     DBL_MAX,
                                     -DBL_MAX, DBL_MIN,
                                     4.9e-324, -5e-324,
                                     NAN,      -NAN,
                                     INFINITY, -INFINITY,
                                     65504.0,  3.4028234663852886e38,
                                     1e300,    1e-300,
                                     0.3,      2.5};
    uint64_t bits;
    double v;
    switch (pick(6)) {
    case 0:
        return special[pick(sizeof special / sizeof special[0])];
    case 1:
        bits = next();
        memcpy(&v, &bits, sizeof v);
        return v;
    case 2:
        return (double)(next() % 1000000) / (double)(1 + next() % 100000);
    case 3:
        return ldexp((double)(next() >> 11), (int)pick(200) - 150);
    case 4:
        return (double)(next() % 100000000000000000ULL) / 1e16; /* 17 digits: ties */
    default:
        return (double)(int64_t)next() / 1e3;
    }
}

static uint64_t any_u64(void)
{
    static const uint64_t special[] = {
        0, 1, 9, 10, 1000, INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX, UINT64_MAX - 1};
    return pick(3) == 0 ? special[pick(sizeof special / sizeof special[0])] : next() >> pick(64);
}

static int64_t any_i64(void)
{
    return pick(4) == 0 ? (int64_t)next() : (int64_t)pick(100) - 10;
}

typedef struct row_mem {
    char name[ULP__FULL_NAME], role[ULP__FULL_NAME];
    char site[ULP__FULL_NAME], name_b[ULP__FULL_NAME], layout[ULP__FULL_NAME];
} row_mem;

static void any_metrics(ulp_diff_metrics *m, int ndim)
{
    m->differing = any_u64();
    m->nonfinite_mismatch = any_u64();
    m->max_ulp = any_u64();
    m->mean_ulp = any_double();
    size_t top = pick(3) ? pick(ULP_DIFF_HIST_BINS) : 0;
    for (size_t k = 0; k <= top; k++)
        m->hist[k] = pick(3) ? 0 : any_u64();
    m->sign_changes = any_u64();
    m->max_abs_diff = any_double();
    m->max_abs = any_double();
    m->max_abs_diff_ulps_at_max = any_double();
    m->worst_flat = pick(4) ? (int64_t)(next() >> 2) : -1;
    for (int k = 0; k < ndim; k++)
        m->worst_index[k] = any_i64();
    m->worst_a = any_double();
    m->worst_b = any_double();
}

static void any_row(ulp_diff_row *r, row_mem *mem)
{
    memset(r, 0, sizeof *r);
    r->name = hostile(mem->name);
    r->role = hostile(mem->role);
    r->occurrence = any_i64();
    r->status = (ulp_diff_status)pick(6);
    r->seq_a = r->status == ULP_DIFF_ONLY_IN_B ? -1 : any_i64();
    r->seq_b = r->status == ULP_DIFF_ONLY_IN_A ? -1 : any_i64();
    r->layer = pick(3) ? (int32_t)(pick(4) ? pick(100) : next() >> 33) : -1;
    r->dtype_a = r->status == ULP_DIFF_ONLY_IN_B ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->dtype_b = r->status == ULP_DIFF_ONLY_IN_A ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->ndim_a = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    r->ndim_b = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    for (int k = 0; k < ULP_SNAPSHOT_MAX_RANK; k++) {
        r->shape_a[k] = pick(8) ? (int64_t)pick(5000) : any_i64();
        r->shape_b[k] = (int64_t)pick(5000);
    }
    r->elements = pick(8) ? any_u64() : 0;
    if (r->status == ULP_DIFF_IDENTICAL || r->status == ULP_DIFF_DIFFERS)
        any_metrics(&r->m, r->ndim_a);
    r->aligned = pick(3) == 0;
    r->positions_compared = any_u64();
    r->positions_only_in_a = any_u64();
    r->positions_only_in_b = any_u64();
    r->first_request = any_i64();
    r->first_position = pick(3) ? any_i64() : -1;
    r->rounded = pick(4) == 0;
    r->compared_dtype = (ulp_dtype)(1 + pick(5));
    r->rounded_side = (int)pick(2);
    r->rounded_equal = pick(2) ? any_u64() : r->elements;
    r->max_abs_diff_fine = pick(4) ? (double)any_u64() * 1e-9 : 0.0;
    r->site = pick(3) == 0 ? hostile(mem->site) : NULL;
    r->name_b = pick(3) == 0 ? hostile(mem->name_b) : NULL;
    r->layout = pick(3) == 0 ? hostile(mem->layout) : NULL;
    r->layout_side = (int)pick(2);
}

/* ---- The tests. ---- */

static char *text_of(const ulp_diff_row *rows, size_t n, int ref, size_t *len)
{
    char *b = NULL;
    FILE *f = open_memstream(&b, len);
    assert_non_null(f);
    if (ref)
        ref_rows(rows, n, f);
    else
        ulp__csv_rows(rows, n, NULL, NULL, f);
    assert_int_equal(fclose(f), 0);
    return b;
}

/* Batches of random rows; each also written in random pieces, as the streamed report does. */
static void test_report_csv_rows__random_rows(void **state)
{
    (void)state;
    enum { BATCH = 60 };
    ulp_diff_row *rows = calloc(BATCH, sizeof *rows);
    row_mem *mem = calloc(BATCH, sizeof *mem);
    assert_non_null(rows);
    assert_non_null(mem);
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + pick(BATCH);
        for (size_t i = 0; i < n; i++)
            any_row(&rows[i], &mem[i]);
        size_t ng, nw, np;
        char *got = text_of(rows, n, 0, &ng);
        char *want = text_of(rows, n, 1, &nw);
        char what[64];
        snprintf(what, sizeof what, "round %d (%zu rows)", round, n);
        assert_same_text(what, "fprintf", got, ng, want, nw);
        char *pieces_text = NULL;
        FILE *f = open_memstream(&pieces_text, &np);
        assert_non_null(f);
        for (size_t i = 0, k; i < n; i += k) {
            k = 1 + pick(8);
            ulp__csv_rows(rows + i, i + k > n ? n - i : k, NULL, NULL, f);
        }
        assert_int_equal(fclose(f), 0);
        assert_same_text(what, "fprintf", pieces_text, np, want, nw);
        free(pieces_text);
        free(got);
        free(want);
    }
    free(rows);
    free(mem);
}

/* Nothing for no rows; a row longer than the writer's buffer. */
static void test_report_csv_rows__empty_and_long(void **state)
{
    (void)state;
    size_t n;
    char *got = text_of(NULL, 0, 0, &n);
    assert_int_equal(n, 0);
    free(got);
    enum { LONG = 100000 };
    char *name = malloc(LONG + 1);
    assert_non_null(name);
    for (size_t i = 0; i < LONG; i++)
        name[i] = "ab\",\n"[i % 5];
    name[LONG] = '\0';
    ulp_diff_row r;
    row_mem mem;
    any_row(&r, &mem);
    r.name = name;
    r.role = name + LONG / 2;
    size_t ng, nw;
    got = text_of(&r, 1, 0, &ng);
    char *want = text_of(&r, 1, 1, &nw);
    assert_same_text("long name", "fprintf", got, ng, want, nw);
    assert_true(nw > LONG);
    free(got);
    free(want);
    free(name);
}

static void check_g17(double v)
{
    char got[40], want[40];
    int nw = snprintf(want, sizeof want, "%.17g", v);
    size_t n = ulp__fmt_g17(got, v, 0);
    if (strcmp(got, want) != 0 || n != (size_t)nw)
        fail_msg("%a: writer '%s', printf '%s'", v, got, want);
}

/* "%.17g" at the edges of the exact range, of each exponent, near ties. */
static void test_report_csv_rows__g17(void **state)
{
    (void)state;
    for (int e = -330; e <= 308; e++) {
        double p = pow(10, e);
        check_g17(p);
        check_g17(-p);
        check_g17(nextafter(p, 0));
        check_g17(nextafter(p, INFINITY));
        check_g17(p * 5);
        check_g17(p * 1.5);
    }
    for (int e = -1074; e <= 1023; e++) {
        check_g17(ldexp(1, e));
        check_g17(-ldexp(1.5, e));
        check_g17(nextafter(ldexp(1, e), 0));
    }
    for (uint32_t f = 0x7f000000; f < 0x7f800000; f += 0x1234) {
        float x;
        memcpy(&x, &f, sizeof x);
        check_g17((double)x);
    }
    for (int i = 0; i < 400000; i++) {
        double v = any_double();
        if (isfinite(v))
            check_g17(v);
        check_g17((double)(next() % 1000000) + 0.5);
        check_g17((double)(next() >> pick(64)));
    }
}

/* ulp__fmt_shape() against snprintf's, every rank, buffers cut short too. */
static void test_report_csv_rows__shapes(void **state)
{
    (void)state;
    for (int i = 0; i < 200000; i++) {
        int64_t shape[ULP_SNAPSHOT_MAX_RANK];
        int ndim = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
        for (int k = 0; k < ndim; k++)
            shape[k] = pick(4) == 0 ? (pick(2) ? INT64_MIN : (int64_t)next()) : (int64_t)pick(5000);
        size_t n = pick(4) == 0 ? pick(40) : 200;
        char got[200], want[200];
        memset(got, 'x', sizeof got);
        memset(want, 'x', sizeof want);
        ulp__fmt_shape(got, n, ndim, shape);
        ref_shape(want, n, ndim, shape);
        if (memcmp(got, want, sizeof got) != 0)
            fail_msg("shape of rank %d into %zu bytes: '%.200s', snprintf '%.200s'", ndim, n, got,
                     want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_csv_rows__random_rows),
        cmocka_unit_test(test_report_csv_rows__empty_and_long),
        cmocka_unit_test(test_report_csv_rows__g17),
        cmocka_unit_test(test_report_csv_rows__shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
