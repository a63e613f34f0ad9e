/*
 * The capture journal of the writer: blocks of the file that the writer
 * pwrite()s itself, naming each capture before any group does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "writer_internal.h"

/*
 * The capture journal (format/journal.h): a 4 KiB first block (80 captures
 * with 20-byte names; tests/python/test_diskfull.py runs the writer under a
 * 64 KiB file-size limit), each later block a quarter of the blocks before
 * it (at least 4 KiB, at most 1 MiB): a block is allocated whole and what
 * it leaves unused stays in the file, which doubling made up to half the
 * journal (a digest-mode file journals two kept captures a step: 512 steps
 * took 124 KiB of blocks for 61 KiB of records).  Growing by a quarter
 * keeps that under a fifth, for about twice the blocks (each an object
 * header and a flush).  A block keeps room for the record that points to
 * the next one.
 */
#define JOURNAL_FIRST_BYTES ((uint64_t)4 << 10)
#define JOURNAL_MAX_BYTES   ((uint64_t)1 << 20)
#define JOURNAL_END_BYTES   8 /* the zero length written after every record */
#define JOURNAL_RESERVE     (ULP__JOURNAL_RECORD_FIXED + JOURNAL_END_BYTES)

static ulp_status journal_io_fail(ulp_error *err, const ulp__writer *w)
{
    int e = errno;
    return ulp__error(err, e == ENOSPC || e == EFBIG || e == EDQUOT ? ULP_ENOSPC : ULP_EIO,
                      "cannot write '%s': the capture journal: %s", w->path, strerror(e));
}

/*
 * A journal block: a contiguous uint8 dataset, allocated at creation and
 * never filled (its bytes are ours to pwrite at its file offset; HDF5 never
 * reads or writes them).  Named `link_name`, or anonymous when NULL.
 */
