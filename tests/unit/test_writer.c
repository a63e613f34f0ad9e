/*
 * The snapshot writer (format/writer.c), checked with plain HDF5 reads:
 * root attributes, every dtype's file type and bits, shapes (rank 0..8,
 * zero elements), dataset attributes, occurrence numbering, capture names,
 * /run and /env, the kernel trace, and error paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>

#include "capture_testutil.h"
#include "format/capture_name.h"
#include "format/writer.h"

static char g_path[1200];

static ulp__writer *create_writer(const char *tag)
{
    snprintf(g_path, sizeof(g_path), "%s/w.h5", tu_tmpdir(tag));
    ulp__writer *w = NULL;
    ulp_error err;
    ulp_status st = ulp__writer_create(g_path, "lbl", "ulpprof-test 1", 1234567890123, &w, &err);
    if (st != ULP_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, ULP_OK);
    assert_non_null(w);
    return w;
}

static void add(ulp__writer *w, ulp__desc *d, const void *data, int64_t want_seq)
{
    size_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= (size_t)d->shape[i];
    int64_t seq = -1;
    ulp_error err;
    ulp_status st = ulp__writer_add(w, d, data, n * ulp_dtype_size(d->dtype), &seq, &err);
    if (st != ULP_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, ULP_OK);
    assert_int_equal(seq, want_seq);
}

static void test_writer__root_attrs(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-root");
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    assert_true(f >= 0);
    char s[256];
    int64_t v;
    assert_int_equal(tu_attr_str(f, "format", s, sizeof(s)), 0);
    assert_string_equal(s, "ulpprof-snapshot");
    assert_int_equal(tu_attr_i64(f, "format_version", &v), 0);
    assert_int_equal(v, 1);
    assert_true(tu_attr_type_is(f, "format_version", H5T_STD_I32LE));
    assert_int_equal(tu_attr_str(f, "label", s, sizeof(s)), 0);
    assert_string_equal(s, "lbl");
    assert_int_equal(tu_attr_str(f, "writer", s, sizeof(s)), 0);
    assert_string_equal(s, "ulpprof-test 1");
    assert_int_equal(tu_attr_i64(f, "created_unix_ns", &v), 0);
    assert_int_equal(v, 1234567890123);
    assert_true(tu_attr_type_is(f, "created_unix_ns", H5T_STD_I64LE));
    assert_int_equal(tu_group_count(f, "/run"), 0);
    assert_int_equal(tu_group_count(f, "/env"), 0);
    assert_int_equal(tu_group_count(f, "/captures"), 0);
    H5Fclose(f);
    tu_done();
}

/* The stored type of each dtype, checked field by field against FORMAT.md. */
static void check_file_type(hid_t ds, ulp_dtype dt)
{
    hid_t t = H5Dget_type(ds);
    switch (dt) {
    case ULP_DTYPE_F64:
        assert_true(H5Tequal(t, H5T_IEEE_F64LE) > 0);
        break;
    case ULP_DTYPE_F32:
        assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
        break;
    case ULP_DTYPE_F16:
    case ULP_DTYPE_BF16: {
        size_t spos, epos, esize, mpos, msize;
        assert_int_equal(H5Tget_class(t), H5T_FLOAT);
        assert_int_equal(H5Tget_size(t), 2);
        assert_int_equal(H5Tget_order(t), H5T_ORDER_LE);
        assert_true(H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0);
        assert_int_equal(spos, 15);
        assert_int_equal(mpos, 0);
        if (dt == ULP_DTYPE_F16) {
            assert_int_equal(epos, 10);
            assert_int_equal(esize, 5);
            assert_int_equal(msize, 10);
            assert_int_equal(H5Tget_ebias(t), 15);
        } else {
            assert_int_equal(epos, 7);
            assert_int_equal(esize, 8);
            assert_int_equal(msize, 7);
            assert_int_equal(H5Tget_ebias(t), 127);
        }
        break;
    }
    case ULP_DTYPE_F8E4M3:
    case ULP_DTYPE_F8E5M2:
    case ULP_DTYPE_U8:
        assert_true(H5Tequal(t, H5T_STD_U8LE) > 0);
        break;
    case ULP_DTYPE_I64:
        assert_true(H5Tequal(t, H5T_STD_I64LE) > 0);
        break;
    case ULP_DTYPE_I32:
        assert_true(H5Tequal(t, H5T_STD_I32LE) > 0);
        break;
    case ULP_DTYPE_I16:
        assert_true(H5Tequal(t, H5T_STD_I16LE) > 0);
        break;
    case ULP_DTYPE_I8:
        assert_true(H5Tequal(t, H5T_STD_I8LE) > 0);
        break;
    default:
        fail();
    }
    H5Tclose(t);
}

