/* refenc golden's generator as a library: what one run makes, from the
 * request the command line (or any caller) fills in (docs/cli.md).
 *
 *   the case     a config (--config) or a catalogue entry (--catalogue, --case),
 *                seeded or with the user's own weights and inputs;
 *   the outputs  the oracle's correctly rounded steps, whole or a part of the
 *                units (--per-layer, --shard), with the bug variants;
 *   the files    the case file (--out-file), or DIR/cases/NAME.safetensors and
 *                DIR/manifest.json (--out), or a part file. */
#ifndef REFENC_GOLDEN_MAKE_H
#define REFENC_GOLDEN_MAKE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* The first precision for a config of the user's: 96 bits, two limbs; Ziv's
 * check at 160 (docs/oracle.md, "The first precision", derives why 96 bits
 * seldom repeat a unit where 80 would).  A catalogue entry's is the oracle's
 * default, 192, the precision the committed cases record. */
#define GOLDEN_CONFIG_PREC 96u

/* What computes the bug variants' outputs (docs/cli.md, `--variants`;
 * docs/diagnosis.md, "Variants from the double reference"). */
typedef enum {
    GOLDEN_VARIANTS_AUTO = 0,  /* a config: the reference; a catalogue entry: the oracle */
    GOLDEN_VARIANTS_ORACLE,    /* --variants, --variants=oracle: MPFR at 128 bits        */
    GOLDEN_VARIANTS_REFERENCE  /* --variants=reference: the double reference             */
} golden_variants_engine;

/* One run of refenc golden: the command line's options, parsed.  variants:
 * asked for (--variants[=...]); no_variants: refused (--no-variants).  With
 * neither, a config stores every variant that applies, from the reference,
 * unless it is made in parts; a catalogue entry those of its bug classes. */
typedef struct {
    const char *config_path, *catalogue_path, *case_name;
    const char *weights_path, *inputs_path;
    uint64_t seed;
    int have_seed;
    const char *name, *description;
    int final_only, variants, no_variants, quiet, per_layer;
    golden_variants_engine variants_engine;
    int grad;                  /* --grad: the oracle's gradients too (grad.h) */
    size_t shard_k, shard_n;   /* 0/0: the whole case */
    uint64_t threads, prec;    /* 0: every core; 0: golden_default_prec */
    const char *out_dir, *out_file;
} golden_request;

/* What a successful run made, in one line (no "refenc golden: " prefix). */
typedef struct {
    char summary[8192];
} golden_outcome;

/* The first working precision when the request gives none: GOLDEN_CONFIG_PREC
 * for a config, the oracle's default for a catalogue entry. */
uint64_t golden_default_prec(const golden_request *a);

/* The largest first precision a request may give: Ziv's check runs at
 * P + 64 bits and the oracle stops above its own maximum. */
uint64_t golden_prec_max(void);

/* Makes the case, or one part of it, and writes it.  Notices (a checkpoint's
 * summary, variants not stored) and the oracle's progress go to stderr unless
 * a->quiet.  On a load error *report may hold the whole report (the caller
 * frees it; model_sources.h).  Errors: REFENC_EINVAL, REFENC_EFORMAT,
 * REFENC_EIO, REFENC_ENOMEM, with err's message naming the file and field. */
int golden_make(const golden_request *a, golden_outcome *out, char **report, refenc_error *err);

#endif
