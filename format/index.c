/*
 * The capture index's codec and hash (index.h).
 */
#include "index.h"
#include "common/le.h"
#include "journal.h"
#include "ulpprof/dtype.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of the positions and requests arrays; UINT64_MAX if they overflow. */
static uint64_t rows_bytes(const ulp__index_entry *e)
{
    uint64_t arrays =
        ((e->flags & ULP__INDEX_HAS_POSITIONS) != 0) + ((e->flags & ULP__INDEX_HAS_REQUESTS) != 0);
    if (arrays != 0 && e->rows > UINT64_MAX / 16)
        return UINT64_MAX;
    return arrays * e->rows * 8;
}

size_t ulp__index_add_unhashed(ulp__index_range *skip, size_t n, uint64_t seal_off, uint64_t jfirst)
{
    skip[n++] = (ulp__index_range){seal_off + ULP__INDEX_HASH_AT, ULP__INDEX_HASHED_FIELDS};
    if (jfirst != ULP__INDEX_NO_JOURNAL)
        skip[n++] = (ulp__index_range){jfirst + ULP__JOURNAL_CLOSED_AT, 4};
    return n;
}

char *ulp__index_inputs_join(const char *const *v, size_t n, char *small, size_t small_bytes,
                             size_t *len)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(v[i]) + 1;
    if (bytes > UINT32_MAX)
        return NULL;
    char *out = bytes <= small_bytes ? small : malloc(bytes);
    if (out == NULL)
        return NULL;
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t k = strlen(v[i]) + 1;
        memcpy(out + at, v[i], k);
        at += k;
    }
    *len = bytes;
    return out;
}

size_t ulp__index_record_size(const ulp__index_entry *e)
{
    if (e->ndim < 0 || e->ndim > ULP_MAX_RANK)
        return 0;
    uint64_t arrays = rows_bytes(e);
    uint64_t strings =
        (uint64_t)e->name_len + 1 + (uint64_t)e->role_len + 1 + (uint64_t)e->inputs_len;
    uint64_t n = ULP__INDEX_FIXED + 8 * (uint64_t)e->ndim;
    if (arrays == UINT64_MAX || arrays > SIZE_MAX / 2 || strings > UINT32_MAX ||
        n + arrays + strings + 7 > UINT32_MAX)
        return 0;
    return (size_t)((n + arrays + strings + 7) & ~(uint64_t)7);
}

void ulp__index_record_encode(unsigned char *out, const ulp__index_entry *e)
{
    size_t len = ulp__index_record_size(e);
    memset(out, 0, len);
    ulp__le32_put(out + 0, (uint32_t)len);
    ulp__le32_put(out + 4, e->flags);
    const uint64_t words[] = {(uint64_t)e->seq,
                              (uint64_t)e->occurrence,
                              e->oaddr,
                              e->offset,
                              (uint64_t)(uint32_t)e->dtype | (uint64_t)(uint32_t)e->ndim << 32,
                              (uint64_t)(uint32_t)e->layer | (uint64_t)(uint32_t)e->row_rank << 32,
                              (uint64_t)e->step,
                              (uint64_t)e->kernels[0],
                              (uint64_t)e->kernels[1],
                              (uint64_t)e->gemms[0],
                              (uint64_t)e->gemms[1],
                              (uint64_t)e->graph_replay[0],
                              (uint64_t)e->graph_replay[1],
                              e->device_ptr,
                              e->stream,
                              (uint64_t)e->time_ns,
                              e->rows};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ulp__le64_put(out + 8 + 8 * i, words[i]);
    ulp__le32_put(out + 144, e->name_len);
    ulp__le32_put(out + 148, e->role_len);
    ulp__le32_put(out + 152, e->n_inputs);
    ulp__le32_put(out + 156, e->inputs_len);
    unsigned char *p = out + ULP__INDEX_FIXED;
    for (int i = 0; i < e->ndim; i++, p += 8)
        ulp__le64_put(p, (uint64_t)e->shape[i]);
    const unsigned char *arrays[] = {(e->flags & ULP__INDEX_HAS_POSITIONS) ? e->positions : NULL,
                                     (e->flags & ULP__INDEX_HAS_REQUESTS) ? e->requests : NULL};
    for (int a = 0; a < 2; a++) {
        for (uint64_t i = 0; arrays[a] != NULL && i < e->rows; i++, p += 8) {
            int64_t v;
            memcpy(&v, arrays[a] + 8 * i, 8);
            ulp__le64_put(p, (uint64_t)v);
        }
    }
    memcpy(p, e->name, e->name_len);
    p += e->name_len + 1;
    memcpy(p, e->role, e->role_len);
    p += e->role_len + 1;
    if (e->inputs_len > 0)
        memcpy(p, e->inputs, e->inputs_len);
}

