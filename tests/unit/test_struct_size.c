/*
 * The structs a caller fills are read by their struct_size (CONTRIBUTING.md,
 * "The public C API and its ABI"): a caller built against an older header
 * -- a struct_size that covers only the first fields -- gets the defaults
 * for the rest, whatever bytes lie past its size; a size of 0, below the
 * first version, or past this library's with a field set is refused with
 * ULP_EINVAL and one stderr line.  Checked through the public API, and the
 * files it writes through plain HDF5.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <time.h>

#include "capture_testutil.h"
#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"
#include "ulpprof/diff.h"
#include "ulpprof/ladder.h"
#include "ulpprof/snapshot.h"

/* What an old caller leaves past its struct: anything.  A pointer of
 * these bytes faults when followed, a count of them is absurd. */
#define JUNK 0xA5

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A session on `path` opened by an old caller: only `path` is covered. */
static ulp_session *open_old(const char *path)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    memset(&o, JUNK, sizeof o);
    o.struct_size = offsetof(ulp_session_options, label);
    o.path = path;
    ulp_session *s = NULL;
    assert_int_equal(ulp_session_open(&o, &s, NULL), ULP_OK);
    return s;
}

/* A descriptor of an old caller: up to `role`, junk after it. */
static ulp_capture_desc old_desc(const char *name, const float *v, const int64_t *shape)
{
    ulp_capture_desc d;
    memset(&d, JUNK, sizeof d);
    d.struct_size = offsetof(ulp_capture_desc, step);
    d.name = name;
    d.data = v;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 1;
    d.shape = shape;
    d.layer = 3;
    d.role = ULP_ROLE_ACTIVATION;
    return d;
}

static void test_struct_size__old_caller_capture_gets_defaults(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("size-old");
    char path[1200];
    snprintf(path, sizeof path, "%s/old.h5", dir);
    unsetenv("ULPPROF_LABEL");
    unsetenv("ULPPROF_ATTR");
    unsetenv("ULPPROF_OBSERVED");
    unsetenv("ULPPROF_QUEUE_MB");
    int64_t before = now_ns();
    ulp_session *s = open_old(path);
    float v[2] = {1.5f, -2.0f};
    int64_t shape[1] = {2};
    ulp_capture_desc d = old_desc("x", v, shape);
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);
    int64_t after = now_ns();

    hid_t f = tu_open(path);
    assert_true(f >= 0);
    char label[64];
    assert_int_equal(tu_attr_str(f, "label", label, sizeof label), 0);
    assert_string_equal(label, "run"); /* the default label, not the junk pointer */
    hid_t env = H5Gopen2(f, "/env", H5P_DEFAULT);
    assert_true(env >= 0);
    H5O_info_t oi;
    assert_true(H5Oget_info(env, &oi) >= 0);
    assert_true(oi.num_attrs > 0); /* record_env's default: 1 */
    H5Gclose(env);
    hid_t ds = H5Dopen2(f, "/captures/x/0", H5P_DEFAULT);
    assert_true(ds >= 0);
    int64_t layer = 0, t = 0;
    assert_int_equal(tu_attr_i64(ds, "layer", &layer), 0);
    assert_int_equal(layer, 3);
    assert_false(tu_attr_exists(ds, "step"));      /* ULP_STEP_NONE */
    assert_false(tu_attr_exists(ds, "positions")); /* no token rows */
    assert_false(tu_attr_exists(ds, "inputs"));
    assert_false(tu_attr_exists(ds, "kernels")); /* no device extension */
    assert_false(tu_attr_exists(ds, "device_ptr"));
    assert_int_equal(tu_attr_i64(ds, "time_ns", &t), 0);
    assert_true(t >= before && t <= after); /* 0 ("now"), not the junk */
    float got[2];
    assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    assert_memory_equal(got, v, sizeof v);
    H5Dclose(ds);
    H5Fclose(f);
    tu_done();
}

