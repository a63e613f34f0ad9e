/*
 * The JSON report (FORMAT.md "JSON report"): the document around the rows
 * built with jansson, the rows written one by one without a tree
 * (report_json_row.c).
 *
 * The keys FORMAT.md lists keep their names and meanings; a key added here
 * is added to FORMAT.md too.  Conventions: a value
 * that does not exist is null (layer absent, a row that was not compared,
 * a non-finite double, which JSON cannot spell); counts are integers.
 */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "report_json_out.h"
#include "report_priv.h"

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/*
 * json_int_t is signed 64-bit; an f64 ULP distance may reach 2^64 - 2.
 * Such a count goes in as a marked string and is turned back into its
 * digits after dumping (see write_doc()), so the JSON number stays exact.
 */
static char u64_mark[48];

static json_t *ju64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)v);
    char b[96];
    snprintf(b, sizeof b, "%s%" PRIu64, u64_mark, v);
    return ulp_json_str(b);
}

static json_t *jshape(int ndim, const int64_t *shape)
{
    json_t *a = json_array();
    for (int k = 0; k < ndim; k++)
        json_array_append_new(a, json_integer(shape[k]));
    return a;
}

static json_t *jlayer(int32_t layer)
{
    return layer >= 0 ? json_integer(layer) : json_null();
}

static json_t *jkernels(const ulp_diff_kernel *k, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", ulp_json_str(k[i].name));
        json_object_set_new(o, "grid",
                            jshape(3, (const int64_t[]){k[i].grid[0], k[i].grid[1], k[i].grid[2]}));
        json_object_set_new(
            o, "block", jshape(3, (const int64_t[]){k[i].block[0], k[i].block[1], k[i].block[2]}));
        json_array_append_new(a, o);
    }
    return a;
}

static void set_kernels(json_t *o, const ulp_diff_row *row)
{
    if (row->has_kernels_a)
        json_object_set_new(o, "kernels_a", jkernels(row->kernels_a, row->n_kernels_a));
    if (row->has_kernels_b)
        json_object_set_new(o, "kernels_b", jkernels(row->kernels_b, row->n_kernels_b));
    if (row->has_gemms_a)
        json_object_set_new(o, "gemms_a", ulp__report_json_gemms(row->gemms_a, row->n_gemms_a));
    if (row->has_gemms_b)
        json_object_set_new(o, "gemms_b", ulp__report_json_gemms(row->gemms_b, row->n_gemms_b));
}

static json_t *jdoubles(const double *v, uint64_t n)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < n; i++)
        json_array_append_new(a, jnum(v[i]));
    return a;
}

/* Parted token streams: where, the tokens fed, the logits at the step before. */
static json_t *jparts(const ulp_diff_result *r)
{
    json_t *a = json_array();
    for (size_t k = 0; k < r->n_parts; k++) {
        const ulp_diff_part *p = &r->parts[k];
        json_t *x = json_object();
        json_object_set_new(x, "request", json_integer(p->request));
        json_object_set_new(x, "position", json_integer(p->position));
        json_object_set_new(x, "token_a", json_integer(p->token_a));
        json_object_set_new(x, "token_b", json_integer(p->token_b));
        json_object_set_new(x, "from", ulp_json_str(p->from_ids ? "ids" : "argmax"));
        json_object_set_new(x, "source", ulp_json_str(p->source));
        json_object_set_new(x, "logits", p->has_logits ? ulp_json_str(p->logits) : json_null());
        json_object_set_new(x, "logits_position",
                            p->has_logits ? json_integer(p->position - 1) : json_null());
        json_object_set_new(x, "step",
                            p->has_logits && p->step >= 0 ? json_integer(p->step) : json_null());
        json_object_set_new(x, "argmax_a", p->has_logits ? json_integer(p->argmax_a) : json_null());
        json_object_set_new(x, "argmax_b", p->has_logits ? json_integer(p->argmax_b) : json_null());
        json_object_set_new(x, "margin_a", p->has_logits ? jnum(p->margin_a) : json_null());
        json_object_set_new(x, "margin_b", p->has_logits ? jnum(p->margin_b) : json_null());
        json_object_set_new(x, "positions_parted", ju64(p->positions_parted));
        json_array_append_new(a, x);
    }
    return a;
}

