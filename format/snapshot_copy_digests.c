/*
 * The digest-only rendition of an open snapshot (ulp_snapshot_copy_digests):
 * the file a capture of the same tensors in mode "digest" writes, made from
 * one captured in mode "data" or "both".  Each capture, in seq order,
 * becomes /digests/<name>/<occurrence>: the XXH64 digest of each of its
 * (request, position) rows (common/digest.c, as the session computes them)
 * with its attributes, written by the writer's ulp__writer_add_digests, so
 * that a digest-mode capture and a rendition hold equal digests.  The
 * produced `tokens` and the fed token ids are kept in full beside their
 * digests (ulp__writer_add_kept), as digest mode keeps them; /run, /env,
 * /observed and the root attributes
 * are carried over.  It is what moves of a file between nodes when only its
 * digests are needed (`ulpprof repair --digests`, ulpprof.ray.streams).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_kept.h"
#include "common/digest.h"
#include "common/error.h"
#include "copy_target.h"
#include "snapshot_digests.h"
#include "snapshot_priv.h"
#include "writer.h"

/* Capture `i` of `s` as digests (and in full when digest mode keeps it so). */
static ulp_status render_one(const ulp_snapshot *s, size_t i, ulp__writer *w, ulp_error *err)
{
    const ulp_capture_info *c = ulp_snapshot_capture(s, i);
    if (c == NULL)
        return ulp__error(err, ULP_EIO, "'%s': changed since it was opened", s->path);
    ulp__desc d;
    ulp__desc_of_capture(c, &d);
    size_t elem = ulp_dtype_size(c->dtype);
    uint64_t nbytes = c->elements * elem;
    void *buf = NULL;
    const void *data = NULL;
    ulp_status st = ULP_OK;
    /* The view maps the bytes of a contiguous dataset; `buf` serves the others. */
    if (c->elements > 0 && (buf = malloc((size_t)nbytes)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': capture '%s/%" PRId64 "': out of memory", s->path,
                          c->name, c->occurrence);
    if (c->elements > 0)
        st = ulp_snapshot_view(s, i, 0, c->elements, buf, &data, err);
    ulp__digest_shape ds = {d.ndim, d.shape, d.row_rank, d.positions};
    uint64_t rows = ulp__digest_row_count(&ds);
    uint64_t *dg = st == ULP_OK ? malloc(rows > 0 ? (size_t)rows * sizeof *dg : 1) : NULL;
    if (st == ULP_OK && dg == NULL)
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (st == ULP_OK) {
        ulp__digest_rows(&ds, data, elem, dg);
        st = ulp__desc_kept_in_full(&d) ? ulp__writer_add_kept(w, &d, dg, rows, data, nbytes, err)
                                        : ulp__writer_add_digests(w, &d, dg, rows, err);
    }
    if (data != NULL && data != buf)
        ulp_snapshot_view_release(s, data, nbytes);
    free(dg);
    free(buf);
    return st;
}

/* /run, /env and /observed of `s`, key by key. */
static ulp_status copy_groups(const ulp_snapshot *s, ulp__writer *w, ulp_error *err)
{
    ulp_status st = ULP_OK;
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_run_count(s); i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_RUN, ulp_snapshot_run(s, i)->key,
                                  ulp_snapshot_run(s, i)->value, err);
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_env_count(s); i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_ENV, ulp_snapshot_env(s, i)->key,
                                  ulp_snapshot_env(s, i)->value, err);
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_observed_count(s); i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_OBSERVED, ulp_snapshot_observed(s, i)->key,
                                  ulp_snapshot_observed(s, i)->value, err);
    return st;
}

/*
 * A file whose /digests lists another number of captures than it holds in
 * /captures (a "both" capture with a selection: digests of every capture,
 * data of the selected ones) cannot be rendered from its data: its digests
 * of the unselected captures would be lost.
 */
static ulp_status check_digests(const ulp_snapshot *s, ulp_error *err)
{
    ulp__digest_entry *e = NULL;
    size_t n = 0;
    int has_data = 0;
    ulp_status st = ulp__digests_read(s->path, &e, &n, &has_data, err);
    if (st != ULP_OK)
        return st;
    ulp__digests_free(e, n);
    size_t caps = ulp_snapshot_capture_count(s);
    if (n > 0 && n != caps)
        return ulp__error(err, ULP_EINVAL,
                          "'%s': holds digests of %zu captures and the data of %zu (captured "
                          "with a selection?): its digests cannot be made from its data",
                          s->path, n, caps);
    return ULP_OK;
}

ulp_status ulp_snapshot_copy_digests(const ulp_snapshot *s, const char *path, ulp_error *err)
{
    ulp_error_clear(err);
    if (s == NULL || path == NULL || path[0] == '\0')
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_copy_digests: no snapshot or no path");
    ulp_status st = check_digests(s, err);
    if (st != ULP_OK)
        return st;
    /* Created here, never over a file that exists, so that it is ours to
     * remove when the rendition fails. */
    struct stat made;
    st = ulp__copy_target_create(path, &made, err);
    if (st != ULP_OK)
        return st;
    ulp__writer *w = NULL;
    st = ulp__writer_create_as(path, s->label, s->writer, s->created_unix_ns,
                               ULP__WRITER_DIGEST_FILE, &w, err);
    if (st == ULP_OK)
        st = copy_groups(s, w, err);
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_capture_count(s); i++)
        st = render_one(s, i, w, err);
    if (w != NULL) {
        ulp_error cerr;
        if (st != ULP_OK) /* removed below: not rewritten under another inode first */
            ulp__writer_no_rewrite(w);
        ulp_status cst = ulp__writer_close(w, &cerr);
        if (st == ULP_OK && cst != ULP_OK) {
            st = cst;
            if (err != NULL)
                *err = cerr;
        }
    }
    if (st != ULP_OK)
        ulp__copy_target_remove(path, &made);
    return st;
}
