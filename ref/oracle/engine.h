/* The oracle's one forward engine (engine.c), as the blocks see it; not part
 * of the public API (oracle.h: refenc_mp_run).
 *
 * The engine evaluates a unit (one batch item of the encoder, of one layer,
 * or of one block) in one or two lanes: one lane at the working precision
 * (a bug variant's outputs, rounded once), or two lanes at p_lo and p_hi in
 * lockstep, every step certified with Ziv's test as soon as both are
 * computed.  A block is written once, on the item's buffers, with its rows or
 * heads handed to the threads by refenc_mpe_rows / refenc_mpe_heads; the
 * schedule of the blocks (encoder.c, layer.c) is written once for every
 * placement and family.
 *
 * Buffers of a lane, one item's (L rows):
 *   h (L, D)            the hidden state: the block's input and the residual
 *   a (L, D)            a LayerNorm's output (Pre-LN's sublayer input)
 *   t (L, D)            a sublayer's output, in q's memory: born in
 *                       out_proj, when the queries are dead
 *   q (H, L, Dh)        the heads' queries
 *   k, v (Hkv, L, Dh)   the key/value heads' keys, values (query head h
 *                       reads key/value head h / (H / Hkv): gqa.h)
 *   ctx (L, E)          the heads' contexts, merged (E = H Dh)
 *   hid (L, F)          the FFN's activations, only when a run reports them
 */
#ifndef REFENC_ORACLE_ENGINE_H
#define REFENC_ORACLE_ENGINE_H

#include "internal.h"

enum { MPE_H, MPE_A, MPE_T, MPE_CTX, MPE_HID };

/* One item's values at one precision. */
typedef struct {
    mpfr_prec_t p;
    mpfr_ptr h, a, t, q, k, v, ctx, hid, slopes; /* slopes (H): ALiBi's */
    unsigned char *exact; /* (L, D): which values of "embed" are exact */
    int inexact;          /* an inexact operation has happened in this unit */
} refenc_mpe_lane;

/* What each thread works with, at each lane's precision. */
typedef struct {
    refenc_mp_ws ws[2];
    mpfr_ptr weights[2]; /* (L, L): one head's attention weights */
    mpfr_ptr out[2];     /* (L, Dh): one head's context          */
    mpfr_ptr hidden[2];  /* (F), gated (2F): one row of the FFN   */
    mpfr_t t, u;         /* 64 bits, for Ziv's test              */
} refenc_mpe_worker;

/* One layer's parameters as the blocks take them: doubles, their spans
 * and fixed-point rows (dot.c), and the LayerNorms' (D) at 53 bits. */
typedef struct {
    const refenc_layer_params *lp;
    mpfr_ptr ln; /* (4 D) norm1 weight, bias, norm2 weight, bias */
    refenc_mp_wspan in_span, out_span, l1_span, l2_span;
    mpfr_ptr qkn;  /* (2 Dh) q_norm, k_norm weights (qk_norm 'rms'), or NULL */
    size_t qkn_n;  /* its length: 2 Dh, or 0 */
} refenc_mpe_layer;

typedef struct refenc_mpe_unit refenc_mpe_unit;
struct refenc_mpe_unit {
    const refenc_mp_run *run;
    const refenc_config *cfg;
    size_t B, L, D, H, Dh, F, N;
    size_t Hkv, E, W;                /* key/value heads; E = H Dh; W = max(D, E) */
    size_t Lseq;                     /* the sequence length: every key and value.  L is
                                      * the rows a step computes: Lseq, or R once the
                                      * last layer of a rows run has selected its query
                                      * rows (refenc_mpe_select_rows) */
    size_t Lq;                       /* the query rows a head's buffers hold: Lseq, or
                                      * R in a unit that runs only the rows' last layer */
    const int64_t *qrows;            /* (R) once selected: query row r is position
                                      * index qrows[r]; NULL: row l is position l */
    int kv_ready;                    /* k, v hold every position (selected rows) */
    int threads, lanes_n;            /* lanes_n: 1 (one evaluation) or 2 (certified) */
    refenc_mpe_lane lanes[2];
    refenc_mpe_worker *workers;
    mpfr_ptr eps, tau, base, mask;   /* 53 bits; mask (L, L) or NULL */
    mpfr_ptr emb_eps;                /* 53 bits: the embedding LayerNorm's eps */
    mpfr_ptr base_local, base_global; /* 53 bits: the RoPE bases of the two layer
                                      * types (mha.c); NULL without a pattern */
    mpfr_ptr scalar, cap;            /* 53 bits: query_pre_attn_scalar and
                                      * attn_logit_softcapping; NULL when unset */
    mpfr_ptr table;                  /* (max(L, 2), D) at 53 bits: rows of a table */
    int64_t *rows;                   /* (L) 0 .. L-1: the rows of table */
    int64_t *zeros, *ids;            /* (L): token types 0; RoBERTa's position ids */
    const int64_t *pos;
    size_t item, layer;
    double *dbl;                     /* a step's doubles: max(L D, H L L, L F) */
    refenc_mpe_layer *lm;            /* the layer being run */
    int failed;                      /* a value was not certified: fail says which */
    int oom;                         /* a block's fixed-point weights found no memory */
    char fail[REFENC_ERRMSG_MAX];
    double done, total;              /* progress, in multiply-adds */
    size_t unit, units;
};

/* buffer MPE_* of lane li */
mpfr_ptr refenc_mpe_buf(refenc_mpe_unit *u, int li, int which);

