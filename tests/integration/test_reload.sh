#!/usr/bin/env bash
# Reload without restart (issue 14) under a steady prober (prober.py, as test_chaos.sh: cluster
# names, cached and never-seen external names, every reply checked, 1 s timeout). The config file
# sits in a directory laid out as kubelet lays out a ConfigMap volume (ndcache.yaml ->
# ..data/ndcache.yaml, ..data -> ..<timestamp>) and is changed as kubelet changes it: a new
# timestamped directory, then one rename of the ..data symlink.
#   swap    records.ttl 5 -> 30 and upstream A -> B (two unbound with the prober's names and a
#           marker name each answers differently): the TTL and the marker change within 1 s
#   broken  a file that does not parse: refused with the reason, counted
#           (ndcache_config_reload_failures_total, ndcache_config_last_reload_success 0), /ready
#           stays 200 and the old configuration keeps serving; SIGHUP reads it again: refused
#           again
#   fixed   a good file again (records.ttl 10, cache.max_entries, log.level, and workers, which
#           needs a restart): applied and logged by name, workers named as needing a restart,
#           ndcache_config_restart_needed 1
# The prober must lose nothing and get nothing wrong in any window.
# Usage: test_reload.sh BUILD_DIR [tc|socket|xdp]   (root: network namespaces, BPF; about 40 s)
# Environment: RELOAD_QPS (1000), RELOAD_STEADY (seconds around each change, 3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
bin="$build/control/ndcache"
MODE=${2:-tc}
prober="$here/prober.py"
QPS=${RELOAD_QPS:-1000}
STEADY=${RELOAD_STEADY:-3}
# shellcheck source=lib.sh
. "$here/lib.sh"

case $MODE in
tc | socket | xdp) ;;
*)
	echo "usage: test_reload.sh BUILD_DIR [tc|socket|xdp]" >&2
	exit 2
	;;
esac
[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}

