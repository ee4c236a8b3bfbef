#!/usr/bin/env bash
# Transparent mode (issue 14): pods keep asking the kube-dns ClusterIP (no kubelet change) and
# ndcache answers it. A kube-proxy stand-in in the node netns DNATs a stand-in ClusterIP,
# 169.254.96.10:53, to the unbound upstream 169.254.53.1:53 (nat PREROUTING from the pod's veth,
# nat OUTPUT for hostNetwork clients), in each packet filter kube-proxy may use: iptables-nft,
# iptables-legacy, nftables. In each:
#   - baseline, no ndcache: the ClusterIP is answered through the DNAT by unbound;
#   - deploy/node-setup.sh up (the init container) puts 169.254.20.10 and the ClusterIP on the
#     node, the agent starts with both in `listen`; (iptables-nft) before the NOTRACK rules the
#     kernel fast path already answers at the veth (before netfilter) but a TCP query is DNATed
#     to unbound; (the others) the node-setup container started first installs no rule until the
#     agent has bound every address;
#   - node-setup.sh hold (the DaemonSet's node-setup container, with the overlay's capabilities)
#     installs the NOTRACK rules in the packet filter kube-proxy uses; then the ClusterIP is
#     answered by ndcache: cluster names in the kernel (kernel answer counter) and over TCP by the
#     socket path (TCP query counter), from a pod and from the node (hostNetwork), with the DNAT
#     rule's counter still; misses reach the upstream from the agent, not from the pod;
#   - (iptables-nft) an upgrade: a successor takes over, the old pod's node-setup container sees
#     it on SIGTERM and leaves the rules and addresses; kill -9 of the successor: with the rules
#     still there the kernel answers the ClusterIP and sends the rest on to the upstream (fail
#     open); an agent started again takes over the orphaned programs;
#   - SIGTERM to the node-setup container and then the agent (the preStop order), no successor:
#     rules and addresses are removed and the ClusterIP is answered through the DNAT again.
# Only 169.254.0.0/16 and loopback addresses: the stand-in ClusterIP too.
# Usage: test_transparent.sh BUILD_DIR   (root: network namespaces, BPF, packet filters)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
setup="$root/deploy/node-setup.sh"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}
for cmd in iptables-nft iptables-legacy nft ss nsenter setpriv curl dig python3; do
	command -v "$cmd" >/dev/null || {
		echo "test_transparent.sh: $cmd not found (deploy/deps.sh test installs it)" >&2
		exit 1
	}
done
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || exit 1

CIP=169.254.96.10 # the stand-in kube-dns ClusterIP
ADDRS="$NODE_LOCAL $CIP"
# The node-setup container's capabilities, from the overlay that adds it.
caps=$(python3 - "$root/deploy/overlays/transparent/node-setup.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
c = next(c for c in pod["containers"] if c["name"] == "node-setup")
assert c["command"][-1] == "hold", c["command"]
print(",".join("+" + x.lower() for x in c["securityContext"]["capabilities"]["add"]))
PY
) || exit 1
echo "node-setup container capabilities: $caps"

pins=""
cleanup() {
	topo_down
	[ -n "$pins" ] && rm -rf "$pins"
}

# The init container's command: node_setup up, as root (try_security_context.sh runs it with the
# init container's exact capabilities); no NDC_UID here: no pin directory in the host's bpffs.
node_setup() { NDC_NODE_LOCAL_ADDRESS=$ADDRS nsenter --net=/run/netns/"$NS_NODE" "$setup" "$@"; }
# The node-setup container: hold_start NAME; HOLD_PID. Root, bounding set = the overlay's caps.
hold_start() {
	NDC_NODE_LOCAL_ADDRESS=$ADDRS nsenter --net=/run/netns/"$NS_NODE" \
		setpriv --bounding-set=-all,"$caps" --inh-caps=-all "$setup" hold \
		>"$TOPO_DIR/$1.log" 2>&1 &
	HOLD_PID=$!
	HOLD_NAME=$1
	TOPO_PIDS+=("$HOLD_PID")
}
agent_start() {
	nsenter --net=/run/netns/"$NS_NODE" "$bin" --config "$TOPO_DIR/ndcache.yaml" \
		>"$TOPO_DIR/$1.log" 2>&1 &
	AGENT_PID=$!
	TOPO_PIDS+=("$AGENT_PID")
}
# wait_log NAME REGEX SECONDS
wait_log() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -qE "$2" "$TOPO_DIR/$1.log" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "waited ${3}s for '$2' in $1's log" >&2
	return 1
}

