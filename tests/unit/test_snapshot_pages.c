/*
 * The capture table made in pages (format/snapshot_pages.c): a stamped
 * file opened with ULPPROF_TABLE=lazy and tiny pages describes every
 * capture exactly as the table read whole does (ULPPROF_TABLE=eager), its
 * summary is what a walk of the whole table computes, a trimmed page made
 * again is the same, a walk that trims behind it keeps a bounded number of
 * pages, a record that fails at open sends the open to the groups, and
 * readers on other threads see the pages that exist while the caller
 * makes others.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_testutil.h"
#include "common/le.h"
#include "format/index.h"
#include "format/journal.h"
#include "format/snapshot_priv.h"
#include "format/snapshot_read_priv.h"
#include "format/snapshot_summary.h"
#include "format/writer.h"
#include "index_testutil.h"
#include "ulpprof/diff.h"

static char g_path[1200];

/*
 * `n` captures of every kind: names "t.<i mod 7>" (and "first", once, at
 * seq 0), dtypes of 1 to 8 bytes, positions on some names only (one name
 * has them on some captures, one in rows of several forms), requests,
 * inputs, kernel and gemm ranges,
 * empty and scalar shapes.
 */
static void write_mixed(const char *tag, int n)
{
    snprintf(g_path, sizeof g_path, "%s/p.h5", tu_tmpdir(tag));
    ulp__writer *w = NULL;
    ulp_error err;
    assert_int_equal(ulp__writer_create(g_path, "lbl", "test", 1, &w, &err), ULP_OK);
    static const ulp_dtype dt[] = {ULP_DTYPE_BF16, ULP_DTYPE_F32, ULP_DTYPE_F16,
                                   ULP_DTYPE_F64,  ULP_DTYPE_I32, ULP_DTYPE_U8};
    int64_t one[] = {3};
    ulp__desc first = {
        .name = "first", .dtype = ULP_DTYPE_F32, .ndim = 1, .shape = one, .step = ULP_STEP_NONE};
    tu_writer_add(w, &first);
    const char *inputs[] = {"t.1", "x"};
    char name[32];
    for (int i = 1; i < n; i++) {
        int k = i % 7;
        snprintf(name, sizeof name, "t.%d", k);
        int64_t shape[] = {3, k == 1 ? 4 : 1 + i % 5}, empty[] = {0, 4};
        int64_t pos[3] = {i, i + 1, i + 2}, req[3] = {7, 7, 8};
        ulp__desc d = {.name = name,
                       .dtype = k == 1 ? ULP_DTYPE_F32 : dt[(size_t)i % 6],
                       .ndim = k == 5 ? 0 : 2,
                       .shape = k == 6 ? empty : shape,
                       .layer = k == 4 ? ULP_LAYER_NONE : k,
                       .role = k == 3 ? ULP_ROLE_LOGITS : ULP_ROLE_ACTIVATION,
                       .step = i % 3 ? ULP_STEP_NONE : i};
        /* t.1 always has positions (with requests) and rows of one form, t.0 has them in
         * several forms (dtypes and row widths), t.2 on every other capture. */
        if (k <= 1 || (k == 2 && i % 2 == 0)) {
            d.positions = pos;
            d.requests = k == 1 ? req : NULL;
            d.row_rank = 1;
        }
        if (k == 3) {
            d.n_inputs = 2;
            d.inputs = inputs;
        }
        if (k == 4) {
            d.has_kernels = 1;
            d.kernels[0] = i;
            d.kernels[1] = i + 3;
            d.has_gemms = 1;
            d.gemms[1] = i % 4;
        }
        tu_writer_add(w, &d);
    }
    assert_int_equal(ulp__writer_close(w, &err), ULP_OK);
}

static ulp_snapshot *open_as(const char *table, const char *page)
{
    setenv("ULPPROF_TABLE", table, 1);
    if (page != NULL)
        setenv("ULPPROF_TABLE_PAGE", page, 1);
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open(g_path, &s, &err), ULP_OK);
    unsetenv("ULPPROF_TABLE");
    unsetenv("ULPPROF_TABLE_PAGE");
    return s;
}

