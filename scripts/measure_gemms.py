#!/usr/bin/env python3
"""Times BF16 and per-tensor FP8 GEMMs of the same shapes on one GPU (PyTorch, cuBLASLt).

What it measures: for every shape (m, n, k) of the list below, out[m x n] = in[m x k] W[k x n]
as OperatorCost::gemm_s counts it, the median over 5 groups of the mean time of 10 calls (one
pair of CUDA events around each group), after 3 warm-up calls and, once at the start, 2 s of large
GEMMs to raise the clocks; random normal operands:

  bf16   torch.matmul in the layout of the pass: forward NN (A[m,k] B[k,n]), input gradient NT
         (A[m,k] B[n,k]^T), weight gradient TN (A[k,m]^T B[k,n]); fp32 accumulation
  fp8    torch._scaled_mm with E4M3 operands, per-tensor scales and a bf16 output, in the one
         layout Hopper's FP8 tensor cores take (A row-major, B column-major: NT in this file's
         convention), as Transformer Engine runs every FP8 GEMM after its transposed copies

The shapes are those of a transformer layer's linear layers (QKV n = 3h/tp, k = h; projection
n = h, k = h/tp; MLP up n = f/tp, k = h; MLP down n = h, k = f/tp) in their three passes
(forward (m, n, k); input gradient (m, k, n); weight gradient (k, n, m)), every size a multiple
of 16 as FP8 GEMMs require.

The split is fixed here, before any fitting: the fit rows are a grid (hidden 1024-12288 with a
4h MLP, tp 1-8, tokens 2048 and 8192); the test rows are 240 shapes drawn at random (seed
20261128) from the hidden/MLP sizes of published models (Llama 2/3, GPT-3, Nemotron-4, Mixtral,
Qwen, DeepSeek) with tp 1-8 and tokens 1024-16384.

Output: two files in the format of tests/data/kernels/h200_gemm_bf16.json (costmodel/
gemm_corpus.h), --out-prefix + "_bf16.json" and + "_fp8.json", scored with
`jaxpp-sim validate-model --gemms FILE`.

  python3 scripts/measure_gemms.py --cluster h200 --out-prefix /tmp/h200_gemm_shapes

No test runs it (CI has no GPU). The files it wrote are tests/data/kernels/h200_gemm_shapes_*.json
and h100_gemm_shapes_*.json (tests/costmodel/gemm_corpus_test.cc). A first version of this script
timed one group of 10 calls with no warm-up burst; on the H100 the first shapes of its grid then
ran up to 9x slow (the GPU's clocks had not risen), so it was replaced before any file was kept.
"""
import argparse
import json
import random
import subprocess
import sys
import time

import torch

WARMUP = 3
CALLS = 10
GROUPS = 5

# (hidden, mlp) of published dense and MoE models (the MoE ones: one expert's MLP).
MODELS = [
    (2048, 5632), (2048, 8192), (3072, 8192), (4096, 11008), (4096, 14336), (5120, 13824),
    (5120, 17920), (6144, 24576), (7168, 18432), (7168, 2048), (8192, 22016), (8192, 28672),
    (12288, 49152), (16384, 53248), (18432, 73728), (4096, 1536), (6144, 16384), (3584, 18944),
]


