/*
 * Numbers as the table and Markdown reports print them, without printf(3)
 * where the value allows: 10,000 rows of small captures spent a fifth of
 * `ulpprof diff`'s time in vfprintf, nearly all of it on zeros and small
 * integers.  Each function writes exactly what its printf format would
 * (tests/unit/test_report_num.c compares them over many values) and falls
 * back to snprintf for the rest.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_priv.h"

size_t ulp__fmt_u64(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

size_t ulp__fmt_i64(char *buf, int64_t v)
{
    if (v >= 0)
        return ulp__fmt_u64(buf, (uint64_t)v);
    buf[0] = '-';
    return 1 + ulp__fmt_u64(buf + 1, -(uint64_t)v);
}

/* Integers below this print exactly, digit by digit, as "%.0f" and "%.2f" print them. */
#define EXACT_INT 1e15

void ulp__fmt_fixed2(char *buf, size_t n, double v)
{
    if (n >= 24 && v == floor(v) && fabs(v) < EXACT_INT) {
        size_t k = 0;
        if (signbit(v)) /* -0.0 too: "%.2f" prints "-0.00" */
            buf[k++] = '-';
        k += ulp__fmt_u64(buf + k, (uint64_t)fabs(v));
        memcpy(buf + k, ".00", 4);
        return;
    }
    snprintf(buf, n, "%.2f", v);
}

void ulp__fmt_num(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (isinf(v))
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (v == 0 && n >= 2)
        memcpy(buf, "0", 2);
    else if (v == 0)
        snprintf(buf, n, "0");
    else if (v == floor(v) && fabs(v) < 1e7) {
        if (n >= 24) {
            size_t k = 0;
            if (v < 0)
                buf[k++] = '-';
            ulp__fmt_u64(buf + k, (uint64_t)fabs(v));
        } else {
            snprintf(buf, n, "%.0f", v);
        }
    } else {
        snprintf(buf, n, "%.3g", v);
    }
}
