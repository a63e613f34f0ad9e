/*
 * The spool of a streamed report (report_stream.c): the formatted rows in
 * memory up to a bound, then in a temporary file.  The writers see one
 * stdio stream either way.  A temporary file cost a tenth of `ulpprof
 * diff`'s CPU on 10,000 small captures (the kernel's writes into the page
 * cache, the reads back, the truncation at close), for 1 MiB of table;
 * past the bound the memory stays flat in the capture count, as it was.
 */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bigalloc.h"
#include "report_priv.h"

/* The writers' stdio buffer: few calls into spool_write(). */
#define SPOOL_BUFFER ((size_t)64 << 10)

/* Bytes in memory before the rows go to a temporary file; ULPPROF_SPOOL_KB
 * sets it (the tests spill small reports). */
#define SPOOL_MEMORY ((size_t)2 << 20)

/* Past this, the memory grows in 2 MiB huge pages: a fresh 4 KiB page's
 * fault was a third of the cost of a table's spool (bigalloc.h). */
#define SPOOL_SMALL ((size_t)256 << 10)
#define SPOOL_HUGE  ((size_t)2 << 20)

/* Room for `need` bytes in memory: 0, or -1 (ENOMEM). */
static int reserve(ulp__spool *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : SPOOL_BUFFER;
    while (cap < need && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (cap < need)
        return -1;
    char *p;
    if (cap <= SPOOL_SMALL) {
        p = realloc(s->mem, cap);
    } else {
        cap = (need + SPOOL_HUGE - 1) / SPOOL_HUGE * SPOOL_HUGE;
        if ((p = ulp__big_alloc(cap, 0)) != NULL && s->len > 0)
            memcpy(p, s->mem, s->len);
        if (p != NULL)
            free(s->mem);
    }
    if (p == NULL)
        return -1;
    s->mem = p;
    s->cap = cap;
    return 0;
}

/* Writes n bytes to fd: 0, or -1 with errno. */
static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* What is in memory to the temporary file, which takes the rest: 0, or -1 with errno. */
static int spill(ulp__spool *s)
{
    if ((s->tmp = tmpfile()) == NULL)
        return -1;
    if (write_all(fileno(s->tmp), s->mem, s->len) != 0)
        return -1;
    free(s->mem);
    s->mem = NULL;
    s->len = s->cap = 0;
    return 0;
}

/* fopencookie's write: n bytes, or 0 with errno (then the stream's error flag). */
static ssize_t spool_write(void *cookie, const char *buf, size_t n)
{
    ulp__spool *s = cookie;
    if (s->failed)
        return 0;
    if (s->tmp == NULL && s->len + n > s->most && spill(s) != 0) {
        s->failed = errno != 0 ? errno : EIO;
        return 0;
    }
    if (s->tmp != NULL) {
        /* Straight to the descriptor: errors show at this batch's flush. */
        if (write_all(fileno(s->tmp), buf, n) != 0) {
            s->failed = errno;
            return 0;
        }
        return (ssize_t)n;
    }
    if (reserve(s, s->len + n) != 0) {
        s->failed = errno = ENOMEM;
        return 0;
    }
    memcpy(s->mem + s->len, buf, n);
    s->len += n;
    return (ssize_t)n;
}

int ulp__spool_open(ulp__spool *s)
{
    memset(s, 0, sizeof *s);
    const char *env = getenv("ULPPROF_SPOOL_KB");
    s->most = env != NULL && *env != '\0' ? (size_t)strtoull(env, NULL, 10) << 10 : SPOOL_MEMORY;
    cookie_io_functions_t io = {NULL, spool_write, NULL, NULL};
    if ((s->f = fopencookie(s, "w", io)) == NULL)
        return -1;
    setvbuf(s->f, NULL, _IOFBF, SPOOL_BUFFER);
    return 0;
}

int ulp__spool_flush(ulp__spool *s)
{
    errno = 0;
    if (fflush(s->f) != 0 || ferror(s->f)) {
        if (s->failed)
            errno = s->failed;
        return -1;
    }
    return 0;
}

FILE *ulp__spool_rewind(ulp__spool *s, const char **mem, size_t *len)
{
    if (ulp__spool_flush(s) != 0)
        return NULL;
    *mem = NULL;
    *len = 0;
    if (s->tmp == NULL) {
        *mem = s->mem != NULL ? s->mem : "";
        *len = s->len;
        if (s->back == NULL)
            s->back = fmemopen((void *)(uintptr_t)*mem, *len, "r");
        else
            rewind(s->back);
        return s->back;
    }
    return fseek(s->tmp, 0, SEEK_SET) == 0 ? s->tmp : NULL;
}

void ulp__spool_close(ulp__spool *s)
{
    if (s->f != NULL) {
        s->failed = EIO; /* nothing more to write: the rows were read */
        fclose(s->f);
    }
    if (s->back != NULL)
        fclose(s->back);
    if (s->tmp != NULL)
        fclose(s->tmp);
    free(s->mem);
    memset(s, 0, sizeof *s);
}