static json_t *jlogits(const ulp_diff_logits *lg)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", ulp_json_str(lg->name));
    json_object_set_new(o, "occurrence", json_integer(lg->occurrence));
    json_object_set_new(o, "rows", ju64(lg->rows));
    json_object_set_new(o, "argmax_flips", ju64(lg->argmax_flips));
    json_t *fl = json_array();
    for (size_t k = 0; k < lg->n_flips; k++) {
        const ulp_diff_flip *f = &lg->flips[k];
        json_t *x = json_object();
        json_object_set_new(x, "row", ju64(f->row));
        json_object_set_new(x, "argmax_a", json_integer(f->argmax_a));
        json_object_set_new(x, "argmax_b", json_integer(f->argmax_b));
        json_object_set_new(x, "margin_a", jnum(f->margin_a));
        json_object_set_new(x, "margin_b", jnum(f->margin_b));
        json_object_set_new(x, "gap_a", jnum(f->gap_a));
        json_object_set_new(x, "gap_b", jnum(f->gap_b));
        json_object_set_new(x, "gap_perturbation", jnum(f->gap_perturbation));
        json_object_set_new(x, "magnitude", jnum(f->magnitude));
        json_object_set_new(x, "gap_perturbation_ulps", jnum(f->gap_perturbation_ulps));
        json_object_set_new(x, "request",
                            f->position >= 0 ? json_integer(f->request) : json_null());
        json_object_set_new(x, "position",
                            f->position >= 0 ? json_integer(f->position) : json_null());
        json_object_set_new(x, "tied",
                            f->tied_a && f->tied_b ? ulp_json_str("both")
                            : f->tied_a            ? ulp_json_str("a")
                            : f->tied_b            ? ulp_json_str("b")
                                                   : json_null());
        json_array_append_new(fl, x);
    }
    json_object_set_new(o, "flipped", fl);
    /* The flipped rows where one run's top two tie (margin 0); also in `flipped`. */
    json_object_set_new(o, "argmax_ties", ju64(lg->argmax_ties));
    json_t *ties = json_array();
    for (uint64_t r = 0; lg->tied != NULL && r < lg->rows; r++) {
        if (!lg->tied[r])
            continue;
        json_t *x = json_object();
        json_object_set_new(x, "row", ju64(r));
        json_object_set_new(x, "argmax_a", json_integer(lg->argmax_a[r]));
        json_object_set_new(x, "argmax_b", json_integer(lg->argmax_b[r]));
        json_object_set_new(x, "margin_a", jnum(lg->margin_a[r]));
        json_object_set_new(x, "margin_b", jnum(lg->margin_b[r]));
        for (size_t k = 0; k < lg->n_flips; k++) /* in row order: few ties */
            if (lg->flips[k].row == r && lg->flips[k].position >= 0) {
                json_object_set_new(x, "request", json_integer(lg->flips[k].request));
                json_object_set_new(x, "position", json_integer(lg->flips[k].position));
            }
        json_array_append_new(ties, x);
    }
    json_object_set_new(o, "tied", ties);
    json_object_set_new(o, "dtype", ulp_json_str(ulp_dtype_name(lg->dtype)));
    json_object_set_new(o, "vocab", ju64(lg->vocab));
    json_object_set_new(o, "rows_at_risk", ju64(lg->rows_at_risk));
    json_t *risk = json_array();
    json_t *am_a = json_array(), *am_b = json_array();
    for (uint64_t r = 0; r < lg->rows; r++) {
        if (lg->at_risk[r])
            json_array_append_new(risk, ju64(r));
        json_array_append_new(am_a, json_integer(lg->argmax_a[r]));
        json_array_append_new(am_b, json_integer(lg->argmax_b[r]));
    }
    json_object_set_new(o, "at_risk", risk);
    json_t *pr = json_object();
    json_object_set_new(pr, "argmax_a", am_a);
    json_object_set_new(pr, "argmax_b", am_b);
    json_object_set_new(pr, "margin_a", jdoubles(lg->margin_a, lg->rows));
    json_object_set_new(pr, "margin_b", jdoubles(lg->margin_b, lg->rows));
    json_object_set_new(pr, "max_perturbation", jdoubles(lg->max_perturbation, lg->rows));
    json_object_set_new(o, "per_row", pr);
    json_t *sm = json_array();
    for (int k = 0; k < lg->n_sampling; k++) {
        const ulp_diff_sampling *s = &lg->sampling[k];
        json_t *x = json_object();
        json_object_set_new(x, "temperature", jnum(s->temperature));
        json_object_set_new(x, "tv_mean", jnum(s->tv_mean));
        json_object_set_new(x, "tv_max", jnum(s->tv_max));
        json_object_set_new(x, "p_differ_mean", jnum(s->p_differ_mean));
        json_object_set_new(x, "p_differ_max", jnum(s->p_differ_max));
        json_object_set_new(x, "tv", jdoubles(s->tv, lg->rows));
        json_object_set_new(x, "p_differ", jdoubles(s->p_differ, lg->rows));
        json_array_append_new(sm, x);
    }
    json_object_set_new(o, "sampling", sm);
    return o;
}

