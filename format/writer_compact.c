/*
 * A digest file rewritten tight at its clean close (writer.h,
 * ulp__writer_compact; FORMAT.md "Digests", "A digest file's close").
 *
 * Why: what keeps a running writer's file readable after a kill costs a
 * short digest file most of its bytes.  Its metadata comes from 32 KiB
 * blocks (writer.c), and the close leaves the last block's unused end
 * behind the raw data it writes after it (32.6 of a 257 KB 512-token
 * file); the capture journal holds every kept capture a second time (70
 * KB there, 136 bytes a generated token).  A closed file needs neither.
 * The copy ulpprof repair makes (ulp_snapshot_copy: every object as the
 * reader reads it, a sealed index, an open map, no journal) is 141 KB.
 *
 * How, so that nothing is lost: the copy is written beside the file (a
 * dot-name the run-directory readers pass over), read back and compared
 * with the file -- its captures' descriptions and bytes, its digests row by
 * row, its kernel and GEMM rows and attributes -- and only then, flushed to
 * the disk, renamed over it.  Anything else (a file too big, a copy that
 * fails, differs or is not smaller, a path that no longer names the file
 * written; a symbolic link, a file of more than one name) leaves the file
 * as the writer closed it.  A kill in between leaves the file whole and at
 * most the dot-file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gemm_row.h"
#include "snapshot_digests.h"
#include "snapshot_priv.h"
#include "ulpprof/snapshot.h"
#include "writer.h"

/* Larger files are left as they are: a data capture there (a selection) copies slowly, and
 * the blocks' ends are a small part of them. */
#define COMPACT_MAX_BYTES ((off_t)64 << 20)

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/* Whether capture i reads the same in both: its description and its bytes. */
static int same_capture(const ulp_snapshot *a, const ulp_snapshot *b, size_t i)
{
    const ulp_capture_info *x = ulp_snapshot_capture(a, i), *y = ulp_snapshot_capture(b, i);
    if (x == NULL || y == NULL || !same_str(x->name, y->name) || x->occurrence != y->occurrence ||
        x->seq != y->seq || x->layer != y->layer || !same_str(x->role, y->role) ||
        x->dtype != y->dtype || x->ndim != y->ndim || x->elements != y->elements ||
        x->has_step != y->has_step || x->step != y->step || x->time_ns != y->time_ns ||
        x->row_rank != y->row_rank || x->rows != y->rows || x->n_inputs != y->n_inputs ||
        x->has_kernels != y->has_kernels || x->has_gemms != y->has_gemms ||
        x->has_graph_replay != y->has_graph_replay ||
        memcmp(x->kernels, y->kernels, sizeof x->kernels) != 0 ||
        memcmp(x->gemms, y->gemms, sizeof x->gemms) != 0 ||
        memcmp(x->graph_replay, y->graph_replay, sizeof x->graph_replay) != 0 ||
        x->device_ptr != y->device_ptr || x->stream != y->stream ||
        (x->positions == NULL) != (y->positions == NULL) ||
        (x->requests == NULL) != (y->requests == NULL))
        return 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d])
            return 0;
    for (uint64_t r = 0; r < x->rows; r++)
        if ((x->positions != NULL && x->positions[r] != y->positions[r]) ||
            (x->requests != NULL && x->requests[r] != y->requests[r]))
            return 0;
    for (size_t k = 0; k < x->n_inputs; k++)
        if (!same_str(x->inputs[k], y->inputs[k]))
            return 0;
    size_t bytes = (size_t)x->elements * ulp_dtype_size(x->dtype);
    void *p = malloc(bytes > 0 ? bytes : 1), *q = malloc(bytes > 0 ? bytes : 1);
    int same =
        p != NULL && q != NULL && ulp_snapshot_read(a, i, 0, x->elements, p, NULL) == ULP_OK &&
        ulp_snapshot_read(b, i, 0, x->elements, q, NULL) == ULP_OK && memcmp(p, q, bytes) == 0;
    free(p);
    free(q);
    return same;
}

static int same_kv(size_t n, const ulp_kv *(*at)(const ulp_snapshot *, size_t),
                   const ulp_snapshot *a, const ulp_snapshot *b)
{
    for (size_t i = 0; i < n; i++) {
        const ulp_kv *x = at(a, i), *y = at(b, i);
        if (x == NULL || y == NULL || !same_str(x->key, y->key) || !same_str(x->value, y->value))
            return 0;
    }
    return 1;
}

#define SAME_MEMBER(name, kind, comment) same = same && !memcmp(&x->name, &y->name, sizeof x->name);

/* Member by member (the struct's padding is no member). */
static int same_gemm(const ulp_gemm_info *x, const ulp_gemm_info *y)
{
    int same = x != NULL && y != NULL;
    if (same) {
        ULP__GEMM_ROW_FIELDS(SAME_MEMBER)
    }
    return same;
}

