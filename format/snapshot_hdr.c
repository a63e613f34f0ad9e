/*
 * A capture described from its object header's bytes (snapshot_hdr.h).
 *
 * A file without the capture index (h5py's, h5repack's, another tool's)
 * is read through its groups, and HDF5's per-dataset cost -- opening the
 * dataset (two property lists copied), its type, space and creation list,
 * a lookup by name for each of a dozen attributes, most of them absent --
 * was ~80 us a capture: 10,000 captures of 32 KiB diffed at 15x `cat`.
 * The header of such a dataset is a few hundred bytes in the mapped file,
 * and holds all of it.  This reads it in one pass for the common case and
 * answers 0 for anything else, which HDF5 then reads as before: so a file
 * this accepts gives what HDF5 would give, and one it does not is read (and
 * refused, with the same message) exactly as before.  The token
 * attributes (`positions`, `requests`, `inputs`: on nearly every capture of
 * an engine's or a user's file) are read here too when they are integers
 * and strings of the kinds above, with snapshot_rows.c's checks; a
 * refused value goes to HDF5, which names it.
 *
 * Layouts (HDF5 file format, "Data Object Headers", as snapshot_ohdr.c):
 *   version 1 header: u8 1, u8 0, u16 messages, u32 refcount, u32 size of
 *     the first chunk, 4 bytes of padding; messages: u16 type, u16 size,
 *     u8 flags (0x02: shared), 3 reserved, data;
 *   dataspace (0x01): u8 version (1, 2), u8 rank, u8 flags, then 5
 *     reserved bytes (version 1) or u8 type (version 2: 0 scalar, 1 simple,
 *     2 null), then rank extents of `sl` bytes;
 *   datatype (0x03): u8 class (low 4 bits) and version, 3 bytes of class
 *     bits (fixed-point and float: bit 0 big-endian, float bit 6 VAX
 *     order; string: padding in bits 0-3; variable-length: bits 0-3 1 for a
 *     string), u32 size; fixed-point properties u16 bit offset, u16
 *     precision;
 *   layout (0x08), version 3 or 4: u8 version, u8 class (1 contiguous),
 *     address (`sa`), size (`sl`);
 *   attribute (0x0C): as snapshot_ohdr.c; its value always follows in the
 *     message (an attribute has no other storage), its elements in row
 *     order: an integer array (h5py's numpy int64, int32, ... `positions`,
 *     kept so by h5repack) is `points` values of the type's size, a
 *     variable-length string (h5py's str, and each element of an array of
 *     them: `inputs`) is u32 length, global heap collection address, u32
 *     object index;
 *   global heap collection: "GCOL", u8 1, 3 reserved, size (`sl`); objects
 *     of u16 index, u16 refcount, 4 reserved, size (`sl`), data padded to 8
 *     bytes; index 0 is the free space that ends it;
 *   external files (0x07), filters (0x0B), attribute info (0x15: perhaps
 *     dense storage) and groups' messages (0x02, 0x11): not read here.
 */
#include "snapshot_hdr.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "row_key.h"
#include "ulpprof/dtype.h"

#define MSG_DATASPACE    0x01
#define MSG_LINK_INFO    0x02
#define MSG_DATATYPE     0x03
#define MSG_EXTERNAL     0x07
#define MSG_LAYOUT       0x08
#define MSG_FILTERS      0x0B
#define MSG_ATTRIBUTE    0x0C
#define MSG_CONTINUATION 0x10
#define MSG_SYMBOL_TABLE 0x11
#define MSG_ATTR_INFO    0x15
#define MAX_CHUNKS       16         /* a header of more chunks goes to HDF5 */
#define MAX_CHUNK_BYTES  (64 << 10) /* so does a larger chunk */
#define MAX_STRING       4096       /* a longer string attribute goes to HDF5 */

static uint64_t le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

/* One read header: the copies of its bytes. */
typedef struct hdr {
    ulp__hdr_file *f;
    unsigned char *buf[MAX_CHUNKS + 1]; /* pread copies, freed at the end */
    size_t nbuf;
    int oom;
} hdr;

/*
 * n bytes at HDF5 address `addr`, read with pread(2) (a fault on the
 * mapping would map the pages around the header too: 10,000 headers
 * between 32 KiB datasets left most of the file mapped), or NULL (outside
 * the file, too large, no memory: *oom).
 */
