/*
 * Benchmark of the host capture API: for each tensor size
 * (default 512 bytes, 1, 8 and 64 MiB of bf16), enough captures through
 * ulp_capture_host() to make 128 MiB (128, 16 and 2 captures; 4,096 of
 * 512 bytes, 2 MiB, which the writer takes about 0.2 s to store), within
 * the default 256 MiB queue bound so that the caller never waits for room.
 *
 * Prints per size these ratios (each the median, with the range, of REPS
 * repetitions, each in a new process), for a fresh session (the process's
 * first), for the next captures in the same session (twice, as a run that
 * captures every step does), and for the process's next session (the
 * library keeps a closed session's staging ring for it):
 *   call/memcpy   time the calling thread spends in its loop of
 *                 ulp_capture_host() calls divided by a loop of plain
 *                 memcpy() of the same bytes into as many buffers that are
 *                 already mapped and written, on huge pages (a user's own
 *                 copy with glibc's memcpy, the best case of its memory;
 *                 not the fastest copy there is: below glibc's
 *                 non-temporal threshold, 288 MiB on the 2-vCPU VM, a
 *                 streaming copy such as the capture's from 256 KiB
 *                 beats it, so the ratio can fall below 1), timed right
 *                 before each pass of captures (interleaved: one memcpy
 *                 loop a repetition moved by 20% from run to run at 64 MiB,
 *                 where a pass is 2 copies), in wall time and in the
 *                 calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
 *                 which a busy machine does not inflate;
 *   sleeps/call   the calling thread's voluntary context switches per call
 *                 (RUSAGE_THREAD): a wait, for room or for a page another
 *                 thread is populating, costs wall time and no CPU time;
 *   faults/call   its page faults per call (a huge page is one fault);
 *   others ms CPU the CPU time of the process's other threads (the
 *                 writer, the prefault thread) during the calling
 *                 thread's loop: what shares the machine with its copies;
 *   write/fwrite  the writer's throughput (bytes from the first capture
 *                 until ulp_capture_flush() returns) divided by fwrite()'s
 *                 throughput writing the same bytes to a file in the same
 *                 directory, fflush'd and closed (1.0 = as fast as stdio).
 *   open ms       ulp_capture_open()'s wall time, its calling thread's CPU
 *                 time and the whole process's (the writer thread creating
 *                 the file, the prefault thread populating the reserve),
 *                 for the first session and the next one.
 * Neither side calls fsync: both measure the write into the page cache.
 * A fresh session starts with fresh staging memory (the kernel zeroes each
 * page at its first touch; capture/session_staging.c populates a reserve
 * before the open returns, and more ahead on a thread of its own); the
 * same session's next passes reuse it, and so does the next session,
 * whose reserve is mostly there already.
 *
 *   bench_capture [DIR [SIZE...]]   (DIR: where the files go; default $TMPDIR or /tmp;
 *                                    SIZE: MiB, or bytes with a B suffix: 512B)
 *
 * Not a test: the numbers depend on the machine.  tests/perf/run.sh runs it.
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ulpprof/capture.h"

#define PASS_BYTES ((size_t)128 << 20)
#define MAX_CALLS  4096 /* per pass: the writer stores small captures at ~25k/s */
#define REPS       5
#define PASSES     4 /* a fresh session, its next captures twice, the process's next session */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: what the copy costs it, whatever else the machine runs. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process: the session's own threads as well. */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Voluntary context switches and page faults of the calling thread so far. */
static long sleeps(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

static long faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt + ru.ru_majflt : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* Keeps the compiler from dropping a memcpy whose result is unused. */
static volatile uint8_t g_sink;

typedef struct result {
    double memcpy_s[PASSES][REPS], memcpy_cpu[PASSES][REPS], fwrite_s[REPS];
    double open_s[2][REPS], open_cpu[2][REPS], open_all_cpu[2][REPS]; /* ms: first, next session */
    double call_s[PASSES][REPS], call_cpu[PASSES][REPS], writer_s[PASSES][REPS];
    double call_sleeps[PASSES][REPS], call_faults[PASSES][REPS];
    double others_cpu[PASSES][REPS]; /* ms per pass: the session's threads during the loop */
} result;

static void print_ratio(const char *what, const double *num, const double *den)
{
    double r[REPS];
    for (int i = 0; i < REPS; i++)
        r[i] = num[i] / den[i];
    qsort(r, REPS, sizeof(*r), cmp_double);
    printf("  %-26s %5.2f [%.2f-%.2f]\n", what, r[REPS / 2], r[0], r[REPS - 1]);
}

static void print_value(const char *what, const double *v)
{
    double r[REPS];
    memcpy(r, v, sizeof(r));
    qsort(r, REPS, sizeof(*r), cmp_double);
    printf("  %-26s %5.2f [%.2f-%.2f]\n", what, r[REPS / 2], r[0], r[REPS - 1]);
}

/* Opens the default session on `path`, timed as the first (which 0) or next session (1). */
static int open_timed(const char *path, result *res, int which, int rep)
{
    double t0 = now_s(), c0 = cpu_s(), p0 = process_cpu_s();
    if (ulp_capture_open(path, "bench") != ULP_OK)
        return -1;
    res->open_s[which][rep] = (now_s() - t0) * 1e3;
    res->open_cpu[which][rep] = (cpu_s() - c0) * 1e3;
    res->open_all_cpu[which][rep] = (process_cpu_s() - p0) * 1e3;
    return 0;
}

/* One repetition for tensors of `bytes`: memcpy, the capture API (four passes), fwrite. */
static int run_once(const char *dir, const uint16_t *src, uint8_t *dst, size_t bytes, int n,
                    result *res, int rep)
{
    char path[1024];
    int64_t cols = bytes % 2048 == 0 ? 1024 : 64;
    int64_t shape[2] = {(int64_t)bytes / 2 / cols, cols};
    snprintf(path, sizeof(path), "%s/bench_capture_%ld.h5", dir, (long)getpid());
    double t0 = 0, c0 = 0, p0 = 0;
    if (open_timed(path, res, 0, rep) != 0)
        return -1;
    for (int pass = 0; pass < PASSES; pass++) {
        /* The last pass: the process's next session, on a new file. */
        if (pass == PASSES - 1 && (ulp_capture_close() != ULP_OK || unlink(path) != 0 ||
                                   open_timed(path, res, 1, rep) != 0))
            return -1;
        /* The baseline, right before the pass: the same machine, the writer idle
         * (in a fresh session the prefault thread may still top the ring up). */
        t0 = now_s();
        c0 = cpu_s();
        for (int i = 0; i < n; i++) {
            memcpy(dst + (size_t)i * bytes, src, bytes);
            g_sink = dst[(size_t)i * bytes + (size_t)i];
        }
        res->memcpy_s[pass][rep] = (now_s() - t0) / n;
        res->memcpy_cpu[pass][rep] = (cpu_s() - c0) / n;
        long z0 = sleeps(), f0 = faults();
        t0 = now_s();
        c0 = cpu_s();
        p0 = process_cpu_s();
        for (int i = 0; i < n; i++)
            if (ulp_capture_host("model.layers.out", src, ULP_DTYPE_BF16, 2, shape, i,
                                 ULP_ROLE_ACTIVATION) != ULP_OK)
                return -1;
        double c1 = cpu_s();
        res->others_cpu[pass][rep] = ((process_cpu_s() - p0) - (c1 - c0)) * 1e3;
        res->call_cpu[pass][rep] = (c1 - c0) / n;
        res->call_s[pass][rep] = (now_s() - t0) / n;
        res->call_sleeps[pass][rep] = (double)(sleeps() - z0) / n;
        res->call_faults[pass][rep] = (double)(faults() - f0) / n;
        if (ulp_capture_flush() != ULP_OK)
            return -1;
        res->writer_s[pass][rep] = now_s() - t0;
    }
    if (ulp_capture_close() != ULP_OK)
        return -1;
    unlink(path);

    snprintf(path, sizeof(path), "%s/bench_fwrite_%ld.bin", dir, (long)getpid());
    t0 = now_s();
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "bench_capture: cannot create '%s'\n", path);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (fwrite(src, 1, bytes, f) != bytes)
            return -1;
    if (fclose(f) != 0)
        return -1;
    res->fwrite_s[rep] = now_s() - t0;
    unlink(path);
    return 0;
}

