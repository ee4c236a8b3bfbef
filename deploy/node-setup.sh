#!/bin/sh
# The node side of ndcache: the addresses it listens on and, in transparent mode, the NOTRACK
# rules that keep kube-proxy's DNAT off them. Run by the DaemonSet (deploy/kubernetes/ndcache.yaml:
# the init container runs `up`; deploy/overlays/transparent adds a container running `hold`),
# installed in the image as /usr/lib/ndcache/node-setup.sh. For dash (the image's sh): POSIX
# but for `local`.
#
#   up       put every listen address on the dummy link (on lo where the kernel has no dummy
#            driver) and hand the BPF pin directory to the agent's user. Idempotent.
#   hold     (a container beside the agent) once an agent has bound every listen address,
#            install the NOTRACK rules, and check them every NDC_RECHECK seconds. On SIGTERM: if another agent takes over (an
#            upgrade), leave everything to it; if this agent is the last one, remove the rules at
#            once (new queries take kube-proxy's DNAT path to kube-dns while the agent finishes),
#            then the addresses once the agent has exited.
#   notrack  install the NOTRACK rules now.
#   down     remove the rules, then the addresses (and the dummy link if it is left empty).
#   backend  print the packet filter the rules go into, and why.
#
# Environment:
#   NDC_NODE_LOCAL_ADDRESS  the config's `listen`, space-separated (required)
#   NDC_PORT                the config's `port` (53)
#   NDC_UID                 up: owner of /sys/fs/bpf/ndcache (the agent's runAsUser); unset: skip
#   NDC_LINK                the dummy link (nodelocaldns, the name NodeLocal DNSCache uses)
#   NDC_NOTRACK_BACKEND     auto (default), iptables-legacy, iptables-nft or nft
#   NDC_RECHECK             hold: seconds between checks of the rules (60)
#   NDC_STOP_WAIT           hold: seconds to wait for the agent to exit after SIGTERM (40: the
#                           agent serves on up to upgrade.join_wait_ms + upgrade.wait_s, 2 + 30 s,
#                           for a successor to take over; the pod's grace period is 45)
#
# Why NOTRACK: a pod's query to the kube-dns ClusterIP is DNATed by kube-proxy in the nat table,
# which sees only tracked connections. Untracked (raw table, before conntrack), the query reaches
# the agent's socket on the address this script puts on the node. The kernel fast path answers at
# the pod's veth (tc ingress), before netfilter: it needs no rule. Rules go into the packet filter
# kube-proxy itself uses (detect, below), not beside it in another one.
# shellcheck disable=SC3043 # local: dash, busybox and bash have it
set -eu

ADDRS=${NDC_NODE_LOCAL_ADDRESS:?NDC_NODE_LOCAL_ADDRESS: the listen addresses}
PORT=${NDC_PORT:-53}
LINK=${NDC_LINK:-nodelocaldns}
CHAIN=NDCACHE-NOTRACK
TABLE=ndcache
# iptables waits this long for the xtables lock that kube-proxy also takes (iptables-legacy).
WAIT=5

log() { echo "node-setup: $*"; }
has() { command -v "$1" >/dev/null 2>&1; }
is_v6() { case $1 in *:*) return 0 ;; esac; return 1; }
plen() { if is_v6 "$1"; then echo 128; else echo 32; fi; }
addrs_of() { # addrs_of 4|6: the listen addresses of that family
	for a in $ADDRS; do
		if is_v6 "$a"; then [ "$1" = 6 ] && echo "$a"; else [ "$1" = 4 ] && echo "$a"; fi
	done
	return 0
}

# -- addresses -----------------------------------------------------------------------------------

addrs_up() {
	dev=$LINK
	if ! ip link show "$dev" >/dev/null 2>&1; then
		ip link add "$dev" type dummy 2>/dev/null || dev=lo
	fi
	ip link set "$dev" up
	for a in $ADDRS; do
		ip addr replace "$a/$(plen "$a")" dev "$dev"
	done
	log "node-local address $ADDRS on $dev"
}

addrs_down() {
	for a in $ADDRS; do
		for dev in "$LINK" lo; do
			ip addr del "$a/$(plen "$a")" dev "$dev" 2>/dev/null && log "removed $a from $dev"
		done
	done
	# The dummy link only if it is ours to remove: a dummy with nothing left on it.
	if ip -d link show "$LINK" 2>/dev/null | grep -qw dummy &&
		[ -z "$(ip -o addr show dev "$LINK" 2>/dev/null)" ]; then
		ip link del "$LINK" && log "removed the link $LINK"
	fi
	return 0
}

