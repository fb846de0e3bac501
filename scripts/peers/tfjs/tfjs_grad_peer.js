#!/usr/bin/env node
// TensorFlow.js autograd as a peer of the gradient goldens: for every golden
// case that holds gradients (grad.*, made with `refenc golden --grad`), builds
// the case's forward from its config with TensorFlow.js ops on its
// pure-JavaScript CPU backend (@tensorflow/tfjs, float32), takes the loss
// <dY, Y> with the case's in.grad.dY, differentiates it with tf.grads and
// writes out.output, out.embed, out.layers.{i}.output and every grad.* the
// case lists (F32), for `refenc certify` (docs/gradients.md, "TensorFlow.js").
//
//   node tfjs_grad_peer.js --golden golden --out RESULTS [--case GLOB] [--bug NAME]
//   node tfjs_grad_peer.js --golden golden --out RESULTS --forward
//   (either with --erf double: exact GELU's erf computed in doubles, below)
//   node tfjs_grad_peer.js --golden golden --out WORK --check-pinned FILE --cli build/refenc
//
// The gradients are all tf.grads': with respect to the case's input x, every
// parameter tensor (the whole in_proj_weight, sliced into W_q, W_k, W_v by
// tf.slice inside the graph, so its gradient is tf's own pad of the three
// blocks), and, for the gradient of a step (grad.embed,
// grad.layers.{i}.output), a zero tensor added to that step's output: y + 0
// is y exactly, and the gradient of the loss with respect to the zero is the
// gradient with respect to the step.  Nothing is differentiated by hand.
//
// The cases it expresses: encoders with LayerNorm (Pre-LN or Post-LN, a final
// norm), the MLP with exact GELU (erf), tanh GELU or ReLU, x or tokens
// (token types, learned positions by index, the embedding LayerNorm), RoPE in
// both layouts without scaling, key padding and causal masks with -inf or
// float32's finfo.min.  Any other config key is listed with the case as
// skipped, with the key that stops it (unsupported()).  --forward runs the
// same graph, without gradients, on the encoder cases that hold none: the
// forward it builds is certified on more configs than the gradient cases have.
//
// --bug injects a bug, the negative controls:
//   gelu_tanh_for_exact              the tanh-approximated GELU (tf.tanh)
//                                    where the case has the exact one
//                                    (tf.erf): forward and backward of the
//                                    other function
//   layernorm_backward_mean_missing  every LayerNorm's backward without its
//                                    mean(g) term (tf.customGrad; the forward
//                                    is the correct one)
//   grad_scaled                      one parameter gradient (the last layer's
//                                    linear1.weight) times 1.5
//
// --erf double computes exact GELU's erf in the peer, in doubles, rounded to
// float32, instead of tf.erf (Abramowitz and Stegun's 7.1.26 on the CPU
// backend, an error up to 1.5e-7), the derivative still tf's: how much of
// the budget tf.erf's approximation takes.
//
// --check-pinned FILE runs every mode FILE lists (a bug or none, the erf,
// or the forward), certifies each with --cli and compares each case's verdict, and
// a failing case's first diverging backward step, with the ones pinned
// (make certify-tfjs-grad): exit 0 when all agree, 1 when one differs.
//
// Exit status: 0; 1 a pinned outcome differs; 2 a usage error, a malformed
// file (the message names the file and the tensor) or no gradient case.
'use strict';
const fs = require('fs');
const path = require('path');
const childProcess = require('child_process');
const tf = require('@tensorflow/tfjs');

const { PeerError, globRegExp, readSafetensors, tensorBytes, writeResults } = require('../safetensors.js');

const BUGS = ['gelu_tanh_for_exact', 'layernorm_backward_mean_missing', 'grad_scaled'];

function usage(msg) {
  throw new PeerError(`${msg}\nusage: tfjs_grad_peer.js --golden DIR --out DIR [--case GLOB] [--bug NAME | --forward] [--erf tf|double]\n` +
                      '       tfjs_grad_peer.js --golden DIR --out DIR --check-pinned FILE [--cli REFENC]');
}

