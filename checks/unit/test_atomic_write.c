/* The atomic writer (ref/io/atomic_write.h) and the input opener
 * (ref/io/file_read.h), one rule per test: only a regular file (or nothing)
 * is replaced; a file or link planted at the temporary's name is never
 * followed; the mode is what the target would get; a path near PATH_MAX
 * works; a write past a file-size limit or a signal mid-write leaves the old
 * file and no temporary; an output is never an input; inputs must be
 * regular files and a FIFO never blocks.
 *
 * The test binary is linked with --wrap=getrandom (scripts/make/harden.mk):
 * a test can choose the "random" part of the temporary's name, to plant a
 * link exactly there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../common/testutil.h"

#include "../../ref/io/atomic_write.h"
#include "../../ref/io/file_read.h"

/* ---- the "random" bytes, chosen by a test ------------------------------------ */

static int forced_calls;      /* how many calls still return forced_value */
static uint64_t forced_value;

ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
    if (forced_calls > 0 && n == sizeof forced_value) {
        forced_calls--;
        memcpy(buf, &forced_value, n);
        return (ssize_t)n;
    }
    return __real_getrandom(buf, n, flags);
}

/* The six characters the writer derives from x (its alphabet and order,
 * written out again here from the documented name format). */
static void name_part(char out[7], uint64_t x)
{
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    for (int i = 0; i < 6; i++, x /= 62)
        out[i] = alphabet[x % 62];
    out[6] = '\0';
}

/* ---- helpers -------------------------------------------------------------------- */

/* The file's text (at most 255 bytes), "" if it cannot be read. */
static const char *get(char buf[256], const char *path)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        buf[fread(buf, 1, 255, f)] = '\0';
        fclose(f);
    }
    return buf;
}

/* Entries of dir other than . and .., and how many have ".tmp." in their name. */
static size_t entries(const char *dir, size_t *temporaries)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    size_t n = 0, t = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        t += strstr(e->d_name, ".tmp.") != NULL;
    }
    closedir(d);
    if (temporaries != NULL)
        *temporaries = t;
    return n;
}

/* Writes text to path through the atomic writer. */
static int write_text(const char *path, const char *text, refenc_error *err)
{
    refenc_atomic_file a;
    int st = refenc_atomic_open(&a, path, err);
    if (st == REFENC_OK)
        st = refenc_atomic_write(&a, text, strlen(text), err);
    return st == REFENC_OK ? refenc_atomic_commit(&a, err) : st;
}

/* ---- what is replaced --------------------------------------------------------- */

Test(atomic_write, a_new_file_and_a_replaced_one_hold_exactly_the_bytes)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[256];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "out.txt");
    cr_assert_eq(write_text(path, "first version\n", &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(get(buf, path), "first version\n");
    cr_assert_eq(write_text(path, "second\n", &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(get(buf, path), "second\n");
    size_t tmps;
    cr_expect_eq(entries(dir, &tmps), 1);
    cr_expect_eq(tmps, 0, "a temporary file is left");
    test_rmdir(dir);
}

Test(atomic_write, only_a_regular_file_or_nothing_is_replaced)
{
    char dir[PATH_MAX], path[PATH_MAX], victim[PATH_MAX], buf[256];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_join(victim, dir, "victim.txt");
    test_put(victim, "victim\n");

    /* a symbolic link: neither replaced nor written through */
    test_join(path, dir, "link");
    cr_assert_eq(symlink(victim, path), 0);
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "link: is a symbolic link, not a regular file: refusing to replace it"),
              "%s", err.message);
    cr_expect_str_eq(get(buf, victim), "victim\n");
    struct stat sb;
    cr_expect(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");

    /* a dangling link, a directory, a FIFO, a socket */
    test_join(path, dir, "dangling");
    cr_assert_eq(symlink("/nonexistent/target", path), 0);
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "is a symbolic link"), "%s", err.message);
    test_join(path, dir, "sub");
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "sub: is a directory, not a regular file"), "%s", err.message);
    test_join(path, dir, "fifo");
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "fifo: is a FIFO, not a regular file"), "%s", err.message);
    test_join(path, dir, "sock");
    const int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const int fits = strlen(path) < sizeof addr.sun_path;
    if (fits)
        memcpy(addr.sun_path, path, strlen(path) + 1);
    if (s >= 0 && fits && bind(s, (struct sockaddr *)&addr, sizeof addr) == 0) {
        cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
        cr_expect(strstr(err.message, "sock: is a socket, not a regular file"), "%s", err.message);
    }
    if (s >= 0)
        close(s);
    /* a character device: made where the system lets us (root, no seccomp) */
    test_join(path, dir, "null");
    if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) == 0) {
        cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
        cr_expect(strstr(err.message, "null: is a character device, not a regular file"), "%s", err.message);
    } else {
        cr_log_info("mknod: %s: the device case is covered by /dev/null below", strerror(errno));
    }
    cr_expect_eq(write_text("/dev/null", "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "/dev/null: is a character device"), "%s", err.message);

    /* names that are directories */
    cr_expect_eq(write_text("", "x", &err), REFENC_EINVAL);
    test_join(path, dir, "sub/");
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "names a directory, not a file"), "%s", err.message);
    test_join(path, dir, "..");
    cr_expect_eq(write_text(path, "x", &err), REFENC_EINVAL);
    size_t tmps;
    entries(dir, &tmps);
    cr_expect_eq(tmps, 0, "a temporary file is left");
    test_rmdir(dir);
}

