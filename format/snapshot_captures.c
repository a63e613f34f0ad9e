/*
 * Capture reading: one capture dataset checked against FORMAT.md and
 * described (ulp__capture_read), and the /captures groups walked
 * (ulp__capture_read_groups).  Which index is trusted -- the groups or the
 * journal -- is snapshot_recover.c's decision.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "h5types.h"
#include "journal.h"
#include "snapshot_hdr.h"
#include "snapshot_priv.h"

/* Links listed and captures read by every ulp_snapshot_open() of the process, for
 * ulp_snapshot_open_progress(). */
static atomic_uint_fast64_t open_progress;

uint64_t ulp_snapshot_open_progress(void)
{
    return (uint64_t)atomic_load_explicit(&open_progress, memory_order_relaxed);
}

void ulp__open_progress_add(uint64_t n)
{
    atomic_fetch_add_explicit(&open_progress, n, memory_order_relaxed);
}

/* --- Link listing ---------------------------------------------------------------- */

typedef struct name_list {
    char **v;
    H5L_info_t *info; /* [n] each link's type and, for a hard link, its address */
    size_t n, cap, icap;
    int oom;
} name_list;

static herr_t name_visit(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    name_list *l = data;
    (void)g;
    if (ULP__GROW(l->v, l->cap, l->n + 1) != 0 || ULP__GROW(l->info, l->icap, l->n + 1) != 0) {
        l->oom = 1;
        return -1;
    }
    l->info[l->n] = *info;
    atomic_fetch_add_explicit(&open_progress, 1, memory_order_relaxed);
    if ((l->v[l->n] = strdup(name)) == NULL) {
        l->oom = 1;
        return -1;
    }
    l->n++;
    return 0;
}

static void name_list_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    free(l->info);
    memset(l, 0, sizeof *l);
}

/* Lists the links of group `g`; 0 or -1 (then `l->oom` says whether memory ran out). */
static int list_links(hid_t g, name_list *l)
{
    hsize_t idx = 0;
    return H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, name_visit, l) < 0 ? -1 : 0;
}

static const char *type_class_name(hid_t type)
{
    switch (H5Tget_class(type)) {
    case H5T_INTEGER:
        return "integer";
    case H5T_FLOAT:
        return "float";
    case H5T_STRING:
        return "string";
    case H5T_BITFIELD:
        return "bitfield";
    case H5T_OPAQUE:
        return "opaque";
    case H5T_COMPOUND:
        return "compound";
    case H5T_REFERENCE:
        return "reference";
    case H5T_ENUM:
        return "enum";
    case H5T_VLEN:
        return "variable-length";
    case H5T_ARRAY:
        return "array";
    default:
        return "unknown";
    }
}

/* --- Captures -------------------------------------------------------------------- */

