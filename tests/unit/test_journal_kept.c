/*
 * format/journal_kept.c: the kept-capture record of the capture journal
 * (kind 3), checked against the layout of format/journal_kept.h written out
 * here byte by byte (LEB128 and zigzag of our own), round trips of every
 * field, payloads that no writer wrote (refused, never read past their
 * end), and the record around it: a torn or CRC-bad kept record is no
 * record, as any other kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/journal.h"
#include "format/journal_kept.h"

/* ---- The reference ------------------------------------------------------------------ */

static size_t ref_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        unsigned char b = v & 0x7f;
        v >>= 7;
        p[n++] = (unsigned char)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

static size_t ref_zigzag(unsigned char *p, int64_t v)
{
    return ref_varint(p, v < 0 ? ((uint64_t)(-(v + 1)) << 1) | 1 : (uint64_t)v << 1);
}

/* A fed-ids record: i64 [3] at positions 5, 6, 9, requests 0, 0, 2, step -2, defining "ids". */
static const int64_t POS[3] = {5, 6, 9}, REQ[3] = {0, 0, 2};
static const int64_t DATA[3] = {11, -1, 1 << 20};
static const char *const INPUTS[2] = {"ids", "x"};

static ulp__journal_kept sample(void)
{
    ulp__journal_kept k;
    memset(&k, 0, sizeof k);
    k.id = 3;
    k.flags = ULP__JKEPT_DEFINES | ULP__JKEPT_STEP | ULP__JKEPT_POSITIONS | ULP__JKEPT_REQUESTS;
    k.name = "ids";
    k.name_len = 3;
    k.dtype = ULP_DTYPE_I64;
    k.role = ULP_ROLE_INPUT;
    k.has_layer = 1;
    k.layer = -7;
    k.n_inputs = 2;
    k.ndim = 1;
    k.row_rank = 1;
    k.shape[0] = 3;
    k.step = -2;
    k.rows = 3;
    k.data = (const unsigned char *)DATA;
    k.data_bytes = sizeof DATA;
    return k;
}

static size_t ref_sample(unsigned char *p)
{
    size_t n = 0;
    n += ref_varint(p + n, 3);
    p[n++] = 1 | 2 | 4 | 8;
    n += ref_varint(p + n, 3);
    memcpy(p + n, "ids", 3);
    n += 3;
    p[n++] = ULP_DTYPE_I64;
    p[n++] = ULP_ROLE_INPUT;
    p[n++] = 1;
    n += ref_zigzag(p + n, -7);
    n += ref_varint(p + n, 2);
    n += ref_varint(p + n, 3);
    memcpy(p + n, "ids", 3);
    n += 3;
    n += ref_varint(p + n, 1);
    p[n++] = 'x';
    p[n++] = 1; /* ndim */
    p[n++] = 1; /* row_rank */
    n += ref_varint(p + n, 3);
    n += ref_zigzag(p + n, -2);
    n += ref_zigzag(p + n, 5); /* positions: 5, then 6 - 5 - 1, 9 - 6 - 1 */
    n += ref_zigzag(p + n, 0);
    n += ref_zigzag(p + n, 2);
    n += ref_zigzag(p + n, 0); /* requests: 0, then 0 - 0, 2 - 0 */
    n += ref_zigzag(p + n, 0);
    n += ref_zigzag(p + n, 2);
    memcpy(p + n, DATA, sizeof DATA);
    return n + sizeof DATA;
}

/* ---- Tests -------------------------------------------------------------------------- */

static void test_journal_kept__layout(void **state)
{
    (void)state;
    ulp__journal_kept k = sample();
    size_t bound = ulp__journal_kept_bound(&k, INPUTS);
    unsigned char *out = malloc(bound), want[256];
    assert_non_null(out);
    size_t n = ulp__journal_kept_encode(out, &k, POS, REQ, INPUTS);
    size_t m = ref_sample(want);
    assert_true(n <= bound);
    assert_int_equal(n, m);
    assert_memory_equal(out, want, m);
    free(out);
}