/* Whether `n` strings end exactly at the end of `len` bytes at `p`, each with its NUL. */
static int strings_ok(const char *p, uint32_t len, uint32_t n)
{
    uint32_t seen = 0;
    for (uint32_t i = 0; i < len; i++)
        seen += p[i] == '\0';
    return seen == n && (len == 0 || p[len - 1] == '\0');
}

size_t ulp__index_record_decode(const unsigned char *in, size_t avail, ulp__index_entry *e)
{
    if (avail < ULP__INDEX_FIXED)
        return 0;
    uint32_t len = ulp__le32_get(in);
    if (len < ULP__INDEX_FIXED || len % 8 != 0 || len > avail)
        return 0;
    /* Every field is set below but the shape past the rank (never read):
     * no memset, which took 40% of the decode of a 20-byte-name record. */
    e->positions = NULL;
    e->requests = NULL;
    e->flags = ulp__le32_get(in + 4);
    uint64_t w[17];
    for (int i = 0; i < 17; i++)
        w[i] = ulp__le64_get(in + 8 + 8 * i);
    e->seq = (int64_t)w[0];
    e->occurrence = (int64_t)w[1];
    e->oaddr = w[2];
    e->offset = w[3];
    e->dtype = (int32_t)(uint32_t)w[4];
    e->ndim = (int32_t)(uint32_t)(w[4] >> 32);
    e->layer = (int32_t)(uint32_t)w[5];
    e->row_rank = (int32_t)(uint32_t)(w[5] >> 32);
    e->step = (int64_t)w[6];
    e->kernels[0] = (int64_t)w[7];
    e->kernels[1] = (int64_t)w[8];
    e->gemms[0] = (int64_t)w[9];
    e->gemms[1] = (int64_t)w[10];
    e->graph_replay[0] = (int64_t)w[11];
    e->graph_replay[1] = (int64_t)w[12];
    e->device_ptr = w[13];
    e->stream = w[14];
    e->time_ns = (int64_t)w[15];
    e->rows = w[16];
    e->name_len = ulp__le32_get(in + 144);
    e->role_len = ulp__le32_get(in + 148);
    e->n_inputs = ulp__le32_get(in + 152);
    e->inputs_len = ulp__le32_get(in + 156);
    if (e->ndim < 0 || e->ndim > ULP_MAX_RANK || ulp__index_record_size(e) != len)
        return 0;
    const unsigned char *p = in + ULP__INDEX_FIXED;
    for (int i = 0; i < e->ndim; i++, p += 8)
        e->shape[i] = (int64_t)ulp__le64_get(p);
    if (e->flags & ULP__INDEX_HAS_POSITIONS) {
        e->positions = p;
        p += 8 * e->rows;
    }
    if (e->flags & ULP__INDEX_HAS_REQUESTS) {
        e->requests = p;
        p += 8 * e->rows;
    }
    e->name = (const char *)p;
    e->role = e->name + e->name_len + 1;
    e->inputs = e->role + e->role_len + 1;
    if (!strings_ok(e->name, e->name_len + 1, 1) || !strings_ok(e->role, e->role_len + 1, 1) ||
        !strings_ok(e->inputs, e->inputs_len, e->n_inputs))
        return 0;
    return len;
}

size_t ulp__index_record_extent(const unsigned char *in, size_t avail, uint64_t *offset,
                                uint64_t *bytes)
{
    if (avail < ULP__INDEX_FIXED)
        return 0;
    uint32_t len = ulp__le32_get(in);
    int32_t dtype = (int32_t)ulp__le32_get(in + 40), ndim = (int32_t)ulp__le32_get(in + 44);
    if (len < ULP__INDEX_FIXED || len % 8 != 0 || len > avail || ndim < 0 || ndim > ULP_MAX_RANK ||
        ULP__INDEX_FIXED + 8 * (size_t)ndim > len)
        return 0;
    /* As the reader computes it (entry_ok); an overflow there refuses the record. */
    uint64_t elements = 1;
    for (int i = 0; i < ndim; i++)
        elements *= ulp__le64_get(in + ULP__INDEX_FIXED + 8 * i);
    *offset = ulp__le64_get(in + 32);
    *bytes = elements * ulp_dtype_size((ulp_dtype)dtype);
    return len;
}

