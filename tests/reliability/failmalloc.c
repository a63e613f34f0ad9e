/*
 * failmalloc.so: an LD_PRELOAD shim that makes one allocation fail, so a
 * test can run a program with EACH of its allocations failing in turn, not
 * only where a memory limit happens to bite.
 *
 *   ULP_FAIL_MALLOC_AT=N   the N-th call (1-based) of malloc, calloc,
 *                          realloc, posix_memalign, aligned_alloc, memalign
 *                          or valloc returns NULL (ENOMEM); every other
 *                          call is served by glibc's own allocator
 *   ULP_FAIL_MALLOC_SIZE=S instead, the first of those calls that asks for
 *                          exactly S bytes fails (calloc: their product):
 *                          to reach one allocation whose size a test knows
 *                          (a buffer the size of a structure in the file)
 *                          wherever it falls in the sequence
 *   ULP_MALLOC_COUNT=F     at exit, write the number of calls to file F
 *   ULP_MALLOC_WHO=F       write to file F, at the failed call, its stack:
 *                          one line "<object path> <offset>" per frame,
 *                          innermost first, so a test can tell (with nm) a
 *                          failure met in the program's own code from one
 *                          met inside a library it links, such as HDF5's
 *                          (the file is written before the call returns:
 *                          a run that then crashes still leaves it)
 *
 * Counting starts when the shim is loaded; glibc's own internal calls to
 * malloc (strdup, fopen, ...) are counted too, as they can fail as well.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* glibc's allocator under its own names: no dlsym(), which allocates itself. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_long calls;
static long fail_at = -1;
static size_t fail_size;         /* 0: none */
static atomic_int size_done;     /* the call of fail_size bytes has failed */
static _Thread_local int t_busy; /* inside the shim: its own allocations are not counted */

__attribute__((constructor)) static void failmalloc_init(void)
{
    const char *s = getenv("ULP_FAIL_MALLOC_AT");
    /* backtrace() loads its unwinder at its first call, which allocates: now. */
    void *frame[2];
    t_busy = 1;
    backtrace(frame, 2);
    t_busy = 0;
    fail_at = s != NULL && *s ? atol(s) : -1;
    const char *z = getenv("ULP_FAIL_MALLOC_SIZE");
    fail_size = z != NULL && *z ? (size_t)strtoull(z, NULL, 10) : 0;
}

/* The failed call's stack into $ULP_MALLOC_WHO, with no allocation. */
static void write_stack(void)
{
    const char *f = getenv("ULP_MALLOC_WHO");
    if (f == NULL || *f == '\0')
        return;
    void *frame[32];
    int n = backtrace(frame, 32);
    int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    Dl_info self;
    if (dladdr((void *)write_stack, &self) == 0)
        self.dli_fbase = NULL;
    for (int i = 0; i < n; i++) {
        Dl_info info;
        char line[1200];
        int len;
        int known = dladdr((char *)frame[i] - 1, &info) != 0 && info.dli_fname != NULL;
        if (known && info.dli_fbase == self.dli_fbase)
            continue; /* the shim's own frames */
        if (known)
            len = snprintf(line, sizeof(line), "%s %lx\n", info.dli_fname,
                           (unsigned long)((char *)frame[i] - 1 - (char *)info.dli_fbase));
        else
            len = snprintf(line, sizeof(line), "? %lx\n", (unsigned long)frame[i]);
        if (len > 0 && write(fd, line, (size_t)len) < 0)
            break;
    }
    close(fd);
}

/* Writes `text` to the file named by $`var` (at exit, with no call failing). */
static void write_file(const char *var, const char *text)
{
    const char *f = getenv(var);
    if (f == NULL || *f == '\0')
        return;
    FILE *out = fopen(f, "w");
    if (out == NULL)
        return;
    fputs(text, out);
    fclose(out);
}

__attribute__((destructor)) static void failmalloc_fini(void)
{
    char text[64];
    t_busy = 1; /* stdio below must not fail, nor count */
    snprintf(text, sizeof(text), "%ld\n", atomic_load(&calls));
    write_file("ULP_MALLOC_COUNT", text);
}

/* Whether this call, for `size` bytes, is the one to fail; it leaves its stack for the test. */
static int fails(size_t size)
{
    if (t_busy)
        return 0;
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (n != fail_at && (fail_size == 0 || size != fail_size || atomic_exchange(&size_done, 1)))
        return 0;
    t_busy = 1;
    write_stack();
    t_busy = 0;
    errno = ENOMEM;
    return 1;
}

void *malloc(size_t n)
{
    return fails(n) ? NULL : __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    return fails(k * n) ? NULL : __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    return fails(n) ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (fails(n))
        return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    return fails(n) ? NULL : __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
    return fails(n) ? NULL : __libc_memalign(align, n);
}

void *valloc(size_t n)
{
    return fails(n) ? NULL : __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n);
}
