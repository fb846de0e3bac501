/* Atomic output files (atomic_write.h). */
#include "atomic_write.h"
#include "temporaries.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ".tmp." and six random characters */
#define TMP_SUFFIX_LEN 11

/* What a file that is not regular is, for messages. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISLNK(m) ? "a symbolic link"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Six characters of [0-9A-Za-z] that nobody can predict: from getrandom, or,
 * where it fails, from the clock, the pid and a counter.  O_EXCL, not the
 * randomness, is what makes the name safe; the randomness makes a collision
 * (and a retry) rare. */
static void random_name_part(char out[7])
{
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    static unsigned counter;
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^
            (uint64_t)__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15u;
        x ^= x >> 31; /* splitmix64's finaliser: every input bit moves every output bit */
        x *= 0xBF58476D1CE4E5B9u;
        x ^= x >> 27;
    }
    for (int i = 0; i < 6; i++, x /= 62)
        out[i] = alphabet[x % 62];
    out[6] = '\0';
}

/* Blocks the termination signals in this thread (atomic_write.h). */
static void block_signals(refenc_atomic_file *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGTERM);
    a->blocked = pthread_sigmask(SIG_BLOCK, &set, &a->saved) == 0;
}

/* Splits path into its directory (opened relative to `at` as a->dirfd) and
 * its name (a->base).  The directory part is the caller's to choose: it is
 * resolved as given, symbolic links included; the name never is. */
static int open_directory(refenc_atomic_file *a, int at, const char *path, refenc_error *err)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return refenc_error_set(err, REFENC_EINVAL, "%s: names a directory, not a file", a->path);
    if (strlen(base) > REFENC_FILE_NAME_MAX)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", a->path, strerror(ENAMETOOLONG));
    memcpy(a->base, base, strlen(base) + 1);
    const size_t dir_len = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(dir_len + 2);
    if (dir == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", a->path);
    if (dir_len == 0)
        strcpy(dir, ".");
    else {
        memcpy(dir, path, dir_len);
        dir[dir_len] = '\0';
    }
    a->dirfd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int e = errno;
    free(dir);
    if (a->dirfd < 0)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot write into its directory: %s", a->path,
                                strerror(e));
    return REFENC_OK;
}

/* Creates the temporary file with a fresh name and the target's mode. */
static int create_temporary(refenc_atomic_file *a, int replaces, mode_t mode, refenc_error *err)
{
    size_t keep = strlen(a->base);
    if (keep > REFENC_FILE_NAME_MAX - TMP_SUFFIX_LEN)
        keep = REFENC_FILE_NAME_MAX - TMP_SUFFIX_LEN;
    /* reserved first: a termination signal taken by another thread between
     * the file's creation and its publication still removes it */
    const int reg = refenc_temporaries_reserve();
    if (reg < 0)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot create a temporary file: %d already open",
                                a->path, REFENC_TEMPORARIES_MAX);
    for (int attempt = 0; attempt < 100; attempt++) {
        char r[7];
        random_name_part(r);
        snprintf(a->tmp, sizeof a->tmp, "%.*s.tmp.%s", (int)keep, a->base, r);
        /* a new file gets 0666 less the umask, as the target itself would */
        a->fd = openat(a->dirfd, a->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       replaces ? 0600 : 0666);
        if (a->fd >= 0 || errno != EEXIST)
            break;
    }
    if (a->fd < 0) {
        const int e = errno;
        refenc_temporaries_release(reg);
        a->tmp[0] = '\0';
        return e == EEXIST ? refenc_error_set(err, REFENC_EIO, "%s: cannot create a temporary file: 100 names "
                                              "taken", a->path)
                           : refenc_error_set(err, REFENC_EIO, "%s: cannot create a temporary file: %s",
                                              a->path, strerror(e));
    }
    refenc_temporaries_publish(reg, a->dirfd, a->tmp);
    a->reg = reg;
    if (replaces && fchmod(a->fd, mode) != 0)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot set the mode of the temporary file: %s",
                                a->path, strerror(errno));
    return REFENC_OK;
}

int refenc_atomic_open(refenc_atomic_file *a, const char *path, refenc_error *err)
{
    return refenc_atomic_openat(a, AT_FDCWD, path, path, err);
}

int refenc_atomic_openat(refenc_atomic_file *a, int at, const char *path, const char *display,
                         refenc_error *err)
{
    memset(a, 0, sizeof *a);
    a->path = display != NULL ? display : path;
    a->dirfd = a->fd = a->reg = -1;
    if (path == NULL || *path == '\0') {
        a->path = "";
        return refenc_error_set(err, REFENC_EINVAL, "an output file name is empty");
    }
    int st = open_directory(a, at, path, err);
    struct stat sb;
    int exists = 0;
    if (st == REFENC_OK) {
        if (fstatat(a->dirfd, a->base, &sb, AT_SYMLINK_NOFOLLOW) == 0)
            exists = 1;
        else if (errno != ENOENT)
            st = refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", a->path, strerror(errno));
    }
    if (st == REFENC_OK && exists && !S_ISREG(sb.st_mode))
        st = refenc_error_set(err, REFENC_EINVAL, "%s: is %s, not a regular file: refusing to replace it",
                              a->path, file_kind(sb.st_mode));
    if (st == REFENC_OK) {
        block_signals(a);
        st = create_temporary(a, exists, exists ? sb.st_mode & 0777 : 0, err);
    }
    if (st != REFENC_OK)
        refenc_atomic_abort(a);
    return st;
}

