#!/usr/bin/env python3
"""Times a MoE layer's expert GEMMs on one GPU the ways frameworks run them (PyTorch, cuBLASLt).

For each case (the local experts of one GPU: E experts, T tokens each, hidden h, expert FFN f)
and each of the six GEMMs of an expert MLP (SwiGLU up projection [T x 2f x h] and down projection
[T x h x f], each forward, input gradient and weight gradient, as (m, n, k) of
OperatorCost::gemm_s), in BF16 and in per-tensor FP8 E4M3 (torch._scaled_mm, bf16 output):

  stacked     one GEMM of the stacked problem (E*T x n x k; for the weight gradient the sum over
              experts is not a GEMM, so E*k x n x T stands in): what a single grouped launch
              over perfectly balanced experts does at best
  loop1       E GEMMs one after another on one stream
  loop4       E GEMMs round-robin over 4 streams (Transformer Engine's multi-stream cuBLAS path
              on Hopper)
  grouped     torch._grouped_mm (BF16 only, where PyTorch has it): one grouped kernel

Every variant is captured in a CUDA graph and the graph is replayed (mean of 20 replays after 3,
CUDA events), so the Python launch path is not measured: the times are the GPU's, with the
launch gaps of a captured sequence (a framework that launches from Python or C++ without graphs
adds its own per-call cost on top). Random normal operands.

Output: one JSON file (--out) with the device, the cases and per case and GEMM the seconds of
each variant. No test runs it (CI has no GPU).

  python3 scripts/measure_expert_gemms.py --out expert_gemms.json
"""
import argparse
import json
import subprocess
import sys
import time

import torch

REPLAYS = 20
WARMUP = 3
STREAMS = 4

# (name, local experts E, tokens per expert T, hidden h, expert FFN f)
CASES = [
    ("qwen3-30b-a3b-ep8", 16, 2048, 2048, 768),
    ("qwen3-30b-a3b-ep8-t4096", 16, 4096, 2048, 768),
    ("qwen3-235b-a22b-ep32", 4, 4096, 4096, 1536),
    ("qwen3-235b-a22b-ep32-t1024", 4, 1024, 4096, 1536),
    ("deepseek-v3-ep64", 4, 4096, 7168, 2048),
    ("mixtral-8x7b-ep8", 1, 16384, 4096, 14336),
    ("mixtral-8x22b-ep8-tp2", 1, 8192, 6144, 8192),
    ("small-experts", 32, 512, 2048, 768),
]


def gemm_shapes(T, h, f):
    out = []
    for name, n, k in (("up", 2 * f, h), ("down", h, f)):
        out.append((name + ".fwd", T, n, k))
        out.append((name + ".dgrad", T, k, n))
        out.append((name + ".wgrad", k, n, T))
    return out


def graph_time(body):
    """Mean GPU time of `body` captured in a CUDA graph, or None when it cannot be captured."""
    g = torch.cuda.CUDAGraph()
    try:
        body()  # allocate workspaces outside the capture
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            body()
    except Exception as e:  # noqa: BLE001 - a kernel or capture that fails is reported, not fatal
        print(f"  failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}", flush=True)
        torch.cuda.synchronize()
        return None
    for _ in range(WARMUP):
        g.replay()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(REPLAYS):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / REPLAYS


def make_ops(dtype, E, m, n, k):
    dev = "cuda"
    if dtype == "bf16":
        a = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(E)]
        b = [torch.randn(n, k, device=dev, dtype=torch.bfloat16).t() for _ in range(E)]
        a_all = torch.randn(E * m, k, device=dev, dtype=torch.bfloat16)
        b_all = b[0]
        return (lambda i: torch.matmul(a[i], b[i])), (lambda: torch.matmul(a_all, b_all))
    one = torch.ones((), device=dev, dtype=torch.float32)
    a = [torch.randn(m, k, device=dev).to(torch.float8_e4m3fn) for _ in range(E)]
    b = [torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t() for _ in range(E)]
    a_all = torch.randn(E * m, k, device=dev).to(torch.float8_e4m3fn)
    b_all = b[0]

    def one_gemm(i):
        return torch._scaled_mm(a[i], b[i], scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def stacked():
        return torch._scaled_mm(a_all, b_all, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    return one_gemm, stacked


def grouped_op(E, m, n, k):
    if not hasattr(torch, "_grouped_mm"):
        return None
    dev = "cuda"
    a = torch.randn(E * m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(E, n, k, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.arange(m, E * m + 1, m, device=dev, dtype=torch.int32)
    return lambda: torch._grouped_mm(a, b, offs=offs)


def measure_case(name, E, T, h, f):
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    result = {"experts": E, "tokens_per_expert": T, "hidden": h, "ffn": f, "gemms": []}
    for gname, m, n, k in gemm_shapes(T, h, f):
        row = {"gemm": gname, "m": m, "n": n, "k": k}
        for dtype in ("bf16", "fp8"):
            one_gemm, stacked = make_ops(dtype, E, m, n, k)

            def loop1():
                for i in range(E):
                    one_gemm(i)

            def loop4():
                main = torch.cuda.current_stream()
                for s in streams:
                    s.wait_stream(main)
                for i in range(E):
                    with torch.cuda.stream(streams[i % STREAMS]):
                        one_gemm(i)
                for s in streams:
                    main.wait_stream(s)

            row[f"{dtype}_stacked_s"] = graph_time(stacked)
            row[f"{dtype}_loop1_s"] = graph_time(loop1)
            row[f"{dtype}_loop4_s"] = graph_time(loop4)
            torch.cuda.empty_cache()
        op = grouped_op(E, m, n, k) if gname.endswith(("fwd", "dgrad")) else None
        row["bf16_grouped_s"] = graph_time(op) if op else None
        result["gemms"].append(row)
        print(f"{name} {gname}: " + " ".join(
            f"{key[:-2]}={val * 1e6:.1f}us" for key, val in row.items()
            if key.endswith("_s") and val is not None), flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_expert_gemms.py: no CUDA device visible")
    props = torch.cuda.get_device_properties(0)
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.split("\n")[0]
    except (OSError, subprocess.CalledProcessError):
        drv = "unknown"
    wanted = set(filter(None, args.cases.split(",")))
    doc = {
        "description": ("expert GEMMs measured by scripts/measure_expert_gemms.py on "
                        f"{time.strftime('%Y-%m-%d')} on one {props.name} ({props.multi_processor_count}"
                        f" SMs), driver {drv}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}: "
                        f"CUDA-graph replays, mean of {REPLAYS} after {WARMUP}"),
        "streams": STREAMS,
        "cases": {},
    }
    for name, E, T, h, f in CASES:
        if wanted and name not in wanted:
            continue
        doc["cases"][name] = measure_case(name, E, T, h, f)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
