/*
 * Checking that every attribute of an object holds the bytes it declares,
 * before HDF5 reads one.
 *
 * HDF5 1.10 copies an attribute's value out of its message with the size
 * that the attribute's own dataspace and datatype declare.  One flipped bit
 * in the dataspace (2 strings grown to 6) makes it copy from past the
 * message, past the header chunk it sits in, and the value then holds
 * whatever lies there in memory: a different string on every run
 * (tests/python/test_attr_bounds.py).  This walks the object header as HDF5
 * would and refuses an attribute message whose value is larger than the
 * room the message leaves for it.
 *
 * Layouts (HDF5 file format, "Data Object Headers"; sizes of offsets and
 * lengths from the superblock):
 *   version 1 header: u8 1, u8 0, u16 messages, u32 refcount, u32 size of
 *     the first chunk, 4 bytes of padding; messages: u16 type, u16 size,
 *     u8 flags, 3 reserved, data (size bytes);
 *   version 2 header: "OHDR", u8 2, u8 flags, [16 bytes of times when flags
 *     & 0x20], [4 bytes of attribute limits when flags & 0x10], the first
 *     chunk's size in 1 << (flags & 3) bytes; messages: u8 type, u16 size,
 *     u8 flags, [u16 creation order when flags & 0x04], data; a 4-byte
 *     checksum ends each chunk, and further chunks start with "OCHK";
 *   a continuation message (type 0x10): offset, length of the next chunk;
 *   an attribute message (type 0x0C): u8 version, u8 flags, u16 name size,
 *     u16 datatype size, u16 dataspace size, [u8 name encoding in version
 *     3], then the name, the datatype and the dataspace (each padded to 8
 *     bytes in version 1), then the value;
 *   a datatype: u8 class (low 4 bits) and version, 3 bytes of bit fields,
 *     u32 size of an element (a variable-length element lives in the file
 *     as u32 length, heap address, u32 index);
 *   a dataspace: u8 version, u8 rank, u8 flags, then (version 1) 5 reserved
 *     bytes or (version 2) u8 type (2: null, no element), then rank
 *     lengths.
 * Attributes in dense storage (a fractal heap, only in files written with
 * the newer formats) and shared datatypes or dataspaces are not walked:
 * this project's writer uses neither.
 */
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "snapshot_priv.h"

#define MSG_CONTINUATION 0x10
#define MSG_ATTRIBUTE    0x0C
#define MAX_CHUNKS       1024                /* a header of more is a loop */
#define MAX_CHUNK_BYTES  ((uint64_t)1 << 24) /* larger chunks are not walked */

static uint64_t le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

typedef struct ohdr_walk {
    const ulp_snapshot *s;
    unsigned sa, sl; /* sizes of offsets and lengths */
    uint64_t base;   /* file offset of address 0 */
    int version;
    char *bad;
    size_t bad_size;
    uint64_t chunks[MAX_CHUNKS][2]; /* offset, length of chunks still to walk */
    size_t nchunks, walked;
} ohdr_walk;

/* n bytes at file offset off, malloc'd: 1, 0 (not in the file), -2 (no memory). */
static int fetch(const ulp_snapshot *s, uint64_t off, uint64_t n, unsigned char **out)
{
    *out = NULL;
    if (n == 0 || n > MAX_CHUNK_BYTES || off > s->file_size || s->file_size - off < n)
        return 0;
    unsigned char *b = malloc((size_t)n);
    if (b == NULL)
        return -2;
    if (s->map != NULL)
        memcpy(b, s->map + off, (size_t)n);
    else if (ulp__journal_pread(s->fd, b, (size_t)n, off) < 0) {
        free(b);
        return 0;
    }
    *out = b;
    return 1;
}

