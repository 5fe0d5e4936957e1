#!/usr/bin/env python3
"""Times the routed experts' FP8 GEMMs of one device as Transformer Engine's GroupedLinear runs
them on Hopper, against one stacked GEMM of the same FLOPs (docs/validation.md "Per-expert FP8
GEMMs measured on an H200").

Per case (one pass of one expert linear layer: E local experts, each out[m x n] = in[m x k] W):
  single      one expert's GEMM alone (the mean over 20 back-to-back launches in one CUDA graph)
  sequential  the E GEMMs one after another on one stream
  streams     the E GEMMs round-robin over S = 4 streams (Transformer Engine's
              multi_stream_cublas_gemm: nvte_get_num_compute_streams() = 4), joined by events
  stacked     one GEMM of (E m) x n x k: a grouped kernel's best case
Every variant is captured in a CUDA graph and replayed (so the Python launch path is not timed):
mean of 20 replays after 5 warm-ups, CUDA events. FP8: torch._scaled_mm, E4M3 operands,
per-tensor scales, bf16 output, the NT layout cuBLASLt takes on Hopper.

Run on a machine with one CUDA GPU and PyTorch:
  python3 scripts/measure_expert_gemms.py --out expert_gemms.json
"""
import argparse
import json

import torch

# (name, experts, m, n, k): Qwen3-30B-A3B (hidden 2048, expert FFN 768, 128 experts, top 8) on
# EP 8, 4096 tokens a microbatch: 16 local experts of 2048 tokens; Qwen3-235B-A22B (hidden 4096,
# expert FFN 1536) on TP 2, EP 32, ETP 1: 4 local experts of 4096 tokens. fc1 is the fused
# gate/up projection (2 x FFN wide).
CASES = [
    ("qwen3-30b-fc1-fwd", 16, 2048, 1536, 2048),
    ("qwen3-30b-fc2-fwd", 16, 2048, 2048, 768),
    ("qwen3-30b-fc1-dgrad", 16, 2048, 2048, 1536),
    ("qwen3-30b-fc2-dgrad", 16, 2048, 768, 2048),
    ("qwen3-30b-fc1-wgrad", 16, 2048, 1536, 2048),
    ("qwen3-30b-fc2-wgrad", 16, 768, 2048, 2048),
    ("qwen3-235b-fc1-fwd", 4, 4096, 3072, 4096),
    ("qwen3-235b-fc2-fwd", 4, 4096, 4096, 1536),
    ("qwen3-235b-fc2-wgrad", 4, 1536, 4096, 4096),
]
STREAMS = 4


def fp8(rows, cols):
    return torch.randn(rows, cols, device="cuda").to(torch.float8_e4m3fn)


def timed(fn, reps=20, warm=5):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        fn()
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    one = torch.ones((), device="cuda")
    results = []
    for name, e, m, n, k in CASES:
        a = [fp8(m, k) for _ in range(e)]
        b = [fp8(n, k).t() for _ in range(e)]  # column-major k x n
        out = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(e)]
        big_a = fp8(e * m, k)

        def mm(i):
            torch._scaled_mm(a[i], b[i], scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                             out=out[i])

        def single():
            for _ in range(20):
                mm(0)

        def sequential():
            for i in range(e):
                mm(i)

        streams = [torch.cuda.Stream() for _ in range(STREAMS)]

        def multi():
            cur = torch.cuda.current_stream()
            used = min(STREAMS, e)
            for s in streams[:used]:
                s.wait_stream(cur)
            for i in range(e):
                with torch.cuda.stream(streams[i % STREAMS]):
                    mm(i)
            for s in streams[:used]:
                cur.wait_stream(s)

        def stacked():
            torch._scaled_mm(big_a, b[0], scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        r = {"case": name, "experts": e, "m": m, "n": n, "k": k,
             "single_s": timed(single) / 20, "sequential_s": timed(sequential),
             "streams_s": timed(multi), "stacked_s": timed(stacked)}
        r["streams_over_sequential"] = r["streams_s"] / r["sequential_s"]
        r["streams_over_stacked"] = r["streams_s"] / r["stacked_s"]
        print(json.dumps(r), flush=True)
        results.append(r)
    doc = {"description": "FP8 expert GEMMs (torch._scaled_mm, E4M3, bf16 out, NT) on "
                          + torch.cuda.get_device_name() + ", PyTorch " + torch.__version__
                          + ", CUDA " + str(torch.version.cuda)
                          + ": CUDA-graph replays, mean of 20 after 5 warm-ups; streams = "
                          + str(STREAMS), "cases": results}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
