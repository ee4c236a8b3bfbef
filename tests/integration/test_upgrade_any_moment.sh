#!/usr/bin/env bash
# NOT FINISHED (not in tests/run.sh): the upstream lacks the prober's fresh-name redirect zone
# (prober.py unbound-zones), so fresh names come back NXDOMAIN (wrong), and the 0 s case fails;
# see the branch report.
# An upgrade at any moment (issue 34 item 1): under a prober at 5,000 queries/s (cluster, cached
# and fresh names), a successor starts while the API server stalls its lists (so it is joined but
# not synced: no takeover yet), and the running agent gets SIGTERM 0, 0.2, 1 and 3 s later; the API
# server resumes 4 s after the successor's start. Each time: 0 queries lost, the old agent logged
# how its wait ended, the successor attached and ready at the end. Then a successor killed (-9)
# before its takeover: the running agent keeps serving, 0 lost.
# Usage: test_upgrade_any_moment.sh BUILD_DIR [MODE]   (root; MODE tc (default) or socket)
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: test_upgrade_any_moment.sh BUILD_DIR [MODE]}" && pwd)
mode=${2:-tc}
bin="$build/control/ndcache"
prober="$here/prober.py"
# shellcheck source=lib.sh
. "$here/lib.sh"
need_bin "$bin" || exit 1
need_bpffs || exit 1
API_PORT=$((30000 + $$ % 10000))
CTL_PORT=$((API_PORT + 1))
pins=/sys/fs/bpf/ndc-anymoment-$$
topo_up || exit 1
trap 'topo_down; rm -rf "$pins"' EXIT
# The upstream knows the cluster names too, as kube-dns does: a successor that is not synced
# forwards them (what the socket path does at a cold start).
mapfile -t UNBOUND_EXTRA < <(python3 "$prober" unbound-data)
UNBOUND_EXTRA+=("kubernetes.default.svc.cluster.local. 30 IN A 10.96.0.1"
	"kube-dns.kube-system.svc.cluster.local. 30 IN A 10.96.0.10"
	"frontend.shop.svc.cluster.local. 30 IN A 10.96.12.34"
	"frontend.shop.svc.cluster.local. 30 IN AAAA fd00:10:96::1234"
	"cart.shop.svc.cluster.local. 30 IN A 10.96.12.50"
	"prometheus.monitoring.svc.cluster.local. 30 IN A 10.96.40.10")
upstream_up || exit 1
fakeapi_up 20 || exit 1
conf="$TOPO_DIR/ndcache.yaml"
ndcache_conf "$conf" kubernetes "$mode" eth-pod "workers: 2" "forward: {per_client: false}"
sed -i "s|^dataplane: {mode: $mode, interfaces: \[eth-pod\]}|dataplane: {mode: $mode, interfaces: [eth-pod], pin_dir: $pins}|" "$conf"

n=0
agent() { # agent: starts one, its pid in AG, log $TOPO_DIR/agent-N.log
	n=$((n + 1))
	ip netns exec "$NS_NODE" "$bin" --config "$conf" >"$TOPO_DIR/agent-$n.log" 2>&1 &
	AG=$!
	AGLOG="$TOPO_DIR/agent-$n.log"
	TOPO_PIDS+=("$AG")
}
logged() { grep -qE "$2" "$1"; }

agent
OLD=$AG OLDLOG=$AGLOG
ndcache_ready 30 || { bad "first agent not ready"; summary test_upgrade_any_moment.sh; exit 1; }

run_case() { # run_case DELAY|kill
	local d=$1 win
	win="$TOPO_DIR/probe-$d"
	mkfifo "$win.in"
	ip netns exec "$NS_POD" python3 "$prober" probe --rate 5000 --summary "$win.sum" <"$win.in" >"$win.out" 2>&1 &
	local pp=$!
	TOPO_PIDS+=("$pp")
	exec 7>"$win.in"
	sleep 1
	fakeapi_ctl '{"op":"pause","seconds":4}'
	agent
	local NEW=$AG NEWLOG=$AGLOG
	if [ "$d" = kill ]; then
		until_ok 10 logged "$NEWLOG" "joined the running agent" || bad "kill: the successor did not join"
		kill -9 "$NEW"
		wait "$NEW" 2>/dev/null
		sleep 1
	else
		sleep "$d"
		kill -TERM "$OLD"
		until_ok 40 logged "$NEWLOG" "took over from the previous agent" ||
			bad "delay $d: no takeover" "$(tail -5 "$NEWLOG")"
		wait_pid "$OLD" 40 "the old agent"
		ndcache_ready 20 || bad "delay $d: successor not ready"
	fi
	echo stop >&7
	exec 7>&-
	wait_pid "$pp" 30 prober
	local lost
	lost=$(awk '$1 == "total" && $2 == "all" {print $4}' "$win.sum")
	[ -n "$lost" ] || lost=$(awk '$2 == "all" {s += $4} END {print s + 0}' "$win.sum")
	local sent
	sent=$(awk '$2 == "all" {s += $3} END {print s + 0}' "$win.sum")
	if [ "$lost" = 0 ] && [ "$sent" -gt 0 ]; then
		ok "$mode, $d: $sent sent, 0 lost ($(grep -oE 'successor (took over|went away|did not)[^;]*' "$OLDLOG" | tail -1))"
	else
		bad "$mode, $d: $sent sent, $lost lost" "$(cat "$win.out" | tail -15; grep handover "$OLDLOG" | tail -5)"
	fi
	if [ "$d" = kill ]; then
		kill -0 "$OLD" && ok "kill: the old agent still serves" || bad "kill: the old agent is gone"
	else
		OLD=$NEW OLDLOG=$NEWLOG
	fi
}
for d in 0.2 1 3 0 kill; do run_case "$d"; done
summary "test_upgrade_any_moment.sh ($mode)"
