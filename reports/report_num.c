/*
 * Numbers as the table and Markdown reports print them, without printf(3)
 * where the value allows: 10,000 rows of small captures spent a fifth of
 * `ulpprof diff`'s time in vfprintf, nearly all of it on zeros and small
 * integers.  Each function writes exactly what its printf format would
 * (tests/unit/test_report_num.c compares them over many values) and falls
 * back to snprintf for the rest.  "%.17g" (the CSV report's reals, and
 * the JSON reports' after jansson's changes) is computed exactly in 128-bit
 * integers and rounded as printf rounds; ties and values out of that range
 * go to snprintf.
 */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_priv.h"

/* "00" .. "99". */
static const char two_digits[] = "00010203040506070809"
                                 "10111213141516171819"
                                 "20212223242526272829"
                                 "30313233343536373839"
                                 "40414243444546474849"
                                 "50515253545556575859"
                                 "60616263646566676869"
                                 "70717273747576777879"
                                 "80818283848586878889"
                                 "90919293949596979899";

size_t ulp__fmt_u64(char *buf, uint64_t v)
{
    /* The length first, then two digits at a time from the end: a report
     * writes some twenty integers a row. */
    size_t n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    char *p = buf + n;
    *p = '\0';
    while (v >= 100) {
        const char *q = two_digits + 2 * (v % 100);
        v /= 100;
        *--p = q[1];
        *--p = q[0];
    }
    if (v >= 10) {
        *--p = two_digits[2 * v + 1];
        *--p = two_digits[2 * v];
    } else {
        *--p = (char)('0' + v);
    }
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

/* jansson's jsonp_dtostr() after "%.17g": the locale's decimal point as
 * '.', ".0" when there is no '.' nor 'e', the exponent's '+' and leading
 * zeros dropped. */
static size_t dtostr_fix(char *buf, size_t len)
{
    const char *point = localeconv()->decimal_point;
    if (*point != '.') {
        char *pos = strchr(buf, *point);
        if (pos != NULL)
            *pos = '.';
    }
    if (strchr(buf, '.') == NULL && strchr(buf, 'e') == NULL) {
        memcpy(buf + len, ".0", 3);
        len += 2;
    }
    char *start = strchr(buf, 'e');
    if (start != NULL) {
        start++;
        char *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - buf) + 1);
            len -= (size_t)(end - start);
        }
    }
    return len;
}

typedef unsigned __int128 u128;

/* 10^k for k in [0, 22] (digits17() asks for no other). */
#define E19 ((u128)10000000000000000000ULL)
static const u128 pow10_table[23] = {
    1ULL,
    10ULL,
    100ULL,
    1000ULL,
    10000ULL,
    100000ULL,
    1000000ULL,
    10000000ULL,
    100000000ULL,
    1000000000ULL,
    10000000000ULL,
    100000000000ULL,
    1000000000000ULL,
    10000000000000ULL,
    100000000000000ULL,
    1000000000000000ULL,
    10000000000000000ULL,
    100000000000000000ULL,
    1000000000000000000ULL,
    E19,
    E19 * 10,
    E19 * 100,
    E19 * 1000,
};

static u128 pow10_128(int k)
{
    return pow10_table[k];
}

/*
 * |v| to 17 significant digits, *q in [1e16, 1e17) and *e10 the decimal
 * exponent of its first digit, rounded to nearest exactly as printf rounds;
 * 0 when v is out of the range computed exactly in 128 bits or falls on a
 * tie (printf then decides).
 */
