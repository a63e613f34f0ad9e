/*
 * The streamed comparison alone (10,000 small captures): what
 * `ulpprof diff` spends between opening the files and printing the report,
 * ulp_diff_stream() with the table's stream (ulp_report_stream_rows, into
 * its temporary file) as the callback, beside the machine's limit for the
 * same files: reading both whole with pread(2) in 64 KiB blocks.
 *
 *   bench_stream A.h5 B.h5 [ROUNDS]      (default 31 rounds)
 *
 * Opens A and B once, then runs both ROUNDS times in interleaved rounds,
 * timing each with CLOCK_MONOTONIC (wall), CLOCK_PROCESS_CPUTIME_ID (CPU,
 * all threads) and CLOCK_THREAD_CPUTIME_ID (the calling thread, which
 * pairs, hands the batches over and takes its share of the comparison).
 * Prints the median, minimum and maximum of each, and the ratio of the
 * medians of the walls.  Checked first, untimed: the streamed table is
 * byte for byte ulp_report_write()'s of ulp_diff_run(), and not empty.
 * Exit 2 on any error or failed check.
 *
 * Not a test: run by hand, e.g. on bench_diff.sh's many pair, and say the
 * load (uptime): on a busy machine the walls mean little.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ulpprof/diff.h"
#include "ulpprof/report.h"
#include "ulpprof/snapshot.h"

#define MAXROUND 201

static double ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what, const ulp_error *err)
{
    fprintf(stderr, "bench_stream: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(2);
}

/* One streamed diff; the table to f when f is not NULL. */
static void stream(const ulp_snapshot *a, const ulp_snapshot *b, FILE *f)
{
    ulp_report_stream *s;
    ulp_diff_result *r;
    ulp_error err;
    if (ulp_report_stream_open(ULP_REPORT_TABLE, 0, &s, &err) != ULP_OK)
        die("ulp_report_stream_open", &err);
    if (ulp_diff_stream(a, b, NULL, ulp_report_stream_rows, s, &r, &err) != ULP_OK)
        die("ulp_diff_stream", &err);
    if (f != NULL && ulp_report_stream_write(s, r, f, &err) != ULP_OK)
        die("ulp_report_stream_write", &err);
    ulp_report_stream_free(s);
    ulp_diff_result_free(r);
}

/* Both files whole through a 64 KiB buffer: bytes read. */
static size_t read_both(const char *pa, const char *pb)
{
    static char buf[64 << 10];
    const char *paths[2] = {pa, pb};
    size_t total = 0;
    for (int k = 0; k < 2; k++) {
        int fd = open(paths[k], O_RDONLY);
        ssize_t n;
        off_t off = 0;
        if (fd < 0)
            die("cannot open a file", NULL);
        while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
            off += n;
            total += (size_t)n;
        }
        close(fd);
    }
    return total;
}

/* The streamed table against the whole one. */
static void check(const ulp_snapshot *a, const ulp_snapshot *b)
{
    char *text[2];
    size_t len[2];
    ulp_diff_result *r;
    ulp_error err;
    FILE *f = open_memstream(&text[0], &len[0]);
    if (f == NULL)
        die("open_memstream", NULL);
    stream(a, b, f);
    fclose(f);
    if ((f = open_memstream(&text[1], &len[1])) == NULL)
        die("open_memstream", NULL);
    if (ulp_diff_run(a, b, NULL, &r, &err) != ULP_OK)
        die("ulp_diff_run", &err);
    if (ulp_report_write(r, ULP_REPORT_TABLE, f, 0, &err) != ULP_OK)
        die("ulp_report_write", &err);
    fclose(f);
    if (len[0] == 0 || len[0] != len[1] || memcmp(text[0], text[1], len[0]) != 0)
        die("the streamed table differs from the whole one", NULL);
    printf("check: table %zu bytes, %zu rows, streamed = whole\n", len[0], r->n_rows);
    ulp_diff_result_free(r);
    free(text[0]);
    free(text[1]);
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void line(const char *what, double *v, int n)
{
    double m = median(v, n);
    printf("  %-22s median %7.2f ms  min %7.2f  max %7.2f\n", what, m, v[0], v[n - 1]);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: bench_stream A.h5 B.h5 [ROUNDS]", NULL);
    int rounds = argc > 3 ? atoi(argv[3]) : 31;
    if (rounds < 1 || rounds > MAXROUND)
        die("ROUNDS: 1 to 201", NULL);
    ulp_snapshot *a, *b;
    ulp_error err;
    if (ulp_snapshot_open(argv[1], &a, &err) != ULP_OK ||
        ulp_snapshot_open(argv[2], &b, &err) != ULP_OK)
        die("cannot open", &err);
    check(a, b);
    static double wall[MAXROUND], cpu[MAXROUND], caller[MAXROUND], rd[MAXROUND];
    size_t bytes = 0;
    stream(a, b, NULL); /* warm: the page cache, the allocator */
    for (int i = 0; i < rounds; i++) {
        double w0 = ms(CLOCK_MONOTONIC), c0 = ms(CLOCK_PROCESS_CPUTIME_ID);
        double t0 = ms(CLOCK_THREAD_CPUTIME_ID);
        stream(a, b, NULL);
        wall[i] = ms(CLOCK_MONOTONIC) - w0;
        cpu[i] = ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        caller[i] = ms(CLOCK_THREAD_CPUTIME_ID) - t0;
        w0 = ms(CLOCK_MONOTONIC);
        bytes = read_both(argv[1], argv[2]);
        rd[i] = ms(CLOCK_MONOTONIC) - w0;
    }
    printf("ulp_diff_stream, table stream, %d rounds:\n", rounds);
    line("wall", wall, rounds);
    line("CPU, all threads", cpu, rounds);
    line("CPU, calling thread", caller, rounds);
    printf("read both files (%.1f MiB, pread 64 KiB):\n", (double)bytes / 1048576.0);
    line("wall", rd, rounds);
    printf("diff / read, medians of the walls: %.2f\n", median(wall, rounds) / median(rd, rounds));
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return 0;
}
