/*
 * Token metadata of a capture (FORMAT.md, "Rows and tokens"): the
 * descriptor's positions, requests and inputs checked at the call
 * (ULP_EINVAL), written as attributes (checked with plain HDF5 reads), and
 * read back by the snapshot reader, which refuses files that break the
 * rules (ULP_EBADATTR).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "capture_testutil.h"
#include "ulpprof/capture.h"
#include "ulpprof/snapshot.h"

static ulp_session *open_session(const char *path)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = "rows";
    o.attrs = "";
    o.record_env = 0;
    ulp_session *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_session_open(&o, &s, &err), ULP_OK);
    return s;
}

static ulp_capture_desc desc_f32(const char *name, const float *data, int ndim,
                                 const int64_t *shape)
{
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = name;
    d.data = data;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = ndim;
    d.shape = shape;
    return d;
}

/* Reads an integer attribute of any rank as int64 with its extents. */
static int64_t *read_i64_attr(hid_t ds, const char *name, int *rank, hsize_t *dims)
{
    hid_t a = H5Aopen(ds, name, H5P_DEFAULT);
    if (a < 0)
        return NULL;
    hid_t sp = H5Aget_space(a);
    *rank = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int64_t *v = calloc((size_t)n + 1, sizeof *v);
    if (H5Aread(a, H5T_NATIVE_INT64, v) < 0) {
        free(v);
        v = NULL;
    }
    H5Sclose(sp);
    H5Aclose(a);
    return v;
}

static void test_capture_rows__round_trip(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/a.h5", tu_tmpdir("rows"));
    ulp_session *s = open_session(path);
    float x[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    const int64_t shape[3] = {2, 3, 4};
    const int64_t pos[6] = {0, 1, 2, 5, 6, 7};
    const int64_t req[6] = {0, 0, 0, 3, 3, 3};
    const char *inputs[2] = {"layers.0.out", "embed"};
    ulp_capture_desc d = desc_f32("h", x, 3, shape);
    d.positions = pos;
    d.requests = req;
    d.row_rank = 2;
    d.inputs = inputs;
    d.n_inputs = 2;
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    /* Without token fields: an old-style capture. */
    ulp_capture_desc plain = desc_f32("h", x, 3, shape);
    assert_int_equal(ulp_session_capture(s, &plain), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);

    /* Plain HDF5: the attributes as FORMAT.md describes them. */
    hid_t f = tu_open(path);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, "/captures/h/0", H5P_DEFAULT);
    assert_true(ds >= 0);
    int rank = 0;
    hsize_t dims[8];
    int64_t *p = read_i64_attr(ds, "positions", &rank, dims);
    assert_non_null(p);
    assert_int_equal(rank, 2);
    assert_int_equal(dims[0], 2);
    assert_int_equal(dims[1], 3);
    assert_memory_equal(p, pos, sizeof pos);
    assert_true(tu_attr_type_is(ds, "positions", H5T_STD_I64LE));
    free(p);
    p = read_i64_attr(ds, "requests", &rank, dims);
    assert_non_null(p);
    assert_memory_equal(p, req, sizeof req);
    free(p);
    hid_t a = H5Aopen(ds, "inputs", H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    size_t width = H5Tget_size(t);
    char buf[64] = {0};
    assert_true(width * 2 <= sizeof buf);
    assert_true(H5Aread(a, t, buf) >= 0);
    assert_string_equal(buf, "layers.0.out");
    assert_string_equal(buf + width, "embed");
    H5Tclose(t);
    H5Aclose(a);
    H5Dclose(ds);
    ds = H5Dopen2(f, "/captures/h/1", H5P_DEFAULT);
    assert_false(tu_attr_exists(ds, "positions"));
    assert_false(tu_attr_exists(ds, "requests"));
    assert_false(tu_attr_exists(ds, "inputs"));
    H5Dclose(ds);
    H5Fclose(f);

    /* The reader's accessors. */
    ulp_snapshot *snap = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path, &snap, &err), ULP_OK);
    const ulp_capture_info *c = ulp_snapshot_capture(snap, 0);
    assert_int_equal(c->row_rank, 2);
    assert_int_equal(c->rows, 6);
    assert_memory_equal(c->positions, pos, sizeof pos);
    assert_memory_equal(c->requests, req, sizeof req);
    assert_int_equal(c->n_inputs, 2);
    assert_string_equal(c->inputs[0], "layers.0.out");
    assert_string_equal(c->inputs[1], "embed");
    c = ulp_snapshot_capture(snap, 1);
    assert_int_equal(c->row_rank, 0);
    assert_int_equal(c->rows, 0);
    assert_null(c->positions);
    assert_null(c->requests);
    assert_int_equal(c->n_inputs, 0);
    assert_null(c->inputs);
    ulp_snapshot_close(snap);
    tu_done();
}

