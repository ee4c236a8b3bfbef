#!/usr/bin/env bash
# Self-test of the fake API server with curl: auth, pagination, watch, bookmarks, 410 after
# compaction, drop, token rotation, injected failures, pause, stats, the three ways to the initial
# state with their refusals and per-client counters, SIGTERM. Loopback only.
# Prints "N passed, N failed"; exits non-zero on any failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
server_pid=
pass=0
fail=0
bgpids=()

# wait_for PID SECONDS WHAT: bounded wait; past SECONDS it says so, kills PID, returns 124.
wait_for() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || {
			wait "$1" 2>/dev/null
			return
		}
		sleep 0.1
	done
	echo "selftest.sh: timeout: $3 (pid $1) still running after $2 s; killed" >&2
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 124
}
cleanup() {
	local p
	for p in "${bgpids[@]}" $server_pid; do kill "$p" 2>/dev/null; done
	for p in "${bgpids[@]}" $server_pid; do wait_for "$p" 5 "a process of the self-test"; done
	rm -rf "$tmp"
}
trap cleanup EXIT

ok() {
	pass=$((pass + 1))
	echo "ok   $1"
}
bad() {
	fail=$((fail + 1))
	echo "FAIL $1${2:+: $2}"
}
# check NAME EXPECTED ACTUAL
check() {
	if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "want [$2] got [$3]"; fi
}
# jq-free JSON access: jget FILE PYTHON_EXPR_ON_d
jget() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1
}
# events FILE: one "TYPE name rv" line per watch event
events() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    e = json.loads(line)
    md = e["object"].get("metadata", {})
    print(e["type"], md.get("name", e["object"].get("reason", "-")), md.get("resourceVersion", "-"))
' "$1" 2>&1
}

"$here/make_certs.sh" "$tmp/pki" || {
	echo "make_certs.sh failed"
	exit 1
}
pki=$tmp/pki

cat >"$tmp/objects.json" <<'EOF'
{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}},
 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default"},
  "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}},
 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system"},
  "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}},
 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "alpha", "namespace": "default"},
  "spec": {"type": "ClusterIP", "clusterIP": "10.96.1.1"}},
 {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
  "metadata": {"name": "alpha-abcde", "namespace": "default", "labels": {"kubernetes.io/service-name": "alpha"}},
  "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}}]},
 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
  "spec": {"nodeName": "n1"}, "status": {"podIP": "10.244.0.5"}}
]}
EOF

python3 "$here/fake_apiserver.py" --cert "$pki/server.pem" --key "$pki/server.key" \
	--client-ca "$pki/ca.pem" --token t0 --objects "$tmp/objects.json" \
	--bookmark-interval 0.3 >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
for _ in $(seq 100); do
	grep -q listening "$tmp/server.out" 2>/dev/null && break
	sleep 0.1
done
line=$(head -n1 "$tmp/server.out")
if [[ "$line" =~ ^fakeapi\ listening\ api=([0-9]+)\ control=([0-9]+)$ ]]; then
	api=${BASH_REMATCH[1]}
	ctl=${BASH_REMATCH[2]}
	ok "ready line: $line"
else
	bad "ready line" "[$line] $(cat "$tmp/server.err")"
	echo "$pass passed, $fail failed"
	exit 1
fi

