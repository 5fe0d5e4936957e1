#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces the GB300 large-GEMM efficiency of the gb300-nvl72 preset.

costmodel/cluster.cc says kGb300GemmEfficiency was fitted by

    scripts/fit_costmodel.py --gpu gb300-nvl72 --param gemm_efficiency.max=0.4:0.68 \
        --tie kernels.attention_efficiency.forward=gemm_efficiency.max*1.047608 \
        --tie kernels.attention_efficiency.backward=gemm_efficiency.max*0.906809

on the dense fit rows of the mbridgegb300 source (MoE rows are left out by the script). This
test reruns that command and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every GB300 test row measured at half its throughput the
   choice is exactly the same;
3. the fit rows do: with them measured 15 % slower the choice drops by more than 0.05.

Usage: fit_gb300_test.py <jaxpp-sim binary> <source root>
"""

import sys

from fit_check import FitCheck

CHECK = FitCheck(
    fit_args=["--gpu", "gb300-nvl72", "--param", "gemm_efficiency.max=0.4:0.68",
              "--tie", "kernels.attention_efficiency.forward=gemm_efficiency.max*1.047608",
              "--tie", "kernels.attention_efficiency.backward=gemm_efficiency.max*0.906809"],
    key=("gemm_efficiency", "max"),
    gpus=("gb300-nvl72",),
    committed=0.5466,  # costmodel/cluster.cc kGb300GemmEfficiency
    constant="kGb300GemmEfficiency",
    selects=lambda row: row["cluster"] == "gb300-nvl72",
    label="GB300")

if __name__ == "__main__":
    sys.exit(CHECK.run(sys.argv, __doc__))
