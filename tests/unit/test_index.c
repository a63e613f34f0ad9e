/*
 * The capture index (format/index.h, format/writer_index.c,
 * format/snapshot_index.c): a file opened through the index describes
 * every capture exactly as the groups do (every field, every kind of
 * capture); a record that does not decode is refused; the hash leaves out
 * exactly the ranges it is given; a stale seal sends the reader to the
 * groups.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_testutil.h"
#include "format/index.h"
#include "format/journal.h"
#include "format/snapshot_priv.h"
#include "format/snapshot_read_priv.h"
#include "format/writer.h"
#include "index_testutil.h"

static char g_path[1200];

/* A file with every kind of capture the writer takes. */
static void write_variety(const char *tag)
{
    snprintf(g_path, sizeof g_path, "%s/v.h5", tu_tmpdir(tag));
    ulp__writer *w = NULL;
    ulp_error err;
    assert_int_equal(ulp__writer_create(g_path, "lbl", "test", 1, &w, &err), ULP_OK);
    int64_t s1[] = {5}, s2[] = {3, 4}, s3[] = {2, 3, 4}, s0[] = {0, 4};
    int64_t s8[] = {1, 2, 1, 2, 1, 2, 1, 3};
    int64_t pos3[] = {7, 8, 9}, pos23[] = {0, 1, 2, 0, 1, 2}, req23[] = {4, 4, 4, 5, 5, 5};
    const char *inputs[] = {"embed", "model.layers.0.attn"};
    for (int occ = 0; occ < 3; occ++) {
        ulp__desc d = {.name = "embed",
                       .dtype = ULP_DTYPE_BF16,
                       .ndim = 1,
                       .shape = s1,
                       .layer = ULP_LAYER_NONE,
                       .step = ULP_STEP_NONE};
        tu_writer_add(w, &d);
    }
    ulp__desc all = {.name = "model.layers.0.attn",
                     .dtype = ULP_DTYPE_F32,
                     .ndim = 2,
                     .shape = s2,
                     .layer = 3,
                     .role = ULP_ROLE_LOGITS,
                     .step = 11,
                     .has_kernels = 1,
                     .kernels = {2, 9},
                     .has_gemms = 1,
                     .gemms = {0, 4},
                     .has_graph_replay = 1,
                     .graph_replay = {6, 1},
                     .device_ptr = 0xdeadbeef00ULL,
                     .stream = 77,
                     .time_ns = 123456789,
                     .positions = pos3,
                     .row_rank = 1,
                     .n_inputs = 2,
                     .inputs = inputs};
    tu_writer_add(w, &all);
    ulp__desc rows2 = {.name = "h\xc3\xa9.2d",
                       .dtype = ULP_DTYPE_F16,
                       .ndim = 3,
                       .shape = s3,
                       .layer = 0,
                       .step = ULP_STEP_NONE,
                       .positions = pos23,
                       .requests = req23,
                       .row_rank = 2};
    tu_writer_add(w, &rows2);
    ulp__desc scalar = {
        .name = "scalar", .dtype = ULP_DTYPE_F64, .ndim = 0, .layer = -1, .step = 0};
    tu_writer_add(w, &scalar);
    ulp__desc empty = {
        .name = "empty", .dtype = ULP_DTYPE_I32, .ndim = 2, .shape = s0, .step = ULP_STEP_NONE};
    tu_writer_add(w, &empty);
    ulp__desc rank8 = {
        .name = "rank8", .dtype = ULP_DTYPE_U8, .ndim = 8, .shape = s8, .step = ULP_STEP_NONE};
    tu_writer_add(w, &rank8);
    assert_int_equal(ulp__writer_close(w, &err), ULP_OK);
}

static void same_i64s(const int64_t *a, const int64_t *b, uint64_t n)
{
    assert_true((a == NULL) == (b == NULL));
    for (uint64_t i = 0; a != NULL && i < n; i++)
        assert_int_equal(a[i], b[i]);
}

