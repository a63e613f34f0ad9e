/*
 * libFuzzer target: ULPPROF_OUTPUT expansion, ulp__output_expand()
 * (capture/capture_env.c), against an independent expansion written here
 * from capture.h's description: %p %r %h %l expand to the pid, rank, host
 * and label, %% to '%' (an expanded value has each '/' replaced by '_', and
 * "." or ".." becomes "_" or "__", so it cannot leave the pattern's
 * directory); any other '%x' or a trailing '%' is ULP_EINVAL, an
 * empty pattern too, and a result that does not fit `size` bytes with its
 * terminator is ULP_ERANGE.
 *
 * Input: byte 0 picks the output size (1..256, or 4096), byte 1 which of the
 * variables are NULL; the rest up to the first NUL is the pattern and what
 * follows is split on NULs into the four values.  The output buffer is
 * allocated at exactly `size` bytes, so ASan sees any write past it.
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

/*
 * The reference: ULP_OK with the text, or the first problem from the left --
 * ULP_EINVAL at a bad '%', ULP_ERANGE where the text stops fitting.
 */
static ulp_status reference(const char *pat, const char *const vars[4], char *out, size_t size)
{
    if (pat[0] == '\0')
        return ULP_EINVAL;
    size_t n = 0;
    for (const char *p = pat; *p; p++) {
        const char *s = p;
        size_t len = 1;
        int value = 0;
        if (*p == '%') {
            switch (p[1]) {
            case 'p':
                s = vars[0];
                break;
            case 'r':
                s = vars[1];
                break;
            case 'h':
                s = vars[2];
                break;
            case 'l':
                s = vars[3];
                break;
            case '%':
                s = "%";
                break;
            default:
                return ULP_EINVAL;
            }
            s = s ? s : "";
            len = strlen(s);
            value = p[1] != '%';
            p++;
        }
        if (n + len + 1 > size)
            return ULP_ERANGE;
        int dots = value && (strcmp(s, ".") == 0 || strcmp(s, "..") == 0);
        for (size_t k = 0; k < len; k++)
            out[n + k] = value && (s[k] == '/' || dots) ? '_' : s[k];
        n += len;
    }
    out[n] = '\0';
    return ULP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t outsize = data[0] == 255 ? 4096 : (size_t)data[0] + 1;
    unsigned nulls = data[1];
    char *buf = malloc(size - 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 2, size - 2);
    buf[size - 2] = '\0';

    /* Pattern, then up to four values separated by NULs. */
    const char *end = buf + (size - 2);
    const char *pattern = buf;
    const char *vars[4] = {"", "", "", ""};
    const char *p = pattern + strlen(pattern);
    for (int i = 0; i < 4 && p < end; i++) {
        p++;
        vars[i] = p;
        p += strlen(p);
    }
    for (int i = 0; i < 4; i++)
        if (nulls & (1u << i))
            vars[i] = NULL;
    ulp__expand_vars v = {vars[0], vars[1], vars[2], vars[3]};

    char *out = malloc(outsize), *want = malloc(outsize);
    if (out != NULL && want != NULL) {
        ulp_error err;
        ulp_error_clear(&err);
        ulp_status st = ulp__output_expand(pattern, &v, out, outsize, &err);
        ulp_status ref = reference(pattern, vars, want, outsize);
        CHECK(st == ref);
        if (st == ULP_OK)
            CHECK(strcmp(out, want) == 0);
        else
            CHECK(err.status == st && err.msg[0] != '\0' &&
                  strnlen(err.msg, sizeof err.msg) < sizeof err.msg && out[0] == '\0');
    }
    free(out);
    free(want);
    free(buf);
    return 0;
}