base=https://127.0.0.1:$api
token=t0
# kget PATH [curl args...]: body to $tmp/body, prints the HTTP status
kget() {
	local p=$1
	shift
	curl -s --max-time 10 -o "$tmp/body" -w '%{http_code}' --cacert "$pki/ca.pem" \
		-H "Authorization: Bearer $token" "$@" "$base$p"
}
ctl() {
	curl -s --max-time 10 -o "$tmp/ctl" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		--data "$1" "http://127.0.0.1:$ctl/control"
}
# watch_bg OUTFILE QUERY: background curl -N; its exit code lands in OUTFILE.rc
watch_bg() {
	(
		curl -sN --max-time 90 --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
			"$base/api/v1/services?watch=true&$2" >"$1"
		echo $? >"$1.rc"
	) &
	bgpids+=($!)
}
wait_file() { # FILE SECONDS
	local i
	for i in $(seq $((${2} * 20))); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# --- auth -------------------------------------------------------------------------------------
code=$(curl -s --max-time 10 -o "$tmp/body" -w '%{http_code}' --cacert "$pki/ca.pem" "$base/api/v1/services")
check "no credentials: 401" 401 "$code"
check "401 body is a Status" "Status Failure Unauthorized 401" \
	"$(jget "$tmp/body" 'd["kind"], d["status"], d["reason"], d["code"]' | tr -d "(),'")"
check "wrong token: 401" 401 "$(token=nope kget /api/v1/services)"
check "right token: 200" 200 "$(kget /api/v1/services)"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' --cacert "$pki/ca.pem" --cert "$pki/client.pem" \
	--key "$pki/client.key" "$base/api/v1/namespaces")
check "client certificate: 200" 200 "$code"
curl -s --max-time 10 -o /dev/null --cacert "$pki/ca.pem" --cert "$pki/other-client.pem" \
	--key "$pki/other-client.key" "$base/api/v1/namespaces"
rc=$?
if [ $rc -ne 0 ]; then ok "client cert from the other CA rejected (curl rc $rc)"; else
	bad "client cert from the other CA rejected" "curl rc 0"; fi
curl -s --max-time 10 -o /dev/null --cacert "$pki/other-ca.pem" -H "Authorization: Bearer t0" \
	"$base/api/v1/namespaces"
check "server verified against the wrong CA: curl rc 60" 60 $?

# --- lists and pagination ---------------------------------------------------------------------
check "list kinds" "NamespaceList EndpointSliceList discovery.k8s.io/v1 PodList" \
	"$(kget /api/v1/namespaces >/dev/null; jget "$tmp/body" 'd["kind"]') $(
		kget /apis/discovery.k8s.io/v1/endpointslices >/dev/null
		jget "$tmp/body" 'd["kind"]+" "+d["apiVersion"]') $(
		kget /api/v1/pods >/dev/null; jget "$tmp/body" 'd["kind"]')"
check "list page 1: 200" 200 "$(kget '/api/v1/services?limit=2')"
cp "$tmp/body" "$tmp/page1"
check "page 1: 2 items sorted by namespace/name" "default/alpha default/kubernetes" \
	"$(jget "$tmp/page1" '" ".join(i["metadata"]["namespace"]+"/"+i["metadata"]["name"] for i in d["items"])')"
cont=$(jget "$tmp/page1" 'd["metadata"]["continue"]')
rv1=$(jget "$tmp/page1" 'd["metadata"]["resourceVersion"]')
check "page 1 has continue and rv" yes "$([ -n "$cont" ] && [ "$rv1" -gt 0 ] 2>/dev/null && echo yes)"
# A change between pages must not show up in page 2 (a consistent snapshot, as the real server).
ctl '{"op":"apply","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"zzz","namespace":"kube-system"}}}' >/dev/null
check "list page 2: 200" 200 "$(kget "/api/v1/services?limit=2&continue=$cont")"
check "page 2: last item, no continue, same rv" "kube-system/kube-dns None $rv1" \
	"$(jget "$tmp/body" '" ".join(i["metadata"]["namespace"]+"/"+i["metadata"]["name"] for i in d["items"])+" "+str(d["metadata"].get("continue"))+" "+d["metadata"]["resourceVersion"]')"
check "garbage continue token: 400" 400 "$(kget '/api/v1/services?limit=2&continue=xyz')"
check "namespaced list" "kube-dns zzz" \
	"$(kget /api/v1/namespaces/kube-system/services >/dev/null
	jget "$tmp/body" '" ".join(i["metadata"]["name"] for i in d["items"])')"
check "unknown path: 404" 404 "$(kget /api/v1/secrets)"

