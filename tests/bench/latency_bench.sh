#!/usr/bin/env bash
# Latency and cost benchmark (issue 13): what a pod sees and what each answer costs, for ndcache
# (tc and XDP fast path) against the bare in-kernel reflector (tc and XDP: the floor), knot (XDP
# and kernel UDP), unbound and kresd, and two caches in front of the upstream (the cluster's DNS
# here): dnsdist's packet cache and PowerDNS Recursor (forwarding only), every figure from one run
# on the same path (tests/integration/lib.sh: pod netns 169.254.100.2 -> veth -> node-local
# 169.254.20.10).
#
# Latency: tests/bench/prober.c from a second pod (its own netns and veth: a pod asking while
#   others load the node), pinned to CPU 0 (SCHED_FIFO), one query in flight, paced at
#   --probe-rate, kernel receive timestamps, asking the cluster's service names (A), while
#   kxdpgun on CPU 1 sends a fixed background load of the same names from the first pod: each
#   --loads level
#   (QPS; "sat": the server's own kxdpgun maximum, measured first in the same session). p50,
#   p99, p99.9 and max per server and load, pooled over the repeats, and the share of the
#   background the server answered.
# Cost: at --cost-rate QPS of kxdpgun alone, once over --hot names and once over every service
#   name: ns per packet of the program on eth-pod (kernel.bpf_stats_enabled=1, run_time_ns /
#   run_cnt from bpftool), and CPU per answered query (the server's process time plus the
#   softirq time of both CPUs, from /proc). kxdpgun's own maximum replies/s, labelled with what
#   bounded it.
# Servers are pinned to CPU 0 (taskset: every thread), each with one thread that answers: unbound
# num-threads 1, knot one UDP worker, kresd one process, ndcache one worker, dnsdist one UDP
# listener, pdns-recursor one worker and no distributor. dnsdist and pdns-recursor cache the
# records with their TTL (30 s): before each prober measurement the prober asks each name it is
# about to ask once (the warm-up), so that it measures their cache and not the upstream; the
# background refreshes what it asks as the TTL runs out (a miss goes to the upstream, as on a
# node). The run fails if they sent a query anywhere but the upstream (their own counters against
# an nftables counter of the node's queries to it). Verdicts against issue 13's targets at the end.
#
# Usage: tests/bench/latency_bench.sh [options]
#   --duration S      seconds per measurement (default 10; 2..120)
#   --repeats N       repeats of the whole server list; latency samples pooled (default 2)
#   --loads LIST      background loads, QPS or "sat", comma-separated (default 0,100000,250000,sat)
#   --probe-rate Q    the prober's pace, queries per second (default 2000)
#   --cost-rate Q     kxdpgun's rate in the cost runs (default 100000)
#   --hot N           names in the hot set (default 8)
#   --services N      services in the synthetic cluster (default 10000; 20% headless)
#   --table-size N    ndcache's dataplane.table_size (default: 12 per service, to a power of 2)
#   --servers LIST    subset, comma-separated (default: reflector, reflector-xdp, ndcache-tc,
#                     ndcache-xdp, knot-xdp, knot, unbound, kresd, dnsdist, pdns-recursor;
#                     ndcache-socket, base-tc,
#                     base-xdp, reflector-load and reflector-load-xdp on request: the
#                     reflector reading one 2 MiB table's line per query, whose cost over
#                     every name less its hot set's is one table load in the kernel under
#                     this traffic, the floor of ndcache's)
#   --base-build DIR  the build whose ndcache base-tc and base-xdp run (DIR/control/ndcache,
#                     built beforehand): two builds compared in one run; with
#                     NDC_BENCH_BASE_DATAPLANE="key: value, ..." in the environment base-* also
#                     get those dataplane keys (one build, two settings: --base-build BUILD)
#   --clients on|off  ndcache-tc and -xdp with per-client counting on or off (issue 37: the
#                     loaded program's config flag, set by tests/bench/fp_observe.c once it
#                     started; default: as the agent set it); --base-clients on|off the same
#                     for base-tc and -xdp: one build, both settings in one run with
#                     --base-build BUILD (what was set: OUT/fp_observe.log)
#   --build DIR       meson build dir (default build-lat; set up with -Dbpf=enabled if missing)
#   --out DIR         results (default BUILD/latency): latency.txt/.csv/.json, samples, logs
#   --quick           development run: 1 repeat, 4 s
#   --profile         also a profile of each cost run (perf record -a -e cpu-clock while it runs;
#                     tests/bench/perf_lines.py on each BPF program on eth-pod while loaded):
#                     OUT/profile/SERVER.REPEAT.LABEL.PROG.txt (the run's figures then include
#                     perf's own sampling)
#   --saturation      also the saturation run (issue 35): per server, the highest kxdpgun load
#                     (no prober) of which it answers at least 99%, its program on CPU 0
#                     (tests/bench/latency_bench.sh: saturation block)
#   --cost-pairs N    instead of the runs above, the paired cost (issue 35): each server of
#                     ndcache-tc, ndcache-xdp, base-tc, base-xdp in --servers (default ndcache-tc,
#                     ndcache-xdp; base-* compare two builds with --base-build; an experiment floor
#                     answer-reflector-load, -hot4, -hot8, -code64, -code128 (-xdp) reports its
#                     cost over the floor, no verdict) and its floor that answers
#                     (answer-reflector, answer-reflector-xdp) loaded at once on the two pods'
#                     veths, a kxdpgun in each pod sending the hot set at --cost-rate at the
#                     same time, N rounds (3..50) of --duration s, the server on the pod's veth for
#                     the first half and on the prober's for the rest; first a control pair per
#                     kind, the floor on both veths (what the veths differ by). Per round the two
#                     programs' ns per packet and their ratio; per placement the median; their
#                     geometric mean is the figure (the pairs block below). OUT/pairs.txt.
#   --pair-mode M     together (default): both kxdpgun at once, each program beside the other on
#                     CPU 1; alternate: in each round the pod's kxdpgun alone, then the prober
#                     pod's alone (the same programs loaded, the idle one not run), so that a
#                     program's figure is not raised by what its neighbour's run evicts
#   --saturation-names LIST  the name sets of the saturation run, comma-separated: hot (the hot
#                     set, where the answer reflector is the floor) and all (every name, a table
#                     load each); default hot,all. kernel.bpf_stats_enabled is 0 during it, as on a
#                     node (the agent does not set it): the run reads kxdpgun's replies only.
#   Servers answer-reflector and answer-reflector-xdp: the floor that answers (issue 35,
#   tests/bench/bpf/ndc_answer_reflector.bpf.c): parse, resize, a constant A answer, checksums.
#   answer-reflector-load and answer-reflector-load-xdp: the same with one table line read per
#   question (tests/bench/bpf/ndc_reflect_load.h, as reflector-load reads it): the floor that
#   answers from a table of every name. answer-reflector-hot4, -hot8 (and -xdp): the answer
#   reflector reading 4 or 8 more lines of map memory per query, the same ones for every query of
#   a CPU, each in a page of its own (NDC_REFLECT_HOT_LINES): what a line costs under this
#   traffic, beside the 9 or so ndcache's hit reads that the answer reflector does not.
#   answer-reflector-code64, -code128 (and -xdp): the answer reflector running 64 or 128 more
#   blocks of code per query, each a compare and a branch taken over code never run
#   (NDC_REFLECT_CODE_BLOCKS): what a program's code footprint costs under this traffic.
# NDC_BENCH_REFLECTOR_LOAD=OBJ in the environment: reflector-load(-xdp) run that object instead,
# e.g. the load reflector built with a bigger table (-DNDC_REFLECT_LINES=N, lines of 64 bytes) to
# see what a table's span costs a name (method: docs/bench/FASTPATH.md, "What a name costs, and the
# floors it is measured against"; no current figure: the span runs there were declared void).
# Needs root (packages, network namespaces, BPF, a sysctl) and 2 CPUs. Exit 0 when the run
# completed (targets met or not), 1 when something could not run or a server answered wrongly,
# 130 when interrupted. Everything it creates is removed on exit, Ctrl-C included, and
# kernel.bpf_stats_enabled is set back to what it was.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="tests/bench/latency_bench.sh${*:+ $*}"
args=("$@")