static unsigned char *bytes_at(hdr *h, uint64_t addr, uint64_t n, uint64_t *got)
{
    const ulp__hdr_src *src = &h->f->src;
    uint64_t off = h->f->base + addr;
    if (off < addr || n == 0 || n > MAX_CHUNK_BYTES || off > src->size)
        return NULL;
    if (got != NULL && src->size - off < n)
        n = src->size - off; /* a guess at the length: what the file has */
    if (n == 0 || src->size - off < n || h->nbuf == sizeof h->buf / sizeof h->buf[0])
        return NULL;
    unsigned char *b = malloc((size_t)n);
    if (b == NULL) {
        h->oom = 1;
        return NULL;
    }
    if (src->read(src->ctx, b, (size_t)n, off) < 0) {
        free(b);
        return NULL;
    }
    if (got != NULL)
        *got = n;
    return h->buf[h->nbuf++] = b;
}

/* What the header says, before it is checked and turned into a capture. */
typedef struct found {
    const unsigned char *space, *type, *layout;
    uint64_t space_len, type_len, layout_len;
    /* the attributes: value (in the header), type, count of elements */
    struct attr {
        const char *name;
        const unsigned char *type, *value, *space;
        uint64_t type_len, value_len, space_len, points;
    } attrs[24];
    size_t nattrs;
} found;

/* Elements of the dataspace at p[0..len): 1 with *points (and dims, *rank), or 0. */
static int read_space(const ulp__hdr_file *f, const unsigned char *p, uint64_t len,
                      uint64_t *points, uint64_t *dims, int *rank)
{
    if (len < 8 || (p[0] != 1 && p[0] != 2))
        return 0;
    unsigned r = p[1];
    uint64_t at = p[0] == 1 ? 8 : 4;
    if (r > ULP_SNAPSHOT_MAX_RANK || at + (uint64_t)r * f->sl > len)
        return 0;
    if (p[0] == 2 && p[3] != (r == 0 ? 0 : 1))
        return 0; /* a null dataspace, or a type that does not match the rank */
    uint64_t n = 1;
    for (unsigned i = 0; i < r; i++) {
        uint64_t d = le(p + at + (uint64_t)i * f->sl, f->sl);
        if (d > ULP__MAX_ELEMENTS || (n != 0 && d > ULP__MAX_ELEMENTS / n))
            return 0; /* absurd: HDF5's reading says so */
        if (dims != NULL)
            dims[i] = d;
        n *= d;
    }
    *points = n;
    if (rank != NULL)
        *rank = (int)r;
    return 1;
}

