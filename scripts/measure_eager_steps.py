#!/usr/bin/env python3
"""Times eager PyTorch training steps on one GPU, with no communication.

What it measures: one training step (zero_grad, forward, loss, backward, optimizer step) of the
model shapes of the validation corpus's eager-PyTorch sources (docs/validation.md "Eager PyTorch
steps measured on one H200"), each without and with full activation checkpointing:

  mpt-1b-mb12, mpt-350m-mb32    llm-foundry MPT blocks (LayerNorm, biases, learned positions,
                                tied embeddings, GELU MLP of 4 x hidden), sequence 2048
  llama2-13b-8l-mb2             torchtitan-like Llama blocks (RMSNorm, unfused RoPE, SwiGLU,
  llama3-8b-8l-mb1              untied output), Llama 2 13B / Llama 3 8B dimensions, 8 layers,
                                sequence 4096 / 8192

followed by -none or -full. The step: fp32 parameters under torch.autocast(bfloat16),
torch.optim.AdamW(fused=True) (fp32 states), F.scaled_dot_product_attention(is_causal=True)
(on Hopper, PyTorch 2.11 dispatches it to cuDNN's fused attention), F.cross_entropy on
logits.float(); full checkpointing wraps every block in torch.utils.checkpoint
(use_reentrant=False). Random token ids, no data loading.

Per configuration the JSON has: step_s (the 4th of 6 sorted step times, CUDA events, after 3
warm-up steps; step_s_all all six), fwd_bwd_s and optimizer_s (the same statistic of the time to
the end of backward, and the difference), wall_per_step_s, peak_allocated_gib and
peak_reserved_gib (torch.cuda.max_memory_*), params, and "profile": a torch.profiler pass of one
more step with the GPU time by kernel category (by_category_s: gemm, attention, elementwise,
loss, optimizer), kernel_busy_s (the union of the kernels' intervals), span_s (first kernel start
to last kernel end) and the 30 kernels with the most time (top).

Run on a machine with one CUDA GPU and PyTorch:

  python3 scripts/measure_eager_steps.py --out eager.json                 # all eight
  python3 scripts/measure_eager_steps.py --out eager.json --configs mpt-1b-mb12-none,llama3-8b-8l-mb1-full
  python3 scripts/measure_eager_steps.py --list

No test runs it (CI has no GPU); tests/validation/corpus_validation_test.cc checks that the
committed measurement, tests/data/kernels/h200_eager_steps.json, and the corpus rows of source
h200eager carry the same step times.

tests/data/kernels/h200_eager_steps.json was measured with the first version of this script
(2026-11-27, NVIDIA H200, driver 580.159.04, PyTorch 2.11.0+cu130, CUDA 13.0). Its step, memory
and per-kernel (top) figures are what this version measures; two of its profile categories were
counted differently: (1) its "optimizer" category also counted the profiler's GPU-side range
"Optimizer.step#AdamW.step" (a user annotation spanning the optimizer's kernels, not a kernel),
so it is twice the optimizer's kernel time (the range is listed in its "top"); (2) its "loss"
category missed the softmax kernels of the cross-entropy (cunn_SoftMaxForward/Backward), counted
as "elementwise". This version skips user annotations and counts softmax kernels as loss.
"""
import argparse
import json
import os
import sys
import time
import traceback


def build_configs():
    m1b = dict(kind="mpt", layers=24, hidden=2048, heads=16, vocab=50368, seq=2048)
    m350 = dict(kind="mpt", layers=24, hidden=1024, heads=16, vocab=50368, seq=2048)
    l13 = dict(kind="llama", layers=8, hidden=5120, heads=40, kv=40, ffn=13824, vocab=32000,
               seq=4096)
    l8 = dict(kind="llama", layers=8, hidden=4096, heads=32, kv=8, ffn=14336, vocab=128256,
              seq=8192)
    configs = []
    for shape, base, mb in ((m1b, "mpt-1b-mb12", 12), (m350, "mpt-350m-mb32", 32),
                            (l13, "llama2-13b-8l-mb2", 2), (l8, "llama3-8b-8l-mb1", 1)):
        for ckpt in (False, True):
            configs.append(dict(shape, name=f"{base}-{'full' if ckpt else 'none'}", mb=mb,
                                ckpt=ckpt))
    return configs


CONFIGS = build_configs()


