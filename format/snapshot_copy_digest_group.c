/*
 * What a copy (ulp_snapshot_copy) takes of /digests: of a closed file, the
 * group whole (or, for a digest file's rewrite at its close, written again
 * in the shared layout: digest_shared_write.c); of a killed writer's file, whose /digests a kill
 * may have torn (HDF5's copy of a torn group can crash inside HDF5), each name whose every dataset
 * reads whole, its attributes the group's.  And which of the snapshot's captures the copy's
 * /digests keeps (FORMAT.md "Digests": kept occurrences), so that the copy writes the others to
 * /captures (those that only a killed writer's journal holds among them).
 */
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "digest_shared_write.h"
#include "digest_table.h"
#include "h5types.h"
#include "snapshot_priv.h"

/* 1 when dataset `name` of `g` reads whole (its chunks there and inflating). */
static herr_t reads_whole(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    const ulp_snapshot *s = ((const void **)arg)[0];
    int *ok = ((void **)arg)[1];
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t t = ds >= 0 ? H5Dget_type(ds) : -1, sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    void *buf = NULL;
    int good = n >= 0 && size > 0 && !ulp__snapshot_absurd_bytes(s, (uint64_t)n * size) &&
               (buf = malloc((size_t)n * size + 1)) != NULL &&
               (n == 0 || (ulp__h5_storage_whole(ds) &&
                           H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0));
    if (good && n > 0 && H5Tdetect_class(t, H5T_VLEN) != 0)
        H5Dvlen_reclaim(t, sp, H5P_DEFAULT, buf);
    else if (good && n > 0 && H5Tis_variable_str(t) > 0)
        H5Dvlen_reclaim(t, sp, H5P_DEFAULT, buf);
    free(buf);
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (ds >= 0)
        H5Dclose(ds);
    *ok = *ok && good;
    return good ? 0 : 1;
}

/* /digests/<name> of a killed writer's file into `out`'s /digests, when it reads whole. */
static herr_t copy_name(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    void **a = arg;
    const ulp_snapshot *s = a[0];
    hid_t out = *(hid_t *)a[1];
    ulp__strmap *copied = a[2];
    const ulp__strmap *kept = a[3];
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    /* A name that keeps captures the reader left out (it could not read them) stays out: the
     * copy, a closed file, would be refused for it. */
    int ok = sub >= 0 &&
             (H5Lexists(sub, "value", H5P_DEFAULT) <= 0 || ulp__strmap_find(kept, name) != NULL);
    const void *walk[2] = {s, &ok};
    if (ok && H5Literate(sub, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, reads_whole, walk) < 0)
        ok = 0;
    if (sub >= 0)
        H5Gclose(sub);
    if (!ok)
        return 0; /* left out of the copy, as the reader leaves out what it cannot read */
    if (H5Ocopy(g, name, out, name, H5P_DEFAULT, H5P_DEFAULT) < 0)
        return 0; /* left out, as one that does not read whole */
    return ulp__strmap_upsert(copied, name, 1, NULL) == NULL ? -1 : 0;
}

/*
 * Whether kept capture `i` is in its name's table: not one that only the journal of a killed
 * writer's file holds (a kill before the flush that would have written it).  The copy writes
 * those to /captures, beside its copy of the name's table.
 */
static int in_table(const ulp_snapshot *s, size_t i)
{
    return ulp__snap_kept(s, i) != NULL && s->srcs[i].oaddr != ULP__KEPT_JOURNAL;
}

/* The string attribute `name` of `from` onto `to`, when it has one; -1 on failure. */
static int copy_str_attr(hid_t from, hid_t to, const char *name)
{
    char *v = NULL;
    const char *why = NULL;
    int rc = ulp__attr_read_str(from, name, &v, &why);
    int bad = rc < 0 || (rc == 0 && ulp__h5_attr_write_str(to, name, v) < 0);
    free(v);
    return bad ? -1 : 0;
}

/* The closed file's /digests written again in the shared layout: 0, 1 (it is not packed-1:
 * copied as it is), or -1. */
static int write_shared(hid_t file, hid_t out)
{
    hid_t g = H5Gopen2(file, "/digests", H5P_DEFAULT);
    char *layout = NULL, *algorithm = NULL;
    const char *why = NULL;
    int rc = 1;
    if (g >= 0 && ulp__attr_read_str(g, "layout", &layout, &why) == 0 &&
        strcmp(layout, ULP__DIGEST_LAYOUT) == 0 &&
        ulp__attr_read_str(g, "algorithm", &algorithm, &why) == 0)
        rc = ulp__digests_write_shared(g, out, algorithm) < 0 ? -1 : 0;
    free(layout);
    free(algorithm);
    if (g >= 0)
        H5Gclose(g);
    return rc;
}

int ulp__copy_digest_group(const ulp_snapshot *s, hid_t out, int shared, unsigned char **in_digests)
{
    *in_digests = NULL;
    hid_t file = s->file;
    if (file < 0 || H5Lexists(file, "/digests", H5P_DEFAULT) <= 0)
        return 0;
    ulp__strmap copied;
    ulp__strmap_init(&copied);
    int rc = 0;
    if (!s->unclosed) {
        rc = shared ? write_shared(file, out) : 1;
        if (rc == 1)
            rc = H5Ocopy(file, "/digests", out, "/digests", H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
    } else {
        hid_t g = H5Gopen2(file, "/digests", H5P_DEFAULT);
        hid_t og = g >= 0 ? H5Gcreate2(out, "digests", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                          : H5I_INVALID_HID;
        ulp__strmap kept; /* the names whose table's kept captures the reader read */
        ulp__strmap_init(&kept);
        for (size_t i = 0; i < s->ncaps; i++)
            if (in_table(s, i))
                ulp__strmap_upsert(&kept, ulp__snap_cap(s, i, NULL)->name, 1, NULL);
        void *arg[4] = {(void *)(uintptr_t)s, &og, &copied, &kept};
        rc = g >= 0 && og < 0 ? -1 : 0;
        /* A /digests a kill tore so that it cannot be opened, listed or its attributes read
         * stays out of the copy, as far as it is torn (the names copied before stay): its
         * kept captures go to /captures, from the journal. */
        if (g >= 0 && og >= 0 &&
            (copy_str_attr(g, og, "algorithm") < 0 || copy_str_attr(g, og, "layout") < 0)) {
            H5Gclose(og);
            og = H5I_INVALID_HID;
            rc = H5Ldelete(out, "digests", H5P_DEFAULT) < 0 ? -1 : 0;
        }
        if (g >= 0 && og >= 0)
            (void)H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, copy_name, arg);
        ulp__strmap_release(&kept);
        if (og >= 0)
            H5Gclose(og);
        if (g >= 0)
            H5Gclose(g);
    }
    if (rc == 0 && s->has_kept) {
        *in_digests = calloc(s->ncaps ? s->ncaps : 1, 1);
        for (size_t i = 0; *in_digests != NULL && i < s->ncaps; i++)
            (*in_digests)[i] =
                ulp__snap_kept(s, i) != NULL &&
                (!s->unclosed ||
                 (in_table(s, i) &&
                  ulp__strmap_find(&copied, ulp__snap_cap(s, i, NULL)->name) != NULL));
        if (*in_digests == NULL)
            rc = -1;
    }
    ulp__strmap_release(&copied);
    return rc;
}
