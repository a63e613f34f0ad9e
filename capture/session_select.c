/*
 * Digests and the selection: what a capture writes under the session's
 * mode (data, digest, both) and selection (names, requests, positions),
 * decided on the calling thread before anything is queued.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest.h"
#include "format/capture_kept.h"
#include "session_internal.h"

uint64_t ulp_row_digest(const void *bytes, size_t n, int64_t position)
{
    return ulp__xxh64(bytes, n, (uint64_t)position);
}

ulp_status ulp_session_set_capture_mode(ulp_session *s, ulp_capture_mode mode)
{
    if (s == NULL ||
        (mode != ULP_CAPTURE_DATA && mode != ULP_CAPTURE_DIGEST && mode != ULP_CAPTURE_BOTH)) {
        fprintf(stderr, "ulpprof: capture mode %d without a session, or unknown: %s\n", (int)mode,
                ulp_status_str(ULP_EINVAL));
        return ULP_EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    s->mode = mode;
    pthread_mutex_unlock(&s->mu);
    return ULP_OK;
}

ulp_status ulp_session_select(ulp_session *s, const char *name, int64_t request, int64_t first,
                              int64_t last)
{
    if (s == NULL || name == NULL || name[0] == '\0' || first < 0 || last < first) {
        fprintf(stderr, "ulpprof: selection '%.200s' [%" PRId64 ", %" PRId64 "]: %s\n",
                name != NULL ? name : "(null)", first, last, ulp_status_str(ULP_EINVAL));
        return ULP_EINVAL;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return ULP_ENOMEM;
    pthread_mutex_lock(&s->mu);
    if (s->nsel == s->sel_cap) {
        size_t cap = s->sel_cap ? 2 * s->sel_cap : 8;
        ulp__select *p = realloc(s->sel, cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&s->mu);
            free(copy);
            return ULP_ENOMEM;
        }
        s->sel = p;
        s->sel_cap = cap;
    }
    s->sel[s->nsel++] = (ulp__select){copy, request, first, last};
    pthread_mutex_unlock(&s->mu);
    return ULP_OK;
}

static int parse_i64(const char *p, const char *end, int64_t *v)
{
    char buf[32];
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *e;
    errno = 0;
    long long x = strtoll(buf, &e, 10);
    if (errno != 0 || *e != '\0')
        return -1;
    *v = (int64_t)x;
    return 0;
}

/* "NAME" or "NAME@R:A-B" in [p, end). */
static ulp_status select_one(ulp_session *s, const char *p, const char *end)
{
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    int64_t r = ULP_SELECT_ANY_REQUEST, a = 0, b = INT64_MAX;
    const char *name_end = end;
    if (at != NULL) {
        const char *colon = memchr(at, ':', (size_t)(end - at));
        const char *dash = colon != NULL ? memchr(colon, '-', (size_t)(end - colon)) : NULL;
        if (colon == NULL || dash == NULL || parse_i64(at + 1, colon, &r) != 0 ||
            parse_i64(colon + 1, dash, &a) != 0 || parse_i64(dash + 1, end, &b) != 0)
            return ULP_EINVAL;
        name_end = at;
    }
    if (name_end == p)
        return ULP_EINVAL;
    char name[1024];
    size_t n = (size_t)(name_end - p);
    if (n >= sizeof(name))
        return ULP_EINVAL;
    memcpy(name, p, n);
    name[n] = '\0';
    return ulp_session_select(s, name, r, a, b);
}

