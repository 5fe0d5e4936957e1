#!/usr/bin/env python3
"""Fit cluster constants of the cost model to the FIT rows of the validation corpus.

For each GPU type (cluster preset) in the corpus, searches the named cluster constants within
their ranges to minimise the mean |error| of that GPU's fit rows, where
error = predicted / measured step time - 1 as `jaxpp-sim validate-model` computes it. Every
candidate is scored by running

    jaxpp-sim validate-model --corpus CORPUS --rows-on GPU --split fit --cluster tmp.json --json

with tmp.json = {"base": GPU, <constants>}. The search is coordinate descent (each parameter in
turn over a coarse grid of its range, the others held, repeated for --rounds rounds) and then a
fine grid around the best value of each parameter. Only after the constants are chosen are the
TEST rows scored, once; they never influence the choice.

Before the search the GPU's rows are also scored with its preset as committed ("before"), so a
refit shows what it changed; those figures are printed only. A GPU with fewer than three fit or
three test rows gets a note saying so (docs/validation.md asks that a fitted constant be scored
on at least three test rows).

Usage (from the repository root, after building):
    scripts/fit_costmodel.py --param gemm_efficiency.max=0.5:0.95 \\
                             --param allreduce_bus_efficiency=0.4:0.95
    scripts/fit_costmodel.py --gpu h100-sxm --param gemm_efficiency.max=0.5:0.95 \\
                             --param iteration_overhead_ms=0 --write-clusters fitted/
    scripts/fit_costmodel.py --gpu mi300x --param gemm_efficiency.max=0.1:0.9
    scripts/fit_costmodel.py --joint --fp8-only --source mbridge2511 --gpu b200 --gpu gb200-nvl72 \\
                             --param kernels.fp8_gemm_efficiency=0.6:1.4
    scripts/fit_costmodel.py --joint --fp8-only --source mbridgemxfp8 --gpu b200 --gpu gb200-nvl72 \\
                             --param kernels.mxfp8_gemm_efficiency=0.5:1.5
--joint fits ONE set of constants shared by every GPU named (the mean |error| of all their fit
rows together); --fp8-only keeps the corpus's FP8 rows only (the rows an FP8 constant moves),
--no-fp8 its 16-bit rows only (the BF16 constants' fits).
Rows of MoE models (routed experts; validate-model's "moe") are left out unless --moe-only is
given, which keeps them only: the dense constants are fitted on dense runs, and a constant of the
MoE model (expert GEMMs, all-to-all, permutation) only on MoE fit rows.
--source S (repeatable) keeps the rows of those corpus sources only (a constant that only some
runs move, e.g. the attention kernels' efficiency on the long-sequence rows):
    scripts/fit_costmodel.py --gpu b200 --source nemolongseq2504 \
        --param kernels.attention_efficiency.forward=0.2:0.66 \
        --tie kernels.attention_efficiency.backward=kernels.attention_efficiency.forward*0.8656
--exclude-source S (repeatable) leaves the rows of those sources out: the 16-bit GEMM efficiencies
are fitted without the sources whose runs execute their element-wise work unfused in eager
PyTorch (llmfoundry, ibmfsdp2024, torchtitana100), work the model's kernel inventory does not
price (docs/validation.md, "Fitting cluster constants"):
    scripts/fit_costmodel.py --gpu a100-80g --no-fp8 --param gemm_efficiency.max=0.5:0.9 \
        --exclude-source llmfoundry --exclude-source ibmfsdp2024 --exclude-source torchtitana100
--tie NAME=OTHER*K sets NAME to K times the value of OTHER in every candidate (one degree of
freedom for two constants that move together).
A parameter is NAME=LO:HI (fitted) or NAME=VALUE (held fixed); NAME is a key of the cluster JSON
form (costmodel/cluster.h), nested keys joined by dots. docs/validation.md describes the corpus,
the conventions and this procedure.

Python 3 standard library only.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Param:
    def __init__(self, text):
        if "=" not in text:
            raise argparse.ArgumentTypeError(f"--param {text}: expected NAME=LO:HI or NAME=VALUE")
        self.name, value = text.split("=", 1)
        try:
            if ":" in value:
                lo, hi = (float(v) for v in value.split(":", 1))
                if not lo < hi:
                    raise ValueError
                self.lo, self.hi, self.fixed = lo, hi, None
            else:
                self.fixed = float(value)
                self.lo = self.hi = self.fixed
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--param {text}: expected NAME=LO:HI with LO < HI, or NAME=VALUE")

    def fitted(self):
        return self.fixed is None


def set_nested(doc, dotted, value):
    keys = dotted.split(".")
    for key in keys[:-1]:
        doc = doc.setdefault(key, {})
    doc[keys[-1]] = value


class Tie:
    def __init__(self, text):
        try:
            self.name, rhs = text.split("=", 1)
            self.other, factor = rhs.rsplit("*", 1)
            self.factor = float(factor)
            if not self.name or not self.other:
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(f"--tie {text}: expected NAME=OTHER*FACTOR")


TIES = []  # the --tie options: constants set from a fitted one in every candidate


def cluster_doc(gpu, values):
    doc = {"name": gpu + "-fit", "base": gpu}
    for name, value in values.items():
        set_nested(doc, name, value)
    for tie in TIES:
        if tie.other in values:
            set_nested(doc, tie.name, values[tie.other] * tie.factor)
    return doc


def corpus_gpus(path):
    """The cluster presets of the corpus's rows, in first-seen order."""
    if path.lower().endswith(".csv"):
        with open(path, newline="") as f:
            clusters = [row["cluster"] for row in csv.DictReader(f) if row.get("cluster")]
    else:
        with open(path) as f:
            clusters = [row["cluster"] for row in json.load(f)["rows"]]
    seen = []
    for c in clusters:
        if c.lower() not in seen:
            seen.append(c.lower())
    return seen