/* `call` returns ULP_EINVAL with one stderr line that holds `what`. */
#define REFUSED(call, what)                                                                        \
    do {                                                                                           \
        tu_stderr cap_;                                                                            \
        tu_stderr_begin(&cap_, dir);                                                               \
        ulp_status st_ = (call);                                                                   \
        const char *text_ = tu_stderr_end(&cap_);                                                  \
        assert_int_equal(st_, ULP_EINVAL);                                                         \
        assert_int_equal(tu_lines(text_), 1);                                                      \
        assert_non_null(strstr(text_, what));                                                      \
    } while (0)

static void test_struct_size__bad_sizes_are_refused(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("size-bad");
    char path[1200];
    snprintf(path, sizeof path, "%s/bad.h5", dir);

    /* The options: 0, below the first version, a NULL struct. */
    ulp_session_options o;
    ulp_session_options_init(&o);
    assert_int_equal(o.struct_size, sizeof o);
    o.path = path;
    ulp_session *s = (ulp_session *)&o;
    o.struct_size = 0;
    REFUSED(ulp_session_open(&o, &s, NULL), "ulp_session_options");
    assert_null(s);
    o.struct_size = offsetof(ulp_session_options, path);
    REFUSED(ulp_session_open(&o, &s, NULL), "first version");
    REFUSED(ulp_session_options_init_sized(&o, offsetof(ulp_session_options, path)),
            "ulp_session_options");
    REFUSED(ulp_capture_desc_init_sized(NULL, sizeof(ulp_capture_desc)), "ulp_capture_desc");

    o.struct_size = sizeof o;
    assert_int_equal(ulp_session_open(&o, &s, NULL), ULP_OK);
    float v[2] = {1, 2};
    int64_t shape[1] = {2};
    ulp_capture_desc d = old_desc("x", v, shape);
    d.struct_size = 0;
    REFUSED(ulp_session_capture(s, &d), "ulp_capture_desc");
    d.struct_size = offsetof(ulp_capture_desc, role);
    REFUSED(ulp_session_capture(s, &d), "ulp_capture_desc");

    /* A newer caller: past this library's size, zero is "absent" and
     * accepted; a field set there is one this library cannot honour. */
    struct {
        ulp_capture_desc d;
        uint64_t later;
    } newer;
    assert_int_equal(ulp_capture_desc_init_sized(&newer.d, sizeof newer), ULP_OK);
    assert_int_equal(newer.d.struct_size, sizeof newer);
    assert_int_equal(newer.later, 0);
    assert_int_equal(newer.d.step, ULP_STEP_NONE);
    newer.d.name = "y";
    newer.d.data = v;
    newer.d.dtype = ULP_DTYPE_F32;
    newer.d.ndim = 1;
    newer.d.shape = shape;
    assert_int_equal(ulp_session_capture(s, &newer.d), ULP_OK);
    newer.later = 1;
    REFUSED(ulp_session_capture(s, &newer.d), "newer libulpprof");

    /* The device extension, by its own size. */
    ulp_capture_desc_init(&d);
    d.name = "z";
    d.data = v;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 1;
    d.shape = shape;
    ulp_capture_device_ext x;
    ulp_capture_device_ext_init(&x);
    x.struct_size = 0;
    REFUSED(ulp_session_capture_ext(s, &d, &x), "ulp_capture_device_ext");
    assert_int_equal(ulp_session_close(s), ULP_OK);

    /* Options of the analysis. */
    ulp_snapshot *a = NULL;
    assert_int_equal(ulp_snapshot_open(path, &a, NULL), ULP_OK);
    ulp_diff_options dopt;
    ulp_diff_options_init(&dopt);
    dopt.struct_size = 0;
    ulp_diff_result *r = NULL;
    ulp_error err;
    REFUSED(ulp_diff_run(a, a, &dopt, &r, &err), "ulp_diff_options");
    assert_null(r);
    assert_non_null(strstr(err.msg, "struct_size"));
    ulp_snapshot_close(a);
    ulp_ladder_options lo;
    ulp_ladder_options_init(&lo);
    lo.struct_size = offsetof(ulp_ladder_options, diff);
    const char *runs[2] = {path, path};
    ulp_ladder_result *lr = NULL;
    REFUSED(ulp_ladder_compare(runs, 2, &lo, &lr, &err), "ulp_ladder_options");
    assert_null(lr);
    ulp_ladder_options_init(&lo);
    lo.diff = &dopt; /* struct_size 0 still */
    REFUSED(ulp_ladder_compare(runs, 2, &lo, &lr, &err), "ulp_diff_options");
    tu_done();
}

