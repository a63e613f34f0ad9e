/*
 * The capture table made in pages: the open of a snapshot of
 * 100,000 captures peaked with its whole table -- the index records (377 B
 * a capture) and the decoded ulp_capture_info (293 B) -- and kept the
 * latter to the close.  A table in
 * pages holds, for a file whose capture index is trusted by its stamp and
 * read with pread(2), only what is O(pages) or O(names): each page's first
 * byte in the records, the distinct names and roles (one pointer each for
 * the snapshot's life: pairing compares names by pointer) and the
 * per-name summary (snapshot_summary.h).  A page -- its records and their
 * decoded captures -- is made when a capture of it is asked for, and let
 * go by ulp__snapshot_trim().
 *
 * The open still checks every record exactly as the table read whole does
 * (ulp__record_take()), in one pass over windows of the records; a record
 * that fails sends the open to the groups, as before.  The first pages
 * that pass made stay (LAZY_KEEP_BYTES).  A page made again reads the
 * bytes the open checked while the file's stamp holds; after a touch(1),
 * it is checked again and must give the open's fingerprint (page_make()).
 *
 * Threads: page pointers live in a slot array allocated at open and never
 * moved; readers load them atomically, and a page absent is made under a
 * mutex.  Trim runs only where no other thread uses the pages it frees.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/le.h"
#include "common/strmap.h"
#include "common/strset.h"
#include "index.h"
#include "journal.h"
#include "snapshot_priv.h"
#include "snapshot_summary.h"

/*
 * Stamped files with at least this many captures get a table in pages
 * unless ULPPROF_TABLE says which (=eager, =lazy).  Each capture is then
 * decoded twice (the open's pass, the page): at 10,000 captures pages
 * would cost 0.3-0.4 ms of CPU a file (bench_pages: open + walk 1.3-1.5 ms
 * against 1.0-1.2) to save 4.7 MiB of the diff's 18.9; at 20,000 the diff
 * takes 22.0 ms in pages against 19.9 and 15.0 MiB against 26.2; at
 * 100,000, 81.5 against 79.0 ms and 15.2 against 89.8 MiB
 * (docs/performance.md, "Memory").  Read whole, the diff's peak grows about 1.25 KiB a capture
 * (its arrays end on whole huge pages): 28.7 MiB at 16,000, too near the
 * 32 MiB a diff's peak is held to; from 12,288 on, pages.
 */
#define LAZY_MIN ((uint64_t)12288)
/*
 * A page holds about this many bytes of records (and 0.8 times that of
 * decoded captures), 2^6-2^12 captures.  Small pages are decoded again in
 * the cache: bench_pages on 100,000 captures, open + walk, 12.5 ms of CPU
 * with 128 KiB, 15.3 with 512 KiB (and 3 MiB more for the diff).
 */
#define PAGE_BYTES    ((uint64_t)128 << 10)
#define PAGE_CAPS_MIN 64
#define PAGE_CAPS_MAX 4096
/* The open's pass reads the records this many bytes at a time. */
#define WINDOW ((uint64_t)256 << 10)
/* Pages let go that are kept for the next ones made: fresh memory costs a
 * fault a 4 KiB page, 1.4 ms of the 20,000-capture diff's 30 ms. */
#define SPARES 2
/*
 * The first pages the open made stay while their records take at most
 * this: with tiny pages, a few.  A page kept needs fresh arrays where a
 * page made again reuses a spare's: keeping 1 MiB of records cost more
 * than decoding them again (bench_pages, 20,000 captures: 3.6 ms against
 * 2.6 for open + walk).
 */
#define LAZY_KEEP_BYTES ((uint64_t)128 << 10)

/* Where bytes [at, at + len) of the records lie in the file. */
typedef struct seg {
    uint64_t at, off, len;
} seg;

