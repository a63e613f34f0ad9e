/*
 * A closed file's /digests of layout packed-1 written again in packed-2
 * (digest_view.h; FORMAT.md "Digests"): every name's tables one after the
 * other in datasets all names share, and a `names` table of their ranges.
 * Why: per name, packed-1 is a group and five datasets, each with its
 * header and the compressed ones with a chunk index: about 1.5 KB a name,
 * most of a short run's digest file.  Written by a digest file's rewrite at
 * its close (writer_compact.c), in one go: each name's tables read whole,
 * then each shared dataset written once, in one chunk.
 */
#include "digest_shared_write.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "digest_rows.h"
#include "digest_table.h"
#include "digest_view.h"
#include "h5types.h"

typedef struct shared {
    hid_t src, out, values;
    ulp__digest_name *names;
    size_t n, names_cap;
    ulp__digest_occ *occ;
    size_t nocc, occ_cap;
    uint64_t *dig;
    int64_t *pos, *req;
    size_t nrows, dig_cap, pos_cap, req_cap;
    char **inputs;
    size_t ninputs, inputs_cap;
    hid_t vlen; /* the inputs' string type */
} shared;

/* A 1-D dataset of `n` elements of `ftype` from `buf` (memory type `mt`): contiguous, or
 * when `squeeze`, one chunk with the writer's filters (ulp__digest_squeeze). */
