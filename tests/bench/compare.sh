#!/usr/bin/env bash
# Comparison benchmark (issue 5): ndcache in every dataplane mode of this build against unbound,
# Knot DNS (kernel UDP and XDP mode), Knot Resolver and a bare in-kernel reflector, all measured
# in one run, on the same synthetic cluster, over the same pod -> veth -> node path
# (tests/integration/lib.sh: pod netns 169.254.100.2, node-local address 169.254.20.10).
# Every server runs pinned to CPU 0, the load generators (dnsperf, kxdpgun) to CPU 1.
#
# Servers: reflector (tests/bench/bpf/ndc_reflector.bpf.o on eth-pod tc ingress: bounces each
# query, no DNS work; the latency floor), ndcache-socket, ndcache-tc, ndcache-xdp, ndcache-dpdk (a DPDK lcore
# busy-polling eth-pod through --dpdk-vdev, the exception path through a net_tap; only in a
# build with DPDK), unbound (local-data),
# knot (authoritative zones, kernel UDP), knot-xdp (same, XDP mode on eth-pod), kresd (RPZ local
# data). Nothing recurses: unbound and kresd forward example.com to a local unbound on
# 169.254.53.1, knot serves example.com itself, every other name is refused or NXDOMAIN.
# Workloads: hits (every service name, A); ndots (an ndots:5 pod resolving external names: the
#   three search-path NXDOMAINs then the name, A and AAAA); cached (the external names, A and
#   AAAA, already in the cache after a warm-up).
# Measures, per server and repeat: kxdpgun max replies/s (hits); dnsperf max QPS (hits);
#   p50/p99/p99.9 latency from dnsperf -v at each --rates rate and at --sat-pct % of that
#   server's dnsperf max (hits), at each --ext-rates rate (ndots, cached); CPU ms per 1,000
#   queries at each fixed rate. Then the medians, their spread, the target ratios, a table,
#   CSV, JSON and a PNG (tests/bench/compare_report.py).
#
# Usage: tests/bench/compare.sh [options]
#   --duration S     seconds per measurement (default 5; 1..120)
#   --repeats N      repeats of the whole server list, median reported (default 3)
#   --services N     services in the synthetic cluster (default 10000)
#   --namespaces N   namespaces (default 100); 20% of services are headless, 3 endpoints each
#   --ext-names N    external names for the ndots and cached workloads (default 200)
#   --rates LIST     fixed rates for the hits workload, QPS (default 10000,40000)
#   --ext-rates LIST fixed rates for the ndots and cached workloads (default 40000)
#   --sat-pct P      the near-saturation rate: P% of the server's dnsperf max (default 80)
#   --servers LIST   subset of the server list, comma-separated (default: all)
#   --dpdk-vdev V    how ndcache-dpdk takes eth-pod: af_xdp (default; hugepages are set up for
#                    the run and restored after) or af_packet (--no-huge)
#   --build DIR      meson build dir (default build-cmp; set up with -Dbpf=enabled if missing)
#   --out DIR        results: compare.txt/.csv/.json/.png, raw logs (default BUILD/compare)
#   --quick          development run: 1 repeat, 2 s, 2000 services
# Needs root (packages, network namespaces, BPF) and 2 CPUs. Exit 0 when the run completed,
# targets met or not; 1 when something could not be run or a server answered wrongly; 130 when
# interrupted. Everything it creates is removed on exit, Ctrl-C included.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="tests/bench/compare.sh${*:+ $*}"
args=("$@")

duration=5
repeats=3
services=10000
namespaces=100
headless_pct=20
endpoints=3
ttl=30
ext_names=200
rates=10000,40000
ext_rates=40000
sat_pct=80
servers_opt=""
build="$root/build-cmp"
out=""
all_servers=(reflector ndcache-socket ndcache-tc ndcache-xdp ndcache-dpdk unbound knot knot-xdp
	kresd)
dpdk_vdev=af_xdp
# kxdpgun offers far more than one CPU can answer: its figure is the server's maximum.
kx_qps=5000000
# dnsperf: 4 sockets, at most 500 queries in flight, a query unanswered after 1 s is lost.
dp_clients=4
dp_outstanding=500
dp_timeout=1