/* Walks the messages of one chunk; 0 when a message is one this does not read. */
static int walk(hdr *h, found *fd, const unsigned char *c, uint64_t len, uint64_t chunks[][2],
                size_t *nchunks)
{
    const ulp__hdr_file *f = h->f;
    uint64_t p = 0;
    while (len - p >= 8) {
        const unsigned char *m = c + p;
        unsigned type = (unsigned)le(m, 2);
        uint64_t size = le(m + 2, 2);
        if (size > len - p - 8)
            return 0;
        const unsigned char *d = m + 8;
        if ((m[4] & 0x02) != 0 && type != 0)
            return 0; /* shared message */
        switch (type) {
        case MSG_DATASPACE:
            fd->space = d, fd->space_len = size;
            break;
        case MSG_DATATYPE:
            fd->type = d, fd->type_len = size;
            break;
        case MSG_LAYOUT:
            fd->layout = d, fd->layout_len = size;
            break;
        case MSG_LINK_INFO:
        case MSG_EXTERNAL:
        case MSG_FILTERS:
        case MSG_SYMBOL_TABLE:
        case MSG_ATTR_INFO:
            return 0;
        case MSG_CONTINUATION:
            if (size < (uint64_t)f->sa + f->sl || *nchunks == MAX_CHUNKS)
                return 0;
            chunks[*nchunks][0] = le(d, f->sa);
            chunks[*nchunks][1] = le(d + f->sa, f->sl);
            (*nchunks)++;
            break;
        case MSG_ATTRIBUTE: {
            if (size < 8 || d[0] < 1 || d[0] > 3 ||
                fd->nattrs == sizeof fd->attrs / sizeof fd->attrs[0])
                return 0;
            if (d[0] > 1 && (d[1] & 0x3) != 0)
                return 0; /* shared datatype or dataspace */
            int pad = d[0] == 1;
            uint64_t nsz = le(d + 2, 2), tsz = le(d + 4, 2), ssz = le(d + 6, 2);
            uint64_t name_at = d[0] == 3 ? 9 : 8;
            uint64_t type_at = name_at + (pad ? (nsz + 7) & ~7u : nsz);
            uint64_t space_at = type_at + (pad ? (tsz + 7) & ~7u : tsz);
            uint64_t value_at = space_at + (pad ? (ssz + 7) & ~7u : ssz);
            if (nsz < 2 || tsz < 8 || value_at > size || d[name_at + nsz - 1] != '\0' ||
                memchr(d + name_at, '\0', nsz - 1) != NULL)
                return 0;
            struct attr *a = &fd->attrs[fd->nattrs++];
            a->name = (const char *)d + name_at;
            a->type = d + type_at;
            a->value = d + value_at;
            a->type_len = tsz;
            a->value_len = size - value_at;
            a->space = d + space_at;
            a->space_len = ssz;
            if (!read_space(f, d + space_at, ssz, &a->points, NULL, NULL))
                return 0;
            /* every attribute holds the value it declares (snapshot_ohdr.c refuses it) */
            uint64_t elem = (a->type[0] & 0x0f) == 9 ? 4u + f->sa + 4u : le(a->type + 4, 4);
            if (elem != 0 && a->points > a->value_len / elem)
                return 0;
            for (size_t i = 0; i + 1 < fd->nattrs; i++)
                if (strcmp(fd->attrs[i].name, a->name) == 0)
                    return 0;
            break;
        }
        default:
            if (type > 0x18)
                return 0; /* a message HDF5 does not know either */
            break;        /* fill value, times, padding (0), ...: nothing the reader uses */
        }
        p += 8 + size;
    }
    return 1;
}

static const struct attr *attr_find(const found *fd, const char *name)
{
    for (size_t i = 0; i < fd->nattrs; i++)
        if (strcmp(fd->attrs[i].name, name) == 0)
            return &fd->attrs[i];
    return NULL;
}

/*
 * `n` integers of attribute `name` as HDF5 reads them into int64 (or
 * uint64 when !want_signed): 1 absent, 0 read, -1 not read here.
 */
/* The size of a's elements when they are little-endian integers of 1..8
 * bytes without padding bits, holding a->points of them; else 0. */
static unsigned int_size(const struct attr *a)
{
    const unsigned char *t = a->type;
    unsigned size = (unsigned)le(t + 4, 4);
    if (a->type_len < 12 || (t[0] & 0x0f) != 0 || (t[1] & 0x01) != 0 || size < 1 || size > 8 ||
        a->value_len / size < a->points)
        return 0;
    /* properties: bit offset 0, precision the whole size (no padding bits) */
    if (le(t + 8, 2) != 0 || le(t + 10, 2) != 8u * size)
        return 0;
    return size;
}

static int attr_ints(const found *fd, const char *name, int64_t *out, uint64_t n, int want_signed)
{
    const struct attr *a = attr_find(fd, name);
    if (a == NULL)
        return 1;
    const unsigned char *t = a->type;
    unsigned size = int_size(a);
    if (size == 0 || a->points != n)
        return -1;
    int file_signed = (t[1] & 0x08) != 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = le(a->value + i * size, size);
        if (file_signed && size < 8 && (v >> (8 * size - 1)) != 0)
            v |= ~(uint64_t)0 << (8 * size); /* sign-extended */
        if (want_signed && !file_signed && v > (uint64_t)INT64_MAX)
            return -1;
        if (!want_signed && file_signed && (int64_t)v < 0)
            return -1;
        out[i] = (int64_t)v;
    }
    return 0;
}

