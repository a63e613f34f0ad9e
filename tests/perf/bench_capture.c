/*
 * Benchmark of the host capture API (issue #2): 32 captures of 4 Mi bf16
 * elements (8 MiB each, 256 MiB in all) through ulp_capture_host().
 *
 * Prints two ratios from one run (each the median of REPS repetitions),
 * for a fresh session and for the next 32 captures in the same session:
 *   call/memcpy   time the calling thread spends in one ulp_capture_host()
 *                 divided by one plain memcpy() of the same 8 MiB into one
 *                 of 32 buffers that are already mapped (1.0 would be free);
 *   write/fwrite  the writer's throughput (bytes from the first capture
 *                 until ulp_capture_flush() returns) divided by fwrite()'s
 *                 throughput writing the same bytes to a file in the same
 *                 directory, fflush'd and closed (1.0 = as fast as stdio).
 * Neither side calls fsync: both measure the write into the page cache.
 * call/memcpy is also given in the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), which a busy machine does not inflate.
 *
 *   bench_capture [DIR]      (DIR: where the files go; default $TMPDIR or /tmp)
 *
 * Not a test: the numbers depend on the machine.  tests/perf/run.sh runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ulpprof/capture.h"

#define CAPTURES 32
#define ELEMENTS ((size_t)4 << 20)
#define BYTES    (ELEMENTS * 2)
#define REPS     3

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

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    uint16_t *src = malloc(BYTES);
    /* 32 destinations, as the captures' 32 staging blocks: a memcpy into one
     * buffer that stays in the last-level cache would flatter the baseline. */
    uint8_t *dst = malloc(BYTES * CAPTURES);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "bench_capture: out of memory\n");
        return 2;
    }
    /* bf16 activations: N(0,1)-like values rounded to bf16 bits. */
    uint64_t x = 0x243f6a8885a308d3u;
    for (size_t i = 0; i < ELEMENTS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float u = (float)((x >> 40) & 0xffffff) / 16777216.0f - 0.5f;
        src[i] = ulp_f32_to_bf16(u * 3.4f);
    }
    memset(dst, 1, BYTES * CAPTURES); /* map the destination before timing */

    /* [0]: a fresh session (every staging buffer is new memory the kernel
     * must fault in); [1]: the next 32 captures in the same session, as in
     * a run that captures every step (staging memory is reused). */
    double memcpy_s[REPS], call_s[2][REPS], writer_s[2][REPS], fwrite_s[REPS];
    double memcpy_cpu[REPS], call_cpu[2][REPS];
    char path[1024];
    int64_t shape[2] = {2048, 2048};
    for (int rep = 0; rep < REPS; rep++) {
        /* Plain memcpy of the same bytes, per capture. */
        double t0 = now_s(), c0 = cpu_s();
        for (int i = 0; i < CAPTURES; i++) {
            memcpy(dst + (size_t)i * BYTES, src, BYTES);
            g_sink = dst[(size_t)i * BYTES + (size_t)i];
        }
        memcpy_s[rep] = (now_s() - t0) / CAPTURES;
        memcpy_cpu[rep] = (cpu_s() - c0) / CAPTURES;

        /* The capture API: calling-thread time, then until everything is written. */
        snprintf(path, sizeof(path), "%s/bench_capture_%ld.h5", dir, (long)getpid());
        if (ulp_capture_open(path, "bench") != ULP_OK)
            return 2;
        for (int pass = 0; pass < 2; pass++) {
            double call_total = 0, call_cpu_total = 0;
            t0 = now_s();
            for (int i = 0; i < CAPTURES; i++) {
                double w0 = now_s(), u0 = cpu_s();
                ulp_status st = ulp_capture_host("model.layers.out", src, ULP_DTYPE_BF16, 2, shape,
                                                 i, ULP_ROLE_ACTIVATION);
                call_cpu_total += cpu_s() - u0;
                call_total += now_s() - w0;
                if (st != ULP_OK)
                    return 2;
            }
            if (ulp_capture_flush() != ULP_OK)
                return 2;
            writer_s[pass][rep] = now_s() - t0;
            call_s[pass][rep] = call_total / CAPTURES;
            call_cpu[pass][rep] = call_cpu_total / CAPTURES;
        }
        if (ulp_capture_close() != ULP_OK)
            return 2;
        unlink(path);

        /* fwrite of the same bytes. */
        snprintf(path, sizeof(path), "%s/bench_fwrite_%ld.bin", dir, (long)getpid());
        t0 = now_s();
        FILE *f = fopen(path, "wb");
        if (f == NULL) {
            fprintf(stderr, "bench_capture: cannot create '%s'\n", path);
            return 2;
        }
        for (int i = 0; i < CAPTURES; i++)
            if (fwrite(src, 1, BYTES, f) != BYTES)
                return 2;
        if (fclose(f) != 0)
            return 2;
        fwrite_s[rep] = now_s() - t0;
        unlink(path);
    }
    double mc = median(memcpy_s, REPS), fw = median(fwrite_s, REPS);
    double mcc = median(memcpy_cpu, REPS);
    double total_mib = (double)CAPTURES * (double)BYTES / (1 << 20);
    printf("bench_capture: %d captures x 4 Mi bf16 (%.0f MiB), median of %d runs, files in %s\n",
           CAPTURES, total_mib, REPS, dir);
    printf("  memcpy per capture %.3f ms; fwrite %.0f MiB/s\n", mc * 1e3, total_mib / fw);
    static const char *const what[2] = {"fresh session", "same session, next 32"};
    for (int pass = 0; pass < 2; pass++) {
        double call = median(call_s[pass], REPS), wr = median(writer_s[pass], REPS);
        printf("  %-22s ulp_capture_host %.3f ms per call; writer %.0f MiB/s\n", what[pass],
               call * 1e3, total_mib / wr);
        printf("  %-22s call/memcpy ratio:  %.2f   write/fwrite ratio: %.2f\n", what[pass],
               call / mc, fw / wr);
        printf("  %-22s call/memcpy in the caller's CPU time: %.2f\n", what[pass],
               median(call_cpu[pass], REPS) / mcc);
    }
    free(src);
    free(dst);
    return 0;
}
