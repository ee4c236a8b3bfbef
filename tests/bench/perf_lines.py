#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A per-source-line profile of a JITed BPF program from `perf record -e cpu-clock` samples.

perf annotate cannot disassemble BPF here (perf 6.1 without libopcode) and the VM has no PMU, so
this pairs the samples' addresses (perf script) with the program's jited_line_info (printed by
tests/bench_prog_lines while the program is loaded): each sample counts for the source line whose
JITed code it fell in. Run it while the program is still loaded, e.g.:

  ninja -C build tests/bench_testrun tests/bench_prog_lines  # not built by a plain build
  taskset -c 1 build/tests/bench_testrun 100000000 tc_a_hit_many & pid=$!
  sleep 1; perf record -e cpu-clock -F 20000 -p $pid -o perf.data -- sleep 4
  tests/bench/perf_lines.py perf.data ndc_tc_ingress --lines build/tests/bench_prog_lines
  kill $pid

Prints the code the program ran (its distinct sampled addresses and the 64-byte lines of JITed
code they fall in: with `--lines` omitted, only that, and no loaded program is needed), then the
shares of the symbols sampled (the program, the kernel functions it calls, the rest) and of the
program's source lines. Standard library only; needs perf and bpftool.
Exit status: 0, 1 when no loaded program of that name holds the samples, 2 on bad usage.
"""

import argparse
import bisect
import collections
import json
import os
import subprocess
import sys

SRC_DIRS = ("bpf", "include/ndc")


def samples(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2:
            yield int(f[0], 16), f[1]


def source_line(root, loc):
    fn, _, ln = loc.rpartition(":")
    for d in SRC_DIRS:
        try:
            with open(os.path.join(root, d, fn), encoding="utf-8") as f:
                return f.read().split("\n")[int(ln) - 1].strip()
        except (OSError, IndexError, ValueError):
            continue
    return ""


def lines_of(tool, prog_id):
    """The program's functions' JITed ranges [(start, len)] and its line records, by address."""
    out = subprocess.run([tool, str(prog_id)], capture_output=True, text=True).stdout
    heads, recs = [], []
    for line in out.splitlines():
        if line.startswith("# ksym"):
            f = line.split()
            heads.append((int(f[2], 16), int(f[4])))
            continue
        addr, loc, text = (line.split("\t") + ["", ""])[:3]
        recs.append((int(addr, 16), loc, text.strip()))
    return heads, sorted(recs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="perf.data")
    ap.add_argument("prog", help="program name, e.g. ndc_tc_ingress")
    ap.add_argument("--lines", help="the bench_prog_lines binary (without it: only the code "
                    "touched, which needs no loaded program)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--funcs", default="", help="the program's BPF-to-BPF callees whose samples "
                    "count as its own, comma-separated (e.g. ndc_express_skb: JITed apart, each "
                    "under a symbol of its own)")
    a = ap.parse_args()
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

    smp = list(samples(a.data))
    names = [a.prog] + [f for f in a.funcs.split(",") if f]
    mine = [(ip, sym) for ip, sym in smp
            if sym.startswith("bpf_prog_") and any(sym.endswith("_" + n) for n in names)]
    ips = [ip for ip, _ in mine]
    if ips:
        # The code a run goes through: the program's distinct sampled addresses and the 64-byte
        # lines of JITed code they fall in (a run's path through the program, given enough
        # samples: each instruction it runs is sampled in proportion to its time); the span is
        # summed over the functions sampled, each JITed apart.
        code = collections.Counter(ip >> 6 for ip in ips)
        spans = collections.defaultdict(list)
        for ip, sym in mine:
            spans[sym].append(ip)
        print("%s: %d samples at %d distinct addresses in %d lines of code (64 bytes; %d with 5 "
              "samples or more), spanning %d bytes in %d function(s)" % (
                  "+".join(names), len(ips), len(set(ips)), len(code),
                  sum(1 for c in code.values() if c >= 5),
                  sum(max(v) - min(v) + 1 for v in spans.values()), len(spans)))
    if not a.lines:
        return 0 if ips else 1
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    best = None
    for p in progs:
        if p.get("name") != a.prog:
            continue
        heads, recs = lines_of(a.lines, p["id"])
        if heads and recs:
            hits = sum(1 for ip in ips if any(h[0] <= ip < h[0] + h[1] for h in heads))
            if hits and (best is None or hits > best[0]):
                best = (hits, p["id"], recs)
    if best is None:
        sys.stderr.write("perf_lines: no loaded %s holds the samples\n" % a.prog)
        return 1
    _, prog_id, recs = best
    addrs = [r[0] for r in recs]
    by_sym = collections.Counter(sym for _, sym in smp)
    by_line = collections.Counter()
    for ip in ips:
        i = bisect.bisect_right(addrs, ip) - 1
        if i >= 0:
            by_line[recs[i][1]] += 1
    total = len(smp)
    print("%d samples; %s (id %d): %d (%.1f%%)" % (total, a.prog, prog_id, len(ips),
                                                   100.0 * len(ips) / max(total, 1)))
    for sym, c in by_sym.most_common(12):
        print("  %5.1f%%  %s" % (100.0 * c / total, sym))
    print("-- source lines of %s, share of its own samples" % a.prog)
    for loc, c in by_line.most_common(a.top):
        print("  %5.1f%%  %-24s %s" % (100.0 * c / max(len(ips), 1), loc,
                                      source_line(root, loc)[:80]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
