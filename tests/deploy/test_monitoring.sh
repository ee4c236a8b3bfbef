#!/usr/bin/env bash
# Every metric the Grafana dashboard and the Prometheus rules in deploy/monitoring/ use must be one
# the agent exports. Starts the agent as a cluster runs it, so that every family is present: the
# Kubernetes source (the fake API server of tests/fakeapi on the loopback of a network namespace
# made here) and the tc fast path; reads /metrics once it is ready and runs check_monitoring.py.
# Then proves the check fails when a metric name changes on either side: in a copy of the
# dashboard, of the rules, and of the agent's /metrics. PromQL syntax is checked with promtool
# (from Debian's prometheus package, unpacked here, not installed: no service starts).
# Usage (root): tests/deploy/test_monitoring.sh BUILD_DIR
# Needs: iproute2, curl, openssl, python3-yaml.
set -u
build=${1:?usage: $0 BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$build" 2>/dev/null && pwd)/control/ndcache
mon=$root/deploy/monitoring
check=$root/tests/deploy/check_monitoring.py
[ "$(id -u)" = 0 ] || { echo "test_monitoring.sh: needs root (network namespace)" >&2; exit 1; }
[ -x "$bin" ] || { echo "test_monitoring.sh: $bin: not built" >&2; exit 1; }

ns=ndcm-node-$$
work=$(mktemp -d /tmp/ndc-monitoring.XXXXXX)
pids=()
passed=0 failed=0 skipped=0
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
skip() { echo "SKIP $1"; skipped=$((skipped + 1)); }

# -- the agent, synced from a (fake) API server, fast path loaded ---------------------------------
ip netns add "$ns" || exit 1
ip -n "$ns" link set lo up
ip -n "$ns" addr add 169.254.20.10/32 dev lo
"$root/tests/fakeapi/make_certs.sh" "$work/certs" >/dev/null || exit 1
printf 'token-mon' >"$work/token"
ip netns exec "$ns" python3 "$root/tests/fakeapi/fake_apiserver.py" --cert "$work/certs/server.pem" \
	--key "$work/certs/server.key" --token token-mon --port 16543 --control-port 16544 \
	--objects "$root/deploy/examples/sample-cluster.json" >"$work/api.out" 2>"$work/api.err" &
pids+=($!)
cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: fake, user: u}}]
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:16543", certificate-authority: $work/certs/ca.pem}}]
users: [{name: u, user: {tokenFile: $work/token}}]
EOF
# An upstream (on this namespace's lo, nothing listening) so the per-upstream families exist.
ip -n "$ns" addr add 169.254.53.1/32 dev lo
cat >"$work/ndcache.yaml" <<EOF
listen: [169.254.20.10]
upstream: [169.254.53.1]
source: {kubernetes: {kubeconfig: $work/kubeconfig}}
dataplane: {mode: tc, interfaces: ["veth*"]}
http: {listen: "127.0.0.1:9254"}
EOF
t0=$SECONDS
until grep -q "fakeapi listening" "$work/api.out" 2>/dev/null; do
	[ $((SECONDS - t0)) -lt 10 ] || { bad "fake API server did not start in 10 s: $(tail -3 "$work/api.err")"; break; }
	sleep 0.1
done
ip netns exec "$ns" "$bin" --config "$work/ndcache.yaml" >"$work/agent.log" 2>&1 &
pids+=($!)
code= t0=$SECONDS
while [ $((SECONDS - t0)) -lt 20 ]; do
	code=$(ip netns exec "$ns" curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:9254/ready)
	[ "$code" = 200 ] && break
	sleep 0.2
done
if [ "$code" = 200 ]; then
	ok "agent synced from the fake API server (/ready 200 after $((SECONDS - t0)) s)"
else
	bad "agent not ready after 20 s (/ready '$code'):"
	sed 's/^/     log: /' "$work/agent.log" | tail -20
fi
ip netns exec "$ns" curl -s -m 5 http://127.0.0.1:9254/metrics >"$work/metrics"
grep -q '^ndcache_fastpath_loaded{mode="tc"} 1$' "$work/metrics" &&
	ok "fast path loaded: the kernel families are in /metrics" ||
	bad "fast path not loaded: the kernel families would be missing ($(grep 'fast path' "$work/agent.log" | head -1))"

# -- the check -----------------------------------------------------------------------------------
if python3 "$check" --metrics "$work/metrics" --dashboard "$mon/ndcache-dashboard.json" \
	--rules "$mon/ndcache-rules.yaml" --list >"$work/check.out" 2>&1; then
	ok "every metric of the dashboard and the rules is exported: $(tail -1 "$work/check.out" | sed 's/^check_monitoring: //')"
