/*
 * Raw reads of tensor bits in bounded chunks.  Contiguous datasets (the
 * default layout, and what every ulpprof writer produces) are read with
 * pread(2) at their file offset, outside HDF5's global lock, so several
 * threads can stream one file, or handed out as views of the file's
 * mapping; other layouts go through H5Dread under a mutex.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "h5types.h"
#include "snapshot_file.h"
#include "snapshot_priv.h"
#include "snapshot_read_priv.h"

/* pread(2) at most this many bytes per call. */
#define PREAD_MAX ((size_t)1 << 30)
/* The most chunk cache one open dataset may use. */
#define CHUNK_CACHE_MAX ((size_t)256 << 20)

/* OR-selects one box: fixed prefix coordinates below `k`, rows [r, r+n) at `k`, all above. */
static herr_t select_box(hid_t space, int rank, const hsize_t *dims, const hsize_t *prefix, int k,
                         hsize_t r, hsize_t n, int *first)
{
    hsize_t start[ULP_SNAPSHOT_MAX_RANK], count[ULP_SNAPSHOT_MAX_RANK];
    for (int j = 0; j < rank; j++) {
        start[j] = j < k ? prefix[j] : j == k ? r : 0;
        count[j] = j < k ? 1 : j == k ? n : dims[j];
    }
    herr_t rc = H5Sselect_hyperslab(space, *first ? H5S_SELECT_SET : H5S_SELECT_OR, start, NULL,
                                    count, NULL);
    *first = 0;
    return rc;
}

/*
 * Selects the row-major elements [a, b) of the block below prefix[0..k):
 * at most a partial leading row, a box of whole rows and a partial trailing
 * row at each level, so at most 2 * rank boxes in all.
 */
static herr_t select_range(hid_t space, int rank, const hsize_t *dims, hsize_t *prefix, int k,
                           hsize_t a, hsize_t b, int *first)
{
    if (k == rank - 1)
        return select_box(space, rank, dims, prefix, k, a, b - a, first);
    hsize_t inner = 1;
    for (int j = k + 1; j < rank; j++)
        inner *= dims[j];
    hsize_t r0 = a / inner, rlast = (b - 1) / inner;
    if (r0 == rlast && !(a % inner == 0 && b - a == inner)) {
        prefix[k] = r0;
        return select_range(space, rank, dims, prefix, k + 1, a - r0 * inner, b - r0 * inner,
                            first);
    }
    if (a % inner != 0) {
        prefix[k] = r0;
        if (select_range(space, rank, dims, prefix, k + 1, a % inner, inner, first) < 0)
            return -1;
        r0++;
    }
    hsize_t rend = b / inner;
    if (rend > r0 && select_box(space, rank, dims, prefix, k, r0, rend - r0, first) < 0)
        return -1;
    if (b % inner != 0) {
        prefix[k] = rend;
        return select_range(space, rank, dims, prefix, k + 1, 0, b % inner, first);
    }
    return 0;
}

/*
 * Opens a dataset with a chunk cache that holds a few of its chunks: HDF5's
 * default of 1 MiB makes slab reads of larger compressed chunks re-inflate
 * the chunk for every slab (docs/hdf5.md: 29 s instead of 0.6 s).
 */
static hid_t open_for_reading(hid_t file, const ulp__capture_src *src)
{
    /* A capture found through the journal has no path; its header has an address. */
    if (src->h5path == NULL)
        return H5Oopen_by_addr(file, (haddr_t)src->oaddr);
    const char *path = src->h5path;
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0)
        return d;
    hid_t dcpl = H5Dget_create_plist(d);
    hid_t type = H5Dget_type(d);
    hsize_t cdims[H5S_MAX_RANK];
    int nd = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED
                 ? H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims)
                 : -1;
    size_t chunk_bytes = type >= 0 ? H5Tget_size(type) : 0;
    for (int k = 0; k < nd; k++)
        chunk_bytes = cdims[k] > ((size_t)1 << 40) / (chunk_bytes ? chunk_bytes : 1)
                          ? ((size_t)1 << 40)
                          : chunk_bytes * cdims[k];
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (type >= 0)
        H5Tclose(type);
    if (nd <= 0 || chunk_bytes * 4 <= ((size_t)1 << 20))
        return d;
    size_t cache = chunk_bytes * 4 > CHUNK_CACHE_MAX ? CHUNK_CACHE_MAX : chunk_bytes * 4;
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0 || H5Pset_chunk_cache(dapl, 521, cache, 1.0) < 0) {
        if (dapl >= 0)
            H5Pclose(dapl);
        return d;
    }
    hid_t d2 = H5Dopen2(file, path, dapl);
    H5Pclose(dapl);
    if (d2 < 0)
        return d;
    H5Dclose(d);
    return d2;
}

