#!/usr/bin/env python3
"""The exported library beside `peak bench`, shape by shape, from one GPU run.

  scripts/export-table.py BENCH.json EXPORT.json [TITLE]

BENCH.json is `peak --json bench CHECKPOINT --single` (peak's runner, the vendor library in the same
task); EXPORT.json is peak-export-check's output for the export of the same checkpoint and
configuration (its own events, L2 flushed before each sample; outputs compared with the runner's
byte for byte). A shape that the kernel does not support is listed but not counted: both sides
refuse it. Prints a Markdown table: both rates, their ratio, and whether the outputs were
identical, with the host time of a call (median); the last line says whether every shape is within 2 % with identical outputs.
"""
import json
import statistics
import sys


def main():
    bench = json.load(open(sys.argv[1]))
    export = json.load(open(sys.argv[2]))
    title = sys.argv[3] if len(sys.argv) > 3 else f"checkpoint {bench.get('checkpoint')}"
    rows = {r["suite"]: r for r in export["rows"]}
    print(f"## {title}\n")
    print(f"Device: {export.get('device')} (driver {export.get('driver')}); library "
          f"`{export.get('entry')}`; peak bench evaluation {bench.get('evaluation')}; the "
          f"export timed under the protocol: {export.get('protocol', 'queued flush')}.\n")
    print("| shape | dims | peak bench GFLOP/s | export GFLOP/s | export / peak | outputs | "
          "host µs per call |")
    print("|---|---|---:|---:|---:|---|---:|")
    ok, n = True, 0
    for b in bench["rows"]:
        e = rows.get(b["name"], {})
        if b.get("disposition") != "passed" or not e.get("gflops"):
            why = b.get("message") or e.get("runner") or e.get("status") or "not run"
            print(f"| {b['name']} | {b.get('dims', '')} | {b.get('disposition')} | "
                  f"{e.get('status', '-')} | - | {why} | - |")
            continue
        n += 1
        ratio = e["gflops"] / b["gflops"] if b["gflops"] else 0
        same = "identical" if e.get("identical") else f"{e.get('differing_bytes')} bytes differ"
        ok = ok and e.get("identical", False) and abs(ratio - 1) <= 0.02
        host = statistics.median(e["host_us"]) if e.get("host_us") else float("nan")
        print(f"| {b['name']} | {b.get('dims', '')} | {b['gflops']:.1f} | {e['gflops']:.1f} | "
              f"{100 * ratio:.1f} % | {same} | {host:.1f} |")
    verdict = "every timed shape within 2 % with identical outputs" if ok and n else \
        "NOT every timed shape is within 2 % with identical outputs"
    print(f"\n{n} shapes timed: {verdict}.")


if __name__ == "__main__":
    main()