/* ---- the temporary file ---------------------------------------------------------- */

Test(atomic_write, a_link_planted_at_the_temporary_name_is_never_followed)
{
    char dir[PATH_MAX], path[PATH_MAX], victim[PATH_MAX], planted[PATH_MAX], name[64], part[7], buf[256];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "report.json");
    test_join(victim, dir, "victim.txt");
    test_put(victim, "victim\n");
    forced_value = 0x123456789abcdefu;
    name_part(part, forced_value);
    snprintf(name, sizeof name, "report.json.tmp.%s", part);
    cr_assert_eq(symlink(victim, test_join(planted, dir, name)), 0);

    /* the first name drawn is the planted link's: O_EXCL refuses it and
     * another name is drawn */
    forced_calls = 1;
    cr_assert_eq(write_text(path, "certificate\n", &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(forced_calls, 0, "the forced name was not drawn: the test tests nothing");
    cr_expect_str_eq(get(buf, victim), "victim\n", "the write went through the planted link");
    cr_expect_str_eq(get(buf, path), "certificate\n");
    struct stat sb;
    cr_expect(lstat(planted, &sb) == 0 && S_ISLNK(sb.st_mode), "the planted link was removed or replaced");

    /* every name taken: an error, nothing written, nothing removed */
    unlink(path);
    forced_calls = 1000;
    cr_expect_eq(write_text(path, "certificate\n", &err), REFENC_EIO);
    cr_expect(strstr(err.message, "cannot create a temporary file: 100 names taken"), "%s", err.message);
    forced_calls = 0;
    cr_expect_eq(access(path, F_OK), -1);
    cr_expect_str_eq(get(buf, victim), "victim\n");
    cr_expect(lstat(planted, &sb) == 0 && S_ISLNK(sb.st_mode));
    test_rmdir(dir);
}

Test(atomic_write, the_mode_is_what_the_target_would_get)
{
    char dir[PATH_MAX], path[PATH_MAX];
    refenc_error err;
    struct stat sb;
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "new.txt");
    umask(022);
    cr_assert_eq(write_text(path, "a", &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0644, "a new file under umask 022: mode %o", sb.st_mode & 0777);
    unlink(path);
    umask(077);
    cr_assert_eq(write_text(path, "a", &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0600, "a new file under umask 077: mode %o", sb.st_mode & 0777);
    /* a replaced file keeps its permission bits, whatever the umask */
    cr_assert_eq(chmod(path, 0640), 0);
    cr_assert_eq(write_text(path, "b", &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0640, "a replaced 0640 file: mode %o", sb.st_mode & 0777);
    cr_assert_eq(chmod(path, 0444), 0);
    cr_assert_eq(write_text(path, "c", &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0444, "a replaced read-only file: mode %o", sb.st_mode & 0777);
    test_rmdir(dir);
}

/* A path of exactly `len` bytes (PATH_MAX - 1 at most) ending in a file name
 * of 250 bytes, in directories made under dir. */
static void long_path(char *path, size_t len, const char *dir)
{
    char seg[201];
    memset(seg, 'd', 200);
    seg[200] = '\0';
    size_t n = (size_t)snprintf(path, PATH_MAX, "%s", dir);
    while (len - n > 1 + 255 + 1 + 250) {
        n += (size_t)snprintf(path + n, PATH_MAX - n, "/%s", seg);
        cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir: %s", strerror(errno));
    }
    /* one last directory of the right length, then the name */
    const size_t last = len - n - 1 - 250 - 1;
    cr_assert(last >= 1 && last <= 255);
    path[n++] = '/';
    memset(path + n, 'e', last);
    n += last;
    path[n] = '\0';
    cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir: %s", strerror(errno));
    path[n++] = '/';
    memset(path + n, 'f', 250);
    n += 250;
    path[n] = '\0';
    cr_assert_eq(strlen(path), len);
}

Test(atomic_write, a_path_of_path_max_minus_one_bytes_works)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[256];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    long_path(path, PATH_MAX - 1, dir);
    cr_assert_eq(write_text(path, "old\n", &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(write_text(path, "new\n", &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(get(buf, path), "new\n");
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(path, '/') - path), path);
    size_t tmps;
    cr_expect_eq(entries(parent, &tmps), 1);
    cr_expect_eq(tmps, 0);
    test_rmdir(dir);
}

/* In a child: RLIMIT_FSIZE of 64 bytes, SIGXFSZ ignored (as refenc does),
 * and a 4 kB write to path over an old file.  Exits 0 if the write failed
 * with EFBIG's message (or one cut before it), 1 otherwise. */
static int write_past_a_limit(const char *path)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {64, 64};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        char big[4096];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        refenc_error err;
        const int st = write_text(path, big, &err);
        /* a message naming a path of 4095 bytes is cut before the reason */
        const int said = strstr(err.message, ": cannot write: File too large") != NULL ||
                         strlen(err.message) > REFENC_ERRMSG_MAX - 8;
        if (st != REFENC_EIO || !said)
            fprintf(stderr, "the write gave status %d: %s\n", st, err.message);
        _exit(st == REFENC_EIO && said ? 0 : 1);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws), "the child was killed by signal %d", WTERMSIG(ws));
    return WEXITSTATUS(ws);
}

Test(atomic_write, a_write_past_a_file_size_limit_keeps_the_old_file)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[256];
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "out.txt");
    test_put(path, "old\n");
    cr_expect_eq(write_past_a_limit(path), 0, "the write did not fail with EFBIG's message");
    cr_expect_str_eq(get(buf, path), "old\n");
    size_t tmps;
    cr_expect_eq(entries(dir, &tmps), 1);
    cr_expect_eq(tmps, 0, "a temporary file is left");
    test_rmdir(dir);

    /* the same at a path of PATH_MAX - 1 bytes, where "<path>.tmp.<pid>"
     * would not fit and a temporary named like the target would delete it */
    test_tmpdir(dir, "atomic");
    long_path(path, PATH_MAX - 1, dir);
    test_put(path, "old\n");
    cr_expect_eq(write_past_a_limit(path), 0);
    cr_expect_str_eq(get(buf, path), "old\n", "the old file at a long path was lost");
    test_rmdir(dir);
}