duration=10
repeats=2
loads=0,100000,250000,sat
probe_rate=2000
cost_rate=100000
hot=8
services=10000
namespaces=100
headless_pct=20
endpoints=3
ttl=30
ext_names=200
servers_opt=""
table_size=""
base_build=""
clients=""
base_clients=""
build="$root/build-lat"
out=""
saturation=0
profile=0
cost_pairs=0
pair_mode=together
sat_names=hot,all
sat_steps=6 # loads tried per server in the saturation run (saturation block)
all_servers=(reflector reflector-xdp reflector-load reflector-load-xdp answer-reflector
	answer-reflector-xdp answer-reflector-load answer-reflector-load-xdp answer-reflector-hot4
	answer-reflector-hot4-xdp answer-reflector-hot8 answer-reflector-hot8-xdp answer-reflector-code64
	answer-reflector-code64-xdp answer-reflector-code128 answer-reflector-code128-xdp ndcache-socket
	ndcache-tc
	ndcache-xdp base-tc base-xdp knot-xdp knot unbound kresd dnsdist pdns-recursor)
default_servers=(reflector reflector-xdp ndcache-tc ndcache-xdp knot-xdp knot unbound kresd dnsdist
	pdns-recursor)
kx_max_qps=5000000
# kxdpgun needs about a second to set up its XDP socket before it sends: the prober starts
# this long after it, and kxdpgun keeps sending this long after the prober stops.
kx_lead=2
kx_tail=1
# The prober's pod: its own netns and veth (eth-probe on the node's side), so that its replies
# do not queue behind the background's in the first pod's veth (one NAPI instance when XDP is on).
PROBE_ADDR=169.254.101.2
PROBE_GW=169.254.101.1
probe_port=1053
probe_timeout_ms=250

BENCH_NAME=latency_bench
# shellcheck source=lib.sh
. "$here/lib.sh"
say() { echo "latency_bench: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--quick) repeats=1; duration=4; shift; continue ;;
	--saturation) saturation=1; shift; continue ;;
	--profile) profile=1; shift; continue ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--duration) duration=$2 ;;
	--repeats) repeats=$2 ;;
	--loads) loads=$2 ;;
	--probe-rate) probe_rate=$2 ;;
	--cost-rate) cost_rate=$2 ;;
	--cost-pairs) cost_pairs=$2 ;;
	--pair-mode) pair_mode=$2 ;;
	--saturation-names) sat_names=$2 ;;
	--hot) hot=$2 ;;
	--services) services=$2 ;;
	--table-size) table_size=$2 ;;
	--base-build) base_build=$2 ;;
	--clients) clients=$2 ;;
	--base-clients) base_clients=$2 ;;
	--servers) servers_opt=$2 ;;
	--build) build=$2 ;;
	--out) out=$2 ;;
	*) echo "latency_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
in_range() { is_uint "$1" && [ "$1" -le "$2" ]; }
{ in_range "$duration" 120 && [ "$duration" -ge 2 ]; } || die "--duration: 2..120 seconds"
in_range "$repeats" 20 || die "--repeats: 1..20"
[[ $clients =~ ^(|on|off)$ && $base_clients =~ ^(|on|off)$ ]] ||
	die "--clients, --base-clients: on or off"
[[ $loads =~ ^(sat|[0-9]+)(,(sat|[0-9]+))*$ ]] || die "--loads: e.g. 0,100000,250000,sat"
in_range "$probe_rate" 100000 || die "--probe-rate: 1..100000"
in_range "$cost_rate" 5000000 || die "--cost-rate: 1..5000000"
{ is_uint0 "$cost_pairs" && [ "$cost_pairs" -le 50 ] && [ "$cost_pairs" != 1 ] &&
	[ "$cost_pairs" != 2 ]; } || die "--cost-pairs: 3..50 rounds"
[[ $pair_mode =~ ^(together|alternate)$ ]] || die "--pair-mode: together or alternate"
in_range "$hot" 1000 || die "--hot: 1..1000"
is_uint "$services" || die "--services: a positive integer"
[ -z "$table_size" ] || { in_range "$table_size" 16777216 && [ "$table_size" -ge 1024 ]; } ||
	die "--table-size: 1024..16777216"
servers=()
if [ -n "$servers_opt" ]; then
	IFS=, read -r -a want <<<"$servers_opt"
	for s in "${want[@]}"; do
		[[ " ${all_servers[*]} " == *" $s "* ]] || die "--servers: unknown '$s' (${all_servers[*]})"
	done
	for s in "${all_servers[@]}"; do # the canonical order
		[[ " ${want[*]} " == *" $s "* ]] && servers+=("$s")
	done
else
	servers=("${default_servers[@]}")