BENCH_NAME=compare
# shellcheck source=lib.sh
. "$here/lib.sh"
say() { echo "compare: $*" >&2; }
is_list() { [[ $1 =~ ^[0-9]+(,[0-9]+)*$ ]]; }

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--quick) repeats=1; duration=2; services=2000; shift; continue ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--duration) duration=$2 ;;
	--repeats) repeats=$2 ;;
	--services) services=$2 ;;
	--namespaces) namespaces=$2 ;;
	--ext-names) ext_names=$2 ;;
	--rates) rates=$2 ;;
	--ext-rates) ext_rates=$2 ;;
	--sat-pct) sat_pct=$2 ;;
	--servers) servers_opt=$2 ;;
	--dpdk-vdev) dpdk_vdev=$2 ;;
	--build) build=$2 ;;
	--out) out=$2 ;;
	*) echo "compare: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
in_range() { is_uint "$1" && [ "$1" -le "$2" ]; }
in_range "$duration" 120 || die "--duration: 1..120 seconds"
in_range "$repeats" 20 || die "--repeats: 1..20"
is_uint "$services" || die "--services: a positive integer"
is_uint "$namespaces" || die "--namespaces: a positive integer"
in_range "$ext_names" 50000 || die "--ext-names: 1..50000"
is_list "$rates" || die "--rates: comma-separated QPS, e.g. 10000,40000"
is_list "$ext_rates" || die "--ext-rates: comma-separated QPS"
in_range "$sat_pct" 100 || die "--sat-pct: 1..100"
[[ $dpdk_vdev =~ ^(af_xdp|af_packet)$ ]] || die "--dpdk-vdev: af_xdp or af_packet"
servers=()
if [ -n "$servers_opt" ]; then
	IFS=, read -r -a want <<<"$servers_opt"
	for s in "${want[@]}"; do
		[[ " ${all_servers[*]} " == *" $s "* ]] || die "--servers: unknown '$s' (${all_servers[*]})"
	done
	for s in "${all_servers[@]}"; do # keep the canonical order
		[[ " ${want[*]} " == *" $s "* ]] && servers+=("$s")
	done
else
	servers=("${all_servers[@]}")
fi
IFS=, read -r -a hit_rates <<<"$rates"
IFS=, read -r -a ext_rate_list <<<"$ext_rates"
[ "$(id -u)" = 0 ] || die "needs root (packages, network namespaces, BPF)"
[ "$(nproc)" -ge 2 ] || die "needs at least 2 CPUs (servers on CPU 0, generators on CPU 1)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -n "$out" ] || out="$build/compare"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

bin="$build/control/ndcache"
reflector="$build/tests/bench/bpf/ndc_reflector.bpf.o"
results="$out/results.jsonl"

# The measurements run in a second copy of this script, in the background, while this one only
# waits: a shell waiting in the wait builtin acts on Ctrl-C at once, whereas one running a
# foreground command may not (bash does not act on SIGINT when that command handles it itself,
# and dig, dnsperf and python3 do). On any exit, this copy's cleanup stops the other, then
# every process left in the two namespaces (servers, generators, the upstream), detaches the
# programs and deletes the namespaces. NDC_COMPARE_TOPO passes the topology to the copy.
if [ -z "${NDC_COMPARE_TOPO:-}" ]; then
	# --- Packages and the build ---
	"$root/deploy/deps.sh" bench || die "deploy/deps.sh bench failed"
	for tool in dnsperf kxdpgun unbound knotd kresd gnuplot clang dig tc bpftool taskset python3 \
		ip; do
		command -v "$tool" >/dev/null || die "$tool not found after deploy/deps.sh bench"
	done
	bench_build "$build" "$out" control/ndcache tests/bench/bpf/ndc_reflector.bpf.o
	: >"$results"
	rm -f "$out"/compare.{txt,csv,json,png}

	# --- The topology, and the cleanup that runs on every exit ---
	# shellcheck source=SCRIPTDIR/../integration/lib.sh
	. "$root/tests/integration/lib.sh"
	MAIN_PID=""
	# shellcheck disable=SC2317 # run by the EXIT trap
	cleanup() {
		trap '' INT TERM
		if [ -n "$MAIN_PID" ]; then
			term_wait "$MAIN_PID" "the measuring copy on exit" 10
		fi
		ns_stop "$NS_POD" "$NS_NODE"
		bench_detach eth-pod
		topo_down
		# ndcache-dpdk with af_xdp: the hugepages this run set up
		[ -z "$HP_SAVED" ] || echo "$HP_SAVED" >/proc/sys/vm/nr_hugepages
		[ "$HP_MOUNTED" = 0 ] || umount /dev/hugepages
	}
	HP_SAVED=""
	HP_MOUNTED=0
	if [[ " ${servers[*]} " == *" ndcache-dpdk "* ]] && [ "$dpdk_vdev" = af_xdp ]; then
		HP_SAVED=$(cat /proc/sys/vm/nr_hugepages)
		if ! mountpoint -q /dev/hugepages; then
			mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages &&
				HP_MOUNTED=1
		fi
		[ "$HP_SAVED" -ge 256 ] || echo 256 >/proc/sys/vm/nr_hugepages
	fi
	bench_relaunch NDC_COMPARE_TOPO "${BASH_SOURCE[0]}" "${args[@]}"
