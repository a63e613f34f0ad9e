/*
 * Parser of the `ulp1` NVTX mark protocol (PROTOCOL.md beside this file).
 *
 * A mark is "ulp1|" followed by '|'-separated key=value fields.  A backslash
 * escapes '|' or '\' inside a value.  The parser is strict about what it
 * understands (a malformed field rejects the whole mark: capturing the wrong
 * bytes would be worse than capturing none) and lenient about what it does
 * not (unknown keys are ignored, so newer producers work with older
 * collectors).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "cuda_mark.h"

enum { VALUE_MAX = ULP__MARK_NAME_MAX };

/* Which keys a mark has given, to refuse duplicates. */
enum {
    SEEN_EV = 1u << 0,
    SEEN_NAME = 1u << 1,
    SEEN_PTR = 1u << 2,
    SEEN_DTYPE = 1u << 3,
    SEEN_SHAPE = 1u << 4,
    SEEN_STRIDE = 1u << 5,
    SEEN_DEV = 1u << 6,
    SEEN_STREAM = 1u << 7,
    SEEN_LAYER = 1u << 8,
    SEEN_ROLE = 1u << 9,
    SEEN_STEP = 1u << 10,
    SEEN_BYTES = 1u << 11,
    SEEN_POS = 1u << 12,
    SEEN_REQ = 1u << 13,
    SEEN_ROWS = 1u << 14,
    SEEN_IN = 1u << 15
};

typedef struct key_def {
    const char *key;
    unsigned bit;
} key_def;

static const key_def keys[] = {
    {"ev", SEEN_EV},       {"name", SEEN_NAME},     {"ptr", SEEN_PTR},   {"dtype", SEEN_DTYPE},
    {"shape", SEEN_SHAPE}, {"stride", SEEN_STRIDE}, {"dev", SEEN_DEV},   {"stream", SEEN_STREAM},
    {"layer", SEEN_LAYER}, {"role", SEEN_ROLE},     {"step", SEEN_STEP}, {"bytes", SEEN_BYTES},
    {"pos", SEEN_POS},     {"req", SEEN_REQ},       {"rows", SEEN_ROWS}, {"in", SEEN_IN},
};

/* Strict unsigned parse: decimal or 0x-hex, the whole string, no sign. */
static int parse_u64(const char *s, uint64_t *out)
{
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (*s == '\0')
        return -1;
    for (const char *p = s; *p; p++) {
        int ok = base == 16 ? ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                               (*p >= 'A' && *p <= 'F'))
                            : (*p >= '0' && *p <= '9');
        if (!ok)
            return -1;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || end == NULL || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Strict signed decimal parse of the whole string. */
static int parse_i64(const char *s, int64_t *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (*p == '\0')
        return -1;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* "8,4096" -> dims; "" -> rank 0.  Returns the rank or -1. */
static int parse_dims(const char *s, int64_t *dims, int allow_negative)
{
    if (*s == '\0')
        return 0;
    int n = 0;
    char tmp[32];
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof(tmp) || n == ULP_MAX_RANK)
            return -1;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        int64_t v;
        if (parse_i64(tmp, &v) != 0 || (!allow_negative && v < 0))
            return -1;
        dims[n++] = v;
        if (!comma)
            return n;
        s = comma + 1;
    }
}