static json_t *jside(const char *path, const char *label)
{
    json_t *o = json_object();
    json_object_set_new(o, "path", ulp_json_str(path));
    json_object_set_new(o, "label", ulp_json_str(label));
    return o;
}

/* Stands for the rows array in the document; the dumper escapes its \001 as \u0001. */
static char rows_mark[48];

static json_t *build(const ulp_diff_result *r, size_t not_identical)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "format", ulp_json_str("ulpprof-diff"));
    json_object_set_new(doc, "format_version", json_integer(1));
    json_object_set_new(doc, "a", jside(r->path_a, r->label_a));
    json_object_set_new(doc, "b", jside(r->path_b, r->label_b));
    json_object_set_new(doc, "identical", json_boolean(r->identical));
    if (r->has_first_divergence) {
        const ulp_diff_row *row = ulp_diff_result_row(r, r->first_divergence);
        json_t *fd = json_object();
        json_object_set_new(fd, "name", ulp_json_str(row->name));
        if (r->by_site) {
            json_object_set_new(fd, "name_b",
                                row->name_b ? ulp_json_str(row->name_b) : json_null());
            json_object_set_new(fd, "site", row->site ? ulp_json_str(row->site) : json_null());
        }
        json_object_set_new(fd, "occurrence", json_integer(row->occurrence));
        json_object_set_new(fd, "layer", jlayer(row->layer));
        json_object_set_new(fd, "row", json_integer((json_int_t)r->first_divergence));
        json_object_set_new(fd, "status", ulp_json_str(ulp_diff_status_name(row->status)));
        int key = row->aligned && row->first_position >= 0;
        json_object_set_new(fd, "request", key ? json_integer(row->first_request) : json_null());
        json_object_set_new(fd, "position", key ? json_integer(row->first_position) : json_null());
        const char *origin = ulp_diff_origin_name(row->origin);
        json_object_set_new(fd, "origin", origin ? ulp_json_str(origin) : json_null());
        char text[2048];
        ulp__first_divergence_text(r, text, sizeof text, "");
        json_object_set_new(fd, "text", ulp_json_str(text));
        set_kernels(fd, row);
        json_object_set_new(doc, "first_divergence", fd);
    } else {
        json_object_set_new(doc, "first_divergence", json_null());
    }
    /* The rows are written one by one where this mark lands (ulp__report_json). */
    json_object_set_new(doc, "rows", ulp_json_str(rows_mark));
    json_t *lgs = json_array();
    for (size_t i = 0; i < r->n_logits; i++)
        json_array_append_new(lgs, jlogits(&r->logits[i]));
    json_object_set_new(doc, "logits", lgs);

    json_t *lad = json_object(), *keys = json_array(), *kv = json_array();
    for (size_t i = 0; i < r->ladder.n_keys; i++) {
        const ulp_diff_run_key *k = &r->ladder.keys[i];
        json_array_append_new(keys, ulp_json_str(k->key));
        json_t *x = json_object();
        json_object_set_new(x, "key", ulp_json_str(k->key));
        json_object_set_new(x, "a", k->value_a ? ulp_json_str(k->value_a) : json_null());
        json_object_set_new(x, "b", k->value_b ? ulp_json_str(k->value_b) : json_null());
        json_object_set_new(
            x, "level", k->level != ULP_DIFF_LADDER_NONE ? json_integer(k->level) : json_null());
        json_array_append_new(kv, x);
    }
    json_object_set_new(lad, "differing_keys", keys);
    json_object_set_new(lad, "level",
                        r->ladder.level != ULP_DIFF_LADDER_NONE ? json_integer(r->ladder.level)
                                                                : json_null());
    json_object_set_new(lad, "level_name",
                        r->ladder.level_name ? ulp_json_str(r->ladder.level_name) : json_null());
    json_object_set_new(lad, "keys", kv);
    /* No rung verdict on nothing: every capture compared empty. */
    json_object_set_new(lad, "verdict",
                        r->identical && r->elements_compared == 0 ? json_null()
                        : r->identical                            ? json_string("holds")
                                                                  : json_string("breaks"));
    json_object_set_new(doc, "ladder", lad);
    json_object_set_new(doc, "streams_part", jparts(r));

    /* Extra top-level keys. */
    size_t ndiff = not_identical;
    json_t *sum = json_object();
    json_object_set_new(sum, "rows", json_integer((json_int_t)r->n_rows));
    json_object_set_new(sum, "shared", json_integer((json_int_t)r->n_shared));
    json_object_set_new(sum, "only_in_a", json_integer((json_int_t)r->n_only_a));
    json_object_set_new(sum, "only_in_b", json_integer((json_int_t)r->n_only_b));
    json_object_set_new(sum, "not_identical", json_integer((json_int_t)ndiff));
    json_object_set_new(sum, "elements_compared", json_integer((json_int_t)r->elements_compared));
    if (r->by_site) /* absent when paired by name: older reports stay as they were */
        json_object_set_new(sum, "paired_by", ulp_json_str("site"));
    json_object_set_new(sum, "no_shared_captures", json_boolean(r->n_shared == 0 && r->n_rows > 0));
    json_object_set_new(doc, "summary", sum);
    if (r->amp.valid) {
        const ulp_diff_amplification *a = &r->amp;
        json_t *x = json_object();
        const ulp_diff_row *f = ulp_diff_result_row(r, a->first_row);
        const ulp_diff_row *l = ulp_diff_result_row(r, a->last_row);
        json_object_set_new(x, "first", ulp_json_str(f->name));
        json_object_set_new(x, "first_occurrence", json_integer(f->occurrence));
        json_object_set_new(x, "last", ulp_json_str(l->name));
        json_object_set_new(x, "last_occurrence", json_integer(l->occurrence));
        json_object_set_new(x, "differing_fraction_first", jnum(a->frac_first));
        json_object_set_new(x, "differing_fraction_last", jnum(a->frac_last));
        json_object_set_new(x, "differing_fraction_factor", jnum(a->frac_factor));
        json_object_set_new(x, "max_abs_diff_first", jnum(a->abs_first));
        json_object_set_new(x, "max_abs_diff_last", jnum(a->abs_last));
        json_object_set_new(x, "max_abs_diff_factor", jnum(a->abs_factor));
        json_object_set_new(doc, "amplification", x);
    } else {
        json_object_set_new(doc, "amplification", json_null());
    }
    json_t *temps = json_array();
    for (int k = 0; k < r->n_temperatures; k++)
        json_array_append_new(temps, jnum(r->temperatures[k]));
    json_object_set_new(doc, "temperatures", temps);
    if (r->verdict)
        json_object_set_new(doc, "verdict", ulp__report_verdict_json(r->verdict));
    return doc;
}

