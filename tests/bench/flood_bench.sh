#!/usr/bin/env bash
# Random-subdomain flood benchmark: how much ndcache's resident memory grows when a pod asks for
# millions of distinct never-seen names (the upstream answers NXDOMAIN with an SOA, so every one
# is cached, and in tc mode published to the kernel's table, until cache.max_entries evicts it).
# For each mode (socket, tc): ndcache in the node netns of tests/integration/lib.sh with the
# default cache (max_entries 100000, max_bytes 64M) unless --max-entries says otherwise, an
# unbound upstream at 169.254.53.1 (one thread, no query log) authoritative for example.com,
# and tests/integration/hostile.py flood sending NAMES names from the pod at RATE per second.
# Prints, per mode: names sent and answered, seconds, VmRSS before, right after and 5 s after the
# flood, VmHWM (peak), the cache's entries, and the worst wait of a resolver worker for a cache
# shard's lock and the worst hold of one by an insert (ndcache_cache_lock_*_max_us); a benchmark, not a test: no pass/fail, exit 0
# when every mode ran. Issue 10's bound is growth within 64 MB.
#
# Usage: tests/bench/flood_bench.sh [--names N] [--rate R] [--modes "socket tc"]
#                                   [--max-entries N] [--build DIR]
# Defaults: 3000000 names at 10000 per second (about 5 minutes per mode), both modes, build dir
# "build" (built if missing). Needs root (network namespaces, BPF).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

names=3000000
rate=10000
modes="socket tc"
max_entries=""
build="$root/build"

BENCH_NAME=flood_bench
# shellcheck source=lib.sh
. "$here/lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--names) names=${2:-}; shift 2 ;;
	--rate) rate=${2:-}; shift 2 ;;
	--modes) modes=${2:-}; shift 2 ;;
	--max-entries) max_entries=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	*) echo "flood_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
done
is_uint "$names" || die "--names: a positive integer"
is_uint "$rate" || die "--rate: a positive integer (queries per second)"
[ -z "$max_entries" ] || is_uint "$max_entries" || die "--max-entries: a positive integer"
for m in $modes; do
	case "$m" in
	socket | tc | xdp) ;;
	*) die "--modes: socket, tc and/or xdp" ;;
	esac
done
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF)"
for tool in unbound dig python3 ip curl; do
	command -v "$tool" >/dev/null || die "$tool not found (deploy/deps.sh test installs it)"
done
bin="$build/control/ndcache"
if [ ! -x "$bin" ]; then
	[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || die "meson setup $build failed"
	ninja -C "$build" control/ndcache >/dev/null || die "building $bin failed"
fi
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs"

# shellcheck source=../integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || die "topology"

# The upstream: unbound without lib.sh's query log (millions of lines), NXDOMAIN + SOA (negative
# TTL 60) for every name under example.com.
conf="$TOPO_DIR/unbound.conf"
cat >"$conf" <<EOF
server:
	interface: $UPSTREAM_ADDR
	port: 53
	do-daemonize: no
	use-syslog: no
	logfile: ""
	verbosity: 0
	chroot: ""
	username: ""
	directory: "$TOPO_DIR"
	pidfile: ""
	access-control: 169.254.0.0/16 allow
	num-threads: 1
	do-ip6: no
	so-rcvbuf: 4m
	local-zone: "." static
	local-zone: "example.com." static
	local-data: "example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 3600 600 86400 60"
	local-data: "www.example.com. 300 IN A 192.0.2.10"
EOF
ip netns exec "$NS_NODE" unbound -d -c "$conf" >"$TOPO_DIR/unbound.log" 2>&1 &
TOPO_PIDS+=($!)
wait_dns "$UPSTREAM_ADDR" 53 www.example.com || die "unbound did not start"

status() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null; }
metric() { in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics | awk -v m="$1" '$1 == m {print $2}'; }