int refenc_atomic_write(refenc_atomic_file *a, const void *buf, size_t n, refenc_error *err)
{
    const unsigned char *p = buf;
    while (n > 0) {
        const ssize_t w = write(a->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            const int e = w < 0 ? errno : EIO;
            refenc_atomic_abort(a);
            return refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", a->path, strerror(e));
        }
        p += w;
        n -= (size_t)w;
    }
    return REFENC_OK;
}

/* pwrite or pread all n bytes at offset, retrying short transfers and EINTR; 0 or the errno. */
static int transfer(int fd, unsigned char *p, size_t n, off_t offset, int writing)
{
    while (n > 0) {
        const ssize_t w = writing ? pwrite(fd, p, n, offset) : pread(fd, p, n, offset);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO; /* 0: a full disk (write) or a short file (read) */
        p += w;
        n -= (size_t)w;
        offset += w;
    }
    return 0;
}

int refenc_atomic_pwrite(refenc_atomic_file *a, const void *buf, size_t n, uint64_t offset, refenc_error *err)
{
    const int e = offset > (uint64_t)INT64_MAX - n ? EFBIG : transfer(a->fd, (unsigned char *)buf, n, (off_t)offset, 1);
    return e == 0 ? REFENC_OK : refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", a->path, strerror(e));
}

int refenc_atomic_pread(refenc_atomic_file *a, void *buf, size_t n, uint64_t offset, refenc_error *err)
{
    const int e = offset > (uint64_t)INT64_MAX - n ? EFBIG : transfer(a->fd, buf, n, (off_t)offset, 0);
    return e == 0 ? REFENC_OK : refenc_error_set(err, REFENC_EIO, "%s: cannot read back: %s", a->path, strerror(e));
}

void refenc_atomic_signals(refenc_atomic_file *a, int blocked)
{
    if (blocked && !a->blocked)
        block_signals(a);
    else if (!blocked && a->blocked) {
        pthread_sigmask(SIG_SETMASK, &a->saved, NULL);
        a->blocked = 0;
    }
}

int refenc_atomic_commit(refenc_atomic_file *a, refenc_error *err)
{
    /* the data must be on disk before the rename makes it visible */
    const char *step = "write";
    int bad = fsync(a->fd) != 0;
    int e = errno;
    if (!bad) {
        bad = close(a->fd) != 0;
        e = errno;
        a->fd = -1;
    }
    if (!bad) {
        step = "rename the temporary file to";
        bad = renameat(a->dirfd, a->tmp, a->dirfd, a->base) != 0;
        e = errno;
    }
    if (bad) {
        refenc_atomic_abort(a);
        return refenc_error_set(err, REFENC_EIO, "%s: cannot %s it: %s", a->path, step, strerror(e));
    }
    a->tmp[0] = '\0'; /* renamed: nothing to remove */
    refenc_temporaries_remove(a->reg);
    a->reg = -1;
    /* the rename itself durable; the file is complete and in place whatever
     * this says, so a failure here is not an error of the write */
    (void)fsync(a->dirfd);
    refenc_atomic_abort(a);
    return REFENC_OK;
}

void refenc_atomic_abort(refenc_atomic_file *a)
{
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    /* unlinked before it leaves the registry: a signal in between finds a
     * name already gone, never a file it does not know */
    if (a->tmp[0] != '\0' && a->dirfd >= 0)
        unlinkat(a->dirfd, a->tmp, 0);
    a->tmp[0] = '\0';
    refenc_temporaries_remove(a->reg);
    a->reg = -1;
    if (a->dirfd >= 0)
        close(a->dirfd);
    a->dirfd = -1;
    if (a->blocked)
        pthread_sigmask(SIG_SETMASK, &a->saved, NULL);
    a->blocked = 0;
}

typedef struct {
    refenc_atomic_file *a;
    refenc_error *err;
    int failed; /* a write failed (and aborted) */
} json_sink;

static int json_sink_write(const char *bytes, size_t n, void *data)
{
    json_sink *s = data;
    if (!s->failed && refenc_atomic_write(s->a, bytes, n, s->err) != REFENC_OK)
        s->failed = 1;
    return s->failed ? -1 : 0;
}

int refenc_atomic_write_json(const char *path, const json_t *doc, size_t flags, refenc_error *err)
{
    return refenc_atomic_write_json_at(AT_FDCWD, path, path, doc, flags, err);
}

int refenc_atomic_write_json_at(int at, const char *path, const char *display, const json_t *doc,
                                size_t flags, refenc_error *err)
{
    refenc_atomic_file a;
    int st = refenc_atomic_openat(&a, at, path, display, err);
    if (st)
        return st;
    json_sink s = {&a, err, 0};
    if (json_dump_callback(doc, json_sink_write, &s, flags) != 0) {
        refenc_atomic_abort(&a);
        return s.failed ? REFENC_EIO
                        : refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory writing the JSON", a.path);
    }
    return refenc_atomic_commit(&a, err);
}
