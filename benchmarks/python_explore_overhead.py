#!/usr/bin/env python3
"""Python call overhead of jaxpp_sim.explore on top of the C++ exploration (docs/python.md).

For each space, runs jaxpp_sim.explore REPEAT times and reports the wall time of the whole
Python call and the wall time of the C++ exploration inside it (ExploreResult.explore_s: the
library's explore(), measured in C++ around the call). The difference is what the module adds:
converting arguments, serialising the model and cluster, the result to JSON and back, building
the result object. Target: < 5 % of the C++ work.

    PYTHONPATH=build/python python3 benchmarks/python_explore_overhead.py [--repeat 5]
"""
import argparse
import statistics
import time

import jaxpp_sim as js

SPACES = [
    ("gpt3-13b, 64 x h100-sxm, B 512, all schedules",
     dict(model="gpt3-13b", cluster="h100-sxm", gpus=64, global_batch=512)),
    ("llama3-70b, 256 x h100-sxm, B 512, 3 schedules",
     dict(model="llama3-70b", cluster="h100-sxm", gpus=256, global_batch=512,
          schedules=["1f1b", "zb-h1", "interleaved1f1b"])),
    ("gpt3-13b, 16 x h100-sxm, B 64, pp 2,4, 3 schedules (small)",
     dict(model="gpt3-13b", cluster="h100-sxm", gpus=16, global_batch=64, pp=[2, 4],
          schedules=["1f1b", "zb-h1", "gpipe"])),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="explorer threads (0: all cores)")
    args = ap.parse_args()
    print(f"{'space':58} {'configs':>8} {'python s':>9} {'C++ s':>9} {'overhead':>9}")
    for label, kw in SPACES:
        walls, cores = [], []
        n = 0
        for _ in range(args.repeat):
            start = time.perf_counter()
            res = js.explore(threads=args.threads or None, **kw)
            walls.append(time.perf_counter() - start)
            cores.append(res.explore_s)
            n = res.summary["evaluated"]
        wall = statistics.median(walls)
        core = statistics.median(cores)
        over = statistics.median([(w - c) / c for w, c in zip(walls, cores)])
        print(f"{label:58} {n:8d} {wall:9.4f} {core:9.4f} {over * 100:8.2f}%")


if __name__ == "__main__":
    main()
