/*
 * The capture mode a session opens with (ulp_session_options.capture_mode,
 * else ULPPROF_CAPTURE_MODE, else data), checked with plain HDF5 reads: a
 * capture goes where the mode says without ulp_session_set_capture_mode(),
 * a file opened for digests is created for them (symbol-table nodes of
 * 2 x 8 entries, not 2 x 64: H5Pget_sym_k of its creation properties), the
 * option wins over the environment, and a name that is no mode is refused
 * with ULP_EINVAL and one stderr line, and no file is made.  Such a file,
 * and only such a file, is rewritten without its journal at its close
 * (ULPPROF_COMPACT=0 keeps the writer's file, whose layout is checked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "capture_testutil.h"
#include "ulpprof/capture.h"

static ulp_status open_mode(const char *path, const char *mode, ulp_session **s)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = "mode";
    o.attrs = "";
    o.record_env = 0;
    o.capture_mode = mode;
    *s = NULL;
    ulp_error err;
    return ulp_session_open(&o, s, &err);
}

/* One f32 capture "x" of 3 rows of 4 through a session opened with `mode`. */
static void write_one(const char *path, const char *mode)
{
    static const float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    static const int64_t shape[2] = {3, 4};
    ulp_session *s = NULL;
    assert_int_equal(open_mode(path, mode, &s), ULP_OK);
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = "x";
    d.data = v;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 2;
    d.shape = shape;
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
    assert_int_equal(ulp_session_close(s), ULP_OK);
}

typedef struct layout {
    int journal; /* the file has /journal (not rewritten at its close) */
    unsigned leaf_k;
    long captures;    /* links in /captures */
    int digests_x;    /* /digests/x exists  */
    uint64_t digests; /* rows of /digests/x/digest */
} layout;

static layout layout_of(const char *path)
{
    layout l = {0, 0, -1, 0, 0};
    hid_t f = tu_open(path);
    assert_true(f >= 0);
    l.journal = H5Lexists(f, "/journal", H5P_DEFAULT) > 0;
    hid_t fcpl = H5Fget_create_plist(f);
    unsigned internal = 0;
    assert_true(fcpl >= 0 && H5Pget_sym_k(fcpl, &internal, &l.leaf_k) >= 0);
    assert_true(internal == 16 || (l.leaf_k == 4 && !l.journal)); /* a copy's: HDF5's */
    H5Pclose(fcpl);
    l.captures = tu_group_count(f, "/captures");
    /* packed-1 (/digests/x/digest), or packed-2 (a rewritten file: one name, whose rows
     * are then all of /digests/digest) */
    int shared = H5Lexists(f, "/digests", H5P_DEFAULT) > 0 &&
                 H5Lexists(f, "/digests/names", H5P_DEFAULT) > 0;
    l.digests_x = shared || (H5Lexists(f, "/digests", H5P_DEFAULT) > 0 &&
                             H5Lexists(f, "/digests/x", H5P_DEFAULT) > 0);
    if (l.digests_x) {
        hid_t ds = H5Dopen2(f, shared ? "/digests/digest" : "/digests/x/digest", H5P_DEFAULT);
        hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
        hsize_t n = 0;
        assert_true(sp >= 0 && H5Sget_simple_extent_dims(sp, &n, NULL) == 1);
        l.digests = n;
        H5Sclose(sp);
        H5Dclose(ds);
    }
    H5Fclose(f);
    return l;
}

typedef struct mode_case {
    const char *mode, *env;
    unsigned leaf_k; /* 8: made for digests */
    long captures;
    int digests;
} mode_case;

/* Case c's file, `tag`-named in dir, written under its environment; its layout. */
static layout case_file(const char *dir, const char *tag, size_t i, const mode_case *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s%zu.h5", dir, tag, i);
    if (c->env != NULL)
        setenv("ULPPROF_CAPTURE_MODE", c->env, 1);
    else
        unsetenv("ULPPROF_CAPTURE_MODE");
    write_one(path, c->mode);
    layout l = layout_of(path);
    print_message("%s case %zu: mode %s, env %s: leaf K %u, journal %d, %ld in /captures, "
                  "digests %d\n",
                  tag, i, c->mode ? c->mode : "-", c->env ? c->env : "-", l.leaf_k, l.journal,
                  l.captures, l.digests_x);
    assert_int_equal(l.captures, c->captures);
    assert_int_equal(l.digests_x, c->digests);
    if (c->digests)
        assert_int_equal(l.digests, 3); /* one a row */
    return l;
}

static void test_capture_mode__option(void **state)
{
    (void)state;
    unsetenv("ULPPROF_CAPTURE_MODE");
    char *dir = tu_tmpdir("capture-mode");
    static const mode_case cases[] = {
        {NULL, NULL, 64, 1, 0},      {"data", NULL, 64, 1, 0},  {"digest", NULL, 8, 0, 1},
        {"both", NULL, 64, 1, 1},    {NULL, "digest", 8, 0, 1}, {"data", "digest", 64, 1, 0},
        {"digest", "data", 8, 0, 1}, {NULL, "both", 64, 1, 1},
    };
    /* The files as their writer made them: not rewritten at the close. */
    setenv("ULPPROF_COMPACT", "0", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layout l = case_file(dir, "c", i, &cases[i]);
        assert_int_equal(l.leaf_k, cases[i].leaf_k);
        assert_true(l.journal);
    }
    /* Rewritten at the close (FORMAT.md "A digest file's close"): exactly the files made
     * for digests, and their digests are all there. */
    unsetenv("ULPPROF_COMPACT");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layout l = case_file(dir, "r", i, &cases[i]);
        assert_int_equal(l.journal, cases[i].leaf_k != 8);
    }
    unsetenv("ULPPROF_CAPTURE_MODE");
    tu_done();
}

static void test_capture_mode__refused(void **state)
{
    (void)state;
    char *dir = tu_tmpdir("capture-mode-bad");
    char path[1200];
    snprintf(path, sizeof path, "%s/bad.h5", dir);
    static const char *const bad[] = {"", "Digest", "digests", "data,digest"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_stderr cap;
        tu_stderr_begin(&cap, dir);
        ulp_session *s = NULL;
        ulp_status st = open_mode(path, bad[i], &s);
        const char *text = tu_stderr_end(&cap);
        assert_int_equal(st, ULP_EINVAL);
        assert_null(s);
        assert_int_equal(tu_lines(text), 1);
        assert_non_null(strstr(text, "capture_mode"));
        assert_int_equal(access(path, F_OK), -1);
    }
    /* The environment's bad name too, named as the environment's. */
    setenv("ULPPROF_CAPTURE_MODE", "fast", 1);
    tu_stderr cap;
    tu_stderr_begin(&cap, dir);
    ulp_session *s = NULL;
    ulp_status st = open_mode(path, NULL, &s);
    const char *text = tu_stderr_end(&cap);
    unsetenv("ULPPROF_CAPTURE_MODE");
    assert_int_equal(st, ULP_EINVAL);
    assert_null(s);
    assert_int_equal(tu_lines(text), 1);
    assert_non_null(strstr(text, "ULPPROF_CAPTURE_MODE 'fast'"));
    assert_int_equal(access(path, F_OK), -1);
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_mode__option),
        cmocka_unit_test(test_capture_mode__refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
