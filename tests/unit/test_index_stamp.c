/*
 * The seal's stamp (format/index.h, FORMAT.md "Capture index"): the writer
 * and ulp_snapshot_copy() leave the file's mtime at the stamp the hash
 * covers; a reader that finds it so trusts the seal without hashing, and
 * hashes as before after any write since, when the stamp is 0 (files
 * written before it) and under ULPPROF_INDEX=hash.  The hashes are counted
 * (ulp__index_hash_count()), not timed.
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
#include "format/index_seal.h"
#include "format/journal.h"
#include "format/snapshot_priv.h"
#include "format/snapshot_read_priv.h"
#include "format/writer.h"
#include "index_testutil.h"

static char g_path[1200];

/* A file of `n` captures of 12 elements under 7 names. */
static void write_file(const char *tag, int n)
{
    snprintf(g_path, sizeof g_path, "%s/s.h5", tu_tmpdir(tag));
    ulp__writer *w = NULL;
    ulp_error err;
    assert_int_equal(ulp__writer_create(g_path, "lbl", "test", 1, &w, &err), ULP_OK);
    int64_t shape[] = {3, 4};
    uint16_t data[12];
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "t.%d", i % 7);
        for (int k = 0; k < 12; k++)
            data[k] = (uint16_t)(i * 12 + k);
        ulp__desc d = {.name = name,
                       .dtype = ULP_DTYPE_BF16,
                       .ndim = 2,
                       .shape = shape,
                       .layer = i % 7,
                       .step = ULP_STEP_NONE};
        assert_int_equal(ulp__writer_add(w, &d, data, sizeof data, NULL, &err), ULP_OK);
    }
    assert_int_equal(ulp__writer_close(w, &err), ULP_OK);
}

/* File offset of `path`'s /index/seal. */
static uint64_t seal_offset(const char *path)
{
    hid_t f = tu_open(path);
    hid_t d = H5Dopen2(f, ULP__INDEX_SEAL, H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    assert_true(off != HADDR_UNDEF);
    return (uint64_t)off;
}

static uint64_t seal_u64(const char *path, int at)
{
    int fd = open(path, O_RDONLY);
    unsigned char b[8];
    assert_int_equal(ulp__journal_pread(fd, b, 8, seal_offset(path) + (uint64_t)at), 0);
    close(fd);
    return ulp__le64_get(b);
}

static uint64_t mtime_ns(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
}

static void set_mtime(const char *path, uint64_t ns)
{
    struct timespec t[2] = {
        {.tv_sec = 0, .tv_nsec = UTIME_OMIT},
        {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)}};
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/*
 * Whether `path` opens through its index (ULPPROF_INDEX set to `env`; NULL:
 * unset), and how many seal hashes that took, in *hashes.
 */
static int via_index(const char *path, const char *env, uint64_t *hashes)
{
    uint64_t h0 = ulp__index_hash_count();
    if (env != NULL)
        setenv("ULPPROF_INDEX", env, 1);
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(path, &s, &err), ULP_OK);
    uint64_t h1 = ulp__index_hash_count();
    int rc = index_usable(s);
    unsetenv("ULPPROF_INDEX");
    /* Both reads decide alike: count the second one's hashes only. */
    *hashes = ulp__index_hash_count() - h1;
    assert_true(h1 - h0 == *hashes);
    ulp_snapshot_close(s);
    return rc;
}

/*
 * 1 if the test directory's filesystem keeps an mtime to the nanosecond:
 * on one with coarser times no stamp survives (FORMAT.md), every file is
 * hashed, and the tests that need a stamped file are skipped.
 */
static int g_keeps_ns;

static int keeps_ns(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/f", tu_tmpdir("stamp-ns"));
    /* Not set_mtime() and mtime_ns(): their asserts need a running test. */
    const struct timespec t[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                                  {.tv_sec = 1796123912, .tv_nsec = 558669069}};
    struct stat sb;
    int fd = open(path, O_CREAT | O_WRONLY, 0600), ok = 0;
    if (fd >= 0) {
        close(fd);
        ok = utimensat(AT_FDCWD, path, t, 0) == 0 && stat(path, &sb) == 0 &&
             sb.st_mtim.tv_sec == t[1].tv_sec && sb.st_mtim.tv_nsec == t[1].tv_nsec;
    }
    tu_done();
    return ok;
}