/* Indexes the objects of the collection c[0..size) into f: 1, 0 (damaged), -2. */
static int heap_index(ulp__hdr_file *f, uint64_t addr, const unsigned char *c, uint64_t size)
{
    uint64_t head = 8 + f->sl;
    free(f->heap_at);
    f->heap_at = NULL;
    f->heap_n = 0;
    f->heap = 0;
    /* an object takes at least `head` bytes: at most size / head of them */
    size_t cap = (size_t)(size / head) + 1;
    if ((f->heap_at = calloc(cap, sizeof *f->heap_at)) == NULL)
        return -2;
    for (uint64_t p = head; size - p >= head;) {
        uint64_t idx = le(c + p, 2), osz = le(c + p + 8, f->sl);
        if (idx == 0)
            break; /* the free space ends it */
        /* the object, padded to 8 bytes, inside the collection (else the
         * next one would be read past its end) */
        if (osz > size - p - head || ((osz + 7) & ~(uint64_t)7) > size - p - head || idx >= cap ||
            f->heap_at[idx] != 0) {
            free(f->heap_at);
            f->heap_at = NULL;
            return 0;
        }
        f->heap_at[idx] = (uint32_t)p;
        p += head + ((osz + 7) & ~(uint64_t)7);
    }
    f->heap = addr;
    f->heap_n = cap;
    return 1;
}

/* The global heap object `index` of the collection at `addr`: its bytes, or NULL. */
static const unsigned char *heap_object(hdr *h, uint64_t addr, uint64_t index, uint64_t *len,
                                        int *oom)
{
    ulp__hdr_file *f = h->f;
    if (f->heap != addr || f->heap_at == NULL) {
        const unsigned char *c = bytes_at(h, addr, 8 + f->sl, NULL);
        if (c == NULL || memcmp(c, "GCOL", 4) != 0 || c[4] != 1) {
            *oom = h->oom;
            return NULL;
        }
        uint64_t size = le(c + 8, f->sl);
        unsigned char *whole;
        if (size < 8 + f->sl || (whole = bytes_at(h, addr, size, NULL)) == NULL) {
            *oom = h->oom;
            return NULL;
        }
        int rc = heap_index(f, addr, whole, size);
        *oom = rc == -2;
        if (rc != 1)
            return NULL;
        /* the collection's bytes move from the header's buffers to f */
        free(f->heap_bytes);
        f->heap_bytes = whole;
        f->heap_size = size;
        h->buf[--h->nbuf] = NULL;
    }
    if (index == 0 || index >= f->heap_n || f->heap_at[index] == 0)
        return NULL;
    uint64_t p = f->heap_at[index];
    *len = le(f->heap_bytes + p + 8, f->sl);
    return f->heap_bytes + p + 8 + f->sl;
}

/*
 * String `i` of attribute `a` as HDF5 hands it to ulp__attr_read_str() and
 * ulp__attr_read_str_array() before they copy it: *v, *n its bytes up to
 * the first NUL (a fixed-length string space-padded: trailing spaces
 * trimmed).  0, -1 (not read here), -2 out of memory.
 */
static int attr_string_at(hdr *h, const struct attr *a, uint64_t i, const unsigned char **v,
                          uint64_t *n)
{
    const unsigned char *t = a->type;
    unsigned cls = t[0] & 0x0f, size = (unsigned)le(t + 4, 4);
    *v = NULL;
    *n = 0;
    if (cls == 3) { /* fixed length: up to the first NUL, spaces trimmed when space-padded */
        if (size == 0 || size > MAX_STRING || a->value_len / size <= i)
            return -1;
        *v = a->value + i * size;
        uint64_t len = size;
        const unsigned char *z = memchr(*v, '\0', len);
        len = z != NULL ? (uint64_t)(z - *v) : len;
        if ((t[1] & 0x0f) == 2)
            while (len > 0 && (*v)[len - 1] == ' ')
                len--;
        *n = len;
        return 0;
    }
    if (cls == 9 && (t[1] & 0x0f) == 1) { /* variable-length string */
        /* Its base type as HDF5 writes it, 1-byte characters of 8 bits;
         * another (a precision of 0 in a damaged file, which HDF5 converts
         * to nothing) is left to HDF5. */
        const unsigned char *b = t + 8;
        if (a->type_len < 20 || (b[0] & 0x0f) != 0 || le(b + 4, 4) != 1 || le(b + 8, 2) != 0 ||
            le(b + 10, 2) != 8)
            return -1;
        unsigned sa = h->f->sa;
        uint64_t esz = 4u + sa + 4u;
        if (a->value_len / esz <= i)
            return -1;
        const unsigned char *e = a->value + i * esz;
        uint64_t len = le(e, 4), addr = le(e + 4, sa), idx = le(e + 4 + sa, 4), olen = 0;
        if (len > MAX_STRING)
            return -1;
        if (len > 0) {
            int oom = 0;
            const unsigned char *o = heap_object(h, addr, idx, &olen, &oom);
            if (o == NULL || olen < len)
                return oom ? -2 : -1;
            const unsigned char *z = memchr(o, '\0', len);
            *v = o;
            *n = z != NULL ? (uint64_t)(z - o) : len;
        }
        return 0;
    }
    return -1;
}

