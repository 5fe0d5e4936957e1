#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces the Blackwell MXFP8 GEMM factor of the b200 and gb200-nvl72
presets.

The presets' kernels.mxfp8_gemm_efficiency (costmodel/cluster.cc, kBlackwellMxfp8GemmEfficiency)
says it was fitted by

    scripts/fit_costmodel.py --joint --fp8-only --source mbridgemxfp8 --gpu b200 \
        --gpu gb200-nvl72 --param kernels.mxfp8_gemm_efficiency=0.5:1.5

on the MXFP8 fit rows of tests/validation/corpus.json. This test reruns that command and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every MXFP8 test row's measurement halved the choice is
   exactly the same;
3. the fit rows do: with the MXFP8 fit rows measured 15 % slower the choice drops by more than
   0.05 (so check 1 would catch a preset that no longer follows its fit rows).

Usage: fit_mxfp8_test.py <jaxpp-sim binary> <source root>
"""

import json
import os
import subprocess
import sys
import tempfile

COMMITTED = 0.852  # costmodel/cluster.cc kBlackwellMxfp8GemmEfficiency
ROUNDING = 0.005
PARAM = "kernels.mxfp8_gemm_efficiency=0.5:1.5"
SOURCE = "mbridgemxfp8"


def fit(binary, root, corpus, workdir):
    out = os.path.join(workdir, "clusters")
    cmd = [sys.executable, os.path.join(root, "scripts", "fit_costmodel.py"), "--binary", binary,
           "--corpus", corpus, "--joint", "--fp8-only", "--source", SOURCE, "--gpu", "b200",
           "--gpu", "gb200-nvl72", "--param", PARAM, "--write-clusters", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"fit_costmodel.py failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    values = set()
    for gpu in ("b200", "gb200-nvl72"):
        with open(os.path.join(out, gpu + "-fit.json")) as f:
            values.add(json.load(f)["kernels"]["mxfp8_gemm_efficiency"])
    if len(values) != 1:
        raise SystemExit(f"--joint wrote different values per GPU: {values}")
    return values.pop()


def perturbed(corpus_path, workdir, name, split, scale):
    """A copy of the corpus whose MXFP8 rows of `split` have their throughput times `scale`."""
    with open(corpus_path) as f:
        doc = json.load(f)
    changed = 0
    for row in doc["rows"]:
        if row["source"] == SOURCE and row["split"] == split:
            measured = row["measured"]
            (kind, value), = measured.items()
            measured[kind] = value / scale if kind == "step_time_s" else value * scale
            changed += 1
    if changed == 0:
        raise SystemExit(f"the corpus has no {SOURCE} {split} row")
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    binary, root = sys.argv[1], sys.argv[2]
    corpus = os.path.join(root, "tests", "validation", "corpus.json")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        chosen = fit(binary, root, corpus, os.path.join(tmp, "a"))
        print(f"fitted on the corpus: {chosen:.4f} (preset {COMMITTED})")
        if abs(chosen - COMMITTED) > ROUNDING:
            failures.append(f"the fit chooses {chosen:.4f}, the preset has {COMMITTED}: rerun the "
                            "fit and update kBlackwellMxfp8GemmEfficiency with its provenance")

        test_halved = perturbed(corpus, tmp, "test_halved.json", "test", 0.5)
        same = fit(binary, root, test_halved, os.path.join(tmp, "b"))
        print(f"with the MXFP8 test rows halved: {same:.4f}")
        if same != chosen:
            failures.append(f"the MXFP8 test rows moved the fit ({chosen} -> {same})")

        fit_slower = perturbed(corpus, tmp, "fit_slower.json", "fit", 0.85)
        lower = fit(binary, root, fit_slower, os.path.join(tmp, "c"))
        print(f"with the MXFP8 fit rows 15 % slower: {lower:.4f}")
        if not lower < chosen - 0.05:
            failures.append(f"the fit rows did not move the fit ({chosen} -> {lower})")

    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