function parseArgs(argv) {
  const args = { case: '*', cli: 'build/refenc' };
  const known = ['golden', 'out', 'case', 'bug', 'erf', 'check-pinned', 'cli'];
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === '--forward') {   // the only flag without a value
      args.forward = true;
      i--;
      continue;
    }
    const key = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || !known.includes(key)) usage(`unknown argument '${argv[i]}'`);
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    args[key] = argv[i + 1];
  }
  for (const k of ['golden', 'out']) if (!(k in args)) usage(`--${k} is required`);
  if (args.bug && args.forward) usage('--bug is for the gradient cases, not --forward');
  if (args.erf && !['tf', 'double'].includes(args.erf)) usage(`--erf must be 'tf' or 'double', not '${args.erf}'`);
  if (args.bug && !BUGS.includes(args.bug)) usage(`--bug must be one of ${BUGS.join(', ')}, not '${args.bug}'`);
  return args;
}

// The tensor `name` as { dtype, shape, values: a typed array (a copy) }.
function readTensor(st, name) {
  const t = tensorBytes(st, name, 'the forward needs it');
  const where = `${st.file}: tensor '${name}' (data at byte ${t.at})`;
  const typed = { F64: Float64Array, F32: Float32Array, I64: BigInt64Array, BOOL: Uint8Array }[t.dtype];
  if (!typed) throw new PeerError(`${where}: dtype ${t.dtype}, not one the peer reads (F64, F32, I64, BOOL)`);
  return { dtype: t.dtype, shape: t.shape, values: new typed(t.bytes), where };
}

// A float tensor of the case as a float32 tf tensor (the golden's inputs and
// parameters are exact in float32, docs/golden-format.md; in.grad.dY too).
function floatTensor(st, name) {
  const t = readTensor(st, name);
  if (t.dtype !== 'F32' && t.dtype !== 'F64') throw new PeerError(`${t.where}: dtype ${t.dtype}, a float tensor (F32 or F64) expected`);
  return tf.tensor(Float32Array.from(t.values), t.shape, 'float32');
}

// An integer tensor (I64) as int32, each value checked to lie in [0, limit).
function indexTensor(st, name, limit) {
  const t = readTensor(st, name);
  if (t.dtype !== 'I64') throw new PeerError(`${t.where}: dtype ${t.dtype}, I64 expected`);
  const v = Int32Array.from(t.values, (x, i) => {
    if (x < 0n || x >= BigInt(limit)) throw new PeerError(`${t.where}: element ${i} is ${x}, outside [0, ${limit})`);
    return Number(x);
  });
  return tf.tensor(v, t.shape, 'int32');
}

// ---- what the peer expresses ---------------------------------------------------------

// Config keys and the values the forward below builds; a key absent from the
// config is its default.  null: any value (the forward reads it).
const EXPRESSED = {
  family: null, d_model: null, n_heads: null, d_ff: null, n_layers: null, layer_norm_eps: null,
  max_len: null, vocab_size: null, padding_idx: null, type_vocab_size: null, temperature: null,
  rope_base: null, embedding_norm_eps: null,
  norm: ['pre', 'post'], final_norm: [true, false], causal: [true, false],
  activation: ['gelu', 'gelu_tanh', 'relu'],
  positional: ['none', 'learned', 'rope'], position_ids: ['index'], rope_layout: ['half', 'interleaved'],
  mask_value: ['-inf', 'finfo_min'], embedding_norm: [true, false], scale_embedding: [true, false],
  norm_type: ['layernorm'], ffn_type: ['mlp'], norm_bias: [true], linear_bias: [true],
  embedding_normalizer_dtype: ['exact'], pooling: ['none'], partial_rotary_factor: [1.0],
  rope_scaling: [null],
};

// Why the peer cannot build a case, or null.
function unsupported(st, cfg) {
  if (st.metadata.component !== 'encoder') return `component '${st.metadata.component}' (only encoders)`;
  for (const [key, value] of Object.entries(cfg)) {
    if (!(key in EXPRESSED)) return `config key ${key}`;
    const ok = EXPRESSED[key];
    if (ok !== null && !ok.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
      return `config key ${key} = ${JSON.stringify(value)}`;
    }
  }
  if (cfg.d_model % cfg.n_heads !== 0) return 'd_model not a multiple of n_heads';
  if (st.header['in.attn_mask']) return 'in.attn_mask (an additive mask)';
  return null;
}

// ---- the forward, from tf ops ------------------------------------------------------------

