/*
 * The `ulp1` NVTX mark parser (capture/cuda/cuda_mark.c): every field,
 * every refusal, and a round trip of random valid marks plus random
 * mutations (the parser must never crash and must keep its invariants).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef ULP_HAVE_CUDA_CORE
#include "cuda_mark.h"

static ulp_status parse(const char *msg, ulp__mark *m)
{
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ulp__mark_parse(msg, m, &err);
    if (st != ULP_OK)
        assert_true(err.msg[0] != '\0'); /* a refusal always says why */
    return st;
}

static void test_cuda_mark__not_ours(void **state)
{
    (void)state;
    ulp__mark m;
    const char *foreign[] = {NULL,
                             "",
                             "hello",
                             "ulp",
                             "ulpx|name=a",
                             "ULP1|name=a",
                             "ulp1 name=a",
                             "ulp|name=a",
                             "{'Module': 'top'}"};
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
        assert_int_equal(parse(foreign[i], &m), ULP_OK);
        assert_int_equal(m.kind, ULP__MARK_NOT_OURS);
    }
    /* Ours, but from a protocol this collector does not speak. */
    assert_int_equal(parse("ulp2|name=a", &m), ULP_EINVAL);
    assert_int_equal(parse("ulp10|name=a", &m), ULP_EINVAL);
    assert_int_equal(parse("ulp1", &m), ULP_EINVAL);
}

static void test_cuda_mark__full_capture(void **state)
{
    (void)state;
    ulp__mark m;
    assert_int_equal(parse("ulp1|ev=capture|name=model.layers.14.out|ptr=0x7f00dead0000"
                           "|dtype=bf16|shape=1,92160|stride=92160,1|dev=cuda:1"
                           "|stream=0x55aa|layer=14|role=logits|step=17|bytes=184320",
                           &m),
                     ULP_OK);
    assert_int_equal(m.kind, ULP__MARK_CAPTURE);
    assert_string_equal(m.name, "model.layers.14.out");
    assert_true(m.ptr == 0x7f00dead0000ull);
    assert_int_equal(m.dtype, ULP_DTYPE_BF16);
    assert_int_equal(m.ndim, 2);
    assert_int_equal(m.shape[0], 1);
    assert_int_equal(m.shape[1], 92160);
    assert_true(m.elements == 92160);
    assert_true(m.nbytes == 184320);
    assert_int_equal(m.mem, ULP__MARK_MEM_CUDA);
    assert_int_equal(m.device, 1);
    assert_int_equal(m.has_stream, 1);
    assert_true(m.stream == 0x55aa);
    assert_int_equal(m.layer, 14);
    assert_int_equal(m.role, ULP_ROLE_LOGITS);
    assert_true(m.step == 17);
    assert_int_equal(m.unknown_keys, 0);
}

