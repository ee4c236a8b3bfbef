#!/usr/bin/env bash
# An upgrade at any moment (issue 34 item 1): a prober in the pod netns asks 5,000 queries a
# second (cluster names, cached external names, never-seen external names; 2 s timeout, every
# reply checked) while, per case, a successor starts beside the running agent and the running
# agent gets SIGTERM 0, 0.2, 1 and 3 s after the successor's start. The fake API server stalls
# every list for 6 s from just before the successor's start, so each SIGTERM comes before the
# successor has synced and taken over, however fast the machine: the old agent must serve on
# (the join wait, upgrade.join_wait_ms, for the 0 s case; then the takeover wait, upgrade.wait_s)
# until the takeover. Meanwhile the successor holds the shared sockets unread. Then the running
# agent gets a second SIGTERM during that wait and stops before the takeover: the successor reads
# the sockets from then on, forwarding cluster names until it syncs (the upstream knows them, as
# kube-dns does), and attaches alone. Last, a successor killed (-9) before its takeover, with no
# SIGTERM: the running agent serves on, and the successor, asked while the running agent was
# stopped (SIGSTOP) for 0.5 s, had read nothing (a query it read would have gone with it). About
# 50 s per mode.
# Pass, per case: 0 lost and 0 wrong; the old agent's log says it waited and the successor took
# over (0 s case: also that it joined after the signal); the old agent exited; the successor
# attached (tc: its filter replaced the old one's, the kernel answers on its /metrics) and /ready
# 200. twice: 0 lost, 0 wrong, the old agent exited, the successor read from then on, attached
# and /ready 200. Killed case: 0 lost, 0 wrong, the old agent alive and /ready 200, the held query
# unanswered while the old agent was stopped.
# Usage: test_upgrade_any_moment.sh BUILD_DIR [tc|socket]   (root: network namespaces, BPF;
# about 60 s per mode)
# Environment: ANYMOMENT_QPS (5000), ANYMOMENT_EXTRA (a top-level config line added to the
# agent's config, e.g. "upgrade: {join_wait_ms: 0}" to see the 0 s case fail as it did before),
# ANYMOMENT_KEEP=DIR (the agents', the upstream's and the prober's logs are copied there at the
# end), ANYMOMENT_SNAPSHOT=N (not in the suite: a snapshot source instead, the sample cluster plus N
# services of tests/bench/gen_k8s_scale.py, no API server; what makes a successor slow is its
# load, so the later cases pass only where loading N services takes longer than their delay).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
mode=${2:-tc}
bin="$build/control/ndcache"
prober="$here/prober.py"
QPS=${ANYMOMENT_QPS:-5000}
SNAP_N=${ANYMOMENT_SNAPSHOT:-0}
[[ $SNAP_N =~ ^[0-9]+$ ]] || {
	echo "test_upgrade_any_moment.sh: ANYMOMENT_SNAPSHOT must be a number of services" >&2
	exit 2
}
PAUSE=6 # s the API server stalls from just before a successor's start: 3 s above the latest SIGTERM
# shellcheck source=lib.sh
. "$here/lib.sh"

case $mode in
tc | socket) ;;
*)
	echo "usage: test_upgrade_any_moment.sh BUILD_DIR [tc|socket]" >&2
	exit 2
	;;
esac
need_bin "$bin" || exit 1
for cmd in nsenter curl dig ss unbound; do
	command -v "$cmd" >/dev/null || {
		echo "test_upgrade_any_moment.sh: $cmd not found (deploy/deps.sh test installs it)" >&2
		exit 1
	}
