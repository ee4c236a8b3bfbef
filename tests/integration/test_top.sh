#!/usr/bin/env bash
# Who asks what (issue 37): the agent (socket mode, Kubernetes source: the fake API server, env
# NODE_NAME) names the pod behind each query in /debug/top and `ndcache top`.
#   The fake API server holds pods on this node (team-a/web-1 at 169.254.100.2, team-b/crawler-0
#   at 169.254.101.2: the two pod netns) and one on another node (team-c/elsewhere-0): only this
#   node's are watched (ndcache_pods_known 2).
#   web-1 sends 60 queries: 40 cluster names, 20 www.example.com (forwarded, then cached);
#   crawler-0 sends 45, only search-path expansions of example.com (ndots:5), all NXDOMAIN.
#   /debug/top and `ndcache top --once --json` attribute them to the right namespace/name with
#   counts equal to what each sent, NXDOMAIN shares 0 and 1, the most asked names per pod;
#   `ndcache top --once` shows both pods by name; log.clients_namespaces gives
#   ndcache_namespace_queries_total per namespace. A run with log.clients: false keeps no counts;
#   one without NODE_NAME logs it once; one with a NODE_NAME that is no node name serves, by
#   address.
# MODE tc or xdp: the kernel answers most of these; its per-client counts (the fast path's table)
# are merged in: the same totals, web-1's kernel_answered above 0, and log.clients: false keeps
# none in the kernel either.
# Usage: test_top.sh BUILD_DIR [socket|tc|xdp]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
MODE=${2:-socket}
# shellcheck source=lib.sh
. "$here/lib.sh"

need_bin "$bin" || exit 1
topo_up || exit 1
topo_pod_add 1 || exit 1
upstream_up || exit 1
API_PORT=16473
CTL_PORT=16474
NODE=node-a
POD_B=169.254.101.2
in_pod_b() { ip netns exec "ndc-pod1-$TOPO_ID" "$@"; }

pod_json() { # NS NAME NODE IP
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"%s","name":"%s",' "$1" "$2"
	printf '"uid":"uid-%s"},"spec":{"nodeName":"%s"},' "$2" "$3"
	printf '"status":{"phase":"Running","podIP":"%s","podIPs":[{"ip":"%s"}],' "$4" "$4"
	printf '"hostIP":"169.254.100.1"}}'
}
fakeapi_up 5 || exit 1
fakeapi_ctl "{\"op\":\"apply\",\"object\":[$(pod_json team-a web-1 $NODE $POD_ADDR),$(pod_json team-b crawler-0 $NODE $POD_B),$(pod_json team-c elsewhere-0 node-b 169.254.102.2)]}" ||
	{
		bad "the fake API server took the pods"
		summary "test_top $MODE"
		exit 1
	}

