/*
 * ulp_diff_stream() (analyzer/diff.c, diff_keep.c): the rows come to the
 * callback in order, in batches of at most ULPPROF_DIFF_BATCH, each row as
 * ulp_diff_run() makes it; the result is ulp_diff_run()'s but for the rows
 * it keeps (the first divergence, the amplification's rows, the logits
 * rows), which ulp_diff_result_row() finds; a callback's error stops it.
 * The pair: 60 captures of f32[8] written by the capture library, B
 * moved from capture 11 on (amplification up to capture 59), two logits
 * captures in different batches, one capture only in A.  A CSV report
 * streamed with joined sides (ulp_report_stream_tp_join()) is byte for
 * byte the one written from the whole result.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "ulpprof/capture.h"
#include "ulpprof/diff.h"
#include "ulpprof/report.h"
#include "ulpprof/sites.h"
#include "ulpprof/snapshot.h"

#define NCAPS 60

static char dir[512], path_a[600], path_b[600];

/* Writes one side: capture i is layer i (logits at 25 and 52), B moved from 11 on. */
static int write_side(const char *path, int side_b)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = side_b ? "b" : "a";
    ulp_session *s;
    if (ulp_session_open(&o, &s, NULL) != ULP_OK)
        return -1;
    for (int i = 0; i < NCAPS; i++) {
        float v[8];
        int64_t shape[2] = {2, 4};
        for (int k = 0; k < 8; k++)
            v[k] = (float)(i * 8 + k) * 0.25f - 3.0f;
        if (side_b && i >= 11)
            for (int k = 0; k < (i % 8) + 1; k++)
                v[k] += 0.001f * (float)(i - 10);
        char name[32];
        ulp_capture_desc d;
        ulp_capture_desc_init(&d);
        int logits = i == 25 || i == 52;
        snprintf(name, sizeof name, logits ? "lm_head" : "layer.%d", i);
        d.name = name;
        d.data = v;
        d.dtype = ULP_DTYPE_F32;
        d.ndim = 2;
        d.shape = shape;
        d.layer = logits ? ULP_LAYER_NONE : i;
        d.role = logits ? ULP_ROLE_LOGITS : ULP_ROLE_ACTIVATION;
        if (side_b && i == 40)
            continue; /* only in A */
        if (ulp_session_capture(s, &d) != ULP_OK)
            return -1;
    }
    return ulp_session_close(s) == ULP_OK ? 0 : -1;
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("ULPPROF_TEST_TMP");
    if (tmp == NULL)
        tmp = "/tmp";
    mkdir(tmp, 0777);
    snprintf(dir, sizeof dir, "%s/diffstream.XXXXXX", tmp);
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(path_a, sizeof path_a, "%s/a.h5", dir);
    snprintf(path_b, sizeof path_b, "%s/b.h5", dir);
    return write_side(path_a, 0) == 0 && write_side(path_b, 1) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path_a);
    unlink(path_b);
    rmdir(dir);
    return 0;
}

/* What the callback saw: copies of the rows (their pointers are not kept). */
typedef struct seen {
    ulp_diff_row rows[2 * NCAPS];
    size_t n, calls, most;
    int fail_at; /* the call that fails, or -1 */
} seen;

static ulp_status collect(void *ctx, const ulp_diff_row *rows, size_t first, size_t n,
                          ulp_error *err)
{
    seen *s = ctx;
    if ((int)s->calls++ == s->fail_at) {
        snprintf(err->msg, sizeof err->msg, "stop here");
        err->status = ULP_EIO;
        return ULP_EIO;
    }
    assert_int_equal(first, s->n); /* in order, none left out */
    /* Empty only at the end, when the batches divide the rows. */
    assert_true((n > 0 || s->n == NCAPS) && s->n + n <= 2 * NCAPS);
    memcpy(&s->rows[s->n], rows, n * sizeof *rows);
    s->n += n;
    s->most = n > s->most ? n : s->most;
    return ULP_OK;
}

