/* Output directories (out_dir.h). */
#include "out_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int refenc_out_dir_open(refenc_out_dir *d, const char *path, int lock, refenc_error *err)
{
    d->path = path;
    d->fd = -1;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot create the directory: %s", path, strerror(errno));
    d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->fd < 0) {
        const int e = errno;
        return refenc_error_set(err, REFENC_EIO, "%s: %s", path,
                                e == ENOTDIR ? "exists and is not a directory" : strerror(e));
    }
    int r;
    while (lock && (r = flock(d->fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (lock && r != 0) {
        const int e = errno;
        refenc_out_dir_close(d);
        return refenc_error_set(err, REFENC_EIO, "%s: cannot lock the directory: %s", path, strerror(e));
    }
    return REFENC_OK;
}

int refenc_out_dir_sub(const refenc_out_dir *d, const char *name, int *fd, refenc_error *err)
{
    *fd = -1;
    if (mkdirat(d->fd, name, 0777) != 0 && errno != EEXIST)
        return refenc_error_set(err, REFENC_EIO, "%s/%s: cannot create the directory: %s", d->path, name,
                                strerror(errno));
    *fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd >= 0)
        return REFENC_OK;
    const int e = errno;
    struct stat sb;
    if (fstatat(d->fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
        return refenc_error_set(err, REFENC_EIO, "%s/%s: is a symbolic link, not a directory: refusing to "
                                "write through it", d->path, name);
    return refenc_error_set(err, REFENC_EIO, "%s/%s: %s", d->path, name,
                            e == ENOTDIR ? "exists and is not a directory" : strerror(e));
}

void refenc_out_dir_close(refenc_out_dir *d)
{
    if (d->fd >= 0)
        close(d->fd); /* closing the last descriptor releases the flock */
    d->fd = -1;
}