fi
if [ "$cost_pairs" -gt 0 ]; then
	[ -n "$servers_opt" ] || servers=(ndcache-tc ndcache-xdp)
	for s in "${servers[@]}"; do
		[[ $s =~ ^(ndcache|base)-(tc|xdp)$ ]] ||
			[[ $s =~ ^answer-reflector-(load|hot4|hot8|code64|code128)(-xdp)?$ ]] ||
			die "--cost-pairs: --servers of ndcache-tc, ndcache-xdp, base-tc, base-xdp or an" \
				"experiment floor answer-reflector-load, -hot4, -hot8, -code64, -code128 (-xdp)" \
				"(not $s)"
	done
fi
IFS=, read -r -a load_list <<<"$loads"
[[ $sat_names =~ ^(hot|all)(,(hot|all))?$ ]] || die "--saturation-names: hot, all or hot,all"
IFS=, read -r -a sat_list <<<"$sat_names"
base_bin=""
if [[ " ${servers[*]} " == *" base-"* ]]; then
	[ -n "$base_build" ] || die "base-tc and base-xdp need --base-build DIR"
	case "$base_build" in /*) ;; *) base_build="$PWD/$base_build" ;; esac
	base_bin="$base_build/control/ndcache"
	[ -x "$base_bin" ] || die "--base-build: no $base_bin (build it first)"
fi
[ "$(id -u)" = 0 ] || die "needs root (packages, network namespaces, BPF)"
[ "$(nproc)" -ge 2 ] || die "needs at least 2 CPUs (servers and prober on CPU 0, kxdpgun on 1)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -n "$out" ] || out="$build/latency"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

bin="$build/control/ndcache"
reflector="$build/tests/bench/bpf/ndc_reflector.bpf.o"
reflector_load="${NDC_BENCH_REFLECTOR_LOAD:-$build/tests/bench/bpf/ndc_reflector_load.bpf.o}"
answer_reflector="$build/tests/bench/bpf/ndc_answer_reflector.bpf.o"
answer_reflector_load="$build/tests/bench/bpf/ndc_answer_reflector_load.bpf.o"
prober="$build/tests/bench_prober"
memlat="$build/tests/bench_memlat"
fp_observe="$build/tests/bench_fp_observe"
results="$out/results.jsonl"

# As in compare.sh: the measurements run in a second copy of this script while this one waits,
# so that Ctrl-C is acted on at once; this copy's cleanup stops the other, every process left in
# the two namespaces, detaches the programs, deletes the namespaces and restores the sysctl.
if [ -z "${NDC_LATENCY_TOPO:-}" ]; then
	"$root/deploy/deps.sh" bench || die "deploy/deps.sh bench failed"
	for tool in kxdpgun unbound knotd kresd dnsdist pdns_recursor rec_control nft clang dig tc bpftool \
		taskset python3 ip sysctl curl; do
		command -v "$tool" >/dev/null || die "$tool not found after deploy/deps.sh bench"
	done
	bench_build "$build" "$out" control/ndcache tests/bench/bpf/ndc_reflector.bpf.o \
		tests/bench/bpf/ndc_reflector_load.bpf.o tests/bench/bpf/ndc_answer_reflector.bpf.o \
		tests/bench/bpf/ndc_answer_reflector_load.bpf.o \
		tests/bench/bpf/ndc_answer_reflector_hot4.bpf.o \
		tests/bench/bpf/ndc_answer_reflector_hot8.bpf.o \
		tests/bench/bpf/ndc_answer_reflector_code64.bpf.o \
		tests/bench/bpf/ndc_answer_reflector_code128.bpf.o \
		tests/bench_prober tests/bench_memlat tests/bench_fp_observe
	if [ "$profile" = 1 ]; then
		command -v perf >/dev/null || die "--profile needs perf (Debian: linux-perf)"
		bench_build "$build" "$out" tests/bench_prog_lines
		rm -rf "$out/profile"
	fi
	: >"$results"
	rm -rf "$out"/latency.{txt,csv,json} "$out/memory.txt" "$out/samples" "$out/logs" \
		"$out/fp_observe.log"
	stats_prev=$(sysctl -n kernel.bpf_stats_enabled) || die "no kernel.bpf_stats_enabled"

	# shellcheck source=SCRIPTDIR/../integration/lib.sh
	. "$root/tests/integration/lib.sh"
	MAIN_PID=""
	# shellcheck disable=SC2317 # run by the EXIT trap
	cleanup() {
		trap '' INT TERM
		if [ -n "$MAIN_PID" ]; then
			term_wait "$MAIN_PID" "the measuring copy on exit" 10
		fi
		ns_stop "$NS_POD" "$NS_NODE" "$NS_PROBE"
		bench_detach eth-pod eth-probe
		ip netns del "$NS_PROBE" 2>/dev/null
		topo_down
		sysctl -qw kernel.bpf_stats_enabled="$stats_prev"
	}
	NS_PROBE="ndc-probe-$TOPO_ID"
	probe_up() {
		ip netns add "$NS_PROBE" &&
			ip link add "ndcq$TOPO_ID" type veth peer name "ndcr$TOPO_ID" &&
			ip link set "ndcq$TOPO_ID" netns "$NS_PROBE" &&
			ip link set "ndcr$TOPO_ID" netns "$NS_NODE" &&
			in_node ip link set "ndcr$TOPO_ID" name eth-probe &&
			in_node ip addr add "$PROBE_GW/24" dev eth-probe &&
			in_node ip link set eth-probe up &&
			ip netns exec "$NS_PROBE" ip link set lo up &&
			ip netns exec "$NS_PROBE" ip link set "ndcq$TOPO_ID" name eth0 &&
			ip netns exec "$NS_PROBE" ip addr add "$PROBE_ADDR/24" dev eth0 &&
			ip netns exec "$NS_PROBE" ip link set eth0 up &&
			ip netns exec "$NS_PROBE" ip route add default via "$PROBE_GW"
	}
	bench_setup() {
		probe_up || die "could not create the prober's network namespace"
		sysctl -qw kernel.bpf_stats_enabled=1 || die "cannot set kernel.bpf_stats_enabled"
	}
	bench_relaunch NDC_LATENCY_TOPO "${BASH_SOURCE[0]}" "${args[@]}"
fi

# --- From here on: the copy that measures, inside the topology the first one made. ---
TOPO_ID=${NDC_LATENCY_TOPO%%:*}
# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
TOPO_DIR=${NDC_LATENCY_TOPO#*:}
NS_PROBE="ndc-probe-$TOPO_ID"
SERVER_PID=""
work="$TOPO_DIR"
node_mac=$(in_node cat /sys/class/net/eth-pod/address) || die "no eth-pod in the node netns"
if [ -z "$table_size" ]; then
	table_size=65536
	while [ "$table_size" -lt $((services * 12)) ]; do table_size=$((table_size * 2)); done
fi
# shellcheck disable=SC2034 # read by servers.sh
BENCH_IFACES="eth-pod eth-probe"
# shellcheck source=servers.sh
. "$here/servers.sh"
bench_data_up
# For the XDP servers' XDP_TX replies (see pass_on), on the prober's pod for the whole run.
ip netns exec "$NS_PROBE" ip -force link set dev eth0 xdp obj "$work/xdp_pass.o" sec xdp ||
	die "cannot attach the XDP pass program to the prober's eth0"
head -n "$hot" "$work/hits.txt" >"$work/hot.txt"
cp "$work/hits.txt" "$work/all.txt"
mkdir -p "$out/samples" "$out/logs"
hz=$(getconf CLK_TCK)
report() { python3 "$here/latency_report.py" "$@"; }

# "busy0 total0 sirq0 busy1 total1 sirq1 srv": /proc/stat ticks of CPUs 0 and 1 (busy: user,
# nice, system, irq, softirq; not idle, iowait or steal) and the server's utime + stime (all
# threads).
cpu_snap() {
	local srv=0
	if [ -n "$SERVER_PID" ] && [ -r "/proc/$SERVER_PID/stat" ]; then
		srv=$(sed 's/^.*) //' "/proc/$SERVER_PID/stat" | awk '{ print $12 + $13 }')
	fi
	awk -v srv="$srv" '
		$1 == "cpu0" || $1 == "cpu1" {
			t = 0; for (i = 2; i <= 9; i++) t += $i
			busy[$1] = $2 + $3 + $4 + $7 + $8; tot[$1] = t; sirq[$1] = $8 }
		END { print busy["cpu0"], tot["cpu0"], sirq["cpu0"], busy["cpu1"], tot["cpu1"],
		      sirq["cpu1"], srv }' /proc/stat
}
# iface_progs IFACE: the programs on the node's IFACE and their run counts (report progs); tcx
# egress programs (ndcache's fail-open one on Linux 6.6+) from the kernel itself (tcx_progs.py)
iface_progs() {
	local tcx
	tcx=$(in_node python3 "$here/../integration/tcx_progs.py" "$1" egress 2>/dev/null)
	# shellcheck disable=SC2086 # one id per word
	in_node bpftool -j net show dev "$1" 2>/dev/null | report progs --tcx-egress $tcx
}
progs_snap() { iface_progs eth-pod; }
# observe_set SERVER [IFACE]: --clients, --base-clients: SERVER's per-client counting as asked,
# in every program of it on the node's IFACE (default eth-pod; they share one config)
observe_set() {
	local setting=$clients id n=0
	case "$1" in
	ndcache-tc | ndcache-xdp) ;;
	base-tc | base-xdp) setting=$base_clients ;;
	*) return 0 ;;
	esac
	[ -n "$setting" ] || return 0
	for id in $(iface_progs "${2:-eth-pod}" | python3 -c 'import json, sys
print(" ".join(str(p["id"]) for p in json.load(sys.stdin).values() if p["name"].startswith("ndc_")))'); do
		"$fp_observe" "$id" "$setting" >>"$out/fp_observe.log" || return 1
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
}

# warm SERVER [all]: for the caches (dnsdist, pdns-recursor), the prober asks once, as fast as
# they answer, each name the next prober measurement asks (the first probe-rate x duration names
# of its list, at most every name), in the same form; with "all", every name, and then kxdpgun
# asks every name in its own form (20,000 QPS for 3 s), so that its first flood (the "max" run)
# meets a warm cache, not the upstream. A warm-up answered wrongly (pdns-recursor keeps a
# SERVFAIL 60 s) or short is said, and the measurement reports what the prober then got.
warm() {
	local need secs got
	case "$1" in dnsdist | pdns-recursor) ;; *) return 0 ;; esac
	need=$((probe_rate * duration))
	[ "${2:-}" = all ] && need=$(wc -l <"$work/hits.txt")
	head -n "$need" "$work/hits.txt" >"$work/warm.txt"
	need=$(wc -l <"$work/warm.txt")
	secs=$((2 + need / 4000))
	ip netns exec "$NS_PROBE" "$prober" -s "$NODE_LOCAL" -B "$probe_port" -c 0 -r 1000000 \
		-d "$secs" -t "$probe_timeout_ms" -f "$work/warm.txt" >"$work/warm.json" \
		2>"$work/warm.err" || die "$1: the warm-up's prober failed: $(cat "$work/warm.err")"
	got=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
print(j["answered"] - j["wrong"], j["wrong"])' "$work/warm.json") ||
		die "$1: no summary from the warm-up's prober"
	if [ "${got% *}" -lt "$need" ] || [ "${got#* }" != 0 ]; then
		say "$1: the warm-up got ${got% *} right answers and ${got#* } wrong in $secs s for" \
			"its $need names"
	fi
	[ "${2:-}" = all ] || return 0
	pass_off
	kx_start "$NS_POD" "$POD_ADDR" "$node_mac" 3 20000 "$work/all.txt" "$work/kx-warm.txt"
	kx_wait "$1: the warm-up" "$KX_PID" 60 "$work/kx-warm.txt"
	in_pod ip link set dev eth0 xdp off 2>/dev/null
	pass_on
}

# kx_start NS ADDR MAC SECS QPS LIST OUT: kxdpgun in NS on CPU 1, in the background (its PID in
# KX_PID): SECS s at QPS of the names in LIST (a query file) from ADDR to the node-local address
# through the node's MAC, its output to OUT
kx_start() {
	ip netns exec "$1" taskset -c 1 kxdpgun -t "$4" -Q "$5" -F 1 -I eth0 -l "$2" -R "$3" \
		-i "$6" "$NODE_LOCAL" >"$7" 2>&1 &
	KX_PID=$!
}
# kx_alive WHAT PID OUT: dies when the kxdpgun PID (its output in OUT) has exited already
kx_alive() {
	kill -0 "$2" 2>/dev/null || die "$1: kxdpgun exited at start: $(tail -3 "$3")"
}
# kx_wait WHAT PID SECS OUT: waits at most SECS s for the kxdpgun PID's end; dies when it failed
kx_wait() {
	local rc
	wait_pid "$2" "$3" "$1's kxdpgun"
	rc=$?
	[ $rc = 0 ] || die "$1: kxdpgun failed (exit $rc): $(tail -5 "$4")"
}

# cell SERVER REPEAT LABEL QPS LIST PROBE: one measurement. kxdpgun sends QPS (0: none) of LIST
# (all or hot) from the pod on CPU 1; with PROBE=1 the prober runs meanwhile on CPU 0. One JSON
# line to the results.
cell() {
	local s=$1 rep=$2 label=$3 qps=$4 list=$5 probe=$6
	local kxf="$work/kx.txt" pf="$work/probe.json" samples="" kxt=0 t0 t1 c0 c1 p0 p1 echo=""
	local line gen_pid=""
	rm -f "$kxf" "$pf"
	[ "$probe" = 1 ] && warm "$s"
	if [ "$qps" -gt 0 ]; then
		pass_off
		kxt=$((duration + kx_lead + kx_tail))
		kx_start "$NS_POD" "$POD_ADDR" "$node_mac" "$kxt" "$qps" "$work/$list.txt" "$kxf"
		gen_pid=$KX_PID
		sleep "$kx_lead"
		kx_alive "$s" "$gen_pid" "$kxf"
	else
		pass_on
	fi
	p0=$(progs_snap)
	c0=$(cpu_snap)
	t0=$(date +%s.%N)
	if [ "$probe" = 1 ]; then
		samples="$out/samples/$s.$rep.$label.txt"
		case "$s" in reflector*) echo=-e ;; esac
		# shellcheck disable=SC2086 # $echo: one flag or none
		ip netns exec "$NS_PROBE" "$prober" -s "$NODE_LOCAL" -B "$probe_port" -c 0 -P 10 \
			-r "$probe_rate" -d "$duration" -t "$probe_timeout_ms" -f "$work/hits.txt" \
			$echo -w "$samples" >"$pf" 2>"$work/probe.err" &
		local ppid=$!
		wait_pid "$ppid" $((duration + 30)) "the prober" || die "$s: the prober failed:" \
			"$(cat "$work/probe.err")"
	elif [ "$profile" = 1 ] && [[ $label == cost-* ]]; then
		mkdir -p "$out/profile"
		perf record -q -a -e cpu-clock -F 10000 -o "$out/profile/$s.$rep.$label.data" \
			-- sleep "$duration" >/dev/null 2>&1 || say "$s: perf record failed"
	else
		sleep "$duration"
	fi
	t1=$(date +%s.%N)
	c1=$(cpu_snap)
	p1=$(progs_snap)
	if [ -n "$gen_pid" ]; then
		kx_wait "$s" "$gen_pid" $((kxt + 60)) "$kxf"
		in_pod ip link set dev eth0 xdp off 2>/dev/null
	fi
	kill -0 "${SERVER_PID:-$$}" 2>/dev/null || die "$s exited during the $label run"
	line=$(report cell --server "$s" --repeat "$rep" --label "$label" --qps "$qps" \
		--list "$list" --kx "$kxf" --probe "$pf" --samples "$samples" --progs "$p0" "$p1" \
		--cpu "$c0" "$c1" --window "$t0" "$t1" --hz "$hz") ||
		die "$s: cannot read the $label run's output"
	echo "$line" >>"$results"
	[ -s "$out/profile/$s.$rep.$label.data" ] && profile_lines "$s.$rep.$label" "$p1"
	[ ! -s "$pf" ] || ! grep -q '"wrong": [1-9]' "$pf" ||
		say "$s, $label: the prober got wrong answers: $(cat "$pf")"
}

# profile_lines NAME PROGS: per-line profiles of the programs in PROGS (progs_snap's JSON), loaded
# still, from OUT/profile/NAME.data; the samples of the fast path's functions JITed apart (its
# global functions, bpf/ndc_fastpath.bpf.c, and table_soa) count as their caller's
profile_funcs=ndc_express_get_skb,ndc_express_get_xdp,ndc_memo_put_skb,ndc_memo_put_xdp,table_soa
profile_lines() {
	local name
	for name in $(python3 -c 'import json, sys
print(" ".join(sorted({p["name"] for p in json.loads(sys.argv[1]).values()})))' "$2"); do
		python3 "$here/perf_lines.py" "$out/profile/$1.data" "$name" \
			--lines "$build/tests/bench_prog_lines" --funcs "$profile_funcs" \
			>"$out/profile/$1.$name.txt" 2>&1 ||
			say "$1: no profile of $name ($(tail -1 "$out/profile/$1.$name.txt"))"
	done
}

# --- Memory (issue 21): each ndcache server's RSS, peak RSS and BPF map bytes (memlock from
# /proc/PID/fdinfo, lib.sh bench_mem) once it answers, printed below the latency table. ---
mem_note() {
	local line
	case "$1" in ndcache-* | base-*) ;; *) return 0 ;; esac
	line=$(bench_mem_line "$SERVER_PID") || line="not measured (no /proc/$SERVER_PID)"
	echo "  $1, repeat $2: $line" >>"$out/memory.txt"
	# The answer table from the agent's metrics; the common region's slots (128 bytes each) are
	# the pages the names pods ask spread over (docs/bench/FASTPATH.md).
	line=$(in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics 2>/dev/null | awk '
		$1 == "ndcache_fastpath_table_entries" { e = $2 }
		$1 == "ndcache_fastpath_table_rare_entries" { r = $2 }
		$1 == "ndcache_fastpath_table_slots" { s = $2 }
		$1 == "ndcache_fastpath_table_common_slots" { c = $2 }
		$1 == "ndcache_fastpath_table_bytes" { b = $2 }
		END { if (s != "") printf "table %d entries (%d rare), %d slots (%d common: %.1f MB), %.1f MB\n",
			e, r, s, c, c * 128 / 1048576, b / 1048576 }')
	[ -z "$line" ] || echo "    $line" >>"$out/memory.txt"
}
mem_report() {
	[ -s "$out/memory.txt" ] || return 0
	{
		echo
		echo "Memory of each ndcache server once it answered ($services services):"
		cat "$out/memory.txt"
	} | tee -a "$out/latency.txt"
}
# --- end of the memory block ---

# --- Saturation (issue 35): the highest background load of which the server answers at least
# 99% (kxdpgun's replies/s at least 0.99 of the load it was asked to send), no prober. kxdpgun
# runs on CPU 1; elsewhere in this script the in-kernel programs run in the softirq of its sends
# there, so its maximum is the generator's and the program's together. Here tc servers' program
# gets CPU 0 to itself (sat_steer): RPS on eth-pod puts its receive backlog, and so tc ingress,
# on CPU 0, and an overloaded program drops (backlog) instead of slowing the generator. XDP
# servers stay on CPU 1 with kxdpgun: eth-pod's NAPI made threaded and pinned to CPU 0 (even at
# SCHED_FIFO) held the XDP reflector to 83-88k QPS, a tenth of its maximum, so their figure is
# the generator's and the program's on one core together.
# Servers in user space are on CPU 0 anyway. Search, sat_steps loads in all: first MAX (the
# server's own kxdpgun maximum, measured just before without that steering), then up by half
# while every load is answered, then halving the gap between the highest load answered and the
# lowest not (0 below MAX). With no load missed the result is a lower bound ("at_max"). One search
# per name set of --saturation-names: hot (the hot set: the traffic the answer reflector, which
# has no table, is the floor of) and all (every name: a table load each). One JSON line
# "saturation" per server, repeat and name set. kernel.bpf_stats_enabled is 0 meanwhile, as on a
# node: its two clock reads around every program run would charge a tc server with an egress
# program (ndcache: fail-open's) twice a query, the others once. ---
# A load not answered is measured once more before it counts as too high: on a shared host a
# burst of other work on CPU 1 slows kxdpgun as an overloaded program would.
sat_ok() { # sat_ok SERVER REPEAT QPS NAMES: 0 when a cell at QPS answered at least 99% of QPS
	local replies try
	for try in a b; do
		cell "$1" "$2" "satrun-$4-$3$try" "$3" "$4" 0
		replies=$(report field "$results" "$1" "$2" "satrun-$4-$3$try" kx.replies_per_s)
		[ "${replies:-0}" -lt $(($3 * 99 / 100)) ] || return 0
	done
	return 1
}
# sat_steer on|off SERVER: tc servers' receive processing on CPU 0 (see above), or back; XDP
# servers stay on CPU 1 with kxdpgun (see above).
sat_steer() {
	case "$2" in *xdp) return 0 ;; esac
	in_node sh -c "echo $([ "$1" = on ] && echo 1 || echo 0) \
		>/sys/class/net/eth-pod/queues/rx-0/rps_cpus" || die "$2: cannot set RPS on eth-pod"
}
# saturation_search SERVER REPEAT MAX NAMES: one search over the name set NAMES (hot, all)
saturation_search() {
	local s=$1 rep=$2 max=$3 names=$4 lo=0 hi q k tried=""
	max=$((max / 1000 * 1000))
	[ "$max" -gt 0 ] || return 0
	sat_steer on "$s"
	hi=0
	for ((k = 0; k < sat_steps; k++)); do
		if [ "$hi" = 0 ]; then # none missed yet: MAX, then up by half each time
			q=$((k == 0 ? max : lo * 3 / 2000 * 1000))
			[ "$q" -le "$kx_max_qps" ] || break
		else
			q=$(((lo + hi) / 2000 * 1000))
			[ "$q" -gt "$lo" ] || break
		fi
		if sat_ok "$s" "$rep" "$q" "$names"; then
			lo=$q
			tried+=" $q:ok"
		else
			hi=$q
			tried+=" $q:no"
		fi
	done
	sat_steer off "$s"
	say "$s: saturation over $names names $lo QPS (tried$tried)"
	echo "{\"kind\": \"saturation\", \"server\": \"$s\", \"repeat\": \"$rep\"," \
		"\"names\": \"$names\"," \
		"\"qps\": $lo, \"max\": $max, \"at_max\": $([ "$hi" = 0 ] && echo true ||
			echo false), \"tried\": \"${tried# }\"}" >>"$results"
}
# --- end of the saturation block ---

session() {
	local s=$1 rep=$2 load sat names
	say "repeat $rep: $s"
	pass_on
	if ! server_start "$s" kx; then
		server_stop "$s"
		die "$s did not start: $START_ERR"
	fi
	if ! observe_set "$s"; then
		server_stop "$s"
		die "$s: cannot set its per-client counting (--clients, --base-clients)"
	fi
	if [[ $s != *reflector* ]] && ! check_answers "$s"; then
		server_stop "$s"
		die "$s: no answer from the pod (dig from $POD_ADDR timed out)"
	fi
	mem_note "$s" "$rep"
	warm "$s" all
	cell "$s" "$rep" max "$kx_max_qps" all 0
	sat=$(report field "$results" "$s" "$rep" max kx.replies_per_s)
	[ "${sat:-0}" -gt 0 ] || die "$s: kxdpgun got no replies at all"
	cell "$s" "$rep" cost-hot "$cost_rate" hot 0
	cell "$s" "$rep" cost-all "$cost_rate" all 0
	for load in "${load_list[@]}"; do
		if [ "$load" = sat ]; then
			cell "$s" "$rep" sat "$sat" all 1
		else
			cell "$s" "$rep" "$load" "$load" all 1
		fi
	done
	if [ "$saturation" = 1 ]; then
		# as on a node: no clock reads around each program run (kernel.bpf_stats_enabled)
		sysctl -qw kernel.bpf_stats_enabled=0 || die "cannot clear kernel.bpf_stats_enabled"
		for names in "${sat_list[@]}"; do
			saturation_search "$s" "$rep" "$sat" "$names"
		done
		sysctl -qw kernel.bpf_stats_enabled=1 || die "cannot set kernel.bpf_stats_enabled"
	fi
	# what the agent counted (kernel answers, passes by reason, the table), beside its log
	case "$s" in
	*reflector*) ;;
	dnsdist | pdns-recursor)
		# their own counters (cache hits and misses, queries sent), and nothing sent elsewhere
		{
			peer_stats "$s"
			echo "nftables: DNS queries the node sent to the upstream" \
				"$(upstream_counter upstream), to other addresses $(upstream_counter elsewhere)"
			[ "$s" != pdns-recursor ] ||
				echo "servers it asked or failed to reach: $(peer_addrs | sort -u | tr '\n' ' ')"
		} >"$out/logs/$s.$rep.metrics" 2>&1
		if ! peer_sent_check "$s"; then
			server_stop "$s"
			die "$s: $START_ERR"
		fi
		;;
	*)
		in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics \
			>"$out/logs/$s.$rep.metrics" 2>/dev/null
		;;
	esac
	server_stop "$s"
	[[ $s == *reflector* ]] || cp "$work/$s.log" "$out/logs/$s.$rep.log"
}

# --- Paired cost (issue 35, --cost-pairs): a server and its floor loaded at the same time, on
# two veths alike (the pod's, eth-pod, and the prober's, eth-probe, each to its own netns), and
# measured at the same time: a kxdpgun in each pod, both on CPU 1, sends the same hot set at the
# same rate, and both programs' run counts are read at the same moments. So the two figures of a
# round share whatever else the host ran meanwhile: on this shared host the floor's own figure
# moved 93-142 ns between the repeats of one run (docs/bench/FASTPATH.md, session 25) and 82-123
# ns between rounds seconds apart, more than the gap it was to judge. The control pair (the floor
# on both) says what the two veths and pods differ by; the server is on each veth for half of its
# rounds (pair_session). ---
# pair_cell PAIR ROUND POD_SERVER PROBE_SERVER HOOK: one round: kxdpgun on CPU 1 in each pod (source
# its address, to the node's MAC of its veth) at --cost-rate over the hot set; one JSON line
# "pair" per side to the results (the program at HOOK of the node's veth: ns per packet over the
# window; kxdpgun's counts)
pair_cell() {
	local kxt line side
	kxt=$((duration + kx_lead + kx_tail))
	in_pod ip link set dev eth0 xdp off 2>/dev/null
	ip netns exec "$NS_PROBE" ip link set dev eth0 xdp off 2>/dev/null
	if [ "$pair_mode" = alternate ]; then
		# one side at a time, the pod's first: each window's snapshots bracket its own traffic
		pair_measure "$1" "$kxt" pod
		pair_measure "$1" "$kxt" probe
	else
		pair_measure "$1" "$kxt" pod probe
	fi
	in_pod ip link set dev eth0 xdp off 2>/dev/null
	ip netns exec "$NS_PROBE" ip link set dev eth0 xdp off 2>/dev/null
	for side in pod probe; do
		side_of "$side" "$3" "$4"
		line=$(report paircell --pair "$1" --round "$2" --side "$side" --server "$SIDE_SERVER" \
			--iface "eth-$side" --hook "$5" --progs "${SNAP[$side.0]}" "${SNAP[$side.1]}" \
			--kx "$SIDE_KX") || die "$1: cannot read round $2's cell on eth-$side"
		echo "$line" >>"$results"
	done
}
# side_of pod|probe [POD_SERVER PROBE_SERVER]: what a pair's side is, in SIDE_NS, SIDE_ADDR and
# SIDE_MAC (its pod's namespace and address, the node's MAC of its veth), SIDE_KX (the path of its
# kxdpgun output) and SIDE_SERVER (which of the two servers its veth carries)
side_of() {
	SIDE_KX=$work/kx-$1.txt
	if [ "$1" = pod ]; then
		SIDE_NS=$NS_POD SIDE_ADDR=$POD_ADDR SIDE_MAC=$node_mac SIDE_SERVER=${2-}
	else
		SIDE_NS=$NS_PROBE SIDE_ADDR=$PROBE_ADDR SIDE_MAC=$probe_mac SIDE_SERVER=${3-}
	fi
}
declare -A SNAP # pair_measure's snapshots: SNAP[SIDE.0] before the window, SNAP[SIDE.1] after
# pair_measure PAIR SECS SIDE...: the listed sides' (pod, probe) kxdpgun at once for SECS s, at
# --cost-rate over the hot set; the programs on each side's veth (eth-SIDE) read into SNAP before
# and after the measurement window
pair_measure() {
	local pair=$1 kxt=$2 side
	local -A pid kx # each side's kxdpgun: its PID and the path of its output
	shift 2
	for side in "$@"; do
		side_of "$side"
		kx_start "$SIDE_NS" "$SIDE_ADDR" "$SIDE_MAC" "$kxt" "$cost_rate" "$work/hot.txt" \
			"$SIDE_KX"
		pid[$side]=$KX_PID kx[$side]=$SIDE_KX
	done
	sleep "$kx_lead"
	for side in "$@"; do
		kx_alive "$pair: the $side side" "${pid[$side]}" "${kx[$side]}"
	done
	for side in "$@"; do SNAP[$side.0]=$(iface_progs "eth-$side"); done
	sleep "$duration"
	for side in "$@"; do SNAP[$side.1]=$(iface_progs "eth-$side"); done
	for side in "$@"; do
		kx_wait "$pair: the $side side" "${pid[$side]}" $((kxt + 60)) "${kx[$side]}"
	done
}
# pair_rounds PAIR HOOK POD_SERVER PROBE_SERVER FIRST LAST: rounds FIRST to LAST
pair_rounds() {
	local r
	for ((r = $5; r <= $6; r++)); do
		pair_cell "$1" "$r" "$3" "$4" "$2"
	done
}
# pair_floor IFACE on|off FLOOR: the floor's program on the node's IFACE (tc ingress or XDP), or off
pair_floor() {
	if [ "$2" = off ]; then
		in_node tc qdisc del dev "$1" clsact 2>/dev/null
		in_node ip link set dev "$1" xdp off 2>/dev/null
		return 0
	fi
	case "$3" in
	*-xdp) in_node ip link set dev "$1" xdp obj "$answer_reflector" sec xdp ;;
	*) in_node tc qdisc add dev "$1" clsact &&
		in_node tc filter add dev "$1" ingress bpf da obj "$answer_reflector" sec tc ;;
	esac || die "cannot attach $answer_reflector ($3) to $1"
}
# pair_kernel SERVER IFACE: what the agent's kernel path answered so far (its metric), one JSON line
# "pairkernel" to the results: the report wants it at least 99% of what kxdpgun sent the server on
# IFACE, so that a server whose program passed the queries up (a pass costs less than an answer)
# is not taken for a fast one
pair_kernel() {
	local n
	n=$(in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics 2>/dev/null |
		awk '$1 == "ndcache_kernel_answers_total{kind=\"answer\"}" { print $2 }')
	echo "{\"kind\": \"pairkernel\", \"pair\": \"$1\", \"iface\": \"$2\", \"answers\": ${n:-null}}" \
		>>"$results"
}
pair_controls="" # the kinds (tc, xdp) whose control pair ran
# pair_session SERVER: the control pair (its floor on both veths, once per kind), then SERVER
# against its floor: the first half of the rounds with SERVER on eth-pod and the floor on
# eth-probe, the rest the other way round, so that what the veths differ by (the control's ratio)
# weighs on each side alike.
pair_session() {
	local s=$1 floor=answer-reflector hook=ingress kind=tc half=$(((cost_pairs + 1) / 2))
	case "$s" in *-xdp) floor=answer-reflector-xdp hook=xdp kind=xdp ;; esac
	# the prober's pod takes no probes here: no XDP on its eth0 but kxdpgun's own while it runs
	ip netns exec "$NS_PROBE" ip link set dev eth0 xdp off 2>/dev/null
	BENCH_IFACES=eth-pod
	if [[ " $pair_controls " != *" $kind "* ]]; then
		say "pairs: control, $floor on both veths"
		server_start "$floor" kx || die "$floor did not start: $START_ERR"
		pair_floor eth-probe on "$floor"
		pair_rounds "control-$kind" "$hook" "$floor" "$floor" 1 "$cost_pairs"
		server_stop "$floor"
		pair_floor eth-probe off
		pair_controls+=" $kind"
	fi
	say "pairs: $s on eth-pod, $floor on eth-probe (rounds 1-$half)"
	pass_on # for check_answers: an XDP server's replies (XDP_TX) reach the pod's eth0 with it
	if ! server_start "$s" kx; then
		server_stop "$s"
		die "$s did not start: $START_ERR"
	fi
	# an experiment floor answers every name with its constant: no answer check, no agent
	if [[ $s != answer-* ]] && { ! observe_set "$s" eth-pod || ! check_answers "$s"; }; then
		server_stop "$s"
		die "$s: no answer from the pod, or its per-client counting not set (--clients)"
	fi
	pair_floor eth-probe on "$floor"
	pair_rounds "$s" "$hook" "$s" "$floor" 1 "$half"
	[[ $s == answer-* ]] || pair_kernel "$s" eth-pod
	server_stop "$s"
	pair_floor eth-probe off
	# the other way round: the agent on the prober's veth only (its answers there are what
	# kxdpgun counts: under 99% answered is reported against the round)
	say "pairs: $s on eth-probe, $floor on eth-pod (rounds $((half + 1))-$cost_pairs)"
	BENCH_IFACES=eth-probe
	if ! server_start "$s" kx || ! observe_set "$s" eth-probe; then
		server_stop "$s"
		die "$s did not start on eth-probe ($START_ERR), or its per-client counting not set"
	fi
	pair_floor eth-pod on "$floor"
	pair_rounds "$s" "$hook" "$floor" "$s" $((half + 1)) "$cost_pairs"
	[[ $s == answer-* ]] || pair_kernel "$s" eth-probe
	server_stop "$s"
	pair_floor eth-pod off
	BENCH_IFACES="eth-pod eth-probe"
	say "$s: $cost_pairs rounds done"
}
if [ "$cost_pairs" -gt 0 ]; then
	probe_mac=$(in_node cat /sys/class/net/eth-probe/address) || die "no eth-probe in the node netns"
	started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
	say "pairs: ${servers[*]}, $cost_pairs rounds of ${duration}s at $cost_rate QPS each; about" \
		"$((${#servers[@]} * (20 + 2 * cost_pairs * (duration + kx_lead + kx_tail + 2) *
			$([ "$pair_mode" = alternate ] && echo 2 || echo 1)) / 60 + 1)) min ($pair_mode)"
	for s in "${servers[@]}"; do
		pair_session "$s"
	done
	report pairs --results "$results" --out "$out" --date "$started" \
		--machine "$(nproc) CPUs ($cpu_model), kernel $(uname -r)" --command "$cmdline" \
		--rate "$cost_rate" --duration "$duration" --hot "$hot" --mode "$pair_mode" ||
		die "the pairs report failed"
	exit 0
fi
# --- end of the pairs block ---

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
machine="$(nproc) CPUs ($cpu_model), kernel $(uname -r)"
ver() { "$@" 2>&1 | sed -n 's/.*[Vv]ersion //p' | head -1; }
software="ndcache $("$bin" --version 2>&1 | head -1 | sed 's/^ndcache //')"
[ -z "$base_bin" ] || software+=" (base-*: $base_bin)"
software+=", unbound $(ver unbound -V), knotd $(ver knotd -V), kresd $(ver kresd -V)"
software+=", dnsdist $(dnsdist --version 2>&1 | awk 'NR == 1 { print $2 }')"
software+=", pdns_recursor $(pdns_recursor --version 2>&1 | sed -n 's/.*PowerDNS Recursor \([^ ]*\).*/\1/p' |
	head -1)"
