# shellcheck shell=bash
# The servers the benchmarks compare, and what they serve: sourced by compare.sh and
# latency_bench.sh in the measuring copy, inside tests/integration/lib.sh's topology, after they
# set here, work, services, namespaces, headless_pct, endpoints, ttl, ext_names, bin (ndcache),
# reflector (tests/bench/bpf/ndc_reflector.bpf.o), reflector_load
# (tests/bench/bpf/ndc_reflector_load.bpf.o, when the script runs reflector-load or
# reflector-load-xdp), answer_reflector (tests/bench/bpf/ndc_answer_reflector.bpf.o, when it
# runs answer-reflector or answer-reflector-xdp), answer_reflector_load
# (tests/bench/bpf/ndc_answer_reflector_load.bpf.o, for answer-reflector-load and
# answer-reflector-load-xdp; the experiment floors answer-reflector-hot4 to -code128 run the
# objects beside $answer_reflector, ndc_answer_reflector_hot4.bpf.o and so on); table_size before
# the first server starts.
# shellcheck disable=SC2154,SC2034 # variables set or read by the scripts that source this file
#
#   bench_data_up            the cluster (gen_cluster.py) and what is derived from it: the
#                            workloads, knot's zones, kresd's RPZ; the upstream unbound (which
#                            also serves the cluster, for the caches that only forward); the XDP
#                            pass program
#   pass_on, pass_off        that program on the pod's eth0
#   check_answers SERVER     its answers, asked from the pod
#   server_start SERVER PHASE, server_stop SERVER, attached
#   peer_stats SERVER        dnsdist's or pdns-recursor's own counters (cache hits, queries
#                            sent); peer_sent_check SERVER: every query it sent reached the
#                            upstream
#
# The servers attach to, and listen on, every node-side interface in BENCH_IFACES (default
# eth-pod, the pod's veth): latency_bench.sh adds its prober's own veth.
#
# Servers: reflector (tc ingress), reflector-xdp, reflector-load and reflector-load-xdp (the
# reflector reading one table line per query: the floor of a name's cost), answer-reflector and
# answer-reflector-xdp ($answer_reflector: the floor that answers, issue 35),
# answer-reflector-load and answer-reflector-load-xdp (that floor reading a table line per
# question as reflector-load does: the floor that answers every name), answer-reflector-hot4,
# -hot8 and their -xdp (that floor reading 4 or 8 more lines per query: a line's cost),
# answer-reflector-code64, -code128 and their -xdp (that floor running 64 or 128 more blocks of
# code per query: a code footprint's cost), ndcache-socket,
# ndcache-tc, ndcache-xdp,
# ndcache-dpdk (dpdk_vdev: af_xdp or af_packet, compare.sh only),
# unbound, knot, knot-xdp, kresd, dnsdist, pdns-recursor; base-tc and base-xdp are ndcache-tc and -xdp run from
# $base_bin (another build, to compare two builds in one run). PHASE kx: ndcache-tc replies with
# bpf_redirect, which an XDP receiver on the pod's eth0 (kxdpgun) sees; dns: its default,
# bpf_redirect_peer, which is faster for socket clients but skips the pod's XDP hook.

BENCH_IFACES=${BENCH_IFACES:-eth-pod}