/* Writes x = f32[4] {v} and, when `also`, y = f32[1] into `path`. */
static void write_side(const char *path, const float *v, int also)
{
    ulp_session *s = open_old(path);
    int64_t shape[1] = {4}, one[1] = {1};
    ulp_capture_desc d = old_desc("x", v, shape);
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    if (also) {
        ulp_capture_desc e = old_desc("y", v, one);
        assert_int_equal(ulp_session_capture(s, &e), ULP_OK);
    }
    assert_int_equal(ulp_session_close(s), ULP_OK);
}

static void test_struct_size__old_caller_diff_and_ladder(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("size-diff");
    char pa[1200], pb[1200];
    snprintf(pa, sizeof pa, "%s/a.h5", dir);
    snprintf(pb, sizeof pb, "%s/b.h5", dir);
    /* x differs in element 2 by 3 ULP (1.0f and the third float above it);
     * y (A only) is not selected by the match. */
    float va[4] = {1, 2, 1, 4}, vb[4] = {1, 2, 0, 4};
    uint32_t bits = 0x3f800000u + 3u;
    memcpy(&vb[2], &bits, sizeof bits);
    write_side(pa, va, 1);
    write_side(pb, vb, 0);
    ulp_snapshot *a = NULL, *b = NULL;
    assert_int_equal(ulp_snapshot_open(pa, &a, NULL), ULP_OK);
    assert_int_equal(ulp_snapshot_open(pb, &b, NULL), ULP_OK);

    /* Covers `match` only: role, threads, chunk size, rows, ... are junk. */
    ulp_diff_options o;
    memset(&o, JUNK, sizeof o);
    o.struct_size = offsetof(ulp_diff_options, role);
    o.match = "x";
    ulp_diff_result *r = NULL;
    ulp_error err;
    assert_int_equal(ulp_diff_run(a, b, &o, &r, &err), ULP_OK);
    assert_int_equal(r->n_rows, 1);
    assert_string_equal(r->rows[0].name, "x");
    assert_int_equal(r->rows[0].status, ULP_DIFF_DIFFERS);
    assert_int_equal(r->rows[0].m.differing, 1);
    assert_int_equal(r->rows[0].m.max_ulp, 3);
    assert_int_equal(r->rows[0].m.worst_flat, 2);
    ulp_diff_result_free(r);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);

    /* The ladder's old caller: `diff` covered (the old diff options above),
     * ignore/jobs/progress junk. */
    ulp_ladder_options lo;
    memset(&lo, JUNK, sizeof lo);
    lo.struct_size = offsetof(ulp_ladder_options, ignore);
    lo.diff = &o;
    const char *runs[2] = {pa, pb};
    ulp_ladder_result *lr = NULL;
    assert_int_equal(ulp_ladder_compare(runs, 2, &lo, &lr, &err), ULP_OK);
    assert_int_equal(lr->n_pairs, 1);
    assert_int_equal(lr->n_ignore, 0);
    const ulp_ladder_pair *p0 = ulp_ladder_result_pair(lr, 0);
    assert_non_null(p0);
    assert_false(p0->identical);
    assert_true(p0->has_first);
    assert_string_equal(p0->first.capture, "x");
    assert_int_equal(p0->first.max_ulp, 3);
    ulp_ladder_result_free(lr);
    /* NULL diff: the defaults, every capture compared (y only in A). */
    lo.diff = NULL;
    assert_int_equal(ulp_ladder_compare(runs, 2, &lo, &lr, &err), ULP_OK);
    assert_false(ulp_ladder_result_pair(lr, 0)->identical);
    ulp_ladder_result_free(lr);
    /* The version before the open hook (through `progress`): open, left_out
     * and user are junk, never followed. */
    memset(&lo, JUNK, sizeof lo);
    lo.struct_size = offsetof(ulp_ladder_options, open);
    lo.diff = NULL;
    lo.n_ignore = 0;
    lo.jobs = 1;
    lo.progress = 0;
    assert_int_equal(ulp_ladder_compare(runs, 2, &lo, &lr, &err), ULP_OK);
    assert_int_equal(lr->n_runs, 2);
    ulp_ladder_result_free(lr);
    tu_done();
}

