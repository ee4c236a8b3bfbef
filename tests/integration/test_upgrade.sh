#!/usr/bin/env bash
# Upgrades and second instances (issue 10): a second ndcache that cannot start (bad config, an
# HTTP port taken, no capabilities) never touches the running agent's programs, pins or sockets;
# a successor with the same config takes over (the filters and pins become its own) and the old
# agent, on SIGTERM, leaves them; a SIGTERM with no successor removes everything; after kill -9
# the kernel keeps answering cluster names and sends the rest to the upstream (fail open).
# Agents run with nsenter --net (not ip netns exec, which gives each its own /sys and so its own
# bpffs): they share one bpffs, as agents on a node do, under a pin directory of this test's own.
# Usage: test_upgrade.sh BUILD_DIR   (root: network namespaces, BPF)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}
for cmd in bpftool nsenter setpriv curl dig; do
	command -v "$cmd" >/dev/null || {
		echo "test_upgrade.sh: $cmd not found (deploy/deps.sh test installs it)" >&2
		exit 1
	}
done
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || exit 1
pins=/sys/fs/bpf/ndc-upgrade-$$
cleanup_pins() { rm -rf "$pins"; }

topo_up || exit 1
trap 'topo_down; cleanup_pins' EXIT
upstream_up || exit 1

http_port=$((20000 + $$ % 10000))
conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR:53]
records: {ttl: 30}
dataplane: {mode: tc, interfaces: [eth-pod], pin_dir: $pins}
http: {listen: "127.0.0.1:$http_port"}
workers: 2
EOF

# Starts an agent in the node netns (shared mount namespace): agent_start NAME CONFIG [setpriv...]
agent_start() {
	local name=$1 cfg=$2
	shift 2
	nsenter --net=/run/netns/"$NS_NODE" "$@" "$bin" --config "$cfg" >"$TOPO_DIR/$name.log" 2>&1 &
	AGENT_PID=$!
	TOPO_PIDS+=("$AGENT_PID")
}

# Waits (bounded) for a line in an agent's log: wait_log NAME REGEX SECONDS
wait_log() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -qE "$2" "$TOPO_DIR/$1.log" && return 0
		sleep 0.1
	done
	echo "waited ${3}s for '$2' in $1's log" >&2
	return 1
}

# Waits (bounded) for a process to exit; its status in EXIT_STATUS: wait_exit PID SECONDS
wait_exit() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1"
			EXIT_STATUS=$?
			return 0
		fi
		sleep 0.1
	done
	echo "process $1 still runs after ${2}s" >&2
	return 1
}

# What is attached and pinned now: "ingress-id egress-id answers-map-id". The egress program
# is a tcx one where the kernel has tcx (Linux 6.6), else a clsact filter.
state() {
	local i e m
	i=$(in_node tc filter show dev eth-pod ingress | sed -n 's/.* id \([0-9]*\) .*/\1/p' | head -1)
	e=$(in_node tc filter show dev eth-pod egress | sed -n 's/.* id \([0-9]*\) .*/\1/p' | head -1)
	[ -n "$e" ] || e=$(in_node python3 "$TOPO_TESTS/integration/tcx_progs.py" eth-pod egress | tr '\n' ',' | sed 's/,$//')
	m=$(bpftool map show pinned "$pins/ndc_answers" 2>/dev/null | sed -n 's/^\([0-9]*\):.*/\1/p')
	echo "${i:-none} ${e:-none} ${m:-none}"
}

kernel_answers() {
	in_node curl -s "http://127.0.0.1:$http_port/metrics" |
		awk '/^ndcache_kernel_answers_total\{kind="answer"\}/{print $2}'
}

ask() { in_pod dig +time=1 +tries=1 +short @"$NODE_LOCAL" "$@" 2>/dev/null | head -1; }