/* Every field of capture i of x and y. */
static void same_capture(const ulp_capture_info *a, const ulp_capture_info *b)
{
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->role, b->role);
    assert_int_equal(a->occurrence, b->occurrence);
    assert_int_equal(a->seq, b->seq);
    assert_int_equal(a->layer, b->layer);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->ndim, b->ndim);
    for (int k = 0; k < a->ndim; k++)
        assert_int_equal(a->shape[k], b->shape[k]);
    assert_int_equal(a->elements, b->elements);
    assert_int_equal(a->has_step, b->has_step);
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->has_kernels, b->has_kernels);
    assert_memory_equal(a->kernels, b->kernels, sizeof a->kernels);
    assert_int_equal(a->has_gemms, b->has_gemms);
    assert_memory_equal(a->gemms, b->gemms, sizeof a->gemms);
    assert_int_equal(a->has_graph_replay, b->has_graph_replay);
    assert_memory_equal(a->graph_replay, b->graph_replay, sizeof a->graph_replay);
    assert_int_equal(a->device_ptr, b->device_ptr);
    assert_int_equal(a->stream, b->stream);
    assert_int_equal(a->time_ns, b->time_ns);
    assert_int_equal(a->row_rank, b->row_rank);
    assert_int_equal(a->rows, b->rows);
    same_i64s(a->positions, b->positions, a->rows);
    same_i64s(a->requests, b->requests, a->rows);
    assert_int_equal(a->n_inputs, b->n_inputs);
    for (size_t k = 0; k < a->n_inputs; k++)
        assert_string_equal(a->inputs[k], b->inputs[k]);
}

/*
 * `fast` (read through an index) describes every capture as `slow` does,
 * bytes included (the index's offsets are the datasets'), and finds each
 * by name in the order the index gives.
 */
static void same_snapshot(const ulp_snapshot *fast, const ulp_snapshot *slow)
{
    ulp_error err;
    size_t n = ulp_snapshot_capture_count(fast);
    assert_int_equal(ulp_snapshot_capture_count(slow), n);
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(fast, i);
        same_capture(c, ulp_snapshot_capture(slow, i));
        assert_int_equal(ulp_snapshot_find(fast, c->name, c->occurrence), (ptrdiff_t)i);
        size_t bytes = c->elements * ulp_dtype_size(c->dtype);
        unsigned char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
        assert_int_equal(ulp_snapshot_read(fast, i, 0, c->elements, x, &err), ULP_OK);
        assert_int_equal(ulp_snapshot_read(slow, i, 0, c->elements, y, &err), ULP_OK);
        assert_memory_equal(x, y, bytes);
        free(x);
        free(y);
    }
}

static void test_index__same_as_groups(void **state)
{
    (void)state;
    write_variety("index-same");
    ulp_snapshot *fast = NULL, *slow = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(g_path, &fast, &err), ULP_OK);
    assert_int_equal(index_usable(fast), 1);
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &slow, &err), ULP_OK);
    assert_int_equal(index_usable(slow), 0);
    unsetenv("ULPPROF_INDEX");
    size_t n = ulp_snapshot_capture_count(fast);
    assert_int_equal(n, 8);
    assert_int_equal(ulp_snapshot_capture_count(slow), n);
    same_snapshot(fast, slow);
    ulp_snapshot_close(fast);
    ulp_snapshot_close(slow);
    tu_done();
}

