/*
 * The report writers alone (the JSON report beside the table):
 * the CPU time each format takes to write the report of one diff, whole
 * (ulp_report_write()) and streamed (ulp_report_stream_*(): the rows go
 * through the temporary file in batches of 1,024, as `ulpprof diff` does).
 *
 *   bench_report A.h5 B.h5 [ROUNDS]      (default 15 rounds)
 *
 * Compares A and B once, then writes each report ROUNDS times to /dev/null
 * in interleaved rounds (the order rotates every round), timing each write
 * with CLOCK_THREAD_CPUTIME_ID.  Prints per format and route the median,
 * minimum and maximum, the ratio of the medians to the table's (same
 * route) and the range of the per-round ratios.  Checked first, untimed:
 * every format's streamed report is byte for byte its whole one, and not
 * empty.  Exit 2 on any error or failed check.
 *
 * Not a test: run by hand, e.g. on bench_diff.sh's many pair.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ulpprof/diff.h"
#include "ulpprof/report.h"
#include "ulpprof/snapshot.h"

#define NFMT     4
#define NROUTE   2
#define BATCH    1024
#define MAXROUND 101

static const char *const fmt_names[NFMT] = {"table", "markdown", "csv", "json"};
static const char *const route_names[NROUTE] = {"whole", "streamed"};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what, const ulp_error *err)
{
    fprintf(stderr, "bench_report: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(2);
}

/* The report of r in format k by route `route` to f. */
static void write_report(const ulp_diff_result *r, int k, int route, FILE *f)
{
    ulp_report_format format = (ulp_report_format)ulp_report_format_from_name(fmt_names[k]);
    ulp_error err;
    if (route == 0) {
        if (ulp_report_write(r, format, f, 0, &err) != ULP_OK)
            die("ulp_report_write", &err);
        return;
    }
    ulp_report_stream *s;
    if (ulp_report_stream_open(format, 0, &s, &err) != ULP_OK)
        die("ulp_report_stream_open", &err);
    for (size_t i = 0; i < r->n_rows; i += BATCH) {
        size_t n = r->n_rows - i < BATCH ? r->n_rows - i : BATCH;
        if (ulp_report_stream_rows(s, r->rows + i, i, n, &err) != ULP_OK)
            die("ulp_report_stream_rows", &err);
    }
    if (ulp_report_stream_write(s, r, f, &err) != ULP_OK)
        die("ulp_report_stream_write", &err);
    ulp_report_stream_free(s);
}

/* Every format's streamed report is its whole one, byte for byte. */
static void check(const ulp_diff_result *r)
{
    for (int k = 0; k < NFMT; k++) {
        char *text[NROUTE];
        size_t len[NROUTE];
        for (int route = 0; route < NROUTE; route++) {
            FILE *f = open_memstream(&text[route], &len[route]);
            if (f == NULL)
                die("open_memstream", NULL);
            write_report(r, k, route, f);
            fclose(f);
        }
        if (len[0] == 0 || len[0] != len[1] || memcmp(text[0], text[1], len[0]) != 0) {
            fprintf(
                stderr,
                "bench_report: FAIL: %s: streamed report (%zu bytes) is not the whole one (%zu)\n",
                fmt_names[k], len[1], len[0]);
            exit(2);
        }
        printf("check: %-8s %9zu bytes, streamed = whole\n", fmt_names[k], len[0]);
        free(text[0]);
        free(text[1]);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAXROUND];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: bench_report A.h5 B.h5 [ROUNDS]\n");
        return 2;
    }
    int rounds = argc == 4 ? atoi(argv[3]) : 15;
    if (rounds < 1 || rounds > MAXROUND)
        die("ROUNDS must be 1..101", NULL);
    ulp_error err;
    ulp_snapshot *a, *b;
    ulp_diff_result *r;
    if (ulp_snapshot_open(argv[1], &a, &err) != ULP_OK ||
        ulp_snapshot_open(argv[2], &b, &err) != ULP_OK)
        die("open", &err);
    if (ulp_diff_run(a, b, NULL, &r, &err) != ULP_OK)
        die("diff", &err);
    printf("bench_report: %zu rows, %d rounds\n", r->n_rows, rounds);
    check(r);
    FILE *null = fopen("/dev/null", "w");
    if (null == NULL)
        die("cannot open /dev/null", NULL);
    static double t[NROUTE][NFMT][MAXROUND];
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < NFMT * NROUTE; i++) {
            int j = (i + round) % (NFMT * NROUTE), k = j % NFMT, route = j / NFMT;
            double t0 = now_ms();
            write_report(r, k, route, null);
            fflush(null);
            t[route][k][round] = now_ms() - t0;
        }
    }
    for (int route = 0; route < NROUTE; route++) {
        double table = median(t[route][0], rounds);
        for (int k = 0; k < NFMT; k++) {
            double lo = 1e300, hi = 0, rlo = 1e300, rhi = 0;
            for (int i = 0; i < rounds; i++) {
                double v = t[route][k][i], q = v / t[route][0][i];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
                rlo = q < rlo ? q : rlo;
                rhi = q > rhi ? q : rhi;
            }
            double m = median(t[route][k], rounds);
            printf("%-8s %-8s median %7.2f ms  [%.2f-%.2f]  / table %5.2f  (per round %.2f-%.2f)\n",
                   route_names[route], fmt_names[k], m, lo, hi, m / table, rlo, rhi);
        }
    }
    fclose(null);
    ulp_diff_result_free(r);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return 0;
}
