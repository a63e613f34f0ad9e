/*
 * Internals of the snapshot reader (snapshot*.c).  Not installed.
 *
 * The parts call each other one way only: snapshot.c (open) uses the
 * capture index (snapshot_recover.c), which uses capture reading
 * (snapshot_captures.c) and the journal (snapshot_journal.c); all of them
 * use the attribute readers, the messages and the store (snapshot_attr.c,
 * snapshot_errors.c, snapshot_store.c), which use nothing of the reader.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_PRIV_H
#define ULPPROF_FORMAT_SNAPSHOT_PRIV_H

#include <hdf5.h>
#include <stdint.h>

#include "common/error.h"
#include "index.h"
#include "index_write.h"
#include "snapshot_types.h"
#include "ulpprof/snapshot.h"

/*
 * snapshot_pages.c: the capture table made in pages, for a file whose
 * index is trusted by its stamp and read with pread(2).
 */
typedef struct ulp__lazy ulp__lazy;

/* Whether the stamped index of s, of `count` records, is made in pages:
 * opened for a stream (ulp_snapshot_open_stream), or ULPPROF_TABLE=lazy. */
int ulp__lazy_wanted(const ulp_snapshot *s, uint64_t count);

/*
 * The open's pass over the `count` records, `bytes` bytes, that lie in the
 * file's `nruns` runs (in record order): checks every record as the table
 * read whole does, keeps the first pages.  0 with *out, or -1 when a
 * record fails or memory runs out.  Reads only s->fd, s->map, s->file_size
 * and s->path: may run on another thread while the open goes on.
 */
int ulp__lazy_build(const ulp_snapshot *s, const ulp__index_mem *runs, size_t nruns, uint64_t bytes,
                    uint64_t count, ulp__lazy **out);

/* Installs `lz` as s's capture table: 1. */
int ulp__lazy_install(ulp_snapshot *s, ulp__lazy *lz);

void ulp__lazy_free(ulp__lazy *lz);

/* Capture i (< s->ncaps) of s's table in pages and where its bytes are, its
 * page made if absent; NULL when it cannot be (the file changed since the open). */
const ulp_capture_info *ulp__lazy_cap(const ulp_snapshot *s, size_t i,
                                      const ulp__capture_src **src);

/* by_name of a table in pages: every page made and kept from then on; NULL when
 * a page cannot be made. */
const size_t *ulp__lazy_by_name(const ulp_snapshot *s);

/* For tests: pages made now, and pages made after the open. */
size_t ulp__snapshot_pages_resident(const ulp_snapshot *s);
uint64_t ulp__snapshot_pages_remade(const ulp_snapshot *s);

/* Capture i of s and where its bytes are (src may be NULL); NULL when i is out of range. */
static inline const ulp_capture_info *ulp__snap_cap(const ulp_snapshot *s, size_t i,
                                                    const ulp__capture_src **src)
{
    if (i >= s->ncaps)
        return NULL;
    if (s->lazy != NULL)
        return ulp__lazy_cap(s, i, src);
    if (src != NULL)
        *src = &s->srcs[i];
    return &s->caps[i];
}

/* snapshot_store.c: keeps `p` (malloc'd) for freeing at close; returns it,
 * or NULL (and frees p) on OOM. */
char *ulp__snap_keep(ulp_snapshot *s, char *p);

/*
 * snapshot_store.c: whether `declared` bytes of a dataset cannot come from
 * this file: more than any layout could expand the file's size to.  A
 * damaged file must be refused before anything is allocated for what it
 * declares.
 */
int ulp__snapshot_absurd_bytes(const ulp_snapshot *s, uint64_t declared);

/* snapshot_errors.c: what HDF5's error stack says about a failure. */
typedef struct ulp__h5_err_info {
    char desc[256]; /* the innermost error's description */
    int truncated;  /* some entry says the file is truncated */
    int locked;     /* some entry says the file is locked */
    int nomem;      /* some entry says HDF5 found no memory */
    int seen;
} ulp__h5_err_info;

/* What HDF5 said about its last failure on this thread. */
void ulp__h5_last_error(ulp__h5_err_info *info);

/*
 * Installed as HDF5's automatic error handler while a file is validated
 * (`data` is an ulp__h5_err_info): it prints nothing, and remembers whether
 * any failure came from reading past the end of the file, so that the
 * message can say "truncated", and whether any from a lack of memory.
 */
herr_t ulp__h5_err_note(hid_t estack, void *data);

/* "'<path>': capture '<name>/<occ>': <problem>" */
ulp_status ulp__cap_error(const ulp_snapshot *s, ulp_error *err, ulp_status st, const char *name,
                          const char *occ, const char *fmt, ...) ULP__PRINTF(6, 7);

