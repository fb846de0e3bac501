/* refenc golden: makes golden cases from the MPFR oracle, for a config (the
 * JSON `refenc run` reads) or an entry of a catalogue, with seeded or the
 * user's own weights and inputs (docs/cli.md, docs/certify.md).
 *
 *   refenc golden (--config FILE.json | --catalogue CAT.json --case NAME) [options]
 *                 (--out DIR | --out-file FILE)
 *   refenc golden list CATALOGUE
 *   refenc golden manifest CATALOGUE CASES_DIR OUT.json
 *
 * This file parses the arguments and prints; the generator is ref/golden/
 * (make.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/text.h"
#include "../golden/catalogue.h"
#include "../golden/make.h"
#include "../golden/manifest.h"
#include "../golden/parts.h"
#include "cli.h"

static const char golden_usage[] =
    "usage: refenc golden (--config FILE.json | --catalogue CAT.json --case NAME)\n"
    "                     [--weights W.safetensors] [--inputs I.safetensors] [--seed N]\n"
    "                     [--name NAME] [--description TEXT] [--outputs all|final]\n"
    "                     [--variants[=oracle|reference] | --no-variants] [--per-layer]\n"
    "                     [--shard K/N|auto]\n"
    "                     [--grad] [--threads N] [--prec P] [--quiet] (--out DIR | --out-file FILE)\n"
    "       refenc golden merge (--out DIR | --out-file FILE) PART.safetensors...\n"
    "       refenc golden list CATALOGUE.json\n"
    "       refenc golden manifest CATALOGUE.json CASES_DIR OUT.json\n"
    "\n"
    "Makes a golden case: the inputs, the parameters and the MPFR oracle's\n"
    "correctly rounded outputs of an encoder (docs/golden-format.md), for\n"
    "'refenc certify' to judge any implementation against.\n"
    "\n"
    "the case:\n"
    "  --config FILE.json   a config as 'refenc run' reads it: {\"model\": ..., \"input\": ...}\n"
    "  --catalogue CAT.json --case NAME\n"
    "                       or an entry of a catalogue (golden/catalogue.json)\n"
    "  --weights FILE       the parameters, from a safetensors file under PyTorch's\n"
    "                       state_dict names (F64, F32, F16 or BF16); otherwise seeded\n"
    "  --inputs FILE        the input, from a safetensors file (in.tokens or in.x, and\n"
    "                       optionally in.token_type_ids, in.key_padding_mask,\n"
    "                       in.positions, in.attn_mask); otherwise seeded, of the\n"
    "                       config's shape\n"
    "  --seed N             seed of the seeded weights and inputs (default 20240521;\n"
    "                       a catalogue entry has its own): values rounded to 8\n"
    "                       significant bits, exact in float16 and bfloat16\n"
    "  --name NAME          the case's name (default: the config file's, without .json)\n"
    "  --description TEXT   what the case is for (default: a summary of the config)\n"
    "what it holds:\n"
    "  --outputs all|final  every step of the forward pass (default), or only the\n"
    "                       required final output\n"
    "  (default)            bug variants for certify's diagnosis: a config's case\n"
    "                       stores the outputs of every known bug that changes them,\n"
    "                       from the double reference (with --shard, merge computes\n"
    "                       them); a catalogue entry those of its bug classes, from\n"
    "                       the oracle\n"
    "  --variants           the variants from the oracle (MPFR, 128 bits), as before:\n"
    "                       exact, slow at real sizes; the same as --variants=oracle\n"
    "  --variants=reference from the double reference: within a tenth of the float64\n"
    "                       tolerance of the oracle's (docs/verdict.md)\n"
    "  --no-variants        none (certify can then name no bug)\n"
    "  --grad               also the gradients (grad.*): the oracle's correctly\n"
    "                       rounded backward at the upstream gradient in.grad.dY,\n"
    "                       the --inputs file's or seeded (N(0, 1) from --seed, 8\n"
    "                       bits, 0 at padded positions); encoder cases of\n"
    "                       LayerNorm, MLP and biased blocks, not in parts\n"
    "  --per-layer          each layer's outputs are the exact functions of its input\n"
    "                       as the double reference computes it, stored in the case\n"
    "                       (in.layers.<i>.input): layers become independent units\n"
    "  --shard K/N          compute part K of N of the units (batch items, or layers\n"
    "                       x batch items with --per-layer) and write a part file:\n"
    "                       DIR/parts/NAME.part-K-of-N.safetensors, or --out-file;\n"
    "                       a part already there, whole and of this run's plan, is\n"
    "                       kept and nothing computed (a rerun redoes only what is\n"
    "                       missing or damaged)\n"
    "  --shard auto         in a task of a Slurm job array (sbatch --array=1-N): K is\n"
    "                       the task's index (SLURM_ARRAY_TASK_ID), N the array's size\n"
    "                       (SLURM_ARRAY_TASK_COUNT); --shard auto/N gives N, to run\n"
    "                       some tasks again (sbatch --array=3 ...)\n"
    "how:\n"
    "  --threads N          oracle threads (default: every core), and the workers of\n"
    "                       the double reference's bug variants; any N gives the\n"
    "                       same bytes\n"
    "  --prec P             the oracle's first working precision in bits, 64 to 65472\n"
    "                       (default 96 for --config, 192 for a catalogue entry; the\n"
    "                       check is at P + 64): the outputs are the same certified\n"
    "                       values, only the cost and the metadata change\n"
    "  --quiet              no progress, no summary line\n"
    "where:\n"
    "  --out DIR            write DIR/cases/NAME.safetensors and add it to\n"
    "                       DIR/manifest.json (created if absent)\n"
    "  --out-file FILE      write the case file only\n"
    "\n"
    "  merge                join the N part files of a case into the case, byte for\n"
    "                       byte the file the run without --shard writes\n"
    "  list CATALOGUE       print the catalogue's case names\n"
    "  manifest CATALOGUE CASES_DIR OUT.json\n"
    "                       write the manifest of the catalogue's cases, in its order\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error (one message on stderr; nothing\n"
    "is written)\n";

static const char merge_usage[] =
    "usage: refenc golden merge (--out DIR | --out-file FILE) [--quiet] PART.safetensors...\n"
    "\n"
    "Joins the N part files of a case ('refenc golden --shard K/N'), in any order,\n"
    "into the case: byte for byte the file the run without --shard writes. Every\n"
    "part is verified first (one plan, each shard once, every value once).\n"
    "\n"
    "  --out DIR            write DIR/cases/NAME.safetensors and add it to\n"
    "                       DIR/manifest.json (created if absent)\n"
    "  --out-file FILE      write the case file only\n"
    "  --quiet              no summary line\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error (one message naming the part\n"
    "file and the field; nothing is written)\n";

static const char manifest_usage[] =
    "usage: refenc golden manifest CATALOGUE.json CASES_DIR OUT.json\n"
    "\n"
    "Writes OUT.json, the manifest of the catalogue's cases in its order (each\n"
    "case file's name and sha256, from CASES_DIR), as refenc certify reads it.\n"
    "OUT.json may not be the catalogue or a case.\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error\n";

static const char list_usage[] =
    "usage: refenc golden list CATALOGUE.json\n"
    "\n"
    "Prints the names of the catalogue's cases, one a line, in its order.\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error\n";

/* Whether the verb's only argument asks for its usage (printed, then exit 0). */
static int verb_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
    return 0;
}