// x (..., Din) W^T + b, W (Dout, Din) as nn.Linear stores it.
function linear(x, W, b) {
  const shape = x.shape;
  const y = tf.matMul(x.reshape([-1, shape[shape.length - 1]]), W, false, true).add(b);
  return y.reshape([...shape.slice(0, -1), W.shape[0]]);
}

// (x - mu) / sqrt(var + eps) * gamma + beta over the last axis, var biased:
// the two-pass form, every step a tf op (tf's own backward of each).
function layerNormForward(x, gamma, beta, eps) {
  const mu = tf.mean(x, -1, true);
  const d = tf.sub(x, mu);
  const v = tf.mean(tf.mul(d, d), -1, true);
  return tf.add(tf.mul(tf.div(d, tf.sqrt(tf.add(v, tf.scalar(eps)))), gamma), beta);
}

// The bug layernorm_backward_mean_missing: the same forward, and a backward
// dx = (g - xhat mean(g xhat)) / sigma without the mean(g) term.
function layerNormMeanMissing(eps) {
  return tf.customGrad((x, gamma, beta, save) => {
    save([x, gamma]);
    return {
      value: layerNormForward(x, gamma, beta, eps),
      gradFunc: (dy, [xs, g0]) => {
        const mu = tf.mean(xs, -1, true);
        const sd = tf.sqrt(tf.add(tf.mean(tf.square(tf.sub(xs, mu)), -1, true), tf.scalar(eps)));
        const xhat = tf.div(tf.sub(xs, mu), sd);
        const g = tf.mul(dy, g0);
        const dx = tf.div(tf.sub(g, tf.mul(xhat, tf.mean(tf.mul(g, xhat), -1, true))), sd);
        const rows = [-1, xs.shape[xs.shape.length - 1]];
        return [dx, tf.sum(tf.mul(dy, xhat).reshape(rows), 0), tf.sum(dy.reshape(rows), 0)];
      },
    };
  });
}

// --erf double: erf computed by the peer in doubles, then rounded to float32,
// in place of tf.erf (whose CPU kernel is Abramowitz and Stegun's 7.1.26, an
// error up to 1.5e-7), with tf's own derivative 2/sqrt(pi) exp(-x^2): how
// much of the budget tf.erf's approximation takes (docs/gradients.md).
// Taylor's series below 3 (terms at most 3^(2n)/n! < 2^13: about 13 bits
// lost of 53, far below float32's), the continued fraction of erfc above.
function erfDouble(x) {
  const a = Math.abs(x);
  if (a < 3) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 200; n++) {
      term *= -a * a / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-18 * Math.abs(sum)) break;
    }
    return Math.sign(x) * sum * 2 / Math.sqrt(Math.PI);
  }
  let f = a;  // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
  for (let k = 60; k >= 1; k--) f = a + (k / 2) / f;
  return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
}

const erfInDoubles = tf.customGrad((x, save) => {
  save([x]);
  return {
    value: tf.tensor(Float32Array.from(x.dataSync(), erfDouble), x.shape, 'float32'),
    gradFunc: (dy, [xs]) => [tf.mul(dy, tf.mul(tf.exp(tf.neg(tf.square(xs))), tf.scalar(2 / Math.sqrt(Math.PI))))],
  };
});

function activation(x, kind, mode) {
  if (kind === 'gelu' && mode.bug === 'gelu_tanh_for_exact') kind = 'gelu_tanh';
  if (kind === 'relu') return tf.relu(x);
  if (kind === 'gelu') {       // x * 1/2 (1 + erf(x / sqrt 2))
    return tf.mul(tf.mul(x, tf.scalar(0.5)), tf.add(tf.scalar(1), (mode.erf === 'double' ? erfInDoubles : tf.erf)(tf.div(x, tf.scalar(Math.SQRT2)))));
  }
  if (kind === 'gelu_tanh') {  // x * 1/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const inner = tf.add(x, tf.mul(tf.mul(tf.mul(x, x), x), tf.scalar(0.044715)));
    const t = tf.tanh(tf.mul(inner, tf.scalar(Math.sqrt(2 / Math.PI))));
    return tf.mul(tf.mul(x, tf.scalar(0.5)), tf.add(tf.scalar(1), t));
  }
  throw new PeerError(`activation '${kind}'`);
}

