/* Reruns of `refenc golden --shard K/N` (docs/cli.md, "Reruns"): a run whose
 * part file is already there, whole and of the same plan, computes nothing
 * and leaves the file as it is; a part that is truncated, changed, of another
 * plan or of another shard is computed again and replaced whole, by a new
 * file renamed over it (never rewritten in place), with a line on stderr
 * naming the file and what is wrong with it.
 *
 * The truth is the first run's part: whatever was in the way, the rerun
 * leaves that file byte for byte.  That the work was skipped is seen in the
 * file itself (the same inode and modification time: nothing was written) and
 * in the summary line; that it was redone, in a new inode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "../robustness/robust.h"

/* 2 layers x 2 items: 4 units per layer (--per-layer), one per shard of 4. */
static const char config_text[] = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2},"
                                  " \"input\": {\"batch\": 2, \"seq_len\": 3, \"padding\": [0, 1]}}";

typedef struct {
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], part[RB_PATH_MAX + 32], saved[RB_PATH_MAX + 32];
} fixture;

static void setup(fixture *f)
{
    rb_tmpdir(f->dir);
    snprintf(f->cfg, sizeof f->cfg, "%s/config.json", f->dir);
    snprintf(f->part, sizeof f->part, "%s/part.safetensors", f->dir);
    snprintf(f->saved, sizeof f->saved, "%s/saved.safetensors", f->dir);
    rb_write_file(f->cfg, config_text, strlen(config_text));
}

/* refenc golden --per-layer --shard SPEC into out, exit 0; `extra` and
 * `value` (each may be NULL) added before --out-file. */
static rb_result shard(const fixture *f, const char *spec, const char *extra, const char *value, const char *out)
{
    const char *args[16] = {"refenc", "golden", "--config", f->cfg, "--per-layer", "--shard", spec,
                            "--threads", "1"};
    int n = 9;
    if (extra != NULL)
        args[n++] = extra;
    if (value != NULL)
        args[n++] = value;
    args[n++] = "--out-file";
    args[n++] = out;
    args[n] = NULL;
    rb_result r = rb_run(args);
    cr_assert_eq(r.status, 0, "--shard %s: exit %d: %s", spec, r.status, r.err);
    return r;
}

static struct stat stat_of(const char *path)
{
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "%s is not there", path);
    return sb;
}

/* Shard 2/4 made once, into f->part, and a copy of it in f->saved. */
static void first_run(fixture *f)
{
    setup(f);
    rb_result r = shard(f, "2/4", "--quiet", NULL, f->part);
    rb_result_free(&r);
    rb_copy_file(f->part, f->saved);
}

Test(golden_resume, a_whole_part_of_the_plan_is_not_computed_again, .timeout = 60)
{
    fixture f;
    first_run(&f);
    const struct stat before = stat_of(f.part);
    rb_result r = shard(&f, "2/4", NULL, NULL, f.part);
    const struct stat after = stat_of(f.part);
    cr_expect(strstr(r.out, "shard 2/4 (units 1 to 2 of 4) is already in") != NULL &&
              strstr(r.out, "nothing computed") != NULL, "the rerun does not say it skipped: %s", r.out);
    cr_expect_eq(r.err[0], '\0', "a whole part is reported as wrong: %s", r.err);
    cr_expect(before.st_ino == after.st_ino && before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
              before.st_mtim.tv_nsec == after.st_mtim.tv_nsec, "the part was written again");
    cr_expect(rb_same_file(f.part, f.saved), "the part changed");
    rb_result_free(&r);
    rb_tmpdir_remove(f.dir);
}

/* What is in the part's place before the rerun. */
typedef enum { TRUNCATED, EMPTY, BYTE_CHANGED, OTHER_PLAN, OTHER_SHARD, NOT_SAFETENSORS, A_CASE } spoil;

typedef struct {
    const char *name;
    spoil how;
    const char *says; /* in the stderr line, after the file's name */
} spoiled_case;

