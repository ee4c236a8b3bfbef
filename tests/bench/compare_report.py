#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Parsing and aggregation for tests/bench/compare.sh (python3 standard library only).

Subcommands, each used by compare.sh:

  lat FILE --expect hits|ndots|cached|any
        `dnsperf -v` output -> one JSON object: queries sent, answered, lost, unfinished,
        p50/p99/p999 latency in microseconds (nearest rank over answered + lost queries, lost
        ranked last: a percentile that falls on a lost query is null, printed "lost"), the
        achieved QPS from dnsperf's summary, and how many answers had an unexpected RCODE
        (ndots: names under cluster.local must be NXDOMAIN, the rest NOERROR; hits and
        cached: NOERROR; any: not checked, for the reflector, which echoes the query).
        Queries still outstanding when dnsperf stops ("> I") are neither answered nor lost.
  max FILE
        dnsperf summary -> {"qps", "lost_pct", "completed"}.
  kx FILE
        kxdpgun output -> {"replies_per_s", "sent_per_s", "replies", "sent", "noerror",
        "duration_s", "reply_bytes"}.
  report --results FILE.jsonl --meta FILE.json --out DIR
        every measurement of the run (one JSON object per line, written by compare.sh) ->
        medians over the repeats with their min..max spread, the target ratios, a table on
        stdout, DIR/compare.csv, DIR/compare.json and DIR/compare.png (gnuplot).

