/*
 * Opening through the capture index (format/index.h, FORMAT.md "Capture
 * index"): every capture described from one table instead of a dozen HDF5
 * calls each.
 *
 * The index is trusted only when its seal's hash matches the file as it is
 * now -- or, without computing the hash, when the file's mtime is still the
 * seal's stamp (format/index.h) -- and every record passes the checks the
 * groups' reader makes.  Any
 * doubt -- no index, an unsealed or stale one (the file was changed after
 * its writer closed it: by h5py, say), a record out of bounds -- and the
 * captures are read through the groups instead, which report what is wrong.
 * So the index can make an open faster, never different.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bigalloc.h"
#include "common/grow.h"
#include "common/strmap.h"
#include "common/strset.h"
#include "common/thread_cpu.h"
#include "index.h"
#include "index_runs.h"
#include "journal.h"
#include "snapshot_priv.h"

/* Opens 1-D uint8 dataset `path` of `n` bytes; -1 if it is not one. */
static hid_t open_bytes(const ulp_snapshot *s, const char *path, uint64_t n)
{
    if (H5Lexists(s->file, "/" ULP__INDEX_GROUP, H5P_DEFAULT) <= 0 ||
        H5Lexists(s->file, path, H5P_DEFAULT) <= 0)
        return -1;
    hid_t d = H5Dopen2(s->file, path, H5P_DEFAULT);
    if (d < 0)
        return -1;
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    hsize_t dims = 0;
    int ok = type >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 1 &&
             space >= 0 && H5Sget_simple_extent_ndims(space) == 1 &&
             H5Sget_simple_extent_dims(space, &dims, NULL) == 1 && dims == n;
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (!ok) {
        H5Dclose(d);
        return -1;
    }
    return d;
}

/* The seal's fields. */
typedef struct seal_fields {
    uint64_t off, hash, bytes, count, stamp;
} seal_fields;

/* The seal at `off`: the records' size and count; 0, or -1 when it is no valid one. */
static int seal_at(const ulp_snapshot *s, uint64_t off, seal_fields *sl)
{
    unsigned char seal[ULP__INDEX_SEAL_BYTES];
    if (off > s->file_size || s->file_size - off < sizeof seal ||
        ulp__journal_pread(s->fd, seal, sizeof seal, off) < 0 ||
        memcmp(seal, ULP__INDEX_MAGIC, 8) != 0 || ulp__le64_get(seal + 16) != s->file_size)
        return -1;
    sl->off = off;
    sl->hash = ulp__le64_get(seal + ULP__INDEX_HASH_AT);
    sl->bytes = ulp__le64_get(seal + 24);
    sl->count = ulp__le64_get(seal + 32);
    sl->stamp = ulp__le64_get(seal + ULP__INDEX_STAMP_AT);
    /* Each record takes at least its fixed part. */
    if (sl->bytes > s->file_size || sl->count > sl->bytes / ULP__INDEX_FIXED)
        return -1;
    return 0;
}

/* The seal, found through HDF5; 0, or -1 when there is no valid one. */
static int read_seal(const ulp_snapshot *s, seal_fields *sl)
{
    hid_t d = open_bytes(s, ULP__INDEX_SEAL, ULP__INDEX_SEAL_BYTES);
    if (d < 0)
        return -1;
    haddr_t a = H5Dget_offset(d);
    H5Dclose(d);
    return a == HADDR_UNDEF ? -1 : seal_at(s, (uint64_t)a, sl);
}

/* Whether the seal can be trusted without a hash: nothing wrote to the file since (index.h). */
static int seal_stamped(const ulp_snapshot *s, const seal_fields *sl, const char *env)
{
    return sl->stamp != 0 && sl->stamp == s->mtime_ns && sl->hash != 0 &&
           (env == NULL || strcmp(env, "hash") != 0);
}

/* Reads the `n` runs into their places; 0, or -1. */
static int read_runs(int fd, const ulp__index_mem *runs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ulp__journal_pread(fd, (unsigned char *)(uintptr_t)runs[i].p, (size_t)runs[i].len,
                               runs[i].off) < 0)
            return -1;
    return 0;
}

/* Points each of the `n` runs of the records at its place in `buf`. */
static void place_runs(ulp__index_mem *runs, size_t n, unsigned char *buf)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        runs[i].p = buf != NULL ? buf + at : NULL;
        at += runs[i].len;
    }
}

