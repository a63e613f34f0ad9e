/*
 * format/journal.c: the capture journal's codec, checked against the layout
 * of format/journal.h written out here byte by byte (little-endian fields
 * put and read with shifts of our own) and against a table-driven CRC-32
 * that shares no code with the bitwise one under test, itself anchored to
 * the published check values of CRC-32/ISO-HDLC (zlib's crc32()).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/journal.h"

/* ---- The reference ------------------------------------------------------------------ */

/* CRC-32, reflected, polynomial 0x04C11DB7 (0xEDB88320 reflected), by table. */
static uint32_t ref_crc32(const void *p, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    while (n-- > 0)
        c = table[(c ^ *b++) & 0xFFu] ^ (c >> 8);
    return ~c;
}

static uint64_t ref_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void ref_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* The record length FORMAT.md gives: 40 bytes and the name, up to a multiple of 8. */
static size_t ref_record_len(size_t name_len)
{
    size_t raw = 40 + name_len;
    return raw + (8 - raw % 8) % 8;
}

/* Rewrites the CRC of a record whose bytes 4..len-1 were edited on purpose. */
static void ref_reseal(unsigned char *rec, size_t len)
{
    ref_put_le(rec, ref_crc32(rec + 4, len - 4), 4);
}

/* ---- CRC-32 ------------------------------------------------------------------------- */

static void test_journal__crc32_check_values(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        uint32_t crc;
    } cases[] = {
        {"123456789", 0xCBF43926u}, /* the catalogue's check value */
        {"", 0x00000000u},
        {"a", 0xE8B7BE43u},
        {"abc", 0x352441C2u},
        {"message digest", 0x20159D7Fu},
        {"abcdefghijklmnopqrstuvwxyz", 0x4C2750BDu},
        {"The quick brown fox jumps over the lazy dog", 0x414FA339u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].s);
        assert_int_equal(ulp__crc32(cases[i].s, n), cases[i].crc);
        assert_int_equal(ref_crc32(cases[i].s, n), cases[i].crc);
    }
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    assert_int_equal(ulp__crc32(zeros, sizeof zeros), 0x190A55ADu);
    assert_int_equal(ulp__crc32(ones, sizeof ones), 0xFF6CAB0Bu);
    /* n = 0 must not read the pointer. */
    assert_int_equal(ulp__crc32(NULL, 0), 0u);
}

static void test_journal__crc32_vs_table(void **state)
{
    (void)state;
    unsigned char buf[1100];
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += n < 80 ? 1 : 37)
            assert_int_equal(ulp__crc32(buf + off, n), ref_crc32(buf + off, n));
}

/* ---- Block header ------------------------------------------------------------------- */

static const uint64_t HDR_SELF[] = {0, 8, 4096, 33568, 0x0123456789ABCDEFu, UINT64_MAX - 31};
static const uint64_t HDR_BYTES[] = {72, 73, 4096, 8192, (uint64_t)1 << 20, UINT64_MAX};

static void test_journal__header_layout_and_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof HDR_SELF / sizeof HDR_SELF[0]; i++) {
        for (size_t j = 0; j < sizeof HDR_BYTES / sizeof HDR_BYTES[0]; j++) {
            unsigned char h[ULP__JOURNAL_HEADER_BYTES];
            memset(h, 0xA5, sizeof h);
            ulp__journal_header_encode(h, HDR_SELF[i], HDR_BYTES[j], 1);
            assert_memory_equal(h, "ULPJRNL1", 8);
            assert_true(ref_le(h + 8, 8) == HDR_SELF[i]);
            assert_true(ref_le(h + 16, 8) == HDR_BYTES[j]);
            assert_int_equal(ref_le(h + 24, 4), ref_crc32(h, 24));
            assert_int_equal(ref_le(h + 28, 4), 0); /* the closed mark starts zero */

            uint64_t got = 0;
            assert_int_equal(ulp__journal_header_decode(h, HDR_SELF[i], &got), 1);
            assert_true(got == HDR_BYTES[j]);
            /* The closed mark is outside the CRC: the writer sets it last. */
            memcpy(h + 28, "CLSD", 4);
            got = 0;
            assert_int_equal(ulp__journal_header_decode(h, HDR_SELF[i], &got), 1);
            assert_true(got == HDR_BYTES[j]);
            memset(h + 28, 0xFF, 4);
            assert_int_equal(ulp__journal_header_decode(h, HDR_SELF[i], &got), 1);
        }
    }
}