/* A single string attribute as ulp__attr_read_str() reads it, malloc'd: 1 absent, 0, -1, -2. */
static int attr_str(hdr *h, const found *fd, const char *name, char **out)
{
    const struct attr *a = attr_find(fd, name);
    *out = NULL;
    if (a == NULL)
        return 1;
    if (a->points != 1)
        return -1;
    const unsigned char *v = NULL;
    uint64_t n = 0;
    int rc = attr_string_at(h, a, 0, &v, &n);
    if (rc != 0)
        return rc;
    if ((*out = malloc((size_t)n + 1)) == NULL)
        return -2;
    if (n > 0)
        memcpy(*out, v, (size_t)n);
    (*out)[n] = '\0';
    return 0;
}

/*
 * The rank of token attribute `a` when its extents are the leading extents
 * of capture c's shape (snapshot_rows.c, leading_rank): 1..ndim, else -1.
 */
static int leading_rank(const ulp__hdr_file *f, const struct attr *a, const ulp_capture_info *c)
{
    uint64_t dims[ULP_SNAPSHOT_MAX_RANK], points = 0;
    int rank = 0;
    if (!read_space(f, a->space, a->space_len, &points, dims, &rank) || rank < 1 || rank > c->ndim)
        return -1;
    for (int i = 0; i < rank; i++)
        if (dims[i] != (uint64_t)c->shape[i])
            return -1;
    return rank;
}

/*
 * The token attributes (FORMAT.md, "Rows and tokens") as
 * ulp__snapshot_read_rows() reads and checks them, in one malloc'd block
 * (*block, the caller's; NULL when the capture has none) that c->positions,
 * c->requests and c->inputs point into: 1, 0 (not read here, or refused:
 * HDF5 reads it and says why), -2 out of memory.
 */