/*
 * The records, read whole (kept by the snapshot when used); NULL if they
 * cannot be.  Read with pread(2) from where HDF5 says they lie
 * (ulp__index_runs(); H5Dread reads each chunk into its chunk cache and
 * copies it again: 1.0-1.4 ms for the 1.8 MB of 10,000 records), those
 * runs in *runs (*nruns of them; the caller frees); in another layout
 * (compact, filtered, a chunk not written, out of the file) by H5Dread,
 * *nruns 0.
 */
static unsigned char *read_records(const ulp_snapshot *s, uint64_t bytes, ulp__index_mem **runs,
                                   size_t *nruns)
{
    *runs = NULL;
    *nruns = 0;
    unsigned char *buf = ulp__big_alloc((size_t)bytes, 0);
    if (buf == NULL || bytes == 0)
        return buf;
    hid_t d = open_bytes(s, ULP__INDEX_RECORDS, bytes);
    int direct = d >= 0 && ulp__index_runs(d, bytes, s->file_size, runs, nruns) == 0;
    if (direct) {
        place_runs(*runs, *nruns, buf);
        direct = read_runs(s->fd, *runs, *nruns) == 0;
    }
    if (!direct) {
        free(*runs);
        *runs = NULL;
        *nruns = 0;
        if (d < 0 || H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
    }
    if (d >= 0)
        H5Dclose(d);
    return buf;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The captures in (name, occurrence) order, as ulp_snapshot's by_name, in
 * O(n) after sorting the distinct names (`of`: each capture's name number):
 * the records are in seq order and the writer numbers each name's
 * occurrences in seq order.  NULL when a name's occurrences do not rise
 * (then two share one: the groups cannot hold that) or out of memory.
 */
static size_t *name_order(const ulp_capture_info *caps, size_t n, const ulp__strset *nm,
                          const size_t *of)
{
    const char **sorted = malloc((nm->n ? nm->n : 1) * sizeof *sorted);
    size_t *rank = malloc((nm->n + 1) * sizeof *rank);
    size_t *start = calloc(nm->n + 1, sizeof *start);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    int ok = sorted != NULL && rank != NULL && start != NULL && order != NULL;
    if (ok) {
        if (nm->n > 0) /* an index without a capture has no names (NULL) */
            memcpy(sorted, nm->v, nm->n * sizeof *sorted);
        qsort(sorted, nm->n, sizeof *sorted, str_cmp);
        for (size_t r = 0; r < nm->n; r++)
            rank[*ulp__strmap_find(&nm->map, sorted[r])] = r;
        for (size_t i = 0; i < n; i++)
            start[rank[of[i]] + 1]++;
        for (size_t r = 0; r < nm->n; r++)
            start[r + 1] += start[r];
        for (size_t i = 0; i < n; i++)
            order[start[rank[of[i]]]++] = i;
        for (size_t k = 1; k < n && ok; k++)
            ok = caps[order[k]].name != caps[order[k - 1]].name ||
                 caps[order[k]].occurrence > caps[order[k - 1]].occurrence;
    }
    free(sorted);
    free(rank);
    free(start);
    if (!ok) {
        free(order);
        return NULL;
    }
    return order;
}

/*
 * What decoding the records builds, before it is installed in the
 * snapshot.  Decoding touches nothing of the snapshot but what an open
 * never changes (its path and size), so it may run on a second thread
 * while the open goes on (decoder_main()).
 */
typedef struct decoded {
    ulp_capture_info *caps;
    ulp__capture_src *srcs;
    size_t *of;               /* each capture's name number */
    ulp__strset names, roles; /* the distinct strings, each copied once: one pointer per
                                 name, as the groups' reader gives, so that the sorts by
                                 name compare most pairs by pointer */
    ulp__index_range *skip;   /* the data extents, and room for two more; NULL: not wanted */
    size_t nskip;
    char **inputs; /* [ninputs] the captures' arrays of inputs */
    size_t ninputs, cap_inputs;
    size_t *order; /* by_name, once decoded */
    int in_place;  /* positions, requests or inputs point into the records */
} decoded;

/* Decodes the `count` records in `buf` into `dc`; 0, or -1 when one fails. */
static int decode_all(const ulp_snapshot *s, const unsigned char *buf, uint64_t bytes,
                      uint64_t count, decoded *dc)
{
    uint64_t at = 0;
    for (uint64_t i = 0; i < count; i++) {
        ulp_capture_info *c = &dc->caps[i];
        ulp__record_out o = {.c = c, .src = &dc->srcs[i], .role = i > 0 ? c[-1].role : NULL};
        size_t len =
            ulp__record_take(s, buf + at, (size_t)(bytes - at), &dc->names, &dc->roles, &o);
        dc->of[i] = o.name_no;
        if (o.inputs != NULL) {
            if (ULP__GROW(dc->inputs, dc->cap_inputs, dc->ninputs + 1) != 0) {
                free(o.inputs);
                return -1;
            }
            dc->inputs[dc->ninputs++] = (char *)o.inputs;
        }
        if (len == 0 || (i > 0 && c->seq <= dc->caps[i - 1].seq))
            return -1;
        at += len;
        dc->in_place |= c->rows > 0 || c->n_inputs > 0;
        if (o.src->offset != ULP__INDEX_NO_OFFSET && dc->skip != NULL)
            dc->skip[dc->nskip++] = (ulp__index_range){o.src->offset, o.bytes};
    }
    return at == bytes ? 0 : -1;
}

/* Hands the strings of t to the snapshot; 0, or -1 when out of memory. */
static int keep_strings(ulp_snapshot *s, ulp__strset *t)
{
    int rc = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (ulp__snap_keep(s, t->v[i]) == NULL)
            rc = -1; /* freed by the keep */
        t->v[i] = NULL;
    }
    t->n = 0;
    return rc;
}

static void decoded_free(decoded *dc)
{
    free(dc->caps);
    free(dc->srcs);
    free(dc->of);
    free(dc->skip);
    for (size_t i = 0; i < dc->ninputs; i++)
        free(dc->inputs[i]);
    free(dc->inputs);
    free(dc->order);
    ulp__strset_release(&dc->names, 1);
    ulp__strset_release(&dc->roles, 1);
}

/*
 * Decodes the `count` records in `buf` into *dc (with the data extents
 * when `skip`), in seq and in name order: 0, or -1 when a record fails or
 * memory runs out.  decoded_free() frees *dc either way.
 */
static int decode(const ulp_snapshot *s, const unsigned char *buf, uint64_t bytes, uint64_t count,
                  int skip, decoded *dc)
{
    size_t n = (size_t)count;
    /* Not zeroed: ulp__record_take() sets every field (zeroing 10,000
     * captures' 2.8 MB first was 7% of a diff's instructions). */
    int fits = n < SIZE_MAX / sizeof *dc->caps - 1;
    *dc = (decoded){.caps = fits ? ulp__big_alloc((n + 1) * sizeof *dc->caps, 0) : NULL,
                    .srcs = fits ? malloc((n + 1) * sizeof *dc->srcs) : NULL,
                    .of = malloc((n + 1) * sizeof *dc->of),
                    .skip = skip ? malloc((n + 2) * sizeof *dc->skip) : NULL};
    ulp__strset_init(&dc->names);
    ulp__strset_init(&dc->roles);
    if (buf == NULL || dc->caps == NULL || dc->srcs == NULL || dc->of == NULL ||
        (skip && dc->skip == NULL) || decode_all(s, buf, bytes, count, dc) != 0)
        return -1;
    dc->order = name_order(dc->caps, n, &dc->names, dc->of);
    return dc->order != NULL ? 0 : -1;
}

/*
 * Installs the captures of `dc` (decoded from the `count` records in
 * `buf`) in s, which keeps `buf` when they point into it (and frees it
 * otherwise): 1, or -1 out of memory.  Leaves dc to decoded_free().
 */
static int install(ulp_snapshot *s, decoded *dc, unsigned char *buf, uint64_t count)
{
    int rc = 1;
    if (buf == NULL || !dc->in_place)
        free(buf); /* NULL: another owner's (s->check) */
    else if (ulp__snap_keep(s, (char *)buf) == NULL)
        rc = -1; /* freed by the keep */
    /* The captures point into the strings: the snapshot keeps them. */
    if (keep_strings(s, &dc->names) < 0 || keep_strings(s, &dc->roles) < 0)
        rc = -1;
    for (size_t i = 0; i < dc->ninputs; i++)
        if (ulp__snap_keep(s, dc->inputs[i]) == NULL)
            rc = -1; /* freed by the keep */
    dc->ninputs = 0;
    if (rc == 1) {
        s->caps = dc->caps;
        s->srcs = dc->srcs;
        s->by_name = dc->order;
        s->ncaps = (size_t)count;
        dc->caps = NULL;
        dc->srcs = NULL;
        dc->order = NULL;
        ulp__open_progress_add(count);
    }
    return rc;
}

/*
 * The seal's hash, computed on a second thread while this one decodes the
 * records: the hash reads and hashes the whole file but the captures' data
 * (a 13 MB file of 10,000 captures: 3 ms), the decoding builds the captures
 * (2 ms); neither needs the other but for the ranges the hash leaves out,
 * which a light first pass over the records gives, on the hash's thread.
 * Those ranges are compared with the decoded ones before the hash is
 * believed.  The windows of the file that lie inside the records are
 * hashed from the records as read, not read again.
 */
typedef struct hasher {
    pthread_t tid;
    int fd;
    uint64_t size;
    const unsigned char *buf; /* the records: `bytes` bytes, `count` records */
    uint64_t bytes, count, seal_off, jfirst;
    ulp__index_mem *mem; /* [nmem] where the records lie in the file, by offset */
    size_t nmem;
    ulp__index_range *ranges; /* [n] left out, in record order; sorted by the hash */
    size_t n;
    int rc;
    uint64_t hash;
} hasher;

/* Files with fewer captures are hashed on the calling thread: a thread costs more. */
#define HASH_THREAD_MIN 1024

static uint64_t g_hashes; /* ulp__index_hash_count() */

uint64_t ulp__index_hash_count(void)
{
    return __atomic_load_n(&g_hashes, __ATOMIC_RELAXED);
}

static void *hasher_main(void *arg)
{
    hasher *h = arg;
    h->rc = -1;
    __atomic_fetch_add(&g_hashes, 1, __ATOMIC_RELAXED);
    uint64_t at = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        uint64_t off, nbytes;
        size_t len = ulp__index_record_extent(h->buf + at, (size_t)(h->bytes - at), &off, &nbytes);
        if (len == 0)
            return NULL;
        at += len;
        if (off != ULP__INDEX_NO_OFFSET)
            h->ranges[h->n++] = (ulp__index_range){off, nbytes};
    }
    h->n = ulp__index_add_unhashed(h->ranges, h->n, h->seal_off, h->jfirst);
    h->rc = ulp__index_hash_file_mem(h->fd, h->size, h->ranges, h->n, h->mem, h->nmem, &h->hash);
    return NULL;
}

static int mem_cmp(const void *a, const void *b)
{
    const ulp__index_mem *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/*
 * Starts the hash of s on the records in `buf`, which were read from the
 * `nruns` runs (none: by H5Dread; sorted by offset): 0, or -1 (nothing
 * started).
 */
static int hasher_start(hasher *h, const ulp_snapshot *s, const unsigned char *buf, uint64_t bytes,
                        uint64_t count, uint64_t seal_off, uint64_t jfirst, ulp__index_mem *runs,
                        size_t nruns)
{
    *h = (hasher){.fd = s->fd,
                  .size = s->file_size,
                  .buf = buf,
                  .bytes = bytes,
                  .count = count,
                  .seal_off = seal_off,
                  .jfirst = jfirst,
                  .mem = runs,
                  .nmem = nruns};
    if (count < HASH_THREAD_MIN || (h->ranges = malloc((count + 2) * sizeof *h->ranges)) == NULL)
        return -1;
    if (pthread_create(&h->tid, NULL, hasher_main, h) != 0) {
        free(h->ranges);
        return -1;
    }
    return 0;
}

/*
 * Waits for the hash: 0 with *hash when it was computed over exactly the
 * ranges skip[0..n) (in record order; sorted here as the hash sorted its
 * own, so that equal lists compare equal).
 */
static int hasher_join(hasher *h, ulp__index_range *skip, size_t n, uint64_t *hash)
{
    pthread_join(h->tid, NULL);
    int ok = h->rc == 0 && n == h->n;
    if (ok) {
        ulp__index_ranges_sort(skip, n);
        ok = memcmp(skip, h->ranges, n * sizeof *skip) == 0;
    }
    *hash = h->hash;
    free(h->ranges);
    return ok ? 0 : -1;
}

/*
 * What an open that did not wait (ulp_snapshot_open_deferred) left
 * running: the seal's hash (the captures are installed, maybe stale), or,
 * when the seal needs no hash (stamped), the records' decode (nothing is
 * installed until it ends).  Either reads `buf` until joined.
 */
struct ulp__index_check {
    int decoding; /* a decode, not a hash */
    /* The hash: */
    hasher h;
    uint64_t want;          /* the seal's hash */
    ulp__index_range *skip; /* [nskip] the decoded records' ranges */
    size_t nskip;
    int in_place;
    ulp__index_mem *runs;
    /* Both: the records, which the captures point into if in_place. */
    unsigned char *buf;
    size_t nruns; /* the decode reads `runs` first when not 0 */
    /* The decode: */
    pthread_t tid;
    const ulp_snapshot *s;
    uint64_t bytes, count;
    decoded dc;
    int rc;
    int claimed;    /* who decodes: 0 nobody yet, 1 the thread, 2 the waiter */
    int lazy;       /* the pass of a table in pages (into lz), not a decode */
    int opener_cpu; /* where the opening thread ran when it started the decode */
    ulp__lazy *lz;
};

/* Files with fewer captures are decoded during the open: a thread costs more. */
#define DECODE_THREAD_MIN 1024

/*
 * Reads and decodes, on whichever thread claims the job first: the
 * decode thread, or the one that waits for it when the thread has not
 * started yet (a loaded machine: the waiter would only wait).
 */
static void decoder_run(ulp__index_check *c, int who)
{
    int nobody = 0;
    if (!__atomic_compare_exchange_n(&c->claimed, &nobody, who, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    if (c->lazy)
        c->rc = ulp__lazy_build(c->s, c->runs, c->nruns, c->bytes, c->count, &c->lz);
    else
        c->rc = c->nruns > 0 && read_runs(c->s->fd, c->runs, c->nruns) < 0
                    ? -1
                    : decode(c->s, c->buf, c->bytes, c->count, 0, &c->dc);
}

static void *decoder_main(void *arg)
{
    /* The opening thread goes on with B on its CPU (thread_cpu.h). */
    ulp__thread_leave_cpu(((ulp__index_check *)arg)->opener_cpu);
    decoder_run(arg, 1);
    return NULL;
}

/* Decodes left to a thread and not yet waited for, in this process. */
static int g_decodes;

/*
 * Whether a decode thread is likely to get a core at once: the 1-minute
 * load average is below the number of cores (ULPPROF_INDEX=thread: always).
 * On a busy machine a new thread waits for a core while the opening thread
 * would have decoded the file itself: on 2 cores at load 4, ulpprof diff's
 * opens took 5.2 ms (median of 150) with the thread, 4.4 ms without.
 */
static int cores_free(void)
{
    const char *env = getenv("ULPPROF_INDEX");
    if (env != NULL && strcmp(env, "thread") == 0)
        return 1;
    double load = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return getloadavg(&load, 1) == 1 && cores > 1 && load < (double)cores;
}

/*
 * Starts reading the `nruns` runs into `buf` and decoding its `count`
 * records on a second thread, left to s->check, which owns `buf` and `runs`
 * from then on: 0, or -1 (nothing started).  One such thread at a time:
 * ulpprof diff decodes A there while it opens and decodes B itself.
 */
static int decoder_start(ulp_snapshot *s, unsigned char *buf, uint64_t bytes, uint64_t count,
                         ulp__index_mem *runs, size_t nruns, int lazy)
{
    if (!cores_free())
        return -1;
    if (__atomic_fetch_add(&g_decodes, 1, __ATOMIC_ACQ_REL) != 0) {
        __atomic_fetch_sub(&g_decodes, 1, __ATOMIC_ACQ_REL);
        return -1;
    }
    ulp__index_check *c = calloc(1, sizeof *c);
    if (c == NULL) {
        __atomic_fetch_sub(&g_decodes, 1, __ATOMIC_ACQ_REL);
        return -1;
    }
    *c = (ulp__index_check){.decoding = 1,
                            .buf = buf,
                            .runs = runs,
                            .nruns = nruns,
                            .s = s,
                            .bytes = bytes,
                            .count = count,
                            .lazy = lazy,
                            .opener_cpu = ulp__thread_cpu()};
    if (pthread_create(&c->tid, NULL, decoder_main, c) != 0) {
        free(c);
        __atomic_fetch_sub(&g_decodes, 1, __ATOMIC_ACQ_REL);
        return -1;
    }
    s->check = c;
    return 0;
}

int ulp__index_check_wait(ulp_snapshot *s)
{
    ulp__index_check *c = s->check;
    if (c == NULL)
        return 1;
    s->check = NULL;
    int rc;
    if (c->decoding) {
        decoder_run(c, 2);
        pthread_join(c->tid, NULL);
        __atomic_fetch_sub(&g_decodes, 1, __ATOMIC_ACQ_REL);
        if (c->lazy) {
            rc = c->rc == 0 ? ulp__lazy_install(s, c->lz) : 0;
        } else if (c->rc == 0) {
            rc = install(s, &c->dc, c->buf, c->count);
        } else {
            rc = 0; /* opened again the sure way, which reads the groups */
            free(c->buf);
        }
        decoded_free(&c->dc);
        free(c->runs);
        free(c);
        return rc;
    }
    uint64_t now = 0;
    rc = hasher_join(&c->h, c->skip, c->nskip, &now) == 0 && now == c->want;
    /* The records stay only where captures point into them. */
    if (c->in_place) {
        if (ulp__snap_keep(s, (char *)c->buf) == NULL)
            rc = -1; /* freed by the keep */
    } else {
        free(c->buf);
    }
    free(c->skip);
    free(c->runs);
    free(c);
    return rc;
}

/*
 * The captures from the `count` records in `buf`, checked by the seal's
 * hash: computed on a second thread while this one decodes (left running,
 * to s->check, by a deferred open), or here.  ulp__index_read()'s result;
 * `buf` and `runs` are taken (freed or kept).
 */
static int read_hashed(ulp_snapshot *s, const seal_fields *sl, uint64_t jfirst, unsigned char *buf,
                       ulp__index_mem *runs, size_t nruns)
{
    uint64_t now = 0;
    int used = 0;
    hasher hs;
    if (nruns > 1) /* the hash takes the windows it holds in file order */
        qsort(runs, nruns, sizeof *runs, mem_cmp);
    /* An open that does not wait for the hash leaves it to s->check. */
    ulp__index_check *chk = s->defer_check ? calloc(1, sizeof *chk) : NULL;
    hasher *hp = chk != NULL ? &chk->h : &hs;
    int threaded = buf != NULL && hasher_start(hp, s, buf, sl->bytes, sl->count, sl->off, jfirst,
                                               runs, nruns) == 0;
    decoded dc;
    /* The hash takes longest: the captures' memory is made while it runs (0.5 ms). */
    if (decode(s, buf, sl->bytes, sl->count, 1, &dc) == 0) {
        dc.nskip = ulp__index_add_unhashed(dc.skip, dc.nskip, sl->off, jfirst);
        if (threaded && chk != NULL) {
            threaded = 0;
            /* chk->h is the running hash's: only the other fields are set. */
            chk->want = sl->hash;
            chk->skip = dc.skip;
            chk->nskip = dc.nskip;
            chk->buf = buf;
            chk->in_place = dc.in_place;
            chk->runs = runs;
            s->check = chk; /* waited for by ulp_snapshot_confirm() or the close */
            dc.skip = NULL;
            buf = NULL;
            runs = NULL;
            chk = NULL;
            used = 1;
        } else if (threaded) {
            threaded = 0;
            used = hasher_join(hp, dc.skip, dc.nskip, &now) == 0 && now == sl->hash;
        } else {
            __atomic_fetch_add(&g_hashes, 1, __ATOMIC_RELAXED);
            used = ulp__index_hash_file_mem(s->fd, s->file_size, dc.skip, dc.nskip, runs, nruns,
                                            &now) == 0 &&
                   now == sl->hash;
        }
    }
    if (threaded)
        hasher_join(hp, dc.skip, 0, &now); /* the records did not decode: not used */
    free(chk);
    if (used)
        used = install(s, &dc, buf, sl->count); /* buf NULL: left to s->check */
    else
        free(buf);
    free(runs);
    decoded_free(&dc);
    return used;
}

/*
 * The records of a stamped seal `sl` from their `nruns` runs (taken: kept
 * or freed): as a table made in pages where ulp__lazy_wanted(), else
 * whole.  A deferred open of many leaves the reads and the decode to a
 * second thread (s->check), which ulp_snapshot_confirm() waits for and
 * installs.  What ulp__index_read() returns.
 */
static int read_stamped(ulp_snapshot *s, const seal_fields *sl, ulp__index_mem *runs, size_t nruns)
{
    int thread = s->defer_check && sl->count >= DECODE_THREAD_MIN;
    if (ulp__lazy_wanted(s, sl->count)) {
        place_runs(runs, nruns, NULL);
        if (thread && decoder_start(s, NULL, sl->bytes, sl->count, runs, nruns, 1) == 0)
            return 1;
        ulp__lazy *lz = NULL;
        int rc = ulp__lazy_build(s, runs, nruns, sl->bytes, sl->count, &lz);
        free(runs);
        return rc == 0 ? ulp__lazy_install(s, lz) : 0;
    }
    unsigned char *buf = ulp__big_alloc((size_t)sl->bytes, 0);
    if (buf == NULL) {
        free(runs);
        return 0;
    }
    place_runs(runs, nruns, buf);
    if (thread && decoder_start(s, buf, sl->bytes, sl->count, runs, nruns, 0) == 0)
        return 1;
    int ok = read_runs(s->fd, runs, nruns) == 0;
    free(runs);
    decoded dc;
    int used = ok && decode(s, buf, sl->bytes, sl->count, 0, &dc) == 0
                   ? install(s, &dc, buf, sl->count)
                   : (free(buf), 0);
    if (ok)
        decoded_free(&dc);
    return used;
}

/* ULPPROF_INDEX: "0" leaves the index out; the index is read only on little-endian machines. */
static int index_usable(const char *env)
{
    if (env != NULL && strcmp(env, "0") == 0)
        return 0;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return 0; /* positions are used in place */
#else
    return 1;
#endif
}

int ulp__index_read(ulp_snapshot *s, uint64_t jfirst)
{
    const char *env = getenv("ULPPROF_INDEX");
    seal_fields sl;
    if (!index_usable(env) || read_seal(s, &sl) < 0)
        return 0;
    int stamped = seal_stamped(s, &sl, env);
    if (stamped && sl.bytes > 0) {
        ulp__index_mem *runs = NULL;
        size_t nruns = 0;
        hid_t d = open_bytes(s, ULP__INDEX_RECORDS, sl.bytes);
        int found = d >= 0 && ulp__index_runs(d, sl.bytes, s->file_size, &runs, &nruns) == 0;
        if (d >= 0)
            H5Dclose(d);
        if (found)
            return read_stamped(s, &sl, runs, nruns);
    }
    /* Unstamped (hashed), or records that H5Dread reads. */
    ulp__index_mem *runs;
    size_t nruns;
    unsigned char *buf = read_records(s, sl.bytes, &runs, &nruns);
    if (!stamped)
        return read_hashed(s, &sl, jfirst, buf, runs, nruns);
    free(runs);
    if (buf == NULL)
        return 0;
    decoded dc;
    int used = decode(s, buf, sl.bytes, sl.count, 0, &dc) == 0 ? install(s, &dc, buf, sl.count)
                                                               : (free(buf), 0);
    decoded_free(&dc);
    return used;
}

/* The seal at `seal_off`, if it is one trusted without a hash (and ULPPROF_INDEX allows the index).
 */
static int trusted_seal_at(const ulp_snapshot *s, uint64_t seal_off, seal_fields *sl)
{
    const char *env = getenv("ULPPROF_INDEX");
    return index_usable(env) && seal_at(s, seal_off, sl) == 0 && seal_stamped(s, sl, env);
}

int ulp__index_stamped_at(const ulp_snapshot *s, uint64_t seal_off)
{
    seal_fields sl;
    return trusted_seal_at(s, seal_off, &sl);
}

int ulp__index_read_at(ulp_snapshot *s, uint64_t seal_off, const ulp__index_mem *runs, size_t nruns)
{
    seal_fields sl;
    if (!trusted_seal_at(s, seal_off, &sl))
        return 0;
    uint64_t total = 0;
    for (size_t i = 0; i < nruns; i++) {
        if (runs[i].off > s->file_size || s->file_size - runs[i].off < runs[i].len ||
            runs[i].len > sl.bytes - total)
            return 0;
        total += runs[i].len;
    }
    ulp__index_mem *mine = malloc((nruns ? nruns : 1) * sizeof *mine);
    if (total != sl.bytes || mine == NULL) {
        free(mine);
        return 0;
    }
    memcpy(mine, runs, nruns * sizeof *mine);
    return read_stamped(s, &sl, mine, nruns);
}
