/* The encoder stack in MPFR (encoder.h), one batch item on the engine
 * (engine.h), every intermediate kept in MPFR:
 *   h = E[tokens] (sqrt(D))  or  h = x;   h = h + TT[types];   h = h + PE (sinusoidal,
 *   learned at 0..L-1, in.positions, or RoBERTa's ids);   h = LN_emb(h) if embedding_norm
 *   h = layer_i(h), i = 0 .. N-1   (layer.c; RoPE / ALiBi inside every attention)
 *   y = LN(h) if final_norm, else h   (engine.c: unit_final)
 * This file holds the embedding; the tables' rows an item reads are
 * converted exactly, at 53 bits, into the unit's table. */
#include "engine.h"

#include <string.h>

/* Adds table rows to h in every lane: row ids[l] of `src` (rows, D) goes
 * into the table's row l, then h[l,:] += table[l,:] (refenc_mpk_embedding_add). */
static void embed_add_rows(refenc_mpe_unit *u, const double *src, const int64_t *ids)
{
    const size_t L = u->L, D = u->D;
    for (size_t l = 0; l < L; l++)
        refenc_mp_set_d(u->table + l * D, src + (size_t)ids[l] * D, D);
    REFENC_MPE_LANES(u, li) {
        refenc_mpe_lane *ln = &u->lanes[li];
        refenc_mpe_inexact_begin();
        refenc_mpk_embedding_add(ln->h, ln->exact, ln->h, u->rows, u->table, 1, L, D);
        refenc_mpe_inexact_end(u, li);
    }
}

/* h = the token rows (scaled by sqrt D, or not), or the given x */
static void embed_tokens(refenc_mpe_unit *u)
{
    const refenc_input *in = u->run->in;
    const size_t L = u->L, D = u->D;
    if (u->cfg->vocab_size > 0)
        for (size_t l = 0; l < L; l++)
            refenc_mp_set_d(u->table + l * D, u->run->params->embedding + (size_t)in->tokens[u->item * L + l] * D, D);
    REFENC_MPE_LANES(u, li) {
        refenc_mpe_lane *ln = &u->lanes[li];
        refenc_mpe_inexact_begin();
        if (u->cfg->vocab_size > 0 && u->cfg->scale_embedding) {
            refenc_mpk_embedding_forward(ln->h, ln->exact, u->rows, u->table, 1, L, D,
                                         u->cfg->embedding_normalizer_dtype, &u->workers[0].ws[li]);
        } else if (u->cfg->vocab_size > 0) {
            refenc_mpk_embedding_lookup(ln->h, ln->exact, u->rows, u->table, 1, L, D);
        } else {
            refenc_mp_set_d(ln->h, in->x + u->item * L * D, L * D); /* exact: p >= 53 */
            memset(ln->exact, 1, L * D);
        }
        refenc_mpe_inexact_end(u, li);
    }
}

/* h += the positional encoding: sinusoidal, learned rows at the positions,
 * or at RoBERTa's ids */
static void embed_positions(refenc_mpe_unit *u)
{
    const refenc_config *cfg = u->cfg;
    const size_t L = u->L, D = u->D;
    if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_mpk_position_ids_roberta(u->ids, u->run->in->tokens + u->item * L, 1, L, cfg->padding_idx);
        embed_add_rows(u, u->run->params->pos_embedding, u->ids);
        return;
    }
    if (cfg->positional == REFENC_POS_LEARNED)
        for (size_t l = 0; l < L; l++)
            refenc_mp_set_d(u->table + l * D, u->run->params->pos_embedding + (size_t)u->pos[l] * D, D);
    REFENC_MPE_LANES(u, li) {
        refenc_mpe_lane *ln = &u->lanes[li];
        refenc_mpe_inexact_begin();
        if (cfg->positional == REFENC_POS_SINUSOIDAL)
            refenc_mpk_sinusoidal_forward(ln->h, ln->exact, ln->h, u->pos, 1, L, D, &u->workers[0].ws[li]);
        else if (cfg->positional == REFENC_POS_LEARNED)
            refenc_mpk_learned_pe_forward(ln->h, ln->exact, ln->h, u->rows, u->table, 1, L, D);
        refenc_mpe_inexact_end(u, li);
    }
}

int refenc_mpe_embed(refenc_mpe_unit *u)
{
    const refenc_config *cfg = u->cfg;
    const refenc_input *in = u->run->in;
    const refenc_params *p = u->run->params;
    const size_t L = u->L, D = u->D;
    embed_tokens(u);
    if (cfg->type_vocab_size > 0) /* without token types every type is 0 (u->zeros) */
        embed_add_rows(u, p->token_type_embedding, in->token_types ? in->token_types + u->item * L : u->zeros);
    embed_positions(u);
    if (cfg->embedding_norm) {
        mpfr_ptr g = u->table, b = u->table + D; /* the table's first rows: no longer needed */
        refenc_mp_set_d(g, p->embedding_norm_weight, D);
        if (p->embedding_norm_bias != NULL) /* RMSNorm and a bias-free LayerNorm have none */
            refenc_mp_set_d(b, p->embedding_norm_bias, D);
        refenc_mpe_layernorm(u, MPE_H, MPE_H, g, p->embedding_norm_bias != NULL ? b : NULL, u->emb_eps);
        REFENC_MPE_LANES(u, li)
            memset(u->lanes[li].exact, 0, L * D); /* computed: certified as any other value */
    }
    const size_t shape[2] = {L, D};
    mpfr_srcptr data[2] = {u->lanes[0].h, u->lanes[u->lanes_n - 1].h};
    if (!refenc_mpe_step(u, "embed", data, L * D, u->lanes[u->lanes_n - 1].exact, 2, shape))
        return 0;
    refenc_mpe_progress(u, "embed", 0);
    return 1;
}

/* ---- the twin ------------------------------------------------------------------------------- */

int refenc_mp_encoder_forward(double *y, const refenc_params *p, const refenc_config *cfg,
                              const refenc_input *in, const refenc_trace *trace,
                              mpfr_prec_t prec, refenc_mp_report *rep)
{
    const refenc_mp_output outs[] = {{"output", y}};
    const refenc_mp_run run = {.cfg = cfg, .params = p, .in = in, .unit_end = in->B, .prec = prec, .threads = 1};
    return refenc_mp_run_collect(&run, trace, rep, outs, 1);
}
