#!/usr/bin/env python3
"""Removes repeated manual-mode exchanges (same prompt key and same reply) from a recording folder
and renumbers the rest in order. A resumed manual run serves stored answers again; those are not
new exchanges. Usage: scripts/dedupe-recording.py recordings/NAME"""
import json, os, sys

d = sys.argv[1]
files = sorted(f for f in os.listdir(d) if f.endswith('.json'))
seen, keep = set(), []
for f in files:
    j = json.load(open(os.path.join(d, f)))
    k = (j['key'], j['reply'])
    if j.get('driver') == 'manual' and k in seen:
        os.remove(os.path.join(d, f))
        continue
    seen.add(k)
    keep.append((f, j))
for i, (f, j) in enumerate(keep, 1):
    j['seq'] = i
    new = '%04d-%s.json' % (i, j['key'][:16])
    os.remove(os.path.join(d, f))
    with open(os.path.join(d, new), 'w') as out:
        out.write(json.dumps(j, indent=2, ensure_ascii=False) + '\n')
print('%d exchanges kept' % len(keep))