static void spoil_part(const fixture *f, spoil how)
{
    size_t n;
    unsigned char *b = rb_read_file(f->saved, &n);
    if (how == TRUNCATED)
        rb_write_file(f->part, b, n - 8); /* its last value lost */
    else if (how == EMPTY)
        rb_write_file(f->part, b, 0);
    else if (how == BYTE_CHANGED) { /* the last byte: a slice's value */
        b[n - 1] ^= 0x40;
        rb_write_file(f->part, b, n);
    } else if (how == NOT_SAFETENSORS)
        rb_write_file(f->part, "not a part\n", 11);
    free(b);
    rb_result r = {0};
    if (how == OTHER_PLAN)
        r = shard(f, "2/4", "--outputs", "final", f->part);
    else if (how == OTHER_SHARD)
        r = shard(f, "3/4", "--quiet", NULL, f->part);
    else if (how == A_CASE) /* the whole case: safetensors, but not a part */
        r = rb_run((const char *[]){"refenc", "golden", "--config", f->cfg, "--per-layer", "--threads", "1",
                                    "--quiet", "--out-file", f->part, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    rb_result_free(&r);
}

static const spoiled_case spoiled[] = {
    {"truncated", TRUNCATED, "end past the data buffer"},
    {"empty", EMPTY, "file is 0 bytes, too short for the 8-byte header length"},
    {"a byte of a value changed", BYTE_CHANGED, "its tensors do not have the sha256 its metadata records"},
    {"another plan (--outputs final)", OTHER_PLAN, "a part of another plan (its 'outputs' differs)"},
    {"another shard (3/4)", OTHER_SHARD, "shard 3/4, not 2/4"},
    {"not safetensors", NOT_SAFETENSORS, "header length 7021147420599021422 at byte 0 exceeds"},
    {"a golden case, not a part", A_CASE, "not a part of a golden case (__metadata__.format is 'refenc-golden', not"},
};

static void rerun_spoiled(const spoiled_case *c)
{
    fixture f;
    first_run(&f);
    spoil_part(&f, c->how);
    const struct stat before = stat_of(f.part);
    rb_result r = shard(&f, "2/4", "--quiet", NULL, f.part);
    char want[RB_PATH_MAX + 64];
    snprintf(want, sizeof want, "refenc golden: %s: ", f.part);
    cr_expect(strstr(r.err, want) == r.err && strstr(r.err, c->says) != NULL &&
              strstr(r.err, "; computing shard 2/4 again\n") != NULL && rb_count_lines(r.err) == 1,
              "%s: the rerun's stderr does not name the file and say '%s' in one line: %s", c->name, c->says,
              r.err);
    cr_expect(rb_same_file(f.part, f.saved), "%s: the part computed again is not the first run's", c->name);
    cr_expect_neq(stat_of(f.part).st_ino, before.st_ino, "%s: the part was rewritten in place, not replaced",
                  c->name);
    cr_expect(!rb_has_temporary_file(f.dir), "%s: a temporary file is left", c->name);
    rb_result_free(&r);
    rb_tmpdir_remove(f.dir);
}

Test(golden_resume, a_spoiled_part_is_computed_again_and_replaced_whole, .timeout = 90)
{
    for (size_t i = 0; i < sizeof spoiled / sizeof spoiled[0]; i++)
        rerun_spoiled(&spoiled[i]);
}

/* Under --out DIR: the rerun of every shard of the array writes nothing new
 * but the lost one, and the parts merge into the unsharded file. */
Test(golden_resume, rerunning_the_whole_array_computes_only_the_lost_part, .timeout = 90)
{
    fixture f;
    setup(&f);
    char out[RB_PATH_MAX + 32], parts[4][RB_PATH_MAX + 128], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char spec[16];
    struct stat kept[4];
    snprintf(out, sizeof out, "%s/g", f.dir);
    for (int k = 0; k < 4; k++) {
        snprintf(spec, sizeof spec, "%d/4", k + 1);
        snprintf(parts[k], sizeof parts[k], "%s/parts/config.part-%d-of-4.safetensors", out, k + 1);
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", f.cfg, "--per-layer", "--shard",
                                              spec, "--threads", "1", "--quiet", "--out", out, NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        rb_result_free(&r);
    }
    cr_assert_eq(remove(parts[2]), 0);
    for (int k = 0; k < 4; k++)
        if (k != 2)
            kept[k] = stat_of(parts[k]);
    for (int k = 0; k < 4; k++) {
        snprintf(spec, sizeof spec, "%d/4", k + 1);
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", f.cfg, "--per-layer", "--shard",
                                              spec, "--threads", "1", "--out", out, NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_expect((strstr(r.out, "already in") != NULL) == (k != 2), "shard %s: %s", spec, r.out);
        rb_result_free(&r);
    }
    for (int k = 0; k < 4; k++)
        if (k != 2)
            cr_expect(stat_of(parts[k]).st_ino == kept[k].st_ino &&
                      stat_of(parts[k]).st_mtim.tv_nsec == kept[k].st_mtim.tv_nsec, "part %d was written again",
                      k + 1);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", f.dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", f.dir);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", f.cfg, "--per-layer", "--threads", "1",
                                          "--quiet", "--out-file", whole, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "golden", "merge", "--quiet", "--out-file", merged, parts[3], parts[1],
                                parts[2], parts[0], NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(rb_same_file(merged, whole), "the parts after the rerun do not merge into the unsharded file");
    rb_result_free(&r);
    rb_tmpdir_remove(f.dir);
}

/* merge: a copy of a part under another name is a duplicate, named with
 * both files; nothing is written. */
Test(golden_resume, merge_names_a_copied_part_as_a_duplicate, .timeout = 60)
{
    fixture f;
    first_run(&f);
    char p1[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    snprintf(p1, sizeof p1, "%s/p1.safetensors", f.dir);
    snprintf(out, sizeof out, "%s/merged.safetensors", f.dir);
    rb_result r = shard(&f, "1/4", "--quiet", NULL, p1);
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "golden", "merge", "--out-file", out, p1, f.part, f.saved, NULL});
    char want[3 * RB_PATH_MAX];
    snprintf(want, sizeof want, "%s and %s are both shard 2/4", f.part, f.saved);
    rb_expect_error(&r, 2, "golden", "a copied part", (const char *[]){want, NULL});
    cr_expect(!rb_exists(out), "merge wrote its output");
    rb_result_free(&r);
    rb_tmpdir_remove(f.dir);
}