/* --- the hash ------------------------------------------------------------------------ */

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL

static inline uint64_t rotl(uint64_t x, int r)
{
    return x << r | x >> (64 - r);
}

static inline uint64_t word(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t lane(uint64_t acc, uint64_t w)
{
    return rotl(acc + w * P2, 31) * P1;
}

/* 64-bit hash of n bytes: four independent lanes over 32-byte stripes, then the tail. */
static uint64_t hash_bytes(const unsigned char *p, uint64_t n, uint64_t seed)
{
    uint64_t v[4] = {seed + P1, seed + P2, seed, seed - P1};
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v[0] = lane(v[0], word(p + i));
        v[1] = lane(v[1], word(p + i + 8));
        v[2] = lane(v[2], word(p + i + 16));
        v[3] = lane(v[3], word(p + i + 24));
    }
    uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18) + n * P3;
    for (; i + 8 <= n; i += 8)
        h = rotl(h ^ lane(0, word(p + i)), 27) * P1 + P3;
    for (; i < n; i++)
        h = rotl(h ^ (uint64_t)p[i] * P3, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    return h ^ (h >> 32);
}

static int range_cmp(const void *a, const void *b)
{
    const ulp__index_range *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/*
 * Sorts the ranges by offset.  They come nearly sorted -- the captures'
 * data in file order, then the seal's fields and the journal's mark -- so
 * a sorted prefix and a few stragglers are merged by insertion; qsort(3)
 * of 10,000 sorted ranges cost more than hashing a window.  (The hash
 * does not depend on the order of ranges with equal offsets.)
 */
void ulp__index_ranges_sort(ulp__index_range *skip, size_t n)
{
    if (n < 2)
        return;
    size_t p = 1;
    while (p < n && skip[p - 1].off <= skip[p].off)
        p++;
    if (n - p > 8) {
        qsort(skip, n, sizeof *skip, range_cmp);
        return;
    }
    for (; p < n; p++) {
        ulp__index_range x = skip[p];
        size_t lo = 0, hi = p; /* the first of skip[0..p) past x */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (skip[mid].off <= x.off)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(skip + lo + 1, skip + lo, (p - lo) * sizeof *skip);
        skip[lo] = x;
    }
}

int ulp__index_hash_file(int fd, uint64_t size, ulp__index_range *skip, size_t n, uint64_t *hash)
{
    return ulp__index_hash_file_mem(fd, size, skip, n, NULL, 0, hash);
}

int ulp__index_hash_file_mem(int fd, uint64_t size, ulp__index_range *skip, size_t n,
                             const ulp__index_mem *mem, size_t nmem, uint64_t *hash)
{
    for (size_t i = 0; i < n; i++)
        if (skip[i].off > size || skip[i].len > size - skip[i].off)
            return -1;
    ulp__index_ranges_sort(skip, n);
    unsigned char *buf = malloc(ULP__INDEX_WINDOW);
    if (buf == NULL)
        return -1;
    /*
     * Window by window; each kept run of a window is hashed with the hash
     * so far and its offset as seed.  A window that holds no kept byte is
     * not read.
     */
    uint64_t h = size;
    size_t i = 0, j = 0;
    int rc = 0;
    for (uint64_t w = 0; w < size && rc == 0; w += ULP__INDEX_WINDOW) {
        uint64_t wend = size - w < ULP__INDEX_WINDOW ? size : w + ULP__INDEX_WINDOW;
        /* A window the caller holds is hashed from there: the same bytes. */
        const unsigned char *win = buf;
        while (j < nmem && mem[j].off + mem[j].len < wend)
            j++;
        if (j < nmem && mem[j].off <= w && mem[j].off + mem[j].len >= wend)
            win = mem[j].p + (w - mem[j].off);
        int loaded = win != buf;
        for (uint64_t at = w; at < wend;) {
            while (i < n && skip[i].off + skip[i].len <= at)
                i++;
            /* [at, end) is kept; a skip that covers `at` moves it past itself. */
            if (i < n && skip[i].off <= at) {
                at = skip[i].off + skip[i].len;
                continue;
            }
            uint64_t end = i < n && skip[i].off < wend ? skip[i].off : wend;
            if (!loaded && ulp__journal_pread(fd, buf, (size_t)(wend - w), w) < 0) {
                rc = -1;
                break;
            }
            loaded = 1;
            h = hash_bytes(win + (at - w), end - at, h ^ at * P1);
            at = end;
        }
    }
    free(buf);
    if (rc == 0)
        *hash = h;
    return rc;
}
