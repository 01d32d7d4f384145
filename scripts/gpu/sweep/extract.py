#!/usr/bin/env python3
"""Writes the CUDA fp32 kernel of the launch-bounds step (checkpoint 16 of the whole recorded
campaign) as one compilable file: the macros region of the vectorize reply and the device region
of the launch-bounds reply of recordings/cuda-fp32-full. Usage: extract.py OUT.cu"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from replies import reply

open(sys.argv[1], "w").write(reply("vectorize pass 1/2") + "\n" + reply("launch-bounds pass 1/1"))
