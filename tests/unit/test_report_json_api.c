/*
 * The public JSON writer (ulpprof/report.h): its bytes for a document with
 * every kind of value, against text written out by hand in jansson's
 * JSON_INDENT(2) layout; a value out of place refused; and no allocator
 * hook left in the host program (jansson's stay malloc and free).
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ulpprof/report.h"

/* The document fill() writes, and ulp_json_close()'s answer in *rc. */
static char *written(void (*fill)(ulp_json *), int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ulp_json *j = ulp_json_open(f);
    assert_non_null(j);
    fill(j);
    *rc = ulp_json_close(j);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void every_kind(ulp_json *j)
{
    ulp_json_object(j);
    ulp_json_key(j, "s");
    ulp_json_string(j, "q\"b\\\n\x01/\xc3\xa9");
    ulp_json_key(j, "bad\xff");
    ulp_json_string(j, "a\x80z");
    ulp_json_key(j, "none");
    ulp_json_string(j, NULL);
    ulp_json_key(j, "i");
    ulp_json_int(j, INT64_MIN);
    ulp_json_key(j, "u");
    ulp_json_uint(j, UINT64_MAX);
    ulp_json_key(j, "r");
    ulp_json_array(j);
    ulp_json_real(j, 0.1);
    ulp_json_real(j, 0x1p-20); /* 9.5367431640625e-07 exactly */
    ulp_json_real(j, 2.0);
    ulp_json_real(j, (double)NAN);
    ulp_json_end(j);
    ulp_json_key(j, "empty");
    ulp_json_object(j);
    ulp_json_end(j);
    ulp_json_key(j, "nested");
    ulp_json_array(j);
    ulp_json_array(j);
    ulp_json_end(j);
    ulp_json_object(j);
    ulp_json_key(j, "t");
    ulp_json_bool(j, 1);
    ulp_json_key(j, "f");
    ulp_json_bool(j, 0);
    ulp_json_key(j, "n");
    ulp_json_null(j);
    ulp_json_end(j);
    ulp_json_end(j);
    ulp_json_end(j);
}

static void test_every_kind(void **state)
{
    (void)state;
    int rc = -2;
    char *got = written(every_kind, &rc);
    assert_int_equal(rc, 0);
    const char *want = "{\n"
                       "  \"s\": \"q\\\"b\\\\\\n\\u0001/\xc3\xa9\",\n"
                       "  \"bad\\udcff\": \"a\\udc80z\",\n"
                       "  \"none\": null,\n"
                       "  \"i\": -9223372036854775808,\n"
                       "  \"u\": 18446744073709551615,\n"
                       "  \"r\": [\n"
                       "    0.10000000000000001,\n"
                       "    9.5367431640625e-7,\n"
                       "    2.0,\n"
                       "    null\n"
                       "  ],\n"
                       "  \"empty\": {},\n"
                       "  \"nested\": [\n"
                       "    [],\n"
                       "    {\n"
                       "      \"t\": true,\n"
                       "      \"f\": false,\n"
                       "      \"n\": null\n"
                       "    }\n"
                       "  ]\n"
                       "}";
    assert_string_equal(got, want);
    free(got);
}

static void no_key(ulp_json *j)
{
    ulp_json_object(j);
    ulp_json_int(j, 1); /* a value in an object without its key */
    ulp_json_end(j);
}

static void left_open(ulp_json *j)
{
    ulp_json_array(j);
}

static void two_tops(ulp_json *j)
{
    ulp_json_int(j, 1);
    ulp_json_int(j, 2);
}

static void end_too_many(ulp_json *j)
{
    ulp_json_array(j);
    ulp_json_end(j);
    ulp_json_end(j);
}

static void key_in_array(ulp_json *j)
{
    ulp_json_array(j);
    ulp_json_key(j, "k");
    ulp_json_end(j);
}

static void too_deep(ulp_json *j)
{
    for (int k = 0; k < 16; k++)
        ulp_json_array(j);
    for (int k = 0; k < 16; k++)
        ulp_json_end(j);
}

static void test_out_of_place(void **state)
{
    (void)state;
    void (*bad[])(ulp_json *) = {no_key, left_open, two_tops, end_too_many, key_in_array, too_deep};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = 0;
        free(written(bad[i], &rc));
        assert_int_equal(rc, -1);
    }
    assert_int_equal(ulp_json_close(NULL), -1);
}

static void test_no_allocator_hook(void **state)
{
    (void)state;
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    assert_true(m == malloc);
    assert_true(f == free);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),
        cmocka_unit_test(test_out_of_place),
        cmocka_unit_test(test_no_allocator_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