pin_dir() {
	[ -n "${NDC_UID:-}" ] || return 0
	if [ "$(stat -f -c %T /sys/fs/bpf)" = bpf_fs ]; then
		# mode first: once chowned, root without CAP_FOWNER may not chmod it
		# shellcheck disable=SC2174 # /sys/fs/bpf exists: -m applies to the one made here
		mkdir -p -m 0700 /sys/fs/bpf/ndcache
		chown "$NDC_UID:$NDC_UID" /sys/fs/bpf/ndcache
	else
		log "/sys/fs/bpf is not bpffs on this node: the agent will answer from sockets"
	fi
}

# -- which packet filter -------------------------------------------------------------------------

# Legacy tables exist in this network namespace only once something used them; looking at them
# with iptables-legacy would create them (and make iptables-nft warn about them forever after).
legacy_has() { grep -qx "$2" "/proc/net/ip${1#4}_tables_names" 2>/dev/null; }
ipt() { # ipt 4|6 legacy|nft ARGS...: iptables or ip6tables of that backend
	local fam="$1" be="$2"
	shift 2
	if [ "$fam" = 6 ]; then "ip6tables-$be" -w "$WAIT" "$@"; else "iptables-$be" -w "$WAIT" "$@"; fi
}

# chain_in 4 legacy|nft TABLE CHAIN: the chain exists there. Legacy only where that table exists.
chain_in() {
	[ "$2" = nft ] || legacy_has "$1" "$3" || return 1
	has "iptables-$2" && ipt "$1" "$2" -t "$3" -S "$4" >/dev/null 2>&1
}

# Sets BACKEND (once) and WHY: the packet filter kube-proxy's DNAT is in. Its own marks first,
# the small ones before the big ones (a nat table holds every Service): kube-proxy's nftables
# table, its canary chain in the mangle table, kubelet's hint chain there (kubelet 1.24 and later
# create KUBE-IPTABLES-HINT in the mangle table of the iptables the node uses, for components
# like this one), then kube-proxy's KUBE-SERVICES chain in the nat table.
detect() {
	[ -z "${BACKEND:-}" ] || return 0
	BACKEND=${NDC_NOTRACK_BACKEND:-auto}
	WHY="NDC_NOTRACK_BACKEND"
	[ "$BACKEND" = auto ] || return 0
	if has nft && nft list tables ip 2>/dev/null | grep -qx 'table ip kube-proxy'; then
		BACKEND=nft WHY="kube-proxy's nftables table is there"
		return 0
	fi
	for mark in "mangle KUBE-PROXY-CANARY kube-proxy's canary chain" \
		"mangle KUBE-IPTABLES-HINT kubelet's hint chain" \
		"mangle KUBE-KUBELET-CANARY kubelet's canary chain" \
		"nat KUBE-SERVICES kube-proxy's KUBE-SERVICES chain"; do
		# shellcheck disable=SC2086 # split on purpose: table, chain, then what it means
		set -- $mark
		for b in legacy nft; do
			if chain_in 4 $b "$1" "$2"; then
				t=$1
				shift 2
				BACKEND=iptables-$b WHY="$* is in iptables-$b ($t table)"
				return 0
			fi
		done
	done
	if has iptables-nft; then
		BACKEND=iptables-nft WHY="no kube-proxy or kubelet chains found; iptables' default backend"
	else
		BACKEND=nft WHY="no kube-proxy or kubelet chains found and no iptables-nft"
	fi
}

# -- the rules -----------------------------------------------------------------------------------
# For each address, UDP and TCP to the port (queries: PREROUTING from pods, OUTPUT from
# hostNetwork pods, which kube-proxy DNATs in nat OUTPUT) and from it (the agent's replies), in
# one chain jumped to from both hooks, first: as NodeLocal DNSCache does.

ipt_rules() { # ipt_rules 4|6 legacy|nft: the restore input
	echo "*raw"
	echo ":$CHAIN - [0:0]" # declared in a --noflush restore: created, or emptied, atomically
	for a in $(addrs_of "$1"); do
		for p in udp tcp; do
			echo "-A $CHAIN -d $a -p $p --dport $PORT -j NOTRACK"
			echo "-A $CHAIN -s $a -p $p --sport $PORT -j NOTRACK"
		done
	done
	for hook in PREROUTING OUTPUT; do
		ipt "$1" "$2" -t raw -C "$hook" -j "$CHAIN" 2>/dev/null || echo "-I $hook 1 -j $CHAIN"
	done
	echo COMMIT
}