# The data, derived from gen_cluster.py's cluster: the external names, the three workloads, a
# zone file for knot, an RPZ file for kresd; then the upstream and the XDP pass program.
bench_data_up() {
	cluster="$work/cluster"
	python3 "$here/gen_cluster.py" --services "$services" --namespaces "$namespaces" \
		--headless-pct "$headless_pct" --endpoints "$endpoints" --ttl "$ttl" --out "$cluster" \
		>/dev/null || die "gen_cluster.py failed"
	python3 - "$cluster" "$work" "$ext_names" "$ttl" <<'EOF' || die "cannot derive the workloads"
import ipaddress, os, sys
cl, work, n_ext, ttl = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
expected = [l.split() for l in open(os.path.join(cl, "expected.txt"))]
namespaces = sorted({name.split(".")[1] for name, _ in expected})
# External names: answer data only (198.18.0.0/15 and 2001:db8::/32 are never sent to).
ext = []
for i in range(n_ext):
    name = "ext-%05d.example.com" % i
    a = str(ipaddress.IPv4Address("198.18.0.0") + i + 1)
    aaaa = str(ipaddress.IPv6Address("2001:db8::") + 0x10000 + i)
    ext.append((name, a, aaaa))
def w(path, lines):
    with open(os.path.join(work, path), "w") as f:
        f.writelines(lines)
w("ext.txt", ["%s %s %s\n" % e for e in ext])
w("upstream-extra.txt", ["%s. 300 IN A %s\n%s. 300 IN AAAA %s\n" % (n, a, n, q) for n, a, q in ext])
# kxdpgun and dnsperf read "name type" lines.
w("hits.txt", ["%s. A\n" % l.split()[0] for l in open(os.path.join(cl, "queries.txt"))])
ndots = []
for i, (name, _, _) in enumerate(ext):
    ns = namespaces[i % len(namespaces)]
    for cand in ("%s.%s.svc.cluster.local" % (name, ns), "%s.svc.cluster.local" % name,
                 "%s.cluster.local" % name, name):
        ndots += ["%s. A\n" % cand, "%s. AAAA\n" % cand]
w("ndots.txt", ndots)
w("cached.txt", ["%s. A\n%s. AAAA\n" % (n, n) for n, _, _ in ext])
# knot: cluster.local from the generator's expected answers, example.com with the external names.
soa = "@ %d IN SOA ns.%s. hostmaster.%s. 1 3600 600 86400 %d\n@ %d IN NS ns.%s.\n"
z = ["$ORIGIN cluster.local.\n", soa % (ttl, "cluster.local", "cluster.local", ttl, ttl,
     "cluster.local"), "ns %d IN A 169.254.20.10\n" % ttl]
for name, ips in expected:
    z += ["%s. %d IN A %s\n" % (name, ttl, ip) for ip in ips.split(",")]
w("cluster.local.zone", z)
z = ["$ORIGIN example.com.\n", soa % (300, "example.com", "example.com", 60, 300, "example.com"),
     "ns 300 IN A 192.0.2.1\n"]
z += ["%s. 300 IN A %s\n%s. 300 IN AAAA %s\n" % (n, a, n, q) for n, a, q in ext]
w("example.com.zone", z)
# kresd: RPZ whose owners are the full query names under rpz.invalid.; the wildcard's CNAME .
# is NXDOMAIN for every other name under cluster.local.
z = ["$ORIGIN rpz.invalid.\n", "@ %d IN SOA localhost. nobody.invalid. 1 3600 600 86400 %d\n"
     % (ttl, ttl), "*.cluster.local.rpz.invalid. %d IN CNAME .\n" % ttl]
for name, ips in expected:
    z += ["%s.rpz.invalid. %d IN A %s\n" % (name, ttl, ip) for ip in ips.split(",")]
w("cluster.rpz", z)
EOF
	n_headless=$(awk -F'[ ,]' 'NF > 2 { n++ } END { print n + 0 }' "$cluster/expected.txt")
	# The upstream for ndcache, unbound and kresd: example.com with the external names. It
	# serves the cluster too (the records of unbound's local-data, and the zone's SOA for the
	# NXDOMAIN answers): the cluster's DNS for dnsdist and pdns-recursor, caches that only
	# forward, as a node-local cache asks the cluster's DNS; the other servers hold the cluster
	# themselves and never ask the upstream for it.
	UNBOUND_EXTRA=()
	while read -r rr; do UNBOUND_EXTRA+=("$rr"); done <"$work/upstream-extra.txt"
	UNBOUND_EXTRA_CONF=$(printf '\t%s\n' 'local-zone: "cluster.local." static' \
		"local-data: \"cluster.local. $ttl IN SOA ns.cluster.local. hostmaster.cluster.local. 1 3600 600 86400 $ttl\"" \
		"include: \"$cluster/unbound-local.conf\"")
	upstream_up || die "the upstream unbound on $UPSTREAM_ADDR did not start"

	# A program that passes everything, for the pod's eth0 while socket clients run: a veth
	# delivers frames that its peer sends with XDP_TX only when it has an XDP program itself (GRO
	# alone was not enough on this kernel), so without one XDP_TX replies never reach a pod
	# socket. It is attached for every server alike; kxdpgun puts its own program there instead.
	cat >"$work/xdp_pass.c" <<'EOF'
struct xdp_md;
__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx)
{
	return 2; /* XDP_PASS */
}
char _license[] __attribute__((section("license"), used)) = "GPL";
EOF
	clang -O2 -target bpf -c "$work/xdp_pass.c" -o "$work/xdp_pass.o" ||
		die "cannot compile the XDP pass program"

	# Answer checks, from the pod, without EDNS cookies (those would send a query to the socket
	# path and skip the fast path that is measured).
	check_names=$(awk -v k="$((services / 10 + 1))" -F'[ ,]' \
		'NR == 1 || NR % k == 0 || (NF > 2 && !h++)' "$cluster/expected.txt")
	ext_check=$(awk 'NR == 1 || NR % 97 == 0' "$work/ext.txt" | head -3)
	nx_check=$(awk '$1 ~ /cluster\.local\.$/ && NR % 3 == 1 { print $1 }' "$work/ndots.txt" | head -3)
}

