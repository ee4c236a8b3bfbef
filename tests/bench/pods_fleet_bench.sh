#!/usr/bin/env bash
# What pod identity's watch (issue 37 item 1: each agent lists and watches its own node's pods,
# fieldSelector=spec.nodeName=NODE) adds to the fleet's API server, measured on the fake API
# server: N agents' watches (tests/bench/pods_watchers, one process), P pods on each of the N
# nodes. Per phase: the initial state (requests, bytes per agent, server CPU), an idle window
# (server CPU and bytes per second for the N open watches: bookmarks), C pod changes spread over
# the nodes (server CPU per change, events and bytes per agent). The same again with every agent
# watching all pods cluster-wide (what records.pods: verified costs), for scale. Loopback only,
# no root. A benchmark, not a test: exits 0 when it ran.
#
# Usage: pods_fleet_bench.sh [--agents N] [--pods P] [--changes C] [--window S] [--build DIR]
set -u
# calc EXPR: a division to four decimals (awk: bc is not in the minimal root)
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
agents=50
pods=30
changes=200
window=10
build="$root/build"
while [ $# -gt 0 ]; do
	case $1 in
	--agents) agents=${2:-}; shift 2 ;;
	--pods) pods=${2:-}; shift 2 ;;
	--changes) changes=${2:-}; shift 2 ;;
	--window) window=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	*) echo "pods_fleet_bench: unknown argument $1" >&2; exit 2 ;;
	esac
done
for v in agents pods changes window; do
	if ! [[ ${!v} =~ ^[0-9]+$ ]] || ((${!v} < 1)); then
		echo "pods_fleet_bench: --$v must be a positive integer" >&2
		exit 2
	fi
done
((agents <= 500)) || { echo "pods_fleet_bench: --agents must be 1..500" >&2; exit 2; }
ninja -C "$build" tests/pods_watchers >/dev/null || exit 1
driver="$build/tests/pods_watchers"

