/* The file-system layer beside the atomic writer (ref/io/, docs/cli.md
 * "Files"), one rule per test: a termination signal taken by any thread
 * removes the live temporary files; a handler the program set is left to
 * it; two outputs that do not exist yet are compared by resolved path; a
 * path over PATH_MAX is an error, never a shorter path; the rule of names
 * that become file names; files inside an output directory are opened
 * without following links and without blocking; the directory lock
 * excludes a second holder. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../common/testutil.h"

#include "../../ref/io/atomic_write.h"
#include "../../ref/io/file_names.h"
#include "../../ref/io/file_read.h"
#include "../../ref/io/out_dir.h"
#include "../../ref/io/same_file.h"
#include "../../ref/io/temporaries.h"

/* How many entries of dir have ".tmp." in their name. */
static size_t temporaries_in(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    size_t t = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        t += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return t;
}

/* ---- temporaries removed on a termination signal in any thread ---------------------- */

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* In a child: an idle thread with the signals unblocked (as an OpenMP
 * worker after the oracle's run), the main thread mid-write (the writer
 * blocks the termination signals in it), then sig sent to the process: the
 * kernel gives it to the idle thread.  Returns the signal that ended the
 * child (0 if it exited). */
static int process_signal_mid_write(const char *path, int sig)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, NULL);
        pthread_t t;
        if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
            _exit(5);
        refenc_atomic_file a;
        refenc_error err;
        if (refenc_atomic_open(&a, path, &err) != REFENC_OK || refenc_atomic_write(&a, "new", 3, &err) != REFENC_OK)
            _exit(3);
        kill(getpid(), sig);
        /* the other thread takes it and the process ends; give it 5 s */
        const struct timespec wait = {5, 0};
        nanosleep(&wait, NULL);
        _exit(4);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    return WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
}

Test(temporaries, a_signal_taken_by_another_thread_removes_the_temporary)
{
    char dir[PATH_MAX], path[PATH_MAX], buf[64] = "";
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t k = 0; k < 4; k++) {
        test_tmpdir(dir, "fs");
        test_join(path, dir, "out.txt");
        test_put(path, "old");
        cr_expect_eq(process_signal_mid_write(path, sigs[k]), sigs[k], "signal %d did not end the process by it",
                     sigs[k]);
        cr_expect_eq(temporaries_in(dir), 0, "signal %d taken by another thread: a temporary file is left", sigs[k]);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
        fclose(f);
        cr_expect_str_eq(buf, "old", "signal %d: the target changed", sigs[k]);
        test_rmdir(dir);
    }
}

static void own_handler(int sig)
{
    (void)sig;
}

Test(temporaries, a_disposition_the_program_chose_is_left_to_it)
{
    char dir[PATH_MAX], path[PATH_MAX];
    refenc_error err;
    test_tmpdir(dir, "fs");
    test_join(path, dir, "out.txt");
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* ignored SIGINT (a background job), an own SIGTERM handler */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, own_handler);
        refenc_atomic_file a;
        if (refenc_atomic_open(&a, path, &err) != REFENC_OK || refenc_atomic_commit(&a, &err) != REFENC_OK)
            _exit(3);
        struct sigaction si, st;
        sigaction(SIGINT, NULL, &si);
        sigaction(SIGTERM, NULL, &st);
        _exit(si.sa_handler == SIG_IGN && st.sa_handler == own_handler ? 0 : 1);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the writer changed a disposition the program set");
    test_rmdir(dir);
}

static int add(const char *name)
{
    const int i = refenc_temporaries_reserve();
    if (i >= 0)
        refenc_temporaries_publish(i, AT_FDCWD, name);
    return i;
}

Test(temporaries, the_registry_takes_entries_back_and_is_bounded)
{
    int idx[REFENC_TEMPORARIES_MAX];
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++)
        cr_assert_geq(idx[i] = add("never-created.tmp.x"), 0, "entry %d", i);
    cr_expect_eq(add("one-too-many"), -1);
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++)
        refenc_temporaries_remove(idx[i]);
    /* every entry free again */
    const int again = add("x");
    cr_expect_geq(again, 0);
    refenc_temporaries_remove(again);
    /* a reservation given back without a file frees its entry too */
    const int r = refenc_temporaries_reserve();
    cr_assert_geq(r, 0);
    refenc_temporaries_release(r);
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++)
        cr_assert_geq(idx[i] = add("y"), 0, "entry %d after a release", i);
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++)
        refenc_temporaries_remove(idx[i]);
}

