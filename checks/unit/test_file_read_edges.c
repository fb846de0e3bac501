/* The reader's edges (ref/io/file_read.c) that no other suite reaches: an
 * empty regular file reads as zero bytes (it is not "too large"); a missing
 * file is reported absent and a present one that cannot be opened is not;
 * a file opened as descriptor 0 (standard input closed) is a file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/file_read.h"

static void make_dir(char dir[PATH_MAX])
{
    snprintf(dir, PATH_MAX, "%s/refenc-fread-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

Test(file_read, an_empty_file_reads_as_zero_bytes)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    make_dir(dir);
    snprintf(path, sizeof path, "%s/empty", dir);
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    close(fd);
    char *buf = NULL;
    size_t n = 7;
    refenc_error err;
    cr_expect_eq(refenc_read_file(&buf, &n, path, 100, &err), 0, "%s", err.message);
    cr_expect_eq(n, 0);
    free(buf);
    unlink(path);
    rmdir(dir);
}

Test(file_read, a_missing_file_is_absent_and_a_link_is_not)
{
    char dir[PATH_MAX], link[PATH_MAX + 16];
    make_dir(dir);
    const int at = open(dir, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(at, 0);
    int fd = -1, absent = -1;
    size_t size;
    refenc_error err;
    cr_expect_neq(refenc_open_regular_at(&fd, &size, at, "missing", NULL, &absent, &err), 0);
    cr_expect_eq(absent, 1, "a missing file is not reported absent");
    /* control: a link (refused, never followed) is there: not absent */
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(symlink("missing", link), 0);
    absent = -1;
    cr_expect_neq(refenc_open_regular_at(&fd, &size, at, "link", NULL, &absent, &err), 0);
    cr_expect_eq(absent, 0, "a link is reported absent");
    cr_expect_str_eq(err.message, "link: is a symbolic link, not a regular file: refusing to read it");
    unlink(link);
    close(at);
    rmdir(dir);
}

Test(file_read, a_file_opened_at_a_directory_as_descriptor_0_is_read)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    make_dir(dir);
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("abc", f);
    fclose(f);
    const int saved = dup(0);
    cr_assert_geq(saved, 0);
    close(0); /* the next descriptor opened is 0 */
    int fd = -1;
    size_t size = 0;
    refenc_error err;
    const int at = AT_FDCWD;
    const int st = refenc_open_regular_at(&fd, &size, at, path, NULL, NULL, &err);
    const int got = fd;
    if (st == 0 && fd != 0)
        close(fd);
    dup2(saved, 0); /* also closes the file if it was 0 */
    close(saved);
    cr_expect_eq(st, 0, "%s", err.message);
    cr_expect_eq(got, 0, "the file was not opened as descriptor 0 (the test tests nothing)");
    cr_expect_eq(size, 3);
    unlink(path);
    rmdir(dir);
}
