// .npy files for the Node.js tools (format 1.0 to 3.0, little-endian, C
// order): readNpy for the fixtures and inputs they are given, writeNpy for
// the outputs tools/ort_run.js hands back.

'use strict';

const fs = require('fs');

const TYPES = {
  '<f4': [Float32Array, 'float32'], '<f8': [Float64Array, 'float64'],
  '<i4': [Int32Array, 'int32'], '<i8': [BigInt64Array, 'int64'],
  '|u1': [Uint8Array, 'uint8'], '|b1': [Uint8Array, 'bool'],
  '|i1': [Int8Array, 'int8'], '<i2': [Int16Array, 'int16'],
  '<u2': [Uint16Array, 'uint16'],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const major = buf[6];
  const hstart = major === 1 ? 10 : 12;
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: bad header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${file}: fortran order unsupported`);
  const dims = shape[1].split(',').map((t) => t.trim()).filter((t) => t).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const t = TYPES[descr[1]];
  if (!t) throw new Error(`${file}: dtype ${descr[1]} unsupported`);
  const [Ctor, dtype] = t;
  const off = hstart + hlen;
  const bytes = buf.subarray(off, off + count * Ctor.BYTES_PER_ELEMENT);
  if (bytes.length !== count * Ctor.BYTES_PER_ELEMENT) throw new Error(`${file}: truncated`);
  const data = new Ctor(count); // an aligned copy
  new Uint8Array(data.buffer).set(bytes);
  return { data, dims, dtype };
}

function writeNpy(file, dtype, dims, data) {
  const descr = Object.keys(TYPES).find((k) => TYPES[k][1] === dtype);
  if (!descr) throw new Error(`${file}: dtype ${dtype} unsupported`);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre[0] = 0x93;
  pre.write('NUMPY', 1, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

module.exports = { readNpy, writeNpy };