# ask pod|node udp|tcp NAME: one query to the ClusterIP; sets RCODE and ADDR (A records, sorted)
ask() {
	local ns=$NS_POD t=() out
	[ "$1" = node ] && ns=$NS_NODE
	[ "$2" = tcp ] && t=(+tcp)
	out=$(ip netns exec "$ns" dig +time=2 +tries=2 "${t[@]}" @"$CIP" "$3" A +noall +comments \
		+answer 2>&1)
	RCODE=$(sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<<"$out" | head -1)
	ADDR=$(awk '$4 == "A" { print $5 }' <<<"$out" | sort | paste -sd, -)
}
metric() { # metric REGEX: the value of the first matching line of /metrics
	in_node curl -s --max-time 5 "http://127.0.0.1:$http_port/metrics" |
		awk -v re="$1" '$0 ~ re { print $2; exit }'
}
kernel_answers() { metric '^ndcache_kernel_answers_total\{kind="answer"\}'; }
tcp_queries() { metric '^ndcache_tcp_queries_total '; }
upstream_queries() { metric '^ndcache_upstream_queries_total '; }
# Queries unbound logged for NAME from the pod's own address (the DNAT path) and from others
# (case-insensitive: the agent's forwarder sends 0x20 mixed case).
from_pod() { grep -ic "info: $POD_ADDR $1\. A IN" "$TOPO_DIR/unbound.log"; }
from_node() { grep -i "info: [0-9.]* $1\. A IN" "$TOPO_DIR/unbound.log" | grep -vc "info: $POD_ADDR "; }

# --- the kube-proxy stand-in ---------------------------------------------------------------------
kp_up() {
	case $1 in
	iptables-*)
		local ipt=$1
		# kubelet's hint and kube-proxy's canary in the mangle table, as they leave them
		in_node "$ipt" -w 5 -t mangle -N KUBE-IPTABLES-HINT &&
			in_node "$ipt" -w 5 -t mangle -N KUBE-PROXY-CANARY &&
			in_node "$ipt" -w 5 -t nat -N KUBE-SERVICES &&
			in_node "$ipt" -w 5 -t nat -A PREROUTING -i eth-pod -j KUBE-SERVICES &&
			in_node "$ipt" -w 5 -t nat -A OUTPUT -j KUBE-SERVICES || return 1
		for p in udp tcp; do
			in_node "$ipt" -w 5 -t nat -A KUBE-SERVICES -d "$CIP/32" -p $p --dport 53 \
				-j DNAT --to-destination "$UPSTREAM_ADDR:53" || return 1
		done
		;;
	nft)
		in_node nft -f - <<EOF
table ip kube-proxy {
	chain nat-prerouting { type nat hook prerouting priority dstnat; iifname eth-pod jump services; }
	chain nat-output { type nat hook output priority -100; jump services; }
	chain services {
		ip daddr $CIP meta l4proto { udp, tcp } th dport 53 counter dnat to $UPSTREAM_ADDR:53
	}
}
EOF
		;;
	esac
}
# DNATs done so far (one per new connection).
dnat_count() {
	case $BACKEND in
	iptables-*) in_node "$BACKEND" -w 5 -t nat -L KUBE-SERVICES -n -v -x |
		awk '/DNAT/ { n += $1 } END { print n + 0 }' ;;
	nft) in_node nft list chain ip kube-proxy services |
		sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | head -1 ;;
	esac
}
# What node-setup installed, in every packet filter: "ipt-nft:N ipt-legacy:N nft:N" NOTRACK rules
# (iptables: 8, for 2 addresses x UDP, TCP x to, from; nftables: 4, an address set in each rule)
rules() {
	local n l t
	n=$(in_node iptables-nft -w 5 -t raw -S NDCACHE-NOTRACK 2>/dev/null | grep -c -- '-j NOTRACK')
	l=0
	grep -qx raw <(in_node cat /proc/net/ip_tables_names 2>/dev/null) &&
		l=$(in_node iptables-legacy -w 5 -t raw -S NDCACHE-NOTRACK 2>/dev/null | grep -c -- '-j NOTRACK')
	t=$(in_node nft list table inet ndcache 2>/dev/null | grep -c 'notrack$')
	echo "ipt-nft:$n ipt-legacy:$l nft:$t"
}
addrs_on_node() { in_node ip -o addr show | grep -cE " ($NODE_LOCAL|$CIP)/"; }