/* Flips the byte of g_path at `off`. */
static void flip(uint64_t off)
{
    int fd = open(g_path, O_RDWR);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* File offset of the last byte of `path`'s /index/records (contiguous). */
static uint64_t records_last_byte(const char *path)
{
    hid_t f = tu_open(path);
    hid_t d = H5Dopen2(f, ULP__INDEX_RECORDS, H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    hsize_t n = 0;
    hid_t sp = H5Dget_space(d);
    H5Sget_simple_extent_dims(sp, &n, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    assert_true(off != HADDR_UNDEF && n > 0);
    return (uint64_t)off + n - 1;
}

/* A byte changed outside the captures' data: the seal no longer holds. */
static void test_index__stale_seal(void **state)
{
    (void)state;
    write_variety("index-stale");
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    assert_int_equal(index_usable(s), 1);
    ulp_snapshot_close(s);
    /* The last byte of the records: inside the file's hashed bytes. */
    flip(records_last_byte(g_path));
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    assert_int_equal(index_usable(s), 0);
    assert_int_equal(ulp_snapshot_capture_count(s), 8); /* read through the groups */
    ulp_snapshot_close(s);
    tu_done();
}

/*
 * Files of many captures are hashed on a second thread, with the ranges a
 * light pass over the records gives (snapshot_index.c): a changed byte of
 * a capture's data leaves the seal good (the data is not hashed), a changed
 * byte anywhere else does not.
 */
static void write_many(const char *tag)
{
    snprintf(g_path, sizeof g_path, "%s/m.h5", tu_tmpdir(tag));
    ulp__writer *w = NULL;
    ulp_error err;
    assert_int_equal(ulp__writer_create(g_path, "lbl", "test", 1, &w, &err), ULP_OK);
    int64_t shape[] = {3, 4};
    char name[32];
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "t.%d", i % 37);
        ulp__desc d = {.name = name,
                       .dtype = i % 3 ? ULP_DTYPE_BF16 : ULP_DTYPE_F32,
                       .ndim = 2,
                       .shape = shape,
                       .layer = i % 37,
                       .step = ULP_STEP_NONE};
        tu_writer_add(w, &d);
    }
    assert_int_equal(ulp__writer_close(w, &err), ULP_OK);
}

static void test_index__many_captures(void **state)
{
    (void)state;
    write_many("index-many");
    ulp_error err;
    ulp_snapshot *s = NULL, *slow = NULL;
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    assert_int_equal(index_usable(s), 1);
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &slow, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    assert_int_equal(ulp_snapshot_capture_count(s), 1500);
    assert_int_equal(ulp_snapshot_capture_count(slow), 1500);
    for (size_t i = 0; i < 1500; i++)
        same_capture(ulp_snapshot_capture(s, i), ulp_snapshot_capture(slow, i));
    ulp_snapshot_close(slow);
    /* The first and the last byte of the first and the last capture's data. */
    const ulp_capture_info *c0 = ulp_snapshot_capture(s, 0), *cl = ulp_snapshot_capture(s, 1499);
    uint64_t n0 = c0->elements * ulp_dtype_size(c0->dtype);
    uint64_t nl = cl->elements * ulp_dtype_size(cl->dtype);
    uint64_t o0 = ulp__snapshot_offset(s, 0), ol = ulp__snapshot_offset(s, 1499);
    uint64_t data[4] = {o0, o0 + n0 - 1, ol, ol + nl - 1};
    /* The bytes just before and after them. */
    uint64_t other[2] = {o0 - 1, ol + nl};
    ulp_snapshot_close(s);
    for (int k = 0; k < 4; k++) {
        flip(data[k]);
        assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
        assert_int_equal(index_usable(s), 1);
        ulp_snapshot_close(s);
        flip(data[k]);
    }
    for (int k = 0; k < 2; k++) {
        flip(other[k]);
        /* The groups' reader may refuse the file itself: only the index's verdict counts. */
        if (ulp_snapshot_open(g_path, &s, &err) == ULP_OK) {
            assert_int_equal(index_usable(s), 0);
            ulp_snapshot_close(s);
        }
        flip(other[k]);
    }
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    assert_int_equal(index_usable(s), 1);
    ulp_snapshot_close(s);
    tu_done();
}

static void test_index__codec(void **state)
{
    (void)state;
    int64_t pos[] = {3, 1, 2};
    ulp__index_entry e = {.flags = ULP__INDEX_HAS_POSITIONS,
                          .seq = 4,
                          .occurrence = 2,
                          .offset = ULP__INDEX_NO_OFFSET,
                          .dtype = ULP_DTYPE_BF16,
                          .ndim = 2,
                          .layer = -1,
                          .row_rank = 1,
                          .rows = 3,
                          .shape = {3, 5},
                          .positions = (const unsigned char *)pos,
                          .name = "abc",
                          .name_len = 3,
                          .role = "activation",
                          .role_len = 10,
                          .inputs = "x\0yz",
                          .n_inputs = 2,
                          .inputs_len = 5};
    size_t len = ulp__index_record_size(&e);
    assert_int_equal(len % 8, 0);
    unsigned char *buf = calloc(1, len);
    ulp__index_record_encode(buf, &e);
    ulp__index_entry g;
    assert_int_equal(ulp__index_record_decode(buf, len, &g), len);
    assert_int_equal(g.seq, 4);
    assert_int_equal(g.shape[1], 5);
    assert_string_equal(g.name, "abc");
    assert_string_equal(g.inputs + 2, "yz");
    assert_int_equal((int64_t)ulp__le64_get(g.positions + 16), 2);
    /* Short, a rank over the limit, a string without its NUL: refused. */
    assert_int_equal(ulp__index_record_decode(buf, len - 8, &g), 0);
    buf[44] = ULP_MAX_RANK + 1;
    assert_int_equal(ulp__index_record_decode(buf, len, &g), 0);
    buf[44] = 2;
    buf[144] = 4; /* name length 4: "abc" then the role's first byte */
    assert_int_equal(ulp__index_record_decode(buf, len, &g), 0);
    free(buf);
}

static uint64_t hash_of(const char *path, ulp__index_range *skip, size_t n)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    uint64_t h = 0;
    assert_int_equal(ulp__index_hash_file(fd, (uint64_t)sb.st_size, skip, n, &h), 0);
    close(fd);
    return h;
}