/* ---- verbs ------------------------------------------------------------------------ */

static int golden_list(const char *catalogue)
{
    refenc_error err;
    refenc_error_clear(&err);
    json_t *cat = catalogue_load(catalogue, &err);
    if (cat == NULL)
        return cli_error("golden", "%s", err.message);
    const char *name;
    for (size_t i = 0; (name = catalogue_case_name(cat, i)) != NULL; i++)
        printf("%s\n", name);
    json_decref(cat);
    return REFENC_EXIT_OK;
}

static int golden_manifest(const char *catalogue, const char *dir, const char *out)
{
    refenc_error err;
    refenc_error_clear(&err);
    if (golden_manifest_for_catalogue(catalogue, dir, out, &err) != REFENC_OK)
        return cli_error("golden", "%s", err.message);
    return REFENC_EXIT_OK;
}

static int golden_merge_cmd(int argc, char **argv)
{
    const char *out_dir = NULL, *out_file = NULL;
    int quiet = 0;
    const char **parts = calloc((size_t)argc, sizeof *parts);
    size_t n = 0;
    if (parts == NULL)
        return cli_error("golden", "out of memory");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "--out-file") == 0) {
            if (i + 1 >= argc) {
                free(parts);
                return cli_error("golden", "%s needs a value (see 'refenc golden --help')", argv[i]);
            }
            *(argv[i][5] == '-' ? &out_file : &out_dir) = argv[i + 1];
            i++;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (argv[i][0] == '-') {
            free(parts);
            return cli_error("golden", "merge: unknown option '%s' (see 'refenc golden --help')", argv[i]);
        } else {
            parts[n++] = argv[i];
        }
    }
    int rc = REFENC_EXIT_OK;
    if ((out_dir != NULL) == (out_file != NULL))
        rc = cli_error("golden", "merge: give one of --out DIR and --out-file FILE");
    else if (n == 0)
        rc = cli_error("golden", "merge: no part files given");
    if (rc == REFENC_EXIT_OK) {
        refenc_error err;
        refenc_error_clear(&err);
        if (golden_merge(parts, n, out_dir, out_file, quiet, &err) != REFENC_OK)
            rc = cli_error("golden", "merge: %s", err.message);
    }
    free(parts);
    return rc;
}