/* In a child: open the writer on path, write "new", raise sig (blocked
 * until the writer is done), then commit (or abort).  Returns the signal
 * that ended the child. */
static int signal_mid_write(const char *path, int sig, int commit)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* the default action, whatever the test runner inherited (a shell
         * starts background jobs with SIGINT and SIGQUIT ignored) */
        signal(sig, SIG_DFL);
        refenc_atomic_file a;
        refenc_error err;
        if (refenc_atomic_open(&a, path, &err) != REFENC_OK || refenc_atomic_write(&a, "new", 3, &err) != REFENC_OK)
            _exit(3);
        raise(sig);
        /* still here: the signal waits for the temporary file to be gone */
        if (commit)
            refenc_atomic_commit(&a, &err);
        else
            refenc_atomic_abort(&a);
        _exit(4); /* not reached: the signal is delivered when the mask is restored */
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFSIGNALED(ws), "the child exited with %d instead of being killed", WEXITSTATUS(ws));
    return WTERMSIG(ws);
}

Test(atomic_write, a_signal_mid_write_takes_effect_after_the_temporary_is_gone)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[256];
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t k = 0; k < 4; k++) {
        for (int commit = 0; commit < 2; commit++) {
            test_tmpdir(dir, "atomic");
            test_join(path, dir, "out.txt");
            test_put(path, "old");
            cr_expect_eq(signal_mid_write(path, sigs[k], commit), sigs[k]);
            cr_expect_str_eq(get(buf, path), commit ? "new" : "old", "signal %d, commit %d", sigs[k], commit);
            size_t tmps;
            cr_expect_eq(entries(dir, &tmps), 1);
            cr_expect_eq(tmps, 0, "signal %d, commit %d: a temporary file is left", sigs[k], commit);
            test_rmdir(dir);
        }
    }
}

Test(atomic_write, the_signal_mask_is_restored)
{
    char dir[PATH_MAX], path[PATH_MAX];
    refenc_error err;
    sigset_t before, after;
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "out.txt");
    cr_assert_eq(pthread_sigmask(SIG_SETMASK, NULL, &before), 0);
    cr_assert_eq(write_text(path, "a", &err), REFENC_OK);
    cr_assert_eq(write_text(dir, "a", &err), REFENC_EINVAL); /* a failed open too */
    cr_assert_eq(pthread_sigmask(SIG_SETMASK, NULL, &after), 0);
    cr_expect(!sigismember(&after, SIGINT) && !sigismember(&after, SIGTERM));
    for (int s = 1; s < 32; s++)
        cr_expect_eq(sigismember(&before, s), sigismember(&after, s), "signal %d", s);
    test_rmdir(dir);
}