#define DUMP_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))

/* `mark` as the dumper writes it: "\u0001..." with the quote. */
static void dumped_mark(char *out, size_t n, const char *mark)
{
    snprintf(out, n, "\"\\u0001%s", mark + 1);
}

/* Output gathered on the stack and written in few fwrite(3) calls, not a
 * locked stdio call per quote and line break. */
typedef struct obuf {
    FILE *f;
    size_t n;
    char b[8192];
} obuf;

static void put(obuf *o, const char *s, size_t n)
{
    if (n > sizeof o->b - o->n) {
        fwrite(o->b, 1, o->n, o->f);
        o->n = 0;
        if (n > sizeof o->b) {
            fwrite(s, 1, n, o->f);
            return;
        }
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
}

/* Writes `n` bytes of dumped text, turning each marked u64 string back into
 * a bare number. */
static void emit(const char *text, size_t n, FILE *f)
{
    char pat[64];
    dumped_mark(pat, sizeof pat, u64_mark);
    size_t plen = strlen(pat);
    const char *p = text, *end = text + n;
    obuf o;
    o.f = f;
    o.n = 0;
    while (p < end) {
        size_t run = strcspn(p, "\"");
        if (run > (size_t)(end - p))
            run = (size_t)(end - p);
        put(&o, p, run);
        p += run;
        if (p == end)
            break;
        if ((size_t)(end - p) >= plen && memcmp(p, pat, plen) == 0) {
            const char *digits = p + plen, *e = digits;
            while (e < end && *e >= '0' && *e <= '9')
                e++;
            put(&o, digits, (size_t)(e - digits));
            p = e < end && *e == '"' ? e + 1 : e;
        } else {
            put(&o, "\"", 1);
            p++;
        }
    }
    fwrite(o.b, 1, o.n, f);
}

void ulp__json_marks(void)
{
    /* Marks no capture name will contain by chance. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(u64_mark, sizeof u64_mark, "\001ulpprof-u64-%lx-%lx:", (unsigned long)ts.tv_nsec,
             (unsigned long)getpid());
    snprintf(rows_mark, sizeof rows_mark, "\001ulpprof-rows-%lx-%lx", (unsigned long)ts.tv_nsec,
             (unsigned long)getpid());
}

char *ulp__json_frame(const ulp_diff_result *r, size_t not_identical, size_t *at, size_t *rest)
{
    unsigned long lost = ulp__json_lost();
    json_t *doc = build(r, not_identical);
    if (doc == NULL)
        return NULL;
    char *text = json_dumps(doc, DUMP_FLAGS);
    json_decref(doc);
    if (ulp__json_lost() != lost) { /* a field of the document was not allocated */
        free(text);
        return NULL;
    }
    char *plain = text != NULL ? ulp__json_unmark(text) : NULL;
    free(text);
    if (plain == NULL)
        return NULL;
    char pat[64];
    dumped_mark(pat, sizeof pat, rows_mark);
    const char *p = strstr(plain, pat);
    if (p == NULL) {
        free(plain);
        return NULL;
    }
    *at = (size_t)(p - plain);
    *rest = *at + strlen(pat) + 1; /* and the closing quote */
    return plain;
}