static void same_i64s(const int64_t *a, const int64_t *b, uint64_t n)
{
    assert_true((a == NULL) == (b == NULL));
    for (uint64_t i = 0; a != NULL && i < n; i++)
        assert_int_equal(a[i], b[i]);
}

static void same_capture(const ulp_capture_info *a, const ulp_capture_info *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->role, b->role);
    assert_true(a->occurrence == b->occurrence && a->seq == b->seq && a->layer == b->layer &&
                a->dtype == b->dtype && a->ndim == b->ndim && a->elements == b->elements);
    assert_memory_equal(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]);
    assert_true(a->has_step == b->has_step && a->step == b->step);
    assert_true(a->has_kernels == b->has_kernels && a->has_gemms == b->has_gemms &&
                a->has_graph_replay == b->has_graph_replay);
    assert_memory_equal(a->kernels, b->kernels, sizeof a->kernels);
    assert_memory_equal(a->gemms, b->gemms, sizeof a->gemms);
    assert_memory_equal(a->graph_replay, b->graph_replay, sizeof a->graph_replay);
    assert_true(a->device_ptr == b->device_ptr && a->stream == b->stream &&
                a->time_ns == b->time_ns);
    assert_true(a->row_rank == b->row_rank && a->rows == b->rows);
    same_i64s(a->positions, b->positions, a->rows);
    same_i64s(a->requests, b->requests, a->rows);
    assert_int_equal(a->n_inputs, b->n_inputs);
    for (size_t k = 0; k < a->n_inputs; k++)
        assert_string_equal(a->inputs[k], b->inputs[k]);
}

/* One dtype and the same axes after the row axes. */
static int same_row_form(const ulp_capture_info *a, const ulp_capture_info *b)
{
    if (a->dtype != b->dtype || a->ndim - a->row_rank != b->ndim - b->row_rank)
        return 0;
    for (int k = 0; k < a->ndim - a->row_rank; k++)
        if (a->shape[a->row_rank + k] != b->shape[b->row_rank + k])
            return 0;
    return 1;
}

/* The summary of `s` computed here from a walk of every capture (as probe() walks). */
static void check_summary(const ulp_snapshot *lazy, const ulp_snapshot *eager)
{
    const ulp__snapshot_summary *sum = ulp__snapshot_summary_lazy(lazy);
    assert_non_null(sum);
    assert_null(ulp__snapshot_summary_lazy(eager));
    size_t n = ulp_snapshot_capture_count(eager), best = n, seen = 0;
    uint64_t total = 0, most = 0;
    int any_rows = 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(eager, i);
        uint64_t bytes = c->elements * ulp_dtype_size(c->dtype);
        total += bytes;
        any_rows |= c->row_rank > 0;
        if (bytes > most && ulp__snapshot_mapped(eager, i, 0) != NULL) {
            most = bytes;
            best = i;
        }
    }
    assert_int_equal(sum->data_bytes, total);
    assert_int_equal(sum->largest_mapped, best);
    assert_int_equal(sum->largest_bytes, most);
    assert_int_equal(sum->any_rows, any_rows);
    for (size_t r = 0; r < sum->nnames; r++) {
        const ulp__name_summary *ns = &sum->names[r];
        if (r > 0)
            assert_true(strcmp(sum->names[r - 1].name, ns->name) < 0);
        assert_ptr_equal(ulp__snapshot_summary_find(sum, ns->name), ns);
        uint64_t count = 0;
        int contiguous = 1, pos = 0;
        const ulp_capture_info *first = NULL;
        for (size_t i = 0; i < n; i++) {
            const ulp_capture_info *c = ulp_snapshot_capture(eager, i);
            if (strcmp(c->name, ns->name) != 0)
                continue;
            contiguous &= c->occurrence == (int64_t)count;
            int has = c->row_rank > 0;
            /* 1 all with positions in one row form, -2 in several, 0 none, -1 some. */
            if (first == NULL)
                pos = has;
            else if (pos == 0 || pos == -1 || !has)
                pos = pos == 0 && !has ? 0 : -1;
            else if (!same_row_form(first, c))
                pos = -2;
            if (first == NULL)
                first = c;
            count++;
        }
        assert_int_equal(ns->count, count);
        assert_int_equal(ns->contiguous, contiguous);
        assert_int_equal(ns->positions, pos);
        seen += (size_t)count;
    }
    assert_int_equal(seen, n); /* every capture's name is there */
}

