#!/usr/bin/env bash
# The fast path answers exactly what the socket path answers. ndcache runs in tc mode attached to
# the node side of the pod's veth; every question is asked over UDP (answered in the kernel) and
# over TCP (the fast path never sees TCP: the socket path answers), and dig's decoding of the two
# replies must be equal except for the ID and TTLs counting down. The fast path's own counters
# must show it answered the UDP questions.
# Usage: test_fastpath.sh BUILD_DIR   (root: network namespaces, BPF)
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
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || exit 1

topo_up || exit 1
upstream_up || exit 1

conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR:53]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
records:
  ttl: 30
  pods: verified
dataplane:
  mode: tc
  interfaces: [eth-pod]
workers: 2
EOF
ndcache_up "$bin" "$conf" || exit 1
if grep -q "fast path unavailable" "$TOPO_DIR/ndcache.log"; then
	bad "fast path did not load" "$(cat "$TOPO_DIR/ndcache.log")"
	summary fastpath
	exit 1
fi

# The questions: every name of the sample cluster with every type, their 0x20 variants, EDNS
# and plain, search-path names, reverse names, and external names (forwarded, then cached and
# published: the second round is answered by the kernel).
questions="$TOPO_DIR/questions"
python3 - "$root/deploy/examples/sample-cluster.json" >"$questions" <<'EOF'
import json, random, sys
random.seed(7)
objs = json.load(open(sys.argv[1]))["items"]
names = set(["cluster.local", "dns-version.cluster.local", "svc.cluster.local",
             "ns.dns.cluster.local", "nosuch.cluster.local"])
for o in objs:
    md = o["metadata"]
    if o["kind"] == "Namespace":
        names.add("%s.svc.cluster.local" % md["name"])
    elif o["kind"] == "Service":
        svc = "%s.%s.svc.cluster.local" % (md["name"], md["namespace"])
        names.add(svc)
        for p in o["spec"].get("ports", []):
            if p.get("name"):
                names.add("_%s._%s.%s" % (p["name"], p.get("protocol", "TCP").lower(), svc))
        for ip in o["spec"].get("clusterIPs", []):
            if ip != "None" and ":" not in ip:
                names.add(".".join(reversed(ip.split("."))) + ".in-addr.arpa")
        names.add("api.example.com.%s.svc.cluster.local" % md["namespace"])
        names.add("www.example.org.%s.svc.cluster.local" % md["namespace"])
    elif o["kind"] == "EndpointSlice":
        svc = o["metadata"].get("labels", {}).get("kubernetes.io/service-name")
        for ep in o.get("endpoints") or []:
            if ep.get("hostname") and svc:
                names.add("%s.%s.%s.svc.cluster.local" % (ep["hostname"], svc, md["namespace"]))
            for a in ep.get("addresses", []):
                if ":" not in a:
                    names.add(".".join(reversed(a.split("."))) + ".in-addr.arpa")
    elif o["kind"] == "Pod":
        for ip in o.get("status", {}).get("podIPs", []):
            if ":" not in ip["ip"]:
                names.add("%s.%s.pod.cluster.local" % (ip["ip"].replace(".", "-"), md["namespace"]))
types = ["A", "AAAA", "SRV", "TXT", "PTR", "SOA", "NS", "CNAME", "MX"]
out = []
for n in sorted(names):
    for t in types:
        out.append((n, t, ""))
    mixed = "".join(c.upper() if random.random() < 0.5 else c for c in n)
    out.append((mixed, "A", ""))
    out.append((n, "A", "+noedns"))
for n in ["www.example.com", "www.example.org", "nothere.example.com"]:
    out.append((n, "A", ""))
for n, t, o in out:
    print(n, t, o)
EOF
n=$(wc -l <"$questions")
echo "# $n questions"

# dig's decoding, with what may differ removed: the ID, TTLs, timing, server and transport.
norm() {
	grep -Ev '^;; (Query time|SERVER|WHEN|MSG SIZE|global options)|^; <<>>|^$|^;; WARNING|^;; You are|^; \(1 server' |
		sed -E 's/id: [0-9]+/id: X/; s/^([^;][^[:space:]]*)[[:space:]]+[0-9]+[[:space:]]+IN/\1 TTL IN/' |
		# Names compare case-insensitively (RFC 4343): a record's owner may carry the
		# question's 0x20 case through a compression pointer or not. The question line
		# (";name IN A") is kept exactly: it must echo the client's case.
		awk '/^;/ { print; next } { print tolower($0) }'
}

ask() {
	# ask NAME TYPE OPT TRANSPORT
	# dig sends a client cookie: the kernel ignores it as user space does (RFC 7873 5.2.1).
	in_pod dig +time=2 +tries=1 $3 $4 "@$NODE_LOCAL" "$1" "$2" 2>&1 | norm
}

# External names go upstream first (the socket path caches them, the publisher publishes them),
# so warm them once over UDP before comparing.
for name in www.example.com www.example.org nothere.example.com; do
	ask "$name" A "" +notcp >/dev/null
done
sleep 0.3

mismatch=0
while read -r name type opt; do
	u=$(ask "$name" "$type" "$opt" +notcp)
	t=$(ask "$name" "$type" "$opt" +tcp)
	# dig says which transport it used only in lines we dropped; TC over UDP would differ.
	if [ "$u" != "$t" ]; then
		mismatch=$((mismatch + 1))
		[ $mismatch -le 5 ] && bad "$name $type $opt: UDP (fast path) and TCP (socket) differ" \
			"$(diff <(echo "$u") <(echo "$t"))"
	fi
done <"$questions"
if [ $mismatch = 0 ]; then ok "$n questions: fast-path and socket-path answers equal"; else bad "$mismatch of $n questions differ"; fi

# The counters: stop ndcache (it logs them at exit) and check the kernel did the answering.
term_wait "$NDCACHE_PID" "ndcache after SIGTERM" 10 || bad "ndcache: no clean exit on SIGTERM"
line=$(grep "fast path: [0-9]* answered" "$TOPO_DIR/ndcache.log")
hits=$(sed -E 's/.*fast path: ([0-9]+) answered, ([0-9]+) NODATA, ([0-9]+) NXDOMAIN.*/\1 \2 \3/' <<<"$line")
read -r h nd nx <<<"$hits"
total=$((h + nd + nx))
echo "# fast path counters: $line"
# Every UDP question inside the zone is answered in the kernel; what passes by design is the
# reverse names asked for types other than PTR (forwarded, as CoreDNS's fallthrough does), about
# a fifth of the list. So at least two thirds.
if [ -n "$h" ] && [ "$total" -ge $((n * 2 / 3)) ]; then
	ok "kernel answered $total of $n UDP questions ($h answers, $nd NODATA, $nx NXDOMAIN)"
else
	bad "kernel answered only ${total:-0} of $n UDP questions" "$line"
fi

summary fastpath