// x (B, H, L, Dh) with pair j rotated by pos * theta_j, theta_j =
// 1 / base^(2j / Dh) formed in float32 by tf (as Hugging Face's inv_freq):
// pairs (j, j + Dh/2) for 'half' (rotate_half), (2j, 2j + 1) for 'interleaved'.
function rope(x, pos, cfg) {
  const Dh = x.shape[3];
  const theta = tf.div(tf.scalar(1), tf.pow(tf.scalar(cfg.rope_base), tf.div(tf.range(0, Dh, 2, 'float32'), tf.scalar(Dh))));
  const angle = tf.mul(pos.reshape([-1, 1]), theta.reshape([1, -1]));            // (L, Dh/2)
  const cos = tf.cos(angle);
  const sin = tf.sin(angle);
  if (cfg.rope_layout === 'half') {
    const [x1, x2] = tf.split(x, 2, 3);
    const rotated = tf.concat([tf.neg(x2), x1], 3);
    return tf.add(tf.mul(x, tf.concat([cos, cos], 1)), tf.mul(rotated, tf.concat([sin, sin], 1)));
  }
  const [B, H, L] = x.shape;
  const pairs = x.reshape([B, H, L, Dh / 2, 2]);
  const [x1, x2] = tf.split(pairs, 2, 4).map((t) => t.reshape([B, H, L, Dh / 2]));
  const y1 = tf.sub(tf.mul(x1, cos), tf.mul(x2, sin));
  const y2 = tf.add(tf.mul(x1, sin), tf.mul(x2, cos));
  return tf.stack([y1, y2], 4).reshape([B, H, L, Dh]);
}

// Multi-head attention on x (B, L, D); in_proj_weight (3D, D) sliced into
// W_q, W_k, W_v inside the graph; a masked score replaced (tf.where) by -inf
// or float32's finfo.min, a constant: tf.where's backward sends it nothing.
function attention(x, P, prefix, cfg, pos, keep) {
  const [B, L, D] = x.shape;
  const H = cfg.n_heads;
  const Dh = D / H;
  const W = P[`${prefix}in_proj_weight`];
  const bias = P[`${prefix}in_proj_bias`];
  const heads = (i) => {
    const t = linear(x, tf.slice(W, [i * D, 0], [D, D]), tf.slice(bias, [i * D], [D]));
    return t.reshape([B, L, H, Dh]).transpose([0, 2, 1, 3]);                       // (B, H, L, Dh)
  };
  let q = heads(0);
  let k = heads(1);
  const v = heads(2);
  if (cfg.positional === 'rope') {
    q = rope(q, pos, cfg);
    k = rope(k, pos, cfg);
  }
  let s = tf.div(tf.matMul(q, k, false, true), tf.scalar(Math.sqrt(Dh) * (cfg.temperature ?? 1.0)));
  const masked = (cfg.mask_value ?? '-inf') === 'finfo_min' ? -3.4028234663852886e38 : -Infinity;
  let visible = keep;                                                                // (B, 1, 1, L) or null
  if (cfg.causal) {
    const lower = tf.linalg.bandPart(tf.ones([L, L], 'bool').cast('int32'), -1, 0).cast('bool').reshape([1, 1, L, L]);
    visible = visible ? tf.logicalAnd(visible, lower) : lower;
  }
  if (visible) s = tf.where(tf.broadcastTo(visible, s.shape), s, tf.fill(s.shape, masked));
  const w = tf.softmax(s, -1);
  const ctx = tf.matMul(w, v).transpose([0, 2, 1, 3]).reshape([B, L, D]);
  return linear(ctx, P[`${prefix}out_proj.weight`], P[`${prefix}out_proj.bias`]);
}