Exit status: 0, or 1 when an input holds nothing usable, 2 on bad usage.
"""

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

PCTS = (("p50_us", 50.0), ("p99_us", 99.0), ("p999_us", 99.9))
NDCACHE_PREFIX = "ndcache-"
TARGET_KNOT_XDP = 3.5
TARGET_UNBOUND = 7.0
TARGET_REFLECTOR_P99 = 1.2
TARGET_RATE = 40000


def die(msg):
    sys.stderr.write("compare_report: %s\n" % msg)
    sys.exit(1)


def summary_number(text, label):
    m = re.search(r"^\s*%s:\s*([0-9.]+)" % re.escape(label), text, re.M)
    return float(m.group(1)) if m else None


# --- lat ---------------------------------------------------------------------------------


def expected_rcode(expect, name):
    if expect in ("hits", "cached"):
        return "NOERROR"
    if expect == "ndots":
        n = name.rstrip(".").lower()
        return "NXDOMAIN" if n.endswith(".cluster.local") else "NOERROR"
    return None


def nearest_rank(sorted_vals, total, pct):
    rank = max(1, math.ceil(pct / 100.0 * total))
    return sorted_vals[rank - 1] if rank <= len(sorted_vals) else None


def tags(a):
    """--tag key=value pairs, numbers as numbers: merged into the printed object."""
    out = {}
    for t in a.tag or []:
        k, _, v = t.partition("=")
        for conv in (int, float):
            try:
                out[k] = conv(v)
                break
            except ValueError:
                continue
        else:
            out[k] = v
    return out


def emit(obj, a):
    obj.update(tags(a))
    print(json.dumps(obj, sort_keys=True))
    return 0


def cmd_lat(a):
    lat = []
    lost = unfinished = bad = 0
    rcodes = {}
    bad_example = None
    with open(a.file, encoding="utf-8", errors="replace") as f:
        text_tail = []
        for line in f:
            if not line.startswith("> "):
                text_tail.append(line)
                continue
            fields = line.split()
            if len(fields) < 2:
                continue
            if fields[1] == "T":
                lost += 1
                continue
            if fields[1] == "I":
                unfinished += 1
                continue
            if len(fields) < 5:
                continue
            try:
                secs = float(fields[-1])
            except ValueError:
                continue
            lat.append(int(round(secs * 1e6)))
            rc = fields[1]
            rcodes[rc] = rcodes.get(rc, 0) + 1
            want = expected_rcode(a.expect, fields[2])
            if want is not None and rc != want:
                bad += 1
                if bad_example is None:
                    bad_example = "%s %s: %s, expected %s" % (fields[2], fields[3], rc, want)
    total = len(lat) + lost
    if total == 0:
        die("no '> ' query lines in %s (dnsperf -v output expected)" % a.file)
    lat.sort()
    text = "".join(text_tail)
    out = {
        "sent": total + unfinished,
        "answered": len(lat),
        "lost": lost,
        "unfinished": unfinished,
        "lost_pct": round(100.0 * lost / total, 3),
        "qps": summary_number(text, "Queries per second"),
        "rcodes": rcodes,
        "bad_rcode": bad,
        "bad_example": bad_example,
    }
    for key, pct in PCTS:
        out[key] = nearest_rank(lat, total, pct)
    return emit(out, a)


# --- max, kx -----------------------------------------------------------------------------


def cmd_max(a):
    with open(a.file, encoding="utf-8", errors="replace") as f:
        text = f.read()
    qps = summary_number(text, "Queries per second")
    if qps is None:
        die("no 'Queries per second' in %s" % a.file)
    m = re.search(r"^\s*Queries lost:\s*\d+\s*\(([0-9.]+)%\)", text, re.M)
    done = re.search(r"^\s*Queries completed:\s*(\d+)", text, re.M)
    return emit({"qps": qps, "lost_pct": float(m.group(1)) if m else None,
                 "completed": int(done.group(1)) if done else None}, a)


def cmd_kx(a):
    with open(a.file, encoding="utf-8", errors="replace") as f:
        text = f.read()

    def grab(label, pps=False):
        pat = r"^%s\s*(\d+)" % re.escape(label)
        if pps:
            pat += r"\s*\((\d+) pps\)"
        m = re.search(pat, text, re.M)
        if not m:
            return None
        return int(m.group(2 if pps else 1))

    out = {
        "replies_per_s": grab("total replies:", True),
        "sent_per_s": grab("total queries:", True),
        "replies": grab("total replies:"),
        "sent": grab("total queries:"),
        "noerror": grab("responded NOERROR:"),
        "duration_s": grab("duration:"),
        "reply_bytes": grab("average DNS reply size:"),
    }
    if out["sent"] is None:
        die("no 'total queries' in kxdpgun output %s" % a.file)
    if out["replies"] is None:  # kxdpgun prints no reply lines when nothing came back
        out["replies"] = 0
        out["replies_per_s"] = 0
    return emit(out, a)


# --- report ------------------------------------------------------------------------------


def med(vals):
    """Median and (min, max) of a list where None means 'lost' (ranks above every number)."""
    if not vals:
        return None, None, None
    key = [math.inf if v is None else v for v in vals]
    key.sort()
    m = statistics.median(key)
    conv = lambda v: None if v == math.inf else v  # noqa: E731
    return conv(m), conv(key[0]), conv(key[-1])


def fmt_num(v, digits=0):
    if v is None:
        return "lost"
    if digits == 0:
        return "%d" % round(v)
    return "%.*f" % (digits, v)


def fmt_spread(lo, hi, digits=0):
    if lo is None and hi is None:
        return ""
    return "%s..%s" % (fmt_num(lo, digits), fmt_num(hi, digits))


def fmt_k(v):
    if v is None:
        return "-"
    return "%dk" % round(v / 1000.0) if v >= 1000 else "%d" % v


class Run:
    def __init__(self, rows, meta):
        self.meta = meta
        self.servers = meta["servers"]
        self.kx = {}  # server -> [rows]
        self.max = {}  # server -> [rows]
        self.lat = {}  # (server, workload, label) -> [rows]
        self.notes = []
        self.failed = {}  # server -> reason
        for r in rows:
            k = r.get("kind")
            if k == "kx":
                self.kx.setdefault(r["server"], []).append(r)
            elif k == "max":
                self.max.setdefault(r["server"], []).append(r)
            elif k == "lat":
                r["label"] = str(r["label"])
                self.lat.setdefault((r["server"], r["workload"], r["label"]), []).append(r)
            elif k == "note":
                self.notes.append(r)
            elif k == "failed":
                self.failed.setdefault(r["server"], r["reason"])

    def kx_med(self, s):
        return med([r["replies_per_s"] for r in self.kx.get(s, [])])

    def lat_labels(self, workload):
        labels = []
        for s, w, lab in self.lat:
            if w == workload and lab not in labels:
                labels.append(lab)
        return sorted(labels, key=lambda x: (x == "sat", int(x) if x.isdigit() else 0))

    def lat_med(self, s, w, lab, key):
        return med([r[key] for r in self.lat.get((s, w, lab), [])])

    def per_repeat(self, s, pick):
        return {r["repeat"]: pick(r) for r in s}


def ratio(a, b):
    if a is None or b is None or b == 0 or a == math.inf or b == math.inf:
        return None
    return a / b


def targets(run):
    """The issue's three targets, from the medians; each also per repeat for its spread."""
    nd = [s for s in run.servers if s.startswith(NDCACHE_PREFIX) and run.kx.get(s)]
    out = []

    def best_kx():
        best, best_s = None, None
        for s in nd:
            m = run.kx_med(s)[0]
            if m is not None and (best is None or m > best):
                best, best_s = m, s
        return best, best_s

    best, best_s = best_kx()
    for ref, goal in (("knot-xdp", TARGET_KNOT_XDP), ("unbound", TARGET_UNBOUND)):
        refm = run.kx_med(ref)[0] if run.kx.get(ref) else None
        r = ratio(best, refm)
        # per repeat: ndcache's best mode of that repeat over the reference in the same repeat
        reps = []
        for rep in sorted({x["repeat"] for x in run.kx.get(ref, [])}):
            b = max([x["replies_per_s"] for s in nd for x in run.kx[s] if x["repeat"] == rep]
                    or [None], key=lambda v: -1 if v is None else v)
            rr = [x["replies_per_s"] for x in run.kx[ref] if x["repeat"] == rep]
            q = ratio(b, rr[0] if rr else None)
            if q is not None:
                reps.append(q)
        gen_bound = bool(best_s) and all(x["replies"] >= 0.99 * x["sent"]
                                         for x in run.kx[best_s] if x["sent"])
        out.append({
            "target": "max QPS (kxdpgun, cluster hits): ndcache best / %s" % ref,
            "ndcache_mode": best_s, "ndcache": best, "reference": refm, "ratio": r,
            "goal": ">= %.1f" % goal,
            "met": None if r is None else r >= goal,
            "per_repeat": reps,
            "caveat": ("%s answered every query kxdpgun sent: the generator set the pace, so "
                       "the ratio is a lower bound" % best_s) if gen_bound else None,
        })
    # p99 at 40k: the lowest median p99 among ndcache modes vs the reflector
    lab = str(TARGET_RATE)
    best, best_s = None, None
    for s in run.servers:
        if not s.startswith(NDCACHE_PREFIX) or (s, "hits", lab) not in run.lat:
            continue
        m = run.lat_med(s, "hits", lab, "p99_us")[0]
        if m is None:
            continue
        if best is None or m < best:
            best, best_s = m, s
    refm = run.lat_med("reflector", "hits", lab, "p99_us")[0] if (
        "reflector", "hits", lab) in run.lat else None
    r = ratio(best, refm)
    reps = []
    if best_s:
        for x in run.lat.get(("reflector", "hits", lab), []):
            mine = [y["p99_us"] for y in run.lat[(best_s, "hits", lab)]
                    if y["repeat"] == x["repeat"]]
            q = ratio(mine[0] if mine else None, x["p99_us"])
            if q is not None:
                reps.append(q)
    out.append({
        "target": "p99 latency at %d QPS (dnsperf, cluster hits): ndcache best / reflector"
        % TARGET_RATE,
        "ndcache_mode": best_s, "ndcache": best, "reference": refm, "ratio": r,
        "goal": "<= %.1f" % TARGET_REFLECTOR_P99,
        "met": None if r is None else r <= TARGET_REFLECTOR_P99,
        "per_repeat": reps,
        "caveat": None,
    })
    return out