# --- watch ------------------------------------------------------------------------------------
kget /api/v1/services >/dev/null
rv=$(jget "$tmp/body" 'd["metadata"]["resourceVersion"]')
watch_bg "$tmp/w1" "resourceVersion=$rv&allowWatchBookmarks=true&timeoutSeconds=2"
sleep 0.4
ctl '{"op":"apply","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"beta","namespace":"default"},"spec":{"clusterIP":"10.96.2.2"}}}' >/dev/null
ctl '{"op":"apply","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"beta","namespace":"default"},"spec":{"clusterIP":"10.96.2.3"}}}' >/dev/null
ctl '{"op":"apply","object":{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"other"}}}' >/dev/null
code=$(ctl '{"op":"delete","kind":"Service","namespace":"default","name":"alpha"}')
check "control delete: 200" 200 "$code"
rv_del=$(jget "$tmp/ctl" 'd["resourceVersion"]')
wait_file "$tmp/w1.rc" 5
check "watch ends cleanly after timeoutSeconds (curl rc 0)" 0 "$(cat "$tmp/w1.rc" 2>/dev/null)"
ev=$(events "$tmp/w1" | grep -v BOOKMARK)
check "watch from list rv: live ADDED, MODIFIED, DELETED (no other kinds)" \
	"ADDED beta $((rv + 1))|MODIFIED beta $((rv + 2))|DELETED alpha $rv_del" "$(echo "$ev" | paste -sd'|')"
# A field selector on a watch (pod identity's spec.nodeName): entering it is ADDED, leaving it
# DELETED, changes outside it nothing.
kget /api/v1/pods >/dev/null
prv=$(jget "$tmp/body" 'd["metadata"]["resourceVersion"]')
(
	curl -sN --max-time 90 --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
		"$base/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-a&resourceVersion=$prv&timeoutSeconds=2" \
		>"$tmp/wp"
	echo $? >"$tmp/wp.rc"
) &
bgpids+=($!)
for i in $(seq 100); do
	curl -s "http://127.0.0.1:$ctl/stats" | grep -q '"watchers": *[1-9]' && break
	sleep 0.05
done
pod() { # NODE
	ctl '{"op":"apply","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"sel","namespace":"default"},"spec":{"nodeName":"'"$1"'"}}}' >/dev/null
}
pod ""
pod node-a
pod node-a
pod node-b
pod node-c
wait_file "$tmp/wp.rc" 5
check "watch with fieldSelector spec.nodeName: ADDED on entering, MODIFIED, DELETED on leaving" \
	"ADDED sel|MODIFIED sel|DELETED sel" \
	"$(events "$tmp/wp" | grep -v BOOKMARK | cut -d' ' -f1-2 | paste -sd'|')"
ctl '{"op":"delete","kind":"Pod","namespace":"default","name":"sel"}' >/dev/null
nbm=$(events "$tmp/w1" | grep -c BOOKMARK)
check "bookmarks every 0.3 s over 2 s" yes "$([ "$nbm" -ge 3 ] && echo yes)"
check "last bookmark carries the current rv" "BOOKMARK - $rv_del" \
	"$(events "$tmp/w1" | grep BOOKMARK | tail -n1)"
check "watch headers: chunked, application/json" "chunked application/json" "$(
	curl -s --max-time 10 -D - -o /dev/null --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
		"$base/api/v1/services?watch=true&resourceVersion=$rv&timeoutSeconds=1" |
		tr -d '\r' | awk -F': ' 'tolower($1)=="transfer-encoding"{t=$2} tolower($1)=="content-type"{c=$2} END{print t, c}')"
# Replay from history: a watch from an older rv gets the same events at once.
watch_bg "$tmp/w2" "resourceVersion=$rv&timeoutSeconds=1"
wait_file "$tmp/w2.rc" 4
check "watch from an older rv replays history" \
	"ADDED beta $((rv + 1))|MODIFIED beta $((rv + 2))|DELETED alpha $rv_del" \
	"$(events "$tmp/w2" | paste -sd'|')"
watch_bg "$tmp/w3" "timeoutSeconds=1"
wait_file "$tmp/w3.rc" 4
check "watch without rv: synthetic ADDED for current state" "ADDED beta|ADDED kubernetes|ADDED kube-dns|ADDED zzz" \
	"$(events "$tmp/w3" | cut -d' ' -f1-2 | paste -sd'|')"

