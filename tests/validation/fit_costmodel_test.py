#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces the Hopper FP8 GEMM factor of the h100-sxm preset.

The preset's kernels.fp8_gemm_efficiency (costmodel/cluster.cc, kHopperFp8GemmEfficiency) says it
was fitted by

    scripts/fit_costmodel.py --fp8-only --source nemo2407 --gpu h100-sxm \
        --param kernels.fp8_gemm_efficiency=0.4:1.2

on the H100 FP8 fit rows of the nemo2407 source of tests/validation/corpus.json. This test reruns that command and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every H100 FP8 test row's measurement halved the choice is
   exactly the same;
3. the fit rows do: with the H100 FP8 fit rows measured 15 % slower the choice drops by more
   than 0.05 (so check 1 would catch a preset that no longer follows its fit rows).

Usage: fit_costmodel_test.py <jaxpp-sim binary> <source root>
"""

import sys

from fit_check import FitCheck

CHECK = FitCheck(
    fit_args=["--fp8-only", "--source", "nemo2407", "--gpu", "h100-sxm",
              "--param", "kernels.fp8_gemm_efficiency=0.4:1.2"],
    key=("kernels", "fp8_gemm_efficiency"),
    gpus=("h100-sxm",),
    committed=0.9,  # costmodel/cluster.cc kHopperFp8GemmEfficiency
    constant="kHopperFp8GemmEfficiency",
    selects=lambda row: row["cluster"] == "h100-sxm" and bool(row.get("fp8")),
    label="H100 FP8")

if __name__ == "__main__":
    sys.exit(CHECK.run(sys.argv, __doc__))
