/*
 * Finding and walking the capture journal (format/journal.h): the index the
 * reader trusts for a file whose writer did not close it, and the way back
 * to the captures when the /captures groups cannot be read (a writer killed
 * in the middle of updating a group).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "journal.h"
#include "snapshot_priv.h"

/* How far into the file a journal whose /journal link is lost is looked for:
 * the writer creates it with the file, in its first few KiB. */
#define SCAN_BYTES ((uint64_t)4 << 20)

/* Whether a valid header of a block of kind `kind` lies at `off`; sets *bytes. */
static int block_at(const ulp_snapshot *s, uint64_t off, int kind, uint64_t *bytes)
{
    unsigned char head[ULP__JOURNAL_HEADER_BYTES];
    if (off > s->file_size || s->file_size - off < sizeof head ||
        ulp__journal_pread(s->fd, head, sizeof head, off) < 0)
        return 0;
    return ulp__journal_header_decode(head, off, bytes) == kind;
}

/* The first block: where /journal says, else the first header in the file's head. */
static int find_first_block(const ulp_snapshot *s, uint64_t *off, uint64_t *bytes)
{
    hid_t d = -1;
    htri_t ex = H5Lexists(s->file, "/" ULP__JOURNAL_DATASET, H5P_DEFAULT);
    if (ex == 0)
        return 0; /* the root says there is none: a file of another writer */
    if (ex > 0 && (d = H5Dopen2(s->file, "/" ULP__JOURNAL_DATASET, H5P_DEFAULT)) >= 0) {
        haddr_t a = H5Dget_offset(d);
        H5Dclose(d);
        /* A /journal whose header is damaged is no journal: nothing else
         * in the file may stand in for it. */
        if (a == HADDR_UNDEF || !block_at(s, (uint64_t)a, ULP__JOURNAL_FIRST_BLOCK, bytes))
            return 0;
        *off = (uint64_t)a;
        return 1;
    }
    /* The root cannot be read (torn), or not its /journal: look for the header. */
    uint64_t end = s->file_size < SCAN_BYTES ? s->file_size : SCAN_BYTES;
    unsigned char buf[64 << 10];
    /* Every byte offset (HDF5 aligns raw data only when told to); windows
     * overlap by 7 bytes so that no magic is cut in two. */
    for (uint64_t base = 0; base < end; base += sizeof buf - 7) {
        size_t n = end - base < sizeof buf ? (size_t)(end - base) : sizeof buf;
        if (n < 8 || ulp__journal_pread(s->fd, buf, n, base) < 0)
            return 0;
        for (const unsigned char *p = buf; (p = memchr(p, 'U', n - 7 - (size_t)(p - buf))) != NULL;
             p++) {
            size_t i = (size_t)(p - buf);
            if (memcmp(p, ULP__JOURNAL_MAGIC, 8) == 0 &&
                block_at(s, base + i, ULP__JOURNAL_FIRST_BLOCK, bytes)) {
                *off = base + i;
                return 1;
            }
            if (i + 8 >= n)
                break;
        }
        if (n < sizeof buf)
            break;
    }
    return 0;
}

/* Whether the first block at `first` carries the writer's closed mark. */
static int mark_set(const ulp_snapshot *s, uint64_t first)
{
    char mark[4];
    return ulp__journal_pread(s->fd, mark, 4, first + ULP__JOURNAL_CLOSED_AT) == 0 &&
           memcmp(mark, ULP__JOURNAL_CLOSED, 4) == 0;
}

void ulp__journal_find(ulp_snapshot *s, ulp__journal_state *js)
{
    memset(js, 0, sizeof *js);
    if (!find_first_block(s, &js->first, &js->first_bytes))
        return;
    js->found = 1;
    js->closed = mark_set(s, js->first);
}

int ulp__journal_closed_at(const ulp_snapshot *s, uint64_t off)
{
    uint64_t bytes = 0;
    return block_at(s, off, ULP__JOURNAL_FIRST_BLOCK, &bytes) && mark_set(s, off);
}

int ulp__offsets_add(ulp__offsets *l, uint64_t off)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == off)
            return 0;
    if (ULP__GROW(l->v, l->cap, l->n + 1) != 0)
        return -1;
    l->v[l->n++] = off;
    return 1;
}

ulp_status ulp__journal_walk(ulp_snapshot *s, ulp__journal_state *js, ulp__journal_visit visit,
                             void *ctx, ulp_error *err)
{
    js->chain_broken = 0;
    if (!js->found)
        return ULP_OK;
    uint64_t block = js->first, bytes = js->first_bytes;
    unsigned char fixed[ULP__JOURNAL_RECORD_FIXED];
    unsigned char *rec = NULL;
    size_t rec_cap = 0;
    uint64_t pos = block + ULP__JOURNAL_HEADER_BYTES, walked = 0;
    ulp__offsets walked_blocks = {0};
    ulp_status st = ULP_OK;
    if (ulp__offsets_add(&walked_blocks, block) < 0)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    for (;;) {
        uint64_t end = block + bytes;
        if (end > s->file_size)
            end = s->file_size; /* a block past the end of a cut file: read what is there */
        if (pos > end || end - pos < sizeof fixed ||
            ulp__journal_pread(s->fd, fixed, sizeof fixed, pos) < 0)
            break;
        uint32_t len = ulp__journal_record_length(fixed);
        if (len < sizeof fixed || len > end - pos)
            break;
        if (len > rec_cap) {
            unsigned char *r = realloc(rec, len);
            if (r == NULL) {
                st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
                break;
            }
            rec = r;
            rec_cap = len;
        }
        ulp__journal_record r;
        memcpy(rec, fixed, sizeof fixed);
        if (ulp__journal_pread(s->fd, rec + sizeof fixed, len - sizeof fixed, pos + sizeof fixed) <
                0 ||
            ulp__journal_record_decode(rec, (size_t)(end - pos), &r) != len)
            break;
        /* A chain that returns to a block is caught below; one through many
         * overlapping blocks ends when it has walked the file's size. */
        walked += len;
        if (walked > s->file_size)
            break;
        if (r.kind == ULP__JOURNAL_NEXT) {
            uint64_t nb;
            if (!block_at(s, r.addr, ULP__JOURNAL_LATER_BLOCK, &nb) ||
                (uint64_t)r.occurrence != nb) {
                js->chain_broken = 1;
                break;
            }
            /* A next record that leads back to a block already walked would
             * read its captures again: the chain is broken. */
            int added = ulp__offsets_add(&walked_blocks, r.addr);
            if (added < 0) {
                st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
                break;
            }
            if (added == 0) {
                js->chain_broken = 1;
                break;
            }
            block = r.addr;
            bytes = nb;
            pos = block + ULP__JOURNAL_HEADER_BYTES;
            continue;
        }
        if (r.kind == ULP__JOURNAL_CAPTURE || r.kind == ULP__JOURNAL_KEPT) {
            int rc = visit(ctx, &r);
            if (rc < 0) {
                st = ULP_ENOMEM;
                ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
                break;
            }
            if (rc > 0)
                break;
        }
        pos += len;
    }
    free(rec);
    free(walked_blocks.v);
    return st;
}