static void test_writer__every_dtype_bits(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-dtypes");
    /* 16-bit types: all 65,536 patterns; 8-bit ones: all 256; wider: 4096. */
    enum { N = 65536 };
    static char buf[N * 8];
    for (int dt = 0; dt < ULP_DTYPE_COUNT; dt++) {
        size_t size = ulp_dtype_size((ulp_dtype)dt);
        int64_t n = size == 1 ? 256 : size == 2 ? 65536 : 4096;
        int64_t shape[2] = {n / 16, 16};
        tu_fill((ulp_dtype)dt, buf, (size_t)n);
        ulp__desc d;
        ulp__desc_init(&d);
        d.name = ulp_dtype_name((ulp_dtype)dt);
        d.dtype = (ulp_dtype)dt;
        d.ndim = 2;
        d.shape = shape;
        add(w, &d, buf, dt);
    }
    assert_int_equal(ulp__writer_capture_count(w), ULP_DTYPE_COUNT);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    assert_true(f >= 0);
    static char want[N * 8];
    for (int dt = 0; dt < ULP_DTYPE_COUNT; dt++) {
        size_t size = ulp_dtype_size((ulp_dtype)dt);
        size_t n = size == 1 ? 256 : size == 2 ? 65536 : 4096;
        char path[64], s[64];
        snprintf(path, sizeof(path), "/captures/%s/0", ulp_dtype_name((ulp_dtype)dt));
        hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
        assert_true(ds >= 0);
        check_file_type(ds, (ulp_dtype)dt);
        assert_int_equal(tu_attr_str(ds, "dtype", s, sizeof(s)), 0);
        assert_string_equal(s, ulp_dtype_name((ulp_dtype)dt));
        /* The analyzer preads contiguous data at this offset. */
        H5D_layout_t layout;
        hid_t dcpl = H5Dget_create_plist(ds);
        layout = H5Pget_layout(dcpl);
        H5Pclose(dcpl);
        assert_int_equal(layout, H5D_CONTIGUOUS);
        assert_true(H5Dget_offset(ds) != HADDR_UNDEF);
        H5Dclose(ds);

        size_t nbytes = 0;
        void *got = tu_read_raw(f, path, &nbytes);
        assert_non_null(got);
        assert_int_equal(nbytes, n * size);
        tu_fill((ulp_dtype)dt, want, n);
        assert_memory_equal(got, want, nbytes);
        free(got);

        /* The same bits at the file offset, read without HDF5. */
        ds = H5Dopen2(f, path, H5P_DEFAULT);
        haddr_t off = H5Dget_offset(ds);
        H5Dclose(ds);
        FILE *raw = fopen(g_path, "rb");
        assert_non_null(raw);
        char *direct = malloc(nbytes);
        assert_int_equal(fseeko(raw, (off_t)off, SEEK_SET), 0);
        assert_int_equal(fread(direct, 1, nbytes, raw), nbytes);
        fclose(raw);
        assert_memory_equal(direct, want, nbytes);
        free(direct);
    }
    H5Fclose(f);
    tu_done();
}

