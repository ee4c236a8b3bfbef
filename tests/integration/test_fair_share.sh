#!/usr/bin/env bash
# A fair share of the upstream per client (issue 22, forward.per_client at its defaults: 1000
# queries/s, burst 2000). Two pods: pod A sends 20,000 never-seen names a second for 10 s; at
# the same time pod B asks never-seen names at 100 a second, and pod A also asks a cluster name
# and a cached name at 100 a second. Checks:
#   - B's never-seen names are answered (not SERVFAIL) within 1 s: >= 99%;
#   - A's cluster and cached names too: >= 99% within 1 s (never limited);
#   - A's flood is limited: the upstream saw at most burst + qps x time of A's names, the rest
#     got SERVFAIL at once, counted in ndcache_upstream_limited_total{reason="per_client"};
#   - the warning names A (rate-limited: at most about one a second), never B;
#   - reload: a bad value (qps: 0) is refused and the limit stays; per_client: false lifts it.
# Usage: test_fair_share.sh BUILD_DIR [socket|tc ...]   (root: network namespaces, BPF)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(socket)
bin="$build/control/ndcache"
tool="$here/upstream_share.py"
# shellcheck source=lib.sh
. "$here/lib.sh"

FLOOD_RATE=20000
FLOOD_SECONDS=10
QPS=1000
BURST=2000
POD_A=$POD_ADDR
POD_B=169.254.101.2
need_bin "$bin" || exit 1
need_bpffs || exit 1
json() { python3 -c 'import json,sys; j=json.loads(open(sys.argv[1]).read()); print(eval(sys.argv[2]))' "$1" "$2"; }
# wait_metric NAME VALUE SECONDS: until the metric reads VALUE.
wait_metric() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

topo_up || exit 1
topo_pod_add 1 || exit 1
NS_POD_B="ndc-pod1-$TOPO_ID"
in_pod_b() { ip netns exec "$NS_POD_B" "$@"; }
unbound_up up "$UPSTREAM_ADDR" <<EOF || exit 1
local-zone: "fresh.test." redirect
local-data: "fresh.test. 300 IN A 192.0.2.99"
local-zone: "cached.test." static
local-data: "www.cached.test. 300 IN A 192.0.2.98"
EOF
ulog="$TOPO_DIR/unbound-up.log"