pass_on() {
	in_pod ip -force link set dev eth0 xdp obj "$work/xdp_pass.o" sec xdp ||
		die "cannot attach the XDP pass program to the pod's eth0"
}
pass_off() { in_pod ip link set dev eth0 xdp off 2>/dev/null; }

pod_dig() { in_pod dig +time=2 +tries=1 +nocookie "@$NODE_LOCAL" "$@" </dev/null 2>&1; }

# check_answers SERVER: 0 when all good, 1 when the server does not answer from the pod (it
# is then reported as not measured), and the run aborts when an answer is wrong. The caches
# (dnsdist, pdns-recursor) answer with what is left of the TTL: any from 1 to the record's.
check_answers() {
	local s=$1 name ips got want a aaaa bad="" cache=0
	case "$s" in dnsdist | pdns-recursor) cache=1 ;; esac
	if ! pod_dig +short kubernetes.default.svc.cluster.local A | grep -qx 10.96.0.1; then
		return 1
	fi
	while read -r name ips; do
		got=$(pod_dig +noall +answer "$name" A | awk -v c="$cache" -v t="$ttl" '!/^;/ && NF {
			if (c && $2 > 0 && $2 <= t) $2 = t
			print $1, $2, $4, $5 }' | sort)
		want=$(tr ',' '\n' <<<"$ips" | awk -v n="$name." -v t="$ttl" '{ print n, t, "A", $1 }' |
			sort)
		[ "$got" = "$want" ] || bad+="$name A: got '${got//$'\n'/; }', expected '${want//$'\n'/; }'. "
	done <<<"$check_names"
	for name in $nx_check; do
		got=$(pod_dig +noall +comments "$name" A | sed -n 's/.*status: \([A-Z]*\).*/\1/p')
		[ "$got" = NXDOMAIN ] || bad+="$name A: status '${got:-none}', expected NXDOMAIN. "
	done
	while read -r name a aaaa; do
		got=$(pod_dig +short "$name" A)
		[ "$got" = "$a" ] || bad+="$name A: got '$got', expected $a. "
		got=$(pod_dig +short "$name" AAAA)
		[ "$got" = "$aaaa" ] || bad+="$name AAAA: got '$got', expected $aaaa. "
	done <<<"$ext_check"
	[ -z "$bad" ] || die "$s answered wrongly, not measuring it: $bad"
	return 0
}