/* Every capture, its bytes, and find() alike; one name pointer per name. */
static void same_tables(const ulp_snapshot *lazy, const ulp_snapshot *eager)
{
    ulp_error err;
    size_t n = ulp_snapshot_capture_count(eager);
    assert_int_equal(ulp_snapshot_capture_count(lazy), n);
    const ulp__snapshot_summary *sum = ulp__snapshot_summary_lazy(lazy);
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(lazy, i);
        same_capture(c, ulp_snapshot_capture(eager, i));
        assert_ptr_equal(ulp__snapshot_summary_find(sum, c->name)->name, c->name);
        assert_int_equal(ulp__snapshot_offset(lazy, i), ulp__snapshot_offset(eager, i));
        size_t bytes = c->elements * ulp_dtype_size(c->dtype);
        unsigned char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
        assert_int_equal(ulp_snapshot_read(lazy, i, 0, c->elements, x, &err), ULP_OK);
        assert_int_equal(ulp_snapshot_read(eager, i, 0, c->elements, y, &err), ULP_OK);
        assert_memory_equal(x, y, bytes);
        free(x);
        free(y);
    }
    /* find() and by_name make every page (and keep them). */
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(eager, i);
        assert_int_equal(ulp_snapshot_find(lazy, c->name, c->occurrence), (ptrdiff_t)i);
        assert_int_equal(ulp__snapshot_by_name(lazy)[i], ulp__snapshot_by_name(eager)[i]);
    }
    assert_int_equal(ulp_snapshot_find(lazy, "t.1", 1000000), -1);
    assert_int_equal(ulp_snapshot_find(lazy, "none", 0), -1);
}

static void test_snapshot_pages__same_as_eager(void **state)
{
    (void)state;
    write_mixed("pages-same", 300);
    ulp_snapshot *eager = open_as("eager", NULL);
    assert_null(eager->lazy);
    static const char *const pages[] = {"1", "4", "64", NULL};
    for (size_t k = 0; k < sizeof pages / sizeof pages[0]; k++) {
        ulp_snapshot *lazy = open_as("lazy", pages[k]);
        if (lazy->lazy == NULL) {
            /* A filesystem without nanosecond mtimes: no stamp, so no pages. */
            ulp_snapshot_close(lazy);
            break;
        }
        check_summary(lazy, eager);
        /* The open kept every page of so small a file: let them go, made again. */
        if (k == 1)
            ulp__snapshot_trim(lazy, ulp_snapshot_capture_count(lazy));
        same_tables(lazy, eager);
        ulp_snapshot_close(lazy);
    }
    /* An index checked by its hash is read whole: the hash reads it all anyway. */
    setenv("ULPPROF_INDEX", "hash", 1);
    ulp_snapshot *hashed = open_as("lazy", "4");
    unsetenv("ULPPROF_INDEX");
    assert_null(hashed->lazy);
    assert_int_equal(index_usable(hashed), 1);
    ulp_snapshot_close(hashed);
    ulp_snapshot_close(eager);
    tu_done();
}