static void test_cuda_mark__defaults_and_order(void **state)
{
    (void)state;
    ulp__mark m;
    /* Field order is free; absent optional fields take their defaults. */
    assert_int_equal(parse("ulp1|shape=3|dtype=f32|ptr=4096|name=x", &m), ULP_OK);
    assert_int_equal(m.kind, ULP__MARK_CAPTURE);
    assert_true(m.ptr == 4096);
    assert_int_equal(m.mem, ULP__MARK_MEM_CUDA);
    assert_int_equal(m.device, -1);
    assert_int_equal(m.has_stream, 0); /* unknown: the collector synchronizes */
    assert_int_equal(m.layer, ULP_LAYER_NONE);
    assert_int_equal(m.role, ULP_ROLE_ACTIVATION);
    assert_true(m.step == ULP_STEP_NONE);
    assert_true(m.nbytes == 12);
    /* Streams: 0 and "default" are the legacy stream, "unknown" is unknown. */
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=u8|shape=1|stream=0", &m), ULP_OK);
    assert_true(m.has_stream == 1 && m.stream == 0);
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=u8|shape=1|stream=default", &m), ULP_OK);
    assert_true(m.has_stream == 1 && m.stream == 0);
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=u8|shape=1|stream=unknown", &m), ULP_OK);
    assert_int_equal(m.has_stream, 0);
    /* Host memory needs no stream. */
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=u8|shape=1|dev=host|stream=7", &m), ULP_OK);
    assert_int_equal(m.mem, ULP__MARK_MEM_HOST);
    assert_int_equal(m.has_stream, 0);
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=u8|shape=1|dev=cpu", &m), ULP_OK);
    assert_int_equal(m.mem, ULP__MARK_MEM_HOST);
    /* A scalar and an empty tensor (no pointer needed). */
    assert_int_equal(parse("ulp1|name=s|ptr=0x10|dtype=f64|shape=", &m), ULP_OK);
    assert_int_equal(m.ndim, 0);
    assert_true(m.elements == 1 && m.nbytes == 8);
    assert_int_equal(parse("ulp1|name=e|dtype=f64|shape=0,5", &m), ULP_OK);
    assert_true(m.elements == 0 && m.nbytes == 0);
    /* Trailing and doubled separators are tolerated; unknown keys counted. */
    assert_int_equal(parse("ulp1|name=x||ptr=1|dtype=i8|shape=2|idx=0|future_key=1|", &m), ULP_OK);
    assert_int_equal(m.unknown_keys, 2);
    /* layer=-1 is "not a layer". */
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=i8|shape=2|layer=-1", &m), ULP_OK);
    assert_int_equal(m.layer, -1);
}

static void test_cuda_mark__escapes(void **state)
{
    (void)state;
    ulp__mark m;
    assert_int_equal(parse("ulp1|name=a\\|b\\\\c=d|ptr=1|dtype=u8|shape=1", &m), ULP_OK);
    assert_string_equal(m.name, "a|b\\c=d");
    assert_int_equal(parse("ulp1|name=a\\xb|ptr=1|dtype=u8|shape=1", &m), ULP_EINVAL);
    assert_int_equal(parse("ulp1|name=ab\\", &m), ULP_EINVAL);
}

static void test_cuda_mark__strides(void **state)
{
    (void)state;
    ulp__mark m;
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=f32|shape=2,3,4|stride=12,4,1", &m), ULP_OK);
    /* Axes of extent 1 may carry any stride (PyTorch leaves them arbitrary). */
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=f32|shape=1,4|stride=99,1", &m), ULP_OK);
    /* A transpose is not contiguous: refused rather than copied wrong. */
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=f32|shape=2,3|stride=1,2", &m), ULP_EINVAL);
    assert_int_equal(parse("ulp1|name=x|ptr=1|dtype=f32|shape=2,3|stride=3", &m), ULP_EINVAL);
}

