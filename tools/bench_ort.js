#!/usr/bin/env node
// Peer benchmark: run an ONNX model with onnxruntime-node (CPU) for comparison
// with shardnet, and cross-check the committed fixtures.
//
//   node tools/bench_ort.js MODEL.onnx [--batch 1,64,1024] [--threads 1,2]
//        [--input-dim 784 | --input-dim 1,28,28] [--seconds 2]
//        [--fixture-input X.npy --fixture-output Y.npy] [--tol 1e-4]
//        [--check-only]
//
// Inputs are float32 random numbers in [0, 1) of shape (batch, input-dim...),
// from a fixed-seed generator.  Each threads value gets its own session with
// intraOpNumThreads = threads, interOpNumThreads = 1, sequential execution,
// graphOptimizationLevel 'all'.  For each (threads, batch): warm-up, then timed
// runs for --seconds; prints the median latency and batch / median images/s.
//
// Fixture check: if MODEL is tests/fixtures/NAME.onnx and NAME_input.npy plus
// NAME_logits.npy (or NAME_output.npy) lie beside it, or --fixture-* are given,
// the model is run on the fixture input and the max abs difference from the
// PyTorch output is printed; exit status 1 if it exceeds --tol.
// --input-dim defaults to the fixture input's non-batch shape.
//
// Setup: cd tools && npm install --ignore-scripts

'use strict';

const fs = require('fs');
const path = require('path');
const { readNpy } = require('./npy.js');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error('error: cannot load onnxruntime-node (' + e.message + ')');
  console.error('run: cd tools && npm install --ignore-scripts');
  process.exit(2);
}

function usage(msg) {
  if (msg) console.error('error: ' + msg);
  console.error('usage: node tools/bench_ort.js MODEL.onnx [--batch 1,64,1024] ' +
    '[--threads 1,2] [--input-dim 784] [--seconds 2] [--fixture-input X.npy ' +
    '--fixture-output Y.npy] [--tol 1e-4] [--check-only]');
  process.exit(2);
}

function parseIntList(s, name) {
  const v = String(s).split(',').filter((t) => t !== '').map(Number);
  if (v.length === 0 || v.some((n) => !Number.isInteger(n) || n <= 0)) {
    usage(`bad ${name}: ${s}`);
  }
  return v;
}

function parseArgs(argv) {
  const o = {
    model: null, batch: [1, 64, 1024], threads: [1, 2], inputDim: null,
    seconds: 2, fixtureInput: null, fixtureOutput: null, tol: 1e-4,
    checkOnly: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--batch': o.batch = parseIntList(val(), '--batch'); break;
      case '--threads': o.threads = parseIntList(val(), '--threads'); break;
      case '--input-dim': o.inputDim = parseIntList(val(), '--input-dim'); break;
      case '--seconds':
        o.seconds = Number(val());
        if (!(o.seconds > 0)) usage('bad --seconds');
        break;
      case '--fixture-input': o.fixtureInput = val(); break;
      case '--fixture-output': o.fixtureOutput = val(); break;
      case '--tol': o.tol = Number(val()); break;
      case '--check-only': o.checkOnly = true; break;
      case '-h': case '--help': usage(); break;
      default:
        if (a.startsWith('-') || o.model) usage(`unexpected argument ${a}`);
        o.model = a;
    }
  }
  if (!o.model) usage('no model given');
  return o;
}

// Deterministic uniform [0, 1) generator (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function median(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function makeOptions(threads) {
  return {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
}

function findFixtures(opts) {
  if (opts.fixtureInput || opts.fixtureOutput) {
    if (!opts.fixtureInput || !opts.fixtureOutput) {
      usage('--fixture-input and --fixture-output go together');
    }
    return { input: opts.fixtureInput, output: opts.fixtureOutput };
  }
  const base = opts.model.replace(/\.onnx$/, '');
  const input = base + '_input.npy';
  if (!fs.existsSync(input)) return null;
  for (const suffix of ['_logits.npy', '_output.npy']) {
    if (fs.existsSync(base + suffix)) return { input, output: base + suffix };
  }
  return null;
}

