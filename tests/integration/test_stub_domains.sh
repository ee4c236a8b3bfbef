#!/usr/bin/env bash
# Stub domains and upstream nameservers (issue 14): two stub upstreams (unbound, each with its own
# answers and its own query log) beside the default upstream in the node netns.
#   1. stub_domains in the config file: names under each zone go to that zone's server, the
#      longest zone winning; other names to the default; cached like the rest. Each upstream's
#      query log and ndcache's per-upstream counters show who was asked. The agent runs with
#      --log-format json and log.queries: every line must be a JSON object, and its query lines
#      must say who answered each name (upstream, then cache).
#   2. The kube-dns ConfigMap through the fake API server (kube-system/kube-dns, as NodeLocal
#      DNSCache reads it): stubDomains and upstreamNameservers applied at start, a change
#      followed within a second, bad JSON logged with its key, counted and the last good value
#      kept, the ConfigMap deleted: back to the default upstream.
#   3. With that Kubernetes source, records.ttl changed in the config file: the cluster is listed
#      again beside the running source, which answers until the new table is in; no answer
#      missing meanwhile, and the ConfigMap's routes stay.
# Usage: test_stub_domains.sh BUILD_DIR [tc|socket]   (root: network namespaces; about 30 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
bin="$build/control/ndcache"
MODE=${2:-tc}
fake="$root/tests/fakeapi/fake_apiserver.py"
# shellcheck source=lib.sh
. "$here/lib.sh"

[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}
case $MODE in
tc | socket) ;;
*)
	echo "usage: test_stub_domains.sh BUILD_DIR [tc|socket]" >&2
	exit 2
	;;
esac

