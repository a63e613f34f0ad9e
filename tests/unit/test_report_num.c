/*
 * reports/report_num.c: the hand-written number formatting of the table and
 * Markdown reports prints exactly what printf(3) prints with the format it
 * replaces, over the values the reports meet (zeros, integers, the ULP and
 * |a-b| figures of every dtype) and over random bit patterns of doubles.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "reports/report_priv.h"
#define TEST_RNG_SEED 0x9E3779B97F4A7C15ULL
#include "test_rng.h"

/* printf's answer for ulp__fmt_num: the format the function documents. */
static void ref_num(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (v == 0)
        snprintf(buf, n, "0");
    else if (v == floor(v) && fabs(v) < 1e7)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.3g", v);
}

static void check_double(double v)
{
    char got[64], want[64];
    memset(got, 'x', sizeof got);
    ulp__fmt_num(got, sizeof got, v);
    ref_num(want, sizeof want, v);
    if (strcmp(got, want) != 0)
        fail_msg("fmt_num(%a): '%s', printf '%s'", v, got, want);
    ulp__fmt_fixed2(got, sizeof got, v);
    snprintf(want, sizeof want, "%.2f", v);
    if (strcmp(got, want) != 0)
        fail_msg("fmt_fixed2(%a): '%s', printf '%s'", v, got, want);
    /* The table's 24-byte buffers, and one too short for the fast path. */
    char small[24], ref24[24];
    ulp__fmt_num(small, sizeof small, v);
    ref_num(ref24, sizeof ref24, v);
    assert_string_equal(small, ref24);
    ulp__fmt_fixed2(small, 8, v);
    snprintf(ref24, 8, "%.2f", v);
    assert_string_equal(small, ref24);
}

static void check_int(int64_t v)
{
    char got[32], want[32];
    size_t n = ulp__fmt_i64(got, v);
    snprintf(want, sizeof want, "%" PRId64, v);
    assert_string_equal(got, want);
    assert_int_equal(n, strlen(want));
    n = ulp__fmt_u64(got, (uint64_t)v);
    snprintf(want, sizeof want, "%" PRIu64, (uint64_t)v);
    assert_string_equal(got, want);
    assert_int_equal(n, strlen(want));
}

static void test_report_num__edges(void **state)
{
    (void)state;
    const double v[] = {0.0,         -0.0,      1.0,       -1.0,     0.5,
                        0.005,       0.015,     0.125,     1.005,    2.675,
                        99999.0,     1e5,       1e7 - 1,   1e7,      -1e7 + 1,
                        1e15 - 1,    1e15,      -1e15 + 1, 1e15 + 2, 9007199254740992.0,
                        1e300,       DBL_MAX,   -DBL_MAX,  DBL_MIN,  DBL_TRUE_MIN,
                        INFINITY,    -INFINITY, NAN,       -NAN,     1.33e36,
                        131072.0,    1.5e-36,   0.999999,  1e-5,     123456.789,
                        4294967296.0};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        check_double(v[i]);
    const int64_t k[] = {0, 1, -1, 9, 10, 99, 100, INT64_MAX, INT64_MIN, INT64_MIN + 1, 1000000007};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        check_int(k[i]);
}

/* Every integer up to 2^20, and around each power of two and of ten up to 2^63. */
static void test_report_num__integers(void **state)
{
    (void)state;
    for (int64_t v = -1000; v <= (1 << 20); v++) {
        check_int(v);
        check_double((double)v);
    }
    for (int e = 0; e < 64; e++) {
        for (int d = -3; d <= 3; d++) {
            uint64_t u = ((uint64_t)1 << e) + (uint64_t)(int64_t)d;
            check_int((int64_t)u);
            check_double((double)u);
            check_double(-(double)u);
        }
    }
    for (uint64_t p = 1; p <= 10000000000000000000ULL; p *= 10) {
        for (int d = -2; d <= 2; d++)
            check_int((int64_t)(p + (uint64_t)(int64_t)d));
        if (p == 10000000000000000000ULL)
            break;
    }
    for (double p = 1; p < 1e20; p *= 10)
        for (int d = -2; d <= 2; d++) {
            check_double(p + d);
            check_double(nextafter(p, 0) + d);
        }
}

/* ULP means and ratios as the metrics make them, and random doubles. */
static void test_report_num__random(void **state)
{
    (void)state;
    for (int i = 0; i < 100000; i++) {
        uint64_t bits = next();
        double v;
        memcpy(&v, &bits, sizeof v);
        check_double(v);
        check_int((int64_t)next());
        /* sum / count with small counts: the means of the ULP columns. */
        double mean = (double)(next() % 100000) / (double)(1 + next() % 300);
        check_double(mean);
        check_double((double)(next() % 4096) * 0.25);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_num__edges),
        cmocka_unit_test(test_report_num__integers),
        cmocka_unit_test(test_report_num__random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
