#include "robust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/manifest.h"

const char *rb_cli(void)
{
    const char *p = getenv("REFENC_CLI");
    cr_assert(p != NULL && *p != '\0',
              "REFENC_CLI is not set: it must name the refenc program (make check sets it)");
    cr_assert(access(p, X_OK) == 0, "REFENC_CLI=%s is not an executable", p);
    return p;
}

const char *rb_fixture_dir(void)
{
    const char *d = getenv("REFENC_GOLDEN_FIXTURE");
    cr_assert(d != NULL && *d != '\0',
              "REFENC_GOLDEN_FIXTURE is not set: it must name the golden fixture directory "
              "(make check generates it and sets it)");
    char manifest[RB_PATH_MAX];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", d);
    cr_assert(access(manifest, R_OK) == 0, "%s is missing", manifest);
    return d;
}

size_t rb_count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

unsigned char *rb_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0, got;
    unsigned char *buf = malloc(cap);
    cr_assert_not_null(buf);
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            cap *= 2;
            unsigned char *bigger = realloc(buf, cap);
            cr_assert_not_null(bigger);
            buf = bigger;
        }
    }
    cr_assert(!ferror(f), "cannot read %s", path);
    fclose(f);
    buf[len] = '\0';
    if (n != NULL)
        *n = len;
    return buf;
}

int rb_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = rb_read_file(a, &na), *y = rb_read_file(b, &nb);
    const int same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

void rb_write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(bytes, 1, n, f), n, "cannot write %s", path);
    cr_assert_eq(fclose(f), 0, "cannot write %s", path);
}

void rb_text_file(char *path, size_t cap, const char *dir, const char *name, const char *text)
{
    const int n = snprintf(path, cap, "%s/%s", dir, name);
    cr_assert(n >= 0 && (size_t)n < cap, "the path %s/%s does not fit in %zu bytes", dir, name, cap);
    rb_write_file(path, text, strlen(text));
}

void rb_copy_file(const char *from, const char *to)
{
    size_t n;
    unsigned char *b = rb_read_file(from, &n);
    rb_write_file(to, b, n);
    free(b);
}

int rb_exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

void rb_tmpdir(char dir[RB_PATH_MAX])
{
    const char *base = getenv("TMPDIR");
    const int n = snprintf(dir, RB_PATH_MAX, "%s/refenc-robust-XXXXXX",
                           base != NULL && *base ? base : "/tmp");
    cr_assert(n > 0 && n < RB_PATH_MAX - 64, "TMPDIR is too long");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp(%s): %s", dir, strerror(errno));
}

static void remove_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    const struct dirent *e;
    char path[RB_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno == EISDIR)
            remove_files(path), rmdir(path);
    }
    closedir(d);
}

void rb_tmpdir_remove(const char *dir)
{
    remove_files(dir);
    rmdir(dir);
}

int rb_has_temporary_file(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int found = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        found |= strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return found;
}

static void set_address_space(uint64_t bytes)
{
    struct rlimit rl = {(rlim_t)bytes, (rlim_t)bytes};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        _exit(125);
}

/* In a coverage build the program's instrumentation writes its counters at
 * exit, and under a file-size limit it says so on stderr ("libgcov profiling
 * error: ..."): lines refenc never prints, removed so that the tests read the
 * program's own messages. */
static void drop_gcov_noise(char *err)
{
    static const char noise[] = "libgcov profiling error:";
    char *w = err;
    for (const char *line = err; *line != '\0';) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, noise, sizeof noise - 1) != 0) {
            memmove(w, line, len);
            w += len;
        }
        line += len;
    }
    *w = '\0';
}

