#!/usr/bin/env bash
# End-to-end: ndcache serves the sample cluster in a node netns with unbound as its upstream;
# a pod netns asks over UDP and TCP with dig and kdig (decoders independent of ours).
# Usage: test_e2e.sh BUILD_DIR   (root: creates and removes network namespaces)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
# shellcheck source=lib.sh
. "$here/lib.sh"


# check DESC CMD... : passes when CMD's output (stdin of the check) matches; see expect_*.
# q [dig options] NAME TYPE: dig from the pod to the node-local address.
q() { in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" "$@" 2>&1; }
kq() { in_pod kdig +time=2 +retry=0 "@$NODE_LOCAL" "$@" 2>&1; }

# expect DESC OUTPUT REGEX...: every extended regex must match some line of OUTPUT.
expect() {
	local desc=$1 out=$2 re
	shift 2
	for re in "$@"; do
		if ! grep -Eq -- "$re" <<<"$out"; then
			bad "$desc (no line matches /$re/)" "$out"
			return
		fi
	done
	ok "$desc"
}
# expect_not DESC OUTPUT REGEX: no line may match.
expect_not() {
	if grep -Eq -- "$3" <<<"$2"; then
		bad "$1 (a line matches /$3/)" "$2"
	else
		ok "$1"
	fi
}

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}

topo_up || exit 1
UNBOUND_EXTRA=("short.example.com. 2 IN A 192.0.2.40")
upstream_up || exit 1

conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
cluster_domain: cluster.local
listen: [$NODE_LOCAL, "::1"]
port: 53
upstream: [$UPSTREAM_ADDR:53]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
records:
  ttl: 5
  pods: insecure
dataplane:
  mode: socket
workers: 2
EOF