# --- Servers ---
write_conf() {
	local s=$1 phase=$2 mode peer=""
	case "$s" in
	ndcache-* | base-*)
		mode=${s#*-}
		# kxdpgun receives with XDP on eth0, which bpf_redirect_peer's replies skip: tc mode
		# uses plain bpf_redirect for kxdpgun only, its default (redirect_peer) for dnsperf.
		[ "$mode" = tc ] && [ "$phase" = kx ] && peer=", redirect_peer: false"
		# The fast path's table holds one entry per name and type (about 6 per service with
		# its SRV, PTR and endpoint records); the default (65536) is too small for 10000
		# services, and then most names and every NXDOMAIN stay in user space.
		local dpdk="" extra=""
		# base-*: extra dataplane keys, to compare a setting in one run (--base-build of
		# the same build; e.g. NDC_BENCH_BASE_DATAPLANE="failopen: false")
		case "$s" in base-*) extra=${NDC_BENCH_BASE_DATAPLANE:+, $NDC_BENCH_BASE_DATAPLANE} ;; esac
		if [ "$mode" = dpdk ]; then
			# The lcore polls on CPU 0 (the last CPU the agent may use under taskset).
			dpdk=", dpdk: {eal_args: [\"-m\", \"256\", \"--no-pci\""
			if [ "${dpdk_vdev:-af_xdp}" = af_xdp ]; then
				dpdk+=", \"--vdev=net_af_xdp0,iface=eth-pod,start_queue=0,queue_count=1\"]}"
			else
				dpdk+=", \"--no-huge\", \"--vdev=net_af_packet0,iface=eth-pod\"]}"
			fi
		fi
		cat >"$work/$s.yaml" <<EOF
listen: [$NODE_LOCAL]
port: 53
upstream: [$UPSTREAM_ADDR]
source: {snapshot: $cluster/cluster.json}
records: {ttl: $ttl}
dataplane: {mode: $mode, interfaces: [${BENCH_IFACES// /, }], table_size: $table_size$peer$dpdk$extra}
workers: 1
EOF
		;;
	unbound)
		bench_unbound_conf "$work/unbound-bench.conf" "$work" "$cluster" \
			"$(printf '\t%s\n' 'module-config: "iterator"' \
				'local-zone: "example.com." transparent')" \
			"$(printf 'forward-zone:\n\tname: "example.com."\n\tforward-addr: %s' \
				"$UPSTREAM_ADDR")"
		;;
	knot | knot-xdp)
		mkdir -p "$work/knot"
		cp "$work/cluster.local.zone" "$work/example.com.zone" "$work/knot/"
		{
			cat <<EOF
server:
    rundir: "$work/knot"
    listen: $NODE_LOCAL@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
EOF
			if [ "$s" = knot-xdp ]; then
				# shellcheck disable=SC2086 # the list, word by word
				printf 'xdp:\n    listen: [%s]\n    udp: on\n    tcp: off\n' \
					"$(printf '%s@53, ' $BENCH_IFACES | sed 's/, $//')"
			fi
			cat <<EOF
log:
  - target: stderr
    any: info
database:
    storage: "$work/knot/db"
template:
  - id: default
    storage: "$work/knot"
    semantic-checks: off
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: cluster.local
    file: cluster.local.zone
  - domain: example.com
    file: example.com.zone
EOF
		} >"$work/knot.conf"
		;;
	kresd)
		mkdir -p "$work/kresd"
		rm -rf "$work/kresd/cache"
		# No trust anchor, no priming, no RFC 5011 refresh: kresd asks nobody but the local
		# upstream, and only for example.com; every other name outside the RPZ is refused.
		cat >"$work/kresd.conf" <<EOF
net.ipv6 = false
net.listen('$NODE_LOCAL', 53, { kind = 'dns' })
cache.open(64 * MB, 'lmdb://$work/kresd/cache')
trust_anchors.remove('.')
modules.unload('ta_update')
modules.unload('priming')
modules.unload('detect_time_skew')
modules.unload('ta_signal_query')
policy.add(policy.rpz(policy.DENY, '$work/cluster.rpz', false))
policy.add(policy.suffix(policy.STUB({'$UPSTREAM_ADDR'}), { todname('example.com.') }))
policy.add(policy.all(policy.DENY))
EOF
		;;
	dnsdist)
		# dnsdist 1.7, its packet cache in front of the upstream (its only backend, health-
		# checked with the kubernetes service's name), Debian's defaults otherwise: one UDP
		# listener (the thread that answers a cache hit), no security polling (a query to
		# powerdns.com's servers). The console, for its counters, on the node's loopback.
		cat >"$work/dnsdist.conf" <<EOF
setSecurityPollSuffix("")
setACL({"169.254.0.0/16", "127.0.0.0/8"})
setLocal("$NODE_LOCAL:53")
setMaxTCPClientThreads(1)
newServer({address = "$UPSTREAM_ADDR:53", checkName = "kubernetes.default.svc.cluster.local.",
           mustResolve = true})