/* The message in `err` without the "'<path>': " that starts it (said once already). */
const char *ulp__snap_without_path(const ulp_snapshot *s, const ulp_error *err);

/*
 * Attribute readers.  Each returns 1 when the attribute is absent, 0 on
 * success, -1 when it exists but has a type or shape the reader cannot
 * accept (then `why` names the problem).  Strings come back malloc'd.
 */
int ulp__attr_read_str(hid_t obj, const char *name, char **out, const char **why);
int ulp__attr_read_i64(hid_t obj, const char *name, int64_t *out, const char **why);
int ulp__attr_read_u64(hid_t obj, const char *name, uint64_t *out, const char **why);
int ulp__attr_read_i64_array(hid_t obj, const char *name, int64_t *out, size_t n, const char **why);
/* A string attribute of any shape as *n malloc'd strings in a malloc'd *out. */
int ulp__attr_read_str_array(hid_t obj, const char *name, char ***out, size_t *n, const char **why);
/* The token attributes `positions`, `requests`, `inputs` of a capture (snapshot_rows.c). */
ulp_status ulp__snapshot_read_rows(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                                   ulp_capture_info *c, ulp_error *err);

/*
 * Reads every attribute of the group at `gpath` (absent: zero entries) into
 * a key-sorted array; non-string values are rendered as text.
 */
ulp_status ulp__attr_read_kv(ulp_snapshot *s, const char *gpath, ulp_kv **out, size_t *n,
                             ulp_error *err);

/* Reads /trace/gemms (absent: zero rows; snapshot_gemms.c). */
ulp_status ulp__snapshot_read_gemms(ulp_snapshot *s, ulp_error *err);

/* Reads /trace (absent: zero kernels). */
ulp_status ulp__snapshot_read_trace(ulp_snapshot *s, ulp_error *err);

/* snapshot_captures.c: captures found, before they are installed. */
typedef struct ulp__cap_entry {
    ulp_capture_info info;
    ulp__capture_src src;
} ulp__cap_entry;

typedef struct ulp__cap_vec {
    ulp__cap_entry *v;
    size_t n, cap;
} ulp__cap_vec;

/* Appends one uninitialized entry (cv->v[cv->n - 1]); -1 when out of memory. */
int ulp__cap_vec_push(ulp__cap_vec *cv);

/*
 * Reads and checks capture dataset `d`, named `name`/`occ`, into `e`
 * (strings kept by the snapshot).  The message names the capture.
 */
ulp_status ulp__capture_read(ulp_snapshot *s, hid_t d, const char *name, const char *occ,
                             ulp__cap_entry *e, ulp_error *err);

/* snapshot_record.c: what ulp__record_take() gives of one record. */
typedef struct ulp__record_out {
    ulp_capture_info *c;   /* the capture (zeroed first)                          */
    ulp__capture_src *src; /* where its bytes live                                */
    size_t name_no;        /* its name's number in the names' set                 */
    uint64_t bytes;        /* elements x dtype size                               */
    const char **inputs;   /* c->inputs, malloc'd (the caller frees), or NULL     */
    int trusted;           /* in: these bytes passed before (the positions' keys
                              are not sorted again)                              */
    const char *role;      /* in: the role of the record before (in `roles`), or
                              NULL: most records repeat it, and a strcmp(3)
                              costs less than the set's lookup                   */
} ulp__record_out;

/*
 * snapshot_record.c: decodes the capture index record at `p` (`avail`
 * bytes left) and checks it as the groups' reader checks a dataset; its
 * name and role are interned in `names` and `roles`, its positions,
 * requests and inputs point into the record.  The record's length, or 0
 * when it fails (or memory runs out).
 */
struct ulp__strset;
size_t ulp__record_take(const ulp_snapshot *s, const unsigned char *p, size_t avail,
                        struct ulp__strset *names, struct ulp__strset *roles, ulp__record_out *o);

/*
 * snapshot_index.c: the captures from the file's sealed capture index
 * (format/index.h) straight into s->caps, s->srcs, s->by_name, s->ncaps:
 * 1 read, 0 no usable index (nothing set: read the groups), -1 out of
 * memory.  `jfirst`: the journal's first block, whose closed mark the hash
 * leaves out; ULP__INDEX_NO_JOURNAL for a file without a journal.
 */
int ulp__index_read(ulp_snapshot *s, uint64_t jfirst);

/*
 * snapshot_index.c: whether the seal at `seal_off` is one the index may be
 * read from without a hash (index.h, and ULPPROF_INDEX): 1 or 0.
 */
int ulp__index_stamped_at(const ulp_snapshot *s, uint64_t seal_off);

/*
 * snapshot_index.c: the same from the seal at `seal_off` and the records'
 * `nruns` runs, as the open map gives them (no HDF5 call): 1 read, 0 when
 * the seal is not one trusted without a hash (index.h) or the runs do not
 * hold its records (nothing set), -1 out of memory.
 */