run_mode() {
	local mode=$1 conf="$TOPO_DIR/ndcache-$1.yaml" flood pb pa fl up_a limited warns before
	echo "--- mode $mode"
	ndcache_conf "$conf" "$SAMPLE_CLUSTER" "$mode" eth-pod,eth-pod1 'workers: 2'
	ndcache_up "$bin" "$conf" || {
		bad "$mode: ndcache did not start" "$(cat "$TOPO_DIR/ndcache.log")"
		return
	}
	if fastpath_missing "$mode"; then
		term_wait "$NDCACHE_PID" ndcache
		return
	fi
	in_pod dig +short +time=2 +tries=1 "@$NODE_LOCAL" www.cached.test >/dev/null # warm the cache
	: >"$ulog.mark"
	before=$(wc -l <"$ulog")

	in_pod python3 "$tool" flood "$NODE_LOCAL" --fresh "$mode-a.fresh.test" --rate $FLOOD_RATE \
		--seconds $FLOOD_SECONDS >"$TOPO_DIR/flood-$mode.json" &
	flood=$!
	# The flood under way (past its burst: the agent limits it) before pod B starts asking.
	flooding() { [ "$(metric 'ndcache_upstream_limited_total{reason="per_client"}')" -gt 0 ] 2>/dev/null; }
	wait_until 20 "$mode: pod A's flood limited by the agent" flooding ||
		bad "$mode: pod A's flood not under way (nothing limited)"
	in_pod_b python3 "$tool" pace "$NODE_LOCAL" --fresh "$mode-b.fresh.test" --rate 100 \
		--seconds $((FLOOD_SECONDS - 3)) --timeout 1 --out "$TOPO_DIR/b-$mode.json" &
	pb=$!
	in_pod python3 "$tool" pace "$NODE_LOCAL" --rate 100 --seconds $((FLOOD_SECONDS - 3)) \
		--names kubernetes.default.svc.cluster.local,www.cached.test --timeout 1 \
		--out "$TOPO_DIR/a-$mode.json" &
	pa=$!
	wait_pid $pb 60 "pod B's queries" || bad "$mode: pod B's client failed"
	wait_pid $pa 60 "pod A's cluster and cached queries" || bad "$mode: pod A's client failed"
	wait_pid $flood 90 "pod A's flood" || bad "$mode: pod A's flood failed"

	fl=$(cat "$TOPO_DIR/flood-$mode.json")
	echo "     flood: $fl"
	echo "     pod B: $(cat "$TOPO_DIR/b-$mode.json")"
	echo "     pod A cluster+cached: $(cat "$TOPO_DIR/a-$mode.json")"
	[ "$(json "$TOPO_DIR/flood-$mode.json" 'j["rate"] >= 15000')" = True ] &&
		ok "$mode: pod A flooded at $(json "$TOPO_DIR/flood-$mode.json" 'j["rate"]')/s" ||
		bad "$mode: the flood reached only $(json "$TOPO_DIR/flood-$mode.json" 'j["rate"]')/s (>= 15000 needed to test this)"
	[ "$(json "$TOPO_DIR/b-$mode.json" 'j["answered"] * 100 >= j["sent"] * 99')" = True ] &&
		ok "$mode: pod B's never-seen names answered within 1 s: $(json "$TOPO_DIR/b-$mode.json" '"%d of %d" % (j["answered"], j["sent"])')" ||
		bad "$mode: pod B's never-seen names answered within 1 s: $(json "$TOPO_DIR/b-$mode.json" '"%d of %d" % (j["answered"], j["sent"])') (< 99%)"
	[ "$(json "$TOPO_DIR/a-$mode.json" 'j["answered"] * 100 >= j["sent"] * 99 and j["rcodes"].get("SERVFAIL", 0) == 0')" = True ] &&
		ok "$mode: pod A's cluster and cached names answered within 1 s: $(json "$TOPO_DIR/a-$mode.json" '"%d of %d" % (j["answered"], j["sent"])')" ||
		bad "$mode: pod A's cluster and cached names: $(json "$TOPO_DIR/a-$mode.json" 'j')"
	# A's names that reached the upstream: at most the burst plus qps for the flood's time.
	up_a=$(tail -n +$((before + 1)) "$ulog" | grep -ci "$mode-a\.fresh\.test\. A IN")
	fsecs=$(json "$TOPO_DIR/flood-$mode.json" 'int(j["seconds"]) + 2')
	[ "$up_a" -le $((BURST + QPS * fsecs)) ] && [ "$up_a" -ge $((QPS * (fsecs - 3))) ] &&
		ok "$mode: $up_a of pod A's names reached the upstream (burst $BURST + $QPS/s)" ||
		bad "$mode: $up_a of pod A's names reached the upstream (expected $((QPS * (fsecs - 3)))..$((BURST + QPS * fsecs)))"
	limited=$(metric 'ndcache_upstream_limited_total{reason="per_client"}')
	[ "${limited:-0}" -ge $(($(json "$TOPO_DIR/flood-$mode.json" 'j["sent"]') - BURST - QPS * fsecs)) ] &&
		ok "$mode: ndcache_upstream_limited_total{reason=\"per_client\"} $limited" ||
		bad "$mode: ndcache_upstream_limited_total{reason=\"per_client\"} ${limited:-missing}"
	warns=$(grep -c "forward.per_client: client $POD_A " "$TOPO_DIR/ndcache.log")
	[ "$warns" -ge 1 ] && [ "$warns" -le $((fsecs + 2)) ] &&
		! grep -q "forward.per_client: client $POD_B " "$TOPO_DIR/ndcache.log" &&
		ok "$mode: $warns warnings name pod A ($(grep -m1 "forward.per_client: client" "$TOPO_DIR/ndcache.log" | sed 's/.*forward/forward/')), none pod B" ||
		bad "$mode: $warns warnings naming pod A (1..$((fsecs + 2)) expected), or one naming B" \
			"$(grep "forward.per_client" "$TOPO_DIR/ndcache.log" | head -5)"

	# Reload: a bad value is refused and the limit stays; false lifts it.
	sed -i '/^workers:/i forward:\n  per_client: {qps: 0, burst: 10}' "$conf"
	kill -HUP "$NDCACHE_PID"
	wait_metric ndcache_config_reload_failures_total 1 10 &&
		grep -q "forward.per_client.qps" "$TOPO_DIR/ndcache.log" &&
		ok "$mode: reload with per_client.qps 0 refused: $(grep -m1 'forward.per_client.qps' "$TOPO_DIR/ndcache.log" | sed 's/.*line/line/')" ||
		bad "$mode: a bad per_client was not refused" "$(tail -5 "$TOPO_DIR/ndcache.log")"
	limited=$(metric 'ndcache_upstream_limited_total{reason="per_client"}')
	in_pod python3 "$tool" flood "$NODE_LOCAL" --fresh "$mode-c.fresh.test" --rate 5000 --seconds 1 \
		>"$TOPO_DIR/flood2-$mode.json"
	[ "$(metric 'ndcache_upstream_limited_total{reason="per_client"}')" -gt "$limited" ] &&
		ok "$mode: the limit still holds after the refused reload" ||
		bad "$mode: no query limited after the refused reload"
	sed -i 's/per_client: {qps: 0, burst: 10}/per_client: false/' "$conf"
	kill -HUP "$NDCACHE_PID"
	wait_metric ndcache_config_reloads_total 1 10 &&
		grep -q "applied.*forward.per_client" "$TOPO_DIR/ndcache.log" &&
		ok "$mode: reload with per_client: false applied" ||
		bad "$mode: per_client: false not applied" "$(tail -5 "$TOPO_DIR/ndcache.log")"
	limited=$(metric 'ndcache_upstream_limited_total{reason="per_client"}')
	in_pod python3 "$tool" flood "$NODE_LOCAL" --fresh "$mode-d.fresh.test" --rate 5000 --seconds 1 \
		>"$TOPO_DIR/flood3-$mode.json"
	[ "$(metric 'ndcache_upstream_limited_total{reason="per_client"}')" = "$limited" ] &&
		ok "$mode: no query limited with per_client: false" ||
		bad "$mode: queries limited with per_client: false"

	kill -0 "$NDCACHE_PID" 2>/dev/null && ok "$mode: ndcache still running" || bad "$mode: ndcache died"
	term_wait "$NDCACHE_PID" ndcache || bad "$mode: ndcache did not stop on SIGTERM"
}

for m in "${modes[@]}"; do
	run_mode "$m"
done
summary test_fair_share
