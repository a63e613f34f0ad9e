/*
 * The JSON writer of report_json_out.h: jansson 2.14's dump (dump.c,
 * strconv.c) rewritten to write values as they come.  What it copies:
 *   - indentation: a container's first value on a new line, indented two
 *     spaces a level; the others after ",\n"; the closing bracket on its
 *     own line, or right after the opening one when the container is empty;
 *     ": " after a key;
 *   - strings: \" \\ \b \f \n \r \t, other bytes below 0x20 as \u00XX
 *     (upper-case hex), everything else as it is ('/' and non-ASCII too);
 *     a byte that is not part of valid UTF-8 as \udcXX (lower-case hex;
 *     jansson refuses such strings);
 *   - integers as "%lld"; reals as "%.17g", with ".0" appended when that
 *     has neither '.' nor 'e', and the exponent without '+' or leading
 *     zeros ("1e+300" -> "1e300", "1e-05" -> "1e-5") (ulp__fmt_g17(),
 *     report_num.c).
 * tests/unit/test_report_json_rows.c holds the output against jansson's.
 */
#include <math.h>
#include <string.h>

#include "common/utf8.h"
#include "report_json_out.h"
#include "report_priv.h"

void ulp__jw_init(ulp__jw *w, FILE *f, int depth)
{
    w->f = f;
    w->depth = depth;
    w->used = 0;
    memset(w->n, 0, sizeof w->n);
}

void ulp__jw_flush(ulp__jw *w)
{
    if (w->used != 0)
        fwrite(w->b, 1, w->used, w->f);
    w->used = 0;
}

/* Room for n more bytes in b[] (n much smaller than b[]). */
static inline char *room(ulp__jw *w, size_t n)
{
    if (n > sizeof w->b - w->used)
        ulp__jw_flush(w);
    return w->b + w->used;
}

void ulp__jw_raw_slow(ulp__jw *w, const char *s, size_t n)
{
    if (n > sizeof w->b / 2) {
        ulp__jw_flush(w);
        fwrite(s, 1, n, w->f);
        return;
    }
    memcpy(room(w, n), s, n);
    w->used += n;
}

static const char spaces[] = "                                                                ";

/* A line break and the indentation of `depth`, after a comma when `comma`. */
static void newline(ulp__jw *w, int depth, int comma)
{
    size_t k = (size_t)(2 * depth);
    if (k > sizeof spaces - 1)
        k = sizeof spaces - 1; /* deeper than any report goes */
    char *p = room(w, k + 2);
    if (comma)
        *p++ = ',';
    *p++ = '\n';
    memcpy(p, spaces, k);
    w->used = (size_t)(p + k - w->b);
}

void ulp__jw_item(ulp__jw *w)
{
    newline(w, w->depth, w->n[w->depth]++ != 0);
}

void ulp__jw_key_slow(ulp__jw *w, const char *key)
{
    /* The separator, the indentation and the key in one go: a row is
     * some fifty keys. */
    size_t n = strlen(key), k = (size_t)(2 * w->depth);
    if (k > sizeof spaces - 1)
        k = sizeof spaces - 1;
    char *p = room(w, n + k + 6);
    if (w->n[w->depth]++ != 0)
        *p++ = ',';
    *p++ = '\n';
    memcpy(p, spaces, k);
    p += k;
    *p++ = '"';
    memcpy(p, key, n);
    memcpy(p + n, "\": ", 3);
    w->used = (size_t)(p + n + 3 - w->b);
}

void ulp__jw_key_str(ulp__jw *w, const char *key)
{
    newline(w, w->depth, w->n[w->depth]++ != 0);
    ulp__jw_str(w, key);
    ulp__jw_raw(w, ": ", 2);
}

void ulp__jw_open(ulp__jw *w, char brace)
{
    ulp__jw_raw(w, &brace, 1);
    w->n[++w->depth] = 0;
}

void ulp__jw_close(ulp__jw *w, char brace)
{
    if (w->n[w->depth] != 0)
        newline(w, w->depth - 1, 0);
    ulp__jw_raw(w, &brace, 1);
    w->depth--;
}

void ulp__jw_null(ulp__jw *w)
{
    ulp__jw_raw(w, "null", 4);
}

void ulp__jw_bool(ulp__jw *w, int v)
{
    if (v)
        ulp__jw_raw(w, "true", 4);
    else
        ulp__jw_raw(w, "false", 5);
}

void ulp__jw_int(ulp__jw *w, int64_t v)
{
    char *p = room(w, 24);
    if (v >= 0 && v < 10) { /* most counts of a row: 0 */
        *p = (char)('0' + v);
        w->used++;
    } else {
        w->used += ulp__fmt_i64(p, v);
    }
}

void ulp__jw_u64(ulp__jw *w, uint64_t v)
{
    char *p = room(w, 24);
    if (v < 10) {
        *p = (char)('0' + v);
        w->used++;
    } else {
        w->used += ulp__fmt_u64(p, v);
    }
}

/* Bytes a string may hold as they are: not a quote, a backslash, a control
 * character, nor the start of a multi-byte sequence (checked apart). */
static int plain_byte(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

static void str_escape(ulp__jw *w, const unsigned char *p, size_t *i)
{
    static const char hex[] = "0123456789abcdef", HEX[] = "0123456789ABCDEF";
    unsigned char c = p[*i];
    char *o = room(w, 8);
    size_t k = c < 0x80 ? 1 : ulp__utf8_len(p + *i);
    if (k > 1) {
        memcpy(o, p + *i, k); /* valid UTF-8, kept */
        w->used += k;
        *i += k;
        return;
    }
    const char *two = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : NULL;
    if (two != NULL) {
        memcpy(o, two, 2);
        w->used += 2;
    } else if (c < 0x20) {
        memcpy(o, "\\u00", 4);
        o[4] = HEX[c >> 4];
        o[5] = HEX[c & 15];
        w->used += 6;
    } else {
        memcpy(o, "\\udc", 4); /* not UTF-8: its byte, surrogateescape */
        o[4] = hex[c >> 4];
        o[5] = hex[c & 15];
        w->used += 6;
    }
    *i += 1;
}

void ulp__jw_str(ulp__jw *w, const char *s)
{
    if (s == NULL) {
        ulp__jw_null(w);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    ulp__jw_raw(w, "\"", 1);
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (plain_byte(p[j]))
            j++;
        ulp__jw_raw(w, s + i, j - i);
        i = j;
        if (p[i] == '\0')
            break;
        str_escape(w, p, &i);
    }
    ulp__jw_raw(w, "\"", 1);
}

void ulp__jw_real(ulp__jw *w, double v)
{
    w->used += ulp__fmt_g17(room(w, 32), v, 1);
}

void ulp__jw_num(ulp__jw *w, double v)
{
    if (isfinite(v))
        ulp__jw_real(w, v);
    else
        ulp__jw_null(w);
}
