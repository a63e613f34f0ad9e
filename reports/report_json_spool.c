/*
 * The rows of a streamed JSON report in its temporary file (report_stream.c)
 * as records of what report_json_row.c writes, not as their text: the text
 * is some 700 bytes a row (10,000 rows: 7 MiB), and writing it into the
 * temporary file and reading it back took more CPU than formatting it.  A
 * record is a 32-bit length and the row's fields: integers as varints
 * (zigzag for signed), doubles as their 8 bytes, strings with their NUL,
 * the histogram up to its last non-zero bin, GEMM calls and keys as they
 * are in memory.  At the end the rows are decoded one by one and written
 * by ulp__json_row(): the bytes ulp__json_rows() writes for the same rows.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "report_json_out.h"
#include "report_priv.h"

/* ---- Encoding. ---- */

typedef struct enc {
    unsigned char *b;
    size_t n, cap;
    int oom;
} enc;

static inline void put(enc *e, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (e->n + n <= e->cap) { /* the common case, inline */
        memcpy(e->b + e->n, p, n);
        e->n += n;
        return;
    }
    if (e->oom || ULP__GROW(e->b, e->cap, e->n + n) != 0) {
        e->oom = 1;
        return;
    }
    memcpy(e->b + e->n, p, n);
    e->n += n;
}