/* Sets the flag s names; returns 0 when s is not a flag. */
static int golden_flag(golden_request *a, const char *s)
{
    int *flag = strcmp(s, "--variants") == 0      ? &a->variants
                : strcmp(s, "--quiet") == 0       ? &a->quiet
                : strcmp(s, "--no-variants") == 0 ? &a->no_variants
                : strcmp(s, "--per-layer") == 0   ? &a->per_layer
                : strcmp(s, "--grad") == 0        ? &a->grad
                                                  : NULL;
    if (flag != NULL)
        *flag = 1;
    if (flag == &a->variants) /* as it always has: the oracle's variants */
        a->variants_engine = GOLDEN_VARIANTS_ORACLE;
    return flag != NULL;
}

/* Where the value of a string option goes, or NULL when s is not one. */
static const char **golden_slot(golden_request *a, const char *s)
{
    return strcmp(s, "--config") == 0        ? &a->config_path
           : strcmp(s, "--catalogue") == 0   ? &a->catalogue_path
           : strcmp(s, "--case") == 0        ? &a->case_name
           : strcmp(s, "--weights") == 0     ? &a->weights_path
           : strcmp(s, "--inputs") == 0      ? &a->inputs_path
           : strcmp(s, "--name") == 0        ? &a->name
           : strcmp(s, "--description") == 0 ? &a->description
           : strcmp(s, "--out") == 0         ? &a->out_dir
           : strcmp(s, "--out-file") == 0    ? &a->out_file
                                             : NULL;
}

/* ---- --shard auto: the shard from the Slurm job array ----------------------------- */

/* The Slurm array variable `name` as a whole number into *v, left as it is
 * when the variable is unset (an error only when required). */
static int slurm_var(const char *name, int required, uint64_t *v)
{
    const char *s = getenv(name);
    if (s == NULL)
        return required ? cli_error("golden", "--shard auto: %s is not set: auto is for a task of a Slurm "
                                              "job array (sbatch --array=1-N); elsewhere give --shard K/N",
                                    name)
                        : REFENC_EXIT_OK;
    if (!cli_parse_u64(v, s))
        return cli_error("golden", "--shard auto: %s is '%s', not a whole number", name, s);
    return REFENC_EXIT_OK;
}

/* The array's indices (SLURM_ARRAY_TASK_MIN, _MAX, _STEP), checked against N,
 * the number of shards: from 1, none past N, and with plain auto (whole)
 * exactly 1..N. */
