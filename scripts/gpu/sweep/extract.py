#!/usr/bin/env python3
"""Writes the CUDA fp32 kernel of the launch-bounds step (checkpoint 16 of the whole recorded
campaign) as one compilable file: the macros region of the vectorize reply and the device region
of the launch-bounds reply of recordings/cuda-fp32-full. Usage: extract.py OUT.cu"""
import glob, json, os, re, sys

root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
rec = os.path.join(root, "recordings", "cuda-fp32-full")


def reply(label):
    for f in sorted(glob.glob(os.path.join(rec, "0*.json"))):
        d = json.load(open(f))
        if d["step_label"].startswith(label):
            return re.search(r"```[a-z]*\n(.*?)```", d["reply"], re.S).group(1)
    sys.exit(f"no reply for {label} in {rec}")


open(sys.argv[1], "w").write(reply("vectorize pass 1/2") + "\n" + reply("launch-bounds pass 1/1"))