static void test_writer__shapes(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-shapes");
    float scalar = -2.5f;
    int64_t zero1[1] = {0};
    int64_t zero3[3] = {4, 0, 2};
    int64_t rank8[8] = {1, 2, 1, 2, 1, 2, 1, 3};
    static int16_t r8data[24];
    for (int i = 0; i < 24; i++)
        r8data[i] = (int16_t)(i * 1000 - 7);
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = "scalar";
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 0;
    add(w, &d, &scalar, 0);
    d.name = "empty1";
    d.ndim = 1;
    d.shape = zero1;
    d.dtype = ULP_DTYPE_BF16;
    add(w, &d, NULL, 1);
    d.name = "empty3";
    d.ndim = 3;
    d.shape = zero3;
    add(w, &d, NULL, 2);
    d.name = "rank8";
    d.ndim = 8;
    d.shape = rank8;
    d.dtype = ULP_DTYPE_I16;
    add(w, &d, r8data, 3);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    hsize_t dims[8];
    hid_t ds = H5Dopen2(f, "/captures/scalar/0", H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    assert_int_equal(H5Sget_simple_extent_type(sp), H5S_SCALAR);
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 0);
    H5Sclose(sp);
    H5Dclose(ds);
    size_t nbytes;
    float *fs = tu_read_raw(f, "/captures/scalar/0", &nbytes);
    assert_int_equal(nbytes, 4);
    assert_memory_equal(fs, &scalar, 4);
    free(fs);

    ds = H5Dopen2(f, "/captures/empty3/0", H5P_DEFAULT);
    sp = H5Dget_space(ds);
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 3);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    assert_int_equal(dims[0], 4);
    assert_int_equal(dims[1], 0);
    assert_int_equal(dims[2], 2);
    assert_int_equal(H5Sget_simple_extent_npoints(sp), 0);
    H5Sclose(sp);
    H5Dclose(ds);
    void *e = tu_read_raw(f, "/captures/empty1/0", &nbytes);
    assert_non_null(e);
    assert_int_equal(nbytes, 0);
    free(e);

    ds = H5Dopen2(f, "/captures/rank8/0", H5P_DEFAULT);
    sp = H5Dget_space(ds);
    assert_int_equal(H5Sget_simple_extent_ndims(sp), 8);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    for (int i = 0; i < 8; i++)
        assert_int_equal(dims[i], (hsize_t)rank8[i]);
    H5Sclose(sp);
    H5Dclose(ds);
    int16_t *r8 = tu_read_raw(f, "/captures/rank8/0", &nbytes);
    assert_int_equal(nbytes, sizeof(r8data));
    assert_memory_equal(r8, r8data, sizeof(r8data));
    free(r8);
    H5Fclose(f);
    tu_done();
}