# --- compaction -------------------------------------------------------------------------------
kget '/api/v1/services?limit=1' >/dev/null
cont=$(jget "$tmp/body" 'd["metadata"]["continue"]')
old_rv=$(jget "$tmp/body" 'd["metadata"]["resourceVersion"]')
ctl '{"op":"apply","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"gamma","namespace":"default"}}}' >/dev/null
check "compact: 200" 200 "$(ctl '{"op":"compact"}')"
check "continue older than compaction: 410" 410 "$(kget "/api/v1/services?limit=1&continue=$cont")"
check "410 Status reason Expired" "Expired 410" "$(jget "$tmp/body" 'd["reason"]+" "+str(d["code"])')"
watch_bg "$tmp/w4" "resourceVersion=$old_rv&allowWatchBookmarks=true&timeoutSeconds=5"
wait_file "$tmp/w4.rc" 3
check "watch from compacted rv: ERROR 410 event, stream ends" "ERROR Expired -|0" \
	"$(events "$tmp/w4" | paste -sd'|')|$(cat "$tmp/w4.rc" 2>/dev/null)"
check "410 event body" "Status Failure Expired 410" \
	"$(head -n1 "$tmp/w4" | python3 -c 'import json,sys; o=json.load(sys.stdin)["object"]; print(o["kind"], o["status"], o["reason"], o["code"])')"
new_rv=$(jget "$tmp/ctl" 'd["resourceVersion"]')
watch_bg "$tmp/w5" "resourceVersion=$new_rv&timeoutSeconds=1"
wait_file "$tmp/w5.rc" 4
check "watch from the compaction rv itself is fine" "0|" "$(cat "$tmp/w5.rc")|$(cat "$tmp/w5")"

# --- drop -------------------------------------------------------------------------------------
watch_bg "$tmp/w6" "resourceVersion=$new_rv&allowWatchBookmarks=true&timeoutSeconds=60"
watch_bg "$tmp/w7" "resourceVersion=$new_rv&timeoutSeconds=60"
sleep 0.6
check "stats: 2 watchers" 2 "$(curl -s --max-time 10 -o "$tmp/stats" "http://127.0.0.1:$ctl/stats"; jget "$tmp/stats" 'd["watchers"]')"
t0=$(date +%s%N)
ctl '{"op":"drop"}' >/dev/null
wait_file "$tmp/w6.rc" 3
wait_file "$tmp/w7.rc" 3
ms=$((($(date +%s%N) - t0) / 1000000))
check "drop: both streams cut without the last chunk (curl rc 18)" "18 18" \
	"$(cat "$tmp/w6.rc" 2>/dev/null) $(cat "$tmp/w7.rc" 2>/dev/null)"
check "drop is immediate (${ms} ms)" yes "$([ "$ms" -lt 1500 ] && echo yes)"
sleep 0.2
check "stats: 0 watchers after drop" 0 "$(curl -s --max-time 10 -o "$tmp/stats" "http://127.0.0.1:$ctl/stats"; jget "$tmp/stats" 'd["watchers"]')"

# --- token rotation ---------------------------------------------------------------------------
check "token rotate: 200" 200 "$(ctl '{"op":"token","token":"t1"}')"
check "old token now 401" 401 "$(kget /api/v1/services)"
token=t1
check "new token 200" 200 "$(kget /api/v1/services)"

# --- injected failures ------------------------------------------------------------------------
ctl '{"op":"fail","count":2,"status":500}' >/dev/null
c1=$(kget /api/v1/services)
r1=$(jget "$tmp/body" 'd["reason"]')
c2=$(kget /api/v1/namespaces)
c3=$(kget /api/v1/services)
check "fail count 2: 500, 500, then 200" "500 InternalError 500 200" "$c1 $r1 $c2 $c3"
ctl '{"op":"fail","count":1,"status":503}' >/dev/null
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
	"$base/api/v1/services?watch=true&timeoutSeconds=1")
check "fail applies to watch requests too: 503" 503 "$code"
ctl '{"op":"fail","count":1,"status":500,"watch":true,"path":"/api/v1/services"}' >/dev/null
c1=$(kget /api/v1/namespaces)
c2=$(kget /api/v1/services)
c3=$(kget '/api/v1/services?watch=true&timeoutSeconds=1')
c4=$(kget '/api/v1/services?watch=true&timeoutSeconds=1')
check "fail filtered by path and watch: only the watch fails" "200 200 500 200" "$c1 $c2 $c3 $c4"

