/*
 * Checking the global heap collections behind a dataset of variable-length
 * strings (/trace/names) before HDF5 decodes them.
 *
 * HDF5 appends strings to a collection by rewriting it in place.  A kill
 * that tears that rewrite (SIGKILL cuts a multi-page write(2) at a page
 * boundary) leaves new objects in the first pages and the old free-space
 * object in the rest, and HDF5 1.10's decoder of the collection then loops
 * forever on an object that does not advance (tests/python/test_crash.py,
 * part D with --kernels).  This walks each collection the dataset refers
 * to, as that decoder would, and refuses the chain where it would loop or
 * run past the collection.
 *
 * Layouts (HDF5 file format, "Global Heap Collection"; the earliest format,
 * 8-byte addresses and lengths):
 *   collection: "GCOL", version 1, 3 reserved, u64 size, then objects;
 *   object:     u16 index, u16 references, 4 reserved, u64 size, data padded
 *               to 8 bytes; index 0 is the free space, the rest of the
 *               collection;
 *   a variable-length element in a dataset's storage: u32 length, u64
 *   collection address, u32 object index (16 bytes).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "journal.h"
#include "snapshot_priv.h"

#define VLEN_BYTES  16 /* a variable-length element in the file */
#define GCOL_HEADER 16
#define GOBJ_HEADER 16

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Whether the collection at `addr` decodes without looping or overrunning:
 * 1 or 0, or -2 when there was no memory to read it (which says nothing of
 * the file). */
static int collection_ok(const ulp_snapshot *s, uint64_t addr)
{
    unsigned char head[GCOL_HEADER];
    if (addr > s->file_size || s->file_size - addr < sizeof head ||
        ulp__journal_pread(s->fd, head, sizeof head, addr) < 0 || memcmp(head, "GCOL", 4) != 0 ||
        head[4] != 1)
        return 0;
    uint64_t size = le(head + 8, 8);
    if (size < GCOL_HEADER || size > s->file_size - addr)
        return 0;
    unsigned char *c = malloc((size_t)size);
    if (c == NULL)
        return -2;
    if (ulp__journal_pread(s->fd, c, (size_t)size, addr) < 0) {
        free(c);
        return 0;
    }
    int ok = 1;
    uint64_t p = GCOL_HEADER;
    while (p < size) {
        if (size - p < GOBJ_HEADER)
            break; /* too small for an object: free space, as HDF5 reads it */
        uint64_t idx = le(c + p, 2), osize = le(c + p + 8, 8);
        /* The free space (index 0) counts its header in its size. */
        uint64_t need = idx == 0       ? osize
                        : osize > size ? UINT64_MAX
                                       : GOBJ_HEADER + ((osize + 7) & ~(uint64_t)7);
        /* A size of 0 is where HDF5 loops; one past the end is damage too. */
        if (need == 0 || need > size - p) {
            ok = 0;
            break;
        }
        p += need;
    }
    free(c);
    return ok;
}

int ulp__gheap_check(const ulp_snapshot *s, hid_t d, uint64_t n, uint64_t *bad_addr)
{
    *bad_addr = 0;
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return -1;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    hsize_t cdim = 0;
    if (layout == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, &cdim) != 1)
        cdim = 0;
    H5Pclose(dcpl);

    /* Where the elements' bytes are: the chunks, or one contiguous run. */
    hsize_t nchunks = 0;
    hid_t space = -1; /* HDF5 1.10 takes no H5S_ALL here */
    if (layout == H5D_CHUNKED) {
        if (cdim == 0 || (space = H5Dget_space(d)) < 0 ||
            H5Dget_num_chunks(d, space, &nchunks) < 0) {
            if (space >= 0)
                H5Sclose(space);
            return -1;
        }
    } else if (layout == H5D_CONTIGUOUS) {
        nchunks = H5Dget_offset(d) == HADDR_UNDEF ? 0 : 1;
        cdim = n;
    } else {
        return -1; /* compact: the elements live in the header; not checked */
    }
    ulp__offsets seen = {0}; /* collections checked */
    unsigned char *buf = NULL;
    int rc = 1;
    for (hsize_t i = 0; i < nchunks && rc == 1; i++) {
        hsize_t first = 0, bytes;
        haddr_t addr;
        if (layout == H5D_CHUNKED) {
            unsigned mask = 0;
            hsize_t off[1];
            if (H5Dget_chunk_info(d, space, i, off, &mask, &addr, &bytes) < 0 || mask != 0) {
                rc = -1; /* filtered chunks: the elements are not readable here */
                break;
            }
            first = off[0];
        } else {
            addr = H5Dget_offset(d);
            bytes = (hsize_t)n * VLEN_BYTES;
        }
        if (first >= n)
            continue;
        uint64_t count = n - first < cdim ? n - first : cdim;
        if (bytes < count * VLEN_BYTES || addr == HADDR_UNDEF || addr > s->file_size ||
            s->file_size - addr < count * VLEN_BYTES) {
            rc = -1;
            break;
        }
        unsigned char *b = realloc(buf, (size_t)(count * VLEN_BYTES));
        if (b == NULL) {
            rc = -2;
            break;
        }
        buf = b;
        if (ulp__journal_pread(s->fd, b, (size_t)(count * VLEN_BYTES), addr) < 0) {
            rc = -1;
            break;
        }
        for (uint64_t k = 0; k < count && rc == 1; k++) {
            const unsigned char *e = buf + k * VLEN_BYTES;
            uint64_t caddr = le(e + 4, 8);
            if (le(e, 4) == 0)
                continue; /* an empty string: no heap object */
            int added = ulp__offsets_add(&seen, caddr);
            if (added < 0) {
                rc = -2;
                break;
            }
            if (added == 0)
                continue; /* checked already */
            int ok = collection_ok(s, caddr);
            if (ok != 1) {
                *bad_addr = caddr;
                rc = ok;
                break;
            }
        }
    }
    free(buf);
    free(seen.v);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}
