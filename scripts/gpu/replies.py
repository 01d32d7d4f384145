"""The code of a recorded reply: `reply(label)` is the fenced block of the first exchange of
recordings/cuda-fp32-full whose step label starts with `label` (e.g. "small-m pass 2/3")."""
import glob, json, os, re, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
rec = os.path.join(root, "recordings", "cuda-fp32-full")


def reply(label):
    for f in sorted(glob.glob(os.path.join(rec, "0*.json"))):
        d = json.load(open(f))
        if d["step_label"].startswith(label):
            return re.search(r"```[a-z]*\n(.*?)```", d["reply"], re.S).group(1)
    sys.exit(f"no reply for {label} in {rec}")
