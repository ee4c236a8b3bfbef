#!/usr/bin/env python3
"""The layout's rules, checked mechanically (issues 12 and 24; docs: README's Layout section).

1. A subsystem's internal.h is private to its folder: only files in that folder include it, and
   as "internal.h". The one exception is the subsystem's own tests (tests/<kind>/<subsystem>/...),
   which may include "<subsystem>/internal.h". Private headers are named internal.h, nothing else.
   Read from the sources: every #include "..." in control/, dataplane/, include/, bpf/, tests/.
2. Inside a subsystem (a folder of control/ or dataplane/, the top of each counting as one),
   dependencies run one way: no two .c files call each other, directly or round a longer cycle.
   Read from the compiled objects: the build's compile_commands.json names each source's object,
   `nm` gives what each defines and what it needs; a -> b when a needs a symbol b defines. Calls
   inlined from a header are not seen (they are the header's, not a file's).
3. Layers run one way (issues 24, 36): base (include/, dataplane/base/: logging, addresses, the
   answer table's entry encoding, and dataplane/wire/: DNS wire code) < dataplane/ and bpf/ <
   control/. Nothing in dataplane/ or bpf/ includes a file of control/, and the base includes
   nothing above it (nothing of control/, bpf/ or the rest of dataplane/). Read from the sources: every #include "..." and #include <...> of
   control/, dataplane/, include/ and bpf/ that names a file of the tree (resolved as the compiler
   does, through the project's include_directories); tests/ may include any layer.
4. No C file (.c or .h) in control/, dataplane/, bpf/ or include/ is over MAX_LINES lines
   (issue 24): a file that grows past it is split by meaning, as table.c was into table_walk.c.
5. The base links nothing above it (issue 36): no object of dataplane/base/ needs a symbol that
   only objects outside dataplane/base/ define, and none of dataplane/wire/ one that only objects
   outside dataplane/base/ and dataplane/wire/ define. Read from nm of the objects, as rule 2.
6. A component's header has the users it is for (issue 36): the HTTP server's (control/http/
   http.h; a subsystem writes its /metrics section with control/metrics/metrics.h), the socket
   server's, the kernel fast path's and the DPDK backend's headers (dataplane/socket/,
   dataplane/fastpath/, dataplane/dpdk/) are included only inside their own folder and by the
   agent (control/agent/), which runs them. So the query layer includes no socket header (it gets
   the server's calls through struct ndc_query_io), and the publisher and the DPDK table get the
   entry encoding from <ndc/entry.h>. Read from the #includes of control/ and dataplane/ outside
   the base (rule 3 covers the base); tests/ may include any.
7. Every subsystem in a folder (issue 36): no configuration file (config*.c, config*.h) at the root
   of control/: the configuration is control/config/.

Usage: check_layout.py --source SRC --build BUILD   (run by `meson test` as the test "layout")
       check_layout.py --self-test   (the test "layout_self_test": each rule on a planted
                                      violation in a scratch tree, and a clean tree passes)
Exit 0 when the rules hold, 1 with a report of each violation, 2 when it cannot check.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

SOURCE_TREES = ("control", "dataplane", "include", "bpf", "tests")
SUBSYSTEM_ROOTS = ("control", "dataplane")
INCLUDE_DIRS = ("include", "control", "dataplane")  # the project's include_directories
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANY_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)', re.M)
LAYER_TREES = ("control", "dataplane", "include", "bpf")  # rules 3 and 4 read these (not tests/)
MAX_LINES = 1000
# Rule 3: the folders of dataplane/ in the base (with include/).
BASE_DIRS = ("dataplane/base", "dataplane/wire")
# Rule 5: the folders whose objects' symbols each base library may need.
BASE_LINKS = {"dataplane/base": ("dataplane/base",),
              "dataplane/wire": ("dataplane/base", "dataplane/wire")}
# Rule 6: headers (a file, or a folder ending in /) for their own folder and these users only.
RESTRICTED_HEADERS = (
    ("control/http/http.h", "the HTTP server's header; a subsystem writes its /metrics section "
     "with metrics/metrics.h"),
    ("dataplane/socket/", "the socket server's; the query layer gets its calls through struct "
     "ndc_query_io (query/query.h), which the agent wires"),
    ("dataplane/fastpath/", "the kernel fast path's; the table's key and entry encoding is "
     "<ndc/entry.h>"),
    ("dataplane/dpdk/", "the DPDK backend's"),
)
RESTRICTED_USERS = ("control/agent",)  # the agent runs the server and the dataplanes
# Rule 7: files of a subsystem that has its folder, not at the root of control/.
ROOT_FORBIDDEN = re.compile(r"^config.*\.[ch]$")


def rel(src, path):
    return os.path.relpath(path, src)


def sources(src):
    for top in SOURCE_TREES:
        for d, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(("build", ".")) and x != "corpus")
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def resolve(src, including, name, quoted=True):
    """Where the compiler finds #include "name" (<name>: quoted False) from including, or None
    (system and generated headers)."""
    first = [os.path.dirname(including)] if quoted else []
    for base in first + [os.path.join(src, d) for d in INCLUDE_DIRS]:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def layer(rf):
    """The layer of a file of the tree (path relative to it), or None (tests/ and the rest)."""
    parts = rf.split(os.sep)
    if parts[0] == "include" or "/".join(parts[:2]) in BASE_DIRS:
        return "base"
    if parts[0] in ("dataplane", "bpf", "control"):
        return parts[0]
    return None


def check_layers(src):
    """Rule 3: errors, and {(from layer, to layer): count of includes} for the summary."""
    errors, graph = [], defaultdict(int)
    for rf, line, spelled, rp in includes_of(src, LAYER_TREES):
        lf, lp = layer(rf), layer(rp)
        if not lp:
            continue
        graph[(lf, lp)] += 1
        where = f"{rf}:{line}: #include {spelled}"
        if lf in ("dataplane", "bpf") and lp == "control":
            errors.append(f"{where}: {lf}/ includes {rp} of control/; move what it needs "
                          "down to the base (include/ndc/, dataplane/base/)")
        elif lf == "base" and lp != "base":
            errors.append(f"{where}: the base (include/, dataplane/base/, dataplane/wire/) "
                          f"includes {rp}, above it in {lp}/")
    return errors, graph


def includes_of(src, trees):
    """(file, line, spelled, included file) for each #include of the tree's files in trees that
    names a file of the tree, all paths relative to src."""
    for f in sources(src):
        rf = rel(src, f)
        if rf.split(os.sep)[0] not in trees:
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in ANY_INCLUDE_RE.finditer(text):
            name = m.group(1) or m.group(2)
            p = resolve(src, f, name, quoted=m.group(1) is not None)
            if not p or not p.startswith(src + os.sep):
                continue
            spelled = f'"{name}"' if m.group(1) is not None else f"<{name}>"
            yield rf, text.count("\n", 0, m.start()) + 1, spelled, rel(src, p)


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


def check_base_links(src, build):
    """Rule 5: errors (a base object that needs a symbol only objects above it define)."""
    objs = objects(src, build)
    syms = {f: nm_symbols(o) for f, o in objs.items()}
    definers = defaultdict(set)
    for f, (defined, _) in syms.items():
        for s in defined:
            definers[s].add(os.path.dirname(f))
    errors = []
    for f, (_, undefined) in sorted(syms.items()):
        allowed = BASE_LINKS.get(os.path.dirname(f))
        if not allowed:
            continue
        for s in sorted(undefined):
            where = definers.get(s)
            if where and not where & set(allowed):
                errors.append(f"{f} needs {s}, defined in {', '.join(sorted(where))}/: the base "
                              f"links nothing above it (may use {', '.join(a + '/' for a in allowed)})")
    return errors


def check_headers(src):
    """Rule 6: errors (a restricted header included outside its folder and its users)."""
    errors = []
    for rf, line, spelled, rp in includes_of(src, ("control", "dataplane")):
        if layer(rf) == "base":
            continue  # rule 3's
        for header, why in RESTRICTED_HEADERS:
            mine = rp.startswith(header) if header.endswith("/") else rp == header
            home = header.rstrip("/") if header.endswith("/") else os.path.dirname(header)
            folder = os.path.dirname(rf)
            if not mine or folder == home or folder.startswith(RESTRICTED_USERS):
                continue
            errors.append(f"{rf}:{line}: #include {spelled}: {rp} is {why}; only {home}/ and "
                          f"{', '.join(u + '/' for u in RESTRICTED_USERS)} include it")
    return errors


def check_folders(src):
    """Rule 7: errors (a subsystem's file at the root of control/)."""
    top = os.path.join(src, "control")
    names = sorted(os.listdir(top)) if os.path.isdir(top) else []
    return [f"control/{n}: the configuration's files are in control/config/"
            for n in names if ROOT_FORBIDDEN.match(n) and os.path.isfile(os.path.join(top, n))]


def check_sizes(src):
    """Rule 4: errors, and the largest file of the product with its lines (for the summary)."""
    errors, largest = [], (None, 0)
    for f in sources(src):
        rf = rel(src, f)
        if rf.split(os.sep)[0] not in LAYER_TREES:
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES:
            errors.append(f"{rf}: {n} lines, over {MAX_LINES}: split it by meaning")
        if n > largest[1]:
            largest = (rf, n)
    return errors, largest


def report_layers(src):
    """Prints rule 3 and its include graph; True when it holds."""
    errors, graph = check_layers(src)
    print("check_layout: 3. layers run one way: base (include/, dataplane/base/, dataplane/wire/) "
          "< dataplane/, bpf/ < control/")
    for e in errors:
        print(f"  VIOLATION: {e}")
    print("  includes between layers (from -> to: count):")
    for (a, b), n in sorted(graph.items()):
        if a != b:
            print(f"    {a} -> {b}: {n}")
    print(f"  {'ok' if not errors else f'{len(errors)} violation(s)'}")
    return not errors


# The self-test's scratch tree: one clean file per layer, each including what it may.
CLEAN_TREE = {
    "include/ndc/ip.h": "#pragma once\n#include <stdint.h>\nstruct ndc_ip { uint8_t family; };\n",
    "dataplane/base/ip.c": '#include <ndc/ip.h>\nint ndc_ip_parse(void) { return 0; }\n',
    "dataplane/wire/dns_wire.c": ('#include <ndc/ip.h>\nint ndc_ip_parse(void);\n'
                                  "int ndc_dns_parse(void) { return ndc_ip_parse(); }\n"),
    "dataplane/socket/socket.h": "#include <ndc/ip.h>\n",
    "dataplane/socket/internal.h": '#include "socket/socket.h"\n',
    "dataplane/socket/server.c": ('#include <ndc/ip.h>\n#include "internal.h"\n'
                                  "int server_run(void) { return 0; }\n"),
    "dataplane/fastpath/fastpath.h": "#include <ndc/ip.h>\n",
    "bpf/ndc_prog.bpf.c": "#include <linux/bpf.h>\n#include <ndc/ip.h>\n",
    "control/config/config.h": "#include <ndc/ip.h>\n",
    "control/metrics/metrics.h": "#include <stdint.h>\n",
    "control/http/http.h": '#include "metrics/metrics.h"\n',
    "control/objects/objects.h": '#include <ndc/ip.h>\n',
    "control/objects/internal.h": '#include "objects/objects.h"\n',
    "control/objects/conv.c": ('#include "internal.h"\n#include "config/config.h"\n'
                               '#include "metrics/metrics.h"\nint conv(void) { return 0; }\n'),
    "control/objects/store.c": ('#include "internal.h"\nint conv(void);\n'
                                "int store(void) { return conv(); }\n"),
    "control/agent/agent.c": ('#include "http/http.h"\n#include "socket/socket.h"\n'
                              '#include "fastpath/fastpath.h"\nint agent_run(void) { return 0; }\n'),
    "tests/unit/socket/test_server.c": ('#include "objects/objects.h"\n'
                                        '#include "socket/internal.h"\n'),
}

# One violation each: (rule, file, text appended to it, what the report must name).
PLANTED = [
    (1, "control/config/config.h", '#include "objects/internal.h"\n', "control/config/config.h:2"),
    (1, "dataplane/socket/server_internal.h", "\n", "server_internal.h: a private header"),
    (2, "control/objects/conv.c", "int store(void);\nint conv2(void) { return store(); }\n",
     "control/objects/: these files call each other round a cycle: conv.c, store.c"),
    (3, "dataplane/socket/server.c", '#include "objects/objects.h"\n',
     "dataplane/socket/server.c:4: #include \"objects/objects.h\": dataplane/ includes"),
    (3, "dataplane/socket/server.c", "#include <config/config.h>\n",
     "dataplane/socket/server.c:4: #include <config/config.h>: dataplane/ includes "
     "control/config/config.h"),
    (3, "bpf/ndc_prog.bpf.c", '#include "../control/config/config.h"\n',
     "bpf/ndc_prog.bpf.c:3: #include \"../control/config/config.h\": bpf/ includes control/"),
    (3, "dataplane/base/ip.c", '#include "socket/socket.h"\n',
     "dataplane/base/ip.c:3: #include \"socket/socket.h\": the base"),
    (3, "dataplane/wire/dns_wire.c", '#include "fastpath/fastpath.h"\n',
     "dataplane/wire/dns_wire.c:4: #include \"fastpath/fastpath.h\": the base"),
    (3, "include/ndc/ip.h", '#include "objects/objects.h"\n',
     "include/ndc/ip.h:4: #include \"objects/objects.h\": the base"),
    (4, "dataplane/socket/server.c", "/* padding */\n" * MAX_LINES,
     "dataplane/socket/server.c: 1003 lines, over 1000"),
    (5, "dataplane/base/ip.c", "int ndc_dns_parse(void);\nint ip2(void) { return ndc_dns_parse(); }\n",
     "dataplane/base/ip.c needs ndc_dns_parse, defined in dataplane/wire/"),
    (5, "dataplane/wire/dns_wire.c", "int server_run(void);\nint d2(void) { return server_run(); }\n",
     "dataplane/wire/dns_wire.c needs server_run, defined in dataplane/socket/"),
    (6, "control/objects/conv.c", '#include "http/http.h"\n',
     "control/objects/conv.c:5: #include \"http/http.h\": control/http/http.h is the HTTP"),
    (6, "control/query/resolver.c", '#include "socket/socket.h"\n',
     "control/query/resolver.c:1: #include \"socket/socket.h\": dataplane/socket/socket.h is"),
    (6, "control/publisher.c", '#include "fastpath/fastpath.h"\n',
     "control/publisher.c:1: #include \"fastpath/fastpath.h\": dataplane/fastpath/fastpath.h"),
    (7, "control/config_load.c", "int config_load(void) { return 0; }\n",
     "control/config_load.c: the configuration's files are in control/config/"),
    (7, "control/config.h", "#include <ndc/ip.h>\n", "control/config.h: the configuration's"),
]


def scratch_tree(root, extra=None):
    """Writes CLEAN_TREE (plus extra: (file, appended text)) under root, compiles its control/
    and dataplane/ .c files and writes their compile_commands.json; returns the build dir."""
    files = dict(CLEAN_TREE)
    if extra:
        files[extra[0]] = files.get(extra[0], "") + extra[1]
    for f, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(f)), exist_ok=True)
        with open(os.path.join(root, f), "w", encoding="utf-8") as fh:
            fh.write(text)
    build = os.path.join(root, "build")
    os.makedirs(build)
    db = []
    for f in sorted(files):
        if f.endswith(".c") and f.split("/")[0] in SUBSYSTEM_ROOTS:
            out = f.replace("/", "_") + ".o"
            cmd = [os.environ.get("CC", "cc"), "-c", "-w"]
            cmd += [f"-I{os.path.join(root, d)}" for d in INCLUDE_DIRS]
            cmd += [os.path.join(root, f), "-o", os.path.join(build, out)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"check_layout --self-test: {' '.join(cmd)}: {r.stderr.strip()}")
            db.append({"directory": build, "file": os.path.join(root, f), "output": out})
    with open(os.path.join(build, "compile_commands.json"), "w", encoding="utf-8") as fh:
        json.dump(db, fh)
    return build