int ulp__index_read_at(ulp_snapshot *s, uint64_t seal_off, const ulp__index_mem *runs,
                       size_t nruns);

/*
 * snapshot_map.c: opens `s`, its file open (fd, size, mtime, mapping),
 * from the open map at the file's end (format/open_map.h) without HDF5:
 * 1 opened, 0 not (nothing set: the HDF5 way opens it), -1 out of memory.
 */
int ulp__snapshot_open_map(ulp_snapshot *s);

/* snapshot_index.c: how many seal hashes this process has computed (for tests). */
uint64_t ulp__index_hash_count(void);

/* snapshot_index.c: a seal hash, or a decode, an open left running (s->check). */
typedef struct ulp__index_check ulp__index_check;

/*
 * snapshot_index.c: waits for the seal's hash, or the decoding of the
 * records, that ulp__index_read() left running (s->defer_check) and frees
 * what it held: 1 when the file matched the index the captures were read
 * from, or the decoded captures are now installed, or when nothing was
 * left running; 0 when the index was stale, the hash failed or a record
 * did not decode; -1 out of memory (then, as with 0, the captures are not
 * to be used).
 */
int ulp__index_check_wait(ulp_snapshot *s);

/*
 * snapshot_copy_index.c: the capture index and open map of a copy
 * (ulp_snapshot_copy), through the index's writer (index_write.h).
 * ulp__copy_index_write() writes the records, an unsealed seal and the map
 * into the open copy `out` (0, or -1: nothing to seal);
 * ulp__copy_index_seal() seals it once the copy at `path` is closed (0, or
 * -1: left unsealed, so read through the groups).  Both leave *job empty.
 */
int ulp__copy_index_write(const ulp_snapshot *s, hid_t out, const unsigned char *in_digests,
                          ulp__index_seal_job *job);

/* Whether a copy of s has /trace: the reader read its kernels or its GEMM rows. */
static inline int ulp__copy_has_trace(const ulp_snapshot *s)
{
    return s->nkernels > 0 || s->ngemms > 0;
}

/*
 * snapshot_copy_digest_group.c: /digests of s into `out` (whole of a closed file; of a
 * killed writer's, the names every dataset of which reads whole; with `shared`, a closed
 * file's in layout packed-2) and, when s has kept
 * captures, *in_digests (malloc'd, s->ncaps flags): capture i is kept in the copy's
 * /digests.  0, or -1 when HDF5 cannot copy.
 */
int ulp__copy_digest_group(const ulp_snapshot *s, hid_t out, int shared,
                           unsigned char **in_digests);

/*
 * ulp_snapshot_copy() as a digest file's rewrite at its close makes it
 * (writer_compact.c): a closed file's packed-1 /digests written in the
 * shared layout packed-2 (`shared`), else as ulp_snapshot_copy().
 */
ulp_status ulp__snapshot_copy_as(const ulp_snapshot *s, const char *path, int shared,
                                 ulp_error *err);
int ulp__copy_index_seal(const char *path, ulp__index_seal_job *job);

/* Counts `n` more captures read, for ulp_snapshot_open_progress(). */
void ulp__open_progress_add(uint64_t n);

/* snapshot_rows.c: refuses negative positions and a repeated (request, position). */
ulp_status ulp__rows_check_keys(const ulp_snapshot *s, const ulp_capture_info *c, const char *name,
                                const char *occ, ulp_error *err);

/* Reads the captures that the /captures groups name into `cv`. */
ulp_status ulp__capture_read_groups(ulp_snapshot *s, ulp__cap_vec *cv, ulp_error *err);

/* qsort orders: ulp__cap_entry by seq; ulp_capture_info pointers by (name, occurrence). */
/*
 * snapshot_kept.c: the captures a digest-mode file keeps in /digests (FORMAT.md "Digests"),
 * read into `kv` with their bytes in (*mem)[i] (malloc'd array, the bytes kept by s); none
 * when the file has no packed /digests.  ULP_EFORMAT naming the name when they cannot be;
 * with `left` (a killed writer's file, whose /digests a kill may have torn), such a name's
 * captures are left out instead and "; ... left out (why)" added to `left`.
 */
struct ulp__strmap;
ulp_status ulp__snapshot_kept_read(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char ***mem,
                                   char *left, size_t left_size,
                                   const struct ulp__strmap *journaled, ulp_error *err);

/*
 * snapshot_kept_journal.c: the kept captures that the journal of a killed writer's file
 * (found in `js`) holds (FORMAT.md "Capture journal", kind 3), read into `jv` with their
 * bytes in (*jmem)[i] (malloc'd, the bytes kept by s), their names into `names` (a name's
 * table, torn or not, is then not needed to read them: ulp__snapshot_kept_read passes over
 * it).  Only ULP_ENOMEM fails: a record that does not parse ends the journal.
 */
