"""scripts/fit_costmodel.py's --source and --tie (docs/validation.md, "Fitting cluster constants"):
the fit sees only the named source's rows, a tied constant follows the fitted one in every
candidate and in the written cluster, and bad options are refused before any run."""

import json
import os
import subprocess
import sys

SOURCE_DIR = os.environ["JAXPP_SOURCE_DIR"]
BINARY = os.environ["JAXPP_SIM_BINARY"]
SCRIPT = os.path.join(SOURCE_DIR, "scripts", "fit_costmodel.py")
FORWARD = "kernels.attention_efficiency.forward"
BACKWARD = "kernels.attention_efficiency.backward"


def fit(*args):
    p = subprocess.run([sys.executable, SCRIPT, "--binary", BINARY, *args],
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_source_keeps_its_rows_and_tie_follows_the_fitted_constant(tmp_path):
    code, out, err = fit("--gpu", "b200", "--source", "nemolongseq2504",
                         "--param", FORWARD + "=0.3:0.6",
                         "--tie", BACKWARD + "=" + FORWARD + "*0.8656",
                         "--points", "3", "--rounds", "1", "--quiet",
                         "--write-clusters", str(tmp_path))
    assert code == 0, err
    # B200 has 4 fit rows in the corpus; the source has 3 of them (16K, 128K, 1024K).
    assert "before (fit, preset as committed): 3 rows" in out, out
    assert "before (test, preset as committed): 5 rows" in out, out
    with open(tmp_path / "b200-fit.json") as f:
        written = json.load(f)
    attention = written["kernels"]["attention_efficiency"]
    assert 0.3 <= attention["forward"] <= 0.6
    assert abs(attention["backward"] - 0.8656 * attention["forward"]) < 1e-12
    # The written cluster is what was scored: it loads as a cluster file.
    check = subprocess.run([BINARY, "validate-model", "--rows-on", "b200", "--split", "fit",
                            "--cluster", str(tmp_path / "b200-fit.json"), "--json"],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr


def test_bad_tie_and_source_are_refused():
    code, _, err = fit("--gpu", "b200", "--param", FORWARD + "=0.3:0.6",
                       "--tie", BACKWARD + "=gemm_efficiency.max*2")
    assert code == 2 and "gemm_efficiency.max is not a --param" in err, err
    code, _, err = fit("--gpu", "b200", "--param", FORWARD + "=0.3:0.6", "--tie", "nonsense")
    assert code == 2 and "expected NAME=OTHER*FACTOR" in err, err
    code, _, err = fit("--gpu", "b200", "--param", FORWARD + "=0.3:0.6", "--source", "nope")
    assert code != 0 and "--source nope: not a source" in err, err