/* A trimmed page made again is the same; a walk that trims keeps few pages. */
static void test_snapshot_pages__trim(void **state)
{
    (void)state;
    write_mixed("pages-trim", 3000);
    ulp_snapshot *eager = open_as("eager", NULL);
    ulp_snapshot *lazy = open_as("lazy", "16");
    if (lazy->lazy == NULL) {
        ulp_snapshot_close(lazy);
        ulp_snapshot_close(eager);
        tu_done();
        skip();
    }
    size_t n = ulp_snapshot_capture_count(eager), most = 0;
    /* The open kept the first pages (all of this small file): from none. */
    assert_true(ulp__snapshot_pages_resident(lazy) > 0);
    ulp__snapshot_trim(lazy, n);
    assert_int_equal(ulp__snapshot_pages_resident(lazy), 0);
    for (size_t i = 0; i < n; i++) {
        same_capture(ulp_snapshot_capture(lazy, i), ulp_snapshot_capture(eager, i));
        ulp__snapshot_trim(lazy, i > 20 ? i - 20 : 0);
        size_t now = ulp__snapshot_pages_resident(lazy);
        most = now > most && i > 100 ? now : most;
    }
    /* The page of i, those of the 20 behind it: at most 3 of 16 captures. */
    assert_true(most >= 2 && most <= 3);
    uint64_t remade = ulp__snapshot_pages_remade(lazy);
    assert_true(remade > 100);
    /* Trimmed pages, asked for again, backwards. */
    for (size_t i = n; i-- > 0;)
        same_capture(ulp_snapshot_capture(lazy, i), ulp_snapshot_capture(eager, i));
    assert_true(ulp__snapshot_pages_remade(lazy) > remade);
    ulp__snapshot_trim(lazy, n);
    assert_int_equal(ulp__snapshot_pages_resident(lazy), 0);
    same_tables(lazy, eager);
    /* by_name made every page and keeps them: trim frees nothing now. */
    ulp__snapshot_trim(lazy, n);
    assert_int_equal(ulp__snapshot_pages_resident(lazy), (n + 15) / 16);
    ulp_snapshot_close(lazy);
    ulp_snapshot_close(eager);
    tu_done();
}
static uint64_t mtime_ns(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
}

/* Writes `n` bytes at `off` of g_path and sets its mtime back: the stamp still holds. */
static void poke(uint64_t off, const void *b, size_t n)
{
    uint64_t ns = mtime_ns(g_path);
    int fd = open(g_path, O_RDWR);
    assert_int_equal(ulp__journal_pwrite(fd, b, n, off), 0);
    close(fd);
    struct timespec t[2] = {
        {.tv_sec = 0, .tv_nsec = UTIME_OMIT},
        {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)}};
    assert_int_equal(utimensat(AT_FDCWD, g_path, t, 0), 0);
}

/* The file offset of record k (in the first chunk of the records). */
static uint64_t record_offset(size_t k)
{
    uint64_t at = records_offset(g_path);
    int fd = open(g_path, O_RDONLY);
    for (size_t i = 0; i < k; i++) {
        unsigned char b[4];
        assert_int_equal(ulp__journal_pread(fd, b, 4, at), 0);
        at += ulp__le32_get(b);
    }
    close(fd);
    return at;
}

/*
 * A record that fails the checks -- in the first page or a later one --
 * sends the open to the groups; a capture's occurrence changed in the
 * index (still rising) is a name whose occurrences are not contiguous.
 */
