#!/usr/bin/env python3
"""The long-rows and decode searches of calls 23 and 24 as % of the copy per configuration.

Each configuration's class screening (call 23, from the workspaces cluster/*-call23/ws.tar.xz) or
final timing (call 24, cluster/*-call24/measurements.txt), divided into the copy time of the same
shape in call 23's suite (cluster/*-call23/suite-ckpt*.json.xz): the copy of a shape is timed once
per suite run. Call 24 ran on another machine start, so its rows divide across runs; the last
table compares the two calls within each run instead: the long rows' final timing (the class's
chosen configuration) as % of cuDNN timed interleaved with it.
Usage: python3 results/rows-h200/search-tables.py
"""
import glob, json, lzma, os, sqlite3, tarfile, tempfile

here = os.path.dirname(os.path.abspath(__file__))


def copy_times(suite):
    rows = json.load(lzma.open(suite))["rows"]
    out = {}
    for r in rows:
        R, N = r["dims"].split("x")
        out[f"N={N} R={R}"] = (r["median_ms"] * r["pct_of_copy"] / 100, r["name"])
    return out


def call23(ws_archive):
    """{(BLOCK, CLUSTER, CLUSTER_VECS): {shape: ms}} of call 23's class screenings, and its
    final timings {what: {shape: ms}} (class:candidate, class:baseline:cudnn)."""
    res, final = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(ws_archive) as t:
            t.extractall(tmp, filter="data")
        db = sqlite3.connect(os.path.join(tmp, ".peak", "peak.db"))
        q = ("select config_json, shape, what, median_ms from measurements where created_at > "
             "'2026-12-02T17:3' and what like 'class:%' order by id")
        for cfg, shape, what, ms in db.execute(q):
            k = json.loads(cfg)
            if "CLUSTER_VECS" not in k:
                continue
            if what == "class:screening":
                res.setdefault((k["BLOCK"], k["CLUSTER"], k["CLUSTER_VECS"], ""), {})[shape] = ms
            else:
                final.setdefault(what, {})[shape] = ms
        db.close()
    return res, final


def call24(path):
    """Call 24's final timings as call23() gives them, and as rows of the screening table."""
    res, final = {}, {}
    if not os.path.exists(path):
        return res, final
    for line in open(path):
        cfg, shape, what, ms = line.rstrip("\n").split("|")
        k = json.loads(cfg)
        if k.get("CLUSTER") != 4 or "CLUSTER_VECS" not in k:
            continue
        final.setdefault(what, {})[shape] = float(ms)
        if what == "class:candidate":
            res.setdefault((k["BLOCK"], 4, k["CLUSTER_VECS"], " (call 24)"), {})[shape] = float(ms)
    return res, final


def vendor_pct(final, shape):
    return 100 * final["class:baseline:cudnn"][shape] / final["class:candidate"][shape]


for family in ("softmax", "rmsnorm", "layernorm"):
    suite = glob.glob(f"{here}/cluster/{family}-call23/suite-ckpt*.json.xz")[0]
    copy = copy_times(suite)
    res, final23 = call23(f"{here}/cluster/{family}-call23/ws.tar.xz")
    res24, final24 = call24(f"{here}/cluster/{family}-call24/measurements.txt")
    res.update(res24)
    for cls in ("long-rows", "decode"):
        shapes = [s for s, (_, n) in copy.items() if n.startswith(cls)]
        print(f"\n{family}, class {cls}: % of the copy\n")
        print("| BLOCK | CLUSTER | CLUSTER_VECS | "
              + " | ".join(copy[s][1].split("-")[-1] for s in shapes) + " |")
        print("|---:|---:|---:|" + "---:|" * len(shapes))
        for key, v in res.items():
            if all(s in v for s in shapes):
                print(f"| {key[0]} | {key[1]} | {key[2]}{key[3]} | "
                      + " | ".join(f"{100 * copy[s][0] / v[s]:.1f}" for s in shapes) + " |")
    if final24:
        shapes = [s for s, (_, n) in copy.items() if n.startswith("long-rows")]
        print(f"\n{family}, long rows: % of cuDNN timed in the same run\n")
        print("| call | " + " | ".join(copy[s][1].split("-")[-1] for s in shapes) + " |")
        print("|---|" + "---:|" * len(shapes))
        for name, final in (("23 (its table)", final23), ("24 (clusters of 4)", final24)):
            print(f"| {name} | " + " | ".join(f"{vendor_pct(final, s):.1f}" for s in shapes) + " |")
