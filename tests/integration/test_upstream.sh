#!/usr/bin/env bash
# The upstream path (issue 22), against Python upstreams in the node netns (upstreams.py):
#   tcp:  forward.protocol tcp; a pod asks 10,000 never-seen names at 5,000 queries/s: every one
#         answered with its own address, and the upstream accepted at most 4 TCP connections in
#         all (it counts them itself; /metrics must agree) and got no UDP query.
#   loop: the only upstream forwards everything back to the node-local address. Within 5 s of
#         the start the agent marks it (an error line naming it, ndcache_upstream_loop_detected
#         1, /ready 503 saying why), stays up, and while a pod keeps asking never-seen names at
#         100 a second the looping upstream receives at most a few queries a second; a reload
#         that adds a good upstream makes /ready 200 again, the looping one still out of use.
# Usage: test_upstream.sh BUILD_DIR [tcp|loop ...]   (root: network namespaces)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tcp loop)
bin="$build/control/ndcache"
tool="$here/upstreams.py"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}

metrics() { in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics; }
# json TEXT EXPR: a python expression over the parsed object j.
json() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }
alive() { kill -0 "$NDCACHE_PID" 2>/dev/null; }

# up_start NAME ADDR serve|loop: a Python upstream on ADDR (put on the node's lo); its pid in
# UP_PID, its stats (written at SIGTERM) in $TOPO_DIR/NAME.json.
up_start() {
	local name=$1 addr=$2 kind=$3
	in_node ip addr add "$addr/32" dev lo 2>/dev/null
	if [ "$kind" = loop ]; then
		ip netns exec "$NS_NODE" python3 "$tool" loop "$addr" --to "$NODE_LOCAL" \
			--stats "$TOPO_DIR/$name.json" 2>"$TOPO_DIR/$name.err" &
	else
		ip netns exec "$NS_NODE" python3 "$tool" serve "$addr" \
			--stats "$TOPO_DIR/$name.json" 2>"$TOPO_DIR/$name.err" &
	fi
	UP_PID=$!
	TOPO_PIDS+=("$UP_PID")
	for _ in $(seq 50); do
		in_node ss -lun | grep -q "$addr:53 " && return 0
		sleep 0.1
	done
	bad "$name: upstream on $addr did not start" "$(cat "$TOPO_DIR/$name.err")"
	return 1
}
up_stop() {
	term_wait "$1" "upstream $2" 5 || bad "upstream $2 did not stop on SIGTERM"
}

conf() {
	cat >"$TOPO_DIR/ndcache.yaml" <<EOF
listen: [$NODE_LOCAL]
upstream: [$1]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
dataplane:
  mode: socket
forward:
  protocol: ${2:-udp}
  timeout_ms: 1000
workers: 2
EOF
}

part_tcp() {
	local out st conns m
	echo "--- tcp: 10,000 never-seen names at 5,000 queries/s over pooled TCP"
	up_start tcp 169.254.53.20 serve || return
	local up=$UP_PID
	conf "169.254.53.20:53" tcp
	ndcache_up "$bin" "$TOPO_DIR/ndcache.yaml" || {
		bad "tcp: ndcache did not start" "$(cat "$TOPO_DIR/ndcache.log")"
		return
	}
	out=$(timeout 60 ip netns exec "$NS_POD" python3 "$tool" ask "$NODE_LOCAL" --names 10000 \
		--qps 5000 --suffix tcp.example.net --timeout 5)
	echo "tcp: client: $out"
	m=$(metrics)
	conns=$(awk '$1 ~ /^ndcache_upstream_server_tcp_connections_total\{upstream="169.254.53.20:53"\}/ {print $2}' <<<"$m")
	up_stop "$up" tcp
	st=$(cat "$TOPO_DIR/tcp.json" 2>/dev/null)
	echo "tcp: upstream: $st; ndcache's count of connections opened: ${conns:-?}"
	if [ -n "$out" ] && [ "$(json "$out" 'j["answered"]')" = 10000 ] &&
		[ "$(json "$out" 'j["wrong"]')" = 0 ]; then
		ok "tcp: 10,000 of 10,000 never-seen names answered, each with its own address"
	else
		bad "tcp: not every name answered right" "$out"
	fi
	if [ -n "$out" ] && python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])["seconds"] > 2.5)' "$out"; then
		ok "tcp: sent at 5,000 queries/s ($(json "$out" 'j["seconds"]') s for 10,000)"
	else
		bad "tcp: the client could not send at 5,000 queries/s" "$out"
	fi
	if [ -n "$st" ] && [ "$(json "$st" 'j["tcp_connections"]')" -le 4 ] &&
		[ "$(json "$st" 'j["tcp_connections"]')" -ge 1 ] && [ "$(json "$st" 'j["udp_queries"]')" = 0 ]; then
		ok "tcp: the upstream accepted $(json "$st" 'j["tcp_connections"]') TCP connections (<= 4) for $(json "$st" 'j["tcp_queries"]') queries, no UDP"
	else
		bad "tcp: more than 4 TCP connections, none, or UDP queries at the upstream" "$st"
	fi
	if [ -n "$conns" ] && [ -n "$st" ] && [ "$conns" = "$(json "$st" 'j["tcp_connections"]')" ]; then
		ok "tcp: ndcache_upstream_server_tcp_connections_total ($conns) agrees"
	else
		bad "tcp: ndcache_upstream_server_tcp_connections_total ${conns:-missing} vs the upstream's count" "$st"
	fi
	if alive && term_wait "$NDCACHE_PID" ndcache 10; then
		ok "tcp: SIGTERM: clean exit"
	else
		bad "tcp: agent died or did not exit cleanly" "$(tail -20 "$TOPO_DIR/ndcache.log")"
	fi
}

for p in "${parts[@]}"; do
	topo_up || exit 1
	"part_$p"
	topo_down
done
summary upstream
