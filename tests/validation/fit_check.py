"""Shared checks of a fitted preset constant: scripts/fit_costmodel.py, rerun on the corpus,
must choose the committed value, must not move when the test rows change, and must move when
the fit rows do (fit_factor_test.py: the FP8, MXFP8, attention and GB300 factors;
fit_bf16_test.py: the 16-bit GEMM efficiency of each GPU fitted on its own rows).
"""

import json
import os
import subprocess
import sys
import tempfile

ROUNDING = 0.005


class FitCheck:
    """One fitted constant.

    fit_args: the fit command's options after --corpus (its documented command line);
    key: the constant's path in the written cluster file ("kernels", "fp8_gemm_efficiency");
    gpus: the presets the fit writes (one value across all of them);
    committed / constant: the preset's value and the name it has in costmodel/cluster.cc;
    selects(row): whether a corpus row is one of the rows the constant is fitted and scored on;
    label: how those rows are named in messages ("H100 FP8");
    min_drop: how far the choice must fall with the fit rows measured 15 % slower (a constant
    that scales only part of a step, or a small one, moves less than 0.05).
    """

    def __init__(self, fit_args, key, gpus, committed, constant, selects, label, min_drop=0.05):
        self.fit_args, self.key, self.gpus = fit_args, key, gpus
        self.committed, self.constant = committed, constant
        self.selects, self.label = selects, label
        self.min_drop = min_drop

    def fit(self, binary, root, corpus, workdir):
        out = os.path.join(workdir, "clusters")
        cmd = [sys.executable, os.path.join(root, "scripts", "fit_costmodel.py"), "--binary",
               binary, "--corpus", corpus, *self.fit_args, "--write-clusters", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"fit_costmodel.py failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        values = set()
        for gpu in self.gpus:
            with open(os.path.join(out, gpu + "-fit.json")) as f:
                value = json.load(f)
                for part in self.key:
                    value = value[part]
                values.add(value)
        if len(values) != 1:
            raise SystemExit(f"the fit wrote different values per GPU: {values}")
        return values.pop()

    def perturbed(self, corpus_path, workdir, name, split, scale):
        """A copy of the corpus whose selected rows of `split` have their throughput × `scale`."""
        with open(corpus_path) as f:
            doc = json.load(f)
        changed = 0
        for row in doc["rows"]:
            if self.selects(row) and row["split"] == split:
                measured = row["measured"]
                (kind, value), = measured.items()
                # Throughput measures scale with `scale`; a step time scales with its inverse.
                measured[kind] = value / scale if kind == "step_time_s" else value * scale
                changed += 1
        if changed == 0:
            raise SystemExit(f"the corpus has no {self.label} {split} row")
        path = os.path.join(workdir, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def run(self, argv, usage):
        """The three checks; returns the exit status (1 on any failure)."""
        if len(argv) != 3:
            raise SystemExit(usage)
        binary, root = argv[1], argv[2]
        corpus = os.path.join(root, "tests", "validation", "corpus.json")
        failures = []
        with tempfile.TemporaryDirectory() as tmp:
            chosen = self.fit(binary, root, corpus, os.path.join(tmp, "a"))
            print(f"fitted on the corpus: {chosen:.4f} (preset {self.committed})")
            if abs(chosen - self.committed) > ROUNDING:
                failures.append(f"the fit chooses {chosen:.4f}, the preset has {self.committed}: "
                                f"rerun the fit and update {self.constant} with its provenance")

            test_halved = self.perturbed(corpus, tmp, "test_halved.json", "test", 0.5)
            same = self.fit(binary, root, test_halved, os.path.join(tmp, "b"))
            print(f"with the {self.label} test rows halved: {same:.4f}")
            if same != chosen:
                failures.append(f"the {self.label} test rows moved the fit ({chosen} -> {same})")

            fit_slower = self.perturbed(corpus, tmp, "fit_slower.json", "fit", 0.85)
            lower = self.fit(binary, root, fit_slower, os.path.join(tmp, "c"))
            print(f"with the {self.label} fit rows 15 % slower: {lower:.4f}")
            if not lower < chosen - self.min_drop:
                failures.append(f"the fit rows did not move the fit ({chosen} -> {lower})")

        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        return 1 if failures else 0