else
	bad "dashboard/rules use metrics the agent does not export:"
	sed 's/^/     /' "$work/check.out"
fi

# -- it fails when a name changes, on each side ---------------------------------------------------
# must_fail WHAT METRICS DASHBOARD RULES EXPECT
must_fail() {
	local out
	out=$(python3 "$check" --metrics "$2" --dashboard "$3" --rules "$4" 2>&1)
	if [ $? -ne 0 ] && grep -q -- "$5" <<<"$out"; then
		ok "fails on purpose: $1"
	else
		bad "not reported: $1 (wanted '$5'): $out"
	fi
}
sed 's/ndcache_cache_hits_total/ndcache_cache_hit_total/g' "$mon/ndcache-dashboard.json" >"$work/dash-renamed.json"
must_fail "dashboard renames ndcache_cache_hits_total" "$work/metrics" "$work/dash-renamed.json" \
	"$mon/ndcache-rules.yaml" "ndcache_cache_hit_total is not exported"
sed 's/ndcache_fastpath_table_full_total/ndcache_fastpath_table_full/g' "$mon/ndcache-rules.yaml" >"$work/rules-renamed.yaml"
must_fail "rules rename ndcache_fastpath_table_full_total" "$work/metrics" \
	"$mon/ndcache-dashboard.json" "$work/rules-renamed.yaml" "ndcache_fastpath_table_full is not"
sed 's/^ndcache_synced /ndcache_sync_done /; s/ ndcache_synced / ndcache_sync_done /' "$work/metrics" >"$work/metrics-renamed"
must_fail "the agent renames ndcache_synced" "$work/metrics-renamed" \
	"$mon/ndcache-dashboard.json" "$mon/ndcache-rules.yaml" "ndcache_synced is not exported"
sed 's/ndcache_programming_latency_us_bucket/ndcache_programming_latency_us/' "$mon/ndcache-dashboard.json" >"$work/dash-hist.json"
must_fail "a histogram used without _bucket" "$work/metrics" "$work/dash-hist.json" \
	"$mon/ndcache-rules.yaml" "is a histogram"
sed 's/mode=~\\"tc|xdp\\"/mode=\\"tcx\\"/' "$mon/ndcache-dashboard.json" >"$work/dash-label.json"
must_fail "a label value the agent never exports" "$work/metrics" "$work/dash-label.json" \
	"$mon/ndcache-rules.yaml" 'mode="tcx"} selects nothing'

# -- PromQL syntax: promtool ---------------------------------------------------------------------
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
	# Unpacked from the package, not installed: installing prometheus would start a server.
	cache=/var/cache/ndcache-tests/promtool
	if [ ! -x "$cache/usr/bin/promtool" ]; then
		mkdir -p "$cache" && (cd "$cache" && timeout 120 apt-get download prometheus >/dev/null 2>&1 &&
			dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb)
	fi
	[ -x "$cache/usr/bin/promtool" ] && promtool=$cache/usr/bin/promtool
fi
if [ -z "$promtool" ]; then
	skip "PromQL syntax (no promtool: apt-get download prometheus failed)"
else
	# The rules as a rule file, and each dashboard query as a recording rule (Grafana variables
	# replaced by what they stand for).
	python3 - "$mon" "$work" <<'PY'
import json, sys, yaml
mon, work = sys.argv[1:]
spec = yaml.safe_load(open(mon + "/ndcache-rules.yaml"))["spec"]
yaml.safe_dump(spec, open(work + "/rules.yml", "w"))
d = json.load(open(mon + "/ndcache-dashboard.json"))
exprs = []
def walk(n):
    if isinstance(n, dict):
        if isinstance(n.get("expr"), str):
            exprs.append(n["expr"])
        for v in n.values():
            walk(v)
    elif isinstance(n, list):
        for v in n:
            walk(v)
walk(d)
rules = [{"record": f"dashboard:query{i}", "expr": e.replace("$__rate_interval", "5m")
          .replace("$instance", ".*")} for i, e in enumerate(exprs)]
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(work + "/dash.yml", "w"))
PY
	if "$promtool" check rules "$work/rules.yml" "$work/dash.yml" >"$work/promtool.out" 2>&1; then
		ok "promtool check rules: the alerts and every dashboard query parse ($(grep -o '[0-9]* rules found' "$work/promtool.out" | awk '{ n += $1 } END { print n }') rules)"
	else
		bad "promtool:"
		sed 's/^/     /' "$work/promtool.out"
	fi
fi

echo "test_monitoring.sh: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