typedef struct page {
    ulp_capture_info *caps; /* [n]; inputs malloc'd where n_inputs > 0     */
    ulp__capture_src *srcs; /* [n]                                         */
    unsigned char *rec;     /* the page's records when positions, requests
                               or inputs point into them, else NULL        */
    size_t n;               /* captures decoded                            */
    int in_place;           /* some capture points into the records        */
} page;

struct ulp__lazy {
    pthread_mutex_t lock;
    unsigned shift; /* a page holds 1 << shift captures */
    size_t ncaps, npages;
    page **slots;      /* [npages], atomic pointers; NULL: not made */
    uint64_t *page_at; /* [npages + 1] each page's first byte in the records */
    uint64_t *page_fp; /* [npages] each page's fingerprint (page_decode())    */
    seg *segs;         /* [nsegs] the records in the file, in record order  */
    size_t nsegs;
    ulp__strset names, roles;
    size_t low;          /* pages below it are not made (trim's start)     */
    size_t resident;     /* pages made (atomic)                            */
    uint64_t remade;     /* pages made after the open (atomic)             */
    int pinned;          /* every page made and kept: by_name is built     */
    size_t *by_name;     /* when pinned (atomic pointer)                   */
    size_t *rank;        /* [names] each name number's place in sum.names  */
    page *spare[SPARES]; /* pages let go, their arrays kept for reuse      */
    size_t nspare;
    unsigned char *scratch; /* page_make()'s records when no capture points in */
    size_t scratch_cap;
    ulp__name_summary *name_sums;
    ulp__snapshot_summary sum;
};

static size_t page_count(const ulp__lazy *lz, size_t p)
{
    size_t first = p << lz->shift, n = (size_t)1 << lz->shift;
    return lz->ncaps - first < n ? lz->ncaps - first : n;
}

static page *page_new(size_t n)
{
    page *pg = calloc(1, sizeof *pg);
    if (pg == NULL)
        return NULL;
    pg->caps = malloc((n ? n : 1) * sizeof *pg->caps);
    pg->srcs = malloc((n ? n : 1) * sizeof *pg->srcs);
    if (pg->caps == NULL || pg->srcs == NULL) {
        free(pg->caps);
        free(pg->srcs);
        free(pg);
        return NULL;
    }
    return pg;
}

/* Frees what the decoded captures hold (their inputs), keeping the arrays. */
static void page_clear(page *pg)
{
    for (size_t k = 0; k < pg->n; k++)
        if (pg->caps[k].n_inputs > 0)
            free((void *)(uintptr_t)pg->caps[k].inputs);
    pg->n = 0;
}

static void page_free(page *pg)
{
    if (pg == NULL)
        return;
    page_clear(pg);
    free(pg->caps);
    free(pg->srcs);
    free(pg->rec);
    free(pg);
}

/* Reads records bytes [at, at + n) into dst; 0, or -1. */
static int records_read(const ulp__lazy *lz, int fd, unsigned char *dst, uint64_t at, uint64_t n)
{
    size_t lo = 0, hi = lz->nsegs;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (lz->segs[mid].at <= at)
            lo = mid;
        else
            hi = mid;
    }
    for (size_t k = lo; n > 0 && k < lz->nsegs; k++) {
        const seg *g = &lz->segs[k];
        if (at < g->at || at - g->at >= g->len)
            return -1;
        uint64_t in = at - g->at, take = g->len - in < n ? g->len - in : n;
        if (ulp__journal_pread(fd, dst, (size_t)take, g->off + in) < 0)
            return -1;
        dst += take;
        at += take;
        n -= take;
    }
    return n == 0 ? 0 : -1;
}

/* What the open's pass adds up, per name number. */
typedef struct scan {
    ulp__name_summary *acc;
    int64_t *last; /* each name's last occurrence */
    size_t n, cap;
    int64_t last_seq;
    uint64_t seen;
} scan;

