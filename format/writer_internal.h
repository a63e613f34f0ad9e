/*
 * The inside of the snapshot writer, shared by the files that implement it:
 *   writer.c          create, close, flush, attributes, captures;
 *   writer_attrs.c    the attributes of a capture's dataset;
 *   writer_journal.c  the capture journal (format/journal.h) in its blocks;
 *   writer_trace.c    /trace/kernels and /trace/names;
 *   writer_link.c     links of captures into their groups, in batches;
 * and, on their own behind their own headers, writer_h5err.c (HDF5 failures).
 * writer.h says how the writer behaves; this header is internal to those files.
 */
#ifndef ULPPROF_FORMAT_WRITER_INTERNAL_H
#define ULPPROF_FORMAT_WRITER_INTERNAL_H

#include <stdint.h>

#include "common/error.h"
#include "common/strmap.h"
#include "h5types.h"
#include "index.h"
#include "index_write.h"
#include "journal.h"
#include "writer.h"
#include "writer_h5err.h"

struct ulp__writer {
    char *path;
    unsigned flags; /* ulp__writer_create_as() */
    hid_t file;
    hid_t groups[ULP__WRITER_NGROUPS]; /* /run, /env, /observed (lazily) */
    hid_t captures;                    /* /captures                          */
    hid_t lcpl;                        /* links named in non-ASCII UTF-8     */
    hid_t dcpl;                        /* contiguous, never filled           */
    hid_t gcpl;                        /* capture groups: heap pre-sized     */
    hid_t types[ULP_DTYPE_COUNT];      /* file (= memory) type per dtype     */
    int64_t next_seq;
    ulp__strmap occurrences; /* capture name -> next occurrence    */
    ulp__strmap groups_open; /* capture name -> its open group id  */

    /* /digests (writer_digest.c), created at the first digests written out. */
    hid_t digests;
    hid_t occ_ftype;        /* the occurrence tables' type, committed (anonymous) */
    ulp__strmap digest_occ; /* capture name -> its index in digest_bufs */
    struct ulp__digest_buf *digest_bufs;
    size_t ndigest_bufs, digest_bufs_cap;
    size_t digest_bytes;   /* rows and metadata waiting in memory */
    size_t digest_pending; /* occurrences waiting */
    int squeeze;           /* deflate there: HDF5 has the filter (H5Zfilter_avail) */
    int64_t digest_seq;
    int kept_any;         /* some capture is kept in /digests (ulp__writer_add_kept) */
    uint32_t jkept_names; /* names the journal's kept records defined (writer_kept_journal.c) */

    /* Captures written that wait for their batch's flush, journal
     * records and links (writer_link.c). */
    struct ulp__writer_unlinked *unlinked;
    size_t nunlinked, unlinked_cap;
    uint64_t unlinked_bytes; /* their data                       */
    size_t link_batch;       /* link when this many wait (1: at once) */
    int link_failed;         /* a batch failed: no closed mark        */

    /* Capture attributes (writer_attrs.c): dataspaces, string types. */
    hid_t attr_scalar, attr_pair;
    hid_t attr_dtype[ULP_DTYPE_COUNT]; /* "bf16", ... */
    hid_t attr_role[ULP_ROLE_COUNT];   /* "activation", ... */

    /* /trace, created at the first kernel batch. */
    hid_t trace, names_ds, kernels_ds, str_type, row_mtype, row_ftype;
    ulp__strmap name_ids; /* kernel name -> row of /trace/names */
    uint64_t name_count;
    uint64_t kernel_count;
    int trace_broken; /* a batch failed half-way            */
    /* /trace/gemms, created at the first GEMM batch. */
    hid_t gemms_ds, gemm_mtype, gemm_ftype;
    uint64_t gemm_count;

    /* The capture journal; blocks after /journal are anonymous datasets,
     * held open (an unlinked dataset is freed when it is closed). */
    int fd;          /* HDF5's descriptor of the file      */
    uint64_t jfirst; /* file offset of /journal            */
    uint64_t jblock; /* file offset of the current block   */
    uint64_t jbytes; /* its size                           */
    uint64_t jused;  /* bytes of it in use, header counted */
    uint64_t jtotal; /* bytes of every block so far        */
    hid_t *jextra;   /* the later blocks                   */
    size_t njextra, jextra_cap;

