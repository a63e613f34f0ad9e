/* The writer's HDF5 failures: silenced printing, and one message per failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "writer_h5err.h"

void ulp__h5_quiet_begin(ulp__h5_quiet *q)
{
    if (H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data) < 0) {
        q->fn = NULL;
        q->data = NULL;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void ulp__h5_quiet_end(const ulp__h5_quiet *q)
{
    H5Eset_auto2(H5E_DEFAULT, q->fn, q->data);
}

static herr_t walk_innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    char *buf = data;
    if (n == 0 && e->desc != NULL)
        snprintf(buf, 256, "%s", e->desc);
    return 0;
}

/*
 * The innermost message of this thread's HDF5 error stack, shortened to the
 * system's "error message = '...'" when it carries one (the low-level
 * drivers report errno that way).  Call right after the failing HDF5 call:
 * the next API call clears the stack.
 */
void ulp__h5_detail(char *out, size_t size)
{
    char buf[256] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_innermost, buf);
    const char *key = "error message = '";
    const char *p = strstr(buf, key);
    if (p != NULL) {
        p += strlen(key);
        const char *end = strchr(p, '\'');
        int len = end != NULL ? (int)(end - p) : (int)strlen(p);
        snprintf(out, size, "%.*s", len, p);
    } else if (buf[0] != '\0') {
        snprintf(out, size, "%s", buf);
    } else {
        snprintf(out, size, "HDF5 error");
    }
}

ulp_status ulp__h5_fail(ulp_error *err, int fd, const char *path, const char *what)
{
    char detail[256];
    ulp__h5_detail(detail, sizeof(detail));
    /* HDF5 passes errno on only as text: a full disk (or quota, or file-size
     * limit) is told apart from other I/O errors by its message. */
    ulp_status st = strcmp(detail, strerror(ENOSPC)) == 0 || strcmp(detail, strerror(EFBIG)) == 0 ||
                            strcmp(detail, strerror(EDQUOT)) == 0
                        ? ULP_ENOSPC
                        : ULP_EIO;
    /*
     * A full disk (not a file-size limit, under which HDF5's retries below
     * the limit complete the file): HDF5 must not write to the file again.  Its retries (the
     * close flushes what the failed flush could not) wrote parts of new
     * metadata into the last free blocks and left a file HDF5 itself could
     * no longer open (1 of 10 fill levels of a 256 KiB tmpfs).  HDF5's
     * descriptor becomes a read-only one on the same file: reads still
     * work, writes fail, and the file stays as the last good flush and the
     * journal left it.
     */
    int disk = strcmp(detail, strerror(ENOSPC)) == 0 || strcmp(detail, strerror(EDQUOT)) == 0;
    if (disk && fd >= 0) {
        int ro = open(path, O_RDONLY | O_CLOEXEC);
        if (ro >= 0) {
            if (dup2(ro, fd) >= 0)
                fcntl(fd, F_SETFD, FD_CLOEXEC);
            close(ro);
        }
    }
    return ulp__error(err, st, "cannot %s in '%s': %s", what, path, detail);
}
