/*
 * The snapshot reader: opening and validating a snapshot (FORMAT.md), the
 * accessors, and raw reads of tensor bits in bounded chunks.
 *
 * Everything the analyzer relies on is checked once, here, at open, so that
 * the comparison code can trust what it is given.  Contiguous datasets (the
 * default layout, and what every ulpprof writer produces) are read with
 * pread(2) at their file offset, outside HDF5's global lock, so several
 * threads can stream one file; other layouts go through H5Dread under a
 * mutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/h5types.h"
#include "common/journal.h"
#include "snapshot_priv.h"

/* A tensor larger than this many elements is an absurd shape, not data. */
#define MAX_ELEMENTS ((uint64_t)1 << 48)
/*
 * A tensor that declares more than this many times the file's size (plus
 * MAX_DECLARED_SLACK) is an absurd shape too: no layout (deflate tops out
 * near 1032:1) stores that much, and a diff would stream terabytes of fill
 * value out of a few kilobytes of unallocated or sparse storage.
 */
#define MDC_BYTES          ((size_t)1 << 20) /* HDF5 metadata cache (ulp__h5_fapl_fixed_cache) */
#define MAX_EXPANSION      ((uint64_t)4096)
#define MAX_DECLARED_SLACK ((uint64_t)64 << 20)

int ulp__snapshot_absurd_bytes(const ulp_snapshot *s, uint64_t declared)
{
    return declared > MAX_DECLARED_SLACK && declared / MAX_EXPANSION > s->file_size;
}
/* pread(2) at most this many bytes per call. */
#define PREAD_MAX ((size_t)1 << 30)
#define NO_OFFSET UINT64_MAX
/* The most chunk cache one open dataset may use. */
#define CHUNK_CACHE_MAX ((size_t)256 << 20)

char *ulp__snap_keep(ulp_snapshot *s, char *p)
{
    if (p == NULL)
        return NULL;
    if (s->nstrs == s->cap_strs) {
        size_t cap = s->cap_strs ? 2 * s->cap_strs : 64;
        char **v = realloc(s->strs, cap * sizeof *v);
        if (v == NULL) {
            free(p);
            return NULL;
        }
        s->strs = v;
        s->cap_strs = cap;
    }
    s->strs[s->nstrs++] = p;
    return p;
}

/* --- HDF5 error stack ------------------------------------------------------------ */

typedef struct h5_err_info {
    char desc[256]; /* the innermost error's description */
    int truncated;  /* some entry says the file is truncated */
    int locked;     /* some entry says the file is locked */
    int seen;
} h5_err_info;

static herr_t h5_err_visit(unsigned n, const H5E_error2_t *e, void *data)
{
    h5_err_info *info = data;
    (void)n;
    if (!info->seen && e->desc != NULL) {
        snprintf(info->desc, sizeof info->desc, "%s", e->desc);
        info->seen = 1;
    }
    /* Open checks the superblock's end-of-file; a later metadata read past
     * the end of the file (its EOF rewritten, or cut at a flush) overflows. */
    if (e->min_num == H5E_TRUNCATED ||
        (e->min_num == H5E_OVERFLOW && e->desc != NULL && strstr(e->desc, "addr overflow")))
        info->truncated = 1;
    if (e->min_num == H5E_CANTLOCKFILE)
        info->locked = 1;
    return 0;
}

/* What HDF5 said about its last failure on this thread. */
static void h5_last_error(h5_err_info *info)
{
    memset(info, 0, sizeof *info);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_err_visit, info);
    if (!info->seen)
        snprintf(info->desc, sizeof info->desc, "unknown HDF5 error");
}

/*
 * Installed as HDF5's automatic error handler while a file is validated: it
 * prints nothing, and remembers whether any failure came from reading past
 * the end of the file, so that the message can say "truncated".
 */
static herr_t h5_err_note(hid_t estack, void *data)
{
    h5_err_info *sticky = data, now;
    memset(&now, 0, sizeof now);
    H5Ewalk2(estack, H5E_WALK_UPWARD, h5_err_visit, &now);
    if (now.truncated && !sticky->truncated)
        *sticky = now;
    return 0;
}

/* --- Messages -------------------------------------------------------------------- */

/* "'<path>': capture '<name>/<occ>': <problem>" */
static ulp_status cap_error(const ulp_snapshot *s, ulp_error *err, ulp_status st, const char *name,
                            const char *occ, const char *fmt, ...) ULP__PRINTF(6, 7);