// The encoder's forward; probes: {step: zero tensor} added to each step's
// output (the gradient of a step), or {} (the forward alone).
// -> {output, embed, 'layers.{i}.output'}
function encoder(st, cfg, P, x, probes, mode) {
  const eps = cfg.layer_norm_eps;
  const norm = (t, prefix, e) => (mode.bug === 'layernorm_backward_mean_missing'
    ? layerNormMeanMissing(e)(t, P[`${prefix}weight`], P[`${prefix}bias`])
    : layerNormForward(t, P[`${prefix}weight`], P[`${prefix}bias`], e));
  let h;
  let L;
  const D = cfg.d_model;
  if (cfg.vocab_size > 0) {
    const tokens = indexTensor(st, 'in.tokens', cfg.vocab_size);
    L = tokens.shape[1];
    h = tf.gather(P['embedding.weight'], tokens);
    if (cfg.scale_embedding ?? true) h = tf.mul(h, tf.scalar(Math.sqrt(D)));
    if ((cfg.type_vocab_size ?? 0) > 0) {
      h = tf.add(h, tf.gather(P['token_type_embedding.weight'], indexTensor(st, 'in.token_type_ids', cfg.type_vocab_size)));
    }
  } else {
    h = x;
    L = x.shape[1];
  }
  const posIds = st.header['in.positions'] ? indexTensor(st, 'in.positions', cfg.positional === 'learned' ? cfg.max_len : 2 ** 24)
    : tf.range(0, L, 1, 'int32');
  if (cfg.positional === 'learned') h = tf.add(h, tf.gather(P['pos_embedding.weight'], posIds));
  if (cfg.embedding_norm) h = norm(h, 'embedding_norm.', cfg.embedding_norm_eps ?? eps);
  if (probes.embed) h = tf.add(h, probes.embed);
  const out = { embed: h };
  const pos = posIds.cast('float32');
  let keep = null;
  if (st.header['in.key_padding_mask']) {
    const m = readTensor(st, 'in.key_padding_mask');
    if (m.dtype !== 'BOOL') throw new PeerError(`${m.where}: dtype ${m.dtype}, BOOL expected`);
    keep = tf.logicalNot(tf.tensor(m.values, m.shape, 'bool')).reshape([m.shape[0], 1, 1, m.shape[1]]);
  }
  for (let i = 0; i < cfg.n_layers; i++) {
    const p = `layers.${i}.`;
    const ffn = (t) => linear(activation(linear(t, P[`${p}linear1.weight`], P[`${p}linear1.bias`]), cfg.activation, mode),
      P[`${p}linear2.weight`], P[`${p}linear2.bias`]);
    if (cfg.norm === 'pre') {           // x + f(LN(x))
      h = tf.add(h, attention(norm(h, `${p}norm1.`, eps), P, `${p}self_attn.`, cfg, pos, keep));
      h = tf.add(h, ffn(norm(h, `${p}norm2.`, eps)));
    } else {                            // LN(x + f(x))
      const n1 = norm(tf.add(h, attention(h, P, `${p}self_attn.`, cfg, pos, keep)), `${p}norm1.`, eps);
      h = norm(tf.add(n1, ffn(n1)), `${p}norm2.`, eps);
    }
    if (probes[`${p}output`]) h = tf.add(h, probes[`${p}output`]);
    out[`${p}output`] = h;
  }
  if (cfg.final_norm) h = norm(h, 'norm.', eps);
  out.output = h;
  return out;
}

// ---- one case -------------------------------------------------------------------------------

// The case's parameters: every tensor outside in.*, out.*, grad.*, dontcare.*
// and alt.* (the bug variants' outputs, docs/golden-format.md).
function parameters(st) {
  const P = {};
  for (const name of Object.keys(st.header)) {
    if (!/^(in|out|grad|dontcare|alt)\./.test(name)) P[name] = floatTensor(st, name);
  }
  return P;
}

// The forward alone (a case without gradients): {results name: {data, dims}}.
function computeForward(st, cfg, mode) {
  const x = st.header['in.x'] ? floatTensor(st, 'in.x') : null;
  const steps = encoder(st, cfg, parameters(st), x, {}, mode);
  return Object.fromEntries(Object.entries(steps).map(([k, t]) => [`out.${k}`, { data: t.dataSync(), dims: t.shape }]));
}

