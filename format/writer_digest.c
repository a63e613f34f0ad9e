/*
 * The digests of captures written instead of (or beside) their bytes, in
 * the packed layout (FORMAT.md, "Digests", layout `packed-1`): per capture
 * name, the rows of all its occurrences in three row-aligned extendable
 * datasets (`digest`, `position`, `request`) and one element per
 * occurrence in the compound `occurrences`.  A group of its own, so that a
 * reader that knows only /captures never takes a digest for a tensor.
 *
 * Why packed: a dataset per occurrence with its dozen attributes cost
 * about 280k instructions per digest in the writer thread (the attributes'
 * object-header work most of it), a tenth of a small model's decode step.
 * Digests are not journaled and durable only once the file is flushed or
 * closed, so each name's rows wait in memory (up to ULP__DIGEST_NAME_BYTES
 * a name, ULP__DIGEST_ALL_BYTES in all) and are appended at each flush
 * (ulp__writer_flush), when a bound is passed and at close.
 *
 * A capture kept in full (ulp__writer_add_kept: the produced tokens and the
 * fed token ids of a digest-mode file) also keeps its rows' bytes, in the
 * row-aligned 2-D `value` of its name, instead of a /captures dataset of
 * its own: a 1-token decode step's dataset cost about 2.5 KB of object
 * header and index for its 8 bytes, which left a digest file of 200 steps
 * only 40x smaller than its data file.  Such a capture is durable as a
 * /captures dataset is: journaled whole when it is accepted, before its rows
 * wait here (writer_kept_journal.c).
 */
#include <stdlib.h>
#include <string.h>

#include "common/digest.h"
#include "common/grow.h"
#include "digest_table.h"
#include "writer_internal.h"

#define ULP__DIGEST_NAME_BYTES ((size_t)1 << 20) /* a name's rows waiting in memory */
#define ULP__DIGEST_ALL_BYTES  ((size_t)8 << 20) /* all names' rows waiting          */
#define ROW_CHUNK              8192 /* rows per chunk of the row sets, at most (64 KiB) */
#define ROW_CHUNK_MIN          256  /* and at least (2 KiB) */
#define OCC_CHUNK              1024 /* occurrences per chunk, at most (about 240 KiB) */
#define OCC_CHUNK_MIN          32   /* and at least */
/* Compressed, at most 256 (about 60 KiB): a flush compresses its last chunk again. */
#define OCC_CHUNK_SQUEEZED 256
/* A kept row of more bytes (a wide `tokens` capture) goes to /captures: kept rows are a few
 * bytes a position. */
#define ULP__KEPT_ROW_BYTES ((uint64_t)4096)

/* One name: its datasets (open once created) and what waits for them. */
struct ulp__digest_buf {
    char *name;
    int64_t next_occ;
    hid_t g, ds[3], occ_ds, inputs_ds, val_ds; /* ds: digest, position, request */
    uint64_t rows_done, occ_done, inputs_done; /* elements in the file      */
    uint64_t *dig;
    int64_t *pos, *req;
    size_t nrows, dig_cap, pos_cap, req_cap;
    ulp__digest_occ *occ;
    size_t nocc, occ_cap;
    char **inputs;
    size_t ninputs, inputs_cap;
    /* The last inputs appended (copies, kept across flushes): a name's inputs are most often
     * the same at every step, and an occurrence then names those elements again. */
    char **prev;
    size_t nprev;
    uint64_t prev_first;
    size_t bytes; /* what waits, in bytes */
    /* Kept rows (`value`), from the name's first kept occurrence on: val holds
     * nrows rows of val_row bytes (zeros for the rows of occurrences not kept). */
    unsigned char *val;
    size_t val_cap, val_row;
    ulp_dtype val_dtype;
    int64_t val_width;     /* elements a row */
    int64_t kept_next;     /* the next occurrence number a kept capture may take */
    ulp__kept_jname jname; /* the name in the journal's kept records */
};

