#!/usr/bin/env python3
"""Explore a model's parallel configurations, plot the Pareto front of step time vs memory and
the timeline of the best plan with matplotlib, write the timeline as SVG (jaxpp-sim's
renderer) and as a Perfetto trace (open it in ui.perfetto.dev), and hand the fastest plan
Megatron-LM can run to it as command-line arguments.

    PYTHONPATH=build/python python3 docs/examples/explore_and_plot.py --out plots/
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

import jaxpp_sim as js  # noqa: E402

GIB = 1024 ** 3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt3-13b")
    ap.add_argument("--cluster", default="h100-sxm")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--out", default="jaxpp-plots")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    res = js.explore(model=args.model, cluster=args.cluster, gpus=args.gpus,
                     global_batch=args.global_batch, schedules=["1f1b", "zb-h1", "interleaved1f1b"])
    df = res.to_pandas()
    print(df[["rank", "pp", "tp", "dp", "schedule", "step_time_s", "mfu"]].head(5).to_string())

    # Pareto front: every ranked configuration in grey, the front in colour.
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(df["peak_memory_bytes"] / GIB, df["step_time_s"] * 1e3, s=8, c="0.7",
               label="feasible")
    front = sorted(res.pareto, key=lambda e: e["peak_memory_bytes"])
    ax.plot([e["peak_memory_bytes"] / GIB for e in front],
            [e["step_time_s"] * 1e3 for e in front], "o-", c="tab:red", label="Pareto front")
    ax.set_xlabel("peak memory per GPU (GiB)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{args.model} on {args.gpus} x {args.cluster}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "pareto.png"), dpi=100)

    # The best configuration, simulated with its trace.
    c = res.best["config"]
    sim = js.simulate(model=args.model, cluster=args.cluster, gpus=c["gpus"], pp=c["pp"],
                      tp=c["tp"], dp=c["dp"], cp=c.get("cp", 1), virtual=c["virtual_stages"],
                      global_batch=c["global_batch"], microbatch_size=c["microbatch_size"],
                      schedule=c["schedule"], recompute=c["recompute"], zero1=c["zero1"],
                      sequence_parallel=c.get("sequence_parallel", False))
    print(f"best: step time {sim.step_time_s * 1e3:.2f} ms, bubble {sim.bubble_rate:.1%}, "
          f"MFU {sim.mfu:.1%}")

    colours = {"F": "tab:blue", "B": "tab:green", "I": "tab:cyan", "W": "tab:olive"}
    fig, ax = plt.subplots(figsize=(10, 3))
    for e in sim.trace:
        if e["stream"] != "compute":
            continue
        kind = e["tasks"][0][0] if e["tasks"] else "?"
        ax.barh(e["actor"], (e["end_s"] - e["start_s"]) * 1e3, left=e["start_s"] * 1e3,
                color=colours.get(kind, "0.5"), edgecolor="white", linewidth=0.2)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("actor")
    ax.set_title(f"{c['schedule']}, pp {c['pp']}, tp {c['tp']}, dp {c['dp']}")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "timeline.png"), dpi=100)

    with open(os.path.join(args.out, "timeline.svg"), "w", encoding="utf-8") as f:
        f.write(js.export(sim, "svg"))
    with open(os.path.join(args.out, "trace.json"), "w", encoding="utf-8") as f:
        f.write(js.export(sim, "perfetto"))

    # Megatron-LM runs 1F1B and interleaved 1F1B (Std1F1B, MegatronInterleaved): the fastest such
    # configuration, as its arguments. What Megatron-LM cannot express raises InputError saying why.
    for entry in res.ranked:
        if entry["config"]["schedule"] not in ("Std1F1B", "MegatronInterleaved"):
            continue
        try:
            megatron = js.export(res.plan(entry), "megatron")
        except js.InputError as e:
            print(f"rank {entry['rank']}: not for Megatron-LM: {e}")
            continue
        with open(os.path.join(args.out, "megatron_args.txt"), "w", encoding="utf-8") as f:
            f.write(megatron)
        print(f"Megatron-LM arguments of rank {entry['rank']} "
              f"({entry['config']['schedule']}) in megatron_args.txt")
        break
    print(f"wrote {args.out}/pareto.png, timeline.png, timeline.svg, trace.json")


if __name__ == "__main__":
    main()