#define NEEDS_NS()                                                                                 \
    do {                                                                                           \
        if (!g_keeps_ns) {                                                                         \
            fprintf(stderr, "skipped: the test directory keeps no nanosecond mtimes\n");           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* The writer's file: trusted without a hash until anything writes to it. */
/* The stamp is odd and before the reading: a filesystem that keeps times in
 * 100 ns, 1 us or 1 s units truncates it, so no later write there can show
 * it back (one in the same unit would, were the stamp a multiple of it). */
static void test_index_stamp__odd(void **state)
{
    (void)state;
    static const uint64_t now[] = {
        3, 4, 1000, 1001, 1000000001, 1796123912558669069u, 1796123912558669070u};
    for (size_t i = 0; i < sizeof now / sizeof now[0]; i++) {
        uint64_t s = ulp__index_stamp_of(now[i]);
        assert_true(s % 2 == 1);
        assert_true(s < now[i] && now[i] - s <= 2);
    }
    assert_int_equal(ulp__index_stamp_of(0), 0);
    uint64_t s = ulp__index_stamp_now();
    assert_true(s == 0 || s % 2 == 1);
}

static void test_index_stamp__writer(void **state)
{
    (void)state;
    NEEDS_NS();
    write_file("stamp-writer", 40);
    uint64_t stamp = seal_u64(g_path, ULP__INDEX_STAMP_AT), hashes = 0;
    assert_true(stamp != 0);
    assert_true(mtime_ns(g_path) == stamp);
    assert_true(seal_u64(g_path, ULP__INDEX_HASH_AT) != 0);
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 0);
    /* Forced: the hash, which covers the stamp, holds. */
    assert_int_equal(via_index(g_path, "hash", &hashes), 1);
    assert_true(hashes == 1);
    assert_int_equal(via_index(g_path, "0", &hashes), 0);
    assert_true(hashes == 0);
    /* Touched (the mtime one ns later): hashed, and the seal holds. */
    set_mtime(g_path, stamp + 1);
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 1);
    set_mtime(g_path, stamp);
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 0);
    tu_done();
}

/*
 * A byte of the records changed, so the hash no longer holds: found, as
 * the mtime moved.  With the mtime set back to the stamp on purpose, the
 * seal is trusted (the documented limit); ULPPROF_INDEX=hash still finds it.
 */
static void test_index_stamp__written_after(void **state)
{
    (void)state;
    NEEDS_NS();
    write_file("stamp-after", 40);
    uint64_t stamp = mtime_ns(g_path), hashes = 0, seal = seal_offset(g_path);
    int fd = open(g_path, O_RDWR);
    unsigned char b;
    /* The seal's records count's high byte: hashed, and not read by the decode. */
    assert_int_equal(ulp__journal_pread(fd, &b, 1, seal + 63), 0);
    b ^= 1;
    assert_int_equal(ulp__journal_pwrite(fd, &b, 1, seal + 63), 0);
    close(fd);
    assert_true(mtime_ns(g_path) != stamp);
    assert_int_equal(via_index(g_path, NULL, &hashes), 0);
    assert_true(hashes == 1);
    set_mtime(g_path, stamp);
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 0);
    assert_int_equal(via_index(g_path, "hash", &hashes), 0);
    assert_true(hashes == 1);
    tu_done();
}

/*
 * A file of before the stamp (stamp 0, sealed by the hash alone: made here
 * by zeroing the stamp and sealing again) opens through its index with the
 * hash, whatever its mtime, 0 included.
 */
static void test_index_stamp__old_file(void **state)
{
    (void)state;
    write_file("stamp-old", 40);
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    ulp__index_range *skip = malloc((s->ncaps + 2) * sizeof *skip);
    size_t n = 0;
    for (size_t i = 0; i < s->ncaps; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (ulp__snapshot_offset(s, i) != ULP__INDEX_NO_OFFSET)
            skip[n++] = (ulp__index_range){ulp__snapshot_offset(s, i),
                                           c->elements * ulp_dtype_size(c->dtype)};
    }
    ulp__journal_state js;
    ulp__journal_find(s, &js);
    assert_true(js.found && js.closed);
    ulp_snapshot_close(s);
    uint64_t seal = seal_offset(g_path), hashes = 0, was = seal_u64(g_path, ULP__INDEX_HASH_AT);
    int fd = open(g_path, O_RDWR);
    unsigned char zero[8] = {0};
    assert_int_equal(ulp__journal_pwrite(fd, zero, 8, seal + ULP__INDEX_STAMP_AT), 0);
    assert_int_equal(ulp__index_seal_write(fd, seal, js.first, skip, n), 0);
    close(fd);
    free(skip);
    assert_true(seal_u64(g_path, ULP__INDEX_STAMP_AT) == 0);
    assert_true(seal_u64(g_path, ULP__INDEX_HASH_AT) != was); /* the hash covers the stamp */
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 1);
    set_mtime(g_path, 0); /* the stamp 0 never matches */
    assert_int_equal(via_index(g_path, NULL, &hashes), 1);
    assert_true(hashes == 1);
    tu_done();
}
/* Whether snapshots `a` and `b` hold the same captures. */
static void same_captures(const ulp_snapshot *a, const ulp_snapshot *b)
{
    size_t n = ulp_snapshot_capture_count(a);
    assert_int_equal(ulp_snapshot_capture_count(b), n);
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *x = ulp_snapshot_capture(a, i), *y = ulp_snapshot_capture(b, i);
        assert_string_equal(x->name, y->name);
        assert_true(x->seq == y->seq && x->occurrence == y->occurrence && x->layer == y->layer &&
                    x->dtype == y->dtype && x->elements == y->elements);
        assert_int_equal(ulp_snapshot_find(a, x->name, x->occurrence), (ptrdiff_t)i);
    }
}

