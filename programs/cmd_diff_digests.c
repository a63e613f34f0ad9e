/*
 * `ulpprof diff A B` when a side holds row digests only (FORMAT.md,
 * "Digests"): which (capture, request, position) rows differ, the first
 * in the order A wrote its captures, and the selection to capture in full.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/digest.h"
#include "ulpprof/dtype.h"
#include "ulpprof/snapshot.h"

/* One fed token: the capture's name index, its key, the token and its capture's step. */
typedef struct fed {
    size_t name;
    int64_t request, position, token, step;
    int has_step;
} fed;

typedef struct fed_side {
    fed *v;
    size_t n, cap;
    const char **names;
    size_t nnames, names_cap;
} fed_side;

/* The index of `name` in the names both sides share (A's and B's names in one list). */
static size_t name_index(const char ***names, size_t *n, size_t *cap, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*names)[i], name) == 0)
            return i;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 4;
        const char **q = realloc(*names, c * sizeof(*q));
        if (q == NULL)
            return SIZE_MAX;
        *names = q;
        *cap = c;
    }
    (*names)[*n] = name;
    return (*n)++;
}

static int fed_cmp(const void *x, const void *y)
{
    const fed *a = x, *b = y;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    if (a->position != b->position)
        return a->position < b->position ? -1 : 1;
    return 0;
}