Test(atomic_write, json_documents_and_their_errors)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[256];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_join(path, dir, "c.json");
    json_t *doc = json_pack("{s:i}", "a", 1);
    cr_assert_eq(refenc_atomic_write_json(path, doc, JSON_COMPACT, &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(get(buf, path), "{\"a\":1}");
    cr_expect_eq(refenc_atomic_write_json(dir, doc, JSON_COMPACT, &err), REFENC_EINVAL);
    json_decref(doc);
    test_rmdir(dir);
}

Test(atomic_write, an_output_is_never_an_input)
{
    char dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX], hard[PATH_MAX], dotted[PATH_MAX + 8];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_put(test_join(a, dir, "a"), "a");
    test_put(test_join(b, dir, "b"), "b");
    cr_assert_eq(link(a, test_join(hard, dir, "hard")), 0);
    snprintf(dotted, sizeof dotted, "%s/./a", dir);
    cr_expect_eq(refenc_refuse_same_file(a, a, "golden case", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, ": is the same file as the golden case ") &&
                  strstr(err.message, ": refusing to overwrite it"),
              "%s", err.message);
    cr_expect_eq(refenc_refuse_same_file(dotted, a, "input", &err), REFENC_EINVAL);
    cr_expect_eq(refenc_refuse_same_file(hard, a, "input", &err), REFENC_EINVAL);
    /* controls: another file, an output that does not exist yet */
    cr_expect_eq(refenc_refuse_same_file(b, a, "input", &err), REFENC_OK);
    test_join(b, dir, "absent");
    cr_expect_eq(refenc_refuse_same_file(b, a, "input", &err), REFENC_OK);
    test_rmdir(dir);
}

/* ---- inputs ----------------------------------------------------------------------- */

Test(file_read, only_regular_files_are_read_and_a_fifo_never_blocks)
{
    char dir[PATH_MAX], path[PATH_MAX];
    refenc_error err;
    char *text;
    size_t n;
    test_tmpdir(dir, "atomic");
    test_put(test_join(path, dir, "f.json"), "{\"x\": 1}");
    cr_assert_eq(refenc_read_file(&text, &n, path, 100, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(n, 8);
    cr_expect_str_eq(text, "{\"x\": 1}");
    free(text);
    /* over the limit: nothing read */
    cr_expect_eq(refenc_read_file(&text, &n, path, 7, &err), REFENC_ELIMIT);
    cr_expect(strstr(err.message, "f.json: 8 bytes, more than the limit of 7"), "%s", err.message);
    cr_expect_null(text);
    /* a FIFO with no writer: refused at once (the test would hang otherwise) */
    test_join(path, dir, "fifo");
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_eq(refenc_read_file(&text, &n, path, 100, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "fifo: not a regular file"), "%s", err.message);
    cr_expect_eq(refenc_read_file(&text, &n, dir, 100, &err), REFENC_EIO);
    cr_expect(strstr(err.message, ": is a directory, not a file"), "%s", err.message);
    cr_expect_eq(refenc_read_file(&text, &n, "/dev/zero", 100, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "/dev/zero: not a regular file"), "%s", err.message);
    test_join(path, dir, "absent");
    cr_expect_eq(refenc_read_file(&text, &n, path, 100, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "absent: cannot open: No such file or directory"), "%s", err.message);
    test_rmdir(dir);
}

Test(file_read, a_file_that_shrinks_while_read_is_a_short_read)
{
    char dir[PATH_MAX], path[PATH_MAX];
    refenc_error err;
    test_tmpdir(dir, "atomic");
    test_put(test_join(path, dir, "f"), "0123456789");
    int fd;
    size_t size;
    cr_assert_eq(refenc_open_regular(&fd, &size, path, &err), REFENC_OK);
    cr_expect_eq(size, 10);
    cr_assert_eq(truncate(path, 4), 0);
    char buf[10];
    cr_expect_eq(refenc_read_at(fd, buf, 10, 0, path, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "short read: end of file at byte 4 of 10"), "%s", err.message);
    cr_expect_eq(refenc_read_at(fd, buf, 2, 2, path, &err), REFENC_OK);
    cr_expect(memcmp(buf, "23", 2) == 0);
    close(fd);
    test_rmdir(dir);
}

Test(file_read, a_file_opened_as_descriptor_0_is_read)
{
    /* a program started with its standard input closed gets descriptor 0
     * from its first open: a valid one */
    char dir[PATH_MAX], path[PATH_MAX];
    test_tmpdir(dir, "atomic");
    test_put(test_join(path, dir, "f"), "zero");
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(0);
        char *text;
        size_t n;
        refenc_error err;
        const int st = refenc_read_file(&text, &n, path, 100, &err);
        _exit(st == REFENC_OK && n == 4 && strcmp(text, "zero") == 0 ? 0 : 1);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "a file on descriptor 0 was not read");
    test_rmdir(dir);
}
