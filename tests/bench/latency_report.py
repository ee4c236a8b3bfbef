#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Parsing and the report of tests/bench/latency_bench.sh (python3 standard library only).

Subcommands, each used by latency_bench.sh:

  progs
        `bpftool -j net show dev eth-pod` on stdin -> one JSON object: per hook (xdp, ingress,
        egress) the program's id, name, run_time_ns and run_cnt (kernel.bpf_stats_enabled).
  cell --server S --repeat N --label L --qps Q --list all|hot --kx FILE --probe FILE
       --samples FILE --progs BEFORE AFTER --cpu BEFORE AFTER --window T0 T1 --hz HZ
        one measurement -> one JSON object: kxdpgun's counts, the prober's summary, each
        program's ns per packet over the window, and the CPU time (server process, softirq of
        both CPUs) per answered query.
  paircell --pair P --round N --side pod|probe --server S --iface I --hook H --progs BEFORE
       AFTER --kx FILE
        one cell of the paired cost run (--cost-pairs) -> one JSON object "pair": the program at
        hook H of the node's veth I, its ns per packet over the window, and kxdpgun's counts.
  pairs --results FILE.jsonl --out DIR --date D --machine M --command C --rate Q --duration S
        --hot N [--mode together|alternate]
        the paired cost's table on stdout and in DIR/pairs.txt: per pair and round the server's
        ns per packet and its floor's, their ratio; per placement (the veth the server was on)
        the median ratio, their geometric mean, and issue 35's verdict.
  field RESULTS SERVER REPEAT LABEL DOTTED.KEY
        prints one number of a measurement (an integer), e.g. kx.replies_per_s.
  report --results FILE.jsonl --meta FILE.json --out DIR
        the tables and the verdicts on stdout and in DIR/latency.txt; DIR/latency.csv (one row
        per server, load and figure) and DIR/latency.json (metadata, targets, every figure).

Exit status: 0, or 1 when an input holds nothing usable, 2 on bad usage.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

# Issue 13's targets.
TARGET_NET_NS = 300.0  # ndcache tc's ns/pkt over every name, less the reflector's
TARGET_ALL_HOT = 1.3  # its ns/pkt over every name / over the hot set
TARGET_P99 = 1.2  # prober p99 at TARGET_LOAD, ndcache / reflector
TARGET_P999 = 1.5
TARGET_LOAD = "250000"

# Issue 21's targets: prober p99 and p99.9 at TARGET_LOAD over the floor's, tc and XDP; every name
# over the hot set at most one load from memory.
TARGET21_P99 = 1.3
TARGET21_P999 = 2.0
TARGET21_LOADS = 1.0

# The program that answers (or, for knot-xdp, redirects) for each server, by hook.
ANSWER_HOOK = {
    "reflector": "ingress",
    "ndcache-tc": "ingress",
    "base-tc": "ingress",
    "reflector-xdp": "xdp",
    "reflector-load": "ingress",
    "reflector-load-xdp": "xdp",
    "ndcache-xdp": "xdp",
    "base-xdp": "xdp",
    "knot-xdp": "xdp",
    "answer-reflector": "ingress",
    "answer-reflector-xdp": "xdp",
    "answer-reflector-load": "ingress",
    "answer-reflector-load-xdp": "xdp",
    "answer-reflector-hot4": "ingress",
    "answer-reflector-hot4-xdp": "xdp",
    "answer-reflector-hot8": "ingress",
    "answer-reflector-hot8-xdp": "xdp",
    "answer-reflector-code64": "ingress",
    "answer-reflector-code64-xdp": "xdp",
    "answer-reflector-code128": "ingress",
    "answer-reflector-code128-xdp": "xdp",
}
# User-space caches in front of the upstream, warmed before each prober run (latency_bench.sh).
CACHES = ("dnsdist", "pdns-recursor")
# The floor each in-kernel server is compared with.
FLOOR = {"ndcache-tc": "reflector", "ndcache-xdp": "reflector-xdp", "base-tc": "reflector",
         "base-xdp": "reflector-xdp", "reflector-load": "reflector",
         "reflector-load-xdp": "reflector-xdp", "answer-reflector": "reflector",
         "answer-reflector-xdp": "reflector-xdp", "answer-reflector-load": "reflector",
         "answer-reflector-load-xdp": "reflector-xdp", "answer-reflector-hot4": "reflector",
         "answer-reflector-hot4-xdp": "reflector-xdp", "answer-reflector-hot8": "reflector",
         "answer-reflector-hot8-xdp": "reflector-xdp", "answer-reflector-code64": "reflector",
         "answer-reflector-code64-xdp": "reflector-xdp", "answer-reflector-code128": "reflector",
         "answer-reflector-code128-xdp": "reflector-xdp"}
# The floor that answers (issue 35, tests/bench/bpf/ndc_answer_reflector.bpf.c): parse, resize,
# a constant answer copied in, swap, checksums; what ndcache costs over it is ndcache's own.
ANSWER_FLOOR = {"ndcache-tc": "answer-reflector", "ndcache-xdp": "answer-reflector-xdp",
                "base-tc": "answer-reflector", "base-xdp": "answer-reflector-xdp"}
# The floor that answers from a table (the answer reflector built with NDC_REFLECT_LOAD): the
# answer reflector's work plus one table line per question, what answering every name costs anyone
# with a table; shown beside the answer reflector, not a verdict of its own.
ANSWER_LOAD_FLOOR = {"ndcache-tc": "answer-reflector-load",
                     "ndcache-xdp": "answer-reflector-load-xdp",
                     "base-tc": "answer-reflector-load", "base-xdp": "answer-reflector-load-xdp"}