typedef struct ladder_hooks {
    int opens, left;
    char left_path[1200], left_msg[512];
} ladder_hooks;

static ulp_status counting_open(void *user, const char *path, ulp_snapshot **s, ulp_error *err)
{
    ((ladder_hooks *)user)->opens++;
    return ulp_snapshot_open(path, s, err);
}

static void note_left_out(void *user, const char *path, const ulp_error *err)
{
    ladder_hooks *h = user;
    h->left++;
    snprintf(h->left_path, sizeof h->left_path, "%s", path);
    snprintf(h->left_msg, sizeof h->left_msg, "%s", err->msg);
}

/* The open hook opens each file once; a run left_out is told of is skipped,
 * the others keep their order; without left_out it fails the ladder. */
static void test_struct_size__ladder_open_hook_and_left_out(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("size-left");
    char pa[1200], pb[1200], missing[1200];
    snprintf(pa, sizeof pa, "%s/a.h5", dir);
    snprintf(pb, sizeof pb, "%s/b.h5", dir);
    snprintf(missing, sizeof missing, "%s/missing.h5", dir);
    float va[4] = {1, 2, 3, 4};
    write_side(pa, va, 0);
    write_side(pb, va, 0);
    ladder_hooks h;
    memset(&h, 0, sizeof h);
    ulp_ladder_options lo;
    ulp_ladder_options_init(&lo);
    lo.open = counting_open;
    lo.left_out = note_left_out;
    lo.user = &h;
    const char *runs[3] = {pa, missing, pb};
    ulp_ladder_result *lr = NULL;
    ulp_error err;
    assert_int_equal(ulp_ladder_compare(runs, 3, &lo, &lr, &err), ULP_OK);
    assert_int_equal(h.opens, 3); /* a, the missing one, b: each once */
    assert_int_equal(h.left, 1);
    assert_string_equal(h.left_path, missing);
    assert_non_null(strstr(h.left_msg, missing));
    assert_int_equal(lr->n_runs, 2);
    assert_int_equal(lr->n_pairs, 1);
    assert_string_equal(lr->runs[0].path, pa);
    assert_string_equal(lr->runs[1].path, pb);
    assert_true(ulp_ladder_result_pair(lr, 0)->identical);
    ulp_ladder_result_free(lr);
    /* One readable run of two: an error, the bad one still told. */
    memset(&h, 0, sizeof h);
    const char *one[2] = {missing, pa};
    assert_int_not_equal(ulp_ladder_compare(one, 2, &lo, &lr, &err), ULP_OK);
    assert_null(lr);
    assert_int_equal(h.left, 1);
    /* Without left_out the missing run fails the ladder, naming it. */
    lo.left_out = NULL;
    assert_int_not_equal(ulp_ladder_compare(runs, 3, &lo, &lr, &err), ULP_OK);
    assert_null(lr);
    assert_non_null(strstr(err.msg, missing));
    tu_done();
}

/* The CUDA collector's fields, now in ulp_capture_device_ext, reach the
 * file as the attributes FORMAT.md names; an old extension (up to
 * `kernels`) writes its kernels and nothing of the junk past them. */