/*
 * One repetition in a child process of its own, so that its first session
 * is a process's first (the library keeps a closed session's ring for the
 * next one).  The source and the destinations are made there too: with
 * the parent's source, shared copy-on-write, the memcpy baseline of 64 MiB
 * tensors took 1.5x as long (5.9 against 3.5-4.0 ms), which flattered the
 * capture; inherited destinations would be copied on write while timed.
 */
/* bf16 activations: N(0,1)-like values rounded to bf16 bits. */
static uint16_t *make_source(size_t bytes)
{
    uint16_t *src = malloc(bytes);
    uint64_t x = 0x243f6a8885a308d3u;
    for (size_t i = 0; src != NULL && i < bytes / 2; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float u = (float)((x >> 40) & 0xffffff) / 16777216.0f - 0.5f;
        src[i] = ulp_f32_to_bf16(u * 3.4f);
    }
    return src;
}

static int run_child(const char *dir, size_t bytes, int n, result *res, int rep)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* As many destinations as captures, as the captures' staging blocks:
         * a memcpy into one buffer that stays in the last-level cache would
         * flatter the baseline.  Backed by huge pages where the kernel gives
         * them, as the staging ring is: fewer TLB misses than 4 KiB pages, so
         * the baseline is the fastest copy, not the plain malloc'd one. */
        size_t dst_bytes = bytes * (size_t)n;
        uint8_t *dst = NULL;
        uint16_t *src = make_source(bytes);
        if (src == NULL || posix_memalign((void **)&dst, (size_t)2 << 20, dst_bytes) != 0)
            _exit(1);
