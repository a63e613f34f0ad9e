/*
 * A row of the JSON report (FORMAT.md "JSON report", "rows"), written as it
 * goes (report_json_out.h) in the key order and with the values the
 * jansson tree of report_json.c had: a value that does not exist is null,
 * a non-finite double null, an f64 |a - b| that overflowed DBL_MAX.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report_json_out.h"
#include "report_priv.h"

/* A magnitude that overflowed double (f64 |a - b|) saturates: JSON has no inf. */
static void jmag(ulp__jw *w, double v)
{
    ulp__jw_num(w, isinf(v) && v > 0 ? DBL_MAX : v);
}

static void jshape(ulp__jw *w, int ndim, const int64_t *shape)
{
    ulp__jw_open(w, '[');
    for (int k = 0; k < ndim; k++) {
        ulp__jw_item(w);
        ulp__jw_int(w, shape[k]);
    }
    ulp__jw_close(w, ']');
}

static void jdim3(ulp__jw *w, const int32_t *v)
{
    jshape(w, 3, (const int64_t[]){v[0], v[1], v[2]});
}

static void jkernels(ulp__jw *w, const ulp_diff_kernel *k, size_t n)
{
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_key(w, "name");
        ulp__jw_str(w, k[i].name);
        ulp__jw_key(w, "grid");
        jdim3(w, k[i].grid);
        ulp__jw_key(w, "block");
        jdim3(w, k[i].block);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

/* The objects of `gemms_a` / `gemms_b` (FORMAT.md). */
static void jgemms(ulp__jw *w, const ulp_gemm_info *g, size_t n)
{
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "seq", (int64_t)g[i].seq);
        ulp__jw_kstr(w, "api", g[i].api);
        ulp__jw_kint(w, "m", g[i].m);
        ulp__jw_kint(w, "n", g[i].n);
        ulp__jw_kint(w, "k", g[i].k);
        ulp__jw_kint(w, "batch", g[i].batch);
        ulp__jw_kstr(w, "transa", g[i].transa);
        ulp__jw_kstr(w, "transb", g[i].transb);
        ulp__jw_kstr(w, "a_type", g[i].a_type);
        ulp__jw_kstr(w, "b_type", g[i].b_type);
        ulp__jw_kstr(w, "c_type", g[i].c_type);
        ulp__jw_kstr(w, "d_type", g[i].d_type);
        ulp__jw_kstr(w, "compute", g[i].compute);
        ulp__jw_kstr(w, "algo", g[i].algo);
        ulp__jw_kint(w, "algo_id", g[i].algo_id);
        ulp__jw_kstr(w, "tile", g[i].tile);
        ulp__jw_kstr(w, "stages", g[i].stages);
        ulp__jw_kint(w, "splitk", g[i].splitk);
        ulp__jw_kstr(w, "reduction", g[i].reduction);
        ulp__jw_kstr(w, "cluster", g[i].cluster);
        ulp__jw_kint(w, "workspace", (int64_t)g[i].workspace);
        ulp__jw_kint(w, "status", g[i].status);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

void ulp__json_kernels(ulp__jw *w, const ulp_diff_row *row)
{
    if (row->has_kernels_a) {
        ulp__jw_key(w, "kernels_a");
        jkernels(w, row->kernels_a, row->n_kernels_a);
    }
    if (row->has_kernels_b) {
        ulp__jw_key(w, "kernels_b");
        jkernels(w, row->kernels_b, row->n_kernels_b);
    }
    if (row->has_gemms_a) {
        ulp__jw_key(w, "gemms_a");
        jgemms(w, row->gemms_a, row->n_gemms_a);
    }
    if (row->has_gemms_b) {
        ulp__jw_key(w, "gemms_b");
        jgemms(w, row->gemms_b, row->n_gemms_b);
    }
}

static void jkey(ulp__jw *w, const char *name, int has, int64_t request, int64_t position)
{
    if (!ulp__jw_kobject_or_null(w, name, has))
        return;
    ulp__jw_kint(w, "request", request);
    ulp__jw_kint(w, "position", position);
    ulp__jw_close(w, '}');
}

/* The occurrences of keys [k0, k1) of one side, each once in a row. */
static void joccurrences(ulp__jw *w, const ulp_diff_row *row, size_t k0, size_t k1, int side_b)
{
    ulp__jw_open(w, '[');
    for (size_t q = k0; q < k1; q++) {
        const ulp_diff_key *key = &row->keys[q];
        int64_t occ = side_b ? key->occurrence_b : key->occurrence_a;
        int64_t prev = q == k0  ? 0
                       : side_b ? row->keys[q - 1].occurrence_b
                                : row->keys[q - 1].occurrence_a;
        if (q == k0 || occ != prev) {
            ulp__jw_item(w);
            ulp__jw_int(w, occ);
        }
    }
    ulp__jw_close(w, ']');
}

/* The runs of differing keys with their origin (FORMAT.md, "Aligned diff"). */
static void jruns(ulp__jw *w, const ulp_diff_row *row)
{
    ulp__jw_open(w, '[');
    ulp__key_run run;
    size_t k = 0;
    while (ulp__next_run(row, &k, &run)) {
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "request", run.request);
        ulp__jw_kint(w, "first", run.first);
        ulp__jw_kint(w, "last", run.last);
        ulp__jw_kstr(w, "origin", ulp_diff_origin_name(run.origin));
        ulp__jw_kstr(w, "input",
                     run.input >= 0 && (size_t)run.input < row->n_inputs ? row->inputs[run.input]
                                                                         : NULL);
        ulp__jw_key(w, "occurrences_a");
        joccurrences(w, row, run.k0, run.k1, 0);
        ulp__jw_key(w, "occurrences_b");
        joccurrences(w, row, run.k0, run.k1, 1);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

static void set_aligned_keys(ulp__jw *w, const ulp_diff_row *row)
{
    ulp__jw_key(w, "positions_compared");
    ulp__jw_u64(w, row->positions_compared);
    ulp__jw_key(w, "positions_only_in_a");
    ulp__jw_u64(w, row->positions_only_in_a);
    ulp__jw_key(w, "positions_only_in_b");
    ulp__jw_u64(w, row->positions_only_in_b);
    ulp__jw_key(w, "positions_differing");
    ulp__jw_u64(w, row->positions_differing);
    ulp__jw_key(w, "positions_parted");
    ulp__jw_u64(w, row->positions_parted);
    jkey(w, "first_differing", row->first_position >= 0, row->first_request, row->first_position);
    jkey(w, "worst_key", row->worst_position >= 0, row->worst_request, row->worst_position);
    ulp__jw_key(w, "inputs");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < row->n_inputs; k++) {
        ulp__jw_item(w);
        ulp__jw_str(w, row->inputs[k]);
    }
    ulp__jw_close(w, ']');
    ulp__jw_kstr(w, "origin", ulp_diff_origin_name(row->origin));
    ulp__jw_key(w, "differing_positions");
    jruns(w, row);
    if (!ulp__jw_kobject_or_null(w, "capture_next", row->capture_next != NULL))
        return;
    ulp__jw_kstr(w, "name", row->capture_next);
    ulp__jw_kint(w, "request", row->capture_request);
    ulp__jw_kint(w, "first", row->capture_first);
    ulp__jw_kint(w, "last", row->capture_last);
    ulp__jw_close(w, '}');
}

/* Keys of aligned, sliced and hinted rows. */
static void set_aligned(ulp__jw *w, const ulp_diff_row *row)
{
    ulp__jw_key(w, "aligned");
    ulp__jw_bool(w, row->aligned);
    if (row->positions_in != NULL)
        ulp__jw_kstr(w, "positions_only_on", row->positions_in);
    if (row->hint != NULL)
        ulp__jw_kstr(w, "hint", row->hint);
    if (row->sliced) {
        ulp__jw_key(w, "rows_slice");
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "axis", row->token_axis);
        ulp__jw_kint(w, "first_a", row->slice_first_a);
        ulp__jw_kint(w, "first_b", row->slice_first_b);
        ulp__jw_kint(w, "count", row->slice_rows);
        ulp__jw_close(w, '}');
    }
    if (row->aligned)
        set_aligned_keys(w, row);
}