static void test_journal__header_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof HDR_SELF / sizeof HDR_SELF[0]; i++) {
        uint64_t self = HDR_SELF[i], got;
        unsigned char h[ULP__JOURNAL_HEADER_BYTES];
        ulp__journal_header_encode(h, self, 4096, 1);
        /* A copy of a header found at another offset is not that block's. */
        const uint64_t others[] = {self + 1, self - 1,  self + 8, self - 8, self ^ (1ull << 40),
                                   0,        UINT64_MAX};
        for (size_t k = 0; k < sizeof others / sizeof others[0]; k++)
            if (others[k] != self)
                assert_int_equal(ulp__journal_header_decode(h, others[k], &got), 0);
        /* Every single bit of bytes 0..27 matters. */
        for (int bit = 0; bit < 28 * 8; bit++) {
            unsigned char c[sizeof h];
            memcpy(c, h, sizeof h);
            c[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            got = 0x5555;
            assert_int_equal(ulp__journal_header_decode(c, self, &got), 0);
        }
    }
    /* Below the minimum: a header and one record without a name (32 + 40). */
    const uint64_t small[] = {0, 1, 32, 40, 71};
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        unsigned char h[ULP__JOURNAL_HEADER_BYTES];
        uint64_t got;
        ulp__journal_header_encode(h, 4096, small[k], 1);
        assert_int_equal(ref_le(h + 16, 8), small[k]);
        assert_int_equal(ulp__journal_header_decode(h, 4096, &got), 0);
    }
    /* Not the magic, though everything else (CRC included) is consistent. */
    unsigned char h[ULP__JOURNAL_HEADER_BYTES] = {0};
    uint64_t got;
    memcpy(h, "ULPJRNL2", 8);
    ref_put_le(h + 8, 4096, 8);
    ref_put_le(h + 16, 4096, 8);
    ref_put_le(h + 24, ref_crc32(h, 24), 4);
    assert_int_equal(ulp__journal_header_decode(h, 4096, &got), 0);
    memcpy(h, "ULPJRNL1", 8);
    ref_put_le(h + 24, ref_crc32(h, 24), 4);
    assert_int_equal(ulp__journal_header_decode(h, 4096, &got), 1);
    assert_int_equal(got, 4096);
}

/* A later block has its own magic, so a search for the first block cannot take it. */
static void test_journal__header_later_block(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof HDR_SELF / sizeof HDR_SELF[0]; i++) {
        unsigned char h[ULP__JOURNAL_HEADER_BYTES], f[ULP__JOURNAL_HEADER_BYTES];
        uint64_t got = 0;
        ulp__journal_header_encode(h, HDR_SELF[i], 8192, 0);
        ulp__journal_header_encode(f, HDR_SELF[i], 8192, 1);
        assert_memory_equal(h, "ULPJRNL+", 8);
        assert_memory_equal(h + 8, f + 8, 16); /* only the magic (and its CRC) differ */
        assert_int_equal(ref_le(h + 24, 4), ref_crc32(h, 24));
        assert_int_equal(ulp__journal_header_decode(h, HDR_SELF[i], &got),
                         ULP__JOURNAL_LATER_BLOCK);
        assert_true(got == 8192);
        assert_int_equal(ulp__journal_header_decode(f, HDR_SELF[i], &got),
                         ULP__JOURNAL_FIRST_BLOCK);
        /* The first block's magic with the later block's CRC: refused. */
        memcpy(h, "ULPJRNL1", 8);
        assert_int_equal(ulp__journal_header_decode(h, HDR_SELF[i], &got), 0);
    }
}