# The running agent still has everything: its filters and pins, and answers in the kernel.
intact() {
	local what=$1 before=$2 now k0 k1 a
	now=$(state)
	k0=$(kernel_answers)
	a=$(ask kubernetes.default.svc.cluster.local A)
	k1=$(kernel_answers)
	if kill -0 "$A" 2>/dev/null && [ "$now" = "$before" ] && [ "$a" = 10.96.0.1 ] &&
		[ "${k1:-0}" -gt "${k0:-0}" ] 2>/dev/null; then
		ok "$what: the running agent keeps its filters and pins ($now) and answers in the kernel"
	else
		bad "$what: running agent disturbed" "state $before -> $now, answer '$a', kernel answers $k0 -> $k1"
	fi
}

# --- the running agent
agent_start a "$conf"
A=$AGENT_PID
wait_log a "took over|listening on" 10 && wait_dns "$NODE_LOCAL" 53 kubernetes.default.svc.cluster.local ||
	{ bad "first agent did not start" "$(cat "$TOPO_DIR/a.log")"; summary test_upgrade.sh; exit 1; }
wait_log a "attached tc ingress and egress" 10 || bad "first agent: fast path not attached" "$(cat "$TOPO_DIR/a.log")"
s0=$(state)
case "$s0" in *none*) bad "first agent: filters or pins missing ($s0)" ;; *) ok "first agent attached and pinned ($s0)" ;; esac
# Fail-open's egress program: with tcx where the kernel has it (no classifier chain for every
# packet to the pod to pass), and then no clsact egress filter of ours beside it.
if tcx_e=$(in_node python3 "$TOPO_TESTS/integration/tcx_progs.py" eth-pod egress 2>&1); then
	n_cls=$(in_node tc filter show dev eth-pod egress | grep -c "ndc_")
	if [ "$(echo "$tcx_e" | grep -c .)" = 1 ] && [ "$n_cls" = 0 ] &&
		grep -q "attached tc ingress and egress to eth-pod .*(egress with tcx)" "$TOPO_DIR/a.log"; then
		ok "fail-open's egress program is a tcx program (id $tcx_e), no clsact egress filter"
	else
		bad "fail-open's egress: tcx '$tcx_e', our clsact egress filters $n_cls" "$(grep "fast path" "$TOPO_DIR/a.log")"
	fi
else
	echo "skip - fail-open's egress with tcx: this kernel has no tcx ($tcx_e)"
fi

# --- a second agent with a bad config
printf 'listen: [%s]\nrecords: {ttl: forever}\n' "$NODE_LOCAL" >"$TOPO_DIR/bad.yaml"
agent_start bad "$TOPO_DIR/bad.yaml"
if wait_exit "$AGENT_PID" 10 && [ "$EXIT_STATUS" != 0 ] && grep -q "records.ttl" "$TOPO_DIR/bad.log"; then
	ok "bad config: exit $EXIT_STATUS naming the key"
else
	bad "bad config: no clean refusal" "$(cat "$TOPO_DIR/bad.log")"
fi
intact "after a second agent with a bad config" "$s0"

# --- a second agent whose HTTP port is taken by someone else
busy_port=$((http_port + 1))
ip netns exec "$NS_NODE" python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $busy_port)); s.listen(); time.sleep(60)" &
TOPO_PIDS+=($!)
sed "s/127.0.0.1:$http_port/127.0.0.1:$busy_port/" "$conf" >"$TOPO_DIR/busy.yaml"
for _ in $(seq 50); do in_node python3 -c "
import socket; socket.create_connection(('127.0.0.1', $busy_port), 1)" 2>/dev/null && break; sleep 0.1; done
agent_start busy "$TOPO_DIR/busy.yaml"
if wait_exit "$AGENT_PID" 15 && [ "$EXIT_STATUS" != 0 ] && grep -q "http.listen" "$TOPO_DIR/busy.log"; then
	ok "HTTP port taken: exit $EXIT_STATUS naming http.listen"
