#!/usr/bin/env python3
"""scripts/fit_costmodel.py scores a fit row the simulator rejects as a 100 % error.

validate-model exits 1 after a complete report when a selected row is rejected (one stderr line
per row). The fit must still run on such a corpus, count the row in its summary's errors and add
1 (100 %) per rejected row to the objective, not stop. The corpus: three A100 fit rows and two
test rows of the built-in corpus, plus a copy of a fit row the simulator refuses (tensor
parallelism 3, which does not divide its model's attention heads). A row whose schedule cannot run
its configuration is not such a row: validate-model refuses that corpus before predicting (exit 2).

Usage: fit_rejected_row_test.py <jaxpp-sim binary> <source root>
"""

import json
import os
import subprocess
import sys
import tempfile


def main(argv):
    binary, root = argv[1], argv[2]
    with open(os.path.join(root, "tests", "validation", "corpus.json")) as f:
        corpus = json.load(f)
    a100 = [r for r in corpus["rows"] if r["cluster"] == "a100-80g" and not r.get("expected_failure")]
    fit = [r for r in a100 if r["split"] == "fit"][:3]
    test = [r for r in a100 if r["split"] == "test"][:2]
    bad = dict(fit[0])
    bad["id"] = "rejected-tp"
    bad.update(gpus=3, tp=3, pp=1, dp=1, cp=1, virtual_stages=1, schedule="1f1b")
    bad["global_batch"] = bad["microbatch_size"] * 4
    corpus["rows"] = fit + test + [bad]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.json")
        with open(path, "w") as f:
            json.dump(corpus, f)
        # Model files named by rows resolve against the corpus's directory: none here (presets).
        check = subprocess.run([binary, "validate-model", "--corpus", path, "--json"],
                               capture_output=True, text=True)
        if check.returncode != 1 or "rejected-tp" not in check.stderr or "does not divide" not in check.stderr:
            print(f"expected validate-model to exit 1 naming the rejected row, got "
                  f"{check.returncode}: {check.stderr}")
            return 1
        done = subprocess.run(
            [sys.executable, os.path.join(root, "scripts", "fit_costmodel.py"), "--binary",
             binary, "--corpus", path, "--gpu", "a100-80g", "--param",
             "gemm_efficiency.max=0.5:0.9", "--points", "3", "--rounds", "1"],
            capture_output=True, text=True)
        if done.returncode != 0:
            print(f"fit_costmodel failed ({done.returncode}): {done.stdout}{done.stderr}")
            return 1
        summary = [l for l in done.stdout.splitlines() if l.strip().startswith("fit:")]
        if not summary or "1 errors" not in summary[-1]:
            print(f"expected the fit summary to count the rejected row:\n{done.stdout}")
            return 1
    print("fit_costmodel scores the rejected fit row as an error and completes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
