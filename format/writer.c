/* The HDF5 snapshot writer (FORMAT.md), single-threaded. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capture_check.h"
#include "index_seal.h"
#include "writer_internal.h"

/*
 * Group layout: old-style groups (a B-tree of symbol-table nodes plus a
 * local heap of names; see name_lcpl() for why they stay old-style).  HDF5
 * writes metadata in a flush without ordering or journaling, so a kill in
 * the middle of a flush that moves a heap or splits a node can lose the
 * group.  Fewer moves and splits mean fewer such flushes: symbol-table
 * nodes of 2 x 64 entries instead of 2 x 4, and name heaps sized up front
 * (occurrence names take 8 bytes each).
 * Measured with 256 KiB captures, a writer that never rests and SIGKILL at
 * random instants: 0 of 600 kills lost a flushed capture (5 of 600 before
 * the metadata blocks and ASCII links below; 2 of 60 with the plain
 * recipe of docs/hdf5.md), none left a file that did not open or
 * a named capture with wrong bytes.  tests/python/test_crash.py, which
 * kills at every write: all plain kills pass; one torn write (half of a
 * write reaching the disk) out of 110 still loses /captures.
 */
#define SYM_LEAF_K                64
#define DIGEST_SYM_LEAF_K         8 /* a digest file's: its root's 8 links in one node */
#define ISTORE_K                  2 /* chunk B-tree nodes of 4 entries, see file_create */
#define META_BLOCK_BYTES          ((hsize_t)32 << 10)
#define MDC_BYTES                 ((size_t)256 << 10) /* metadata cache bound, see file_create */
#define CAPTURES_HEAP_HINT        8192
#define DIGEST_CAPTURES_HEAP_HINT 512 /* a digest file's /captures: a few names at most */
#define GROUP_HEAP_HINT           1024

static int64_t now_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0)
        fn(*id);
    *id = H5I_INVALID_HID;
}

/* --- names -------------------------------------------------------------------- */

/*
 * The link creation list for a name: UTF-8 only when the name has a
 * non-ASCII byte.  An ASCII name gets HDF5's default (ASCII, which is UTF-8
 * too), and that matters: one UTF-8 link turns an old-style group (symbol
 * table) into a new-style one, whose switch from compact to dense storage
 * at the 9th link rewrites the group in a flush that a kill can tear
 * (tests/python/test_crash.py part C lost /captures that way).
 */
static hid_t name_lcpl(const ulp__writer *w, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80)
            return w->lcpl;
    return H5P_DEFAULT;
}

/* --- create / close ------------------------------------------------------------- */

static void writer_free(ulp__writer *w)
{
    ulp__writer_link_release(w);
    for (size_t i = 0; i < w->groups_open.cap; i++)
        if (w->groups_open.keys[i] != NULL)
            H5Gclose((hid_t)w->groups_open.values[i]);
    ulp__strmap_release(&w->groups_open);
    ulp__writer_attrs_release(w);
    ulp__writer_trace_release(w);
    ulp__writer_index_release(w);
    ulp__writer_map_release(w);
    for (int i = 0; i < ULP_DTYPE_COUNT; i++)
        close_id(&w->types[i], H5Tclose);
    for (int g = 0; g < ULP__WRITER_NGROUPS; g++)
        close_id(&w->groups[g], H5Gclose);
    close_id(&w->captures, H5Gclose);
    ulp__writer_digests_release(w);
    close_id(&w->lcpl, H5Pclose);
    close_id(&w->dcpl, H5Pclose);
    close_id(&w->gcpl, H5Pclose);
    ulp__writer_journal_release(w);
    ulp__strmap_release(&w->occurrences);
    free(w->path);
    free(w);
}

/*
 * Creates the file with its access and creation properties, takes the
 * sec2 driver's descriptor and flushes.  Sets w->file (or leaves it
 * invalid on error).
 */
/*
 * H5Fcreate(H5F_ACC_TRUNC) truncates the file before it finds that another
 * writer holds HDF5's lock on it (flock(2)), so a second session on the
 * same path wiped the first one's captures.  Ask for the lock first, on a
 * descriptor that truncates nothing.  Not a regular file: refused too (a
 * FIFO would block, a device is no snapshot).
 */
