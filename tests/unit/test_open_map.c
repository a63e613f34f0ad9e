/*
 * common/open_map: the codec against the layout FORMAT.md gives, written
 * out here byte by byte; a map read back is the map written; every cut,
 * every flipped byte of the body (the CRC) and a body whose counts or
 * lengths lie are refused, without reading past the body (run under ASan
 * in CI).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/le.h"
#include "format/journal.h"
#include "format/open_map.h"

static const ulp__map_kv RUN[] = {{"tp", "4"}, {"engine", "vLLM \xc3\xa9t\xc3\xa9"}, {"", ""}};
static const ulp__map_kv ENV[] = {{"hostname", "node-7"}};
static const ulp__index_mem RUNS[] = {{4096, 65536, NULL}, {1 << 20, 1234, NULL}};

static ulp__open_map sample(void)
{
    ulp__open_map m = {.flags = 0,
                       .journal = 33568,
                       .format_version = 1,
                       .created_unix_ns = 1796122262483302500,
                       .format = "ulpprof-snapshot",
                       .label = "run A",
                       .writer = "capture_loop",
                       .run = RUN,
                       .env = ENV,
                       .nrun = 3,
                       .nenv = 1,
                       .runs = RUNS,
                       .nruns = 2};
    return m;
}

/* The body as FORMAT.md lays it out, built here without the codec. */
static size_t reference(const ulp__open_map *m, unsigned char *out)
{
    unsigned char *p = out;
    ulp__le32_put(p, 1);
    ulp__le32_put(p + 4, m->flags);
    ulp__le64_put(p + 8, m->journal);
    ulp__le64_put(p + 16, (uint64_t)m->format_version);
    ulp__le64_put(p + 24, (uint64_t)m->created_unix_ns);
    ulp__le32_put(p + 32, m->nrun);
    ulp__le32_put(p + 36, m->nenv);
    ulp__le64_put(p + 40, m->nruns);
    p += 48;
    for (uint64_t i = 0; i < m->nruns; i++, p += 16) {
        ulp__le64_put(p, m->runs[i].off);
        ulp__le64_put(p + 8, m->runs[i].len);
    }
    const char *strs[3 + 2 * 3 + 2 * 1];
    size_t n = 0;
    strs[n++] = m->format;
    strs[n++] = m->label;
    strs[n++] = m->writer;
    for (uint32_t i = 0; i < m->nrun; i++) {
        strs[n++] = m->run[i].key;
        strs[n++] = m->run[i].value;
    }
    for (uint32_t i = 0; i < m->nenv; i++) {
        strs[n++] = m->env[i].key;
        strs[n++] = m->env[i].value;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(strs[i]);
        ulp__le32_put(p, (uint32_t)len);
        memcpy(p + 4, strs[i], len + 1);
        p += 4 + len + 1;
    }
    return (size_t)(p - out);
}