// {results name: {data, dims}} for a gradient case: the forward's steps and
// every grad.* the case lists.
function compute(st, cfg, mode) {
  const gradNames = JSON.parse(st.metadata.grad_outputs || '[]');
  const P = parameters(st);
  const x = st.header['in.x'] ? floatTensor(st, 'in.x') : null;
  const dY = floatTensor(st, 'in.grad.dY');
  const probes = { embed: tf.zerosLike(dY) };
  for (let i = 0; i < cfg.n_layers; i++) probes[`layers.${i}.output`] = tf.zerosLike(dY);
  // the tensors tf.grads differentiates with respect to, and their golden names
  const wrt = [...Object.keys(P), ...Object.keys(probes), ...(x ? ['x'] : [])];
  const values = [...Object.values(P), ...Object.values(probes), ...(x ? [x] : [])];
  let steps = null;
  const f = (...args) => {
    const byName = Object.fromEntries(wrt.map((n, i) => [n, args[i]]));
    const params = Object.fromEntries(Object.keys(P).map((n) => [n, byName[n]]));
    const pr = Object.fromEntries(Object.keys(probes).map((n) => [n, byName[n]]));
    steps = encoder(st, cfg, params, byName.x, pr, mode);
    for (const t of Object.values(steps)) tf.keep(t);   // tf.grads disposes the forward's tensors
    return tf.sum(tf.mul(dY, steps.output));                                          // <dY, Y>
  };
  const grads = tf.grads(f)(values);
  const res = {};
  for (const [k, t] of Object.entries(steps)) res[`out.${k}`] = { data: t.dataSync(), dims: t.shape };
  for (const t of new Set(Object.values(steps))) t.dispose();
  wrt.forEach((n, i) => {
    if (!gradNames.includes(`grad.${n}`)) return;
    let g = grads[i].dataSync();
    if (mode.bug === 'grad_scaled' && n === `layers.${cfg.n_layers - 1}.linear1.weight`) g = g.map((v) => Math.fround(v * 1.5));
    res[`grad.${n}`] = { data: g, dims: grads[i].shape };
  });
  const missing = gradNames.filter((n) => !(n in res));
  if (missing.length) throw new PeerError(`${st.file}: the peer did not produce ${missing.join(', ')}`);
  return res;
}

// The encoder cases of the golden directory matching glob: [{name, st, cfg,
// grad (it holds gradients), why (null, or why the peer cannot build it)}].
function encoderCases(golden, glob) {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(golden, 'manifest.json'), 'utf8'));
  } catch (e) {
    throw new PeerError(`${path.join(golden, 'manifest.json')}: ${e.message}`);
  }
  const match = globRegExp(glob);
  const cases = [];
  for (const c of manifest.cases) {
    if (!match.test(c.case)) continue;
    if (c.component !== 'encoder') continue;
    const st = readSafetensors(path.join(golden, 'cases', c.file));
    let cfg;
    try {
      cfg = JSON.parse(st.metadata.config);
    } catch (e) {
      throw new PeerError(`${st.file}: __metadata__.config is not JSON: ${e.message}`);
    }
    cases.push({ name: c.case, st, cfg, grad: Boolean(st.header['in.grad.dY']), why: unsupported(st, cfg) });
  }
  return cases;
}

// mode: {bug, forward, erf}
function implementation(mode) {
  return `TensorFlow.js ${tf.version.tfjs} (backend ${tf.getBackend()}) ${mode.forward ? 'forward' : 'tf.grads'} float32` +
    (mode.erf === 'double' ? ', erf in doubles' : '') + (mode.bug ? ` with bug ${mode.bug}` : '');
}

// Computes every case it expresses into out: the gradient cases, or with
// forward the others' forward alone; -> the names computed.
function runAll(cases, out, mode) {
  fs.mkdirSync(out, { recursive: true });
  const done = [];
  for (const c of cases) {
    if (c.why || c.grad === Boolean(mode.forward)) continue;
    const res = tf.tidy(() => (mode.forward ? computeForward(c.st, c.cfg, mode) : compute(c.st, c.cfg, mode)));
    writeResults(path.join(out, `${c.name}.safetensors`), res, { implementation: implementation(mode) });
    done.push(c.name);
  }
  return done;
}

// ---- the pinned outcomes ----------------------------------------------------------------------

