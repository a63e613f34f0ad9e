/*
 * format/snapshot.c against files written by h5py (tests/python/
 * make_snapshots.py): what the reader reports must equal what the generator
 * wrote (its manifest), every element read must equal the generator's
 * formula, and every malformed file must be refused with the status and
 * a message naming the file and the problem, with nothing on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ulpprof/snapshot.h"

static char topdir[3000]; /* made by the test */
static char corpus[3100]; /* topdir/c, made by the generator */
static json_t *manifest;

/* ---- Setup: write the corpus with h5py -------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    char gen[4096];
    const char *src = getenv("ULPPROF_SOURCE_DIR");
    if (src != NULL) {
        snprintf(gen, sizeof gen, "%s/tests/python/make_snapshots.py", src);
    } else {
        char here[4096];
        snprintf(here, sizeof here, "%s", __FILE__); /* .../tests/unit/test_snapshot.c */
        snprintf(gen, sizeof gen, "%s/../python/make_snapshots.py", dirname(here));
    }
    const char *tmp = getenv("ULPPROF_TEST_TMP");
    if (tmp == NULL)
        tmp = "/tmp";
    mkdir(tmp, 0777);
    snprintf(topdir, sizeof topdir, "%s/snapshot.XXXXXX", tmp);
    if (mkdtemp(topdir) == NULL)
        return -1;
    snprintf(corpus, sizeof corpus, "%s/c", topdir);
    const char *py = getenv("ULP_PYTHON");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", py ? py : "/usr/bin/python3", gen, corpus);
    if (system(cmd) != 0) {
        fprintf(stderr, "corpus generator failed: %s\n", cmd);
        return -1;
    }
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", corpus);
    json_error_t jerr;
    manifest = json_load_file(mpath, 0, &jerr);
    if (manifest == NULL)
        fprintf(stderr, "%s: %s\n", mpath, jerr.text);
    return manifest == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(manifest);
    char cmd[4200 + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", topdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *path_of(const char *name)
{
    static char p[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", corpus, name);
    return p[k];
}

static ulp_snapshot *open_ok(const char *name)
{
    ulp_snapshot *s = NULL;
    ulp_error err;
    ulp_status st = ulp_snapshot_open(path_of(name), &s, &err);
    if (st != ULP_OK)
        print_error("%s: %s\n", name, err.msg);
    assert_int_equal(st, ULP_OK);
    assert_non_null(s);
    return s;
}

/* ---- The generator's data formula ----------------------------------------------------- */

static uint64_t pattern(int64_t seq, uint64_t i)
{
    return i * 0x9E3779B1ull + (uint64_t)seq * 0x85EBCA77ull + 0x1234567ull;
}

static uint64_t element(const void *buf, size_t size, uint64_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)buf + i * size, size); /* little-endian host */
    return v;
}

static uint64_t mask(size_t size)
{
    return size == 8 ? ~0ull : ((1ull << (8 * size)) - 1);
}

/* Checks elements [first, first+count) read into buf. */
static void check_pattern(const ulp_capture_info *c, const void *buf, uint64_t first,
                          uint64_t count)
{
    size_t size = ulp_dtype_size(c->dtype);
    int unwritten = strcmp(c->name, "unwritten") == 0; /* never written: fill value 0 */
    for (uint64_t k = 0; k < count; k++) {
        uint64_t want = unwritten ? 0 : pattern(c->seq, first + k) & mask(size);
        uint64_t got = element(buf, size, k);
        if (got != want) {
            print_error("%s/%lld element %llu: 0x%llx, want 0x%llx\n", c->name,
                        (long long)c->occurrence, (unsigned long long)(first + k),
                        (unsigned long long)got, (unsigned long long)want);
            fail();
        }
    }
}

/* ---- Valid files ------------------------------------------------------------------------ */

