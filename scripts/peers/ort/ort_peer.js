#!/usr/bin/env node
// ONNX Runtime as a peer of refenc: runs the ONNX model of each golden case
// (built by build_models.py) with onnxruntime-node on the CPU, in float32,
// and writes a results file per case under the golden out.* names (F32),
// for `refenc certify`.
//
//   node ort_peer.js --golden golden --models build/ort/models --out RESULTS
//                    --opt disabled|all [--model all|final] [--case GLOB]
//                    [--save-optimized DIR]
//
// --opt disabled: graph optimisation off (ORT_DISABLE_ALL): ONNX Runtime runs
//   the graph's own ops, one kernel each.  --opt all: fully on
//   (ORT_ENABLE_ALL): it fuses LayerNorm, GELU, MatMul + Add, ... into its own
//   kernels first.  --model: which model of the case to run (default: every
//   output with --opt disabled, the required outputs only with --opt all, so
//   that no graph output stops a fusion).  --save-optimized: write the graph
//   ONNX Runtime actually ran (DIR/CASE.onnx), to see which kernels it fused.
//
// One intra-op and one inter-op thread, sequential execution: the same
// results on every run.  Inputs are read from the case itself: float tensors
// as float32 (they are exact in float32, docs/golden-format.md), I64 as int64,
// BOOL as bool.
//
// Exit status: 0; 2 on a usage error, a malformed file (the message names the
// file, the tensor and the byte) or an ONNX Runtime error (naming the case).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { PeerError, globRegExp, readSafetensors, tensorBytes, writeResults } = require('../safetensors.js');

function usage(msg) {
  throw new PeerError(`${msg}\nusage: ort_peer.js --golden DIR --models DIR --out DIR --opt disabled|all ` +
                      '[--model all|final] [--case GLOB] [--save-optimized DIR]');
}

function parseArgs(argv) {
  const args = { case: '*' };
  const known = ['golden', 'models', 'out', 'opt', 'model', 'case', 'save-optimized'];
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || !known.includes(key)) usage(`unknown argument '${argv[i]}'`);
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    args[key] = argv[i + 1];
  }
  for (const k of ['golden', 'models', 'out', 'opt']) if (!(k in args)) usage(`--${k} is required`);
  if (!['disabled', 'all'].includes(args.opt)) usage(`--opt must be 'disabled' or 'all', not '${args.opt}'`);
  args.model = args.model || (args.opt === 'disabled' ? 'all' : 'final');
  if (!['all', 'final'].includes(args.model)) usage(`--model must be 'all' or 'final', not '${args.model}'`);
  return args;
}

// A golden input as the ONNX Runtime tensor the model declares.
function inputTensor(st, name, type) {
  const t = tensorBytes(st, name, 'the model needs it as an input');
  const where = `${st.file}: tensor '${name}' (data at byte ${t.at})`;
  if (type === 'float32') {
    if (t.dtype === 'F32') return new ort.Tensor('float32', new Float32Array(t.bytes), t.shape);
    if (t.dtype === 'F64') return new ort.Tensor('float32', Float32Array.from(new Float64Array(t.bytes)), t.shape);
    throw new PeerError(`${where}: dtype ${t.dtype}, the model wants float32 (F32 or F64 expected)`);
  }
  if (type === 'int64' && t.dtype === 'I64') return new ort.Tensor('int64', new BigInt64Array(t.bytes), t.shape);
  if (type === 'bool' && t.dtype === 'BOOL') {
    const v = new Uint8Array(t.bytes);
    const bad = v.findIndex((x) => x > 1);
    if (bad >= 0) throw new PeerError(`${where}: BOOL element ${bad} is ${v[bad]}, not 0 or 1 (at byte ${t.at + bad})`);
    return new ort.Tensor('bool', v, t.shape);
  }
  throw new PeerError(`${where}: dtype ${t.dtype} does not fit the model's ${type} input`);
}

// ---- running the cases -------------------------------------------------------------

async function runCase(args, entry, manifestEntry) {
  const modelFile = path.join(args.models, entry[args.model]);
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: args.opt,
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3,   // errors only: not the optimiser's notes on removed initializers
  };
  if (args['save-optimized']) options.optimizedModelFilePath = path.join(args['save-optimized'], `${entry.case}.onnx`);
  const st = readSafetensors(path.join(args.golden, 'cases', manifestEntry.file));
  let session;
  try {
    session = await ort.InferenceSession.create(modelFile, options);
  } catch (e) {
    throw new PeerError(`${entry.case}: ONNX Runtime cannot load ${modelFile}: ${e.message}`);
  }
  const feeds = {};
  for (const m of session.inputMetadata) feeds[m.name] = inputTensor(st, m.name, m.type);
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    throw new PeerError(`${entry.case}: ONNX Runtime failed: ${e.message}`);
  }
  const outputs = {};
  for (const name of session.outputNames) {
    if (results[name].type !== 'float32') throw new PeerError(`${entry.case}: output '${name}' is ${results[name].type}, not float32`);
    outputs[name] = results[name];
  }
  await session.release();
  const impl = `onnxruntime-node ${ort.env.versions.node} float32, graph optimisation ${args.opt}, model ${entry[args.model]}`;
  writeResults(path.join(args.out, `${entry.case}.safetensors`), outputs, { implementation: impl });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const readJson = (file) => {
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      throw new PeerError(`${file}: ${e.message}`);
    }
  };
  const manifest = readJson(path.join(args.golden, 'manifest.json'));
  const index = readJson(path.join(args.models, 'models.json'));
  const files = new Map(manifest.cases.map((c) => [c.case, c]));
  const match = globRegExp(args.case);
  fs.mkdirSync(args.out, { recursive: true });
  if (args['save-optimized']) fs.mkdirSync(args['save-optimized'], { recursive: true });
  let n = 0;
  for (const entry of index.cases) {
    if (!match.test(entry.case) || entry.unsupported) continue;
    if (!files.has(entry.case)) throw new PeerError(`${args.models}/models.json: case '${entry.case}' is not in the golden manifest`);
    await runCase(args, entry, files.get(entry.case));
    n++;
  }
  console.log(`ort_peer: ${n} case(s) run by onnxruntime-node ${ort.env.versions.node} in float32, ` +
              `graph optimisation ${args.opt}, ${args.model} model(s), into ${args.out}`);
  return n > 0 ? 0 : 2;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`ort_peer: ${e instanceof PeerError ? e.message : e.stack}`);
  process.exit(2);
});
