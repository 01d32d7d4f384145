#!/usr/bin/env python3
"""Copies stdin to stdout, each line prefixed with the seconds since START ("  12.34 "): a
timeline of a command's progress lines. START is a Unix time (`date +%s.%N` when the command
started); without it, the time this script started.

  start=$(date +%s.%N); cmd 2> >(python3 -u scripts/stamp-lines.py "$start" > log)
"""
import sys
import time


def main():
    t0 = float(sys.argv[1]) if len(sys.argv) > 1 else time.time()
    for line in sys.stdin:
        sys.stdout.write(f"{time.time() - t0:8.2f} {line}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