static void test_writer__attrs_and_occurrences(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-attrs");
    int32_t x[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    ulp__desc d;
    ulp__desc_init(&d);
    d.dtype = ULP_DTYPE_I32;
    d.ndim = 1;
    d.shape = shape;
    /* Interleaved names: occurrences count per name, seq over the file. */
    const char *names[7] = {"model.layers.0.out",
                            "logits",
                            "model.layers.0.out",
                            "logits",
                            "model.layers.0.out",
                            "x",
                            "logits"};
    for (int i = 0; i < 7; i++) {
        d.name = names[i];
        d.layer = (i % 2 == 0) ? i : ULP_LAYER_NONE;
        d.role = names[i][0] == 'l' ? ULP_ROLE_LOGITS : ULP_ROLE_ACTIVATION;
        d.step = i == 5 ? ULP_STEP_NONE : 100 + i;
        d.has_kernels = i == 3;
        d.kernels[0] = 10;
        d.kernels[1] = 17;
        d.device_ptr = i == 4 ? UINT64_C(0xfffff00000001000) : 0;
        d.stream = i == 4 ? UINT64_C(0x8000000000000007) : 0;
        d.time_ns = i == 6 ? 0 : 5000 + i;
        x[0] = i;
        add(w, &d, x, i);
    }
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    assert_int_equal(tu_group_count(f, "/captures"), 3);
    assert_int_equal(tu_group_count(f, "/captures/model.layers.0.out"), 3);
    assert_int_equal(tu_group_count(f, "/captures/logits"), 3);
    assert_int_equal(tu_group_count(f, "/captures/x"), 1);
    int occ_of[7] = {0, 0, 1, 1, 2, 0, 2};
    for (int i = 0; i < 7; i++) {
        char path[128], s[64];
        int64_t v;
        snprintf(path, sizeof(path), "/captures/%s/%d", names[i], occ_of[i]);
        hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
        assert_true(ds >= 0);
        /* No object times, in the capture's header or its group's (writer_props). */
        H5O_info_t oi;
        assert_true(H5Oget_info2(ds, &oi, H5O_INFO_TIME) >= 0);
        assert_true(oi.atime == 0 && oi.mtime == 0 && oi.ctime == 0 && oi.btime == 0);
        assert_true(H5Oget_info_by_name2(f, path, &oi, H5O_INFO_TIME, H5P_DEFAULT) >= 0);
        snprintf(s, sizeof(s), "/captures/%s", names[i]);
        assert_true(H5Oget_info_by_name2(f, s, &oi, H5O_INFO_TIME, H5P_DEFAULT) >= 0);
        assert_true(oi.mtime == 0 && oi.ctime == 0);
        assert_int_equal(tu_attr_i64(ds, "seq", &v), 0);
        assert_int_equal(v, i);
        assert_true(tu_attr_type_is(ds, "seq", H5T_STD_I64LE));
        if (i % 2 == 0) {
            assert_int_equal(tu_attr_i64(ds, "layer", &v), 0);
            assert_int_equal(v, i);
            assert_true(tu_attr_type_is(ds, "layer", H5T_STD_I32LE));
        } else {
            assert_false(tu_attr_exists(ds, "layer"));
        }
        assert_int_equal(tu_attr_str(ds, "role", s, sizeof(s)), 0);
        assert_string_equal(s, names[i][0] == 'l' ? "logits" : "activation");
        if (i == 5) {
            assert_false(tu_attr_exists(ds, "step"));
        } else {
            assert_int_equal(tu_attr_i64(ds, "step", &v), 0);
            assert_int_equal(v, 100 + i);
        }
        if (i == 3) {
            hid_t a = H5Aopen(ds, "kernels", H5P_DEFAULT);
            hid_t sp = H5Aget_space(a);
            assert_int_equal(H5Sget_simple_extent_npoints(sp), 2);
            int64_t k[2];
            assert_true(H5Aread(a, H5T_NATIVE_INT64, k) >= 0);
            assert_int_equal(k[0], 10);
            assert_int_equal(k[1], 17);
            H5Sclose(sp);
            H5Aclose(a);
        } else {
            assert_false(tu_attr_exists(ds, "kernels"));
        }
        if (i == 4) {
            uint64_t u;
            hid_t a = H5Aopen(ds, "device_ptr", H5P_DEFAULT);
            assert_true(H5Aread(a, H5T_NATIVE_UINT64, &u) >= 0);
            assert_true(u == UINT64_C(0xfffff00000001000));
            H5Aclose(a);
            assert_true(tu_attr_type_is(ds, "device_ptr", H5T_STD_U64LE));
            a = H5Aopen(ds, "stream", H5P_DEFAULT);
            assert_true(H5Aread(a, H5T_NATIVE_UINT64, &u) >= 0);
            assert_true(u == UINT64_C(0x8000000000000007));
            H5Aclose(a);
        } else {
            assert_false(tu_attr_exists(ds, "device_ptr"));
            assert_false(tu_attr_exists(ds, "stream"));
        }
        assert_int_equal(tu_attr_i64(ds, "time_ns", &v), 0);
        if (i == 6)
            assert_true(v > INT64_C(1600000000) * 1000000000); /* "now", after 2020 */
        else
            assert_int_equal(v, 5000 + i);
        H5Dclose(ds);
        size_t nbytes;
        int32_t *got = tu_read_raw(f, path, &nbytes);
        assert_int_equal(got[0], i);
        free(got);
    }
    H5Fclose(f);
    tu_done();
}

static void test_writer__names(void **state)
{
    (void)state;
    assert_false(ulp__capture_name_ok(NULL));
    assert_false(ulp__capture_name_ok(""));
    assert_false(ulp__capture_name_ok("a/b"));
    assert_false(ulp__capture_name_ok("."));
    assert_false(ulp__capture_name_ok(".."));
    assert_false(ulp__capture_name_ok("a\nb"));
    assert_false(ulp__capture_name_ok("\xff"));             /* not UTF-8          */
    assert_false(ulp__capture_name_ok("\xc0\xaf"));         /* overlong '/'       */
    assert_false(ulp__capture_name_ok("\xed\xa0\x80"));     /* surrogate          */
    assert_false(ulp__capture_name_ok("\xf4\x90\x80\x80")); /* above U+10FFFF */
    assert_false(ulp__capture_name_ok("\xe2\x82"));         /* truncated          */
    assert_true(ulp__capture_name_ok("..."));
    assert_true(ulp__capture_name_ok("model.layers.14.out"));
    assert_true(
        ulp__capture_name_ok("\xd1\x81\xd0\xbb\xd0\xbe\xd0\xb9.0 \xe2\x86\x92 \xf0\x9f\x99\x82"));

    ulp__writer *w = create_writer("writer-names");
    const char *utf8 = "\xd1\x81\xd0\xbb\xd0\xbe\xd0\xb9.0";
    uint8_t b = 7;
    ulp__desc d;
    ulp__desc_init(&d);
    d.dtype = ULP_DTYPE_U8;
    d.name = utf8;
    add(w, &d, &b, 0);
    d.name = "a/b";
    ulp_error err;
    assert_int_equal(ulp__writer_add(w, &d, &b, 1, NULL, &err), ULP_EINVAL);
    d.name = ".";
    assert_int_equal(ulp__writer_add(w, &d, &b, 1, NULL, &err), ULP_EINVAL);
    /* Wrong byte count, unknown dtype, bad rank, negative extent, no data. */
    d.name = "ok";
    assert_int_equal(ulp__writer_add(w, &d, &b, 2, NULL, &err), ULP_EINVAL);
    d.dtype = (ulp_dtype)42;
    assert_int_equal(ulp__writer_add(w, &d, &b, 1, NULL, &err), ULP_EINVAL);
    d.dtype = ULP_DTYPE_U8;
    int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    d.ndim = 9;
    d.shape = shape;
    assert_int_equal(ulp__writer_add(w, &d, &b, 1, NULL, &err), ULP_EINVAL);
    shape[0] = -1;
    d.ndim = 1;
    assert_int_equal(ulp__writer_add(w, &d, &b, 1, NULL, &err), ULP_EINVAL);
    shape[0] = 1;
    assert_int_equal(ulp__writer_add(w, &d, NULL, 1, NULL, &err), ULP_EINVAL);
    /* Refusals consumed neither seq nor occurrence. */
    add(w, &d, &b, 1);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    char path[128];
    snprintf(path, sizeof(path), "/captures/%s/0", utf8);
    hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
    assert_true(ds >= 0);
    H5Dclose(ds);
    H5L_info_t li;
    hid_t g = H5Gopen2(f, "/captures", H5P_DEFAULT);
    assert_true(H5Lget_info(g, utf8, &li, H5P_DEFAULT) >= 0);
    assert_int_equal(li.cset, H5T_CSET_UTF8);
    H5Gclose(g);
    assert_int_equal(tu_group_count(f, "/captures/ok"), 1);
    H5Fclose(f);
    tu_done();
}

static void test_writer__run_env(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-runenv");
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_RUN, "cache", "miss", NULL), ULP_OK);
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_RUN, "batch_size", "8", NULL), ULP_OK);
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_RUN, "cache", "hit", NULL), ULP_OK);
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_ENV, "env:OMP_NUM_THREADS", "4", NULL),
                     ULP_OK);
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_RUN, "", "x", NULL), ULP_EINVAL);
    assert_int_equal(ulp__writer_set_attr(w, ULP__WRITER_RUN, "k", NULL, NULL), ULP_EINVAL);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    hid_t run = H5Gopen2(f, "/run", H5P_DEFAULT);
    hid_t env = H5Gopen2(f, "/env", H5P_DEFAULT);
    char s[64];
    H5O_info_t oi;
    H5Oget_info(run, &oi);
    assert_int_equal(oi.num_attrs, 2);
    assert_int_equal(tu_attr_str(run, "cache", s, sizeof(s)), 0);
    assert_string_equal(s, "hit");
    assert_int_equal(tu_attr_str(run, "batch_size", s, sizeof(s)), 0);
    assert_string_equal(s, "8");
    assert_int_equal(tu_attr_str(env, "env:OMP_NUM_THREADS", s, sizeof(s)), 0);
    assert_string_equal(s, "4");
    H5Gclose(run);
    H5Gclose(env);
    H5Fclose(f);
    tu_done();
}

