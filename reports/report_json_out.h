/*
 * The one JSON writer of the reports library: it writes as it goes, byte
 * for byte what jansson's json_dumps(JSON_INDENT(2) | JSON_PRESERVE_ORDER |
 * JSON_REAL_PRECISION(17)) writes for the same values in the same order,
 * except that a string byte that is not part of valid UTF-8 comes out as
 * \udcXX (jansson refuses such a string).  It allocates nothing: a report
 * is never a tree in memory, and cannot come out short for lack of it.
 * The diff and ladder reports are written with it, and the public
 * ulp_json_* writer (ulpprof/report.h) wraps it.  Not installed.
 */
#ifndef ULPPROF_REPORTS_REPORT_JSON_OUT_H
#define ULPPROF_REPORTS_REPORT_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ULP__JW_DEPTH 16 /* nesting levels at most (a row goes to 6)   */

typedef struct ulp__jw {
    FILE *f;
    int depth;               /* of the container being written         */
    size_t n[ULP__JW_DEPTH]; /* values written so far at each depth    */
    size_t used;             /* bytes of b[] not yet written to f      */
    char b[1 << 14];
} ulp__jw;

/* Starts writing to f at `depth` (the rows of the report sit at 2). */
void ulp__jw_init(ulp__jw *w, FILE *f, int depth);
/* Writes what is buffered to f. */
void ulp__jw_flush(ulp__jw *w);
/* n bytes as they are: into the buffer where they fit (inline: the CSV
 * rows call it for each field and comma), else ulp__jw_raw_slow. */
void ulp__jw_raw_slow(ulp__jw *w, const char *s, size_t n);
static inline void ulp__jw_raw(ulp__jw *w, const char *s, size_t n)
{
    if (n <= sizeof w->b - w->used) {
        memcpy(w->b + w->used, s, n);
        w->used += n;
        return;
    }
    ulp__jw_raw_slow(w, s, n);
}

/* Containers; a value in an object goes after ulp__jw_key(), one in an
 * array after ulp__jw_item(). */
void ulp__jw_open(ulp__jw *w, char brace);  /* '{' or '['                        */
void ulp__jw_close(ulp__jw *w, char brace); /* '}' or ']'                       */
/* key: plain ASCII, no escapes (inline: a row writes some fifty of them,
 * mostly literals whose length the compiler knows). */
void ulp__jw_key_slow(ulp__jw *w, const char *key);
static inline void ulp__jw_key(ulp__jw *w, const char *key)
{
    size_t n = strlen(key), k = (size_t)(2 * w->depth);
    /* ",\n", at most 16 spaces of indentation, the quoted key and ": ". */
    if (k > 16 || n + 22 > sizeof w->b - w->used) {
        ulp__jw_key_slow(w, key);
        return;
    }
    char *p = w->b + w->used;
    if (w->n[w->depth]++ != 0)
        *p++ = ',';
    *p++ = '\n';
    memcpy(p, "                ", 16);
    p += k;
    *p++ = '"';
    memcpy(p, key, n);
    memcpy(p + n, "\": ", 3);
    w->used = (size_t)(p + n + 3 - w->b);
}
void ulp__jw_key_str(ulp__jw *w, const char *key); /* any key, escaped as a string */
void ulp__jw_item(ulp__jw *w);

/* Values. */
void ulp__jw_null(ulp__jw *w);
void ulp__jw_bool(ulp__jw *w, int v);
void ulp__jw_int(ulp__jw *w, int64_t v);
void ulp__jw_u64(ulp__jw *w, uint64_t v);
/* json_real(v): v must be finite (jansson refuses the others). */
void ulp__jw_real(ulp__jw *w, double v);
/* A finite v as a real, else null. */
void ulp__jw_num(ulp__jw *w, double v);
/* A string, \udcXX for each byte that is not UTF-8; null for NULL. */
void ulp__jw_str(ulp__jw *w, const char *s);

/* A key and its value, as the documents' fields are written. */
static inline void ulp__jw_kstr(ulp__jw *w, const char *key, const char *s)
{
    ulp__jw_key(w, key);
    ulp__jw_str(w, s); /* null for NULL */
}
static inline void ulp__jw_kint(ulp__jw *w, const char *key, int64_t v)
{
    ulp__jw_key(w, key);
    ulp__jw_int(w, v);
}
/* v, or null when `has` is 0. */
static inline void ulp__jw_kint_or_null(ulp__jw *w, const char *key, int has, int64_t v)
{
    ulp__jw_key(w, key);
    if (has)
        ulp__jw_int(w, v);
    else
        ulp__jw_null(w);
}
/* `key` and an object opened ('{'), 1; or null when `has` is 0, 0. */
static inline int ulp__jw_kobject_or_null(ulp__jw *w, const char *key, int has)
{
    ulp__jw_key(w, key);
    if (!has) {
        ulp__jw_null(w);
        return 0;
    }
    ulp__jw_open(w, '{');
    return 1;
}
static inline void ulp__jw_ku64(ulp__jw *w, const char *key, uint64_t v)
{
    ulp__jw_key(w, key);
    ulp__jw_u64(w, v);
}
/* A finite v, else null (JSON cannot spell the others). */
static inline void ulp__jw_knum(ulp__jw *w, const char *key, double v)
{
    ulp__jw_key(w, key);
    ulp__jw_num(w, v);
}
static inline void ulp__jw_kbool(ulp__jw *w, const char *key, int v)
{
    ulp__jw_key(w, key);
    ulp__jw_bool(w, v);
}

/* report_json_row.c: one row of the report's "rows", from its '{' to its '}'. */
struct ulp_diff_row;
void ulp__json_row(ulp__jw *w, const struct ulp_diff_row *row);
/* Its "kernels_a", "kernels_b", "gemms_a", "gemms_b" keys, those the row has. */
void ulp__json_kernels(ulp__jw *w, const struct ulp_diff_row *row);

/* report_json.c: the diff report's document around its rows, from its '{'
 * up to the key "rows" (flushed), and after the rows to its '}' and the
 * newline (flushed).  The rows go to the same FILE in between. */
struct ulp_diff_result;
void ulp__json_head(ulp__jw *w, const struct ulp_diff_result *r);
void ulp__json_tail(ulp__jw *w, const struct ulp_diff_result *r, size_t not_identical);

#endif /* ULPPROF_REPORTS_REPORT_JSON_OUT_H */