static inline void put_u(enc *e, uint64_t v)
{
    if (e->cap - e->n >= 10) { /* the common case: straight into the buffer */
        unsigned char *p = e->b + e->n;
        while (v >= 0x80) {
            *p++ = (unsigned char)(v | 0x80);
            v >>= 7;
        }
        *p++ = (unsigned char)v;
        e->n = (size_t)(p - e->b);
        return;
    }
    unsigned char b[10];
    size_t k = 0;
    while (v >= 0x80) {
        b[k++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[k++] = (unsigned char)v;
    put(e, b, k);
}

static void put_i(enc *e, int64_t v)
{
    put_u(e, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_f(enc *e, double v)
{
    put(e, &v, sizeof v);
}

/* 0 for NULL, else the length plus one, then the bytes and the NUL. */
static void put_s(enc *e, const char *s)
{
    if (s == NULL) {
        put_u(e, 0);
        return;
    }
    size_t n = strlen(s) + 1;
    put_u(e, n);
    put(e, s, n);
}

static void put_kernels(enc *e, int has, const ulp_diff_kernel *k, size_t n)
{
    if (!has)
        return;
    put_u(e, n);
    for (size_t i = 0; i < n; i++) {
        put_s(e, k[i].name);
        for (int d = 0; d < 3; d++) {
            put_i(e, k[i].grid[d]);
            put_i(e, k[i].block[d]);
        }
    }
}

/* The fields jgemms() writes (report_json_row.c), not the struct's padding. */
static void put_gemms(enc *e, int has, const ulp_gemm_info *g, size_t n)
{
    if (!has)
        return;
    put_u(e, n);
    for (size_t i = 0; i < n; i++) {
        put_u(e, g[i].seq);
        put_i(e, g[i].m);
        put_i(e, g[i].n);
        put_i(e, g[i].k);
        put_i(e, g[i].batch);
        put_i(e, g[i].algo_id);
        put_i(e, g[i].splitk);
        put_u(e, g[i].workspace);
        put_i(e, g[i].status);
        const char *str[] = {g[i].api,    g[i].transa,    g[i].transb,  g[i].a_type, g[i].b_type,
                             g[i].c_type, g[i].d_type,    g[i].compute, g[i].algo,   g[i].tile,
                             g[i].stages, g[i].reduction, g[i].cluster};
        for (size_t k = 0; k < sizeof str / sizeof str[0]; k++)
            put_s(e, str[k]);
    }
}

static void put_metrics(enc *e, const ulp_diff_row *row)
{
    const ulp_diff_metrics *m = &row->m;
    put_u(e, m->differing);
    put_u(e, m->max_ulp);
    put_u(e, m->nonfinite_mismatch);
    put_f(e, m->max_abs_diff);
    put_f(e, m->mean_ulp);
    int top = 0;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
        if (m->hist[k])
            top = k;
    put_u(e, (uint64_t)top);
    for (int k = 0; k <= top; k++)
        put_u(e, m->hist[k]);
    put_u(e, m->sign_changes);
    put_f(e, m->max_abs);
    put_f(e, m->max_abs_diff_ulps_at_max);
    put_i(e, m->worst_flat);
    if (m->worst_flat >= 0) {
        for (int k = 0; k < row->ndim_a; k++)
            put_i(e, m->worst_index[k]);
        put_u(e, m->worst_bits_a);
        put_u(e, m->worst_bits_b);
        put_f(e, m->worst_a);
        put_f(e, m->worst_b);
    }
    put_i(e, m->max_abs_diff_flat);
}

static void put_aligned(enc *e, const ulp_diff_row *row)
{
    put_u(e, row->positions_compared);
    put_u(e, row->positions_only_in_a);
    put_u(e, row->positions_only_in_b);
    put_u(e, row->positions_differing);
    put_u(e, row->positions_parted);
    put_i(e, row->first_request);
    put_i(e, row->first_position);
    put_i(e, row->worst_request);
    put_i(e, row->worst_position);
    put_u(e, row->n_inputs);
    for (size_t k = 0; k < row->n_inputs; k++)
        put_s(e, row->inputs[k]);
    put_i(e, row->origin);
    put_s(e, row->capture_next);
    put_i(e, row->capture_request);
    put_i(e, row->capture_first);
    put_i(e, row->capture_last);
    put_u(e, row->n_keys);
    for (size_t k = 0; k < row->n_keys; k++) {
        const ulp_diff_key *key = &row->keys[k];
        put_i(e, key->request);
        put_i(e, key->position);
        put_i(e, key->occurrence_a);
        put_i(e, key->occurrence_b);
        put_i(e, key->differs);
        put_i(e, key->origin);
        put_i(e, key->origin_input);
    }
}

/* The fields ulp__json_row() reads, and only those. */
static void put_row(enc *e, const ulp_diff_row *row)
{
    put_s(e, row->name);
    put_s(e, row->role);
    put_i(e, row->occurrence);
    put_i(e, row->seq_a);
    put_i(e, row->seq_b);
    put_i(e, row->layer);
    put_i(e, row->dtype_a);
    put_i(e, row->dtype_b);
    put_i(e, row->ndim_a);
    put_i(e, row->ndim_b);
    for (int k = 0; k < row->ndim_a; k++)
        put_i(e, row->shape_a[k]);
    for (int k = 0; k < row->ndim_b; k++)
        put_i(e, row->shape_b[k]);
    put_u(e, row->elements);
    put_i(e, row->status);
    put_u(e, (uint64_t)(row->has_kernels_a != 0) | (uint64_t)(row->has_kernels_b != 0) << 1 |
                 (uint64_t)(row->has_gemms_a != 0) << 2 | (uint64_t)(row->has_gemms_b != 0) << 3 |
                 (uint64_t)(row->aligned != 0) << 4 | (uint64_t)(row->sliced != 0) << 5 |
                 (uint64_t)(row->rounded != 0) << 6);
    if (row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS)
        put_metrics(e, row);
    put_kernels(e, row->has_kernels_a, row->kernels_a, row->n_kernels_a);
    put_kernels(e, row->has_kernels_b, row->kernels_b, row->n_kernels_b);
    put_gemms(e, row->has_gemms_a, row->gemms_a, row->n_gemms_a);
    put_gemms(e, row->has_gemms_b, row->gemms_b, row->n_gemms_b);
    put_s(e, row->positions_in);
    put_s(e, row->hint);
    put_s(e, row->site);
    put_s(e, row->name_b);
    put_s(e, row->layout);
    put_i(e, row->layout_side);
    if (row->sliced) {
        put_i(e, row->token_axis);
        put_i(e, row->slice_first_a);
        put_i(e, row->slice_first_b);
        put_i(e, row->slice_rows);
    }
    if (row->aligned)
        put_aligned(e, row);
    if (row->rounded) {
        put_i(e, row->compared_dtype);
        put_i(e, row->rounded_side);
        put_u(e, row->rounded_equal);
        put_f(e, row->max_abs_diff_fine);
        put_i(e, row->max_abs_diff_fine_flat);
    }
}

int ulp__json_spool_rows(const ulp_diff_row *rows, size_t n, FILE *spool)
{
    enc e = {NULL, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        size_t at = e.n;
        uint32_t len = 0;
        put(&e, &len, sizeof len);
        put_row(&e, &rows[i]);
        if (e.oom || e.n - at - sizeof len > UINT32_MAX)
            break;
        len = (uint32_t)(e.n - at - sizeof len);
        memcpy(e.b + at, &len, sizeof len);
    }
    int rc = e.oom ? -1 : 0;
    if (rc == 0 && e.n != 0)
        fwrite(e.b, 1, e.n, spool); /* its errors: the caller's ferror() */
    free(e.b);
    return rc;
}

/* ---- Decoding. ---- */

typedef struct dec {
    const unsigned char *p, *end;
    int bad; /* read past the record, or a value out of range */
    int oom; /* or no memory for what it holds */
} dec;

static inline uint64_t get_u(dec *d)
{
    if (d->p < d->end && *d->p < 0x80) /* most values: one byte */
        return *d->p++;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (d->p >= d->end) {
            d->bad = 1;
            return 0;
        }
        unsigned char c = *d->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (c < 0x80)
            return v;
    }
    d->bad = 1;
    return 0;
}

static int64_t get_i(dec *d)
{
    uint64_t u = get_u(d);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static void get(dec *d, void *out, size_t n)
{
    if ((size_t)(d->end - d->p) < n) {
        d->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, d->p, n);
    d->p += n;
}

static double get_f(dec *d)
{
    double v;
    get(d, &v, sizeof v);
    return v;
}

/* A string in place (the record holds its NUL), or NULL. */
static const char *get_s(dec *d)
{
    uint64_t n = get_u(d);
    if (n == 0)
        return NULL;
    if ((uint64_t)(d->end - d->p) < n || d->p[n - 1] != '\0') {
        d->bad = 1;
        return NULL;
    }
    const char *s = (const char *)d->p;
    d->p += n;
    return s;
}

/* A count of elements of `size` bytes the record can still hold. */
static size_t get_n(dec *d, size_t size)
{
    uint64_t n = get_u(d);
    if (n > (uint64_t)(d->end - d->p) / (size ? size : 1)) {
        d->bad = 1;
        return 0;
    }
    return (size_t)n;
}

static int get_ndim(dec *d)
{
    int64_t v = get_i(d);
    if (v < 0 || v > ULP_SNAPSHOT_MAX_RANK) {
        d->bad = 1;
        return 0;
    }
    return (int)v;
}

/* What a decoded row points to besides the record. */
typedef struct scratch {
    ulp_diff_kernel *kernels[2];
    size_t cap_kernels[2];
    ulp_gemm_info *gemms[2];
    size_t cap_gemms[2];
    ulp_diff_key *keys;
    size_t cap_keys;
    const char **inputs;
    size_t cap_inputs;
    unsigned char *rec;
    size_t cap_rec;
} scratch;

static void scratch_free(scratch *s)
{
    for (int b = 0; b < 2; b++) {
        free(s->kernels[b]);
        free(s->gemms[b]);
    }
    free(s->keys);
    free(s->inputs);
    free(s->rec);
}

static ulp_diff_kernel *get_kernels(dec *d, scratch *s, int b, size_t *n)
{
    *n = get_n(d, 7);
    if (!d->bad && ULP__GROW(s->kernels[b], s->cap_kernels[b], *n + 1) != 0)
        d->bad = d->oom = 1;
    if (d->bad) {
        *n = 0;
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        ulp_diff_kernel *k = &s->kernels[b][i];
        k->name = get_s(d);
        for (int x = 0; x < 3; x++) {
            k->grid[x] = (int32_t)get_i(d);
            k->block[x] = (int32_t)get_i(d);
        }
    }
    return s->kernels[b];
}

/* A string into the array `field` of `size` bytes. */
static void get_fixed(dec *d, char *field, size_t size)
{
    const char *s = get_s(d);
    size_t n = s != NULL ? strlen(s) : size;
    if (n >= size) {
        d->bad = 1;
        return;
    }
    memcpy(field, s, n + 1);
}

static ulp_gemm_info *get_gemms(dec *d, scratch *s, int b, size_t *n)
{
    *n = get_n(d, 22);
    if (!d->bad && ULP__GROW(s->gemms[b], s->cap_gemms[b], *n + 1) != 0)
        d->bad = d->oom = 1;
    if (d->bad) {
        *n = 0;
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        ulp_gemm_info *g = &s->gemms[b][i];
        memset(g, 0, sizeof *g);
        g->seq = get_u(d);
        g->m = get_i(d);
        g->n = get_i(d);
        g->k = get_i(d);
        g->batch = get_i(d);
        g->algo_id = (int32_t)get_i(d);
        g->splitk = (int32_t)get_i(d);
        g->workspace = get_u(d);
        g->status = (int32_t)get_i(d);
        get_fixed(d, g->api, sizeof g->api);
        get_fixed(d, g->transa, sizeof g->transa);
        get_fixed(d, g->transb, sizeof g->transb);
        get_fixed(d, g->a_type, sizeof g->a_type);
        get_fixed(d, g->b_type, sizeof g->b_type);
        get_fixed(d, g->c_type, sizeof g->c_type);
        get_fixed(d, g->d_type, sizeof g->d_type);
        get_fixed(d, g->compute, sizeof g->compute);
        get_fixed(d, g->algo, sizeof g->algo);
        get_fixed(d, g->tile, sizeof g->tile);
        get_fixed(d, g->stages, sizeof g->stages);
        get_fixed(d, g->reduction, sizeof g->reduction);
        get_fixed(d, g->cluster, sizeof g->cluster);
    }
    return s->gemms[b];
}

static void get_metrics(dec *d, ulp_diff_row *row)
{
    ulp_diff_metrics *m = &row->m;
    m->differing = get_u(d);
    m->max_ulp = get_u(d);
    m->nonfinite_mismatch = get_u(d);
    m->max_abs_diff = get_f(d);
    m->mean_ulp = get_f(d);
    uint64_t top = get_u(d);
    if (top >= ULP_DIFF_HIST_BINS) {
        d->bad = 1;
        return;
    }
    for (uint64_t k = 0; k <= top; k++)
        m->hist[k] = get_u(d);
    m->sign_changes = get_u(d);
    m->max_abs = get_f(d);
    m->max_abs_diff_ulps_at_max = get_f(d);
    m->worst_flat = get_i(d);
    if (m->worst_flat >= 0) {
        for (int k = 0; k < row->ndim_a; k++)
            m->worst_index[k] = get_i(d);
        m->worst_bits_a = get_u(d);
        m->worst_bits_b = get_u(d);
        m->worst_a = get_f(d);
        m->worst_b = get_f(d);
    }
    m->max_abs_diff_flat = get_i(d);
}

static void get_aligned(dec *d, scratch *s, ulp_diff_row *row)
{
    row->positions_compared = get_u(d);
    row->positions_only_in_a = get_u(d);
    row->positions_only_in_b = get_u(d);
    row->positions_differing = get_u(d);
    row->positions_parted = get_u(d);
    row->first_request = get_i(d);
    row->first_position = get_i(d);
    row->worst_request = get_i(d);
    row->worst_position = get_i(d);
    row->n_inputs = get_n(d, 1);
    if (!d->bad && ULP__GROW(s->inputs, s->cap_inputs, row->n_inputs + 1) != 0)
        d->bad = d->oom = 1;
    if (d->bad) {
        return;
    }
    for (size_t k = 0; k < row->n_inputs; k++)
        s->inputs[k] = get_s(d);
    row->inputs = s->inputs;
    row->origin = (ulp_diff_origin)get_i(d);
    row->capture_next = get_s(d);
    row->capture_request = get_i(d);
    row->capture_first = get_i(d);
    row->capture_last = get_i(d);
    row->n_keys = get_n(d, 7);
    if (!d->bad && ULP__GROW(s->keys, s->cap_keys, row->n_keys + 1) != 0)
        d->bad = d->oom = 1;
    if (d->bad) {
        return;
    }
    for (size_t k = 0; k < row->n_keys; k++) {
        ulp_diff_key *key = &s->keys[k];
        key->request = get_i(d);
        key->position = get_i(d);
        key->occurrence_a = get_i(d);
        key->occurrence_b = get_i(d);
        key->differs = (int)get_i(d);
        key->origin = (ulp_diff_origin)get_i(d);
        key->origin_input = (int)get_i(d);
    }
    row->keys = s->keys;
}

/* The row of record d; 0, or -1 when the record is not one put_row() wrote. */
static int get_row(dec *d, scratch *s, ulp_diff_row *row)
{
    memset(row, 0, sizeof *row);
    row->name = get_s(d);
    row->role = get_s(d);
    row->occurrence = get_i(d);
    row->seq_a = get_i(d);
    row->seq_b = get_i(d);
    row->layer = (int32_t)get_i(d);
    row->dtype_a = (ulp_dtype)get_i(d);
    row->dtype_b = (ulp_dtype)get_i(d);
    row->ndim_a = get_ndim(d);
    row->ndim_b = get_ndim(d);
    for (int k = 0; k < row->ndim_a; k++)
        row->shape_a[k] = get_i(d);
    for (int k = 0; k < row->ndim_b; k++)
        row->shape_b[k] = get_i(d);
    row->elements = get_u(d);
    row->status = (ulp_diff_status)get_i(d);
    uint64_t flags = get_u(d);
    if (row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS)
        get_metrics(d, row);
    row->has_kernels_a = (flags & 1) != 0;
    row->has_kernels_b = (flags & 2) != 0;
    row->has_gemms_a = (flags & 4) != 0;
    row->has_gemms_b = (flags & 8) != 0;
    row->aligned = (flags & 16) != 0;
    row->sliced = (flags & 32) != 0;
    row->rounded = (flags & 64) != 0;
    if (row->has_kernels_a)
        row->kernels_a = get_kernels(d, s, 0, &row->n_kernels_a);
    if (row->has_kernels_b)
        row->kernels_b = get_kernels(d, s, 1, &row->n_kernels_b);
    if (row->has_gemms_a)
        row->gemms_a = get_gemms(d, s, 0, &row->n_gemms_a);
    if (row->has_gemms_b)
        row->gemms_b = get_gemms(d, s, 1, &row->n_gemms_b);
    row->positions_in = get_s(d);
    row->hint = get_s(d);
    row->site = get_s(d);
    row->name_b = get_s(d);
    row->layout = get_s(d);
    row->layout_side = (int)get_i(d);
    if (row->sliced) {
        row->token_axis = (int)get_i(d);
        row->slice_first_a = get_i(d);
        row->slice_first_b = get_i(d);
        row->slice_rows = get_i(d);
    }
    if (row->aligned)
        get_aligned(d, s, row);
    row->max_abs_diff_fine_flat = -1;
    if (row->rounded) {
        int64_t cd = get_i(d);
        row->compared_dtype = cd >= 0 && cd < ULP_DTYPE_COUNT ? (ulp_dtype)cd : ULP_DTYPE_INVALID;
        d->bad |= row->compared_dtype == ULP_DTYPE_INVALID;
        row->rounded_side = get_i(d) != 0;
        row->rounded_equal = get_u(d);
        row->max_abs_diff_fine = get_f(d);
        row->max_abs_diff_fine_flat = get_i(d);
    }
    return d->bad || d->p != d->end ? -1 : 0;
}

int ulp__json_unspool(FILE *spool, FILE *f)
{
    scratch s;
    memset(&s, 0, sizeof s);
    ulp__jw *w = malloc(sizeof *w);
    int rc = w != NULL ? 0 : -2;
    if (w != NULL)
        ulp__jw_init(w, f, 2);
    for (size_t i = 0; rc == 0; i++) {
        uint32_t len;
        size_t got = fread(&len, 1, sizeof len, spool);
        if (got == 0 && !ferror(spool))
            break; /* the end */
        if (got == sizeof len && ULP__GROW(s.rec, s.cap_rec, (size_t)len + 1) != 0) {
            rc = -2;
            break;
        }
        if (got != sizeof len || fread(s.rec, 1, len, spool) != len) {
            rc = -1;
            break;
        }
        dec d = {s.rec, s.rec + len, 0, 0};
        ulp_diff_row row;
        if (get_row(&d, &s, &row) != 0) {
            rc = d.oom ? -2 : -1;
            break;
        }
        ulp__jw_raw(w, i == 0 ? "[\n    " : ",\n    ", 6);
        ulp__json_row(w, &row);
    }
    if (w != NULL)
        ulp__jw_flush(w);
    free(w);
    scratch_free(&s);
    return rc;
}
