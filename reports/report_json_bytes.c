/*
 * Strings that are not valid UTF-8 in the JSON report (names, labels, /run
 * keys and values are bytes in HDF5).  jansson holds only UTF-8, and
 * dropping or replacing such a string would lose or merge names.  Each byte
 * that is not part of valid UTF-8 is written as the escape \udcXX (XX its
 * value), Python's "surrogateescape" convention: json.loads() gives a str
 * whose .encode("utf-8", "surrogateescape") is the original bytes.  Valid
 * UTF-8 is written as before.
 *
 * How: the byte goes into the jansson string as U+0000 followed by its two
 * hex digits (a C string never holds U+0000, so the mark is unambiguous),
 * which the dumper writes as \u0000XX; ulp__json_unmark() turns that into
 * \udcXX.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "report_priv.h"
#include "ulpprof/report.h"

/* The marked form of s in a new buffer (*len bytes), or NULL when s is valid UTF-8. */
static char *marked(const char *s, size_t *len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t bad = 0, n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = ulp__utf8_len(p + i);
        bad += k == 0;
        i += k ? k : 1;
    }
    if (bad == 0)
        return NULL;
    char *out = malloc(n + 2 * bad + 1), *q = out;
    if (out == NULL) {
        ulp__json_lose();
        return NULL;
    }
    for (size_t i = 0; i < n;) {
        size_t k = ulp__utf8_len(p + i);
        if (k == 0) {
            static const char hex[] = "0123456789abcdef";
            *q++ = '\0';
            *q++ = hex[p[i] >> 4];
            *q++ = hex[p[i] & 15];
            i++;
        } else {
            memcpy(q, p + i, k);
            q += k;
            i += k;
        }
    }
    *len = (size_t)(q - out);
    return out;
}

json_t *ulp_json_str(const char *s)
{
    if (s == NULL)
        return json_null();
    size_t len = 0;
    char *m = marked(s, &len);
    json_t *j = m != NULL ? json_stringn(m, len) : json_string(s);
    free(m);
    return j != NULL ? j : json_null();
}

int ulp_json_set(json_t *o, const char *key, json_t *v)
{
    size_t len = 0;
    char *m = marked(key, &len);
    int rc = m != NULL ? json_object_setn_new(o, m, len, v) : json_object_set_new(o, key, v);
    free(m);
    return rc;
}

char *ulp__json_unmark(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(n + 1), *q = out;
    if (out == NULL)
        return NULL;
    for (const char *p = text; *p;) {
        /* Every backslash in the dump starts an escape: skip escapes whole. */
        if (p[0] == '\\' && strncmp(p + 1, "u0000", 5) == 0 && p[6] && p[7]) {
            memcpy(q, "\\udc", 4);
            q[4] = p[6];
            q[5] = p[7];
            q += 6;
            p += 8;
        } else if (p[0] == '\\' && p[1]) {
            *q++ = *p++;
            *q++ = *p++;
        } else {
            *q++ = *p++;
        }
    }
    *q = '\0';
    return out;
}

int ulp_json_print(json_t *doc, FILE *f)
{
    /* A document built while an allocation failed lacks what it was for. */
    static _Thread_local unsigned long printed;
    unsigned long lost = ulp__json_lost();
    int whole = lost == printed;
    printed = lost;
    if (!whole)
        return -1;
    char *text = json_dumps(doc, JSON_INDENT(2));
    if (ulp__json_lost() != lost) { /* the dump lost a piece: jansson may not say */
        printed = ulp__json_lost();
        free(text);
        return -1;
    }
    char *plain = text != NULL ? ulp__json_unmark(text) : NULL;
    free(text);
    if (plain == NULL)
        return -1;
    fputs(plain, f);
    fputc('\n', f);
    free(plain);
    return 0;
}