static hid_t digest_lcpl(const ulp__writer *w, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80)
            return w->lcpl;
    return H5P_DEFAULT;
}

static int str_attr(hid_t obj, const char *name, const char *v)
{
    hid_t t = ulp__digest_str_type(strlen(v) + 1, 0), one = H5Screate(H5S_SCALAR);
    hid_t a = t < 0 || one < 0 ? -1 : H5Acreate2(obj, name, t, one, H5P_DEFAULT, H5P_DEFAULT);
    int bad = a < 0 || H5Awrite(a, t, v) < 0;
    if (a >= 0)
        H5Aclose(a);
    if (t >= 0)
        H5Tclose(t);
    if (one >= 0)
        H5Sclose(one);
    return bad ? -1 : 0;
}

static int open_root(ulp__writer *w)
{
    if (w->digests >= 0)
        return 0;
    /* New-style groups (w->gcpl), their few links kept in the header: an
     * old-style group's B-tree and heap took 7 KiB a name. */
    w->digests = H5Gcreate2(w->file, "digests", H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
    if (w->digests < 0)
        return -1;
    /* The occurrence tables' type, committed once (without a name: nothing new to list):
     * its 31 fields take 906 bytes, in every table's header when each holds its own. */
    hid_t mt = ulp__digest_occ_type();
    w->occ_ftype = mt >= 0 ? H5Tcopy(mt) : H5I_INVALID_HID;
    if (mt >= 0)
        H5Tclose(mt);
    if (w->occ_ftype >= 0 && H5Tpack(w->occ_ftype) >= 0 &&
        H5Tcommit_anon(w->file, w->occ_ftype, H5P_DEFAULT, H5P_DEFAULT) >= 0 &&
        str_attr(w->digests, "algorithm", ULP__DIGEST_ALGORITHM) >= 0 &&
        str_attr(w->digests, "layout", ULP__DIGEST_LAYOUT) >= 0)
        return 0;
    /* Half made: undone, so that a later write does not take it for whole (a /digests
     * without its `layout` reads as the old layout). */
    H5Gclose(w->digests);
    H5Ldelete(w->file, "digests", H5P_DEFAULT);
    if (w->occ_ftype >= 0)
        H5Tclose(w->occ_ftype);
    w->digests = w->occ_ftype = H5I_INVALID_HID;
    return -1;
}

/*
 * A 1-D chunked dataset of `type` that grows without bound; or, when `fixed`
 * (the name's rows all known: the file is closing), one of `fixed_n`
 * elements: contiguous, without the chunk index (2 KiB a dataset in the
 * file's format), or, when `squeeze`, one chunk.  `squeeze`: shuffled and
 * deflated (FORMAT.md "Digests": the occurrences, positions and requests,
 * where HDF5 has the filters).  Variable-length strings (`inputs`) keep
 * HDF5's fill time: it refuses "never" for them.
 */
static hid_t extendable(const ulp__writer *w, hid_t g, const char *name, hid_t type, hsize_t chunk,
                        int fixed, hsize_t fixed_n, int squeeze)
{
    int vlen = H5Tis_variable_str(type) > 0;
    int contiguous = fixed && !(squeeze && fixed_n > 0);
    hsize_t zero = 0, max = H5S_UNLIMITED;
    if (contiguous)
        zero = max = fixed_n;
    else if (fixed)
        chunk = zero = max = fixed_n; /* one chunk, compressed */
    hid_t sp = H5Screate_simple(1, &zero, &max), pl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = H5I_INVALID_HID;
    if (sp >= 0 && pl >= 0 &&
        (contiguous ? H5Pset_layout(pl, H5D_CONTIGUOUS) : H5Pset_chunk(pl, 1, &chunk)) >= 0 &&
        (vlen || H5Pset_fill_time(pl, H5D_FILL_TIME_NEVER) >= 0) &&
        ulp__h5_dcpl_no_attrs(pl) >= 0 && (contiguous || !squeeze || ulp__digest_squeeze(pl) >= 0))
        ds = H5Dcreate2(g, name, type, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds;
}

/* Appends `n` elements of memory type `mt` at `buf` to `ds`, holding *done. */
static int append(hid_t ds, hid_t mt, const void *buf, uint64_t n, uint64_t *done)
{
    if (n == 0)
        return 0;
    hsize_t start = *done, count = n, size = *done + n, cur = 0;
    hid_t fs = H5Dget_space(ds);
    if (fs < 0 || H5Sget_simple_extent_dims(fs, &cur, NULL) != 1) {
        if (fs >= 0)
            H5Sclose(fs);
        return -1;
    }
    if (cur < size) {
        H5Sclose(fs);
        if (H5Dset_extent(ds, &size) < 0)
            return -1;
        fs = H5Dget_space(ds);
    }
    hid_t ms = H5Screate_simple(1, &count, NULL);
    int bad = fs < 0 || ms < 0 ||
              H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
              H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, buf) < 0;
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    if (!bad)
        *done = size;
    return bad ? -1 : 0;
}

/* `n` rounded up to a power of two in [lo, hi]. */
static hsize_t chunk_for(size_t n, hsize_t lo, hsize_t hi)
{
    hsize_t c = lo;
    while (c < n && c < hi)
        c *= 2;
    return c;
}

/*
 * The name's `value`: [rows, val_width] of the kept dtype's file type, chunked
 * and extendable along the rows (one chunk when `fixed` and nothing was
 * written before), its fill value 0: the rows written before the name's first
 * kept occurrence, and those of occurrences not kept, read as zeros.
 */
static hid_t value_create(const ulp__writer *w, const ulp__digest_buf *b, int fixed)
{
    static const unsigned char zero[16];
    hid_t type = w->types[b->val_dtype];
    /* Rows of at most ULP__KEPT_ROW_BYTES (ulp__writer_kept_fits): a chunk of at most 1 MiB. */
    hsize_t rows = chunk_for(b->nrows, ROW_CHUNK_MIN, ROW_CHUNK);
    while (rows > 1 && rows * b->val_row > ((hsize_t)1 << 20))
        rows /= 2;
    hsize_t chunk[2] = {rows, (hsize_t)b->val_width};
    hsize_t dims[2] = {0, chunk[1]}, max[2] = {H5S_UNLIMITED, chunk[1]};
    if (fixed && b->rows_done == 0 && b->nrows > 0)
        chunk[0] = dims[0] = max[0] = b->nrows; /* one chunk */
    if (chunk[1] == 0)
        chunk[1] = 1;
    hid_t sp = H5Screate_simple(2, dims, max), pl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = H5I_INVALID_HID;
    if (sp >= 0 && pl >= 0 && H5Tget_size(type) <= sizeof zero && H5Pset_chunk(pl, 2, chunk) >= 0 &&
        H5Pset_fill_value(pl, type, zero) >= 0 && ulp__h5_dcpl_no_attrs(pl) >= 0 &&
        (!w->squeeze || ulp__digest_squeeze(pl) >= 0))
        ds = H5Dcreate2(b->g, "value", type, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds;
}

/* Writes the `n` kept rows at `buf` as rows [start, start + n) of `value`. */
static int value_write(const ulp__writer *w, const ulp__digest_buf *b, uint64_t start, uint64_t n)
{
    if (n == 0)
        return 0;
    hsize_t size[2] = {start + n, (hsize_t)b->val_width}, off[2] = {start, 0};
    hsize_t count[2] = {n, (hsize_t)b->val_width};
    if (H5Dset_extent(b->val_ds, size) < 0)
        return -1;
    hid_t fs = H5Dget_space(b->val_ds), ms = H5Screate_simple(2, count, NULL);
    int bad = fs < 0 || ms < 0 ||
              H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, count, NULL) < 0 ||
              H5Dwrite(b->val_ds, w->types[b->val_dtype], ms, fs, H5P_DEFAULT, b->val) < 0;
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    return bad ? -1 : 0;
}

static int buf_create(ulp__writer *w, ulp__digest_buf *b, int fixed)
{
    if (open_root(w) < 0)
        return -1;
    if (b->g < 0) {
        /* Its datasets' links in its header: digest, position, request, occurrences, value
         * or inputs (at most 6, names of at most 11 bytes). */
        hid_t gcpl = ulp__h5_small_gcpl(6, 11);
        b->g = gcpl < 0
                   ? H5I_INVALID_HID
                   : H5Gcreate2(w->digests, b->name, digest_lcpl(w, b->name), gcpl, H5P_DEFAULT);
        if (gcpl >= 0)
            H5Pclose(gcpl);
        if (b->g < 0)
            return -1;
    }
    /* Chunks as large as the first rows written, within bounds: a short
     * run's file stays small (a chunk is allocated whole), a long one's
     * appends touch few chunks. */
    static const char *const names[3] = {"digest", "position", "request"};
    hsize_t rchunk = chunk_for(b->nrows, ROW_CHUNK_MIN, ROW_CHUNK);
    for (int i = 0; i < 3; i++)
        if (b->ds[i] < 0 &&
            (b->ds[i] = extendable(w, b->g, names[i], i == 0 ? H5T_STD_U64LE : H5T_STD_I64LE,
                                   rchunk, fixed, b->nrows, i > 0 && w->squeeze)) < 0)
            return -1;
    if (b->occ_ds < 0) {
        b->occ_ds = extendable(
            w, b->g, "occurrences", w->occ_ftype,
            chunk_for(b->nocc, OCC_CHUNK_MIN, w->squeeze ? OCC_CHUNK_SQUEEZED : OCC_CHUNK), fixed,
            b->nocc, w->squeeze);
        if (b->occ_ds < 0)
            return -1;
    }
    if (b->val_ds < 0 && b->val_row > 0 && (b->val_ds = value_create(w, b, fixed)) < 0)
        return -1;
    if (b->inputs_ds < 0 && b->ninputs > 0) {
        hid_t t = ulp__digest_str_type(0, 1);
        b->inputs_ds = t < 0 ? -1
                             : extendable(w, b->g, "inputs", t,
                                          chunk_for(b->ninputs, OCC_CHUNK_MIN, OCC_CHUNK), fixed,
                                          b->ninputs, 0);
        if (t >= 0)
            H5Tclose(t);
        if (b->inputs_ds < 0)
            return -1;
    }
    return 0;
}

static void buf_clear(ulp__digest_buf *b)
{
    for (size_t i = 0; i < b->ninputs; i++)
        free(b->inputs[i]);
    b->nrows = b->nocc = b->ninputs = 0;
}

static void prev_free(ulp__digest_buf *b)
{
    for (size_t i = 0; i < b->nprev; i++)
        free(b->prev[i]);
    free(b->prev);
    b->prev = NULL;
    b->nprev = 0;
}

/* Appends what waits of `b` to its datasets (created at its first rows). */
static int buf_write(ulp__writer *w, ulp__digest_buf *b, int fixed)
{
    if (b->nocc == 0)
        return 0;
    int bad = buf_create(w, b, fixed) < 0;
    uint64_t r0 = b->rows_done, r1 = b->rows_done, r2 = b->rows_done;
    bad = bad || (b->val_row > 0 && value_write(w, b, b->rows_done, b->nrows) < 0) ||
          append(b->ds[0], H5T_NATIVE_UINT64, b->dig, b->nrows, &r0) < 0 ||
          append(b->ds[1], H5T_NATIVE_INT64, b->pos, b->nrows, &r1) < 0 ||
          append(b->ds[2], H5T_NATIVE_INT64, b->req, b->nrows, &r2) < 0;
    if (!bad)
        b->rows_done = r0;
    if (!bad && b->ninputs > 0) {
        hid_t t = ulp__digest_str_type(0, 1);
        bad = t < 0 || append(b->inputs_ds, t, b->inputs, b->ninputs, &b->inputs_done) < 0;
        if (t >= 0)
            H5Tclose(t);
    }
    if (!bad) {
        hid_t mt = ulp__digest_occ_type();
        bad = mt < 0 || append(b->occ_ds, mt, b->occ, b->nocc, &b->occ_done) < 0;
        if (mt >= 0)
            H5Tclose(mt);
    }
    w->digest_bytes -= b->bytes;
    w->digest_pending -= b->nocc;
    b->bytes = 0;
    buf_clear(b);
    return bad ? -1 : 0;
}

ulp_status ulp__writer_digests_write(ulp__writer *w, int closing, ulp_error *err)
{
    if (w->digest_bytes == 0 && w->digest_pending == 0)
        return ULP_OK;
    ulp_status st = ULP_OK;
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    for (size_t i = 0; i < w->ndigest_bufs; i++)
        if (buf_write(w, &w->digest_bufs[i], closing) < 0 && st == ULP_OK)
            st = ulp__writer_h5_fail(err, w, "write digests");
    ulp__h5_quiet_end(&q);
    return st;
}

size_t ulp__writer_digests_pending(const ulp__writer *w)
{
    return w->digest_pending;
}

void ulp__writer_digests_release(ulp__writer *w)
{
    for (size_t i = 0; i < w->ndigest_bufs; i++) {
        ulp__digest_buf *b = &w->digest_bufs[i];
        buf_clear(b);
        for (int k = 0; k < 3; k++)
            if (b->ds[k] >= 0)
                H5Dclose(b->ds[k]);
        if (b->occ_ds >= 0)
            H5Dclose(b->occ_ds);
        if (b->inputs_ds >= 0)
            H5Dclose(b->inputs_ds);
        if (b->val_ds >= 0)
            H5Dclose(b->val_ds);
        if (b->g >= 0)
            H5Gclose(b->g);
        free(b->name);
        free(b->dig);
        free(b->pos);
        free(b->req);
        free(b->occ);
        free(b->inputs);
        free(b->val);
        free(b->jname.def);
        prev_free(b);
    }
    free(w->digest_bufs);
    w->digest_bufs = NULL;
    w->ndigest_bufs = w->digest_bufs_cap = 0;
    ulp__strmap_release(&w->digest_occ);
    if (w->digests >= 0)
        H5Gclose(w->digests);
    if (w->occ_ftype >= 0)
        H5Tclose(w->occ_ftype);
    w->digests = w->occ_ftype = H5I_INVALID_HID;
}

static ulp__digest_buf *buf_of(ulp__writer *w, const char *name)
{
    int inserted = 0;
    int64_t *slot = ulp__strmap_upsert(&w->digest_occ, name, (int64_t)w->ndigest_bufs, &inserted);
    if (slot == NULL)
        return NULL;
    if (!inserted)
        return &w->digest_bufs[*slot];
    ulp__digest_buf b = {.g = H5I_INVALID_HID,
                         .ds = {H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID},
                         .occ_ds = H5I_INVALID_HID,
                         .inputs_ds = H5I_INVALID_HID,
                         .val_ds = H5I_INVALID_HID,
                         .jname = {.id = -1}};
    b.name = strdup(name);
    if (b.name == NULL || ULP__GROW(w->digest_bufs, w->digest_bufs_cap, w->ndigest_bufs + 1) != 0) {
        free(b.name);
        *slot = -1; /* never looked up again: the caller fails */
        return NULL;
    }
    w->digest_bufs[w->ndigest_bufs++] = b;
    return &w->digest_bufs[*slot];
}

/* The name's buffer, made at its first digests; NULL when out of memory. */
static ulp__digest_buf *buf_find(ulp__writer *w, const char *name)
{
    int64_t *found = ulp__strmap_find(&w->digest_occ, name);
    return found != NULL && *found >= 0 ? &w->digest_bufs[*found] : buf_of(w, name);
}

/* The elements of one row of `d` (the product of the axes after its row axes). */
static uint64_t row_width(const ulp__desc *d)
{
    uint64_t n = 1;
    int rr = d->positions != NULL ? d->row_rank : (d->ndim > 0 ? 1 : 0);
    for (int i = rr; i < d->ndim; i++)
        n *= (uint64_t)d->shape[i];
    return n;
}

int64_t ulp__writer_kept_next(ulp__writer *w, const char *name)
{
    int64_t *found = w->kept_any ? ulp__strmap_find(&w->digest_occ, name) : NULL;
    return found != NULL && *found >= 0 ? w->digest_bufs[*found].kept_next : 0;
}

/* Whether `d`'s inputs (its own name passed over unless `own`) are the last ones appended. */
static int same_inputs(const ulp__digest_buf *b, const ulp__desc *d, int own)
{
    size_t k = 0;
    for (int32_t i = 0; i < d->n_inputs; i++) {
        if (!own && strcmp(d->inputs[i], d->name) == 0)
            continue;
        if (k >= b->nprev || strcmp(d->inputs[i], b->prev[k]) != 0)
            return 0;
        k++;
    }
    return k > 0 && k == b->nprev;
}

/* `d`'s inputs, to be appended at element `first`, as the last ones appended; -1 out of memory. */
static int keep_inputs(ulp__digest_buf *b, const ulp__desc *d, uint64_t first, int own)
{
    prev_free(b);
    if (d->n_inputs <= 0)
        return 0;
    if ((b->prev = calloc((size_t)d->n_inputs, sizeof *b->prev)) == NULL)
        return -1;
    for (int32_t i = 0; i < d->n_inputs; i++) {
        if (!own && strcmp(d->inputs[i], d->name) == 0)
            continue;
        if ((b->prev[b->nprev] = strdup(d->inputs[i])) == NULL) {
            prev_free(b);
            return -1;
        }
        b->nprev++;
    }
    b->prev_first = first;
    return 0;
}

/*
 * Occurrence `o` of `d` (rows at `data`) as a capture of the file: the captures' seq, and its
 * digests' occurrence (what a data-mode file numbers it) unless a /captures dataset or a kept
 * capture of the name took that number (ulp__writer_add takes one past the kept ones alike).
 * Journaled before its rows join the buffer, so before any flush writes them: a kill from
 * then on leaves it in the file (writer_kept_journal.c).  Not accepted when the record cannot
 * be written.
 */
static ulp_status take_kept(ulp__writer *w, ulp__digest_buf *b, const ulp__desc *d,
                            ulp__digest_occ *o, uint64_t rows, const void *data, ulp_error *err)
{
    int64_t *real = ulp__strmap_find(&w->occurrences, d->name);
    int64_t at = o->occurrence > b->kept_next ? o->occurrence : b->kept_next;
    o->kept = 1;
    o->kept_seq = w->next_seq;
    o->kept_occurrence = real != NULL && *real > at ? *real : at;
    ulp_status st =
        ulp__writer_journal_kept(w, &b->jname, d, o->kept_seq, o->kept_occurrence, o->row_rank,
                                 rows, data, (size_t)rows * b->val_row, err);
    if (st != ULP_OK)
        return st;
    w->next_seq++;
    b->kept_next = o->kept_occurrence + 1;
    w->kept_any = 1;
    return ULP_OK;
}

/* One occurrence of `d`'s digests into its name's buffer; with `kept`, its bytes too. */
static ulp_status add_occurrence(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                 uint64_t rows, int kept, const void *data, ulp_error *err)
{
    if (w == NULL || d == NULL || d->name == NULL || (rows > 0 && digests == NULL))
        return ulp__error(err, ULP_EINVAL, "writer: invalid digests");
    /* One digest per row: the row axes' product (positions and requests
     * are read for each). */
    uint64_t want = 1;
    int rr = d->positions != NULL ? d->row_rank : (d->ndim > 0 ? 1 : 0);
    for (int i = 0; i < rr && i < d->ndim; i++)
        want *= (uint64_t)d->shape[i];
    if (rows != want)
        return ulp__error(err, ULP_EINVAL, "digests of '%s': %llu rows, the capture has %llu",
                          d->name, (unsigned long long)rows, (unsigned long long)want);
    ulp__digest_buf *b = buf_find(w, d->name);
    if (b != NULL && kept && b->val_row == 0) { /* the name's first kept occurrence */
        b->val_dtype = d->dtype;
        b->val_width = (int64_t)row_width(d);
        b->val_row = (size_t)b->val_width * ulp_dtype_size(d->dtype);
        if (ULP__GROW(b->val, b->val_cap, b->nrows * b->val_row) != 0)
            return ulp__error(err, ULP_ENOMEM, "digests of '%s': out of memory", d->name);
        if (b->nrows > 0)
            memset(b->val, 0, b->nrows * b->val_row);
    }
    size_t need = b == NULL ? 0 : b->nrows + (size_t)rows;
    if (b == NULL || ULP__GROW(b->dig, b->dig_cap, need) != 0 ||
        (b->val_row > 0 && ULP__GROW(b->val, b->val_cap, need * b->val_row) != 0) ||
        ULP__GROW(b->pos, b->pos_cap, need) != 0 || ULP__GROW(b->req, b->req_cap, need) != 0 ||
        ULP__GROW(b->occ, b->occ_cap, b->nocc + 1) != 0 ||
        ULP__GROW(b->inputs, b->inputs_cap,
                  b->ninputs + (size_t)(d->n_inputs > 0 ? d->n_inputs : 0)) != 0)
        return ulp__error(err, ULP_ENOMEM, "digests of '%s': out of memory", d->name);
    ulp__digest_occ o;
    memset(&o, 0, sizeof(o));
    o.occurrence = b->next_occ;
    o.seq = w->digest_seq;
    o.first = b->rows_done + b->nrows;
    o.rows = rows;
    o.time_ns = d->time_ns;
    o.has_step = d->step != ULP_STEP_NONE;
    o.step = o.has_step ? d->step : 0;
    o.has_layer = d->layer != ULP_LAYER_NONE;
    o.layer = o.has_layer ? d->layer : -1;
    o.ndim = d->ndim;
    o.row_rank = d->positions != NULL ? d->row_rank : (d->ndim > 0 ? 1 : 0);
    o.has_positions = d->positions != NULL;
    o.has_requests = d->requests != NULL;
    ulp_role role = ulp_role_name(d->role) != NULL ? d->role : ULP_ROLE_ACTIVATION;
    strncpy(o.dtype, ulp_dtype_name(d->dtype), ULP__DIGEST_STR - 1);
    strncpy(o.role, ulp_role_name(role), ULP__DIGEST_STR - 1);
    for (int i = 0; i < d->ndim && i < ULP_MAX_RANK; i++)
        o.shape[i] = d->shape[i];
    o.inputs_first = b->inputs_done + b->ninputs;
    o.has_kernels = d->has_kernels != 0;
    o.has_gemms = d->has_gemms != 0;
    o.has_graph_replay = d->has_graph_replay != 0;
    memcpy(o.kernels, d->kernels, sizeof(o.kernels));
    memcpy(o.gemms, d->gemms, sizeof(o.gemms));
    memcpy(o.graph_replay, d->graph_replay, sizeof(o.graph_replay));
    o.device_ptr = d->device_ptr;
    o.stream = d->stream;
    if (kept) {
        ulp_status kst = take_kept(w, b, d, &o, rows, data, err);
        if (kst != ULP_OK)
            return kst;
    }
    /* The inputs, the name's own passed over (a kept capture's all, as its /captures
     * dataset would list them); the elements of the last ones again when they are the same. */
    if (same_inputs(b, d, kept)) {
        o.inputs_first = b->prev_first;
    } else {
        if (keep_inputs(b, d, o.inputs_first, kept) != 0)
            return ulp__error(err, ULP_ENOMEM, "digests of '%s': out of memory", d->name);
        for (size_t i = 0; i < b->nprev; i++) {
            char *s = strdup(b->prev[i]);
            if (s == NULL)
                return ulp__error(err, ULP_ENOMEM, "digests of '%s': out of memory", d->name);
            b->inputs[b->ninputs++] = s;
            b->bytes += strlen(s) + 1;
            w->digest_bytes += strlen(s) + 1;
        }
    }
    o.inputs_count = (uint32_t)b->nprev;
    if (rows > 0)
        memcpy(b->dig + b->nrows, digests, (size_t)rows * sizeof(uint64_t));
    for (uint64_t i = 0; i < rows; i++) {
        b->pos[b->nrows + i] = d->positions != NULL ? d->positions[i] : (int64_t)i;
        b->req[b->nrows + i] = d->requests != NULL ? d->requests[i] : 0;
    }
    if (b->val_row > 0) {
        unsigned char *v = b->val + b->nrows * b->val_row;
        if (kept && rows > 0)
            memcpy(v, data, (size_t)rows * b->val_row);
        else
            memset(v, 0, (size_t)rows * b->val_row);
    }
    b->nrows += (size_t)rows;
    b->occ[b->nocc++] = o;
    size_t add = (size_t)rows * (24 + b->val_row) + sizeof(o);
    b->bytes += add;
    w->digest_bytes += add;
    w->digest_pending++;
    b->next_occ++;
    w->digest_seq++;
    ulp_status st = ULP_OK;
    if (b->bytes >= ULP__DIGEST_NAME_BYTES || w->digest_bytes >= ULP__DIGEST_ALL_BYTES) {
        ulp__h5_quiet q;
        ulp__h5_quiet_begin(&q);
        if (w->digest_bytes >= ULP__DIGEST_ALL_BYTES)
            st = ulp__writer_digests_write(w, 0, err);
        else if (buf_write(w, b, 0) < 0)
            st = ulp__writer_h5_fail(err, w, "write digests");
        ulp__h5_quiet_end(&q);
    }
    return st;
}

ulp_status ulp__writer_add_digests(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                   uint64_t rows, ulp_error *err)
{
    return add_occurrence(w, d, digests, rows, 0, NULL, err);
}

int ulp__writer_kept_fits(ulp__writer *w, const ulp__desc *d)
{
    uint64_t width = row_width(d);
    int64_t *found = ulp__strmap_find(&w->digest_occ, d->name);
    const ulp__digest_buf *b = found != NULL && *found >= 0 ? &w->digest_bufs[*found] : NULL;
    return width > 0 && ulp_dtype_size(d->dtype) > 0 &&
           width * ulp_dtype_size(d->dtype) <= ULP__KEPT_ROW_BYTES &&
           (b == NULL || b->val_row == 0 ||
            (b->val_dtype == d->dtype && b->val_width == (int64_t)width));
}

ulp_status ulp__writer_digests_kept(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                    uint64_t rows, const void *data, size_t nbytes, ulp_error *err)
{
    uint64_t need = rows * row_width(d) * ulp_dtype_size(d->dtype);
    if ((uint64_t)nbytes != need || (nbytes > 0 && data == NULL))
        return ulp__error(err, ULP_EINVAL, "kept capture '%s': %zu bytes, its %llu rows need %llu",
                          d->name, nbytes, (unsigned long long)rows, (unsigned long long)need);
    return add_occurrence(w, d, digests, rows, 1, data, err);
}