static void test_snapshot__root_run_env(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("all_dtypes.h5");
    assert_string_equal(ulp_snapshot_label(s), "miss");
    assert_string_equal(ulp_snapshot_writer(s), "make_snapshots.py 1");
    assert_int_equal(ulp_snapshot_format_version(s), 1);
    assert_true(ulp_snapshot_created_unix_ns(s) == 1700000000123456789ll);
    assert_string_equal(ulp_snapshot_path(s), path_of("all_dtypes.h5"));
    static const char *const run[][2] = {
        {"batch_size", "1"},   {"cache", "miss"},
        {"model", "tiny-llm"}, {"prompt", "line one\nline two"},
        {"scale", "0.25"},     {"threads", "4"},
    };
    assert_int_equal(ulp_snapshot_run_count(s), 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(ulp_snapshot_run(s, i)->key, run[i][0]);
        assert_string_equal(ulp_snapshot_run(s, i)->value, run[i][1]);
    }
    assert_null(ulp_snapshot_run(s, 6));
    assert_string_equal(ulp_snapshot_run_get(s, "cache"), "miss");
    assert_null(ulp_snapshot_run_get(s, "tp"));
    static const char *const env[][2] = {
        {"env:OPENBLAS_NUM_THREADS", "1"}, {"hostname", "testhost"}, {"pid", "4242"}};
    assert_int_equal(ulp_snapshot_env_count(s), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(ulp_snapshot_env(s, i)->key, env[i][0]);
        assert_string_equal(ulp_snapshot_env(s, i)->value, env[i][1]);
    }
    ulp_snapshot_close(s);

    s = open_ok("fixed_root.h5"); /* fixed-length strings */
    assert_string_equal(ulp_snapshot_label(s), "fixed");
    ulp_snapshot_close(s);
    s = open_ok("no_label.h5");
    assert_string_equal(ulp_snapshot_label(s), "");
    assert_string_equal(ulp_snapshot_writer(s), "");
    assert_true(ulp_snapshot_created_unix_ns(s) == 0);
    assert_int_equal(ulp_snapshot_run_count(s), 0);
    ulp_snapshot_close(s);
    s = open_ok("empty.h5");
    assert_int_equal(ulp_snapshot_capture_count(s), 0);
    assert_int_equal(ulp_snapshot_kernel_count(s), 0);
    assert_null(ulp_snapshot_capture(s, 0));
    assert_int_equal(ulp_snapshot_find(s, "x", 0), -1);
    ulp_snapshot_close(s);
    ulp_snapshot_close(NULL);
}

/* Every capture of every valid file, against the manifest. */
static void test_snapshot__captures_match_manifest(void **state)
{
    (void)state;
    const char *file;
    json_t *g;
    json_object_foreach(json_object_get(manifest, "good"), file, g)
    {
        ulp_snapshot *s = open_ok(file);
        json_t *caps = json_object_get(g, "captures");
        assert_int_equal(ulp_snapshot_capture_count(s), json_array_size(caps));
        assert_string_equal(ulp_snapshot_label(s), json_string_value(json_object_get(g, "label")));
        for (size_t i = 1; i < ulp_snapshot_capture_count(s); i++)
            assert_true(ulp_snapshot_capture(s, i)->seq > ulp_snapshot_capture(s, i - 1)->seq);
        size_t k;
        json_t *m;
        json_array_foreach(caps, k, m)
        {
            const char *name = json_string_value(json_object_get(m, "name"));
            int64_t occ = json_integer_value(json_object_get(m, "occurrence"));
            ptrdiff_t idx = ulp_snapshot_find(s, name, occ);
            if (idx < 0)
                print_error("%s: %s/%lld not found\n", file, name, (long long)occ);
            assert_true(idx >= 0);
            const ulp_capture_info *c = ulp_snapshot_capture(s, (size_t)idx);
            assert_string_equal(c->name, name);
            assert_true(c->occurrence == occ);
            assert_true(c->seq == json_integer_value(json_object_get(m, "seq")));
            assert_string_equal(ulp_dtype_name(c->dtype),
                                json_string_value(json_object_get(m, "dtype")));
            assert_int_equal(c->layer, json_integer_value(json_object_get(m, "layer")));
            assert_string_equal(c->role, json_string_value(json_object_get(m, "role")));
            json_t *shape = json_object_get(m, "shape");
            assert_int_equal(c->ndim, json_array_size(shape));
            uint64_t elements = 1;
            for (int d = 0; d < c->ndim; d++) {
                assert_true(c->shape[d] == json_integer_value(json_array_get(shape, (size_t)d)));
                elements *= (uint64_t)c->shape[d];
            }
            assert_true(c->elements == elements);
            assert_int_equal(ulp_snapshot_find(s, name, occ + 1000), -1);
        }
        assert_int_equal(ulp_snapshot_find(s, "no such capture", 0), -1);
        ulp_snapshot_close(s);
    }
}