def self_test():
    """Each rule reports its planted violation (and nothing else); the clean tree passes."""
    failures = []
    cases = [(None, None, None, None)] + PLANTED
    for rule, f, text, expect in cases:
        root = tempfile.mkdtemp(prefix="check_layout.")
        try:
            build = scratch_tree(root, (f, text) if f else None)
            got = {1: check_includes(root)[0], 2: check_calls(root, build)[0],
                   3: check_layers(root)[0], 4: check_sizes(root)[0],
                   5: check_base_links(root, build), 6: check_headers(root),
                   7: check_folders(root)}
        finally:
            shutil.rmtree(root)
        shown = text.strip() if f and len(text) < 80 else f"{(text or '').count(chr(10))} lines"
        name = f"rule {rule}: {f} + {shown!r}" if f else "the clean tree"
        found = [e for r in got for e in got[r]]
        if expect is None:
            ok = not found
        else:
            others = [e for r in got if r != rule for e in got[r]]
            ok = not others and len([e for e in got[rule] if not e.startswith("    ")]) == 1 \
                and expect in got[rule][0]
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: "
              + (f"{len(found)} line(s) reported" if found else "no violation reported"))
        for e in found:
            print(f"         {e.strip()}")
        if not ok:
            failures.append(name)
    print(f"check_layout --self-test: {'FAILED: ' + ', '.join(failures) if failures else 'ok'}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", help="the source tree")
    ap.add_argument("--build", help="a configured and compiled meson build dir")
    ap.add_argument("--self-test", action="store_true",
                    help="check the checker on planted violations in a scratch tree")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.source or not args.build:
        ap.error("--source and --build are required (or --self-test)")
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
    layers_ok = report_layers(src)
    size_errors, largest = check_sizes(src)
    print(f"check_layout: 4. no C file of the product over {MAX_LINES} lines")
    for e in size_errors:
        print(f"  VIOLATION: {e}")
    print(f"  largest: {largest[0]}, {largest[1]} lines" if largest[0] else "  no C file found")
    print("  ok" if not size_errors else f"  {len(size_errors)} violation(s)")
    rules = [
        ("5. the base links nothing above it (dataplane/base/ < dataplane/wire/ < the rest; nm)",
         check_base_links(src, build)),
        ("6. the HTTP server's, the socket server's and the dataplanes' headers only in their "
         f"folder and {', '.join(u + '/' for u in RESTRICTED_USERS)}", check_headers(src)),
        ("7. no configuration file at the root of control/ (control/config/)",
         check_folders(src)),
    ]
    for title, errors in rules:
        print(f"check_layout: {title}")
        for e in errors:
            print(f"  VIOLATION: {e}")
        print("  ok" if not errors else f"  {len(errors)} violation(s)")
    failed = bool(inc_errors or call_errors or not layers_ok or size_errors
                  or any(e for _, e in rules))
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
