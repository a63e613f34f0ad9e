/*
 * killwrite.so: an LD_PRELOAD shim that kills its process with SIGKILL at an
 * exact write, so a crash test can stop a writer at EVERY point where it
 * touches the file, not only where a timer happens to land.
 *
 *   ULP_KILL_AT=N        the N-th pwrite(2)/pwrite64 (1-based) does not
 *                        complete: the process gets SIGKILL instead
 *   ULP_KILL_TORN=1      ... after writing that call's bytes up to the last
 *                        page boundary (4 KiB of the file) before its middle:
 *                        Linux copies a write page by page and stops at a
 *                        page when SIGKILL arrives, so a multi-page write can
 *                        be torn there (a write inside one page is not)
 *   ULP_KILL_TORN_AT=J   ... after writing up to the J-th page boundary
 *                        inside that call (J = 1, 2, ...) instead of the
 *                        middle one; no tear when the call has fewer
 *   ULP_WRITE_COUNT=F    at exit, write the number of pwrite calls to file F
 *   ULP_WRITE_LOG=F      append "<call> <offset> <bytes>" for every call to F,
 *                        so a test can find each call's page boundaries
 *
 * HDF5's default (sec2) driver writes with pwrite; nothing else in the
 * programs under test does, so the count is the file's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static atomic_long calls;
static long kill_at = -1;
static int torn;
static long torn_at;
static FILE *write_log;

__attribute__((constructor)) static void killwrite_init(void)
{
    const char *s = getenv("ULP_KILL_AT");
    kill_at = s != NULL && *s ? atol(s) : -1;
    s = getenv("ULP_KILL_TORN");
    torn = s != NULL && strcmp(s, "1") == 0;
    s = getenv("ULP_KILL_TORN_AT");
    torn_at = s != NULL && *s ? atol(s) : 0;
    s = getenv("ULP_WRITE_LOG");
    if (s != NULL && *s)
        write_log = fopen(s, "a");
}

__attribute__((destructor)) static void killwrite_fini(void)
{
    const char *f = getenv("ULP_WRITE_COUNT");
    if (f == NULL || *f == '\0')
        return;
    FILE *o = fopen(f, "w");
    if (o != NULL) {
        fprintf(o, "%ld\n", (long)atomic_load(&calls));
        fclose(o);
    }
}

static ssize_t hooked(pwrite_fn *real, const char *name, int fd, const void *buf, size_t n,
                      off_t off)
{
    if (*real == NULL)
        *real = (pwrite_fn)dlsym(RTLD_NEXT, name);
    long k = atomic_fetch_add(&calls, 1) + 1;
    if (write_log != NULL) {
        fprintf(write_log, "%ld %lld %zu\n", k, (long long)off, n);
        fflush(write_log);
    }
    if (k == kill_at) {
        off_t cut = (off_t)(((uint64_t)off + n / 2) / 4096 * 4096);
        if (torn_at > 0)
            cut = (off_t)(((uint64_t)off / 4096 + (uint64_t)torn_at) * 4096);
        if ((torn || torn_at > 0) && cut > off && cut < off + (off_t)n)
            (*real)(fd, buf, (size_t)(cut - off), off);
        raise(SIGKILL);
    }
    return (*real)(fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off);

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static pwrite_fn real;
    return hooked(&real, "pwrite", fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    static pwrite_fn real;
    return hooked(&real, "pwrite64", fd, buf, n, off);
}