rb_result rb_run_with(const char *const *args, const rb_run_options *opt)
{
    char dir[RB_PATH_MAX], out_path[RB_PATH_MAX + 16], err_path[RB_PATH_MAX + 16];
    const char *program = rb_cli();
    rb_tmpdir(dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    const char *argv[64];
    size_t n = 0;
    argv[n++] = program;
    for (size_t i = 1; args[i] != NULL; i++) {
        cr_assert(n < 63, "too many arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;

    /* the child's environment, built here: after fork only async-signal-safe
     * calls (no setenv, which allocates) */
    extern char **environ;
    size_t n_env = 0;
    while (environ[n_env] != NULL)
        n_env++;
    char **envp = calloc(n_env + 2, sizeof *envp);
    cr_assert_not_null(envp);
    char extra[RB_PATH_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        const size_t len = opt != NULL && opt->env_name != NULL ? strlen(opt->env_name) : 0;
        if (len == 0 || strncmp(environ[i], opt->env_name, len) != 0 || environ[i][len] != '=')
            envp[k++] = environ[i];
    }
    if (opt != NULL && opt->env_name != NULL) {
        snprintf(extra, sizeof extra, "%s=%s", opt->env_name, opt->env_value);
        envp[k++] = extra;
    }
    envp[k] = NULL;

    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        const int in = open("/dev/null", O_RDONLY);
        const int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        if (opt != NULL && opt->address_space > 0)
            set_address_space(opt->address_space);
        if (opt != NULL && opt->file_size > 0) {
            /* a write past the limit fails with EFBIG instead of killing */
            struct rlimit rl = {(rlim_t)opt->file_size, (rlim_t)opt->file_size};
            if (signal(SIGXFSZ, opt->keep_sigxfsz ? SIG_DFL : SIG_IGN) == SIG_ERR ||
                setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(125);
        }
        if (opt != NULL && opt->unprivileged && geteuid() == 0 &&
            (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(125);
        /* no hang: the alarm survives execve, and SIGALRM ends a run that
         * takes longer (the test then sees 128 + SIGALRM) */
        alarm(RB_RUN_SECONDS);
        execve(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
    int wstatus;
    cr_assert(waitpid(pid, &wstatus, 0) == pid, "waitpid: %s", strerror(errno));
    rb_result r;
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    cr_assert(r.status < 125 || r.status > 127, "could not run %s (status %d)", argv[0], r.status);
    r.out = (char *)rb_read_file(out_path, NULL);
    r.err = (char *)rb_read_file(err_path, NULL);
    drop_gcov_noise(r.err);
    unlink(out_path);
    unlink(err_path);
    rmdir(dir);
    return r;
}

rb_result rb_run(const char *const *args)
{
    return rb_run_with(args, NULL);
}

void rb_run_ok(const char *const *args)
{
    rb_result r = rb_run(args);
    cr_assert_eq(r.status, 0, "%s %s: exit %d: %s", args[1], args[2], r.status, r.err);
    rb_result_free(&r);
}

void rb_result_free(rb_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

void rb_expect_error(const rb_result *r, int status, const char *cmd, const char *what,
                     const char *const *fragments)
{
    cr_expect_eq(r->status, status, "%s: exit code %d, want %d; stderr: %s", what, r->status,
                 status, r->err);
    const size_t len = strlen(r->err);
    cr_expect(len > 0 && r->err[len - 1] == '\n' && rb_count_lines(r->err) == 1,
              "%s: stderr is not exactly one line: '%s'", what, r->err);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "refenc %s: ", cmd);
    cr_expect(strncmp(r->err, prefix, strlen(prefix)) == 0, "%s: stderr does not start with '%s': %s",
              what, prefix, r->err);
    for (size_t i = 0; fragments != NULL && fragments[i] != NULL; i++)
        cr_expect(strstr(r->err, fragments[i]) != NULL, "%s: the message lacks '%s': %s", what,
                  fragments[i], r->err);
}

void rb_fixture_case(char path[RB_PATH_MAX], const char *case_name)
{
    snprintf(path, RB_PATH_MAX, "%s/cases/%s.safetensors", rb_fixture_dir(), case_name);
    cr_assert(access(path, R_OK) == 0, "%s is missing from the fixture", path);
}

void rb_golden_dir(const char *dir, const char *case_name, char case_path[RB_PATH_MAX])
{
    char from[RB_PATH_MAX], to[RB_PATH_MAX];
    snprintf(from, sizeof from, "%s/manifest.json", rb_fixture_dir());
    snprintf(to, sizeof to, "%s/manifest.json", dir);
    rb_copy_file(from, to);
    snprintf(to, sizeof to, "%s/cases", dir);
    cr_assert(mkdir(to, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", to, strerror(errno));
    rb_fixture_case(from, case_name);
    snprintf(case_path, RB_PATH_MAX, "%s/cases/%s.safetensors", dir, case_name);
    rb_copy_file(from, case_path);
}

void rb_encoder_results(const char *dir, char results[RB_PATH_MAX + 16])
{
    char rfile[RB_PATH_MAX + 64];
    snprintf(results, RB_PATH_MAX + 16, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    const char *encoders[] = {"encoder_pre_rope", "encoder_post_alibi6", "encoder_causal_learned"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(rfile, sizeof rfile, "%s/%s.safetensors", results, encoders[i]);
        rb_reference_results(encoders[i], rfile);
    }
}

void rb_golden_relist(const char *dir, const char *case_name)
{
    char manifest[RB_PATH_MAX], case_path[RB_PATH_MAX], hex[65];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    snprintf(case_path, sizeof case_path, "%s/cases/%s.safetensors", dir, case_name);
    json_error_t jerr;
    json_t *m = json_load_file(manifest, 0, &jerr);
    cr_assert_not_null(m, "%s: %s", manifest, jerr.text);
    size_t n, i;
    unsigned char *bytes = rb_read_file(case_path, &n);
    refenc_sha256_hex(hex, bytes, n);
    free(bytes);
    json_t *e;
    int found = 0;
    json_array_foreach(json_object_get(m, "cases"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "case")), case_name) != 0)
            continue;
        json_object_set_new(e, "sha256", json_string(hex));
        json_object_set_new(e, "bytes", json_integer((json_int_t)n));
        found = 1;
    }
    cr_assert(found, "%s does not list %s", manifest, case_name);
    cr_assert_eq(json_dump_file(m, manifest, JSON_INDENT(2) | JSON_SORT_KEYS), 0);
    json_decref(m);
}

void rb_reference_results(const char *case_name, const char *path)
{
    char golden[RB_PATH_MAX];
    rb_fixture_case(golden, case_name);
    const char *args[] = {"refenc", "run", "--case", golden, "--out", path, NULL};
    rb_result r = rb_run(args);
    cr_assert_eq(r.status, 0, "refenc run --case %s: exit %d: %s", golden, r.status, r.err);
    rb_result_free(&r);
}

uint64_t rb_header_length(const unsigned char *buf, size_t n)
{
    cr_assert(n >= 8, "a safetensors file of %zu bytes", n);
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--)
        N = N << 8 | buf[i];
    return N;
}

void rb_write_safetensors(const char *path, const char *header, const void *data, size_t n_data)
{
    const size_t h = strlen(header);
    unsigned char *buf = malloc(8 + h + n_data + 1);
    cr_assert_not_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    if (n_data > 0)
        memcpy(buf + 8 + h, data, n_data);
    rb_write_file(path, buf, 8 + h + n_data);
    free(buf);
}

/* ---- golden files, edited ------------------------------------------------------- */

static void *own(rb_golden *g, void *p)
{
    cr_assert_not_null(p, "out of memory");
    cr_assert_lt(g->n_owned, sizeof g->owned / sizeof g->owned[0], "too many edits");
    g->owned[g->n_owned++] = p;
    return p;
}

void rb_golden_load(rb_golden *g, const char *case_name)
{
    char path[RB_PATH_MAX];
    rb_fixture_case(path, case_name);
    rb_golden_load_file(g, path);
}

void rb_golden_load_file(rb_golden *g, const char *path)
{
    memset(g, 0, sizeof *g);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_leq(f.n_tensors, (size_t)RB_MAX_TENSORS);
    for (size_t i = 0; i < f.n_tensors; i++) {
        const refenc_st_tensor *t = &f.tensors[i];
        refenc_st_entry *e = &g->e[g->n++];
        e->name = own(g, strdup(t->name));
        e->dtype = t->dtype;
        e->ndim = t->ndim;
        memcpy(e->shape, t->shape, sizeof e->shape);
        void *data = own(g, malloc(t->nbytes ? t->nbytes : 1));
        memcpy(data, t->data, t->nbytes);
        e->data = data;
    }
    g->meta = json_deep_copy(f.metadata);
    cr_assert_not_null(g->meta);
    refenc_st_free(&f);
}

static refenc_st_entry *find_entry(rb_golden *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->e[i].name, name) == 0)
            return &g->e[i];
    return NULL;
}

refenc_st_entry *rb_golden_entry(rb_golden *g, const char *name)
{
    refenc_st_entry *e = find_entry(g, name);
    cr_assert_not_null(e, "no tensor '%s' in the golden case", name);
    return e;
}

void rb_golden_set_meta(rb_golden *g, const char *key, const char *value)
{
    if (value == NULL)
        json_object_del(g->meta, key);
    else
        cr_assert_eq(json_object_set_new(g->meta, key, json_string(value)), 0);
}

void rb_golden_set_config(rb_golden *g, const char *key, const char *json_value)
{
    json_t *cfg = json_loads(json_string_value(json_object_get(g->meta, "config")), 0, NULL);
    cr_assert_not_null(cfg, "the case has no config");
    if (json_value == NULL) {
        json_object_del(cfg, key);
    } else {
        json_t *v = json_loads(json_value, JSON_DECODE_ANY, NULL);
        cr_assert_not_null(v, "'%s' is not JSON", json_value);
        json_object_set_new(cfg, key, v);
    }
    char *text = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
    rb_golden_set_meta(g, "config", text);
    free(text);
    json_decref(cfg);
}

void rb_golden_drop(rb_golden *g, const char *name)
{
    refenc_st_entry *e = rb_golden_entry(g, name);
    *e = g->e[--g->n];
}

void rb_golden_rename(rb_golden *g, const char *from, const char *to)
{
    rb_golden_entry(g, from)->name = own(g, strdup(to));
}

void *rb_golden_reshape(rb_golden *g, const char *name, refenc_st_dtype dtype, size_t ndim,
                        const size_t *shape)
{
    refenc_st_entry *e = find_entry(g, name);
    if (e == NULL) {
        cr_assert_lt(g->n, (size_t)RB_MAX_TENSORS);
        e = &g->e[g->n++];
        e->name = own(g, strdup(name));
    }
    size_t n = refenc_st_dtype_size(dtype);
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    e->dtype = dtype;
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    void *data = own(g, calloc(n ? n : 1, 1));
    e->data = data;
    return data;
}

void *rb_golden_data(rb_golden *g, const char *name)
{
    refenc_st_entry *e = rb_golden_entry(g, name);
    size_t n = refenc_st_dtype_size(e->dtype);
    for (size_t d = 0; d < e->ndim; d++)
        n *= e->shape[d];
    void *copy = own(g, malloc(n ? n : 1));
    memcpy(copy, e->data, n);
    e->data = copy;
    return copy;
}

void rb_golden_write(const rb_golden *g, const char *path)
{
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, g->e, g->n, g->meta, &err), REFENC_OK, "%s", err.message);
}

void rb_golden_free(rb_golden *g)
{
    for (size_t i = 0; i < g->n_owned; i++)
        free(g->owned[i]);
    json_decref(g->meta);
    memset(g, 0, sizeof *g);
}
