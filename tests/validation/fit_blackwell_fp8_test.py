#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces the Blackwell FP8 GEMM factor of the b200 and gb200-nvl72
presets.

The presets' kernels.fp8_gemm_efficiency (costmodel/cluster.cc, kBlackwellFp8GemmEfficiency)
says it was fitted by

    scripts/fit_costmodel.py --joint --fp8-only --source mbridge2511 --gpu b200 \
        --gpu gb200-nvl72 --param kernels.fp8_gemm_efficiency=0.6:1.4

on the per-tensor FP8 fit rows of the mbridge2511 source of tests/validation/corpus.json. This
test reruns that command and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every mbridge2511 test row's measurement halved the choice
   is exactly the same;
3. the fit rows do: with the mbridge2511 fit rows measured 15 % slower the choice drops by more
   than 0.05 (so check 1 would catch a preset that no longer follows its fit rows).

Usage: fit_blackwell_fp8_test.py <jaxpp-sim binary> <source root>
"""

import sys

from fit_check import FitCheck

SOURCE = "mbridge2511"
CHECK = FitCheck(
    fit_args=["--joint", "--fp8-only", "--source", SOURCE, "--gpu", "b200", "--gpu", "gb200-nvl72",
              "--param", "kernels.fp8_gemm_efficiency=0.6:1.4"],
    key=("kernels", "fp8_gemm_efficiency"),
    gpus=("b200", "gb200-nvl72"),
    committed=1.175,  # costmodel/cluster.cc kBlackwellFp8GemmEfficiency
    constant="kBlackwellFp8GemmEfficiency",
    selects=lambda row: row["source"] == SOURCE and row["cluster"] in ("b200", "gb200-nvl72"),
    label="Blackwell FP8")

if __name__ == "__main__":
    sys.exit(CHECK.run(sys.argv, __doc__))