static ulp_status read_h5(const ulp_snapshot *s, size_t i, const ulp_capture_info *c,
                          const ulp__capture_src *src, uint64_t first, uint64_t count, void *buf,
                          ulp_error *err)
{
    ulp_status st = ULP_OK;
    hid_t d = -1, type = -1, fspace = -1, mspace = -1;

    pthread_mutex_lock(&s->h5->lock);
    ulp__h5_silence(); /* HDF5's error printing is per thread */
    if (s->h5->dset >= 0 && s->h5->idx != i) {
        H5Dclose(s->h5->dset);
        s->h5->dset = -1;
    }
    if (s->h5->dset < 0) {
        s->h5->dset = open_for_reading(ulp__snap_file(s), src);
        s->h5->idx = i;
    }
    d = s->h5->dset;
    type = d >= 0 ? H5Dget_type(d) : -1;
    fspace = d >= 0 ? H5Dget_space(d) : -1;
    hsize_t n = count;
    mspace = H5Screate_simple(1, &n, NULL);
    if (type < 0 || fspace < 0 || mspace < 0)
        goto fail;
    if (c->ndim == 0) {
        if (H5Sselect_all(fspace) < 0)
            goto fail;
    } else {
        hsize_t dims[ULP_SNAPSHOT_MAX_RANK], prefix[ULP_SNAPSHOT_MAX_RANK] = {0};
        int firstbox = 1;
        for (int k = 0; k < c->ndim; k++)
            dims[k] = (hsize_t)c->shape[k];
        if (select_range(fspace, c->ndim, dims, prefix, 0, first, first + count, &firstbox) < 0)
            goto fail;
    }
    if (H5Sget_select_npoints(fspace) != (hssize_t)count)
        goto fail;
    /* Memory type = file type: HDF5 moves the bits and converts nothing.  The
     * memory space has the slab's size (never H5S_ALL, see docs/hdf5.md). */
    if (H5Dread(d, type, mspace, fspace, H5P_DEFAULT, buf) < 0)
        goto fail;
    goto cleanup;
fail : {
    ulp__h5_err_info info;
    ulp__h5_last_error(&info);
    st = ulp__error(err, ULP_EIO,
                    "'%s': capture '%s/%" PRId64 "': cannot read elements [%" PRIu64 ", %" PRIu64
                    ") (%s)",
                    s->path, c->name, c->occurrence, first, first + count, info.desc);
}
cleanup:
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    if (type >= 0)
        H5Tclose(type);
    pthread_mutex_unlock(&s->h5->lock);
    return st;
}