# The ClusterIP answered through the DNAT by unbound: www.example.com (from the pod's address in
# unbound's log, the DNAT counter moving) and NXDOMAIN for a cluster name, which unbound does
# not have.
dnat_path() {
	local what=$1 d0 d1 p0 p1 r1 a1 r2 a2 r3
	d0=$(dnat_count)
	p0=$(from_pod www.example.com)
	ask pod udp www.example.com
	r1=$RCODE a1=$ADDR
	ask pod tcp www.example.com
	r2=$RCODE a2=$ADDR
	ask pod udp kubernetes.default.svc.cluster.local
	r3=$RCODE
	p1=$(from_pod www.example.com)
	d1=$(dnat_count)
	if [ "$a1" = 192.0.2.10 ] && [ "$a2" = 192.0.2.10 ] && [ "$r3" = NXDOMAIN ] &&
		[ "$((p1 - p0))" -ge 2 ] && [ "$((d1 - d0))" -ge 3 ]; then
		ok "$what: the ClusterIP is answered through the DNAT by unbound (UDP and TCP; $((d1 - d0)) DNATs, unbound saw the pod's address)"
	else
		bad "$what: DNAT path" "www UDP $r1 '$a1', TCP $r2 '$a2', cluster name $r3; DNAT $d0 -> $d1; unbound from the pod $p0 -> $p1"
	fi
}

# The ClusterIP answered by ndcache, NOTRACK rules in place.
ndcache_path() {
	local what=$1 d0 d1 k0 k1 t0 t1 u0 u1 n0 n1 ra aa rt at rn an rm am
	d0=$(dnat_count)
	k0=$(kernel_answers) t0=$(tcp_queries)
	ask pod udp kubernetes.default.svc.cluster.local
	ra=$RCODE aa=$ADDR
	k1=$(kernel_answers)
	ask pod tcp kubernetes.default.svc.cluster.local
	rt=$RCODE at=$ADDR
	t1=$(tcp_queries)
	ask node tcp kube-dns.kube-system.svc.cluster.local
	rn=$RCODE an=$ADDR
	d1=$(dnat_count)
	if [ "$aa" = 10.96.0.1 ] && [ "${k1:-0}" -gt "${k0:-0}" ] 2>/dev/null; then
		ok "$what: UDP to the ClusterIP answered by the kernel ($aa; kernel answers $k0 -> $k1)"
	else
		bad "$what: UDP cluster name" "$ra '$aa', kernel answers $k0 -> $k1"
	fi
	if [ "$at" = 10.96.0.1 ] && [ "${t1:-0}" -gt "${t0:-0}" ] 2>/dev/null; then
		ok "$what: TCP to the ClusterIP answered by the socket path ($at; TCP queries $t0 -> $t1)"
	else
		bad "$what: TCP cluster name" "$rt '$at', TCP queries $t0 -> $t1"
	fi
	[ "$an" = 10.96.0.10 ] && ok "$what: a hostNetwork client (node netns, nat OUTPUT) answered by ndcache over TCP" ||
		bad "$what: hostNetwork client" "$rn '$an'"
	[ "$d1" = "$d0" ] && ok "$what: no DNAT on the way (counter $d0)" ||
		bad "$what: queries were DNATed ($d0 -> $d1)"
	u0=$(upstream_queries) n0=$(from_node "$2")
	ask pod udp "$2"
	rm=$RCODE am=$ADDR
	u1=$(upstream_queries) n1=$(from_node "$2")
	if [ "$am" = "$3" ] && [ "${u1:-0}" -gt "${u0:-0}" ] && [ "$((n1 - n0))" -ge 1 ] &&
		[ "$(from_pod "$2")" = 0 ]; then
		ok "$what: a miss ($2) reaches the upstream from the agent ($am; upstream queries $u0 -> $u1)"
	else
		bad "$what: miss" "$rm '$am' (want $3), upstream queries $u0 -> $u1, unbound from the node $n0 -> $n1, from the pod $(from_pod "$2")"
	fi
}

