/* The file a snapshot copy writes (copy_target.h). */
#include "copy_target.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

ulp_status ulp__copy_target_create(const char *path, struct stat *made, ulp_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST)
        return ulp__error(err, ULP_EINVAL, "cannot write '%s': it exists (not overwritten)", path);
    if (fd < 0 || fstat(fd, made) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return ulp__error(err, ULP_EIO, "cannot create '%s': %s", path, strerror(e));
    }
    close(fd);
    return ULP_OK;
}

void ulp__copy_target_remove(const char *path, const struct stat *made)
{
    struct stat now;
    if (stat(path, &now) == 0 && now.st_dev == made->st_dev && now.st_ino == made->st_ino)
        unlink(path);
}
