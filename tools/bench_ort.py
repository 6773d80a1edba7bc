#!/usr/bin/env python3
"""The peer benchmark of tools/bench_ort.js through Python's onnxruntime,
for machines that have it and no node (a GPU machine's image, say).

    bench_ort.py MODEL.onnx [--batch 1,64,1024] [--threads 1,2]
                 [--input-dim 784] [--seconds 2]

Same method and output lines as bench_ort.js: float32 uniform [0, 1)
inputs of shape (batch, input-dim...); per threads value one CPU session
(intra-op threads = threads, inter-op 1, sequential, all optimisations);
per (threads, batch) a warm-up, then runs for about --seconds; the median
latency and batch / median images/s."""
import argparse
import statistics
import sys
import time


def int_list(s):
    v = [int(t) for t in s.split(",") if t]
    if not v or any(n <= 0 for n in v):
        raise argparse.ArgumentTypeError("expected positive integers: " + s)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int_list, default=[1, 64, 1024])
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--input-dim", type=int_list, required=True)
    ap.add_argument("--seconds", type=float, default=2.0)
    o = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print("error: cannot load onnxruntime for Python (%s)" % e,
              file=sys.stderr)
        return 2
    print("onnxruntime (Python) %s; model %s" % (ort.__version__, o.model))
    print("input (batch, %s) float32 uniform [0,1); %gs per point; intra-op "
          "threads = threads, inter-op 1, opt level all"
          % (", ".join(map(str, o.input_dim)), o.seconds))
    for threads in o.threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession(o.model, so,
                                 providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        for batch in o.batch:
            rng = np.random.default_rng(1234 + batch)
            x = rng.random((batch, *o.input_dim), dtype=np.float32)
            for _ in range(3):
                s.run(None, {name: x})
            lat = []
            end = time.perf_counter() + o.seconds
            while time.perf_counter() < end or len(lat) < 5:
                t = time.perf_counter()
                s.run(None, {name: x})
                lat.append((time.perf_counter() - t) * 1e3)
            med = statistics.median(lat)
            print("threads %d  batch %5d  median %10.4f ms  %9.0f images/s  "
                  "(%d runs)" % (threads, batch, med, batch / (med / 1e3),
                                 len(lat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
