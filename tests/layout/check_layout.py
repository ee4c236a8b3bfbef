#!/usr/bin/env python3
"""The layout's two rules, checked mechanically (issue 12; docs: README's Layout section).

1. A subsystem's internal.h is private to its folder: only files in that folder include it, and
   as "internal.h". The one exception is the subsystem's own tests (tests/<kind>/<subsystem>/...),
   which may include "<subsystem>/internal.h". Private headers are named internal.h, nothing else.
   Read from the sources: every #include "..." in control/, dataplane/, include/, bpf/, tests/.
2. Inside a subsystem (a folder of control/ or dataplane/, the top of each counting as one),
   dependencies run one way: no two .c files call each other, directly or round a longer cycle.
   Read from the compiled objects: the build's compile_commands.json names each source's object,
   `nm` gives what each defines and what it needs; a -> b when a needs a symbol b defines. Calls
   inlined from a header are not seen (they are the header's, not a file's).

Usage: check_layout.py --source SRC --build BUILD   (run by `meson test` as the test "layout")
Exit 0 when both hold, 1 with a report of each violation, 2 when it cannot check.
"""

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

SOURCE_TREES = ("control", "dataplane", "include", "bpf", "tests")
SUBSYSTEM_ROOTS = ("control", "dataplane")
INCLUDE_DIRS = ("include", "control", "dataplane")  # the project's include_directories
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rel(src, path):
    return os.path.relpath(path, src)


def sources(src):
    for top in SOURCE_TREES:
        for d, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(("build", ".")) and x != "corpus")
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def resolve(src, including, name):
    """Where the compiler finds #include "name" from including, or None (generated headers)."""
    for base in [os.path.dirname(including)] + [os.path.join(src, d) for d in INCLUDE_DIRS]:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def check_includes(src):
    errors, test_uses = [], []
    for f in sources(src):
        rf = rel(src, f)
        if os.path.basename(f).endswith("_internal.h"):
            errors.append(f"{rf}: a private header is named internal.h, in its subsystem's folder")
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in INCLUDE_RE.finditer(text):
            name = m.group(1)
            p = resolve(src, f, name)
            if not p or not os.path.basename(p).endswith("internal.h"):
                continue
            owner = rel(src, os.path.dirname(p))  # e.g. control/records
            line = text.count("\n", 0, m.start()) + 1
            where = f'{rf}:{line}: #include "{name}"'
            if os.path.dirname(f) == os.path.dirname(p):
                if name != "internal.h":
                    errors.append(f'{where}: inside {owner}/ write it as "internal.h"')
                continue
            parts = rf.split(os.sep)
            sub = os.path.basename(owner)
            if parts[0] == "tests" and sub in parts[1:-1] and name == f"{sub}/internal.h":
                test_uses.append(f"{where} (the subsystem's own test)")
                continue
            errors.append(f"{where}: {owner}/internal.h is private to {owner}/; include its "
                          f"public header instead")
    return errors, test_uses


def nm_symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) < 2:
            continue
        name, kind = p[0], p[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCVWG" and kind.isupper():
            defined.add(name)
    return defined, undefined


def objects(src, build):
    """{source (relative to src): object path} for the .c files of control/ and dataplane/."""
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path, encoding="utf-8") as fh:
            db = json.load(fh)
    except OSError as e:
        raise SystemExit(f"check_layout: {path}: {e.strerror} (meson setup first)")
    out = {}
    for e in db:
        f = os.path.normpath(os.path.join(e["directory"], e["file"]))
        rf = rel(src, f)
        if rf.split(os.sep)[0] not in SUBSYSTEM_ROOTS or not rf.endswith(".c"):
            continue
        o = os.path.normpath(os.path.join(e["directory"], e["output"]))
        if not os.path.isfile(o):
            raise SystemExit(f"check_layout: {rel(build, o)} not built (meson compile first)")
        out[rf] = o
    if not out:
        raise SystemExit(f"check_layout: no objects of {SUBSYSTEM_ROOTS} in {path}")
    return out


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def layers(nodes, edges):
    """Files bottom-up: each after everything it calls (only meaningful without cycles)."""
    order, done = [], set()
    while len(done) < len(nodes):
        ready = sorted(v for v in nodes if v not in done and edges[v] <= done)
        if not ready:
            break
        order.append(ready)
        done.update(ready)
    return order


def check_calls(src, build):
    objs = objects(src, build)
    groups = defaultdict(list)
    for rf in objs:
        groups[os.path.dirname(rf)].append(rf)
    errors, summary = [], []
    for g, files in sorted(groups.items()):
        syms = {f: nm_symbols(objs[f]) for f in files}
        edges = {f: set() for f in files}
        calls = {}
        for a in files:
            for b in files:
                if a != b:
                    s = syms[a][1] & syms[b][0]
                    if s:
                        edges[a].add(b)
                        calls[(a, b)] = sorted(s)
        base = {f: os.path.basename(f) for f in files}
        for comp in cycles(files, edges):
            errors.append(f"{g}/: these files call each other round a cycle: "
                          + ", ".join(base[f] for f in comp))
            for a in comp:
                for b in sorted(edges[a] & set(comp)):
                    mark = "  <-> both ways" if a in edges[b] else ""
                    errors.append(f"    {base[a]} -> {base[b]}: {' '.join(calls[(a, b)])}{mark}")
        order = layers(files, edges)
        if sum(len(x) for x in order) == len(files):
            summary.append(f"  {g}/: " + " < ".join(", ".join(base[f] for f in layer)
                                                      for layer in order))
    return errors, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="the source tree")
    ap.add_argument("--build", required=True, help="a configured and compiled meson build dir")
    args = ap.parse_args()
    src, build = os.path.abspath(args.source), os.path.abspath(args.build)

    inc_errors, test_uses = check_includes(src)
    call_errors, summary = check_calls(src, build)

    print("check_layout: 1. internal.h stays inside its subsystem")
    for u in test_uses:
        print(f"  allowed: {u}")
    for e in inc_errors:
        print(f"  VIOLATION: {e}")
    print(f"  {'ok' if not inc_errors else f'{len(inc_errors)} violation(s)'}")
    print("check_layout: 2. inside a subsystem calls run one way (from nm of the objects in "
          f"{rel(src, build) if build.startswith(src + os.sep) else build})")
    for e in call_errors:
        print(f"  VIOLATION: {e}" if not e.startswith("    ") else f"  {e}")
    print("  bottom < ... < top, per folder without a cycle:")
    for s in summary:
        print(s)
    print("  ok" if not call_errors else
          "  violation(s): move each function to the file it belongs in, so calls go one way")
    failed = bool(inc_errors or call_errors)
    print(f"check_layout: {'FAILED' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            sys.exit(2)
        raise