static void test_snapshot_pages__damaged(void **state)
{
    (void)state;
    write_mixed("pages-damaged", 200);
    ulp_snapshot *s = open_as("lazy", "4");
    int stamped = s->lazy != NULL;
    ulp_snapshot_close(s);
    if (!stamped) {
        tu_done();
        skip();
    }
    /* "first" (record 0, seq 0) now has occurrence 3: valid, not contiguous. */
    unsigned char occ[8];
    ulp__le64_put(occ, 3);
    poke(record_offset(0) + 16, occ, 8);
    s = open_as("lazy", "4");
    ulp_snapshot *eager = open_as("eager", NULL);
    assert_non_null(s->lazy);
    assert_int_equal(ulp_snapshot_capture(eager, 0)->occurrence, 3);
    check_summary(s, eager);
    const ulp__snapshot_summary *sum = ulp__snapshot_summary_lazy(s);
    assert_int_equal(ulp__snapshot_summary_find(sum, "first")->contiguous, 0);
    assert_int_equal(ulp__snapshot_summary_find(sum, "t.1")->contiguous, 1);
    assert_int_equal(ulp__snapshot_summary_find(sum, "t.0")->positions, -2);
    assert_int_equal(ulp__snapshot_summary_find(sum, "t.1")->positions, 1);
    assert_int_equal(ulp__snapshot_summary_find(sum, "t.2")->positions, -1);
    assert_int_equal(ulp__snapshot_summary_find(sum, "t.3")->positions, 0);
    ulp_snapshot_close(eager);
    ulp_snapshot_close(s);
    /* Each damage: a dtype out of range (record 150: page 37), a seq that
     * does not rise (record 120), an occurrence of t.3 repeated (record
     * 94's 13 -> 12, the one before it; record 87 has 12). */
    static const struct {
        size_t rec, at;
        uint64_t value;
    } bad[] = {{150, 40, 99}, {120, 8, 5}, {94, 16, 12}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint64_t off = record_offset(bad[k].rec) + bad[k].at, was;
        unsigned char b[8], old[8];
        int fd = open(g_path, O_RDONLY);
        assert_int_equal(ulp__journal_pread(fd, old, 8, off), 0);
        close(fd);
        was = ulp__le64_get(old);
        ulp__le64_put(b, bad[k].at == 40 ? (was & ~(uint64_t)0xffffffff) | bad[k].value
                                         : bad[k].value);
        poke(off, b, 8);
        s = open_as("lazy", "4");
        assert_null(s->lazy);
        assert_int_equal(index_usable(s), 0);
        assert_int_equal(ulp_snapshot_capture_count(s), 200); /* through the groups */
        ulp_snapshot_close(s);
        poke(off, old, 8);
    }
    tu_done();
}

/* A deferred open leaves the pass to a thread; confirm installs the pages. */
static void test_snapshot_pages__deferred(void **state)
{
    (void)state;
    write_mixed("pages-deferred", 1500);
    ulp_snapshot *eager = open_as("eager", NULL);
    setenv("ULPPROF_TABLE", "lazy", 1);
    setenv("ULPPROF_TABLE_PAGE", "8", 1);
    setenv("ULPPROF_INDEX", "thread", 1);
    ulp_snapshot *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_snapshot_open_deferred(g_path, &s, &err), ULP_OK);
    int threaded = s->check != NULL;
    assert_int_equal(ulp_snapshot_confirm(&s, &err), ULP_OK);
    unsetenv("ULPPROF_TABLE");
    unsetenv("ULPPROF_TABLE_PAGE");
    unsetenv("ULPPROF_INDEX");
    if (threaded) {
        assert_non_null(s->lazy);
        check_summary(s, eager);
    }
    same_tables(s, eager);
    ulp_snapshot_close(s);
    ulp_snapshot_close(eager);
    tu_done();
}

/*
 * A page trimmed, then the file's mtime set (touch): made again, the same,
 * after every check.  Then a record changed (a capture's header address,
 * which no check sees): not made again from other bytes.
 */
static void test_snapshot_pages__changed(void **state)
{
    (void)state;
    write_mixed("pages-changed", 100);
    ulp_snapshot *eager = open_as("eager", NULL);
    ulp_snapshot *s = open_as("lazy", "4");
    if (s->lazy == NULL) {
        ulp_snapshot_close(s);
        ulp_snapshot_close(eager);
        tu_done();
        skip();
    }
    ulp__snapshot_trim(s, 8);
    struct timespec t[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                            {.tv_sec = 1000000000, .tv_nsec = 1}};
    assert_int_equal(utimensat(AT_FDCWD, g_path, t, 0), 0);
    for (size_t i = 0; i < 8; i++)
        same_capture(ulp_snapshot_capture(s, i), ulp_snapshot_capture(eager, i));
    ulp__snapshot_trim(s, 8);
    unsigned char b[8];
    ulp__le64_put(b, 12345);
    int fd = open(g_path, O_RDWR);
    assert_int_equal(ulp__journal_pwrite(fd, b, 8, record_offset(3) + 24), 0);
    close(fd);
    assert_non_null(ulp_snapshot_capture(s, 8)); /* still made */
    assert_null(ulp_snapshot_capture(s, 0));
    assert_null(ulp_snapshot_capture(s, 3));
    ulp_error err;
    unsigned char x[64];
    assert_int_equal(ulp_snapshot_read(s, 3, 0, 1, x, &err), ULP_EIO);
    assert_int_equal(ulp_snapshot_find(s, "t.1", 0), -1); /* by_name cannot be made */
    ulp_snapshot_close(s);
    ulp_snapshot_close(eager);
    tu_done();
}

