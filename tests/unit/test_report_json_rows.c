/*
 * reports/report_json_row.c and report_json_out.c: the JSON report's rows,
 * written without a jansson tree, are byte for byte what the tree dumped
 * with the report's flags wrote.  The reference below is report_json.c's
 * row builder as it was (up to 79af049), dumped by jansson and unmarked
 * as the report did then (the copy below); it is held against the
 * writer over hostile rows (quotes, backslashes, control characters,
 * UTF-8 valid and not, NaN, inf, -0.0, denormals, DBL_MAX, counts past
 * INT64_MAX), and the writer's reals and strings against jansson's over
 * many values.
 */
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/utf8.h"
#include "reports/report_json_out.h"
#include "reports/report_priv.h"
#define TEST_RNG_SEED 0x2545F4914F6CDD1DULL
#include "test_rng.h"
#include "test_same_text.h"

/* ---- The reference's strings, as reports/report_json_bytes.c made them
 * (up to the writer's fold): a byte that is not UTF-8 goes into the
 * jansson string as U+0000 and its two hex digits, which the dump writes as
 * \u0000XX, turned into \udcXX after dumping. ---- */

/* The marked form of s in a new buffer (*len bytes), or NULL when s is valid UTF-8. */
static char *ref_marked(const char *s, size_t *len)
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
    assert_non_null(out);
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

static json_t *ulp_json_str(const char *s)
{
    if (s == NULL)
        return json_null();
    size_t len = 0;
    char *m = ref_marked(s, &len);
    json_t *j = m != NULL ? json_stringn(m, len) : json_string(s);
    free(m);
    return j != NULL ? j : json_null();
}

static char *ulp__json_unmark(const char *text)
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

/* ---- The reference: the jansson tree of a row, as report_json.c built it. ---- */

/* The GEMM objects, as reports/report_gemm.c built them. */
static json_t *jstr(const char *s)
{
    json_t *v = ulp_json_str(s);
    return v != NULL ? v : json_null();
}

static json_t *ulp__report_json_gemms(const ulp_gemm_info *g, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "seq", json_integer((json_int_t)g[i].seq));
        json_object_set_new(o, "api", jstr(g[i].api));
        json_object_set_new(o, "m", json_integer(g[i].m));
        json_object_set_new(o, "n", json_integer(g[i].n));
        json_object_set_new(o, "k", json_integer(g[i].k));
        json_object_set_new(o, "batch", json_integer(g[i].batch));
        json_object_set_new(o, "transa", jstr(g[i].transa));
        json_object_set_new(o, "transb", jstr(g[i].transb));
        json_object_set_new(o, "a_type", jstr(g[i].a_type));
        json_object_set_new(o, "b_type", jstr(g[i].b_type));
        json_object_set_new(o, "c_type", jstr(g[i].c_type));
        json_object_set_new(o, "d_type", jstr(g[i].d_type));
        json_object_set_new(o, "compute", jstr(g[i].compute));
        json_object_set_new(o, "algo", jstr(g[i].algo));
        json_object_set_new(o, "algo_id", json_integer(g[i].algo_id));
        json_object_set_new(o, "tile", jstr(g[i].tile));
        json_object_set_new(o, "stages", jstr(g[i].stages));
        json_object_set_new(o, "splitk", json_integer(g[i].splitk));
        json_object_set_new(o, "reduction", jstr(g[i].reduction));
        json_object_set_new(o, "cluster", jstr(g[i].cluster));
        json_object_set_new(o, "workspace", json_integer((json_int_t)g[i].workspace));
        json_object_set_new(o, "status", json_integer(g[i].status));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *ref_jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A magnitude that overflowed double (f64 |a - b|) saturates: JSON has no inf. */
static json_t *ref_jmag(double v)
{
    return isinf(v) && v > 0 ? json_real(DBL_MAX) : ref_jnum(v);
}

/*
 * json_int_t is signed 64-bit; an f64 ULP distance may reach 2^64 - 2.
 * Such a count goes in as a marked string and is turned back into its
 * digits after dumping (see write_doc()), so the JSON number stays exact.
 */
static const char ref_u64_mark[] = "\001test-u64:";

static json_t *ref_ju64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)v);
    char b[96];
    snprintf(b, sizeof b, "%s%" PRIu64, ref_u64_mark, v);
    return ulp_json_str(b);
}

static json_t *ref_jshape(int ndim, const int64_t *shape)
{
    json_t *a = json_array();
    for (int k = 0; k < ndim; k++)
        json_array_append_new(a, json_integer(shape[k]));
    return a;
}

static json_t *ref_jlayer(int32_t layer)
{
    return layer >= 0 ? json_integer(layer) : json_null();
}