/* ---- Records ------------------------------------------------------------------------ */

#define MAX_NAME 80
#define GUARD    16

/* Encodes a record with a name of `name_len` bytes into buf (filled with 0xAA first). */
static size_t encode_one(unsigned char *buf, size_t cap, size_t name_len, uint32_t kind,
                         ulp__journal_record *r, char *name)
{
    for (size_t i = 0; i < name_len; i++)
        name[i] = (char)(i == 0 ? 0xC3 : i == 1 ? 0xA9 : 'a' + (int)((i * 7 + name_len) % 26));
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->seq = (int64_t)(0x0102030405060708u + name_len);
    r->occurrence = kind == ULP__JOURNAL_NEXT ? (int64_t)8192 : (int64_t)(name_len * 3);
    r->addr = 0xF0E0D0C0B0A09080u - name_len;
    r->name = name;
    r->name_len = name_len;
    memset(buf, 0xAA, cap);
    return ulp__journal_record_encode(buf, r);
}

static void test_journal__record_round_trip(void **state)
{
    (void)state;
    unsigned char buf[ULP__JOURNAL_RECORD_FIXED + MAX_NAME + 8 + GUARD];
    char name[MAX_NAME];
    for (size_t nl = 0; nl <= MAX_NAME; nl++) {
        for (uint32_t kind = ULP__JOURNAL_CAPTURE; kind <= ULP__JOURNAL_NEXT; kind++) {
            if (kind == ULP__JOURNAL_NEXT && nl > 0)
                break;
            ulp__journal_record r;
            size_t len = encode_one(buf, sizeof buf, nl, kind, &r, name);
            size_t want = ref_record_len(nl);
            assert_int_equal(want % 8, 0);
            assert_true(want >= 40 + nl && want < 48 + nl);
            assert_int_equal(len, want);
            assert_int_equal(ulp__journal_record_size(nl), want);

            /* The layout of journal.h, field by field. */
            assert_int_equal(ref_le(buf + 0, 4), ref_crc32(buf + 4, len - 4));
            assert_int_equal(ref_le(buf + 4, 4), len);
            assert_int_equal(ref_le(buf + 8, 4), kind);
            assert_int_equal(ref_le(buf + 12, 4), nl);
            assert_true(ref_le(buf + 16, 8) == (uint64_t)r.seq);
            assert_true(ref_le(buf + 24, 8) == (uint64_t)r.occurrence);
            assert_true(ref_le(buf + 32, 8) == r.addr);
            assert_memory_equal(buf + 40, name, nl);
            for (size_t i = 40 + nl; i < len; i++)
                assert_int_equal(buf[i], 0); /* padding */
            for (size_t i = len; i < sizeof buf; i++)
                assert_int_equal(buf[i], 0xAA); /* nothing written past it */

            /* Decoded with exactly its bytes, and with more behind it. */
            for (size_t extra = 0; extra <= GUARD; extra += GUARD) {
                ulp__journal_record d;
                memset(&d, 0x33, sizeof d);
                assert_int_equal(ulp__journal_record_decode(buf, len + extra, &d), len);
                assert_int_equal(d.kind, kind);
                assert_true(d.seq == r.seq);
                assert_true(d.occurrence == r.occurrence);
                assert_true(d.addr == r.addr);
                assert_int_equal(d.name_len, nl);
                assert_ptr_equal(d.name, (const char *)buf + 40);
                assert_memory_equal(d.name, name, nl);
            }
            /* One byte short of the record (exactly sized, as above). */
            ulp__journal_record d;
            unsigned char *tight = malloc(len - 1);
            assert_non_null(tight);
            memcpy(tight, buf, len - 1);
            assert_int_equal(ulp__journal_record_decode(tight, len - 1, &d), 0);
            free(tight);
            assert_int_equal(ulp__journal_record_decode(buf, 0, &d), 0);
        }
    }
    /* Negative seq and occurrence travel as two's complement. */
    ulp__journal_record r = {.kind = ULP__JOURNAL_CAPTURE,
                             .seq = -1,
                             .occurrence = INT64_MIN,
                             .addr = 0,
                             .name = "x",
                             .name_len = 1};
    assert_int_equal(ulp__journal_record_encode(buf, &r), 48);
    ulp__journal_record d;
    assert_int_equal(ulp__journal_record_decode(buf, 48, &d), 48);
    assert_true(d.seq == -1 && d.occurrence == INT64_MIN && d.addr == 0);
}