# --- pause ------------------------------------------------------------------------------------
ctl '{"op":"pause","seconds":1.5}' >/dev/null
t0=$(date +%s%N)
code=$(kget /api/v1/services --max-time 0.5)
check "paused: request times out (curl rc 28, no reply)" 000 "$code"
code=$(kget /api/v1/services)
ms=$((($(date +%s%N) - t0) / 1000000))
check "paused: later request answered after the pause (${ms} ms)" "200 yes" \
	"$code $([ "$ms" -ge 1300 ] && [ "$ms" -lt 4000 ] && echo yes)"
ctl '{"op":"pause","seconds":30}' >/dev/null
ctl '{"op":"pause","seconds":0}' >/dev/null
check "pause 0 ends a pause" 200 "$(kget /api/v1/services --max-time 2)"

# --- control errors and stats -----------------------------------------------------------------
check "control: unknown op 400" 400 "$(ctl '{"op":"explode"}')"
check "control: bad JSON 400" 400 "$(ctl '{')"
check "control: delete missing object 400" 400 \
	"$(ctl '{"op":"delete","kind":"Service","namespace":"default","name":"nope"}')"
check "control: apply unsupported kind 400" 400 \
	"$(ctl '{"op":"apply","object":{"kind":"Secret","metadata":{"name":"x"}}}')"
curl -s --max-time 10 -o "$tmp/stats" "http://127.0.0.1:$ctl/stats"
check "stats: auth failures and per-path counts" yes "$(jget "$tmp/stats" \
	'"yes" if d["auth_failures"] >= 3 and d["requests"]["/api/v1/services"] >= 10 and d["watches"]["/api/v1/services"] >= 5 else d')"

# --- many watchers ----------------------------------------------------------------------------
kget /api/v1/services >/dev/null
rv=$(jget "$tmp/body" 'd["metadata"]["resourceVersion"]')
for i in $(seq 40); do
	watch_bg "$tmp/m$i" "resourceVersion=$rv&timeoutSeconds=3"