static int write_1d(hid_t g, const char *name, hid_t ftype, hid_t mt, size_t n, const void *buf,
                    int squeeze)
{
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    /* HDF5 refuses fill time "never" where variable-length strings are (inputs, names). */
    int vlen = H5Tdetect_class(ftype, H5T_STRING) > 0;
    squeeze = squeeze && n > 0;
    int bad = sp < 0 || pl < 0 ||
              (squeeze ? H5Pset_chunk(pl, 1, &dim) < 0 || ulp__digest_squeeze(pl) < 0
                       : H5Pset_layout(pl, H5D_CONTIGUOUS) < 0) ||
              (!vlen && H5Pset_fill_time(pl, H5D_FILL_TIME_NEVER) < 0) ||
              ulp__h5_dcpl_no_attrs(pl) < 0;
    hid_t ds = bad ? H5I_INVALID_HID : H5Dcreate2(g, name, ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    bad = ds < 0 || (n > 0 && H5Dwrite(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0);
    if (ds >= 0)
        H5Dclose(ds);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    return bad ? -1 : 0;
}

/* The name's `value`, [rows, width] of its own type, as value/<name> of the copy. */
static int copy_value(shared *sh, const char *name, hid_t value, uint64_t rows)
{
    hid_t t = H5Dget_type(value), sp = H5Dget_space(value);
    hsize_t d[2] = {0, 0};
    int bad = t < 0 || sp < 0 || H5Sget_simple_extent_ndims(sp) != 2 ||
              H5Sget_simple_extent_dims(sp, d, NULL) != 2 || d[0] != rows;
    size_t bytes = bad ? 0 : (size_t)(d[0] * d[1] * H5Tget_size(t));
    void *buf = bad ? NULL : malloc(bytes > 0 ? bytes : 1);
    bad = bad || buf == NULL ||
          (bytes > 0 && H5Dread(value, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0);
    if (!bad && sh->values < 0) {
        hid_t gcpl = ulp__h5_small_gcpl(4, 32);
        sh->values = gcpl < 0 ? -1 : H5Gcreate2(sh->out, "value", H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (gcpl >= 0)
            H5Pclose(gcpl);
        bad = sh->values < 0;
    }
    hid_t pl = bad ? -1 : H5Pcreate(H5P_DATASET_CREATE),
          os = bad ? -1 : H5Screate_simple(2, d, NULL);
    hsize_t chunk[2] = {d[0] > 0 ? d[0] : 1, d[1] > 0 ? d[1] : 1};
    bad = bad || pl < 0 || os < 0 || H5Pset_chunk(pl, 2, chunk) < 0 ||
          ulp__digest_squeeze(pl) < 0 || H5Pset_fill_time(pl, H5D_FILL_TIME_NEVER) < 0 ||
          ulp__h5_dcpl_no_attrs(pl) < 0;
    hid_t ds = bad ? -1 : H5Dcreate2(sh->values, name, t, os, H5P_DEFAULT, pl, H5P_DEFAULT);
    bad = ds < 0 || (bytes > 0 && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0);
    if (ds >= 0)
        H5Dclose(ds);
    if (os >= 0)
        H5Sclose(os);
    if (pl >= 0)
        H5Pclose(pl);
    free(buf);
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    return bad ? -1 : 0;
}

/* One packed-1 name's tables appended to the shared ones. */
static herr_t one_name(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    shared *sh = arg;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    ulp__digest_view v;
    int bad = sub < 0 || ulp__digest_view_group(sub, &v) != NULL;
    hid_t mt = ulp__digest_occ_type();
    size_t no = bad ? 0 : (size_t)v.nocc, nr = bad ? 0 : (size_t)v.nrows,
           ni = bad ? 0 : (size_t)v.ninputs;
    bad = bad || mt < 0 || ULP__GROW(sh->names, sh->names_cap, sh->n + 1) != 0 ||
          ULP__GROW(sh->occ, sh->occ_cap, sh->nocc + no) != 0 ||
          ULP__GROW(sh->dig, sh->dig_cap, sh->nrows + nr) != 0 ||
          ULP__GROW(sh->pos, sh->pos_cap, sh->nrows + nr) != 0 ||
          ULP__GROW(sh->req, sh->req_cap, sh->nrows + nr) != 0 ||
          ULP__GROW(sh->inputs, sh->inputs_cap, sh->ninputs + ni) != 0;
    int zeroed = !bad && ni > 0;
    if (zeroed)
        memset(sh->inputs + sh->ninputs, 0, ni * sizeof *sh->inputs); /* reclaimed at the end */
    bad =
        bad || ulp__digest_read_rows(v.occ, mt, 1, 0, no, 1, sh->occ + sh->nocc) < 0 ||
        ulp__digest_read_rows(v.digest, H5T_NATIVE_UINT64, 1, 0, nr, 1, sh->dig + sh->nrows) < 0 ||
        ulp__digest_read_rows(v.position, H5T_NATIVE_INT64, 1, 0, nr, 1, sh->pos + sh->nrows) < 0 ||
        ulp__digest_read_rows(v.request, H5T_NATIVE_INT64, 1, 0, nr, 1, sh->req + sh->nrows) < 0 ||
        (ni > 0 && (v.inputs < 0 || ulp__digest_read_rows(v.inputs, sh->vlen, 1, 0, ni, 1,
                                                          sh->inputs + sh->ninputs) < 0));
    for (size_t k = 0; bad && zeroed && k < ni; k++) /* what a failed read allocated of them */
        if (sh->inputs[sh->ninputs + k] != NULL) {
            H5free_memory(sh->inputs[sh->ninputs + k]);
            sh->inputs[sh->ninputs + k] = NULL;
        }
    if (!bad) {
        ulp__digest_name e = {.name = NULL,
                              .occurrences_first = sh->nocc,
                              .occurrences = no,
                              .rows_first = sh->nrows,
                              .rows = nr,
                              .inputs_first = sh->ninputs,
                              .inputs = ni,
                              .has_value = v.value >= 0};
        e.name = strdup(name);
        bad = e.name == NULL || (v.value >= 0 && copy_value(sh, name, v.value, nr) < 0);
        if (e.name != NULL)
            sh->names[sh->n++] = e;
        sh->nocc += no;
        sh->nrows += nr;
        sh->ninputs += ni;
    }
    if (mt >= 0)
        H5Tclose(mt);
    if (sub >= 0) {
        ulp__digest_view_close(&v);
        H5Gclose(sub);
    }
    return bad ? -1 : 0;
}

/* A packed copy of memory compound `mt` (the file's type); -1 when HDF5 fails. */
static hid_t packed(hid_t mt)
{
    hid_t t = mt >= 0 ? H5Tcopy(mt) : -1;
    if (t >= 0 && H5Tpack(t) < 0) {
        H5Tclose(t);
        t = -1;
    }
    return t;
}

/* The shared tables, the names and the attributes, into `og`. */
static int write_shared(shared *sh, hid_t og)
{
    hid_t om = ulp__digest_occ_type(), nm = ulp__digest_name_type();
    hid_t of = packed(om), nf = packed(nm);
    int bad =
        of < 0 || nf < 0 || write_1d(og, "names", nf, nm, sh->n, sh->names, 0) < 0 ||
        write_1d(og, "occurrences", of, om, sh->nocc, sh->occ, 1) < 0 ||
        write_1d(og, "digest", H5T_STD_U64LE, H5T_NATIVE_UINT64, sh->nrows, sh->dig, 0) < 0 ||
        write_1d(og, "position", H5T_STD_I64LE, H5T_NATIVE_INT64, sh->nrows, sh->pos, 1) < 0 ||
        write_1d(og, "request", H5T_STD_I64LE, H5T_NATIVE_INT64, sh->nrows, sh->req, 1) < 0 ||
        (sh->ninputs > 0 &&
         write_1d(og, "inputs", sh->vlen, sh->vlen, sh->ninputs, sh->inputs, 0) < 0);
    hid_t types[] = {om, nm, of, nf};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i] >= 0)
            H5Tclose(types[i]);
    return bad ? -1 : 0;
}

int ulp__digests_write_shared(hid_t src, hid_t out, const char *algorithm)
{
    shared sh = {.src = src, .out = -1, .values = -1, .vlen = ulp__digest_str_type(0, 1)};
    hid_t gcpl = ulp__h5_small_gcpl(8, 11); /* names ... value */
    hid_t og = gcpl < 0 ? -1 : H5Gcreate2(out, "digests", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (gcpl >= 0)
        H5Pclose(gcpl);
    sh.out = og;
    int bad = sh.vlen < 0 || og < 0 ||
              H5Literate(src, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, one_name, &sh) < 0 ||
              write_shared(&sh, og) < 0 || ulp__h5_attr_write_str(og, "algorithm", algorithm) < 0 ||
              ulp__h5_attr_write_str(og, "layout", ULP__DIGEST_LAYOUT_SHARED) < 0;
    if (sh.ninputs > 0 && sh.vlen >= 0) {
        hsize_t m = sh.ninputs;
        hid_t sp = H5Screate_simple(1, &m, NULL);
        if (sp >= 0) {
            H5Dvlen_reclaim(sh.vlen, sp, H5P_DEFAULT, sh.inputs);
            H5Sclose(sp);
        }
    }
    for (size_t i = 0; i < sh.n; i++)
        free(sh.names[i].name);
    free(sh.names);
    free(sh.occ);
    free(sh.dig);
    free(sh.pos);
    free(sh.req);
    free(sh.inputs);
    if (sh.values >= 0)
        H5Gclose(sh.values);
    if (og >= 0)
        H5Gclose(og);
    if (sh.vlen >= 0)
        H5Tclose(sh.vlen);
    return bad ? -1 : 0;
}
