/*
 * capture/capture_env.c: ULPPROF_OUTPUT expansion, ULPPROF_ATTR parsing,
 * rank selection and /env facts, with a fake environment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture_env.h"

static const ulp__expand_vars vars = {"4242", "3", "node7", "hit"};

static ulp_status expand(const char *pattern, char *out, size_t size, ulp_error *err)
{
    return ulp__output_expand(pattern, &vars, out, size, err);
}

static void test_capture_env__expand(void **state)
{
    (void)state;
    char out[ULP__PATH_MAX];
    ulp_error err;
    assert_int_equal(expand("/tmp/x.h5", out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "/tmp/x.h5");
    assert_int_equal(expand("/d/%l-r%r-p%p@%h.h5", out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "/d/hit-r3-p4242@node7.h5");
    assert_int_equal(expand("100%%-%%p%%", out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "100%-%p%");
    assert_int_equal(expand("%p%p", out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "42424242");
    /* NULL variables expand to nothing. */
    ulp__expand_vars none = {NULL, NULL, NULL, NULL};
    assert_int_equal(ulp__output_expand("a%p%r%h%lb", &none, out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "ab");
}

/* A variable's value cannot lead the path out of the pattern's directory. */
static void test_capture_env__expand_no_escape(void **state)
{
    (void)state;
    char out[ULP__PATH_MAX];
    ulp_error err;
    const ulp__expand_vars bad[] = {
        {"1", "../../etc", "h", "l"}, {"1", "..", "h", "l"},  {"1", ".", "/abs", "l"},
        {"1", "0", "h", "a/../../b"}, {"1", "...", "h", "l"},
    };
    const char *want[] = {"/d/.._.._etc/h-l.h5", "/d/__/h-l.h5", "/d/_/_abs-l.h5",
                          "/d/0/h-a_.._.._b.h5", "/d/.../h-l.h5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ulp__output_expand("/d/%r/%h-%l.h5", &bad[i], out, sizeof(out), &err),
                         ULP_OK);
        assert_string_equal(out, want[i]);
    }
    /* The pattern itself is the user's: its own '/' and '..' stay. */
    assert_int_equal(expand("../x/%r.h5", out, sizeof(out), &err), ULP_OK);
    assert_string_equal(out, "../x/3.h5");
}

static void test_capture_env__expand_errors(void **state)
{
    (void)state;
    char out[64];
    ulp_error err;
    assert_int_equal(expand("", out, sizeof(out), &err), ULP_EINVAL);
    assert_int_equal(expand(NULL, out, sizeof(out), &err), ULP_EINVAL);
    assert_int_equal(expand("a%x.h5", out, sizeof(out), &err), ULP_EINVAL);
    assert_non_null(strstr(err.msg, "%x"));
    assert_int_equal(expand("a%", out, sizeof(out), &err), ULP_EINVAL);
    assert_non_null(strstr(err.msg, "lone"));
    assert_int_equal(expand("a", out, 0, &err), ULP_EINVAL);

    /* The bound is exact: size - 1 characters fit, size do not. */
    char small[8];
    assert_int_equal(expand("1234567", small, sizeof(small), &err), ULP_OK);
    assert_string_equal(small, "1234567");
    assert_int_equal(expand("12345678", small, sizeof(small), &err), ULP_ERANGE);
    assert_string_equal(small, "");
    assert_int_equal(expand("abc%p", small, sizeof(small), &err), ULP_OK); /* 7 chars */
    assert_string_equal(small, "abc4242");
    assert_int_equal(expand("abcd%p", small, sizeof(small), &err), ULP_ERANGE);
    assert_int_equal(expand("%p%p", small, sizeof(small), &err), ULP_ERANGE);
}

/* Expansion of every short pattern over a small alphabet matches a reference. */
static void test_capture_env__expand_exhaustive(void **state)
{
    (void)state;
    const char alphabet[] = {'a', '%', 'p', 'l', 'x', '/'};
    char pattern[8], out[64], want[64];
    for (int len = 1; len <= 5; len++) {
        int total = 1;
        for (int i = 0; i < len; i++)
            total *= 6;
        for (int code = 0; code < total; code++) {
            int c = code;
            for (int i = 0; i < len; i++, c /= 6)
                pattern[i] = alphabet[c % 6];
            pattern[len] = '\0';
            /* Reference: a direct reading of the rules. */
            int ok = 1;
            size_t n = 0;
            for (int i = 0; i < len && ok; i++) {
                if (pattern[i] != '%') {
                    want[n++] = pattern[i];
                    continue;
                }
                char e = pattern[++i];
                if (e == 'p') {
                    memcpy(want + n, "4242", 4);
                    n += 4;
                } else if (e == 'l') {
                    memcpy(want + n, "hit", 3);
                    n += 3;
                } else if (e == '%') {
                    want[n++] = '%';
                } else {
                    ok = 0; /* unknown or lone */
                }
            }
            want[n] = '\0';
            ulp_status st = expand(pattern, out, sizeof(out), NULL);
            if (ok) {
                assert_int_equal(st, ULP_OK);
                assert_string_equal(out, want);
            } else {
                assert_int_equal(st, ULP_EINVAL);
            }
        }
    }
}