static ulp_status cap_error(const ulp_snapshot *s, ulp_error *err, ulp_status st, const char *name,
                            const char *occ, const char *fmt, ...)
{
    char what[ULP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ulp__error(err, st, "'%s': capture '%s/%s': %s", s->path, name, occ, what);
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

/* --- Link listing ---------------------------------------------------------------- */

typedef struct name_list {
    char **v;
    size_t n, cap;
    int oom;
} name_list;

static herr_t name_visit(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    name_list *l = data;
    (void)g;
    (void)info;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            l->oom = 1;
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
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
    memset(l, 0, sizeof *l);
}

/* Lists the links of group `g`; 0 or -1 (then `l->oom` says whether memory ran out). */
static int list_links(hid_t g, name_list *l)
{
    hsize_t idx = 0;
    return H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, name_visit, l) < 0 ? -1 : 0;
}

/* --- Captures -------------------------------------------------------------------- */

typedef struct cap_entry {
    ulp_capture_info info;
    ulp__capture_src src;
} cap_entry;

typedef struct cap_vec {
    cap_entry *v;
    size_t n, cap;
} cap_vec;

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
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'layer' %s", why);
    if (rc == 0) {
        if (v < INT32_MIN || v > INT32_MAX)
            return cap_error(s, err, ULP_EBADATTR, name, occ,
                             "attribute 'layer' %" PRId64 " is out of range", v);
        c->layer = (int32_t)v;
    }

    char *role = NULL;
    if ((rc = ulp__attr_read_str(d, "role", &role, &why)) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'role' %s", why);
    c->role = "activation";
    if (rc == 0) {
        if ((c->role = ulp__snap_keep(s, role)) == NULL)
            return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }

    if ((rc = ulp__attr_read_i64(d, "step", &c->step, &why)) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'step' %s", why);
    c->has_step = rc == 0;

    if ((rc = ulp__attr_read_i64_array(d, "kernels", c->kernels, 2, &why)) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'kernels' %s", why);
    c->has_kernels = rc == 0;
    if (c->has_kernels && (c->kernels[0] < 0 || c->kernels[1] < c->kernels[0]))
        return cap_error(s, err, ULP_EBADATTR, name, occ,
                         "attribute 'kernels' [%" PRId64 ", %" PRId64 ") is not a range",
                         c->kernels[0], c->kernels[1]);

    if ((rc = ulp__attr_read_i64_array(d, "gemms", c->gemms, 2, &why)) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'gemms' %s", why);
    c->has_gemms = rc == 0;
    if (c->has_gemms && (c->gemms[0] < 0 || c->gemms[1] < c->gemms[0]))
        return cap_error(s, err, ULP_EBADATTR, name, occ,
                         "attribute 'gemms' [%" PRId64 ", %" PRId64 ") is not a range", c->gemms[0],
                         c->gemms[1]);
    if ((rc = ulp__attr_read_i64_array(d, "graph_replay", c->graph_replay, 2, &why)) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'graph_replay' %s", why);
    c->has_graph_replay = rc == 0;

    if (ulp__attr_read_u64(d, "device_ptr", &c->device_ptr, &why) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'device_ptr' %s", why);
    if (ulp__attr_read_u64(d, "stream", &c->stream, &why) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'stream' %s", why);
    if (ulp__attr_read_i64(d, "time_ns", &c->time_ns, &why) < 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'time_ns' %s", why);
    return ulp__snapshot_read_rows(s, d, name, occ, c, err);
}

/* Validates the dataset /captures/<name>/<occ> and describes it in `e`. */
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
        return cap_error(s, err, ULP_EFORMAT, name, occ,
                         "lies in another file, reached through an external link (captures "
                         "must be in the file)");
    if (dcpl < 0)
        return ULP_OK;
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL)
        return cap_error(s, err, ULP_EFORMAT, name, occ,
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
            return cap_error(s, err, ULP_EUNSUPPORTED, name, occ,
                             "compressed with filter '%s' (id %d), which this HDF5 library "
                             "lacks",
                             fname[0] ? fname : "?", (int)id);
    }
    return ULP_OK;
}

static ulp_status read_capture(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                               cap_entry *e, ulp_error *err)
{
    ulp_capture_info *c = &e->info;
    const char *why = NULL;
    ulp_status st = ULP_OK;
    hid_t type = -1, space = -1, dcpl = -1;
    char *dtname = NULL;
    int rc;

    memset(e, 0, sizeof *e);
    e->src.offset = NO_OFFSET;
    if (parse_occurrence(occ, &c->occurrence) < 0)
        return cap_error(s, err, ULP_EFORMAT, name, occ,
                         "occurrence name '%s' is not a non-negative integer", occ);

    /* dtype, and the storage behind it. */
    rc = ulp__attr_read_str(d, "dtype", &dtname, &why);
    if (rc != 0)
        return cap_error(s, err, ULP_EBADATTR, name, occ, "required attribute 'dtype' %s",
                         rc > 0 ? "is missing" : why);
    c->dtype = ulp_dtype_from_name(dtname);
    if (c->dtype == ULP_DTYPE_INVALID) {
        st = cap_error(s, err, ULP_EDTYPE, name, occ, "unknown dtype '%s'", dtname);
        free(dtname);
        return st;
    }
    free(dtname);
    type = H5Dget_type(d);
    if (type < 0) {
        st = cap_error(s, err, ULP_EHDF5, name, occ, "its type cannot be read");
        goto cleanup;
    }
    if (!ulp__h5_type_fits(type, c->dtype)) {
        int be = H5Tget_class(type) != H5T_STRING && H5Tget_order(type) == H5T_ORDER_BE &&
                 H5Tget_size(type) == ulp_dtype_size(c->dtype);
        st = cap_error(s, err, ULP_EDTYPE, name, occ, "dtype '%s' stored as %s%zu-byte %s type",
                       ulp_dtype_name(c->dtype), be ? "big-endian " : "", H5Tget_size(type),
                       type_class_name(type));
        goto cleanup;
    }

    /* Shape. */
    space = H5Dget_space(d);
    H5S_class_t scls = space >= 0 ? H5Sget_simple_extent_type(space) : H5S_NO_CLASS;
    if (scls != H5S_SCALAR && scls != H5S_SIMPLE) {
        st = cap_error(s, err, ULP_ESHAPE, name, occ, "has no dataspace (an empty object)");
        goto cleanup;
    }
    int ndims = H5Sget_simple_extent_ndims(space);
    if (ndims < 0 || ndims > ULP_SNAPSHOT_MAX_RANK) {
        st = cap_error(s, err, ULP_ESHAPE, name, occ, "rank %d exceeds the maximum of %d", ndims,
                       ULP_SNAPSHOT_MAX_RANK);
        goto cleanup;
    }
    hsize_t dims[ULP_SNAPSHOT_MAX_RANK];
    H5Sget_simple_extent_dims(space, dims, NULL);
    c->ndim = ndims;
    c->elements = 1;
    int absurd = 0;
    for (int k = 0; k < ndims; k++) {
        c->shape[k] = (int64_t)dims[k];
        if (dims[k] > MAX_ELEMENTS)
            absurd = 1;
        else if (!absurd && c->elements != 0 && dims[k] > MAX_ELEMENTS / c->elements)
            absurd = 1;
        else if (!absurd)
            c->elements *= dims[k];
    }
    /* A zero dimension makes the product 0 whatever the others are, but an
     * absurd dimension next to it is still absurd. */
    uint64_t declared = c->elements * ulp_dtype_size(c->dtype);
    if (absurd || ulp__snapshot_absurd_bytes(s, declared)) {
        char shape[ULP_SNAPSHOT_MAX_RANK * 24 + 4];
        size_t len = 0;
        for (int k = 0; k < ndims; k++)
            len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%" PRIu64, k ? "," : "[",
                                    (uint64_t)dims[k]);
        snprintf(shape + len, sizeof shape - len, "%s]", ndims ? "" : "[");
        if (absurd)
            st = cap_error(s, err, ULP_ESHAPE, name, occ,
                           "absurd shape %s: more than 2^48 elements", shape);
        else
            st = cap_error(s, err, ULP_ESHAPE, name, occ,
                           "absurd shape %s: %" PRIu64 " bytes declared in a file of %" PRIu64
                           " bytes",
                           shape, declared, s->file_size);
        goto cleanup;
    }

    /* seq: required, unique (checked by the caller). */
    rc = ulp__attr_read_i64(d, "seq", &c->seq, &why);
    if (rc > 0) {
        st = cap_error(s, err, ULP_EDUPSEQ, name, occ, "required attribute 'seq' is missing");
        goto cleanup;
    }
    if (rc < 0) {
        st = cap_error(s, err, ULP_EBADATTR, name, occ, "attribute 'seq' %s", why);
        goto cleanup;
    }
    if (c->seq < 0) {
        st = cap_error(s, err, ULP_EBADATTR, name, occ, "seq %" PRId64 " is negative", c->seq);
        goto cleanup;
    }
    if ((st = read_optional_attrs(s, d, name, occ, c, err)) != ULP_OK)
        goto cleanup;

    /* Where the bytes are.  A contiguous dataset with allocated storage is read
     * with pread(2); check here that it lies inside the file. */
    dcpl = H5Dget_create_plist(d);
    if ((st = check_storage(s, d, dcpl, name, occ, err)) != ULP_OK)
        goto cleanup;
    /* Raw data in another file: reading it would show that file's bytes as
     * the tensor (any file the reader may open, named by the snapshot). */
    if (dcpl >= 0 && H5Pget_external_count(dcpl) != 0) {
        st = cap_error(s, err, ULP_EFORMAT, name, occ,
                       "its data live in an external file, not in the snapshot");
        goto cleanup;
    }
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && c->elements > 0) {
        haddr_t off = H5Dget_offset(d);
        if (off != HADDR_UNDEF) {
            uint64_t bytes = c->elements * ulp_dtype_size(c->dtype);
            if (off > s->file_size || bytes > s->file_size - off) {
                st = cap_error(s, err, ULP_ETRUNC, name, occ,
                               "file is truncated: data ends at byte %" PRIu64
                               " but the file has %" PRIu64 " bytes",
                               (uint64_t)off + bytes, s->file_size);
                goto cleanup;
            }
            e->src.offset = off;
        }
    }
    st = ULP_OK;
cleanup:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return st;
}

static int cap_vec_push(cap_vec *cv)
{
    if (cv->n == cv->cap) {
        size_t cap = cv->cap ? 2 * cv->cap : 64;
        cap_entry *v = realloc(cv->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        cv->v = v;
        cv->cap = cap;
    }
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

/* The occurrences of one capture group. */
static ulp_status read_capture_group(ulp_snapshot *s, hid_t captures, const char *name, cap_vec *cv,
                                     ulp_error *err)
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
        if (!local_link(g, occ)) {
            st = cap_error(s, err, ULP_EFORMAT, name, occ,
                           "is an external link (captures must be in the file)");
            goto cleanup;
        }
        if (H5Oget_info_by_name2(g, occ, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
            st = cap_error(s, err, ULP_EFORMAT, name, occ, "cannot be opened");
            goto cleanup;
        }
        if (oi.type != H5O_TYPE_DATASET) {
            st = cap_error(s, err, ULP_EFORMAT, name, occ, "is a %s, not a dataset",
                           oi.type == H5O_TYPE_GROUP ? "group" : "named type");
            goto cleanup;
        }
        hid_t d = H5Dopen2(g, occ, H5P_DEFAULT);
        if (d < 0) {
            st = cap_error(s, err, ULP_EHDF5, name, occ, "cannot be opened");
            goto cleanup;
        }
        if (cap_vec_push(cv) < 0) {
            H5Dclose(d);
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
        cap_entry *e = &cv->v[cv->n - 1];
        st = read_capture(s, d, name, occ, e, err);
        H5Dclose(d);
        if (st != ULP_OK) {
            cv->n--;
            goto cleanup;
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

static int cap_seq_cmp(const void *a, const void *b)
{
    int64_t x = ((const cap_entry *)a)->info.seq, y = ((const cap_entry *)b)->info.seq;
    return (x > y) - (x < y);
}

static int cap_name_cmp(const void *a, const void *b)
{
    const ulp_capture_info *x = *(const ulp_capture_info *const *)a;
    const ulp_capture_info *y = *(const ulp_capture_info *const *)b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return (x->occurrence > y->occurrence) - (x->occurrence < y->occurrence);
}

/* Reads the captures that the /captures groups name into `cv`. */
static ulp_status read_capture_groups(ulp_snapshot *s, cap_vec *cv, ulp_error *err)
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
    for (size_t i = 0; i < names.n; i++)
        if ((st = read_capture_group(s, g, names.v[i], cv, err)) != ULP_OK)
            goto cleanup;
cleanup:
    name_list_free(&names);
    if (g >= 0)
        H5Gclose(g);
    return st;
}

/* --- Recovery through the capture journal ------------------------------------------- */

typedef struct journal_ctx {
    ulp_snapshot *s;
    cap_vec *cv;
    size_t skipped;  /* records whose dataset could not be read */
    ulp_error first; /* why the first of them could not         */
    int truncated;   /* ... and one because the file is cut short */
    int oom;
} journal_ctx;

static int journal_visit(void *data, const ulp__journal_record *r)
{
    journal_ctx *jc = data;
    ulp_snapshot *s = jc->s;
    char occ[24];
    snprintf(occ, sizeof occ, "%" PRId64, r->occurrence);
    char *name = malloc(r->name_len + 1);
    if (name == NULL)
        return -1;
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    if (strlen(name) != r->name_len || r->occurrence < 0) {
        free(name);
        return 1; /* not a record this writer could have written: stop */
    }
    ulp_error why;
    ulp_error_clear(&why);
    ulp_status st = ULP_OK;
    hid_t d = -1;
    if (r->addr >= s->file_size)
        st = cap_error(s, &why, ULP_ETRUNC, name, occ,
                       "file is truncated: its header is at byte %" PRIu64
                       " but the file has %" PRIu64 " bytes (journal)",
                       r->addr, s->file_size);
    else if ((d = H5Oopen_by_addr(s->file, (haddr_t)r->addr)) < 0 || H5Iget_type(d) != H5I_DATASET)
        st = ulp__error(&why, ULP_EFORMAT,
                        "'%s': capture '%s/%s' (journal: object at byte %" PRIu64
                        ") cannot be opened",
                        s->path, name, occ, r->addr);
    else if (cap_vec_push(jc->cv) < 0)
        st = ULP_ENOMEM;
    else if ((st = read_capture(s, d, name, occ, &jc->cv->v[jc->cv->n - 1], &why)) != ULP_OK)
        jc->cv->n--;
    else if (jc->cv->v[jc->cv->n - 1].info.seq != r->seq) {
        st = ulp__error(&why, ULP_EFORMAT,
                        "'%s': capture '%s/%s' has seq %" PRId64
                        " but its journal record says %" PRId64,
                        s->path, name, occ, jc->cv->v[jc->cv->n - 1].info.seq, r->seq);
        jc->cv->n--;
    }
    if (d >= 0)
        H5Oclose(d);
    if (st == ULP_ENOMEM) {
        free(name);
        return -1;
    }
    if (st != ULP_OK) {
        if (st == ULP_ETRUNC && !jc->truncated) {
            jc->truncated = 1;
            jc->first = why;
        } else if (jc->skipped == 0 && !jc->truncated) {
            jc->first = why;
        }
        jc->skipped++;
        free(name);
        return 0;
    }
    cap_entry *e = &jc->cv->v[jc->cv->n - 1];
    if ((e->info.name = ulp__snap_keep(s, name)) == NULL) {
        jc->cv->n--;
        return -1;
    }
    e->src.h5path = NULL;
    e->src.oaddr = r->addr;
    return 0;
}

/* The message in `err` without the "'<path>': " that starts it (said once already). */
static const char *without_path(const ulp_snapshot *s, const ulp_error *err)
{
    const char *why = err != NULL ? err->msg : "";
    size_t plen = strlen(s->path);
    if (why[0] == '\'' && strncmp(why + 1, s->path, plen) == 0 &&
        strncmp(why + 1 + plen, "': ", 3) == 0)
        why += plen + 4;
    return why;
}

/* Reads the captures the journal names into `cv` (emptied first).  ULP_ETRUNC
 * when one of them lies past the end of the file. */
static ulp_status read_journal(ulp_snapshot *s, ulp__journal_state *js, cap_vec *cv,
                               journal_ctx *jc, ulp_error *err)
{
    memset(jc, 0, sizeof *jc);
    jc->s = s;
    jc->cv = cv;
    cv->n = 0;
    ulp_error werr;
    if (ulp__journal_walk(s, js, journal_visit, jc, &werr) != ULP_OK || jc->oom)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    /* A capture past the end of the file: the file was cut, not torn. */
    if (jc->truncated) {
        if (err != NULL)
            *err = jc->first;
        return ULP_ETRUNC;
    }
    return ULP_OK;
}

/*
 * Whether two captures the journal names share a seq or a (name,
 * occurrence): 1 yes, 0 no, -1 out of memory.  Groups cannot hold two
 * datasets under one name; a journal that names two is not to be trusted.
 */
static int journal_duplicates(const cap_vec *cv)
{
    if (cv->n < 2)
        return 0;
    const ulp_capture_info **v = malloc(cv->n * sizeof *v);
    if (v == NULL)
        return -1;
    int dup = 0;
    for (size_t i = 1; i < cv->n && !dup; i++)
        dup = cv->v[i].info.seq <= cv->v[i - 1].info.seq; /* the writer's order is seq order */
    for (size_t i = 0; i < cv->n; i++)
        v[i] = &cv->v[i].info;
    qsort(v, cv->n, sizeof *v, cap_name_cmp);
    for (size_t i = 1; i < cv->n && !dup; i++)
        dup = cap_name_cmp(&v[i - 1], &v[i]) == 0;
    free(v);
    return dup;
}

/* Sets s->warning to "<what>: <n> captures read through the capture journal". */
static ulp_status journal_warning(ulp_snapshot *s, const journal_ctx *jc, const char *what,
                                  ulp_error *err)
{
    char msg[2 * ULP_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s: %zu capture%s read through the capture journal", what, jc->cv->n,
             jc->cv->n == 1 ? "" : "s");
    if ((s->warning = ulp__snap_keep(s, strdup(msg))) == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    return ULP_OK;
}

/*
 * Reads every capture, checks seq, and fills s->caps, s->srcs, s->by_name.
 *
 * Which index is read: a file our writer closed has its closed mark, and
 * its groups are read.  A file it did not close (killed) is read through
 * the journal alone: a kill may have torn a group, and HDF5 can loop
 * forever walking a torn B-tree.  The groups are the fallback when that
 * journal is incomplete (a close that freed its later blocks was cut
 * short), and the journal is the fallback when the groups fail.  Files of
 * other writers have no journal: their groups are the index.
 */
static ulp_status read_captures(ulp_snapshot *s, const ulp__journal_state *jsp,
                                const h5_err_info *sticky, ulp_error *err)
{
    cap_vec cv = {0};
    const ulp_capture_info **order = NULL;
    ulp__journal_state js = *jsp;
    journal_ctx jc;
    ulp_status st;

    if (js.found && !js.closed) {
        if ((st = read_journal(s, &js, &cv, &jc, err)) != ULP_OK)
            goto cleanup;
        int dup = journal_duplicates(&cv);
        if (dup < 0) {
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
        if (!js.chain_broken && jc.skipped == 0 && !dup) {
            st = journal_warning(s, &jc, "its writer did not close it (killed?)", err);
            goto install;
        }
    }
    cv.n = 0;
    st = read_capture_groups(s, &cv, err);
    /* A file cut short is refused, not read around: what it lost is gone. */
    if (st != ULP_OK && st != ULP_ENOMEM && st != ULP_ETRUNC && !sticky->truncated && js.found) {
        char what[ULP_ERROR_MSG_MAX + 64];
        snprintf(what, sizeof what, "the capture index is damaged (%s)", without_path(s, err));
        ulp_status damage = st;
        /* On ULP_ETRUNC, err now names the cause where the groups gave a symptom. */
        if ((st = read_journal(s, &js, &cv, &jc, err)) != ULP_OK)
            goto cleanup;
        /* Every record follows its capture to the disk: a capture it names
         * that cannot be read means damage the journal cannot read around. */
        if (cv.n == 0 || jc.skipped > 0 || sticky->truncated || journal_duplicates(&cv) != 0) {
            st = damage; /* err still says why the groups failed */
            goto cleanup;
        }
        ulp_error_clear(err);
        st = journal_warning(s, &jc, what, err);
    }
install:
    if (st != ULP_OK)
        goto cleanup;
    if (cv.n > 1)
        qsort(cv.v, cv.n, sizeof *cv.v, cap_seq_cmp);
    for (size_t i = 1; i < cv.n; i++) {
        if (cv.v[i].info.seq == cv.v[i - 1].info.seq) {
            st = ulp__error(err, ULP_EDUPSEQ,
                            "'%s': captures '%s/%" PRId64 "' and '%s/%" PRId64
                            "' both have seq %" PRId64,
                            s->path, cv.v[i - 1].info.name, cv.v[i - 1].info.occurrence,
                            cv.v[i].info.name, cv.v[i].info.occurrence, cv.v[i].info.seq);
            goto cleanup;
        }
    }

    s->ncaps = cv.n;
    s->caps = calloc(cv.n ? cv.n : 1, sizeof *s->caps);
    s->srcs = calloc(cv.n ? cv.n : 1, sizeof *s->srcs);
    s->by_name = calloc(cv.n ? cv.n : 1, sizeof *s->by_name);
    order = calloc(cv.n ? cv.n : 1, sizeof *order);
    if (s->caps == NULL || s->srcs == NULL || s->by_name == NULL || order == NULL) {
        s->ncaps = 0;
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
        goto cleanup;
    }
    for (size_t i = 0; i < cv.n; i++) {
        s->caps[i] = cv.v[i].info;
        s->srcs[i] = cv.v[i].src;
        order[i] = &s->caps[i];
    }
    if (cv.n > 1)
        qsort(order, cv.n, sizeof *order, cap_name_cmp);
    for (size_t i = 0; i < cv.n; i++)
        s->by_name[i] = (size_t)(order[i] - s->caps);
cleanup:
    free(order);
    free(cv.v);
    return st;
}

/* --- Open and close ------------------------------------------------------------------ */

/* The file-level checks before HDF5 looks at the file. */
static ulp_status open_file(ulp_snapshot *s, ulp_error *err)
{
    struct stat sb;
    if (stat(s->path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return ulp__error(err, ULP_ENOENT, "cannot open '%s': no such file", s->path);
        return ulp__error(err, ULP_EIO, "cannot open '%s': %s", s->path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return ulp__error(err, ULP_EIO, "cannot open '%s': is a directory", s->path);
    /* A FIFO or a device would block the open, or never end: refuse it now. */
    if (!S_ISREG(sb.st_mode))
        return ulp__error(err, ULP_EIO, "cannot open '%s': not a regular file", s->path);
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0)
        return ulp__error(err, errno == ENOENT ? ULP_ENOENT : ULP_EIO, "cannot open '%s': %s",
                          s->path, strerror(errno));
    if (fstat(s->fd, &sb) != 0)
        return ulp__error(err, ULP_EIO, "cannot open '%s': %s", s->path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) /* replaced since the stat above */
        return ulp__error(err, ULP_EIO, "cannot open '%s': not a regular file", s->path);
    s->file_size = (uint64_t)sb.st_size;
    if (s->file_size == 0)
        return ulp__error(err, ULP_ENOTHDF5, "cannot open '%s': not an HDF5 file (empty file)",
                          s->path);
    /*
     * A read-only mapping lets ulp_snapshot_view() hand out contiguous
     * datasets without copying them (the comparison reads the page cache
     * directly).  Without one, views fall back to pread(2).
     */
    if ((uint64_t)(size_t)s->file_size == s->file_size) {
        void *m = mmap(NULL, (size_t)s->file_size, PROT_READ, MAP_SHARED, s->fd, 0);
        s->map = m == MAP_FAILED ? NULL : m;
    }

    htri_t is = H5Fis_hdf5(s->path);
    if (is <= 0) {
        h5_err_info info;
        h5_last_error(&info);
        if (is < 0 && info.truncated)
            return ulp__error(err, ULP_ETRUNC, "cannot open '%s': file is truncated", s->path);
        return ulp__error(err, ULP_ENOTHDF5, "cannot open '%s': not an HDF5 file", s->path);
    }
    /* ls of 10,000 captures: 65 MiB peak RSS with HDF5's default, 41 with this. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    ulp__h5_fapl_fixed_cache(fapl, MDC_BYTES);
    s->file = H5Fopen(s->path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (s->file < 0) {
        h5_err_info info;
        h5_last_error(&info);
        const char *eof = strstr(info.desc, "stored_eof = ");
        if (info.truncated && eof != NULL)
            return ulp__error(err, ULP_ETRUNC,
                              "cannot open '%s': file is truncated (%" PRIu64
                              " bytes, HDF5 expects %s)",
                              s->path, s->file_size, eof + strlen("stored_eof = "));
        if (info.truncated)
            return ulp__error(err, ULP_ETRUNC, "cannot open '%s': file is truncated (%s)", s->path,
                              info.desc);
        if (info.locked)
            return ulp__error(err, ULP_EIO,
                              "cannot open '%s': file is locked (is a writer still running?)",
                              s->path);
        /* A valid signature but an unreadable superblock or root: most often a
         * file cut short while it was written. */
        return ulp__error(err, ULP_ETRUNC,
                          "cannot open '%s': HDF5 cannot read its metadata "
                          "(truncated or corrupt: %s)",
                          s->path, info.desc);
    }
    /* Objects reached through an external link report another file number. */
    H5O_info_t oi;
    if (H5Oget_info2(s->file, &oi, H5O_INFO_BASIC) < 0)
        return ulp__error(err, ULP_EHDF5, "cannot open '%s': its root group cannot be read",
                          s->path);
    s->fileno = oi.fileno;
    return ULP_OK;
}

static ulp_status read_root(ulp_snapshot *s, ulp_error *err)
{
    const char *why = NULL;
    char *fmt = NULL;
    int rc = ulp__attr_read_str(s->file, "format", &fmt, &why);
    if (rc > 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (no 'format' attribute)",
                          s->path);
    if (rc < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (attribute 'format' %s)",
                          s->path, why);
    if (strcmp(fmt, ULP__FORMAT_NAME) != 0) {
        ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (format is '%.100s')", s->path,
                   fmt);
        free(fmt);
        return ULP_EFORMAT;
    }
    free(fmt);

    int64_t v = 0;
    rc = ulp__attr_read_i64(s->file, "format_version", &v, &why);
    if (rc != 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': required attribute 'format_version' %s",
                          s->path, rc > 0 ? "is missing" : why);
    if (v > ULP_FORMAT_VERSION)
        return ulp__error(err, ULP_EVERSION,
                          "'%s': format version %" PRId64
                          " is not supported (this build reads version %d)",
                          s->path, v, ULP_FORMAT_VERSION);
    if (v < 1)
        return ulp__error(err, ULP_EVERSION, "'%s': format version %" PRId64 " is not valid",
                          s->path, v);
    s->format_version = (int32_t)v;

    char *str = NULL;
    if ((rc = ulp__attr_read_str(s->file, "label", &str, &why)) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'label' %s", s->path, why);
    s->label = rc == 0 ? str : strdup("");
    if ((rc = ulp__attr_read_str(s->file, "writer", &str, &why)) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'writer' %s", s->path, why);
    s->writer = rc == 0 ? str : strdup("");
    if (s->label == NULL || s->writer == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (ulp__attr_read_i64(s->file, "created_unix_ns", &s->created_unix_ns, &why) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'created_unix_ns' %s", s->path, why);
    return ULP_OK;
}

/*
 * In a killed writer's file, `what` could not be read (st, err): unless the
 * file is cut short (then nothing is read around) or memory ran out, it is
 * left out, and "; <what> is left out (<why>)" is added to `left`.
 */
static ulp_status leave_out(ulp_snapshot *s, const h5_err_info *sticky, ulp_status st,
                            const char *what, char *left, size_t size, ulp_error *err)
{
    if (st == ULP_ENOMEM || st == ULP_ETRUNC || sticky->truncated)
        return st;
    size_t n = strlen(left);
    snprintf(left + n, size - n, "; %s is left out (%s)", what, without_path(s, err));
    ulp_error_clear(err);
    return ULP_OK;
}

ulp_status ulp_snapshot_open(const char *path, ulp_snapshot **out, ulp_error *err)
{
    ulp_status st;
    if (out != NULL)
        *out = NULL;
    ulp_error_clear(err);
    if (path == NULL || out == NULL)
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_open: NULL argument");

    ulp_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
    s->fd = -1;
    s->file = -1;
    s->path = strdup(path);
    s->h5 = calloc(1, sizeof *s->h5);
    if (s->h5 != NULL)
        s->h5->dset = -1;
    if (s->path == NULL || s->h5 == NULL || pthread_mutex_init(&s->h5->lock, NULL) != 0) {
        free(s->h5);
        s->h5 = NULL;
        ulp_snapshot_close(s);
        return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
    }
    /* Nothing of HDF5's own may reach stderr: every failure becomes our message. */
    ulp__h5_silence();
    if ((st = open_file(s, err)) != ULP_OK) {
        ulp_snapshot_close(s);
        return st;
    }
    h5_err_info sticky;
    memset(&sticky, 0, sizeof sticky);
    H5Eset_auto2(H5E_DEFAULT, h5_err_note, &sticky);
    /*
     * A killed writer's file (its journal has no closed mark) may have any
     * group torn, the root's included: what cannot be read of /run, /env and
     * /trace is left out, and said, instead of refusing the captures.
     */
    ulp__journal_state js;
    char left[2 * ULP_ERROR_MSG_MAX] = "";
    ulp__journal_find(s, &js);
    int unclosed = js.found && !js.closed;
    if ((st = read_root(s, err)) == ULP_OK) {
        st = ulp__attr_read_kv(s, "/run", &s->run, &s->nrun, err);
        if (st != ULP_OK && unclosed)
            st = leave_out(s, &sticky, st, "/run", left, sizeof left, err);
    }
    if (st == ULP_OK) {
        st = ulp__attr_read_kv(s, "/env", &s->env, &s->nenv, err);
        if (st != ULP_OK && unclosed)
            st = leave_out(s, &sticky, st, "/env", left, sizeof left, err);
    }
    if (st == ULP_OK && (st = read_captures(s, &js, &sticky, err)) == ULP_OK) {
        st = ulp__snapshot_read_trace(s, err);
        if (st != ULP_OK && (unclosed || s->warning != NULL)) {
            s->nkernels = 0;
            s->nkernel_names = 0;
            st = leave_out(s, &sticky, st, "its kernel trace", left, sizeof left, err);
        }
    }
    if (st == ULP_OK && left[0] != '\0') {
        char msg[4 * ULP_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s%s",
                 s->warning != NULL ? s->warning : "its writer did not close it (killed?)", left);
        if ((s->warning = ulp__snap_keep(s, strdup(msg))) == NULL)
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }
    ulp__h5_silence();
    if (st != ULP_OK && st != ULP_ENOMEM && st != ULP_ETRUNC && sticky.truncated) {
        /* The problem found is a symptom; the cause is a file cut short. */
        char what[ULP_ERROR_MSG_MAX];
        snprintf(what, sizeof what, "%s", err != NULL ? err->msg : "");
        st = ulp__error(err, ULP_ETRUNC, "%s (file is truncated: %s)", what, sticky.desc);
    }
    if (st != ULP_OK) {
        ulp_snapshot_close(s);
        return st;
    }
    *out = s;
    return ULP_OK;
}

void ulp_snapshot_close(ulp_snapshot *s)
{
    if (s == NULL)
        return;
    ulp__h5_silence();
    if (s->h5 != NULL) {
        if (s->h5->dset >= 0)
            H5Dclose(s->h5->dset);
        pthread_mutex_destroy(&s->h5->lock);
        free(s->h5);
    }
    if (s->file >= 0)
        H5Fclose(s->file);
    if (s->map != NULL)
        munmap((void *)(uintptr_t)s->map, (size_t)s->file_size);
    if (s->fd >= 0)
        close(s->fd);
    for (size_t i = 0; i < s->nstrs; i++)
        free(s->strs[i]);
    free(s->strs);
    free(s->run);
    free(s->env);
    free(s->caps);
    free(s->srcs);
    free(s->by_name);
    free(s->kernels);
    free(s->kernel_names);
    free(s->label);
    free(s->writer);
    free(s->path);
    free(s);
}

/* --- Accessors ------------------------------------------------------------------- */

const char *ulp_snapshot_path(const ulp_snapshot *s)
{
    return s->path;
}

const char *ulp_snapshot_label(const ulp_snapshot *s)
{
    return s->label;
}

const char *ulp_snapshot_warning(const ulp_snapshot *s)
{
    return s->warning;
}

const char *ulp_snapshot_writer(const ulp_snapshot *s)
{
    return s->writer;
}

int32_t ulp_snapshot_format_version(const ulp_snapshot *s)
{
    return s->format_version;
}

int64_t ulp_snapshot_created_unix_ns(const ulp_snapshot *s)
{
    return s->created_unix_ns;
}

size_t ulp_snapshot_run_count(const ulp_snapshot *s)
{
    return s->nrun;
}

const ulp_kv *ulp_snapshot_run(const ulp_snapshot *s, size_t i)
{
    return i < s->nrun ? &s->run[i] : NULL;
}

size_t ulp_snapshot_env_count(const ulp_snapshot *s)
{
    return s->nenv;
}

const ulp_kv *ulp_snapshot_env(const ulp_snapshot *s, size_t i)
{
    return i < s->nenv ? &s->env[i] : NULL;
}

const char *ulp_snapshot_run_get(const ulp_snapshot *s, const char *key)
{
    for (size_t i = 0; i < s->nrun; i++)
        if (strcmp(s->run[i].key, key) == 0)
            return s->run[i].value;
    return NULL;
}

size_t ulp_snapshot_capture_count(const ulp_snapshot *s)
{
    return s->ncaps;
}

const ulp_capture_info *ulp_snapshot_capture(const ulp_snapshot *s, size_t i)
{
    return i < s->ncaps ? &s->caps[i] : NULL;
}

ptrdiff_t ulp_snapshot_find(const ulp_snapshot *s, const char *name, int64_t occurrence)
{
    size_t lo = 0, hi = s->ncaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const ulp_capture_info *c = &s->caps[s->by_name[mid]];
        int cmp = strcmp(c->name, name);
        if (cmp == 0)
            cmp = (c->occurrence > occurrence) - (c->occurrence < occurrence);
        if (cmp == 0)
            return (ptrdiff_t)s->by_name[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

size_t ulp_snapshot_kernel_count(const ulp_snapshot *s)
{
    return s->nkernels;
}

const ulp_kernel_info *ulp_snapshot_kernel(const ulp_snapshot *s, size_t i)
{
    return i < s->nkernels ? &s->kernels[i] : NULL;
}

/* --- Reading --------------------------------------------------------------------- */

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
 * the chunk for every slab (notes/hdf5.md: 29 s instead of 0.6 s).
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

static ulp_status read_h5(const ulp_snapshot *s, size_t i, uint64_t first, uint64_t count,
                          void *buf, ulp_error *err)
{
    const ulp_capture_info *c = &s->caps[i];
    ulp_status st = ULP_OK;
    hid_t d = -1, type = -1, fspace = -1, mspace = -1;

    pthread_mutex_lock(&s->h5->lock);
    ulp__h5_silence(); /* HDF5's error printing is per thread */
    if (s->h5->dset >= 0 && s->h5->idx != i) {
        H5Dclose(s->h5->dset);
        s->h5->dset = -1;
    }
    if (s->h5->dset < 0) {
        s->h5->dset = open_for_reading(s->file, &s->srcs[i]);
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
     * memory space has the slab's size (never H5S_ALL, see notes/hdf5.md). */
    if (H5Dread(d, type, mspace, fspace, H5P_DEFAULT, buf) < 0)
        goto fail;
    goto cleanup;
fail : {
    h5_err_info info;
    h5_last_error(&info);
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
    const ulp_capture_info *c = &s->caps[i];
    if (first > c->elements || count > c->elements - first)
        return ulp__error(err, ULP_ERANGE,
                          "'%s': capture '%s/%" PRId64 "': elements [%" PRIu64 ", +%" PRIu64
                          ") pass its end (%" PRIu64 " elements)",
                          s->path, c->name, c->occurrence, first, count, c->elements);
    if (count == 0)
        return ULP_OK;
    if (s->srcs[i].offset == NO_OFFSET)
        return read_h5(s, i, first, count, buf, err);

    size_t esize = ulp_dtype_size(c->dtype);
    uint64_t off = s->srcs[i].offset + first * esize;
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
        if (got == 0)
            return ulp__error(err, ULP_ETRUNC,
                              "'%s': capture '%s/%" PRId64 "': file is truncated at byte %" PRIu64,
                              s->path, c->name, c->occurrence, off);
        p += got;
        off += (uint64_t)got;
        left -= (uint64_t)got;
    }
    return ULP_OK;
}

ulp_status ulp_snapshot_view(const ulp_snapshot *s, size_t i, uint64_t first, uint64_t count,
                             void *buf, const void **out, ulp_error *err)
{
    if (out == NULL)
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_view: invalid argument");
    *out = buf;
    if (s != NULL && s->map != NULL && i < s->ncaps && s->srcs[i].offset != NO_OFFSET) {
        const ulp_capture_info *c = &s->caps[i];
        uint64_t esize = ulp_dtype_size(c->dtype);
        uint64_t off = s->srcs[i].offset + first * esize;
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
     * the resident set stays bounded by the chunks in flight, whatever the
     * file size.  Only whole pages inside the range: neighbours may be in use.
     */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)q + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)q + (uintptr_t)bytes) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