/* The test's own view of a /trace/kernels row, read by field name. */
typedef struct test_row {
    uint64_t seq, stream, start_ns, end_ns;
    uint32_t correlation_id, name_id, device;
    int32_t grid[3], block[3], shared_static, shared_dynamic, registers;
} test_row;

static hid_t test_row_type(void)
{
    hsize_t three = 3;
    hid_t a3 = H5Tarray_create2(H5T_NATIVE_INT32, 1, &three);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(test_row));
    H5Tinsert(t, "seq", offsetof(test_row, seq), H5T_NATIVE_UINT64);
    H5Tinsert(t, "stream", offsetof(test_row, stream), H5T_NATIVE_UINT64);
    H5Tinsert(t, "start_ns", offsetof(test_row, start_ns), H5T_NATIVE_UINT64);
    H5Tinsert(t, "end_ns", offsetof(test_row, end_ns), H5T_NATIVE_UINT64);
    H5Tinsert(t, "correlation_id", offsetof(test_row, correlation_id), H5T_NATIVE_UINT32);
    H5Tinsert(t, "name_id", offsetof(test_row, name_id), H5T_NATIVE_UINT32);
    H5Tinsert(t, "device", offsetof(test_row, device), H5T_NATIVE_UINT32);
    H5Tinsert(t, "grid", offsetof(test_row, grid), a3);
    H5Tinsert(t, "block", offsetof(test_row, block), a3);
    H5Tinsert(t, "shared_static", offsetof(test_row, shared_static), H5T_NATIVE_INT32);
    H5Tinsert(t, "shared_dynamic", offsetof(test_row, shared_dynamic), H5T_NATIVE_INT32);
    H5Tinsert(t, "registers", offsetof(test_row, registers), H5T_NATIVE_INT32);
    H5Tclose(a3);
    return t;
}