def category(name):
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n or "cudnn" in n or "sdpa" in n:
        return "attention"
    if ("gemm" in n or "nvjet" in n or "cutlass" in n or "xmma" in n or "sm90_" in n
            or "splitk" in n or "cublas" in n):
        return "gemm"
    if "adam" in n or "multi_tensor" in n:
        return "optimizer"
    if "nll" in n or "log_softmax" in n or "cross_entropy" in n or "softmax" in n:
        return "loss"
    return "elementwise"


def measure(cfg, steps=6, warmup=3):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    dev = "cuda"

    class MptBlock(nn.Module):
        def __init__(s, h, heads):
            super().__init__()
            s.heads = heads
            s.ln1 = nn.LayerNorm(h)
            s.qkv = nn.Linear(h, 3 * h)
            s.proj = nn.Linear(h, h)
            s.ln2 = nn.LayerNorm(h)
            s.up = nn.Linear(h, 4 * h)
            s.down = nn.Linear(4 * h, h)

        def forward(s, x):
            b, t, h = x.shape
            q, k, v = (s.qkv(s.ln1(x)).view(b, t, 3, s.heads, h // s.heads)
                       .permute(2, 0, 3, 1, 4))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(a.transpose(1, 2).reshape(b, t, h))
            return x + s.down(F.gelu(s.up(s.ln2(x))))

    def rope(x, cos, sin):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    class LlamaBlock(nn.Module):
        def __init__(s, h, heads, kv, ffn):
            super().__init__()
            s.heads, s.kv, s.hd = heads, kv, h // heads
            s.n1 = nn.RMSNorm(h)
            s.wq = nn.Linear(h, h, bias=False)
            s.wk = nn.Linear(h, kv * s.hd, bias=False)
            s.wv = nn.Linear(h, kv * s.hd, bias=False)
            s.wo = nn.Linear(h, h, bias=False)
            s.n2 = nn.RMSNorm(h)
            s.w1 = nn.Linear(h, ffn, bias=False)
            s.w3 = nn.Linear(h, ffn, bias=False)
            s.w2 = nn.Linear(ffn, h, bias=False)

        def forward(s, x, cos, sin):
            b, t, h = x.shape
            y = s.n1(x)
            q = s.wq(y).view(b, t, s.heads, s.hd)
            k = s.wk(y).view(b, t, s.kv, s.hd)
            v = s.wv(y).view(b, t, s.kv, s.hd)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=s.kv != s.heads)
            x = x + s.wo(a.transpose(1, 2).reshape(b, t, h))
            y = s.n2(x)
            return x + s.w2(F.silu(s.w1(y)) * s.w3(y))

    class Model(nn.Module):
        def __init__(s, kind, layers, h, heads, kv, ffn, vocab, seq, ckpt):
            super().__init__()
            s.kind, s.ckpt = kind, ckpt
            s.emb = nn.Embedding(vocab, h)
            if kind == "mpt":
                s.pos = nn.Embedding(seq, h)
                s.blocks = nn.ModuleList([MptBlock(h, heads) for _ in range(layers)])
                s.norm = nn.LayerNorm(h)
            else:
                s.blocks = nn.ModuleList([LlamaBlock(h, heads, kv, ffn) for _ in range(layers)])
                s.norm = nn.RMSNorm(h)
                s.head = nn.Linear(h, vocab, bias=False)
                hd = h // heads
                f = 1.0 / (500000.0 ** (torch.arange(0, hd, 2).float() / hd))
                ang = torch.outer(torch.arange(seq).float(), f)
                s.register_buffer("cos", ang.cos()[None, :, None, :], persistent=False)
                s.register_buffer("sin", ang.sin()[None, :, None, :], persistent=False)

        def forward(s, ids):
            x = s.emb(ids)
            if s.kind == "mpt":
                x = x + s.pos.weight[: ids.shape[1]]
            for blk in s.blocks:
                args = (x,) if s.kind == "mpt" else (x, s.cos, s.sin)
                x = checkpoint(blk, *args, use_reentrant=False) if s.ckpt else blk(*args)
            x = s.norm(x)
            w = s.emb.weight if s.kind == "mpt" else s.head.weight
            return F.linear(x, w)

    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    m = Model(cfg["kind"], cfg["layers"], cfg["hidden"], cfg["heads"], cfg.get("kv", cfg["heads"]),
              cfg.get("ffn", 4 * cfg["hidden"]), cfg["vocab"], cfg["seq"], cfg["ckpt"]).to(dev)
    nparams = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg["vocab"], (cfg["mb"], cfg["seq"]), device=dev)
    tgt = torch.randint(0, cfg["vocab"], (cfg["mb"], cfg["seq"]), device=dev)

    def step(end_of_backward=None):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(ids)
        loss = F.cross_entropy(logits.float().view(-1, cfg["vocab"]), tgt.view(-1))
        loss.backward()
        if end_of_backward is not None:
            end_of_backward.record()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    e0 = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    e1 = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    e2 = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
    t0 = time.time()
    for i in range(steps):
        e0[i].record()
        step(e1[i])
        e2[i].record()
    torch.cuda.synchronize()
    wall = (time.time() - t0) / steps
    step_s = [e0[i].elapsed_time(e2[i]) / 1e3 for i in range(steps)]
    fwd_bwd_s = [e0[i].elapsed_time(e1[i]) / 1e3 for i in range(steps)]
    mid = steps // 2
    r = dict(cfg, params=nparams, step_s=sorted(step_s)[mid], step_s_all=step_s,
             fwd_bwd_s=sorted(fwd_bwd_s)[mid],
             optimizer_s=sorted(step_s)[mid] - sorted(fwd_bwd_s)[mid],
             wall_per_step_s=wall, peak_allocated_gib=torch.cuda.max_memory_allocated() / 2**30,
             peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30)
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            step()
            torch.cuda.synchronize()
        cats, names, intervals = {}, {}, []
        for e in prof.events():
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            if (getattr(e, "is_user_annotation", False) or e.name.startswith("Optimizer.")
                    or e.name.startswith("ProfilerStep")):
                continue  # a GPU-side record_function range, not a kernel
            d = getattr(e, "device_time", None)
            if d is None:
                d = e.cuda_time
            c = category(e.name)
            cats[c] = cats.get(c, 0.0) + d / 1e6
            names[e.name[:120]] = names.get(e.name[:120], 0.0) + d / 1e6
            intervals.append((e.time_range.start, e.time_range.end))
        intervals.sort()
        busy, cs, ce = 0.0, None, None
        for s_, e_ in intervals:
            if cs is None or s_ > ce:
                if cs is not None:
                    busy += ce - cs
                cs, ce = s_, e_
            else:
                ce = max(ce, e_)
        if cs is not None:
            busy += ce - cs
        span = (intervals[-1][1] - intervals[0][0]) if intervals else 0
        r["profile"] = {"by_category_s": cats, "kernel_busy_s": busy / 1e6, "span_s": span / 1e6,
                        "top": sorted(names.items(), key=lambda kv: -kv[1])[:30]}
    except Exception as ex:  # the timing stands without the profile
        r["profile_error"] = repr(ex)
    del m, opt
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "eager.json"),
                    help="where the JSON goes (default: $OUT/eager.json, or ./eager.json)")
    ap.add_argument("--configs", default="",
                    help="comma-separated configuration names (default: all; --list)")
    ap.add_argument("--steps", type=int, default=6, help="timed steps (default 6)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps (default 3)")
    ap.add_argument("--list", action="store_true", help="print the configuration names and exit")
    args = ap.parse_args(argv)
    names = [c["name"] for c in CONFIGS]
    if args.list:
        print("\n".join(names))
        return 0
    only = [n for n in args.configs.split(",") if n]
    unknown = [n for n in only if n not in names]
    if unknown:
        ap.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(names)}")
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be at least 1 and --warmup at least 0")

    import torch
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda, "runs": []}
    failed = 0
    for c in CONFIGS:
        if only and c["name"] not in only:
            continue
        t = time.time()
        try:
            r = measure(c, steps=args.steps, warmup=args.warmup)
            p = r.get("profile", {})
            cats = {k: round(v * 1e3, 1) for k, v in p.get("by_category_s", {}).items()}
            print(f"{c['name']}: step {r['step_s']*1e3:.1f} ms fwd+bwd {r['fwd_bwd_s']*1e3:.1f} ms "
                  f"opt {r['optimizer_s']*1e3:.1f} ms peak {r['peak_allocated_gib']:.1f} GiB "
                  f"busy {p.get('kernel_busy_s', 0)*1e3:.1f}/{p.get('span_s', 0)*1e3:.1f} ms "
                  f"cats {json.dumps(cats)} ({time.time()-t:.0f} s)", flush=True)
        except Exception:
            failed += 1
            r = dict(c, error=traceback.format_exc()[-2000:])
            print(c["name"], "ERROR", r["error"], flush=True)
        results["runs"].append(r)
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:  # after every configuration: a crash keeps the rest
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