static void jbits(ulp__jw *w, const char *key, uint64_t bits, ulp_dtype dt)
{
    char b[24];
    snprintf(b, sizeof b, "0x%0*" PRIx64, (int)(2 * ulp_dtype_size(dt)), bits);
    ulp__jw_kstr(w, key, b);
}

/* The keys of a compared row's metrics after "seq_b" / "shape_b". */
static void set_metrics(ulp__jw *w, const ulp_diff_row *row)
{
    const ulp_diff_metrics *m = &row->m;
    double frac = row->elements ? (double)m->differing / (double)row->elements : 0.0;
    if (isfinite(frac)) { /* json_real() refuses the others, and the key went missing */
        ulp__jw_key(w, "differing_fraction");
        ulp__jw_real(w, frac);
    }
    ulp__jw_key(w, "mean_ulp");
    ulp__jw_num(w, m->mean_ulp);
    int top = 0;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
        if (m->hist[k])
            top = k;
    ulp__jw_key(w, "ulp_hist");
    ulp__jw_open(w, '[');
    for (int k = 0; k <= top; k++) {
        ulp__jw_item(w);
        ulp__jw_u64(w, m->hist[k]);
    }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "sign_changes");
    ulp__jw_u64(w, m->sign_changes);
    ulp__jw_key(w, "max_abs");
    ulp__jw_num(w, m->max_abs);
    ulp__jw_key(w, "max_abs_diff_ulps_at_max");
    jmag(w, m->max_abs_diff_ulps_at_max);
    ulp__jw_key(w, "worst_index");
    if (m->worst_flat >= 0) {
        jshape(w, row->ndim_a, m->worst_index);
        ulp__jw_kint(w, "worst_flat", m->worst_flat);
        ulp__jw_key(w, "worst_a");
        ulp__jw_num(w, m->worst_a);
        ulp__jw_key(w, "worst_b");
        ulp__jw_num(w, m->worst_b);
        jbits(w, "worst_bits_a", m->worst_bits_a, ulp__row_dtype(row));
        jbits(w, "worst_bits_b", m->worst_bits_b, ulp__row_dtype(row));
    } else {
        ulp__jw_null(w);
    }
    ulp__jw_key(w, "max_abs_diff_index");
    if (m->max_abs_diff_flat >= 0) {
        int64_t idx[ULP_SNAPSHOT_MAX_RANK];
        ulp_diff_unflatten((uint64_t)m->max_abs_diff_flat, row->ndim_a, row->shape_a, idx);
        jshape(w, row->ndim_a, idx);
    } else {
        ulp__jw_null(w);
    }
}