static ulp_status check_not_in_use(const char *path, ulp_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return ULP_OK; /* absent (or unreadable: H5Fcreate says why) */
    struct stat sb;
    ulp_status st = ULP_OK;
    if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode))
        st = ulp__error(err, ULP_EIO, "cannot create '%s': not a regular file", path);
    else if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        st = ulp__error(err, ULP_EIO,
                        "cannot create '%s': another process or session is using it (its "
                        "writer still runs?); the file is left as it is",
                        path);
    close(fd); /* releases the probe's lock */
    return st;
}

static ulp_status file_create(ulp__writer *w, const char *path, unsigned flags, ulp_error *err)
{
    ulp_status st = ULP_OK;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* Close every object with the file, so that a leaked id can never keep
     * the file open behind a successful close. */
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    /*
     * Metadata comes from 32 KiB blocks reserved at the end of the file.  A
     * flush writes the entries that point to new objects and, after them,
     * the superblock with the new end-of-file address; a kill in between
     * left pointers past the end of the file as the superblock knew it
     * ("addr overflow": 22 of 164 kill points of tests/python/test_crash.py
     * part D).  With the block reserved, new metadata lies inside the end
     * address the last flush wrote.  32 KiB
     * (not more) keeps a new file small: tests/python/test_diskfull.py runs
     * the writer under a 64 KiB file-size limit.  Not less either: with 4
     * KiB, a reference-workload file killed in the middle of a flush
     * (test_crash.py part C, write 46 of 467) did not open ("addr
     * overflow" in /run's header).  The price: a flush or the close gives
     * back a block's unused end only when nothing follows it in the file,
     * and the raw data written after a block (a digest file's rows, at its
     * close) leaves up to 32 KiB of it unused (docs/performance.md, "File
     * size").
     */
    if (fapl >= 0)
        H5Pset_meta_block_size(fapl, META_BLOCK_BYTES);
    /*
     * No sieve buffer.  A dataset up to its size (64 KiB by default) was
     * written into a zeroed buffer of that size, allocated for it, and
     * written out by the next flush: a memset and a memcpy of the bytes
     * for nothing, since a capture is written once and never read back
     * (a fifth of the instructions of a session of 64 KiB captures,
     * callgrind).  The bytes now reach the file at H5Dwrite, before the
     * flush that writes the header naming them, as larger ones always
     * did; they land at the same places as before.
     */
    if (fapl >= 0)
        H5Pset_sieve_buf_size(fapl, 0);
    /*
     * Bound the metadata cache.  It counts the on-disk size of an object
     * header (a few hundred bytes per capture) while the decoded header
     * with its attributes takes about ten times that in memory, and by
     * default it may grow to 32 MiB of on-disk size: a session of many
     * small captures grew by about 1 KiB of memory per capture.  Each
     * flush walks the whole cache (64 KiB instead of 256 took a writer that
     * flushed twice per capture from 58 to 53 us per small capture), but
     * the writer now flushes twice per batch of captures (writer_link.c),
     * and a batch's links into a group of many occurrences need its 64 KiB
     * heap block and B-tree nodes in the cache: with 64 KiB, every link read
     * the block back and wrote it out, each time checksummed (23% of the
     * writer's CPU at 1M occurrences of one name).
     */
    ulp__h5_fapl_fixed_cache(fapl, MDC_BYTES);
    /* The default (earliest) file format: after a kill it opens without
     * h5clear, unlike the latest format (docs/hdf5.md).  Its chunked datasets
     * (the digests', the index's) are indexed by B-tree nodes of 2 x ISTORE_K
     * entries, allocated whole: 2 KiB each with HDF5's 32, most of a short
     * digest-mode file (124 of 267 KiB for 12 names, five chunked datasets a
     * name), 304 bytes with a K of 4 and 176 with 2.  Most of a digest
     * file's datasets are written at its close, in one chunk: a larger node
     * only holds room for chunks that never come.  A long run's datasets
     * get a deeper tree (a million rows of one name, 128 chunks: 4 levels).
     * A K of its own makes the superblock version 1 (HDF5 1.6+).
     *
     * A digest file (ULP__WRITER_DIGEST_FILE) has no /captures group of many
     * names, which symbol-table nodes of 2 x 64 entries (SYM_LEAF_K, above)
     * are for: a node of its root's few links took 5 KiB of a 58 KiB
     * 32-token file, 648 bytes with 2 x 8. */
    unsigned leaf_k = (flags & ULP__WRITER_DIGEST_FILE) ? DIGEST_SYM_LEAF_K : SYM_LEAF_K;
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fcpl >= 0 && (H5Pset_sym_k(fcpl, 16, leaf_k) < 0 || H5Pset_istore_k(fcpl, ISTORE_K) < 0)) {
        H5Pclose(fcpl);
        fcpl = H5I_INVALID_HID;
    }
    if ((st = check_not_in_use(path, err)) != ULP_OK) {
        if (fcpl >= 0)
            H5Pclose(fcpl);
        if (fapl >= 0)
            H5Pclose(fapl);
        return st;
    }
    w->file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl >= 0 ? fcpl : H5P_DEFAULT,
                        fapl >= 0 ? fapl : H5P_DEFAULT);
    if (w->file < 0) {
        /* Before any other HDF5 call: the next one clears the error stack. */
        char detail[256];
        ulp__h5_detail(detail, sizeof(detail));
        st = ulp__error(err, ULP_EIO, "cannot create '%s': %s", path, detail);
    }
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (st != ULP_OK)
        return st;
    /* The sec2 driver's descriptor, fixed for the file's life: the journal
     * is written with it. */
    int *handle = NULL;
    if (H5Fget_vfd_handle(w->file, H5P_DEFAULT, (void **)&handle) >= 0 && handle != NULL)
        w->fd = *handle;
    /* A kill before the first flush leaves a file that cannot be opened. */
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        return ulp__writer_h5_fail(err, w, "flush the new file");
    return ULP_OK;
}