#ifdef MADV_HUGEPAGE
        madvise(dst, dst_bytes, MADV_HUGEPAGE);
#endif
        memset(dst, 1, dst_bytes); /* map the destination before timing */
        _exit(run_once(dir, src, dst, bytes, n, res, rep) == 0 ? 0 : 1);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_capture: run %d failed\n", rep);
        return -1;
    }
    return 0;
}

static int bench_size(const char *dir, size_t bytes)
{
    size_t calls = PASS_BYTES / bytes < MAX_CALLS ? PASS_BYTES / bytes : MAX_CALLS;
    int n = calls >= 2 ? (int)calls : 2;
    /* The children's results. */
    result *res =
        mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        fprintf(stderr, "bench_capture: out of memory\n");
        return -1;
    }
    int rc = 0;
    for (int rep = 0; rep < REPS && rc == 0; rep++)
        rc = run_child(dir, bytes, n, res, rep);
    if (rc == 0) {
        char label[64];
        double mc[PASSES * REPS];
        memcpy(mc, res->memcpy_s, sizeof(mc));
        double total_mib = (double)n * (double)bytes / (1 << 20);
        char size[32];
        if (bytes % (1 << 20) == 0)
            snprintf(size, sizeof(size), "%zu MiB", bytes >> 20);
        else
            snprintf(size, sizeof(size), "%zu-byte", bytes);
        printf("%s tensors: %d captures (%.0f MiB) per pass; memcpy %.3f us per tensor, fwrite "
               "%.0f MiB/s (medians)\n",
               size, n, total_mib, median(mc, PASSES * REPS) * 1e6,
               total_mib / median(res->fwrite_s, REPS));
        for (int which = 0; which < 2; which++) {
            const char *w = which == 0 ? "" : "next session ";
            snprintf(label, sizeof(label), "%sopen ms wall", w);
            print_value(label, res->open_s[which]);
            snprintf(label, sizeof(label), "%sopen ms CPU, calling thread", w);
            print_value(label, res->open_cpu[which]);
            snprintf(label, sizeof(label), "%sopen ms CPU, all threads", w);
            print_value(label, res->open_all_cpu[which]);
        }
        static const char *const what[PASSES] = {"fresh session", "same session, 2nd",
                                                 "same session, 3rd", "next session"};
        for (int pass = 0; pass < PASSES; pass++) {
            snprintf(label, sizeof(label), "%s call/memcpy wall", what[pass]);
            print_ratio(label, res->call_s[pass], res->memcpy_s[pass]);
            snprintf(label, sizeof(label), "%s call/memcpy CPU", what[pass]);
            print_ratio(label, res->call_cpu[pass], res->memcpy_cpu[pass]);
            snprintf(label, sizeof(label), "%s sleeps/call", what[pass]);
            print_value(label, res->call_sleeps[pass]);
            snprintf(label, sizeof(label), "%s faults/call", what[pass]);
            print_value(label, res->call_faults[pass]);
            snprintf(label, sizeof(label), "%s others ms CPU", what[pass]);
            print_value(label, res->others_cpu[pass]);
            snprintf(label, sizeof(label), "%s write/fwrite", what[pass]);
            print_ratio(label, res->fwrite_s, res->writer_s[pass]);
        }
    }
    munmap(res, sizeof(*res));
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    static const size_t sizes[] = {512, (size_t)1 << 20, (size_t)8 << 20, (size_t)64 << 20};
    printf("bench_capture: bf16 tensors through ulp_capture_host, median [range] of %d runs, files "
           "in %s\n",
           REPS, dir);
    if (argc > 2) {
        for (int i = 2; i < argc; i++) {
            char *end = NULL;
            long v = strtol(argv[i], &end, 10);
            int in_bytes = end != NULL && strcmp(end, "B") == 0;
            if (end == argv[i] || (*end != '\0' && !in_bytes) || v <= 0 ||
                (in_bytes ? v % 128 != 0 || v > (1L << 30) : v > 1024)) {
                fprintf(stderr,
                        "bench_capture: '%s' is not a size in MiB (1..1024) or bytes (128B "
                        "steps)\n",
                        argv[i]);
                return 2;
            }
            if (bench_size(dir, in_bytes ? (size_t)v : (size_t)v << 20) != 0)
                return 2;
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (bench_size(dir, sizes[i]) != 0)
            return 2;
    return 0;
}