static void test_cuda_mark__refusals(void **state)
{
    (void)state;
    ulp__mark m;
    const char *bad[] = {
        "ulp1|ptr=1|dtype=f32|shape=1",                            /* no name          */
        "ulp1|name=x|ptr=1|shape=1",                               /* no dtype         */
        "ulp1|name=x|ptr=1|dtype=f32",                             /* no shape         */
        "ulp1|name=x|dtype=f32|shape=1",                           /* no ptr           */
        "ulp1|name=x|ptr=0|dtype=f32|shape=1",                     /* null ptr         */
        "ulp1|name=x|ptr=1|dtype=float32|shape=1",                 /* torch name       */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|bytes=5",             /* wrong bytes      */
        "ulp1|name=x|ptr=1|dtype=f32|shape=-1",                    /* negative extent  */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1,,2",                  /* empty extent     */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1,2,3,4,5,6,7,8,9",     /* rank 9          */
        "ulp1|name=x|ptr=1|dtype=f32|shape=4294967296,4294967296", /* overflow    */
        "ulp1|name=a/b|ptr=1|dtype=f32|shape=1",                   /* '/' in name      */
        "ulp1|name=.|ptr=1|dtype=f32|shape=1",                     /* HDF5 "."         */
        "ulp1|name=|ptr=1|dtype=f32|shape=1",                      /* empty name       */
        "ulp1|name=x|name=y|ptr=1|dtype=f32|shape=1",              /* duplicate        */
        "ulp1|name=x|ptr=0xz1|dtype=f32|shape=1",                  /* bad hex          */
        "ulp1|name=x|ptr=-1|dtype=f32|shape=1",                    /* signed pointer   */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|dev=gpu",             /* unknown device   */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|dev=cuda:x",
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|role=hidden", /* unknown role     */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|layer=-2",
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|layer=3000000000",
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|step=1.5",
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|stream=abc",
        "ulp1|ev=replay|key=3",                                   /* unknown ev       */
        "ulp1|ev=step",                                           /* step without step */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|novalue",            /* no '='           */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|=v",                 /* empty key        */
        "ulp1|name=x|ptr=1|dtype=f32|shape=1|Bad-Key=1",          /* key charset      */
        "ulp1|name=x|ptr=18446744073709551615|dtype=f32|shape=1", /* wraps        */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i], &m) != ULP_EINVAL)
            fail_msg("accepted: %s", bad[i]);
    }
    /* Too long as a whole. */
    char *big = malloc(ULP__MARK_MAX_LEN + 64);
    assert_non_null(big);
    strcpy(big, "ulp1|name=");
    memset(big + 10, 'a', ULP__MARK_MAX_LEN);
    big[10 + ULP__MARK_MAX_LEN] = '\0';
    assert_int_equal(parse(big, &m), ULP_EINVAL);
    /* A name just under the limit is fine, one over is not. */
    char *name = malloc(ULP__MARK_NAME_MAX + 64);
    assert_non_null(name);
    memset(name, 'n', ULP__MARK_NAME_MAX - 1);
    name[ULP__MARK_NAME_MAX - 1] = '\0';
    snprintf(big, ULP__MARK_MAX_LEN, "ulp1|name=%s|ptr=1|dtype=u8|shape=1", name);
    assert_int_equal(parse(big, &m), ULP_OK);
    assert_int_equal(strlen(m.name), ULP__MARK_NAME_MAX - 1);
    strcat(name, "n");
    snprintf(big, ULP__MARK_MAX_LEN, "ulp1|name=%s|ptr=1|dtype=u8|shape=1", name);
    assert_int_equal(parse(big, &m), ULP_EINVAL);
    free(name);
    free(big);
}

/* pos=, req=, rows=, in= (PROTOCOL.md "Tokens"), expanded against a hand-written list. */
static void test_cuda_mark__tokens(void **state)
{
    (void)state;
    ulp__mark m;
    int64_t v[16];
    /* [2, 3, 8] with rows=2: 6 rows, positions 0-2 and 10-12, one request per batch row. */
    assert_int_equal(parse("ulp1|name=h|ptr=1|dtype=f32|shape=2,3,8|rows=2|pos=0-2,10-12"
                           "|req=7,7,7,9,9,9|in=layers.0.out,embed",
                           &m),
                     ULP_OK);
    assert_int_equal(m.row_rank, 2);
    assert_true(m.rows == 6);
    ulp__mark_list_expand(m.pos, v, 6);
    const int64_t want_pos[6] = {0, 1, 2, 10, 11, 12};
    assert_memory_equal(v, want_pos, sizeof want_pos);
    ulp__mark_list_expand(m.req, v, 6);
    const int64_t want_req[6] = {7, 7, 7, 9, 9, 9};
    assert_memory_equal(v, want_req, sizeof want_req);
    assert_int_equal(m.n_inputs, 2);
    assert_string_equal(m.inputs, "layers.0.out,embed");
    /* One request for every row; rows defaults to 1; negative requests are values. */
    assert_int_equal(parse("ulp1|name=h|ptr=1|dtype=bf16|shape=4,8|pos=96-99|req=-3", &m), ULP_OK);
    assert_int_equal(m.row_rank, 1);
    ulp__mark_list_expand(m.req, v, 4);
    assert_true(v[0] == -3 && v[1] == -3 && v[2] == -3 && v[3] == -3);
    ulp__mark_list_expand(m.pos, v, 4);
    assert_true(v[0] == 96 && v[3] == 99);
    /* Without tokens: nothing set. */
    assert_int_equal(parse("ulp1|name=h|ptr=1|dtype=bf16|shape=4,8", &m), ULP_OK);
    assert_int_equal(m.row_rank, 0);
    assert_int_equal(m.n_inputs, 0);
    const char *bad[] = {
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-2",         /* 3 positions, 4 rows */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-4",         /* 5 positions */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=-1,0,1,2",    /* negative */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=3-0",         /* empty range */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0,,1,2",      /* empty item */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-3|req=1,2", /* 2 requests, 4 rows */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|req=1",           /* req without pos */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|rows=1",          /* rows without pos */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-3|rows=3",  /* rows above the rank */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-3|rows=0",
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=0-3|pos=0-3", /* repeated key */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|pos=a-d",
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|in=a,,b", /* empty input name */
        "ulp1|name=h|ptr=1|dtype=f32|shape=4,8|in=a/b",
        "ulp1|name=h|ptr=1|dtype=u8|shape=20000,1|pos=0-19999", /* more rows than allowed */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse(bad[i], &m) != ULP_EINVAL)
            fail_msg("accepted: %s", bad[i]);
}