/* The property lists and file types every capture uses. */
static ulp_status writer_props(ulp__writer *w, ulp_error *err)
{
    w->lcpl = H5Pcreate(H5P_LINK_CREATE);
    w->dcpl = H5Pcreate(H5P_DATASET_CREATE);
    w->squeeze = H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 &&
                 H5Zfilter_avail(H5Z_FILTER_SHUFFLE) > 0 &&
                 H5Zfilter_avail(H5Z_FILTER_FLETCHER32) > 0;
    w->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (w->lcpl < 0 || w->dcpl < 0 || w->gcpl < 0 ||
        H5Pset_local_heap_size_hint(w->gcpl, GROUP_HEAP_HINT) < 0 ||
        /*
         * A capture's group gets one link per occurrence.  In an old-style
         * group (a B-tree and one local heap of all its names) every flush
         * rewrote the whole heap, and once it outgrew the metadata cache
         * every insert read it back: 100,000 occurrences took 56 s.  A
         * group that tracks creation order is a new-style one (links in a
         * fractal heap indexed by a v2 B-tree), whose flush touches bounded
         * blocks: 191 us per capture at 10,000 and at 100,000.  HDF5
         * 1.8+ and h5py read it.
         */
        H5Pset_link_creation_order(w->gcpl, H5P_CRT_ORDER_TRACKED) < 0 ||
        H5Pset_char_encoding(w->lcpl, H5T_CSET_UTF8) < 0 ||
        H5Pset_layout(w->dcpl, H5D_CONTIGUOUS) < 0 ||
        H5Pset_fill_time(w->dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        /*
         * No object times in a capture's header (nor its group's): HDF5
         * otherwise keeps a modification-time message there and rewrites
         * it at every attribute created and written (nine for a capture of
         * ulpprof.torch), reading the clock each time: 5% of the writer's
         * instructions per capture (callgrind).  Nothing reads them; the
         * capture's own time is its `time_ns` attribute.
         */
        H5Pset_obj_track_times(w->dcpl, 0) < 0 || H5Pset_obj_track_times(w->gcpl, 0) < 0)
        return ulp__writer_h5_fail(err, w, "set up property lists");
    for (int i = 0; i < ULP_DTYPE_COUNT; i++) {
        w->types[i] = ulp__h5_file_type((ulp_dtype)i);
        if (w->types[i] < 0)
            return ulp__writer_h5_fail(err, w, "build the file types");
    }
    return ULP_OK;
}

/* The root attributes, /run, /env, /captures and the journal, flushed. */
static ulp_status file_layout(ulp__writer *w, const char *label, const char *writer_name,
                              int64_t created_unix_ns, unsigned flags, ulp_error *err)
{
    ulp_status st = ULP_OK;
    hid_t journal = H5I_INVALID_HID;
    hid_t captures_gcpl = H5Pcreate(H5P_GROUP_CREATE);
    /* /run and /env hold attributes only: no B-tree, heap or symbol-table node (h5types.h). */
    hid_t attrs_gcpl = ulp__h5_small_gcpl(0, 0);
    /* Sized for a data file's many names up front (see the top of the file); a digest
     * file's names are few (a selection, a capture too wide to keep), and its 8 KiB were
     * a seventh of a 32-token file. */
    if (captures_gcpl >= 0)
        H5Pset_local_heap_size_hint(captures_gcpl, (flags & ULP__WRITER_DIGEST_FILE)
                                                       ? DIGEST_CAPTURES_HEAP_HINT
                                                       : CAPTURES_HEAP_HINT);
    if (captures_gcpl < 0 || attrs_gcpl < 0) {
        st = ulp__writer_h5_fail(err, w, "set up property lists");
        goto cleanup;
    }
    label = label != NULL ? label : "";
    writer_name = writer_name != NULL ? writer_name : "";
    int64_t created = created_unix_ns != 0 ? created_unix_ns : now_unix_ns();
    if (ulp__h5_attr_write_str(w->file, "format", ULP__FORMAT_NAME) < 0 ||
        ulp__h5_attr_write_i32(w->file, "format_version", ULP_FORMAT_VERSION) < 0 ||
        ulp__h5_attr_write_str(w->file, "label", label) < 0 ||
        ulp__h5_attr_write_str(w->file, "writer", writer_name) < 0 ||
        ulp__h5_attr_write_i64(w->file, "created_unix_ns", created) < 0) {
        st = ulp__writer_h5_fail(err, w, "write the root attributes");
        goto cleanup;
    }
    ulp__writer_map_root(w, label, writer_name, created);
    w->groups[ULP__WRITER_RUN] = H5Gcreate2(w->file, "run", H5P_DEFAULT, attrs_gcpl, H5P_DEFAULT);
    w->groups[ULP__WRITER_ENV] = H5Gcreate2(w->file, "env", H5P_DEFAULT, attrs_gcpl, H5P_DEFAULT);
    w->captures = H5Gcreate2(w->file, "captures", H5P_DEFAULT, captures_gcpl, H5P_DEFAULT);
    journal = ulp__writer_journal_create(w);
    if (w->groups[0] < 0 || w->groups[1] < 0 || w->captures < 0 || journal < 0) {
        st = ulp__writer_h5_fail(err, w, "create the groups");
        goto cleanup;
    }
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
        st = ulp__writer_h5_fail(err, w, "flush");
        goto cleanup;
    }
    st = ulp__writer_journal_start(w, journal, err);

cleanup:
    if (journal >= 0)
        H5Dclose(journal);
    if (captures_gcpl >= 0)
        H5Pclose(captures_gcpl);
    if (attrs_gcpl >= 0)
        H5Pclose(attrs_gcpl);
    return st;
}