struct ulp__journal_state;
ulp_status ulp__snapshot_kept_journal(ulp_snapshot *s, struct ulp__journal_state *js,
                                      ulp__cap_vec *jv, const unsigned char ***jmem,
                                      struct ulp__strmap *names, ulp_error *err);

/*
 * snapshot_kept_journal.c: the table's kept captures `kv`/`mem` and the journal's `jv`/`jmem`
 * as one set in kv/mem (both taken): of a name the journal holds, a table capture of the
 * same seq is the journal's (which then counts as in its table, src.oaddr 0); the journal's
 * others have src.oaddr ULP__KEPT_JOURNAL.
 */
ulp_status ulp__snapshot_kept_merge(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char ***mem,
                                    ulp__cap_vec *jv, const unsigned char **jmem,
                                    const struct ulp__strmap *names, ulp_error *err);

/* snapshot_kept.c: merges them into s's table (seq order, by_name, s->kept_mem); seq and
 * (name, occurrence) stay unique, or ULP_EDUPSEQ / ULP_EFORMAT. */
ulp_status ulp__snapshot_kept_install(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char **mem,
                                      ulp_error *err);

int ulp__cap_seq_cmp(const void *a, const void *b);
int ulp__cap_name_cmp(const void *a, const void *b);

/* A set of file offsets (blocks walked, heaps checked): a few dozen at most. */
typedef struct ulp__offsets {
    uint64_t *v;
    size_t n, cap;
} ulp__offsets;

/* Adds `off`: 1 added, 0 already there, -1 out of memory.  Free l->v after. */
int ulp__offsets_add(ulp__offsets *l, uint64_t off);

/*
 * Checks the global heap collections that the first `n` elements of `d`, a
 * 1-D dataset of variable-length strings, point to (snapshot_gheap.c):
 * 1 all decode, 0 one is damaged (its file offset in *bad_addr), -1 not
 * checked (a layout or filter this check does not read), -2 out of memory.
 */
int ulp__gheap_check(const ulp_snapshot *s, hid_t d, uint64_t n, uint64_t *bad_addr);

/*
 * Whether every attribute message in the object header of `obj` holds the
 * value its dataspace and datatype declare (snapshot_ohdr.c): 1 yes (or a
 * header this does not walk), 0 no (bad[bad_size] names the attribute), -2
 * out of memory.  HDF5 1.10 would read such a value from past the message.
 */
int ulp__ohdr_attrs_fit(const ulp_snapshot *s, hid_t obj, char *bad, size_t bad_size);

/* ULP_OK, or the error that an attribute of `obj` (named `where`) overruns its message. */
ulp_status ulp__attr_check_object(const ulp_snapshot *s, hid_t obj, const char *where,
                                  ulp_error *err);

/* The capture journal (format/journal.h, snapshot_journal.c). */
typedef struct ulp__journal_state {
    int found;            /* the file has a journal                        */
    int closed;           /* ... with the writer's closed mark             */
    int chain_broken;     /* the last walk met a next-block record that led
                             nowhere (blocks freed by a close, or damage)  */
    uint64_t first;       /* file offset of the first block                */
    uint64_t first_bytes; /* its size                                      */
} ulp__journal_state;

/* Looks for the journal: at /journal, else by its magic near the file's start. */
void ulp__journal_find(ulp_snapshot *s, ulp__journal_state *js);

/* Whether the journal's first block is at file offset `off` (no HDF5 call),
 * with the writer's closed mark: 1 or 0. */
int ulp__journal_closed_at(const ulp_snapshot *s, uint64_t off);

/*
 * Walks the journal that ulp__journal_find() found.  `visit` is called for
 * each capture record and kept-capture record (kinds 1 and 3), in the order written, and returns 0
 * to go on, 1 to stop, -1 when out of memory.  Fails only when out of memory: a damaged journal
 * just ends.
 */
struct ulp__journal_record;
typedef int (*ulp__journal_visit)(void *ctx, const struct ulp__journal_record *r);
ulp_status ulp__journal_walk(ulp_snapshot *s, ulp__journal_state *js, ulp__journal_visit visit,
                             void *ctx, ulp_error *err);

/*
 * snapshot_recover.c: reads every capture, checks seq, and fills s->caps,
 * s->srcs, s->by_name, from the groups or the journal (`js`, found by
 * ulp__journal_find()); `sticky` is what HDF5 said while the file was read.
 */
ulp_status ulp__snapshot_read_captures(ulp_snapshot *s, const ulp__journal_state *js,
                                       const ulp__h5_err_info *sticky, ulp_error *err);

#endif /* ULPPROF_FORMAT_SNAPSHOT_PRIV_H */
