#!/usr/bin/env python3
"""Checks the includes of src/ against the module layering of docs/architecture.md.

The fenced block marked `layers` in docs/architecture.md lists the modules (the folders of src/)
bottom to top, each with the modules it may include. Every `#include "MODULE/..."` of every
source and header under src/ must name the file's own module, a module of its row, a module of
the `all` row that sits below it, or (test sources: *_test.cpp, *testing.h) a module of its
`tests MODULE` row. A row may only name modules listed before it, so the allowed graph has no
cycle; the includes found are also checked for cycles between modules (tests left out: a test
binary is no module). Exits 1 with one line per broken rule (file:line, the include, the rule).

  scripts/check-layers.py [--src DIR] [--doc FILE]   check (default: src/, docs/architecture.md)
  scripts/check-layers.py --self-test                 check the checker on planted violations
"""
import argparse
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cc", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


class Layers:
    def __init__(self):
        self.order = []  # modules, bottom to top
        self.allowed = {}  # module -> set of modules it may include
        self.everyone = set()  # the `all` row
        self.tests = {}  # module -> extra modules its test sources may include

    def rank(self, module):
        return self.order.index(module)

    def may_include(self, module, target, is_test):
        if target == module or target in self.allowed.get(module, ()):
            return True
        if target in self.everyone and self.rank(target) < self.rank(module):
            return True
        return is_test and target in self.tests.get(module, ())


