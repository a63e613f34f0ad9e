/*
 * libFuzzer target: snapshot validation, ulp_snapshot_open() and
 * ulp_snapshot_read() (format/snapshot*.c) on arbitrary file bytes.
 *
 * The input is written to a file (in $ULP_FUZZ_DIR, else /dev/shm, else
 * /tmp) and opened as a snapshot.  A refusal must carry a status and a
 * one-line message that names the file.  An accepted snapshot must keep the
 * reader's promises -- captures in strictly increasing seq, rank 0..8,
 * `elements` the product of the shape, a known dtype, ulp_snapshot_find()
 * giving each capture back, strings that are not NULL -- and every capture
 * must read (up to a bound per input) without a sanitizer report; a read may
 * fail only with ULP_EIO, ULP_ETRUNC or ULP_EHDF5.  A file that opens both
 * with its captures described from their object headers and, with
 * ULPPROF_HEADERS=0, through HDF5 gives the same captures both ways.
 * The file's /digests (either layout, FORMAT.md "Digests") are read too,
 * whether or not the snapshot opened: refused with a one-line message
 * naming the file, or entries with a name and `rows` digests (requests
 * and positions, when present), and a (name, occurrence) at most once.
 * Broken promises abort.
 *
 * HDF5 itself is not instrumented: a crash inside libhdf5 shows up as a
 * SEGV with HDF5 frames on the stack.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapshot_digests.h"
#include "ulpprof/snapshot.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

/* Elements read per input, at most, and per read call. */
#define READ_BUDGET ((uint64_t)1 << 20)
#define READ_CHUNK  ((uint64_t)4099)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[512];

