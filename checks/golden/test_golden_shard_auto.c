/* `refenc golden --shard auto` and `--shard auto/N`: the shard from the Slurm
 * job array the run is a task of (docs/cli.md).  Array task K computes shard
 * K; N is the array's size (auto: the array must be 1-N) or given (auto/N,
 * for running some tasks again).
 *
 * The truth is the explicit `--shard K/N` run, a different code path: the
 * part a task writes with auto must be that file byte for byte, and the auto
 * parts must merge into the unsharded file.  Every inconsistent or missing
 * variable is refused (exit 2, one line, nothing written).  Each test runs in
 * its own process (Criterion forks), so the variables set here go to the
 * program it runs and no further. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../robustness/robust.h"

/* The array variables a task sees, in this order; NULL: unset. */
static const char *const slurm_names[5] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                                           "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"};

static void slurm_env(const char *const v[5])
{
    for (int i = 0; i < 5; i++) {
        if (v[i] != NULL)
            cr_assert_eq(setenv(slurm_names[i], v[i], 1), 0);
        else
            cr_assert_eq(unsetenv(slurm_names[i]), 0);
    }
}

/* The variables Slurm sets for task `id` of the array min-max (step 1). */
static void slurm_task(int id, int min, int max)
{
    char s[4][16];
    snprintf(s[0], sizeof s[0], "%d", id);
    snprintf(s[1], sizeof s[1], "%d", max - min + 1);
    snprintf(s[2], sizeof s[2], "%d", min);
    snprintf(s[3], sizeof s[3], "%d", max);
    slurm_env((const char *const[5]){s[0], s[1], s[2], s[3], "1"});
}

/* 2 layers x 2 items: 4 units per layer, one per shard of 4. */
static const char config_text[] = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2},"
                                  " \"input\": {\"batch\": 2, \"seq_len\": 3, \"padding\": [0, 1]}}";

static void setup_dir(char *dir, char *cfg, size_t cap)
{
    rb_tmpdir(dir);
    snprintf(cfg, cap, "%s/config.json", dir);
    rb_write_file(cfg, config_text, strlen(config_text));
}

/* The part of `spec` (K/N, auto or auto/N) in path. */
static void part(const char *cfg, const char *spec, const char *path)
{
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard", spec, "--threads", "1",
                            "--quiet", "--out-file", path, NULL});
}

/* Each task of the array 1-4 with auto writes the part K/4 does, and the four
 * merge into the unsharded file; auto/4 in a rerun of task 3 alone writes 3/4. */
Test(golden_shard_auto, array_tasks_write_the_parts_of_their_index, .timeout = 90)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char autos[5][RB_PATH_MAX + 32], fixed[RB_PATH_MAX + 32], spec[16];
    setup_dir(dir, cfg, sizeof cfg);
    for (int k = 1; k <= 4; k++) {
        snprintf(autos[k], sizeof autos[k], "%s/auto%d.safetensors", dir, k);
        snprintf(fixed, sizeof fixed, "%s/fixed%d.safetensors", dir, k);
        snprintf(spec, sizeof spec, "%d/4", k);
        slurm_env((const char *const[5]){NULL, NULL, NULL, NULL, NULL});
        part(cfg, spec, fixed);
        slurm_task(k, 1, 4);
        part(cfg, "auto", autos[k]);
        cr_expect(rb_same_file(autos[k], fixed), "task %d of the array 1-4: --shard auto is not --shard %s", k, spec);
    }
    slurm_env((const char *const[5]){NULL, NULL, NULL, NULL, NULL});
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--quiet", "--out-file", whole, NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--quiet", "--out-file", merged, autos[1], autos[2], autos[3],
                            autos[4], NULL});
    cr_expect(rb_same_file(whole, merged), "the parts of --shard auto do not merge into the unsharded file");
    /* a rerun of task 3 alone (sbatch --array=3), N given */
    char rerun[RB_PATH_MAX + 32];
    snprintf(rerun, sizeof rerun, "%s/rerun3.safetensors", dir);
    slurm_task(3, 3, 3);
    part(cfg, "auto/4", rerun);
    cr_expect(rb_same_file(rerun, autos[3]), "task 3 run again with --shard auto/4 is not part 3/4");
    /* negative control: the comparison tells parts apart (task 2's part is not 1/4's) */
    slurm_env((const char *const[5]){NULL, NULL, NULL, NULL, NULL});
    snprintf(fixed, sizeof fixed, "%s/fixed1.safetensors", dir);
    cr_expect(!rb_same_file(autos[2], fixed), "the parts 2/4 and 1/4 are the same file");
    rb_tmpdir_remove(dir);
}