ipt_up() {
	b=${BACKEND#iptables-}
	for f in 4 6; do
		[ -n "$(addrs_of $f)" ] || continue
		if [ $f = 6 ]; then cmd=ip6tables-$b-restore; else cmd=iptables-$b-restore; fi
		# Not piped: iptables-legacy -C in ipt_rules would wait for the lock restore holds.
		rules=$(ipt_rules $f "$b")
		echo "$rules" | "$cmd" -w "$WAIT" --noflush
	done
}

ipt_present() {
	b=${BACKEND#iptables-}
	for f in 4 6; do
		n=$(($(addrs_of $f | wc -l) * 4))
		[ "$n" -gt 0 ] || continue
		[ "$b" = legacy ] && ! legacy_has $f raw && return 1
		ipt "$f" "$b" -t raw -C PREROUTING -j "$CHAIN" 2>/dev/null || return 1
		ipt "$f" "$b" -t raw -C OUTPUT -j "$CHAIN" 2>/dev/null || return 1
		[ "$(ipt "$f" "$b" -t raw -S "$CHAIN" 2>/dev/null | grep -c -- '-j NOTRACK')" = "$n" ] ||
			return 1
	done
}

ipt_down() { # ipt_down legacy|nft
	for f in 4 6; do
		[ "$1" = legacy ] && ! legacy_has $f raw && continue
		has "$([ $f = 6 ] && echo ip6tables || echo iptables)-$1" || continue
		ipt "$f" "$1" -t raw -S "$CHAIN" >/dev/null 2>&1 || continue
		while ipt "$f" "$1" -t raw -D PREROUTING -j "$CHAIN" 2>/dev/null; do :; done
		while ipt "$f" "$1" -t raw -D OUTPUT -j "$CHAIN" 2>/dev/null; do :; done
		ipt "$f" "$1" -t raw -F "$CHAIN" && ipt "$f" "$1" -t raw -X "$CHAIN" &&
			log "removed the NOTRACK rules (iptables-$1, IPv$f)"
	done
}

nft_set() { # nft_set 4|6: "{ a, b }" or nothing
	s=$(addrs_of "$1" | paste -sd, - | sed 's/,/, /g')
	[ -z "$s" ] || echo "{ $s }"
}

nft_up() {
	body=
	for f in 4 6; do
		set=$(nft_set $f)
		[ -n "$set" ] || continue
		k=ip
		[ $f = 6 ] && k=ip6
		body="$body
		$k daddr $set meta l4proto { udp, tcp } th dport $PORT notrack
		$k saddr $set meta l4proto { udp, tcp } th sport $PORT notrack"
	done
	# One transaction: create (so that delete cannot fail), delete, create with the rules.
	nft -f - <<EOF
table inet $TABLE
delete table inet $TABLE
table inet $TABLE {
	chain prerouting {
		type filter hook prerouting priority raw; policy accept;$body
	}
	chain output {
		type filter hook output priority raw; policy accept;$body
	}
}
EOF
}

nft_present() {
	n=$(($(nft_set 4 | grep -c .) * 4 + $(nft_set 6 | grep -c .) * 4))
	[ "$(nft list table inet $TABLE 2>/dev/null | grep -c 'notrack$')" = "$n" ]
}

nft_down() {
	has nft && nft list table inet $TABLE >/dev/null 2>&1 || return 0
	nft delete table inet $TABLE && log "removed the NOTRACK rules (nft table inet $TABLE)"
}

rules_present() {
	case $BACKEND in
	nft) nft_present ;;
	iptables-legacy | iptables-nft) ipt_present ;;
	esac
}

# rules_up [quiet]: installs the rules unless they are all there.
rules_up() {
	detect
	rules_present && { [ -n "${1:-}" ] || log "NOTRACK rules already in place ($BACKEND)"; } &&
		return 0
	case $BACKEND in
	nft) has nft || { log "nft is not installed" >&2 && return 1; } && nft_up ;;
	iptables-legacy | iptables-nft)
		has "$BACKEND" || { log "$BACKEND is not installed" >&2 && return 1; } && ipt_up
		;;
	*)
		log "NDC_NOTRACK_BACKEND=$BACKEND: expected auto, iptables-legacy, iptables-nft or nft" >&2
		return 1
		;;
	esac
	log "NOTRACK rules for $ADDRS port $PORT via $BACKEND ($WHY)"
}

