/*
 * A worker thread's reads of chunk pairs (diff_jobs.c; logits.c copies): in place
 * from the files' mappings (ulp_snapshot_view, the whole chunk, released
 * after it) or copied into the thread's buffers (ulp_snapshot_read, in
 * pieces that stay in the core's cache).
 *
 * Neither is always cheaper, and the difference is large both ways
 * (1 GiB realistic pair, 2 threads, CPU time): where the page cache holds
 * the files in large folios, a fault maps up to 2 MiB at once and mapped
 * reads save the copy (146 ms against 209 ms); where it holds them in
 * 4 KiB pages -- every kernel before large folios reached the file system,
 * or after memory pressure split them -- mapping and releasing each page
 * costs more than copying it (395 ms against 297 ms).  Userspace cannot
 * ask which, so ulp__read_probe() measures it on the files themselves:
 * mapping and releasing one span against copying it.  ULPPROF_READ=map or
 * =copy in the environment forces either way (tests, benchmarks).  Runs
 * under MAP_MIN_BYTES are copied either way (ulp__reader_begin).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diff_priv.h"
#include "format/snapshot_read_priv.h"
#include "format/snapshot_summary.h"

/* Files smaller than this are copied, unprobed: the probe would cost more than it saves. */
#define PROBE_MIN_BYTES ((uint64_t)64 << 20)
/* Mapped reads must cost at most this share of a copy (the copy's data then sits in
 * the cache, a mapped chunk's does not). */
#define MAP_SHARE 0.75

static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* Runs (tensors, or their compared parts) smaller than this are copied: see ulp__reader_begin. */
#define MAP_MIN_BYTES (4 * (uint64_t)ULP__VIEW_SPAN)
/* Copies of the probe go in pieces of this many bytes, as the reads of diff_jobs.c. */
#define PROBE_PIECE ((size_t)512 << 10)

static int probe(const ulp_snapshot *s, unsigned char *buf)
{
    /* From the summary: walking every capture here would make every page
     * of a capture table made in pages. */
    const ulp__snapshot_summary *sum = ulp__snapshot_summary_get(s);
    if (sum == NULL || sum->data_bytes < PROBE_MIN_BYTES || sum->largest_bytes == 0)
        return 0;
    size_t best = sum->largest_mapped;
    uint64_t most = sum->largest_bytes;
    /* One span of the largest mapped capture, from its second span on (the
     * first may share its pages with a neighbour), twice each way, the
     * cheaper of the two. */
    const ulp_capture_info *c = ulp_snapshot_capture(s, best);
    if (c == NULL)
        return 0; /* a page that cannot be made again: the pairing says so */
    size_t sz = ulp_dtype_size(c->dtype);
    uint64_t span = ULP__VIEW_SPAN / sz, first = most > 2 * ULP__VIEW_SPAN ? span : 0;
    uint64_t count = c->elements - first < span ? c->elements - first : span;
    uint64_t piece = PROBE_PIECE / sz;
    double map_ns = 1e30, copy_ns = 1e30;
    for (int round = 0; round < 2; round++) {
        const void *v = NULL;
        double t0 = thread_ns();
        if (ulp_snapshot_view(s, best, first, count, NULL, &v, NULL) != ULP_OK)
            return 0;
        ulp_snapshot_view_release(s, v, count * sz);
        double t1 = thread_ns();
        for (uint64_t k = 0; k < count; k += piece)
            if (ulp_snapshot_read(s, best, first + k, count - k < piece ? count - k : piece, buf,
                                  NULL) != ULP_OK)
                return 0;
        double t2 = thread_ns();
        map_ns = t1 - t0 < map_ns ? t1 - t0 : map_ns;
        copy_ns = t2 - t1 < copy_ns ? t2 - t1 : copy_ns;
    }
    return map_ns <= MAP_SHARE * copy_ns;
}

