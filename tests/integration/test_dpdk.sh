#!/usr/bin/env bash
# The DPDK dataplane (dataplane.mode: dpdk) in the test topology, no hugepages: the agent takes
# the node side of the pod's veth with net_af_packet (--no-huge), and gives the kernel a net_tap
# (ndc-tap0, the veth's MAC) for everything it does not answer. The veth's address moves to the
# tap, so the pod's ARP for its gateway, its TCP, its misses and the socket path's replies all go
# through that exception path. Records come from the fake API server (tests/fakeapi).
#
# Checks: test_fastpath.sh's questions (its first run's list), asked over UDP (the lcore
# answers) and TCP (the socket path, through the tap), decode equal; every record kind is
# answered by the lcore (its counter moves, the socket path's does not); ARP and ICMP through the
# tap; a miss is forwarded, then answered by the lcore from the cache with its TTL counting down;
# a Service added in the API server reaches the DPDK table; SIGTERM stops it cleanly (tap gone,
# EAL files gone). Then the same agent with net_af_xdp on the veth (hugepages set up here and
# restored afterwards), and a build without DPDK must refuse mode dpdk at start with a clear
# error.
#
# Usage: test_dpdk.sh BUILD_DIR [NODPDK_BUILD_DIR]   (root: network namespaces, af_packet)
# Without NODPDK_BUILD_DIR, BUILD_DIR-nodpdk is configured (-Ddpdk=disabled) and its ndcache
# built. NDC_DPDK_AF_XDP=0 skips the net_af_xdp part.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
nodpdk=${2:-}
bin="$build/control/ndcache"
fake="$root/tests/fakeapi/fake_apiserver.py"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}
for t in ethtool iptables ip6tables arptables curl dig python3; do
	command -v "$t" >/dev/null || {
		echo "test_dpdk: $t is missing (deploy/deps.sh test)" >&2
		exit 1
	}
done

