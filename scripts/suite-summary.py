#!/usr/bin/env python3
"""Summarizes a `peak --json bench -o FILE` suite (FILE or FILE.xz): per shape GB/s, % of the
same-run copy and % of the vendor baseline (a family headlined in FLOP/s, as the suite's missing
`"headline": "bytes"` says, also its TFLOP/s and % of the peak first, and the vendor's TFLOP/s;
--flops or --bytes chooses), then the geometric means and the lowest shape of each, as Markdown;
with a dispatch table (`peak tune --classes`), the configuration each class ran. A shape whose
baseline did not run shows "-" and the runner's reason below the table.

Usage: scripts/suite-summary.py [--flops | --bytes] SUITE.json[.xz]
"""
import json, lzma, math, sys


def main():
    args = sys.argv[1:]
    chosen = [a for a in args if a in ("--flops", "--bytes")]
    args = [a for a in args if a not in ("--flops", "--bytes")]
    if len(args) != 1 or len(chosen) > 1:
        sys.exit(__doc__)
    path = args[0]
    with (lzma.open if path.endswith(".xz") else open)(path, "rt") as f:
        suite = json.load(f)
    flops = chosen == ["--flops"] or (not chosen and suite.get("headline") != "bytes")
    base = suite.get("baseline") or "none"
    # Without a vendor library the suite's ratio is of the copy ("ratio_of": "copy"): no vendor
    # columns then.
    vendor_ratio = bool(suite.get("baseline")) and suite.get("ratio_of") == suite.get("baseline")
    print(f"checkpoint {suite['checkpoint']}, `{suite['config']}`, {suite['device']}\n")
    if suite.get("dispatch"):
        ran = {}
        for r in suite["rows"]:
            ran.setdefault(r.get("dispatched_class") or r.get("class"), r.get("config"))
        print(f"dispatch table {suite['dispatch']}: one configuration per class\n")
        for cls, config in ran.items():
            print(f"- {cls}: `{config}`")
        print()
    unit = "TFLOP/s" if flops else "GB/s"
    head = "| shape | TFLOP/s | % of peak " if flops else "| shape "
    print(f"{head}| GB/s | % of copy |" + (f" {base} {unit} | % of {base} |" if vendor_ratio else ""))
    print("|---" * ((7 if flops else 5) - (0 if vendor_ratio else 2)) + "|")
    copy, vendor, reasons = [], [], set()
    for r in suite["rows"]:
        if r.get("disposition") != "passed":
            print(f"| {r['name']} | {r.get('disposition')} |" + " |" * (5 if flops else 3))
            continue
        pc, ratio = r.get("pct_of_copy", 0), r.get("ratio", 0) if vendor_ratio else 0
        lead = f"| {r['name']} | "
        if flops:
            lead += f"{r['gflops'] / 1e3:.1f} | {r.get('pct_of_peak', 0):.1f} | "
        rate = r.get("baseline_gflops", 0) / 1e3 if flops else r.get("baseline_gbs", 0)
        theirs = f" {rate:.1f} | {100 * ratio:.1f} |" if ratio > 0 else " - | - |"
        if ratio <= 0 and r.get("message") and vendor_ratio:
            reasons.add(r["message"])
        print(f"{lead}{r['gbs']:.1f} | {pc:.1f} |" + (theirs if vendor_ratio else ""))
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
    if suite.get("partial"):
        print(f"\npartial: {len(suite['rows'])} of {suite.get('shapes', '?')} shapes "
              "timed before the benchmark was cut")
    for m in sorted(reasons):
        print(f"\n- {m}")


if __name__ == "__main__":
    main()