static int read_tokens(hdr *h, const found *fd, ulp_capture_info *c, void **block)
{
    const struct attr *pa = attr_find(fd, "positions"), *ra = attr_find(fd, "requests");
    const struct attr *ia = attr_find(fd, "inputs");
    *block = NULL;
    if (pa == NULL && ra == NULL && ia == NULL)
        return 1;
    int prank = 0, rrank = 0;
    uint64_t rows = 0;
    if (ra != NULL && pa == NULL)
        return 0; /* requests without positions */
    if (pa != NULL) {
        if ((prank = leading_rank(h->f, pa, c)) < 0)
            return 0;
        if (ra != NULL && (rrank = leading_rank(h->f, ra, c)) != prank)
            return 0;
        rows = 1;
        for (int i = 0; i < prank; i++)
            rows *= (uint64_t)c->shape[i];
        /* integers, `rows` of them in the message: no more rows than its bytes */
        if (rows != pa->points || int_size(pa) == 0 ||
            (ra != NULL && (rows != ra->points || int_size(ra) == 0)))
            return 0;
    }
    /* the inputs' strings: their count and bytes, to size the block */
    uint64_t nin = ia != NULL ? ia->points : 0, text = 0;
    if (ia != NULL) {
        if (nin > MAX_CHUNK_BYTES)
            return 0;
        for (uint64_t i = 0; i < nin; i++) {
            const unsigned char *v;
            uint64_t n;
            int rc = attr_string_at(h, ia, i, &v, &n);
            if (rc != 0)
                return rc == -2 ? -2 : 0;
            text += n + 1;
        }
    }
    uint64_t keys = rows * (ra != NULL ? 2 : 1) * sizeof(int64_t);
    size_t total = (size_t)(keys + nin * sizeof(char *) + text);
    unsigned char *b = malloc(total > 0 ? total : 1);
    if (b == NULL)
        return -2;
    int64_t *pos = (int64_t *)b, *req = ra != NULL ? pos + rows : NULL;
    char **in = (char **)(b + keys), *tx = (char *)(in + nin);
    if ((pa != NULL && attr_ints(fd, "positions", pos, rows, 1) != 0) ||
        (ra != NULL && attr_ints(fd, "requests", req, rows, 1) != 0)) {
        free(b);
        return 0;
    }
    for (uint64_t i = 0, left = text; i < nin; i++) {
        const unsigned char *v;
        uint64_t n;
        /* read above, perhaps from another collection's copy: the same
         * bytes, unless the file changed meanwhile */
        if (attr_string_at(h, ia, i, &v, &n) != 0 || n + 1 > left) {
            free(b);
            return 0;
        }
        left -= n + 1;
        in[i] = tx;
        if (n > 0)
            memcpy(tx, v, (size_t)n);
        tx[n] = '\0';
        tx += n + 1;
    }
    /* every position non-negative, no (request, position) twice: pairs in
     * increasing order (a prompt's 0, 1, 2, ...) cannot repeat, so the
     * table of keys is built only for the others */
    int64_t rq = 0, ps = 0;
    int rep = 0, ordered = 1;
    for (uint64_t i = 0; i < rows && rep == 0; i++) {
        rep = pos[i] < 0;
        if (i > 0 && ordered) {
            int64_t r0 = req != NULL ? req[i - 1] : 0, r1 = req != NULL ? req[i] : 0;
            ordered = r0 < r1 || (r0 == r1 && pos[i - 1] < pos[i]);
        }
    }
    if (rep == 0 && !ordered)
        rep = ulp__row_key_repeat(req, pos, rows, &rq, &ps);
    if (rep != 0) {
        free(b);
        return rep < 0 ? -2 : 0;
    }
    c->row_rank = prank;
    c->rows = rows;
    c->positions = pa != NULL ? pos : NULL;
    c->requests = req;
    c->inputs = ia != NULL ? (const char *const *)in : NULL;
    c->n_inputs = (size_t)nin;
    *block = b;
    return 1;
}

/* Every value the capture needs, checked as ulp__capture_read() checks it: 1, 0, -2. */
static int describe(hdr *h, const found *fd, ulp_capture_info *c, uint64_t *offset, char **role,
                    void **tokens)
{
    if (fd->space == NULL || fd->type == NULL || fd->layout == NULL)
        return 0;
    char *str = NULL;
    if (attr_str(h, fd, "dtype", &str) != 0)
        return 0;
    c->dtype = ulp_dtype_from_name(str);
    free(str);
    if (c->dtype == ULP_DTYPE_INVALID)
        return 0;
    /* the stored type holds the dtype (ulp__h5_type_fits) */
    const unsigned char *t = fd->type;
    size_t esz = ulp_dtype_size(c->dtype);
    if (fd->type_len < 8)
        return 0; /* not even its class and size */
    unsigned cls = t[0] & 0x0f;
    if ((cls != 0 && cls != 1) || le(t + 4, 4) != esz ||
        (esz > 1 && ((t[1] & 0x01) != 0 || (cls == 1 && (t[1] & 0x40) != 0))))
        return 0;
    uint64_t dims64[ULP_SNAPSHOT_MAX_RANK];
    uint64_t points = 0;
    if (!read_space(h->f, fd->space, fd->space_len, &points, dims64, &c->ndim))
        return 0;
    c->elements = points;
    for (int k = 0; k < c->ndim; k++)
        c->shape[k] = (int64_t)dims64[k];
    int64_t v[2];
    if (attr_ints(fd, "seq", &c->seq, 1, 1) != 0 || c->seq < 0)
        return 0;
    c->layer = -1;
    int rc = attr_ints(fd, "layer", v, 1, 1);
    if (rc < 0 || (rc == 0 && (v[0] < INT32_MIN || v[0] > INT32_MAX)))
        return 0;
    if (rc == 0)
        c->layer = (int32_t)v[0];
    if ((rc = attr_ints(fd, "step", &c->step, 1, 1)) < 0)
        return 0;
    c->has_step = rc == 0;
    if ((rc = attr_ints(fd, "kernels", c->kernels, 2, 1)) < 0 ||
        (rc == 0 && (c->kernels[0] < 0 || c->kernels[1] < c->kernels[0])))
        return 0;
    c->has_kernels = rc == 0;
    if ((rc = attr_ints(fd, "gemms", c->gemms, 2, 1)) < 0 ||
        (rc == 0 && (c->gemms[0] < 0 || c->gemms[1] < c->gemms[0])))
        return 0;
    c->has_gemms = rc == 0;
    if ((rc = attr_ints(fd, "graph_replay", c->graph_replay, 2, 1)) < 0)
        return 0;
    c->has_graph_replay = rc == 0;
    if (attr_ints(fd, "device_ptr", (int64_t *)&c->device_ptr, 1, 0) < 0 ||
        attr_ints(fd, "stream", (int64_t *)&c->stream, 1, 0) < 0 ||
        attr_ints(fd, "time_ns", &c->time_ns, 1, 1) < 0)
        return 0;
    /* where the bytes are: contiguous, inside the file, or not allocated */
    const unsigned char *l = fd->layout;
    unsigned sa = h->f->sa, sl = h->f->sl;
    if (fd->layout_len < 2u + sa + sl || (l[0] != 3 && l[0] != 4) || l[1] != 1)
        return 0;
    uint64_t addr = le(l + 2, sa), size = le(l + 2 + sa, sl);
    uint64_t undef = sa == 8 ? UINT64_MAX : UINT32_MAX, bytes = points * esz;
    *offset = ULP__NO_OFFSET;
    if (points > 0 && addr != undef) {
        uint64_t off = h->f->base + addr;
        if (size != bytes || off < addr || off > h->f->src.size || bytes > h->f->src.size - off)
            return 0;
        *offset = off;
    }
    /* the role and the token attributes last: the values the caller keeps */
    if ((rc = attr_str(h, fd, "role", role)) == -2)
        return -2;
    if (rc < 0)
        return 0;
    return read_tokens(h, fd, c, tokens);
}

