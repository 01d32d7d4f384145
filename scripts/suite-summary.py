#!/usr/bin/env python3
"""Summarizes a `peak --json bench -o FILE` suite of a memory-bound kernel (FILE or FILE.xz): per
shape GB/s, % of the same-run copy and % of the vendor baseline, then the geometric means and the
lowest shape of each, as Markdown; with a dispatch table (`peak tune --classes`), the configuration
each class ran.

Usage: scripts/suite-summary.py SUITE.json[.xz]
"""
import json, lzma, math, sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    with (lzma.open if path.endswith(".xz") else open)(path, "rt") as f:
        suite = json.load(f)
    base = suite.get("baseline") or "none"
    print(f"checkpoint {suite['checkpoint']}, `{suite['config']}`, {suite['device']}\n")
    if suite.get("dispatch"):
        ran = {}
        for r in suite["rows"]:
            ran.setdefault(r.get("dispatched_class") or r.get("class"), r.get("config"))
        print(f"dispatch table {suite['dispatch']}: one configuration per class\n")
        for cls, config in ran.items():
            print(f"- {cls}: `{config}`")
        print()
    print(f"| shape | GB/s | % of copy | {base} GB/s | % of {base} |")
    print("|---|---:|---:|---:|---:|")
    copy, vendor = [], []
    for r in suite["rows"]:
        if r.get("disposition") != "passed":
            print(f"| {r['name']} | {r.get('disposition')} | | | |")
            continue
        pc, ratio = r.get("pct_of_copy", 0), r.get("ratio", 0)
        print(f"| {r['name']} | {r['gbs']:.1f} | {pc:.1f} | {r.get('baseline_gbs', 0):.1f} | "
              f"{100 * ratio:.1f} |")
        if pc > 0:
            copy.append((pc, r["name"]))
        if ratio > 0:
            vendor.append((100 * ratio, r["name"]))
    for label, xs in (("% of copy", copy), (f"% of {base}", vendor)):
        if xs:
            g = math.exp(sum(math.log(v) for v, _ in xs) / len(xs))
            low = min(xs)
            print(f"\n{label}: geometric mean {g:.1f} over {len(xs)} shapes, lowest {low[0]:.1f} "
                  f"({low[1]})", end="")
    print()


if __name__ == "__main__":
    main()