static uint64_t pad8(uint64_t v, int pad)
{
    return pad ? (v + 7) & ~(uint64_t)7 : v;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

/* Whether the attribute message m[0..len) holds the value it declares: 1 or 0. */
static int attr_fits(ohdr_walk *w, const unsigned char *m, uint64_t len)
{
    if (len < 8 || m[0] < 1 || m[0] > 3)
        return 1; /* not an attribute message this knows; HDF5 judges it */
    int pad = m[0] == 1;
    uint64_t nsz = le(m + 2, 2), tsz = le(m + 4, 2), ssz = le(m + 6, 2);
    uint64_t name_at = m[0] == 3 ? 9 : 8;
    uint64_t type_at = name_at + pad8(nsz, pad), space_at = type_at + pad8(tsz, pad);
    uint64_t value_at = space_at + pad8(ssz, pad);
    size_t copy = 0;
    if (name_at < len) {
        copy = (size_t)(len - name_at < nsz ? len - name_at : nsz);
        if (copy > w->bad_size - 1)
            copy = w->bad_size - 1;
    }
    memcpy(w->bad, m + name_at, copy);
    w->bad[copy] = '\0';
    if (value_at > len)
        return 0; /* its name, datatype or dataspace already runs past it */
    if ((m[0] > 1 && (m[1] & 0x3) != 0) || tsz < 8 || ssz < 4)
        return 1; /* shared datatype or dataspace: not decoded here */
    const unsigned char *t = m + type_at, *sp = m + space_at;
    uint64_t elem = (t[0] & 0x0f) == 9 ? 4 + (uint64_t)w->sa + 4 : le(t + 4, 4);
    unsigned rank = sp[1];
    uint64_t dims_at = sp[0] == 1 ? 8 : 4, points = 1;
    if (sp[0] == 2 && sp[3] == 2)
        points = 0;
    if (dims_at + (uint64_t)rank * w->sl > ssz)
        return 0;
    for (unsigned i = 0; i < rank; i++)
        points = mul_sat(points, le(sp + dims_at + (uint64_t)i * w->sl, w->sl));
    return mul_sat(points, elem) <= len - value_at;
}

static void add_chunk(ohdr_walk *w, uint64_t off, uint64_t len)
{
    if (w->nchunks < MAX_CHUNKS) {
        w->chunks[w->nchunks][0] = off;
        w->chunks[w->nchunks][1] = len;
        w->nchunks++;
    }
}

/* Walks the messages of c[0..len): 1 all fit, 0 one does not (w->bad names it). */
static int walk_messages(ohdr_walk *w, const unsigned char *c, uint64_t len, int crt_order)
{
    uint64_t head = w->version == 1 ? 8 : 4 + (crt_order ? 2 : 0);
    uint64_t p = 0;
    while (len - p >= head) {
        const unsigned char *m = c + p;
        unsigned type = w->version == 1 ? (unsigned)le(m, 2) : m[0];
        uint64_t size = w->version == 1 ? le(m + 2, 2) : le(m + 1, 2);
        if (size > len - p - head)
            return 1; /* a damaged chunk: HDF5 refuses it itself */
        const unsigned char *data = m + head;
        if (type == MSG_ATTRIBUTE && !attr_fits(w, data, size))
            return 0;
        if (type == MSG_CONTINUATION && size >= (uint64_t)w->sa + w->sl)
            add_chunk(w, w->base + le(data, w->sa), le(data + w->sa, w->sl));
        p += head + size;
    }
    return 1;
}

/* The first chunk's messages (offset, length) of a header at `addr`: 1, 0 (not walked), -2. */
static int first_chunk(ohdr_walk *w, uint64_t addr, int *crt_order)
{
    unsigned char *h;
    int rc = fetch(w->s, addr, 32, &h);
    if (rc != 1)
        return rc;
    rc = 0;
    if (h[0] == 1) {
        w->version = 1;
        add_chunk(w, addr + 16, le(h + 8, 4));
        rc = 1;
    } else if (memcmp(h, "OHDR", 4) == 0 && h[4] == 2) {
        unsigned flags = h[5];
        uint64_t p = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
        unsigned width = 1u << (flags & 3);
        w->version = 2;
        *crt_order = (flags & 0x04) != 0;
        /* the messages, then the 4-byte checksum */
        add_chunk(w, addr + p + width, le(h + p, width) + 4);
        rc = 1;
    }
    free(h);
    return rc;
}

int ulp__ohdr_attrs_fit(const ulp_snapshot *s, hid_t obj, char *bad, size_t bad_size)
{
    ohdr_walk *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -2;
    w->s = s;
    w->bad = bad;
    w->bad_size = bad_size;
    bad[0] = '\0';
    int rc = 1;
    H5O_info_t oi;
    hid_t file = H5Iget_file_id(obj);
    hid_t fcpl = file >= 0 ? H5Fget_create_plist(file) : -1;
    size_t sa = 0, sl = 0;
    hsize_t ublock = 0;
    if (fcpl < 0 || H5Pget_sizes(fcpl, &sa, &sl) < 0 || H5Pget_userblock(fcpl, &ublock) < 0 ||
        (sa != 4 && sa != 8) || (sl != 4 && sl != 8) || s->fd < 0 ||
        H5Oget_info2(obj, &oi, H5O_INFO_BASIC) < 0)
        goto done; /* not walked: HDF5's own checks stand */
    w->sa = (unsigned)sa;
    w->sl = (unsigned)sl;
    w->base = ublock;
    int crt_order = 0;
    if ((rc = first_chunk(w, w->base + oi.addr, &crt_order)) != 1) {
        rc = rc == -2 ? -2 : 1;
        goto done;
    }
    while (w->walked < w->nchunks && rc == 1) {
        uint64_t off = w->chunks[w->walked][0], len = w->chunks[w->walked][1];
        int first = w->walked++ == 0;
        unsigned char *c;
        int got = fetch(s, off, len, &c);
        if (got != 1) {
            rc = got == -2 ? -2 : 1;
            break;
        }
        if (w->version == 1)
            rc = walk_messages(w, c, len, 0);
        else if (len >= 4 && (first || (len >= 8 && memcmp(c, "OCHK", 4) == 0)))
            rc = walk_messages(w, c + (first ? 0 : 4), len - (first ? 4 : 8), crt_order);
        free(c);
    }
done:
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (file >= 0)
        H5Fclose(file);
    if (rc == 1)
        bad[0] = '\0';
    free(w);
    return rc;
}