ulp_status ulp__writer_create(const char *path, const char *label, const char *writer_name,
                              int64_t created_unix_ns, ulp__writer **out, ulp_error *err)
{
    return ulp__writer_create_as(path, label, writer_name, created_unix_ns, 0, out, err);
}

ulp_status ulp__writer_create_as(const char *path, const char *label, const char *writer_name,
                                 int64_t created_unix_ns, unsigned flags, ulp__writer **out,
                                 ulp_error *err)
{
    ulp__writer_exit_guard();
    if (out == NULL)
        return ulp__error(err, ULP_EINVAL, "writer: no output pointer");
    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return ulp__error(err, ULP_EINVAL, "writer: empty path");
    ulp__writer *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->path = strdup(path)) == NULL) {
        free(w);
        return ulp__error(err, ULP_ENOMEM, "cannot create '%s': out of memory", path);
    }
    w->flags = flags;
    w->digests = w->occ_ftype = H5I_INVALID_HID;
    ulp__strmap_init(&w->digest_occ);
    w->file = w->captures = w->lcpl = w->dcpl = w->gcpl = H5I_INVALID_HID;
    w->fd = -1;
    w->link_batch = 1;
    for (int g = 0; g < ULP__WRITER_NGROUPS; g++)
        w->groups[g] = H5I_INVALID_HID;
    w->trace = w->names_ds = w->kernels_ds = H5I_INVALID_HID;
    w->str_type = w->row_mtype = w->row_ftype = H5I_INVALID_HID;
    w->gemms_ds = w->gemm_mtype = w->gemm_ftype = H5I_INVALID_HID;
    ulp__writer_index_init(w);
    for (int i = 0; i < ULP_DTYPE_COUNT; i++)
        w->types[i] = w->attr_dtype[i] = H5I_INVALID_HID;
    for (int i = 0; i < ULP_ROLE_COUNT; i++)
        w->attr_role[i] = H5I_INVALID_HID;
    w->attr_scalar = w->attr_pair = H5I_INVALID_HID;
    ulp__strmap_init(&w->occurrences);
    ulp__strmap_init(&w->groups_open);
    ulp__strmap_init(&w->name_ids);

    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    ulp_status st = file_create(w, path, flags, err);
    if (st == ULP_OK)
        st = writer_props(w, err);
    if (st == ULP_OK)
        st = ulp__writer_attrs_init(w, err);
    if (st == ULP_OK)
        st = file_layout(w, label, writer_name, created_unix_ns, flags, err);
    if (st != ULP_OK) {
        hid_t file = w->file;
        w->file = H5I_INVALID_HID;
        writer_free(w);
        if (file >= 0 && H5Fclose(file) < 0)
            ulp__writer_close_failed();
    } else {
        *out = w;
    }
    ulp__h5_quiet_end(&q);
    return st;
}