function checkPinned(args, cases) {
  let pinned;
  try {
    pinned = JSON.parse(fs.readFileSync(args['check-pinned'], 'utf8'));
  } catch (e) {
    throw new PeerError(`${args['check-pinned']}: ${e.message}`);
  }
  const t0 = Date.now();
  let ok = true;
  const skipped = cases.filter((c) => c.grad && c.why);
  const wantSkipped = pinned.skipped || {};
  for (const c of cases.filter((x) => x.grad)) {
    const want = wantSkipped[c.name] ?? null;
    if (c.why !== want) {
      console.log(`${c.name}: ${c.why ? `skipped (${c.why})` : 'expressed'}  <-- pinned ${want ? `skipped (${want})` : 'expressed'}`);
      ok = false;
    }
  }
  for (const [mode, spec] of Object.entries(pinned.modes)) {
    const out = path.join(args.out, mode);
    fs.rmSync(out, { recursive: true, force: true });
    const names = runAll(cases, out, spec);
    const cert = path.join(args.out, `${mode}.json`);
    const r = childProcess.spawnSync(args.cli, ['certify', '--golden', args.golden, '--results', out, '--json', cert,
                                                '--quiet', '--case', names.join(',')], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status === null || r.status > 1) throw new PeerError(`${args.cli} certify exited ${r.status ?? r.signal} on ${mode}`);
    const lines = [];
    if (spec.forward && JSON.stringify([...names].sort()) !== JSON.stringify([...(spec.cases || [])].sort())) {
      lines.push(`cases run: ${names.join(', ')}  <-- pinned: ${(spec.cases || []).join(', ')}`);
      ok = false;
    }
    for (const c of JSON.parse(fs.readFileSync(cert, 'utf8')).cases) {
      // a gradient case: its grad.* outputs, each it lists compared; the forward: its out.*
      const kind = spec.forward ? 'out.' : 'grad.';
      const compared = c.outputs.filter((o) => o.name.startsWith(kind) && ['PASS', 'FAIL'].includes(o.status));
      const listed = spec.forward ? compared.length : JSON.parse(cases.find((x) => x.name === c.case).st.metadata.grad_outputs).length;
      const worst = compared.reduce((a, o) => (a === null || o.excess > a.excess ? o : a), null);
      const want = spec.expect[c.case] ?? 'PASS';
      const first = (spec.first || {})[c.case] ?? null;
      let line = `${c.case} ${c.verdict} (${compared.length}${spec.forward ? '' : ` of ${listed}`} ${spec.forward ? 'outputs' : 'gradients'} compared` +
        (worst ? `, worst ${worst.name} at ${worst.excess.toPrecision(3)} budgets` : '') + ')' +
        (c.first_grad_divergence ? `; first diverging backward step ${c.first_grad_divergence}` : '');
      if (c.verdict !== want || compared.length === 0 || compared.length !== listed ||
          (first !== null && c.first_grad_divergence !== first)) {
        line += `  <-- expected ${want}` + (first ? ` first at ${first}` : '') +
          (compared.length === 0 || compared.length !== listed ? ` with every ${spec.forward ? 'output' : 'gradient'} compared` : '');
        ok = false;
      }
      lines.push(line);
    }
    console.log(`\n${mode}${spec.bug ? ` (bug ${spec.bug})` : ''}${spec.erf === 'double' ? ' (erf in doubles, not tf.erf)' : ''}` +
                `${spec.forward ? ' (the forward of the other encoder cases it expresses)' : ''}:` +
                `\n  ${lines.join('\n  ')}`);
  }
  if (skipped.length) console.log(`\ngradient cases skipped: ${skipped.map((c) => `${c.name} (${c.why})`).join('; ')}`);
  console.log(`\ncertify-tfjs-grad: ${ok ? `every mode has its pinned outcome (${args['check-pinned']})` : 'UNEXPECTED OUTCOME'}` +
              `; ${implementation({})}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return ok ? 0 : 1;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  tf.enableProdMode();   // no debug checks, and no hint to install tfjs-node
  if (!(await tf.setBackend('cpu'))) throw new PeerError("TensorFlow.js: the 'cpu' backend does not initialise");
  const cases = encoderCases(args.golden, args.case);
  if (!cases.some((c) => c.grad && !c.why)) throw new PeerError(`${args.golden}: no gradient case the peer expresses matches '${args.case}'`);
  if (args['check-pinned']) return checkPinned(args, cases);
  const mode = { bug: args.bug, forward: args.forward, erf: args.erf };
  const done = runAll(cases, args.out, mode);
  for (const c of cases) if (c.grad && c.why) console.log(`tfjs_grad_peer: skipped ${c.name}: ${c.why}`);
  console.log(`tfjs_grad_peer: ${done.length} ${args.forward ? 'case(s) without gradients, the forward alone,' : 'gradient case(s)'} ` +
              `computed by ${implementation(mode)} into ${args.out}`);
  return 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`tfjs_grad_peer: ${e instanceof PeerError ? e.message : e.stack}`);
  process.exit(2);
});