getPool(""):setCache(newPacketCache(1000000))
controlSocket("127.0.0.1:5199")
setKey("$(head -c 32 /dev/urandom | base64)")
EOF
		;;
	pdns-recursor)
		# PowerDNS Recursor 4.8, only forwarding: cluster.local and example.com to the upstream,
		# no root hints (hint-file=no: it never primes or asks a root server; every other name
		# is SERVFAIL), no security polling, no DNSSEC (no trust-anchor queries). One worker
		# thread that also receives (no distributor); its packet cache on (the default).
		mkdir -p "$work/pdns"
		cat >"$work/pdns/recursor.conf" <<EOF
local-address=$NODE_LOCAL
local-port=53
allow-from=169.254.0.0/16, 127.0.0.0/8
forward-zones=cluster.local=$UPSTREAM_ADDR, example.com=$UPSTREAM_ADDR
hint-file=no
security-poll-suffix=
dnssec=off
threads=1
pdns-distributes-queries=no
daemon=no
write-pid=no
socket-dir=$work/pdns
disable-syslog=yes
setuid=
setgid=
lua-config-file=
EOF
		;;
	esac
}

# For dnsdist and pdns-recursor: nftables counters (output hook of the node's netns, from before
# the server starts until it stops) of the DNS queries the node sends to the upstream, and of
# those to any other address but the node-local one (which the benchmark's own checks ask).
upstream_counter_on() {
	local up="ip daddr $UPSTREAM_ADDR udp dport 53"
	local other="ip daddr != { $UPSTREAM_ADDR, $NODE_LOCAL } meta l4proto { udp, tcp } th dport 53"
	in_node nft delete table ip ndc_peer 2>/dev/null
	printf '%s\n' 'table ip ndc_peer {' ' chain out {' \
		'  type filter hook output priority 0; policy accept;' \
		"  $up counter comment \"upstream\"" "  $other counter comment \"elsewhere\"" \
		' }' '}' | in_node nft -f - ||
		die "cannot add the nftables counters of the queries the node sends"
}
# upstream_counter upstream|elsewhere: that counter's packets
upstream_counter() {
	in_node nft list table ip ndc_peer 2>/dev/null | awk -v c="\"$1\"" '$NF == c {
		for (i = 1; i <= NF; i++) if ($i == "packets") print $(i + 1) }'
}

peer_stats() {
	case "$1" in
	dnsdist)
		in_node dnsdist -C "$work/dnsdist.conf" -c -e 'dumpStats()'
		in_node dnsdist -C "$work/dnsdist.conf" -c -e 'getPool(""):getCache():printStats()'
		;;
	pdns-recursor) in_node rec_control --socket-dir="$work/pdns" get-all ;;
	esac
}

# peer_addrs pdns-recursor: every address it sent a query to or failed to reach (its
# nameserver-speed and failed-server tables), one a line.
peer_addrs() {
	local d="$work/pdns"
	rm -f "$d/nsspeeds.txt" "$d/failed.txt"
	in_node rec_control --socket-dir="$d" dump-nsspeeds "$d/nsspeeds.txt" >/dev/null &&
		in_node rec_control --socket-dir="$d" dump-failedservers "$d/failed.txt" >/dev/null ||
		return 1
	awk '!/^;/ { for (i = 3; i <= NF; i++) { split($i, a, "/"); print a[1] } }' "$d/nsspeeds.txt"
	awk '!/^;/ && NF { print $1 }' "$d/failed.txt"
}