STUB_A=169.254.53.11
STUB_B=169.254.53.12
q() { in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$@" 2>&1; }
status() { in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" "$@" 2>&1 | grep -o 'status: [A-Z]*'; }
answer_is() { [ "$(q "$1" A)" = "$2" ]; }
metrics() { in_node curl -s --max-time 5 "http://127.0.0.1:9254/metrics"; }
# metric NAME_WITH_LABELS: its value ("" when absent).
metric() { metrics | awk -v m="$1" '$1 == m { print $2 }'; }
# asked NAME SERVER: how many queries for NAME the unbound SERVER (a, b or the default) logged.
asked() {
	local log=$TOPO_DIR/unbound-$2.log
	[ "$2" = default ] && log=$TOPO_DIR/unbound.log
	grep -ci " $1\. A IN" "$log"
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
# ms_until SECONDS CMD...: CMD every 20 ms until it succeeds; prints the milliseconds it took
# (fails after SECONDS).
ms_until() {
	local t0 end
	t0=$(date +%s%N)
	end=$((t0 + $1 * 1000000000))
	shift
	while [ "$(date +%s%N)" -lt "$end" ]; do
		if "$@"; then
			echo $((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		sleep 0.02
	done
	return 1
}

topo_up || exit 1
# The default upstream answers the stub zones too, wrongly: a name that reaches it was misrouted.
UNBOUND_EXTRA=("www.acme.local. 300 IN A 198.51.100.1" "www.b.acme.local. 300 IN A 198.51.100.2"
	"www.corp.example. 300 IN A 198.51.100.3")
upstream_up || exit 1
unbound_up a "$STUB_A" <<'EOF' || exit 1
local-zone: "acme.local." static
local-data: "acme.local. 300 IN SOA ns.acme.local. admin.acme.local. 1 3600 600 86400 60"
local-data: "www.acme.local. 300 IN A 192.0.2.111"
local-data: "www.b.acme.local. 300 IN A 192.0.2.211"
local-zone: "corp.example." static
local-data: "www.corp.example. 30 IN A 192.0.2.121"
local-zone: "example.org." static
local-data: "www.example.org. 300 IN A 192.0.2.131"
EOF
unbound_up b "$STUB_B" <<'EOF' || exit 1
local-zone: "b.acme.local." static
local-data: "www.b.acme.local. 300 IN A 192.0.2.112"
local-zone: "corp.example." static
local-data: "www.corp.example. 30 IN A 192.0.2.122"
local-zone: "example.org." static
local-data: "www.example.org. 300 IN A 192.0.2.132"
EOF

# --- 1. stub_domains in the config file ----------------------------------------------------------
conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR]
stub_domains:
  acme.local: [$STUB_A]
  b.acme.local: ["$STUB_B:53"]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
dataplane: {mode: $MODE, interfaces: [eth-pod]}
log: {queries: true, sample: 1.0}
EOF
# JSON logs, every query logged: what a log shipper gets.
ndcache_up "$bin" "$conf" --log-format json || exit 1

answer_is www.acme.local 192.0.2.111 &&
	ok "www.acme.local: answered by the acme.local stub ($STUB_A)" ||
	bad "www.acme.local: want 192.0.2.111" "$(q www.acme.local A)"
answer_is www.b.acme.local 192.0.2.112 &&
	ok "www.b.acme.local: the longest zone wins (b.acme.local, $STUB_B)" ||
	bad "www.b.acme.local: want 192.0.2.112" "$(q www.b.acme.local A)"
answer_is www.example.com 192.0.2.10 &&
	ok "www.example.com: the default upstream" || bad "www.example.com: want 192.0.2.10"
answer_is kubernetes.default.svc.cluster.local 10.96.0.1 &&
	ok "cluster names: answered locally" || bad "kubernetes.default: want 10.96.0.1"
[ "$(asked www.acme.local a)" = 1 ] && [ "$(asked www.acme.local b)" = 0 ] &&
	[ "$(asked www.acme.local default)" = 0 ] &&
	ok "query logs: www.acme.local reached the acme.local stub only" ||
	bad "query logs for www.acme.local: a=$(asked www.acme.local a) b=$(asked www.acme.local b) default=$(asked www.acme.local default)"
[ "$(asked www.b.acme.local b)" = 1 ] && [ "$(asked www.b.acme.local a)" = 0 ] &&
	[ "$(asked www.b.acme.local default)" = 0 ] &&
	ok "query logs: www.b.acme.local reached the b.acme.local stub only" ||
	bad "query logs for www.b.acme.local: a=$(asked www.b.acme.local a) b=$(asked www.b.acme.local b) default=$(asked www.b.acme.local default)"
[ "$(asked www.example.com a)$(asked www.example.com b)" = 00 ] &&
	ok "query logs: no stub saw www.example.com" || bad "a stub saw www.example.com"
# Cached like the rest: asked again, no upstream sees it.
answer_is www.acme.local 192.0.2.111 && answer_is www.b.acme.local 192.0.2.112
[ "$(asked www.acme.local a)$(asked www.b.acme.local b)" = 11 ] &&
	ok "stub answers cached: asked again, the stubs saw nothing more" ||
	bad "stub answers not cached: a=$(asked www.acme.local a) b=$(asked www.b.acme.local b)"
a=$(metric "ndcache_upstream_server_responses_total{upstream=\"$STUB_A:53\"}")
b=$(metric "ndcache_upstream_server_responses_total{upstream=\"$STUB_B:53\"}")
d=$(metric "ndcache_upstream_server_responses_total{upstream=\"$UPSTREAM_ADDR:53\"}")
# each stub: the one question, and the loop check every upstream gets at start (issue 22)
[ "$a" = 2 ] && [ "$b" = 2 ] && [ "${d:-0}" -ge 1 ] &&
	ok "per-upstream counters: $STUB_A 2, $STUB_B 2 (a question and a loop check), default $d" ||
	bad "per-upstream counters: a=$a b=$b default=$d" "$(metrics | grep upstream_server_responses)"
[ "$(metric ndcache_stub_domains)" = 2 ] && ok "ndcache_stub_domains 2" ||
	bad "ndcache_stub_domains: $(metric ndcache_stub_domains)"
term_wait "$NDCACHE_PID" ndcache 10
# Every line one JSON object (time, level, msg, fields); the query log names who answered.
if out=$(python3 - "$TOPO_DIR/ndcache.log" <<'EOF'
import json, sys
n = 0
queries = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert set(o) == {"time", "level", "msg", "fields"}, o
    assert o["time"].endswith("Z") and o["level"] in ("error", "warning", "info", "debug"), o
    n += 1
    if o["msg"] == "query":
        f = o["fields"]
        queries.setdefault(f["name"], []).append(f["source"] + "/" + f["rcode"] + "/" + f["proto"])
# Asked twice each: from the stub, then from the cache (in tc mode the kernel answers the
# second time, and the kernel's answers are not logged).
for name in ("www.acme.local.", "www.b.acme.local."):
    seen = queries.get(name) or []
    if seen[:1] != ["upstream/NOERROR/udp"] or set(seen[1:]) - {"cache/NOERROR/udp"}:
        sys.exit("%s: %s, want upstream then cache" % (name, seen))
print("%d lines, %d names in query lines" % (n, len(queries)))
EOF
2>&1); then
	ok "--log-format json: every line a JSON object; query lines: $out"
else
	bad "--log-format json / query log" "$out"$'\n'"$(head -5 "$TOPO_DIR/ndcache.log")"
fi

# --- 2. The kube-dns ConfigMap through the fake API server ------------------------------------
certs="$TOPO_DIR/certs"
"$root/tests/fakeapi/make_certs.sh" "$certs" >/dev/null || exit 1
API_PORT=16453
CTL_PORT=16454
ip netns exec "$NS_NODE" python3 "$fake" --cert "$certs/server.pem" --key "$certs/server.key" \
	--token t --objects "$root/deploy/examples/sample-cluster.json" --port $API_PORT \
	--control-port $CTL_PORT --bookmark-interval 1 >"$TOPO_DIR/fakeapi.out" \
	2>"$TOPO_DIR/fakeapi.err" &
TOPO_PIDS+=($!)
until_ok 10 grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" || {
	bad "fake API server did not start" "$(cat "$TOPO_DIR/fakeapi.err")"
	summary test_stub_domains.sh
	exit 1
}
ctl() { in_node curl -sf --max-time 5 -X POST --data "$1" "http://127.0.0.1:$CTL_PORT/control" >/dev/null; }
# kube_dns STUBDOMAINS_JSON [UPSTREAMNAMESERVERS_JSON]: applies kube-system/kube-dns with those
# data keys (each a JSON text, as kubectl writes them); "" leaves a key out.
kube_dns() {
	ctl "$(python3 - "$1" "${2:-}" <<'EOF'
import json, sys
data = {}
if sys.argv[1]:
    data["stubDomains"] = sys.argv[1]
if sys.argv[2]:
    data["upstreamNameservers"] = sys.argv[2]
print(json.dumps({"op": "apply", "object": {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "kube-dns", "namespace": "kube-system"}, "data": data}}))
EOF
)"
}
kube_dns "{\"corp.example\": [\"$STUB_A\"]}" || {
	bad "cannot apply the kube-dns ConfigMap to the fake API server"
	summary test_stub_domains.sh
	exit 1
}
cat >"$TOPO_DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
contexts:
- name: test
  context: {cluster: fake, user: ndcache}
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $certs/ca.pem
users:
- name: ndcache
  user: {token: t}
EOF
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
upstream: [$UPSTREAM_ADDR]
source:
  kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}