static json_t *ref_jkernels(const ulp_diff_kernel *k, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", ulp_json_str(k[i].name));
        json_object_set_new(
            o, "grid", ref_jshape(3, (const int64_t[]){k[i].grid[0], k[i].grid[1], k[i].grid[2]}));
        json_object_set_new(
            o, "block",
            ref_jshape(3, (const int64_t[]){k[i].block[0], k[i].block[1], k[i].block[2]}));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *ref_jbits(uint64_t bits, ulp_dtype dt)
{
    char b[24];
    snprintf(b, sizeof b, "0x%0*" PRIx64, (int)(2 * ulp_dtype_size(dt)), bits);
    return ulp_json_str(b);
}

static void ref_set_kernels(json_t *o, const ulp_diff_row *row)
{
    if (row->has_kernels_a)
        json_object_set_new(o, "kernels_a", ref_jkernels(row->kernels_a, row->n_kernels_a));
    if (row->has_kernels_b)
        json_object_set_new(o, "kernels_b", ref_jkernels(row->kernels_b, row->n_kernels_b));
    if (row->has_gemms_a)
        json_object_set_new(o, "gemms_a", ulp__report_json_gemms(row->gemms_a, row->n_gemms_a));
    if (row->has_gemms_b)
        json_object_set_new(o, "gemms_b", ulp__report_json_gemms(row->gemms_b, row->n_gemms_b));
}

static json_t *ref_jkey(int has, int64_t request, int64_t position)
{
    if (!has)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "request", json_integer(request));
    json_object_set_new(o, "position", json_integer(position));
    return o;
}

/* The runs of differing keys with their origin (FORMAT.md, "Aligned diff"). */
static json_t *ref_jruns(const ulp_diff_row *row)
{
    json_t *a = json_array();
    ulp__key_run run;
    size_t k = 0;
    while (ulp__next_run(row, &k, &run)) {
        json_t *o = json_object();
        json_object_set_new(o, "request", json_integer(run.request));
        json_object_set_new(o, "first", json_integer(run.first));
        json_object_set_new(o, "last", json_integer(run.last));
        const char *origin = ulp_diff_origin_name(run.origin);
        json_object_set_new(o, "origin", origin ? ulp_json_str(origin) : json_null());
        json_object_set_new(o, "input",
                            run.input >= 0 && (size_t)run.input < row->n_inputs
                                ? ulp_json_str(row->inputs[run.input])
                                : json_null());
        json_t *oa = json_array(), *ob = json_array();
        for (size_t q = run.k0; q < run.k1; q++) {
            const ulp_diff_key *key = &row->keys[q];
            if (q == run.k0 || key->occurrence_a != row->keys[q - 1].occurrence_a)
                json_array_append_new(oa, json_integer(key->occurrence_a));
            if (q == run.k0 || key->occurrence_b != row->keys[q - 1].occurrence_b)
                json_array_append_new(ob, json_integer(key->occurrence_b));
        }
        json_object_set_new(o, "occurrences_a", oa);
        json_object_set_new(o, "occurrences_b", ob);
        json_array_append_new(a, o);
    }
    return a;
}

/* Keys of aligned, sliced and hinted rows. */
static void ref_set_aligned(json_t *o, const ulp_diff_row *row)
{
    json_object_set_new(o, "aligned", json_boolean(row->aligned));
    if (row->positions_in != NULL)
        json_object_set_new(o, "positions_only_on", ulp_json_str(row->positions_in));
    if (row->hint != NULL)
        json_object_set_new(o, "hint", ulp_json_str(row->hint));
    if (row->sliced) {
        json_t *sl = json_object();
        json_object_set_new(sl, "axis", json_integer(row->token_axis));
        json_object_set_new(sl, "first_a", json_integer(row->slice_first_a));
        json_object_set_new(sl, "first_b", json_integer(row->slice_first_b));
        json_object_set_new(sl, "count", json_integer(row->slice_rows));
        json_object_set_new(o, "rows_slice", sl);
    }
    if (!row->aligned)
        return;
    json_object_set_new(o, "positions_compared", ref_ju64(row->positions_compared));
    json_object_set_new(o, "positions_only_in_a", ref_ju64(row->positions_only_in_a));
    json_object_set_new(o, "positions_only_in_b", ref_ju64(row->positions_only_in_b));
    json_object_set_new(o, "positions_differing", ref_ju64(row->positions_differing));
    json_object_set_new(o, "positions_parted", ref_ju64(row->positions_parted));
    json_object_set_new(
        o, "first_differing",
        ref_jkey(row->first_position >= 0, row->first_request, row->first_position));
    json_object_set_new(
        o, "worst_key",
        ref_jkey(row->worst_position >= 0, row->worst_request, row->worst_position));
    json_t *in = json_array();
    for (size_t k = 0; k < row->n_inputs; k++)
        json_array_append_new(in, ulp_json_str(row->inputs[k]));
    json_object_set_new(o, "inputs", in);
    const char *origin = ulp_diff_origin_name(row->origin);
    json_object_set_new(o, "origin", origin ? ulp_json_str(origin) : json_null());
    json_object_set_new(o, "differing_positions", ref_jruns(row));
    if (row->capture_next != NULL) {
        json_t *cn = json_object();
        json_object_set_new(cn, "name", ulp_json_str(row->capture_next));
        json_object_set_new(cn, "request", json_integer(row->capture_request));
        json_object_set_new(cn, "first", json_integer(row->capture_first));
        json_object_set_new(cn, "last", json_integer(row->capture_last));
        json_object_set_new(o, "capture_next", cn);
    } else {
        json_object_set_new(o, "capture_next", json_null());
    }
}