def cpu_per_1k(r, ticks):
    """CPU milliseconds per 1,000 answered queries from clock ticks."""
    hz = r.get("hz", 100)
    return ticks * 1000.0 / hz / r["answered"] * 1000.0


def table(run):
    m = run.meta
    lines = []
    p = lines.append
    p("ndcache comparison benchmark, %s" % m["date"])
    p("machine: %s" % m["machine"])
    p("load: average %s before the run, %s after; %s" % (m["load_before"],
      m.get("load_after", "?"), m.get("load_note", "")))
    p("software: %s" % m["software"])
    p("command: %s" % m["command"])
    p("cluster: %d services (%d headless) in %d namespaces; %d external names; "
      "%d repeat(s) x %d s per measurement; median of the repeats, spread min..max"
      % (m["services"], m["headless"], m["namespaces"], m["ext_names"], m["repeats"],
         m["duration"]))
    p("")
    p("1. Throughput and cost (cluster hits)")
    p("%-14s %9s %17s %9s %7s %5s %9s %7s %11s %11s" % (
        "server", "kxdpgun", "spread", "kx sent", "reply", "bound", "dnsperf", "lost",
        "CPU ms/1k q", "CPU ms/1k q"))
    p("%-14s %9s %17s %9s %7s %5s %9s %7s %11s %11s" % (
        "", "replies/s", "", "/s", "%", "", "max QPS", "%", "process", "+softirq"))
    for s in run.servers:
        if s in run.failed and not run.kx.get(s) and not run.max.get(s):
            p("%-14s %s" % (s, "not measured: " + run.failed[s]))
            continue
        kx = run.kx.get(s, [])
        km, klo, khi = med([r["replies_per_s"] for r in kx]) if kx else (None, None, None)
        ks = med([r["sent_per_s"] for r in kx])[0] if kx else None
        rp = med([100.0 * r["replies"] / r["sent"] if r["sent"] else 0.0 for r in kx])[0] \
            if kx else None
        # Every query answered: the generator, not the server, set the pace.
        bound = "-" if rp is None else ("gen" if rp >= 99.0 else "srv")
        mx = run.max.get(s, [])
        mm = med([r["qps"] for r in mx])[0] if mx else None
        ml = med([r["lost_pct"] for r in mx if r["lost_pct"] is not None])[0] if mx else None
        rows40 = run.lat.get((s, "hits", str(TARGET_RATE)), [])
        proc = med([cpu_per_1k(r, r["srv_ticks"]) for r in rows40 if r.get("answered")])[0]
        tot = med([r["cpu_ms_per_1k"] for r in rows40 if r.get("cpu_ms_per_1k") is not None])[0]
        p("%-14s %9s %17s %9s %7s %5s %9s %7s %11s %11s" % (
            s, fmt_num(km) if kx else "-", fmt_spread(klo, khi) if kx else "",
            fmt_num(ks) if ks is not None else "-",
            fmt_num(rp, 1) if rp is not None else "-", bound,
            fmt_num(mm) if mm is not None else "-",
            fmt_num(ml, 2) if ml is not None else "-",
            fmt_num(proc, 3) if proc is not None else "-",
            fmt_num(tot, 3) if tot is not None else "-"))
    p("   bound: gen = kxdpgun got a reply to every query it sent, so the generator on CPU 1 "
      "set the pace")
    p("   (the figure is a lower bound for that server); srv = the server dropped queries, "
      "the figure is its maximum")
    p("")
    p("2. Latency (dnsperf, per-query latencies in us; 'sat' = %d%% of that server's dnsperf "
      "max in the same repeat)" % m["sat_pct"])
    p("%-14s %-7s %7s %9s %8s %8s %9s %16s %7s %5s" % (
        "server", "load", "rate", "achieved", "p50", "p99", "p99.9", "p99 spread", "lost %",
        "bad"))
    for w, title in (("hits", "cluster hits"), ("ndots", "ndots:5 mix"),
                     ("cached", "external, cached")):
        labels = run.lat_labels(w)
        if not labels:
            continue
        p("-- %s" % title)
        for s in run.servers:
            for lab in labels:
                rows = run.lat.get((s, w, lab))
                if not rows:
                    continue
                rate = med([r["rate"] for r in rows])[0]
                ach = med([r["qps"] for r in rows if r["qps"] is not None])[0]
                p50 = med([r["p50_us"] for r in rows])[0]
                p99, lo, hi = med([r["p99_us"] for r in rows])
                p999 = med([r["p999_us"] for r in rows])[0]
                lost = med([r["lost_pct"] for r in rows])[0]
                bad = sum(r["bad_rcode"] for r in rows)
                p("%-14s %-7s %7s %9s %8s %8s %9s %16s %7s %5d" % (
                    s, lab if lab == "sat" else fmt_k(int(lab)), fmt_num(rate),
                    fmt_num(ach) if ach is not None else "-", fmt_num(p50), fmt_num(p99),
                    fmt_num(p999), fmt_spread(lo, hi), fmt_num(lost, 2), bad))
    p("")
    p("3. Issue 5's ratios (medians of this run; per-repeat ratios in brackets). Its goals are")
    p("   retired (issue 13): on 2 CPUs the generator's CPU also runs every in-kernel path, and")
    p("   dnsperf's p99 is its own queueing; tests/bench/latency_bench.sh measures cost per")
    p("   packet and latency instead")
    for t in run.targets:
        verdict = "n/a" if t["met"] is None else ("would be met" if t["met"] else "not met")
        reps = ", ".join("%.2f" % x for x in t["per_repeat"])
        p("   %s: %s (%s: %s vs %s) goal %s: %s%s" % (
            t["target"], "n/a" if t["ratio"] is None else "%.2f" % t["ratio"],
            t["ndcache_mode"] or "-", fmt_num(t["ndcache"]) if t["ndcache"] is not None
            else "-", fmt_num(t["reference"]) if t["reference"] is not None else "-",
            t["goal"], verdict, " [%s]" % reps if reps else ""))
        if t.get("caveat"):
            p("      (%s)" % t["caveat"])
        if t["ratio"] is None:
            p("      (n/a: a server it needs was not measured in this run)")
    notes = []
    for n in run.notes:
        if n["text"] not in notes:
            notes.append(n["text"])
    for s, reason in run.failed.items():
        notes.append("%s: %s" % (s, reason))
    if notes:
        p("")
        p("Notes")
        for n in notes:
            p("  - %s" % n)
    return "\n".join(lines) + "\n"


