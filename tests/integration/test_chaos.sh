#!/usr/bin/env bash
# Chaos under load (issue 10): a prober in the pod netns asks the node-local address about 1,000
# times a second (cluster names, cached external names, never-seen external names; 1 s timeout;
# every reply checked) while the agent is killed, upgraded, absent, its upstream killed and its
# port flooded with garbage. Per event it reports queries sent, lost, wrong and the longest gap.
#   a. kill -9, a new agent 2 s later          b. overlap upgrade: a second agent with the same
#   c. kill -9, no agent for 10 s                 config, then SIGTERM to the first
#   d. upstream killed, restarted              e. 20,000 malformed datagrams
# Each event has a few seconds of steady state before and after it, in its window.
# Pass: a baseline without events loses nothing; tc and xdp: 0 lost and 0 wrong in a, b and c;
# socket: 0 lost in b (a and c are reported: nothing answers without a process); d: 0 lost
# (cached names answered, stale if need be; fresh names SERVFAIL within 1 s); e: at most 1% lost;
# never a wrong answer; the agent alive after d and e.
# Usage: test_chaos.sh BUILD_DIR [tc|socket|xdp]   (root: network namespaces, BPF; about 70 s)
# Environment (tests/bench/chaos_bench.sh sets these): CHAOS_QPS (1000), CHAOS_STEADY (seconds
# before and after each event, 3), CHAOS_GARBAGE (datagrams, 20000), CHAOS_GARBAGE_RATE (4000),
# CHAOS_RESULTS (copy the prober's JSON lines there).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
bin="$build/control/ndcache"
MODE=${2:-tc}
prober="$here/prober.py"
QPS=${CHAOS_QPS:-1000}
STEADY=${CHAOS_STEADY:-3}
GARBAGE=${CHAOS_GARBAGE:-20000}
GARBAGE_RATE=${CHAOS_GARBAGE_RATE:-4000}
# shellcheck source=lib.sh
. "$here/lib.sh"

case $MODE in
tc | socket | xdp) ;;
*)
	echo "usage: test_chaos.sh BUILD_DIR [tc|socket|xdp]" >&2
	exit 2
	;;
esac
for v in QPS STEADY GARBAGE GARBAGE_RATE; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "test_chaos.sh: CHAOS_$v must be a positive integer, got '${!v}'" >&2
		exit 2
	}
done
[ -x "$bin" ] || {
	echo "no binary at $bin: build first" >&2
	exit 1
}