dataplane: {mode: $MODE, interfaces: [eth-pod]}
EOF
ip netns exec "$NS_NODE" "$bin" --config "$conf" >"$TOPO_DIR/ndcache-k8s.log" 2>&1 &
NDCACHE_PID=$!
TOPO_PIDS+=("$NDCACHE_PID")
until_ok 15 answer_is kubernetes.default.svc.cluster.local 10.96.0.1 || {
	bad "kubernetes source: no first sync" "$(cat "$TOPO_DIR/ndcache-k8s.log")"
	summary test_stub_domains.sh
	exit 1
}
until_ok 5 answer_is www.corp.example 192.0.2.121 &&
	ok "ConfigMap stubDomains at start: www.corp.example from $STUB_A" ||
	bad "ConfigMap stubDomains: want 192.0.2.121" "$(q www.corp.example A; cat "$TOPO_DIR/ndcache-k8s.log")"
# Its state streamed over the watch or listed (issue 25): the paths of both.
paths=$(in_node curl -s --max-time 5 "http://127.0.0.1:$CTL_PORT/stats" |
	python3 -c 'import json,sys; s=json.load(sys.stdin); print(" ".join(sorted(set(p for p in list(s["lists"]) + list(s["watches"]) if "configmaps" in p))))')
[ "$paths" = /api/v1/namespaces/kube-system/configmaps ] &&
	ok "the agent lists only kube-system's ConfigMaps (by name: RBAC resourceNames)" ||
	bad "ConfigMap list paths: '$paths'"