def write_csv(run, path):
    cols = ["server", "kind", "workload", "label", "metric", "median", "min", "max", "repeats"]
    out = [",".join(cols)]

    def row(s, kind, w, lab, metric, vals):
        mm, lo, hi = med(vals)
        f = lambda v: "lost" if v is None else ("%g" % v)  # noqa: E731
        out.append(",".join([s, kind, w, lab, metric, f(mm), f(lo), f(hi), str(len(vals))]))

    for s in run.servers:
        if run.kx.get(s):
            row(s, "kxdpgun", "hits", "max", "replies_per_s",
                [r["replies_per_s"] for r in run.kx[s]])
        if run.max.get(s):
            row(s, "dnsperf", "hits", "max", "qps", [r["qps"] for r in run.max[s]])
        for (srv, w, lab), rows in sorted(run.lat.items()):
            if srv != s:
                continue
            for metric in ("rate", "qps", "p50_us", "p99_us", "p999_us", "lost_pct",
                           "cpu_ms_per_1k"):
                vals = [r.get(metric) for r in rows]
                if metric == "cpu_ms_per_1k" and all(v is None for v in vals):
                    continue
                row(s, "dnsperf", w, lab, metric, vals)
    for t in run.targets:
        out.append(",".join(['"%s"' % t["target"], "target", "", "", "ratio",
                             "" if t["ratio"] is None else "%.4f" % t["ratio"], "", "",
                             str(len(t["per_repeat"]))]))
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(out) + "\n")


