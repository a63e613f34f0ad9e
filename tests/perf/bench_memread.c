/*
 * The floor under `ulpprof diff` (tests/perf/bench_diff.sh): how fast this
 * machine reads the bytes of the given files, with nothing computed.
 *
 *   bench_memread FILE...
 *
 * Maps every file read-only and walks all of it with two threads (the
 * files cut in 4 MiB pieces handed out in turn), summing 64-bit words:
 * the "plain mmap walk" a comparison cannot beat.  Prints one line,
 * "memread <bytes> <seconds> <GB/s>", and the sum (so the loads stay).
 * The pages are mapped with MADV_POPULATE_READ where the kernel has it,
 * as ulpprof does, and released after each piece.  Exit 2 on any error.
 *
 * Not a test: bench_diff.sh times it beside `cat` and `ulpprof diff`.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16
#define PIECE     ((size_t)4 << 20)
#define THREADS   2

typedef struct walk {
    const unsigned char *map[MAX_FILES];
    int fd[MAX_FILES];
    int use_pread; /* BENCH_PREAD=1: pread into a per-thread buffer instead */
    size_t size[MAX_FILES];
    int nfiles;
    atomic_size_t next; /* global piece index over all files           */
    uint64_t sum[THREADS];
} walk;

static uint64_t sum_words(const unsigned char *p, size_t n)
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        s0 += w[0];
        s1 += w[1];
        s2 += w[2];
        s3 += w[3];
    }
    for (; i < n; i++)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
}

static void *worker(void *arg)
{
    walk *w = ((void **)arg)[0];
    int id = (int)(intptr_t)((void **)arg)[1];
    uint64_t s = 0;
    for (;;) {
        size_t piece = atomic_fetch_add(&w->next, 1), k = piece;
        int f = 0;
        while (f < w->nfiles && k >= (w->size[f] + PIECE - 1) / PIECE)
            k -= (w->size[f++] + PIECE - 1) / PIECE;
        if (f == w->nfiles)
            break;
        size_t off = k * PIECE, n = w->size[f] - off < PIECE ? w->size[f] - off : PIECE;
        if (w->use_pread) {
            /* 256 KiB at a time into a buffer that stays in the L2 cache. */
            static _Thread_local unsigned char buf[256 << 10];
            for (size_t o = 0; o < n; o += sizeof buf) {
                size_t want = n - o < sizeof buf ? n - o : sizeof buf;
                if (pread(w->fd[f], buf, want, (off_t)(off + o)) != (ssize_t)want)
                    return NULL;
                s += sum_words(buf, want);
            }
            continue;
        }
        unsigned char *p = (unsigned char *)(uintptr_t)(w->map[f] + off);
#ifdef MADV_POPULATE_READ
        madvise(p, n, MADV_POPULATE_READ);
#endif
        s += sum_words(p, n);
        madvise(p, n, MADV_DONTNEED);
    }
    w->sum[id] = s;
    return NULL;
}

int main(int argc, char **argv)
{
    static walk w;
    size_t total = 0;
    if (argc < 2 || argc - 1 > MAX_FILES) {
        fprintf(stderr, "usage: bench_memread FILE... (at most %d)\n", MAX_FILES);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size == 0) {
            fprintf(stderr, "bench_memread: cannot read '%s'\n", argv[i]);
            return 2;
        }
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
        w.fd[w.nfiles] = fd;
        if (m == MAP_FAILED) {
            fprintf(stderr, "bench_memread: cannot map '%s'\n", argv[i]);
            return 2;
        }
        w.map[w.nfiles] = m;
        w.size[w.nfiles++] = (size_t)sb.st_size;
        total += (size_t)sb.st_size;
    }
    const char *pr = getenv("BENCH_PREAD");
    w.use_pread = pr != NULL && pr[0] == '1';
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t tid;
    void *args[THREADS][2];
    for (int i = 0; i < THREADS; i++) {
        args[i][0] = &w;
        args[i][1] = (void *)(intptr_t)i;
    }
    if (pthread_create(&tid, NULL, worker, args[1]) != 0) {
        fprintf(stderr, "bench_memread: cannot start a thread\n");
        return 2;
    }
    worker(args[0]);
    pthread_join(tid, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("memread %zu %.4f %.2f sum %llx\n", total, s, (double)total / s / 1e9,
           (unsigned long long)(w.sum[0] + w.sum[1]));
    return 0;
}