# A change: corp.example moves to the other stub; the cached answer from the first is dropped.
answer_is www.corp.example 192.0.2.121
kube_dns "{\"corp.example\": [\"$STUB_B\"]}"
if ms=$(ms_until 5 answer_is www.corp.example 192.0.2.122); then
	if [ "$ms" -le 1000 ]; then
		ok "ConfigMap changed: www.corp.example from $STUB_B after $ms ms (within 1 s)"
	else
		bad "ConfigMap changed: routing followed after $ms ms, over 1 s"
	fi
else
	bad "ConfigMap changed: still not routed to $STUB_B after 5 s" "$(q www.corp.example A; tail -5 "$TOPO_DIR/ndcache-k8s.log")"
fi
grep -q "kube-dns ConfigMap: applied: stubDomains corp.example" "$TOPO_DIR/ndcache-k8s.log" &&
	ok "log: the ConfigMap's routes applied, named" || bad "no 'applied' log line"

# upstreamNameservers: other names go there; the cluster domain stays with upstream.
answer_is www.example.org 198.51.100.7 || bad "www.example.org before upstreamNameservers"
kube_dns "{\"corp.example\": [\"$STUB_B\"]}" "[\"$STUB_A\"]"
if ms=$(ms_until 5 answer_is www.example.org 192.0.2.131); then
	ok "upstreamNameservers: www.example.org from $STUB_A after $ms ms"
else
	bad "upstreamNameservers: www.example.org not from $STUB_A" "$(q www.example.org A)"
fi
answer_is www.corp.example 192.0.2.122 && answer_is kubernetes.default.svc.cluster.local 10.96.0.1 &&
	ok "upstreamNameservers: stub domains and cluster names unchanged" ||
	bad "upstreamNameservers moved stub or cluster names"
status not-a-service.default.svc.cluster.local A | grep -q NXDOMAIN &&
	ok "upstreamNameservers: cluster-domain misses still NXDOMAIN from the table" ||
	bad "cluster-domain miss not NXDOMAIN"

# Bad JSON in one key: logged with the key, counted, its last good value kept; the other key
# still applies.
kube_dns '{"corp.example": ["169.254.53.11"' "[\"$STUB_B\"]"
until_ok 3 answer_is www.example.org 192.0.2.132 &&
	ok "bad stubDomains beside a good upstreamNameservers: the good key applied" ||
	bad "upstreamNameservers not applied beside a bad stubDomains" "$(q www.example.org A)"
answer_is www.corp.example 192.0.2.122 &&
	ok "bad stubDomains: the last good stubDomains stays ($STUB_B)" ||
	bad "bad stubDomains changed the routing" "$(q www.corp.example A)"
grep -q "kube-dns ConfigMap: stubDomains: not JSON" "$TOPO_DIR/ndcache-k8s.log" &&
	ok "log names the bad key: $(grep -m1 'stubDomains: not JSON' "$TOPO_DIR/ndcache-k8s.log")" ||
	bad "no log line naming stubDomains" "$(tail -5 "$TOPO_DIR/ndcache-k8s.log")"
[ "$(metric 'ndcache_kube_dns_configmap_errors_total{key="stubDomains"}')" = 1 ] &&
	[ "$(metric 'ndcache_kube_dns_configmap_errors_total{key="upstreamNameservers"}')" = 0 ] &&
	ok "ndcache_kube_dns_configmap_errors_total{key=\"stubDomains\"} 1" ||
	bad "error counters" "$(metrics | grep configmap_errors)"

# Deleted: the routes go back to the config's (corp.example to the default upstream, whose
# answer is the misrouting marker here, so this shows where it went).
ctl '{"op":"delete","kind":"ConfigMap","namespace":"kube-system","name":"kube-dns"}'
if ms=$(ms_until 5 answer_is www.corp.example 198.51.100.3); then
	ok "ConfigMap deleted: corp.example back to the default upstream after $ms ms"
else
	bad "ConfigMap deleted: corp.example still routed" "$(q www.corp.example A)"
fi
answer_is www.example.org 198.51.100.7 && ok "ConfigMap deleted: other names back to upstream" ||
	bad "ConfigMap deleted: www.example.org" "$(q www.example.org A)"