# Wherever they are: the backend kube-proxy uses may have changed since they went in.
rules_down() {
	nft_down
	ipt_down nft
	ipt_down legacy
}

# -- agents --------------------------------------------------------------------------------------
# Agents for the same listen address meet at the abstract unix socket ndcache/ADDR/PORT
# (control/handover.h): the running agent listens there, a successor connects to it, takes over,
# and listens there itself once its predecessor has exited (it retries every 200 ms).

# The handover socket's name for each listen address, then the inode of the first socket in
# ss's output (-l: listening; state established: a successor's connection) that has one of them.
handover_inode() {
	ss -H -x "$@" 2>/dev/null | awk -v port="$PORT" -v addrs="$ADDRS" '
		BEGIN { n = split(addrs, a, " "); for (i = 1; i <= n; i++) want["@ndcache/" a[i] "/" port] = 1 }
		{ for (i = 1; i < NF; i++) if ($i in want) { print $(i + 1); exit } }'
}
listener() { handover_inode -l; }
joined() { [ -n "$(handover_inode state established)" ]; }

# An agent serves every listen address: each has a UDP socket on the port (the agent binds each
# address; a successor shares its predecessor's sockets). Rules for an address nobody has bound
# would make it a black hole: NOTRACK skips the DNAT, and the local address refuses.
serving() {
	bound=$(ss -H -u -l -n 2>/dev/null | awk '{ print $4 }')
	for a in $ADDRS; do
		if is_v6 "$a"; then s="[$a]:$PORT"; else s="$a:$PORT"; fi
		echo "$bound" | grep -qxF "$s" || return 1
	done
}

# nap SECONDS: a sleep that SIGTERM interrupts.
nap() {
	sleep "$1" &
	NAP=$!
	wait "$NAP" || true
	NAP=
}

# until_ SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds; 1 after SECONDS.
until_() {
	n=$(($1 * 10))
	shift
	while ! "$@"; do
		[ "$n" -gt 0 ] || return 1
		n=$((n - 1))
		sleep 0.1
	done
}
listener_is_not() { [ "$(listener)" != "$1" ]; }
other_listener() { l=$(listener) && [ -n "$l" ] && [ "$l" != "$1" ]; }

# SIGTERM to `hold`. The agent's preStop hook delays its own SIGTERM, so our agent still runs
# here and the listener is its. A successor that has joined is connected to it, and listens in
# its place within 200 ms of its exit (it retries every 200 ms). No successor: nothing listens.
# Either way the decision is checked after our agent has exited: a would-be successor that
# joined but failed leaves no listener, and an agent started meanwhile (a replacement pod) does.
stop() {
	trap - TERM INT
	[ -n "${NAP:-}" ] && kill "$NAP" 2>/dev/null
	ours=$(listener)
	if joined; then
		log "SIGTERM: a successor agent has joined; waiting for this one to exit"
	else
		log "SIGTERM: no successor has joined: removing the NOTRACK rules now (new queries" \
			"take kube-proxy's path to kube-dns while the agent finishes)"
		rules_down
	fi
	wait_s=${NDC_STOP_WAIT:-40}
	if [ -n "$ours" ] && ! until_ "$wait_s" listener_is_not "$ours"; then
		log "the agent still runs after ${wait_s}s; going on as if it had exited"
	fi
	# 2 s: a successor's 200 ms retry on a loaded node.
	if until_ 2 other_listener "$ours" && serving; then
		rules_up quiet
		log "another agent serves: the rules and addresses stay with it"
		exit 0
	fi
	rules_down
	if other_listener "$ours"; then
		log "another agent runs but does not serve all of $ADDRS: rules removed, addresses" \
			"left to it"
		exit 0
	fi
	addrs_down
	log "no agent left: node setup removed"
	exit 0
}

hold() {
	NAP=
	trap stop TERM INT
	log "waiting for an agent to serve on $ADDRS port $PORT"
	while ! serving; do nap 1; done
	rules_up
	while :; do
		nap "${NDC_RECHECK:-60}"
		if serving && ! rules_present; then
			log "NOTRACK rules missing (flushed?): putting them back"
			rules_up quiet
		fi
	done
}

case ${1:-} in
up)
	addrs_up
	pin_dir
	;;
hold) hold ;;
notrack) rules_up ;;
down)
	rules_down
	addrs_down
	;;
backend)
	detect
	echo "$BACKEND ($WHY)"
	;;
*)
	echo "usage: $0 up|hold|notrack|down|backend (environment: see the script's header)" >&2
	exit 2
	;;
esac
