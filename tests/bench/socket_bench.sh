#!/usr/bin/env bash
# Socket-path benchmark: ndcache (dataplane mode socket, one worker) against unbound (local-data,
# one thread), measured in the same run on this machine, on the same synthetic cluster, from a
# pod network namespace over a veth to 169.254.20.10 in the node namespace
# (tests/integration/lib.sh).
# Each server runs pinned to CPU 0, dnsperf pinned to CPU 1. For each server:
#   (a) max QPS: dnsperf at unlimited rate, -c 4 -q 500: answered QPS and lost %
#   (b) fixed rate: dnsperf -Q RATE -v: p50 / p99 / p99.9 latency from every query's latency
# then a table, the ndcache/unbound ratios, whether the target holds, and a CSV.
#
# Usage: tests/bench/socket_bench.sh [--duration S] [--rate R] [--services N] [--out FILE.csv]
#                                    [--build DIR] [--only ndcache|unbound]
# Needs root (apt, network namespaces). Exit 0 whether or not the target is met; non-zero when
# something could not be run or a server answered wrongly.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

duration=10
rate=10000
services=1000
namespaces=20
headless_pct=20
endpoints=3
ttl=30
build="$root/build-bench"
out=""
only=""
# dnsperf shape for the max-QPS run: 4 sockets, 500 outstanding; a query unanswered after 1 s
# counts as lost (the default 5 s would only stretch each run).
max_clients=4
max_outstanding=500
timeout_s=1
warmup_s=2

BENCH_NAME=socket_bench
# shellcheck source=lib.sh
. "$here/lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--duration) duration=${2:-}; shift 2 ;;
	--rate) rate=${2:-}; shift 2 ;;
	--services) services=${2:-}; shift 2 ;;
	--out) out=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	--only) only=${2:-}; shift 2 ;;
	*) echo "socket_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
done
if ! is_uint "$duration" || [ "$duration" -gt 300 ]; then
	die "--duration: 1..300 seconds"
fi
is_uint "$rate" || die "--rate: a positive integer (queries per second)"
is_uint "$services" || die "--services: a positive integer"
case "$only" in
"") servers=(ndcache unbound) ;;
ndcache | unbound) servers=("$only") ;;
*) die "--only: ndcache or unbound" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (packages, network namespaces)"
[ "$(nproc)" -ge 2 ] || die "needs at least 2 CPUs (server on CPU 0, dnsperf on CPU 1)"
[ -n "$out" ] || out="$build/socket_bench.csv"

"$root/deploy/deps.sh" bench || die "deploy/deps.sh bench failed"
for tool in dnsperf unbound dig taskset python3 ip; do
	command -v "$tool" >/dev/null || die "$tool not found after deploy/deps.sh bench"
done

bin="$build/control/ndcache"
if [[ " ${servers[*]} " == *" ndcache "* ]]; then
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" --buildtype=release >/dev/null || die "meson setup $build failed"
	fi
	ninja -C "$build" control/ndcache >"$build/socket_bench-build.log" 2>&1 || {
		tail -20 "$build/socket_bench-build.log" >&2
		die "building $bin failed (log: $build/socket_bench-build.log)"
	}
fi

# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || die "could not create the network namespaces"
interrupted=0
trap 'interrupted=1; exit 130' INT TERM
work="$TOPO_DIR"
cluster="$work/cluster"
python3 "$here/gen_cluster.py" --services "$services" --namespaces "$namespaces" \
	--headless-pct "$headless_pct" --endpoints "$endpoints" --ttl "$ttl" --out "$cluster" ||
	die "gen_cluster.py failed"
queries="$cluster/queries.txt"
n_headless=$(awk -F'[ ,]' 'NF > 2 { n++ } END { print n + 0 }' "$cluster/expected.txt")

# Names whose answers are checked on every server before it is measured, with the generator's
# expected IPs: the kubernetes service, the first headless service, and every 50th service.
check_names=$(awk -F'[ ,]' 'NR == 1 || NR % 50 == 0 || (NF > 2 && !h++)' "$cluster/expected.txt")
probe_name=kubernetes.default.svc.cluster.local
# First headless name, for the cross-server answer comparison.
probe_headless=$(awk -F'[ ,]' 'NF > 2 { print $1; exit }' "$cluster/expected.txt")

