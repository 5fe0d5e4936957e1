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

import sys

from fit_check import FitCheck

SOURCE = "mbridgemxfp8"
CHECK = FitCheck(
    fit_args=["--joint", "--fp8-only", "--source", SOURCE, "--gpu", "b200", "--gpu", "gb200-nvl72",
              "--param", "kernels.mxfp8_gemm_efficiency=0.5:1.5"],
    key=("kernels", "mxfp8_gemm_efficiency"),
    gpus=("b200", "gb200-nvl72"),
    committed=0.875,  # costmodel/cluster.cc kBlackwellMxfp8GemmEfficiency
    constant="kBlackwellMxfp8GemmEfficiency",
    selects=lambda row: row["source"] == SOURCE,
    label="MXFP8")

if __name__ == "__main__":
    sys.exit(CHECK.run(sys.argv, __doc__))