fi

# --- From here on: the copy that measures, inside the topology the first one made. ---
TOPO_ID=${NDC_COMPARE_TOPO%%:*}
# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
TOPO_DIR=${NDC_COMPARE_TOPO#*:}
GEN_PID=""
SERVER_PID=""
interrupted=0
work="$TOPO_DIR"
node_mac=$(in_node cat /sys/class/net/eth-pod/address) || die "no eth-pod in the node netns"

# The data, the upstream, answer checks and the servers: servers.sh.
# shellcheck source=servers.sh
. "$here/servers.sh"
bench_data_up

# --- Generators: in the background, so that Ctrl-C runs the traps at once ---
run_gen() {
	local f=$1 rc
	shift
	ip netns exec "$NS_POD" taskset -c 1 "$@" >"$f" 2>&1 &
	GEN_PID=$!
	wait_pid "$GEN_PID" $((2 * duration + 60)) "the load generator ($1)"
	rc=$?
	GEN_PID=""
	[ "$interrupted" = 0 ] || exit 130
	if grep -q 'Testing complete (interruption)' "$f"; then
		say "interrupted"
		exit 130
	fi
	return $rc
}
dnsperf_run() { # FILE QUERIES dnsperf-args...
	local f=$1 q=$2
	shift 2
	run_gen "$f" dnsperf -s "$NODE_LOCAL" -d "$q" -t "$dp_timeout" -c "$dp_clients" \
		-q "$dp_outstanding" "$@"
}

# /proc/stat of CPUs 0 and 1 and the server's ticks: "busy0 total0 irq0 sirq0 sirq1 srv".
cpu_snap() {
	local srv=0
	if [ -n "$SERVER_PID" ] && [ -r "/proc/$SERVER_PID/stat" ]; then
		srv=$(sed 's/^.*) //' "/proc/$SERVER_PID/stat" | awk '{ print $12 + $13 }')
	fi
	awk -v srv="$srv" '
		$1 == "cpu0" || $1 == "cpu1" {
			t = 0; for (i = 2; i <= NF; i++) t += $i
			busy[$1] = t - $5 - $6; tot[$1] = t; irq[$1] = $7; sirq[$1] = $8 }
		END { print busy["cpu0"], tot["cpu0"], irq["cpu0"], sirq["cpu0"], sirq["cpu1"], srv }' \
		/proc/stat
}
hz=$(getconf CLK_TCK)

# measure_lat SERVER REPEAT WORKLOAD LABEL RATE
measure_lat() {
	local s=$1 rep=$2 wl=$3 label=$4 rate=$5 f="$work/lat.txt" expect json
	local b0 t0 i0 s0 z0 p0 b1 t1 i1 s1 z1 p1
	expect=$wl
	[ "$s" = reflector ] && expect=any # it echoes the query: no RCODE to check
	read -r b0 t0 i0 s0 z0 p0 < <(cpu_snap)
	dnsperf_run "$f" "$work/$wl.txt" -l "$duration" -Q "$rate" -v ||
		die "$s: dnsperf ($wl at $rate QPS) failed: $(grep -v '^>' "$f" | tail -3)"
	read -r b1 t1 i1 s1 z1 p1 < <(cpu_snap)
	json=$(python3 "$here/compare_report.py" lat "$f" --expect "$expect" --tag kind=lat \
		--tag server="$s" --tag repeat="$rep" --tag workload="$wl" --tag label="$label" \
		--tag rate="$rate" --tag srv_ticks=$((p1 - p0)) --tag softirq_ticks=$((s1 - s0 + z1 - z0)) \
		--tag other0_pct="$(awk -v b=$((b1 - b0 - (p1 - p0) - (s1 - s0) - (i1 - i0))) \
			-v t=$((t1 - t0)) 'BEGIN { v = t > 0 ? 100 * b / t : 0; printf "%.1f", v < 0 ? 0 : v }')") ||
		die "$s: cannot read dnsperf's output for $wl at $rate QPS"
	# CPU per 1,000 answered queries: the server's own time plus all softirq time on both
	# CPUs (the in-kernel paths run there, on whichever CPU sent the packet).
	json=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1]); hz = int(sys.argv[2]); r["hz"] = hz