/* Readers on other threads while this one makes pages (and trims behind them). */
typedef struct reader {
    pthread_t tid;
    const ulp_snapshot *s, *eager;
    size_t *ready, *floor;
    int done, bad;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    unsigned seed = (unsigned)(uintptr_t)r;
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        size_t hi = __atomic_load_n(r->ready, __ATOMIC_ACQUIRE);
        size_t lo = __atomic_load_n(r->floor, __ATOMIC_ACQUIRE);
        if (hi <= lo)
            continue;
        size_t i = lo + (size_t)rand_r(&seed) % (hi - lo);
        const ulp_capture_info *c = ulp_snapshot_capture(r->s, i);
        const ulp_capture_info *e = ulp_snapshot_capture(r->eager, i);
        unsigned char x[64], y[64];
        uint64_t k = c->elements < 8 ? c->elements : 8;
        r->bad |= c->seq != e->seq || c->elements != e->elements ||
                  ulp__snapshot_offset(r->s, i) != ulp__snapshot_offset(r->eager, i) ||
                  ulp_snapshot_read(r->s, i, 0, k, x, NULL) != ULP_OK ||
                  ulp_snapshot_read(r->eager, i, 0, k, y, NULL) != ULP_OK ||
                  memcmp(x, y, (size_t)k * ulp_dtype_size(c->dtype)) != 0;
    }
    return NULL;
}

static void test_snapshot_pages__threads(void **state)
{
    (void)state;
    write_mixed("pages-threads", 2000);
    ulp_snapshot *eager = open_as("eager", NULL);
    ulp_snapshot *s = open_as("lazy", "8");
    if (s->lazy == NULL) {
        ulp_snapshot_close(s);
        ulp_snapshot_close(eager);
        tu_done();
        skip();
    }
    size_t n = ulp_snapshot_capture_count(s), ready = 0, floor = 0;
    ulp__snapshot_trim(s, n); /* every page made while the readers read */
    reader r[3];
    for (int k = 0; k < 3; k++) {
        r[k] = (reader){.s = s, .eager = eager, .ready = &ready, .floor = &floor};
        assert_int_equal(pthread_create(&r[k].tid, NULL, reader_main, &r[k]), 0);
    }
    /* Captures [floor, ready) exist; this thread makes the next page, and
     * trims below floor only once no reader can be there any more. */
    for (size_t i = 0; i < n; i += 8) {
        assert_non_null(ulp_snapshot_capture(s, i));
        __atomic_store_n(&ready, i + 8 < n ? i + 8 : n, __ATOMIC_RELEASE);
        if (i % 400 == 0 && i > 0) {
            __atomic_store_n(&floor, i - 200, __ATOMIC_RELEASE);
            for (int k = 0; k < 3; k++) { /* a reader's pick is done by its next turn */
                __atomic_store_n(&r[k].done, 1, __ATOMIC_RELEASE);
                pthread_join(r[k].tid, NULL);
                r[k].done = 0;
            }
            ulp__snapshot_trim(s, i - 200);
            for (int k = 0; k < 3; k++)
                assert_int_equal(pthread_create(&r[k].tid, NULL, reader_main, &r[k]), 0);
        }
    }
    for (int k = 0; k < 3; k++) {
        __atomic_store_n(&r[k].done, 1, __ATOMIC_RELEASE);
        pthread_join(r[k].tid, NULL);
        assert_int_equal(r[k].bad, 0);
    }
    ulp_snapshot_close(s);
    ulp_snapshot_close(eager);
    tu_done();
}