static void test_cuda_mark__step(void **state)
{
    (void)state;
    ulp__mark m;
    assert_int_equal(parse("ulp1|ev=step|step=-3", &m), ULP_OK);
    assert_int_equal(m.kind, ULP__MARK_STEP);
    assert_true(m.step == -3);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random valid marks: what the generator chose must come back. */
static void test_cuda_mark__round_trip(void **state)
{
    (void)state;
    static const char *const roles[] = {"activation", "logits", "kv", "input", "weight"};
    char msg[2048], name[64];
    for (int iter = 0; iter < 20000; iter++) {
        ulp_dtype dt = (ulp_dtype)(rnd() % ULP_DTYPE_COUNT);
        int nd = (int)(rnd() % (ULP_MAX_RANK + 1));
        int64_t shape[ULP_MAX_RANK];
        uint64_t elements = 1;
        int n = snprintf(msg, sizeof(msg), "ulp1");
        char shp[256] = "";
        for (int i = 0; i < nd; i++) {
            shape[i] = (int64_t)(rnd() % 7);
            elements *= (uint64_t)shape[i];
            size_t l = strlen(shp);
            snprintf(shp + l, sizeof(shp) - l, "%s%lld", i ? "," : "", (long long)shape[i]);
        }
        uint64_t ptr = (rnd() | 1) & 0x0000ffffffffffffull;
        int layer = (int)(rnd() % 200) - 1;
        int role = (int)(rnd() % 5);
        long long step = (long long)(rnd() % 100000) - 50000;
        uint64_t stream = rnd() % 3 == 0 ? 0 : rnd() & 0xffffffffffull;
        int host = (int)(rnd() % 2);
        snprintf(name, sizeof(name), "m.l%d.%s|x\\y", (int)(rnd() % 1000), roles[role]);
        /* Fields in a random rotation, the name escaped. */
        char fields[10][300];
        int nf = 0;
        /* The name, escaped: '|' and '\\' get a backslash. */
        char *f0 = fields[nf++];
        size_t k = (size_t)snprintf(f0, 300, "name=");
        for (const char *c = name; *c; c++) {
            if (*c == '|' || *c == '\\')
                f0[k++] = '\\';
            f0[k++] = *c;
        }
        f0[k] = '\0';
        snprintf(fields[nf++], 300, "ptr=0x%llx", (unsigned long long)ptr);
        snprintf(fields[nf++], 300, "dtype=%s", ulp_dtype_name(dt));
        snprintf(fields[nf++], 300, "shape=%s", shp);
        snprintf(fields[nf++], 300, "layer=%d", layer);
        snprintf(fields[nf++], 300, "role=%s", roles[role]);
        snprintf(fields[nf++], 300, "step=%lld", step);
        snprintf(fields[nf++], 300, "stream=%llu", (unsigned long long)stream);
        snprintf(fields[nf++], 300, "dev=%s", host ? "host" : "cuda:0");
        snprintf(fields[nf++], 300, "bytes=%llu",
                 (unsigned long long)(elements * ulp_dtype_size(dt)));
        int rot = (int)(rnd() % (uint64_t)nf);
        for (int i = 0; i < nf; i++)
            n += snprintf(msg + n, sizeof(msg) - (size_t)n, "|%s", fields[(i + rot) % nf]);
        ulp__mark m;
        if (parse(msg, &m) != ULP_OK)
            fail_msg("refused: %s", msg);
        assert_int_equal(m.kind, ULP__MARK_CAPTURE);
        assert_string_equal(m.name, name);
        assert_true(m.ptr == ptr);
        assert_int_equal(m.dtype, dt);
        assert_int_equal(m.ndim, nd);
        for (int i = 0; i < nd; i++)
            assert_true(m.shape[i] == shape[i]);
        assert_true(m.elements == elements);
        assert_true(m.nbytes == elements * ulp_dtype_size(dt));
        assert_int_equal(m.layer, layer);
        assert_int_equal((int)m.role, role);
        assert_true(m.step == step);
        assert_int_equal(m.mem, host ? ULP__MARK_MEM_HOST : ULP__MARK_MEM_CUDA);
        if (!host)
            assert_true(m.has_stream == 1 && m.stream == stream);
    }
}

/* Mutations of a valid mark: never a crash, and what is accepted is sane. */
static void test_cuda_mark__fuzz(void **state)
{
    (void)state;
    const char *seed = "ulp1|name=model.layers.3.mlp|ptr=0x7f0000001000|dtype=bf16|"
                       "shape=8,4096|stride=4096,1|dev=cuda:0|stream=0x5|layer=3|step=17";
    const char alphabet[] = "ulp1|=\\,:x0123456789abcdefnamedtypeshape-. /";
    char buf[512];
    for (int iter = 0; iter < 200000; iter++) {
        strcpy(buf, seed);
        size_t len = strlen(buf);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t pos = (size_t)(rnd() % (len + 1));
            switch (rnd() % 3) {
            case 0: /* replace */
                if (pos < len)
                    buf[pos] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                break;
            case 1: /* delete */
                if (pos < len) {
                    memmove(buf + pos, buf + pos + 1, len - pos);
                    len--;
                }
                break;
            default: /* insert */
                if (len + 1 < sizeof(buf)) {
                    memmove(buf + pos + 1, buf + pos, len - pos + 1);
                    buf[pos] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                    len++;
                }
                break;
            }
        }
        ulp__mark m;
        ulp_status st = parse(buf, &m);
        assert_true(st == ULP_OK || st == ULP_EINVAL);
        if (st == ULP_OK && m.kind == ULP__MARK_CAPTURE) {
            assert_true(m.name[0] != '\0' && strchr(m.name, '/') == NULL);
            assert_true(m.ndim >= 0 && m.ndim <= ULP_MAX_RANK);
            uint64_t e = 1;
            for (int i = 0; i < m.ndim; i++) {
                assert_true(m.shape[i] >= 0);
                e *= (uint64_t)m.shape[i];
            }
            assert_true(e == m.elements);
            assert_true(m.nbytes == m.elements * ulp_dtype_size(m.dtype));
            assert_true(m.nbytes == 0 || m.ptr != 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_mark__not_ours),
        cmocka_unit_test(test_cuda_mark__full_capture),
        cmocka_unit_test(test_cuda_mark__defaults_and_order),
        cmocka_unit_test(test_cuda_mark__escapes),
        cmocka_unit_test(test_cuda_mark__strides),
        cmocka_unit_test(test_cuda_mark__refusals),
        cmocka_unit_test(test_cuda_mark__tokens),
        cmocka_unit_test(test_cuda_mark__step),
        cmocka_unit_test(test_cuda_mark__round_trip),
        cmocka_unit_test(test_cuda_mark__fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("SKIPPED: test_cuda_mark needs the CUDA collector core (ULPPROF_WITH_CUDA=ON)\n");
    return 0;
}
#endif