r["cpu_ms_per_1k"] = (round((r["srv_ticks"] + r["softirq_ticks"]) * 1000.0 / hz
                      / r["answered"] * 1000, 4) if r["answered"] else None)
print(json.dumps(r, sort_keys=True))' "$json" "$hz")
	echo "$json" >>"$results"
	local bad
	bad=$(python3 -c 'import json, sys
r = json.loads(sys.argv[1])
print(r["bad_rcode"], r["bad_example"] or "")' "$json")
	[ "${bad%% *}" = 0 ] ||
		die "$s: ${bad%% *} answers with a wrong RCODE in $wl at $rate QPS, e.g. ${bad#* }"
	rm -f "$f"
}

# note TEXT...: a line for the report's notes (the arguments joined by spaces).
note() {
	python3 -c 'import json, sys; print(json.dumps({"kind": "note", "text": sys.argv[1]}))' "$*" \
		>>"$results"
}

declare -gA FAILED
fail_server() {
	local s=$1 why=$2
	say "$s: not measured: $why"
	FAILED[$s]=$why
	python3 -c 'import json, sys
print(json.dumps({"kind": "failed", "server": sys.argv[1], "reason": sys.argv[2]}))' \
		"$s" "$why" >>"$results"
	cp "$work/$s.log" "$out/logs/$s.failed.log" 2>/dev/null
}

table_size=65536
while [ "$table_size" -lt $((services * 12)) ]; do table_size=$((table_size * 2)); done
dmax=$(((duration + 1) / 2))
[ "$dmax" -ge 2 ] || dmax=2