static void test_open_map__layout_and_back(void **state)
{
    (void)state;
    ulp__open_map m = sample();
    unsigned char *enc = NULL, ref[1024];
    size_t len = 0;
    assert_int_equal(ulp__map_encode(&m, 12626338, &enc, &len), 0);
    size_t body = reference(&m, ref);
    assert_int_equal(len, body + ULP__MAP_FOOTER_BYTES);
    assert_memory_equal(enc, ref, body);
    const unsigned char *f = enc + body;
    assert_memory_equal(f, "ULPOMAP1", 8);
    assert_int_equal(ulp__le64_get(f + 8), body);
    assert_int_equal(ulp__le64_get(f + 16), 12626338);
    assert_int_equal(ulp__le32_get(f + 24), ulp__crc32(ref, body));
    assert_int_equal(ulp__le32_get(f + 28), 0);

    /* As the last bytes of a file of 10,000 bytes. */
    uint64_t off, blen, seal;
    uint32_t crc;
    assert_int_equal(ulp__map_footer(f, 10000, &off, &blen, &seal, &crc), 0);
    assert_int_equal(off, 10000 - len);
    assert_int_equal(blen, body);
    assert_int_equal(seal, 12626338);
    ulp__open_map back;
    assert_int_equal(ulp__map_decode(enc, body, crc, &back), 0);
    assert_int_equal(back.flags, 0);
    assert_int_equal(back.journal, 33568);
    assert_int_equal(back.format_version, 1);
    assert_int_equal(back.created_unix_ns, 1796122262483302500);
    assert_string_equal(back.format, "ulpprof-snapshot");
    assert_string_equal(back.label, "run A");
    assert_string_equal(back.writer, "capture_loop");
    assert_int_equal(back.nrun, 3);
    assert_int_equal(back.nenv, 1);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(back.run[i].key, RUN[i].key);
        assert_string_equal(back.run[i].value, RUN[i].value);
    }
    assert_string_equal(back.env[0].value, "node-7");
    assert_int_equal(back.nruns, 2);
    assert_int_equal(back.runs[1].off, 1 << 20);
    assert_int_equal(back.runs[1].len, 1234);
    ulp__map_release(&back);
    free(enc);
}

static void test_open_map__damage_refused(void **state)
{
    (void)state;
    ulp__open_map m = sample(), back;
    unsigned char *enc = NULL;
    size_t len = 0;
    assert_int_equal(ulp__map_encode(&m, 99, &enc, &len), 0);
    size_t body = len - ULP__MAP_FOOTER_BYTES;
    uint32_t crc = ulp__crc32(enc, body);
    /* Every cut of the body: a copy of exactly that many bytes, so ASan sees a read past it. */
    for (size_t n = 0; n < body; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, enc, n);
        assert_int_equal(ulp__map_decode(cut, n, ulp__crc32(cut, n), &back), -1);
        free(cut);
    }
    /* Every flipped byte: the CRC. */
    for (size_t i = 0; i < body; i++) {
        enc[i] ^= 0x40;
        assert_int_equal(ulp__map_decode(enc, body, crc, &back), -1);
        enc[i] ^= 0x40;
    }
    /* Counts and lengths that lie, with a CRC that matches them. */
    static const size_t at[] = {0, 32, 36, 40, 44, 48 + 32, 48 + 32 + 1, 48 + 32 + 3};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        unsigned char *lie = malloc(body);
        memcpy(lie, enc, body);
        lie[at[k]] ^= 0x7f;
        assert_int_equal(ulp__map_decode(lie, body, ulp__crc32(lie, body), &back), -1);
        free(lie);
    }
    /* A NUL inside a string, the CRC made to match. */
    unsigned char *nul = malloc(body);
    memcpy(nul, enc, body);
    nul[48 + 32 + 4 + 3] = 0; /* in "ulpprof-snapshot" */
    assert_int_equal(ulp__map_decode(nul, body, ulp__crc32(nul, body), &back), -1);
    free(nul);
    assert_int_equal(ulp__map_decode(enc, body, crc, &back), 0);
    ulp__map_release(&back);

    /* Footers: magic, the reserved word, a body longer than the file. */
    unsigned char f[ULP__MAP_FOOTER_BYTES];
    uint64_t off, blen, seal;
    uint32_t c;
    memcpy(f, enc + body, sizeof f);
    assert_int_equal(ulp__map_footer(f, len, &off, &blen, &seal, &c), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ulp__map_footer(f, len - 1, &off, &blen, &seal, &c), -1);
    f[29] = 1;
    assert_int_equal(ulp__map_footer(f, len, &off, &blen, &seal, &c), -1);
    f[29] = 0;
    f[0] = 'X';
    assert_int_equal(ulp__map_footer(f, len, &off, &blen, &seal, &c), -1);
    free(enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_map__layout_and_back),
        cmocka_unit_test(test_open_map__damage_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