# Issue 35's targets: program cost on the hot set over the answer reflector's; saturation over
# the answer reflector's; the prober's p99 and p99.9 at TARGET_LOAD over the bare reflector's, as
# the median of the per-repeat ratios of at least TARGET35_REPEATS repeats (issue 35's rule).
TARGET35_COST = 1.3
TARGET35_SAT = 0.9
TARGET35_P99 = 1.3
TARGET35_P999 = 2.0
TARGET35_REPEATS = 3
# The name sets of the saturation run (latency_bench.sh --saturation-names), in report order.
SAT_NAMES = ("hot", "all")
# The reflector that reads one table line per query (tests/bench/bpf/ndc_reflector.bpf.c,
# NDC_REFLECT_LOAD): what every name adds over its hot set is one table load in the same path under the same
# traffic, the floor of what a name adds to the fast path.
LOAD_FLOOR = {"ndcache-tc": "reflector-load", "ndcache-xdp": "reflector-load-xdp",
              "base-tc": "reflector-load", "base-xdp": "reflector-load-xdp"}


def die(msg):
    sys.stderr.write("latency_report: %s\n" % msg)
    sys.exit(1)


# --- progs -------------------------------------------------------------------------------


def cmd_progs(a):
    text = sys.stdin.read().strip()
    out = {}
    if text:
        try:
            net = json.loads(text)
        except ValueError:
            net = []
        for dev in net if isinstance(net, list) else [net]:
            hooks = [("xdp", x) for x in dev.get("xdp", [])]
            for t in dev.get("tc", []):
                kind = t.get("kind", "")
                hooks.append(("ingress" if kind.endswith("ingress") else "egress", t))
            # tcx programs (Debian 12's bpftool predates tcx: the caller asked the kernel)
            for pid in a.tcx_egress or []:
                hooks.append(("egress", {"id": int(pid)}))
            for hook, h in hooks:
                if "id" not in h or hook in out:
                    continue
                p = json.loads(subprocess.check_output(
                    ["bpftool", "-j", "prog", "show", "id", str(h["id"])]))
                out[hook] = {"id": h["id"], "name": p.get("name", ""),
                             "run_time_ns": p.get("run_time_ns", 0),
                             "run_cnt": p.get("run_cnt", 0)}
    print(json.dumps(out, sort_keys=True))
    return 0


# --- cell --------------------------------------------------------------------------------


def parse_kx(path):
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()

    def grab(label, pps=False):
        pat = r"^%s\s*(\d+)" % re.escape(label)
        if pps:
            pat += r"\s*\((\d+) pps\)"
        m = re.search(pat, text, re.M)
        return int(m.group(2 if pps else 1)) if m else None

    kx = {"replies_per_s": grab("total replies:", True), "sent_per_s": grab("total queries:", True),
          "replies": grab("total replies:"), "sent": grab("total queries:"),
          "noerror": grab("responded NOERROR:"), "duration_s": grab("duration:"),
          "reply_bytes": grab("average DNS reply size:")}
    if kx["sent"] is None:
        die("no 'total queries' in kxdpgun output %s: %s" % (path, text[-300:]))
    if kx["replies"] is None:  # kxdpgun prints no reply lines when nothing came back
        kx["replies"] = kx["replies_per_s"] = 0
    kx["answered_pct"] = round(100.0 * kx["replies"] / kx["sent"], 2) if kx["sent"] else None
    return kx


def prog_delta(p0, p1, hook):
    """What the program at HOOK ran between two progs snapshots: {name, runs, run_time_ns,
    ns_pkt}, or None when it is not in both or was replaced in between (another id)."""
    before, after = p0.get(hook), p1.get(hook)
    if not before or not after or before["id"] != after["id"]:
        return None
    runs = after["run_cnt"] - before["run_cnt"]
    ns = after["run_time_ns"] - before["run_time_ns"]
    return {"name": after["name"], "runs": runs, "run_time_ns": ns,
            "ns_pkt": round(ns / runs, 1) if runs > 0 else None}


def cmd_cell(a):
    kx = parse_kx(a.kx)
    probe = None
    if a.probe and os.path.exists(a.probe) and os.path.getsize(a.probe):
        with open(a.probe, encoding="utf-8") as f:
            probe = json.load(f)
        probe["samples"] = a.samples
    p0, p1 = json.loads(a.progs[0]), json.loads(a.progs[1])
    progs = {hook: d for hook, d in ((h, prog_delta(p0, p1, h)) for h in p1) if d}
    c0 = [int(x) for x in a.cpu[0].split()]
    c1 = [int(x) for x in a.cpu[1].split()]
    d = [y - x for x, y in zip(c0, c1)]
    window = float(a.window[1]) - float(a.window[0])
    hz = float(a.hz)
    busy0, tot0, sirq0, busy1, tot1, sirq1, srv = d
    answered = 0.0
    if kx and kx["replies_per_s"]:
        answered += kx["replies_per_s"] * window
    if probe:
        answered += probe["answered"]
    cpu = {"window_s": round(window, 3),
           "busy0_pct": round(100.0 * busy0 / tot0, 1) if tot0 else None,
           "busy1_pct": round(100.0 * busy1 / tot1, 1) if tot1 else None,
           "srv_s": round(srv / hz, 3), "softirq_s": round((sirq0 + sirq1) / hz, 3),
           "answered": int(answered)}
    # Everything the two CPUs did, per answer: the in-kernel paths run in softirq on the sending
    # CPU, partly inside the generator's own send calls, so no finer split is reliable with
    # tick accounting; the reflector's figure in the same run is the floor (generator and path).
    cpu["us_per_q"] = (round((busy0 + busy1) / hz / answered * 1e6, 3) if answered else None)
    cpu["srv_us_per_q"] = (round(srv / hz / answered * 1e6, 3) if answered else None)
    print(json.dumps({"kind": "cell", "server": a.server, "repeat": a.repeat, "label": a.label,
                      "qps": a.qps, "list": a.list, "kx": kx, "probe": probe, "progs": progs,
                      "cpu": cpu}, sort_keys=True))
    return 0


# --- field -------------------------------------------------------------------------------