session() {
	local s=$1 rep=$2 f json sat rate
	say "repeat $rep: $s"
	pass_on
	if ! server_start "$s" kx; then
		server_stop "$s"
		fail_server "$s" "$START_ERR"
		return 0
	fi
	if [ "$s" != reflector ] && ! check_answers "$s"; then
		server_stop "$s"
		fail_server "$s" "no answer from the pod (dig from 169.254.100.2 timed out)"
		return 0
	fi

	# kxdpgun: AF_XDP on the pod's eth0, its own XDP program there in place of ours.
	pass_off
	f="$work/kx.txt"
	run_gen "$f" kxdpgun -t "$duration" -Q "$kx_qps" -F 1 -I eth0 -l "$POD_ADDR" -R "$node_mac" \
		-i "$work/hits.txt" "$NODE_LOCAL"
	local rc=$?
	in_pod ip link set dev eth0 xdp off 2>/dev/null
	[ $rc = 0 ] || die "$s: kxdpgun failed (exit $rc): $(tail -5 "$f")"
	json=$(python3 "$here/compare_report.py" kx "$f" --tag kind=kx --tag server="$s" \
		--tag repeat="$rep") || die "$s: cannot read kxdpgun's output: $(tail -5 "$f")"
	echo "$json" >>"$results"
	kill -0 "${SERVER_PID:-$$}" 2>/dev/null || die "$s exited during the kxdpgun run"
	pass_on
	if [ "$s" = ndcache-tc ]; then
		server_stop "$s"
		server_start "$s" dns || die "$s: restart with redirect_peer failed: $START_ERR"
		check_answers "$s" || die "$s: no answer from the pod after the restart"
	fi

	# Warm-up: every external name and search-path NXDOMAIN once, which fills the caches.
	dnsperf_run "$work/warm.txt" "$work/ndots.txt" -n 1 -Q 5000 ||
		die "$s: warm-up failed: $(tail -3 "$work/warm.txt")"

	f="$work/max.txt"
	dnsperf_run "$f" "$work/hits.txt" -l "$dmax" || die "$s: dnsperf (max) failed: $(tail -3 "$f")"
	json=$(python3 "$here/compare_report.py" max "$f" --tag kind=max --tag server="$s" \
		--tag repeat="$rep") || die "$s: no summary in dnsperf's output"
	echo "$json" >>"$results"
	sat=$(python3 -c 'import json, sys
print(int(json.loads(sys.argv[1])["qps"] * int(sys.argv[2]) / 100))' \
		"$json" "$sat_pct")
	[ "$sat" -gt 0 ] || { note "$s: dnsperf got no answers at all in repeat $rep"; sat=1000; }

	for rate in "${hit_rates[@]}"; do
		measure_lat "$s" "$rep" hits "$rate" "$rate"
	done
	measure_lat "$s" "$rep" hits sat "$sat"
	for rate in "${ext_rate_list[@]}"; do
		measure_lat "$s" "$rep" ndots "$rate" "$rate"
		measure_lat "$s" "$rep" cached "$rate" "$rate"
	done
	kill -0 "${SERVER_PID:-$$}" 2>/dev/null || die "$s exited during the dnsperf runs"
	server_stop "$s"
	[ "$s" = reflector ] || cp "$work/$s.log" "$out/logs/$s.$rep.log"
	case "$s" in
	ndcache-dpdk)
		FP_COUNTERS[$s]=$(grep -o "dpdk: [0-9]* answered.*" "$work/$s.log" | tail -1)
		;;
	ndcache-tc | ndcache-xdp)
		# What the kernel answered and what it passed up, and why (e.g. "size").
		FP_COUNTERS[$s]=$(grep -o "fast path: [0-9]* answered.*" "$work/$s.log" | tail -1)
		if grep -q "table too small" "$work/$s.log"; then
			note "$s: ndcache warned that dataplane.table_size ($table_size) is too small"
		fi
		;;
	esac
}
declare -gA FP_COUNTERS