/* fn(u, li, row, w, arg) on every row of every lane, shared by the threads;
 * each lane's inexact flag gathers what its rows raised.  `work` (in
 * multiply-adds) is reported as progress of step when step is not NULL. */
typedef void (*refenc_mpe_row_fn)(refenc_mpe_unit *u, int li, size_t row, refenc_mpe_worker *w,
                                  const void *arg);
void refenc_mpe_rows(refenc_mpe_unit *u, size_t n, refenc_mpe_row_fn fn, const void *arg,
                     const char *step, double work);

/* fn(u, h, w) for every head, each head's lanes in one thread (so that its
 * attention weights can be certified there). */
typedef void (*refenc_mpe_head_fn)(refenc_mpe_unit *u, size_t h, refenc_mpe_worker *w, void *arg);
void refenc_mpe_heads(refenc_mpe_unit *u, refenc_mpe_head_fn fn, void *arg);

/* for every lane li of the unit (one thread: the embedding's steps) */
#define REFENC_MPE_LANES(u, li) for (int li = 0; li < (u)->lanes_n; li++)
/* Work on lane li between these two: MPFR's inexact flag, cleared by
 * begin, is gathered into the lane's by end. */
void refenc_mpe_inexact_begin(void);
void refenc_mpe_inexact_end(refenc_mpe_unit *u, int li);

/* Whether the run wants step. */
int refenc_mpe_wanted(const refenc_mpe_unit *u, const char *step);

/* The step's values (n, in every lane at data[li]) certified (two lanes) or
 * rounded (one) and emitted; 0 if a value is not certified (the unit is
 * evaluated again).  exact_v: per value exactness of the last lane, or NULL. */
int refenc_mpe_step(refenc_mpe_unit *u, const char *step, mpfr_srcptr const *data, size_t n,
                    const unsigned char *exact_v, size_t ndim, const size_t *shape);
/* The same for buffer `which` of shape (L, D), or (L, F) for MPE_HID. */
int refenc_mpe_step_buf(refenc_mpe_unit *u, const char *step, int which);

/* One value of a head's weights: certified into dst (two lanes) or rounded
 * (one); 0 if not certified. */
int refenc_mpe_value(refenc_mpe_unit *u, refenc_mpe_worker *w, mpfr_srcptr const *v, int exact,
                     double *dst);

/* Progress: step finished, `work` more multiply-adds done. */
void refenc_mpe_progress(refenc_mpe_unit *u, const char *step, double work);

/* b + o, or NULL for a bias-free linear (b NULL): the dot products' extra term */
#define REFENC_MP_BIAS_AT(b, o) ((b) != NULL ? (b) + (o) : NULL)

/* ---- the blocks (one concept a file) ---------------------------------------------- */

/* dst = the configured norm of src row by row (layer.c): LayerNorm with
 * gamma, beta (D) at 53 bits, or RMSNorm with gamma as w (beta unread) */
void refenc_mpe_layernorm(refenc_mpe_unit *u, int dst, int src, mpfr_srcptr gamma, mpfr_srcptr beta,
                          mpfr_srcptr eps);

/* The selection of the last layer's query rows (input.rows; ref/rows.h):
 * k and v of every position from src (L = Lseq rows), q/k-normalised and
 * rotated; then rows rows[r] of src and of h moved to row r, L = R,
 * qrows = rows: every later step computes the R rows (mha.c).  0 when
 * in_proj's fixed point cannot be allocated (u->oom set). */
int refenc_mpe_select_rows(refenc_mpe_unit *u, int src);

/* t = MHA(src) (mha.c): the heads' weights certified as weights_step, t as
 * out_step; after refenc_mpe_select_rows, the queries of its rows against
 * every key.  0 if a value is not certified. */
int refenc_mpe_mha(refenc_mpe_unit *u, int src, const char *weights_step, const char *out_step);

/* t = FFN(src) (ffn.c), certified as out_step (hid as hidden_step when the
 * run wants it).  0 if a value is not certified. */
int refenc_mpe_ffn(refenc_mpe_unit *u, int src, const char *hidden_step, const char *out_step);

/* The layer's parameters (layer.c): the norms at 53 bits, the linear maps'
 * spans.  0 on allocation failure (*lm freed). */
int refenc_mpe_layer_init(refenc_mpe_layer *lm, const refenc_layer_params *lp, const refenc_config *cfg);
void refenc_mpe_layer_free(refenc_mpe_layer *lm, size_t D);

/* The fixed-point weights of the attention's linear maps (block 0: in_proj,
 * out_proj) or the FFN's (1: linear1, linear2), made when the block starts
 * (on) and freed when it ends (off): one block's at a time (layer.c).
 * 0 on allocation failure (u->oom set, nothing kept: the block returns 0
 * and the run REFENC_ENOMEM). */
int refenc_mpe_block_weights(refenc_mpe_unit *u, int block, int on);

/* Layer i on h (layer.c); 0 if a step is not certified. */
int refenc_mpe_layer_run(refenc_mpe_unit *u, refenc_mpe_layer *lm, size_t i);

/* h = the item's embedding, "embed" certified (embedding.c); 0 if not certified. */
int refenc_mpe_embed(refenc_mpe_unit *u);

/* The work of one layer, in multiply-adds (layer.c). */
double refenc_mpe_layer_work(const refenc_config *c, size_t L);

#endif