done
ts() { date +%H:%M:%S.%3N; }
say() { echo "# $(ts) $*"; }
API_PORT=$((30000 + $$ % 10000))
# shellcheck disable=SC2034 # lib.sh's fakeapi_up and fakeapi_ctl read it
CTL_PORT=$((API_PORT + 1))
topo_up || exit 1
# A prober that died must not take the script with it (SIGPIPE on the marks FIFO).
trap '' PIPE
keep_logs() {
	[ -n "${ANYMOMENT_KEEP:-}" ] && mkdir -p "$ANYMOMENT_KEEP" &&
		cp "$TOPO_DIR"/*.log "$TOPO_DIR"/prober.* "$ANYMOMENT_KEEP"/ 2>/dev/null
	return 0
}
stop_here() {
	keep_logs
	summary "test_upgrade_any_moment.sh ($mode)"
	exit 1
}

# --- The upstream: the prober's cached names and fresh zone, and the cluster names -------------
# A successor that is not synced yet forwards cluster names (what the socket path does at a cold
# start): the upstream answers them as kube-dns would, the prober's expected answers.
mapfile -t UNBOUND_EXTRA < <(python3 "$prober" unbound-data)
UNBOUND_EXTRA+=("kubernetes.default.svc.cluster.local. 30 IN A 10.96.0.1"
	"kube-dns.kube-system.svc.cluster.local. 30 IN A 10.96.0.10"
	"frontend.shop.svc.cluster.local. 30 IN A 10.96.12.34"
	"frontend.shop.svc.cluster.local. 30 IN AAAA fd00:10:96::1234"
	"cart.shop.svc.cluster.local. 30 IN A 10.96.12.50"
	"prometheus.monitoring.svc.cluster.local. 30 IN A 10.96.40.10")
upstream_up || exit 1
# lib.sh passes local-data only; the fresh names need a redirect zone: add it and restart.
kill "${TOPO_PIDS[0]}"
wait "${TOPO_PIDS[0]}" 2>/dev/null
python3 "$prober" unbound-zones | sed 's/^/\t/' >>"$TOPO_DIR/unbound.conf"
sed -i 's/log-queries: yes/log-queries: no/' "$TOPO_DIR/unbound.conf"
# A prober descheduled on a busy machine catches up in bursts (hundreds of fresh names within a
# millisecond, all forwarded): the default receive buffer (about 200 of them) would drop some,
# their timeouts mark the only upstream down and the next fresh names get SERVFAIL.
printf '\tso-rcvbuf: 8m\n' >>"$TOPO_DIR/unbound.conf"
ip netns exec "$NS_NODE" unbound -d -c "$TOPO_DIR/unbound.conf" >>"$TOPO_DIR/unbound.log" 2>&1 &
TOPO_PIDS+=($!)
wait_dns "$UPSTREAM_ADDR" 53 www.example.com || exit 1
for q in "check-1.fresh.example.com A 192.0.2.99" "frontend.shop.svc.cluster.local AAAA fd00:10:96::1234"; do
	read -r qn qt qa <<<"$q"
	out=$(in_node dig +time=1 +tries=1 +short "@$UPSTREAM_ADDR" "$qn" "$qt")
	[ "$out" = "$qa" ] || {
		bad "upstream: $qn $qt not answered (want $qa)" "$out"
		stop_here
	}
done
if [ "$SNAP_N" -gt 0 ]; then
	python3 "$root/tests/bench/gen_k8s_scale.py" --services "$SNAP_N" --out "$TOPO_DIR/gen" >/dev/null || exit 1
	# The sample cluster's objects (the prober's names) and the generated ones but theirs.
	python3 - "$SAMPLE_CLUSTER" "$TOPO_DIR/gen/cluster.json" "$TOPO_DIR/snapshot.json" <<'PY' || exit 1
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
key = lambda o: (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
seen = {key(o) for o in a["items"]}
a["items"] += [o for o in b["items"] if key(o) not in seen]
json.dump(a, open(sys.argv[3], "w"))
PY
	source_arg=$TOPO_DIR/snapshot.json
else
	fakeapi_up 20 || exit 1
	source_arg=kubernetes
fi

# --- The agents ------------------------------------------------------------------------------
# All in one mount namespace of this test with one bpffs, as the DaemonSet's pods share the
# host's /sys/fs/bpf (test_chaos.sh says why nsenter, and why a holder process).
ip netns exec "$NS_NODE" sh -c \
	'mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf; exec sleep 100000' &
HOLDER=$!
TOPO_PIDS+=("$HOLDER")
holder_ready() { nsenter --target "$HOLDER" --mount --root --wd -- mountpoint -q /sys/fs/bpf 2>/dev/null; }
until_ok 5 holder_ready || {
	bad "no bpffs in the agents' mount namespace after 5 s"
	stop_here
}
conf="$TOPO_DIR/ndcache.yaml"
# per_client off: the prober is one client asking 1,000 fresh names a second.
ndcache_conf "$conf" "$source_arg" "$mode" eth-pod "workers: 2" "forward: {per_client: false}" \
	${ANYMOMENT_EXTRA:+"$ANYMOMENT_EXTRA"}

n=0
# agent_start: a new agent; sets AG (pid) and AGLOG.
agent_start() {
	n=$((n + 1))
	AGLOG="$TOPO_DIR/agent-$n.log"
	nsenter --target "$HOLDER" --mount --net --root --wd -- "$bin" --config "$conf" >"$AGLOG" 2>&1 &
	AG=$!
	TOPO_PIDS+=("$AG")
}
logged() { grep -qE "$2" "$1"; }
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) && [ -n "$st" ] && [ "$st" != Z ]
}
# The handover listener of the agent now running (a successor binds it once its predecessor is
# gone): the next successor can join it.
ho_listening() { in_node ss -xl | grep -qF "@ndcache/$NODE_LOCAL/53"; }
kernel_answers() {
	metrics | awk '/^ndcache_kernel_answers_total/ {s += $2} END {print s + 0}'
}
tc_prog() { in_node tc filter show dev eth-pod ingress | sed -n 's/.* id \([0-9]*\) .*/\1/p' | head -1; }

agent_start
OLD=$AG OLDLOG=$AGLOG
until_ok 30 logged "$OLDLOG" ": ready" && until_ok 10 ready_200 || {
	bad "first agent not ready within 40 s" "$(tail -20 "$OLDLOG")"
	stop_here
}
if [ "$mode" = tc ] && ! logged "$OLDLOG" "attached tc ingress"; then
	bad "tc: the first agent's fast path did not attach" "$(tail -20 "$OLDLOG")"
	stop_here
fi
until_ok 5 ho_listening || {
	bad "first agent: no handover listener after 5 s"
	stop_here
}
ok "$mode: first agent ready (pid $OLD)"

# Warm the cache: every cached name once, answered as expected.
warm_bad=""
while read -r name type want; do
	got=$(in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$name" "$type" | sort | paste -sd,)
	[ "$got" = "$want" ] || warm_bad+="$name $type: '$got', want '$want'"$'\n'
done < <(python3 "$prober" warm-names)
[ -z "$warm_bad" ] || {
	bad "warming the cache: wrong answers" "$warm_bad"
	stop_here
}

# --- The prober: one window per case ---------------------------------------------------------
fifo="$TOPO_DIR/marks"
mkfifo "$fifo"
ip netns exec "$NS_POD" python3 "$prober" probe --rate "$QPS" --timeout 2 --first-event baseline \
	--summary "$TOPO_DIR/prober.sum" <"$fifo" >"$TOPO_DIR/prober.out" 2>"$TOPO_DIR/prober.err" &
PROBER=$!
TOPO_PIDS+=("$PROBER")
exec 7>"$fifo"
note() {
	echo "note $*" >&7
	say "$*"
}
# Steady state around each event: the prober keeps asking, nothing is waited for.
steady() { sleep 1; }
steady

# The successor reads nothing before its takeover: with the running agent stopped (SIGSTOP), a
# never-seen name (a miss in the kernel too) gets no answer within 0.5 s; a successor that read the
# shared sockets would forward it and answer within milliseconds. The running agent, continued,
# answers the prober's queries queued meanwhile (0.5 s, inside their 2 s timeout).
held_check() {
	local name="held-$RANDOM$RANDOM.fresh.example.com" out rc
	kill -STOP "$OLD"
	out=$(in_pod timeout 0.5 dig +time=1 +tries=1 +short "@$NODE_LOCAL" "$name" A)
	rc=$?
	kill -CONT "$OLD"
	if [ "$rc" = 124 ] && [ -z "$out" ]; then
		ok "kill: the successor read nothing before its takeover ($name unanswered while $OLD was stopped)"
	else
		bad "kill: the successor read the shared sockets before its takeover" "dig rc $rc: $out"
	fi
}

# twice needs a successor that cannot sync before its predecessor goes: the API's stall.
CASES=(0 0.2 1 3 twice kill)
[ "$SNAP_N" = 0 ] || CASES=(0 0.2 1 3 kill)
declare -A VERDICT
run_case() { # run_case DELAY|twice|kill
	local d=$1 new newlog prog0 k0 k1 t0 t1
	echo "event case-$d" >&7
	say "=== case $d"
	steady
	prog0=$([ "$mode" = tc ] && tc_prog)
	if [ "$SNAP_N" = 0 ]; then
		fakeapi_ctl "{\"op\":\"pause\",\"seconds\":$PAUSE}" || bad "case $d: cannot pause the API server"
	fi
	agent_start
	new=$AG newlog=$AGLOG
	note "successor $new started beside $OLD"
	if [ "$d" = kill ]; then
		# A Kubernetes source serves before its sync (the API stalls it); a snapshot's is
		# killed while it loads.
		if until_ok 10 logged "$newlog" "joined the running agent" &&
			{ [ "$SNAP_N" -gt 0 ] || until_ok 10 logged "$newlog" "listening on"; }; then
			steady
			if logged "$newlog" "took over"; then
				bad "kill: the successor took over before the kill (the API pause did not hold)"
			fi
			held_check
			kill -9 "$new"
			wait "$new" 2>/dev/null
			note "successor $new killed (-9)"
		else
			bad "kill: the successor did not join and serve within 10 s" "$(tail -10 "$newlog")"
		fi
		steady
		steady
		[ "$SNAP_N" -gt 0 ] || fakeapi_ctl '{"op":"pause","seconds":0}'
		if alive "$OLD" && until_ok 5 ready_200; then
			ok "kill: the running agent $OLD serves on, /ready 200"
		else
			bad "kill: the running agent is gone or not ready" "$(tail -10 "$OLDLOG")"
		fi
		return
	fi
	if [ "$d" = twice ]; then
		# The running agent goes before the takeover (a second SIGTERM ends its wait; the
		# API stalls the successor's sync): the held successor reads the sockets from then on.
		if until_ok 10 logged "$newlog" "joined the running agent" &&
			until_ok 10 logged "$newlog" "listening on"; then
			steady
		else
			bad "twice: the successor did not join and serve within 10 s" "$(tail -10 "$newlog")"
		fi
		kill -TERM "$OLD"
		note "SIGTERM to $OLD"
		until_ok 5 logged "$OLDLOG" "serving on until it does" ||
			bad "twice: the old agent did not wait for its successor" "$(tail -10 "$OLDLOG")"
		kill -TERM "$OLD"
		note "SIGTERM again to $OLD"
		wait_pid "$OLD" 30 "the old agent" ||
			bad "twice: the old agent did not exit within 30 s of its second SIGTERM" "$(tail -10 "$OLDLOG")"
		if logged "$OLDLOG" "again: not waiting for the successor any more" &&
			until_ok 5 logged "$newlog" "reading the sockets now: the running agent went away"; then
			ok "twice: the old agent stopped before the takeover, the successor read the sockets from then on"
		else
			bad "twice: no stop before the takeover, or the successor did not read" \
				"$(grep handover "$OLDLOG" "$newlog" | tail -10)"
		fi
		until_ok 30 logged "$newlog" "went away before our takeover; serving alone" ||
			bad "twice: the successor did not attach alone within 30 s" "$(tail -10 "$newlog")"
	else
		[ "$d" = 0 ] || sleep "$d"
		kill -TERM "$OLD"
		note "SIGTERM to $OLD"
		t0=${EPOCHREALTIME/[.,]/}
		until_ok 30 logged "$newlog" "took over from the previous agent" ||
			bad "case $d: no takeover within 30 s" "$(tail -10 "$newlog")"
		if wait_pid "$OLD" 30 "the old agent"; then
			t1=${EPOCHREALTIME/[.,]/}
			note "old agent $OLD exited $(((t1 - t0) / 1000)) ms after its SIGTERM"
		else
			bad "case $d: the old agent did not exit within 30 s of the takeover" "$(tail -10 "$OLDLOG")"
		fi
		# What the old agent's log says of its wait (issue 34: logs say which happened).
		VERDICT[$d]=$(grep -oE "handover: (a successor joined [0-9]+ ms after the signal|no successor joined[^;]*|the successor (took over|went away|did not take over)[^;]*)" "$OLDLOG" | paste -sd'|')
		# Logged only by a wait that began before the takeover.
		if [[ ${VERDICT[$d]} == *"successor took over after"* ]]; then
			ok "case $d: the old agent served on until the takeover (${VERDICT[$d]})"
		else
			bad "case $d: the old agent did not wait for the takeover" "$(grep handover "$OLDLOG" | tail -8)"
		fi
	fi
	if until_ok 10 ready_200; then
		ok "case $d: the successor $new is ready"
	else
		bad "case $d: the successor is not ready" "$(tail -10 "$newlog")"
	fi
	if [ "$mode" = tc ]; then
		k0=$(kernel_answers)
		steady
		k1=$(kernel_answers)
		if logged "$newlog" "attached tc ingress" && [ -n "$prog0" ] && [ "$(tc_prog)" != "$prog0" ] &&
			[ "$k1" -gt "$k0" ]; then
			ok "case $d: the successor's programs are attached (filter id $prog0 -> $(tc_prog)) and answer ($k0 -> $k1)"
		else
			bad "case $d: the successor's fast path is not serving" "filter $prog0 -> $(tc_prog), kernel answers $k0 -> $k1"
		fi
	else
		steady
	fi
	until_ok 5 ho_listening || bad "case $d: the successor's handover listener is not up after 5 s"
	OLD=$new OLDLOG=$newlog
}
for d in "${CASES[@]}"; do run_case "$d"; done
echo stop >&7
exec 7>&-
wait_pid "$PROBER" 30 prober || bad "the prober did not finish" "$(cat "$TOPO_DIR/prober.err")"
cat "$TOPO_DIR/prober.out"

# --- The verdict per window ------------------------------------------------------------------
rate=$(awk '$1 == "rate" {print $3}' "$TOPO_DIR/prober.sum")
for w in baseline "${CASES[@]}"; do
	win=$([ "$w" = baseline ] && echo baseline || echo "case-$w")
	read -r sent lost wrong < <(awk -v w="$win" '$1 == w && $2 == "all" {print $3, $4, $5}' "$TOPO_DIR/prober.sum")
	if [ -z "${sent:-}" ] || [ "$sent" = 0 ]; then
		bad "$mode, $w: no queries in the window"
	elif [ "$lost" = 0 ] && [ "$wrong" = 0 ]; then
		ok "$mode, $w: $sent sent, 0 lost, 0 wrong"
	else
		bad "$mode, $w: $sent sent, $lost lost, $wrong wrong" "$(grep -A30 "^$win " "$TOPO_DIR/prober.out" | head -30)"
	fi
done
# Datagrams the node's sockets dropped for a full receive buffer (the agents', the upstream's).
rcvbuf_errors() {
	in_node awk '$1 == "Udp:" {if (!h) {for (i = 2; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1} else print $c}' /proc/net/snmp
}
say "node netns: $(rcvbuf_errors) UDP datagrams dropped for a full receive buffer"
# An ASan + UBSan build's agents: any report fails (the join and takeover waits, the shutdown).
if reports=$(grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$TOPO_DIR"/agent-*.log); then
	bad "$mode: sanitizer reports in the agents' logs" "$(grep -hE -A5 "Sanitizer|runtime error:" $reports | head -30)"
fi
# A pass means something only under the load asked for: the prober must have kept up.
if awk -v r="${rate:-0}" -v q="$QPS" 'BEGIN {exit !(r >= 0.8 * q)}'; then
	ok "$mode: the prober sent $rate queries/s (target $QPS)"
else
	bad "$mode: the prober sent only ${rate:-?} queries/s (target $QPS): the machine is too busy for this test"
fi
keep_logs
summary "test_upgrade_any_moment.sh ($mode)"