static json_t *ref_jrow(const ulp_diff_row *row)
{
    json_t *o = json_object();
    const ulp_diff_metrics *m = &row->m;
    int side_b = row->status == ULP_DIFF_ONLY_IN_B;
    int paired = row->seq_a >= 0 && row->seq_b >= 0;
    int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;

    json_object_set_new(o, "name", ulp_json_str(row->name));
    json_object_set_new(o, "occurrence", json_integer(row->occurrence));
    json_object_set_new(o, "layer", ref_jlayer(row->layer));
    json_object_set_new(o, "role", ulp_json_str(row->role));
    json_object_set_new(o, "dtype",
                        ulp_json_str(ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a)));
    json_object_set_new(o, "shape",
                        side_b ? ref_jshape(row->ndim_b, row->shape_b)
                               : ref_jshape(row->ndim_a, row->shape_a));
    json_object_set_new(o, "elements", ref_ju64(row->elements));
    json_object_set_new(o, "status", ulp_json_str(ulp_diff_status_name(row->status)));
    if (compared) {
        json_object_set_new(o, "differing", ref_ju64(m->differing));
        json_object_set_new(o, "max_ulp", ref_ju64(m->max_ulp));
        json_object_set_new(o, "max_abs_diff", ref_jmag(m->max_abs_diff));
        json_object_set_new(o, "nonfinite_mismatch", ref_ju64(m->nonfinite_mismatch));
    } else {
        json_object_set_new(o, "differing", json_null());
        json_object_set_new(o, "max_ulp", json_null());
        json_object_set_new(o, "max_abs_diff", json_null());
        json_object_set_new(o, "nonfinite_mismatch", json_null());
    }
    /* Extra keys. */
    json_object_set_new(o, "seq", row->seq_a >= 0 ? json_integer(row->seq_a) : json_null());
    json_object_set_new(o, "seq_b", row->seq_b >= 0 ? json_integer(row->seq_b) : json_null());
    if (paired) {
        json_object_set_new(o, "dtype_b", ulp_json_str(ulp_dtype_name(row->dtype_b)));
        json_object_set_new(o, "shape_b", ref_jshape(row->ndim_b, row->shape_b));
    }
    if (compared) {
        json_object_set_new(
            o, "differing_fraction",
            json_real(row->elements ? (double)m->differing / (double)row->elements : 0.0));
        json_object_set_new(o, "mean_ulp", ref_jnum(m->mean_ulp));
        int top = 0;
        for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
            if (m->hist[k])
                top = k;
        json_t *h = json_array();
        for (int k = 0; k <= top; k++)
            json_array_append_new(h, ref_ju64(m->hist[k]));
        json_object_set_new(o, "ulp_hist", h);
        json_object_set_new(o, "sign_changes", ref_ju64(m->sign_changes));
        json_object_set_new(o, "max_abs", ref_jnum(m->max_abs));
        json_object_set_new(o, "max_abs_diff_ulps_at_max", ref_jmag(m->max_abs_diff_ulps_at_max));
        if (m->worst_flat >= 0) {
            json_object_set_new(o, "worst_index", ref_jshape(row->ndim_a, m->worst_index));
            json_object_set_new(o, "worst_flat", json_integer(m->worst_flat));
            json_object_set_new(o, "worst_a", ref_jnum(m->worst_a));
            json_object_set_new(o, "worst_b", ref_jnum(m->worst_b));
            json_object_set_new(o, "worst_bits_a", ref_jbits(m->worst_bits_a, row->dtype_a));
            json_object_set_new(o, "worst_bits_b", ref_jbits(m->worst_bits_b, row->dtype_a));
        } else {
            json_object_set_new(o, "worst_index", json_null());
        }
        if (m->max_abs_diff_flat >= 0) {
            int64_t idx[ULP_SNAPSHOT_MAX_RANK];
            ulp_diff_unflatten((uint64_t)m->max_abs_diff_flat, row->ndim_a, row->shape_a, idx);
            json_object_set_new(o, "max_abs_diff_index", ref_jshape(row->ndim_a, idx));
        } else {
            json_object_set_new(o, "max_abs_diff_index", json_null());
        }
    }
    ref_set_kernels(o, row);
    ref_set_aligned(o, row);
    return o;
}

