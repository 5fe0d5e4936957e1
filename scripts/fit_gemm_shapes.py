#!/usr/bin/env python3
"""Fit the GEMM shape constants of the operator-level cost model to measured GEMMs.

The constants are the cluster's "kernels" fields gemm_small_k, stream_k.min_k and stream_k.rate
(costmodel/cluster.h). Each candidate is scored on the FIT rows of a measured-GEMM file by

    jaxpp-sim validate-model --gemms FILE --split fit --cluster tmp.json --json

with tmp.json = {"base": <the file's cluster>, "kernels": {...}}: the mean |error| after one
common scale (costmodel/gemm_corpus.h). The search is a full grid over the values below. Only
after the best candidate is chosen are the TEST rows scored, once.

Usage (from the repository root, after building):
    scripts/fit_gemm_shapes.py [--gemms tests/data/kernels/h200_gemm_bf16.json] [--binary build/bin/jaxpp-sim]

Python 3 standard library only.
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL_K = [16, 32, 48, 64, 96, 128, 192, 256]
MIN_K = [0, 256, 512, 1024, 2048, 4096, 8192]  # 0: no stream-K
RATE = [0.8, 0.85, 0.9, 0.95, 1.0]


def score(binary, gemms, base, kernels, split):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"base": base, "kernels": kernels}, f)
        path = f.name
    try:
        out = subprocess.run([binary, "validate-model", "--gemms", gemms, "--split", split,
                              "--cluster", path, "--json"], check=True, capture_output=True,
                             text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)[split]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gemms", default=os.path.join(REPO, "tests/data/kernels/h200_gemm_bf16.json"))
    ap.add_argument("--binary", default=os.path.join(REPO, "build/bin/jaxpp-sim"))
    args = ap.parse_args()
    base = json.load(open(args.gemms))["cluster"]
    best = None
    candidates = [(k, 0, 1.0) for k in SMALL_K]
    candidates += [(k, m, r) for k, m, r in itertools.product(SMALL_K, MIN_K[1:], RATE)]
    for small_k, min_k, rate in candidates:
        kernels = {"gemm_small_k": small_k, "stream_k": {"min_k": min_k, "rate": rate}}
        s = score(args.binary, args.gemms, base, kernels, "fit")
        if best is None or s["mean_abs_error"] < best[0]["mean_abs_error"] - 1e-12:
            best = (s, kernels)
    fit, kernels = best
    test = score(args.binary, args.gemms, base, kernels, "test")
    print(f"{len(candidates)} candidates scored on the fit rows of {args.gemms}")
    print(f"best: {json.dumps(kernels)}")
    for name, s in (("fit", fit), ("test", test)):
        print(f"{name}: {s['rows']} GEMMs, scale {s['scale']:.3f}, mean |error| "
              f"{100 * s['mean_abs_error']:.1f}%, max {100 * s['max_abs_error']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