ulp_status ulp_snapshot_read(const ulp_snapshot *s, size_t i, uint64_t first, uint64_t count,
                             void *buf, ulp_error *err)
{
    if (s == NULL || i >= s->ncaps || (count > 0 && buf == NULL))
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_read: invalid argument");
    const ulp__capture_src *src = NULL;
    const ulp_capture_info *c = ulp__snap_cap(s, i, &src);
    if (c == NULL) /* a page of a table in pages could not be made again */
        return ulp__error(err, ULP_EIO, "'%s': changed since it was opened", s->path);
    if (first > c->elements || count > c->elements - first)
        return ulp__error(err, ULP_ERANGE,
                          "'%s': capture '%s/%" PRId64 "': elements [%" PRIu64 ", +%" PRIu64
                          ") pass its end (%" PRIu64 " elements)",
                          s->path, c->name, c->occurrence, first, count, c->elements);
    if (count == 0)
        return ULP_OK;
    const unsigned char *kept = ulp__snap_kept(s, i);
    if (kept != NULL) { /* a few bytes a position, read at the open */
        size_t esize = ulp_dtype_size(c->dtype);
        memcpy(buf, kept + first * esize, (size_t)count * esize);
        return ULP_OK;
    }
    if (src->offset == ULP__NO_OFFSET)
        return read_h5(s, i, c, src, first, count, buf, err);

    size_t esize = ulp_dtype_size(c->dtype);
    uint64_t off = src->offset + first * esize;
    uint64_t left = count * esize;
    char *p = buf;
    while (left > 0) {
        size_t want = left > PREAD_MAX ? PREAD_MAX : (size_t)left;
        ssize_t got = pread(s->fd, p, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return ulp__error(err, ULP_EIO, "'%s': capture '%s/%" PRId64 "': read failed: %s",
                              s->path, c->name, c->occurrence, strerror(errno));
        /* Open checked that the dataset lies inside the file: it shrank since. */
        if (got == 0)
            return ulp__error(err, ULP_ETRUNC,
                              "'%s': capture '%s/%" PRId64
                              "': the file shrank while it was read (truncated at byte %" PRIu64
                              " by another program?)",
                              s->path, c->name, c->occurrence, off);
        p += got;
        off += (uint64_t)got;
        left -= (uint64_t)got;
    }
    return ULP_OK;
}

const void *ulp__snapshot_mapped(const ulp_snapshot *s, size_t i, uint64_t first)
{
    const ulp__capture_src *src = NULL;
    const ulp_capture_info *c = s != NULL && s->map != NULL ? ulp__snap_cap(s, i, &src) : NULL;
    if (c == NULL || src->offset == ULP__NO_OFFSET)
        return NULL;
    uint64_t esize = ulp_dtype_size(c->dtype);
    uint64_t off = src->offset + first * esize;
    /* As ulp_snapshot_view(): misaligned elements are copied. */
    if (first > c->elements || esize == 0 || off % esize != 0 || off > s->file_size)
        return NULL;
    return s->map + off;
}

const size_t *ulp__snapshot_by_name(const ulp_snapshot *s)
{
    return s->lazy != NULL ? ulp__lazy_by_name(s) : s->by_name;
}

ulp_status ulp_snapshot_view(const ulp_snapshot *s, size_t i, uint64_t first, uint64_t count,
                             void *buf, const void **out, ulp_error *err)
{
    if (out == NULL)
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_view: invalid argument");
    *out = buf;
    /*
     * A small view is copied: mapping its pages and dropping their span again
     * (ulp_snapshot_view_release) costs more than pread(2) of a few KiB, and
     * 10,000 captures of 512 bytes spent 70% of diff's time in page-table
     * work.
     */
    const ulp__capture_src *src = NULL;
    const ulp_capture_info *c = s != NULL ? ulp__snap_cap(s, i, &src) : NULL;
    uint64_t esz = c != NULL ? ulp_dtype_size(c->dtype) : 0;
    if (esz != 0 && count <= ULP__VIEW_COPY_BYTES / esz)
        return ulp_snapshot_read(s, i, first, count, buf, err);
    if (c != NULL && s->map != NULL && src->offset != ULP__NO_OFFSET) {
        uint64_t esize = ulp_dtype_size(c->dtype);
        uint64_t off = src->offset + first * esize;
        struct stat sb;
        /*
         * Open checked that the dataset lies inside the file.  A file cut
         * since then would turn a mapped read into SIGBUS: look again, and
         * let pread(2) report the truncation.
         */
        /* The kernels load whole elements: a dataset at an offset that is
         * not a multiple of its element size (h5py places some so) would be
         * misaligned loads, undefined behaviour; it goes through pread. */
        if (first <= c->elements && count <= c->elements - first && off % esize == 0 &&
            fstat(s->fd, &sb) == 0 && (uint64_t)sb.st_size >= off + count * esize) {
            *out = s->map + off;
#ifdef MADV_POPULATE_READ
            /* One call maps the range's pages, instead of a fault every few pages. */
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            uintptr_t lo = (uintptr_t)(s->map + off) & ~(page - 1);
            uintptr_t hi = (uintptr_t)(s->map + off + count * esize);
            madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
#endif
            return ULP_OK;
        }
    }
    return ulp_snapshot_read(s, i, first, count, buf, err);
}

void ulp_snapshot_view_release(const ulp_snapshot *s, const void *p, uint64_t bytes)
{
    if (s == NULL || s->map == NULL || p == NULL)
        return;
    const unsigned char *q = p;
    if (q < s->map || q >= s->map + s->file_size)
        return; /* a caller's buffer, not the mapping */
    /*
     * Drop the pages from this process (not from the page cache) so that
     * the resident set stays bounded by the views in use, whatever the file
     * size.  A fault maps more than its page -- around it, up to the whole
     * span of its page table (2 MiB on x86-64) where the page cache holds
     * large folios -- also before the view and past its end: releasing the
     * view's own pages would leave the others mapped at every view's edges
     * (50 MiB for a 1 GiB file read in 512 KiB views).  So whole spans go,
     * within the mapping.  A neighbouring view's pages that go with them
     * are mapped again at their next access (a read-only shared mapping:
     * nothing is lost); views aligned to ULP__VIEW_SPAN share none.
     */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t span = ULP__VIEW_SPAN > page ? ULP__VIEW_SPAN : page;
    uintptr_t base = (uintptr_t)s->map;
    uintptr_t end = (base + (uintptr_t)s->file_size + page - 1) & ~(page - 1);
    uintptr_t lo = (uintptr_t)q & ~(span - 1);
    uintptr_t hi = ((uintptr_t)q + (uintptr_t)bytes + span - 1) & ~(span - 1);
    lo = lo < base ? base : lo;
    hi = hi > end || hi < lo ? end : hi;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