ulp_status ulp__writer_close(ulp__writer *w, ulp_error *err)
{
    if (w == NULL)
        return ULP_OK;
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    /* The captures still waiting for their links: linked before the index
     * is finished and the file closed.  A file whose links failed gets no
     * closed mark, so that it is read through the journal. */
    ulp_status st = w->file >= 0 ? ulp__writer_digests_write(w, 1, err) : ULP_OK;
    if (w->file >= 0) {
        ulp_error lerr;
        ulp_status lst = ulp__writer_sync(w, st == ULP_OK ? err : &lerr);
        if (st == ULP_OK)
            st = lst;
    }
    if (w->link_failed && st == ULP_OK)
        st = ulp__error(err, ULP_EIO, "cannot link captures in '%s'", w->path);
    uint64_t jfirst = w->jbytes > 0 ? w->jfirst : 0;
    /* The same file for the closed mark, even if the path now names another. */
    int mark_fd = w->file >= 0 && jfirst > 0 && w->fd >= 0 ? fcntl(w->fd, F_DUPFD_CLOEXEC, 0) : -1;
    ulp__index_seal_job seal = {0};
    if (mark_fd < 0 || ulp__writer_index_finish(w, &seal) != 0)
        seal.seal_off = 0;
    hid_t file = w->file;
    w->file = H5I_INVALID_HID;
    char *path = w->path;
    w->path = NULL;
    int digest_file = (w->flags & ULP__WRITER_DIGEST_FILE) != 0, compact = 0;
    struct stat written;
    writer_free(w);
    if (file >= 0 && H5Fclose(file) < 0) {
        char detail[256];
        ulp__h5_detail(detail, sizeof(detail));
        st = ulp__error(err, ULP_EIO, "cannot close '%s': %s", path, detail);
        ulp__writer_close_failed();
    }
    /*
     * Last, the journal's closed mark: a reader trusts the groups of a file
     * that has it, and reads a file without it through the journal, so it
     * never walks groups that a kill may have torn (HDF5 can loop forever
     * in a torn B-tree).  4 bytes in one page: a kill cannot tear them.
     * Not an error when it cannot be written (the file was moved, say):
     * without the mark the captures are still all read, through the journal.
     */
    if (mark_fd >= 0) {
        /* First the index's seal: the hash of the file as HDF5 left it
         * (the mark's bytes left out); the mark stays the last write. */
        if (st == ULP_OK) {
            int sealed = ulp__writer_index_seal(mark_fd, jfirst, &seal) == 0;
            /* Then, when both are written, the stamp: readers that find the
             * file's mtime still the stamp skip the hash (index.h). */
            int marked = ulp__journal_pwrite(mark_fd, ULP__JOURNAL_CLOSED, 4,
                                             jfirst + ULP__JOURNAL_CLOSED_AT) == 0;
            if (marked && sealed)
                (void)ulp__index_stamp_set(mark_fd, seal.stamp);
            /* A digest file, closed whole, is rewritten tight (writer_compact.c) once
             * this descriptor no longer holds the writer's lock. */
            compact = marked && digest_file && fstat(mark_fd, &written) == 0;
        }
        close(mark_fd);
    }
    if (compact)
        ulp__writer_compact(path, &written);
    free(seal.ranges);
    free(seal.map);
    free(path);
    ulp__h5_quiet_end(&q);
    return st;
}