# --- which packet filter node-setup picks, from the marks kube-proxy and kubelet leave ------------
# mark NETNS WHAT: leaves one mark (nft-table, or BACKEND:TABLE:CHAIN)
mark() {
	local n=(ip netns exec "$1")
	case $2 in
	nft-table) "${n[@]}" nft add table ip kube-proxy ;;
	*:*:*) "${n[@]}" "iptables-${2%%:*}" -w 5 -t "$(cut -d: -f2 <<<"$2")" -N "${2##*:}" ;;
	esac
}
detection() {
	local ns=ndc-det-$$ marks want got m ok_n=0 fails=""
	trap 'ip netns del "ndc-det-$$" 2>/dev/null' EXIT
	while read -r want marks; do
		ip netns add "$ns" || return 1
		for m in $marks; do
			[ "$m" = - ] || mark "$ns" "$m" || fails+=" (cannot leave $m)"
		done
		got=$(NDC_NODE_LOCAL_ADDRESS=$CIP ip netns exec "$ns" "$setup" backend 2>&1)
		if [ "${got%% *}" = "$want" ]; then
			ok_n=$((ok_n + 1))
		else
			fails+=" [$marks: $got, want $want]"
		fi
		# a legacy table only where a mark put one: looking must not create them
		[ "$(ip netns exec "$ns" cat /proc/net/ip_tables_names 2>/dev/null | wc -l)" = \
			"$(grep -o 'legacy:[a-z]*' <<<"$marks" | sort -u | wc -l)" ] ||
			fails+=" [$marks: legacy tables $(ip netns exec "$ns" cat /proc/net/ip_tables_names | paste -sd,)]"
		ip netns del "$ns"
	done <<'MARKS'
iptables-nft -
nft nft-table
nft nft-table legacy:mangle:KUBE-IPTABLES-HINT
iptables-legacy legacy:mangle:KUBE-PROXY-CANARY nft:mangle:KUBE-IPTABLES-HINT
iptables-nft nft:mangle:KUBE-PROXY-CANARY
iptables-legacy legacy:mangle:KUBE-IPTABLES-HINT
iptables-nft nft:mangle:KUBE-IPTABLES-HINT
iptables-nft nft:mangle:KUBE-KUBELET-CANARY
iptables-legacy legacy:nat:KUBE-SERVICES
iptables-nft nft:nat:KUBE-SERVICES
MARKS
	trap - EXIT
	if [ -z "$fails" ]; then
		ok "packet filter detection: $ok_n cases (kube-proxy's nftables table or canary chain, kubelet's hint or canary, KUBE-SERVICES; legacy or nft; none), no legacy table made by looking"
	else
		bad "packet filter detection:$fails"
	fi
}
detection