static void test_index__hash_skips(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/h.bin", tu_tmpdir("index-hash"));
    size_t size = 3 * (size_t)ULP__INDEX_WINDOW + 123;
    unsigned char *b = malloc(size);
    for (size_t i = 0; i < size; i++)
        b[i] = (unsigned char)(i * 131 + 7);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, size, f);
    fclose(f);
    /* Ranges across a window boundary, overlapping, and out of order. */
    ulp__index_range skip[3] = {{ULP__INDEX_WINDOW * 2 - 10, 40}, {100, 50}, {120, 10}};
    ulp__index_range copy[3];
    memcpy(copy, skip, sizeof skip);
    uint64_t h0 = hash_of(path, copy, 3);
    size_t inside[] = {100, 149, ULP__INDEX_WINDOW * 2 - 10, ULP__INDEX_WINDOW * 2 + 29};
    size_t outside[] = {0,       99, 150, ULP__INDEX_WINDOW * 2 - 11, ULP__INDEX_WINDOW * 2 + 30,
                        size - 1};
    for (size_t k = 0; k < sizeof inside / sizeof inside[0] + sizeof outside / sizeof outside[0];
         k++) {
        int in = k < sizeof inside / sizeof inside[0];
        size_t at = in ? inside[k] : outside[k - sizeof inside / sizeof inside[0]];
        int fd = open(path, O_RDWR);
        unsigned char x = b[at] ^ 0x20;
        assert_int_equal(pwrite(fd, &x, 1, (off_t)at), 1);
        memcpy(copy, skip, sizeof skip);
        uint64_t h = hash_of(path, copy, 3);
        assert_int_equal(pwrite(fd, &b[at], 1, (off_t)at), 1);
        close(fd);
        if (in)
            assert_true(h == h0);
        else
            assert_true(h != h0);
    }
    /* Many ranges: the same hash in any order, whether a few stragglers are
     * inserted into a sorted run or the whole list is sorted. */
    ulp__index_range many[40], shuffled[40], straggle[40];
    for (size_t i = 0; i < 40; i++)
        many[i] = (ulp__index_range){1000 + 4999 * i, 100 + i % 7};
    uint64_t hs = hash_of(path, memcpy(shuffled, many, sizeof many), 40);
    for (size_t i = 0; i < 40; i++)
        shuffled[i] = many[(i * 17) % 40];
    assert_true(hash_of(path, shuffled, 40) == hs);
    memcpy(straggle, many + 3, 37 * sizeof *many);
    memcpy(straggle + 37, many, 3 * sizeof *many);
    assert_true(hash_of(path, straggle, 40) == hs);
    ulp__index_range beyond = {size - 4, 8};
    int fd = open(path, O_RDONLY);
    uint64_t h;
    assert_int_equal(ulp__index_hash_file(fd, size, &beyond, 1, &h), -1);
    /* Windows the caller holds are hashed from its bytes: the same bytes give
     * the same hash, and a held window's bytes count, not the file's. */
    ulp__index_mem all = {0, size, b};
    memcpy(copy, skip, sizeof skip);
    assert_int_equal(ulp__index_hash_file_mem(fd, size, copy, 3, &all, 1, &h), 0);
    assert_true(h == h0);
    unsigned char *m = malloc(size);
    memcpy(m, b, size);
    m[ULP__INDEX_WINDOW + 5] ^= 1; /* kept, in window 1 */
    m[20] ^= 1;                    /* kept, in a held range that holds no whole window */
    ulp__index_mem part[2] = {
        {10, 20, m + 10},
        {ULP__INDEX_WINDOW - 3, ULP__INDEX_WINDOW + 6, m + ULP__INDEX_WINDOW - 3}};
    memcpy(copy, skip, sizeof skip);
    assert_int_equal(ulp__index_hash_file_mem(fd, size, copy, 3, part, 2, &h), 0);
    assert_true(h != h0);
    m[ULP__INDEX_WINDOW + 5] ^= 1;
    memcpy(copy, skip, sizeof skip);
    assert_int_equal(ulp__index_hash_file_mem(fd, size, copy, 3, part, 2, &h), 0);
    assert_true(h == h0);
    free(m);
    close(fd);
    free(b);
    tu_done();
}

/*
 * `ulpprof repair`'s copy (ulp_snapshot_copy) carries a sealed index of its
 * own, written from what the reader found in a file read through its
 * groups: the copy, opened through that index, describes every capture
 * exactly as the original's groups do, bytes included; a changed byte of
 * the copy's records sends the reader to the copy's groups.
 */