void ulp__writer_no_rewrite(ulp__writer *w)
{
    if (w != NULL)
        w->flags &= ~ULP__WRITER_DIGEST_FILE;
}

ulp_status ulp__writer_set_attr(ulp__writer *w, ulp__writer_group group, const char *key,
                                const char *value, ulp_error *err)
{
    if ((unsigned)group >= ULP__WRITER_NGROUPS || key == NULL || key[0] == '\0' || value == NULL)
        return ulp__error(err, ULP_EINVAL, "writer: invalid attribute");
    static const char *const what[ULP__WRITER_NGROUPS] = {
        "write a /run attribute", "write an /env attribute", "write an /observed attribute"};
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    ulp_status st = ULP_OK;
    /* /observed only in files that observe something: the others are as before. */
    if (group == ULP__WRITER_OBSERVED && w->groups[group] < 0) {
        hid_t gcpl = ulp__h5_small_gcpl(0, 0);
        if (gcpl >= 0) {
            w->groups[group] = H5Gcreate2(w->file, "observed", H5P_DEFAULT, gcpl, H5P_DEFAULT);
            H5Pclose(gcpl);
        }
    }
    int written =
        w->groups[group] >= 0 && ulp__h5_attr_write_str(w->groups[group], key, value) == 0;
    ulp__writer_map_attr(w, group, key, value, written);
    if (!written)
        st = ulp__writer_h5_fail(err, w, what[group]);
    else if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = ulp__writer_h5_fail(err, w, "flush");
    ulp__h5_quiet_end(&q);
    return st;
}

int ulp__writer_fd(const ulp__writer *w)
{
    return w->fd;
}

int64_t ulp__writer_capture_count(const ulp__writer *w)
{
    return w->next_seq;
}

uint64_t ulp__writer_kernel_count(const ulp__writer *w)
{
    return w->kernel_count;
}

/* --- captures --------------------------------------------------------------------- */

/* Checks a capture's descriptor against its bytes and fills `dims`. */
static ulp_status capture_check(const ulp__desc *d, const void *data, size_t nbytes,
                                hsize_t dims[ULP_MAX_RANK], ulp_error *err)
{
    char why[400];
    size_t want = 0;
    if (ulp__capture_check(d, &want, why, sizeof(why)) != ULP_OK)
        return ulp__error(err, ULP_EINVAL, "%s", why);
    if (want != nbytes)
        return ulp__error(err, ULP_EINVAL, "capture '%.200s': %zu bytes given, the shape needs %zu",
                          d->name, nbytes, want);
    if (nbytes > 0 && data == NULL)
        return ulp__error(err, ULP_EINVAL, "capture '%.200s': NULL data for %zu bytes", d->name,
                          nbytes);
    for (int i = 0; i < d->ndim; i++)
        dims[i] = (hsize_t)d->shape[i];
    return ULP_OK;
}