static int scan_add(const ulp_snapshot *s, ulp__lazy *lz, scan *sc, const ulp_capture_info *c,
                    const ulp__capture_src *src, size_t no, uint64_t bytes)
{
    if (no >= sc->n) {
        if (no >= sc->cap) {
            size_t cap = 2 * no + 16;
            ulp__name_summary *a = realloc(sc->acc, cap * sizeof *a);
            if (a != NULL)
                sc->acc = a;
            int64_t *l = a != NULL ? realloc(sc->last, cap * sizeof *l) : NULL;
            if (l == NULL)
                return -1;
            sc->last = l;
            sc->cap = cap;
        }
        for (; sc->n <= no; sc->n++)
            sc->acc[sc->n] = (ulp__name_summary){.name = NULL, .count = 0};
    }
    ulp__name_summary *ns = &sc->acc[no];
    /* Two captures of a name with one occurrence: the groups cannot hold that. */
    if (ns->count > 0 && c->occurrence <= sc->last[no])
        return -1;
    sc->last[no] = c->occurrence;
    /* As ulp__snapshot_mapped(s, i, 0) != NULL: the page is not installed yet. */
    uint64_t esize = ulp_dtype_size(c->dtype);
    int mapped = s->map != NULL && src->offset != ULP__NO_OFFSET && esize != 0 &&
                 src->offset % esize == 0 && src->offset <= s->file_size;
    ulp__summary_add(&lz->sum, ns, c, (size_t)sc->seen++, bytes, mapped);
    return 0;
}

/* Adds v to the fingerprint h (FNV-1a over words). */
static uint64_t fp_add(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3u;
}

/*
 * Decodes the `n` records in rec[0..bytes) into pg, checked (but for the
 * positions' keys when `trusted`); with `sc` (the open's pass) the summary
 * adds them up.  *fp: a fingerprint of what was decoded (each capture's
 * seq, occurrence, name, place and size).  0, or -1.
 */
static int page_decode(const ulp_snapshot *s, ulp__lazy *lz, page *pg, const unsigned char *rec,
                       uint64_t bytes, size_t n, scan *sc, int trusted, uint64_t *fp)
{
    uint64_t at = 0, h = 0xcbf29ce484222325u;
    pg->n = 0;
    pg->in_place = 0;
    for (size_t k = 0; k < n; k++) {
        ulp__record_out o = {.c = &pg->caps[k],
                             .src = &pg->srcs[k],
                             .trusted = trusted,
                             .role = k > 0 ? pg->caps[k - 1].role : NULL};
        size_t len =
            ulp__record_take(s, rec + at, (size_t)(bytes - at), &lz->names, &lz->roles, &o);
        if (len == 0)
            return -1;
        pg->n++;
        pg->in_place |= pg->caps[k].rows > 0 || pg->caps[k].n_inputs > 0;
        at += len;
        int64_t seq = pg->caps[k].seq;
        if (sc != NULL || !trusted) /* two words: each mix costs a multiply's latency */
            h = fp_add(
                fp_add(h, (uint64_t)seq + 0x9E3779B97F4A7C15u * (uint64_t)pg->caps[k].occurrence),
                o.src->offset ^ (o.src->oaddr << 1) ^ (o.bytes << 7) ^ ((uint64_t)o.name_no << 40));
        if ((k > 0 && seq <= pg->caps[k - 1].seq) ||
            (sc != NULL && sc->seen > 0 && k == 0 && seq <= sc->last_seq))
            return -1;
        if (sc != NULL && scan_add(s, lz, sc, &pg->caps[k], &pg->srcs[k], o.name_no, o.bytes) < 0)
            return -1;
    }
    if (sc != NULL && n > 0)
        sc->last_seq = pg->caps[n - 1].seq;
    *fp = h;
    return at == bytes ? 0 : -1;
}

/* The records as the open's pass reads them: bytes [beg, end) in buf. */
typedef struct stream {
    unsigned char *buf;
    size_t cap;
    uint64_t beg, end, bytes;
} stream;

