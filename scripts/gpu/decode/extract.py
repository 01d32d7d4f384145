#!/usr/bin/env python3
"""Writes the small-M kernel of the recorded CUDA fp32 campaign (checkpoint 18: the macros region
of the small-m pass 1 reply and the device region of its pass 2 reply, from
recordings/cuda-fp32-full) as one compilable file. Usage: extract.py OUT.cu"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from replies import reply

open(sys.argv[1], "w").write(reply("small-m pass 1/3") + "\n" + reply("small-m pass 2/3"))