def linear_shapes(h, f, tp, tokens):
    """(m, n, k, layout) of the forward, input-gradient and weight-gradient GEMMs of one layer."""
    out = []
    for n, k in ((3 * h // tp, h), (h, h // tp), (f // tp, h), (h, f // tp)):
        out.append((tokens, n, k, "NN"))
        out.append((tokens, k, n, "NT"))
        out.append((k, n, tokens, "TN"))
    return out


def fit_shapes():
    shapes = []
    for h in (1024, 2048, 4096, 8192, 12288):
        for tp in (1, 2, 4, 8):
            for tokens in (2048, 8192):
                shapes += linear_shapes(h, 4 * h, tp, tokens)
    return shapes


def test_shapes(count):
    rng = random.Random(20261128)
    shapes = []
    while len(shapes) < count:
        h, f = rng.choice(MODELS)
        tp = rng.choice((1, 2, 4, 8))
        tokens = rng.choice((1024, 2048, 4096, 8192, 16384))
        if (f // tp) % 16 or (3 * h // tp) % 16 or (h // tp) % 16:
            continue
        shapes.append(rng.choice(linear_shapes(h, f, tp, tokens)))
    return shapes


def dedupe(shapes):
    seen, out = set(), []
    for s in shapes:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def timed(fn):
    """The median over GROUPS groups of the mean time of CALLS calls, after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(GROUPS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(CALLS):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / CALLS)
    return sorted(times)[len(times) // 2]


def warm_up_the_gpu(seconds=2.0):
    """Large GEMMs for a while, so that the first shapes do not run at idle clocks."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def time_bf16(m, n, k, layout):
    dev = "cuda"
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16) if layout[0] == "N" else \
        torch.randn(k, m, device=dev, dtype=torch.bfloat16).t()
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16) if layout[1] == "N" else \
        torch.randn(n, k, device=dev, dtype=torch.bfloat16).t()
    return timed(lambda: torch.matmul(a, b))


def time_fp8(m, n, k):
    dev = "cuda"
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev, dtype=torch.float32)
    return timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))


def driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout
        return out.split("\n")[0].strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cluster", required=True, help="preset name of the GPU, e.g. h200")
    ap.add_argument("--out-prefix", required=True)
    ap.add_argument("--test-rows", type=int, default=240)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_gemms.py: no CUDA device visible")
    props = torch.cuda.get_device_properties(0)
    where = (f"one {props.name} ({props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count}"
             f" SMs), PyTorch {torch.__version__}, CUDA {torch.version.cuda}")
    split = ("decided before any fitting, in scripts/measure_gemms.py: the fit rows are a grid "
             "(hidden 1024-12288 with a 4h MLP, tp 1-8, tokens 2048 and 8192, the three passes "
             "of the four linear layers); the test rows are shapes drawn at random (seed "
             "20261128) from published models' hidden/MLP sizes, tp 1-8, tokens 1024-16384")
    rows = {"fit": dedupe(fit_shapes()), "test": dedupe(test_shapes(args.test_rows))}
    warm_up_the_gpu()
    out = {}
    for dtype in ("bf16", "fp8"):
        doc = {
            "description": (f"{'BF16 GEMMs (torch.matmul)' if dtype == 'bf16' else 'per-tensor FP8 E4M3 GEMMs (torch._scaled_mm, bf16 output, NT layout)'}"
                            f" measured by scripts/measure_gemms.py on {time.strftime('%Y-%m-%d')}"
                            f" on {where}: after 2 s of large GEMMs, the median of {GROUPS} "
                            f"groups' mean time of {CALLS} calls, after {WARMUP} warm-ups, CUDA "
                            "events, random normal "
                            f"operands. m, n, k as in OperatorCost::gemm_s. Driver {driver()}."),
            "cluster": args.cluster, "dtype": dtype, "min_time_s": 4e-5,
            "min_time_reason": "calls shorter than 40 us are within 2x of the harness's floor: in "
                               "these runs (H200 and H100) GEMMs of 0.5-4 GFLOP took 13-29 us "
                               "per call whatever their size (the Python launch path of "
                               "torch.matmul and torch._scaled_mm, not the GPU); they are kept "
                               "and left out of scoring",
            "split": split,
        }
        for name, shapes in rows.items():
            measured = []
            for m, n, k, layout in shapes:
                if dtype == "bf16":
                    s = time_bf16(m, n, k, layout)
                    measured.append([m, n, k, layout, float(f"{s:.5g}")])
                else:
                    s = time_fp8(m, n, k)
                    measured.append([m, n, k, "NT", float(f"{s:.5g}")])
            doc[name] = measured
            print(f"{dtype} {name}: {len(measured)} rows", flush=True)
        out[dtype] = doc
        torch.cuda.empty_cache()
    for dtype, doc in out.items():
        with open(f"{args.out_prefix}_{dtype}.json", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