/*
 * A streamed diff whose A cannot make a page again (its records changed
 * since the open, here behind a reset mtime) fails with a message naming
 * A, never a crash: ulp_snapshot_capture() gives NULL there.
 */
static void test_snapshot_pages__diff_lost(void **state)
{
    (void)state;
    snprintf(g_path, sizeof g_path, "%s/p.h5", tu_tmpdir("pages-lost"));
    ulp__writer *w = NULL;
    ulp_error err;
    assert_int_equal(ulp__writer_create(g_path, "lbl", "test", 1, &w, &err), ULP_OK);
    char name[16];
    int64_t two[] = {2};
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "n.%d", i % 5);
        ulp__desc d = {.name = name,
                       .dtype = ULP_DTYPE_F32,
                       .ndim = 1,
                       .shape = two,
                       .layer = ULP_LAYER_NONE,
                       .step = ULP_STEP_NONE};
        tu_writer_add(w, &d);
    }
    assert_int_equal(ulp__writer_close(w, &err), ULP_OK);
    ulp_snapshot *b = open_as("eager", NULL);
    setenv("ULPPROF_TABLE", "lazy", 1);
    setenv("ULPPROF_TABLE_PAGE", "4", 1);
    ulp_snapshot *a = NULL;
    assert_int_equal(ulp_snapshot_open_stream(g_path, &a, &err), ULP_OK);
    assert_int_equal(ulp_snapshot_confirm(&a, &err), ULP_OK);
    unsetenv("ULPPROF_TABLE");
    unsetenv("ULPPROF_TABLE_PAGE");
    if (a->lazy == NULL) {
        ulp_snapshot_close(a);
        ulp_snapshot_close(b);
        tu_done();
        skip();
    }
    ulp__snapshot_trim(a, 40);
    /* Another mtime than the stamp: pages made again are checked again. */
    struct timespec t[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                            {.tv_sec = 1000000000, .tv_nsec = 1}};
    assert_int_equal(utimensat(AT_FDCWD, g_path, t, 0), 0);
    unsigned char x[8];
    ulp__le64_put(x, 12345);
    poke(record_offset(3) + 24, x, 8);
    ulp_diff_result *r = NULL;
    assert_int_equal(ulp_diff_stream(a, b, NULL, tu_diff_sink, NULL, &r, &err), ULP_EIO);
    assert_non_null(strstr(err.msg, "cannot be described again"));
    assert_non_null(strstr(err.msg, g_path));
    ulp_diff_result_free(r);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    tu_done();
}

/* Which files get pages: ULPPROF_TABLE, else those opened for a stream
 * (ulp_snapshot_open_stream) of 12,288 captures or more. */
static void test_snapshot_pages__wanted(void **state)
{
    (void)state;
    ulp_snapshot plain, stream;
    memset(&plain, 0, sizeof plain);
    memset(&stream, 0, sizeof stream);
    stream.stream = 1;
    unsetenv("ULPPROF_TABLE");
    assert_int_equal(ulp__lazy_wanted(&stream, 12287), 0);
    assert_int_equal(ulp__lazy_wanted(&stream, 12288), 1);
    assert_int_equal(ulp__lazy_wanted(&plain, 1000000), 0);
    setenv("ULPPROF_TABLE", "eager", 1);
    assert_int_equal(ulp__lazy_wanted(&stream, 1000000), 0);
    setenv("ULPPROF_TABLE", "lazy", 1);
    assert_int_equal(ulp__lazy_wanted(&plain, 1), 1);
    assert_int_equal(ulp__lazy_wanted(&plain, 0), 0);
    unsetenv("ULPPROF_TABLE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_pages__same_as_eager),
        cmocka_unit_test(test_snapshot_pages__trim),
        cmocka_unit_test(test_snapshot_pages__damaged),
        cmocka_unit_test(test_snapshot_pages__deferred),
        cmocka_unit_test(test_snapshot_pages__changed),
        cmocka_unit_test(test_snapshot_pages__threads),
        cmocka_unit_test(test_snapshot_pages__wanted),
        cmocka_unit_test(test_snapshot_pages__diff_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