class Scorer:
    """Runs validate-model for one GPU and caches the result of each set of constants."""

    def __init__(self, binary, corpus, gpu, band, tmpdir):
        self.binary, self.corpus, self.gpu, self.band = binary, corpus, gpu, band
        self.path = os.path.join(tmpdir, gpu + ".json")
        self.cache = {}
        self.runs = 0

    def report(self, values, split):
        with open(self.path, "w") as f:
            json.dump(cluster_doc(self.gpu, values), f)
        cmd = [self.binary, "validate-model", "--corpus", self.corpus, "--rows-on", self.gpu,
               "--split", split, "--cluster", self.path, "--band", str(self.band), "--json"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        self.runs += 1
        # Exit 1: the report is complete but some row was rejected by the simulator (one stderr
        # line each); the objective counts each such row as a 100 % error.
        if done.returncode == 1 and done.stdout.strip():
            try:
                return json.loads(done.stdout), ""
            except json.JSONDecodeError:
                pass
        if done.returncode != 0:
            return None, done.stderr.strip()
        return json.loads(done.stdout), ""

    def objective(self, values):
        """Mean |error| of the fit rows; a row the simulator rejects costs 1 (100 %)."""
        key = tuple(sorted((k, round(v, 9)) for k, v in values.items()))
        if key not in self.cache:
            report, err = self.report(values, "fit")
            if report is None:
                sys.exit(f"fit_costmodel: validate-model failed: {err}")
            s = report["summaries"]["fit"]
            self.cache[key] = s["mean_abs_error"] + s["errors"]
        return self.cache[key]


class JointScorer:
    """Several GPUs' Scorers with one set of constants: the mean |error| of their fit rows pooled."""

    def __init__(self, scorers):
        self.scorers = scorers
        self.cache = {}

    @property
    def runs(self):
        return sum(s.runs for s in self.scorers)

    def objective(self, values):
        key = tuple(sorted((k, round(v, 9)) for k, v in values.items()))
        if key not in self.cache:
            total, scored, errors = 0.0, 0, 0
            for scorer in self.scorers:
                report, err = scorer.report(values, "fit")
                if report is None and "no row selected" in err:
                    continue  # this GPU has no fit rows: its test rows are scored at the end
                if report is None:
                    sys.exit(f"fit_costmodel: validate-model failed: {err}")
                for row in report["rows"]:
                    if row["split"] != "fit":
                        continue
                    if row["status"] in ("pass", "fail"):
                        total += abs(row["error"])
                        scored += 1
                    elif row["status"] == "error":
                        errors += 1
            self.cache[key] = (total + errors) / max(1, scored + errors)
        return self.cache[key]


def moe_row_ids(binary, path):
    """The ids of the corpus's rows whose model has routed experts (validate-model's "moe")."""
    done = subprocess.run([binary, "validate-model", "--corpus", path, "--json"],
                          capture_output=True, text=True)
    # Exit 1 with a report: rows the simulator rejected (they have no prediction, only an id).
    if done.returncode not in (0, 1) or not done.stdout.strip():
        sys.exit(f"fit_costmodel: validate-model failed: {done.stderr.strip()}")
    return {row["id"] for row in json.loads(done.stdout)["rows"] if row["moe"]}


def subset_corpus(path, tmpdir, fp8, moe_ids, moe, sources=None, excluded=None):
    """A copy of the JSON corpus holding the rows of one kind: FP8 rows only (fp8 true), 16-bit
    rows only (fp8 false) or both (None); MoE rows (ids in moe_ids) only (moe true) or dense rows
    only (moe false); with `sources`, the rows of those corpus sources only; without the rows of
    the `excluded` sources; model files made absolute."""
    with open(path) as f:
        doc = json.load(f)
    folder = os.path.dirname(os.path.abspath(path))
    if sources:
        unknown = [s for s in sources if s not in doc.get("sources", {})]
        if unknown:
            sys.exit(f"fit_costmodel: --source {unknown[0]}: not a source of {path}")
    for s in excluded or []:
        if s not in doc.get("sources", {}):
            sys.exit(f"fit_costmodel: --exclude-source {s}: not a source of {path}")
    rows = []
    for row in doc["rows"]:
        if fp8 is not None and row.get("fp8", False) != fp8:
            continue
        if (row["id"] in moe_ids) != moe:
            continue
        if sources and row.get("source") not in sources:
            continue
        if excluded and row.get("source") in excluded:
            continue
        model = row.get("model")
        if isinstance(model, str) and os.path.isfile(os.path.join(folder, model)):
            row = dict(row, model=os.path.join(folder, model))
        rows.append(row)
    doc["rows"] = rows
    out = os.path.join(tmpdir, "corpus-subset.json")
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def grid(lo, hi, n):
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def fit(scorer, params, rounds, points, verbose):
    values = {p.name: (p.lo + p.hi) / 2 if p.fitted() else p.fixed for p in params}
    fitted = [p for p in params if p.fitted()]
    step = {p.name: (p.hi - p.lo) / (points - 1) for p in fitted}
    best = scorer.objective(values)
    # Coordinate descent over the coarse grid of each range.
    for r in range(rounds):
        before = best
        for p in fitted:
            for v in grid(p.lo, p.hi, points):
                trial = dict(values, **{p.name: v})
                score = scorer.objective(trial)
                if score < best:
                    best, values = score, trial
        if verbose:
            print(f"  round {r + 1}: {format_values(values)}  mean |error| {best * 100:.2f}%")
        if best >= before and r > 0:
            break
    # Fine grid: around the best value of each parameter, one coarse step either side, twice.
    for _ in range(2):
        for p in fitted:
            lo = max(p.lo, values[p.name] - step[p.name])
            hi = min(p.hi, values[p.name] + step[p.name])
            for v in grid(lo, hi, points):
                trial = dict(values, **{p.name: v})
                score = scorer.objective(trial)
                if score < best:
                    best, values = score, trial
            step[p.name] = (hi - lo) / (points - 1)
    if verbose:
        print(f"  fine grid: {format_values(values)}  mean |error| {best * 100:.2f}%")
    return values


def format_values(values):
    return " ".join(f"{k}={v:.4g}" for k, v in values.items())


def summary_line(s, band):
    if s["scored"] == 0:
        return f"{s['rows']} rows, none scored ({s['errors']} errors)"
    line = (f"{s['rows']} rows, {s['scored']} scored, {s['in_band']} within ±{band * 100:g}%, "
            f"mean |error| {s['mean_abs_error'] * 100:.1f}%, max {s['max_abs_error'] * 100:.1f}% "
            f"({s['max_row']})")
    if s["expected_failures"]:
        line += f", {s['expected_failures']} expected failures"
    if s["errors"]:
        line += f", {s['errors']} errors"
    return line


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See docs/validation.md.")
    parser.add_argument("--param", type=Param, action="append", required=True,
                        help="NAME=LO:HI to fit, or NAME=VALUE to hold (cluster JSON key, "
                             "nested keys joined by dots)")
    parser.add_argument("--corpus", default=os.path.join(REPO, "tests/validation/corpus.json"))
    parser.add_argument("--binary", default=os.path.join(REPO, "build/bin/jaxpp-sim"),
                        help="the jaxpp-sim binary (default: build/bin/jaxpp-sim, as README)")
    parser.add_argument("--gpu", action="append",
                        help="fit only this cluster preset (repeatable; default: every GPU of "
                             "the corpus)")
    parser.add_argument("--rounds", type=int, default=4, help="coordinate-descent rounds")
    parser.add_argument("--points", type=int, default=9, help="grid points per parameter")
    parser.add_argument("--band", type=float, default=0.10, help="band for the in-band counts")
    parser.add_argument("--write-clusters", metavar="DIR",
                        help="write each GPU's fitted cluster file to DIR/<gpu>-fit.json")
    parser.add_argument("--quiet", action="store_true", help="no per-round progress")
    parser.add_argument("--joint", action="store_true",
                        help="fit one set of constants shared by all the GPUs (their fit rows "
                             "pooled) instead of one per GPU")
    parser.add_argument("--fp8-only", action="store_true",
                        help="score the corpus's FP8 rows only (JSON corpus)")
    parser.add_argument("--source", action="append",
                        help="score only the rows of this corpus source (repeatable; JSON corpus)")
    parser.add_argument("--exclude-source", action="append",
                        help="leave out the rows of this corpus source (repeatable; JSON corpus)")
    parser.add_argument("--tie", type=Tie, action="append", default=[],
                        help="NAME=OTHER*FACTOR: set NAME to FACTOR times the fitted OTHER")
    parser.add_argument("--no-fp8", action="store_true",
                        help="score the corpus's 16-bit rows only (JSON corpus): the BF16 "
                             "constants' fits")
    parser.add_argument("--moe-only", action="store_true",
                        help="score the corpus's MoE rows only (JSON corpus): the MoE "
                             "constants' fits (default: its dense rows only)")
    args = parser.parse_args()
    if args.points < 3:
        parser.error("--points must be >= 3")
    if not os.access(args.binary, os.X_OK):
        parser.error(f"--binary {args.binary}: not an executable (build first: "
                     "./scripts/build.sh test, or cmake --build build)")
    if not any(p.fitted() for p in args.param):
        parser.error("no parameter to fit (give at least one NAME=LO:HI)")
    if (args.fp8_only or args.no_fp8 or args.moe_only or args.source or args.exclude_source) \
            and args.corpus.lower().endswith(".csv"):
        parser.error("--fp8-only, --no-fp8, --moe-only, --source and --exclude-source need a "
                     "JSON corpus")
    names = {p.name for p in args.param}
    for tie in args.tie:
        if tie.other not in names:
            parser.error(f"--tie {tie.name}: {tie.other} is not a --param")
        if tie.name in names:
            parser.error(f"--tie {tie.name}: also given as a --param")
    TIES.extend(args.tie)
    if args.fp8_only and args.no_fp8:
        parser.error("--fp8-only and --no-fp8 exclude each other")

    results = {}
    with tempfile.TemporaryDirectory(prefix="jaxpp-fit-") as tmp:
        if not args.corpus.lower().endswith(".csv"):
            fp8 = True if args.fp8_only else False if args.no_fp8 else None
            moe_ids = moe_row_ids(args.binary, args.corpus)
            if moe_ids and not args.moe_only:
                print(f"leaving out the {len(moe_ids)} MoE rows (--moe-only fits on them)")
            args.corpus = subset_corpus(args.corpus, tmp, fp8, moe_ids, args.moe_only,
                                        sources=args.source, excluded=args.exclude_source)
        gpus = [g.lower() for g in args.gpu] if args.gpu else corpus_gpus(args.corpus)
        if args.joint:
            scorers = [Scorer(args.binary, args.corpus, gpu, args.band, tmp) for gpu in gpus]
            joint = JointScorer(scorers)
            ranges = ", ".join(f"{p.name} in [{p.lo:g}, {p.hi:g}]" if p.fitted()
                               else f"{p.name} = {p.fixed:g}" for p in args.param)
            print(f"{', '.join(gpus)}: fitting {ranges} jointly on their fit rows")
            values = fit(joint, args.param, args.rounds, args.points, not args.quiet)
            print(f"  chosen: {format_values(values)}  ({joint.runs} runs of validate-model)")
            for scorer in scorers:
                fit_report, err = scorer.report(values, "fit")
                test_report, test_err = scorer.report(values, "test")
                if fit_report is None:
                    print(f"  {scorer.gpu} fit:  not scored ({err})")
                else:
                    print(f"  {scorer.gpu} fit:  "
                          f"{summary_line(fit_report['summaries']['fit'], args.band)}")
                if test_report is None:
                    print(f"  {scorer.gpu} test: not scored ({test_err})")
                else:
                    print(f"  {scorer.gpu} test: "
                          f"{summary_line(test_report['summaries']['test'], args.band)}")
                results[scorer.gpu] = values
                if args.write_clusters:
                    os.makedirs(args.write_clusters, exist_ok=True)
                    path = os.path.join(args.write_clusters, scorer.gpu + "-fit.json")
                    with open(path, "w") as f:
                        json.dump(cluster_doc(scorer.gpu, values), f, indent=2)
                        f.write("\n")
                    print(f"  wrote {path}")
            gpus = []
        for gpu in gpus:
            scorer = Scorer(args.binary, args.corpus, gpu, args.band, tmp)
            ranges = ", ".join(f"{p.name} in [{p.lo:g}, {p.hi:g}]" if p.fitted()
                               else f"{p.name} = {p.fixed:g}" for p in args.param)
            print(f"{gpu}: fitting {ranges} on its fit rows")
            # The preset as committed, for comparison only (never part of the objective).
            for split in ("fit", "test"):
                before, err = scorer.report({}, split)
                if before is None:
                    sys.exit(f"fit_costmodel: validate-model failed: {err}")
                s = before["summaries"][split]
                print(f"  before ({split}, preset as committed): {summary_line(s, args.band)}")
                if s["scored"] < 3 and split == "fit":
                    print(f"  note: the constants stand on {s['scored']} fit row(s)")
                elif s["scored"] < 3:
                    print(f"  note: {s['scored']} scored test row(s); docs/validation.md asks "
                          f"that a fitted constant be scored on at least three")
            values = fit(scorer, args.param, args.rounds, args.points, not args.quiet)
            fit_report, err = scorer.report(values, "fit")
            if fit_report is None:
                sys.exit(f"fit_costmodel: validate-model failed: {err}")
            # The test rows, scored once with the chosen constants.
            test_report, test_err = scorer.report(values, "test")
            results[gpu] = values
            print(f"  chosen: {format_values(values)}  ({scorer.runs} runs of validate-model)")
            print(f"  fit:  {summary_line(fit_report['summaries']['fit'], args.band)}")
            if test_report is None:
                print(f"  test: not scored ({test_err})")
            else:
                print(f"  test: {summary_line(test_report['summaries']['test'], args.band)}")
            if args.write_clusters:
                os.makedirs(args.write_clusters, exist_ok=True)
                path = os.path.join(args.write_clusters, gpu + "-fit.json")
                with open(path, "w") as f:
                    json.dump(cluster_doc(gpu, values), f, indent=2)
                    f.write("\n")
                print(f"  wrote {path}")
    print(json.dumps({gpu: cluster_doc(gpu, v) for gpu, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