write_unbound_conf() {
	bench_unbound_conf "$work/unbound.conf" "$work" "$cluster"
}

write_ndcache_conf() {
	cat >"$work/ndcache.yaml" <<EOF
cluster_domain: cluster.local
listen: [$NODE_LOCAL]
port: 53
upstream: []
source: {snapshot: $cluster/cluster.json}
records: {ttl: $ttl}
dataplane: {mode: socket}
workers: 1
EOF
}

# lib.sh's ndcache_up cannot pin the server to a CPU, so both servers start here alike. Not via
# the in_node function: a function run with & is a subshell, so $! would be the subshell's PID and
# killing it would leave the server running. ip netns exec and taskset both exec, so $! here is
# the server itself.
SERVER_PID=""
server_start() {
	local name=$1 log="$work/$1.log"
	if in_node dig +time=1 +tries=1 "@$NODE_LOCAL" "$probe_name" >/dev/null 2>&1; then
		die "something already answers on $NODE_LOCAL:53 before $name starts"
	fi
	case "$name" in
	ndcache)
		write_ndcache_conf
		ip netns exec "$NS_NODE" taskset -c 0 "$bin" --config "$work/ndcache.yaml" >"$log" 2>&1 &
		;;
	unbound)
		write_unbound_conf
		ip netns exec "$NS_NODE" taskset -c 0 unbound -d -c "$work/unbound.conf" >"$log" 2>&1 &
		;;
	esac
	SERVER_PID=$!
	TOPO_PIDS+=("$SERVER_PID")
	if ! wait_dns "$NODE_LOCAL" 53 "$probe_name" 15 || ! kill -0 "$SERVER_PID" 2>/dev/null; then
		tail -20 "$log" >&2
		die "$name did not start answering on $NODE_LOCAL:53"
	fi
}

server_stop() {
	local pid=$SERVER_PID keep=() p
	kill "$pid" 2>/dev/null
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for p in "${TOPO_PIDS[@]}"; do
		[ "$p" = "$pid" ] || keep+=("$p")
	done
	TOPO_PIDS=("${keep[@]}")
	SERVER_PID=""
}

# The answer section as the pod sees it, one normalised RR per line, sorted.
answer_rrs() {
	in_pod dig +time=2 +tries=1 +noall +answer "@$NODE_LOCAL" "$1" A </dev/null 2>&1 |
		awk '!/^;/ && NF { print $1, $2, $3, $4, $5 }' | sort
}

indent() { sed 's/^/    /'; }

# Every check name must answer exactly the generator's IPs, with the configured TTL.
check_answers() {
	local server=$1 name ips got want bad=0
	while read -r name ips; do
		got=$(answer_rrs "$name")
		want=$(tr ',' '\n' <<<"$ips" | awk -v n="$name." -v t="$ttl" '{ print n, t, "IN", "A", $1 }' |
			sort)
		if [ "$got" != "$want" ]; then
			printf 'socket_bench: %s answers %s wrongly\n  expected:\n%s\n  got:\n%s\n' \
				"$server" "$name" "$(indent <<<"$want")" "$(indent <<<"${got:-(nothing)}")" >&2
			bad=1
		fi
	done <<<"$check_names"
	[ $bad = 0 ] || die "$server failed the answer check: not measuring it"
	answer_rrs "$probe_name" >"$work/$server.probe"
	if [ -n "$probe_headless" ]; then
		answer_rrs "$probe_headless" >>"$work/$server.probe"
	fi
}

# /proc/stat jiffies of one CPU: "busy total task", task being user + nice + system (time in
# processes, not in interrupts).
cpu_ticks() {
	awk -v c="cpu$1" '$1 == c {
		t = 0; for (i = 2; i <= NF; i++) t += $i
		print t - $5 - $6, t, $2 + $3 + $4 }' /proc/stat
}
# utime + stime of a process, all threads (fields after the parenthesised comm).
proc_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b > 0 ? 100 * a / b : 0) }'; }

