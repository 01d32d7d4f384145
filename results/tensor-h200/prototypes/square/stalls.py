#!/usr/bin/env python3
"""The stall tables of a call's Nsight Compute output (calls/call42.sh), one column per kernel:
  stalls.py STALLS_CSV[.xz] SOURCE_CSV[.xz] NAME ...
(1) each stall reason in cycles per issued instruction (`--page raw --csv`); (2) per kernel, the
SASS instructions with the most warp-stall samples (`--page source --print-source sass --csv`),
each with its share of the kernel's samples and its two largest reasons ("other": the samples of
reasons the source page has no column for, such as `gmma`). NAME: the kernels in
launch order (bench.cu --profile launches the variants in the order they were built)."""
import csv, io, lzma, sys


def read(path):
    opener = lzma.open if path.endswith('.xz') else open
    with opener(path, 'rt') as f:
        return f.read().splitlines()


def table(lines):
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    return rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]


def reasons(path, names):
    lines = read(path)
    hdr, rows = table(lines[next(i for i, l in enumerate(lines) if l.startswith('"ID"')):])
    rows = rows[1:]  # the units row
    prefix, suffix = 'smsp__average_warps_issue_stalled_', '_per_issue_active.ratio'
    cols = [j for j, h in enumerate(hdr) if h.startswith(prefix)]
    value = lambda r, j: float(r[j].replace(',', '') or 0)
    print('| reason | ' + ' | '.join(names) + ' |\n|---|' + '---:|' * len(names))
    for j in sorted(cols, key=lambda j: -value(rows[-1], j)):
        if any(value(r, j) >= 0.01 for r in rows):
            name = hdr[j][len(prefix):-len(suffix)]
            print(f'| {name} | ' + ' | '.join(f'{value(r, j):.2f}' for r in rows) + ' |')


def sources(path, names, top=8):
    lines = read(path)
    starts = [i for i, l in enumerate(lines) if l.startswith('"Kernel Name"')] + [len(lines)]
    for k, name in enumerate(names):
        hdr, rows = table(lines[starts[k] + 1:starts[k + 1]])
        ix = {h: j for j, h in enumerate(hdr)}
        samples = lambda r: int(r[ix['Warp Stall Sampling (All Samples)']])
        total = sum(samples(r) for r in rows)
        print(f'\n{name}: {len(rows)} SASS instructions, {total} warp-stall samples')
        stall = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
        for n, r in sorted(enumerate(rows), key=lambda x: -samples(x[1]))[:top]:
            counts = [(int(r[ix[h]]), h[6:]) for h in stall]
            # Reasons the source page has no column for (the warpgroup MMA's, `gmma`) remain.
            counts.append((samples(r) - sum(c for c, _ in counts), 'other'))
            why = sorted(counts, reverse=True)[:2]
            print(f'  {100 * samples(r) / total:5.1f} %  #{n:<5d} {r[ix["Source"]].strip()[:56]:56s} '
                  + ', '.join(f'{w} {c}' for c, w in why))


if __name__ == '__main__':
    reasons(sys.argv[1], sys.argv[3:])
    sources(sys.argv[2], sys.argv[3:])
