/*
 * The strings of a diff result as the table and Markdown reports show them.
 * Names, labels, paths and /run values are bytes from the files: a newline
 * would split a row, an escape sequence would reach the terminal, a
 * backtick would end a Markdown code span.  They are shown escaped as
 * `ulpprof ls` shows names: \\ \n \t, \xNN for other control bytes and for
 * bytes that are not valid UTF-8, and in Markdown \x60 for a backtick.
 * JSON and CSV quote the bytes themselves and use the result as it is.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/utf8.h"
#include "report_priv.h"

typedef struct display {
    ulp_diff_result r; /* the copy handed to the writer          */
    char **strs;       /* escaped strings it owns                 */
    size_t n, cap;
    int markdown;
    int oom;
    int rows_shared; /* r.rows is the result's own: nothing in it needed escaping */
} display;

/* Keeps p (a string or a kernel list) with d; 0, or -1 (then p is freed). */
static int keep(display *d, void *p)
{
    if (p == NULL) {
        d->oom = 1;
        return -1;
    }
    if (ULP__GROW(d->strs, d->cap, d->n + 1) != 0) {
        free(p);
        d->oom = 1;
        return -1;
    }
    d->strs[d->n++] = p;
    return 0;
}

/* Whether esc() writes byte c (not part of a UTF-8 sequence) escaped. */
static int needs_escape(const display *d, unsigned char c)
{
    return c == '\\' || c < 0x20 || c >= 0x7f || (d->markdown && c == '`');
}

/* Whether s shows as it is: no byte esc() would change. */
static int plain(const display *d, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i];) {
        /* Most bytes of most names: printable ASCII, neither '\\' nor '`'. */
        if (p[i] - 0x20u < 0x5fu && p[i] != '\\' && p[i] != '`') {
            i++;
            continue;
        }
        size_t k = p[i] >= 0x80 ? ulp__utf8_len(p + i) : 0;
        if (k > 0) {
            i += k;
            continue;
        }
        if (needs_escape(d, p[i++]))
            return 0;
    }
    return 1;
}

/* The escaped form of s, kept by d, or s itself when it shows as it is;
 * NULL for NULL (and when out of memory). */
static char *esc(display *d, const char *s)
{
    if (s == NULL)
        return NULL;
    if (plain(d, s))
        return (char *)(uintptr_t)s;
    size_t len = strlen(s);
    char *out = malloc(4 * len + 1), *q = out;
    if (keep(d, out) != 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = p[i] >= 0x80 ? ulp__utf8_len(p + i) : 0;
        if (k > 0) {
            memcpy(q, p + i, k);
            q += k;
            i += k;
            continue;
        }
        unsigned char c = p[i++];
        if (!needs_escape(d, c))
            *q++ = (char)c;
        else if (c == '\\')
            q += sprintf(q, "\\\\");
        else if (c == '\n')
            q += sprintf(q, "\\n");
        else if (c == '\t')
            q += sprintf(q, "\\t");
        else
            q += sprintf(q, "\\x%02x", c);
    }
    *q = '\0';
    return out;
}

/* Whether every name of a kernel list shows as it is. */
static int kernels_plain(const display *d, const ulp_diff_kernel *k, size_t n)
{
    for (size_t i = 0; k != NULL && i < n; i++)
        if (k[i].name != NULL && !plain(d, k[i].name))
            return 0;
    return 1;
}

/* An escaped copy of a kernel list, kept by d; the list itself when it needs none. */
static ulp_diff_kernel *kernels(display *d, const ulp_diff_kernel *k, size_t n)
{
    if (k == NULL || n == 0)
        return NULL;
    if (kernels_plain(d, k, n))
        return (ulp_diff_kernel *)(uintptr_t)k;
    ulp_diff_kernel *c = malloc(n * sizeof *c);
    if (keep(d, c) != 0)
        return NULL;
    memcpy(c, k, n * sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i].name = esc(d, k[i].name);
    return c;
}