static void test_snapshot__optional_attrs(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("all_dtypes.h5");
    /* make_snapshots.py: dtype.<k-th dtype> has step k, kernels [0,2), device_ptr
     * 0xdeadbeef00 + k, stream 7, time_ns 1000 + k, layer k, seq 30 - k. */
    static const char *const order[] = {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2",
                                        "i64", "i32", "i16", "i8",   "u8"};
    for (int k = 0; k < 11; k++) {
        char name[32];
        snprintf(name, sizeof name, "dtype.%s", order[k]);
        ptrdiff_t i = ulp_snapshot_find(s, name, 0);
        assert_true(i >= 0);
        const ulp_capture_info *c = ulp_snapshot_capture(s, (size_t)i);
        assert_true(c->seq == 30 - k);
        assert_int_equal(c->layer, k);
        assert_true(c->has_step && c->step == k);
        assert_true(c->has_kernels && c->kernels[0] == 0 && c->kernels[1] == 2);
        assert_true(c->device_ptr == 0xdeadbeef00ull + (uint64_t)k);
        assert_true(c->stream == 7);
        assert_true(c->time_ns == 1000 + k);
        assert_int_equal(c->dtype, ulp_dtype_from_name(order[k]));
    }
    const ulp_capture_info *c = ulp_snapshot_capture(s, (size_t)ulp_snapshot_find(s, "scalar", 0));
    assert_int_equal(c->ndim, 0);
    assert_true(c->elements == 1);
    assert_false(c->has_step);
    assert_false(c->has_kernels);
    assert_true(c->device_ptr == 0 && c->stream == 0 && c->time_ns == 0);
    assert_string_equal(c->role, "input");
    assert_int_equal(c->layer, -1);
    c = ulp_snapshot_capture(s, (size_t)ulp_snapshot_find(s, "empty", 0));
    assert_true(c->elements == 0);
    assert_int_equal(ulp_snapshot_find(s, "modèle.层.ünï", 0) >= 0, 1);
    ulp_snapshot_close(s);
}

static void test_snapshot__trace(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("all_dtypes.h5");
    json_t *g = json_object_get(json_object_get(manifest, "good"), "all_dtypes.h5");
    json_t *rows = json_object_get(g, "kernels"), *names = json_object_get(g, "kernel_names");
    assert_int_equal(ulp_snapshot_kernel_count(s), json_array_size(rows));
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
#define U(field) ((uint64_t)json_integer_value(json_object_get(r, field)))
        assert_true(k->seq == U("seq"));
        assert_true(k->correlation_id == U("correlation_id"));
        assert_true((uint64_t)k->shared_static == U("shared_static"));
        assert_true((uint64_t)k->shared_dynamic == U("shared_dynamic"));
        assert_true((uint64_t)k->registers == U("registers"));
        assert_true(k->device == U("device"));
        assert_true(k->start_ns == U("start_ns"));
        assert_true(k->end_ns == U("end_ns"));
        for (size_t d = 0; d < 3; d++) {
            assert_int_equal(k->grid[d],
                             json_integer_value(json_array_get(json_object_get(r, "grid"), d)));
            assert_int_equal(k->block[d],
                             json_integer_value(json_array_get(json_object_get(r, "block"), d)));
        }
        uint64_t id = U("name_id");
        const char *want =
            id < json_array_size(names) ? json_string_value(json_array_get(names, id)) : "";
        assert_string_equal(k->name, want);
#undef U
    }
    /* stream 2^63 + 5 does not fit a JSON integer: checked by hand */
    assert_true(ulp_snapshot_kernel(s, 2)->stream == (1ull << 63) + 5);
    assert_true(ulp_snapshot_kernel(s, 0)->stream == 7);
    assert_null(ulp_snapshot_kernel(s, 3));
    ulp_snapshot_close(s);
}

/* Reads every capture whole and in pieces of several sizes. */
static void test_snapshot__read_all(void **state)
{
    (void)state;
    static const char *const files[] = {"all_dtypes.h5", "golden.h5", "fixed_root.h5"};
    for (size_t f = 0; f < 3; f++) {
        ulp_snapshot *s = open_ok(files[f]);
        for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
            const ulp_capture_info *c = ulp_snapshot_capture(s, i);
            size_t size = ulp_dtype_size(c->dtype);
            char *buf = malloc(c->elements * size + 8);
            ulp_error err;
            assert_int_equal(ulp_snapshot_read(s, i, 0, c->elements, buf, &err), ULP_OK);
            check_pattern(c, buf, 0, c->elements);
            static const uint64_t pieces[] = {1, 3, 7, 20, 64, 999};
            for (size_t p = 0; p < 6; p++) {
                for (uint64_t first = 0; first < c->elements; first += pieces[p]) {
                    uint64_t n = c->elements - first < pieces[p] ? c->elements - first : pieces[p];
                    memset(buf, 0xa5, n * size + 8);
                    if (ulp_snapshot_read(s, i, first, n, buf, &err) != ULP_OK)
                        print_error("%s\n", err.msg);
                    check_pattern(c, buf, first, n);
                    /* nothing written past the slab */
                    for (size_t b = n * size; b < n * size + 8; b++)
                        assert_int_equal((unsigned char)buf[b], 0xa5);
                }
            }
            free(buf);
        }
        ulp_snapshot_close(s);
    }
}

