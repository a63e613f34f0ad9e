/* The capture journal's kept-capture payload codec (journal_kept.h). */
#include <string.h>

#include "journal_kept.h"

#define VARINT_MAX 10 /* bytes of a 64-bit LEB128 varint, at most */

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static uint64_t zigzag(int64_t v)
{
    return v >= 0 ? (uint64_t)v << 1 : (((uint64_t)(-(v + 1))) << 1) | 1u;
}

static int64_t unzigzag(uint64_t u)
{
    return (u & 1u) ? -(int64_t)(u >> 1) - 1 : (int64_t)(u >> 1);
}

static unsigned char *put_zigzag(unsigned char *p, int64_t v)
{
    return put_varint(p, zigzag(v));
}

/* A bounded reader of the payload: `bad` once anything ran past its end. */
typedef struct rd {
    const unsigned char *p, *end;
    int bad;
} rd;

static uint64_t get_varint(rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            r->bad = 1;
            return 0;
        }
        unsigned char b = *r->p++;
        if (shift == 63 && b > 1) { /* bits past 64 */
            r->bad = 1;
            return 0;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t get_zigzag(rd *r)
{
    return unzigzag(get_varint(r));
}

static unsigned get_u8(rd *r)
{
    if (r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    return *r->p++;
}

/* Skips `count` varints (as positions or requests); where they start in *at. */
static void skip_varints(rd *r, uint64_t count, const unsigned char **at, size_t *bytes)
{
    *at = r->p;
    /* Each takes a byte at least: a count past the bytes left is no record's. */
    if (count > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return;
    }
    for (uint64_t i = 0; i < count && !r->bad; i++)
        (void)get_varint(r);
    *bytes = (size_t)(r->p - *at);
}

size_t ulp__journal_kept_bound(const ulp__journal_kept *k, const char *const *inputs)
{
    size_t n = 2 * VARINT_MAX + 8;
    if (k->flags & ULP__JKEPT_DEFINES) {
        n += VARINT_MAX + k->name_len + 3 + 2 * VARINT_MAX;
        for (uint32_t i = 0; i < k->n_inputs; i++) {
            size_t len = strlen(inputs[i]);
            if (len > SIZE_MAX / 2 - n)
                return 0;
            n += VARINT_MAX + len;
        }
    }
    n += 2 + (size_t)ULP_MAX_RANK * VARINT_MAX + VARINT_MAX;
    if (k->rows > (SIZE_MAX / 4 - n) / (2 * VARINT_MAX))
        return 0;
    n += (size_t)k->rows * 2 * VARINT_MAX;
    n += 1 + 8 * VARINT_MAX;
    if (k->data_bytes > SIZE_MAX / 2 - n)
        return 0;
    return n + k->data_bytes;
}

size_t ulp__journal_kept_encode(unsigned char *out, const ulp__journal_kept *k,
                                const int64_t *positions, const int64_t *requests,
                                const char *const *inputs)
{
    unsigned char *p = put_varint(out, k->id);
    *p++ = (unsigned char)k->flags;
    if (k->flags & ULP__JKEPT_DEFINES) {
        p = put_varint(p, k->name_len);
        memcpy(p, k->name, k->name_len);
        p += k->name_len;
        *p++ = (unsigned char)k->dtype;
        *p++ = (unsigned char)k->role;
        *p++ = (unsigned char)(k->has_layer != 0);
        if (k->has_layer)
            p = put_zigzag(p, k->layer);
        p = put_varint(p, k->n_inputs);
        for (uint32_t i = 0; i < k->n_inputs; i++) {
            size_t len = strlen(inputs[i]);
            p = put_varint(p, len);
            memcpy(p, inputs[i], len);
            p += len;
        }
    }
    *p++ = (unsigned char)k->ndim;
    *p++ = (unsigned char)k->row_rank;
    for (int i = 0; i < k->ndim; i++)
        p = put_varint(p, (uint64_t)k->shape[i]);
    if (k->flags & ULP__JKEPT_STEP)
        p = put_zigzag(p, k->step);
    /* Deltas: a prefill's positions are consecutive (one byte each), a batch's requests too. */
    for (uint64_t i = 0; (k->flags & ULP__JKEPT_POSITIONS) && i < k->rows; i++)
        p = put_zigzag(
            p, i == 0 ? positions[0]
                      : (int64_t)((uint64_t)positions[i] - (uint64_t)positions[i - 1] - 1u));
    for (uint64_t i = 0; (k->flags & ULP__JKEPT_REQUESTS) && i < k->rows; i++)
        p = put_zigzag(p, i == 0 ? requests[0]
                                 : (int64_t)((uint64_t)requests[i] - (uint64_t)requests[i - 1]));
    if (k->flags & ULP__JKEPT_DEVICE) {
        *p++ = (unsigned char)((k->has_kernels != 0) | (k->has_gemms != 0) << 1 |
                               (k->has_graph_replay != 0) << 2);
        for (int i = 0; i < 2; i++) {
            if (k->has_kernels)
                p = put_zigzag(p, k->kernels[i]);
            if (k->has_gemms)
                p = put_zigzag(p, k->gemms[i]);
            if (k->has_graph_replay)
                p = put_zigzag(p, k->graph_replay[i]);
        }
        p = put_varint(p, k->device_ptr);
        p = put_varint(p, k->stream);
    }
    if (k->data_bytes > 0)
        memcpy(p, k->data, k->data_bytes);
    p += k->data_bytes;
    return (size_t)(p - out);
}

/* The definition fields of a record that defines its name. */
static void decode_definition(rd *r, ulp__journal_kept *k)
{
    uint64_t len = get_varint(r);
    if (r->bad || len == 0 || len > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return;
    }
    k->name = (const char *)r->p;
    k->name_len = (size_t)len;
    r->p += len;
    k->dtype = get_u8(r);
    k->role = get_u8(r);
    unsigned hl = get_u8(r);
    if (hl > 1 || k->dtype >= ULP_DTYPE_COUNT || k->role >= ULP_ROLE_COUNT) {
        r->bad = 1;
        return;
    }
    k->has_layer = (int)hl;
    if (hl) {
        int64_t layer = get_zigzag(r);
        if (layer < INT32_MIN || layer > INT32_MAX)
            r->bad = 1;
        k->layer = (int32_t)layer;
    }
    uint64_t ni = get_varint(r);
    if (r->bad || ni > (uint64_t)(r->end - r->p)) { /* a byte an input at least */
        r->bad = 1;
        return;
    }
    k->n_inputs = (uint32_t)ni;
    k->inputs = r->p;
    for (uint64_t i = 0; i < ni && !r->bad; i++) {
        uint64_t l = get_varint(r);
        if (r->bad || l > (uint64_t)(r->end - r->p))
            r->bad = 1;
        else
            r->p += l;
    }
    k->inputs_bytes = (size_t)(r->p - k->inputs);
}

/* The device fields of a record that has them. */
static void decode_device(rd *r, ulp__journal_kept *k)
{
    unsigned has = get_u8(r);
    if (has > 7) {
        r->bad = 1;
        return;
    }
    k->has_kernels = has & 1u;
    k->has_gemms = (has >> 1) & 1u;
    k->has_graph_replay = (has >> 2) & 1u;
    for (int i = 0; i < 2; i++) {
        if (k->has_kernels)
            k->kernels[i] = get_zigzag(r);
        if (k->has_gemms)
            k->gemms[i] = get_zigzag(r);
        if (k->has_graph_replay)
            k->graph_replay[i] = get_zigzag(r);
    }
    k->device_ptr = get_varint(r);
    k->stream = get_varint(r);
}

int ulp__journal_kept_decode(const unsigned char *p, size_t n, ulp__journal_kept *k)
{
    memset(k, 0, sizeof *k);
    rd r = {p, p + n, 0};
    uint64_t id = get_varint(&r);
    k->flags = get_u8(&r);
    if (r.bad || id > UINT32_MAX || k->flags > 31)
        return -1;
    k->id = (uint32_t)id;
    if (k->flags & ULP__JKEPT_DEFINES)
        decode_definition(&r, k);
    k->ndim = (int)get_u8(&r);
    k->row_rank = (int)get_u8(&r);
    if (r.bad || k->ndim > ULP_MAX_RANK || k->row_rank > k->ndim)
        return -1;
    uint64_t rows = 1;
    for (int i = 0; i < k->ndim; i++) {
        uint64_t a = get_varint(&r);
        /* An axis, and the rows, bounded by the bytes a row's position or data could take. */
        if (a > INT64_MAX || (i < k->row_rank && a > 0 && rows > (uint64_t)n / a))
            return -1;
        k->shape[i] = (int64_t)a;
        if (i < k->row_rank)
            rows *= a;
    }
    k->rows = rows;
    if (k->flags & ULP__JKEPT_STEP)
        k->step = get_zigzag(&r);
    if ((k->flags & ULP__JKEPT_REQUESTS) && !(k->flags & ULP__JKEPT_POSITIONS))
        return -1;
    if (k->flags & ULP__JKEPT_POSITIONS)
        skip_varints(&r, rows, &k->pos_code, &k->pos_bytes);
    if (k->flags & ULP__JKEPT_REQUESTS)
        skip_varints(&r, rows, &k->req_code, &k->req_bytes);
    if (k->flags & ULP__JKEPT_DEVICE)
        decode_device(&r, k);
    if (r.bad)
        return -1;
    k->data = r.p;
    k->data_bytes = (size_t)(r.end - r.p);
    return 0;
}

void ulp__journal_kept_rows(const ulp__journal_kept *k, int64_t *positions, int64_t *requests)
{
    /* No code: no rows read from it (and no arithmetic on its NULL). */
    rd a = {k->pos_code, k->pos_code != NULL ? k->pos_code + k->pos_bytes : NULL, 0};
    rd b = {k->req_code, k->req_code != NULL ? k->req_code + k->req_bytes : NULL, 0};
    int64_t p = 0, q = 0;
    for (uint64_t i = 0; i < k->rows; i++) {
        if (k->pos_code != NULL) {
            int64_t d = get_zigzag(&a);
            p = i == 0 ? d : (int64_t)((uint64_t)p + (uint64_t)d + 1u);
            if (positions != NULL)
                positions[i] = p;
        }
        if (k->req_code != NULL) {
            int64_t d = get_zigzag(&b);
            q = i == 0 ? d : (int64_t)((uint64_t)q + (uint64_t)d);
            if (requests != NULL)
                requests[i] = q;
        }
    }
}

int ulp__journal_kept_input(const unsigned char **cur, const unsigned char *end, const char **s,
                            size_t *len)
{
    rd r = {*cur, end, 0};
    uint64_t l = get_varint(&r);
    if (r.bad || l > (uint64_t)(end - r.p))
        return -1;
    *s = (const char *)r.p;
    *len = (size_t)l;
    *cur = r.p + l;
    return 0;
}