def parse_layers(doc_path):
    """The `layers` block of the document; a list of problems when it is malformed."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^```layers[ \t]*\n(.*?)^```", text, re.S | re.M)
    if not m:
        return None, [f"{doc_path}: no ```layers fenced block"]
    layers, problems = Layers(), []
    first_line = text[: m.start(1)].count("\n") + 1
    for n, raw in enumerate(m.group(1).splitlines(), first_line):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            problems.append(f"{doc_path}:{n}: expected 'MODULE: DEPENDENCIES', got '{raw.strip()}'")
            continue
        head, deps = line.split(":", 1)
        head, deps = head.strip(), deps.split()
        where = f"{doc_path}:{n}"
        if head == "all":
            layers.everyone.update(deps)
            rows = [(d, where) for d in deps]
        elif head.startswith("tests "):
            module = head.split(None, 1)[1]
            layers.tests.setdefault(module, set()).update(deps)
            rows = []
            if module not in layers.order:
                problems.append(f"{where}: 'tests {module}' names no module listed above it")
        else:
            if head in layers.order:
                problems.append(f"{where}: module {head} is listed twice")
            layers.order.append(head)
            layers.allowed[head] = set(deps)
            # Bottom to top: a module may only depend on modules listed before it.
            for d in deps:
                if d not in layers.order[:-1]:
                    problems.append(
                        f"{where}: {head} may include {d}, which is not listed below it "
                        "(a row names only modules of the rows before it)"
                    )
            rows = []
        for d, w in rows:
            if d not in layers.order:
                problems.append(f"{w}: '{head}' names {d}, which is not listed before it")
    return layers, problems


def is_test_source(name):
    return name.endswith("_test.cpp") or name.endswith("testing.h")


def scan(src):
    """(module, path, line number, include, is_test) for every quoted include with a folder."""
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, src)
        if rel_dir == ".":
            continue
        module = rel_dir.split(os.sep)[0]
        for name in sorted(filenames):
            if not name.endswith(SOURCE_EXTS):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and "/" in m.group(1):
                        yield module, path, n, m.group(1), is_test_source(name)


def find_cycles(edges):
    """The cycles of the module graph {module: {target: (path, line, include)}}, each once."""
    cycles, seen = [], set()
    state = {}  # module -> 1 on the current path, 2 done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append(cycle)
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return cycles


def check(src, doc):
    layers, problems = parse_layers(doc)
    if layers is None:
        return problems
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(src)))
    edges = {}
    unknown_modules = set()
    for module, path, n, inc, is_test in scan(src):
        if module not in layers.allowed:
            if module not in unknown_modules:
                unknown_modules.add(module)
                problems.append(
                    f"{rel(path)}: module {module} (src/{module}/) is not in the layers of {doc}"
                )
            continue
        target = inc.split("/", 1)[0]
        if target not in layers.allowed:
            problems.append(
                f"{rel(path)}:{n}: #include \"{inc}\": {target} is no module of the layers of {doc}"
            )
            continue
        if target != module and not is_test:
            edges.setdefault(module, {}).setdefault(target, (rel(path), n, inc))
        if not layers.may_include(module, target, is_test):
            may = sorted(layers.allowed[module] | {e for e in layers.everyone
                                                     if layers.rank(e) < layers.rank(module)})
            extra = sorted(layers.tests.get(module, ())) if is_test else []
            upward = layers.rank(target) > layers.rank(module)
            problems.append(
                f"{rel(path)}:{n}: #include \"{inc}\": {module} may not include {target}"
                f"{' (an include upward)' if upward else ''}; {module} may include: "
                f"{', '.join(may) or 'nothing'}"
                f"{' (tests also: ' + ', '.join(extra) + ')' if extra else ''} ({doc})"
            )
    for cycle in find_cycles(edges):
        steps = []
        for a, b in zip(cycle, cycle[1:]):
            path, n, inc = edges[a][b]
            steps.append(f"{path}:{n} includes {inc}")
        problems.append(f"module cycle {' -> '.join(cycle)}: " + "; ".join(steps))
    return problems


# ---- self-test -------------------------------------------------------------------------------

SELF_TEST_DOC = """# layers of a small tree
```layers
util:
low: util
high: low   # a comment
all: util
tests low: high
```
"""


def write_tree(root, files):
    for rel_path, text in files.items():
        path = os.path.join(root, rel_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def self_test():
    failures = []

    def expect(name, files, want, doc=SELF_TEST_DOC):
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, {"doc.md": doc, **{"src/" + k: v for k, v in files.items()}})
            problems = check(os.path.join(tmp, "src"), os.path.join(tmp, "doc.md"))
        text = "\n".join(problems)
        if want is None and problems:
            failures.append(f"{name}: expected no problem, got:\n{text}")
        for w in want or []:
            if w not in text:
                failures.append(f"{name}: expected a problem with '{w}', got:\n{text or '(none)'}")

    clean = {
        "util/a.h": "#pragma once\n",
        "low/b.h": '#include "util/a.h"\n#include <vector>\n#include "b_local.h"\n',
        "high/c.cpp": '#include "low/b.h"\n#include "util/a.h"\n#include "high/c.h"\n',
        "low/b_test.cpp": '#include "high/c.h"\n',  # tests of low may include high
    }
    expect("a clean tree", clean, None)
    expect("an include upward", {**clean, "low/d.cpp": '\n#include "high/c.h"\n'},
           ['low/d.cpp:2: #include "high/c.h": low may not include high (an include upward)'])
    expect("util includes nothing", {**clean, "util/e.cpp": '#include "low/b.h"\n'},
           ['util/e.cpp:1: #include "low/b.h": util may not include low'])
    expect("a test helper is a test source", {**clean, "low/testing.h": '#include "high/c.h"\n'},
           None)
    expect("a module outside the table", {**clean, "other/f.cpp": '#include "util/a.h"\n'},
           ["module other (src/other/) is not in the layers"])
    expect("an unknown target", {**clean, "high/g.cpp": '#include "nowhere/x.h"\n'},
           ['high/g.cpp:1: #include "nowhere/x.h": nowhere is no module'])
    cyclic = SELF_TEST_DOC.replace("util:\n", "util: high\n")
    expect("a cycle", {**clean, "util/h.cpp": '#include "high/c.h"\n'},
           ["util may include high, which is not listed below it", "module cycle"], doc=cyclic)
    expect("no layers block", clean, ["no ```layers fenced block"], doc="# nothing\n")
    if failures:
        print("check-layers self-test failed:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print("check-layers self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(ROOT, "src"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "architecture.md"))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    problems = check(args.src, args.doc)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-layers: {len(problems)} problem(s); the rules: {args.doc}", file=sys.stderr)
        return 1
    print(f"check-layers: the includes of {args.src} keep the layers of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