/* Bytes read at a header's address at once: its prefix and, mostly, all its messages. */
#define FIRST_READ 1024

static int read_header(hdr *h, uint64_t addr, ulp_capture_info *c, uint64_t *offset, char **role,
                       void **tokens)
{
    uint64_t got = 0;
    const unsigned char *p = bytes_at(h, addr, FIRST_READ, &got);
    if (p == NULL || got < 16 || p[0] != 1)
        return h->oom ? -2 : 0;
    /* only the fields before the attributes need zeros: they are filled in order */
    found *fd = malloc(sizeof *fd);
    if (fd == NULL)
        return -2;
    memset(fd, 0, offsetof(found, attrs));
    fd->nattrs = 0;
    uint64_t chunks[MAX_CHUNKS][2];
    size_t nchunks = 1;
    chunks[0][0] = addr + 16;
    chunks[0][1] = le(p + 8, 4);
    int rc = 1;
    for (size_t i = 0; i < nchunks && rc == 1; i++) {
        const unsigned char *b = i == 0 && chunks[0][1] <= got - 16
                                     ? p + 16
                                     : bytes_at(h, chunks[i][0], chunks[i][1], NULL);
        rc = b != NULL && walk(h, fd, b, chunks[i][1], chunks, &nchunks);
    }
    if (rc == 1)
        rc = describe(h, fd, c, offset, role, tokens);
    free(fd);
    return h->oom ? -2 : rc;
}

int ulp__hdr_parse(ulp__hdr_file *f, uint64_t addr, ulp_capture_info *c, uint64_t *offset,
                   char **role, void **tokens)
{
    *role = NULL;
    *tokens = NULL;
    if ((f->sa != 4 && f->sa != 8) || (f->sl != 4 && f->sl != 8) || f->src.read == NULL)
        return 0;
    hdr h = {.f = f};
    int rc = read_header(&h, addr, c, offset, role, tokens);
    for (size_t i = 0; i < h.nbuf; i++)
        free(h.buf[i]);
    if (rc != 1) {
        free(*role);
        free(*tokens);
        *role = NULL;
        *tokens = NULL;
        c->positions = c->requests = NULL;
        c->inputs = NULL;
    }
    return rc;
}

void ulp__hdr_release(ulp__hdr_file *f)
{
    free(f->heap_at);
    free(f->heap_bytes);
    f->heap_at = NULL;
    f->heap_bytes = NULL;
    f->heap = 0;
    f->heap_n = 0;
}
