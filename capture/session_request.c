/*
 * Requests: a capture (copied now or deferred), a /run or /env attribute,
 * a batch of kernel rows -- each checked, refused with one stderr line, or
 * built into one queue item.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_copy.h"
#include "format/capture_check.h"
#include "format/capture_rows.h"
#include "session_internal.h"
#include "ulpprof/snapshot.h"

/* Prints one line for a refused request and returns its status. */
static ulp_status refuse(ulp_status st, const char *fmt, ...) ULP__PRINTF(2, 3);

static ulp_status refuse(ulp_status st, const char *fmt, ...)
{
    char msg[ULP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ulpprof: %s: %s\n", msg, ulp_status_str(st));
    return st;
}

/*
 * The line for a request the queue did not take.  A failed session said
 * why once already (the "capture to ... failed" line): stay quiet then.
 */
static ulp_status refused_by_queue(const ulp_session *s, ulp_status st, const char *what,
                                   const char *name)
{
    /* EBUSY: from a signal handler, where stdio is not safe. */
    if (st == ULP_OK || st == ULP_EIO || st == ULP_ENOSPC || st == ULP_EBUSY || s->forked)
        return st;
    return refuse(st, "%s '%.200s' refused by '%s'", what, name, s->path);
}

#define ULP__ATTR_KEY_MAX   1024
#define ULP__ATTR_VALUE_MAX 16384

typedef struct attr_arg {
    ulp__writer_group group;
    const char *key, *value;
} attr_arg;

static void build_attr(ulp__item *it, void *arg)
{
    const attr_arg *a = arg;
    size_t nk = strlen(a->key) + 1, nv = strlen(a->value) + 1;
    memset(it, 0, sizeof(*it));
    char *p = (char *)(it + 1);
    memcpy(p, a->key, nk);
    memcpy(p + nk, a->value, nv);
    it->kind = ITEM_ATTR;
    it->group = a->group;
    it->key = p;
    it->value = p + nk;
}

static ulp_status set_attr(ulp_session *s, ulp__writer_group group, const char *key,
                           const char *value)
{
    const char *what = group == ULP__WRITER_RUN   ? "/run attribute"
                       : group == ULP__WRITER_ENV ? "/env attribute"
                                                  : "/observed attribute";
    if (s == NULL || key == NULL || key[0] == '\0' || value == NULL)
        return refuse(ULP_EINVAL, "cannot set a %s without a session, key and value", what);
    /*
     * The attribute is a fixed-length string in the group's object header,
     * whose messages HDF5 limits to 64 KiB: a longer one would fail in the
     * writer, after this call said OK.  Refuse it here.
     */
    if (strlen(key) > ULP__ATTR_KEY_MAX || strlen(value) > ULP__ATTR_VALUE_MAX)
        return refuse(ULP_EINVAL,
                      "%s '%.40s%s': key of %zu bytes or value of %zu bytes (at most %d and %d)",
                      what, key, strlen(key) > 40 ? "..." : "", strlen(key), strlen(value),
                      ULP__ATTR_KEY_MAX, ULP__ATTR_VALUE_MAX);
    attr_arg a = {group, key, value};
    size_t text = strlen(key) + strlen(value) + 2;
    return refused_by_queue(s,
                            ulp__session_enqueue(s, ULP__SESSION_ITEM_OVERHEAD + text,
                                                 sizeof(ulp__item) + text, build_attr, &a),
                            what, key);
}

ulp_status ulp_session_set_run(ulp_session *s, const char *key, const char *value)
{
    return set_attr(s, ULP__WRITER_RUN, key, value);
}

ulp_status ulp_session_set_env(ulp_session *s, const char *key, const char *value)
{
    return set_attr(s, ULP__WRITER_ENV, key, value);
}

ulp_status ulp_session_set_observed(ulp_session *s, const char *key, const char *value)
{
    return set_attr(s, ULP__WRITER_OBSERVED, key, value);
}

typedef struct capture_arg {
    ulp_session *s;
    const ulp__desc *d;
    size_t nbytes;
    ulp__item_kind kind;
    void *buf;
    int (*ready)(void *ctx);
    void (*release)(void *ctx, void *buf);
    void *ctx;
    size_t kept; /* ITEM_KEPT: the last `kept` of nbytes are the capture's */
} capture_arg;

/* Offset of the token metadata copy (capture_rows.h), after the name. */
static size_t rows_offset(size_t name_len)
{
    return (sizeof(ulp__item) + name_len + 1 + 7) & ~(size_t)7;
}

/* Payload offset inside an item allocation, aligned for any element type. */
static size_t payload_offset(size_t name_len, size_t rows_bytes)
{
    return (rows_offset(name_len) + rows_bytes + 63) & ~(size_t)63;
}

/*
 * Bytes a capture counts against the bound: its whole block (header, name,
 * payload), at least the item overhead, so that the bound is the memory the
 * queue holds.  Counting the payload alone let a flood of tiny captures
 * (512 B payload in a ~900 B block) hold twice the bound.
 */
static size_t capture_charge(size_t nbytes)
{
    return nbytes > ULP__SESSION_ITEM_OVERHEAD ? nbytes : ULP__SESSION_ITEM_OVERHEAD;
}

/* Bytes of the block for a capture item. */
static size_t capture_size(const capture_arg *a)
{
    return payload_offset(strlen(a->d->name), ulp__capture_rows_size(a->d)) +
           (a->kind != ITEM_DEFERRED ? a->nbytes : 0);
}

static void build_capture(ulp__item *it, void *arg)
{
    const capture_arg *a = arg;
    const ulp__desc *d = a->d;
    size_t name_len = strlen(d->name);
    size_t off = payload_offset(name_len, ulp__capture_rows_size(d));
    memset(it, 0, sizeof(*it));
    char *name = (char *)(it + 1);
    memcpy(name, d->name, name_len + 1);
    it->kind = a->kind;
    it->desc = *d;
    it->desc.name = name;
    it->desc.data = NULL;
    if (d->ndim > 0)
        memcpy(it->shape, d->shape, (size_t)d->ndim * sizeof(int64_t));
    it->desc.shape = it->shape;
    ulp__capture_rows_copy(&it->desc, d, (char *)it + rows_offset(name_len));
    it->nbytes = a->nbytes;
    it->kept = a->kept;
    if (a->kind != ITEM_DEFERRED) {
        if (a->nbytes > 0)
            ulp__capture_copy((char *)it + off, d->data, a->nbytes);
        it->data = (char *)it + off;
    } else {
        it->buf = a->buf;
        it->ready = a->ready;
        it->release = a->release;
        it->ctx = a->ctx;
    }
    /* The step and the time are the session's at the moment of the call. */
    if (it->desc.time_ns == 0)
        it->desc.time_ns = ulp__now_unix_ns();
    if (it->desc.step == ULP_STEP_NONE) {
        pthread_mutex_lock(&a->s->mu);
        if (a->s->has_step)
            it->desc.step = a->s->step;
        pthread_mutex_unlock(&a->s->mu);
    }
}

ulp_status ulp_session_capture(ulp_session *s, const ulp_capture_desc *d)
{
    return ulp_session_capture_ext(s, d, NULL);
}

ulp_status ulp_session_capture_ext(ulp_session *s, const ulp_capture_desc *d,
                                   const ulp_capture_device_ext *x)
{
    if (s == NULL)
        return refuse(ULP_EINVAL, "capture without a session");
    if (d == NULL)
        return refuse(ULP_EINVAL, "capture without a descriptor");
    ulp__desc full;
    if (ulp__desc_from(&full, d, x) != ULP_OK)
        return ULP_EINVAL; /* its line went to stderr */
    return ulp__session_capture(s, &full);
}

ulp_status ulp__session_capture(ulp_session *s, const ulp__desc *d)
{
    char why[400];
    size_t nbytes = 0;
    if (s == NULL)
        return refuse(ULP_EINVAL, "capture without a session");
    if (ulp__capture_check(d, &nbytes, why, sizeof(why)) != ULP_OK)
        return refuse(ULP_EINVAL, "%s", why);
    if (nbytes > 0 && d->data == NULL)
        return refuse(ULP_EINVAL, "capture '%.200s': NULL data for %zu bytes", d->name, nbytes);
    uint64_t *digests = NULL, rows = 0;
    int want_data = 1;
    ulp__desc sub;
    size_t sub_bytes = nbytes;
    int kept = 0;
    void *owned = NULL;
    ulp_status st = ulp__session_plan(s, d, nbytes, &digests, &rows, &kept, &want_data, &sub,
                                      &sub_bytes, &owned);
    if (st != ULP_OK)
        return refuse(st, "capture '%.200s': out of memory", d->name);
    if (digests != NULL) {
        ulp__desc dd = *d;
        dd.data = digests;
        /* Kept: the bytes after the digests, in the one item (ulp__session_plan). */
        capture_arg g = {s,
                         &dd,
                         (size_t)rows * 8 + (kept ? nbytes : 0),
                         kept ? ITEM_KEPT : ITEM_DIGESTS,
                         NULL,
                         NULL,
                         NULL,
                         NULL,
                         kept ? nbytes : 0};
        st = ulp__session_enqueue(s, capture_charge(capture_size(&g)), capture_size(&g),
                                  build_capture, &g);
        free(digests);
    }
    if (st == ULP_OK && want_data) {
        capture_arg a = {s, &sub, sub_bytes, ITEM_CAPTURE, NULL, NULL, NULL, NULL, 0};
        st = ulp__session_enqueue(s, capture_charge(capture_size(&a)), capture_size(&a),
                                  build_capture, &a);
    }
    free(owned);
    return refused_by_queue(s, st, "capture", d->name);
}

ulp_status ulp__session_capture_deferred(ulp_session *s, const ulp__desc *d, void *buf,
                                         size_t nbytes, int (*ready)(void *ctx),
                                         void (*release)(void *ctx, void *buf), void *ctx)
{
    char why[400];
    size_t want = 0;
    ulp_status st = ULP_OK;
    if (s == NULL) {
        st = refuse(ULP_EINVAL, "deferred capture without a session");
    } else if (ulp__capture_check(d, &want, why, sizeof(why)) != ULP_OK) {
        st = refuse(ULP_EINVAL, "%s", why);
    } else if (want != nbytes) {
        st = refuse(ULP_EINVAL, "capture '%.200s': %zu bytes given, the shape needs %zu", d->name,
                    nbytes, want);
    } else if (nbytes > 0 && buf == NULL) {
        st = refuse(ULP_EINVAL, "capture '%.200s': NULL buffer for %zu bytes", d->name, nbytes);
    } else {
        capture_arg a = {s, d, nbytes, ITEM_DEFERRED, buf, ready, release, ctx, 0};
        st = ulp__session_enqueue(s, capture_charge(capture_size(&a)), capture_size(&a),
                                  build_capture, &a);
        if (st == ULP_OK)
            return ULP_OK;
        refused_by_queue(s, st, "capture", d->name);
    }
    /* Not queued: the callbacks still run once each, here. */
    if (ready != NULL)
        ready(ctx);
    if (release != NULL)
        release(ctx, buf);
    return st;
}

typedef struct kernels_arg {
    const ulp__kernel_row *rows;
    const char *const *names;
    size_t n;
    size_t names_bytes;
} kernels_arg;

/* Layout of a kernel batch block: item, rows, name pointers, name text. */
static size_t kernels_rows_off(void)
{
    return (sizeof(ulp__item) + 15) & ~(size_t)15;
}

static size_t kernels_size(const kernels_arg *a)
{
    return kernels_rows_off() + a->n * (sizeof(ulp__kernel_row) + sizeof(char *)) + a->names_bytes;
}

static void build_kernels(ulp__item *it, void *arg)
{
    const kernels_arg *a = arg;
    size_t rows_off = kernels_rows_off();
    size_t names_off = rows_off + a->n * sizeof(ulp__kernel_row);
    size_t text_off = names_off + a->n * sizeof(char *);
    memset(it, 0, sizeof(*it));
    it->kind = ITEM_KERNELS;
    it->rows = (ulp__kernel_row *)((char *)it + rows_off);
    it->names = (const char **)(void *)((char *)it + names_off);
    it->nrows = a->n;
    memcpy(it->rows, a->rows, a->n * sizeof(ulp__kernel_row));
    char *text = (char *)it + text_off;
    for (size_t i = 0; i < a->n; i++) {
        const char *name = a->names[i] != NULL ? a->names[i] : "";
        size_t len = strlen(name) + 1;
        memcpy(text, name, len);
        it->names[i] = text;
        text += len;
    }
}

typedef struct gemms_arg {
    const ulp__gemm_row *rows;
    size_t n;
} gemms_arg;

static size_t gemms_size(const gemms_arg *a)
{
    return kernels_rows_off() + a->n * sizeof(ulp__gemm_row);
}

static void build_gemms(ulp__item *it, void *arg)
{
    const gemms_arg *a = arg;
    memset(it, 0, sizeof(*it));
    it->kind = ITEM_GEMMS;
    it->gemms = (ulp__gemm_row *)(void *)((char *)it + kernels_rows_off());
    it->nrows = a->n;
    memcpy(it->gemms, a->rows, a->n * sizeof(ulp__gemm_row));
}

ulp_status ulp__session_trace_gemms(ulp_session *s, const ulp__gemm_row *rows, size_t n)
{
    if (s == NULL)
        return refuse(ULP_EINVAL, "GEMM trace without a session");
    if (n == 0)
        return ULP_OK;
    if (rows == NULL || n > (SIZE_MAX / 4) / sizeof(ulp__gemm_row))
        return refuse(ULP_EINVAL, "GEMM trace of %zu rows without rows, or too large", n);
    gemms_arg a = {rows, n};
    size_t charge = ULP__SESSION_ITEM_OVERHEAD + n * sizeof(ulp__gemm_row);
    return refused_by_queue(s, ulp__session_enqueue(s, charge, gemms_size(&a), build_gemms, &a),
                            "GEMM batch starting with", rows[0].api);
}

/* ulp_gemm_info (the public row) and ulp__gemm_row have the same members. */
#define GEMM_COPY(name, kind, comment)                                                             \
    _Static_assert(sizeof(((ulp_gemm_info *)0)->name) == sizeof(((ulp__gemm_row *)0)->name),       \
                   "ulp_gemm_info." #name);                                                        \
    memcpy(&r->name, &g->name, sizeof r->name);

static void gemm_row_of(ulp__gemm_row *r, const ulp_gemm_info *g)
{
    ULP__GEMM_ROW_FIELDS(GEMM_COPY)
    /* The strings stay NUL-terminated whatever the caller left in them. */
    r->api[sizeof r->api - 1] = '\0';
    r->transa[sizeof r->transa - 1] = r->transb[sizeof r->transb - 1] = '\0';
    r->a_type[sizeof r->a_type - 1] = r->b_type[sizeof r->b_type - 1] = '\0';
    r->c_type[sizeof r->c_type - 1] = r->d_type[sizeof r->d_type - 1] = '\0';
    r->compute[sizeof r->compute - 1] = r->algo[sizeof r->algo - 1] = '\0';
    r->tile[sizeof r->tile - 1] = r->stages[sizeof r->stages - 1] = '\0';
    r->reduction[sizeof r->reduction - 1] = r->cluster[sizeof r->cluster - 1] = '\0';
}

size_t ulp_gemm_info_size(void)
{
    return sizeof(ulp_gemm_info);
}

ulp_status ulp_session_trace_gemms(ulp_session *s, const ulp_gemm_info *rows, size_t n)
{
    if (n == 0)
        return s == NULL ? refuse(ULP_EINVAL, "GEMM trace without a session") : ULP_OK;
    if (rows == NULL || n > (SIZE_MAX / 4) / sizeof(ulp__gemm_row))
        return refuse(ULP_EINVAL, "GEMM trace of %zu rows without rows, or too large", n);
    ulp__gemm_row *copy = malloc(n * sizeof *copy);
    if (copy == NULL)
        return refuse(ULP_ENOMEM, "GEMM trace of %zu rows: out of memory", n);
    for (size_t i = 0; i < n; i++)
        gemm_row_of(&copy[i], &rows[i]);
    ulp_status st = ulp__session_trace_gemms(s, copy, n);
    free(copy);
    return st;
}

ulp_status ulp__session_trace_kernels(ulp_session *s, const ulp__kernel_row *rows,
                                      const char *const *names, size_t n)
{
    if (s == NULL)
        return refuse(ULP_EINVAL, "kernel trace without a session");
    if (n == 0)
        return ULP_OK;
    if (rows == NULL || names == NULL)
        return refuse(ULP_EINVAL, "kernel trace of %zu rows without rows or names", n);
    if (n > (SIZE_MAX / 4) / (sizeof(ulp__kernel_row) + sizeof(char *)))
        return refuse(ULP_EINVAL, "kernel trace of %zu rows is too large", n);
    kernels_arg a = {rows, names, n, 0};
    for (size_t i = 0; i < n; i++)
        a.names_bytes += (names[i] != NULL ? strlen(names[i]) : 0) + 1;
    size_t charge =
        ULP__SESSION_ITEM_OVERHEAD + n * (sizeof(ulp__kernel_row) + sizeof(char *)) + a.names_bytes;
    return refused_by_queue(s, ulp__session_enqueue(s, charge, kernels_size(&a), build_kernels, &a),
                            "kernel batch starting with", names[0] != NULL ? names[0] : "");
}
