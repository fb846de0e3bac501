/* Whether an output is an input (same_file.h). */
#include "same_file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* path with its directory part resolved, into out (PATH_MAX bytes); 0 when
 * the directory cannot be resolved or the result does not fit. */
static int resolve(char *out, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    char dir[PATH_MAX], real[PATH_MAX];
    const size_t dir_len = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (dir_len >= sizeof dir)
        return 0;
    memcpy(dir, dir_len == 0 ? "." : path, dir_len == 0 ? 1 : dir_len);
    dir[dir_len == 0 ? 1 : dir_len] = '\0';
    if (realpath(dir, real) == NULL)
        return 0;
    /* a name that is "." or ".." (or empty) is a directory: resolved whole */
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return realpath(path, out) != NULL;
    const int n = snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    return n > 0 && n < PATH_MAX;
}

int refenc_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) /* one file exists, the other not (yet): writing one leaves the other */
        return 0;
    char ra[PATH_MAX], rb[PATH_MAX];
    return resolve(ra, a) && resolve(rb, b) && strcmp(ra, rb) == 0;
}

int refenc_refuse_same_file(const char *out, const char *in, const char *what, refenc_error *err)
{
    if (refenc_same_file(out, in))
        return refenc_error_set(err, REFENC_EINVAL, "%s: is the same file as the %s %s: refusing to "
                                "overwrite it", out, what, in);
    return REFENC_OK;
}
