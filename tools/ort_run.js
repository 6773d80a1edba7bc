#!/usr/bin/env node
// Run a model once with ONNX Runtime (onnxruntime-node, CPU, one thread)
// on inputs from .npy files and write its outputs as OUTDIR/K.npy, K the
// output's index; prints one JSON line: [{name, dtype, dims}, ...].
// tools/real-models.py --make-fixtures makes the real models' fixtures with it.
//
//   node tools/ort_run.js MODEL.onnx OUTDIR NAME=FILE.npy...
//
// ORT_GRAPH_OPT=disabled|basic|extended|all sets ONNX Runtime's graph
// optimisation level (default: its own, all).  At extended and above it
// rewrites a DequantizeLinear before a MatMul into its MatMulNBits, which
// quantizes the activations too: tools/make-quantized-fixtures.sh asks for
// basic, to get the model's own arithmetic.
//
// Setup: cd tools && npm install --ignore-scripts

'use strict';

const path = require('path');
const { readNpy, writeNpy } = require('./npy.js');

async function main() {
  const [model, outdir, ...specs] = process.argv.slice(2);
  if (!model || !outdir) {
    console.error('usage: node tools/ort_run.js MODEL.onnx OUTDIR NAME=FILE.npy...');
    process.exit(2);
  }
  const ort = require('onnxruntime-node');
  const options = {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
  };
  if (process.env.ORT_GRAPH_OPT) options.graphOptimizationLevel = process.env.ORT_GRAPH_OPT;
  const session = await ort.InferenceSession.create(model, options);
  const feeds = {};
  for (const s of specs) {
    const at = s.lastIndexOf('=');
    const x = readNpy(s.slice(at + 1));
    feeds[s.slice(0, at)] = new ort.Tensor(x.dtype, x.data, x.dims);
  }
  const res = await session.run(feeds);
  const info = session.outputNames.map((name, k) => {
    const t = res[name];
    const dims = Array.from(t.dims).map(Number);
    writeNpy(path.join(outdir, `${k}.npy`), t.type, dims, t.data);
    return { name, dtype: t.type, dims };
  });
  console.log(JSON.stringify(info));
}

main().catch((e) => { console.error('error: ' + e.message); process.exit(1); });