def load_results(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


# --- pairs ---------------------------------------------------------------------------------


def cmd_paircell(a):
    kx = parse_kx(a.kx)
    p0, p1 = json.loads(a.progs[0]), json.loads(a.progs[1])
    d = prog_delta(p0, p1, a.hook)
    # a program replaced in the window counts no run (as before: prog of the later snapshot)
    after = p1.get(a.hook)
    print(json.dumps({"kind": "pair", "pair": a.pair, "round": int(a.round), "side": a.side,
                      "server": a.server, "iface": a.iface, "hook": a.hook,
                      "prog": after["name"] if after else None,
                      "runs": d["runs"] if d else 0, "ns_pkt": d["ns_pkt"] if d else None,
                      "kx": kx}, sort_keys=True))
    return 0


def cmd_pairs(a):
    results = load_results(a.results)
    rows = [r for r in results if r.get("kind") == "pair"]
    if not rows:
        die("no pair cells in %s" % a.results)
    lines = ["Paired cost (issue 35): ns per packet of each program on the hot set (%s names), "
             "%s at %s QPS, %s s a window"
             % (a.hot, "a kxdpgun in each pod at the same time" if a.mode == "together" else
                "each pod's kxdpgun alone in turn (--pair-mode alternate)", a.rate, a.duration),
             "date: %s; machine: %s" % (a.date, a.machine), "command: %s" % a.command, ""]
    verdicts = []
    for pair in dict.fromkeys(r["pair"] for r in rows):
        control = pair.startswith("control")
        # an experiment floor (answer-reflector-hot8, -code128, ...) against the floor: its
        # cost, no kernel path (no agent) and no verdict
        experiment = pair.startswith("answer-")
        cells = {(r["round"], r["side"]): r for r in rows if r["pair"] == pair}
        # the server's cell: the pair's own name (the control: the pod's veth), the other the floor
        by_place = {}
        for n in sorted({k[0] for k in cells}):
            pod, probe = cells.get((n, "pod")), cells.get((n, "probe"))
            if not pod or not probe:
                lines.append("  round %2d: a side is missing" % n)
                continue
            srv, flo = (pod, probe) if control or pod["server"] == pair else (probe, pod)
            x, y = srv.get("ns_pkt"), flo.get("ns_pkt")
            pct = [(c.get("kx") or {}).get("answered_pct") for c in (srv, flo)]
            place = by_place.setdefault(srv["iface"], {"server": srv["server"],
                                                        "floor": flo["server"],
                                                        "floor_iface": flo["iface"],
                                                        "rows": [], "ratios": [], "short": []})
            ratio = round(x / y, 3) if x and y else None
            if ratio is not None:
                place["ratios"].append(ratio)
            if any(p is None or p < 99.0 for p in pct):
                place["short"].append(n)
            place["rows"].append("  round %2d: %8s ns / %8s ns = %6s   answered %s%% / %s%%"
                                 % (n, x, y, ratio, pct[0], pct[1]))
        meds = []
        short = []
        kernel = {r["iface"]: r.get("answers") for r in results
                  if r.get("kind") == "pairkernel" and r.get("pair") == pair}
        for iface, place in by_place.items():
            lines.append("%s: %s on %s / %s on %s" % (pair, place["server"], iface,
                                                      place["floor"], place["floor_iface"]))
            lines += place["rows"]
            short += place["short"]
            if place["ratios"]:
                med = statistics.median(place["ratios"])
                meds.append(med)
                lines.append("  per-round ratio median %.3f (min %.3f, max %.3f, %d rounds)"
                             % (med, min(place["ratios"]), max(place["ratios"]),
                                len(place["ratios"])))
            if place["short"]:
                lines.append("  rounds where a side answered under 99%% of what was sent: %s"
                             % ", ".join(str(n) for n in place["short"]))
            if not control and not experiment:
                # the server's own kernel answers against what kxdpgun sent it on this veth
                sent = sum((c.get("kx") or {}).get("sent") or 0 for c in rows
                           if c["pair"] == pair and c["iface"] == iface
                           and c["server"] == pair)
                got = kernel.get(iface)
                lines.append("  answered by the server's kernel path: %s of %d sent" % (got, sent))
                if got is None or got < 0.99 * sent:
                    short.append("kernel answers on %s" % iface)
        if not meds:
            lines.append("  no round measured both sides")
            lines.append("")
            continue
        # each placement's median, their geometric mean: what one veth adds to a side is
        # divided out when the server has had each veth for half of the rounds
        fig = math.exp(sum(math.log(m) for m in meds) / len(meds))
        if control:
            lines.append("  what the veths differ by (eth-pod over eth-probe, the same program): "
                         "%.3f" % fig)
        else:
            lines.append("  %s over the floor, geometric mean of the %d placements' medians: "
                         "%.3f" % (pair, len(meds), fig))
            if experiment:
                if short:
                    lines.append("  (not every query answered: rounds %s)"
                                 % ", ".join(str(x) for x in short))
                lines.append("")
                continue
            state = "met" if fig <= TARGET35_COST and not short and len(meds) == 2 else "MISSED"
            why = ""
            if short:
                why = " (not every query answered: %s)" % ", ".join(str(x) for x in short)
            elif len(meds) != 2:
                why = " (one placement only)"
            verdicts.append("issue 35: %s on the hot set <= %.1fx the answer reflector's "
                            "(paired, both placements): %.3f, %s%s" % (pair, TARGET35_COST, fig,
                                                                       state, why))
        lines.append("")
    lines += verdicts
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(a.out, "pairs.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    return 0


def cmd_field(a):
    for r in load_results(a.results):
        if r.get("server") == a.server and str(r.get("repeat")) == a.repeat \
                and r.get("label") == a.label:
            v = r
            for k in a.key.split("."):
                v = v.get(k) if isinstance(v, dict) else None
            print(int(v) if isinstance(v, (int, float)) else "")
            return 0
    print("")
    return 0


# --- report ------------------------------------------------------------------------------


def pooled(files):
    """Latency samples of several prober runs (ns, 'lost' ranked last) -> sorted list."""
    vals = []
    for path in files:
        if not path or not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line == "lost":
                    vals.append(math.inf)
                elif line:
                    vals.append(int(line))
    vals.sort()
    return vals


def rank(vals, pct):
    if not vals:
        return None
    r = max(1, math.ceil(pct / 100.0 * len(vals)))
    return vals[r - 1]


def us(v):
    if v is None:
        return "-"
    if v == math.inf:
        return "lost"
    v /= 1000.0
    return "%.1f" % v if v < 100 else "%.0f" % v


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, f="%.0f"):
    return "-" if v is None else f % v


def load_name(label, qps=None):
    if label == "sat":
        return "sat" if qps is None else "sat %dk" % round(qps / 1000)
    n = int(label)
    return "0" if n == 0 else ("%gk" % (n / 1000) if n % 1000 == 0 else str(n))


def cmd_report(a):
    rows = load_results(a.results)
    with open(a.meta, encoding="utf-8") as f:
        meta = json.load(f)
    cells = {}
    for r in rows:
        if r.get("kind") == "cell":
            cells.setdefault((r["server"], r["label"]), []).append(r)
    servers = [s for s in meta["servers"] if any(k[0] == s for k in cells)]
    loads = meta["loads"]
    out_lines, csv, summary = [], ["server,load,figure,value,unit"], {}

    def say(line=""):
        out_lines.append(line)

    say("ndcache latency and cost benchmark, %s" % meta["date"])
    say("machine: %s; load average before %s, after %s" % (meta["machine"], meta["load_before"],
                                                          meta["load_after"]))
    say("software: %s" % meta["software"])
    say("command: %s" % meta["command"])
    say("%d services (every name a cluster hit, type A), %d repeat(s), %d s per measurement"
        % (meta["services"], meta["repeats"], meta["duration"]))
    say()
    say("1. Latency a pod sees: the prober (one query in flight, %d QPS, CPU 0, kernel receive "
        "timestamps; lost after %d ms)" % (meta["probe_rate"], meta["probe_timeout_ms"]))
    say("   while kxdpgun on CPU 1 sends the background load over every name; us, pooled over "
        "the repeats; 'bg ans': share of the background answered")
    hdr = "   %-20s" % "server"
    for ld in loads:
        hdr += " | %-27s %6s" % ("bg %s: p50/p99/p99.9/max" % load_name(ld), "bg ans")
    say(hdr)
    lat = {}
    for s in servers:
        line = "   %-20s" % s
        for ld in loads:
            cs = cells.get((s, ld), [])
            vals = pooled([(c.get("probe") or {}).get("samples") for c in cs])
            p = {k: rank(vals, q) for k, q in (("p50", 50), ("p99", 99), ("p999", 99.9),
                                                ("max", 100))}
            ans = median([(c.get("kx") or {}).get("answered_pct") for c in cs])
            qps = median([c["qps"] for c in cs])
            wrong = sum((c.get("probe") or {}).get("wrong", 0) for c in cs)
            lat[(s, ld)] = dict(p, n=len(vals), answered_pct=ans, qps=qps, wrong=wrong)
            txt = "/".join(us(p[k]) for k in ("p50", "p99", "p999", "max"))
            if ld == "sat" and qps:
                txt = "%s @%dk" % (txt, round(qps / 1000))
            line += " | %-27s %6s" % (txt, "-" if ans is None else "%.1f%%" % ans)
            for k in ("p50", "p99", "p999", "max"):
                v = p[k]
                csv.append("%s,%s,%s,%s,us" % (s, ld, k, "" if v is None else
                                               ("lost" if v == math.inf else "%.2f" % (v / 1e3))))
            csv.append("%s,%s,bg_answered,%s,%%" % (s, ld, "" if ans is None else ans))
            csv.append("%s,%s,bg_qps,%s,qps" % (s, ld, "" if qps is None else qps))
        say(line)
    caches = [s for s in servers if s in CACHES]
    if caches:
        say("   %s: caches in front of the upstream (the records' TTL, %d s, in their cache); "
            "before each prober run the prober" % (", ".join(caches), meta.get("ttl", 30)))
        say("   asked each of its names once, so their rows are cache hits; the background's "
            "misses (a TTL run out) go to the upstream")
    bad = ["%s at %s: %d" % (s, load_name(ld), v["wrong"]) for (s, ld), v in lat.items()
           if v["wrong"]]
    if bad:
        say("   WRONG answers to the prober: " + "; ".join(bad))

    say()
    say("2. Cost per query, at %d QPS of kxdpgun alone (no prober), over the %d hot names and "
        "over every name" % (meta["cost_rate"], meta["hot"]))
    say("   ns/pkt: run_time_ns / run_cnt of the program that answers (kernel.bpf_stats_enabled"
        "=1; includes its clock reads); +others: all programs on eth-pod")
    say("   per answered query; @max: ns/pkt over every name at kxdpgun's full rate (caches "
        "warmer)")
    say("   CPU us/q: busy time of CPUs 0 and 1 (user, system, irq, softirq: the server, the "
        "generator, the path) per answer, and over")
    say("   the reflector's (the floor: generator and veth path); proc: the server process's own "
        "time per answer; kxdpgun max: replies/s at full rate")
    say("   %-20s %7s %7s %7s %8s %8s %7s %8s %6s %5s | %11s %8s %5s %s" % (
        "server", "ns hot", "ns all", "all/hot", "net all", "+others", "@max", "CPU us/q",
        "net", "proc", "kxdpgun max", "answered", "CPU1", "bound"))
    cost = {}
    for s in servers:
        hook = ANSWER_HOOK.get(s)
        c = {}
        for lab in ("cost-hot", "cost-all"):
            cs = cells.get((s, lab), [])
            c[lab] = median([c2["progs"].get(hook, {}).get("ns_pkt") for c2 in cs]) if hook \
                else None
            c[lab + "-cpu"] = median([c2["cpu"]["us_per_q"] for c2 in cs])
            c[lab + "-proc"] = median([c2["cpu"].get("srv_us_per_q") for c2 in cs])
            tot = []
            for c2 in cs:
                if hook and c2["progs"].get(hook, {}).get("runs"):
                    tot.append(sum(p["run_time_ns"] for p in c2["progs"].values())
                               / c2["progs"][hook]["runs"])
            c[lab + "-allprogs"] = median(tot)
        mx = cells.get((s, "max"), [])
        c["ns_max"] = median([m["progs"].get(hook, {}).get("ns_pkt") for m in mx]) if hook \
            else None
        c["kx"] = median([m["kx"]["replies_per_s"] for m in mx])
        c["kx_ans"] = median([m["kx"]["answered_pct"] for m in mx])
        c["kx_cpu1"] = median([m["cpu"]["busy1_pct"] for m in mx])
        cost[s] = c
    for s in servers:
        c = cost[s]
        floor = cost.get(FLOOR.get(s, ""), {})
        net = (c["cost-all"] - floor["cost-all"]) if c["cost-all"] is not None and \
            floor.get("cost-all") is not None else None
        c["net_all"] = net
        c["all_hot"] = (c["cost-all"] / c["cost-hot"]) if c["cost-all"] and c["cost-hot"] \
            else None
        if c["kx_ans"] is None:
            bound = "-"
        elif c["kx_ans"] >= 99.0:
            bound = "gen" if s in ANSWER_HOOK and s != "knot-xdp" else "gen?"
        else:
            bound = "srv"
        c["bound"] = bound
        base_cpu = cost.get("reflector", {}).get("cost-all-cpu")
        c["cpu_net"] = (c["cost-all-cpu"] - base_cpu) if c["cost-all-cpu"] is not None and \
            base_cpu is not None and s != "reflector" else None
        say("   %-20s %7s %7s %7s %8s %8s %7s %8s %6s %5s | %11s %7s%% %4s%% %s" % (
            s, fmt(c["cost-hot"]), fmt(c["cost-all"]), fmt(c["all_hot"], "%.2f"),
            fmt(net, "%+.0f"), fmt(c["cost-all-allprogs"]), fmt(c["ns_max"]),
            fmt(c["cost-all-cpu"], "%.2f"), fmt(c["cpu_net"], "%+.2f"),
            fmt(c["cost-all-proc"], "%.2f"), fmt(c["kx"]), fmt(c["kx_ans"], "%.1f"),
            fmt(c["kx_cpu1"]), bound))
        for k in ("cost-hot", "cost-all", "net_all", "all_hot", "cost-all-allprogs", "ns_max",
                  "cost-hot-cpu", "cost-all-cpu", "cpu_net", "cost-all-proc", "kx", "kx_ans",
                  "kx_cpu1"):
            csv.append("%s,,%s,%s,%s" % (s, k, "" if c[k] is None else round(c[k], 3),
                                         "ns" if "cost" in k and "cpu" not in k else ""))
    say("   net all: ns all less the floor's (reflector for tc, reflector-xdp for XDP); bound: gen"
        " = every query answered, the generator's CPU (which also runs every in-kernel path)")
    say("   set the pace, so the figure is a lower bound; srv = the server dropped queries; gen? ="
        " every query answered by a server not on CPU 1")

    say()
    say("3. Issue 13's targets (this run)")
    verdicts = []

    def verdict(name, value, target, ok):
        state = "-" if value is None else ("met" if ok else "MISSED")
        verdicts.append({"target": name, "value": value, "limit": target, "state": state})
        say("   %-62s %10s (target %s): %s" % (name, fmt(value, "%.2f"), target, state))

    t = cost.get("ndcache-tc")
    if t:
        v = t["net_all"]
        verdict("ndcache-tc ns/pkt over every name, net of the reflector", v,
                "<= %.0f" % TARGET_NET_NS, v is not None and v <= TARGET_NET_NS)
        v = t["all_hot"]
        verdict("ndcache-tc ns/pkt, every name / hot set", v, "<= %.1f" % TARGET_ALL_HOT,
                v is not None and v <= TARGET_ALL_HOT)
    for s in ("ndcache-tc", "ndcache-xdp"):
        f = FLOOR[s]
        mine, base = lat.get((s, TARGET_LOAD)), lat.get((f, TARGET_LOAD))
        if not mine or not base:
            continue
        for k, lim in (("p99", TARGET_P99), ("p999", TARGET_P999)):
            v = None
            if mine[k] is not None and base[k] and base[k] != math.inf:
                v = mine[k] / base[k]
            verdict("%s prober %s at %s background / %s's" % (
                s, k.replace("p999", "p99.9"), load_name(TARGET_LOAD), f), v, "<= %.1f" % lim,
                v is not None and v <= lim)
    mem = [r for r in rows if r.get("kind") == "memlat"]
    ns4 = median([r["ns_4k"] for r in mem])
    nsh = median([r["ns_huge"] for r in mem if r.get("ns_huge") is not None])
    memory = {"ns_4k": ns4, "ns_huge": nsh, "runs": len(mem)}
    if ns4:
        say()
        say("4. The cost figures against this machine's memory latency (bench_memlat: a pointer "
            "chase through %d MiB on CPU 1, no traffic," % mem[0]["mib"])
        say("   median of %d): one load from memory %s ns with 4 KiB pages, %s ns with huge pages"
            % (len(mem), fmt(ns4), fmt(nsh)))
        for s in ("ndcache-tc", "ndcache-xdp"):
            c = cost.get(s)
            if not c or c["cost-all"] is None or c["cost-hot"] is None:
                continue
            extra = c["cost-all"] - c["cost-hot"]
            allowed = (TARGET_ALL_HOT - 1) * c["cost-hot"]
            memory[s] = {"extra_ns": extra, "extra_loads": extra / ns4,
                         "allowed_ns": allowed, "allowed_loads": allowed / ns4}
            say("   %-14s every name adds %4.0f ns over the hot set = %.2f loads from memory; "
                "%.1fx the hot set allows %3.0f ns = %.2f" % (
                    s, extra, extra / ns4, TARGET_ALL_HOT, allowed, allowed / ns4))
        say("   (a name returns every services/QPS s, by when its slot has been evicted: a table "
            "read from memory adds at least one load)")
        # The same against one table load in the kernel: the load reflector's figures, in total
        # (medians) and within each repeat (server and load reflector of the same repeat).
        def rep_extra(srv):
            per = {}
            for lab in ("cost-hot", "cost-all"):
                for c2 in cells.get((srv, lab), []):
                    v = c2["progs"].get(ANSWER_HOOK.get(srv), {}).get("ns_pkt")
                    if v is not None:
                        per.setdefault(str(c2.get("repeat")), {})[lab] = v
            return {r: d["cost-all"] - d["cost-hot"] for r, d in per.items()
                    if "cost-all" in d and "cost-hot" in d}
        for s in ("reflector-load", "reflector-load-xdp", "ndcache-tc", "ndcache-xdp",
                  "base-tc", "base-xdp"):
            c = cost.get(s)
            if not c or c["cost-all"] is None or c["cost-hot"] is None:
                continue
            extra = c["cost-all"] - c["cost-hot"]
            if s.startswith("reflector-load"):
                memory[s] = {"extra_ns": extra, "extra_loads": extra / ns4}
                say("   %-14s every name adds %4.0f ns over its hot set = %.2f loads from memory:"
                    " one table load in the kernel under this traffic" % (s, extra, extra / ns4))
                continue
            lf = cost.get(LOAD_FLOOR[s])
            if not lf or lf["cost-all"] is None or lf["cost-hot"] is None:
                continue
            lextra = lf["cost-all"] - lf["cost-hot"]
            mine, theirs = rep_extra(s), rep_extra(LOAD_FLOOR[s])
            reps = ["%.2f" % (mine[r] / theirs[r]) for r in sorted(mine)
                    if r in theirs and theirs[r] > 0]
            ratio = extra / lextra if lextra > 0 else None
            memory.setdefault(s, {})["per_table_load"] = ratio
            say("   %-14s every name adds %s the table load of %s (per repeat: %s)" % (
                s, fmt(ratio, "%.2fx"), LOAD_FLOOR[s], " ".join(reps) or "-"))
    # Issue 21's: the pooled ratio decides; beside it the ratio within each repeat (the server
    # and its floor measured minutes apart, so a burst of the shared host's noise in one repeat
    # shows as one outlier) and their median.
    say()
    say("5. Issue 21's targets (this run): pooled over the repeats; in brackets each repeat's "
        "ratio (server and floor of the same repeat) and their median")
    by_rep = {}
    prober_reps = {}
    for (srv, ld), cs in cells.items():
        for c in cs:
            vals = pooled([(c.get("probe") or {}).get("samples")])
            if vals:
                by_rep[(srv, ld, str(c.get("repeat")))] = vals
    for s in ("ndcache-tc", "ndcache-xdp"):
        f = FLOOR[s]
        mine, base = lat.get((s, TARGET_LOAD)), lat.get((f, TARGET_LOAD))
        if not mine or not base:
            continue
        for k, pct, lim in (("p99", 99, TARGET21_P99), ("p999", 99.9, TARGET21_P999)):
            v = None
            if mine[k] is not None and base[k] and base[k] != math.inf:
                v = mine[k] / base[k]
            reps = []
            for rep in sorted({r for (srv, ld, r) in by_rep if srv == s and ld == TARGET_LOAD}):
                x, y = by_rep.get((s, TARGET_LOAD, rep)), by_rep.get((f, TARGET_LOAD, rep))
                if x and y and rank(y, pct) not in (None, math.inf) and rank(x, pct):
                    reps.append(rank(x, pct) / rank(y, pct))
            prober_reps[(s, k)] = reps
            state = "-" if v is None else ("met" if v <= lim else "MISSED")
            verdicts.append({"target": "issue 21: %s %s" % (s, k), "value": v, "limit": lim,
                             "state": state, "per_repeat": reps})
            say("   %-50s %5s (%s; median %s) (target <= %.1f): %s" % (
                "%s prober %s at %s / %s's" % (s, k.replace("p999", "p99.9"),
                                                load_name(TARGET_LOAD), f),
                fmt(v, "%.2f"), " ".join("%.2f" % r for r in reps) or "-",
                fmt(median(reps), "%.2f"), lim, state))
    for s in ("ndcache-tc", "ndcache-xdp"):
        m = memory.get(s)
        if not m:
            continue
        ok = m["extra_loads"] <= TARGET21_LOADS
        verdicts.append({"target": "issue 21: %s loads per name" % s,
                         "value": m["extra_loads"], "limit": TARGET21_LOADS,
                         "state": "met" if ok else "MISSED"})
        say("   %-50s %5.2f (target <= %.0f load over the hot set): %s" % (
            "%s every name, loads from memory" % s, m["extra_loads"], TARGET21_LOADS,
            "met" if ok else "MISSED"))
    floors = floors_section(say, verdicts, csv, rows, cells, servers, cost, lat, loads,
                            prober_reps)
    experiments_section(say, csv, cells, servers)
    summary = {"meta": meta, "targets": verdicts, "memory": memory, "floors": floors,
               "latency": {"%s@%s" % k: {kk: (None if vv == math.inf else vv)
                                         for kk, vv in v.items()} for k, v in lat.items()},
               "cost": cost}
    text = "\n".join(out_lines) + "\n"
    sys.stdout.write(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "latency.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(a.out, "latency.csv"), "w", encoding="utf-8") as f:
        f.write("\n".join(csv) + "\n")
    with open(os.path.join(a.out, "latency.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    return 0


# Issue 35's experiments: the answer reflector reading N more lines of map memory per query
# (NDC_REFLECT_HOT_LINES), or running N more blocks of code (NDC_REFLECT_CODE_BLOCKS): what a line,
# or a block of code (a compare and a taken branch on a line of its own), costs a program under
# this traffic. Each variant: (server, N, what N counts).
EXPERIMENTS = {"answer-reflector": (("answer-reflector-hot4", 4, "lines"),
                                    ("answer-reflector-hot8", 8, "lines"),
                                    ("answer-reflector-code64", 64, "blocks"),
                                    ("answer-reflector-code128", 128, "blocks")),
               "answer-reflector-xdp": (("answer-reflector-hot4-xdp", 4, "lines"),
                                        ("answer-reflector-hot8-xdp", 8, "lines"),
                                        ("answer-reflector-code64-xdp", 64, "blocks"),
                                        ("answer-reflector-code128-xdp", 128, "blocks"))}


def experiments_section(say, csv, cells, servers):
    """Issue 35's experiments: a line's or a block's cost on the hot set, per repeat."""
    rows = []
    for floor, variants in EXPERIMENTS.items():
        hook = ANSWER_HOOK[floor]
        base = {c["repeat"]: c["progs"].get(hook, {}).get("ns_pkt")
                for c in cells.get((floor, "cost-hot"), [])}
        for s, n, unit in variants:
            if s not in servers:
                continue
            mine = {c["repeat"]: c["progs"].get(hook, {}).get("ns_pkt")
                    for c in cells.get((s, "cost-hot"), [])}
            diffs = [mine[k] - base[k] for k in sorted(mine)
                     if k in base and mine[k] is not None and base[k] is not None]
            if diffs:
                rows.append((s, n, unit, floor, diffs))
    if not rows:
        return
    say()
    say("8. Experiments (issue 35): the answer reflector reading N more lines of map memory per "
        "query (each in a page of its own, the")
    say("   same ones for every query of a CPU), or running N more blocks of code (a compare and a "
        "taken branch each, over code never run);")
    say("   ns/pkt on the hot set over the answer reflector's, per repeat, and one line's or "
        "block's share (median)")
    for s, n, unit, floor, diffs in rows:
        d = median(diffs)
        say("   %-28s %3d %-6s: %+6.1f ns over %s (%s), %+5.2f ns each" % (
            s, n, unit, d, floor, " ".join("%+.1f" % x for x in diffs), d / n))
        csv.append("%s,hot,ns_over_%s,%.1f,ns" % (s, floor, d))
        csv.append("%s,hot,ns_each_%s,%.2f,ns" % (s, unit[:-1], d / n))


def floors_section(say, verdicts, csv, rows, cells, servers, cost, lat, loads, prober_reps):
    """Issue 35: saturation, and ndcache against the answer reflector and the bare one.

    prober_reps: (server, "p99" or "p999") -> the prober's per-repeat ratios over the bare
    reflector at TARGET_LOAD (section 5's), whose median issue 35 judges.
    """
    sat = {}
    for r in rows:
        if r.get("kind") == "saturation":
            # before --saturation-names every search was over every name
            sat.setdefault((r["server"], r.get("names", "all")), []).append(r)
    sat_sets = [n for n in SAT_NAMES if any(k[1] == n for k in sat)]
    out = {"saturation": {n: {} for n in sat_sets}, "ratios": {}}
    if sat:
        say()
        say("6. Saturation: the highest kxdpgun load (no prober) of which the server answered at "
            "least 99%, over the hot set and over")
        say("   every name; searched from its kxdpgun maximum, up by half while answered, then "
            "bisecting; a load missed is measured")
        say("   twice; kxdpgun on CPU 1; tc programs on CPU 0 to themselves (RPS), XDP programs on "
            "CPU 1 with kxdpgun; bpf_stats off;")
        say("   median over the repeats")
        for n in sat_sets:
            for s in servers:
                rs = sat.get((s, n))
                if not rs:
                    continue
                q = median([r["qps"] for r in rs])
                out["saturation"][n][s] = q
                at_max = all(r.get("at_max") for r in rs)
                say("   %-22s %-4s %9s QPS%s   (tried %s)" % (
                    s, n, fmt(q), " (none missed: a lower bound)" if at_max else "",
                    "; ".join(r["tried"] for r in rs)))
                csv.append("%s,%s,saturation_qps,%s,qps" % (s, n, "" if q is None else q))
    pairs = [(s, f) for s, f in ANSWER_FLOOR.items() if s in servers]
    if not pairs:
        return out
    say()
    say("7. Against the floors (issue 35): ndcache over the answer reflector (the work any answer "
        "does), over it with a table")
    say("   line read per question (answer-reflector-load: answering every name from a table) and "
        "over the bare reflector")
    say("   (p99 and p99.9 pooled over the repeats; issue 35's prober verdict takes the median of "
        "the repeats' ratios)")
    say("   %-12s %-21s %9s %9s %9s %9s %12s %12s" % ("server", "floor", "ns hot", "ns all",
                                                        "sat. hot", "sat. all",
                                                        "p99 " + load_name(TARGET_LOAD), "p99.9"))
    for s, af in pairs:
        for f in (af, ANSWER_LOAD_FLOOR[s], FLOOR[s]):
            c, fc = cost.get(s, {}), cost.get(f, {})
            if not fc:
                continue
            r = {}
            for k in ("cost-hot", "cost-all"):
                r[k] = c[k] / fc[k] if c.get(k) and fc.get(k) else None
            per_rep = {}
            for n in SAT_NAMES:
                # issue 35: the median of the per-repeat ratios (a server and its floor measured
                # in the same repeat); the ratio of the medians when the repeats do not pair up
                mine = {x["repeat"]: x["qps"] for x in sat.get((s, n), [])}
                theirs = {x["repeat"]: x["qps"] for x in sat.get((f, n), [])}
                per_rep[n] = [(k, mine[k], theirs[k]) for k in sorted(mine)
                              if k in theirs and mine[k] and theirs[k]]
                qs = out["saturation"].get(n, {}).get(s)
                qf = out["saturation"].get(n, {}).get(f)
                r["saturation-" + n] = (median([a / b for _, a, b in per_rep[n]])
                                        if per_rep[n] else (qs / qf if qs and qf else None))
            for k in ("p99", "p999"):
                m, b = lat.get((s, TARGET_LOAD)), lat.get((f, TARGET_LOAD))
                r[k] = m[k] / b[k] if m and b and m[k] not in (None, math.inf) and b[k] and \
                    b[k] != math.inf else None
            out["ratios"]["%s/%s" % (s, f)] = r
            say("   %-12s %-21s %8sx %8sx %8sx %8sx %11sx %11sx" % (
                s, f, fmt(r["cost-hot"], "%.2f"), fmt(r["cost-all"], "%.2f"),
                fmt(r["saturation-hot"], "%.2f"), fmt(r["saturation-all"], "%.2f"),
                fmt(r["p99"], "%.2f"), fmt(r["p999"], "%.2f")))
            for k, v in r.items():
                csv.append("%s,,%s_over_%s,%s,x" % (s, k, f, "" if v is None else round(v, 3)))
            for n in SAT_NAMES:
                if not per_rep[n]:
                    continue
                # at saturation the program's CPU is busy: 1/QPS is a packet's whole time there,
                # with no clock reads around the program; the difference is the server's extra
                extra = median([1e9 / a - 1e9 / b for _, a, b in per_rep[n]])
                say("   %-12s   saturation over %s names per repeat: %s; a packet's time at "
                    "saturation (1/QPS) %+.0f ns over the floor's (median)" % (
                        "", n, " ".join("%.2f" % (a / b) for _, a, b in per_rep[n]), extra))
                csv.append("%s,%s,sat_ns_over_%s,%.1f,ns" % (s, n, f, extra))
            if f != af:
                continue
            v = r["cost-hot"]
            state = "-" if v is None else ("met" if v <= TARGET35_COST else "MISSED")
            verdicts.append({"target": "issue 35: %s ns hot / %s" % (s, f), "value": v,
                             "limit": TARGET35_COST, "state": state})
            say("   %-12s   issue 35: ns/pkt on the hot set <= %.1fx the answer reflector's: %s"
                % ("", TARGET35_COST, state))
            for n in sat_sets:
                if s not in out["saturation"][n] or f not in out["saturation"][n]:
                    continue
                v = r["saturation-" + n]
                state = "-" if v is None else ("met" if v >= TARGET35_SAT else "MISSED")
                verdicts.append({"target": "issue 35: %s saturation (%s names) / %s" % (s, n, f),
                                 "value": v, "limit": TARGET35_SAT, "state": state})
                say("   %-12s   issue 35: saturation over %s names >= %.1fx the answer "
                    "reflector's: %s" % ("", n, TARGET35_SAT, state))
        # the prober, against the bare reflector: the median of the per-repeat ratios (the pooled
        # ratio of the table above lets one repeat's burst of the shared host's noise decide)
        for k, name, lim in (("p99", "p99", TARGET35_P99), ("p999", "p99.9", TARGET35_P999)):
            reps = prober_reps.get((s, k))
            if not reps:
                continue
            v = median(reps) if len(reps) >= TARGET35_REPEATS else None
            state = "-" if v is None else ("met" if v <= lim else "MISSED")
            verdicts.append({"target": "issue 35: %s prober %s at %s / %s" % (
                s, name, load_name(TARGET_LOAD), FLOOR[s]), "value": v, "limit": lim,
                "state": state, "per_repeat": reps})
            say("   %-12s   issue 35: prober %s at %s <= %.1fx the bare reflector's, median of "
                "the repeats' ratios (%s): %s, %s" % (
                    "", name, load_name(TARGET_LOAD), lim, " ".join("%.2f" % x for x in reps),
                    fmt(v, "%.2f"), state if v is not None else
                    "- (%d repeats; the rule wants %d)" % (len(reps), TARGET35_REPEATS)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("progs")
    sp.add_argument("--tcx-egress", nargs="*", default=[],
                    help="ids of the programs attached with tcx to the device's egress")
    c = sub.add_parser("cell")
    for k in ("--server", "--repeat", "--label", "--list", "--kx", "--probe", "--samples",
              "--hz"):
        c.add_argument(k, required=True)
    c.add_argument("--qps", type=int, required=True)
    for k in ("--progs", "--cpu", "--window"):
        c.add_argument(k, nargs=2, required=True)
    pc = sub.add_parser("paircell")
    for k in ("--pair", "--round", "--side", "--server", "--iface", "--hook", "--kx"):
        pc.add_argument(k, required=True)
    pc.add_argument("--progs", nargs=2, required=True)
    ps = sub.add_parser("pairs")
    for k in ("--results", "--out", "--date", "--machine", "--command", "--rate", "--duration",
              "--hot"):
        ps.add_argument(k, required=True)
    ps.add_argument("--mode", choices=("together", "alternate"), default="together")
    f = sub.add_parser("field")
    for k in ("results", "server", "repeat", "label", "key"):
        f.add_argument(k)
    r = sub.add_parser("report")
    for k in ("--results", "--meta", "--out"):
        r.add_argument(k, required=True)
    a = ap.parse_args()
    return {"progs": cmd_progs, "cell": cmd_cell, "paircell": cmd_paircell,
            "pairs": cmd_pairs, "field": cmd_field,
            "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