/* The reference's text of rows[0, n) at [first, ...) of the rows array, as
 * ulp__json_rows() wrote it: each row dumped, unmarked, its u64 marks made
 * bare numbers and its lines indented by four spaces. */
static char *ref_rows(const ulp_diff_row *rows, size_t n, size_t first, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    assert_non_null(f);
    char pat[64];
    snprintf(pat, sizeof pat, "\"\\u0001%s", ref_u64_mark + 1);
    size_t plen = strlen(pat);
    for (size_t i = 0; i < n; i++) {
        fputs(first + i == 0 ? "[\n    " : ",\n    ", f);
        json_t *j = ref_jrow(&rows[i]);
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(j);
        assert_non_null(text);
        char *plain = ulp__json_unmark(text);
        free(text);
        for (const char *p = plain; *p;) {
            if (*p == '\n') {
                fputs("\n    ", f);
                p++;
            } else if (strncmp(p, pat, plen) == 0) {
                p += plen;
                while (*p >= '0' && *p <= '9')
                    fputc(*p++, f);
                assert_int_equal(*p, '"');
                p++;
            } else {
                fputc(*p++, f);
            }
        }
        free(plain);
    }
    fclose(f);
    return out;
}

/* The writer's text of the same rows. */
static char *new_rows(const ulp_diff_row *rows, size_t n, size_t first, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    assert_non_null(f);
    assert_int_equal(ulp__json_rows(rows, n, first, f), 0);
    fclose(f);
    return out;
}

/* ---- Hostile values. ---- */

/* Pieces of names: plain, escaped, control, valid UTF-8 of each length, and
 * bytes that are not UTF-8 (stray continuation, overlong, surrogate, past
 * U+10FFFF, cut short, F5..FF). */
static const char *const pieces[] = {"a",
                                     "layers.0.mlp",
                                     "\"",
                                     "\\",
                                     "/",
                                     "\b",
                                     "\f",
                                     "\n",
                                     "\r",
                                     "\t",
                                     "\001",
                                     "\037",
                                     "\177",
                                     " ",
                                     "\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\xef\xbf\xbf",
                                     "\xf4\x8f\xbf\xbf",
                                     "\x80",
                                     "\xbf",
                                     "\xc0\xaf",
                                     "\xc1\x81",
                                     "\xe0\x80\xaf",
                                     "\xed\xa0\x80",
                                     "\xf0\x80\x80\x80",
                                     "\xf4\x90\x80\x80",
                                     "\xe2\x82",
                                     "\xf0\x9f\x98",
                                     "\xf5",
                                     "\xff",
                                     "u0000",
                                     "\\u0000",
                                     "\\udc80",
                                     "%s",
                                     "#1",
                                     "\xc2",
                                     "\xdf\xbf"};

/* A name of up to 12 pieces in `buf` (ULP__FULL_NAME bytes). */
static char *hostile(char *buf)
{
    return rng_join(buf, pieces, sizeof pieces / sizeof pieces[0], 12);
}

static double any_double(void)
{
    static const double special[] = {0.0,
                                     -0.0,
                                     1.0,
                                     -1.0,
                                     0.5,
                                     0.1,
                                     1.0 / 3,
                                     1e-6,
                                     9.99e-7,
                                     1e16,
                                     1e17,
                                     1e-5,
                                     123456789.0,
                                     1e38,
                                     2e38,
                                     DBL_MAX,
                                     -DBL_MAX,
                                     DBL_MIN,
                                     4.9e-324,
                                     -4.9e-324,
                                     NAN,
                                     INFINITY,
                                     -INFINITY,
                                     65504.0,
                                     3.4028234663852886e38,
                                     1e300,
                                     1e-300,
                                     9007199254740993.0,
                                     0.3,
                                     5e-324};
    uint64_t bits;
    double v;
    switch (pick(5)) {
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
    default:
        return (double)(int64_t)next() / 1e3;
    }
}

static uint64_t any_u64(void)
{
    static const uint64_t special[] = {
        0, 1, 2, 1000, INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX, UINT64_MAX - 1};
    return pick(3) == 0 ? special[pick(sizeof special / sizeof special[0])] : next() >> pick(64);
}

static int64_t any_i64(void)
{
    return pick(4) == 0 ? (int64_t)next() : (int64_t)pick(100) - 10;
}

/* What a random row points to. */
typedef struct row_mem {
    char text[24][ULP__FULL_NAME];
    ulp_diff_kernel kernels[2][4];
    ulp_gemm_info gemms[2][3];
    ulp_diff_key keys[16];
    const char *inputs[4];
} row_mem;