static void test_index__repair_copy(void **state)
{
    (void)state;
    write_variety("index-copy");
    char copy[sizeof g_path];
    assert_true((size_t)snprintf(copy, sizeof copy, "%s.copy.h5", g_path) < sizeof copy);
    ulp_snapshot *orig = NULL, *dup = NULL;
    ulp_error err;
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &orig, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    assert_int_equal(ulp_snapshot_copy(orig, copy, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_open(copy, &dup, &err), ULP_OK);
    assert_int_equal(index_usable(dup), 1);
    size_t n = ulp_snapshot_capture_count(orig);
    assert_int_equal(n, 8);
    assert_int_equal(ulp_snapshot_capture_count(dup), n);
    same_snapshot(dup, orig);
    ulp_snapshot_close(dup);
    /* The last byte of the copy's records. */
    memcpy(g_path, copy, sizeof g_path);
    flip(records_last_byte(g_path));
    assert_int_equal(ulp_snapshot_open(copy, &dup, &err), ULP_OK);
    assert_int_equal(index_usable(dup), 0);
    assert_int_equal(ulp_snapshot_capture_count(dup), n); /* through the groups */
    ulp_snapshot_close(dup);
    ulp_snapshot_close(orig);
    tu_done();
}

/*
 * ulp_snapshot_open_deferred() leaves the hash running (s->check) and
 * ulp_snapshot_confirm() waits for it: the same snapshot when the seal
 * holds, the file opened again through the groups when it does not.
 */
/* The first capture's layer set to 77 in place. */
static void layer_77(void *ctx)
{
    (void)ctx;
    hid_t f = H5Fopen(g_path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t o = H5Oopen(f, "/captures/t.0/0", H5P_DEFAULT);
    hid_t a = H5Aopen(o, "layer", H5P_DEFAULT);
    int32_t layer = 77;
    assert_true(f >= 0 && o >= 0 && a >= 0 && H5Awrite(a, H5T_NATIVE_INT32, &layer) >= 0);
    H5Aclose(a);
    H5Oclose(o);
    H5Fclose(f);
}

static void test_index__deferred(void **state)
{
    (void)state;
    write_many("index-deferred");
    /* Touched: its mtime is no longer the seal's stamp, so it is hashed. */
    assert_int_equal(utimensat(AT_FDCWD, g_path, NULL, 0), 0);
    ulp_error err;
    ulp_snapshot *s = NULL, *slow = NULL;
    assert_int_equal(ulp_snapshot_confirm(NULL, &err), ULP_EINVAL);
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_EINVAL);
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &slow, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    ulp_snapshot *sure = slow;
    assert_int_equal(ulp_snapshot_confirm(&sure, &err), ULP_OK); /* nothing to wait for */
    assert_ptr_equal(sure, slow);

    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    ulp_snapshot *was = s;
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    assert_ptr_equal(s, was);
    assert_null(s->check);
    assert_int_equal(ulp_snapshot_capture_count(s), 1500);
    for (size_t i = 0; i < 1500; i++)
        same_capture(ulp_snapshot_capture(s, i), ulp_snapshot_capture(slow, i));
    ulp_snapshot_close(s);
    /* Closed before it is confirmed: the close waits for the hash. */
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    ulp_snapshot_close(s);

    ulp_snapshot_close(slow); /* HDF5 opens a file once to write it */
    /* The first capture's layer written in place (the file keeps its size):
     * stale, the deferred open still reads the index; the confirmation not. */
    tu_edit_keeping_size(g_path, layer_77, NULL);
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    assert_int_equal(ulp_snapshot_capture(s, 0)->layer, 0); /* not to be used: only here */
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    assert_null(s->check);
    assert_int_equal(index_usable(s), 0);
    assert_int_equal(ulp_snapshot_capture(s, 0)->layer, 77);
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &slow, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    for (size_t i = 0; i < 1500; i++)
        same_capture(ulp_snapshot_capture(s, i), ulp_snapshot_capture(slow, i));
    ulp_snapshot_close(s);
    ulp_snapshot_close(slow);
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index__same_as_groups), cmocka_unit_test(test_index__stale_seal),
        cmocka_unit_test(test_index__many_captures),  cmocka_unit_test(test_index__codec),
        cmocka_unit_test(test_index__hash_skips),     cmocka_unit_test(test_index__repair_copy),
        cmocka_unit_test(test_index__deferred),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