/* Occurrence names are canonical decimal integers: "0", "1", ... (no sign, no leading 0). */
static int parse_occurrence(const char *s, int64_t *out)
{
    if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
        return -1;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (v > (INT64_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

/* Reads the optional attributes of a capture dataset into `c`. */
static ulp_status read_optional_attrs(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                                      ulp_capture_info *c, ulp_error *err)
{
    const char *why = NULL;
    int64_t v;
    int rc;

    c->layer = -1;
    if ((rc = ulp__attr_read_i64(d, "layer", &v, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'layer' %s", why);
    if (rc == 0) {
        if (v < INT32_MIN || v > INT32_MAX)
            return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                                  "attribute 'layer' %" PRId64 " is out of range", v);
        c->layer = (int32_t)v;
    }

    char *role = NULL;
    if ((rc = ulp__attr_read_str(d, "role", &role, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'role' %s", why);
    c->role = ulp_role_name(ULP_ROLE_ACTIVATION);
    if (rc == 0) {
        if ((c->role = ulp__snap_keep(s, role)) == NULL)
            return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }

    if ((rc = ulp__attr_read_i64(d, "step", &c->step, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'step' %s", why);
    c->has_step = rc == 0;

    if ((rc = ulp__attr_read_i64_array(d, "kernels", c->kernels, 2, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'kernels' %s", why);
    c->has_kernels = rc == 0;
    if (c->has_kernels && (c->kernels[0] < 0 || c->kernels[1] < c->kernels[0]))
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "attribute 'kernels' [%" PRId64 ", %" PRId64 ") is not a range",
                              c->kernels[0], c->kernels[1]);

    if ((rc = ulp__attr_read_i64_array(d, "gemms", c->gemms, 2, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'gemms' %s", why);
    c->has_gemms = rc == 0;
    if (c->has_gemms && (c->gemms[0] < 0 || c->gemms[1] < c->gemms[0]))
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "attribute 'gemms' [%" PRId64 ", %" PRId64 ") is not a range",
                              c->gemms[0], c->gemms[1]);
    if ((rc = ulp__attr_read_i64_array(d, "graph_replay", c->graph_replay, 2, &why)) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'graph_replay' %s", why);
    c->has_graph_replay = rc == 0;

    if (ulp__attr_read_u64(d, "device_ptr", &c->device_ptr, &why) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'device_ptr' %s", why);
    if (ulp__attr_read_u64(d, "stream", &c->stream, &why) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'stream' %s", why);
    if (ulp__attr_read_i64(d, "time_ns", &c->time_ns, &why) < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'time_ns' %s", why);
    return ulp__snapshot_read_rows(s, d, name, occ, c, err);
}

/*
 * Refuses a dataset whose bytes this file does not hold, or that HDF5 here
 * cannot decode: one in another file (reached through an external link, or
 * a soft link through one: its offsets are not this file's), a virtual
 * dataset (other files, and zeros where a source is missing), and a filter
 * this HDF5 library lacks (named, instead of a read error later).
 */
static ulp_status check_storage(const ulp_snapshot *s, hid_t d, hid_t dcpl, const char *name,
                                const char *occ, ulp_error *err)
{
    H5O_info_t oi;
    if (H5Oget_info2(d, &oi, H5O_INFO_BASIC) < 0 || oi.fileno != s->fileno)
        return ulp__cap_error(s, err, ULP_EFORMAT, name, occ,
                              "lies in another file, reached through an external link (captures "
                              "must be in the file)");
    if (dcpl < 0)
        return ULP_OK;
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL)
        return ulp__cap_error(s, err, ULP_EFORMAT, name, occ,
                              "is a virtual dataset (its data live in other files, not in the "
                              "snapshot)");
    int nf = H5Pget_nfilters(dcpl);
    for (int k = 0; k < nf; k++) {
        char fname[64] = "";
        unsigned flags = 0, conf = 0;
        size_t nv = 0;
        H5Z_filter_t id =
            H5Pget_filter2(dcpl, (unsigned)k, &flags, &nv, NULL, sizeof fname, fname, &conf);
        if (id >= 0 && H5Zfilter_avail(id) <= 0)
            return ulp__cap_error(s, err, ULP_EUNSUPPORTED, name, occ,
                                  "compressed with filter '%s' (id %d), which this HDF5 library "
                                  "lacks",
                                  fname[0] ? fname : "?", (int)id);
    }
    return ULP_OK;
}

/* The dtype attribute, and a stored type that holds it. */
static ulp_status read_dtype(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                             ulp_capture_info *c, ulp_error *err)
{
    const char *why = NULL;
    char *dtname = NULL;
    ulp_status st = ULP_OK;
    int rc = ulp__attr_read_str(d, "dtype", &dtname, &why);
    if (rc != 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "required attribute 'dtype' %s",
                              rc > 0 ? "is missing" : why);
    c->dtype = ulp_dtype_from_name(dtname);
    if (c->dtype == ULP_DTYPE_INVALID) {
        st = ulp__cap_error(s, err, ULP_EDTYPE, name, occ, "unknown dtype '%s'", dtname);
        free(dtname);
        return st;
    }
    free(dtname);
    hid_t type = H5Dget_type(d);
    if (type < 0)
        return ulp__cap_error(s, err, ULP_EHDF5, name, occ, "its type cannot be read");
    if (!ulp__h5_type_fits(type, c->dtype)) {
        int be = H5Tget_class(type) != H5T_STRING && H5Tget_order(type) == H5T_ORDER_BE &&
                 H5Tget_size(type) == ulp_dtype_size(c->dtype);
        st = ulp__cap_error(s, err, ULP_EDTYPE, name, occ,
                            "dtype '%s' stored as %s%zu-byte %s type", ulp_dtype_name(c->dtype),
                            be ? "big-endian " : "", H5Tget_size(type), type_class_name(type));
    }
    H5Tclose(type);
    return st;
}

/* Refuses an absurd shape: more than ULP__MAX_ELEMENTS, or more bytes than the file could hold. */
static ulp_status check_shape(const ulp_snapshot *s, const char *name, const char *occ,
                              const ulp_capture_info *c, const hsize_t *dims, int absurd,
                              ulp_error *err)
{
    /* A zero dimension makes the product 0 whatever the others are, but an
     * absurd dimension next to it is still absurd. */
    uint64_t declared = c->elements * ulp_dtype_size(c->dtype);
    if (!absurd && !ulp__snapshot_absurd_bytes(s, declared))
        return ULP_OK;
    char shape[ULP_SNAPSHOT_MAX_RANK * 24 + 4];
    size_t len = 0;
    for (int k = 0; k < c->ndim; k++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%" PRIu64, k ? "," : "[",
                                (uint64_t)dims[k]);
    snprintf(shape + len, sizeof shape - len, "%s]", c->ndim ? "" : "[");
    if (absurd)
        return ulp__cap_error(s, err, ULP_ESHAPE, name, occ,
                              "absurd shape %s: more than 2^48 elements", shape);
    return ulp__cap_error(s, err, ULP_ESHAPE, name, occ,
                          "absurd shape %s: %" PRIu64 " bytes declared in a file of %" PRIu64
                          " bytes",
                          shape, declared, s->file_size);
}

/* The dataspace: rank, shape, element count. */
static ulp_status read_shape(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                             ulp_capture_info *c, ulp_error *err)
{
    ulp_status st = ULP_OK;
    hid_t space = H5Dget_space(d);
    H5S_class_t scls = space >= 0 ? H5Sget_simple_extent_type(space) : H5S_NO_CLASS;
    if (scls != H5S_SCALAR && scls != H5S_SIMPLE) {
        st = ulp__cap_error(s, err, ULP_ESHAPE, name, occ, "has no dataspace (an empty object)");
        goto cleanup;
    }
    int ndims = H5Sget_simple_extent_ndims(space);
    if (ndims < 0 || ndims > ULP_SNAPSHOT_MAX_RANK) {
        st = ulp__cap_error(s, err, ULP_ESHAPE, name, occ, "rank %d exceeds the maximum of %d",
                            ndims, ULP_SNAPSHOT_MAX_RANK);
        goto cleanup;
    }
    hsize_t dims[ULP_SNAPSHOT_MAX_RANK];
    H5Sget_simple_extent_dims(space, dims, NULL);
    c->ndim = ndims;
    c->elements = 1;
    int absurd = 0;
    for (int k = 0; k < ndims; k++) {
        c->shape[k] = (int64_t)dims[k];
        if (dims[k] > ULP__MAX_ELEMENTS)
            absurd = 1;
        else if (!absurd && c->elements != 0 && dims[k] > ULP__MAX_ELEMENTS / c->elements)
            absurd = 1;
        else if (!absurd)
            c->elements *= dims[k];
    }
    st = check_shape(s, name, occ, c, dims, absurd, err);
cleanup:
    if (space >= 0)
        H5Sclose(space);
    return st;
}

/* seq: required, non-negative (its uniqueness is checked by the caller). */
static ulp_status read_seq(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                           ulp_capture_info *c, ulp_error *err)
{
    const char *why = NULL;
    int rc = ulp__attr_read_i64(d, "seq", &c->seq, &why);
    if (rc > 0)
        return ulp__cap_error(s, err, ULP_EDUPSEQ, name, occ,
                              "required attribute 'seq' is missing");
    if (rc < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'seq' %s", why);
    if (c->seq < 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ, "seq %" PRId64 " is negative",
                              c->seq);
    return ULP_OK;
}

/*
 * Where the bytes are.  A contiguous dataset with allocated storage is read
 * with pread(2); check here that it lies inside the file.
 */
static ulp_status locate(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                         ulp__cap_entry *e, ulp_error *err)
{
    const ulp_capture_info *c = &e->info;
    ulp_status st = ULP_OK;
    hid_t dcpl = H5Dget_create_plist(d);
    if ((st = check_storage(s, d, dcpl, name, occ, err)) != ULP_OK)
        goto cleanup;
    /* Raw data in another file: reading it would show that file's bytes as
     * the tensor (any file the reader may open, named by the snapshot). */
    if (dcpl >= 0 && H5Pget_external_count(dcpl) != 0) {
        st = ulp__cap_error(s, err, ULP_EFORMAT, name, occ,
                            "its data live in an external file, not in the snapshot");
        goto cleanup;
    }
    /* HDF5 1.10's H5Dget_offset() adds the user block's size to the
     * undefined address of storage never allocated: a file offset just
     * below the user block's end, not HADDR_UNDEF (docs/hdf5.md).  Such a
     * dataset reads its fill value, through HDF5. */
    H5D_space_status_t alloc = H5D_SPACE_STATUS_ERROR;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && c->elements > 0 &&
        H5Dget_space_status(d, &alloc) >= 0 && alloc != H5D_SPACE_STATUS_NOT_ALLOCATED) {
        haddr_t off = H5Dget_offset(d);
        if (off != HADDR_UNDEF) {
            uint64_t bytes = c->elements * ulp_dtype_size(c->dtype);
            if (off > s->file_size || bytes > s->file_size - off) {
                st = ulp__cap_error(s, err, ULP_ETRUNC, name, occ,
                                    "file is truncated: data ends at byte %" PRIu64
                                    " but the file has %" PRIu64 " bytes",
                                    (uint64_t)off + bytes, s->file_size);
                goto cleanup;
            }
            e->src.offset = off;
        }
    }
cleanup:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return st;
}

/* Validates the dataset /captures/<name>/<occ> and describes it in `e`. */
ulp_status ulp__capture_read(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                             ulp__cap_entry *e, ulp_error *err)
{
    atomic_fetch_add_explicit(&open_progress, 1, memory_order_relaxed);
    ulp_capture_info *c = &e->info;
    ulp_status st;
    memset(e, 0, sizeof *e);
    e->src.offset = ULP__NO_OFFSET;
    if (parse_occurrence(occ, &c->occurrence) < 0)
        return ulp__cap_error(s, err, ULP_EFORMAT, name, occ,
                              "occurrence name '%s' is not a non-negative integer", occ);
    char bad[64];
    int fit = ulp__ohdr_attrs_fit(s, d, bad, sizeof bad);
    if (fit == -2)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (fit == 0)
        return ulp__cap_error(s, err, ULP_EBADATTR, name, occ,
                              "attribute '%s' declares more bytes than its header message holds "
                              "(a damaged file)",
                              bad);
    if ((st = read_dtype(s, d, name, occ, c, err)) != ULP_OK ||
        (st = read_shape(s, d, name, occ, c, err)) != ULP_OK ||
        (st = read_seq(s, d, name, occ, c, err)) != ULP_OK ||
        (st = read_optional_attrs(s, d, name, occ, c, err)) != ULP_OK)
        return st;
    return locate(s, d, name, occ, e, err);
}

int ulp__cap_vec_push(ulp__cap_vec *cv)
{
    if (ULP__GROW(cv->v, cv->cap, cv->n + 1) != 0)
        return -1;
    cv->n++;
    return 0;
}

/*
 * Whether link `name` of `g` stays in this file (hard or soft).  An external
 * link would make the reader take another file's dataset offsets for offsets
 * in this one.
 */
static int local_link(hid_t g, const char *name)
{
    H5L_info_t li;
    if (H5Lget_info(g, name, &li, H5P_DEFAULT) < 0)
        return 1; /* let the open that follows report it */
    return li.type == H5L_TYPE_HARD || li.type == H5L_TYPE_SOFT;
}

/*
 * Opens occurrence `occ` of capture group `g` as listed (`li`).  A hard link
 * is opened at its address: a lookup by name walks the group's index, and
 * in an old-style group whose name heap outgrew the metadata cache each
 * lookup re-read the whole heap (ls took 17 s at 70,000 occurrences of a
 * name).  On error returns -1 with *st set.
 */
static hid_t open_occurrence(ulp_snapshot *s, hid_t g, const char *name, const char *occ,
                             const H5L_info_t *li, ulp_error *err, ulp_status *st)
{
    H5O_info_t oi;
    hid_t d = -1;
    if (li->type != H5L_TYPE_HARD && li->type != H5L_TYPE_SOFT) {
        *st = ulp__cap_error(s, err, ULP_EFORMAT, name, occ,
                             "is an external link (captures must be in the file)");
        return -1;
    }
    if (li->type == H5L_TYPE_HARD) {
        d = H5Oopen_by_addr(g, li->u.address);
        if (d < 0 || H5Oget_info2(d, &oi, H5O_INFO_BASIC) < 0) {
            if (d >= 0)
                H5Oclose(d);
            *st = ulp__cap_error(s, err, ULP_EFORMAT, name, occ, "cannot be opened");
            return -1;
        }
    } else if (H5Oget_info_by_name2(g, occ, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        *st = ulp__cap_error(s, err, ULP_EFORMAT, name, occ, "cannot be opened");
        return -1;
    }
    if (oi.type != H5O_TYPE_DATASET) {
        if (d >= 0)
            H5Oclose(d);
        *st = ulp__cap_error(s, err, ULP_EFORMAT, name, occ, "is a %s, not a dataset",
                             oi.type == H5O_TYPE_GROUP ? "group" : "named type");
        return -1;
    }
    if (d < 0 && (d = H5Dopen2(g, occ, H5P_DEFAULT)) < 0) {
        *st = ulp__cap_error(s, err, ULP_EHDF5, name, occ, "cannot be opened");
        return -1;
    }
    return d;
}

/*
 * Occurrence `occ` of a group, a hard link to the header at `addr`,
 * described from its header's bytes (snapshot_hdr.c) into `e`, its role
 * kept by s: 1, 0 (nothing kept: HDF5 reads it), -2 out of memory.
 */
static int from_header(ulp_snapshot *s, ulp__hdr_file *hf, const char *occ, haddr_t addr,
                       ulp__cap_entry *e)
{
    memset(e, 0, sizeof *e);
    e->src.offset = ULP__NO_OFFSET;
    if (parse_occurrence(occ, &e->info.occurrence) < 0)
        return 0;
    char *role = NULL;
    void *tokens = NULL;
    ulp_capture_info *c = &e->info;
    int rc = ulp__hdr_parse(hf, (uint64_t)addr, c, &e->src.offset, &role, &tokens);
    if (rc != 1)
        return rc;
    /* a declared size no layout could bring from this file: HDF5 says so */
    if (ulp__snapshot_absurd_bytes(s, c->elements * ulp_dtype_size(c->dtype))) {
        free(role);
        free(tokens);
        memset(e, 0, sizeof *e);
        e->src.offset = ULP__NO_OFFSET;
        return 0;
    }
    c->role = ulp_role_name(ULP_ROLE_ACTIVATION);
    if (tokens != NULL && ulp__snap_keep(s, tokens) == NULL) {
        free(role);
        return -2;
    }
    if (role != NULL && (c->role = ulp__snap_keep(s, role)) == NULL)
        return -2;
    atomic_fetch_add_explicit(&open_progress, 1, memory_order_relaxed);
    return 1;
}

/* The occurrences of one capture group. */
static ulp_status read_capture_group(ulp_snapshot *s, ulp__hdr_file *hf, hid_t captures,
                                     const char *name, ulp__cap_vec *cv, ulp_error *err)
{
    ulp_status st = ULP_OK;
    name_list occs = {0};
    hid_t g = -1;
    char *kept_name = NULL;
    H5O_info_t oi;

    if (!local_link(captures, name))
        return ulp__error(err, ULP_EFORMAT,
                          "'%s': '/captures/%s' is an external link (captures must be in the file)",
                          s->path, name);
    if (H5Oget_info_by_name2(captures, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/captures/%s' cannot be opened (%s)", s->path,
                          name, "dangling link?");
    if (oi.type != H5O_TYPE_GROUP)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/captures/%s' is a %s, not a capture group",
                          s->path, name, oi.type == H5O_TYPE_DATASET ? "dataset" : "named type");
    g = H5Gopen2(captures, name, H5P_DEFAULT);
    if (g < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/captures/%s' cannot be opened", s->path, name);
    if (list_links(g, &occs) < 0) {
        st = occs.oom ? ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path)
                      : ulp__error(err, ULP_EFORMAT, "'%s': '/captures/%s' cannot be listed",
                                   s->path, name);
        goto cleanup;
    }
    if (occs.n > 0 && (kept_name = ulp__snap_keep(s, strdup(name))) == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
        goto cleanup;
    }
    for (size_t j = 0; j < occs.n; j++) {
        const char *occ = occs.v[j];
        if (ulp__cap_vec_push(cv) < 0) {
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
        ulp__cap_entry *e = &cv->v[cv->n - 1];
        int fast = occs.info[j].type == H5L_TYPE_HARD
                       ? from_header(s, hf, occ, occs.info[j].u.address, e)
                       : 0;
        if (fast == -2) {
            cv->n--;
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
        if (fast == 0) {
            hid_t d = open_occurrence(s, g, name, occ, &occs.info[j], err, &st);
            if (d < 0) {
                cv->n--;
                goto cleanup;
            }
            st = ulp__capture_read(s, d, name, occ, e, err);
            H5Dclose(d);
            if (st != ULP_OK) {
                cv->n--;
                goto cleanup;
            }
        }
        e->info.name = kept_name;
        size_t plen = strlen(name) + strlen(occ) + sizeof "/captures//";
        char *p = malloc(plen);
        if (p != NULL)
            snprintf(p, plen, "/captures/%s/%s", name, occ);
        if ((e->src.h5path = ulp__snap_keep(s, p)) == NULL) {
            cv->n--;
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
    }
cleanup:
    name_list_free(&occs);
    if (g >= 0)
        H5Gclose(g);
    return st;
}

int ulp__cap_seq_cmp(const void *a, const void *b)
{
    int64_t x = ((const ulp__cap_entry *)a)->info.seq, y = ((const ulp__cap_entry *)b)->info.seq;
    return (x > y) - (x < y);
}

int ulp__cap_name_cmp(const void *a, const void *b)
{
    const ulp_capture_info *x = *(const ulp_capture_info *const *)a;
    const ulp_capture_info *y = *(const ulp_capture_info *const *)b;
    int c = x->name == y->name ? 0 : strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return (x->occurrence > y->occurrence) - (x->occurrence < y->occurrence);
}

/* The header reader's byte source: pread(2) on the snapshot's descriptor. */
static int hdr_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    return ulp__journal_pread(*(const int *)ctx, buf, n, off);
}

/*
 * The file's sizes of offsets and lengths and its user block, for reading
 * headers (hf->sa 0: HDF5 reads every capture, as with ULPPROF_HEADERS=0).
 */
static void hdr_file(ulp_snapshot *s, ulp__hdr_file *hf)
{
    memset(hf, 0, sizeof *hf);
    const char *want = getenv("ULPPROF_HEADERS");
    if (want != NULL && strcmp(want, "0") == 0)
        return;
    hid_t fcpl = H5Fget_create_plist(s->file);
    size_t sa = 0, sl = 0;
    hsize_t ublock = 0;
    if (fcpl >= 0 && H5Pget_sizes(fcpl, &sa, &sl) >= 0 && H5Pget_userblock(fcpl, &ublock) >= 0 &&
        (sa == 4 || sa == 8) && (sl == 4 || sl == 8) && s->fd >= 0) {
        hf->sa = (unsigned)sa;
        hf->sl = (unsigned)sl;
        hf->base = ublock;
        hf->src = (ulp__hdr_src){.read = hdr_pread, .ctx = &s->fd, .size = s->file_size};
    }
    if (fcpl >= 0)
        H5Pclose(fcpl);
}

/* Reads the captures that the /captures groups name into `cv`. */
ulp_status ulp__capture_read_groups(ulp_snapshot *s, ulp__cap_vec *cv, ulp_error *err)
{
    ulp_status st = ULP_OK;
    name_list names = {0};
    hid_t g = -1;
    H5O_info_t oi;

    htri_t ex = H5Lexists(s->file, "/captures", H5P_DEFAULT);
    if (ex == 0)
        return ULP_OK; /* a snapshot without captures is valid and empty */
    if (ex < 0 || H5Oget_info_by_name2(s->file, "/captures", &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/captures' cannot be opened", s->path);
    if (oi.type != H5O_TYPE_GROUP)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/captures' is a %s, not a group", s->path,
                          oi.type == H5O_TYPE_DATASET ? "dataset" : "named type");
    g = H5Gopen2(s->file, "/captures", H5P_DEFAULT);
    if (g < 0 || list_links(g, &names) < 0) {
        st = names.oom
                 ? ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path)
                 : ulp__error(err, ULP_EFORMAT, "'%s': '/captures' cannot be listed", s->path);
        goto cleanup;
    }
    ulp__hdr_file hf;
    hdr_file(s, &hf);
    for (size_t i = 0; i < names.n; i++)
        if ((st = read_capture_group(s, &hf, g, names.v[i], cv, err)) != ULP_OK)
            break;
    ulp__hdr_release(&hf);
cleanup:
    name_list_free(&names);
    if (g >= 0)
        H5Gclose(g);
    return st;
}
