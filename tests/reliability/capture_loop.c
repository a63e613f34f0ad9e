/*
 * capture_loop: a host program that captures N tensors in a loop through the
 * public capture API, for the crash, disk-full and long/large tests
 * (tests/cli/test_crash_*.sh, tests/perf/bench_long.sh).
 *
 *   capture_loop --out FILE [--count N] [--elements E] [--dtype NAME]
 *                [--names K] [--flush-each] [--flush-every N] [--report] [--queue-mb MB]
 *                [--flip-from S] [--keep-going] [--ignore-sigxfsz]
 *                [--rss-every N] [--kernels K] [--lockstep] [--fill-after N:BYTES]
 *
 * Capture i is named "t.<i mod K>" (so names repeat and occurrences grow),
 * has shape [E] and holds the bits of make_snapshots.py's formula
 *     element j of the capture with seq i = (j * 0x9E3779B1 + i * 0x85EBCA77
 *                                            + 0x1234567) mod 2^64, low bits,
 * so a reader can check every element without this program.  --flip-from S
 * flips bit 0 of element (i mod E) in every capture i >= S (a pair that
 * differs in a known way).
 *
 * --report prints "opened" once the session is open (the file is created and
 * flushed), then one line per capture on stdout, flushed at once: "flushed i" after
 * ulp_session_flush() returned (with --flush-each: the capture is in the file; with
 * --flush-every N, after every Nth capture: it and all before it are), else "queued i".  A
 * test kills the program at a known point with that.  At the end: "done ok=<accepted>
 * refused=<refused> close=<status name>"; with --keep-going the loop goes on after a failed capture
 * (the host keeps running), else it stops at the first one.
 * --lockstep (with --report) waits, after each line it prints, for one byte on
 * stdin before it goes on (end of input: it runs on freely), so a test that
 * kills the program after a given line kills it there and not some captures
 * later: on a loaded machine the loop can otherwise finish first.
 * --rss-every N prints "rss i <KiB>" (VmRSS) every N captures on stderr.
 * --kernels K appends K kernel launches to /trace before each capture,
 * through the session's internal trace API (what the CUDA collector does per
 * CUPTI buffer), each with a kernel name not seen before ("k<i>.<j>"), and
 * records their range in the capture's `kernels` attribute: a host program
 * that writes a trace as a CUDA one does, for the crash tests.
 * --fill-after N:BYTES: after capture N-1 (and its flush, if any), the file
 * may grow BYTES more (RLIMIT_FSIZE: a disk that fills while the writer
 * works); the limit is lifted again before the session closes.
 * Exit status: 0 when the program ran to its end (whatever the captures
 * did), 2 on a usage error or when the session cannot be opened.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/session.h"
#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"

static void fill(void *buf, size_t size, uint64_t n, uint64_t seq, uint64_t flip)
{
    uint64_t base = seq * 0x85EBCA77u + 0x1234567u;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t v = j * 0x9E3779B1u + base;
        if (j == flip)
            v ^= 1;
        switch (size) {
        case 1:
            ((uint8_t *)buf)[j] = (uint8_t)v;
            break;
        case 2:
            ((uint16_t *)buf)[j] = (uint16_t)v;
            break;
        case 4:
            ((uint32_t *)buf)[j] = (uint32_t)v;
            break;
        default:
            ((uint64_t *)buf)[j] = v;
            break;
        }
    }
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return -1;
    *out = v;
    return 0;
}

/* --lockstep: one byte from the test before the next capture; EOF frees the loop. */
static void wait_step(int lockstep)
{
    static int free_run;
    char b;
    if (!lockstep || free_run)
        return;
    ssize_t n;
    do
        n = read(0, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        free_run = 1;
}

/* From now on `path` may grow `bytes` more (the process's file-size limit). */
static void limit_growth(const char *path, uint64_t bytes)
{
    struct stat sb;
    struct rlimit rl;
    if (stat(path, &sb) != 0 || getrlimit(RLIMIT_FSIZE, &rl) != 0)
        return;
    rl.rlim_cur = (rlim_t)sb.st_size + (rlim_t)bytes;
    setrlimit(RLIMIT_FSIZE, &rl);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},        {"count", required_argument, NULL, 'n'},
        {"elements", required_argument, NULL, 'e'},   {"dtype", required_argument, NULL, 'd'},
        {"names", required_argument, NULL, 'k'},      {"flush-each", no_argument, NULL, 'F'},
        {"report", no_argument, NULL, 'r'},           {"queue-mb", required_argument, NULL, 'q'},
        {"flip-from", required_argument, NULL, 'f'},  {"keep-going", no_argument, NULL, 'g'},
        {"ignore-sigxfsz", no_argument, NULL, 'x'},   {"rss-every", required_argument, NULL, 'R'},
        {"label", required_argument, NULL, 'l'},      {"kernels", required_argument, NULL, 'K'},
        {"lockstep", no_argument, NULL, 'L'},         {"flush-every", required_argument, NULL, 'E'},
        {"fill-after", required_argument, NULL, 'A'}, {NULL, 0, NULL, 0}};
    const char *out = NULL, *label = "loop";
    uint64_t count = 10, elements = 1024, names = 8, queue_mb = 0, flip_from = UINT64_MAX;
    uint64_t rss_every = 0, kernels = 0, flush_every = 0, fill_after = UINT64_MAX, fill_bytes = 0;
    int flush_each = 0, report = 0, keep_going = 0, lockstep = 0, c;
    ulp_dtype dtype = ULP_DTYPE_BF16;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'l':
            label = optarg;
            break;
        case 'n':
            bad = parse_u64(optarg, &count);
            break;
        case 'e':
            bad = parse_u64(optarg, &elements);
            break;
        case 'k':
            bad = parse_u64(optarg, &names) || names == 0;
            break;
        case 'q':
            bad = parse_u64(optarg, &queue_mb);
            break;
        case 'f':
            bad = parse_u64(optarg, &flip_from);
            break;
        case 'R':
            bad = parse_u64(optarg, &rss_every);
            break;
        case 'K':
            bad = parse_u64(optarg, &kernels) || kernels > 64;
            break;
        case 'd':
            dtype = ulp_dtype_from_name(optarg);
            bad = dtype == ULP_DTYPE_INVALID;
            break;
        case 'F':
            flush_each = 1;
            break;
        case 'E':
            bad = parse_u64(optarg, &flush_every) || flush_every == 0;
            break;
        case 'A': {
            char *colon = strchr(optarg, ':');
            bad = colon == NULL;
            if (!bad) {
                *colon = '\0';
                bad = parse_u64(optarg, &fill_after) || parse_u64(colon + 1, &fill_bytes);
            }
            break;
        }
        case 'r':
            report = 1;
            break;
        case 'L':
            lockstep = 1;
            break;
        case 'g':
            keep_going = 1;
            break;
        case 'x':
            signal(SIGXFSZ, SIG_IGN);
            break;
        default:
            bad = 1;
            break;
        }
        if (bad) {
            fprintf(stderr, "capture_loop: bad option (see the comment at the top of "
                            "capture_loop.c)\n");
            return 2;
        }
    }
    if (out == NULL || optind != argc) {
        fprintf(stderr, "capture_loop: --out FILE is required\n");
        return 2;
    }

    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = out;
    o.label = label;
    o.queue_bytes = (size_t)queue_mb << 20;
    o.writer = "capture_loop";
    ulp_session *s = NULL;
    ulp_error err;
    if (ulp_session_open(&o, &s, &err) != ULP_OK)
        return 2;
    if (report) {
        printf("opened\n"); /* the file exists, flushed, with no capture yet */
        fflush(stdout);
        wait_step(lockstep);
    }

    size_t size = ulp_dtype_size(dtype);
    void *buf = malloc(elements ? elements * size : 1);
    if (buf == NULL) {
        fprintf(stderr, "capture_loop: out of memory\n");
        ulp_session_close(s);
        return 2;
    }
    uint64_t ok = 0, refused = 0;
    for (uint64_t i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "t.%" PRIu64, i % names);
        fill(buf, size, elements, i, i >= flip_from && elements ? i % elements : UINT64_MAX);
        int64_t shape[1] = {(int64_t)elements};
        ulp_capture_desc d;
        ulp_capture_desc_init(&d);
        d.name = name;
        d.data = buf;
        d.dtype = dtype;
        d.ndim = 1;
        d.shape = shape;
        d.layer = (int32_t)(i % names);
        d.step = (int64_t)i;
        d.time_ns = 1; /* a fixed time: two runs give the same attributes */
        ulp_capture_device_ext x;
        ulp_capture_device_ext_init(&x);
        ulp_status st = ULP_OK;
        if (kernels > 0) {
            ulp__kernel_row rows[64];
            char knames[64][48];
            const char *kn[64];
            memset(rows, 0, sizeof rows);
            for (uint64_t j = 0; j < kernels; j++) {
                rows[j].seq = i * kernels + j;
                rows[j].correlation_id = (uint32_t)(i * kernels + j + 1);
                rows[j].grid[0] = (int32_t)(j + 1);
                rows[j].block[0] = 128;
                snprintf(knames[j], sizeof knames[j], "k%" PRIu64 ".%" PRIu64, i, j);
                kn[j] = knames[j];
            }
            st = ulp__session_trace_kernels(s, rows, kn, (size_t)kernels);
            x.has_kernels = 1;
            x.kernels[0] = (int64_t)(i * kernels);
            x.kernels[1] = (int64_t)((i + 1) * kernels);
        }
        if (st == ULP_OK)
            st = ulp_session_capture_ext(s, &d, &x);
        int flushed = flush_each || (flush_every && (i + 1) % flush_every == 0);
        if (st == ULP_OK && flushed)
            st = ulp_session_flush(s);
        if (st == ULP_OK) {
            ok++;
            if (report) {
                printf("%s %" PRIu64 "\n", flushed ? "flushed" : "queued", i);
                fflush(stdout);
                wait_step(lockstep);
            }
        } else {
            refused++;
            if (!keep_going)
                break;
        }
        if (i + 1 == fill_after)
            limit_growth(out, fill_bytes);
        if (rss_every && (i + 1) % rss_every == 0)
            fprintf(stderr, "rss %" PRIu64 " %ld\n", i + 1, rss_kib());
    }
    free(buf);
    if (fill_after != UINT64_MAX) {
        struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
        getrlimit(RLIMIT_FSIZE, &rl);
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    ulp_status cst = ulp_session_close(s);
    printf("done ok=%" PRIu64 " refused=%" PRIu64 " close=%s\n", ok, refused, ulp_status_name(cst));
    return 0;
}