static hid_t journal_block_create(ulp__writer *w, uint64_t bytes, const char *link_name)
{
    hsize_t dim = (hsize_t)bytes;
    hid_t space = H5Screate_simple(1, &dim, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = H5I_INVALID_HID;
    if (space >= 0 && dcpl >= 0 && H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0)
        ds = link_name != NULL ? H5Dcreate2(w->file, link_name, H5T_STD_U8LE, space, H5P_DEFAULT,
                                            dcpl, H5P_DEFAULT)
                               : H5Dcreate_anon(w->file, H5T_STD_U8LE, space, dcpl, H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return ds;
}

/*
 * Writes the header of block `ds` (created, flushed) and an end mark after
 * it; sets *off to the block's file offset.  The bytes of a block are
 * whatever the file held there (sparse zeros, or freed space), so a reader
 * must meet an end mark before anything else that is not a record.
 */
static ulp_status journal_block_start(ulp__writer *w, hid_t ds, uint64_t bytes, int first,
                                      uint64_t *off, ulp_error *err)
{
    haddr_t a = H5Dget_offset(ds);
    int fd = w->fd;
    if (a == HADDR_UNDEF || fd < 0)
        return ulp__writer_h5_fail(err, w, "locate the capture journal");
    unsigned char head[ULP__JOURNAL_HEADER_BYTES + JOURNAL_END_BYTES] = {0};
    ulp__journal_header_encode(head, (uint64_t)a, bytes, first);
    if (ulp__journal_pwrite(fd, head, sizeof head, (uint64_t)a) < 0)
        return journal_io_fail(err, w);
    *off = (uint64_t)a;
    return ULP_OK;
}

/* Makes the block at `off` of `bytes` bytes the one records go to. */
static void journal_use(ulp__writer *w, uint64_t off, uint64_t bytes)
{
    w->jblock = off;
    w->jbytes = bytes;
    w->jtotal += bytes;
    w->jused = ULP__JOURNAL_HEADER_BYTES;
}

ulp_status ulp__writer_journal_append(ulp__writer *w, const ulp__journal_record *r, ulp_error *err)
{
    size_t len = ulp__journal_record_size(r->name_len);
    if (len == 0)
        return ulp__error(err, ULP_EINVAL, "capture '%.*s': name too long", 64, r->name);
    int fd = w->fd;
    if (fd < 0 || w->jbytes == 0)
        return ulp__error(err, ULP_EIO, "cannot write '%s': no capture journal", w->path);
    if (w->jused + len + JOURNAL_END_BYTES + JOURNAL_RESERVE > w->jbytes) {
        uint64_t bytes = w->jtotal / 4;
        if (bytes < JOURNAL_FIRST_BYTES)
            bytes = JOURNAL_FIRST_BYTES;
        if (bytes > JOURNAL_MAX_BYTES)
            bytes = JOURNAL_MAX_BYTES;
        uint64_t need = ULP__JOURNAL_HEADER_BYTES + len + JOURNAL_END_BYTES + JOURNAL_RESERVE;
        if (bytes < need)
            bytes = need;
        if (ULP__GROW(w->jextra, w->jextra_cap, w->njextra + 1) != 0)
            return ulp__error(err, ULP_ENOMEM, "cannot write '%s': out of memory", w->path);
        hid_t ds = journal_block_create(w, bytes, NULL);
        if (ds < 0)
            return ulp__writer_h5_fail(err, w, "grow the capture journal");
        w->jextra[w->njextra++] = ds;
        /* The new block is on disk (end-of-file address included) and
         * started before the old one points to it. */
        if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
            return ulp__writer_h5_fail(err, w, "flush");
        uint64_t off = 0;
        ulp_status st = journal_block_start(w, ds, bytes, 0, &off, err);
        if (st != ULP_OK)
            return st;
        /* Records go to the new block only once the old one leads there. */
        unsigned char next[ULP__JOURNAL_RECORD_FIXED + JOURNAL_END_BYTES] = {0};
        ulp__journal_record nr = {
            .kind = ULP__JOURNAL_NEXT, .occurrence = (int64_t)bytes, .addr = off};
        ulp__journal_record_encode(next, &nr);
        if (ulp__journal_pwrite(fd, next, sizeof next, w->jblock + w->jused) < 0)
            return journal_io_fail(err, w);
        journal_use(w, off, bytes);
    }
    unsigned char small[256];
    unsigned char *buf =
        len + JOURNAL_END_BYTES <= sizeof small ? small : malloc(len + JOURNAL_END_BYTES);
    if (buf == NULL)
        return ulp__error(err, ULP_ENOMEM, "cannot write '%s': out of memory", w->path);
    ulp__journal_record_encode(buf, r);
    memset(buf + len, 0, JOURNAL_END_BYTES);
    int rc = ulp__journal_pwrite(fd, buf, len + JOURNAL_END_BYTES, w->jblock + w->jused);
    if (buf != small)
        free(buf);
    if (rc < 0)
        return journal_io_fail(err, w);
    w->jused += len;
    return ULP_OK;
}

hid_t ulp__writer_journal_create(ulp__writer *w)
{
    return journal_block_create(w, JOURNAL_FIRST_BYTES, ULP__JOURNAL_DATASET);
}

ulp_status ulp__writer_journal_start(ulp__writer *w, hid_t ds, ulp_error *err)
{
    ulp_status st = journal_block_start(w, ds, JOURNAL_FIRST_BYTES, 1, &w->jfirst, err);
    if (st == ULP_OK)
        journal_use(w, w->jfirst, JOURNAL_FIRST_BYTES);
    return st;
}

void ulp__writer_journal_release(ulp__writer *w)
{
    for (size_t i = 0; i < w->njextra; i++)
        if (w->jextra[i] >= 0)
            H5Dclose(w->jextra[i]);
    free(w->jextra);
    w->jextra = NULL;
    w->njextra = w->jextra_cap = 0;
}
