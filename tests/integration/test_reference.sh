#!/usr/bin/env bash
# ndcache against a reference resolver on the same upstream (issue 38 item 2). knotd serves a test
# zone (CNAME chains in and out of the zone and to NXDOMAIN, DNAME, wildcards, answers over 512
# and over 1232 bytes, HTTPS, SVCB, CAA, an unknown type, TTL 0, NODATA, NXDOMAIN, empty
# non-terminals) on the upstream address in the node netns; ndcache (tc mode) and unbound
# (forward-zone, the reference) both forward to it. From the pod netns, reference.py asks every
# question (26 names x 17 types x EDNS/plain) of ndcache twice and of unbound once and compares
# with dnspython: ndcache's first answer with unbound's, its second (kernel or cache) with its
# first. Every difference must be a class docs/ANSWERS.md lists with its RFC; any other fails.
# Usage: test_reference.sh BUILD_DIR   (root: network namespaces, BPF)
#        NDC_REF_RESERVED_RCODES=FORMERR,NOTIMP,REFUSED: the class reserved-qtype holds only where
#        ndcache refuses a reserved or meta type itself with one of these (issue 38 item 1)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
# shellcheck source=lib.sh
. "$here/lib.sh"

ZONE=ref.test
REF_ADDR=169.254.53.2 # unbound, the reference

need_bin "$bin" || exit 1
need_bpffs || exit 1
command -v knotd >/dev/null || {
	echo "knotd missing: deploy/deps.sh test installs it (package knot)" >&2
	exit 1
}
# dnspython is a Debian package: the system's python3 has it where another python3 comes first.
py=python3
python3 -c 'import dns.message' 2>/dev/null || py=/usr/bin/python3
"$py" -c 'import dns.message' 2>/dev/null || {
	echo "dnspython missing: deploy/deps.sh test installs it (package python3-dnspython)" >&2
	exit 1
}

# The comparison can fail: answers that differ as a bug would make them come out unlisted.
if st=$("$py" "$here/reference.py" selftest 2>&1); then
	ok "classifier self-test (${st##*: })"
else
	bad "classifier self-test" "$st"
fi

topo_up || exit 1

# The zone. Data addresses are documentation ranges (RFC 5737, 3849): never asked, only answered.
mkdir -p "$TOPO_DIR/knot"
big_txt() {
	local i
	for ((i = 0; i < $1; i++)); do
		printf '%s 300 TXT "%d%s"\n' "$2" "$i" "$(printf 'x%.0s' $(seq 1 199))"
	done
}
cat >"$TOPO_DIR/knot/$ZONE.zone" <<EOF
\$ORIGIN $ZONE.
\$TTL 300
@		3600 SOA ns hostmaster 1 3600 600 86400 60
@		3600 NS ns
@		MX 10 mail
@		TXT "v=ref"
@		CAA 0 issue "ca.example.net"
@		HTTPS 1 . alpn=h2,h3
ns		A 192.0.2.53
ns		AAAA 2001:db8::53
www		120 A 192.0.2.80
www		120 AAAA 2001:db8::80
www		HTTPS 1 . alpn=h2 ipv4hint=192.0.2.80
www		TXT "www"
mail		A 192.0.2.25
mail		MX 0 .
alias		CNAME www
chain		CNAME alias
dangling	CNAME gone
nodata-alias	60 CNAME mail
old		DNAME new
new		A 192.0.2.70
www.new		A 192.0.2.71
*.wild		A 192.0.2.99
*.wild		TXT "wild"
wc-alias	CNAME foo.wild
ext		CNAME www.other.test.
svc		SVCB 1 www port=8443
_sip._tcp	SRV 10 60 5060 www
host		PTR www.$ZONE.
host		TYPE65400 \# 4 0a000001
unk		TYPE65400 \# 4 c0000201
unk		TYPE65400 \# 3 010203
zero		0 A 192.0.2.0
zero		0 TXT "ttl0"
$(big_txt 4 big)
$(big_txt 8 huge)
$(for i in $(seq 1 40); do echo "huge A 192.0.2.$i"; done)
EOF
cat >"$TOPO_DIR/knot/other.test.zone" <<EOF
\$ORIGIN other.test.
\$TTL 300
@	SOA ns.other.test. hostmaster.other.test. 1 3600 600 86400 60
@	NS ns.other.test.
ns	A 192.0.2.54
www	A 192.0.2.81
EOF
cat >"$TOPO_DIR/knot/knot.conf" <<EOF
server:
    rundir: "$TOPO_DIR/knot"
    listen: $UPSTREAM_ADDR@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "$TOPO_DIR/knot"
