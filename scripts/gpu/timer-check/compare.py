#!/usr/bin/env python3
"""peak's timing of cuBLAS against the tight-event harness: a markdown table per dtype and n.

Reads the `[ measured ] cublas matmul-cuda-DTYPE n=N: R TFLOP/s (median M ms, spread S)` lines
of CudaGpuTest.CublasRatesAsPeakTimesThem's log and the JSON files of timer-tight (tight.cu),
and writes agreement.md: peak's rate, the tight rate (2 n^3 over the mean of the tight runs'
medians) and each run's, the difference, and whether it is within the tolerance (3%).

Usage: compare.py --peak-log peak-cublas.log --tight tight.json tight2.json [-o agreement.md]
       [--peak-json peak-cublas.json] [--commands commands.txt] [--clocks clocks.csv]
       [--tolerance 3]
Exit status: 0 when every case has a peak rate and at least one tight rate, 1 otherwise.
"""
import argparse
import json
import os
import re
import shlex
import sys

DTYPES = ["fp32", "fp16", "bf16"]
SIZES = [2048, 4096, 8192]
NUM = r"([-+0-9.eE]+|inf|nan)"
PEAK_LINE = re.compile(
    r"^\[ measured \] cublas matmul-cuda-(\w+) n=(\d+): " + NUM + r" TFLOP/s \(median " + NUM
    + r" ms, spread " + NUM + r"\)")


def read_peak_log(path):
    """{(dtype, n): {"tflops", "median_ms", "spread"}} from the test's log."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = PEAK_LINE.match(line.strip())
            if m:
                out[(m.group(1), int(m.group(2)))] = {
                    "tflops": float(m.group(3)),
                    "median_ms": float(m.group(4)),
                    "spread": float(m.group(5)),
                }
    return out


def read_peak_json(path):
    """The test's result from GoogleTest's JSON: 'passed', 'failed: ...' or None."""
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, ValueError):
        return None
    for suite in j.get("testsuites", []):
        for t in suite.get("testsuite", []):
            if t.get("name") != "CublasRatesAsPeakTimesThem":
                continue
            failures = t.get("failures", [])
            if failures:
                text = " | ".join(x.get("failure", "").strip().replace("\n", " ") for x in failures)
                return "failed: " + text[:500]
            if t.get("result") not in (None, "COMPLETED") or t.get("status") not in (None, "RUN"):
                return "{} ({})".format(t.get("result"), t.get("status"))
            return "passed"
    return "not found in " + path


def quantile(sorted_values, q):
    """peak's quantile (src/tune/measure.cpp): linear interpolation."""
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    f = pos - lo
    return sorted_values[lo] * (1 - f) + sorted_values[hi] * f