/* The window the threaded golden test hit under load: a worker takes the
 * signal after the writer created its temporary file and before it
 * published the name.  The handler waits for the reserved entry, so the file
 * is still removed.  Control: unlinking before the reservation is published
 * and without waiting (the old order, create then add) leaves it. */
typedef struct {
    int started;
} race;

static void *handler_thread(void *arg)
{
    race *r = arg;
    __atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
    refenc_temporaries_unlink_all();
    return NULL;
}

Test(temporaries, a_signal_between_creation_and_publication_still_removes_the_file)
{
    char dir[PATH_MAX], file[PATH_MAX];
    test_tmpdir(dir, "fs");
    test_join(file, dir, "case.tmp.race");
    const int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dirfd, 0);
    const int i = refenc_temporaries_reserve();
    cr_assert_geq(i, 0);
    const int fd = openat(dirfd, "case.tmp.race", O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    race r = {0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, handler_thread, &r), 0);
    while (!__atomic_load_n(&r.started, __ATOMIC_ACQUIRE))
        ;
    usleep(50000); /* the "handler" is now waiting for the entry */
    refenc_temporaries_publish(i, dirfd, "case.tmp.race");
    pthread_join(t, NULL);
    cr_expect(access(file, F_OK) != 0, "the temporary created before its publication was left");
    close(fd);
    /* control: a file created and not yet in the registry at all is left
     * (what the old order, create then add, gave a handler in that window) */
    const int fd2 = openat(dirfd, "case.tmp.late", O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd2, 0);
    refenc_temporaries_unlink_all();
    test_join(file, dir, "case.tmp.late");
    cr_expect(access(file, F_OK) == 0, "control: an unregistered file was removed: the test cannot tell");
    close(fd2);
    close(dirfd);
    test_rmdir(dir);
}

/* ---- outputs compared with inputs and with each other ------------------------------------ */

Test(same_file, outputs_not_yet_written_are_compared_by_resolved_path)
{
    char dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX], sub[PATH_MAX], c[PATH_MAX + 16], d[PATH_MAX + 16];
    test_tmpdir(dir, "fs");
    test_join(a, dir, "x.json");
    snprintf(c, sizeof c, "%s/./x.json", dir);
    cr_assert_eq(mkdir(test_join(sub, dir, "sub"), 0700), 0);
    snprintf(d, sizeof d, "%s/sub/../x.json", dir);
    cr_expect(refenc_same_file(a, c), "dir/x.json and dir/./x.json, neither existing");
    cr_expect(refenc_same_file(a, d), "dir/x.json and dir/sub/../x.json, neither existing");
    /* controls: another name; one that exists and one that does not */
    cr_expect(!refenc_same_file(a, test_join(b, dir, "y.json")));
    test_put(b, "y");
    cr_expect(!refenc_same_file(a, b));
    /* existing: by device and inode, through a link */
    test_put(a, "x");
    cr_expect(refenc_same_file(a, d));
    char link[PATH_MAX];
    cr_assert_eq(symlink(a, test_join(link, dir, "link")), 0);
    cr_expect(refenc_same_file(link, a));
    refenc_error err;
    cr_expect_eq(refenc_refuse_same_file(d, a, "--json certificate", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "is the same file as the --json certificate"), "%s", err.message);
    test_rmdir(dir);
}

/* ---- names and paths ---------------------------------------------------------------------- */

