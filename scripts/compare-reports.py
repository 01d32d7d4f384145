#!/usr/bin/env python3
"""Two `peak report --format json` files of the same campaign, step by step: the best
configuration, GFLOP/s and % of the vendor library of each, and the change from the first to the
second. Usage: scripts/compare-reports.py A.json B.json [LABEL_A LABEL_B]"""
import json
import sys


def steps(path):
    report = json.load(open(path))
    out = {}
    for s in report.get("steps", []):
        if s.get("disposition") != "passed" or not s.get("bench"):
            continue
        out[s["transformation"]] = s
    return out


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    a, b = steps(sys.argv[1]), steps(sys.argv[2])
    la, lb = (sys.argv[3], sys.argv[4]) if len(sys.argv) == 5 else ("A", "B")
    print(f"| step | shape | {la}: best configuration | {la} GFLOP/s | {la} % vendor "
          f"| {lb}: best configuration | {lb} GFLOP/s | {lb} % vendor | {lb} / {la} |")
    print("|---|---|---|---:|---:|---|---:|---:|---:|")
    for name, sa in a.items():
        sb = b.get(name)
        if sb is None:
            continue
        for ba in sa["bench"]:
            bb = next((x for x in sb["bench"] if x["shape"] == ba["shape"]), None)
            if bb is None:
                continue
            pct = lambda x: f"{x['pct_of_baseline']:.1f}" if x.get("baseline_gflops") else "-"
            print(f"| {name} | {ba['shape']} | `{sa['best_config']}` | {ba['gflops']:.0f} | {pct(ba)} "
                  f"| `{sb['best_config']}` | {bb['gflops']:.0f} | {pct(bb)} "
                  f"| {bb['gflops'] / ba['gflops']:.3f} |")


if __name__ == "__main__":
    main()