int ulp__read_probe(const ulp_snapshot *a, const ulp_snapshot *b)
{
    /* The tests and benchmarks force either way. */
    const char *force = getenv("ULPPROF_READ");
    if (force != NULL && (strcmp(force, "map") == 0 || strcmp(force, "copy") == 0))
        return strcmp(force, "map") == 0;
    unsigned char *buf = malloc(PROBE_PIECE);
    int map = buf != NULL && probe(a, buf) && probe(b, buf);
    free(buf);
    return map;
}

void ulp__reader_init(ulp__reader *r, unsigned char *ba, unsigned char *bb, size_t piece_bytes,
                      int map)
{
    memset(r, 0, sizeof *r);
    r->ba = ba;
    r->bb = bb;
    r->piece_bytes = piece_bytes;
    r->map = map;
}

int ulp__read_mappable(const ulp__read_req *q)
{
    /* Small runs share their spans with their neighbours: releasing a
     * chunk's spans would unmap the pages another thread is reading. */
    return q->whole * ulp_dtype_size(q->dtype) >= MAP_MIN_BYTES &&
           ulp__snapshot_mapped(q->a, q->ia, q->off_a) != NULL &&
           ulp__snapshot_mapped(q->b, q->ib, q->off_b) != NULL;
}

void ulp__reader_begin(ulp__reader *r, const ulp__read_req *q)
{
    r->q = *q;
    r->done = 0;
    r->bytes = q->n * ulp_dtype_size(q->dtype);
    r->mapped = r->map && ulp__read_mappable(q);
}

int ulp__reader_next(ulp__reader *r, const void **va, const void **vb, uint64_t *first, uint64_t *n,
                     ulp_error *err)
{
    const ulp__read_req *q = &r->q;
    if (r->done >= q->n)
        return 0;
    *first = r->done;
    if (r->windows && r->bytes <= ULP__VIEW_COPY_BYTES) {
        /* A small chunk: the neighbouring captures come in the same read. */
        *n = q->n;
        r->va = r->vb = NULL; /* nothing mapped to release */
        if (ulp__snapshot_view_small(q->a, &r->wa, q->ia, q->off_a, q->n, r->ba, va, err) !=
                ULP_OK ||
            ulp__snapshot_view_small(q->b, &r->wb, q->ib, q->off_b, q->n, r->bb, vb, err) != ULP_OK)
            return -1;
    } else if (r->mapped) {
        /* The whole chunk at once (into the buffers where the file shrank). */
        *n = q->n;
        *va = *vb = NULL;
        if (ulp_snapshot_view(q->a, q->ia, q->off_a, q->n, r->ba, va, err) != ULP_OK ||
            ulp_snapshot_view(q->b, q->ib, q->off_b, q->n, r->bb, vb, err) != ULP_OK)
            return -1;
        r->va = *va;
        r->vb = *vb;
    } else {
        /* Pieces that stay in this core's cache (the rest of the buffers
         * stays untouched, out of the resident set). */
        uint64_t piece = r->piece_bytes / ulp_dtype_size(q->dtype);
        piece = piece ? piece : 1;
        *n = q->n - r->done < piece ? q->n - r->done : piece;
        *va = r->ba;
        *vb = r->bb;
        if (ulp_snapshot_read(q->a, q->ia, q->off_a + r->done, *n, r->ba, err) != ULP_OK ||
            ulp_snapshot_read(q->b, q->ib, q->off_b + r->done, *n, r->bb, err) != ULP_OK)
            return -1;
    }
    r->done += *n;
    return 1;
}

void ulp__reader_release(ulp__reader *r)
{
    ulp__window_free(&r->wa);
    ulp__window_free(&r->wb);
}

void ulp__reader_end(ulp__reader *r)
{
    if (r->mapped && r->done > 0) {
        ulp_snapshot_view_release(r->q.a, r->va, r->bytes);
        ulp_snapshot_view_release(r->q.b, r->vb, r->bytes);
    }
}