ulp_status ulp_session_select_spec(ulp_session *s, const char *spec)
{
    if (s == NULL || spec == NULL)
        return ULP_EINVAL;
    const char *p = spec;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        if (end > p && select_one(s, p, end) != ULP_OK) {
            fprintf(stderr, "ulpprof: selection '%.*s': not NAME or NAME@REQUEST:FIRST-LAST\n",
                    (int)(end - p), p);
            return ULP_EINVAL;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return ULP_OK;
}

ulp_status ulp__session_mode_at_open(const char *given, ulp_capture_mode *mode, ulp_error *err)
{
    const char *name = given != NULL ? given : getenv("ULPPROF_CAPTURE_MODE");
    *mode = ULP_CAPTURE_DATA;
    if (name == NULL || (given == NULL && name[0] == '\0'))
        return ULP_OK;
    if (strcmp(name, "data") == 0)
        *mode = ULP_CAPTURE_DATA;
    else if (strcmp(name, "digest") == 0)
        *mode = ULP_CAPTURE_DIGEST;
    else if (strcmp(name, "both") == 0)
        *mode = ULP_CAPTURE_BOTH;
    else
        return ulp__error(err, ULP_EINVAL, "%s '%.40s': not data, digest or both",
                          given != NULL ? "capture_mode" : "ULPPROF_CAPTURE_MODE", name);
    return ULP_OK;
}

ulp_status ulp__session_select_env(ulp_session *s, ulp_error *err)
{
    const char *sel = getenv("ULPPROF_SELECT");
    if (sel != NULL && sel[0] != '\0' && ulp_session_select_spec(s, sel) != ULP_OK)
        return ulp__error(err, ULP_EINVAL, "ULPPROF_SELECT '%.200s' does not parse", sel);
    return ULP_OK;
}

void ulp__session_select_free(ulp_session *s)
{
    for (size_t i = 0; i < s->nsel; i++)
        free(s->sel[i].name);
    free(s->sel);
    s->sel = NULL;
    s->nsel = s->sel_cap = 0;
}

/* 1 if row (request r, position p) of `name` is selected; s->mu held. */
static int row_selected(const ulp_session *s, const char *name, int64_t r, int64_t p, int any_row)
{
    for (size_t i = 0; i < s->nsel; i++) {
        const ulp__select *e = &s->sel[i];
        if (strcmp(e->name, name) != 0)
            continue;
        if (any_row)
            return 1;
        if ((e->request == ULP_SELECT_ANY_REQUEST || e->request == r) && p >= e->first &&
            p <= e->last)
            return 1;
    }
    return 0;
}

/*
 * The selected rows of a capture with positions, gathered into one
 * buffer: data, then positions, then requests.  *sub describes them.
 */
static ulp_status gather(const ulp_session *s, const ulp__desc *d, size_t elem, ulp__desc *sub,
                         size_t *sub_bytes, void **owned, int *want)
{
    ulp__digest_shape ds = {d->ndim, d->shape, d->row_rank, d->positions};
    uint64_t rows = ulp__digest_row_count(&ds), row_elems = 1, nsel = 0;
    for (int i = d->row_rank; i < d->ndim; i++)
        row_elems *= (uint64_t)d->shape[i];
    size_t row_bytes = (size_t)(row_elems * elem);
    for (uint64_t r = 0; r < rows; r++)
        nsel += (uint64_t)row_selected(s, d->name, d->requests ? d->requests[r] : 0,
                                       d->positions[r], 0);
    if (nsel == rows)
        return ULP_OK; /* every row: the capture as it is */
    if (nsel == 0) {
        *want = 0;
        return ULP_OK;
    }
    size_t data_bytes = (size_t)nsel * row_bytes, pad = (data_bytes + 7) & ~(size_t)7;
    char *buf = malloc(pad + 2 * (size_t)nsel * sizeof(int64_t) + sizeof(int64_t) * ULP_MAX_RANK);
    if (buf == NULL)
        return ULP_ENOMEM;
    int64_t *pos = (int64_t *)(void *)(buf + pad), *req = pos + nsel, *shape = req + nsel;
    uint64_t k = 0;
    for (uint64_t r = 0; r < rows; r++) {
        int64_t rq = d->requests ? d->requests[r] : 0;
        if (!row_selected(s, d->name, rq, d->positions[r], 0))
            continue;
        memcpy(buf + k * row_bytes, (const char *)d->data + r * row_bytes, row_bytes);
        pos[k] = d->positions[r];
        req[k] = rq;
        k++;
    }
    *sub = *d;
    sub->ndim = d->ndim - d->row_rank + 1;
    shape[0] = (int64_t)nsel;
    for (int i = d->row_rank; i < d->ndim; i++)
        shape[1 + i - d->row_rank] = d->shape[i];
    sub->shape = shape;
    sub->row_rank = 1;
    sub->data = buf;
    sub->positions = pos;
    sub->requests = req;
    *sub_bytes = data_bytes;
    *owned = buf;
    return ULP_OK;
}

ulp_status ulp__session_plan(ulp_session *s, const ulp__desc *d, size_t nbytes, uint64_t **digests,
                             uint64_t *rows, int *kept, int *want_data, ulp__desc *sub,
                             size_t *sub_bytes, void **owned)
{
    *digests = NULL;
    *rows = 0;
    *kept = 0;
    *want_data = 1;
    *sub = *d;
    *sub_bytes = nbytes;
    *owned = NULL;
    pthread_mutex_lock(&s->mu);
    ulp_capture_mode mode = s->mode;
    pthread_mutex_unlock(&s->mu);
    size_t elem = ulp_dtype_size(d->dtype);
    /* The produced tokens (FORMAT.md "Produced tokens": what `ulpprof streams` reads) and the
     * fed token ids ("Parted token streams": where two streams part), a few bytes a position,
     * are kept in full in every mode and whatever the selection; in digest mode as rows of
     * /digests beside their digests, the bytes after the digests in one item. */
    int in_full = ulp__desc_kept_in_full(d);
    if (mode != ULP_CAPTURE_DATA) {
        ulp__digest_shape ds = {d->ndim, d->shape, d->row_rank, d->positions};
        uint64_t n = ulp__digest_row_count(&ds);
        size_t keep = in_full && mode == ULP_CAPTURE_DIGEST ? nbytes : 0;
        uint64_t *dg = malloc(n > 0 || keep > 0 ? (size_t)n * sizeof(uint64_t) + keep : 1);
        if (dg == NULL)
            return ULP_ENOMEM;
        ulp__digest_rows(&ds, d->data, elem, dg);
        if (keep > 0)
            memcpy(dg + n, d->data, keep);
        *digests = dg;
        *rows = n;
        if (in_full && mode == ULP_CAPTURE_DIGEST) {
            *kept = 1;
            *want_data = 0;
            return ULP_OK;
        }
    }
    if (in_full)
        return ULP_OK;
    if (mode == ULP_CAPTURE_DIGEST) {
        *want_data = 0;
        return ULP_OK;
    }
    ulp_status st = ULP_OK;
    /* The selection is set before the captures it filters; read it under the lock. */
    pthread_mutex_lock(&s->mu);
    if (s->nsel > 0) {
        if (!row_selected(s, d->name, 0, 0, 1))
            *want_data = 0;
        else if (d->positions != NULL)
            st = gather(s, d, elem, sub, sub_bytes, owned, want_data);
    }
    pthread_mutex_unlock(&s->mu);
    if (st != ULP_OK) {
        free(*digests);
        *digests = NULL;
    }
    return st;
}