ulp_diff_result *ulp__report_display(const ulp_diff_result *r, int markdown)
{
    display *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->markdown = markdown;
    d->r = *r;
    d->r.rows = NULL;
    d->r.logits = NULL;
    d->r.ladder.keys = NULL;
    d->r.path_a = esc(d, r->path_a);
    d->r.path_b = esc(d, r->path_b);
    d->r.label_a = esc(d, r->label_a);
    d->r.label_b = esc(d, r->label_b);
    /* The rows are copied only when a string of one needs escaping (at
     * 1.2 KiB a row, 10,000 rows made 12 MiB).  A streamed result holds
     * only the rows it keeps. */
    size_t nrows = r->streamed ? r->n_kept : r->n_rows;
    int rows_plain = 1;
    /* Rows share their role strings (the result keeps one copy of each):
     * one found plain is not scanned again. */
    const char *role_plain = NULL;
    for (size_t i = 0; i < nrows && rows_plain; i++) {
        const ulp_diff_row *w = &r->rows[i];
        rows_plain = (w->name == NULL || plain(d, w->name)) &&
                     (w->name_b == NULL || plain(d, w->name_b)) &&
                     (w->role == NULL || w->role == role_plain ||
                      (plain(d, w->role) && (role_plain = w->role) != NULL)) &&
                     kernels_plain(d, w->kernels_a, w->n_kernels_a) &&
                     kernels_plain(d, w->kernels_b, w->n_kernels_b);
    }
    if (rows_plain) {
        d->r.rows = r->rows;
        d->rows_shared = 1;
    } else if (nrows > 0 && (d->r.rows = malloc(nrows * sizeof *r->rows)) != NULL) {
        memcpy(d->r.rows, r->rows, nrows * sizeof *r->rows);
        for (size_t i = 0; i < nrows; i++) {
            ulp_diff_row *w = &d->r.rows[i];
            w->name = esc(d, w->name);
            w->name_b = esc(d, w->name_b);
            w->role = esc(d, w->role);
            w->kernels_a = kernels(d, w->kernels_a, w->n_kernels_a);
            w->kernels_b = kernels(d, w->kernels_b, w->n_kernels_b);
        }
    }
    if (r->n_logits > 0 && (d->r.logits = malloc(r->n_logits * sizeof *r->logits)) != NULL) {
        memcpy(d->r.logits, r->logits, r->n_logits * sizeof *r->logits);
        for (size_t i = 0; i < r->n_logits; i++)
            d->r.logits[i].name = esc(d, d->r.logits[i].name);
    }
    size_t nk = r->ladder.n_keys;
    if (nk > 0 && (d->r.ladder.keys = malloc(nk * sizeof *r->ladder.keys)) != NULL) {
        memcpy(d->r.ladder.keys, r->ladder.keys, nk * sizeof *r->ladder.keys);
        for (size_t i = 0; i < nk; i++) {
            ulp_diff_run_key *k = &d->r.ladder.keys[i];
            k->key = esc(d, k->key);
            k->value_a = esc(d, k->value_a);
            k->value_b = esc(d, k->value_b);
        }
    }
    if (d->oom || (nrows > 0 && d->r.rows == NULL) || (r->n_logits > 0 && d->r.logits == NULL) ||
        (nk > 0 && d->r.ladder.keys == NULL)) {
        ulp__report_display_free(&d->r);
        return NULL;
    }
    return &d->r;
}

void ulp__report_display_free(ulp_diff_result *r)
{
    if (r == NULL)
        return;
    display *d = (display *)(void *)((char *)r - offsetof(display, r));
    for (size_t i = 0; i < d->n; i++)
        free(d->strs[i]);
    free(d->strs);
    if (!d->rows_shared)
        free(d->r.rows);
    free(d->r.logits);
    free(d->r.ladder.keys);
    free(d);
}