# peer_sent_check SERVER: 0 when the server sent no DNS query but to the upstream, and the
# upstream got some: none to any other address the node can reach (the nftables counter); for
# pdns-recursor, no other address in its own tables of the servers it asked or failed to reach,
# and no resource-limits (where it counts a query to an address the node has no route to:
# "Network is unreachable"). dnsdist has one backend, the upstream, and no security polling.
# Else 1, the figures in START_ERR.
peer_sent_check() {
	local up other addrs="" limits=0
	case "$1" in
	dnsdist) ;;
	pdns-recursor)
		if ! addrs=$(peer_addrs); then
			START_ERR="rec_control could not dump its tables of servers"
			return 1
		fi
		addrs=$(grep -vx "$UPSTREAM_ADDR" <<<"$addrs" | sort -u | tr '\n' ' ')
		limits=$(in_node rec_control --socket-dir="$work/pdns" get resource-limits)
		;;
	*) return 0 ;;
	esac
	up=$(upstream_counter upstream)
	other=$(upstream_counter elsewhere)
	START_ERR="queries to the upstream '$up', to other addresses '$other'"
	[ -z "$addrs" ] || START_ERR+=", asked or failed to reach: $addrs"
	[ "$limits" = 0 ] || START_ERR+=", resource-limits (unroutable sends) '$limits'"
	[[ $up =~ ^[0-9]+$ && $other =~ ^[0-9]+$ ]] || return 1
	[ "$other" = 0 ] && [ "$up" -gt 0 ] && [ -z "$addrs" ] && [ "$limits" = 0 ]
}

attached() {
	local i
	for i in $BENCH_IFACES; do
		in_node bpftool -j net show dev "$i" 2>/dev/null | grep -q '"id"' && return 0
	done
	return 1
}

# ndcache-dpdk: the veth's address moves to the agent's tap (which has the veth's MAC); with
# af_packet the kernel's own copy of each frame is dropped (af_packet reads beside the kernel).
# The pod sends full checksums: a query with the CHECKSUM_PARTIAL of a socket on a veth would
# reach the kernel through the tap with a wrong one. Undone after the server stops. Only on
# eth-pod (compare.sh's topology).
dpdk_takes_veth() {
	in_pod ethtool -K eth0 tx off >/dev/null 2>&1 || die "ethtool -K eth0 tx off failed"
	in_node ip addr del "$NODE_VETH_ADDR/24" dev eth-pod
	if [ "${dpdk_vdev:-af_xdp}" = af_packet ]; then
		in_node iptables -t raw -A PREROUTING -i eth-pod -j DROP
		in_node arptables -A INPUT -i eth-pod -j DROP
	fi
}
kernel_takes_veth() {
	if [ "${dpdk_vdev:-af_xdp}" = af_packet ]; then
		in_node iptables -t raw -D PREROUTING -i eth-pod -j DROP
		in_node arptables -D INPUT -i eth-pod -j DROP
	fi
	in_node ip addr add "$NODE_VETH_ADDR/24" dev eth-pod 2>/dev/null
	in_pod ethtool -K eth0 tx on >/dev/null 2>&1
}