static void test_struct_size__device_ext_lands_in_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("size-ext");
    char path[1200];
    snprintf(path, sizeof path, "%s/ext.h5", dir);
    ulp_session *s = open_old(path);
    float v[2] = {1, 2};
    int64_t shape[1] = {2};
    ulp_capture_desc d = old_desc("t", v, shape);
    ulp_capture_device_ext x;
    ulp_capture_device_ext_init(&x);
    assert_int_equal(x.struct_size, sizeof x);
    assert_int_equal(ulp_capture_device_ext_size(), sizeof x);
    x.has_kernels = 1;
    x.kernels[0] = 4;
    x.kernels[1] = 9;
    x.device_ptr = UINT64_C(0xfffff00000001000);
    x.stream = 77;
    x.has_gemms = 1;
    x.gemms[0] = 2;
    x.gemms[1] = 5;
    x.has_graph_replay = 1;
    x.graph_replay[0] = 6;
    x.graph_replay[1] = 1;
    assert_int_equal(ulp_session_capture_ext(s, &d, &x), ULP_OK);
    ulp_capture_device_ext old;
    memset(&old, JUNK, sizeof old);
    old.struct_size = offsetof(ulp_capture_device_ext, device_ptr);
    old.has_kernels = 1;
    old.kernels[0] = 9;
    old.kernels[1] = 11;
    assert_int_equal(ulp_session_capture_ext(s, &d, &old), ULP_OK);
    assert_int_equal(ulp_session_capture_ext(s, &d, NULL), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);

    hid_t f = tu_open(path);
    hid_t ds = H5Dopen2(f, "/captures/t/0", H5P_DEFAULT);
    assert_true(ds >= 0);
    int64_t two[2];
    uint64_t u = 0;
    hid_t at = H5Aopen(ds, "kernels", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_INT64, two) >= 0);
    H5Aclose(at);
    assert_true(two[0] == 4 && two[1] == 9);
    at = H5Aopen(ds, "gemms", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_INT64, two) >= 0);
    H5Aclose(at);
    assert_true(two[0] == 2 && two[1] == 5);
    at = H5Aopen(ds, "graph_replay", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_INT64, two) >= 0);
    H5Aclose(at);
    assert_true(two[0] == 6 && two[1] == 1);
    at = H5Aopen(ds, "device_ptr", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_UINT64, &u) >= 0);
    H5Aclose(at);
    assert_true(u == UINT64_C(0xfffff00000001000));
    at = H5Aopen(ds, "stream", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_UINT64, &u) >= 0);
    H5Aclose(at);
    assert_true(u == 77);
    H5Dclose(ds);

    ds = H5Dopen2(f, "/captures/t/1", H5P_DEFAULT);
    at = H5Aopen(ds, "kernels", H5P_DEFAULT);
    assert_true(H5Aread(at, H5T_NATIVE_INT64, two) >= 0);
    H5Aclose(at);
    assert_true(two[0] == 9 && two[1] == 11);
    assert_false(tu_attr_exists(ds, "device_ptr"));
    assert_false(tu_attr_exists(ds, "stream"));
    assert_false(tu_attr_exists(ds, "gemms"));
    assert_false(tu_attr_exists(ds, "graph_replay"));
    H5Dclose(ds);
    ds = H5Dopen2(f, "/captures/t/2", H5P_DEFAULT);
    assert_false(tu_attr_exists(ds, "kernels"));
    assert_false(tu_attr_exists(ds, "device_ptr"));
    H5Dclose(ds);
    H5Fclose(f);
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_struct_size__old_caller_capture_gets_defaults),
        cmocka_unit_test(test_struct_size__bad_sizes_are_refused),
        cmocka_unit_test(test_struct_size__old_caller_diff_and_ladder),
        cmocka_unit_test(test_struct_size__ladder_open_hook_and_left_out),
        cmocka_unit_test(test_struct_size__device_ext_lands_in_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
