#!/usr/bin/env bash
# Where each nanosecond of a hit goes (issue 35): the fast path's program cost through
# BPF_PROG_TEST_RUN (tests/bench_testrun) for builds that stop after each step of the hit path
# (tests/bench/steps/NN_step.txt: the product's files with an early pass planted, built by
# tests/planted/plant.py; the product itself is the last row), beside the bare reflector and the
# answer reflector (tests/bench/bpf/), tc and XDP, on the benchmark's hit (kubernetes.default A,
# no OPT), and the tc egress program on the hit's reply with fail-open on (as the agent runs it).
#
# Each build runs --runs single test runs per round, every build once per round, --rounds
# rounds (interleaved, so a burst of the shared host's noise hits one round of every row rather
# than every round of one); the table is the median over the rounds, less the empty program's
# (the reflector given a TCP packet: the kernel's clock reads around each run), and each step's
# difference to the row above it (or to the row its spec names: "# base: NN_step", where the
# memo-off rows of a name outside the memo branch off). Pinned to CPU 1. Every stop is in the
# express lane (ndc_express), which answers the hit: the memo's rows stop only on a memo hit (the
# first run reads the table and fills the memo), the memo-off rows (03-05) stop in the lane's
# table read (express_get) or after its whole answer. The meson tests steps_plant_* check that
# every spec still applies.
#
# Usage: tests/bench/steps_bench.sh [--build DIR] [--runs N] [--rounds N] [--clients on|off]
#                                    [--cold KIB] [--cold-code KIB] [--out DIR]
#   --build DIR   meson build dir (default build-lat; set up with -Dbpf=enabled if missing)
#   --clients     per-client counting in every ndcache build (log.clients; default off, as in
#                 the figures before ABI 11; the agent's default is on)
#   --runs N      single test runs per build and round (default 100000)
#   --rounds N    rounds (default 5)
#   --cold KIB    before every run, KIB KiB of memory written (bench_testrun's NDC_BENCH_COLD_KIB):
#                 each run finds its lines evicted, as a packet does under traffic; the figures
#                 are then medians of single runs (default 0: warm, means)
#   --cold-code KIB  before every run, KIB KiB of code run, a taken jump per 64 bytes
#                 (bench_testrun's NDC_BENCH_COLD_CODE_KIB, x86-64): each run finds its program's
#                 code lines and branch history evicted; medians of single runs (default 0: off)
#   --out DIR     results (default BUILD/steps): steps.txt, steps.json, raw.txt
# Needs root (BPF). Exit 0 when the table was printed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="tests/bench/steps_bench.sh${*:+ $*}"
BENCH_NAME=steps_bench # read by lib.sh
# shellcheck source=lib.sh
. "$here/lib.sh"

build="$root/build-lat"
runs=100000
rounds=5
clients=off
cold=0
cold_code=0
out=""
while [ $# -gt 0 ]; do
	case "$1" in -h | --help) usage 0 ;; esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--build) build=$2 ;;
	--runs) runs=$2 ;;
	--rounds) rounds=$2 ;;
	--clients) clients=$2 ;;
	--cold) cold=$2 ;;
	--cold-code) cold_code=$2 ;;
	--out) out=$2 ;;
	*) echo "steps_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
{ is_uint "$runs" && [ "$runs" -le 10000000 ]; } || die "--runs: 1..10000000"
{ is_uint "$rounds" && [ "$rounds" -le 50 ]; } || die "--rounds: 1..50"
{ is_uint0 "$cold" && [ "$cold" -le 1048576 ]; } || die "--cold: 0..1048576 (KiB)"
{ is_uint0 "$cold_code" && [ "$cold_code" -le 65536 ]; } || die "--cold-code: 0..65536 (KiB)"
case "$clients" in on) cl=1 ;; off) cl=0 ;; *) die "--clients: on or off" ;; esac
[ "$(id -u)" = 0 ] || die "needs root (BPF_PROG_TEST_RUN)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -n "$out" ] || out="$build/steps"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

steps=()
for f in "$here"/steps/[0-9][0-9]_*.txt; do
	steps+=("$(basename "$f" .txt)")