static void test_journal__record_bit_flips(void **state)
{
    (void)state;
    unsigned char buf[ULP__JOURNAL_RECORD_FIXED + MAX_NAME + 8 + GUARD];
    unsigned char c[sizeof buf];
    char name[MAX_NAME];
    size_t flips = 0;
    for (size_t nl = 0; nl <= MAX_NAME; nl++) {
        ulp__journal_record r, d;
        size_t len = encode_one(buf, sizeof buf, nl, ULP__JOURNAL_CAPTURE, &r, name);
        assert_int_equal(len, ref_record_len(nl));
        /* Behind the record: what a torn write leaves, i.e. anything. */
        for (size_t i = len; i < sizeof buf; i++)
            buf[i] = 0;
        for (size_t bit = 0; bit < len * 8; bit++) {
            memcpy(c, buf, sizeof c);
            c[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            /* With the block's end right behind the record, and further away. */
            assert_int_equal(ulp__journal_record_decode(c, len, &d), 0);
            assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
            flips++;
        }
    }
    /* sum over nl = 0..80 of 8 * ref_record_len(nl) */
    size_t want = 0;
    for (size_t nl = 0; nl <= MAX_NAME; nl++)
        want += 8 * ref_record_len(nl);
    assert_int_equal(flips, want);
}

/* The length check `len % 8 != 0` is implied by `record_size(name_len) != len`
 * (every size is a multiple of 8); the case below keeps the property tested
 * whichever check states it. */
static void test_journal__record_refused(void **state)
{
    (void)state;
    unsigned char buf[256], c[256];
    char name[MAX_NAME];
    ulp__journal_record r, d;

    /* Unwritten bytes: a zero length ends the journal. */
    memset(c, 0, sizeof c);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    /* A zero length in front of an otherwise valid record (CRC over nothing). */
    size_t len = encode_one(buf, sizeof buf, 10, ULP__JOURNAL_CAPTURE, &r, name);
    assert_int_equal(len, 56);
    memcpy(c, buf, sizeof c);
    ref_put_le(c + 4, 0, 4);
    ref_put_le(c, ref_crc32(c + 4, 0), 4);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    /* ... or a length below the fixed part. */
    for (uint32_t bad = 8; bad < 40; bad += 8) {
        memcpy(c, buf, sizeof c);
        ref_put_le(c + 4, bad, 4);
        ref_put_le(c + 12, 0, 4);
        ref_reseal(c, bad);
        assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    }

    /* Fewer than the fixed 40 bytes available, in a buffer of exactly that
     * size: a sanitizer build sees a read past it. */
    len = encode_one(buf, sizeof buf, 0, ULP__JOURNAL_CAPTURE, &r, name);
    assert_int_equal(len, 40);
    assert_int_equal(ulp__journal_record_decode(buf, 40, &d), 40);
    for (size_t avail = 0; avail < 40; avail++) {
        unsigned char *tight = malloc(avail > 0 ? avail : 1);
        assert_non_null(tight);
        memcpy(tight, buf, avail);
        assert_int_equal(ulp__journal_record_decode(tight, avail, &d), 0);
        free(tight);
    }

    /* A length that is not a multiple of 8, resealed so only that is wrong:
     * name lengths that would fit it exactly, CRC over exactly that many bytes. */
    for (uint32_t bad = 41; bad < 100; bad++) {
        if (bad % 8 == 0)
            continue;
        len = encode_one(buf, sizeof buf, bad - 40, ULP__JOURNAL_CAPTURE, &r, name);
        memcpy(c, buf, sizeof c);
        ref_put_le(c + 4, bad, 4);
        ref_reseal(c, bad);
        assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    }

    /* name_len inconsistent with the length (CRC resealed). */
    len = encode_one(buf, sizeof buf, 10, ULP__JOURNAL_CAPTURE, &r, name);
    const uint32_t wrong[] = {0, 1, 8, 17, 18, 24, 100, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t k = 0; k < sizeof wrong / sizeof wrong[0]; k++) {
        assert_true(ref_record_len(wrong[k]) != len);
        memcpy(c, buf, sizeof c);
        ref_put_le(c + 12, wrong[k], 4);
        ref_reseal(c, len);
        assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    }
    /* The same edit on the length instead: 64 bytes for a 10-byte name. */
    memcpy(c, buf, sizeof c);
    memset(c + len, 0, 8);
    ref_put_le(c + 4, 64, 4);
    ref_reseal(c, 64);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
    /* The controls: resealing the unedited record is accepted, and a name
     * length in the same 8-byte bucket is consistent with the length. */
    memcpy(c, buf, sizeof c);
    ref_reseal(c, len);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), len);
    ref_put_le(c + 12, 16, 4);
    ref_reseal(c, len);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), len);
    assert_int_equal(d.name_len, 16);

    /* A length larger than the block's remaining bytes. */
    len = encode_one(buf, sizeof buf, 10, ULP__JOURNAL_CAPTURE, &r, name);
    memcpy(c, buf, sizeof c);
    ref_put_le(c + 4, 0xFFFFFFF8u, 4);
    assert_int_equal(ulp__journal_record_decode(c, sizeof c, &d), 0);
}

