/* The capture journal's codec (journal.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/le.h"
#include "journal.h"

/* --- CRC-32 ------------------------------------------------------------------------ */

/* Bitwise: records are a few dozen bytes, and no table means no shared state. */
uint32_t ulp__crc32(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* --- block header ------------------------------------------------------------------ */

void ulp__journal_header_encode(unsigned char out[ULP__JOURNAL_HEADER_BYTES], uint64_t self,
                                uint64_t bytes, int first)
{
    memset(out, 0, ULP__JOURNAL_HEADER_BYTES);
    memcpy(out, first ? ULP__JOURNAL_MAGIC : ULP__JOURNAL_MAGIC_LATER, 8);
    ulp__le64_put(out + 8, self);
    ulp__le64_put(out + 16, bytes);
    ulp__le32_put(out + 24, ulp__crc32(out, 24));
}

int ulp__journal_header_decode(const unsigned char in[ULP__JOURNAL_HEADER_BYTES], uint64_t self,
                               uint64_t *bytes)
{
    int kind = memcmp(in, ULP__JOURNAL_MAGIC, 8) == 0         ? ULP__JOURNAL_FIRST_BLOCK
               : memcmp(in, ULP__JOURNAL_MAGIC_LATER, 8) == 0 ? ULP__JOURNAL_LATER_BLOCK
                                                              : 0;
    if (kind == 0 || ulp__le64_get(in + 8) != self || ulp__le32_get(in + 24) != ulp__crc32(in, 24))
        return 0;
    uint64_t b = ulp__le64_get(in + 16);
    if (b < ULP__JOURNAL_HEADER_BYTES + ULP__JOURNAL_RECORD_FIXED)
        return 0;
    *bytes = b;
    return kind;
}

/* --- records ----------------------------------------------------------------------- */

size_t ulp__journal_record_size(size_t name_len)
{
    if (name_len > UINT32_MAX - ULP__JOURNAL_RECORD_FIXED - 7)
        return 0;
    return (ULP__JOURNAL_RECORD_FIXED + name_len + 7) & ~(size_t)7;
}

size_t ulp__journal_record_encode(unsigned char *out, const ulp__journal_record *r)
{
    size_t len = ulp__journal_record_size(r->name_len);
    if (len == 0)
        return 0;
    memset(out, 0, len);
    ulp__le32_put(out + 4, (uint32_t)len);
    ulp__le32_put(out + 8, r->kind);
    ulp__le32_put(out + 12, (uint32_t)r->name_len);
    ulp__le64_put(out + 16, (uint64_t)r->seq);
    ulp__le64_put(out + 24, (uint64_t)r->occurrence);
    ulp__le64_put(out + 32, r->addr);
    if (r->name_len > 0)
        memcpy(out + ULP__JOURNAL_RECORD_FIXED, r->name, r->name_len);
    ulp__le32_put(out, ulp__crc32(out + 4, len - 4));
    return len;
}

uint32_t ulp__journal_record_length(const unsigned char *in)
{
    return ulp__le32_get(in + 4);
}

size_t ulp__journal_record_decode(const unsigned char *in, size_t avail, ulp__journal_record *r)
{
    if (avail < ULP__JOURNAL_RECORD_FIXED)
        return 0;
    uint32_t len = ulp__journal_record_length(in);
    uint32_t name_len = ulp__le32_get(in + 12);
    if (len < ULP__JOURNAL_RECORD_FIXED || len % 8 != 0 || len > avail ||
        ulp__journal_record_size(name_len) != len)
        return 0;
    if (ulp__le32_get(in) != ulp__crc32(in + 4, len - 4))
        return 0;
    r->kind = ulp__le32_get(in + 8);
    r->name_len = name_len;
    r->seq = (int64_t)ulp__le64_get(in + 16);
    r->occurrence = (int64_t)ulp__le64_get(in + 24);
    r->addr = ulp__le64_get(in + 32);
    r->name = (const char *)in + ULP__JOURNAL_RECORD_FIXED;
    return len;
}

/* --- file I/O ---------------------------------------------------------------------- */

int ulp__journal_pread(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int ulp__journal_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = ENOSPC; /* a regular file that takes nothing more is full */
            return -1;
        }
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}
