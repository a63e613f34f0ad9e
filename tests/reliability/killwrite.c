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
 *   ULP_WRITE_COUNT=F    at exit, write the number of pwrite calls to file F
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

__attribute__((constructor)) static void killwrite_init(void)
{
    const char *s = getenv("ULP_KILL_AT");
    kill_at = s != NULL && *s ? atol(s) : -1;
    s = getenv("ULP_KILL_TORN");
    torn = s != NULL && strcmp(s, "1") == 0;
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
    if (k == kill_at) {
        off_t cut = (off_t)(((uint64_t)off + n / 2) / 4096 * 4096);
        if (torn && cut > off)
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