done
for _ in $(seq 60); do
	n=$(curl -s --max-time 10 "http://127.0.0.1:$ctl/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["watchers"])')
	[ "$n" -ge 40 ] && break
	sleep 0.1
done
ctl '{"op":"apply","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"many","namespace":"default"}}}' >/dev/null
got=0
for i in $(seq 40); do
	wait_file "$tmp/m$i.rc" 6
	if [ "$(cat "$tmp/m$i.rc" 2>/dev/null)" = 0 ] && events "$tmp/m$i" | grep -q "^ADDED many "; then
		got=$((got + 1))
	fi
done
check "40 concurrent watchers all get the event and a clean end" 40 "$got"

# --- the initial state: watch cache, WatchList, refusals, per-client counters (issue 25) --------
kget /api/v1/services >/dev/null
n_svc=$(jget "$tmp/body" 'len(d["items"])')
ctl '{"op":"reset_stats"}' >/dev/null
token_before=$token
token=$token.agent-7 # the current token, as client agent-7
# cl CODE: runs python CODE with d = the control port's /stats, c = agent-7's counters
cl() {
	curl -s --max-time 10 "http://127.0.0.1:$ctl/stats" >"$tmp/st" &&
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["clients"]["agent-7"]; exec(sys.argv[2])' \
			"$tmp/st" "$1" 2>&1
}
check "list resourceVersion=0: the watch cache ignores limit" "200 $n_svc" \
	"$(kget '/api/v1/services?resourceVersion=0&limit=1') $(jget "$tmp/body" 'len(d["items"])')"
now_rv=$(jget "$tmp/body" 'd["metadata"]["resourceVersion"]')
check "list not older than the current rv: 200" 200 \
	"$(kget "/api/v1/services?resourceVersion=$now_rv&resourceVersionMatch=NotOlderThan")"
check "list not older than a future rv: 504 ResourceVersionTooLarge after 3 s" \
	"504 ResourceVersionTooLarge" \
	"$(kget "/api/v1/services?resourceVersion=$((now_rv + 5))&resourceVersionMatch=NotOlderThan") $(jget "$tmp/body" 'd["details"]["causes"][0]["reason"]')"
check "resourceVersionMatch without resourceVersion: 422" 422 \
	"$(kget '/api/v1/services?resourceVersionMatch=NotOlderThan')"
curl -sN --max-time 2 --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
	"$base/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" \
	>"$tmp/wl"
check "sendInitialEvents: ADDED for every object, then the initial-events-end bookmark" \
	"$n_svc ADDED, BOOKMARK true $now_rv" \
	"$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
md = ev[n]["object"]["metadata"]
print("%d %s, %s" % (sum(e["type"] == "ADDED" for e in ev[:n]), ev[0]["type"], ev[n]["type"]),
      md.get("annotations", {}).get("k8s.io/initial-events-end"), md["resourceVersion"])
' "$tmp/wl" "$n_svc" 2>&1)"
check "sendInitialEvents without resourceVersionMatch: 422" 422 \
	"$(kget '/api/v1/services?watch=true&sendInitialEvents=true')"
check "per-client counters (token TOKEN.agent-7)" "6 2 0 2 1 1" \
	"$(cl 'print(c["requests"], c["lists_cache"], c["lists_consistent"], c["watches"], c["initial_streams"], int(c["bytes"] > 1000))')"
check "op refuse stream,cache" 200 "$(ctl '{"op":"refuse","ways":["stream","cache"]}')"
check "refused stream: 422 naming the WatchList gate" "422 Invalid" \
	"$(kget '/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan') $(jget "$tmp/body" 'd["reason"]')"
check "refused cache list: 400" 400 "$(kget '/api/v1/services?resourceVersion=0')"
check "consistent list still served" 200 "$(kget '/api/v1/services?limit=2')"
check "refused and consistent counted" "2 1" \
	"$(cl 'print(c["refused"], c["lists_consistent"])')"
check "op refuse consistent: 429" 429 \
	"$(ctl '{"op":"refuse","ways":["consistent"]}' >/dev/null; kget '/api/v1/services?limit=2')"
check "op refuse: bad way is 400" 400 "$(ctl '{"op":"refuse","ways":["etcd"]}')"
ctl '{"op":"refuse","ways":[]}' >/dev/null
ctl '{"op":"ignore_initial_events","on":true}' >/dev/null
curl -sN --max-time 1 --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
	"$base/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" \
	>"$tmp/wl"
check "ignore_initial_events: a plain watch, bookmarks without the annotation" "ADDED None" \
	"$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bm = [e for e in ev if e["type"] == "BOOKMARK"]
print(ev[0]["type"], bm[0]["object"]["metadata"].get("annotations") if bm else "no-bookmark")
' "$tmp/wl" 2>&1)"
ctl '{"op":"ignore_initial_events","on":false}' >/dev/null
ctl '{"op":"initial_deleted","count":1}' >/dev/null
for i in 1 2; do
	curl -sN --max-time 1 --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" \
		"$base/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" \
		>"$tmp/wd$i"
done
check "initial_deleted: one streamed state with a DELETED before its end bookmark, then none" \
	"ADDED DELETED BOOKMARK|0" "$(python3 -c '
import json, sys
ev = [json.loads(l)["type"] for l in open(sys.argv[1]) if l.strip()]
print(ev[0], ev[ev.index("BOOKMARK") - 1], ev[ev.index("BOOKMARK")], end="|")
print(sum(1 for l in open(sys.argv[2]) if "\"DELETED\"" in l))
' "$tmp/wd1" "$tmp/wd2" 2>&1)"
check "GET /requests: the last request's target, query included" \
	"/api/v1/services?watch=true&sendInitialEvents=true" "$(curl -s "http://127.0.0.1:$ctl/requests" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["requests"][-1][:50])')"
token=$token_before

# --- SIGTERM ----------------------------------------------------------------------------------
watch_bg "$tmp/w8" "timeoutSeconds=60"
sleep 0.5
kill -TERM "$server_pid"
wait_for "$server_pid" 10 "the fake API server after SIGTERM"
src=$?
server_pid=
wait_file "$tmp/w8.rc" 3
check "SIGTERM: exit 0, open watch ended cleanly" "0 0" "$src $(cat "$tmp/w8.rc" 2>/dev/null)"
if grep -q Traceback "$tmp/server.err"; then bad "no stack traces on stderr" "$(cat "$tmp/server.err")"; else
	ok "no stack traces on stderr"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