static int64_t read_int(const unsigned char *p, const ulp_dtype_info *t, int is_unsigned)
{
    if (t->size == 8) {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    if (t->size == 4) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    if (t->size == 2) {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    return is_unsigned ? (int64_t)p[0] : (int64_t)(int8_t)p[0];
}

/* The fed token ids of `path` (role input, an integer dtype, positions, one element per row). */
static int fed_load(const char *path, fed_side *f, const char ***names, size_t *nn, size_t *ncap,
                    ulp_snapshot **snap)
{
    ulp_error err;
    if (ulp_snapshot_open(path, snap, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return -1;
    }
    for (size_t i = 0; i < ulp_snapshot_capture_count(*snap); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(*snap, i);
        const ulp_dtype_info *t = ulp_dtype_get(c->dtype);
        if (strcmp(c->role, "input") != 0 || t == NULL || t->is_float || c->positions == NULL ||
            c->rows != c->elements || c->elements == 0)
            continue;
        size_t id = name_index(names, nn, ncap, c->name);
        unsigned char *buf = malloc((size_t)c->elements * t->size);
        if (id == SIZE_MAX || buf == NULL) {
            free(buf);
            cli_error("out of memory");
            return -1;
        }
        if (ulp_snapshot_read(*snap, i, 0, c->elements, buf, &err) != ULP_OK) {
            free(buf);
            cli_error("%s", err.msg);
            return -1;
        }
        for (uint64_t r = 0; r < c->rows; r++) {
            if (f->n == f->cap) {
                size_t cap = f->cap ? 2 * f->cap : 64;
                fed *q = realloc(f->v, cap * sizeof(*q));
                if (q == NULL) {
                    free(buf);
                    cli_error("out of memory");
                    return -1;
                }
                f->v = q;
                f->cap = cap;
            }
            f->v[f->n++] = (fed){id,
                                 c->requests ? c->requests[r] : 0,
                                 c->positions[r],
                                 read_int(buf + r * t->size, t, c->dtype == ULP_DTYPE_U8),
                                 c->step,
                                 c->has_step};
        }
        free(buf);
    }
    if (f->n > 1) /* f->v is NULL when no capture fed token ids */
        qsort(f->v, f->n, sizeof(fed), fed_cmp);
    return 0;
}

/* Per (name, request), the first position both sides fed with different tokens: A's row. */
typedef struct part {
    const fed *a, *b;
} part;

static size_t find_parts(const fed_side *a, const fed_side *b, part **out)
{
    size_t i = 0, j = 0, n = 0;
    *out = NULL;
    while (i < a->n && j < b->n) {
        int c = fed_cmp(&a->v[i], &b->v[j]);
        if (c < 0) {
            i++;
            continue;
        }
        if (c > 0) {
            j++;
            continue;
        }
        const fed *x = &a->v[i], *y = &b->v[j];
        if (x->token != y->token && (n == 0 || (*out)[n - 1].a->name != x->name ||
                                     (*out)[n - 1].a->request != x->request)) {
            part *q = realloc(*out, (n + 1) * sizeof(*q));
            if (q == NULL)
                return n;
            *out = q;
            (*out)[n++] = (part){x, y};
        }
        i++, j++;
    }
    return n;
}

static void selection(FILE *out, const ulp_digest_name *n)
{
    for (size_t k = 0; k < n->nranges; k++)
        fprintf(out, "%s%s@%lld:%lld-%lld", k ? "," : "", n->name, (long long)n->ranges[k].request,
                (long long)n->ranges[k].first, (long long)n->ranges[k].last);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

static void print_json(FILE *out, const char *a, const char *b, const ulp_digest_result *r,
                       const part *parts, size_t nparts, const char **names)
{
    fprintf(out, "{\"format\": \"ulpprof-digest-diff\", \"format_version\": 1, \"a\": ");
    json_str(out, a);
    fprintf(out, ", \"b\": ");
    json_str(out, b);
    fprintf(out, ", \"digests_a\": %s, \"digests_b\": %s, \"identical\": %s, \"captures\": [",
            r->digests_a ? "true" : "false", r->digests_b ? "true" : "false",
            r->identical ? "true" : "false");
    for (size_t i = 0; i < r->nnames; i++) {
        const ulp_digest_name *n = &r->names[i];
        fprintf(out, "%s{\"name\": ", i ? ", " : "");
        json_str(out, n->name);
        fprintf(out,
                ", \"rows_compared\": %llu, \"rows_differing\": %llu, \"only_in_a\": %llu, "
                "\"only_in_b\": %llu, \"first_differing\": ",
                (unsigned long long)n->compared, (unsigned long long)n->differing,
                (unsigned long long)n->only_a, (unsigned long long)n->only_b);
        if (n->has_first)
            fprintf(out, "{\"request\": %lld, \"position\": %lld}", (long long)n->first_request,
                    (long long)n->first_position);
        else
            fprintf(out, "null");
        fprintf(out, ", \"differing\": [");
        for (size_t k = 0; k < n->nranges; k++)
            fprintf(out, "%s{\"request\": %lld, \"first\": %lld, \"last\": %lld}", k ? ", " : "",
                    (long long)n->ranges[k].request, (long long)n->ranges[k].first,
                    (long long)n->ranges[k].last);
        fprintf(out, "]}");
    }
    fprintf(out, "], \"streams_part\": [");
    for (size_t k = 0; k < nparts; k++) {
        const fed *x = parts[k].a, *y = parts[k].b;
        fprintf(out, "%s{\"source\": ", k ? ", " : "");
        json_str(out, names[x->name]);
        fprintf(out,
                ", \"request\": %lld, \"position\": %lld, \"token_a\": %lld, "
                "\"token_b\": %lld, \"step_a\": ",
                (long long)x->request, (long long)x->position, (long long)x->token,
                (long long)y->token);
        if (x->has_step)
            fprintf(out, "%lld", (long long)x->step);
        else
            fprintf(out, "null");
        fprintf(out, ", \"step_b\": ");
        if (y->has_step)
            fprintf(out, "%lld}", (long long)y->step);
        else
            fprintf(out, "null}");
    }
    fprintf(out, "], \"first_divergence\": ");
    if (r->first >= 0) {
        const ulp_digest_name *n = &r->names[r->first];
        fprintf(out, "{\"capture\": ");
        json_str(out, n->name);
        fprintf(out, ", \"request\": %lld, \"position\": %lld}, \"capture_next\": \"",
                (long long)n->first_request, (long long)n->first_position);
        selection(out, n);
        fprintf(out, "\"}\n");
    } else {
        fprintf(out, "null, \"capture_next\": null}\n");
    }
}

static void print_parts(FILE *out, const part *parts, size_t nparts, const char **names)
{
    for (size_t k = 0; k < nparts; k++) {
        const fed *x = parts[k].a, *y = parts[k].b;
        fprintf(out, "token streams part at request %lld, position %lld", (long long)x->request,
                (long long)x->position);
        if (x->has_step)
            fprintf(out, " (step %lld in A)", (long long)x->step);
        fprintf(out, ": A fed token %lld, B fed token %lld (recorded in %s)\n", (long long)x->token,
                (long long)y->token, names[x->name]);
    }
}

static void print_table(FILE *out, const char *a, const char *b, const ulp_digest_result *r,
                        const part *parts, size_t nparts, const char **names)
{
    fprintf(out, "digest comparison: A %s (%s) vs B %s (%s)\n", a,
            r->digests_a ? "digests" : "data", b, r->digests_b ? "digests" : "data");
    fprintf(out, "%-40s %10s %10s %8s %8s  %s\n", "capture", "rows", "differing", "only_a",
            "only_b", "first (request, position)");
    for (size_t i = 0; i < r->nnames; i++) {
        const ulp_digest_name *n = &r->names[i];
        fprintf(out, "%-40s %10llu %10llu %8llu %8llu  ", n->name, (unsigned long long)n->compared,
                (unsigned long long)n->differing, (unsigned long long)n->only_a,
                (unsigned long long)n->only_b);
        if (n->has_first)
            fprintf(out, "(%lld, %lld)\n", (long long)n->first_request,
                    (long long)n->first_position);
        else
            fprintf(out, "-\n");
    }
    print_parts(out, parts, nparts, names);
    if (r->first < 0) {
        fprintf(out, r->identical ? "identical: every row's digest is equal\n"
                                  : "no compared row differs; some rows are on one side only\n");
        return;
    }
    const ulp_digest_name *n = &r->names[r->first];
    fprintf(out,
            "first difference: capture '%s', request %lld, position %lld (%llu of %llu "
            "rows differ)\n",
            n->name, (long long)n->first_request, (long long)n->first_position,
            (unsigned long long)n->differing, (unsigned long long)n->compared);
    fprintf(out, "capture next: --select '");
    selection(out, n);
    fprintf(out, "'\n");
}

int cli_diff_digests(const char *a, const char *b, int json, FILE *out)
{
    ulp_error err;
    ulp_digest_result *r = NULL;
    if (ulp_digest_compare(a, b, &r, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return CLI_EXIT_ERROR;
    }
    /* The fed token ids, kept in full in digest mode: where the two token streams part. */
    fed_side fa = {0}, fb = {0};
    const char **names = NULL;
    size_t nn = 0, ncap = 0;
    ulp_snapshot *sa = NULL, *sb = NULL;
    part *parts = NULL;
    size_t nparts = 0;
    int rc = CLI_EXIT_ERROR;
    if (fed_load(a, &fa, &names, &nn, &ncap, &sa) == 0 &&
        fed_load(b, &fb, &names, &nn, &ncap, &sb) == 0) {
        nparts = find_parts(&fa, &fb, &parts);
        if (json)
            print_json(out, a, b, r, parts, nparts, names);
        else
            print_table(out, a, b, r, parts, nparts, names);
        rc = r->identical && nparts == 0 ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    }
    free(parts);
    free(fa.v);
    free(fb.v);
    free(names);
    ulp_snapshot_close(sa);
    ulp_snapshot_close(sb);
    ulp_digest_result_free(r);
    return rc;
}