static void fit(char *field, size_t size, char *buf)
{
    hostile(buf);
    size_t n = strlen(buf) < size - 1 ? strlen(buf) : size - 1;
    memcpy(field, buf, n);
    field[n] = '\0';
}

static void any_gemm(ulp_gemm_info *g, char *buf)
{
    memset(g, 0, sizeof *g);
    g->seq = any_u64();
    g->m = any_i64();
    g->n = any_i64();
    g->k = any_i64();
    g->batch = any_i64();
    g->algo_id = (int32_t)next();
    g->splitk = (int32_t)pick(5);
    g->workspace = any_u64();
    g->status = (int32_t)pick(3) - 1;
    fit(g->api, sizeof g->api, buf);
    fit(g->transa, sizeof g->transa, buf);
    fit(g->transb, sizeof g->transb, buf);
    fit(g->a_type, sizeof g->a_type, buf);
    fit(g->b_type, sizeof g->b_type, buf);
    fit(g->c_type, sizeof g->c_type, buf);
    fit(g->d_type, sizeof g->d_type, buf);
    fit(g->compute, sizeof g->compute, buf);
    fit(g->algo, sizeof g->algo, buf);
    fit(g->tile, sizeof g->tile, buf);
    fit(g->stages, sizeof g->stages, buf);
    fit(g->reduction, sizeof g->reduction, buf);
    fit(g->cluster, sizeof g->cluster, buf);
}

static void any_side(ulp_diff_row *r, row_mem *mem, int b, size_t *t)
{
    int has = (int)pick(2);
    size_t nk = pick(4), ng = pick(3);
    ulp_diff_kernel *k = mem->kernels[b];
    for (size_t i = 0; i < nk; i++) {
        k[i].name = pick(8) ? hostile(mem->text[(*t)++]) : NULL;
        for (int d = 0; d < 3; d++) {
            k[i].grid[d] = (int32_t)next();
            k[i].block[d] = (int32_t)pick(1025);
        }
    }
    char buf[ULP__FULL_NAME];
    for (size_t i = 0; i < ng; i++)
        any_gemm(&mem->gemms[b][i], buf);
    if (b) {
        r->has_kernels_b = has;
        r->n_kernels_b = nk;
        r->kernels_b = k;
        r->has_gemms_b = (int)pick(2);
        r->n_gemms_b = ng;
        r->gemms_b = mem->gemms[b];
    } else {
        r->has_kernels_a = has;
        r->n_kernels_a = nk;
        r->kernels_a = k;
        r->has_gemms_a = (int)pick(2);
        r->n_gemms_a = ng;
        r->gemms_a = mem->gemms[b];
    }
}

/* Keys in runs: consecutive positions of a request, differing or not,
 * their origins and inputs (some out of range), occurrences that repeat. */
static void any_keys(ulp_diff_row *r, row_mem *mem, size_t *t)
{
    r->n_inputs = pick(4);
    for (size_t i = 0; i < r->n_inputs; i++)
        mem->inputs[i] = hostile(mem->text[(*t)++]);
    r->inputs = mem->inputs;
    r->n_keys = pick(17);
    int64_t request = 0, position = 0, occ_a = 0, occ_b = 0;
    for (size_t i = 0; i < r->n_keys; i++) {
        ulp_diff_key *k = &mem->keys[i];
        if (pick(5) == 0) {
            request++;
            position = 0;
        }
        position += pick(4) == 0 ? 2 : 1;
        occ_a += pick(3) == 0;
        occ_b += pick(3) == 0;
        k->request = request;
        k->position = position;
        k->occurrence_a = occ_a;
        k->occurrence_b = occ_b;
        k->differs = pick(3) != 0;
        k->origin = k->differs ? (ulp_diff_origin)(pick(2) ? 1 : pick(5)) : ULP_DIFF_ORIGIN_NONE;
        k->origin_input = (int)pick(r->n_inputs + 2) - 1;
    }
    r->keys = mem->keys;
    r->positions_compared = any_u64();
    r->positions_only_in_a = any_u64();
    r->positions_only_in_b = any_u64();
    r->positions_differing = any_u64();
    r->positions_parted = any_u64();
    r->first_request = any_i64();
    r->first_position = pick(3) ? any_i64() : -1;
    r->worst_request = any_i64();
    r->worst_position = pick(3) ? any_i64() : -1;
    r->origin = (ulp_diff_origin)pick(5);
    r->capture_next = r->n_inputs && pick(2) ? r->inputs[pick(r->n_inputs)] : NULL;
    r->capture_request = any_i64();
    r->capture_first = any_i64();
    r->capture_last = any_i64();
}