# Config checks come first: they need no network.
out=$("$bin" --config "$conf" --check-config 2>&1)
expect "--check-config accepts the test config" "$out" "configuration ok"
printf 'cluster_domain: cluster.local\nrecords:\n  ttl: forever\n' >"$TOPO_DIR/bad.yaml"
out=$("$bin" --config "$TOPO_DIR/bad.yaml" --check-config 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "records.ttl" <<<"$out" && grep -q "line 3" <<<"$out"; then
	ok "bad config: exit $rc, names key and line"
else
	bad "bad config must exit non-zero naming records.ttl and line 3" "rc=$rc $out"
fi

ndcache_up "$bin" "$conf" || exit 1

Z=svc.cluster.local
# --- Cluster records, UDP and TCP, dig and kdig --------------------------------------------------
out=$(q kubernetes.default.$Z A)
expect "A ClusterIP over UDP (dig)" "$out" "status: NOERROR" "flags: qr aa rd ra" \
	"^kubernetes\.default\.$Z\.[[:space:]]+5[[:space:]]+IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"
out=$(q +tcp kubernetes.default.$Z A)
expect "A ClusterIP over TCP (dig)" "$out" "status: NOERROR" "IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"
out=$(kq kubernetes.default.$Z A)
expect "A ClusterIP over UDP (kdig)" "$out" "status: NOERROR" "Flags: qr aa rd ra" \
	"IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"
out=$(kq +tcp kubernetes.default.$Z A)
expect "A ClusterIP over TCP (kdig)" "$out" "status: NOERROR" "IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"

out=$(q frontend.shop.$Z AAAA)
expect "AAAA dual-stack ClusterIP" "$out" "IN[[:space:]]+AAAA[[:space:]]+fd00:10:96::1234$"
out=$(q frontend.shop.$Z A)
expect "A dual-stack ClusterIP" "$out" "IN[[:space:]]+A[[:space:]]+10\.96\.12\.34$"

out=$(q postgres.data.$Z A)
n=$(grep -Ec "^postgres\.data\.$Z\.[[:space:]].*IN[[:space:]]+A[[:space:]]" <<<"$out")
if [ "$n" = 2 ]; then ok "headless A: the 2 ready endpoints, not the unready one"; else bad "headless A: want 2 records, got $n" "$out"; fi
out=$(q postgres-0.postgres.data.$Z A)
expect "headless endpoint hostname A" "$out" "status: NOERROR" "^postgres-0\.postgres\.data\.$Z\..*IN[[:space:]]+A[[:space:]]"
out=$(q _pg._tcp.postgres.data.$Z SRV)
expect "headless SRV with targets and their A in additional" "$out" \
	"IN[[:space:]]+SRV[[:space:]]+0 [0-9]+ 5432 postgres-[01]\.postgres\.data\.$Z\.$" \
	"ADDITIONAL SECTION" "^postgres-[01]\.postgres\.data\.$Z\..*IN[[:space:]]+A[[:space:]]"
out=$(q _grpc._tcp.cart.shop.$Z SRV)
expect "ClusterIP SRV for a named port" "$out" "IN[[:space:]]+SRV[[:space:]]+0 [0-9]+ 50051 cart\.shop\.$Z\.$"
out=$(q -x 10.96.0.1)
expect "PTR for a ClusterIP" "$out" "IN[[:space:]]+PTR[[:space:]]+kubernetes\.default\.$Z\.$"
out=$(q payments.shop.$Z A)
expect "ExternalName CNAME" "$out" "IN[[:space:]]+CNAME[[:space:]]+payments\.example\.com\.$"
out=$(q dns-version.cluster.local TXT)
expect "dns-version TXT" "$out" 'IN[[:space:]]+TXT[[:space:]]+"1\.1\.0"'
out=$(q cluster.local SOA)
expect "SOA at the apex" "$out" "^cluster\.local\..*IN[[:space:]]+SOA[[:space:]]+ns\.dns\.cluster\.local\. hostmaster\.cluster\.local\."
out=$(q cluster.local NS)
expect "NS at the apex" "$out" "IN[[:space:]]+NS[[:space:]]+ns\.dns\.cluster\.local\.$"
out=$(q 10-244-1-5.shop.pod.cluster.local A)
expect "pod A record (pods: insecure)" "$out" "IN[[:space:]]+A[[:space:]]+10\.244\.1\.5$"

# --- Negative answers ----------------------------------------------------------------------------
out=$(q api.example.com.default.$Z A)
expect "search-path name: NXDOMAIN with SOA" "$out" "status: NXDOMAIN" "flags: qr aa" \
	"AUTHORITY SECTION" "^cluster\.local\..*SOA"
out=$(q nosuch.default.$Z A)
expect "unknown service: NXDOMAIN" "$out" "status: NXDOMAIN"
out=$(q nosuchns.$Z A)
expect "unknown namespace: NXDOMAIN" "$out" "status: NXDOMAIN"
out=$(q default.$Z A)
expect "existing namespace: NODATA" "$out" "status: NOERROR" "ANSWER: 0" "^cluster\.local\..*SOA"
out=$(q kubernetes.default.$Z AAAA)
expect "v4-only service asked AAAA: NODATA with SOA" "$out" "status: NOERROR" "ANSWER: 0" "^cluster\.local\..*SOA"

# --- Wire behaviour -------------------------------------------------------------------------------
out=$(q KuBeRnEtEs.DeFaUlT.$Z A)
expect "0x20: question echoed as sent" "$out" "^;KuBeRnEtEs\.DeFaUlT\.$Z\.[[:space:]]+IN[[:space:]]+A$" \
	"IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"
out=$(in_node dig +time=2 +tries=1 @::1 kubernetes.default.$Z A 2>&1)
expect "IPv6 listen address" "$out" "IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"
out=$(in_pod python3 - "$NODE_LOCAL" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
# header: id 0x1234, RD, QDCOUNT 1, then a label claiming 40 bytes with 3 present
s.sendto(bytes.fromhex("123401000001000000000000") + b"\x28abc", (sys.argv[1], 53))
r = s.recv(512)
print("id=%04x rcode=%d qr=%d" % (int.from_bytes(r[0:2], "big"), r[3] & 15, r[2] >> 7))
EOF
)
expect "malformed query gets FORMERR" "$out" "id=1234 rcode=1 qr=1"

# --- Forwarding and the cache --------------------------------------------------------------------
out=$(q www.example.com A)
expect "external name forwarded, AA clear (we are a cache)" "$out" "status: NOERROR" \
	"flags: qr rd ra;" "IN[[:space:]]+A[[:space:]]+192\.0\.2\.10$"
out=$(q www.example.com A)
expect "external name answered again" "$out" "IN[[:space:]]+A[[:space:]]+192\.0\.2\.10$"
# unbound logs a query as it takes it, before it answers: a second query upstream would be in
# the log before its answer reached the pod. Waited for: the first one's line.
wait_until 5 "unbound's log line for www.example.com" \
	grep -q "www.example.com. A IN" "$TOPO_DIR/unbound.log"
n=$(grep -c "www.example.com. A IN" "$TOPO_DIR/unbound.log")
if [ "$n" = 1 ]; then ok "second query came from the cache (upstream saw 1 query)"; else bad "upstream saw $n queries for www.example.com, want 1" "$(cat "$TOPO_DIR/unbound.log")"; fi
out=$(q nothere.example.com A)
expect "upstream NXDOMAIN passed through" "$out" "status: NXDOMAIN" "example\.com\..*SOA"
out=$(q +noedns +ignore mid.example.com TXT)
expect "answer over 512 to a client without EDNS: TC" "$out" "flags: qr tc rd ra"
out=$(q +tcp mid.example.com TXT)
n=$(grep -Ec "^[^;].*IN[[:space:]]+TXT" <<<"$out")
if [ "$n" = 4 ]; then ok "same answer in full over TCP"; else bad "want 4 TXT over TCP, got $n" "$out"; fi
out=$(q +tcp big.example.com TXT)
n=$(grep -Ec "^[^;].*IN[[:space:]]+TXT" <<<"$out")
if [ "$n" = 8 ]; then ok "upstream truncated: forwarder retried over TCP"; else bad "want 8 TXT, got $n" "$out"; fi
out=$(q short.example.com A)
expect "short-TTL name forwarded" "$out" "IN[[:space:]]+A[[:space:]]+192\.0\.2\.40$"

# The upstream goes away: fresh entries still answer, expired ones are served stale (RFC 8767).
term_wait "${TOPO_PIDS[0]}" "the upstream (unbound) after SIGTERM"
# A duration, not a wait for an event: short.example.com's 2 s TTL runs out.
sleep 2.5
out=$(q www.example.com A)
expect "upstream down: cached answer still served" "$out" "status: NOERROR" "IN[[:space:]]+A[[:space:]]+192\.0\.2\.10$"
out=$(in_pod dig +time=5 +tries=1 "@$NODE_LOCAL" short.example.com A 2>&1)
ttl=$(awk '$1 == "short.example.com." && $4 == "A" {print $2}' <<<"$out")
# RFC 8767 4: TTL 30, not the original 2.
if [ "$ttl" = 30 ]; then ok "upstream down: expired answer served stale, TTL $ttl"; else bad "stale answer wanted (TTL 30)" "$out"; fi
out=$(in_pod dig +time=5 +tries=1 "@$NODE_LOCAL" never-seen.example.org A 2>&1)
expect "upstream down, nothing cached: SERVFAIL" "$out" "status: SERVFAIL"
out=$(q kubernetes.default.$Z A)
expect "upstream down: cluster names unaffected" "$out" "IN[[:space:]]+A[[:space:]]+10\.96\.0\.1$"

# --- Shutdown --------------------------------------------------------------------------------------
if term_wait "$NDCACHE_PID" "ndcache after SIGTERM" 10; then ok "SIGTERM: clean exit 0"; else bad "SIGTERM: exit status $?" "$(cat "$TOPO_DIR/ndcache.log")"; fi

summary e2e