static int digits17(double v, uint64_t *q, int *e10)
{
    double a = fabs(v);
    if (!(a >= 1e-6 && a < 0x1p128)) /* 0x1p128: float's and bf16's huge values in */
        return 0;
    /* From the bits (a is normal): a = fr * 2^be, fr in [0.5, 1), as frexp. */
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int be = (int)(bits >> 52) - 1022;
    uint64_t m = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    int e = be - 53; /* a = m * 2^e exactly */
    /* floor(log10(a)), or one less (a >= 2^(be - 1)): the loop moves it up. */
    int x = (int)floor((double)(be - 1) * 0.30102999566398119521);
    for (int tries = 0; tries < 3; tries++) {
        int k = x - 16;
        if (k < -22 || k > 22 || (k > 0 && e < 0))
            return 0;         /* past 128 bits (never for a in range) */
        u128 quo, rem, half2; /* half2: the divisor; rem compared doubled */
        if (k <= 0) {
            u128 num = (u128)m * pow10_128(-k);
            if (e >= 0) {
                quo = num << e;
                rem = 0;
                half2 = 1;
            } else {
                quo = num >> -e;
                rem = num & (((u128)1 << -e) - 1);
                half2 = (u128)1 << -e;
            }
        } else {
            u128 num = (u128)m << e, d = pow10_128(k);
            quo = num / d;
            rem = num % d;
            half2 = d;
        }
        if (quo >= (u128)100000000000000000ULL) {
            x++;
            continue;
        }
        if (quo < (u128)10000000000000000ULL) {
            x--;
            continue;
        }
        if (2 * rem == half2)
            return 0;
        uint64_t d = (uint64_t)quo + (2 * rem > half2);
        if (d == 100000000000000000ULL) {
            d = 10000000000000000ULL;
            x++;
        }
        *q = d;
        *e10 = x;
        return 1;
    }
    return 0;
}

/* "%.17g" of v by snprintf, and for JSON jansson's changes to it. */
static size_t g17_slow(char *buf, double v, int json)
{
    int n = snprintf(buf, 28, "%.17g", v);
    return json ? dtostr_fix(buf, (size_t)n) : (size_t)n;
}

/* The exponent of a "%.17g" in scientific notation: printf's "e+05", "e-300"
 * (two digits at least, a sign), or jansson's "e5", "e-300". */
static char *g17_exponent(char *p, int x, int json)
{
    *p++ = 'e';
    if (x < 0)
        *p++ = '-';
    else if (!json)
        *p++ = '+';
    unsigned ax = (unsigned)(x < 0 ? -x : x);
    if (!json && ax < 10)
        *p++ = '0';
    return p + ulp__fmt_u64(p, ax);
}

size_t ulp__fmt_g17(char *buf, double v, int json)
{
    if (v == 0) {
        const char *z = signbit(v) ? (json ? "-0.0" : "-0") : (json ? "0.0" : "0");
        size_t n = strlen(z);
        memcpy(buf, z, n + 1);
        return n;
    }
    uint64_t q;
    int x;
    if (!digits17(v, &q, &x))
        return g17_slow(buf, v, json);
    char d[18];
    /* The 17 digits, two at a time from the end. */
    uint64_t t = q;
    d[16] = (char)('0' + t % 10);
    t /= 10;
    for (int k = 14; k >= 0; k -= 2) {
        memcpy(d + k, two_digits + 2 * (t % 100), 2);
        t /= 100;
    }
    d[17] = '\0';
    int nd = 17;
    while (d[nd - 1] == '0')
        nd--;
    char *p = buf;
    if (v < 0)
        *p++ = '-';
    if (x < -4 || x >= 17) {
        *p++ = d[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, d + 1, (size_t)nd - 1);
            p += nd - 1;
        }
        p = g17_exponent(p, x, json);
    } else if (x >= 0) {
        memcpy(p, d, (size_t)x + 1);
        p += x + 1;
        if (nd > x + 1) {
            *p++ = '.';
            memcpy(p, d + x + 1, (size_t)(nd - x - 1));
            p += nd - x - 1;
        } else if (json) {
            memcpy(p, ".0", 2); /* jansson marks a real that looks like an integer */
            p += 2;
        }
    } else {
        memcpy(p, "0.", 2);
        p += 2;
        memset(p, '0', (size_t)(-x - 1));
        p += -x - 1;
        memcpy(p, d, (size_t)nd);
        p += nd;
    }
    *p = '\0';
    if (!json && strchr(buf, '.') != NULL && strcmp(localeconv()->decimal_point, ".") != 0)
        return g17_slow(buf, v, 0); /* printf writes the locale's point */
    return (size_t)(p - buf);
}
