#!/usr/bin/env bash
# Issue 38, items 1 and 5, end to end: what one pod asks must never change what another is told,
# and what is served never says more than the cache keeps.
#   a. QTYPE 0 (reserved): 20 names are asked A (cached, published), then TYPE0, which gets
#      FORMERR and is never forwarded, cached or published; then AAAA and TXT of every name, twice
#      (the repeat from the kernel's table in tc and xdp): all 40 + 40 get the upstream's records.
#      Before the fix the upstream's NODATA for TYPE0 became each name's "any other type" entry
#      and the kernel answered 0 of 40 of them.
#   b. Meta types (OPT, 128, TSIG, MAILA) at a cluster name: FORMERR (the kernel passes them, the
#      name's NODATA is not theirs); class CH: REFUSED; counted in
#      ndcache_questions_refused_total{reason}.
#   c. TTLs: an upstream answer of TTL 86400 is served (first and cached, kernel included) at most
#      cache.max_ttl; an NXDOMAIN's SOA at most cache.neg_max_ttl; a NODATA behind a CNAME
#      (RFC 2308 2.2.1) is negative: its repeat's TTLs at most neg_max_ttl, not the CNAME's 3600.
# Usage: test_hygiene.sh BUILD_DIR [tc|xdp|socket ...]   (root; default: tc xdp; about 20 s a mode)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
bin="$build/control/ndcache"
shift
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(tc xdp)
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}
for m in "${modes[@]}"; do
	case $m in
	tc | xdp | socket) ;;
	*)
		echo "usage: test_hygiene.sh BUILD_DIR [tc|xdp|socket ...]" >&2
		exit 2
		;;
	esac
done

N=20
CN_ADDR=169.254.53.7 # a stub domain's server: cn.test, an authoritative's CNAME-only NODATA
MAX_TTL=60
NEG_MAX_TTL=20
UNBOUND_EXTRA=("long.example.com. 86400 IN A 192.0.2.77")
for ((i = 1; i <= N; i++)); do
	UNBOUND_EXTRA+=("q$i.example.com. 300 IN A 192.0.2.$((100 + i))"
		"q$i.example.com. 300 IN AAAA 2001:db8::$i"
		"q$i.example.com. 300 IN TXT t$i")
done

# q NAME TYPE [dig options]: the pod's question to the node-local address; dig's full output.
q() { in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" "$1" "$2" "${@:3}" 2>&1; }
status() { sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<<"$1"; }
# answer TEXT: the answer section's RRs as "TYPE RDATA", sorted.
answer() { dig_section "$1" ANSWER; }
dig_section() {
	awk -v s="$2" '/^;; / {on = ($0 ~ ";; " s " SECTION")} on && !/^;/ && NF >= 5 {
		r = $4; for (i = 5; i <= NF; i++) r = r " " $i; print r }' <<<"$1" | sort
}
# max_ttl TEXT: the largest TTL of the answer and authority sections' RRs.
max_ttl() {
	awk '/^;; (ANSWER|AUTHORITY) SECTION/ {on = 1; next} /^;; / {on = 0}
		on && !/^;/ && NF >= 5 && $2 > m {m = $2} END {print m + 0}' <<<"$1"
}
kernel_answers() {
	metrics | awk '/^ndcache_kernel_answers_total/ {s += $2} END {print s + 0}'
}