static void test_journal_kept__round_trip(void **state)
{
    (void)state;
    ulp__journal_kept k = sample();
    k.flags |= ULP__JKEPT_DEVICE;
    k.has_gemms = 1;
    k.gemms[0] = 4;
    k.gemms[1] = INT64_MAX;
    k.device_ptr = UINT64_MAX;
    k.stream = 7;
    unsigned char *out = malloc(ulp__journal_kept_bound(&k, INPUTS));
    assert_non_null(out);
    size_t n = ulp__journal_kept_encode(out, &k, POS, REQ, INPUTS);
    ulp__journal_kept d;
    assert_int_equal(ulp__journal_kept_decode(out, n, &d), 0);
    assert_true(d.id == 3 && d.flags == k.flags && d.name_len == 3 &&
                memcmp(d.name, "ids", 3) == 0 && d.dtype == ULP_DTYPE_I64 &&
                d.role == ULP_ROLE_INPUT && d.has_layer == 1 && d.layer == -7 && d.n_inputs == 2 &&
                d.ndim == 1 && d.row_rank == 1 && d.shape[0] == 3 && d.step == -2 && d.rows == 3 &&
                d.has_gemms == 1 && d.has_kernels == 0 && d.gemms[0] == 4 &&
                d.gemms[1] == INT64_MAX && d.device_ptr == UINT64_MAX && d.stream == 7 &&
                d.data_bytes == sizeof DATA && memcmp(d.data, DATA, sizeof DATA) == 0);
    int64_t pos[3], req[3];
    ulp__journal_kept_rows(&d, pos, req);
    assert_memory_equal(pos, POS, sizeof pos);
    assert_memory_equal(req, REQ, sizeof req);
    const unsigned char *cur = d.inputs, *end = d.inputs + d.inputs_bytes;
    const char *s;
    size_t len;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ulp__journal_kept_input(&cur, end, &s, &len), 0);
        assert_int_equal(len, strlen(INPUTS[i]));
        assert_memory_equal(s, INPUTS[i], len);
    }
    assert_int_equal(ulp__journal_kept_input(&cur, end, &s, &len), -1);
    /* A later record of the name: no definition, a scalar without positions. */
    ulp__journal_kept l;
    memset(&l, 0, sizeof l);
    l.id = 3;
    double v = 2.5;
    l.data = (const unsigned char *)&v;
    l.data_bytes = sizeof v;
    l.rows = 1;
    n = ulp__journal_kept_encode(out, &l, NULL, NULL, NULL);
    assert_int_equal(n, 1 + 1 + 2 + sizeof v);
    assert_int_equal(ulp__journal_kept_decode(out, n, &d), 0);
    assert_true(d.flags == 0 && d.ndim == 0 && d.rows == 1 && d.pos_code == NULL &&
                d.data_bytes == sizeof v && memcmp(d.data, &v, sizeof v) == 0);
    free(out);
}

/* Every cut of the sample decodes within its bytes: refused, or with less data. */
static void test_journal_kept__cut(void **state)
{
    (void)state;
    unsigned char want[256];
    size_t m = ref_sample(want);
    for (size_t cut = 0; cut < m; cut++) {
        unsigned char *p = malloc(cut ? cut : 1); /* exactly sized: ASan sees an over-read */
        assert_non_null(p);
        memcpy(p, want, cut);
        ulp__journal_kept d;
        int rc = ulp__journal_kept_decode(p, cut, &d);
        assert_true(rc == -1 || (d.data_bytes < sizeof DATA && d.data + d.data_bytes == p + cut));
        free(p);
    }
}

