/*
 * The logits rows' statistics folded into the element pass:
 * while a worker thread holds a chunk of a logits pair (mapped or copied,
 * diff_jobs.c), it also takes the rows' top two and largest |z_A - z_B|
 * over the chunk's elements, so that the logits are read from memory once
 * instead of twice.
 *
 * Chunks start anywhere: a chunk's run of each row it touches becomes a
 * partial (ulp__lpart, logits_row.c) merged into the row's under a lock.
 * Partials merge to the same numbers in any order and however the row was
 * cut, so the result is the one ulp__logits_row_f32() gives for the whole
 * row, whatever the threads and the chunk size.  Formats narrower than
 * float32 are widened a block at a time, as the row pass does (exactly).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

/* Elements widened to float32 at a time (two blocks of 8 KiB, in L1). */
#define WIDEN 2048

int ulp__logits_fusable(ulp_dtype dtype, int ndim, const int64_t *shape,
                        const ulp_diff_options *opts)
{
    if (!(dtype == ULP_DTYPE_F32 || dtype == ULP_DTYPE_BF16 || dtype == ULP_DTYPE_F16 ||
          dtype == ULP_DTYPE_F8E4M3 || dtype == ULP_DTYPE_F8E5M2))
        return 0;
    /* The sampling and distribution figures need whole rows in doubles: their own pass. */
    if (opts->n_temperatures > 0 || opts->distributions || ndim < 1)
        return 0;
    for (int k = 0; k < ndim; k++)
        if (shape[k] <= 0)
            return 0; /* no rows or no vocabulary: nothing to read */
    return 1;
}

ulp_status ulp__logits_fuse_init(ulp__logits_fuse *f, size_t row, ulp_dtype dtype, int ndim,
                                 const int64_t *shape)
{
    memset(f, 0, sizeof *f);
    f->row = row;
    f->dtype = dtype;
    f->vocab = (uint64_t)shape[ndim - 1];
    f->rows = 1;
    for (int k = 0; k + 1 < ndim; k++)
        f->rows *= (uint64_t)shape[k];
    f->part = malloc((size_t)f->rows * sizeof *f->part);
    if (f->part == NULL)
        return ULP_ENOMEM;
    for (uint64_t i = 0; i < f->rows; i++)
        ulp__lpart_init(&f->part[i]);
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        free(f->part);
        f->part = NULL;
        return ULP_ETHREAD;
    }
    return ULP_OK;
}

void ulp__logits_fuse_release(ulp__logits_fuse *f)
{
    if (f->part == NULL)
        return;
    pthread_mutex_destroy(&f->lock);
    free(f->part);
    f->part = NULL;
}

/* Elements [col, col + n) of one row into p. */
static void add_run(const ulp__logits_fuse *f, ulp__lpart *p, const unsigned char *a,
                    const unsigned char *b, uint64_t n, uint64_t col)
{
    if (f->dtype == ULP_DTYPE_F32 && (uintptr_t)a % 4 == 0 && (uintptr_t)b % 4 == 0) {
        ulp__lpart_add(p, (const float *)(const void *)a, (const float *)(const void *)b, n, col);
        return;
    }
    float wa[WIDEN], wb[WIDEN];
    size_t sz = ulp_dtype_size(f->dtype);
    for (uint64_t at = 0; at < n; at += WIDEN) {
        uint64_t m = n - at < WIDEN ? n - at : WIDEN;
        ulp__logits_widen(f->dtype, a + at * sz, m, wa);
        ulp__logits_widen(f->dtype, b + at * sz, m, wb);
        ulp__lpart_add(p, wa, wb, m, col + at);
    }
}

void ulp__logits_fuse_add(ulp__logits_fuse *f, const void *a, const void *b, uint64_t n, uint64_t v)
{
    const unsigned char *pa = a, *pb = b;
    size_t sz = ulp_dtype_size(f->dtype);
    for (uint64_t done = 0; done < n;) {
        uint64_t row = (v + done) / f->vocab, col = (v + done) % f->vocab;
        uint64_t m = f->vocab - col < n - done ? f->vocab - col : n - done;
        ulp__lpart p;
        ulp__lpart_init(&p);
        add_run(f, &p, pa + done * sz, pb + done * sz, m, col);
        pthread_mutex_lock(&f->lock);
        ulp__lpart_merge(&f->part[row], &p);
        pthread_mutex_unlock(&f->lock);
        done += m;
    }
}
