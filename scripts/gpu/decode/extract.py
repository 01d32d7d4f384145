#!/usr/bin/env python3
"""Writes the small-M kernel of the recorded CUDA fp32 campaign (checkpoint 18: the macros region
of the small-m pass 1 reply and the device region of its pass 2 reply, from
recordings/cuda-fp32-full) as one compilable file. Usage: extract.py OUT.cu"""
import glob, json, os, re, sys

root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
rec = os.path.join(root, "recordings", "cuda-fp32-full")


def reply(label):
    for f in sorted(glob.glob(os.path.join(rec, "0*.json"))):
        d = json.load(open(f))
        if d["step_label"].startswith(label):
            return re.search(r"```[a-z]*\n(.*?)```", d["reply"], re.S).group(1)
    sys.exit(f"no reply for {label} in {rec}")


open(sys.argv[1], "w").write(reply("small-m pass 1/3") + "\n" + reply("small-m pass 2/3"))
