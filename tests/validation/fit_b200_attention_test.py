#!/usr/bin/env python3
"""scripts/fit_costmodel.py reproduces the Blackwell attention-core efficiency of the b200 preset
(which gb200-nvl72 shares: the same die, costmodel/cluster.cc).

kB200AttentionEfficiencyForward says it was fitted by

    scripts/fit_costmodel.py --gpu b200 --source nemolongseq2504 \
        --param kernels.attention_efficiency.forward=0.2:0.66 \
        --tie kernels.attention_efficiency.backward=kernels.attention_efficiency.forward*0.8656

on the B200 fit rows of the long-sequence source (Llama 3 8B at 16K, 128K and 1024K tokens, where
the attention core is 30-95 % of the step). This test reruns that command and checks:

1. the chosen value is the committed one (within the rounding of the preset);
2. the test rows never move it: with every B200 long-sequence test row's measurement halved the
   choice is exactly the same;
3. the fit rows do: with them measured 15 % slower the choice drops by more than 0.04.

Usage: fit_b200_attention_test.py <jaxpp-sim binary> <source root>
"""

import sys

from fit_check import FitCheck

SOURCE = "nemolongseq2504"
CHECK = FitCheck(
    fit_args=["--gpu", "b200", "--source", SOURCE,
              "--param", "kernels.attention_efficiency.forward=0.2:0.66",
              "--tie", "kernels.attention_efficiency.backward=kernels.attention_efficiency.forward*0.8656"],
    key=("kernels", "attention_efficiency", "forward"),
    gpus=("b200",),
    committed=0.4731,  # costmodel/cluster.cc kB200AttentionEfficiencyForward
    constant="kB200AttentionEfficiencyForward",
    selects=lambda row: row["source"] == SOURCE and row["cluster"] == "b200",
    label="B200 long-sequence",
    min_drop=0.04)

if __name__ == "__main__":
    sys.exit(CHECK.run(sys.argv, __doc__))