# dnsperf's summary: "Response codes:       NOERROR 208867 (100.00%)" must name NOERROR only.
check_rcodes() {
	local server=$1 file=$2 codes names
	codes=$(sed -n 's/^ *Response codes: *//p' "$file")
	names=$(grep -o '[A-Z][A-Z]* ' <<<"$codes" | tr -d ' ' | sort -u)
	if [ -z "$codes" ] || [ "$names" != NOERROR ]; then
		tail -15 "$file" >&2
		die "$server: dnsperf saw response codes other than NOERROR (or none): '${codes:-none}'"
	fi
}
summary_field() { sed -n "s/^ *$2: *\([0-9.]*\).*/\1/p" "$1"; }
lost_pct() { sed -n 's/^ *Queries lost: *[0-9]* (\([0-9.]*\)%).*/\1/p' "$1"; }

# dnsperf_pod OUTFILE ARGS...: dnsperf from the pod netns on CPU 1, output to OUTFILE.
# On Ctrl-C dnsperf catches SIGINT itself and exits 0, and then bash does not run its INT trap
# (it takes the signal as handled by the child), so an interrupted run is recognised here.
dnsperf_pod() {
	local f=$1 rc
	shift
	in_pod taskset -c 1 dnsperf -s "$NODE_LOCAL" -d "$queries" -t "$timeout_s" "$@" >"$f" 2>&1
	rc=$?
	if [ "$interrupted" = 1 ] || grep -q 'Testing complete (interruption)' "$f"; then
		echo "socket_bench: interrupted" >&2
		exit 130
	fi
	return $rc
}

declare -A R
measure() {
	local s=$1 f t0 t1 u0 u1 c0a c0b c1a c1b k0 k1 pa pb ticks
	server_start "$s"
	check_answers "$s"

	dnsperf_pod "$work/$s.warmup.txt" -l "$warmup_s" -Q "$rate" ||
		die "$s: dnsperf warm-up failed: $(tail -3 "$work/$s.warmup.txt")"

	f="$work/$s.max.txt"
	read -r c0a t0 k0 < <(cpu_ticks 0)
	read -r c1a u0 _ < <(cpu_ticks 1)
	pa=$(proc_ticks "$SERVER_PID")
	dnsperf_pod "$f" -c "$max_clients" -q "$max_outstanding" -l "$duration" ||
		die "$s: dnsperf (max QPS) failed: $(tail -3 "$f")"
	read -r c0b t1 k1 < <(cpu_ticks 0)
	read -r c1b u1 _ < <(cpu_ticks 1)
	kill -0 "$SERVER_PID" 2>/dev/null || die "$s exited during the max-QPS run"
	pb=$(proc_ticks "$SERVER_PID")
	check_rcodes "$s" "$f"
	R[$s.qps]=$(summary_field "$f" "Queries per second")
	R[$s.lost]=$(lost_pct "$f")
	R[$s.resp]=$(sed -n 's/^ *Average packet size: .*response \([0-9]*\).*/\1/p' "$f")
	# One CPU's jiffies over the run are its wall time in the unit of the process times.
	ticks=$((t1 - t0))
	R[$s.srvcpu]=$(pct "$((pb - pa))" "$ticks")
	R[$s.cpu0]=$(pct "$((c0b - c0a))" "$ticks")
	R[$s.cpu1]=$(pct "$((c1b - c1a))" "$((u1 - u0))")
	# Process time on CPU 0 that was not the server's: other work competing with it.
	R[$s.other0]=$(pct "$((k1 - k0 - (pb - pa)))" "$ticks")
	[ "${R[$s.other0]}" -ge 0 ] || R[$s.other0]=0
	[ -n "${R[$s.qps]}" ] || die "$s: no 'Queries per second' in dnsperf output ($f)"

	f="$work/$s.rate.txt"
	read -r _ t0 k0 < <(cpu_ticks 0)
	pa=$(proc_ticks "$SERVER_PID")
	dnsperf_pod "$f" -Q "$rate" -l "$duration" -v ||
		die "$s: dnsperf (fixed rate) failed: $(tail -3 "$f")"
	read -r _ t1 k1 < <(cpu_ticks 0)
	kill -0 "$SERVER_PID" 2>/dev/null || die "$s exited during the fixed-rate run"
	pb=$(proc_ticks "$SERVER_PID")
	R[$s.other0_rate]=$(pct "$((k1 - k0 - (pb - pa)))" "$((t1 - t0))")
	[ "${R[$s.other0_rate]}" -ge 0 ] || R[$s.other0_rate]=0
	check_rcodes "$s" "$f"
	R[$s.rate_lost]=$(lost_pct "$f")
	R[$s.rate_qps]=$(summary_field "$f" "Queries per second")
	local kv
	kv=$(python3 "$here/percentiles.py" "$f") || die "$s: no per-query latencies in $f"
	local answered lost noerror other_rcodes p50_us p99_us p999_us
	eval "$kv"
	[ "$other_rcodes" = 0 ] || die "$s: $other_rcodes answers at fixed rate were not NOERROR"
	R[$s.p50]=$p50_us
	R[$s.p99]=$p99_us
	R[$s.p999]=$p999_us
	: "$answered" "$lost" "$noerror"
	if ! kill -0 "$SERVER_PID" 2>/dev/null; then
		tail -20 "$work/$s.log" >&2
		die "$s exited during the benchmark"
	fi
	server_stop
}

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# Other work on the machine skews every figure: the load average before the run says how much.
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
kernel=$(uname -r)
cpus=$(nproc)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
ver_unbound=$(unbound -V 2>/dev/null | sed -n 's/^Version //p' | head -1)
ver_dnsperf=$(dnsperf -h 2>&1 | sed -n 's/^Version //p' | head -1)
ver_ndcache=""
if [[ " ${servers[*]} " == *" ndcache "* ]]; then
	ver_ndcache=$("$bin" --version 2>&1 | head -1 | sed "s/^ndcache //")
