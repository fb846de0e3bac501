/* Reading input files (file_read.h). */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Checks the open descriptor *fd is a regular file and finds its size; closes it if not. */
static int check_regular(int *fd, size_t *size, const char *path, refenc_error *err)
{
    struct stat sb;
    int st = REFENC_OK;
    if (fstat(*fd, &sb) != 0)
        st = refenc_error_set(err, REFENC_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = refenc_error_set(err, REFENC_EIO, "%s: %s", path,
                              S_ISDIR(sb.st_mode) ? "is a directory, not a file" : "not a regular file");
    else if (sb.st_size < 0 || (uintmax_t)sb.st_size > SIZE_MAX)
        st = refenc_error_set(err, REFENC_EIO, "%s: too large to read (%jd bytes)", path,
                              (intmax_t)sb.st_size);
    if (st != REFENC_OK) {
        close(*fd);
        *fd = -1;
        return st;
    }
    *size = (size_t)sb.st_size;
    return REFENC_OK;
}

int refenc_open_regular(int *fd, size_t *size, const char *path, refenc_error *err)
{
    *size = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
     * below); it changes nothing for a regular file */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot open: %s", path, strerror(errno));
    return check_regular(fd, size, path, err);
}

int refenc_open_regular_at(int *fd, size_t *size, int at, const char *path, const char *display,
                           int *absent, refenc_error *err)
{
    *size = 0;
    if (absent != NULL)
        *absent = 0;
    if (display == NULL)
        display = path;
    *fd = openat(at, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (*fd < 0) {
        const int e = errno;
        struct stat sb;
        if (e == ENOENT && absent != NULL)
            *absent = 1;
        if (e == ELOOP && fstatat(at, path, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
            return refenc_error_set(err, REFENC_EIO, "%s: is a symbolic link, not a regular file: refusing "
                                    "to read it", display);
        return refenc_error_set(err, REFENC_EIO, "%s: cannot open: %s", display, strerror(e));
    }
    return check_regular(fd, size, display, err);
}

int refenc_read_at(int fd, void *buf, size_t n, size_t off, const char *path, refenc_error *err)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        const ssize_t r = pread(fd, p + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return refenc_error_set(err, REFENC_EIO,
                                    "%s: short read: end of file at byte %zu of %zu (did the file "
                                    "change while it was read?)",
                                    path, off + got, off + n);
        if (r < 0)
            return refenc_error_set(err, REFENC_EIO, "%s: read error at byte %zu: %s", path, off + got,
                                    strerror(errno));
        got += (size_t)r;
    }
    return REFENC_OK;
}

/* The whole of the open regular file fd of `size` bytes (read_file's contract); closes fd. */
static int read_whole(char **buf, size_t *n, int fd, size_t size, const char *path, size_t max,
                      refenc_error *err)
{
    char *b = NULL;
    int st;
    if (size > max)
        st = refenc_error_set(err, REFENC_ELIMIT, "%s: %zu bytes, more than the limit of %zu", path,
                              size, max);
    else if ((b = malloc(size + 1)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory reading its %zu bytes", path, size);
    else
        st = refenc_read_at(fd, b, size, 0, path, err);
    close(fd);
    if (st) {
        free(b);
        return st;
    }
    b[size] = '\0';
    *buf = b;
    *n = size;
    return REFENC_OK;
}

int refenc_read_file(char **buf, size_t *n, const char *path, size_t max, refenc_error *err)
{
    *buf = NULL;
    *n = 0;
    int fd;
    size_t size;
    int st = refenc_open_regular(&fd, &size, path, err);
    return st ? st : read_whole(buf, n, fd, size, path, max, err);
}

int refenc_read_file_at(char **buf, size_t *n, int at, const char *path, const char *display, size_t max,
                        int *absent, refenc_error *err)
{
    *buf = NULL;
    *n = 0;
    int fd;
    size_t size;
    int st = refenc_open_regular_at(&fd, &size, at, path, display, absent, err);
    return st ? st : read_whole(buf, n, fd, size, display != NULL ? display : path, max, err);
}