static void test_journal_kept__refused(void **state)
{
    (void)state;
    ulp__journal_kept d;
    /* Flags no writer sets; a rank past ULP_MAX_RANK; row axes past the rank. */
    static const unsigned char flags[] = {0, 32, 0, 0};
    static const unsigned char rank[] = {0, 0, ULP_MAX_RANK + 1, 0};
    static const unsigned char rows[] = {0, 0, 1, 2, 1};
    assert_int_equal(ulp__journal_kept_decode(flags, sizeof flags, &d), -1);
    assert_int_equal(ulp__journal_kept_decode(rank, sizeof rank, &d), -1);
    assert_int_equal(ulp__journal_kept_decode(rows, sizeof rows, &d), -1);
    /* Requests without positions. */
    static const unsigned char req[] = {0, 8, 0, 0};
    assert_int_equal(ulp__journal_kept_decode(req, sizeof req, &d), -1);
    /* A varint of 11 bytes, and one with bits past 64. */
    unsigned char longv[16];
    memset(longv, 0xff, 10);
    longv[10] = 0;
    assert_int_equal(ulp__journal_kept_decode(longv, 11, &d), -1);
    memset(longv, 0xff, 9);
    longv[9] = 0x02;
    assert_int_equal(ulp__journal_kept_decode(longv, 10, &d), -1);
    /* An absurd row count (2^40 rows of 12 bytes): never sizes anything. */
    unsigned char big[32];
    size_t n = 0;
    big[n++] = 0;
    big[n++] = ULP__JKEPT_POSITIONS;
    big[n++] = 1;
    big[n++] = 1;
    n += ref_varint(big + n, (uint64_t)1 << 40);
    big[n++] = 0;
    assert_int_equal(ulp__journal_kept_decode(big, n, &d), -1);
    /* A definition whose name runs past the payload, or of an unknown dtype or role. */
    static const unsigned char name[] = {0, 1, 9, 'a', 'b'};
    assert_int_equal(ulp__journal_kept_decode(name, sizeof name, &d), -1);
    static const unsigned char dtype[] = {0, 1, 1, 'a', ULP_DTYPE_COUNT, 0, 0, 0, 0, 0};
    assert_int_equal(ulp__journal_kept_decode(dtype, sizeof dtype, &d), -1);
    static const unsigned char role[] = {0, 1, 1, 'a', 0, ULP_ROLE_COUNT, 0, 0, 0, 0};
    assert_int_equal(ulp__journal_kept_decode(role, sizeof role, &d), -1);
    /* An input count past the bytes left. */
    static const unsigned char ins[] = {0, 1, 1, 'a', 0, 0, 0, 5, 1, 'x', 0, 0};
    assert_int_equal(ulp__journal_kept_decode(ins, sizeof ins, &d), -1);
}

/* Inside its journal record: kind 3, the payload as the name; a torn or flipped record is none. */
static void test_journal_kept__record(void **state)
{
    (void)state;
    unsigned char pay[256], rec[512];
    size_t m = ref_sample(pay);
    ulp__journal_record r = {.kind = ULP__JOURNAL_KEPT,
                             .seq = 41,
                             .occurrence = 7,
                             .addr = (uint64_t)(int64_t)-5,
                             .name = (const char *)pay,
                             .name_len = m};
    size_t len = ulp__journal_record_encode(rec, &r);
    assert_int_equal(len, (40 + m + 7) / 8 * 8);
    ulp__journal_record d;
    assert_int_equal(ulp__journal_record_decode(rec, len, &d), len);
    assert_true(d.kind == 3 && d.seq == 41 && d.occurrence == 7 && (int64_t)d.addr == -5 &&
                d.name_len == m && memcmp(d.name, pay, m) == 0);
    ulp__journal_kept k;
    assert_int_equal(ulp__journal_kept_decode((const unsigned char *)d.name, d.name_len, &k), 0);
    /* Torn: the record cut anywhere (what a kill inside its write leaves). */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(ulp__journal_record_decode(rec, cut, &d), 0);
    /* CRC-bad: every single bit flipped. */
    for (size_t bit = 0; bit < len * 8; bit++) {
        unsigned char c[512];
        memcpy(c, rec, len);
        c[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        size_t got = ulp__journal_record_decode(c, len, &d);
        assert_int_equal(got, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_kept__layout),
        cmocka_unit_test(test_journal_kept__round_trip),
        cmocka_unit_test(test_journal_kept__cut),
        cmocka_unit_test(test_journal_kept__refused),
        cmocka_unit_test(test_journal_kept__record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
