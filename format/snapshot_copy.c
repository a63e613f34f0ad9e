/*
 * A clean copy of an open snapshot (ulp_snapshot_copy): what `ulpprof repair`
 * writes for a file whose writer was killed, so that h5py, h5dump and other
 * HDF5 tools -- which read the groups, not the capture journal -- see every
 * capture the reader found.
 *
 * The copy is made with H5Ocopy, object by object: each capture dataset
 * (reached by its path, or by its header address when the reader found it
 * through the journal) with its bytes and attributes as they are, /run,
 * /env, /digests (and the captures it keeps), and /trace when the reader
 * could read it.  The root attributes are
 * the reader's view of them.  The copy has no journal: it is written and
 * closed in one go, and fails as a whole (the partial output is removed).
 * It has a sealed capture index and an open map (snapshot_copy_index.c,
 * written through the snapshot writer's index_write.c), so it opens
 * without HDF5.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "copy_target.h"
#include "h5types.h"
#include "snapshot_file.h"
#include "snapshot_priv.h"
#include "writer_internal.h"

#define COPY_ISTORE_K 2

/* A capture object of `s`, opened by path or, found through the journal, by address. */
static hid_t open_capture(const ulp_snapshot *s, size_t i)
{
    const ulp__capture_src *src = NULL;
    if (ulp__snap_cap(s, i, &src) == NULL)
        return -1;
    return src->h5path != NULL ? H5Oopen(s->file, src->h5path, H5P_DEFAULT)
                               : H5Oopen_by_addr(s->file, (haddr_t)src->oaddr);
}

/* Copies the group `path` of `s` to `out` when it exists; 0 or -1. */
static int copy_group(const ulp_snapshot *s, hid_t out, const char *path)
{
    htri_t ex = H5Lexists(s->file, path, H5P_DEFAULT);
    if (ex <= 0)
        return ex == 0 ? 0 : -1;
    return H5Ocopy(s->file, path, out, path, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
}

/*
 * Kept capture `i` of a killed writer's file (whose /digests is not copied: a kill may have
 * torn it) as the dataset /captures/<name>/<occurrence> of the copy: its bytes as the reader
 * read them, the attributes a /captures dataset of it has (writer_attrs.c, `attrs`'s types).
 */
static int write_kept(const ulp_snapshot *s, size_t i, hid_t caps, hid_t lcpl, const char *rel,
                      ulp__writer *attrs)
{
    const ulp_capture_info *c = ulp__snap_cap(s, i, NULL);
    ulp__desc d;
    ulp__desc_of_capture(c, &d);
    hsize_t dims[ULP_SNAPSHOT_MAX_RANK];
    for (int k = 0; k < c->ndim; k++)
        dims[k] = (hsize_t)c->shape[k];
    hid_t type = ulp__h5_file_type(c->dtype);
    hid_t space = c->ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(c->ndim, dims, NULL);
    hid_t ds = type >= 0 && space >= 0
                   ? H5Dcreate2(caps, rel, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT)
                   : H5I_INVALID_HID;
    int bad = ds < 0 ||
              (c->elements > 0 &&
               H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ulp__snap_kept(s, i)) < 0) ||
              ulp__writer_capture_attrs(attrs, ds, &d, c->seq, c->time_ns) < 0;
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return bad ? -1 : 0;
}

/* in_digests[i]: capture i is kept in the copy's /digests (ulp__copy_digest_group). */
static ulp_status copy_captures(const ulp_snapshot *s, hid_t out, const char *path,
                                const unsigned char *in_digests, ulp_error *err)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    hid_t caps = H5Gcreate2(out, "captures", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ulp_status st = ULP_OK;
    ulp__writer attrs; /* the capture attributes' types, for the kept captures of a killed file */
    memset(&attrs, 0, sizeof attrs);
    attrs.path = (char *)(uintptr_t)path;
    attrs.fd = -1;
    int kept_out = s->has_kept; /* some may not be in the copy's /digests */
    if (lcpl < 0 || caps < 0 || H5Pset_char_encoding(lcpl, H5T_CSET_UTF8) < 0 ||
        H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
        (kept_out && ulp__writer_attrs_init(&attrs, err) != ULP_OK)) {
        st = ulp__error(err, ULP_EIO, "cannot write '%s': cannot create /captures", path);
        goto cleanup;
    }
    for (size_t i = 0; i < s->ncaps && st == ULP_OK; i++) {
        const ulp_capture_info *c = ulp__snap_cap(s, i, NULL);
        if (c == NULL) {
            st = ulp__error(err, ULP_EIO, "'%s': changed since it was opened", s->path);
            break;
        }
        if (in_digests != NULL && in_digests[i])
            continue; /* kept in the copy's /digests */
        char dst[64];
        snprintf(dst, sizeof dst, "%" PRId64, c->occurrence);
        size_t n = strlen(c->name) + strlen(dst) + 2;
        char *rel = malloc(n);
        if (rel == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "cannot write '%s': out of memory", path);
            break;
        }
        snprintf(rel, n, "%s/%s", c->name, dst);
        if (ulp__snap_kept(s, i) != NULL) {
            if (write_kept(s, i, caps, lcpl, rel, &attrs) < 0)
                st =
                    ulp__error(err, ULP_EIO, "cannot write '%s': capture '%s/%s' cannot be written",
                               path, c->name, dst);
            free(rel);
            continue;
        }
        hid_t o = open_capture(s, i);
        /* "." copies the object itself, however it was reached. */
        if (o < 0 || H5Ocopy(o, ".", caps, rel, H5P_DEFAULT, lcpl) < 0)
            st = ulp__error(err, ULP_EIO, "cannot write '%s': capture '%s/%s' cannot be copied",
                            path, c->name, dst);
        if (o >= 0)
            H5Oclose(o);
        free(rel);
    }