def read_tight(path):
    """(header, {(dtype, n): case}) of one timer-tight JSON, medians recomputed from the samples."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    if j.get("format") != 1:
        raise ValueError("{}: format {} (expected 1)".format(path, j.get("format")))
    cases = {}
    for c in j.get("cases", []):
        s = sorted(float(x) for x in c.get("samples_ms", []))
        if not s:
            continue
        med = quantile(s, 0.5)
        cases[(c["dtype"], int(c["n"]))] = {
            "median_ms": med,
            "spread": (quantile(s, 0.75) - quantile(s, 0.25)) / med if med > 0 else 0.0,
            "samples": len(s),
            "exposed": int(c.get("enqueue_exposed", 0)),
        }
    return j, cases


def tflops(n, ms):
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12 if ms > 0 else float("nan")


def fmt(x, digits=1):
    return "—" if x is None else "{:.{}f}".format(x, digits)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peak-log", required=True)
    ap.add_argument("--peak-json")
    ap.add_argument("--tight", nargs="+", required=True, help="timer-tight JSON files (runs)")
    ap.add_argument("--commands", help="a file of the command lines that made the inputs")
    ap.add_argument("--clocks", help="clocks.csv of run.sh")
    ap.add_argument("--tolerance", type=float, default=3.0, help="percent (default 3)")
    ap.add_argument("-o", "--output", default="agreement.md")
    a = ap.parse_args()

    problems = []
    peak = {}
    try:
        peak = read_peak_log(a.peak_log)
    except OSError as e:
        problems.append("peak's log: {}".format(e))
    runs = []  # (path, header, cases)
    for p in a.tight:
        try:
            h, c = read_tight(p)
            runs.append((p, h, c))
        except (OSError, ValueError, KeyError) as e:
            problems.append("tight run {}: {}".format(p, e))
            runs.append((p, None, {}))

    lines = ["# peak's timing of cuBLAS against tight events", ""]
    header = next((h for _, h, _ in runs if h), None)
    if header:
        lines.append("Device: {} (compute capability {}, {} SMs, L2 {} MiB); {}; CUDA driver API {}, "
                     "runtime {}; cuBLAS {} ({}), math mode {}{}.".format(
                         header.get("device"), header.get("compute_capability"), header.get("sms"),
                         header.get("l2_bytes", 0) // (1 << 20),
                         header.get("nvidia_driver") or "NVIDIA driver version not read",
                         header.get("cuda_driver_api"), header.get("cuda_runtime"),
                         header.get("cublas"), header.get("cublas_library"),
                         header.get("math_mode"),
                         ", NVIDIA_TF32_OVERRIDE={}".format(header["nvidia_tf32_override"])
                         if header.get("nvidia_tf32_override") is not None else ""))
        lines.append("")
    lines += [
        "- **peak**: `CudaGpuTest.CublasRatesAsPeakTimesThem`, cuBLAS through peak's runner "
        "(peak-runner-cuda): 5 warm-ups, 50 samples, the outputs poisoned and the L2 flushed "
        "before each sample, the stream held at a gate kernel while the events and the call are "
        "enqueued; the rate is 2 n^3 over the median. Result: {}.".format(
            (read_peak_json(a.peak_json) or "no GoogleTest JSON") if a.peak_json else "not read"),
        "- **tight**: timer-tight (`scripts/gpu/timer-check/tight.cu`), the same cuBLAS call "
        "and handle set-up in a plain CUDA program: 5 warm-ups, 50 samples, each an L2 flush "
        "(cudaMemsetAsync of 2 x L2), a start event, the one call, an end event, all on the "
        "stream cuBLAS uses. {} run(s), before and after peak's; the tight rate is 2 n^3 over "
        "the mean of the runs' medians.".format(len(runs)),
        "- **difference** = (peak − tight) / tight of the rates; positive: peak reports cuBLAS "
        "faster. Within {:g}%: |difference| ≤ {:g}%.".format(a.tolerance, a.tolerance),
        "",
        "| dtype | n | peak TFLOP/s | tight TFLOP/s | {} | difference % | within {:g}%? |".format(
            " | ".join("tight run {}".format(i + 1) for i in range(len(runs))), a.tolerance),
        "|---|---:|---:|---:|{}---:|---|".format("---:|" * len(runs)),
    ]
    detail = [
        "| dtype | n | peak median ms | peak spread | {} | tight runs differ % | exposed samples |".format(
            " | ".join("tight run {} median ms (spread)".format(i + 1) for i in range(len(runs)))),
        "|---|---:|---:|---:|{}---:|---:|".format("---:|" * len(runs)),
    ]
    within = 0
    compared = 0
    worst = None
    for d in DTYPES:
        for n in SIZES:
            p = peak.get((d, n))
            per = [c.get((d, n)) for _, _, c in runs]
            meds = [x["median_ms"] for x in per if x]
            tight = tflops(n, sum(meds) / len(meds)) if meds else None
            diff = None
            ok = "missing"
            if p and tight:
                diff = 100.0 * (p["tflops"] - tight) / tight
                ok = "yes" if abs(diff) <= a.tolerance else "**no**"
                compared += 1
                within += abs(diff) <= a.tolerance
                worst = diff if worst is None or abs(diff) > abs(worst) else worst
            else:
                problems.append("{} n={}: {}".format(
                    d, n, "no peak line" if not p else "no tight samples"))
            run_cells = [fmt(tflops(n, x["median_ms"])) if x else "—" for x in per]
            lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                d, n, fmt(p["tflops"] if p else None), fmt(tight), " | ".join(run_cells),
                "—" if diff is None else "{:+.2f}".format(diff), ok))
            between = None
            if len(meds) >= 2 and meds[0] > 0:
                between = 100.0 * (max(meds) - min(meds)) / min(meds)
            detail.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                d, n, fmt(p["median_ms"] if p else None, 6), "{:.3g}".format(p["spread"]) if p else "—",
                " | ".join("{:.6f} ({:.3g})".format(x["median_ms"], x["spread"]) if x else "—"
                           for x in per),
                fmt(between, 2), "/".join(str(x["exposed"]) if x else "—" for x in per)))
    lines += ["", "{} of {} cases within {:g}%{}.".format(
        within, compared, a.tolerance,
        "; the largest difference {:+.2f}%".format(worst) if worst is not None else ""), ""]
    lines += ["## Medians and spreads", "",
              "Spread = (p75 − p25) / median. *Tight runs differ*: the two tight medians' "
              "difference, the noise between runs of one method. *Exposed samples*: tight "
              "samples whose host enqueue (flush, start event, call, end event) took at least "
              "as long as the flush on the device, so that host time may be inside the window "
              "(0 expected).", ""]
    lines += detail + [""]
    if problems:
        lines += ["## Problems", ""] + ["- " + x for x in problems] + [""]
    lines += ["## Commands", "", "```"]
    if a.commands and os.path.exists(a.commands):
        with open(a.commands, encoding="utf-8") as f:
            lines += [x.rstrip("\n") for x in f if x.strip()]
    lines.append(" ".join(shlex.quote(x) for x in ["python3"] + sys.argv))
    lines += ["```", ""]
    if a.clocks and os.path.exists(a.clocks):
        with open(a.clocks, encoding="utf-8") as f:
            lines += ["## Clocks between the steps (nvidia-smi)", "", "```"]
            lines += [x.rstrip("\n") for x in f if x.strip()]
            lines += ["```", ""]
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print("wrote {}: {} of {} cases within {:g}%".format(a.output, within, compared, a.tolerance))
    for x in problems:
        print("compare.py: " + x, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