    /* The capture index (writer_index.c, index_write.h). */
    ulp__index_writer index;

    /* What the open map repeats (writer_map.c): the root's strings, /run
     * and /env as written (their latest value a key). */
    char *map_label, *map_writer;
    int64_t map_created;
    struct ulp__map_kv *map_kv[ULP__WRITER_NGROUPS];
    uint32_t map_n[ULP__WRITER_NGROUPS];
    size_t map_cap[ULP__WRITER_NGROUPS];
    int map_off; /* a value it could not keep: no map */
};

/* ulp__h5_fail() on the writer's file. */
static inline ulp_status ulp__writer_h5_fail(ulp_error *err, const ulp__writer *w, const char *what)
{
    return ulp__h5_fail(err, w->fd, w->path, what);
}

/* --- capture attributes (writer_attrs.c) ---------------------------------------------- */

/* Builds the dataspaces and string types the capture attributes use. */
ulp_status ulp__writer_attrs_init(ulp__writer *w, ulp_error *err);

/* Closes them. */
void ulp__writer_attrs_release(ulp__writer *w);

/* Writes the FORMAT.md attributes of capture `d` to its new dataset `ds` (`time_ns`:
 * the time recorded, taken once for the attribute and the index); 0 on success. */
int ulp__writer_capture_attrs(ulp__writer *w, hid_t ds, const ulp__desc *d, int64_t seq,
                              int64_t time_ns);

/* --- the capture journal (writer_journal.c) ------------------------------------------ */

/* Creates /journal, the first block, and makes it current; the file is flushed after the groups. */
hid_t ulp__writer_journal_create(ulp__writer *w);

/* Starts the first block `ds` (created and flushed) and makes it the current one. */
ulp_status ulp__writer_journal_start(ulp__writer *w, hid_t ds, ulp_error *err);

/* Appends `r`, then an end mark, in one write; chains a new block when full. */
ulp_status ulp__writer_journal_append(ulp__writer *w, const ulp__journal_record *r, ulp_error *err);

/* Closes the later blocks and frees their list. */
void ulp__writer_journal_release(ulp__writer *w);

/* --- the capture index (writer_index.c) ------------------------------------------------ */

/* What the writer made of one capture, beside its descriptor. */
typedef struct ulp__writer_written {
    int64_t seq, occurrence, time_ns;
    uint64_t oaddr;  /* object header address                      */
    uint64_t offset; /* element 0 in the file, or ULP__INDEX_NO_OFFSET */
    uint64_t bytes;
} ulp__writer_written;

/* An empty index, for a new file. */
void ulp__writer_index_init(ulp__writer *w);

/* Records capture `d`, written as `c`, in the index (never fails the capture). */
void ulp__writer_index_add(ulp__writer *w, const ulp__desc *d, const ulp__writer_written *c);

/* No index for this file (a capture failed half-way: the index could disagree). */
void ulp__writer_index_off(ulp__writer *w);

/* Before H5Fclose: the last records and /index/seal (hash 0).  0, or -1: no index. */
int ulp__writer_index_finish(ulp__writer *w, ulp__index_seal_job *job);

/* After H5Fclose, before the closed mark of the journal at `jfirst`: the hash,
 * through `fd`.  Frees the job.  0, or -1 when the seal is not written. */
int ulp__writer_index_seal(int fd, uint64_t jfirst, ulp__index_seal_job *job);

/* Closes /index/records and frees the buffers. */
void ulp__writer_index_release(ulp__writer *w);

/* --- the open map (writer_map.c, format/open_map.h) ------------------------------------- */

/* The root's strings and creation time as written. */
void ulp__writer_map_root(ulp__writer *w, const char *label, const char *writer_name,
                          int64_t created_unix_ns);

/* A /run or /env attribute as written (`ok`), or one that may or may not
 * be (!ok: the file gets no map). */
