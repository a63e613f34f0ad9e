/* ULPPROF_OUTPUT expansion, ULPPROF_ATTR parsing and /env facts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture_env.h"
#include "common/error.h"
#include "common/grow.h"

/* --- key/value list ------------------------------------------------------------ */

void ulp__kvlist_init(ulp__kvlist *l)
{
    memset(l, 0, sizeof(*l));
}

void ulp__kvlist_release(ulp__kvlist *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

const char *ulp__kvlist_get(const ulp__kvlist *l, const char *key)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].key, key) == 0)
            return l->items[i].value;
    return NULL;
}

ulp_status ulp__kvlist_set(ulp__kvlist *l, const char *key, const char *value)
{
    char *v = strdup(value);
    if (v == NULL)
        return ULP_ENOMEM;
    for (size_t i = 0; i < l->count; i++) {
        if (strcmp(l->items[i].key, key) == 0) {
            free(l->items[i].value);
            l->items[i].value = v;
            return ULP_OK;
        }
    }
    if (ULP__GROW(l->items, l->cap, l->count + 1) != 0) {
        free(v);
        return ULP_ENOMEM;
    }
    char *k = strdup(key);
    if (k == NULL) {
        free(v);
        return ULP_ENOMEM;
    }
    l->items[l->count].key = k;
    l->items[l->count].value = v;
    l->count++;
    return ULP_OK;
}

/* --- ULPPROF_OUTPUT -------------------------------------------------------------- */

ulp_status ulp__output_expand(const char *pattern, const ulp__expand_vars *v, char *out,
                              size_t size, ulp_error *err)
{
    if (out == NULL || size == 0)
        return ulp__error(err, ULP_EINVAL, "no room for the output path");
    out[0] = '\0';
    if (pattern == NULL || pattern[0] == '\0')
        return ulp__error(err, ULP_EINVAL, "empty output path");
    size_t len = 0;
    for (const char *p = pattern; *p; p++) {
        const char *piece;
        size_t n;
        int sanitize = 0;
        char c = *p;
        if (c != '%') {
            piece = p;
            n = 1;
        } else {
            const char *s = NULL;
            switch (p[1]) {
            case 'p':
                s = v != NULL ? v->pid : NULL;
                break;
            case 'r':
                s = v != NULL ? v->rank : NULL;
                break;
            case 'h':
                s = v != NULL ? v->host : NULL;
                break;
            case 'l':
                s = v != NULL ? v->label : NULL;
                break;
            case '%':
                s = "%";
                break;
            case '\0':
                out[0] = '\0'; /* no partial path on error, as for ULP_ERANGE */
                return ulp__error(err, ULP_EINVAL, "output path '%s' ends with a lone '%%'",
                                  pattern);
            default:
                out[0] = '\0';
                return ulp__error(err, ULP_EINVAL,
                                  "output path '%s': unknown expansion '%%%c' (use %%p %%r %%h "
                                  "%%l or %%%%)",
                                  pattern, p[1]);
            }
            piece = s != NULL ? s : "";
            n = strlen(piece);
            sanitize = p[1] != '%';
            p++;
        }
        if (n >= size - len) {
            out[0] = '\0';
            return ulp__error(err, ULP_ERANGE, "output path '%s' expands to more than %zu bytes",
                              pattern, size - 1);
        }
        memcpy(out + len, piece, n);
        /*
         * A value (RANK, the host name, the label: set by whoever starts the
         * program) names a file inside the pattern's directory, never a way
         * out of it: '/' becomes '_', and "." or ".." becomes "_" or "__".
         */
        if (sanitize) {
            int dots = n > 0 && n <= 2 && strspn(piece, ".") == n;
            for (size_t k = 0; k < n; k++)
                if (out[len + k] == '/' || dots)
                    out[len + k] = '_';
        }
        len += n;
    }
    out[len] = '\0';
    return ULP_OK;
}

/* --- ULPPROF_ATTR -------------------------------------------------------------------- */

/* A growing string that remembers where its unescaped trailing blanks start. */
typedef struct field {
    char *buf;
    size_t len, cap;
    size_t keep; /* length up to the last character that is not trimmed */
} field;