software+=", kxdpgun $(ver kxdpgun -V)"
per=$((15 + 3 * duration + (${#load_list[@]} + 3 + saturation * sat_steps * ${#sat_list[@]}) *
	(duration + kx_lead + kx_tail + 1)))
# the caches' warm-ups (warm): every name, then before each prober run
names=$(wc -l <"$work/hits.txt")
warm_n=$((probe_rate * duration < names ? probe_rate * duration : names))
caches=0
for s in "${servers[@]}"; do
	case "$s" in dnsdist | pdns-recursor) caches=$((caches + 1)) ;; esac
done
total=$((per * ${#servers[@]} + caches * (10 + names / 4000 + ${#load_list[@]} * (2 + warm_n / 4000))))
say "${#servers[@]} servers x $repeats repeat(s), ${duration}s per measurement; about" \
	"$((total * repeats / 60 + 1)) min"

for ((rep = 1; rep <= repeats; rep++)); do
	# The scale for the cost figures: one load from memory on CPU 1 (where kxdpgun's traffic is
	# answered), with no traffic; once per repeat.
	line=$(taskset -c 1 "$memlat") || die "bench_memlat failed"
	echo "{\"kind\": \"memlat\", \"repeat\": \"$rep\", ${line#\{}" >>"$results"
	# Each repeat starts one server later, so that none is always first or last.
	n=${#servers[@]}
	for ((k = 0; k < n; k++)); do
		session "${servers[$(((k + rep - 1) % n))]}" "$rep"
	done
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out/meta.json" <<EOF || die "cannot write meta.json"
import json, sys
json.dump({"date": "$started", "machine": "$machine", "software": "$software",
           "command": "$cmdline", "load_before": "$load_before", "load_after": "$load_after",
           "servers": "${servers[*]}".split(), "services": $services, "hot": $hot,
           "repeats": $repeats, "duration": $duration, "probe_rate": $probe_rate,
           "probe_timeout_ms": $probe_timeout_ms, "cost_rate": $cost_rate,
           "loads": "${load_list[*]}".split(), "table_size": $table_size, "ttl": $ttl},
          open(sys.argv[1], "w"), indent=1)
EOF
echo
report report --results "$results" --meta "$out/meta.json" --out "$out" ||
	die "the report failed"
mem_report
echo
say "results: $out/latency.txt, latency.csv, latency.json; samples in $out/samples"
exit 0