# --- 3. records.* with a Kubernetes source ------------------------------------------------------
kube_dns "{\"corp.example\": [\"$STUB_B\"]}"
until_ok 5 answer_is www.corp.example 192.0.2.122 || bad "ConfigMap applied again: not routed"
ttl() { in_pod dig +time=2 +tries=1 +noall +answer "@$NODE_LOCAL" "$1" A | awk '{print $2; exit}'; }
# Whole states fetched (streamed or listed: issue 25), every kind: a reload restarts them all.
lists0=$(in_node curl -s --max-time 5 "http://127.0.0.1:$CTL_PORT/stats" |
	python3 -c 'import json,sys; print(sum(c["initial_streams"] + c["lists_cache"] + c["lists_consistent"] for c in json.load(sys.stdin)["clients"].values()))')
# A pod asking all along: every answer must be the ClusterIP.
(
	while [ ! -e "$TOPO_DIR/stop-asking" ]; do
		q kubernetes.default.svc.cluster.local A | head -1
		sleep 0.05
	done
) >"$TOPO_DIR/asked" 2>&1 &
asker=$!
# The API server stalls (the fake's partition) until the check below ends it: the new list
# waits, the old table answers. Asked once the agent has taken the new file.
ctl '{"op":"pause","seconds":60}'
sed 's/^dataplane:/records: {ttl: 17}\ndataplane:/' "$conf" >"$conf.new" && mv "$conf.new" "$conf"
ttl_is() { [ "$(ttl "$1")" = "$2" ]; }
wait_until 10 "the agent listing again for records.ttl" \
	grep -q "records: listing the cluster again" "$TOPO_DIR/ndcache-k8s.log" ||
	bad "records.ttl reload not logged" "$(tail -5 "$TOPO_DIR/ndcache-k8s.log")"
ttl_is kubernetes.default.svc.cluster.local 5 &&
	ok "while the API server stalls: the running table answers (TTL 5)" ||
	bad "while the API server stalls: TTL $(ttl kubernetes.default.svc.cluster.local)"
ctl '{"op":"pause","seconds":0}'
if ms=$(ms_until 15 ttl_is kubernetes.default.svc.cluster.local 17); then
	ok "records.ttl with a Kubernetes source: TTL 17, $ms ms after the stall ended"
else
	bad "records.ttl with a Kubernetes source: not applied" "$(tail -5 "$TOPO_DIR/ndcache-k8s.log")"
fi
sleep 0.5 # a duration: the pod goes on asking a moment after the new table
touch "$TOPO_DIR/stop-asking"
wait "$asker"
n=$(wc -l <"$TOPO_DIR/asked")
other=$(grep -vc '^10\.96\.0\.1$' "$TOPO_DIR/asked")
[ "$n" -gt 3 ] && [ "$other" = 0 ] &&
	ok "while it was listed again: $n answers, all the ClusterIP" ||
	bad "while it was listed again: $other of $n answers were not the ClusterIP" "$(sort "$TOPO_DIR/asked" | uniq -c)"
lists1=$(in_node curl -s --max-time 5 "http://127.0.0.1:$CTL_PORT/stats" |
	python3 -c 'import json,sys; print(sum(c["initial_streams"] + c["lists_cache"] + c["lists_consistent"] for c in json.load(sys.stdin)["clients"].values()))')
[ "$lists1" -gt "$lists0" ] && ok "the agent fetched its state again ($lists0 -> $lists1)" ||
	bad "no new state fetched ($lists0 -> $lists1)"
answer_is www.corp.example 192.0.2.122 && ok "the ConfigMap's routes stay across the reload" ||
	bad "routes changed by the records reload" "$(q www.corp.example A)"
ctl '{"op":"apply","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"after","namespace":"default","uid":"u-after"},"spec":{"type":"ClusterIP","clusterIP":"10.96.99.9","clusterIPs":["10.96.99.9"]}}}'
until_ok 5 answer_is after.default.svc.cluster.local 10.96.99.9 &&
	[ "$(ttl after.default.svc.cluster.local)" = 17 ] &&
	ok "the new source follows changes (a Service added after the reload, TTL 17)" ||
	bad "the new source does not follow changes" "$(q after.default.svc.cluster.local A)"
term_wait "$NDCACHE_PID" ndcache 10 && ok "SIGTERM: clean exit" || bad "exit status $?"

summary test_stub_domains.sh