def plot(run, out_dir):
    """Latency percentiles against offered load, cluster hits, one line per server."""
    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot not found: no PNG"
    servers = [s for s in run.servers if any((s, "hits", lab) in run.lat
                                             for lab in run.lat_labels("hits"))]
    if not servers:
        return "nothing to plot"
    dat = os.path.join(out_dir, "compare-plot.dat")
    with open(dat, "w", encoding="ascii") as f:
        for s in servers:
            f.write("# %s\n" % s)
            pts = []
            for lab in run.lat_labels("hits"):
                rows = run.lat.get((s, "hits", lab))
                if not rows:
                    continue
                rate = med([r["rate"] for r in rows])[0]
                vals = []
                for key, _ in PCTS:
                    mm, lo, hi = med([r[key] for r in rows])
                    vals += [mm, lo, hi]
                pts.append((rate, vals))
            pts.sort()
            for rate, vals in pts:
                f.write("%g %s\n" % (rate, " ".join("NaN" if v is None else "%g" % v
                                                    for v in vals)))
            f.write("\n\n")
    png = os.path.join(out_dir, "compare.png")
    script = [
        "set terminal pngcairo size 1500,520 font 'sans,9'",
        "set output '%s'" % png,
        "set multiplot layout 1,3 title 'cluster hits: latency against offered load "
        "(median of %d repeats, bars min..max) - %s'" % (run.meta["repeats"],
                                                          run.meta["date"]),
        "set logscale y", "set logscale x", "set grid",
        "set xlabel 'offered QPS'", "set ylabel 'latency (us)'",
        "set key top left font 'sans,8'",
    ]
    for i, (key, pct) in enumerate(PCTS):
        col = 2 + 3 * i
        script.append("set title 'p%s'" % ("%g" % pct))
        script.append("plot " + ", ".join(
            "'%s' index %d using 1:%d:%d:%d with yerrorlines title '%s'" % (
                dat, j, col, col + 1, col + 2, s) for j, s in enumerate(servers)))
    script.append("unset multiplot")
    r = subprocess.run([gp], input="\n".join(script) + "\n", text=True,
                       capture_output=True, check=False)
    if r.returncode != 0 or not os.path.exists(png):
        return "gnuplot failed: %s" % r.stderr.strip()[:300]
    return None