run_mode() {
	local mode=$1 conf="$TOPO_DIR/ndcache-$1.yaml" out st got want wrong=0 k0 k1 i t
	local refused0 refused1
	say() { echo "# $mode: $*"; }
	{
		printf 'listen: [%s]\nupstream: [%s:53]\nsource:\n  snapshot: %s\n' \
			"$NODE_LOCAL" "$UPSTREAM_ADDR" "$SAMPLE_CLUSTER"
		printf 'dataplane: {mode: %s, interfaces: [eth-pod]}\n' "$mode"
		printf 'cache: {max_ttl: %d, neg_max_ttl: %d}\n' "$MAX_TTL" "$NEG_MAX_TTL"
		printf 'stub_domains: {cn.test: [%s]}\n' "$CN_ADDR"
	} >"$conf"
	ndcache_up "$bin" "$conf" || {
		bad "$mode: the agent did not answer"
		return
	}
	if [ "$mode" != socket ]; then
		if fastpath_missing "$mode"; then
			bad "$mode: the fast path did not load" "$(tail -5 "$TOPO_DIR/ndcache.log")"
			return
		fi
		until_ok 10 grep -q "fast path: attached" "$TOPO_DIR/ndcache.log" || {
			bad "$mode: fast path not attached after 10 s" "$(tail -5 "$TOPO_DIR/ndcache.log")"
			return
		}
	fi
	ndcache_ready 10 || {
		bad "$mode: not ready"
		return
	}

	# a. TYPE0 after the names' A answers are cached.
	local formerr=0
	for ((i = 1; i <= N; i++)); do
		out=$(q "q$i.example.com" A +short)
		[ "$out" = "192.0.2.$((100 + i))" ] || wrong=$((wrong + 1))
		out=$(q "q$i.example.com" TYPE0)
		[ "$(status "$out")" = FORMERR ] && formerr=$((formerr + 1))
	done
	[ $wrong = 0 ] || bad "$mode: $wrong of $N A answers wrong before the TYPE0 questions"
	if [ $formerr = $N ]; then
		ok "$mode: TYPE0 answered FORMERR ($N of $N)"
	else
		bad "$mode: TYPE0 answered FORMERR $formerr of $N times"
	fi
	k0=$(kernel_answers)
	for round in first repeat; do
		got=0
		for ((i = 1; i <= N; i++)); do
			for t in AAAA TXT; do
				if [ $t = AAAA ]; then want="AAAA 2001:db8::$i"; else want="TXT \"t$i\""; fi
				out=$(q "q$i.example.com" $t)
				[ "$(answer "$out")" = "$want" ] && got=$((got + 1))
			done
		done
		if [ $got = $((2 * N)) ]; then
			ok "$mode: after TYPE0, $round AAAA/TXT: $got of $((2 * N)) the upstream's records"
		else
			bad "$mode: after TYPE0, $round AAAA/TXT: $got of $((2 * N)) the upstream's records"
		fi
	done
	k1=$(kernel_answers)
	if [ "$mode" = socket ]; then
		echo "# $mode: no kernel (the repeat came from the socket path's cache)"
	elif [ $((k1 - k0)) -ge $((2 * N)) ]; then
		ok "$mode: the kernel answered the repeats ($((k1 - k0)) kernel answers)"
	else
		bad "$mode: the kernel answered $((k1 - k0)) of the $((2 * N)) repeats"
	fi

	# b. Meta types and another class.
	refused0=$(metric 'ndcache_questions_refused_total{reason="qtype"}')
	for t in TYPE41 TYPE128 TYPE250 TYPE254; do
		for ask in 1 2; do
			out=$(q kubernetes.default.svc.cluster.local $t)
			st=$(status "$out")
			[ "$st" = FORMERR ] || {
				bad "$mode: $t at a cluster name (ask $ask): $st, want FORMERR"
				continue 2
			}
		done
		ok "$mode: $t at a cluster name: FORMERR, twice"
	done
	refused1=$(metric 'ndcache_questions_refused_total{reason="qtype"}')
	if [ $((${refused1:-0} - ${refused0:-0})) -ge 8 ]; then
		ok "$mode: ndcache_questions_refused_total{reason=\"qtype\"} counted them (+$((refused1 - refused0)))"
	else
		bad "$mode: ndcache_questions_refused_total{reason=\"qtype\"} moved ${refused0:-none} -> ${refused1:-none}"
	fi
	out=$(q kubernetes.default.svc.cluster.local A -c CH)
	st=$(status "$out")
	if [ "$st" = REFUSED ] && [ "$(metric 'ndcache_questions_refused_total{reason="qclass"}')" -ge 1 ]; then
		ok "$mode: class CH: REFUSED, counted"
	else
		bad "$mode: class CH: $st"
	fi

	# c. TTLs capped in both paths.
	for round in first repeat; do
		out=$(q long.example.com A)
		t=$(max_ttl "$out")
		if [ "$(answer "$out")" = "A 192.0.2.77" ] && [ "$t" -le $MAX_TTL ] && [ "$t" -gt 0 ]; then
			ok "$mode: TTL 86400 served as $t ($round; max_ttl $MAX_TTL)"
		else
			bad "$mode: TTL 86400, $round: served TTL $t (max_ttl $MAX_TTL)" "$out"
		fi
		out=$(q nothere.example.com A)
		t=$(max_ttl "$out")
		if [ "$(status "$out")" = NXDOMAIN ] && [ "$t" -le $NEG_MAX_TTL ]; then
			ok "$mode: NXDOMAIN's SOA TTL $t ($round; neg_max_ttl $NEG_MAX_TTL)"
		else
			bad "$mode: NXDOMAIN, $round: SOA TTL $t (neg_max_ttl $NEG_MAX_TTL)" "$out"
		fi
	done
	out=$(q alias.cn.test AAAA)
	if [ "$(status "$out")" != NOERROR ] || ! grep -q "CNAME" <<<"$(answer "$out")" ||
		[ -z "$(dig_section "$out" AUTHORITY)" ]; then
		bad "$mode: the upstream's CNAME-only NODATA is not what this test needs" "$out"
	else
		out=$(q alias.cn.test AAAA)
		t=$(max_ttl "$out")
		if [ "$t" -le $NEG_MAX_TTL ]; then
			ok "$mode: a NODATA behind a CNAME is negative: repeat's TTLs at most $t (neg_max_ttl $NEG_MAX_TTL)"
		else
			bad "$mode: a NODATA behind a CNAME was cached as positive: TTL $t" "$out"
		fi
	fi

	term_wait "$NDCACHE_PID" "ndcache ($mode)" 10 || bad "$mode: the agent did not stop on SIGTERM"
}