else
	bad "HTTP port taken: no clean refusal" "$(cat "$TOPO_DIR/busy.log")"
fi
intact "after a second agent whose HTTP port is taken" "$s0"

# --- a second agent without capabilities (it cannot load BPF); nobody must read the config
chmod 755 "$TOPO_DIR"
chmod 644 "$conf"
agent_start nocaps "$conf" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	--bounding-set=-all
# It runs as another uid than the running agent: neither side speaks to the other (issue 38).
if wait_exit "$AGENT_PID" 15 && [ "$EXIT_STATUS" != 0 ] &&
	grep -q "of uid 0, not this agent's uid 65534; not joining it" "$TOPO_DIR/nocaps.log"; then
	ok "no capabilities, another uid: exit $EXIT_STATUS, not joining the running agent"
else
	bad "no capabilities: no clean refusal" "$(cat "$TOPO_DIR/nocaps.log")"
fi
refused_uid() {
	in_node curl -s "http://127.0.0.1:$http_port/metrics" |
		awk '$1 == "ndcache_handover_peers_refused_total{reason=\"uid\"}" {print $2}'
}
refused_one() { [ "$(refused_uid)" = 1 ]; }
if until_ok 5 refused_one; then
	ok "the running agent refused the peer of another uid (ndcache_handover_peers_refused_total{reason=\"uid\"} 1)"
else
	bad "the running agent's count of refused peers: '$(refused_uid)', want 1" "$(grep handover "$TOPO_DIR/a.log")"
fi
intact "after a second agent without capabilities" "$s0"
grep -q "handover: a successor took over" "$TOPO_DIR/a.log" &&
	bad "the running agent was told of a takeover by a failed successor" "$(cat "$TOPO_DIR/a.log")"

# --- a real successor takes over; the old agent leaves everything to it
agent_start b "$conf"
B=$AGENT_PID
if wait_log b "took over from the previous agent" 15; then
	ok "successor took over"
else
	bad "successor did not take over" "$(cat "$TOPO_DIR/b.log")"
fi
s1=$(state)
# one program per hook: the successor's replaced the old one (a comma: two tcx programs)
[ "$s1" != "$s0" ] && [[ "$s1" != *none* && "$s1" != *,* ]] && ok "filters and pins are the successor's ($s0 -> $s1)" ||
	bad "filters and pins after takeover: $s1 (before $s0)"
kill -TERM "$A"
if wait_exit "$A" 15 && [ "$EXIT_STATUS" = 0 ] && grep -q "stopping without detaching" "$TOPO_DIR/a.log"; then
	ok "old agent exits on SIGTERM without detaching"
else
	bad "old agent's exit" "$(tail -20 "$TOPO_DIR/a.log")"
fi
s2=$(state)
[ "$s2" = "$s1" ] && ok "the successor's filters and pins stay ($s2)" || bad "after the old agent's exit: $s2, want $s1"
a=$(ask kubernetes.default.svc.cluster.local A)
x=$(ask www.example.org A)
[ "$a" = 10.96.0.1 ] && [ "$x" = 198.51.100.7 ] && ok "successor answers (cluster $a, upstream $x)" ||
	bad "successor answers: '$a' '$x'"
grep -q "serving from 4 sockets handed over" "$TOPO_DIR/b.log" && ok "successor serves the old agent's sockets" ||
	bad "successor did not inherit the sockets" "$(cat "$TOPO_DIR/b.log")"

# --- kill -9: the kernel keeps answering and fails open
kill -9 "$B"
wait_exit "$B" 5
a=$(ask kubernetes.default.svc.cluster.local A)
x=$(ask api.example.com A)
t=$(ask +tcp payments.example.com A)
[ "$a" = 10.96.0.1 ] && ok "no agent: cluster name answered by the kernel" || bad "no agent: cluster name '$a'"
[ "$x" = 192.0.2.20 ] && ok "no agent: a never-seen name goes to the upstream (UDP)" || bad "no agent: fail-open UDP '$x'"
[ "$t" = 192.0.2.30 ] && ok "no agent: TCP goes to the upstream" || bad "no agent: fail-open TCP '$t'"