static int slurm_array_fits(uint64_t n, int whole)
{
    uint64_t min = 1, max = n, step = 1;
    int rc = slurm_var("SLURM_ARRAY_TASK_MIN", whole, &min);
    if (rc == REFENC_EXIT_OK)
        rc = slurm_var("SLURM_ARRAY_TASK_MAX", 0, &max);
    if (rc == REFENC_EXIT_OK)
        rc = slurm_var("SLURM_ARRAY_TASK_STEP", 0, &step);
    if (rc != REFENC_EXIT_OK)
        return rc;
    if (min < 1)
        return cli_error("golden", "--shard auto: the array starts at 0 (SLURM_ARRAY_TASK_MIN): array task K "
                                   "computes shard K, so number the array from 1 (--array=1-N)");
    if (whole && (min != 1 || max != n || step != 1))
        return cli_error("golden", "--shard auto: the array is not 1-N: SLURM_ARRAY_TASK_MIN %llu, _MAX %llu, "
                                   "_STEP %llu, _COUNT %llu; auto needs a whole array (--array=1-N); to run some "
                                   "tasks of an array of N again, give --shard auto/N", (unsigned long long)min,
                         (unsigned long long)max, (unsigned long long)step, (unsigned long long)n);
    if (max > n)
        return cli_error("golden", "--shard auto/%llu: the array goes to %llu (SLURM_ARRAY_TASK_MAX), past the "
                                   "%llu shards", (unsigned long long)n, (unsigned long long)max,
                         (unsigned long long)n);
    return REFENC_EXIT_OK;
}

/* --shard auto (N: SLURM_ARRAY_TASK_COUNT) or auto/N: shard K of N, K the
 * array task's index SLURM_ARRAY_TASK_ID (docs/cli.md has the rule). */
static int golden_shard_auto(golden_request *a, const char *v)
{
    const int whole = strcmp(v, "auto") == 0;
    uint64_t n = 0, id = 0;
    if (!whole && (strncmp(v, "auto/", 5) != 0 || !cli_parse_u64(&n, v + 5) || n < 1))
        return cli_error("golden", "--shard: '%s' is not K/N with 1 <= K <= N, auto or auto/N", v);
    int rc = slurm_var("SLURM_ARRAY_TASK_ID", 1, &id);
    if (rc == REFENC_EXIT_OK && whole)
        rc = slurm_var("SLURM_ARRAY_TASK_COUNT", 1, &n);
    if (rc == REFENC_EXIT_OK && whole && n < 1)
        rc = cli_error("golden", "--shard auto: SLURM_ARRAY_TASK_COUNT is 0");
    if (rc == REFENC_EXIT_OK)
        rc = slurm_array_fits(n, whole);
    if (rc == REFENC_EXIT_OK && (id < 1 || id > n))
        rc = cli_error("golden", "--shard %s: SLURM_ARRAY_TASK_ID %llu is not a shard 1..%llu", v,
                       (unsigned long long)id, (unsigned long long)n);
    if (rc == REFENC_EXIT_OK) {
        a->shard_k = (size_t)id;
        a->shard_n = (size_t)n;
    }
    return rc;
}

/* Parses the value v of the numeric or --outputs option s. */
static int golden_value(golden_request *a, const char *s, const char *v)
{
    if (strcmp(s, "--seed") == 0) {
        if (!cli_parse_u64(&a->seed, v) || a->seed > 0xffffffffu)
            return cli_error("golden", "--seed: '%s' is not an integer in [0, 4294967295]", v);
        a->have_seed = 1;
    } else if (strcmp(s, "--shard") == 0) {
        if (strncmp(v, "auto", 4) == 0)
            return golden_shard_auto(a, v);
        if (!golden_parse_shard(v, &a->shard_k, &a->shard_n))
            return cli_error("golden", "--shard: '%s' is not K/N with 1 <= K <= N (shard K of N)", v);
    } else if (strcmp(s, "--prec") == 0) {
        if (!cli_parse_u64(&a->prec, v) || a->prec < 64 || a->prec > golden_prec_max())
            return cli_error("golden", "--prec: '%s' is not an integer in [64, %llu] (the check runs at P + 64 "
                             "bits, at most %llu)", v, (unsigned long long)golden_prec_max(),
                             (unsigned long long)golden_prec_max() + 64);
    } else if (strcmp(s, "--threads") == 0) {
        if (!cli_parse_u64(&a->threads, v) || a->threads < 1 || a->threads > 4096)
            return cli_error("golden", "--threads: '%s' is not an integer in [1, 4096]", v);
    } else if (strcmp(v, "all") == 0 || strcmp(v, "final") == 0) {
        a->final_only = strcmp(v, "final") == 0;
    } else {
        return cli_error("golden", "--outputs: '%s' is neither 'all' nor 'final'", v);
    }
    return REFENC_EXIT_OK;
}