control:
    listen: "$TOPO_DIR/knot/knot.sock"
log:
  - target: stderr
    any: info
template:
  - id: default
    storage: "$TOPO_DIR/knot"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: $ZONE
  - domain: other.test
EOF
# Not through in_node: $! must be knotd itself.
ip netns exec "$NS_NODE" knotd -c "$TOPO_DIR/knot/knot.conf" >"$TOPO_DIR/knot.log" 2>&1 &
TOPO_PIDS+=($!)
wait_dns "$UPSTREAM_ADDR" 53 "www.$ZONE" || {
	cat "$TOPO_DIR/knot.log" >&2
	exit 1
}
until_ok 10 in_node dig +time=1 +tries=1 "@$UPSTREAM_ADDR" "www.$ZONE" A |
	grep -q 'status: NOERROR' || {
	echo "knotd does not answer www.$ZONE" >&2
	cat "$TOPO_DIR/knot.log" >&2
	exit 1
}

# The reference: unbound forwarding the test's zones to knotd. "." stays static (lib.sh), so it
# never recurses anywhere; the zones are transparent (no local data: forwarded). "test." is one
# of unbound's default blocked zones (RFC 6761): nodefault lifts that for these zones only.
unbound_up ref "$REF_ADDR" <<EOF || exit 1
local-zone: "test." nodefault
local-zone: "$ZONE." transparent
local-zone: "other.test." transparent
domain-insecure: "test."
minimal-responses: yes
forward-zone:
	name: "$ZONE."
	forward-addr: $UPSTREAM_ADDR@53
forward-zone:
	name: "other.test."
	forward-addr: $UPSTREAM_ADDR@53
EOF

conf="$TOPO_DIR/ndcache.yaml"
ndcache_conf "$conf" "$root/deploy/examples/sample-cluster.json" tc eth-pod
ndcache_up "$bin" "$conf" || exit 1
if fastpath_missing tc; then
	bad "the fast path did not load" "$(tail -20 "$TOPO_DIR/ndcache.log")"
	summary test_reference
	exit
fi
until_ok 10 grep -q "fast path: attached" "$TOPO_DIR/ndcache.log" &&
	ok "ndcache up, fast path attached (tc)" ||
	bad "fast path not attached after 10 s" "$(tail -20 "$TOPO_DIR/ndcache.log")"

echo "--- the comparison:"
out=$(in_pod timeout 150 "$py" "$here/reference.py" compare --ndcache "$NODE_LOCAL" \
	--unbound "$REF_ADDR" --knot "$UPSTREAM_ADDR" --zone "$ZONE" --verbose \
	--metrics-cmd "ip netns exec $NS_NODE curl -s --max-time 5 http://127.0.0.1:9254/metrics" 2>&1)
rc=$?
echo "$out"
if [ $rc = 0 ]; then
	ok "every difference from unbound, and between ndcache's two answers, is a listed class"
else
	bad "differences outside the listed classes (or the comparison failed, exit $rc)"
fi
n=$(sed -n 's/^questions: \([0-9]*\).*/\1/p' <<<"$out")
[ "${n:-0}" -ge 800 ] && ok "$n questions (at least 800)" || bad "only ${n:-0} questions"
k=$(sed -n 's/^second round answered by the kernel: \([0-9]*\) of.*/\1/p' <<<"$out")
[ "${k:-0}" -gt 0 ] && ok "the kernel answered $k of the second round" ||
	bad "the kernel answered none of the second round"
kill -0 "$NDCACHE_PID" 2>/dev/null && ok "ndcache still running" || bad "ndcache died"

# For the record (after the comparison: these questions may change what ndcache caches): what
# knotd, unbound and ndcache answer to reserved and meta types and to classes other than IN.
for s in "knotd $UPSTREAM_ADDR" "unbound $REF_ADDR" "ndcache $NODE_LOCAL"; do
	echo "--- ${s% *} on reserved and meta types, other classes (www.$ZONE):"
	in_pod timeout 60 "$py" "$here/reference.py" probe --server "${s#* }" --zone "$ZONE"
done

summary test_reference