# --- the next agent replaces the orphaned program; SIGTERM with no successor removes all
agent_start c "$conf"
C=$AGENT_PID
wait_log c "attached tc ingress and egress" 15 || bad "restart: not attached" "$(cat "$TOPO_DIR/c.log")"
s3=$(state)
[ "$s3" != "$s2" ] && [[ "$s3" != *none* && "$s3" != *,* ]] && ok "restart replaced the orphaned program ($s2 -> $s3)" ||
	bad "restart: state $s3 (orphan $s2)"
kill -TERM "$C"
wait_exit "$C" 15 || bad "agent did not exit on SIGTERM"
s4=$(state)
[ "$s4" = "none none none" ] && ok "SIGTERM with no successor removed filters and pins" ||
	bad "after the last agent's SIGTERM: $s4" "$(tail -10 "$TOPO_DIR/c.log")"


# --- without CAP_SYS_ADMIN (the DaemonSet has BPF, NET_ADMIN, PERFMON): no program can be read
# by its id, so the successor finds its predecessor's egress program through the pinned tcx link
# and swaps its own in (BPF_LINK_UPDATE): one tcx program, the successor's, no clsact filter; a
# kernel without tcx keeps one clsact filter
nosa=(setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin)
agent_start d "$conf" "${nosa[@]}"
D=$AGENT_PID
wait_log d "attached tc ingress and egress" 15 || bad "no SYS_ADMIN: not attached" "$(cat "$TOPO_DIR/d.log")"
tcx_d=$(in_node python3 "$TOPO_TESTS/integration/tcx_progs.py" eth-pod egress 2>/dev/null)
agent_start e "$conf" "${nosa[@]}"
E=$AGENT_PID
wait_log e "took over from the previous agent" 15 || bad "no SYS_ADMIN: no takeover" "$(cat "$TOPO_DIR/e.log")"
kill -TERM "$D"
wait_exit "$D" 15 || bad "no SYS_ADMIN: the old agent did not exit on SIGTERM"
n_cls=$(in_node tc filter show dev eth-pod egress | grep -c "ndc_")
tcx_e=$(in_node python3 "$TOPO_TESTS/integration/tcx_progs.py" eth-pod egress 2>/dev/null)
x=$(ask www.example.com A)
one=no
if [ -n "$tcx_d" ]; then
	what="tcx $tcx_d -> $tcx_e"
	[ "$(echo "$tcx_e" | grep -c .)" = 1 ] && [ "$tcx_e" != "$tcx_d" ] && [ "$n_cls" = 0 ] && one=yes
else
	what="our clsact egress filters $n_cls (no tcx here)"
	[ -z "$tcx_e" ] && [ "$n_cls" = 1 ] && one=yes
fi
if [ "$one" = yes ] && [ "$x" = 192.0.2.10 ]; then
	ok "no SYS_ADMIN: one egress program after the takeover, the successor's ($what); answers"
else
	bad "no SYS_ADMIN: $what, our clsact egress filters $n_cls, answer '$x'" "$(grep "fast path" "$TOPO_DIR/e.log")"
fi
kill -TERM "$E"
wait_exit "$E" 15 || bad "no SYS_ADMIN: the agent did not exit on SIGTERM"
s5=$(state)
left=$(ls "$pins" 2>/dev/null | tr '\n' ' ')
[ "$s5" = "none none none" ] && [ -z "$left" ] &&
	ok "no SYS_ADMIN: SIGTERM with no successor removed filters, links and pins" ||
	bad "no SYS_ADMIN: after SIGTERM: $s5, pins left: $left" "$(tail -10 "$TOPO_DIR/e.log")"

summary test_upgrade.sh
