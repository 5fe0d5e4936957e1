#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces each fitted cost-model factor that costmodel/cluster.cc
says was fitted on the corpus's fit rows (the 16-bit GEMM constants: fit_bf16_test.py).

Each named check below reruns the command its constant's comment records, on
tests/validation/corpus.json, and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every selected test row's measurement halved the choice is
   exactly the same;
3. the fit rows do: with the selected fit rows measured 15 % slower the choice drops by more than
   the check's min_drop (so check 1 would catch a preset that no longer follows its fit rows, or a
   model change after which nobody refitted).

Checks (ctest validation.fit_<name>):
  costmodel       Hopper FP8 GEMM factor, kHopperFp8GemmEfficiency: H100 FP8 fit rows of nemo2407
  blackwell_fp8   Blackwell FP8 GEMM factor, kBlackwellFp8GemmEfficiency: mbridge2511 fit rows,
                  B200 and GB200 jointly
  mxfp8           Blackwell MXFP8 GEMM factor, kBlackwellMxfp8GemmEfficiency: mbridgemxfp8 fit rows
  b200_attention  Blackwell attention core, kB200AttentionEfficiencyForward (GB200 shares it): the
                  B200 long-sequence fit rows of nemolongseq2504, backward tied to forward
  gb300           GB300 large-GEMM efficiency, kGb300GemmEfficiency: dense mbridgegb300 fit rows,
                  the attention fractions tied to it in GB200's ratio

Usage: fit_factor_test.py <jaxpp-sim binary> <source root> <check>
"""

import sys

from fit_check import FitCheck

CHECKS = {
    "costmodel": FitCheck(
        fit_args=["--fp8-only", "--source", "nemo2407", "--gpu", "h100-sxm",
                  "--param", "kernels.fp8_gemm_efficiency=0.4:1.2"],
        key=("kernels", "fp8_gemm_efficiency"),
        gpus=("h100-sxm",),
        committed=0.9,
        constant="kHopperFp8GemmEfficiency",
        selects=lambda row: row["cluster"] == "h100-sxm" and bool(row.get("fp8")),
        label="H100 FP8"),
    "blackwell_fp8": FitCheck(
        fit_args=["--joint", "--fp8-only", "--source", "mbridge2511", "--gpu", "b200",
                  "--gpu", "gb200-nvl72", "--param", "kernels.fp8_gemm_efficiency=0.6:1.4"],
        key=("kernels", "fp8_gemm_efficiency"),
        gpus=("b200", "gb200-nvl72"),
        committed=1.175,
        constant="kBlackwellFp8GemmEfficiency",
        selects=lambda row: (row["source"] == "mbridge2511"
                             and row["cluster"] in ("b200", "gb200-nvl72")),
        label="Blackwell FP8"),
    "mxfp8": FitCheck(
        fit_args=["--joint", "--fp8-only", "--source", "mbridgemxfp8", "--gpu", "b200",
                  "--gpu", "gb200-nvl72", "--param", "kernels.mxfp8_gemm_efficiency=0.5:1.5"],
        key=("kernels", "mxfp8_gemm_efficiency"),
        gpus=("b200", "gb200-nvl72"),
        committed=0.875,
        constant="kBlackwellMxfp8GemmEfficiency",
        selects=lambda row: row["source"] == "mbridgemxfp8",
        label="MXFP8"),
    "b200_attention": FitCheck(
        fit_args=["--gpu", "b200", "--source", "nemolongseq2504",
                  "--param", "kernels.attention_efficiency.forward=0.2:0.66",
                  "--tie", "kernels.attention_efficiency.backward="
                           "kernels.attention_efficiency.forward*0.8656"],
        key=("kernels", "attention_efficiency", "forward"),
        gpus=("b200",),
        committed=0.4731,
        constant="kB200AttentionEfficiencyForward",
        selects=lambda row: row["source"] == "nemolongseq2504" and row["cluster"] == "b200",
        label="B200 long-sequence",
        min_drop=0.04),
    "gb300": FitCheck(
        fit_args=["--gpu", "gb300-nvl72", "--param", "gemm_efficiency.max=0.4:0.68",
                  "--tie", "kernels.attention_efficiency.forward=gemm_efficiency.max*1.047608",
                  "--tie", "kernels.attention_efficiency.backward=gemm_efficiency.max*0.906809"],
        key=("gemm_efficiency", "max"),
        gpus=("gb300-nvl72",),
        committed=0.5466,
        constant="kGb300GemmEfficiency",
        selects=lambda row: row["cluster"] == "gb300-nvl72",
        label="GB300"),
}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in CHECKS:
        raise SystemExit(__doc__)
    sys.exit(CHECKS[sys.argv[3]].run(sys.argv[:3], __doc__))