void ulp__json_emit(const char *text, size_t n, FILE *f)
{
    emit(text, n, f);
}

int ulp__json_rows(const ulp_diff_row *rows, size_t n, size_t first, FILE *f)
{
    ulp__jw *w = malloc(sizeof *w);
    if (w == NULL)
        return -1;
    ulp__jw_init(w, f, 2);
    for (size_t i = 0; i < n; i++) {
        if (first + i == 0)
            ulp__jw_raw(w, "[\n    ", 6);
        else
            ulp__jw_raw(w, ",\n    ", 6);
        ulp__json_row(w, &rows[i]);
    }
    ulp__jw_flush(w);
    free(w);
    return 0;
}

void ulp__json_rows_end(size_t total, FILE *f)
{
    fputs(total == 0 ? "[]" : "\n  ]", f);
}

ulp_status ulp__report_json(const ulp_diff_result *r, FILE *f, ulp_error *err)
{
    ulp__json_marks();
    size_t not_identical = 0, at, rest;
    for (size_t i = 0; i < r->n_rows; i++)
        not_identical += r->rows[i].status != ULP_DIFF_IDENTICAL;
    char *plain = ulp__json_frame(r, not_identical, &at, &rest);
    if (plain == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    /*
     * The document around the rows, and the rows one at a time in between,
     * indented as the dumper indents an array two levels down: a report of
     * 10,000 rows is never a tree, nor a string, in memory.
     */
    ulp__json_emit(plain, at, f);
    int rc = ulp__json_rows(r->rows, r->n_rows, 0, f);
    ulp__json_rows_end(r->n_rows, f);
    ulp__json_emit(plain + rest, strlen(plain + rest), f);
    free(plain);
    if (rc != 0)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    if (fputc('\n', f) == EOF || ferror(f))
        return ulp__report_write_error(err, ULP_EIO);
    return ULP_OK;
}