static void test_journal__record_size_overflow(void **state)
{
    (void)state;
    /* The length field is a u32: the largest record is 0xFFFFFFF8 bytes. */
    assert_int_equal(ulp__journal_record_size(UINT32_MAX - 47), 0xFFFFFFF8u);
    assert_int_equal(ulp__journal_record_size(UINT32_MAX - 46), 0);
    assert_int_equal(ulp__journal_record_size(UINT32_MAX - 40), 0);
    assert_int_equal(ulp__journal_record_size(UINT32_MAX), 0);
    assert_int_equal(ulp__journal_record_size(SIZE_MAX), 0);
    assert_int_equal(ulp__journal_record_size(SIZE_MAX - 39), 0);
    assert_int_equal(ulp__journal_record_size(SIZE_MAX - 46), 0);
    /* Encode refuses such a name before touching `out` or the name. */
    unsigned char out[64];
    memset(out, 0x5A, sizeof out);
    ulp__journal_record r = {.kind = ULP__JOURNAL_CAPTURE, .name = NULL, .name_len = SIZE_MAX};
    assert_int_equal(ulp__journal_record_encode(out, &r), 0);
    for (size_t i = 0; i < sizeof out; i++)
        assert_int_equal(out[i], 0x5A);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal__crc32_check_values),
        cmocka_unit_test(test_journal__crc32_vs_table),
        cmocka_unit_test(test_journal__header_layout_and_round_trip),
        cmocka_unit_test(test_journal__header_refused),
        cmocka_unit_test(test_journal__header_later_block),
        cmocka_unit_test(test_journal__record_round_trip),
        cmocka_unit_test(test_journal__record_bit_flips),
        cmocka_unit_test(test_journal__record_refused),
        cmocka_unit_test(test_journal__record_size_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