# cn_up: a stub domain's authoritative server for cn.test (standard library only): alias.cn.test
# is a CNAME (TTL 3600) to target.cn.test, which has only an A record; any other type gets the
# CNAME and the zone's SOA (TTL 300, MINIMUM 300) in authority: NODATA at the target.
cn_up() {
	cat >"$TOPO_DIR/cn.py" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
def name(n): return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"
while True:
    m, peer = s.recvfrom(512)
    if len(m) < 17 or m[2] & 0x80: continue
    end = 12
    while end < len(m) and m[end]: end += 1 + m[end]
    qname, (qtype,) = m[12:end + 1], struct.unpack("!H", m[end + 1:end + 3])
    q = m[12:end + 5]
    an, ns = b"", b""
    if qname.lower() == name("alias.cn.test"):
        t = name("target.cn.test")
        an = b"\xc0\x0c" + struct.pack("!HHIH", 5, 1, 3600, len(t)) + t
        if qtype == 1:
            an += name("target.cn.test") + struct.pack("!HHIH", 1, 1, 300, 4) + bytes([192, 0, 2, 9])
    if qtype != 1 and qtype != 5:
        soa = name("ns.cn.test") + name("h.cn.test") + struct.pack("!IIIII", 1, 3600, 600, 86400, 300)
        ns = name("cn.test") + struct.pack("!HHIH", 6, 1, 300, len(soa)) + soa
    n_an = 0 if not an else (2 if qtype == 1 else 1)
    h = struct.pack("!HHHHHH", struct.unpack("!H", m[:2])[0], 0x8400 | (m[2] & 1) << 8, 1, n_an, 1 if ns else 0, 0)
    s.sendto(h + q + an + ns, peer)
PY
	in_node ip addr add "$CN_ADDR/32" dev lo
	ip netns exec "$NS_NODE" python3 "$TOPO_DIR/cn.py" "$CN_ADDR" >"$TOPO_DIR/cn.log" 2>&1 &
	TOPO_PIDS+=($!)
	wait_dns "$CN_ADDR" 53 alias.cn.test
}

topo_up || exit 1
upstream_up || exit 1
cn_up || {
	bad "the cn.test server did not answer" "$(cat "$TOPO_DIR/cn.log")"
	summary test_hygiene.sh
	exit 1
}
for m in "${modes[@]}"; do
	if [ "$m" = xdp ] && ! pod_xdp_pass; then
		bad "xdp: cannot attach an XDP pass program to the pod's eth0"
		continue
	fi
	run_mode "$m"
done
summary test_hygiene.sh