# agent_stop WHAT: SIGTERM; it exits 0 with no sanitizer report (an ASan build exits non-zero on
# one).
agent_stop() {
	local rc
	term_wait "$NDCACHE_PID" ndcache 10
	rc=$?
	if [ $rc = 0 ] && ! grep -Eq "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" \
		"$TOPO_DIR/ndcache.log"; then
		ok "$1: the agent exits 0 at SIGTERM, no sanitizer report"
	else
		bad "$1: the agent's exit" "exit $rc; $(grep -A20 -E "Sanitizer|runtime error" "$TOPO_DIR/ndcache.log" | head -30)"
	fi
}
top_json() { in_node curl -sf --max-time 5 http://127.0.0.1:9254/debug/top; }
pods_synced() { [ "$(metric ndcache_pods_synced)" = 1 ]; }

# check_top JSON WHAT: the two pods' rows against what they sent.
check_top() {
	python3 - "$1" "$POD_ADDR" "$POD_B" "$MODE" <<'PY'
import json, sys
top = json.loads(open(sys.argv[1]).read())
kernel = sys.argv[4] != "socket"  # the kernel answers some: where from is its business
rows = {c["addr"]: c for c in top["clients"]}
errs = []
want = {
    sys.argv[2]: dict(owner="pod", namespace="team-a", pod="web-1", queries=60, nxdomain=0,
                      local=40, cache_plus_forwarded=20, nxdomain_share=0.0,
                      top="kubernetes.default.svc.cluster.local."),
    sys.argv[3]: dict(owner="pod", namespace="team-b", pod="crawler-0", queries=45,
                      nxdomain=45, local=45, cache_plus_forwarded=0, nxdomain_share=1.0,
                      top=None),
}
for addr, w in want.items():
    r = rows.get(addr)
    if r is None:
        errs.append(f"{addr}: no row")
        continue
    got = dict(owner=r["owner"], namespace=r["namespace"], pod=r["pod"], queries=r["queries"],
               nxdomain=r["nxdomain"], local=r["local"],
               cache_plus_forwarded=r["cache"] + r["forwarded"],
               nxdomain_share=r["nxdomain_share"])
    if kernel:
        # each query once: answered in the kernel, or by the socket path (passed ones included)
        where = r["kernel_answered"] + r["local"] + r["cache"] + r["forwarded"]
        if where != w["queries"]:
            errs.append(f"{addr}: kernel_answered + local + cache + forwarded = {where}, "
                        f"want {w['queries']}")
        if addr == sys.argv[2] and r["kernel_answered"] < 1:
            errs.append(f"{addr}: kernel_answered {r['kernel_answered']}: no kernel counts")
        del got["local"], got["cache_plus_forwarded"]
    for k, v in got.items():
        if v != w[k]:
            errs.append(f"{addr} {k}: {v}, want {w[k]}")
    # the names sketch sees the socket path's names (and the kernel's sampled answers, which
    # log.dnstap's kernel_sample turns on): in a kernel mode the cluster names are the kernel's
    if w["top"] and not kernel and (not r["names"] or r["names"][0]["name"] != w["top"]):
        errs.append(f"{addr}: top name {r['names'][:1]}, want {w['top']}")
if rows[sys.argv[3]]["names"] and not all(
        n["name"].endswith(".svc.cluster.local.") or n["name"].endswith(".cluster.local.")
        for n in rows[sys.argv[3]]["names"]):
    errs.append("crawler-0's names are not its search-path expansions")
if top["node"] != "node-a" or not top["identity"]:
    errs.append(f"node {top['node']!r}, identity {top['identity']}")
print("; ".join(errs) if errs else "ok")
sys.exit(1 if errs else 0)
PY
}

conf="$TOPO_DIR/ndcache.yaml"
ndcache_conf "$conf" kubernetes $MODE eth-pod 'log: {clients_namespaces: true}'
NODE_NAME=$NODE ndcache_start "$bin" "$conf"
ndcache_ready 20 || {
	bad "the agent is ready"
	summary "test_top $MODE"
	exit 1
}
wait_until 10 "ndcache_pods_synced 1" pods_synced || bad "the pods watch synced" "$(metrics | grep pods)"
known=$(metric ndcache_pods_known)
if [ "$known" = 2 ]; then
	ok "only this node's pods are watched (ndcache_pods_known 2 of 3 pods)"
else
	bad "only this node's pods are watched" "ndcache_pods_known=$known"
fi

# web-1: 40 cluster names (by turns), 20 www.example.com; crawler-0: ndots:5 expansions only.
a=$(in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 40 \
	kubernetes.default.svc.cluster.local kube-dns.kube-system.svc.cluster.local:A)
a2=$(in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 20 www.example.com)
b=$(in_pod_b python3 "$here/top_send.py" "$NODE_LOCAL" 45 \
	www.example.com.team-b.svc.cluster.local www.example.com.svc.cluster.local \
	www.example.com.cluster.local)
echo "web-1 sent: $a / $a2"
echo "crawler-0 sent: $b"
if [[ $a == *'"answered": 40'* && $a2 == *'"answered": 20'* && $b == *'"answered": 45'* &&
	$b == *'"NXDOMAIN": 45'* ]]; then
	ok "the pods' queries were answered (60 and 45; crawler-0's all NXDOMAIN)"
else
	bad "the pods' queries were answered" "$a $a2 $b"
fi

top_json >"$TOPO_DIR/top.json"
if out=$(check_top "$TOPO_DIR/top.json"); then
	ok "/debug/top: team-a/web-1 60 queries, NXDOMAIN 0; team-b/crawler-0 45, NXDOMAIN share 1"
else
	bad "/debug/top attributes the queries" "$out
$(head -c 1500 "$TOPO_DIR/top.json")"
fi
in_node "$bin" top --once --json >"$TOPO_DIR/top-cli.json" 2>"$TOPO_DIR/top-cli.err"
if out=$(check_top "$TOPO_DIR/top-cli.json"); then
	ok "ndcache top --once --json: the same"
else
	bad "ndcache top --once --json" "$out $(cat "$TOPO_DIR/top-cli.err")"
fi
view=$(in_node "$bin" top --once --interval 0.2 --config "$conf" 2>&1)
echo "$view" | head -12
if grep -q "team-a/web-1" <<<"$view" && grep -q "team-b/crawler-0" <<<"$view" &&
	grep -Eq "^ +[0-9.]+ +45 +100\.0 +0\.0 +0  team-b/crawler-0" <<<"$view"; then
	ok "ndcache top --once: both pods by namespace/name, crawler-0 at 100% NXDOMAIN"
else
	bad "ndcache top --once shows the pods" "$view"
fi
ns_b=$(metric 'ndcache_namespace_queries_total{namespace="team-b"}')
ns_a=$(metric 'ndcache_namespace_queries_total{namespace="team-a"}')
nx_b=$(metric 'ndcache_namespace_nxdomain_total{namespace="team-b"}')
if [ "$ns_a" = 60 ] && [ "$ns_b" = 45 ] && [ "$nx_b" = 45 ] &&
	! metrics | grep -q 'pod="'; then
	ok "log.clients_namespaces: per-namespace counters (team-a 60, team-b 45 NXDOMAIN 45), no pod label"
else
	bad "per-namespace counters" "team-a=$ns_a team-b=$ns_b nxdomain=$nx_b"
fi
if [ "$MODE" != socket ]; then
	# two clients in a table of 4,096 slots: no takeover; no samples asked for, none lost
	taken=$(metric ndcache_kernel_clients_taken_total)
	lost=$(metric ndcache_kernel_samples_lost_total)
	if [ "$taken" = 0 ] && [ "$lost" = 0 ]; then
		ok "$MODE: ndcache_kernel_clients_taken_total 0, ndcache_kernel_samples_lost_total 0"
	else
		bad "$MODE: the kernel's client and sample metrics" "taken='$taken' lost='$lost'"
	fi
fi
agent_stop "with pods"

# log.clients: false: nothing counted, /debug/top says so; no NODE_NAME: said once, by address.
ndcache_conf "$conf" kubernetes $MODE eth-pod 'log: {clients: false}'
ndcache_start "$bin" "$conf"
ndcache_ready 20 || bad "the agent (log.clients: false) is ready"
in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 5 www.example.com >/dev/null
top=$(top_json)
if [[ $top == *'"clients_enabled":false'* && $top == *'"clients":[]'* ]] &&
	[ "$(grep -c 'env NODE_NAME not set' "$TOPO_DIR/ndcache.log")" = 1 ] &&
	[ -z "$(metric ndcache_clients_tracked)" ]; then
	ok "log.clients: false counts nothing; no NODE_NAME is logged once"
else
	bad "log.clients: false / no NODE_NAME" "$top $(grep -c NODE_NAME "$TOPO_DIR/ndcache.log")"
fi
agent_stop "log.clients: false"

# A NODE_NAME that is no node name: said (error), and the agent serves without identity.
ndcache_conf "$conf" kubernetes $MODE eth-pod
NODE_NAME='Bad_Node!' ndcache_start "$bin" "$conf"
ndcache_ready 20 || bad "the agent (bad NODE_NAME) is ready"
b=$(in_pod_b python3 "$here/top_send.py" "$NODE_LOCAL" 3 www.example.com.team-b.svc.cluster.local)
top=$(top_json)
if grep -q "pods: env NODE_NAME: .*clients are shown by address" "$TOPO_DIR/ndcache.log" &&
	[[ $b == *'"answered": 3'* && $top == *'"identity":false'* && $top == *'"owner":"unknown"'* ]]; then
	ok "a bad NODE_NAME is logged, the agent answers and shows clients by address"
else
	bad "a bad NODE_NAME" "$b $top $(grep NODE_NAME "$TOPO_DIR/ndcache.log")"
fi
agent_stop "bad NODE_NAME"
summary "test_top $MODE"