static void test_writer__trace(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-trace");
    /* Three batches, names repeating across them; 2500 rows cross chunks. */
    enum { N = 2500 };
    static ulp__kernel_row rows[N];
    static const char *names[N];
    static const char *const pool[] = {"gemm_bf16_tile128x64<(int)3>", "rms_norm_kernel", "softmax",
                                       NULL, "\xce\xbb_kernel"};
    for (int i = 0; i < N; i++) {
        ulp__kernel_row *r = &rows[i];
        memset(r, 0, sizeof(*r));
        r->seq = (uint64_t)i;
        r->correlation_id = 1000u + (uint32_t)i;
        r->name_id = 0xdeadbeef; /* ignored on input */
        for (int k = 0; k < 3; k++) {
            r->grid[k] = i + k;
            r->block[k] = 32 * (k + 1);
        }
        r->shared_static = 48 * 1024;
        r->shared_dynamic = i;
        r->registers = 96;
        r->device = (uint32_t)(i % 2);
        r->stream = UINT64_C(0x7f0000000000) + (uint64_t)i;
        r->start_ns = UINT64_C(1) << 40 | (uint64_t)i;
        r->end_ns = r->start_ns + 1000;
        names[i] = pool[(i * 7 + i / 100) % 5];
    }
    assert_int_equal(ulp__writer_append_kernels(w, rows, names, 1, NULL), ULP_OK);
    assert_int_equal(ulp__writer_append_kernels(w, rows + 1, names + 1, 1500, NULL), ULP_OK);
    assert_int_equal(ulp__writer_append_kernels(w, rows, names, 0, NULL), ULP_OK);
    assert_int_equal(ulp__writer_append_kernels(w, rows + 1501, names + 1501, N - 1501, NULL),
                     ULP_OK);
    assert_int_equal(ulp__writer_kernel_count(w), N);
    assert_int_equal(rows[0].name_id, 0xdeadbeef);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    /* Names: unique, in order of first appearance. */
    hid_t nds = H5Dopen2(f, "/trace/names", H5P_DEFAULT);
    assert_true(nds >= 0);
    hid_t sp = H5Dget_space(nds);
    hssize_t nnames = H5Sget_simple_extent_npoints(sp);
    assert_int_equal(nnames, 5);
    char *got_names[5];
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    H5Tset_cset(st, H5T_CSET_UTF8);
    assert_true(H5Dread(nds, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, got_names) >= 0);
    hid_t ft = H5Dget_type(nds);
    assert_int_equal(H5Tget_cset(ft), H5T_CSET_UTF8);
    assert_true(H5Tis_variable_str(ft) > 0);
    H5Tclose(ft);
    const char *first_seen[5];
    int nseen = 0;
    for (int i = 0; i < N; i++) {
        const char *nm = names[i] != NULL ? names[i] : "";
        int found = 0;
        for (int k = 0; k < nseen; k++)
            found |= strcmp(first_seen[k], nm) == 0;
        if (!found)
            first_seen[nseen++] = nm;
    }
    assert_int_equal(nseen, 5);
    for (int k = 0; k < 5; k++)
        assert_string_equal(got_names[k], first_seen[k]);

    hid_t kds = H5Dopen2(f, "/trace/kernels", H5P_DEFAULT);
    hid_t ksp = H5Dget_space(kds);
    assert_int_equal(H5Sget_simple_extent_npoints(ksp), N);
    static test_row got[N];
    hid_t mt = test_row_type();
    assert_true(H5Dread(kds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    for (int i = 0; i < N; i++) {
        const ulp__kernel_row *r = &rows[i];
        assert_int_equal(got[i].seq, r->seq);
        assert_int_equal(got[i].correlation_id, r->correlation_id);
        assert_true(got[i].name_id < 5);
        assert_string_equal(got_names[got[i].name_id], names[i] != NULL ? names[i] : "");
        for (int k = 0; k < 3; k++) {
            assert_int_equal(got[i].grid[k], r->grid[k]);
            assert_int_equal(got[i].block[k], r->block[k]);
        }
        assert_int_equal(got[i].shared_static, r->shared_static);
        assert_int_equal(got[i].shared_dynamic, r->shared_dynamic);
        assert_int_equal(got[i].registers, r->registers);
        assert_int_equal(got[i].device, r->device);
        assert_true(got[i].stream == r->stream);
        assert_true(got[i].start_ns == r->start_ns);
        assert_true(got[i].end_ns == r->end_ns);
    }
    /* The stored field types are the little-endian ones FORMAT.md names. */
    hid_t kt = H5Dget_type(kds);
    int idx = H5Tget_member_index(kt, "seq");
    hid_t mtype = H5Tget_member_type(kt, (unsigned)idx);
    assert_true(H5Tequal(mtype, H5T_STD_U64LE) > 0);
    H5Tclose(mtype);
    idx = H5Tget_member_index(kt, "name_id");
    mtype = H5Tget_member_type(kt, (unsigned)idx);
    assert_true(H5Tequal(mtype, H5T_STD_U32LE) > 0);
    H5Tclose(mtype);
    H5Tclose(kt);
    H5Dvlen_reclaim(st, sp, H5P_DEFAULT, got_names);
    H5Tclose(mt);
    H5Tclose(st);
    H5Sclose(ksp);
    H5Sclose(sp);
    H5Dclose(kds);
    H5Dclose(nds);
    H5Fclose(f);
    tu_done();
}

/* Copies the file as it is on disk now (the writer still has it open). */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Links in /captures/<name> of the file as it is on disk now (-1: no group). */
static long links_on_disk(const char *name)
{
    char copy[1300], group[64];
    snprintf(copy, sizeof(copy), "%s.copy", g_path);
    snprintf(group, sizeof(group), "/captures/%s", name);
    copy_file(g_path, copy);
    hid_t f = tu_open(copy);
    assert_true(f >= 0);
    long n = tu_group_count(f, group);
    H5Fclose(f);
    remove(copy);
    return n;
}

/*
 * Links wait in batches (writer_link.c): a new name's first capture is
 * linked at once; later ones wait until the batch is full, a capture of
 * 1 MiB or more, ulp__writer_sync() or the close -- and then every one of
 * them is named, with its own bytes and seq.
 */
static void test_writer__link_batches(void **state)
{
    (void)state;
    ulp__writer *w = create_writer("writer-links");
    ulp__writer_set_link_batch(w, 3);
    int32_t x[2] = {0, 0};
    int64_t shape[1] = {2};
    ulp__desc d;
    ulp__desc_init(&d);
    d.dtype = ULP_DTYPE_I32;
    d.ndim = 1;
    d.shape = shape;
    /* seq:     0  1  2  3  4  5  6  7 */
    /* name:    a  b  a  b  a  b  b  a */
    const char *names = "abababba";
    size_t want_waiting[8] = {0, 0, 1, 2, 0, 1, 2, 0};
    long want_a[8] = {1, 1, 1, 1, 3, 3, 3, 4};
    for (int i = 0; i < 8; i++) {
        char name[2] = {names[i], 0};
        d.name = name;
        x[0] = i;
        add(w, &d, x, i);
        assert_int_equal(ulp__writer_unlinked_count(w), want_waiting[i]);
        assert_int_equal(links_on_disk("a"), want_a[i]);
    }
    /* Nothing waits: sync does nothing.  A 1 MiB capture links at once. */
    assert_int_equal(ulp__writer_sync(w, NULL), ULP_OK);
    d.name = "a";
    x[0] = 8;
    add(w, &d, x, 8);
    assert_int_equal(ulp__writer_unlinked_count(w), 1);
    int64_t big_shape[1] = {1 << 18}; /* 1 MiB of i32 */
    int32_t *big = calloc((size_t)1 << 18, sizeof(int32_t));
    assert_non_null(big);
    big[0] = 9;
    d.name = "b";
    d.shape = big_shape;
    add(w, &d, big, 9);
    free(big);
    assert_int_equal(ulp__writer_unlinked_count(w), 0);
    assert_int_equal(links_on_disk("a"), 5);
    assert_int_equal(links_on_disk("b"), 5);
    /* Waiting at the close: linked by it. */
    d.shape = shape;
    x[0] = 10;
    add(w, &d, x, 10);
    assert_int_equal(ulp__writer_unlinked_count(w), 1);
    assert_int_equal(ulp__writer_close(w, NULL), ULP_OK);

    hid_t f = tu_open(g_path);
    assert_int_equal(tu_group_count(f, "/captures/a"), 5);
    assert_int_equal(tu_group_count(f, "/captures/b"), 6);
    int occ[11] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5};
    const char *all = "abababbaabb";
    for (int i = 0; i < 11; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/captures/%c/%d", all[i], occ[i]);
        hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
        assert_true(ds >= 0);
        int64_t v = -1;
        assert_int_equal(tu_attr_i64(ds, "seq", &v), 0);
        assert_int_equal(v, i);
        H5Dclose(ds);
        size_t nbytes;
        int32_t *got = tu_read_raw(f, path, &nbytes);
        assert_int_equal(got[0], i);
        free(got);
    }
    H5Fclose(f);
    tu_done();
}

static void test_writer__unwritable(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof(path), "%s/no/such/dir/x.h5", tu_tmpdir("writer-unwritable"));
    ulp__writer *w = (ulp__writer *)&path; /* must be reset to NULL */
    ulp_error err;
    ulp_status st = ulp__writer_create(path, "x", "t", 0, &w, &err);
    assert_int_equal(st, ULP_EIO);
    assert_null(w);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(ulp__writer_close(NULL, NULL), ULP_OK);
    assert_int_equal(ulp__writer_create("", "x", "t", 0, &w, &err), ULP_EINVAL);
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer__root_attrs),
        cmocka_unit_test(test_writer__every_dtype_bits),
        cmocka_unit_test(test_writer__shapes),
        cmocka_unit_test(test_writer__attrs_and_occurrences),
        cmocka_unit_test(test_writer__names),
        cmocka_unit_test(test_writer__run_env),
        cmocka_unit_test(test_writer__trace),
        cmocka_unit_test(test_writer__link_batches),
        cmocka_unit_test(test_writer__unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