void ulp__writer_map_attr(ulp__writer *w, ulp__writer_group group, const char *key,
                          const char *value, int ok);

/* Before H5Fclose, after /index/seal is made: the map's bytes, in job->map
 * (none when anything is missing). */
void ulp__writer_map_finish(ulp__writer *w, ulp__index_seal_job *job);

/* Frees what the map keeps. */
void ulp__writer_map_release(ulp__writer *w);

/* --- links into the capture groups (writer_link.c) -------------------------------------- */

#define ULP__WRITER_GROUPS_OPEN 1024 /* capture groups kept open */
/* Captures with this much data waiting link at once: a tensor this large
 * costs more to write than its link does. */
#define ULP__WRITER_LINK_BYTES ((uint64_t)1 << 20)

typedef struct ulp__writer_unlinked ulp__writer_unlinked;

/* The open group of capture name `name`; *kept: it stays open (give it to group_done). */
hid_t ulp__writer_open_group(ulp__writer *w, const char *name, int *kept);

/* After a capture: keeps the group of `name` open when it was linked and there is room. */
void ulp__writer_group_done(ulp__writer *w, const char *name, hid_t g, int kept, int linked);

/* Takes `ds` (written, with its attributes; header at `oaddr`) to be flushed, named in the
 * journal and linked as <name>/<occurrence> with its batch. */
ulp_status ulp__writer_link_later(ulp__writer *w, hid_t ds, const char *name, int64_t occurrence,
                                  int64_t seq, uint64_t oaddr, size_t nbytes, ulp_error *err);

/* 1 when the waiting links are to be made now (the batch is full). */
int ulp__writer_link_due(const ulp__writer *w);

/* Closes the datasets still waiting, unlinked, and frees the list. */
void ulp__writer_link_release(ulp__writer *w);

/* --- the kernel and GEMM trace (writer_trace.c) ----------------------------------------------- */

/* Closes the /trace objects and frees the name map. */
void ulp__writer_trace_release(ulp__writer *w);

/* --- digests (writer_digest.c) ----------------------------------------------------------- */

typedef struct ulp__digest_buf ulp__digest_buf;

/*
 * Appends the digests waiting in memory to their datasets (no flush).
 * `closing`: no more come, so a name without datasets yet gets contiguous
 * ones of its rows' size.
 */
ulp_status ulp__writer_digests_write(ulp__writer *w, int closing, ulp_error *err);

/* Closes /digests and its open datasets, and frees the buffers (what waits is lost). */
void ulp__writer_digests_release(ulp__writer *w);

/* --- kept captures (writer_digest.c) --------------------------------------------------- */

/* The next occurrence number of `name` that its kept captures leave free (0 if none). */
int64_t ulp__writer_kept_next(ulp__writer *w, const char *name);

/* 1 when the rows of `d` fit its name's `value` (its first kept dtype and row width). */
int ulp__writer_kept_fits(ulp__writer *w, const ulp__desc *d);

/* A name's state in the journal's kept records: its id (-1 before its first record) and
 * the fields its last definition gave (bytes to compare, malloc'd). */
typedef struct ulp__kept_jname {
    int64_t id;
    unsigned char *def;
    size_t def_len;
} ulp__kept_jname;

/*
 * Appends the journal record (format/journal_kept.h) of kept capture `d` as
 * the capture of seq `seq` and occurrence `occurrence`, its `rows` rows (the
 * table's `row_rank`) and `nbytes` bytes at `data`, defining its name first
 * when `jn` has no definition of these fields (writer_kept_journal.c).
 */
ulp_status ulp__writer_journal_kept(ulp__writer *w, ulp__kept_jname *jn, const ulp__desc *d,
                                    int64_t seq, int64_t occurrence, int row_rank, uint64_t rows,
                                    const void *data, size_t nbytes, ulp_error *err);

/* ulp__writer_add_kept's digests and kept rows, once they fit. */
ulp_status ulp__writer_digests_kept(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                    uint64_t rows, const void *data, size_t nbytes, ulp_error *err);

#endif /* ULPPROF_FORMAT_WRITER_INTERNAL_H */