static int write_input(const uint8_t *data, size_t size)
{
    if (path[0] == '\0') {
        const char *dir = getenv("ULP_FUZZ_DIR");
        if (dir == NULL || access(dir, W_OK) != 0)
            dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/ulpfuzz-%ld.h5", dir, (long)getpid());
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    close(fd);
    return 0;
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/* What same_through_hdf5() compares of a capture: its description and first elements. */
typedef struct seen {
    ulp_capture_info c; /* its strings and arrays not kept: name and role copied below */
    char name[128], role[32];
    int read;
    unsigned char first[64 * 8];
} seen;

static seen *seen_all(ulp_snapshot *h, size_t *n)
{
    *n = ulp_snapshot_capture_count(h);
    seen *v = calloc(*n > 0 ? *n : 1, sizeof *v);
    for (size_t i = 0; v != NULL && i < *n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(h, i);
        v[i].c = *c;
        snprintf(v[i].name, sizeof v[i].name, "%s", c->name);
        snprintf(v[i].role, sizeof v[i].role, "%s", c->role);
        uint64_t cnt = c->elements < 64 ? c->elements : 64;
        v[i].read = cnt > 0 && ulp_snapshot_read(h, i, 0, cnt, v[i].first, NULL) == ULP_OK;
    }
    return v;
}

/*
 * A file without the capture index has its captures described from their
 * object headers (format/snapshot_hdr.c) unless ULPPROF_HEADERS=0, when
 * HDF5 reads each: when both ways accept the file, they must give the same
 * captures, and the same first elements of each.  Each opened while the
 * other is not: HDF5 shares one open file among the opens of a process, and
 * of a damaged file a second open reads HDF5's cache of the first, which
 * can read more of it (docs/limitations.md).  So *sp is closed, the file
 * opened through HDF5 and what it reads kept, then *sp opened again.
 */
static void same_through_hdf5(ulp_snapshot **sp)
{
    ulp_snapshot *h = NULL;
    ulp_snapshot_close(*sp);
    *sp = NULL;
    setenv("ULPPROF_HEADERS", "0", 1);
    ulp_status st = ulp_snapshot_open(path, &h, NULL);
    unsetenv("ULPPROF_HEADERS");
    size_t nh = 0;
    seen *v = st == ULP_OK ? seen_all(h, &nh) : NULL;
    ulp_snapshot_close(h);
    CHECK(ulp_snapshot_open(path, sp, NULL) == ULP_OK); /* as it opened before */
    if (st != ULP_OK || v == NULL) {
        free(v);
        return;
    }
    ulp_snapshot *s = *sp;
    size_t n = ulp_snapshot_capture_count(s);
    CHECK(nh == n);
    unsigned char x[64 * 8];
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *a = ulp_snapshot_capture(s, i), *b = &v[i].c;
        CHECK(same_str(a->name, v[i].name) && a->occurrence == b->occurrence && a->seq == b->seq);
        CHECK(a->layer == b->layer && same_str(a->role, v[i].role) && a->dtype == b->dtype);
        CHECK(a->ndim == b->ndim && a->elements == b->elements);
        CHECK(memcmp(a->shape, b->shape, sizeof a->shape) == 0);
        CHECK(a->has_step == b->has_step && (!a->has_step || a->step == b->step));
        CHECK(a->has_kernels == b->has_kernels &&
              (!a->has_kernels || memcmp(a->kernels, b->kernels, sizeof a->kernels) == 0));
        CHECK(a->has_gemms == b->has_gemms &&
              (!a->has_gemms || memcmp(a->gemms, b->gemms, sizeof a->gemms) == 0));
        CHECK(a->has_graph_replay == b->has_graph_replay &&
              (!a->has_graph_replay ||
               memcmp(a->graph_replay, b->graph_replay, sizeof a->graph_replay) == 0));
        CHECK(a->device_ptr == b->device_ptr && a->stream == b->stream && a->time_ns == b->time_ns);
        CHECK(a->row_rank == b->row_rank && a->n_inputs == b->n_inputs);
        uint64_t cnt = a->elements < 64 ? a->elements : 64;
        if (cnt > 0 && v[i].read && ulp_snapshot_read(s, i, 0, cnt, x, NULL) == ULP_OK)
            CHECK(memcmp(x, v[i].first, cnt * ulp_dtype_size(a->dtype)) == 0);
    }
    free(v);
}

/* The digest reader's promises (format/snapshot_digests.h), on any file. */
static void digests_hold(void)
{
    ulp__digest_entry *e = NULL;
    size_t n = 0;
    int has_data = -1;
    ulp_error err;
    ulp_status st = ulp__digests_read(path, &e, &n, &has_data, &err);
    if (st != ULP_OK) {
        CHECK(e == NULL && n == 0 && st < 0 && err.status == st);
        CHECK(strnlen(err.msg, sizeof err.msg) < sizeof err.msg);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK(strstr(err.msg, path) != NULL);
        return;
    }
    CHECK(has_data == 0 || has_data == 1);
    CHECK(n == 0 || e != NULL);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(e[i].name != NULL && e[i].occurrence >= 0);
        CHECK(e[i].rows == 0 || e[i].digests != NULL);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(e[i].name, e[j].name) != 0 || e[i].occurrence != e[j].occurrence);
        /* Every row is there to read: a sanitizer sees a short buffer. */
        for (uint64_t r = 0; r < e[i].rows; r++)
            sum += e[i].digests[r] ^ (e[i].requests != NULL ? (uint64_t)e[i].requests[r] : 0) ^
                   (e[i].positions != NULL ? (uint64_t)e[i].positions[r] : r);
    }
    CHECK(sum != 1 || n > 0);
    ulp__digests_free(e, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (write_input(data, size) != 0)
        return 0;
    digests_hold();
    ulp_snapshot *s = NULL;
    ulp_error err;
    ulp_status st = ulp_snapshot_open(path, &s, &err);
    if (st != ULP_OK) {
        CHECK(s == NULL && st < 0 && err.status == st);
        CHECK(strnlen(err.msg, sizeof err.msg) < sizeof err.msg);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK(strstr(err.msg, path) != NULL);
        return 0;
    }

    CHECK(ulp_snapshot_label(s) != NULL && ulp_snapshot_writer(s) != NULL);
    CHECK(ulp_snapshot_format_version(s) == 1);
    for (size_t i = 0; i < ulp_snapshot_run_count(s); i++)
        CHECK(ulp_snapshot_run(s, i)->key != NULL && ulp_snapshot_run(s, i)->value != NULL);
    for (size_t i = 0; i < ulp_snapshot_env_count(s); i++)
        CHECK(ulp_snapshot_env(s, i)->key != NULL && ulp_snapshot_env(s, i)->value != NULL);
    for (size_t i = 0; i < ulp_snapshot_kernel_count(s); i++)
        CHECK(ulp_snapshot_kernel(s, i)->name != NULL);

    uint64_t budget = READ_BUDGET;
    void *buf = malloc(READ_CHUNK * 8);
    size_t n = ulp_snapshot_capture_count(s);
    for (size_t i = 0; i < n && buf != NULL; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        CHECK(c != NULL && c->name != NULL && c->role != NULL);
        CHECK(i == 0 || c->seq > ulp_snapshot_capture(s, i - 1)->seq);
        CHECK(c->ndim >= 0 && c->ndim <= ULP_SNAPSHOT_MAX_RANK);
        CHECK(ulp_dtype_size(c->dtype) > 0);
        uint64_t e = 1;
        for (int k = 0; k < c->ndim; k++) {
            CHECK(c->shape[k] >= 0);
            e *= (uint64_t)c->shape[k];
        }
        CHECK(e == c->elements);
        CHECK(ulp_snapshot_find(s, c->name, c->occurrence) == (ptrdiff_t)i);
        uint64_t want = c->elements < budget ? c->elements : budget;
        for (uint64_t first = 0; first < want; first += READ_CHUNK) {
            uint64_t cnt = want - first < READ_CHUNK ? want - first : READ_CHUNK;
            ulp_status rs = ulp_snapshot_read(s, i, first, cnt, buf, &err);
            if (rs != ULP_OK) {
                CHECK(rs == ULP_EIO || rs == ULP_ETRUNC || rs == ULP_EHDF5);
                break;
            }
        }
        budget -= want;
        /* Past the end is refused, not read. */
        CHECK(ulp_snapshot_read(s, i, c->elements, 1, buf, NULL) == ULP_ERANGE);
    }
    free(buf);
    same_through_hdf5(&s);
    ulp_snapshot_close(s);
    return 0;
}