# --- one packet filter ---------------------------------------------------------------------------
# scenario BACKEND UPGRADE(0|1)
scenario() {
	BACKEND=$1
	local upgrade=$2 A B C H r ra rm d0 d1 k0 k1
	echo "--- kube-proxy stand-in in $BACKEND"
	topo_up || return 1
	trap cleanup EXIT
	pins=/sys/fs/bpf/ndc-transp-$$
	http_port=$((20000 + ($$ + ${#BACKEND}) % 10000))
	UNBOUND_EXTRA=("restart.example.com. 300 IN A 192.0.2.40")
	upstream_up || return 1
	in_node ip addr del "$NODE_LOCAL/32" dev lo # the node setup puts it there
	if ! kp_up "$BACKEND"; then
		bad "$BACKEND: cannot install the kube-proxy stand-in"
		topo_down
		return 1
	fi
	cat >"$TOPO_DIR/ndcache.yaml" <<EOF
listen: [$NODE_LOCAL, $CIP]
upstream: [$UPSTREAM_ADDR:53]
records: {ttl: 30}
dataplane: {mode: tc, interfaces: [eth-pod], pin_dir: $pins}
http: {listen: "127.0.0.1:$http_port"}
workers: 1
EOF

	dnat_path "$BACKEND: baseline, no ndcache"

	# -- the init container, then the agent and the node-setup container. With UPGRADE=1 the
	# agent first and the rules after (what the sockets get without them); else both at once, as
	# kubelet starts them: no rule before the agent has bound every address.
	r=$(node_setup up 2>&1)
	[ "$(addrs_on_node)" = 2 ] && ok "$BACKEND: up: ${r##*node-setup: }" || bad "$BACKEND: up" "$r"
	if [ "$upgrade" = 0 ]; then
		hold_start hold-a
		H=$HOLD_PID
		wait_log hold-a "waiting for an agent" 5
		# What must not happen (rules with no agent) needs a window: hold looks for an agent
		# every second (node-setup.sh), 2 s covers two of its looks.
		sleep 2
		[ "$(rules)" = "ipt-nft:0 ipt-legacy:0 nft:0" ] &&
			ok "$BACKEND: hold: no rules while no agent serves" ||
			bad "$BACKEND: hold: rules with no agent: $(rules)" "$(cat "$TOPO_DIR/hold-a.log")"
	fi
	agent_start a
	A=$AGENT_PID
	if ! wait_log a "attached tc ingress" 15; then
		bad "$BACKEND: the agent did not start" "$(cat "$TOPO_DIR/a.log")"
		topo_down
		return 1
	fi
	if [ "$upgrade" = 1 ]; then
		ask pod udp kubernetes.default.svc.cluster.local
		ra=$ADDR
		ask pod tcp kubernetes.default.svc.cluster.local
		if [ "$ra" = 10.96.0.1 ] && [ "$RCODE" = NXDOMAIN ]; then
			ok "$BACKEND: before the NOTRACK rules: UDP answered at the veth by the kernel, TCP DNATed to unbound (NXDOMAIN)"
		else
			bad "$BACKEND: before the NOTRACK rules" "UDP '$ra', TCP $RCODE '$ADDR' (want 10.96.0.1, NXDOMAIN)"
		fi
		hold_start hold-a
		H=$HOLD_PID
	fi
	if wait_log hold-a "NOTRACK rules for" 15; then
		ok "$BACKEND: hold: $(grep -o 'NOTRACK rules for.*' "$TOPO_DIR/hold-a.log")"
	else
		bad "$BACKEND: hold installed no rules" "$(cat "$TOPO_DIR/hold-a.log")"
	fi
	case "$BACKEND:$(rules)" in
	iptables-nft:"ipt-nft:8 ipt-legacy:0 nft:0" | iptables-legacy:"ipt-nft:0 ipt-legacy:8 nft:0" | \
		nft:"ipt-nft:0 ipt-legacy:0 nft:4")
		ok "$BACKEND: the rules are in kube-proxy's packet filter only ($(rules))" ;;
	*) bad "$BACKEND: rules in the wrong place: $(rules)" ;;
	esac
	ndcache_path "$BACKEND: ndcache" www.example.org 198.51.100.7

	if [ "$upgrade" = 1 ]; then
		# -- an upgrade: the successor takes over; the old pod's node-setup container gets SIGTERM
		# first (the agent's preStop delays the agent's), sees the successor, leaves all
		agent_start b
		B=$AGENT_PID
		wait_log a "a successor took over" 15 || bad "upgrade: no takeover" "$(cat "$TOPO_DIR/b.log")"
		kill -TERM "$H"
		wait_log hold-a "SIGTERM" 5
		kill -TERM "$A"
		wait_pid "$A" 15 "the old agent" || bad "upgrade: the old agent's exit ($?)"
		wait_pid "$H" 30 "the old node-setup container" || bad "upgrade: the old node-setup container's exit ($?)"
		if grep -q "a successor agent has joined" "$TOPO_DIR/hold-a.log" &&
			grep -q "another agent serves" "$TOPO_DIR/hold-a.log" &&
			[ "$(rules)" = "ipt-nft:8 ipt-legacy:0 nft:0" ] && [ "$(addrs_on_node)" = 2 ]; then
			ok "upgrade: the old node-setup container left the rules and addresses to the successor"
		else
			bad "upgrade: node setup after the old pod stopped: $(rules), $(addrs_on_node) addresses" \
				"$(cat "$TOPO_DIR/hold-a.log")"
		fi
		hold_start hold-b
		H=$HOLD_PID
		wait_log hold-b "already in place" 15 || bad "upgrade: the new node-setup container" "$(cat "$TOPO_DIR/hold-b.log")"
		ndcache_path "after the upgrade" api.example.com 192.0.2.20

		# -- kill -9: rules still there, no agent; the kernel answers and fails open
		kill -9 "$B"
		{ wait_pid "$B" 5 "the killed agent"; } 2>/dev/null # no "Killed" from bash
		d0=$(dnat_count)
		ask pod udp kubernetes.default.svc.cluster.local
		ra=$ADDR
		ask pod udp payments.example.com
		rm=$ADDR
		ask pod tcp www.example.com
		d1=$(dnat_count)
		if [ "$ra" = 10.96.0.1 ] && [ "$rm" = 192.0.2.30 ] && [ "$ADDR" = 192.0.2.10 ] &&
			[ "$d1" = "$d0" ]; then
			ok "kill -9, rules in place: the kernel answers the ClusterIP and sends misses and TCP on to the upstream itself (fail open; no DNAT)"
		else
			bad "kill -9: cluster '$ra', miss '$rm', TCP '$ADDR', DNAT $d0 -> $d1" "$(tail -5 "$TOPO_DIR/b.log")"
		fi
		agent_start c
		C=$AGENT_PID
		wait_log c "attached tc ingress" 15 || bad "the restarted agent" "$(cat "$TOPO_DIR/c.log")"
		A=$C
		ndcache_path "restarted" restart.example.com 192.0.2.40
	fi

	# -- uninstall: SIGTERM to the node-setup container, then (preStop over) to the agent
	local hl=$TOPO_DIR/$HOLD_NAME.log
	kill -TERM "$H"
	wait_log "$HOLD_NAME" "SIGTERM" 5
	# The preStop window: the rules are gone, the agent still runs.
	d0=$(dnat_count)
	k0=$(kernel_answers)
	ask pod udp kubernetes.default.svc.cluster.local
	ra=$ADDR
	k1=$(kernel_answers)
	ask pod tcp www.example.com
	d1=$(dnat_count)
	if [ "$ra" = 10.96.0.1 ] && [ "${k1:-0}" -gt "${k0:-0}" ] && [ "$ADDR" = 192.0.2.10 ] &&
		[ "$d1" -gt "$d0" ]; then
		ok "$BACKEND: while the last agent stops: UDP cluster names still answered by the kernel, TCP already through the DNAT"
	else
		bad "$BACKEND: while the last agent stops" "UDP '$ra' (kernel answers $k0 -> $k1), TCP '$ADDR' (DNAT $d0 -> $d1)"
	fi
	kill -TERM "$A"
	wait_pid "$A" 15 "the agent" || bad "$BACKEND: the agent's exit ($?)"
	wait_pid "$H" 30 "the node-setup container" || bad "$BACKEND: the node-setup container's exit ($?)"
	if grep -q "no successor has joined" "$hl" && grep -q "no agent left" "$hl" &&
		[ "$(rules)" = "ipt-nft:0 ipt-legacy:0 nft:0" ] && [ "$(addrs_on_node)" = 0 ]; then
		ok "$BACKEND: SIGTERM, no successor: rules and addresses removed"
	else
		bad "$BACKEND: after SIGTERM with no successor: $(rules), $(addrs_on_node) addresses" "$(cat "$hl")"
	fi
	grep -q "fast path: detached" "$TOPO_DIR"/[ac].log && ok "$BACKEND: the agent detached" ||
		bad "$BACKEND: no detach" "$(tail -5 "$TOPO_DIR/a.log")"
	dnat_path "$BACKEND: after ndcache is gone"
	topo_down
	rm -rf "$pins"
}

scenario iptables-nft 1
scenario iptables-legacy 0
scenario nft 0
summary test_transparent.sh
