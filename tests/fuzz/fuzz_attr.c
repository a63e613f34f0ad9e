/*
 * libFuzzer target: the ULPPROF_ATTR parser, ulp__attr_parse()
 * (capture/capture_env.c).
 *
 * The input is the variable's value (made NUL-terminated).  When the parser
 * accepts it, the target checks its promises -- keys not empty, unique, and
 * without blanks at either end; values without blanks at either end -- and a
 * round trip: the list written back as a spec (',', '=' and '\' escaped with
 * a backslash) parses to the same list.  A refusal must be ULP_EINVAL with a
 * message.  Any broken promise aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture_env.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static char *escape_into(char *o, const char *s)
{
    for (; *s; s++) {
        if (*s == ',' || *s == '=' || *s == '\\')
            *o++ = '\\';
        *o++ = *s;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = malloc(size + 1);
    if (spec == NULL)
        return 0;
    memcpy(spec, data, size);
    spec[size] = '\0';

    ulp__kvlist l;
    ulp__kvlist_init(&l);
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ulp__attr_parse(spec, &l, &err);
    if (st != ULP_OK) {
        CHECK(st == ULP_EINVAL && err.status == st && err.msg[0] != '\0');
        CHECK(strnlen(err.msg, sizeof err.msg) < sizeof err.msg);
        ulp__kvlist_release(&l);
        free(spec);
        return 0;
    }

    size_t need = 1;
    for (size_t i = 0; i < l.count; i++) {
        const char *k = l.items[i].key, *v = l.items[i].value;
        size_t kl = strlen(k), vl = strlen(v);
        CHECK(kl > 0 && !blank(k[0]) && !blank(k[kl - 1]));
        CHECK(vl == 0 || (!blank(v[0]) && !blank(v[vl - 1])));
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(l.items[j].key, k) != 0);
        CHECK(ulp__kvlist_get(&l, k) == v);
        need += 2 * (kl + vl) + 2;
    }

    /* Round trip. */
    char *again = malloc(need), *o = again;
    if (again != NULL) {
        for (size_t i = 0; i < l.count; i++) {
            if (i)
                *o++ = ',';
            o = escape_into(o, l.items[i].key);
            *o++ = '=';
            o = escape_into(o, l.items[i].value);
        }
        *o = '\0';
        ulp__kvlist l2;
        ulp__kvlist_init(&l2);
        CHECK(ulp__attr_parse(again, &l2, NULL) == ULP_OK);
        CHECK(l2.count == l.count);
        for (size_t i = 0; i < l.count; i++) {
            CHECK(strcmp(l.items[i].key, l2.items[i].key) == 0);
            CHECK(strcmp(l.items[i].value, l2.items[i].value) == 0);
        }
        ulp__kvlist_release(&l2);
        free(again);
    }
    ulp__kvlist_release(&l);
    free(spec);
    return 0;
}