static int field_push(field *f, char c, int escaped)
{
    int blank = !escaped && (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    if (f->len == 0 && blank)
        return 0; /* leading blanks */
    if (ULP__GROW(f->buf, f->cap, f->len + 2) != 0)
        return -1;
    f->buf[f->len++] = c;
    if (!blank)
        f->keep = f->len;
    return 0;
}

static const char *field_str(field *f)
{
    if (f->buf == NULL)
        return "";
    f->buf[f->keep] = '\0';
    return f->buf;
}

static void field_reset(field *f)
{
    f->len = f->keep = 0;
}

ulp_status ulp__attr_parse(const char *spec, ulp__kvlist *out, ulp_error *err)
{
    if (spec == NULL)
        return ULP_OK;
    field key = {0}, value = {0};
    ulp_status st = ULP_OK;
    int in_value = 0;   /* past this item's '='                       */
    int item_chars = 0; /* the item holds something besides blanks     */
    const char *item_start = spec;
    for (const char *p = spec;; p++) {
        char c = *p;
        if (c == ',' || c == '\0') {
            if (in_value) {
                if (key.keep == 0) {
                    st = ulp__error(err, ULP_EINVAL, "ULPPROF_ATTR item '%.*s' has an empty key",
                                    (int)(p - item_start), item_start);
                    goto cleanup;
                }
                /* field_str writes a terminator: take the key first. */
                char *k = strdup(field_str(&key));
                if (k == NULL) {
                    st = ulp__error(err, ULP_ENOMEM, "out of memory");
                    goto cleanup;
                }
                st = ulp__kvlist_set(out, k, field_str(&value));
                free(k);
                if (st != ULP_OK) {
                    st = ulp__error(err, st, "out of memory");
                    goto cleanup;
                }
            } else if (item_chars) {
                st = ulp__error(err, ULP_EINVAL, "ULPPROF_ATTR item '%.*s' has no '='",
                                (int)(p - item_start), item_start);
                goto cleanup;
            }
            if (c == '\0')
                break;
            field_reset(&key);
            field_reset(&value);
            in_value = 0;
            item_chars = 0;
            item_start = p + 1;
            continue;
        }
        int escaped = 0;
        if (c == '\\' && (p[1] == ',' || p[1] == '=' || p[1] == '\\')) {
            c = *++p;
            escaped = 1;
        }
        if (c == '=' && !escaped && !in_value) {
            in_value = 1;
            item_chars = 1;
            continue;
        }
        if (escaped || (c != ' ' && c != '\t' && c != '\n' && c != '\r'))
            item_chars = 1;
        if (field_push(in_value ? &value : &key, c, escaped) < 0) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            goto cleanup;
        }
    }

cleanup:
    free(key.buf);
    free(value.buf);
    return st;
}

/* --- environment ----------------------------------------------------------------------- */

const char *ulp__getenv_process(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

const char *ulp__env_rank(ulp__getenv_fn get, void *ctx)
{
    static const char *const names[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = get(names[i], ctx);
        if (v != NULL && v[0] != '\0')
            return v;
    }
    return "0";
}

/*
 * Variables that change what a numerical library computes or in which
 * order it reduces: thread counts (BLAS split K differently), kernel
 * selection, TF32, workspace and determinism switches, reduction algorithms.
 */
const char *const ulp__env_numerics[] = {
    "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "GOTO_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_DYNAMIC",
    "MKL_NUM_THREADS",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DYNAMIC",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "KMP_AFFINITY",
    "KMP_DETERMINISTIC_REDUCTION",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "XLA_FLAGS",
    "TF_DETERMINISTIC_OPS",
    "PYTHONHASHSEED",
    NULL,
};

ulp_status ulp__env_collect(ulp__getenv_fn get, void *ctx, const char *host, const char *pid,
                            const char *rank, ulp__kvlist *out)
{
    ulp_status st = ULP_OK;
    if (host != NULL && (st = ulp__kvlist_set(out, "hostname", host)) != ULP_OK)
        return st;
    if (pid != NULL && (st = ulp__kvlist_set(out, "pid", pid)) != ULP_OK)
        return st;
    if (rank != NULL && (st = ulp__kvlist_set(out, "rank", rank)) != ULP_OK)
        return st;
    for (size_t i = 0; ulp__env_numerics[i] != NULL; i++) {
        const char *v = get(ulp__env_numerics[i], ctx);
        if (v == NULL)
            continue;
        char key[64];
        size_t n = strlen(ulp__env_numerics[i]);
        if (n + 5 > sizeof(key))
            continue;
        memcpy(key, "env:", 4);
        memcpy(key + 4, ulp__env_numerics[i], n + 1);
        if ((st = ulp__kvlist_set(out, key, v)) != ULP_OK)
            return st;
    }
    return ULP_OK;
}