static void test_snapshot__read_errors(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("all_dtypes.h5");
    ulp_error err;
    char buf[64];
    size_t sc = (size_t)ulp_snapshot_find(s, "scalar", 0);
    size_t em = (size_t)ulp_snapshot_find(s, "empty", 0);
    size_t b = (size_t)ulp_snapshot_find(s, "model.layers.0.out", 1); /* 64 elements */
    assert_int_equal(ulp_snapshot_read(s, sc, 0, 1, buf, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_read(s, sc, 1, 1, buf, &err), ULP_ERANGE);
    assert_int_equal(ulp_snapshot_read(s, em, 0, 0, buf, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_read(s, em, 0, 1, buf, &err), ULP_ERANGE);
    assert_int_equal(ulp_snapshot_read(s, b, 64, 0, buf, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_read(s, b, 60, 5, buf, &err), ULP_ERANGE);
    assert_non_null(strstr(err.msg, "model.layers.0.out/1"));
    assert_int_equal(ulp_snapshot_read(s, b, 65, 0, buf, &err), ULP_ERANGE);
    assert_int_equal(ulp_snapshot_read(s, b, UINT64_MAX, 2, buf, NULL), ULP_ERANGE);
    assert_int_equal(ulp_snapshot_read(s, b, 0, UINT64_MAX, buf, NULL), ULP_ERANGE);
    assert_int_equal(ulp_snapshot_read(s, 1000, 0, 1, buf, &err), ULP_EINVAL);
    assert_int_equal(ulp_snapshot_read(s, b, 0, 1, NULL, &err), ULP_EINVAL);
    ulp_snapshot_close(s);
}

/* A large tensor, contiguous (pread) and chunked+compressed (H5Dread), in
 * bounded chunks and random ranges that cross rows and planes. */
static void test_snapshot__read_big(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("big.h5");
    ulp_error err;
    assert_int_equal(ulp_snapshot_capture_count(s), 3);
    for (size_t i = 0; i < 3; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        assert_true(c->elements == 3 * 1000 * 700);
        uint64_t chunk = 99991;
        uint16_t *buf = malloc(chunk * 2);
        for (uint64_t first = 0; first < c->elements; first += chunk) {
            uint64_t n = c->elements - first < chunk ? c->elements - first : chunk;
            assert_int_equal(ulp_snapshot_read(s, i, first, n, buf, &err), ULP_OK);
            check_pattern(c, buf, first, n);
        }
        uint64_t r = 12345;
        for (int k = 0; k < 300; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t first = (r >> 20) % c->elements;
            uint64_t n = (r >> 5) % (chunk < c->elements - first ? chunk : c->elements - first) + 1;
            if (first + n > c->elements)
                n = c->elements - first;
            assert_int_equal(ulp_snapshot_read(s, i, first, n, buf, &err), ULP_OK);
            check_pattern(c, buf, first, n);
        }
        free(buf);
    }
    ulp_snapshot_close(s);
}

/*
 * Zero-copy views: the same bits as a read, for contiguous (mapped) and
 * chunked+compressed (copied into the caller's buffer) datasets, and a
 * release of each view -- mapped or not -- leaves later views intact.
 */
static void test_snapshot__view(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("big.h5");
    ulp_error err;
    int mapped = 0, copied = 0;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        uint64_t chunk = 65537;
        uint16_t *buf = malloc(chunk * 2);
        for (int pass = 0; pass < 2; pass++) {
            for (uint64_t first = 0; first < c->elements; first += chunk) {
                uint64_t n = c->elements - first < chunk ? c->elements - first : chunk;
                const void *v = NULL;
                assert_int_equal(ulp_snapshot_view(s, i, first, n, buf, &v, &err), ULP_OK);
                assert_non_null(v);
                if (v == buf)
                    copied++;
                else
                    mapped++;
                check_pattern(c, v, first, n);
                ulp_snapshot_view_release(s, v, n * 2);
            }
        }
        const void *v = NULL;
        assert_int_equal(ulp_snapshot_view(s, i, c->elements, 1, buf, &v, &err), ULP_ERANGE);
        free(buf);
    }
    assert_true(mapped > 0); /* big.h5 has a contiguous dataset */
    assert_true(copied > 0); /* and chunked ones */
    assert_int_equal(ulp_snapshot_view(s, 0, 0, 1, NULL, NULL, &err), ULP_EINVAL);
    ulp_snapshot_view_release(NULL, NULL, 0);
    ulp_snapshot_close(s);
}

typedef struct reader_arg {
    const ulp_snapshot *s;
    size_t capture;
    int part, parts;
    int bad;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *a = p;
    const ulp_capture_info *c = ulp_snapshot_capture(a->s, a->capture);
    uint64_t chunk = 65536;
    uint16_t *buf = malloc(chunk * 2);
    for (uint64_t first = (uint64_t)a->part * chunk; first < c->elements;
         first += (uint64_t)a->parts * chunk) {
        uint64_t n = c->elements - first < chunk ? c->elements - first : chunk;
        if (ulp_snapshot_read(a->s, a->capture, first, n, buf, NULL) != ULP_OK) {
            a->bad++;
            continue;
        }
        for (uint64_t k = 0; k < n; k++)
            if (buf[k] != (uint16_t)pattern(c->seq, first + k))
                a->bad++;
    }
    free(buf);
    return NULL;
}

static void test_snapshot__read_threads(void **state)
{
    (void)state;
    ulp_snapshot *s = open_ok("big.h5");
    pthread_t th[6];
    reader_arg args[6];
    for (int t = 0; t < 6; t++) {
        args[t] = (reader_arg){s, (size_t)(t % 3), t / 3, 2, 0};
        assert_int_equal(pthread_create(&th[t], NULL, reader, &args[t]), 0);
    }
    for (int t = 0; t < 6; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].bad, 0);
    }
    ulp_snapshot_close(s);
}