/* Whether the two snapshots read the same (their captures, attributes and trace). */
static int same_snapshot(const ulp_snapshot *a, const ulp_snapshot *b)
{
    size_t n = ulp_snapshot_capture_count(a);
    if (n != ulp_snapshot_capture_count(b) ||
        ulp_snapshot_kernel_count(a) != ulp_snapshot_kernel_count(b) ||
        ulp_snapshot_gemm_count(a) != ulp_snapshot_gemm_count(b) ||
        ulp_snapshot_run_count(a) != ulp_snapshot_run_count(b) ||
        ulp_snapshot_env_count(a) != ulp_snapshot_env_count(b) ||
        ulp_snapshot_observed_count(a) != ulp_snapshot_observed_count(b) ||
        !same_str(ulp_snapshot_label(a), ulp_snapshot_label(b)) || ulp_snapshot_warning(b) != NULL)
        return 0;
    if (!same_kv(ulp_snapshot_run_count(a), ulp_snapshot_run, a, b) ||
        !same_kv(ulp_snapshot_env_count(a), ulp_snapshot_env, a, b) ||
        !same_kv(ulp_snapshot_observed_count(a), ulp_snapshot_observed, a, b) ||
        !same_str(ulp_snapshot_writer(a), ulp_snapshot_writer(b)) ||
        ulp_snapshot_format_version(a) != ulp_snapshot_format_version(b) ||
        ulp_snapshot_created_unix_ns(a) != ulp_snapshot_created_unix_ns(b))
        return 0;
    for (size_t i = 0; i < ulp_snapshot_gemm_count(a); i++)
        if (!same_gemm(ulp_snapshot_gemm(a, i), ulp_snapshot_gemm(b, i)))
            return 0;
    for (size_t i = 0; i < ulp_snapshot_kernel_count(a); i++) {
        const ulp_kernel_info *x = ulp_snapshot_kernel(a, i), *y = ulp_snapshot_kernel(b, i);
        if (x == NULL || y == NULL || !same_str(x->name, y->name) || x->seq != y->seq ||
            x->correlation_id != y->correlation_id || memcmp(x->grid, y->grid, sizeof x->grid) ||
            memcmp(x->block, y->block, sizeof x->block) || x->shared_static != y->shared_static ||
            x->shared_dynamic != y->shared_dynamic || x->registers != y->registers ||
            x->stream != y->stream || x->device != y->device || x->start_ns != y->start_ns ||
            x->end_ns != y->end_ns)
            return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!same_capture(a, b, i))
            return 0;
    return 1;
}

/* Whether the two files' /digests hold the same rows, entry by entry. */
static int same_digests(const char *a, const char *b)
{
    ulp__digest_entry *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int dx = 0, dy = 0;
    int same = ulp__digests_read(a, &x, &nx, &dx, NULL) == ULP_OK &&
               ulp__digests_read(b, &y, &ny, &dy, NULL) == ULP_OK && nx == ny && dx == dy;
    for (size_t i = 0; same && i < nx; i++) {
        const ulp__digest_entry *p = &x[i], *q = &y[i];
        size_t rb = (size_t)p->rows * sizeof(int64_t);
        same =
            same_str(p->name, q->name) && p->occurrence == q->occurrence && p->seq == q->seq &&
            p->layer == q->layer && p->rows == q->rows &&
            (p->positions == NULL) == (q->positions == NULL) &&
            (p->requests == NULL) == (q->requests == NULL) &&
            (p->rows == 0 || memcmp(p->digests, q->digests, rb) == 0) &&
            (p->positions == NULL || p->rows == 0 || memcmp(p->positions, q->positions, rb) == 0) &&
            (p->requests == NULL || p->rows == 0 || memcmp(p->requests, q->requests, rb) == 0);
    }
    ulp__digests_free(x, nx);
    ulp__digests_free(y, ny);
    return same;
}

/* `.<name>.compact-<pid>-<clock>` beside `path` (a dead process's leftover with a pid
 * reused does not stand in the way); -1 when it does not fit. */
static int tmp_path(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    int dir = slash != NULL ? (int)(slash - path + 1) : 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int n = snprintf(out, size, "%.*s.%s.compact-%ld-%lx", dir, path, path + dir, (long)getpid(),
                     (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* Flushes the copy to the disk with the file's permissions; 0, or -1. */
static int settle(const char *tmp, const struct stat *orig)
{
    int fd = open(tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fchmod(fd, orig->st_mode & 07777) == 0 && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

void ulp__writer_compact(const char *path, const struct stat *written)
{
    const char *knob = getenv("ULPPROF_COMPACT");
    if ((knob != NULL && strcmp(knob, "0") == 0) || path == NULL || written == NULL ||
        !S_ISREG(written->st_mode) || written->st_size > COMPACT_MAX_BYTES)
        return;
    /*
     * A shared lock of its own, on the file written (the path may name another by now): a
     * reader's lock goes with it, a new writer's (writer.c, check_not_in_use) does not, so
     * nothing rewrites the file while it is copied.
     */
    /* Not through a symbolic link (the rename would replace the link), nor a file of more
     * than one name (the rename would part them). */
    struct stat orig, now;
    if (lstat(path, &now) != 0 || !S_ISREG(now.st_mode) || now.st_nlink != 1)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return;
    if (fstat(fd, &orig) != 0 || !same_file(&orig, written) || orig.st_size != written->st_size ||
        flock(fd, LOCK_SH | LOCK_NB) != 0) {
        close(fd);
        return;
    }
    char tmp[4096];
    ulp_snapshot *a = NULL, *b = NULL;
    int ok = tmp_path(path, tmp, sizeof tmp) == 0 && ulp_snapshot_open(path, &a, NULL) == ULP_OK &&
             ulp_snapshot_warning(a) == NULL && ulp__snapshot_copy_as(a, tmp, 1, NULL) == ULP_OK;
    int made = ok;
    struct stat copy;
    ok = ok && stat(tmp, &copy) == 0 && copy.st_size < orig.st_size &&
         ulp_snapshot_open(tmp, &b, NULL) == ULP_OK && same_snapshot(a, b);
    ulp_snapshot_close(b);
    ulp_snapshot_close(a);
    ok = ok && same_digests(path, tmp) && settle(tmp, &orig) == 0;
    /* Still the file written (nothing renamed another over it), then in its place. */
    ok = ok && stat(path, &now) == 0 && same_file(&orig, &now) && rename(tmp, path) == 0;
    if (made && !ok)
        unlink(tmp);
    close(fd); /* the lock goes with it */
}