done
[ ${#steps[@]} -gt 0 ] || die "no step specs in $here/steps"
targets=(tests/bench_testrun tests/bench/bpf/ndc_answer_reflector.bpf.o)
for s in "${steps[@]}"; do targets+=("tests/bench/steps/step_$s.bpf.o"); done
bench_build "$build" "$out" "${targets[@]}"
testrun="$build/tests/bench_testrun"
aref="$build/tests/bench/bpf/ndc_answer_reflector.bpf.o"
raw="$out/raw.txt"
: >"$raw"

# one ROW FILTER [ENV...]: a bench_testrun run of one filter, its "name value" lines as
# "round row name value" in raw.txt. N=1: one name besides the hit (the many-names cases unused).
one() {
	local round=$1 row=$2 filter=$3 lines
	shift 3
	lines=$(env NDC_BENCH_COLD_KIB="$cold" NDC_BENCH_COLD_CODE_KIB="$cold_code" "$@" \
		taskset -c 1 "$testrun" "$runs" "$filter" 1) ||
		die "bench_testrun failed for $row: $lines"
	while read -r name value; do
		echo "$round $row $name $value" >>"$raw"
	done <<<"$lines"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "steps_bench: ${#steps[@]} step builds + 4 rows, $rounds round(s) of $runs runs" >&2
for ((r = 1; r <= rounds; r++)); do
	one "$r" overhead overhead
	one "$r" reflectors reflector_ns NDC_BENCH_ANSWER_REFLECTOR="$aref"
	for s in "${steps[@]}"; do
		one "$r" "$s" a_hit_ns NDC_BENCH_OBJECT="$build/tests/bench/steps/step_$s.bpf.o" \
			NDC_BENCH_ANY_VERDICT=1 NDC_BENCH_CLIENTS=$cl
	done
	one "$r" 14_product a_hit_ns NDC_BENCH_CLIENTS=$cl
	one "$r" egress egress NDC_BENCH_FAILOPEN=1
	echo "steps_bench: round $r of $rounds done" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)

python3 - "$raw" "$out" <<EOF || die "the report failed"
import json, os, statistics, sys

raw, out = sys.argv[1], sys.argv[2]
vals = {}
for line in open(raw, encoding="utf-8"):
    rnd, row, name, value = line.split()
    vals.setdefault((row, name), []).append(float(value))
med = {k: statistics.median(v) for k, v in vals.items()}
spread = {k: (min(v), max(v)) for k, v in vals.items()}
steps = "${steps[*]}".split() + ["14_product"]
what, base = {}, {}
for s in steps[:-1]:
    with open(os.path.join("$here/steps", s + ".txt"), encoding="utf-8") as f:
        lines = [l[2:].strip() for l in f if l.startswith("# ")]
    # "# base: NN_step": the row this step's difference is taken to (default: the row above)
    for l in lines:
        if l.startswith("base: "):
            base[s] = l[len("base: "):].strip()
    # the spec's first comment lines: "... stopping after" / what / ";"
    text = " ".join(lines[:2]).split("stopping after", 1)[-1].split(";")[0].strip()
    what[s] = text
what["14_product"] = "the product: the answer counted and sent (tc bpf_redirect; XDP_TX)"
ov = {h: med.get(("overhead", h + "_overhead_ns")) for h in ("tc", "xdp")}
L = []
say = L.append
say("Per-step cost of a hit (BPF_PROG_TEST_RUN, ns per run less the empty program's), %s" % "$started")
say("machine: $(nproc) CPUs ($cpu_model), kernel $(uname -r); load average before $load_before, after $load_after")
say("command: $cmdline ($runs runs per build and round, median of $rounds rounds; pinned to CPU 1; per-client counting $clients)")
if $cold:
    say("cold: $cold KiB written before every run (its lines evicted, as under traffic); each figure the median of single runs")
if $cold_code:
    say("cold code: $cold_code KiB of code run before every run (a taken jump per 64 bytes: the program's code lines and branch history evicted); each figure the median of single runs")
say("empty program (the kernel's clock reads around a run, subtracted below): tc %.1f, XDP %.1f ns"
    % (ov["tc"], ov["xdp"]))
say("")
say("| %-40s | %7s | %7s | %7s | %7s |" % ("build (stops after the step)", "tc ns", "+step", "XDP ns",
                                          "+step"))
say("|%s|%s|%s|%s|%s|" % ("-" * 42, "-" * 9, "-" * 9, "-" * 9, "-" * 9))
rows = []
def net(row, name, hook):
    v = med.get((row, name))
    return None if v is None or ov[hook] is None else v - ov[hook]
def f(v, fmt="%7.1f"):
    return "%7s" % "-" if v is None else fmt % v
refl = {h: net("reflectors", h + "_reflector_ns", h) for h in ("tc", "xdp")}
aref = {h: net("reflectors", h + "_answer_reflector_ns", h) for h in ("tc", "xdp")}
say("| %-40s | %s | %7s | %s | %7s |" % ("bare reflector (swap, send back)", f(refl["tc"]), "",
                                          f(refl["xdp"]), ""))
say("| %-40s | %s | %7s | %s | %7s |" % ("answer reflector (the floor that answers)",
                                          f(aref["tc"]), "", f(aref["xdp"]), ""))
prev = {"tc": 0.0, "xdp": 0.0}
seen = {}
for s in steps:
    t, x = net(s, "tc_a_hit_ns", "tc"), net(s, "xdp_a_hit_ns", "xdp")
    if s in base:
        if base[s] not in seen:
            sys.exit("steps_bench: %s's base %s is not a row above it" % (s, base[s]))
        prev = seen[base[s]]
    dt = None if t is None else t - prev["tc"]
    dx = None if x is None else x - prev["xdp"]
    rows.append({"step": s, "what": what[s], "tc_ns": t, "tc_step": dt, "xdp_ns": x, "xdp_step": dx,
                 "tc_range": spread.get((s, "tc_a_hit_ns")), "xdp_range": spread.get((s, "xdp_a_hit_ns"))})
    say("| %-40s | %s | %s | %s | %s |" % (s, f(t), f(dt, "%+7.1f"), f(x), f(dx, "%+7.1f")))
    prev = {"tc": t if t is not None else prev["tc"], "xdp": x if x is not None else prev["xdp"]}
    seen[s] = prev
eg = net("egress", "tc_egress_reply_ns", "tc")
say("| %-40s | %s | %7s | %7s | %7s |" % ("tc egress program on the reply (fail-open)", f(eg), "",
                                          "-", ""))
say("")
say("Steps (each build stops after its step, with every step above it done):")
for r in rows:
    say("  %-11s %s" % (r["step"], r["what"]))
text = "\n".join(L) + "\n"
sys.stdout.write(text)
with open(os.path.join(out, "steps.txt"), "w", encoding="utf-8") as fo:
    fo.write(text)
with open(os.path.join(out, "steps.json"), "w", encoding="utf-8") as fo:
    json.dump({"overhead": ov, "reflector": refl, "answer_reflector": aref, "steps": rows,
               "egress_tc": eg, "medians": {"%s %s" % k: v for k, v in med.items()}}, fo, indent=1)
EOF
echo "steps_bench: results in $out/steps.txt, steps.json, raw.txt" >&2
exit 0