/* Two rows alike in what the reports print of them. */
static void same_row(const ulp_diff_row *x, const ulp_diff_row *y)
{
    assert_string_equal(x->name, y->name);
    assert_int_equal(x->occurrence, y->occurrence);
    assert_int_equal(x->seq_a, y->seq_a);
    assert_int_equal(x->seq_b, y->seq_b);
    assert_int_equal(x->status, y->status);
    assert_string_equal(x->role, y->role);
    assert_int_equal(x->elements, y->elements);
    assert_memory_equal(&x->m, &y->m, sizeof x->m);
}

static void open_pair(ulp_snapshot **a, ulp_snapshot **b)
{
    assert_int_equal(ulp_snapshot_open(path_a, a, NULL), ULP_OK);
    assert_int_equal(ulp_snapshot_open(path_b, b, NULL), ULP_OK);
}

static void test_diff_stream__rows_and_result(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    ulp_diff_result *whole = NULL, *streamed = NULL;
    ulp_error err;
    assert_int_equal(ulp_diff_run(a, b, NULL, &whole, &err), ULP_OK);
    static seen s;
    memset(&s, 0, sizeof s);
    s.fail_at = -1;
    setenv("ULPPROF_DIFF_BATCH", "7", 1);
    assert_int_equal(ulp_diff_stream(a, b, NULL, collect, &s, &streamed, &err), ULP_OK);
    unsetenv("ULPPROF_DIFF_BATCH");

    /* The pair as written: B moved from 11, 40 only in A. */
    assert_int_equal(whole->n_rows, NCAPS);
    assert_false(whole->streamed);
    assert_true(whole->has_first_divergence);
    assert_int_equal(whole->rows[whole->first_divergence].seq_a, 11);
    assert_true(whole->amp.valid);
    assert_int_equal(whole->rows[whole->amp.last_row].seq_a, 59);
    assert_int_equal(whole->n_logits, 2);
    assert_int_equal(whole->n_only_a, 1);

    /* Every row came, in batches of at most 7, as ulp_diff_run() made it. */
    assert_int_equal(s.n, whole->n_rows);
    assert_int_equal(s.most, 7);
    assert_int_equal(s.calls, (NCAPS + 6) / 7);
    for (size_t i = 0; i < whole->n_rows; i++)
        same_row(&s.rows[i], &whole->rows[i]);

    /* The result, field for field. */
    assert_true(streamed->streamed);
    assert_int_equal(streamed->n_rows, whole->n_rows);
    assert_int_equal(streamed->identical, whole->identical);
    assert_int_equal(streamed->n_shared, whole->n_shared);
    assert_int_equal(streamed->n_only_a, whole->n_only_a);
    assert_int_equal(streamed->n_only_b, whole->n_only_b);
    assert_int_equal(streamed->first_divergence, whole->first_divergence);
    assert_memory_equal(&streamed->amp, &whole->amp, sizeof whole->amp);
    assert_int_equal(streamed->bytes_read, whole->bytes_read);
    assert_int_equal(streamed->n_logits, whole->n_logits);
    for (size_t k = 0; k < whole->n_logits; k++) {
        assert_int_equal(streamed->logits[k].row_index, whole->logits[k].row_index);
        assert_int_equal(streamed->logits[k].argmax_flips, whole->logits[k].argmax_flips);
    }

    /* Kept: exactly the rows the fields name, the same as the whole result's. */
    size_t kept = 0;
    for (size_t i = 0; i < whole->n_rows; i++) {
        const ulp_diff_row *row = ulp_diff_result_row(streamed, i);
        int named = i == whole->first_divergence || i == whole->amp.first_row ||
                    i == whole->amp.last_row || i == whole->logits[0].row_index ||
                    i == whole->logits[1].row_index;
        assert_int_equal(row != NULL, named);
        assert_true(ulp_diff_result_row(whole, i) == &whole->rows[i]);
        if (row != NULL) {
            same_row(row, &whole->rows[i]);
            kept++;
        }
    }
    assert_int_equal(kept, streamed->n_kept);
    assert_null(ulp_diff_result_row(streamed, whole->n_rows));
    assert_null(ulp_diff_result_row(whole, whole->n_rows));
    ulp_diff_result_free(whole);
    ulp_diff_result_free(streamed);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

/* What a --tp-join diff puts in the CSV: A joined from 4 ranks that disagree
 * on 3 captures, B one snapshot.  Streamed in batches of 7, the report is
 * the whole result's byte for byte, and every row ends in those cells. */
static void test_diff_stream__csv_with_joined_sides(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    ulp_tp_join_info tp = {0};
    tp.ranks = 4;
    tp.disagree = 3;
    ulp_diff_result *whole = NULL, *streamed = NULL;
    ulp_error err;
    assert_int_equal(ulp_diff_run(a, b, NULL, &whole, &err), ULP_OK);
    whole->tp_join_a = &tp;
    char *want = NULL, *got = NULL;
    size_t nw = 0, ng = 0;
    FILE *f = open_memstream(&want, &nw);
    assert_non_null(f);
    assert_int_equal(ulp_report_write(whole, ULP_REPORT_CSV, f, 0, &err), ULP_OK);
    assert_int_equal(fclose(f), 0);

    ulp_report_stream *rs = NULL;
    assert_int_equal(ulp_report_stream_open(ULP_REPORT_CSV, 0, &rs, &err), ULP_OK);
    ulp_report_stream_tp_join(rs, &tp, NULL);
    setenv("ULPPROF_DIFF_BATCH", "7", 1);
    assert_int_equal(ulp_diff_stream(a, b, NULL, ulp_report_stream_rows, rs, &streamed, &err),
                     ULP_OK);
    unsetenv("ULPPROF_DIFF_BATCH");
    assert_true(streamed->streamed);
    streamed->tp_join_a = &tp;
    f = open_memstream(&got, &ng);
    assert_non_null(f);
    assert_int_equal(ulp_report_stream_write(rs, streamed, f, &err), ULP_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(ng, nw);
    assert_memory_equal(got, want, nw);

    /* The header, then NCAPS rows, each ending in tp_ranks_a 4,
     * tp_whole_disagree_a 3 and B's two cells empty. */
    size_t lines = 0;
    for (char *line = want, *end; (end = strchr(line, '\n')) != NULL; line = end + 1, lines++) {
        *end = '\0';
        if (lines > 0) {
            size_t len = strlen(line);
            assert_true(len > 6 && strcmp(line + len - 6, ",4,3,,") == 0);
        }
    }
    assert_int_equal(lines, NCAPS + 1);
    free(want);
    free(got);
    ulp_report_stream_free(rs);
    ulp_diff_result_free(whole);
    ulp_diff_result_free(streamed);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

static void test_diff_stream__callback_error_stops(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    ulp_diff_result *res = (ulp_diff_result *)&res; /* not NULL: must be set */
    ulp_error err;
    static seen s;
    memset(&s, 0, sizeof s);
    s.fail_at = 1;
    setenv("ULPPROF_DIFF_BATCH", "10", 1);
    assert_int_equal(ulp_diff_stream(a, b, NULL, collect, &s, &res, &err), ULP_EIO);
    unsetenv("ULPPROF_DIFF_BATCH");
    assert_null(res);
    assert_string_equal(err.msg, "stop here");
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.n, 10);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

/*
 * Many batches on helper threads (the callback of batch k runs while
 * batch k + 1 is compared): every row, in order, as ulp_diff_run() made
 * it, on one to 64 threads, in batches of 1 and of 3.
 */
static void test_diff_stream__many_batches_on_threads(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    ulp_diff_result *whole = NULL;
    ulp_error err;
    assert_int_equal(ulp_diff_run(a, b, NULL, &whole, &err), ULP_OK);
    static const char *batches[] = {"1", "3"};
    static const int threads[] = {1, 2, 4, 64}; /* 64: more than there are tasks */
    for (size_t bi = 0; bi < 2; bi++) {
        for (size_t ti = 0; ti < 4; ti++) {
            static seen s;
            memset(&s, 0, sizeof s);
            s.fail_at = -1;
            ulp_diff_options o;
            ulp_diff_options_init(&o);
            o.threads = threads[ti];
            ulp_diff_result *res = NULL;
            setenv("ULPPROF_DIFF_BATCH", batches[bi], 1);
            assert_int_equal(ulp_diff_stream(a, b, &o, collect, &s, &res, &err), ULP_OK);
            unsetenv("ULPPROF_DIFF_BATCH");
            size_t per = (size_t)atoi(batches[bi]);
            assert_int_equal(s.n, whole->n_rows);
            /* A last empty batch where they divide the rows: as before. */
            assert_int_equal(s.calls, whole->n_rows / per + 1);
            for (size_t i = 0; i < whole->n_rows; i++)
                same_row(&s.rows[i], &whole->rows[i]);
            assert_int_equal(res->first_divergence, whole->first_divergence);
            assert_memory_equal(&res->amp, &whole->amp, sizeof whole->amp);
            assert_int_equal(res->n_logits, whole->n_logits);
            assert_int_equal(res->bytes_read, whole->bytes_read);
            ulp_diff_result_free(res);
        }
    }
    ulp_diff_result_free(whole);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

/* A callback that fails midway of many batches, on helper threads: nothing
 * after it is called, its error is returned, no result. */
static void test_diff_stream__callback_error_midway(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    for (int fail_at = 0; fail_at < 20; fail_at += 6) {
        static seen s;
        memset(&s, 0, sizeof s);
        s.fail_at = fail_at;
        ulp_diff_options o;
        ulp_diff_options_init(&o);
        o.threads = 3;
        ulp_diff_result *res = (ulp_diff_result *)&res;
        ulp_error err;
        setenv("ULPPROF_DIFF_BATCH", "3", 1);
        assert_int_equal(ulp_diff_stream(a, b, &o, collect, &s, &res, &err), ULP_EIO);
        unsetenv("ULPPROF_DIFF_BATCH");
        assert_null(res);
        assert_string_equal(err.msg, "stop here");
        assert_int_equal(s.calls, (size_t)fail_at + 1);
        assert_int_equal(s.n, 3 * (size_t)fail_at);
    }
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

/* A copy of B at `path`, opened, then cut to `keep` bytes: reads past it fail. */
static ulp_snapshot *open_cut_copy(const char *path, off_t keep)
{
    FILE *in = fopen(path_b, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    ulp_snapshot *b;
    assert_int_equal(ulp_snapshot_open(path, &b, NULL), ULP_OK);
    assert_int_equal(truncate(path, keep), 0);
    return b;
}

/* Bytes [start, end) of capture i's data in B, read with HDF5 itself. */
static void data_extent(hid_t f, const ulp_capture_info *c, uint64_t *start, uint64_t *end)
{
    char path[128];
    snprintf(path, sizeof path, "/captures/%s/%lld", c->name, (long long)c->occurrence);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    assert_true(d >= 0);
    haddr_t off = H5Dget_offset(d); /* contiguous: small captures are never chunked */
    assert_true(off != HADDR_UNDEF);
    *start = off;
    *end = off + H5Dget_storage_size(d);
    H5Dclose(d);
}

/*
 * The length to cut B to so that captures 0 .. k-1 stay whole: the end of
 * the last of their data.  *bad is the first capture from k on whose data
 * reaches past that length (the first a read must fail on); k moves on
 * until there is one.  Wherever the writer put the data, the cut follows it.
 */
static off_t cut_after_capture(const ulp_snapshot *b, size_t k, size_t *bad)
{
    size_t n = ulp_snapshot_capture_count(b);
    hid_t f = H5Fopen(path_b, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    uint64_t *end = calloc(n, sizeof *end);
    assert_non_null(end);
    for (size_t i = 0; i < n; i++) {
        uint64_t start;
        data_extent(f, ulp_snapshot_capture(b, i), &start, &end[i]);
    }
    H5Fclose(f);
    for (; k < n; k++) {
        uint64_t keep = 0;
        for (size_t i = 0; i < k; i++)
            keep = end[i] > keep ? end[i] : keep;
        for (size_t i = k; i < n; i++)
            if (end[i] > keep) {
                *bad = i;
                free(end);
                return (off_t)keep;
            }
    }
    fail_msg("every capture's data lies before the data of captures 0 .. %zu", k);
    return 0;
}

/*
 * A read error in a later batch (B cut after it was opened): the batches
 * before it all went to the callback -- the last of them while the failing
 * one was compared -- in order, and the read error is returned; a callback
 * that fails on the batch just before the failing one wins (it came first).
 */
static void test_diff_stream__read_error_in_later_batch(void **state)
{
    (void)state;
    char cut[700];
    snprintf(cut, sizeof cut, "%s/cut.h5", dir);
    ulp_snapshot *a, *b0;
    open_pair(&a, &b0);
    /* The cut comes from B's own data extents, not from a guess at its layout. */
    size_t want_bad;
    off_t keep = cut_after_capture(b0, 20, &want_bad);
    ulp_snapshot *b = open_cut_copy(cut, keep);
    size_t first_bad = SIZE_MAX;
    for (size_t i = 0; i < ulp_snapshot_capture_count(b) && first_bad == SIZE_MAX; i++) {
        float v[8];
        ulp_error e;
        if (ulp_snapshot_read(b, i, 0, 8, v, &e) != ULP_OK)
            first_bad = i;
    }
    assert_int_equal(first_bad, want_bad);
    assert_true(first_bad > 6 && first_bad < 50); /* in a later batch, not the last */
    size_t bad_row = first_bad >= 40 ? first_bad + 1 : first_bad; /* B has no capture 40 */
    for (int fail_before = 0; fail_before < 2; fail_before++) {
        static seen s;
        memset(&s, 0, sizeof s);
        s.fail_at = fail_before ? (int)(bad_row / 3) - 1 : -1;
        ulp_diff_options o;
        ulp_diff_options_init(&o);
        o.threads = 2;
        ulp_diff_result *res = (ulp_diff_result *)&res;
        ulp_error err;
        setenv("ULPPROF_DIFF_BATCH", "3", 1);
        ulp_status st = ulp_diff_stream(a, b, &o, collect, &s, &res, &err);
        unsetenv("ULPPROF_DIFF_BATCH");
        assert_int_not_equal(st, ULP_OK);
        assert_null(res);
        if (fail_before) {
            assert_string_equal(err.msg, "stop here");
            assert_int_equal(s.calls, bad_row / 3);
        } else {
            assert_string_not_equal(err.msg, "stop here");
            assert_non_null(strstr(err.msg, "cut.h5"));
            assert_int_equal(s.calls, bad_row / 3);
            assert_int_equal(s.n, bad_row / 3 * 3);
        }
    }
    ulp_snapshot_close(b);
    ulp_snapshot_close(b0);
    ulp_snapshot_close(a);
    unlink(cut);
}

/* An error of the last batch's pairing (--rows that fits no capture: known
 * at the end): every batch before it went to the callback. */
static void test_diff_stream__pairing_error_at_the_end(void **state)
{
    (void)state;
    ulp_snapshot *a, *b;
    open_pair(&a, &b);
    static seen s;
    memset(&s, 0, sizeof s);
    s.fail_at = -1;
    ulp_diff_options o;
    ulp_diff_options_init(&o);
    o.threads = 2;
    o.rows = "5:7"; /* the captures have 2 rows */
    ulp_diff_result *res = (ulp_diff_result *)&res;
    ulp_error err;
    setenv("ULPPROF_DIFF_BATCH", "7", 1);
    assert_int_equal(ulp_diff_stream(a, b, &o, collect, &s, &res, &err), ULP_ENOTFOUND);
    unsetenv("ULPPROF_DIFF_BATCH");
    assert_null(res);
    assert_non_null(strstr(err.msg, "--rows '5:7' selects nothing"));
    assert_int_equal(s.calls, NCAPS / 7); /* all but the last batch, of 60 % 7 rows */
    assert_int_equal(s.n, NCAPS / 7 * 7);
    /* The same without a stream: the rows it paired are freed (ASan's leak check). */
    res = (ulp_diff_result *)&res;
    assert_int_equal(ulp_diff_run(a, b, &o, &res, &err), ULP_ENOTFOUND);
    assert_null(res);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_stream__rows_and_result),
        cmocka_unit_test(test_diff_stream__csv_with_joined_sides),
        cmocka_unit_test(test_diff_stream__callback_error_stops),
        cmocka_unit_test(test_diff_stream__many_batches_on_threads),
        cmocka_unit_test(test_diff_stream__callback_error_midway),
        cmocka_unit_test(test_diff_stream__read_error_in_later_batch),
        cmocka_unit_test(test_diff_stream__pairing_error_at_the_end),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