static void any_metrics(ulp_diff_metrics *m, const ulp_diff_row *r)
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
    for (int k = 0; k < r->ndim_a; k++)
        m->worst_index[k] = any_i64();
    m->worst_bits_a = next() >> pick(64);
    m->worst_bits_b = next() >> pick(64);
    m->worst_a = any_double();
    m->worst_b = any_double();
    m->max_abs_diff_flat = pick(4) ? (int64_t)(next() >> 2) : -1;
}

static void any_row(ulp_diff_row *r, row_mem *mem)
{
    static const char *const sides[] = {NULL, "a", "b"};
    size_t t = 0;
    memset(r, 0, sizeof *r);
    memset(mem, 0, sizeof *mem);
    r->name = hostile(mem->text[t++]);
    r->role = pick(10) ? hostile(mem->text[t++]) : NULL;
    r->occurrence = any_i64();
    r->status = (ulp_diff_status)pick(6);
    r->seq_a = r->status == ULP_DIFF_ONLY_IN_B ? -1 : any_i64();
    r->seq_b = r->status == ULP_DIFF_ONLY_IN_A ? -1 : any_i64();
    r->layer = pick(3) ? (int32_t)pick(100) : -1;
    r->dtype_a = r->status == ULP_DIFF_ONLY_IN_B ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->dtype_b = r->status == ULP_DIFF_ONLY_IN_A ? ULP_DTYPE_INVALID : (ulp_dtype)pick(11);
    r->ndim_a = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    r->ndim_b = (int)pick(ULP_SNAPSHOT_MAX_RANK + 1);
    for (int k = 0; k < ULP_SNAPSHOT_MAX_RANK; k++) {
        r->shape_a[k] = pick(8) ? (int64_t)pick(5000) : any_i64();
        r->shape_b[k] = (int64_t)pick(5000);
    }
    r->elements = any_u64();
    if (r->status == ULP_DIFF_IDENTICAL || r->status == ULP_DIFF_DIFFERS)
        any_metrics(&r->m, r);
    any_side(r, mem, 0, &t);
    any_side(r, mem, 1, &t);
    r->aligned = pick(3) == 0;
    if (r->aligned)
        any_keys(r, mem, &t);
    r->positions_in = sides[pick(3)];
    r->hint = pick(4) == 0 ? hostile(mem->text[t++]) : NULL;
    r->sliced = (int)pick(2);
    r->token_axis = (int)pick(4);
    r->slice_first_a = any_i64();
    r->slice_first_b = any_i64();
    r->slice_rows = any_i64();
}

/* ---- The tests. ---- */

/* Batches of random rows, first of the array and later ones. */
static void test_report_json_rows__random_rows(void **state)
{
    (void)state;
    enum { BATCH = 40 };
    ulp_diff_row *rows = calloc(BATCH, sizeof *rows);
    row_mem *mem = calloc(BATCH, sizeof *mem);
    assert_non_null(rows);
    assert_non_null(mem);
    for (int round = 0; round < 150; round++) {
        size_t n = 1 + pick(BATCH), first = round % 3 == 0 ? 0 : pick(100000);
        for (size_t i = 0; i < n; i++)
            any_row(&rows[i], &mem[i]);
        size_t ng, nw;
        char *got = new_rows(rows, n, first, &ng);
        char *want = ref_rows(rows, n, first, &nw);
        char what[64];
        snprintf(what, sizeof what, "round %d (%zu rows)", round, n);
        assert_same_text(what, "jansson", got, ng, want, nw);
        free(got);
        free(want);
    }
    free(rows);
    free(mem);
}

/* A row of the values the bench pairs have: small counts, no kernels. */
static void test_report_json_rows__empty_and_plain(void **state)
{
    (void)state;
    ulp_diff_row r;
    memset(&r, 0, sizeof r);
    r.name = "x";
    r.role = "activation";
    r.seq_a = r.seq_b = 0;
    r.layer = -1;
    r.status = ULP_DIFF_IDENTICAL;
    r.m.worst_flat = r.m.max_abs_diff_flat = -1;
    size_t ng, nw;
    char *got = new_rows(&r, 1, 0, &ng);
    char *want = ref_rows(&r, 1, 0, &nw);
    assert_same_text("plain row", "jansson", got, ng, want, nw);
    assert_non_null(strstr(got, "\"shape\": [],"));
    free(got);
    free(want);
    /* No rows: nothing, and the array's end is the caller's. */
    got = new_rows(&r, 0, 0, &ng);
    assert_int_equal(ng, 0);
    free(got);
}