static int stream_ensure(const ulp__lazy *lz, int fd, stream *st, uint64_t upto)
{
    if (upto > st->bytes)
        return -1;
    if (upto <= st->end)
        return 0;
    uint64_t want = upto - st->end;
    if (want < WINDOW)
        want = st->bytes - st->end < WINDOW ? st->bytes - st->end : WINDOW;
    uint64_t need = st->end - st->beg + want;
    if (need > st->cap) {
        size_t cap = need > 2 * (uint64_t)st->cap ? (size_t)need : 2 * st->cap;
        unsigned char *b = realloc(st->buf, cap);
        if (b == NULL)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    if (records_read(lz, fd, st->buf + (st->end - st->beg), st->end, want) < 0)
        return -1;
    st->end += want;
    return 0;
}

/*
 * Moves the stream past the page that ends at `end`: the bytes after it go
 * to the buffer's start, or, with `take`, the page takes the buffer (its
 * captures point into it) and they go to a new one.  0, or -1.
 */
static int stream_next(stream *st, uint64_t end, unsigned char **take)
{
    size_t tail = (size_t)(st->end - end);
    if (take == NULL) {
        memmove(st->buf, st->buf + (end - st->beg), tail);
    } else {
        size_t cap = tail > WINDOW ? tail : (size_t)WINDOW;
        unsigned char *b = malloc(cap);
        if (b == NULL)
            return -1;
        memcpy(b, st->buf + (end - st->beg), tail);
        *take = st->buf;
        st->buf = b;
        st->cap = cap;
    }
    st->beg = end;
    return 0;
}

/* log2 of the captures a page holds: ULPPROF_TABLE_PAGE (tests), else PAGE_BYTES' worth. */
static unsigned page_shift(uint64_t count, uint64_t bytes)
{
    const char *env = getenv("ULPPROF_TABLE_PAGE");
    uint64_t want = env != NULL ? strtoull(env, NULL, 10) : 0;
    if (want > count) /* no page larger than the file */
        want = count;
    if (want == 0) {
        uint64_t avg = count > 0 ? bytes / count : 1;
        want = PAGE_BYTES / (avg ? avg : 1);
        want = want < PAGE_CAPS_MIN ? PAGE_CAPS_MIN : want > PAGE_CAPS_MAX ? PAGE_CAPS_MAX : want;
    }
    unsigned shift = 0;
    while (((uint64_t)1 << shift) < want && shift < 30)
        shift++;
    return shift;
}

int ulp__lazy_wanted(const ulp_snapshot *s, uint64_t count)
{
    if (s->has_kept)
        return 0; /* captures kept in /digests join the table: it is made whole */
    const char *env = getenv("ULPPROF_TABLE");
    if (env != NULL && strcmp(env, "eager") == 0)
        return 0;
    if (env != NULL && strcmp(env, "lazy") == 0)
        return count > 0;
    return s->stream && count >= LAZY_MIN;
}

void ulp__lazy_free(ulp__lazy *lz)
{
    if (lz == NULL)
        return;
    for (size_t p = 0; lz->slots != NULL && p < lz->npages; p++)
        page_free(lz->slots[p]);
    for (size_t k = 0; k < lz->nspare; k++)
        page_free(lz->spare[k]);
    free(lz->scratch);
    pthread_mutex_destroy(&lz->lock);
    free(lz->slots);
    free(lz->page_at);
    free(lz->page_fp);
    free(lz->segs);
    free(lz->by_name);
    free(lz->rank);
    free(lz->name_sums);
    ulp__strset_release(&lz->names, 1);
    ulp__strset_release(&lz->roles, 1);
    free(lz);
}

static ulp__lazy *lazy_new(const ulp__index_mem *runs, size_t nruns, uint64_t bytes, uint64_t count)
{
    ulp__lazy *lz = calloc(1, sizeof *lz);
    if (lz == NULL)
        return NULL;
    ulp__strset_init(&lz->names);
    ulp__strset_init(&lz->roles);
    if (pthread_mutex_init(&lz->lock, NULL) != 0) {
        ulp__strset_release(&lz->names, 1);
        ulp__strset_release(&lz->roles, 1);
        free(lz);
        return NULL;
    }
    lz->shift = page_shift(count, bytes);
    lz->ncaps = (size_t)count;
    lz->npages = (size_t)((count + ((uint64_t)1 << lz->shift) - 1) >> lz->shift);
    lz->slots = calloc(lz->npages + 1, sizeof *lz->slots);
    lz->page_at = calloc(lz->npages + 1, sizeof *lz->page_at);
    lz->page_fp = calloc(lz->npages + 1, sizeof *lz->page_fp);
    lz->segs = malloc((nruns ? nruns : 1) * sizeof *lz->segs);
    if (lz->slots == NULL || lz->page_at == NULL || lz->page_fp == NULL || lz->segs == NULL) {
        ulp__lazy_free(lz);
        return NULL;
    }
    uint64_t at = 0;
    for (size_t k = 0; k < nruns; k++) {
        lz->segs[k] = (seg){at, runs[k].off, runs[k].len};
        at += runs[k].len;
    }
    lz->nsegs = nruns;
    lz->sum.largest_mapped = lz->ncaps;
    return lz;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The summary's names, sorted, from the pass's sums. */
static int lazy_summary(ulp__lazy *lz, scan *sc)
{
    size_t n = sc->n;
    const char **order = malloc((n ? n : 1) * sizeof *order);
    lz->rank = malloc((n ? n : 1) * sizeof *lz->rank);
    lz->name_sums = malloc((n ? n : 1) * sizeof *lz->name_sums);
    if (order == NULL || lz->rank == NULL || lz->name_sums == NULL) {
        free(order);
        return -1;
    }
    memcpy(order, lz->names.v, n * sizeof *order);
    qsort(order, n, sizeof *order, str_cmp);
    for (size_t r = 0; r < n; r++) {
        size_t k = (size_t)*ulp__strmap_find(&lz->names.map, order[r]);
        lz->rank[k] = r;
        lz->name_sums[r] = sc->acc[k];
        lz->name_sums[r].name = lz->names.v[k];
    }
    free(order);
    lz->sum.names = lz->name_sums;
    lz->sum.nnames = n;
    return 0;
}

/*
 * The open's pass over the records: page by page, the page's records read
 * (lengths first, so that the page lies whole in the buffer), then decoded
 * and checked.  0, or -1 when a record fails or memory runs out.
 */
static int lazy_pass(const ulp_snapshot *s, ulp__lazy *lz, uint64_t bytes, scan *sc)
{
    stream st = {.bytes = bytes};
    page *pg = NULL;
    uint64_t at = 0, kept = 0;
    int rc = -1;
    for (size_t p = 0; p < lz->npages; p++) {
        size_t n = page_count(lz, p);
        if (pg == NULL && (pg = page_new((size_t)1 << lz->shift)) == NULL)
            goto done;
        lz->page_at[p] = at;
        uint64_t end = at;
        for (size_t k = 0; k < n; k++) {
            if (stream_ensure(lz, s->fd, &st, end + 4) < 0)
                goto done;
            uint32_t len = ulp__le32_get(st.buf + (end - st.beg));
            if (len < ULP__INDEX_FIXED || len % 8 != 0 || len > bytes - end)
                goto done;
            end += len;
        }
        if (stream_ensure(lz, s->fd, &st, end) < 0 ||
            page_decode(s, lz, pg, st.buf, end - at, n, sc, 0, &lz->page_fp[p]) < 0)
            goto done;
        unsigned char **take = NULL;
        if (kept + (end - at) > LAZY_KEEP_BYTES) {
            page_clear(pg);
        } else {
            kept += end - at;
            take = pg->in_place ? &pg->rec : NULL;
            lz->slots[p] = pg;
            lz->resident++;
            pg = NULL;
        }
        if (stream_next(&st, end, take) < 0)
            goto done;
        at = end;
    }
    lz->page_at[lz->npages] = at;
    rc = at == bytes ? lazy_summary(lz, sc) : -1;
done:
    page_free(pg);
    free(st.buf);
    return rc;
}

int ulp__lazy_build(const ulp_snapshot *s, const ulp__index_mem *runs, size_t nruns, uint64_t bytes,
                    uint64_t count, ulp__lazy **out)
{
    *out = NULL;
    ulp__lazy *lz = lazy_new(runs, nruns, bytes, count);
    if (lz == NULL)
        return -1;
    scan sc = {0};
    int rc = lazy_pass(s, lz, bytes, &sc);
    free(sc.acc);
    free(sc.last);
    if (rc < 0) {
        ulp__lazy_free(lz);
        return -1;
    }
    *out = lz;
    return 0;
}

int ulp__lazy_install(ulp_snapshot *s, ulp__lazy *lz)
{
    s->lazy = lz;
    s->ncaps = lz->ncaps;
    ulp__open_progress_add(lz->ncaps);
    return 1;
}

/*
 * Page p made again from the file, which must be as the open found it:
 * its stamp (format/index.h) still holds, or, when something set the
 * mtime since (touch(1)), the page passes every check again and gives the
 * fingerprint it gave the open.  NULL if not.
 */
static page *page_make(const ulp_snapshot *s, ulp__lazy *lz, size_t p)
{
    struct stat sb;
    uint64_t mtime = 0;
    if (fstat(s->fd, &sb) != 0 || (uint64_t)sb.st_size != s->file_size)
        return NULL;
    if (sb.st_mtim.tv_sec > 0)
        mtime = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
    int stamped = mtime == s->mtime_ns;
    size_t n = page_count(lz, p);
    uint64_t bytes = lz->page_at[p + 1] - lz->page_at[p];
    page *pg = lz->nspare > 0 ? lz->spare[--lz->nspare] : page_new((size_t)1 << lz->shift);
    if (pg == NULL)
        return NULL;
    if (bytes > lz->scratch_cap) {
        free(lz->scratch);
        lz->scratch_cap = 0;
        if ((lz->scratch = malloc((size_t)bytes)) == NULL) {
            page_free(pg);
            return NULL;
        }
        lz->scratch_cap = (size_t)bytes;
    }
    uint64_t fp = 0;
    if (records_read(lz, s->fd, lz->scratch, lz->page_at[p], bytes) < 0 ||
        page_decode(s, lz, pg, lz->scratch, bytes, n, NULL, stamped, &fp) < 0 ||
        (!stamped && fp != lz->page_fp[p])) {
        page_free(pg);
        return NULL;
    }
    if (pg->in_place) { /* the captures point into the records: the page keeps them */
        pg->rec = lz->scratch;
        lz->scratch = NULL;
        lz->scratch_cap = 0;
    }
    return pg;
}

/* Page p, made under the lock if absent. */
static page *page_get(const ulp_snapshot *s, ulp__lazy *lz, size_t p)
{
    pthread_mutex_lock(&lz->lock);
    page *pg = __atomic_load_n(&lz->slots[p], __ATOMIC_ACQUIRE);
    if (pg == NULL && (pg = page_make(s, lz, p)) != NULL) {
        __atomic_store_n(&lz->slots[p], pg, __ATOMIC_RELEASE);
        __atomic_fetch_add(&lz->resident, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&lz->remade, 1, __ATOMIC_RELAXED);
        if (p < lz->low)
            lz->low = p;
    }
    pthread_mutex_unlock(&lz->lock);
    return pg;
}

const ulp_capture_info *ulp__lazy_cap(const ulp_snapshot *s, size_t i, const ulp__capture_src **src)
{
    ulp__lazy *lz = s->lazy;
    size_t p = i >> lz->shift, k = i & (((size_t)1 << lz->shift) - 1);
    page *pg = __atomic_load_n(&lz->slots[p], __ATOMIC_ACQUIRE);
    if (pg == NULL && (pg = page_get(s, lz, p)) == NULL)
        return NULL;
    if (src != NULL)
        *src = &pg->srcs[k];
    return &pg->caps[k];
}

const size_t *ulp__lazy_by_name(const ulp_snapshot *s)
{
    ulp__lazy *lz = s->lazy;
    size_t *bn = __atomic_load_n(&lz->by_name, __ATOMIC_ACQUIRE);
    if (bn != NULL)
        return bn;
    pthread_mutex_lock(&lz->lock);
    if (lz->by_name == NULL) {
        /* Every page made and kept (trim no longer frees): the table read whole. */
        int ok = 1;
        for (size_t p = 0; p < lz->npages && ok; p++) {
            if (lz->slots[p] != NULL)
                continue;
            page *pg = page_make(s, lz, p);
            ok = pg != NULL;
            if (ok) {
                __atomic_store_n(&lz->slots[p], pg, __ATOMIC_RELEASE);
                __atomic_fetch_add(&lz->resident, 1, __ATOMIC_RELAXED);
                __atomic_fetch_add(&lz->remade, 1, __ATOMIC_RELAXED);
            }
        }
        lz->pinned = 1;
        size_t *start = calloc(lz->sum.nnames + 1, sizeof *start);
        bn = ok && start != NULL ? malloc((lz->ncaps ? lz->ncaps : 1) * sizeof *bn) : NULL;
        if (bn != NULL) {
            for (size_t r = 0; r < lz->sum.nnames; r++)
                start[r + 1] = start[r] + (size_t)lz->sum.names[r].count;
            /* In seq order, each name's occurrences rise (checked by the open). */
            for (size_t i = 0; i < lz->ncaps; i++) {
                const ulp_capture_info *c =
                    &lz->slots[i >> lz->shift]->caps[i & (((size_t)1 << lz->shift) - 1)];
                int64_t *no = ulp__strmap_find(&lz->names.map, c->name);
                bn[start[lz->rank[*no]]++] = i;
            }
            __atomic_store_n(&lz->by_name, bn, __ATOMIC_RELEASE);
        }
        free(start);
    }
    bn = lz->by_name;
    pthread_mutex_unlock(&lz->lock);
    return bn;
}

void ulp__snapshot_trim(const ulp_snapshot *s, size_t below)
{
    ulp__lazy *lz = s != NULL ? s->lazy : NULL;
    if (lz == NULL)
        return;
    pthread_mutex_lock(&lz->lock);
    size_t p = lz->low;
    /* A page goes when its last capture is below `below`. */
    for (; !lz->pinned && p < lz->npages && (p << lz->shift) + page_count(lz, p) <= below; p++) {
        page *pg = lz->slots[p];
        if (pg == NULL)
            continue;
        __atomic_store_n(&lz->slots[p], NULL, __ATOMIC_RELEASE);
        __atomic_fetch_sub(&lz->resident, 1, __ATOMIC_RELAXED);
        if (lz->nspare < SPARES) {
            page_clear(pg);
            free(pg->rec);
            pg->rec = NULL;
            lz->spare[lz->nspare++] = pg;
        } else {
            page_free(pg);
        }
    }
    if (!lz->pinned)
        lz->low = p;
    pthread_mutex_unlock(&lz->lock);
}

const ulp__snapshot_summary *ulp__snapshot_summary_lazy(const ulp_snapshot *s)
{
    return s != NULL && s->lazy != NULL ? &s->lazy->sum : NULL;
}

size_t ulp__snapshot_pages_resident(const ulp_snapshot *s)
{
    return s->lazy != NULL ? __atomic_load_n(&s->lazy->resident, __ATOMIC_RELAXED) : 0;
}

uint64_t ulp__snapshot_pages_remade(const ulp_snapshot *s)
{
    return s->lazy != NULL ? __atomic_load_n(&s->lazy->remade, __ATOMIC_RELAXED) : 0;
}
