/*
 * ulp_diff_stream() (analyzer/diff.c, diff_keep.c): the rows come to the
 * callback in order, in batches of at most ULPPROF_DIFF_BATCH, each row as
 * ulp_diff_run() makes it; the result is ulp_diff_run()'s but for the rows
 * it keeps (the first divergence, the amplification's rows, the logits
 * rows), which ulp_diff_result_row() finds; a callback's error stops it.
 * The pair: 60 captures of f32[8] written by the capture library, B
 * moved from capture 11 on (amplification up to capture 59), two logits
 * captures in different batches, one capture only in A.
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

#include "ulpprof/capture.h"
#include "ulpprof/diff.h"
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
    assert_true(n > 0 && s->n + n <= 2 * NCAPS);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_stream__rows_and_result),
        cmocka_unit_test(test_diff_stream__callback_error_stops),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