cleanup:
    if (kept_out)
        ulp__writer_attrs_release(&attrs);
    if (caps >= 0)
        H5Gclose(caps);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return st;
}

ulp_status ulp_snapshot_copy(const ulp_snapshot *s, const char *path, ulp_error *err)
{
    return ulp__snapshot_copy_as(s, path, 0, err);
}

ulp_status ulp__snapshot_copy_as(const ulp_snapshot *s, const char *path, int shared,
                                 ulp_error *err)
{
    ulp_error_clear(err);
    if (s == NULL || path == NULL || path[0] == '\0')
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_copy: no snapshot or no path");
    ulp__h5_silence();
    /* The file is created here, never over one that exists, so that it is
     * ours to remove if HDF5 then fails (it left an empty one behind when
     * out of memory). */
    struct stat made;
    ulp_status made_st = ulp__copy_target_create(path, &made, err);
    if (made_st != ULP_OK)
        return made_st;
    /* A snapshot opened from its open map has its HDF5 file opened now,
     * under the lock that ulp_snapshot_read()'s own lazy open holds. */
    pthread_mutex_lock(&s->h5->lock);
    hid_t file = ulp__snap_file(s);
    pthread_mutex_unlock(&s->h5->lock);
    if (file < 0) {
        ulp__copy_target_remove(path, &made);
        return ulp__error(err, ULP_EHDF5, "cannot copy '%s': HDF5 cannot open it", s->path);
    }
    /* Same layout rules as the writer's: the earliest file format, chunk B-tree nodes of
     * 2 x K entries (format/writer.c: with HDF5's K of 32 each chunked dataset took a 2 KiB
     * node, 87 of a 124 KB copy of a 32-token digest file). */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fcpl >= 0 && H5Pset_istore_k(fcpl, COPY_ISTORE_K) < 0) {
        H5Pclose(fcpl);
        fcpl = H5I_INVALID_HID;
    }
    hid_t out = H5Fcreate(path, H5F_ACC_TRUNC, fcpl >= 0 ? fcpl : H5P_DEFAULT, H5P_DEFAULT);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (out < 0) {
        ulp__h5_err_info info;
        ulp__h5_last_error(&info);
        ulp__copy_target_remove(path, &made);
        return ulp__error(err, info.nomem ? ULP_ENOMEM : ULP_EIO, "cannot create '%s': %s", path,
                          info.nomem ? "out of memory" : info.desc);
    }
    ulp_status st = ULP_OK;
    if (ulp__h5_attr_write_str(out, "format", ULP__FORMAT_NAME) < 0 ||
        ulp__h5_attr_write_i32(out, "format_version", s->format_version) < 0 ||
        ulp__h5_attr_write_str(out, "label", s->label) < 0 ||
        ulp__h5_attr_write_str(out, "writer", s->writer) < 0 ||
        (s->created_unix_ns != 0 &&
         ulp__h5_attr_write_i64(out, "created_unix_ns", s->created_unix_ns) < 0))
        st = ulp__error(err, ULP_EIO, "cannot write '%s': root attributes", path);
    if (st == ULP_OK && (copy_group(s, out, "/run") < 0 || copy_group(s, out, "/env") < 0 ||
                         copy_group(s, out, "/observed") < 0))
        st = ulp__error(err, ULP_EIO, "cannot write '%s': /run, /env or /observed cannot be copied",
                        path);
    /* The digests (with what they keep of captures): whole of a closed file, the names that
     * read whole of a killed writer's; the kept captures of the others go to /captures. */
    unsigned char *in_digests = NULL;
    if (st == ULP_OK && ulp__copy_digest_group(s, out, shared, &in_digests) < 0)
        st = ulp__error(err, ULP_EIO, "cannot write '%s': /digests cannot be copied", path);
    if (st == ULP_OK)
        st = copy_captures(s, out, path, in_digests, err);
    /* The trace only when the reader read it: a torn one stays behind.  Its kernels or its
     * GEMM rows (a CPU producer's trace has only those). */
    if (st == ULP_OK && ulp__copy_has_trace(s) && copy_group(s, out, "/trace") < 0)
        st = ulp__error(err, ULP_EIO, "cannot write '%s': /trace cannot be copied", path);
    /* A capture index, so that the copy opens fast however it was written. */
    ulp__index_seal_job seal;
    int indexed = st == ULP_OK && ulp__copy_index_write(s, out, in_digests, &seal) == 0;
    free(in_digests);
    if (H5Fclose(out) < 0 && st == ULP_OK)
        st = ulp__error(err, ULP_EIO, "cannot write '%s': cannot close it", path);
    if (indexed && st != ULP_OK)
        ulp__index_seal_job_drop(&seal);
    else if (indexed)
        (void)ulp__copy_index_seal(path, &seal); /* unsealed: read through the groups */
    if (st != ULP_OK)
        ulp__copy_target_remove(path, &made);
    return st;
}