static ulp__kvlist parse_ok(const char *spec)
{
    ulp__kvlist l;
    ulp__kvlist_init(&l);
    ulp_error err;
    ulp_status st = ulp__attr_parse(spec, &l, &err);
    if (st != ULP_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, ULP_OK);
    return l;
}

static void test_capture_env__attr_parse(void **state)
{
    (void)state;
    ulp__kvlist l = parse_ok("cache=miss,batch_size=8");
    assert_int_equal(l.count, 2);
    assert_string_equal(l.items[0].key, "cache");
    assert_string_equal(l.items[0].value, "miss");
    assert_string_equal(l.items[1].key, "batch_size");
    assert_string_equal(l.items[1].value, "8");
    ulp__kvlist_release(&l);

    /* Escapes, '=' inside a value, blanks trimmed, empty items, repeats. */
    l = parse_ok(" ,, prompt = a\\,b\\=c\\\\d , k=x=y,empty=,k=last,path=C:\\dir\\, ");
    assert_int_equal(l.count, 4);
    assert_string_equal(ulp__kvlist_get(&l, "prompt"), "a,b=c\\d");
    assert_string_equal(ulp__kvlist_get(&l, "k"), "last");
    assert_string_equal(ulp__kvlist_get(&l, "empty"), "");
    assert_string_equal(ulp__kvlist_get(&l, "path"), "C:\\dir,");
    assert_string_equal(l.items[0].key, "prompt"); /* insertion order kept */
    ulp__kvlist_release(&l);

    l = parse_ok("a\\=b=1,trail=x\\");
    assert_string_equal(ulp__kvlist_get(&l, "a=b"), "1");
    assert_string_equal(ulp__kvlist_get(&l, "trail"), "x\\");
    ulp__kvlist_release(&l);

    l = parse_ok("");
    assert_int_equal(l.count, 0);
    ulp__kvlist_release(&l);
    l = parse_ok(NULL);
    assert_int_equal(l.count, 0);
    ulp__kvlist_release(&l);
}

static void test_capture_env__attr_errors(void **state)
{
    (void)state;
    const char *bad[] = {"novalue", "a=1,oops", "=v", " = v", "a=1,,b"};
    const int want[] = {ULP_EINVAL, ULP_EINVAL, ULP_EINVAL, ULP_EINVAL, ULP_EINVAL};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ulp__kvlist l;
        ulp__kvlist_init(&l);
        ulp_error err;
        ulp_status st = ulp__attr_parse(bad[i], &l, &err);
        assert_int_equal(st, want[i]);
        assert_non_null(strstr(err.msg, "ULPPROF_ATTR"));
        ulp__kvlist_release(&l);
    }
}

/* Random specs never crash, and a valid parse re-serializes to the same list. */
static void test_capture_env__attr_fuzz(void **state)
{
    (void)state;
    const char alphabet[] = "ab=,\\ ";
    uint64_t x = 88172645463325252u;
    for (int iter = 0; iter < 200000; iter++) {
        char spec[24];
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int len = (int)(x % 20);
        uint64_t y = x;
        for (int i = 0; i < len; i++, y = y * 6364136223846793005u + 1442695040888963407u)
            spec[i] = alphabet[(y >> 33) % 6];
        spec[len] = '\0';
        ulp__kvlist l;
        ulp__kvlist_init(&l);
        if (ulp__attr_parse(spec, &l, NULL) == ULP_OK) {
            /* Escape everything and parse again: the same list. */
            char again[256];
            size_t n = 0;
            for (size_t k = 0; k < l.count; k++) {
                const char *parts[2] = {l.items[k].key, l.items[k].value};
                for (int p = 0; p < 2; p++) {
                    for (const char *c = parts[p]; *c; c++) {
                        if (*c == ',' || *c == '=' || *c == '\\')
                            again[n++] = '\\';
                        again[n++] = *c;
                    }
                    again[n++] = p == 0 ? '=' : ',';
                }
            }
            again[n] = '\0';
            ulp__kvlist m;
            ulp__kvlist_init(&m);
            assert_int_equal(ulp__attr_parse(again, &m, NULL), ULP_OK);
            assert_int_equal(m.count, l.count);
            for (size_t k = 0; k < l.count; k++) {
                assert_string_equal(m.items[k].key, l.items[k].key);
                assert_string_equal(m.items[k].value, l.items[k].value);
                assert_true(l.items[k].key[0] != '\0');
            }
            ulp__kvlist_release(&m);
        }
        ulp__kvlist_release(&l);
    }
}

