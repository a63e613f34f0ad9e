/*
 * shrinkfile.so: an LD_PRELOAD shim for tests/python/test_adversarial.py.
 * The first fstat(2) of the file $ULP_SHRINK_PATH made after the process's
 * first pthread_create(3) (for `ulpprof diff`: once both snapshots are open
 * and checked, the comparison checking the file's size before it reads a
 * mapped dataset) returns the size it found, and the shim then truncates
 * the file to $ULP_SHRINK_SIZE bytes, as another program could at that
 * moment.  The file so shrinks under the reader between its check and its
 * read, deterministically.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
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

int fstat(int fd, struct stat *sb)
{
    static int done;
    fstat_fn real = (fstat_fn)dlsym(RTLD_NEXT, "fstat");
    int rc = real(fd, sb);
    const char *path = getenv("ULP_SHRINK_PATH"), *size = getenv("ULP_SHRINK_SIZE");
    struct stat want;
    if (!done && rc == 0 && path != NULL && size != NULL && started && stat(path, &want) == 0 &&
        want.st_ino == sb->st_ino && want.st_dev == sb->st_dev) {
        done = 1;
        if (truncate(path, (off_t)atoll(size)) != 0)
            _exit(99);
    }
    return rc;
}