UPSTREAM_B=169.254.53.2
HTTP=127.0.0.1:9254
ts() { date +%H:%M:%S.%3N; }
say() { echo "# $(ts) $*"; }
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) && [ -n "$st" ] && [ "$st" != Z ]
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
# ms_until SECONDS CMD...: CMD every 20 ms until it succeeds; prints the milliseconds it took.
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
q() { in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$@" 2>&1; }
# ttl_is NAME WANT: the TTL of NAME's A record, as the pod gets it.
ttl_is() { [ "$(in_pod dig +time=2 +tries=1 +noall +answer "@$NODE_LOCAL" "$1" A | awk '{print $2; exit}')" = "$2" ]; }
marker_is() { [ "$(q marker.example.com A)" = "$1" ]; }
metric() { in_node curl -s -m 2 "http://$HTTP/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
ready_code() { in_node curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$HTTP/ready"; }

topo_up || exit 1
trap '' PIPE

# --- Upstreams A and B: the prober's names (and its fresh zone) in both, a marker each --------
mapfile -t UNBOUND_EXTRA < <(python3 "$prober" unbound-data)
UNBOUND_EXTRA+=("marker.example.com. 300 IN A 192.0.2.201")
upstream_up || exit 1
kill "${TOPO_PIDS[0]}"
wait "${TOPO_PIDS[0]}" 2>/dev/null
python3 "$prober" unbound-zones | sed 's/^/\t/' >>"$TOPO_DIR/unbound.conf"
sed -i 's/log-queries: yes/log-queries: no/' "$TOPO_DIR/unbound.conf"
sed -e "s/interface: $UPSTREAM_ADDR/interface: $UPSTREAM_B/" -e 's/192.0.2.201/192.0.2.202/' \
	"$TOPO_DIR/unbound.conf" >"$TOPO_DIR/unbound-b.conf"
in_node ip addr add "$UPSTREAM_B/32" dev lo
ip netns exec "$NS_NODE" unbound -d -c "$TOPO_DIR/unbound.conf" >>"$TOPO_DIR/unbound.log" 2>&1 &
TOPO_PIDS+=($!)
ip netns exec "$NS_NODE" unbound -d -c "$TOPO_DIR/unbound-b.conf" >"$TOPO_DIR/unbound-b.log" 2>&1 &
TOPO_PIDS+=($!)
wait_dns "$UPSTREAM_ADDR" 53 www.example.com || exit 1
wait_dns "$UPSTREAM_B" 53 www.example.com || exit 1

# --- The config, as a ConfigMap volume -------------------------------------------------------
cm="$TOPO_DIR/cm"
mkdir -p "$cm"
# publish: stdin becomes the ConfigMap's ndcache.yaml, the way kubelet's atomic writer does it
# (a new directory named for the time, then the ..data symlink renamed over).
publish() {
	local old new
	new="..$(date +%Y_%m_%d_%H_%M_%S.%N)"
	mkdir "$cm/$new"
	cat >"$cm/$new/ndcache.yaml"
	old=$(readlink "$cm/..data" 2>/dev/null)
	ln -s "$new" "$cm/..data_tmp"
	mv -T "$cm/..data_tmp" "$cm/..data"
	[ -e "$cm/ndcache.yaml" ] || ln -s ..data/ndcache.yaml "$cm/ndcache.yaml"
	[ -n "$old" ] && rm -rf "${cm:?}/$old"
	return 0
}
config() { # config TTL UPSTREAM [extra lines]
	cat <<EOF
listen: [$NODE_LOCAL]
upstream: [$2]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
records: {ttl: $1}
dataplane: {mode: $MODE, interfaces: [eth-pod]}
http: {listen: "$HTTP"}
forward: {timeout_ms: 500}
${3:-}
EOF
}
# The agent starts on TTL 7; TTL 5 is published while it starts (a change then is not lost).
config 7 "$UPSTREAM_ADDR" | publish

if [ "$MODE" = xdp ]; then
	# As test_chaos.sh: the pod's veth needs an XDP program for XDP_TX replies to reach it.
	cat >"$TOPO_DIR/xdp_pass.c" <<'EOF'
struct xdp_md;
__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx)
{
	return 2; /* XDP_PASS */
}
char _license[] __attribute__((section("license"), used)) = "GPL";
EOF
	clang -O2 -target bpf -c "$TOPO_DIR/xdp_pass.c" -o "$TOPO_DIR/xdp_pass.o" &&
		in_pod ip -force link set dev eth0 xdp obj "$TOPO_DIR/xdp_pass.o" sec xdp || {
		bad "xdp: cannot attach an XDP pass program to the pod's eth0"
		summary test_reload.sh
		exit 1
	}
fi

log="$TOPO_DIR/ndcache.log"
ip netns exec "$NS_NODE" "$bin" --config "$cm/ndcache.yaml" >"$log" 2>&1 &
AGENT=$!
TOPO_PIDS+=("$AGENT")
# On purpose a moment after the start, not a wait for anything: the file is published while the
# agent starts (what the check below names).
sleep 0.05
config 5 "$UPSTREAM_ADDR" | publish
until_ok 20 grep -q ": ready" "$log" && until_ok 5 marker_is 192.0.2.201 || {
	bad "agent not ready with upstream A" "$(cat "$log")"
	summary test_reload.sh
	exit 1
}
if [ "$MODE" != socket ] && grep -q "fast path unavailable" "$log"; then
	bad "$MODE mode: the fast path did not load" "$(cat "$log")"
	summary test_reload.sh
	exit 1
fi
until_ok 3 ttl_is kubernetes.default.svc.cluster.local 5 &&
	ok "start: records.ttl 5 (published while the agent started), upstream A" ||
	bad "start: want TTL 5" "$(in_pod dig +noall +answer "@$NODE_LOCAL" kubernetes.default.svc.cluster.local; grep config: "$log")"
# Warm the cache, as test_chaos.sh does: every cached name once.
while read -r name type want; do
	q "$name" "$type" >/dev/null
done < <(python3 "$prober" warm-names)

# --- The prober ---------------------------------------------------------------------------------
fifo="$TOPO_DIR/marks"
mkfifo "$fifo"
ip netns exec "$NS_POD" python3 "$prober" probe --rate "$QPS" --first-event baseline \
	--summary "$TOPO_DIR/prober.sum" <"$fifo" >"$TOPO_DIR/prober.out" 2>"$TOPO_DIR/prober.err" &
PROBER=$!
TOPO_PIDS+=("$PROBER")
exec 7>"$fifo"
mark() { echo "event $*" >&7; say "=== event $1"; }
note() {
	echo "note $*" >&7
	say "$*"
}
# Every sleep "$STEADY" below is a duration: the prober's traffic before and after each event.
sleep "$STEADY"

# --- swap: records.ttl and the upstream ------------------------------------------------------
mark swap
sleep "$STEADY"
note "publish: records.ttl 30, upstream B"
config 30 "$UPSTREAM_B" | publish
both() { ttl_is kubernetes.default.svc.cluster.local 30 && marker_is 192.0.2.202; }
if ms=$(ms_until 5 both); then
	note "TTL 30 and upstream B after $ms ms"
	if [ "$ms" -le 1000 ]; then
		ok "swap: records.ttl 30 and upstream B answer after $ms ms (within 1 s)"
	else
		bad "swap: the new TTL and upstream answered after $ms ms, over 1 s"
	fi
else
	bad "swap: not applied after 5 s" "$(tail -5 "$log")"
fi
grep -q "config: reloaded $cm/ndcache.yaml: applied records.ttl, upstream" "$log" &&
	ok "log: $(grep -m1 'applied records.ttl, upstream' "$log" | sed 's/^ndcache: //')" ||
	bad "no 'reloaded ... applied records.ttl, upstream' log line" "$(grep config: "$log")"
sleep "$STEADY"

# --- broken: refused, the old configuration keeps serving ------------------------------------
mark broken
sleep "$STEADY"
note "publish: a file that does not parse"
printf 'upstream: [%s]\nrecords: {ttl: forever}\n' "$UPSTREAM_ADDR" | publish
if until_ok 5 grep -q "config: reload of" "$log"; then
	ok "broken file refused: $(grep -m1 'config: reload of' "$log" | sed 's/^ndcache: //')"
else
	bad "broken file: no refusal logged" "$(tail -5 "$log")"
fi
grep -q "records.ttl: expected an integer 0..3600, got 'forever'" "$log" &&
	ok "the refusal names the key and line" || bad "the refusal does not name records.ttl"
f=$(metric ndcache_config_reload_failures_total)
s=$(metric ndcache_config_last_reload_success)
[ "$f" = 1 ] && [ "$s" = 0 ] &&
	ok "ndcache_config_reload_failures_total 1, ndcache_config_last_reload_success 0" ||
	bad "metrics after the broken file: failures=$f last_success=$s"
[ "$(ready_code)" = 200 ] && ok "/ready stays 200" || bad "/ready: $(ready_code)"
both && ok "the old configuration keeps serving (TTL 30, upstream B)" ||
	bad "after the broken file: TTL or upstream changed"
note "SIGHUP"
kill -HUP "$AGENT"
until_ok 5 test "$(metric ndcache_config_reload_failures_total)" = 2 &&
	ok "SIGHUP reads the file again: refused again (failures 2)" ||
	bad "SIGHUP: failures $(metric ndcache_config_reload_failures_total)"
alive "$AGENT" && ok "the agent survived SIGHUP" || bad "the agent died on SIGHUP"
sleep "$STEADY"

# --- fixed: a good file again, with a key that needs a restart -------------------------------
mark fixed
sleep "$STEADY"
reloads0=$(metric ndcache_config_reloads_total)
note "publish: records.ttl 10, cache.max_entries 5000, log.level warning, workers 1"
config 10 "$UPSTREAM_B" "workers: 1
cache: {max_entries: 5000}
log: {level: warning}" | publish
if ms=$(ms_until 5 ttl_is kubernetes.default.svc.cluster.local 10); then
	ok "fixed file applied after $ms ms"
else
	bad "fixed file not applied" "$(tail -5 "$log")"
fi
[ "$(metric ndcache_config_last_reload_success)" = 1 ] &&
	[ "$(metric ndcache_config_reloads_total)" = $((reloads0 + 1)) ] &&
	ok "ndcache_config_last_reload_success back to 1, reloads_total $reloads0 -> $((reloads0 + 1))" ||
	bad "after the fix: last_success=$(metric ndcache_config_last_reload_success) reloads=$(metric ndcache_config_reloads_total)"
grep -q "applied records.ttl, cache, log.level" "$log" &&
	ok "log: $(grep 'applied records.ttl, cache' "$log" | sed 's/^ndcache: //')" ||
	bad "the fixed file's keys not logged as applied" "$(grep config: "$log")"
grep -q "workers differ from the running configuration and need a restart" "$log" &&
	[ "$(metric ndcache_config_restart_needed)" = 1 ] &&
	ok "workers: named as needing a restart, ndcache_config_restart_needed 1" ||
	bad "workers: no restart notice" "$(grep config: "$log")"
sleep "$STEADY"

echo stop >&7
exec 7>&-
until_ok 10 bash -c "! kill -0 $PROBER 2>/dev/null"
wait "$PROBER" 2>/dev/null
sum="$TOPO_DIR/prober.sum"
if [ ! -s "$sum" ]; then
	bad "the prober wrote no results" "$(cat "$TOPO_DIR/prober.err")"
	summary test_reload.sh
	exit 1
fi
echo "--- prober, $MODE mode, $QPS queries/s, 1 s timeout"
cat "$TOPO_DIR/prober.out"
echo "---"
read -r _ _ rate _ target _ unsent _ lag < <(grep '^rate ' "$sum")
if awk -v r="$rate" -v t="$target" 'BEGIN {exit !(r >= 0.9 * t)}'; then
	ok "prober kept the rate: $rate queries/s of $target (longest send lag $lag ms)"
else
	bad "prober did not keep the rate: $rate queries/s of $target, $unsent not sent"
fi
for w in baseline swap broken fixed; do
	read -r sent lost wrong sf gap _ < <(awk -v w="$w" '$1 == w && $2 == "all" {print $3, $4, $5, $6, $7, $8}' "$sum")
	if [ -n "${sent:-}" ] && [ "$sent" -gt 0 ] && [ "$lost" = 0 ] && [ "$wrong" = 0 ]; then
		ok "$w: 0 lost, 0 wrong of $sent (SERVFAIL $sf)"
	else
		bad "$w: $lost lost, $wrong wrong of ${sent:-0} (SERVFAIL $sf, longest gap $gap ms)" \
			"$(grep -A8 "^$w " "$TOPO_DIR/prober.out" | grep -E 'lost:|wrong:')"
	fi
done
term_wait "$AGENT" ndcache 10 && ok "SIGTERM: clean exit" || bad "exit status $?"
summary test_reload.sh