TAP=ndc-tap0
METRICS=http://127.0.0.1:9254/metrics
q() { in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$@" 2>&1; }
# metric NAME [LABEL-SUBSTRING]: the sum of NAME's series (those whose labels contain it).
metric() {
	in_node curl -s "$METRICS" | awk -v n="$1" -v f="${2:-}" '
		{ split($1, a, "{") } a[1] == n && index($1, f) { s += $2 } END { printf "%d\n", s }'
}
until_ok() {
	local t=$1 i
	shift
	for ((i = 0; i < t * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
answer_is() { [ "$(q "$1" "$2")" = "$3" ]; }

# The kernel hands the tap over to the agent's port: the veth's address moves to the tap, whose
# MAC is the veth's, so the pod's neighbour entry stays right. net_af_packet reads the veth
# beside the kernel (af_packet sockets get a copy of every frame, before netfilter): the
# kernel's copy is dropped, or the kernel would answer ARP and the socket path each query a
# second time. (iptables rather than a tc drop: this kernel has no tc action modules.)
# The pod computes full checksums: af_packet hands over frames as the veth carries them, and a
# CHECKSUM_PARTIAL frame from a socket would reach the kernel through the tap with a wrong UDP
# or TCP checksum (a NIC's frames always have real ones).
kernel_gives_up_veth() {
	in_pod ethtool -K eth0 tx off >/dev/null 2>&1 || return 1
	in_node ip addr del "$NODE_VETH_ADDR/24" dev eth-pod
	in_node iptables -t raw -A PREROUTING -i eth-pod -j DROP &&
		in_node ip6tables -t raw -A PREROUTING -i eth-pod -j DROP &&
		in_node arptables -A INPUT -i eth-pod -j DROP
}
kernel_takes_veth_copies() {
	in_node iptables -t raw -D PREROUTING -i eth-pod -j DROP
	in_node ip6tables -t raw -D PREROUTING -i eth-pod -j DROP
	in_node arptables -D INPUT -i eth-pod -j DROP
}
tap_takes_address() {
	until_ok 20 in_node ip link show "$TAP" >/dev/null 2>&1 || return 1
	in_node ip addr add "$NODE_VETH_ADDR/24" dev "$TAP"
	in_node ip link set "$TAP" up
}

# --- The fake API server and the agent ------------------------------------------------------
topo_up || exit 1
upstream_up || exit 1
certs="$TOPO_DIR/certs"
"$root/tests/fakeapi/make_certs.sh" "$certs" >/dev/null || exit 1
printf token-one >"$TOPO_DIR/token"
API_PORT=16443
CTL_PORT=16444
ip netns exec "$NS_NODE" python3 "$fake" --cert "$certs/server.pem" --key "$certs/server.key" \
	--token token-one --objects "$root/deploy/examples/sample-cluster.json" \
	--port $API_PORT --control-port $CTL_PORT --bookmark-interval 1 \
	>"$TOPO_DIR/fakeapi.out" 2>"$TOPO_DIR/fakeapi.err" &
TOPO_PIDS+=($!)
until_ok 5 grep -qs "fakeapi listening" "$TOPO_DIR/fakeapi.out" || {
	cat "$TOPO_DIR/fakeapi.err" >&2
	exit 1
}
ctl() { in_node curl -sf -X POST --data "$1" "http://127.0.0.1:$CTL_PORT/control" >/dev/null; }
fakeapi_kubeconfig "$TOPO_DIR/kubeconfig" "$certs/ca.pem"

# dpdk_conf VDEV EAL-ARGS...: the agent's config for a port given as VDEV.
dpdk_conf() {
	local vdev=$1 a args=""
	shift
	for a in "$@" "--vdev=$vdev"; do args+="\"$a\", "; done
	cat <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR:53]
source:
  kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}
records:
  ttl: 30
  pods: verified
dataplane:
  mode: dpdk
  dpdk:
    eal_args: [${args%, }]
    # a shared 2-CPU test machine: sleep when idle instead of spinning a CPU away
    poll_sleep_us: 100
workers: 2
EOF
}
conf="$TOPO_DIR/ndcache.yaml"
dpdk_conf net_af_packet0,iface=eth-pod --no-huge -m 256 --no-pci >"$conf"
"$bin" --config "$conf" --check-config >/dev/null && ok "--check-config accepts the dpdk keys" ||
	bad "--check-config" "$("$bin" --config "$conf" --check-config 2>&1)"
kernel_gives_up_veth || {
	bad "cannot set up the veth for the agent (ethtool, tc)"
	summary dpdk
	exit 1
}
ndcache_up "$bin" "$conf" || {
	bad "ndcache (mode dpdk) did not start"
	summary dpdk
	exit 1
}
tap_takes_address || bad "no tap $TAP" "$(cat "$TOPO_DIR/ndcache.log")"
if until_ok 20 answer_is kubernetes.default.svc.cluster.local A 10.96.0.1; then
	ok "the pod resolves through the DPDK port"
else
	bad "the pod gets no answer through the DPDK port" "$(cat "$TOPO_DIR/ndcache.log")"
	summary dpdk
	exit 1
fi

# --- The exception path: ARP and ICMP, both ways ---------------------------------------------
in_pod ip neigh flush dev eth0
mac=$(in_node cat /sys/class/net/eth-pod/address)
if in_pod ping -c 1 -W 2 "$NODE_VETH_ADDR" >/dev/null &&
	in_pod ip neigh show "$NODE_VETH_ADDR" | grep -q "lladdr $mac"; then
	ok "ARP for the gateway answered by the kernel through the tap ($mac)"
else
	bad "ARP/ICMP through the tap" "$(in_pod ip neigh show)"
fi
in_pod ping -c 1 -W 2 "$NODE_LOCAL" >/dev/null && ok "ICMP to the node-local address through the tap" ||
	bad "no ICMP reply from $NODE_LOCAL"
in_node ip neigh flush dev "$TAP"
in_node ping -c 1 -W 2 "$POD_ADDR" >/dev/null && ok "the kernel's own ARP and ICMP reach the pod through the port" ||
	bad "no ICMP reply from the pod to the kernel"

# --- Every record kind from the lcore; the socket path sees none of them ---------------------
kinds=(
	"kubernetes.default.svc.cluster.local A" "frontend.shop.svc.cluster.local AAAA"
	"postgres.data.svc.cluster.local A" "postgres-0.postgres.data.svc.cluster.local A"
	"_pg._tcp.postgres.data.svc.cluster.local SRV" "1.0.96.10.in-addr.arpa PTR"
	"payments.shop.svc.cluster.local CNAME" "payments.shop.svc.cluster.local A"
	"dns-version.cluster.local TXT" "cluster.local SOA" "cluster.local NS"
	"cart.shop.svc.cluster.local AAAA" "api.github.com.default.svc.cluster.local A"
)
udp0=$(metric ndcache_udp_queries_total)
ans0=$(metric ndcache_dpdk_answers_total)
for k in "${kinds[@]}"; do
	read -r name type <<<"$k"
	a0=$(metric ndcache_dpdk_answers_total)
	in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" "$name" "$type" >"$TOPO_DIR/out" 2>&1
	a1=$(metric ndcache_dpdk_answers_total)
	if grep -q "status: NOERROR\|status: NXDOMAIN" "$TOPO_DIR/out" && [ "$a1" = $((a0 + 1)) ]; then
		ok "$name $type: answered by the DPDK lcore"
	else
		bad "$name $type: not answered by the lcore (answers $a0 -> $a1)" "$(cat "$TOPO_DIR/out")"
	fi
done
udp1=$(metric ndcache_udp_queries_total)
[ "$udp1" = "$udp0" ] && ok "the socket path saw none of them (udp queries stay $udp0)" ||
	bad "the socket path answered some: udp queries $udp0 -> $udp1"

# --- A miss: forwarded by the socket path, then cached and answered by the lcore ------------
up0=$(metric ndcache_upstream_queries_total)
q www.example.org A >/dev/null
up1=$(metric ndcache_upstream_queries_total)
[ "$up1" -gt "$up0" ] && ok "a miss goes through the tap to the socket path and upstream" ||
	bad "miss not forwarded upstream ($up0 -> $up1)"
# tracks N: the lcore's table holds at least N cached answers (the publisher tracks their expiry).
tracks() { [ "$(metric ndcache_kernel_expiry_tracked)" -ge "$1" ] 2>/dev/null; }
wait_until 5 "the miss's cached answer in the lcore's table" tracks 1 ||
	bad "www.example.org's answer not published to the lcore's table" "$(metrics | grep -E 'expiry_tracked|cache_entries')"
a0=$(metric ndcache_dpdk_answers_total kind=\"answer\")
u0=$(metric ndcache_udp_queries_total)
t1=$(in_pod dig +time=2 +tries=1 +noall +answer "@$NODE_LOCAL" www.example.org A | awk '{print $2}')
sleep 2.2 # a duration: the TTL counts down in whole seconds
t2=$(in_pod dig +time=2 +tries=1 +noall +answer "@$NODE_LOCAL" www.example.org A | awk '{print $2}')
a1=$(metric ndcache_dpdk_answers_total kind=\"answer\")
u1=$(metric ndcache_udp_queries_total)
if [ "$a1" = $((a0 + 2)) ] && [ "$u1" = "$u0" ] && [ -n "$t1" ] && [ -n "$t2" ] && [ "$t2" -lt "$t1" ]; then
	ok "the cached answer comes from the lcore, its TTL counting down ($t1 -> $t2)"
else
	bad "cached answer: lcore answers $a0 -> $a1, socket $u0 -> $u1, TTL $t1 -> $t2"
fi

# --- TCP through the exception path ---------------------------------------------------------
[ "$(in_pod dig +tcp +time=2 +tries=1 +short "@$NODE_LOCAL" kubernetes.default.svc.cluster.local A)" = 10.96.0.1 ] &&
	ok "TCP through the tap to the socket path" || bad "no answer over TCP"

# --- test_fastpath.sh's questions: lcore (UDP) and socket path (TCP) answer alike -----------
# The question list is test_fastpath.sh's own generator (its first run's list), taken from that
# file: one list, so the two tests cannot drift apart.
gen="$TOPO_DIR/questions.py"
awk -v q="'" '
	!in_py && $0 ~ ("python3 - .*<<" q "[A-Z]+" q "$") {
		d = $0; sub(".*<<" q, "", d); sub(q "$", "", d); in_py = 1; next }
	in_py && $0 == d { exit }
	in_py { print }' "$here/test_fastpath.sh" >"$gen"
questions="$TOPO_DIR/questions"
python3 "$gen" "$root/deploy/examples/sample-cluster.json" "" >"$questions" || bad "question generator"
n=$(wc -l <"$questions")
norm() {
	grep -Ev '^;; (Query time|SERVER|WHEN|MSG SIZE|global options)|^; <<>>|^$|^;; WARNING|^;; You are|^; \(1 server' |
		sed -E 's/id: [0-9]+/id: X/; s/^([^;][^[:space:]]*)[[:space:]]+[0-9]+[[:space:]]+IN/\1 TTL IN/' |
		awk '/^;/ { print; next } { print tolower($0) }'
}
ask() { in_pod dig +time=2 +tries=1 $3 $4 "@$NODE_LOCAL" "$1" "$2" 2>&1 | norm; }
for name in www.example.com www.example.org nothere.example.com; do
	ask "$name" A "" +notcp >/dev/null
done
wait_until 5 "the three cached answers in the lcore's table" tracks 3 ||
	bad "the warmed external names not published to the lcore's table" "$(metrics | grep -E 'expiry_tracked|cache_entries')"
a0=$(metric ndcache_dpdk_answers_total)
mismatch=0
while read -r name type opt; do
	u=$(ask "$name" "$type" "$opt" +notcp)
	t=$(ask "$name" "$type" "$opt" +tcp)
	if [ "$u" != "$t" ]; then
		mismatch=$((mismatch + 1))
		[ $mismatch -le 5 ] && bad "$name $type $opt: UDP (DPDK) and TCP (socket) differ" \
			"$(diff <(echo "$u") <(echo "$t"))"
	fi
done <"$questions"
a1=$(metric ndcache_dpdk_answers_total)
if [ "$n" -ge 500 ] && [ $mismatch = 0 ]; then ok "$n questions: DPDK and socket-path answers equal"; else bad "$mismatch of $n questions differ"; fi
# As in test_fastpath.sh: all but the reverse names of other types (forwarded by design).
[ $((a1 - a0)) -ge $((n * 2 / 3)) ] && ok "the lcore answered $((a1 - a0)) of the $n UDP questions" ||
	bad "the lcore answered only $((a1 - a0)) of $n"

# --- A record change from the API server reaches the DPDK table -----------------------------
svc='{"apiVersion":"v1","kind":"Service","metadata":{"name":"late","namespace":"shop","uid":"u-late"},"spec":{"type":"ClusterIP","clusterIP":"10.96.77.7","clusterIPs":["10.96.77.7"],"ports":[{"name":"http","port":80,"protocol":"TCP"}]}}'
ctl "{\"op\":\"apply\",\"object\":$svc}"
if until_ok 5 answer_is late.shop.svc.cluster.local A 10.96.77.7; then
	a0=$(metric ndcache_dpdk_answers_total kind=\"answer\")
	u0=$(metric ndcache_udp_queries_total)
	r=$(q late.shop.svc.cluster.local A)
	a1=$(metric ndcache_dpdk_answers_total kind=\"answer\")
	u1=$(metric ndcache_udp_queries_total)
	[ "$r" = 10.96.77.7 ] && [ "$a1" = $((a0 + 1)) ] && [ "$u1" = "$u0" ] &&
		ok "a Service added in the API server is answered by the lcore" ||
		bad "added Service: answer '$r', lcore $a0 -> $a1, socket $u0 -> $u1"
else
	bad "added Service not answered"
fi
ctl '{"op":"delete","kind":"Service","namespace":"shop","name":"late"}'
until_ok 5 eval '[ "$(in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" late.shop.svc.cluster.local A | grep -o "status: [A-Z]*")" = "status: NXDOMAIN" ]' &&
	ok "deleted: NXDOMAIN from the lcore" || bad "deleted Service still answered"

# --- Metrics, then a clean stop ----------------------------------------------------------------
m=$(in_node curl -s "$METRICS")
for s in ndcache_dpdk_rx_packets_total ndcache_dpdk_tx_packets_total ndcache_dpdk_passed_total \
	ndcache_dpdk_exception_packets_total ndcache_dpdk_dropped_total \
	ndcache_dpdk_mbuf_alloc_failed_total ndcache_dpdk_mbufs_free; do
	grep -q "^$s" <<<"$m" || bad "no $s in /metrics"
done
# The answer table follows its entries: a few hundred here, in a hash far below the cap.
read -r te tc ts tb tn < <(awk '$1 == "ndcache_dpdk_table_entries" { e = $2 }
	$1 == "ndcache_dpdk_table_capacity" { c = $2 } $1 == "ndcache_dpdk_table_slots" { s = $2 }
	$1 == "ndcache_dpdk_table_bytes" { b = $2 } $1 == "ndcache_dpdk_table_needed_bytes" { n = $2 }
	END { print e + 0, c + 0, s + 0, b + 0, n + 0 }' <<<"$m")
[ "$te" -gt 0 ] && [ "$te" -le "$ts" ] && [ "$ts" -lt "$tc" ] && [ "$tn" -gt 0 ] && [ "$tb" -gt 0 ] &&
	ok "DPDK table sized by its content: $te entries in $ts slots (cap $tc), $tb bytes for $tn needed" ||
	bad "DPDK table metrics: entries $te slots $ts capacity $tc bytes $tb needed $tn"
grep -q '^ndcache_dpdk_answers_total{port="0",queue="0",lcore="1",kind="answer"}' <<<"$m" &&
	ok "per port, queue and lcore counters in /metrics" || bad "metrics labels" "$(grep ndcache_dpdk <<<"$m" | head)"
pid=$NDCACHE_PID
kill -TERM "$pid"
if wait "$pid"; then ok "SIGTERM: clean exit"; else bad "SIGTERM: exit status $?" "$(tail -5 "$TOPO_DIR/ndcache.log")"; fi
in_node ip link show "$TAP" >/dev/null 2>&1 && bad "the tap outlived the agent" || ok "the tap is gone with the agent"
[ -e "/var/run/dpdk/ndcache-$pid" ] && bad "/var/run/dpdk/ndcache-$pid left behind" || ok "no EAL runtime files left"
grep -q "dpdk: [0-9]* answered" "$TOPO_DIR/ndcache.log" && echo "# $(grep -o 'dpdk: [0-9]* answered.*' "$TOPO_DIR/ndcache.log")"

# --- net_af_xdp on the same veth, with hugepages --------------------------------------------
hp_saved=""
hp_mounted=0
hugepages_up() {
	hp_saved=$(cat /proc/sys/vm/nr_hugepages)
	if ! mountpoint -q /dev/hugepages; then
		mkdir -p /dev/hugepages
		mount -t hugetlbfs none /dev/hugepages || return 1
		hp_mounted=1
	fi
	[ "$hp_saved" -ge 256 ] || echo 256 >/proc/sys/vm/nr_hugepages
	[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 128 ]
}
hugepages_down() {
	[ -n "$hp_saved" ] && echo "$hp_saved" >/proc/sys/vm/nr_hugepages
	[ $hp_mounted = 1 ] && umount /dev/hugepages
	hp_saved=""
	hp_mounted=0
}
if [ "${NDC_DPDK_AF_XDP:-1}" != 0 ]; then
	trap 'hugepages_down; topo_down' EXIT
	if hugepages_up; then
		# XDP takes the frames before the kernel sees them: no filter needed.
		kernel_takes_veth_copies
		in_node ip addr del "$NODE_VETH_ADDR/24" dev "$TAP" 2>/dev/null
		dpdk_conf net_af_xdp0,iface=eth-pod,start_queue=0,queue_count=1 -m 256 --no-pci >"$conf"
		if ndcache_up "$bin" "$conf"; then
			tap_takes_address
			if until_ok 20 answer_is kubernetes.default.svc.cluster.local A 10.96.0.1; then
				a0=$(metric ndcache_dpdk_answers_total)
				u0=$(metric ndcache_udp_queries_total)
				r=$(q _pg._tcp.postgres.data.svc.cluster.local SRV | wc -l)
				a1=$(metric ndcache_dpdk_answers_total)
				u1=$(metric ndcache_udp_queries_total)
				tcp=$(in_pod dig +tcp +time=2 +tries=1 +short "@$NODE_LOCAL" cart.shop.svc.cluster.local A)
				[ "$r" = 2 ] && [ "$a1" -gt "$a0" ] && [ "$u1" = "$u0" ] && [ -n "$tcp" ] &&
					ok "net_af_xdp (hugepages): answered by the lcore, TCP through the tap" ||
					bad "net_af_xdp: SRV $r lines, lcore $a0 -> $a1, socket $u0 -> $u1, tcp '$tcp'"
			else
				bad "net_af_xdp: no answer" "$(tail -20 "$TOPO_DIR/ndcache.log")"
			fi
			kill -TERM "$NDCACHE_PID"
			wait "$NDCACHE_PID" && ok "net_af_xdp: clean exit" || bad "net_af_xdp: exit status $?"
		else
			bad "net_af_xdp: the agent did not start" "$(tail -20 "$TOPO_DIR/ndcache.log")"
		fi
	else
		bad "cannot set up hugepages for net_af_xdp"
	fi
	hugepages_down
	[ -z "$hp_saved" ] && ok "hugepages restored ($(cat /proc/sys/vm/nr_hugepages))"
fi

# --- A build without DPDK refuses mode dpdk at start ------------------------------------------
if [ -z "$nodpdk" ]; then
	nodpdk="$build-nodpdk"
	if [ ! -d "$nodpdk" ]; then
		meson setup "$nodpdk" -Ddpdk=disabled -Dtests=false >/dev/null || bad "meson setup -Ddpdk=disabled"
	fi
	meson compile -C "$nodpdk" ndcache >/dev/null || bad "build with -Ddpdk=disabled"
fi
if [ -x "$nodpdk/control/ndcache" ]; then
	out=$(ip netns exec "$NS_NODE" timeout 20 "$nodpdk/control/ndcache" --config "$conf" 2>&1)
	rc=$?
	if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "this build has no DPDK support" <<<"$out"; then
		ok "a build without DPDK refuses mode dpdk at start (exit $rc)"
	else
		bad "build without DPDK: exit $rc" "$out"
	fi
fi

summary dpdk