# The time, for the log lines that say what happened when.
ts() { date +%H:%M:%S.%3N; }
say() { echo "# $(ts) $*"; }
# alive PID: running and not a zombie (kill -0 succeeds on an unreaped child).
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) && [ -n "$st" ] && [ "$st" != Z ]
}
# wait_exit PID SECONDS: reaps PID; 1 if it was still running when time ran out.
wait_exit() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && return 1
	wait "$pid" 2>/dev/null
	return 0
}
# until_ok SECONDS CMD...: CMD every 0.1 s until it succeeds or time runs out.
until_ok() {
	local t=$1 i
	shift
	for ((i = 0; i < t * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

topo_up || exit 1
# A prober that died must not take the script with it (SIGPIPE on the marks FIFO).
trap '' PIPE

# --- The upstream: lib.sh's unbound, plus the prober's cached names and fresh zone -------------
mapfile -t UNBOUND_EXTRA < <(python3 "$prober" unbound-data)
upstream_up || exit 1
# lib.sh passes local-data only; the fresh names need a redirect zone: add it and restart.
kill "${TOPO_PIDS[0]}"
wait "${TOPO_PIDS[0]}" 2>/dev/null
python3 "$prober" unbound-zones | sed 's/^/\t/' >>"$TOPO_DIR/unbound.conf"
# A thousand queries a second would mostly be logging.
sed -i 's/log-queries: yes/log-queries: no/' "$TOPO_DIR/unbound.conf"
upstream_start() {
	ip netns exec "$NS_NODE" unbound -d -c "$TOPO_DIR/unbound.conf" >>"$TOPO_DIR/unbound.log" 2>&1 &
	UPSTREAM_PID=$!
	TOPO_PIDS+=("$UPSTREAM_PID")
	wait_dns "$UPSTREAM_ADDR" 53 www.example.com
}
upstream_start || exit 1
fresh_up() {
	out=$(in_node dig +time=1 +tries=1 +short "@$UPSTREAM_ADDR" check-1.fresh.example.com A)
	[ "$out" = 192.0.2.99 ]
}
until_ok 5 fresh_up || {
	bad "upstream: fresh names not answered (want 192.0.2.99)" "$out"
	summary test_chaos.sh
	exit 1
}

# XDP mode: the pod's eth0 needs an XDP program of its own to receive XDP_TX (lib.sh).
if [ "$MODE" = xdp ] && ! pod_xdp_pass; then
	bad "xdp: cannot attach an XDP pass program to the pod's eth0"
	summary test_chaos.sh
	exit 1
fi

# --- The agents ------------------------------------------------------------------------------
# Every agent runs in one mount namespace of this test with one bpffs, as the DaemonSet's pods
# share the host's /sys/fs/bpf: an agent can find what its predecessor pinned. (Each
# `ip netns exec` would mount a new, empty bpffs; the host's is not used, so tests running side
# by side never see each other's pins.) The holder process keeps that namespace alive. nsenter
# takes the holder's root too (--root --wd): entering a mount namespace alone resets the root to
# the namespace's own, which inside a chroot (tests/minimal) is not the tree the build is in.
ip netns exec "$NS_NODE" sh -c \
	'mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf; exec sleep 100000' &
HOLDER=$!
TOPO_PIDS+=("$HOLDER")
holder_ready() { nsenter --target "$HOLDER" --mount --root --wd -- mountpoint -q /sys/fs/bpf 2>/dev/null; }
until_ok 5 holder_ready || {
	bad "no bpffs in the agents' mount namespace after 5 s"
	summary test_chaos.sh
	exit 1
}

HTTP=127.0.0.1:9254
conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
port: 53
upstream: [$UPSTREAM_ADDR:53]
source:
  snapshot: $root/deploy/examples/sample-cluster.json
dataplane:
  mode: $MODE
  interfaces: [eth-pod]
http:
  listen: "$HTTP"
# A query in flight upstream when the upstream dies gets its SERVFAIL after this: under the
# prober's 1 s, or the default 1000 ms would race it.
forward:
  timeout_ms: 500
EOF
n_agents=0
# agent_start: a new agent with the same config; sets AGENT_PID and AGENT_LOG.
agent_start() {
	n_agents=$((n_agents + 1))
	AGENT_LOG="$TOPO_DIR/agent-$n_agents.log"
	nsenter --target "$HOLDER" --mount --net --root --wd -- "$bin" --config "$conf" >"$AGENT_LOG" 2>&1 &
	AGENT_PID=$!
	TOPO_PIDS+=("$AGENT_PID")
}
ready_code() { in_node curl -s -o /dev/null -m 1 -w '%{http_code}' "http://$HTTP/ready"; }
# wait_ready PID LOG SECONDS: the agent says it listens and is ready, and /ready answers 200.
# (After a socket handover two agents share the http port: the log says which one is up.)
wait_ready() {
	local pid=$1 log=$2 secs=$3 i
	for ((i = 0; i < secs * 10; i++)); do
		if ! alive "$pid"; then
			echo "agent $pid exited before it was ready"
			return 1
		fi
		if grep -q "listening on" "$log" && grep -q ": ready" "$log" &&
			[ "$(ready_code)" = 200 ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "agent $pid: no 'listening on' and ': ready' in its log with /ready 200 after ${secs}s"
	return 1
}
# ensure_agent EVENT: after an event an agent must be serving; if none is within 5 s (a /ready
# asked with a 1 s bound can time out on a busy machine: polled), say so and start one so that
# the next event starts from a running agent.
serving() { alive "$AGENT_PID" && [ "$(ready_code)" = 200 ]; }
ensure_agent() {
	until_ok 5 serving && return 0
	bad "after $1: no agent serving (pid $AGENT_PID); starting a new one" "$(tail -5 "$AGENT_LOG")"
	agent_start
	local why
	why=$(wait_ready "$AGENT_PID" "$AGENT_LOG" 20) || {
		bad "recovery after $1: $why" "$(tail -20 "$AGENT_LOG")"
		return 1
	}
}

# restarted EVENT: waits for the agent just started after EVENT's kill.
restarted() {
	local why
	if why=$(wait_ready "$AGENT_PID" "$AGENT_LOG" 20); then
		note "agent $AGENT_PID ready"
	else
		bad "$1: restarted agent: $why" "$(tail -20 "$AGENT_LOG")"
	fi
}
# survived EVENT: the agent is still the one that was running before EVENT.
survived() {
	if alive "$AGENT_PID"; then
		ok "$1: the agent kept running"
	else
		bad "$1: the agent died" "$(tail -20 "$AGENT_LOG")"
	fi
}

agent_start
why=$(wait_ready "$AGENT_PID" "$AGENT_LOG" 20) || {
	bad "first agent: $why" "$(cat "$AGENT_LOG")"
	summary test_chaos.sh
	exit 1
}
if [ "$MODE" != socket ] && grep -q "fast path unavailable" "$AGENT_LOG"; then
	bad "$MODE mode: the fast path did not load" "$(cat "$AGENT_LOG")"
	summary test_chaos.sh
	exit 1
fi
ok "agent up in $MODE mode (pid $AGENT_PID)"

# Warm the cache: every cached name once, answered as expected.
warm_bad=""
while read -r name type want; do
	got=$(in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$name" "$type" | sort | paste -sd,)
	[ "$got" = "$want" ] || warm_bad+="$name $type: '$got', want '$want'"$'\n'
done < <(python3 "$prober" warm-names)
if [ -z "$warm_bad" ]; then
	ok "cache warmed: every cached name answered as expected"
else
	bad "warming the cache: wrong answers" "$warm_bad"
fi

# --- The prober ------------------------------------------------------------------------------
fifo="$TOPO_DIR/marks"
mkfifo "$fifo"
ip netns exec "$NS_POD" python3 "$prober" probe --rate "$QPS" --first-event baseline \
	--json "$TOPO_DIR/prober.json" --summary "$TOPO_DIR/prober.sum" \
	<"$fifo" >"$TOPO_DIR/prober.out" 2>"$TOPO_DIR/prober.err" &
PROBER=$!
TOPO_PIDS+=("$PROBER")
exec 7>"$fifo"
mark() { echo "event $*" >&7; say "=== event $1"; }
note() {
	echo "note $*" >&7
	say "$*"
}
# A duration: the prober's traffic runs this long in each phase of an event.
steady() { sleep "$STEADY"; }

steady
steady
if ! alive "$PROBER"; then
	bad "the prober exited during the baseline" "$(cat "$TOPO_DIR/prober.err")"
	summary test_chaos.sh
	exit 1
fi
if [ "$MODE" != socket ]; then
	k=$(in_node curl -s -m 2 "http://$HTTP/metrics" |
		awk '/^ndcache_kernel_answers_total/ {s += $2} END {print s + 0}')
	if [ "${k:-0}" -gt 0 ]; then
		ok "$MODE: the kernel answers ($k answers so far)"
	else
		bad "$MODE: no answers from the kernel after the baseline" "$(tail -5 "$AGENT_LOG")"
	fi
fi

# a. kill -9, a new agent 2 s later.
mark a-kill9-restart-2s
steady
note "kill -9 agent $AGENT_PID"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
echo killed >&7
sleep 2 # a duration: the event is 2 s without an agent
agent_start
note "agent $AGENT_PID started"
restarted a
steady
ensure_agent a

# b. Overlap upgrade: the new agent starts while the old one serves; once it is ready, SIGTERM
# to the old one (what a DaemonSet rolling with maxSurge 1 does).
mark b-overlap-upgrade
steady
old=$AGENT_PID
old_log=$AGENT_LOG
agent_start
note "second agent $AGENT_PID started beside $old"
# Ready, then a 1 s window in which it must not exit (a second instance that gives up does).
if why=$(wait_ready "$AGENT_PID" "$AGENT_LOG" 20) && sleep 1 && alive "$AGENT_PID"; then
	note "second agent $AGENT_PID ready"
	ok "b: the second agent started beside the first and is ready"
else
	bad "b: second agent: ${why:-exited within 1 s of being ready}" "$(tail -20 "$AGENT_LOG")"
fi
note "SIGTERM to the first agent $old"
kill -TERM "$old"
if wait_exit "$old" 10; then
	note "first agent $old exited"
else
	bad "b: the first agent did not exit within 10 s of SIGTERM; kill -9" "$(tail -20 "$old_log")"
	kill -9 "$old"
	wait "$old" 2>/dev/null
fi
steady
if until_ok 5 serving; then
	ok "b: the second agent serves alone (/ready 200)"
else
	ensure_agent b
fi

# c. No agent for 10 s.
mark c-no-agent-10s
steady
note "kill -9 agent $AGENT_PID"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
echo killed >&7
sleep 10 # a duration: the event is 10 s without an agent
agent_start
note "agent $AGENT_PID started"
restarted c
steady
ensure_agent c

# d. Upstream killed: cached names keep being answered (the 2 s TTL ones stale), fresh names get
# SERVFAIL; then it comes back and fresh names resolve again.
mark d-upstream-down servfail-ok
steady
note "kill -9 upstream $UPSTREAM_PID"
kill -9 "$UPSTREAM_PID"
wait "$UPSTREAM_PID" 2>/dev/null
# Long enough for the 2 s TTL names to expire: they must be served stale.
sleep $((STEADY + 3))
upstream_start || bad "d: the upstream did not come back"
note "upstream $UPSTREAM_PID restarted"
fresh_ok() {
	local name="probe-$RANDOM$RANDOM.fresh.example.com"
	[ "$(in_pod dig +time=1 +tries=1 +short "@$NODE_LOCAL" "$name" A)" = 192.0.2.99 ]
}
if until_ok 10 fresh_ok; then
	note "fresh names resolve again"
else
	bad "d: fresh names not resolved through the agent 10 s after the upstream came back"
fi
steady
survived d
ensure_agent d

# e. Garbage at the node-local address, from the pod.
mark e-garbage
steady
note "garbage: $GARBAGE datagrams at $GARBAGE_RATE/s"
gout=$(in_pod timeout 120 python3 "$prober" garbage --count "$GARBAGE" --rate "$GARBAGE_RATE" \
	2>&1) ||
	bad "e: the garbage sender failed" "$gout"
note "$gout"
steady
survived e

echo stop >&7
exec 7>&-
if wait_exit "$PROBER" 10; then
	wait "$PROBER" 2>/dev/null
else
	bad "prober did not finish within 10 s of stop"
fi
sum="$TOPO_DIR/prober.sum"
if [ ! -s "$sum" ]; then
	bad "the prober wrote no results" "$(cat "$TOPO_DIR/prober.err")"
	summary test_chaos.sh
	exit 1
fi
[ -n "${CHAOS_RESULTS:-}" ] && cp "$TOPO_DIR/prober.json" "$CHAOS_RESULTS"
echo "--- prober, $MODE mode, $QPS queries/s, 1 s timeout" \
	"(gap: the longest time in which every query of a kind failed)"
cat "$TOPO_DIR/prober.out"
[ -s "$TOPO_DIR/prober.err" ] && cat "$TOPO_DIR/prober.err"
echo "---"

# --- Verdicts ----------------------------------------------------------------------------------
# get WINDOW [KIND]: "sent lost wrong servfail gap_ms"
get() { awk -v w="$1" -v k="${2:-all}" '$1 == w && $2 == k {print $3, $4, $5, $6, $7, $8}' "$sum"; }
read -r _ _ rate _ target _ unsent _ lag < <(grep '^rate ' "$sum")
if awk -v r="$rate" -v t="$target" 'BEGIN {exit !(r >= 0.95 * t)}' && [ "$unsent" = 0 ]; then
	ok "prober kept the rate: $rate queries/s of $target (longest send lag $lag ms)"
else
	bad "prober did not keep the rate: $rate queries/s of $target, $unsent not sent, send lag $lag ms"
fi
# judge WINDOW DESC MAX_LOST: 0 wrong always; lost at most MAX_LOST ("-": reported, not judged).
judge() {
	local w=$1 desc=$2 max=$3 sent lost wrong sf gap inproc
	read -r sent lost wrong sf gap inproc < <(get "$w")
	if [ -z "${sent:-}" ] || [ "$sent" = 0 ]; then
		bad "$desc: no queries in window $w"
		return
	fi
	local figs="$lost lost, $wrong wrong of $sent (SERVFAIL $sf), longest gap $gap ms"
	# kill -9 takes the queries inside the process with it: counted, shown, not judged
	[ "${inproc:-0}" != 0 ] && figs="$figs; and $inproc inside the agent when it was killed"
	if [ "$wrong" != 0 ]; then
		bad "$desc: $figs" "$(grep -A8 "^$w " "$TOPO_DIR/prober.out" | grep 'wrong:')"
	elif [ "$max" = - ]; then
		ok "$desc: 0 wrong ($figs; loss not judged in $MODE mode)"
	elif [ "$lost" -le "$max" ]; then
		ok "$desc: $figs"
	else
		bad "$desc: $figs (at most $max lost allowed)"
	fi
}
judge baseline "baseline (no event)" 0
if [ "$MODE" = socket ]; then
	judge a-kill9-restart-2s "a: kill -9, new agent after 2 s" -
	judge b-overlap-upgrade "b: overlap upgrade" 0
	judge c-no-agent-10s "c: 10 s without an agent" -
else
	judge a-kill9-restart-2s "a: kill -9, new agent after 2 s" 0
	judge b-overlap-upgrade "b: overlap upgrade" 0
	judge c-no-agent-10s "c: 10 s without an agent" 0
fi
judge d-upstream-down "d: upstream killed and restarted (fresh names: SERVFAIL within 1 s)" 0
read -r _ lost_c _ _ _ < <(get d-upstream-down cached)
read -r _ _ _ sf_f _ < <(get d-upstream-down fresh)
echo "# d: cached names lost $lost_c; fresh names answered SERVFAIL $sf_f times"
read -r sent _ _ _ _ < <(get e-garbage)
judge e-garbage "e: $GARBAGE malformed datagrams (at most 1% lost)" $((${sent:-0} / 100))

summary test_chaos.sh