/* The spool's bytes of rows[0, n) in batches of 1..7 rows. */
static char *spool_bytes(const ulp_diff_row *rows, size_t n, size_t *len)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    for (size_t i = 0; i < n;) {
        size_t k = 1 + pick(7);
        k = k < n - i ? k : n - i;
        assert_int_equal(ulp__json_spool_rows(rows + i, k, f), 0);
        i += k;
    }
    *len = (size_t)ftell(f);
    char *b = malloc(*len + 1);
    assert_non_null(b);
    rewind(f);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* ulp__json_unspool() of the bytes b[0, n): its text, and its status in *rc. */
static char *unspool(const char *b, size_t n, size_t *len, int *rc)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    rewind(f);
    char *out = NULL;
    FILE *o = open_memstream(&out, len);
    assert_non_null(o);
    *rc = ulp__json_unspool(f, o);
    fclose(o);
    fclose(f);
    return out;
}

/* Rows through the streamed report's temporary file come back as the text
 * the writer (and jansson) gives them; a cut or damaged file is refused,
 * or read as far as its whole records go, never past them. */
static void test_report_json_rows__spool(void **state)
{
    (void)state;
    enum { N = 60 };
    ulp_diff_row *rows = calloc(N, sizeof *rows);
    row_mem *mem = calloc(N, sizeof *mem);
    assert_non_null(rows);
    assert_non_null(mem);
    for (int round = 0; round < 40; round++) {
        size_t n = 1 + pick(N);
        for (size_t i = 0; i < n; i++)
            any_row(&rows[i], &mem[i]);
        size_t ns, ng, nw;
        int rc;
        char *sp = spool_bytes(rows, n, &ns);
        char *got = unspool(sp, ns, &ng, &rc);
        assert_int_equal(rc, 0);
        char *want = ref_rows(rows, n, 0, &nw);
        assert_same_text("unspooled rows", "jansson", got, ng, want, nw);
        free(got);
        /* Cut anywhere: all of it or a prefix of whole rows, or refused. */
        for (int cut = 0; cut < 20; cut++) {
            size_t at = pick(ns);
            got = unspool(sp, at, &ng, &rc);
            if (rc == 0) {
                assert_true(ng <= nw);
                assert_memory_equal(got, want, ng);
            }
            free(got);
        }
        /* Damaged: any status, no crash (valgrind and ASan runs check the reads). */
        for (int flip = 0; flip < 20; flip++) {
            size_t at = pick(ns);
            sp[at] = (char)(sp[at] ^ (1 << pick(8)));
            got = unspool(sp, ns, &ng, &rc);
            free(got);
        }
        free(sp);
        free(want);
    }
    free(rows);
    free(mem);
}

/* The stream's temporary file (tmpfile(3): a deleted file this process holds). */
static int spool_fd(void)
{
    for (int fd = 3; fd < 1024; fd++) {
        char link[64], to[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, to, sizeof to - 1);
        if (n > 0 && (to[n] = '\0', strstr(to, " (deleted)") != NULL))
            return fd;
    }
    return -1;
}

/* A streamed JSON report whose temporary file reads back damaged: said as
 * that, not as a failure to write the report. */
static void test_report_json_rows__spool_damaged(void **state)
{
    (void)state;
    enum { N = 8 };
    ulp_diff_row rows[N];
    row_mem *mem = calloc(N, sizeof *mem);
    assert_non_null(mem);
    for (size_t i = 0; i < N; i++)
        any_row(&rows[i], &mem[i]);
    ulp_report_stream *rs = NULL;
    ulp_error err;
    /* The rows go to the temporary file at once (else memory holds them). */
    setenv("ULPPROF_SPOOL_KB", "0", 1);
    assert_int_equal(ulp_report_stream_open(ULP_REPORT_JSON, 0, &rs, &err), ULP_OK);
    unsetenv("ULPPROF_SPOOL_KB");
    assert_int_equal(ulp_report_stream_rows(rs, rows, 0, N, &err), ULP_OK);
    int fd = spool_fd();
    assert_true(fd >= 0);
    static const unsigned char junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* Past the first record's length: a string longer than the record. */
    assert_int_equal(pwrite(fd, junk, sizeof junk, 4), (ssize_t)sizeof junk);
    ulp_diff_result r;
    memset(&r, 0, sizeof r);
    r.path_a = "a.h5";
    r.path_b = "b.h5";
    r.n_rows = N;
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(ulp_report_stream_write(rs, &r, out, &err), ULP_EIO);
    assert_non_null(strstr(err.msg, "temporary file"));
    fclose(out);
    ulp_report_stream_free(rs);
    free(mem);
}

/* Names longer than the writer's buffer, plain runs and escapes across its
 * boundaries: what it flushes first and what it writes past its buffer. */