results=()
for mode in $modes; do
	cfg="$TOPO_DIR/ndcache-$mode.yaml"
	{
		printf 'listen: [%s]\nupstream: [%s:53]\n' "$NODE_LOCAL" "$UPSTREAM_ADDR"
		printf 'source:\n  snapshot: %s\n' "$root/deploy/examples/sample-cluster.json"
		printf 'dataplane:\n  mode: %s\n  interfaces: [eth-pod]\nworkers: 2\n' "$mode"
		[ -z "$max_entries" ] || printf 'cache:\n  max_entries: %s\n' "$max_entries"
	} >"$cfg"
	ndcache_up "$bin" "$cfg" || die "$mode: ndcache did not start"
	if [ "$mode" != socket ] && grep -q "fast path unavailable" "$TOPO_DIR/ndcache.log"; then
		echo "flood_bench: $mode: the fast path did not load; skipped" >&2
		kill -TERM "$NDCACHE_PID"
		wait "$NDCACHE_PID" 2>/dev/null
		continue
	fi
	in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" www.example.com A >/dev/null
	before=$(status "$NDCACHE_PID" VmRSS)
	echo "flood_bench: $mode: $names names at $rate/s, RSS before ${before} kB" >&2
	out=$(timeout $((names * 3 / rate + 120)) ip netns exec "$NS_POD" python3 \
		"$root/tests/integration/hostile.py" flood "$NODE_LOCAL" --names "$names" \
		--qps "$rate" --suffix "$mode.flood.example.com") || die "$mode: flood failed or timed out"
	after=$(status "$NDCACHE_PID" VmRSS)
	sleep 5
	settled=$(status "$NDCACHE_PID" VmRSS)
	peak=$(status "$NDCACHE_PID" VmHWM)
	entries=$(metric ndcache_cache_entries)
	kill -0 "$NDCACHE_PID" 2>/dev/null || die "$mode: ndcache died"
	echo "flood_bench: $mode: $out" >&2
	echo "flood_bench: $mode: servfail $(metric ndcache_servfail_total), upstream queries" \
		"$(metric ndcache_upstream_queries_total), upstream timeouts" \
		"$(metric ndcache_upstream_timeouts_total)" >&2
	# Worker stall on a cache shard's lock (issue 34): the worst wait, the worst hold by an
	# insert (its publisher hook included), and the publisher queue's drops where it has one.
	wait_us=$(metric ndcache_cache_lock_wait_max_us)
	hold_us=$(metric ndcache_cache_lock_hold_max_us)
	echo "flood_bench: $mode: cache lock wait max ${wait_us:-?} us, hold max ${hold_us:-?} us," \
		"contended $(metric ndcache_cache_lock_contended_total); publisher queue dropped" \
		"$(metric ndcache_publisher_queue_dropped_total), purges" \
		"$(metric ndcache_publisher_queue_purges_total), table rebuilds" \
		"$(metric ndcache_fastpath_table_rebuilds_total)" >&2
	results+=("$(python3 -c '
import json, sys
j = json.loads(sys.argv[1])
m, b, a, s, p, e = sys.argv[2:8]
w, h = sys.argv[8:10]
print("%-6s %9d %9d %9d %6.0f %8.1f %8.1f %8.1f %8.1f %+8.1f %8s %9s %9s" % (m, j["sent"],
      j["replies"], j["rcodes"].get("NXDOMAIN", 0), j["seconds"], int(b) / 1024, int(a) / 1024,
      int(s) / 1024, int(p) / 1024, (int(s) - int(b)) / 1024, e, w, h))
' "$out" "$mode" "$before" "$after" "$settled" "$peak" "${entries:-?}" "${wait_us:-?}" \
		"${hold_us:-?}")")
	kill -TERM "$NDCACHE_PID"
	wait "$NDCACHE_PID" 2>/dev/null
done

printf '%-6s %9s %9s %9s %6s %8s %8s %8s %8s %8s %8s %9s %9s\n' mode sent answered nxdomain \
	secs "rss0 MB" "rss1 MB" "+5s MB" "peak MB" "growth" entries "wait us" "hold us"
lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print "flood_bench: CPU: " $2}'
printf '%s\n' "${results[@]}"
