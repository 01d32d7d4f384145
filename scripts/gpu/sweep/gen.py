#!/usr/bin/env python3
"""Configurations of the launch-bounds kernel for a screening sweep, valid under the sequence's
constraints (tuning_valid of every transformation, 48 KiB of static shared memory).
  gen.py broad SEED N          a random N of the whole space, two thirds 256-thread 8x8 tiles
  gen.py focused SEED N DONE   a random N with one k per operand group and the tile shapes that
                               led the broad sweep, leaving out the configurations in file DONE"""
import itertools, random, sys

mode, seed, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(seed)
NAMES = ["BLOCK_X", "BLOCK_Y", "TRD_Y_DIM", "TRD_X_DIM", "TILE_K", "TRD_K_DIM", "TRD_CHUNK",
         "NUM_STAGES", "OFFSET_AMOUNT", "SWIZZLE_WIDTH", "WARP_X_DIM", "WARP_Y_DIM", "MIN_BLOCKS"]


def valid(bx, by, ty, tx, tk, kd, ch, ns, off, sw, wx, mb):
    t, wy, bm, bn = bx * by, 32 // wx, by * ty, bx * tx
    return (64 <= t <= 1024 and bx % wx == 0 and by % wy == 0 and 64 <= bm <= 256 and
            64 <= bn <= 256 and ty * tx <= 128 and tk % kd == 0 and (tk // kd) % 2 == 0 and
            tx % ch == 0 and ty % ch == 0 and (bm * tk) % (4 * t) == 0 and
            (bn * tk) % (4 * t) == 0 and 4 * ns * tk * (bm + bn + 2 * off) <= 48 * 1024)


def line(c):
    bx, by, ty, tx, tk, kd, ch, ns, off, sw, wx, mb = c
    return " ".join(f"{k}={v}" for k, v in zip(NAMES, (bx, by, ty, tx, tk, kd, ch, ns, off, sw, wx,
                                                      32 // wx, mb)))


W = [1, 2, 4, 8, 16, 32]
if mode == "broad":
    blocks = [(16, 16), (32, 8), (8, 32), (16, 8), (8, 16), (32, 16), (16, 32), (32, 4), (4, 32)]
    every = [(bx, by) + r for (bx, by) in blocks for r in itertools.product(
        [4, 8, 16], [4, 8, 16], [8, 16, 32], [1, 2, 4], [4, 8], [2, 3], [0, 4, 8], [1, 4, 8, 16], W,
        [1, 2])]
    every = [c for c in every if valid(*c)]
    random.shuffle(every)
    pref = [c for c in every if c[0] * c[1] == 256 and c[2] * c[3] == 64]
    rest = [c for c in every if not (c[0] * c[1] == 256 and c[2] * c[3] == 64)]
    pick = pref[:limit * 2 // 3] + rest[:limit - min(len(pref), limit * 2 // 3)]
    prefix = "c"
else:
    done = {l.split(" ", 1)[1].strip() for l in open(sys.argv[4])}
    tiles = [(32, 4, 16, 8), (32, 8, 8, 8), (16, 8, 8, 16), (16, 16, 8, 8), (16, 8, 16, 8),
             (8, 16, 8, 16), (32, 8, 16, 8), (16, 16, 8, 16), (32, 16, 8, 8), (16, 16, 16, 8),
             (8, 32, 8, 16), (8, 16, 16, 8), (32, 4, 8, 16), (64, 2, 8, 8), (64, 4, 8, 8)]
    every = [tl[:2] + (tl[2], tl[3], tk, 1, ch, ns, off, sw, wx, mb) for tl, mb, ns, off, sw, ch, tk, wx
             in itertools.product(tiles, [1, 2], [2, 3], [0, 4, 8], [1, 4, 8, 16], [4, 8], [8, 16], W)]
    pick = [c for c in every if valid(*c) and line(c) not in done]
    random.shuffle(pick)
    pick = pick[:limit]
    prefix = "d"
for i, c in enumerate(pick):
    print(f"{prefix}{i:04d} {line(c)}")