static void test_report_json_rows__long_names(void **state)
{
    (void)state;
    static const size_t lens[] = {8191, 8192, 8193, 16383, 16384, 16385, 40000};
    char *name = malloc(40001), *role = malloc(40001);
    assert_non_null(name);
    assert_non_null(role);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (int mix = 0; mix < 3; mix++) {
            for (size_t k = 0; k < lens[i]; k++) {
                name[k] = (char)('a' + k % 26);
                role[k] = k % 97 == 0 ? '"' : 'r';
            }
            if (mix == 1)
                for (size_t k = 0; k < lens[i]; k += 4093)
                    name[k] = "\\\n\001\xff"[k % 4];
            if (mix == 2)
                memcpy(name + lens[i] - 3, "\xe2\x82\xac", 3);
            name[lens[i]] = role[lens[i]] = '\0';
            ulp_diff_row rows[2];
            memset(rows, 0, sizeof rows);
            for (int r = 0; r < 2; r++) {
                rows[r].name = name;
                rows[r].role = role;
                rows[r].seq_a = rows[r].seq_b = r;
                rows[r].layer = -1;
                rows[r].status = ULP_DIFF_DIFFERS;
                rows[r].m.worst_flat = rows[r].m.max_abs_diff_flat = -1;
                rows[r].hint = r ? name : NULL;
            }
            size_t ng, nw;
            char *got = new_rows(rows, 2, 0, &ng);
            char *want = ref_rows(rows, 2, 0, &nw);
            assert_same_text("long names", "jansson", got, ng, want, nw);
            assert_true(ng > 2 * lens[i]);
            free(got);
            size_t ns;
            int rc;
            char *sp = spool_bytes(rows, 2, &ns);
            got = unspool(sp, ns, &ng, &rc);
            assert_int_equal(rc, 0);
            assert_same_text("long names, unspooled", "jansson", got, ng, want, nw);
            free(sp);
            free(got);
            free(want);
        }
    }
    free(name);
    free(role);
}

/* The writer's reals against jansson's json_real() dumped with the report's precision. */
static void check_real(double v)
{
    char got[40], *want;
    if (!isfinite(v))
        return;
    json_t *j = json_real(v);
    assert_non_null(j);
    want = json_dumps(j, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    assert_non_null(want);
    size_t n = ulp__fmt_g17(got, v, 1);
    if (strcmp(got, want) != 0 || n != strlen(want))
        fail_msg("real %a: writer '%s', jansson '%s'", v, got, want);
    free(want);
}

static void test_report_json_rows__reals(void **state)
{
    (void)state;
    for (int e = -330; e <= 308; e++) {
        double p = pow(10, e);
        if (!isfinite(p) || p == 0)
            continue;
        check_real(p);
        check_real(-p);
        check_real(nextafter(p, 0));
        check_real(nextafter(p, INFINITY));
        check_real(p * 5);
    }
    for (int e = -1074; e <= 1023; e++) {
        check_real(ldexp(1, e));
        check_real(ldexp(1.5, e));
        check_real(nextafter(ldexp(1, e), 0));
    }
    /* The largest values of each float format (bf16's 3.39e38 and float's). */
    for (uint32_t f = 0x7f000000; f < 0x7f800000; f += 0x1234) {
        float x;
        memcpy(&x, &f, sizeof x);
        check_real((double)x);
    }
    for (int i = 0; i < 400000; i++) {
        double v = any_double();
        if (isfinite(v))
            check_real(v);
        uint64_t q = next() % 100000000000000000ULL;
        check_real((double)q / 1e16); /* 17 digits: near printf's ties */
        check_real((double)(next() % 1000000) + 0.5);
    }
}

/* Strings against ulp_json_str() dumped and unmarked, as the report wrote them. */
static void test_report_json_rows__strings(void **state)
{
    (void)state;
    char buf[ULP__FULL_NAME];
    for (int i = 0; i < 100000; i++) {
        const char *s = i == 0 ? "" : hostile(buf);
        json_t *j = ulp_json_str(s);
        char *text = json_dumps(j, JSON_ENCODE_ANY);
        json_decref(j);
        assert_non_null(text);
        char *want = ulp__json_unmark(text);
        free(text);
        char *got = NULL;
        size_t ng;
        FILE *f = open_memstream(&got, &ng);
        ulp__jw *w = malloc(sizeof *w);
        assert_non_null(w);
        ulp__jw_init(w, f, 0);
        ulp__jw_str(w, s);
        ulp__jw_flush(w);
        free(w);
        fclose(f);
        assert_same_text("string", "jansson", got, ng, want, strlen(want));
        free(got);
        free(want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_json_rows__random_rows),
        cmocka_unit_test(test_report_json_rows__empty_and_plain),
        cmocka_unit_test(test_report_json_rows__long_names),
        cmocka_unit_test(test_report_json_rows__spool),
        cmocka_unit_test(test_report_json_rows__spool_damaged),
        cmocka_unit_test(test_report_json_rows__reals),
        cmocka_unit_test(test_report_json_rows__strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
