/*
 * shrinkfile.so: an LD_PRELOAD shim for tests/python/test_adversarial.py.
 * The first fstat(2) or pread(2) of the file $ULP_SHRINK_PATH made after
 * the process's first pthread_create(3) (for `ulpprof diff`: once both
 * snapshots are open and checked, the comparison reading a dataset, or
 * checking the file's size before it reads a mapped one) truncates the file
 * to $ULP_SHRINK_SIZE bytes, as another program could at that moment (an
 * fstat returns the size it found first).  The file so shrinks under the
 * reader between its check and its read, deterministically.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef int (*fstat_fn)(int, struct stat *);
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static volatile int started;

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    started = 1;
    return real(t, attr, fn, arg);
}

static volatile int done;

/* Truncates the file once, if `sb` (fd's status) is the file's and the threads started. */
static void maybe_shrink(const struct stat *sb)
{
    const char *path = getenv("ULP_SHRINK_PATH"), *size = getenv("ULP_SHRINK_SIZE");
    struct stat want;
    if (!done && path != NULL && size != NULL && started && stat(path, &want) == 0 &&
        want.st_ino == sb->st_ino && want.st_dev == sb->st_dev) {
        done = 1;
        if (truncate(path, (off_t)atoll(size)) != 0)
            _exit(99);
    }
}

int fstat(int fd, struct stat *sb)
{
    fstat_fn real = (fstat_fn)dlsym(RTLD_NEXT, "fstat");
    int rc = real(fd, sb);
    if (rc == 0)
        maybe_shrink(sb);
    return rc;
}

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    pread_fn real = (pread_fn)dlsym(RTLD_NEXT, "pread");
    fstat_fn real_fstat = (fstat_fn)dlsym(RTLD_NEXT, "fstat");
    struct stat sb;
    if (!done && started && real_fstat(fd, &sb) == 0)
        maybe_shrink(&sb);
    return real(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off);
}