tmp=$(mktemp -d /tmp/ndc-podsfleet.XXXXXX)
server_pid="" driver_pid=""
cleanup() {
	[ -n "$driver_pid" ] && kill "$driver_pid" 2>/dev/null && wait "$driver_pid" 2>/dev/null
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# Polls a command until it succeeds or seconds pass; fails with the message.
wait_until() {
	local secs=$1 what=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@"; do
		if ((SECONDS >= end)); then
			echo "pods_fleet_bench: $what not within ${secs}s" >&2
			return 1
		fi
		sleep 0.05
	done
}

"$root/tests/fakeapi/make_certs.sh" "$tmp/certs" >/dev/null || exit 1
python3 - "$agents" "$pods" "$tmp/objects.json" <<'EOF' || exit 1
import json, sys
agents, pods, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
items = []
for i in range(agents):
    for j in range(pods):
        # One hostNetwork pod per node (kube-proxy), the rest on the pod network; the status
        # carries the fields a real pod's does that pod identity reads (and a few it does not).
        host = j == 0
        ip = "192.0.2.%d" % (i % 250 + 1) if host else "10.%d.%d.%d" % (
            100 + i // 250, i % 250, j + 2)
        items.append({"kind": "Pod", "apiVersion": "v1",
                      "metadata": {"namespace": "ns-%d" % (j % 5), "name": "pod-%d-%d" % (i, j),
                                   "labels": {"app": "a%d" % (j % 7)}},
                      "spec": {"nodeName": "node-%d" % i, "hostNetwork": host,
                               "containers": [{"name": "c", "image": "registry.example/app:1"}]},
                      "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                                 "hostIP": "192.0.2.%d" % (i % 250 + 1),
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
json.dump({"kind": "List", "apiVersion": "v1", "items": items}, open(out, "w"))
EOF

python3 "$root/tests/fakeapi/fake_apiserver.py" --cert "$tmp/certs/server.pem" \
	--key "$tmp/certs/server.key" --token bench --objects "$tmp/objects.json" --port 0 \
	--control-port 0 --bookmark-interval 5 >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
wait_until 30 "the fake API server" grep -q '^fakeapi listening' "$tmp/server.out" || exit 1
read -r api ctl < <(sed -n 's/^fakeapi listening api=\([0-9]*\) control=\([0-9]*\)$/\1 \2/p' \
	"$tmp/server.out")
tck=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tck" '{ printf "%d\n", ($14 + $15) * 1000 / t }' "/proc/$server_pid/stat"; }
ctl() { curl -sf -o /dev/null -d "$1" "http://127.0.0.1:$ctl/control"; }
# stat KEY: requests, bytes or watch_events; per-client sums for the first two.
stat() {
	curl -sf "http://127.0.0.1:$ctl/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
k = sys.argv[1]
print(s[k] if k == "watch_events" else sum(c.get(k, 0) for c in s["clients"].values()))' "$1"
}
events_at_least() { (($(stat watch_events) >= $1)); }

echo "pods_fleet_bench: $(date -u '+%F %T') UTC, commit $(git -C "$root" rev-parse --short HEAD)," \
	"$(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo))"
echo "pods_fleet_bench: $agents agents, $pods pods on each node ($((agents * pods)) in all)," \
	"$changes pod changes, ${window}s windows; fake API server bookmarks every 5 s"
echo "pods_fleet_bench: load average at start $(cut -d' ' -f1-3 /proc/loadavg)"

c0=$(cpu_ms)
sleep "$window" # a window measured on purpose, not a wait
idle0=$(($(cpu_ms) - c0))
printf 'server alone: %d ms CPU per %ss window\n' "$idle0" "$window"

phase() {
	local mode=$1 label=$2 c r b e line
	ctl '{"op":"reset_stats"}' || return 1
	c=$(cpu_ms)
	"$driver" "https://127.0.0.1:$api" "$tmp/certs/ca.pem" bench "$agents" $mode \
		>"$tmp/driver.out" 2>"$tmp/driver.err" &
	driver_pid=$!
	wait_until 180 "$label: every watch synced" grep -qs '^synced' "$tmp/driver.out" || return 1
	r=$(stat requests) b=$(stat bytes)
	printf '%s\n  initial state: %s; %.1f requests and %.1f KB per agent; server CPU %d ms\n' \
		"$label" "$(cat "$tmp/driver.out")" "$(calc "$r / $agents")" \
		"$(calc "$b / $agents / 1024")" "$(($(cpu_ms) - c))"
	c=$(cpu_ms) b=$(stat bytes)
	sleep "$window" # a window measured on purpose
	printf '  idle, %d watches open: server CPU %d ms per %ss (alone: %d); %.0f bytes/s per agent\n' \
		"$agents" "$(($(cpu_ms) - c))" "$window" "$idle0" \
		"$(calc "($(stat bytes) - $b) / $agents / $window")"
	# C changes (a new address each), spread over the nodes, in one control request.
	python3 - "$agents" "$pods" "$changes" >"$tmp/changes.json" <<'EOF'
import json, sys
agents, pods, n = map(int, sys.argv[1:])
items = []
for k in range(n):
    i, j = k % agents, 1 + (k // agents) % (pods - 1) if pods > 1 else 0
    ip = "10.%d.%d.%d" % (200 + i // 250, i % 250, (k // agents) % 250 + 1)
    items.append({"kind": "Pod", "apiVersion": "v1",
                  "metadata": {"namespace": "ns-%d" % (j % 5), "name": "pod-%d-%d" % (i, j)},
                  "spec": {"nodeName": "node-%d" % i},
                  "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
print(json.dumps({"op": "apply", "object": items}))
EOF
	c=$(cpu_ms) b=$(stat bytes) e=$(stat watch_events)
	if [ "$mode" = --cluster-wide ]; then want=$((e + changes * agents)); else want=$((e + changes)); fi
	curl -sf -o /dev/null --data-binary "@$tmp/changes.json" "http://127.0.0.1:$ctl/control" ||
		return 1
	wait_until 120 "$label: $((want - e)) events delivered" events_at_least "$want" || return 1
	printf '  %d changes: %d events sent (%.1f per agent), %.1f KB per agent, server CPU %.2f ms per change\n' \
		"$changes" "$(($(stat watch_events) - e))" \
		"$(calc "($(stat watch_events) - $e) / $agents")" \
		"$(calc "($(stat bytes) - $b) / $agents / 1024")" \
		"$(calc "($(cpu_ms) - $c) / $changes")"
	kill -TERM "$driver_pid"
	wait "$driver_pid"
	driver_pid=""
	line=$(grep '^pods per map' "$tmp/driver.out")
	[ "$mode" = --cluster-wide ] || printf '  maps at the end: %s (expected %d each)\n' "$line" "$pods"
}

phase "" "pod identity (each agent its node's pods, fieldSelector=spec.nodeName)" || exit 1
phase --cluster-wide "for scale: every agent all pods (records.pods: verified)" || exit 1
echo "pods_fleet_bench: load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