/* A row of two dtypes, compared in the coarser one (FORMAT.md "Different dtypes"). */
static void set_rounded(ulp__jw *w, const ulp_diff_row *row)
{
    ulp__jw_kstr(w, "compared_in", ulp_dtype_name(row->compared_dtype));
    ulp__jw_kstr(w, "rounded_side", row->rounded_side ? "b" : "a");
    ulp__jw_kstr(w, "rounding", "nearest_even");
    ulp__jw_key(w, "rounded_equal");
    ulp__jw_u64(w, row->rounded_equal);
    ulp__jw_key(w, "rounded_equal_fraction");
    ulp__jw_num(w, row->elements ? (double)row->rounded_equal / (double)row->elements : 1.0);
    ulp__jw_key(w, "max_abs_diff_fine");
    jmag(w, row->max_abs_diff_fine);
    ulp__jw_key(w, "max_abs_diff_fine_index");
    if (row->max_abs_diff_fine_flat >= 0) {
        int64_t idx[ULP_SNAPSHOT_MAX_RANK];
        ulp_diff_unflatten((uint64_t)row->max_abs_diff_fine_flat, row->ndim_a, row->shape_a, idx);
        jshape(w, row->ndim_a, idx);
    } else {
        ulp__jw_null(w);
    }
}

static void optional_int(ulp__jw *w, const char *key, int has, int64_t v)
{
    ulp__jw_key(w, key);
    if (has)
        ulp__jw_int(w, v);
    else
        ulp__jw_null(w);
}

void ulp__json_row(ulp__jw *w, const ulp_diff_row *row)
{
    const ulp_diff_metrics *m = &row->m;
    int side_b = row->status == ULP_DIFF_ONLY_IN_B;
    int paired = row->seq_a >= 0 && row->seq_b >= 0;
    int compared = row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS;

    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "name", row->name);
    ulp__jw_kint(w, "occurrence", row->occurrence);
    optional_int(w, "layer", row->layer >= 0, row->layer);
    if (row->site != NULL || row->name_b != NULL) { /* the comparison paired by site */
        ulp__jw_kstr(w, "name_b", row->name_b);
        ulp__jw_kstr(w, "site", row->site);
        /* This row's own pairing: by (site, layer), or by a name both have
         * (auto) or that no rule knows. */
        ulp__jw_kstr(w, "paired_by", row->site != NULL ? "site" : "name");
    }
    if (row->layout != NULL) { /* the side whose captures made the site's tensor */
        ulp__jw_key(w, "layout");
        ulp__jw_open(w, '{');
        ulp__jw_kstr(w, "side", row->layout_side ? "b" : "a");
        ulp__jw_kstr(w, "transform", row->layout);
        ulp__jw_close(w, '}');
    }
    ulp__jw_kstr(w, "role", row->role);
    ulp__jw_kstr(w, "dtype", ulp_dtype_name(side_b ? row->dtype_b : row->dtype_a));
    ulp__jw_key(w, "shape");
    if (side_b)
        jshape(w, row->ndim_b, row->shape_b);
    else
        jshape(w, row->ndim_a, row->shape_a);
    ulp__jw_key(w, "elements");
    ulp__jw_u64(w, row->elements);
    ulp__jw_kstr(w, "status", ulp_diff_status_name(row->status));
    const char *counts[] = {"differing", "max_ulp", "max_abs_diff", "nonfinite_mismatch"};
    for (int k = 0; k < 4; k++) {
        ulp__jw_key(w, counts[k]);
        if (!compared)
            ulp__jw_null(w);
        else if (k == 2)
            jmag(w, m->max_abs_diff);
        else
            ulp__jw_u64(w, k == 0 ? m->differing : k == 1 ? m->max_ulp : m->nonfinite_mismatch);
    }
    /* Extra keys. */
    optional_int(w, "seq", row->seq_a >= 0, row->seq_a);
    optional_int(w, "seq_b", row->seq_b >= 0, row->seq_b);
    if (paired) {
        ulp__jw_kstr(w, "dtype_b", ulp_dtype_name(row->dtype_b));
        ulp__jw_key(w, "shape_b");
        jshape(w, row->ndim_b, row->shape_b);
    }
    if (compared)
        set_metrics(w, row);
    if (compared && row->rounded)
        set_rounded(w, row);
    ulp__json_kernels(w, row);
    set_aligned(w, row);
    ulp__jw_close(w, '}');
}
