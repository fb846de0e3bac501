// The safetensors reading and writing the JavaScript peers share (ONNX
// Runtime's, scripts/peers/ort/ort_peer.js, and TensorFlow.js's,
// scripts/peers/tfjs/tfjs_grad_peer.js): a golden case's tensors read with
// every offset checked (docs/golden-format.md), results written as F32.
// A bad file throws PeerError, whose message names the file, the tensor
// and the byte; the peers print it and exit 2.
'use strict';

const fs = require('fs');

class PeerError extends Error {}

// A shell pattern (* and ?) as a RegExp over the whole name.
function globRegExp(glob) {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

const ELEMENT_SIZE = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, U8: 1, BOOL: 1 };

// -> { file, header: {name: entry}, dataStart, buf }; checks what the reads below rely on.
function readSafetensors(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    throw new PeerError(`${file}: cannot read: ${e.message}`);
  }
  if (buf.length < 8) throw new PeerError(`${file}: file is ${buf.length} bytes, too short for the 8-byte header length at byte 0`);
  const n = buf.readBigUInt64LE(0);
  if (n > BigInt(buf.length - 8)) throw new PeerError(`${file}: header length ${n} at byte 0 exceeds the ${buf.length - 8} bytes that follow it`);
  let header;
  try {
    header = JSON.parse(buf.toString('utf8', 8, 8 + Number(n)));
  } catch (e) {
    throw new PeerError(`${file}: header (bytes 8 to ${8 + Number(n)}) is not valid JSON: ${e.message}`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw new PeerError(`${file}: header is not a JSON object`);
  const st = { file, header, dataStart: 8 + Number(n), buf, metadata: header.__metadata__ || {} };
  delete header.__metadata__;
  return st;
}

// The tensor `name` as { dtype, shape, bytes (a copy, aligned), at (its data's byte) };
// need: why the caller needs it, for the message when it is missing.
function tensorBytes(st, name, need) {
  const e = st.header[name];
  if (!e) throw new PeerError(`${st.file}: tensor '${name}' is missing (${need})`);
  const size = ELEMENT_SIZE[e.dtype];
  if (!size || !Array.isArray(e.shape) || !Array.isArray(e.data_offsets) || e.data_offsets.length !== 2) {
    throw new PeerError(`${st.file}: tensor '${name}': entry is not {dtype, shape, data_offsets} of a known dtype`);
  }
  const count = e.shape.reduce((a, d) => a * d, 1);
  const [b, end] = e.data_offsets;
  if (!(Number.isInteger(b) && Number.isInteger(end) && 0 <= b && b <= end &&
        st.dataStart + end <= st.buf.length && end - b === count * size)) {
    throw new PeerError(`${st.file}: tensor '${name}': data_offsets [${b}, ${end}] do not hold shape [${e.shape}] of ${e.dtype} ` +
                        `inside the data buffer (bytes ${st.dataStart} to ${st.buf.length})`);
  }
  const bytes = new ArrayBuffer(end - b);
  new Uint8Array(bytes).set(st.buf.subarray(st.dataStart + b, st.dataStart + end));
  return { dtype: e.dtype, shape: e.shape, bytes, at: st.dataStart + b };
}

// Writes {name: {data: Float32Array, dims}} as F32, header keys sorted, padded
// to 8 bytes, data in name order; atomically (temporary file, then rename).
function writeResults(file, outputs, metadata) {
  const names = Object.keys(outputs).sort();
  const header = { __metadata__: metadata };
  let offset = 0;
  for (const name of names) {
    const o = outputs[name];
    header[name] = { dtype: 'F32', shape: o.dims, data_offsets: [offset, offset + o.data.byteLength] };
    offset += o.data.byteLength;
  }
  const sorted = {};
  for (const k of Object.keys(header).sort()) sorted[k] = header[k];
  let json = JSON.stringify(sorted);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const parts = [len, Buffer.from(json)];
  for (const name of names) {
    const d = outputs[name].data;
    parts.push(Buffer.from(d.buffer, d.byteOffset, d.byteLength));  // little-endian hosts only (x86-64, arm64)
  }
  const tmp = `${file}.tmp.${process.pid}`;
  try {
    fs.writeFileSync(tmp, Buffer.concat(parts));
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw new PeerError(`${file}: cannot write: ${e.message}`);
  }
}

module.exports = { PeerError, globRegExp, ELEMENT_SIZE, readSafetensors, tensorBytes, writeResults };