def cmd_report(a):
    rows = []
    with open(a.results, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    with open(a.meta, encoding="utf-8") as f:
        meta = json.load(f)
    if not rows:
        die("no measurements in %s" % a.results)
    run = Run(rows, meta)
    run.targets = targets(run)
    os.makedirs(a.out, exist_ok=True)
    err = plot(run, a.out)
    if err:
        run.notes.append({"text": "plot: " + err})
    text = table(run)
    sys.stdout.write(text)
    with open(os.path.join(a.out, "compare.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    write_csv(run, os.path.join(a.out, "compare.csv"))
    with open(os.path.join(a.out, "compare.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "targets": run.targets, "measurements": rows}, f, indent=1)
        f.write("\n")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("lat", "max", "kx"):
        s = sub.add_parser(name)
        s.add_argument("file")
        s.add_argument("--tag", action="append", help="key=value added to the output")
        if name == "lat":
            s.add_argument("--expect", choices=("hits", "ndots", "cached", "any"),
                           required=True)
    s = sub.add_parser("report")
    s.add_argument("--results", required=True)
    s.add_argument("--meta", required=True)
    s.add_argument("--out", required=True)
    a = p.parse_args(argv)
    return {"lat": cmd_lat, "max": cmd_max, "kx": cmd_kx, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
