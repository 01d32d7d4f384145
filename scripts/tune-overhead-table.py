#!/usr/bin/env python3
"""Seconds per configuration by phase, for tuning searches of the same space, as a table.

  scripts/tune-overhead-table.py LABEL=PREFIX [LABEL=PREFIX ...]

PREFIX names the files that scripts/gpu/tune-strategies.sh writes for one strategy:
PREFIX.json (`peak --json tune`), PREFIX-space.json (its search as a tuning cache) and PREFIX.log
(whose last line gives the wall time around `peak tune`). For example
`one=out/overhead-1gpu-exhaustive two=out/overhead-2gpu-exhaustive`.

One row per search: the devices, the configurations evaluated, the wall time, the search (the
wall time less the final timing: probing and set-up included) and its seconds per configuration,
the final timing of the best, the mean compile, validation and timing seconds of an evaluated
configuration (compiles, runner jobs and checks overlap in the search's pipeline), the runner
processes started with their mean start-up (from start to the first task) and their tasks'
seconds per configuration, the best configuration's rate at each bench shape, and the speed-up
of the wall time and of the search over the first row.
"""
import json
import re
import statistics
import sys


def load(prefix):
    tune = json.load(open(prefix + ".json"))
    space = json.load(open(prefix + "-space.json"))
    wall = None
    try:
        for line in open(prefix + ".log"):
            m = re.search(r"exit \d+ after ([0-9.]+) s", line)
            if m:
                wall = float(m.group(1))
    except OSError:
        pass
    return tune, space, wall


def mean(entries, key):
    values = [e.get(key, 0.0) for e in entries]
    return statistics.mean(values) if values else float("nan")


def row(label, prefix):
    try:
        tune, space, wall = load(prefix)
    except (OSError, ValueError) as e:
        return {"label": label, "devices": f"no result ({e})", "evaluated": 0, "wall": None,
                "search": float("nan"), "per_config": float("nan"), "final": float("nan"),
                "compile": float("nan"), "validate": float("nan"), "time": float("nan"),
                "starts": 0, "startup": float("nan"), "tasks": float("nan"),
                "rates": "", "best": "-"}
    phases = tune.get("phases", {})
    configs = tune.get("configs", {})
    evaluated = configs.get("evaluated") or 0
    ran = [c for c in space.get("configs", []) if c.get("stage") not in ("validity", "pruned")
           and c.get("validate_s", 0) > 0]
    device = tune.get("device")
    devices = device.get("name") if isinstance(device, dict) else device
    rates = "; ".join(f"{b['shape']}: {b['gflops']:.1f}" for b in tune.get("bench", [])
                      if b.get("disposition") == "passed")
    final = phases.get("bench_s", float("nan"))
    search = wall - final if wall is not None and final == final else float("nan")
    runner = tune.get("runner_seconds", {})
    starts = tune.get("runner_starts") or 0
    return {
        "label": label, "devices": devices, "evaluated": evaluated, "wall": wall,
        "search": search, "per_config": search / evaluated if evaluated else float("nan"),
        "final": final, "compile": mean(ran, "compile_s"), "starts": starts,
        "startup": runner["startup"] / starts if starts and "startup" in runner else float("nan"),
        "tasks": runner["tasks"] / evaluated if evaluated and "tasks" in runner else float("nan"),
        "validate": mean(ran, "validate_s"), "time": mean(ran, "time_s"), "rates": rates,
        "best": tune.get("best", {}).get("config_text", "-"),
    }


def fmt(x, digits=2):
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def main():
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[1:]):
        sys.exit(__doc__)
    rows = [row(*a.split("=", 1)) for a in sys.argv[1:]]
    first = rows[0]
    print("| search | device | evaluated | wall s | search s | s per configuration | "
          "final timing s | compile s | validate s | time s | runners | start-up s | "
          "tasks s per configuration | wall speed-up | search speed-up | best GFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        wall_up = first["wall"] / r["wall"] if r["wall"] and first["wall"] else None
        search_up = first["search"] / r["search"] if r["search"] == r["search"] and r["search"] \
            else None
        print(f"| {r['label']} | {r['devices']} | {r['evaluated']} | {fmt(r['wall'], 1)} | "
              f"{fmt(r['search'], 1)} | {fmt(r['per_config'])} | {fmt(r['final'])} | "
              f"{fmt(r['compile'])} | {fmt(r['validate'])} | {fmt(r['time'])} | "
              f"{r['starts']} | {fmt(r['startup'])} | {fmt(r['tasks'])} | "
              f"{fmt(wall_up)} | {fmt(search_up)} | {r['rates']} |")
    print()
    for r in rows:
        print(f"- {r['label']}: best {r['best']}")


if __name__ == "__main__":
    main()