/* A fake environment: NAME=value strings. */
static const char *fake_get(const char *name, void *ctx)
{
    const char *const *env = ctx;
    size_t n = strlen(name);
    for (; *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

static void test_capture_env__rank(void **state)
{
    (void)state;
    const char *e1[] = {"LOCAL_RANK=2", "OMPI_COMM_WORLD_RANK=5", "RANK=7", NULL};
    assert_string_equal(ulp__env_rank(fake_get, e1), "7");
    const char *e2[] = {"LOCAL_RANK=2", "OMPI_COMM_WORLD_RANK=5", "RANK=", NULL};
    assert_string_equal(ulp__env_rank(fake_get, e2), "2");
    const char *e3[] = {"OMPI_COMM_WORLD_RANK=5", NULL};
    assert_string_equal(ulp__env_rank(fake_get, e3), "5");
    const char *e4[] = {"RANKX=1", NULL};
    assert_string_equal(ulp__env_rank(fake_get, e4), "0");
}

static void test_capture_env__collect(void **state)
{
    (void)state;
    const char *env[] = {"OMP_NUM_THREADS=4",      "CUBLAS_WORKSPACE_CONFIG=:4096:8",
                         "NVIDIA_TF32_OVERRIDE=0", "HOME=/root",
                         "OPENBLAS_CORETYPE=",     NULL};
    ulp__kvlist l;
    ulp__kvlist_init(&l);
    assert_int_equal(ulp__env_collect(fake_get, env, "node7", "99", "3", &l), ULP_OK);
    assert_string_equal(ulp__kvlist_get(&l, "hostname"), "node7");
    assert_string_equal(ulp__kvlist_get(&l, "pid"), "99");
    assert_string_equal(ulp__kvlist_get(&l, "rank"), "3");
    assert_string_equal(ulp__kvlist_get(&l, "env:OMP_NUM_THREADS"), "4");
    assert_string_equal(ulp__kvlist_get(&l, "env:CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
    assert_string_equal(ulp__kvlist_get(&l, "env:NVIDIA_TF32_OVERRIDE"), "0");
    /* Set but empty is recorded: it differs from unset for some libraries. */
    assert_string_equal(ulp__kvlist_get(&l, "env:OPENBLAS_CORETYPE"), "");
    assert_null(ulp__kvlist_get(&l, "env:HOME"));
    assert_null(ulp__kvlist_get(&l, "env:MKL_NUM_THREADS"));
    assert_int_equal(l.count, 7);
    ulp__kvlist_release(&l);

    /* The list names the variables the task calls numerics-relevant. */
    const char *required[] = {"CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
                              "OPENBLAS_NUM_THREADS",    "OMP_NUM_THREADS",
                              "MKL_NUM_THREADS",         "OPENBLAS_CORETYPE",
                              "CUDA_LAUNCH_BLOCKING",    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        int found = 0;
        for (size_t k = 0; ulp__env_numerics[k] != NULL; k++)
            found |= strcmp(ulp__env_numerics[k], required[i]) == 0;
        assert_true(found);
    }
}

static void test_capture_env__kvlist(void **state)
{
    (void)state;
    ulp__kvlist l;
    ulp__kvlist_init(&l);
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i % 37);
        assert_int_equal(ulp__kvlist_set(&l, key, key), ULP_OK);
    }
    assert_int_equal(l.count, 37);
    assert_string_equal(ulp__kvlist_get(&l, "k36"), "k36");
    assert_null(ulp__kvlist_get(&l, "k37"));
    ulp__kvlist_release(&l);
    ulp__kvlist_release(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_env__expand),
        cmocka_unit_test(test_capture_env__expand_no_escape),
        cmocka_unit_test(test_capture_env__expand_errors),
        cmocka_unit_test(test_capture_env__expand_exhaustive),
        cmocka_unit_test(test_capture_env__attr_parse),
        cmocka_unit_test(test_capture_env__attr_errors),
        cmocka_unit_test(test_capture_env__attr_fuzz),
        cmocka_unit_test(test_capture_env__rank),
        cmocka_unit_test(test_capture_env__collect),
        cmocka_unit_test(test_capture_env__kvlist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