/* Parses the options of a run into a; *help is set when the usage was printed. */
static int golden_request_parse(golden_request *a, int argc, char **argv, int *help)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(golden_usage, stdout);
            *help = 1;
            return REFENC_EXIT_OK;
        }
        if (golden_flag(a, s))
            continue;
        if (strncmp(s, "--variants=", 11) == 0) {
            const char *v = s + 11;
            if (strcmp(v, "oracle") != 0 && strcmp(v, "reference") != 0)
                return cli_error("golden", "--variants: '%s' is neither 'oracle' nor 'reference'", v);
            a->variants = 1;
            a->variants_engine = strcmp(v, "oracle") == 0 ? GOLDEN_VARIANTS_ORACLE : GOLDEN_VARIANTS_REFERENCE;
            continue;
        }
        const char **slot = golden_slot(a, s);
        const int valued = slot != NULL || strcmp(s, "--seed") == 0 || strcmp(s, "--outputs") == 0 ||
                           strcmp(s, "--threads") == 0 || strcmp(s, "--shard") == 0 ||
                           strcmp(s, "--prec") == 0;
        if (!valued)
            return cli_error("golden", "unknown option '%s' (see 'refenc golden --help')", s);
        if (++i >= argc)
            return cli_error("golden", "%s needs a value (see 'refenc golden --help')", s);
        int rc = REFENC_EXIT_OK;
        if (slot != NULL)
            *slot = argv[i];
        else
            rc = golden_value(a, s, argv[i]);
        if (rc != REFENC_EXIT_OK)
            return rc;
    }
    return REFENC_EXIT_OK;
}

/* refenc golden: dispatches list, merge and manifest, or makes a case. */
int cmd_golden(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        if (verb_help(argc - 1, argv + 1, list_usage))
            return REFENC_EXIT_OK;
        if (argc != 3)
            return cli_error("golden", "usage: refenc golden list CATALOGUE.json");
        return golden_list(argv[2]);
    }
    if (argc >= 2 && strcmp(argv[1], "merge") == 0)
        return verb_help(argc - 1, argv + 1, merge_usage) ? REFENC_EXIT_OK
                                                          : golden_merge_cmd(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "manifest") == 0) {
        if (verb_help(argc - 1, argv + 1, manifest_usage))
            return REFENC_EXIT_OK;
        if (argc != 5)
            return cli_error("golden", "usage: refenc golden manifest CATALOGUE.json CASES_DIR OUT.json");
        return golden_manifest(argv[2], argv[3], argv[4]);
    }

    golden_request a = {0};
    int help = 0;
    int rc = golden_request_parse(&a, argc, argv, &help);
    if (rc != REFENC_EXIT_OK || help)
        return rc;
    if ((a.config_path != NULL) == (a.catalogue_path != NULL))
        return cli_error("golden", "give --config FILE.json or --catalogue CAT.json --case NAME "
                                   "(see 'refenc golden --help')");
    if ((a.catalogue_path != NULL) != (a.case_name != NULL))
        return cli_error("golden", "--catalogue and --case go together");
    if ((a.out_dir != NULL) == (a.out_file != NULL))
        return cli_error("golden", "give one of --out DIR and --out-file FILE");
    if (a.variants && a.no_variants)
        return cli_error("golden", "--variants and --no-variants contradict each other: give one");
    const size_t dlen = a.description ? strlen(a.description) : 0,
                 dbad = dlen ? refenc_utf8_invalid_at((const unsigned char *)a.description, dlen) : 0;
    if (dbad < dlen) /* it goes into the case's JSON metadata, which is UTF-8 */
        return cli_error("golden", "--description: not valid UTF-8 (byte 0x%02x at byte %zu)",
                         (unsigned char)a.description[dbad], dbad);
    /* the first precision of the certification (golden/make.h): the outputs
     * are the same certified doubles at any precision */
    if (a.prec == 0)
        a.prec = golden_default_prec(&a);
    golden_outcome out;
    char *report = NULL;
    refenc_error err;
    refenc_error_clear(&err);
    if (golden_make(&a, &out, &report, &err) != REFENC_OK)
        return report != NULL ? cli_load_error("golden", report, &err) : cli_error("golden", "%s", err.message);
    if (!a.quiet)
        printf("refenc golden: %s\n", out.summary);
    return REFENC_EXIT_OK;
}
