#!/usr/bin/env bash
# Chaos benchmark (issue 10): the events of tests/integration/test_chaos.sh (kill -9 and a new
# agent 2 s later; the overlap upgrade; 10 s without an agent; the upstream killed and restarted;
# malformed datagrams) under a heavier prober, 5,000 queries/s, with longer steady states (about
# 100 s per mode), and per mode a table: event, queries sent, lost (late: answered after the 1 s
# timeout), wrong, SERVFAIL, and the longest gap in ms (the longest time in which every query of
# one kind failed, bounded by good answers; per kind: cluster/cached/fresh names).
#
# Usage: tests/bench/chaos_bench.sh [--qps N] [--steady S] [--garbage N] [--modes "tc socket"]
#                                   [--build DIR] [--out DIR]
#   --qps N        prober rate (default 5000)
#   --steady S     seconds of steady state before and after each event (default 6)
#   --garbage N    malformed datagrams in the garbage event (default 20000, at 4000/s)
#   --modes LIST   dataplane modes, run one after the other (default "tc socket"; also xdp)
#   --build DIR    build dir holding control/ndcache, used as it is; without it build-chaos is
#                  set up (release, -Dbpf=enabled) and control/ndcache built there
#   --out DIR      where each mode's log and the prober's JSON lines go (default BUILD/chaos_bench)
# Needs root (network namespaces, BPF). A benchmark: it prints figures and does not judge them
# (test_chaos.sh's verdicts, in each mode's log, are ignored); exit 0 when every mode ran to
# the end, 1 when one could not run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

qps=5000
steady=6
garbage=20000
modes="tc socket"
build=""
out=""

BENCH_NAME=chaos_bench
# shellcheck source=lib.sh
. "$here/lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--qps) qps=${2:-}; shift 2 ;;
	--steady) steady=${2:-}; shift 2 ;;
	--garbage) garbage=${2:-}; shift 2 ;;
	--modes) modes=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	--out) out=${2:-}; shift 2 ;;
	*) echo "chaos_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
done
is_uint "$qps" || die "--qps: a positive integer (queries per second)"
is_uint "$steady" || die "--steady: a positive integer (seconds)"
is_uint "$garbage" || die "--garbage: a positive integer (datagrams)"
for m in $modes; do
	case $m in
	tc | socket | xdp) ;;
	*) die "--modes: tc, socket or xdp, got '$m'" ;;
	esac
done
[ -n "$modes" ] || die "--modes: at least one mode"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF)"

"$root/deploy/deps.sh" test || die "deploy/deps.sh test failed"
if [ -z "$build" ]; then
	build="$root/build-chaos"
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" --buildtype=release -Dbpf=enabled >/dev/null ||
			die "meson setup $build --buildtype=release -Dbpf=enabled failed"
	fi
	ninja -C "$build" control/ndcache >"$build/chaos_bench-build.log" 2>&1 || {
		tail -20 "$build/chaos_bench-build.log" >&2
		die "building control/ndcache failed (log: $build/chaos_bench-build.log)"
	}
fi
build=$(cd "$build" && pwd) || die "no build dir $build"
[ -x "$build/control/ndcache" ] || die "no binary at $build/control/ndcache"
[ -n "$out" ] || out="$build/chaos_bench"
mkdir -p "$out" || die "cannot create $out"

# The source tree is taken to be the build dir's parent (build dirs live in their trees).
rev=$(git -C "$(dirname "$build")" describe --always --dirty 2>/dev/null || echo "unknown")
echo "chaos_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), binary $build/control/ndcache" \
	"(tree at $rev), $qps queries/s," \
	"${steady} s steady state around each event, load average $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
for m in $modes; do
	log="$out/$m.log"
	json="$out/$m.json"
	rm -f "$json"
	echo "chaos_bench: $m mode (log: $log)"
	CHAOS_QPS=$qps CHAOS_STEADY=$steady CHAOS_GARBAGE=$garbage CHAOS_RESULTS=$json \
		"$root/tests/integration/test_chaos.sh" "$build" "$m" >"$log" 2>&1
	if [ ! -s "$json" ]; then
		echo "chaos_bench: $m: the run did not finish; the end of its log:" >&2
		tail -20 "$log" >&2
		failed=1
		continue
	fi
	python3 - "$m" "$json" <<'EOF'
import json, sys
mode, path = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path)]
total = rows[-1]
print("\n%s mode: %.0f queries/s achieved of %d (longest send lag %.0f ms, %d not sent)" % (
    mode, total["rate_achieved"], total["rate_target"], total["max_send_lag_ms"], total["unsent"]))
# "in agent": lost at kill -9, sent in the 100 ms before the kill completed: inside the killed
# process (prober.py INPROC_S); not in "lost".
fmt = "| %-20s | %8s | %7s | %8s | %6s | %6s | %8s | %13s | %-24s |"
print(fmt % ("event", "sent", "lost", "in agent", "late", "wrong", "SERVFAIL", "longest gap ms",
             "gap ms cluster/cached/fresh"))
print("|" + "|".join("-" * (w + 2) for w in (20, 8, 7, 8, 6, 6, 8, 13, 24)) + "|")
for r in rows[:-1]:
    k = r["kinds"]
    print(fmt % (r["event"], r["sent"], r["lost"], r.get("inproc", 0), r["late"], r["wrong"],
                 r["servfail"], "%.0f" % r["gap_ms"],
                 "/".join("%.0f" % k[n]["gap_ms"] for n in ("cluster", "cached", "fresh"))))
print(fmt % ("total", total["sent"], total["lost"], sum(r.get("inproc", 0) for r in rows[:-1]),
             "", total["wrong"], total["servfail"], "", ""))
EOF
	grep '^FAIL' "$log" | sed 's/^/  (the test would say, not judged here) /'
done
exit $failed