static int valid_name(const char *s)
{
    if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '/' || *p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/*
 * Copies the value starting at `*pp` up to the next unescaped '|' into `out`
 * and advances `*pp` past the separator.  -1 on a bad escape or overflow.
 */
static int take_value(const char **pp, char *out, size_t cap)
{
    const char *p = *pp;
    size_t n = 0;
    while (*p && *p != '|') {
        char c = *p++;
        if (c == '\\') {
            if (*p != '|' && *p != '\\')
                return -1;
            c = *p++;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    if (*p == '|')
        p++;
    *pp = p;
    return 0;
}

static ulp_status bad(ulp_error *err, const char *what, const char *detail)
{
    return ulp__error(err, ULP_EINVAL, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
}

static void mark_init(ulp__mark *m)
{
    memset(m, 0, sizeof(*m));
    m->kind = ULP__MARK_NOT_OURS;
    m->dtype = ULP_DTYPE_INVALID;
    m->device = -1;
    m->layer = ULP_LAYER_NONE;
    m->role = ULP_ROLE_ACTIVATION;
    m->step = ULP_STEP_NONE;
}

/* Field values applied once every field is read, so order does not matter. */
typedef struct fields {
    char ev[32];
    int64_t rows;
    char shape[VALUE_MAX];
    char stride[VALUE_MAX];
    uint64_t bytes;
} fields;

static ulp_status parse_field(ulp__mark *m, fields *f, unsigned *seen, const char *key,
                              const char *val, ulp_error *err)
{
    unsigned bit = 0;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(keys[i].key, key) == 0)
            bit = keys[i].bit;
    if (bit == 0) {
        for (const char *p = key; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
                return bad(err, "bad key", key);
        m->unknown_keys++;
        return ULP_OK;
    }
    if (*seen & bit)
        return bad(err, "duplicate key", key);
    *seen |= bit;

    switch (bit) {
    case SEEN_EV:
        if (strlen(val) >= sizeof(f->ev))
            return bad(err, "unknown ev", val);
        strcpy(f->ev, val);
        return ULP_OK;
    case SEEN_NAME:
        if (!valid_name(val))
            return bad(err, "bad name", val);
        strcpy(m->name, val); /* take_value bounded it by VALUE_MAX */
        return ULP_OK;
    case SEEN_PTR:
        if (parse_u64(val, &m->ptr) != 0)
            return bad(err, "bad ptr", val);
        return ULP_OK;
    case SEEN_DTYPE:
        m->dtype = ulp_dtype_from_name(val);
        if (m->dtype == ULP_DTYPE_INVALID)
            return bad(err, "unknown dtype", val);
        return ULP_OK;
    case SEEN_SHAPE:
        strcpy(f->shape, val);
        return ULP_OK;
    case SEEN_STRIDE:
        strcpy(f->stride, val);
        return ULP_OK;
    case SEEN_DEV:
        if (strcmp(val, "host") == 0 || strcmp(val, "cpu") == 0) {
            m->mem = ULP__MARK_MEM_HOST;
        } else if (strcmp(val, "cuda") == 0) {
            m->mem = ULP__MARK_MEM_CUDA;
        } else if (strncmp(val, "cuda:", 5) == 0) {
            int64_t d;
            if (parse_i64(val + 5, &d) != 0 || d < 0 || d > INT_MAX)
                return bad(err, "bad dev", val);
            m->mem = ULP__MARK_MEM_CUDA;
            m->device = (int)d;
        } else {
            return bad(err, "bad dev", val);
        }
        return ULP_OK;
    case SEEN_STREAM:
        if (strcmp(val, "unknown") == 0)
            return ULP_OK;
        if (strcmp(val, "default") == 0) {
            m->has_stream = 1;
            m->stream = 0;
            return ULP_OK;
        }
        if (parse_u64(val, &m->stream) != 0)
            return bad(err, "bad stream", val);
        m->has_stream = 1;
        return ULP_OK;
    case SEEN_LAYER: {
        int64_t v;
        if (parse_i64(val, &v) != 0 || v < -1 || v > INT32_MAX)
            return bad(err, "bad layer", val);
        m->layer = (int32_t)v;
        return ULP_OK;
    }
    case SEEN_ROLE: {
        int r = ulp_role_from_name(val);
        if (r < 0)
            return bad(err, "unknown role", val);
        m->role = (ulp_role)r;
        return ULP_OK;
    }
    case SEEN_STEP:
        if (parse_i64(val, &m->step) != 0 || m->step == ULP_STEP_NONE)
            return bad(err, "bad step", val);
        return ULP_OK;
    case SEEN_BYTES:
        if (parse_u64(val, &f->bytes) != 0)
            return bad(err, "bad bytes", val);
        return ULP_OK;
    case SEEN_POS:
        strcpy(m->pos, val);
        return ULP_OK;
    case SEEN_REQ:
        strcpy(m->req, val);
        return ULP_OK;
    case SEEN_ROWS:
        if (parse_i64(val, &f->rows) != 0 || f->rows < 1 || f->rows > ULP_MAX_RANK)
            return bad(err, "bad rows", val);
        return ULP_OK;
    case SEEN_IN:
        strcpy(m->inputs, val);
        return ULP_OK;
    }
    return ULP_OK;
}

/*
 * An integer list: items "N" or "A-B" (A <= B, inclusive) separated by ','.
 * Returns the number of values, or UINT64_MAX when malformed; a position
 * list (`nonneg`) refuses negative values.
 */
static uint64_t list_count(const char *s, int nonneg)
{
    uint64_t count = 0;
    char tmp[48];
    if (*s == '\0')
        return UINT64_MAX;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof(tmp))
            return UINT64_MAX;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        /* A range's dash follows a digit: "-3" is a value, "2-5" and "-3--1" ranges. */
        char *dash = NULL;
        for (char *p = tmp + 1; *p && dash == NULL; p++)
            if (*p == '-' && p[-1] >= '0' && p[-1] <= '9')
                dash = p;
        int64_t lo, hi;
        if (dash != NULL) {
            *dash = '\0';
            if (parse_i64(tmp, &lo) != 0 || parse_i64(dash + 1, &hi) != 0 || hi < lo ||
                (uint64_t)(hi - lo) >= (UINT64_MAX >> 2))
                return UINT64_MAX;
        } else if (parse_i64(tmp, &lo) != 0) {
            return UINT64_MAX;
        } else {
            hi = lo;
        }
        if (nonneg && lo < 0)
            return UINT64_MAX;
        count += (uint64_t)(hi - lo) + 1;
        if (count >= (UINT64_MAX >> 2))
            return UINT64_MAX;
        if (!comma)
            return count;
        s = comma + 1;
    }
}

void ulp__mark_list_expand(const char *list, int64_t *out, uint64_t n)
{
    uint64_t k = 0;
    const char *s = list;
    char tmp[48];
    while (k < n && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        memcpy(tmp, s, len < sizeof(tmp) ? len : sizeof(tmp) - 1);
        tmp[len < sizeof(tmp) ? len : sizeof(tmp) - 1] = '\0';
        char *dash = NULL;
        for (char *p = tmp + 1; *p && dash == NULL; p++)
            if (*p == '-' && p[-1] >= '0' && p[-1] <= '9')
                dash = p;
        int64_t lo = 0, hi;
        if (dash != NULL)
            *dash = '\0';
        parse_i64(tmp, &lo);
        hi = lo;
        if (dash != NULL)
            parse_i64(dash + 1, &hi);
        for (int64_t v = lo; v <= hi && k < n; v++)
            out[k++] = v;
        if (!comma)
            break;
        s = comma + 1;
    }
    /* One value for every row. */
    for (uint64_t i = k; k == 1 && i < n; i++)
        out[i] = out[0];
}

/* Checks pos/req/rows/in against the shape (PROTOCOL.md "Tokens"). */
static ulp_status finish_tokens(ulp__mark *m, const fields *f, unsigned seen, ulp_error *err)
{
    if (seen & SEEN_IN) {
        m->n_inputs = 1;
        for (const char *p = m->inputs; *p; p++)
            m->n_inputs += *p == ',';
        char tmp[ULP__MARK_NAME_MAX];
        strcpy(tmp, m->inputs);
        for (char *tok = tmp, *next; tok != NULL; tok = next) {
            next = strchr(tok, ',');
            if (next != NULL)
                *next++ = '\0';
            if (!valid_name(tok) || m->n_inputs > ULP__MARK_MAX_INPUTS)
                return bad(err, "bad input name in", m->inputs);
        }
    }
    if (!(seen & SEEN_POS)) {
        if (seen & (SEEN_REQ | SEEN_ROWS))
            return bad(err, "req or rows without pos", NULL);
        return ULP_OK;
    }
    int rank = (seen & SEEN_ROWS) ? (int)f->rows : 1;
    if (rank > m->ndim)
        return bad(err, "rows exceeds the tensor's rank", NULL);
    uint64_t rows = 1;
    for (int i = 0; i < rank; i++)
        rows *= (uint64_t)m->shape[i];
    /* The most rows a capture's positions attribute holds (capture.h). */
    if (rows > ULP__MARK_MAX_ROWS)
        return bad(err, "more rows than positions can be given for", NULL);
    uint64_t np = list_count(m->pos, 1);
    if (np == UINT64_MAX)
        return bad(err, "bad pos", m->pos);
    if (np != rows)
        return bad(err, "pos does not give one position per row", m->pos);
    if (seen & SEEN_REQ) {
        uint64_t nr = list_count(m->req, 0);
        if (nr == UINT64_MAX || (nr != rows && nr != 1))
            return bad(err, "bad req (one value, or one per row)", m->req);
    }
    m->row_rank = rank;
    m->rows = rows;
    return ULP_OK;
}

/* Checks a capture's shape, size and strides once all fields are known. */
static ulp_status finish_capture(ulp__mark *m, const fields *f, unsigned seen, ulp_error *err)
{
    if (!(seen & SEEN_NAME))
        return bad(err, "missing name", NULL);
    if (!(seen & SEEN_DTYPE))
        return bad(err, "missing dtype", NULL);
    if (!(seen & SEEN_SHAPE))
        return bad(err, "missing shape", NULL);
    int nd = parse_dims(f->shape, m->shape, 0);
    if (nd < 0)
        return bad(err, "bad shape", f->shape);
    m->ndim = nd;
    uint64_t elements = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t d = (uint64_t)m->shape[i];
        if (d != 0 && elements > (UINT64_MAX >> 1) / d)
            return bad(err, "shape too large", f->shape);
        elements *= d;
    }
    size_t esize = ulp_dtype_size(m->dtype);
    if (elements > (UINT64_MAX >> 1) / esize)
        return bad(err, "shape too large", f->shape);
    m->elements = elements;
    m->nbytes = elements * esize;
    if ((seen & SEEN_BYTES) && f->bytes != m->nbytes)
        return bad(err, "bytes do not match shape and dtype", NULL);
    if (m->nbytes > 0 && !(seen & SEEN_PTR))
        return bad(err, "missing ptr", NULL);
    if (m->nbytes > 0 && m->ptr == 0)
        return bad(err, "null ptr", NULL);
    if (m->nbytes > 0 && m->ptr > UINT64_MAX - m->nbytes)
        return bad(err, "ptr + bytes overflows", NULL);
    if (seen & SEEN_STRIDE) {
        int64_t strides[ULP_MAX_RANK];
        int ns = parse_dims(f->stride, strides, 1);
        if (ns != nd)
            return bad(err, "stride rank does not match shape", f->stride);
        /* Only row-major contiguous tensors are captured; an axis of extent
         * 1 may carry any stride (PyTorch leaves them arbitrary). */
        /* An empty tensor has no layout to check, and its other extents may
         * be huge: multiplying them would overflow. */
        int64_t want = 1;
        for (int i = nd - 1; i >= 0 && elements != 0; i--) {
            if (m->shape[i] != 1 && strides[i] != want)
                return bad(err, "tensor is not contiguous", f->stride);
            want *= m->shape[i] > 0 ? m->shape[i] : 1;
        }
    }
    if (m->mem == ULP__MARK_MEM_HOST && (seen & SEEN_STREAM))
        m->has_stream = 0; /* host memory needs no stream */
    ulp_status st = finish_tokens(m, f, seen, err);
    if (st != ULP_OK)
        return st;
    m->kind = ULP__MARK_CAPTURE;
    return ULP_OK;
}

ulp_status ulp__mark_parse(const char *msg, ulp__mark *out, ulp_error *err)
{
    mark_init(out);
    if (msg == NULL)
        return ULP_OK;
    size_t plen = strlen(ULP__MARK_PREFIX);
    if (strncmp(msg, ULP__MARK_PREFIX, plen) != 0) {
        /* "ulp2|..." is ours but from a newer protocol: say so. */
        const char *p = msg;
        if (strncmp(p, "ulp", 3) == 0) {
            p += 3;
            const char *digits = p;
            while (*p >= '0' && *p <= '9')
                p++;
            if (p > digits && *p == '|')
                return bad(err, "unsupported protocol version", NULL);
        }
        if (strcmp(msg, "ulp1") == 0)
            return bad(err, "empty mark", NULL);
        return ULP_OK;
    }
    if (strnlen(msg, ULP__MARK_MAX_LEN + 1) > ULP__MARK_MAX_LEN)
        return bad(err, "mark too long", NULL);

    fields f;
    memset(&f, 0, sizeof(f));
    unsigned seen = 0;
    const char *p = msg + plen;
    char field[VALUE_MAX + 64];
    while (*p) {
        if (take_value(&p, field, sizeof(field)) != 0)
            return bad(err, "bad escape or field too long", NULL);
        if (field[0] == '\0')
            continue; /* "a=1||b=2" or a trailing '|' */
        char *eq = strchr(field, '=');
        if (eq == NULL || eq == field)
            return bad(err, "field without key=value", field);
        *eq = '\0';
        if (strlen(eq + 1) >= VALUE_MAX)
            return bad(err, "value too long", field);
        ulp_status st = parse_field(out, &f, &seen, field, eq + 1, err);
        if (st != ULP_OK)
            return st;
    }

    if (f.ev[0] == '\0' || strcmp(f.ev, "capture") == 0)
        return finish_capture(out, &f, seen, err);
    if (strcmp(f.ev, "step") == 0) {
        if (!(seen & SEEN_STEP))
            return bad(err, "missing step", NULL);
        out->kind = ULP__MARK_STEP;
        return ULP_OK;
    }
    return bad(err, "unknown ev", f.ev);
}