/* Each bad descriptor is refused, and the session goes on accepting good ones. */
static void test_capture_rows__refused(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/a.h5", tu_tmpdir("rows"));
    ulp_session *s = open_session(path);
    float x[8] = {0};
    const int64_t shape[2] = {4, 2};
    const int64_t pos[4] = {0, 1, 2, 3};
    const int64_t neg[4] = {0, -1, 2, 3};
    const int64_t rep[4] = {0, 1, 1, 3};
    const int64_t req_ok[4] = {0, 0, 1, 1};
    const char *bad_inputs[1] = {"a/b"};
    ulp_capture_desc d;

    d = desc_f32("x", x, 2, shape);
    d.requests = req_ok; /* requests without positions */
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d = desc_f32("x", x, 2, shape);
    d.positions = pos; /* row_rank 0 */
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.row_rank = 3; /* above the rank */
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.row_rank = 1;
    d.positions = neg;
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.positions = rep;
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.requests = req_ok; /* (0,1) and (1,1): distinct keys */
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    d = desc_f32("x", x, 2, shape);
    d.n_inputs = 1; /* no names */
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.inputs = bad_inputs;
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    d.n_inputs = -1;
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    assert_int_equal(ulp_session_close(s), ULP_OK);

    ulp_snapshot *snap = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path, &snap, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_capture_count(snap), 1);
    const ulp_capture_info *c = ulp_snapshot_capture(snap, 0);
    assert_memory_equal(c->positions, rep, sizeof rep);
    assert_memory_equal(c->requests, req_ok, sizeof req_ok);
    ulp_snapshot_close(snap);
    tu_done();
}

/* Past 8,000 rows positions are stored as int32; past 16,000 they are refused. */
static void test_capture_rows__large_and_empty(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/a.h5", tu_tmpdir("rows"));
    ulp_session *s = open_session(path);
    enum { N = 16001 };
    int64_t *pos = malloc(N * sizeof *pos);
    uint8_t *x = calloc(N, 1);
    for (int64_t i = 0; i < N; i++)
        pos[i] = 1000000 + i;
    int64_t shape[1] = {N - 1};
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = "big";
    d.data = x;
    d.dtype = ULP_DTYPE_U8;
    d.ndim = 1;
    d.shape = shape;
    d.positions = pos;
    d.row_rank = 1;
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    shape[0] = N;
    assert_int_equal(ulp_session_capture(s, &d), ULP_EINVAL);
    int64_t empty_shape[2] = {0, 5};
    d.shape = empty_shape;
    d.ndim = 2;
    d.name = "empty";
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);

    hid_t f = tu_open(path);
    hid_t ds = H5Dopen2(f, "/captures/big/0", H5P_DEFAULT);
    assert_true(tu_attr_type_is(ds, "positions", H5T_STD_I32LE));
    H5Dclose(ds);
    H5Fclose(f);

    ulp_snapshot *snap = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path, &snap, &err), ULP_OK);
    const ulp_capture_info *c = ulp_snapshot_capture(snap, 0);
    assert_int_equal(c->rows, N - 1);
    assert_memory_equal(c->positions, pos, (N - 1) * sizeof *pos);
    c = ulp_snapshot_capture(snap, 1);
    assert_int_equal(c->row_rank, 1);
    assert_int_equal(c->rows, 0);
    ulp_snapshot_close(snap);
    free(pos);
    free(x);
    tu_done();
}

/* Adds an int64 attribute of the given extents to /captures/x/0 of `path`. */
static void add_attr(const char *path, const char *name, int rank, const hsize_t *dims,
                     const int64_t *v)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, "/captures/x/0", H5P_DEFAULT);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t a = H5Acreate2(ds, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
}

/* A file of one [4, 2] capture "x" with `pos` (rank prank) and, if given, `req`. */
static void bad_file(const char *path, int prank, const hsize_t *pdims, const int64_t *pos,
                     const int64_t *req, const char *want)
{
    ulp_session *s = open_session(path);
    float x[8] = {0};
    const int64_t shape[2] = {4, 2};
    ulp_capture_desc d = desc_f32("x", x, 2, shape);
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);
    if (pos != NULL)
        add_attr(path, "positions", prank, pdims, pos);
    if (req != NULL)
        add_attr(path, "requests", 1, (const hsize_t[]){4}, req);
    ulp_snapshot *snap = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path, &snap, &err), ULP_EBADATTR);
    assert_null(snap);
    if (strstr(err.msg, want) == NULL || strstr(err.msg, "capture 'x/0'") == NULL)
        fail_msg("message '%s' lacks '%s'", err.msg, want);
    remove(path);
}

static void test_capture_rows__reader_refuses(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/a.h5", tu_tmpdir("rows"));
    const int64_t rep[4] = {3, 1, 3, 0};
    const int64_t neg[4] = {0, 1, -2, 3};
    const int64_t ok[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    bad_file(path, 1, (const hsize_t[]){4}, rep, NULL, "request 0, position 3 appears twice");
    bad_file(path, 1, (const hsize_t[]){4}, neg, NULL, "position -2 of row 2 is negative");
    bad_file(path, 1, (const hsize_t[]){3}, ok, NULL, "'positions' is not shaped like");
    bad_file(path, 2, (const hsize_t[]){4, 1}, ok, NULL, "'positions' is not shaped like");
    bad_file(path, 1, (const hsize_t[]){4}, NULL, ok, "'requests' is not shaped like");
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_rows__round_trip),
        cmocka_unit_test(test_capture_rows__refused),
        cmocka_unit_test(test_capture_rows__large_and_empty),
        cmocka_unit_test(test_capture_rows__reader_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