/*
 * A deferred open of a stamped file of 1,024 captures or more decodes its
 * records on a second thread (s->check; ULPPROF_INDEX=thread whatever the
 * machine's load): nothing is installed until ulp_snapshot_confirm(),
 * which gives the captures the groups give, with no hash.  A decode that
 * fails there (a record made unreadable, the mtime set back) sends the
 * confirmation to the groups, as a failed hash does.
 */
static void test_index_stamp__deferred_decode(void **state)
{
    (void)state;
    NEEDS_NS();
    write_file("stamp-deferred", 1500);
    ulp_snapshot *s = NULL, *slow = NULL;
    ulp_error err;
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &slow, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    /* On a thread or not (the load decides), the same captures. */
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    same_captures(s, slow);
    ulp_snapshot_close(s);
    setenv("ULPPROF_INDEX", "thread", 1);
    uint64_t h0 = ulp__index_hash_count();
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    assert_int_equal(ulp_snapshot_capture_count(s), 0); /* not yet installed */
    ulp_snapshot *was = s;
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    assert_ptr_equal(s, was);
    assert_null(s->check);
    assert_true(ulp__index_hash_count() == h0);
    assert_int_equal(ulp_snapshot_capture_count(s), 1500);
    same_captures(s, slow);
    ulp_snapshot_close(s);
    /* Closed before it is confirmed: the close waits for the decode. */
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    /* One decode thread at a time: a second open meanwhile decodes in place. */
    ulp_snapshot *t = NULL;
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &t, &err), ULP_OK);
    assert_null(t->check);
    same_captures(t, slow);
    ulp_snapshot_close(s);
    ulp_snapshot_close(t);

    /* The first record's length 0: it cannot be decoded. */
    uint64_t stamp = mtime_ns(g_path), at = records_offset(g_path);
    int fd = open(g_path, O_RDWR);
    unsigned char zero[4] = {0};
    assert_int_equal(ulp__journal_pwrite(fd, zero, 4, at), 0);
    close(fd);
    set_mtime(g_path, stamp);
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    assert_non_null(s->check);
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    assert_null(s->check);
    assert_int_equal(ulp_snapshot_capture_count(s), 1500); /* through the groups */
    unsetenv("ULPPROF_INDEX");
    same_captures(s, slow);
    ulp_snapshot_close(s);
    ulp_snapshot_close(slow);
    tu_done();
}

/* ulp_snapshot_copy()'s copy is stamped as the writer's file is. */
static void test_index_stamp__copy(void **state)
{
    (void)state;
    NEEDS_NS();
    write_file("stamp-copy", 40);
    char copy[sizeof g_path];
    assert_true((size_t)snprintf(copy, sizeof copy, "%s.copy.h5", g_path) < sizeof copy);
    ulp_snapshot *s = NULL;
    ulp_error err;
    setenv("ULPPROF_INDEX", "0", 1);
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    unsetenv("ULPPROF_INDEX");
    assert_int_equal(ulp_snapshot_copy(s, copy, &err), ULP_OK);
    ulp_snapshot_close(s);
    uint64_t stamp = seal_u64(copy, ULP__INDEX_STAMP_AT), hashes = 0;
    assert_true(stamp != 0 && mtime_ns(copy) == stamp);
    assert_int_equal(via_index(copy, NULL, &hashes), 1);
    assert_true(hashes == 0);
    assert_int_equal(via_index(copy, "hash", &hashes), 1);
    assert_true(hashes == 1);
    tu_done();
}

int main(void)
{
    g_keeps_ns = keeps_ns();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_stamp__odd),
        cmocka_unit_test(test_index_stamp__writer),
        cmocka_unit_test(test_index_stamp__written_after),
        cmocka_unit_test(test_index_stamp__old_file),
        cmocka_unit_test(test_index_stamp__copy),
        cmocka_unit_test(test_index_stamp__deferred_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