async function checkFixture(session, fx, tol) {
  const x = readNpy(fx.input);
  const want = readNpy(fx.output);
  if (x.dtype !== 'float32' || want.dtype !== 'float32') {
    throw new Error('fixture input/output must be float32');
  }
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', x.data, x.dims) };
  const res = await session.run(feeds);
  const got = res[session.outputNames[0]];
  const gotDims = Array.from(got.dims).map(Number);
  if (gotDims.join(',') !== want.dims.join(',')) {
    throw new Error(`output shape [${gotDims}] != fixture [${want.dims}]`);
  }
  let maxDiff = 0;
  for (let i = 0; i < want.data.length; i++) {
    const d = Math.abs(got.data[i] - want.data[i]);
    if (!(d <= maxDiff)) maxDiff = d; // also catches NaN
  }
  const ok = maxDiff <= tol;
  console.log(`fixture check: ${path.basename(fx.input)} [${x.dims}] vs ` +
    `${path.basename(fx.output)}: max abs diff ${maxDiff.toExponential(3)} ` +
    `(tol ${tol}) ${ok ? 'OK' : 'FAIL'}`);
  return { ok, inputDims: x.dims };
}

async function timeRuns(session, feeds, seconds) {
  // Warm-up: at least 3 runs and ~10% of the measuring time (max 1 s).
  const warmNs = BigInt(Math.round(Math.min(1, seconds * 0.1) * 1e9));
  let t0 = process.hrtime.bigint();
  for (let n = 0; n < 3 || process.hrtime.bigint() - t0 < warmNs; n++) {
    await session.run(feeds);
  }
  const lat = [];
  const endNs = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  while (lat.length < 5 || process.hrtime.bigint() < endNs) {
    const a = process.hrtime.bigint();
    await session.run(feeds);
    lat.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  return lat;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.model)) usage(`no such model: ${opts.model}`);
  console.log(`onnxruntime-node ${ort.env.versions ? ort.env.versions.node : '?'}; ` +
    `model ${opts.model}`);

  let status = 0;
  const fx = findFixtures(opts);
  if (fx) {
    const session = await ort.InferenceSession.create(opts.model, makeOptions(opts.threads[0]));
    const r = await checkFixture(session, fx, opts.tol);
    if (!r.ok) status = 1;
    if (!opts.inputDim) opts.inputDim = r.inputDims.slice(1);
    if (session.release) await session.release();
  } else {
    console.log('fixture check: no fixture found beside the model (skipped)');
  }
  if (opts.checkOnly) process.exit(status);
  if (!opts.inputDim) usage('--input-dim is needed (no fixture to infer it from)');

  const perItem = opts.inputDim.reduce((a, b) => a * b, 1);
  console.log(`input (batch, ${opts.inputDim.join(', ')}) float32 uniform [0,1); ` +
    `${opts.seconds}s per point; intra-op threads = threads, inter-op 1, opt level all`);
  for (const threads of opts.threads) {
    const session = await ort.InferenceSession.create(opts.model, makeOptions(threads));
    const inName = session.inputNames[0];
    for (const batch of opts.batch) {
      const r = rng(1234 + batch);
      const data = new Float32Array(batch * perItem);
      for (let i = 0; i < data.length; i++) data[i] = r();
      const feeds = { [inName]: new ort.Tensor('float32', data, [batch, ...opts.inputDim]) };
      const lat = await timeRuns(session, feeds, opts.seconds);
      const med = median(lat);
      console.log(`threads ${threads}  batch ${String(batch).padStart(5)}  ` +
        `median ${med.toFixed(4).padStart(10)} ms  ` +
        `${(batch / (med / 1e3)).toFixed(0).padStart(9)} images/s  (${lat.length} runs)`);
    }
    if (session.release) await session.release();
  }
  process.exit(status);
}

main().catch((e) => {
  console.error('error: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