/* A missing or inconsistent variable: exit 2, one line naming it, nothing written. */
Test(golden_shard_auto, missing_or_inconsistent_variables_are_refused, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    setup_dir(dir, cfg, sizeof cfg);
    snprintf(out, sizeof out, "%s/part.safetensors", dir);
    static const struct {
        const char *what, *spec, *env[5], *fragment;
    } cases[] = {
        {"not in Slurm", "auto", {NULL, NULL, NULL, NULL, NULL}, "SLURM_ARRAY_TASK_ID is not set"},
        {"no count", "auto", {"2", NULL, "1", "4", "1"}, "SLURM_ARRAY_TASK_COUNT is not set"},
        {"no min", "auto", {"2", "4", NULL, "4", "1"}, "SLURM_ARRAY_TASK_MIN is not set"},
        {"id not a number", "auto", {"two", "4", "1", "4", "1"}, "SLURM_ARRAY_TASK_ID is 'two', not a whole number"},
        {"count negative", "auto", {"2", "-4", "1", "4", "1"}, "SLURM_ARRAY_TASK_COUNT is '-4'"},
        {"count 0", "auto", {"2", "0", "1", "4", "1"}, "SLURM_ARRAY_TASK_COUNT is 0"},
        {"array from 0", "auto", {"0", "4", "0", "3", "1"}, "the array starts at 0"},
        {"array from 0, auto/N", "auto/4", {"1", "4", "0", "3", "1"}, "the array starts at 0"},
        {"a rerun of task 3 with auto", "auto", {"3", "1", "3", "3", "1"}, "give --shard auto/N"},
        {"array with a step", "auto", {"3", "2", "1", "3", "2"}, "_STEP 2"},
        {"id past the array", "auto", {"5", "4", "1", "4", "1"}, "SLURM_ARRAY_TASK_ID 5 is not a shard 1..4"},
        {"id past N", "auto/4", {"5", "1", "5", "5", "1"}, "the array goes to 5"},
        {"id past N, no max", "auto/4", {"5", NULL, NULL, NULL, NULL}, "SLURM_ARRAY_TASK_ID 5 is not a shard 1..4"},
        {"array past N", "auto/4", {"2", "6", "1", "6", "1"}, "the array goes to 6 (SLURM_ARRAY_TASK_MAX), past"},
        {"auto/0", "auto/0", {"1", "1", "1", "1", "1"}, "--shard: 'auto/0' is not K/N"},
        {"auto/x", "auto/x", {"1", "1", "1", "1", "1"}, "auto or auto/N"},
        {"autoz", "autoz", {"1", "1", "1", "1", "1"}, "auto or auto/N"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slurm_env(cases[i].env);
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard",
                                              cases[i].spec, "--out-file", out, NULL});
        rb_expect_error(&r, 2, "golden", cases[i].what, (const char *[]){cases[i].fragment, NULL});
        rb_result_free(&r);
        cr_expect(!rb_exists(out), "%s: %s was written", cases[i].what, out);
    }
    /* negative control: the same command in a consistent task is accepted */
    slurm_task(2, 1, 4);
    part(cfg, "auto", out);
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}