/* ---- Malformed files -------------------------------------------------------------------- */

static ulp_status status_from_name(const char *name)
{
    for (int st = 0; st >= -100; st--)
        if (strcmp(ulp_status_name((ulp_status)st), name) == 0)
            return (ulp_status)st;
    fail_msg("unknown status %s", name);
    return ULP_OK;
}

static void test_snapshot__bad_files(void **state)
{
    (void)state;
    /* Everything HDF5 might print goes to a file that must stay empty. */
    char errpath[4200];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", corpus);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);

    const char *file;
    json_t *want;
    int n = 0, wrong = 0;
    char report[8192] = "";
    json_object_foreach(json_object_get(manifest, "bad"), file, want)
    {
        ulp_snapshot *s = (ulp_snapshot *)&n; /* must be reset to NULL */
        ulp_error err;
        const char *p = path_of(file);
        ulp_status st = ulp_snapshot_open(p, &s, &err);
        ulp_status ws = status_from_name(json_string_value(json_object_get(want, "status")));
        const char *word = json_string_value(json_object_get(want, "word"));
        if (st != ws || s != NULL || err.status != st || strstr(err.msg, p) == NULL ||
            strstr(err.msg, word) == NULL || strchr(err.msg, '\n') != NULL) {
            wrong++;
            size_t len = strlen(report);
            snprintf(report + len, sizeof report - len, "%s: %s '%s' (want %s, '%s')\n", file,
                     ulp_status_name(st), err.msg, ulp_status_name(ws), word);
        }
        /* err may be NULL */
        s = NULL;
        assert_int_equal(ulp_snapshot_open(p, &s, NULL), st);
        assert_null(s);
        n++;
    }
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path_of("no/such/file.h5"), &s, &err), ULP_ENOENT);
    assert_int_equal(ulp_snapshot_open(corpus, &s, &err), ULP_EIO);
    assert_int_equal(ulp_snapshot_open(NULL, &s, &err), ULP_EINVAL);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (wrong)
        fail_msg("%d of %d malformed files misreported:\n%s", wrong, n, report);
    assert_true(n >= 30);
    struct stat sb;
    assert_int_equal(stat(errpath, &sb), 0);
    if (sb.st_size != 0)
        fail_msg("%lld bytes on stderr (see %s)", (long long)sb.st_size, errpath);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot__root_run_env),
        cmocka_unit_test(test_snapshot__captures_match_manifest),
        cmocka_unit_test(test_snapshot__optional_attrs),
        cmocka_unit_test(test_snapshot__trace),
        cmocka_unit_test(test_snapshot__read_all),
        cmocka_unit_test(test_snapshot__read_errors),
        cmocka_unit_test(test_snapshot__read_big),
        cmocka_unit_test(test_snapshot__view),
        cmocka_unit_test(test_snapshot__read_threads),
        cmocka_unit_test(test_snapshot__bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
