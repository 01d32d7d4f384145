#!/usr/bin/env python3
"""Carries a recorded campaign's replies over to prompts that changed (a transformation's text, a
context file or the prompt builder), without changing a reply: the workflow runs again in manual
mode and each prompt is answered with the recorded reply of the same step label (the k-th prompt
of a label gets its k-th reply, so failed attempts are answered as they were), by the recorded
producer. The new recording holds the same replies under the new prompt keys.

Usage (in a workspace made with `peak init`):
  scripts/rekey-recording.py OLD_DIR NEW_DIR -- peak run SEQUENCE [options...]
The command is run with `--llm manual --record NEW_DIR` added, then again with `--resume` while it
stops at a prompt (exit 3). Stops with exit 1 when a prompt's label has no recorded reply left.
"""
import glob, json, os, re, subprocess, sys
from collections import defaultdict


def load(old):
    replies = defaultdict(list)
    files = sorted(glob.glob(os.path.join(old, "[0-9]*.json")))
    for f in sorted(files, key=lambda f: json.load(open(f))["seq"]):
        d = json.load(open(f))
        if d.get("status") in ("ok", "truncated"):
            replies[d["step_label"]].append(d)
    return replies


def main():
    if "--" not in sys.argv or len(sys.argv) < 5:
        sys.exit(__doc__)
    cut = sys.argv.index("--")
    old, new = sys.argv[1:cut]
    cmd = sys.argv[cut + 1:] + ["--llm", "manual", "--record", new]
    replies, used = load(old), defaultdict(int)
    first = True
    while True:
        run = subprocess.run(cmd + ([] if first else ["--resume"]), capture_output=True, text=True)
        first = False
        out = run.stdout + run.stderr
        if run.returncode != 3:
            sys.stdout.write(out[-4000:])
            return run.returncode
        m = re.search(r"prompt written to (\S+?(\d+)\.prompt\.md) \((.+?), [a-z ]*region\)", out)
        if not m:
            sys.exit("no prompt in the output:\n" + out[-2000:])
        pid, label = m.group(2), m.group(3)
        key = next((k for k in replies if k.startswith(label + " ") or k == label), None)
        if key is None or used[key] >= len(replies[key]):
            sys.exit(f"no recorded reply left for '{label}' in {old}")
        rec = replies[key][used[key]]
        used[key] += 1
        path = f".peak/manual/{pid}.rekey.md"
        with open(path, "w") as f:
            f.write(rec["reply"])
        subprocess.run([cmd[0], "respond", pid, path, "--by", rec["producer"]], check=True,
                       capture_output=True)
        print(f"{pid}: {key} <- seq {rec['seq']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