fi
echo "socket_bench: ${servers[*]}: ${duration}s per measurement, fixed rate $rate QPS," \
	"$services services; about $(((2 * duration + warmup_s + 1) * ${#servers[@]}))s" >&2

for s in "${servers[@]}"; do
	echo "socket_bench: measuring $s" >&2
	measure "$s"
done

# Both servers must have given the same answer sections to the same questions.
if [ ${#servers[@]} = 2 ] && ! cmp -s "$work/ndcache.probe" "$work/unbound.probe"; then
	diff "$work/ndcache.probe" "$work/unbound.probe" >&2
	die "ndcache and unbound answer $probe_name / $probe_headless differently"
fi

# "lost" percentiles sort after every number.
num_or_inf() { [ "$1" = lost ] && echo 1e18 || echo "$1"; }
fmt_qps() { awk -v q="$1" 'BEGIN { printf "%.0f", q }'; }

{
	echo
	echo "ndcache socket-path benchmark, $started"
	echo "machine: $cpus CPUs ($cpu_model), kernel $kernel, load average before the run" \
		"$loadavg; servers on CPU 0, dnsperf on CPU 1"
	echo "software: ${ver_ndcache:+ndcache $ver_ndcache, }unbound $ver_unbound, dnsperf $ver_dnsperf"
	echo "workload: $services services ($n_headless headless, $endpoints endpoints each) in" \
		"$namespaces namespaces; A queries for service names, all cluster hits; pod netns -> veth ->" \
		"$NODE_LOCAL"
	echo "max QPS: dnsperf -c $max_clients -q $max_outstanding -l $duration, unlimited rate;" \
		"latency: dnsperf -Q $rate -l $duration -v (lost queries rank last)"
	echo
	printf '%-8s %10s %7s %6s %8s %8s %8s | %8s %8s %8s %8s %7s\n' server "max QPS" "lost %" \
		"resp B" "srv CPU%" "CPU0 %" "CPU1 %" "at QPS" "p50 us" "p99 us" "p99.9 us" "lost %"
	for s in "${servers[@]}"; do
		printf '%-8s %10s %7s %6s %8s %8s %8s | %8s %8s %8s %8s %7s\n' "$s" \
			"$(fmt_qps "${R[$s.qps]}")" "${R[$s.lost]}" "${R[$s.resp]}" "${R[$s.srvcpu]}" \
			"${R[$s.cpu0]}" \
			"${R[$s.cpu1]}" "$rate" "${R[$s.p50]}" "${R[$s.p99]}" "${R[$s.p999]}" \
			"${R[$s.rate_lost]}"
	done
	echo
	for s in "${servers[@]}"; do
		if [ "${R[$s.other0]}" -ge 5 ]; then
			echo "warning: other processes took ${R[$s.other0]}% of CPU 0 during the $s" \
				"max-QPS run: the machine was not idle, figures are skewed"
		fi
		if [ "${R[$s.other0_rate]}" -ge 5 ]; then
			echo "warning: other processes took ${R[$s.other0_rate]}% of CPU 0 during the $s" \
				"latency run: the machine was not idle, figures are skewed"
		fi
		if awk -v a="${R[$s.rate_qps]}" -v r="$rate" 'BEGIN { exit !(a < 0.95 * r) }'; then
			echo "warning: $s was offered only $(fmt_qps "${R[$s.rate_qps]}") of $rate QPS in" \
				"the latency run: its percentiles are for that lower rate"
		fi
		if [ "${R[$s.cpu1]}" -ge 90 ] && [ "${R[$s.cpu0]}" -lt 90 ]; then
			echo "note: $s max QPS is bounded by the generator (CPU 1 ${R[$s.cpu1]}% busy," \
				"CPU 0 ${R[$s.cpu0]}%): a lower bound for $s"
		fi
	done
	if [ ${#servers[@]} = 2 ]; then
		awk -v qn="${R[ndcache.qps]}" -v qu="${R[unbound.qps]}" \
			-v pn="$(num_or_inf "${R[ndcache.p99]}")" -v pu="$(num_or_inf "${R[unbound.p99]}")" \
			'BEGIN {
			r1 = qu > 0 ? sprintf("%.2f", qn / qu) : "n/a"
			r2 = (pu > 0 && pu < 1e18 && pn < 1e18) ? sprintf("%.2f", pn / pu) : "n/a"
			printf "ratio ndcache/unbound: max QPS %s, p99 %s\n", r1, r2
			met = (qn >= qu && pn < 1e18 && pn <= pu)
			printf "target (ndcache max QPS >= unbound'"'"'s, p99 <= unbound'"'"'s): %s\n",
				met ? "target met" : "target missed"
		}'
	else
		echo "only $only measured: no ratio, no target verdict"
	fi
} | tee "$work/table.txt"

mkdir -p "$(dirname "$out")" || die "cannot create the directory of $out"
{
	echo "date,server,max_qps,max_lost_pct,response_bytes,server_cpu_pct,cpu0_busy_pct,cpu1_busy_pct,cpu0_other_pct,rate_qps,rate_answered_qps,rate_cpu0_other_pct,p50_us,p99_us,p999_us,rate_lost_pct,services,duration_s,nproc,kernel,loadavg1,server_version,dnsperf_version"
	for s in "${servers[@]}"; do
		v=$ver_unbound
		[ "$s" = ndcache ] && v=$ver_ndcache
		echo "$started,$s,$(fmt_qps "${R[$s.qps]}"),${R[$s.lost]},${R[$s.resp]},${R[$s.srvcpu]},${R[$s.cpu0]},${R[$s.cpu1]},${R[$s.other0]},$rate,$(fmt_qps "${R[$s.rate_qps]}"),${R[$s.other0_rate]},${R[$s.p50]},${R[$s.p99]},${R[$s.p999]},${R[$s.rate_lost]},$services,$duration,$cpus,$kernel,${loadavg%% *},\"${v//\"/}\",$ver_dnsperf"
	done
} >"$out" || die "cannot write $out"
echo "socket_bench: CSV written to $out" >&2
exit 0
