#!/usr/bin/env bash
# Shutdown in the right order (issue 34 item 2): SIGTERM under about 5,000 queries a second of
# cache misses (never-seen names, each forwarded to the unbound upstream) must stop the agent
# with no query reaching a freed component. Run against the ASan + UBSan build: any sanitizer
# report in the agent's log fails the test, as does an exit status other than 0 or an exit that
# takes more than 15 s. Several rounds, each SIGTERM at another point of the flood.
# Usage: test_upgrade_shutdown.sh BUILD_DIR [MODE]   (root; MODE socket (default) or tc;
#        BUILD_DIR must be a sanitizer build, e.g. build-asan)
# NDC_SHUTDOWN_ROUNDS (6) agents are started and stopped; NDC_SHUTDOWN_QPS (5000) is the rate.
# The window it looks for is short (a worker in the middle of a batch when the forwarder goes):
# against the old order (main at 14d32ac) it was caught in 1 round of 10 at 5,000 QPS, 2 of 6 at
# 15,000 (docs/TESTING.md).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: test_upgrade_shutdown.sh BUILD_DIR [MODE]}" && pwd)
mode=${2:-socket}
bin="$build/control/ndcache"
rounds=${NDC_SHUTDOWN_ROUNDS:-6}
qps=${NDC_SHUTDOWN_QPS:-5000}
# shellcheck source=lib.sh
. "$here/lib.sh"

need_bin "$bin" || exit 1
if ! grep -q "__asan_init" "$bin" 2>/dev/null && ! ldd "$bin" 2>/dev/null | grep -q libasan; then
	echo "test_upgrade_shutdown.sh: $bin is not an ASan build (meson -Db_sanitize=address,undefined)" >&2
	exit 1
fi
case $mode in socket | tc) ;; *)
	echo "test_upgrade_shutdown.sh: mode socket or tc, not $mode" >&2
	exit 1
	;;
esac
need_bpffs || exit 1
topo_up || exit 1
upstream_up || exit 1

# Every report is kept (not only the first), and UBSan says where.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=0}
trap topo_down EXIT
# tc: the default pin directory, on the bpffs the agent mounts at /sys/fs/bpf in the mount
# namespace `ip netns exec` gives it (gone with it). A pin_dir under the host's /sys/fs/bpf is not
# there: the fast path did not load and the tc rounds ran on the socket path alone.
conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR:53]
source: {snapshot: $SAMPLE_CLUSTER}
dataplane: {mode: $mode, interfaces: [eth-pod]}
workers: 2
forward: {per_client: false} # every miss goes upstream, none is refused early
EOF

SAN_RE='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: (Address|Undefined|Leak)Sanitizer'
forwarded() { metric ndcache_upstream_queries_total; }
# forwarded_past N: more than N misses forwarded so far
forwarded_past() { [ "$(forwarded)" -gt "$1" ] 2>/dev/null; }

for round in $(seq "$rounds"); do
	ndcache_start "$bin" "$conf"
	log="$TOPO_DIR/ndcache-$round.log"
	if ! ndcache_ready 30; then
		bad "round $round: the agent did not start" "$(cat "$TOPO_DIR/ndcache.log")"
		break
	fi
	# tc: the fast path answers too, and is closed under the sanitizers at the signal
	if [ "$mode" = tc ] &&
		! until_ok 10 grep -q "fast path: attached" "$TOPO_DIR/ndcache.log"; then
		bad "round $round: the fast path did not load and attach" \
			"$(grep "fast path" "$TOPO_DIR/ndcache.log")"
		break
	fi
	# $qps (5,000) never-seen names a second until the agent is gone (more than it can send).
	# (not through in_pod: $! must be the sender itself, to stop it)
	ip netns exec "$NS_POD" python3 "$here/hostile.py" flood "$NODE_LOCAL" --names 400000 --qps "$qps" \
		--suffix "r$round.miss.example.com" --seed "$round" >"$TOPO_DIR/flood-$round.out" 2>&1 &
	flood=$!
	TOPO_PIDS+=("$flood")
	# SIGTERM once misses are flowing, a little later each round (past 1,000 forwarded, then
	# round x 0.7 s more): the flood is at full rate, so queries are in every stage at the signal.
	f0=$(forwarded)
	if ! until_ok 20 forwarded_past $((${f0:-0} + 1000)); then
		bad "round $round: no misses reached the upstream" "$(cat "$TOPO_DIR/flood-$round.out")"
		kill "$flood" 2>/dev/null
		break
	fi
	sleep "$(awk -v r="$round" 'BEGIN { print (r - 1) * 0.7 }')"
	# the rate of queries reaching the socket path (all misses) in the last second before it
	q1=$(metric ndcache_queries_total)
	t1=${EPOCHREALTIME/[.,]/}
	sleep 1
	before=$(forwarded)
	q0=$(metric ndcache_queries_total)
	t0=${EPOCHREALTIME/[.,]/}
	rate=$(((q0 - q1) * 1000000 / (t0 - t1)))
	[ "$rate" -ge $((qps / 5)) ] ||
		bad "round $round: only $rate queries/s reached the agent before SIGTERM: not under load"
	kill -TERM "$NDCACHE_PID"
	wait_pid "$NDCACHE_PID" 15 "round $round: the agent after SIGTERM"
	st=$?
	t1=${EPOCHREALTIME/[.,]/}
	kill "$flood" 2>/dev/null
	wait "$flood" 2>/dev/null
	cp "$TOPO_DIR/ndcache.log" "$log"
	ms=$(((t1 - t0) / 1000))
	if [ "$st" = 0 ]; then
		ok "round $round ($mode): SIGTERM at $rate misses/s ($before forwarded so far): exit 0 in $ms ms"
	else
		bad "round $round ($mode): exit status $st after SIGTERM (${ms} ms)" "$(tail -30 "$log")"
	fi
	if grep -qE "$SAN_RE" "$log"; then
		bad "round $round ($mode): sanitizer report in the agent's log" \
			"$(grep -E -A25 "$SAN_RE" "$log" | head -60)"
	else
		ok "round $round ($mode): no ASan/UBSan/LSan report"
	fi
	grep -q "shutting down" "$log" || bad "round $round: the agent did not log its shutdown" "$(tail -5 "$log")"
	if [ "$mode" != tc ]; then
		:
	elif grep -q "fast path: [0-9]* answered" "$log"; then
		ok "round $round (tc): the fast path closed at exit (its counters logged)"
	else
		bad "round $round (tc): no fast path counters at exit" "$(tail -5 "$log")"
	fi
done

summary "test_upgrade_shutdown.sh ($mode)"
