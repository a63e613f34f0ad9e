/*
 * bench_pages: what a walk over a snapshot's captures in seq order costs
 * with the capture table read whole and made in pages (analyzer/
 * snapshot_pages.c), the walk letting the pages behind it go as the lean
 * pairing of a diff does (ulp__snapshot_trim()).
 *
 *   ULPPROF_TABLE=eager|lazy bench_pages FILE [FILE...]
 *
 * One process per table (peak RSS is per process): for each file, one line
 *   FILE captures=N open_ms=T walk_ms=T pages_max=P checksum=X
 * then "rss_kib=K" (getrusage's peak).  open_ms and walk_ms are this
 * thread's CPU time; checksum sums every capture's seq, elements and first
 * name byte, so both tables must print the same one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "format/snapshot_priv.h"
#include "format/snapshot_summary.h"

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_pages FILE [FILE...]\n");
        return 2;
    }
    for (int f = 1; f < argc; f++) {
        ulp_snapshot *s = NULL;
        ulp_error err;
        double t0 = cpu_ms();
        if (ulp_snapshot_open(argv[f], &s, &err) != ULP_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        double t1 = cpu_ms();
        size_t n = ulp_snapshot_capture_count(s), most = 0;
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            const ulp_capture_info *c = ulp_snapshot_capture(s, i);
            if (c == NULL) {
                fprintf(stderr, "%s: capture %zu cannot be made\n", argv[f], i);
                return 2;
            }
            sum += (uint64_t)c->seq + c->elements + (unsigned char)c->name[0];
            if (i % 64 == 0)
                ulp__snapshot_trim(s, i);
            size_t now = ulp__snapshot_pages_resident(s);
            most = now > most ? now : most;
        }
        double t2 = cpu_ms();
        printf("%s captures=%zu open_ms=%.3f walk_ms=%.3f pages_max=%zu checksum=%llu\n", argv[f],
               n, t1 - t0, t2 - t1, most, (unsigned long long)sum);
        ulp_snapshot_close(s);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("rss_kib=%ld\n", ru.ru_maxrss);
    return 0;
}