# server_start SERVER PHASE: 0 when it answers, else 1 with the reason in START_ERR.
START_ERR=""
server_start() {
	local s=$1 phase=$2 log="$work/$1.log" i
	START_ERR=""
	SERVER_PID=""
	attached && die "a program is still attached to $BENCH_IFACES before $s starts"
	write_conf "$s" "$phase"
	local obj=$reflector
	[[ $s == reflector-load* ]] && obj=$reflector_load
	[[ $s == answer-reflector* ]] && obj=$answer_reflector
	[[ $s == answer-reflector-load* ]] && obj=$answer_reflector_load
	# the experiment floors (issue 35): the answer reflector's build of that name
	[[ $s =~ ^answer-reflector-(hot4|hot8|code64|code128)(-xdp)?$ ]] &&
		obj=${answer_reflector%.bpf.o}_${BASH_REMATCH[1]}.bpf.o
	case "$s" in
	reflector | reflector-load | answer-reflector | answer-reflector-load | answer-reflector-hot[48] | \
		answer-reflector-code64 | answer-reflector-code128)
		for i in $BENCH_IFACES; do
			if ! in_node tc qdisc add dev "$i" clsact ||
				! in_node tc filter add dev "$i" ingress bpf da obj "$obj" sec tc; then
				die "cannot attach $obj to $i"
			fi
		done
		return 0
		;;
	reflector-xdp | reflector-load-xdp | answer-reflector-xdp | answer-reflector-load-xdp | \
		answer-reflector-hot[48]-xdp | answer-reflector-code64-xdp | answer-reflector-code128-xdp)
		for i in $BENCH_IFACES; do
			in_node ip link set dev "$i" xdp obj "$obj" sec xdp ||
				die "cannot attach $obj (XDP) to $i"
		done
		return 0
		;;
	ndcache-*)
		[ "$s" = ndcache-dpdk ] && dpdk_takes_veth
		ip netns exec "$NS_NODE" taskset -c 0 "$bin" --config "$work/$s.yaml" >"$log" 2>&1 &
		;;
	base-*)
		ip netns exec "$NS_NODE" taskset -c 0 "$base_bin" --config "$work/$s.yaml" \
			>"$log" 2>&1 &
		;;
	unbound)
		ip netns exec "$NS_NODE" taskset -c 0 unbound -d -c "$work/unbound-bench.conf" \
			>"$log" 2>&1 &
		;;
	knot | knot-xdp)
		ip netns exec "$NS_NODE" taskset -c 0 knotd -c "$work/knot.conf" >"$log" 2>&1 &
		;;
	kresd)
		ip netns exec "$NS_NODE" taskset -c 0 kresd -n -c "$work/kresd.conf" "$work/kresd" \
			>"$log" 2>&1 &
		;;
	dnsdist)
		upstream_counter_on
		ip netns exec "$NS_NODE" taskset -c 0 dnsdist --supervised --disable-syslog \
			-C "$work/dnsdist.conf" >"$log" 2>&1 </dev/null &
		;;
	pdns-recursor)
		upstream_counter_on
		ip netns exec "$NS_NODE" taskset -c 0 pdns_recursor --config-dir="$work/pdns" \
			>"$log" 2>&1 </dev/null &
		;;
	esac
	SERVER_PID=$!
	TOPO_PIDS+=("$SERVER_PID")
	# Ready when the node itself gets the kubernetes service's address (zones loaded).
	for ((i = 0; i < 300; i++)); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		if in_node dig +time=1 +tries=1 +short "@$NODE_LOCAL" kubernetes.default.svc.cluster.local \
			</dev/null 2>/dev/null | grep -qx 10.96.0.1; then
			break
		fi
		sleep 0.1
	done
	if ! kill -0 "$SERVER_PID" 2>/dev/null; then
		START_ERR="exited at start: $(tail -3 "$log" | tr '\n' ' ')"
		return 1
	fi
	if [ $i -ge 300 ]; then
		START_ERR="not answering after 30 s: $(tail -3 "$log" | tr '\n' ' ')"
		return 1
	fi
	case "$s" in
	ndcache-tc | ndcache-xdp | base-tc | base-xdp)
		if grep -q "fast path unavailable" "$log"; then
			START_ERR="fast path did not load: $(grep -m1 'fast path unavailable' "$log")"
			return 1
		fi
		;;
	ndcache-dpdk)
		for ((i = 0; i < 100; i++)); do
			in_node ip link show ndc-tap0 >/dev/null 2>&1 && break
			sleep 0.1
		done
		if ! in_node ip addr add "$NODE_VETH_ADDR/24" dev ndc-tap0; then
			START_ERR="no exception-path tap ndc-tap0: $(grep -m1 -i 'dpdk' "$log")"
			return 1
		fi
		;;
	knot-xdp)
		if ! grep -q "initialized XDP interface eth-pod" "$log"; then
			START_ERR="knotd did not initialise XDP on eth-pod: $(grep -m1 -i 'xdp' "$log")"
			return 1
		fi
		;;
	esac
	return 0
}

server_stop() {
	local pid=$SERVER_PID keep=() p i
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		for p in "${TOPO_PIDS[@]}"; do
			[ "$p" = "$pid" ] || keep+=("$p")
		done
		TOPO_PIDS=("${keep[@]}")
	fi
	SERVER_PID=""
	[ "$1" = ndcache-dpdk ] && kernel_takes_veth
	case "$1" in dnsdist | pdns-recursor) in_node nft delete table ip ndc_peer 2>/dev/null ;; esac
	for i in $BENCH_IFACES; do
		in_node tc qdisc del dev "$i" clsact 2>/dev/null
		in_node ip link set dev "$i" xdp off 2>/dev/null
	done
	attached && die "a program is still attached to $BENCH_IFACES after $1 stopped"
	return 0
}