/*
 * Creates the capture's dataset anonymous in *ds, writes its bytes and its
 * attributes.  On error *ds may hold the dataset, for the caller to close.
 */
static ulp_status anon_dataset(ulp__writer *w, const ulp__desc *d, const hsize_t dims[ULP_MAX_RANK],
                               const void *data, size_t nbytes, int64_t time_ns, hid_t *ds,
                               ulp_error *err)
{
    hid_t type = w->types[d->dtype];
    ulp_status st = ULP_OK;
    hid_t space = d->ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(d->ndim, dims, NULL);
    if (space < 0)
        return ulp__writer_h5_fail(err, w, "create a dataspace");
    *ds = H5Dcreate_anon(w->file, type, space, w->dcpl, H5P_DEFAULT);
    if (*ds < 0)
        st = ulp__writer_h5_fail(err, w, "create a dataset");
    /* Memory type = file type: HDF5 copies the bits and converts nothing. */
    else if (nbytes > 0 && H5Dwrite(*ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = ulp__writer_h5_fail(err, w, "write a dataset");
    else if (ulp__writer_capture_attrs(w, *ds, d, w->next_seq, time_ns) < 0)
        st = ulp__writer_h5_fail(err, w, "write dataset attributes");
    H5Sclose(space);
    return st;
}

/*
 * A new name's first capture, at once: flushed, named in the journal,
 * linked into its anonymous group `g`, flushed, the group linked into
 * /captures, flushed.  On failure, what it linked is unlinked again (the
 * in-memory file stays consistent with the counters).
 */
static ulp_status first_capture(ulp__writer *w, hid_t g, hid_t ds, const ulp__journal_record *jr,
                                const char *dsname, ulp_error *err)
{
    ulp_status st = ULP_OK;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        return ulp__writer_h5_fail(err, w, "flush");
    /* The capture is on disk: the journal names it before any group does,
     * so that a torn update of a group cannot hide it. */
    if ((st = ulp__writer_journal_append(w, jr, err)) != ULP_OK)
        return st;
    if (H5Olink(ds, g, dsname, H5P_DEFAULT, H5P_DEFAULT) < 0)
        return ulp__writer_h5_fail(err, w, "link a dataset");
    /* The group holds a complete dataset on disk before it gets a name. */
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = ulp__writer_h5_fail(err, w, "flush");
    else if (H5Olink(g, w->captures, jr->name, name_lcpl(w, jr->name), H5P_DEFAULT) < 0)
        st = ulp__writer_h5_fail(err, w, "link a capture group");
    else if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
        st = ulp__writer_h5_fail(err, w, "flush");
        H5Ldelete(w->captures, jr->name, H5P_DEFAULT);
    }
    if (st != ULP_OK)
        H5Ldelete(g, dsname, H5P_DEFAULT);
    return st;
}

ulp_status ulp__writer_add(ulp__writer *w, const ulp__desc *d, const void *data, size_t nbytes,
                           int64_t *seq, ulp_error *err)
{
    hsize_t dims[ULP_MAX_RANK];
    ulp_status st = capture_check(d, data, nbytes, dims, err);
    if (st != ULP_OK)
        return st;

    int inserted = 0;
    int64_t *occ = ulp__strmap_upsert(&w->occurrences, d->name, 0, &inserted);
    if (occ == NULL)
        return ulp__error(err, ULP_ENOMEM, "capture '%s': out of memory", d->name);

    hid_t g = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    char dsname[32];
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);

    /*
     * A capture becomes visible atomically, even to a reader of a file whose
     * writer was killed at any instant: the dataset (and, for a new name,
     * its group) is created anonymous, written, given its attributes and
     * flushed -- bytes, header and end-of-file address all on disk, nothing
     * naming them -- then named in the journal, and only then linked, and
     * flushed again.  A kill before the journal names it leaves bytes that
     * nothing names; before the link, a capture only the journal names;
     * after it, a complete capture.  (A named dataset written in place
     * could reach the disk by a metadata cache eviction with its attributes
     * but before its bytes or the file's end address: seen in testing as a
     * dataset H5Dread refused.)  A name that has a group waits for its
     * batch (writer_link.c); a new name's first capture goes at once,
     * after the batch (the journal stays in seq order).
     * A negative counter marks a name whose group is not linked yet.
     */
    int new_group = inserted || *occ < 0;
    int64_t occurrence = new_group ? 0 : *occ;
    if (w->kept_any) { /* a kept capture of the name took some numbers (writer_digest.c) */
        int64_t free_from = ulp__writer_kept_next(w, d->name);
        occurrence = occurrence > free_from ? occurrence : free_from;
    }
    if (new_group) {
        *occ = -1;
        if ((st = ulp__writer_sync(w, err)) != ULP_OK)
            goto cleanup;
        g = H5Gcreate_anon(w->captures, w->gcpl, H5P_DEFAULT);
        if (g < 0) {
            st = ulp__writer_h5_fail(err, w, "create a capture group");
            goto cleanup;
        }
    }
    snprintf(dsname, sizeof(dsname), "%" PRId64, occurrence);
    ulp__writer_written written = {.seq = w->next_seq,
                                   .occurrence = occurrence,
                                   .time_ns = d->time_ns != 0 ? d->time_ns : now_unix_ns(),
                                   .offset = ULP__INDEX_NO_OFFSET,
                                   .bytes = nbytes};
    if ((st = anon_dataset(w, d, dims, data, nbytes, written.time_ns, &ds, err)) != ULP_OK)
        goto cleanup;
    H5O_info_t oi;
    if (H5Oget_info2(ds, &oi, H5O_INFO_BASIC) < 0) {
        st = ulp__writer_h5_fail(err, w, "locate a dataset");
        goto cleanup;
    }
    written.oaddr = (uint64_t)oi.addr;
    haddr_t off = nbytes > 0 ? H5Dget_offset(ds) : HADDR_UNDEF;
    if (off != HADDR_UNDEF)
        written.offset = (uint64_t)off;
    if (new_group) {
        ulp__journal_record jr = {.kind = ULP__JOURNAL_CAPTURE,
                                  .seq = w->next_seq,
                                  .occurrence = occurrence,
                                  .addr = (uint64_t)oi.addr,
                                  .name = d->name,
                                  .name_len = strlen(d->name)};
        st = first_capture(w, g, ds, &jr, dsname, err);
    } else if ((st = ulp__writer_link_later(w, ds, d->name, occurrence, w->next_seq, written.oaddr,
                                            nbytes, err)) == ULP_OK) {
        ds = H5I_INVALID_HID; /* the batch holds it now */
    }
    if (st != ULP_OK)
        goto cleanup;
    ulp__writer_index_add(w, d, &written);
    if (seq != NULL)
        *seq = w->next_seq;
    w->next_seq++;
    *occ = occurrence + 1;
    /* A failure of the batch fails the session: its captures are not all
     * in the file. */
    if (ulp__writer_link_due(w))
        st = ulp__writer_sync(w, err);

cleanup:
    if (ds >= 0)
        H5Dclose(ds);
    /* The groups may now disagree with what an index would say. */
    if (st != ULP_OK && ds >= 0)
        ulp__writer_index_off(w);
    if (g >= 0)
        ulp__writer_group_done(w, d->name, g, 0, st == ULP_OK || *occ >= 0);
    ulp__h5_quiet_end(&q);
    return st;
}

/* --- kernel trace -------------------------------------------------------------------- */

ulp_status ulp__writer_add_kept(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                uint64_t rows, const void *data, size_t nbytes, ulp_error *err)
{
    if (w == NULL || d == NULL || d->name == NULL)
        return ulp__error(err, ULP_EINVAL, "writer: invalid kept capture");
    if (ulp__writer_kept_fits(w, d))
        return ulp__writer_digests_kept(w, d, digests, rows, data, nbytes, err);
    /* One dtype and row width a name's `value`: another one goes to /captures. */
    ulp_status st = ulp__writer_add(w, d, data, nbytes, NULL, err);
    return st != ULP_OK ? st : ulp__writer_add_digests(w, d, digests, rows, err);
}