# --- The run ---
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
machine="$(nproc) CPUs ($cpu_model), $mem, kernel $(uname -r)"
ver() { "$@" 2>&1 | sed -n 's/.*[Vv]ersion //p' | head -1; }
software="ndcache $("$bin" --version 2>&1 | head -1 | sed 's/^ndcache //')"
software+=", unbound $(ver unbound -V), knotd $(ver knotd -V), kresd $(ver kresd -V)"
software+=", dnsperf $(ver dnsperf -h)"
software+=", kxdpgun $(ver kxdpgun -V)"
rm -rf "$out/logs"
mkdir -p "$out/logs"
# Per server and repeat: about 10 s of start, checks, warm-up and kxdpgun's own setup, then the
# measurements.
per=$((10 + duration + dmax + (${#hit_rates[@]} + 1 + 2 * ${#ext_rate_list[@]}) * duration))
say "${#servers[@]} servers x $repeats repeat(s), ${duration}s per measurement; about" \
	"$((per * ${#servers[@]} * repeats / 60 + 1)) min"

for ((rep = 1; rep <= repeats; rep++)); do
	# Each repeat starts one server later, so that no server always runs first or last.
	n=${#servers[@]}
	for ((k = 0; k < n; k++)); do
		s=${servers[$(((k + rep - 1) % n))]}
		[ -n "${FAILED[$s]:-}" ] && continue
		session "$s" "$rep"
	done
done

# --- Notes the table needs, then the report ---
note "servers pinned to CPU 0 (taskset), dnsperf and kxdpgun to CPU 1; the tc and XDP programs" \
	"(reflector, ndcache-tc, ndcache-xdp, knot-xdp's redirect) run in softirq on the CPU that" \
	"sent the packet, i.e. CPU 1 for queries"
note "CPU ms/1k q, during the 40k hits run, per 1,000 answered queries: 'process' is the" \
	"server's utime+stime; '+softirq' adds all softirq time of both CPUs, where the in-kernel" \
	"paths run (the veth path both ways included: the reflector's figure is that floor); tick" \
	"accounting, and other work's softirq on the shared machine counts too"
note "dnsperf: -c $dp_clients -q $dp_outstanding -t $dp_timeout; lost = unanswered after" \
	"${dp_timeout}s; queries in flight when a run ends are not counted; dnsperf max runs ${dmax}s"
note "an XDP pass program is on the pod's eth0 for every dnsperf run (a veth drops XDP_TX" \
	"frames unless its peer has an XDP program); kxdpgun runs replace it with its own"
note "ndcache: dataplane.table_size $table_size (at least 12 entries per service: ndcache warns" \
	"when its fast-path table cannot hold every name, and such a warning would be noted here);" \
	"ndcache-tc: redirect_peer false for kxdpgun (whose XDP receive bpf_redirect_peer skips)," \
	"default (true) for dnsperf"
note "reflector: echoes each query unchanged (no DNS work, RCODE not checked): the floor for" \
	"latency and the ceiling for replies/s"
note "knot serves example.com authoritatively (it has no cache or forwarder); ndcache, unbound" \
	"and kresd forward it to $UPSTREAM_ADDR and answer from their caches after the warm-up"
if [[ " ${servers[*]} " == *" ndcache-dpdk "* ]]; then
	note "ndcache-dpdk: net_$dpdk_vdev on eth-pod (the node side of the veth), one lcore" \
		"busy-polling on CPU 0 beside the socket worker, misses through a net_tap; its process" \
		"CPU is the polling lcore's 100% at any rate; the pod's eth0 sends full checksums for" \
		"it (ethtool -K tx off), which its kernel computes in software"
fi
hot=$(python3 -c '
import json, sys
worst = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("kind") == "lat" and r.get("other0_pct", 0) >= 5:
        worst[r["server"]] = max(worst.get(r["server"], 0), r["other0_pct"])
print("; ".join("%s up to %.0f%%" % kv for kv in sorted(worst.items())))' "$results")
[ -z "$hot" ] || note "other processes' share of CPU 0 during latency runs, at most: $hot (it" \
	"competed with the servers that run there; the in-kernel paths leave CPU 0 idle, and other" \
	"work fills it)"
for s in "${!FP_COUNTERS[@]}"; do
	[ -z "${FP_COUNTERS[$s]}" ] ||
		note "$s, last repeat, ${FP_COUNTERS[$s]} (ndcache's own counters at exit)"
done
cp "$TOPO_DIR/unbound.log" "$out/logs/upstream.log" 2>/dev/null
note "server logs (ndcache's counters at exit among them): $out/logs/"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out/meta.json" <<EOF || die "cannot write meta.json"
import json, sys
json.dump({"date": "$started", "machine": "$machine", "software": "$software",
           "command": "$cmdline", "load_before": "$load_before", "load_after": "$load_after",
           "load_note": "2 CPUs shared with other work: see the notes",
           "servers": "${servers[*]}".split(), "services": $services, "headless": $n_headless,
           "namespaces": $namespaces, "ext_names": $ext_names, "repeats": $repeats,
           "duration": $duration, "sat_pct": $sat_pct}, open(sys.argv[1], "w"), indent=1)
EOF
echo
python3 "$here/compare_report.py" report --results "$results" --meta "$out/meta.json" \
	--out "$out" || die "the report failed"
echo
say "results: $out/compare.txt, compare.csv, compare.json, compare.png"
exit 0