Test(file_names, the_rule_of_names_that_become_file_names)
{
    const char *good[] = {"a", "enc_gelu-2", "a.b", "A9._-", "x.safetensors"};
    const char *bad[] = {"", ".", "..", ".hidden", "a..b", "../x", "a/b", "/abs", "a\\b", "a b", "caf\xc3\xa9",
                         "a\nb", "a*"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        cr_expect(refenc_file_name_ok(good[i]), "'%s' refused", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect(!refenc_file_name_ok(bad[i]), "'%s' accepted", bad[i]);
    char longest[REFENC_SAFE_NAME_MAX + 2];
    memset(longest, 'n', sizeof longest);
    longest[REFENC_SAFE_NAME_MAX] = '\0';
    cr_expect(refenc_file_name_ok(longest));
    longest[REFENC_SAFE_NAME_MAX] = 'n';
    longest[REFENC_SAFE_NAME_MAX + 1] = '\0';
    cr_expect(!refenc_file_name_ok(longest));
}

Test(file_names, a_path_that_does_not_fit_is_an_error_not_a_shorter_path)
{
    char dir[PATH_MAX - 8], path[PATH_MAX];
    memset(dir, 'd', sizeof dir - 1);
    dir[sizeof dir - 1] = '\0';
    refenc_error err;
    /* PATH_MAX - 9 bytes + "/x" fits, + "/manifest.json" (14 bytes) does not */
    cr_expect_eq(refenc_path_format(path, sizeof path, &err, "%s/x", dir), REFENC_OK);
    cr_expect_eq(strlen(path), sizeof dir + 1);
    cr_expect_eq(refenc_path_format(path, sizeof path, &err, "%s/manifest.json", dir), REFENC_ELIMIT);
    cr_expect_str_eq(path, "", "a cut path is left in the buffer");
    char want[64];
    snprintf(want, sizeof want, "path too long (%zu bytes, longer than the limit of %d)", sizeof dir - 1 + 14,
             PATH_MAX - 1);
    cr_expect(strstr(err.message, want), "%s", err.message);
}

/* ---- inside an output directory ---------------------------------------------------------- */

Test(out_dir, files_inside_are_opened_without_following_links_or_blocking)
{
    char dir[PATH_MAX], victim[PATH_MAX], p[PATH_MAX];
    refenc_error err;
    test_tmpdir(dir, "fs");
    test_put(test_join(victim, dir, "victim.json"), "{}");
    cr_assert_eq(symlink(victim, test_join(p, dir, "link.json")), 0);
    cr_assert_eq(mkfifo(test_join(p, dir, "fifo.json"), 0600), 0);
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dfd, 0);
    char *text;
    size_t n;
    int absent;
    cr_expect_eq(refenc_read_file_at(&text, &n, dfd, "link.json", "D/link.json", 100, &absent, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "D/link.json: is a symbolic link, not a regular file"), "%s", err.message);
    cr_expect_eq(absent, 0);
    cr_expect_eq(refenc_read_file_at(&text, &n, dfd, "fifo.json", "D/fifo.json", 100, &absent, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "D/fifo.json: not a regular file"), "%s", err.message);
    cr_expect_eq(refenc_read_file_at(&text, &n, dfd, "none.json", "D/none.json", 100, &absent, &err), REFENC_EIO);
    cr_expect_eq(absent, 1, "a missing file is not reported as absent");
    /* control: the victim itself is read */
    cr_assert_eq(refenc_read_file_at(&text, &n, dfd, "victim.json", NULL, 100, &absent, &err), REFENC_OK,
                 "%s", err.message);
    cr_expect_str_eq(text, "{}");
    free(text);
    close(dfd);
    test_rmdir(dir);
}

Test(out_dir, a_link_where_a_subdirectory_goes_is_refused)
{
    char dir[PATH_MAX], elsewhere[PATH_MAX], p[PATH_MAX];
    refenc_error err;
    test_tmpdir(dir, "fs");
    test_tmpdir(elsewhere, "fs");
    cr_assert_eq(symlink(elsewhere, test_join(p, dir, "cases")), 0);
    refenc_out_dir d;
    int fd;
    cr_assert_eq(refenc_out_dir_open(&d, dir, 0, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(refenc_out_dir_sub(&d, "cases", &fd, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "/cases: is a symbolic link, not a directory"), "%s", err.message);
    cr_expect_eq(fd, -1);
    /* control: a real subdirectory is made and opened */
    cr_expect_eq(refenc_out_dir_sub(&d, "parts", &fd, &err), REFENC_OK, "%s", err.message);
    cr_expect_geq(fd, 0);
    close(fd);
    refenc_out_dir_close(&d);
    test_rmdir(dir);
    test_rmdir(elsewhere);
}

Test(out_dir, the_lock_excludes_a_second_holder_until_released)
{
    char dir[PATH_MAX];
    refenc_error err;
    test_tmpdir(dir, "fs");
    refenc_out_dir d;
    cr_assert_eq(refenc_out_dir_open(&d, dir, 1, &err), REFENC_OK, "%s", err.message);
    /* another open file description (another process would have one) */
    const int other = open(dir, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(other, 0);
    cr_expect_eq(flock(other, LOCK_EX | LOCK_NB), -1, "the directory was not locked");
    cr_expect_eq(errno, EWOULDBLOCK);
    refenc_out_dir_close(&d);
    cr_expect_eq(flock(other, LOCK_EX | LOCK_NB), 0, "the lock was not released");
    close(other);
    test_rmdir(dir);
}
