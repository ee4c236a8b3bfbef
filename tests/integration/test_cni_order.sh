#!/usr/bin/env bash
# Order on the pod's interface (issue 38, item 4): a CNI's policy program attached to the pod's
# host-side interface before ndcache starts is never skipped. The stand-in policy
# (cni_policy.bpf.c, built here) either drops the pod's DNS (TC_ACT_SHOT: a NetworkPolicy that
# forbids it) or marks it and hands it to the stack (TC_ACT_OK: a CNI taking DNS to its proxy).
# Per run the pod asks a cluster name 20 times (at once, 1 s timeout each) and the test reads
# the kernel's answer counter (ndcache_kernel_answers_total{kind="answer"}), what the policy
# saw, the log and ndcache_fastpath_foreign_programs:
#   a. drop at clsact pref 20, tc mode, tc_order after (the default): ours goes in at pref 21;
#      0 of 20 answered, the kernel's counter does not move, the policy saw every query.
#   b. the agent killed (-9) and started again: it takes its own earlier filter back (one ndc
#      filter, still behind the policy), and still 0 answered.
#   c. drop, tc_order first (the old behaviour): the kernel answers 20 of 20 in front of the
#      policy, which sees none; the agent warns and the gauge says 1. This run shows a and b
#      can fail. What the kernel passes (a name not in its table) still reaches the policy
#      behind it, which drops it: the fast path's pass verdict is TC_ACT_UNSPEC, not TC_ACT_OK.
#   d. mark: answered 20 of 20, all by the socket path (kernel counter still), the policy saw all.
#   e. the policy attached after ndcache (a CNI that sets a pod up after its veth appeared):
#      ndcache moves behind it; 0 of 20 answered.
#   f. drop attached with tcx (Linux 6.6; skipped where the kernel refuses): tcx runs before
#      every clsact filter; 0 answered.
#   g. XDP mode with the drop policy: the agent warns (XDP runs before every tc program), the
#      gauge counts it, and the kernel answers (the policy is bypassed: what the warning says).
#   h. (run before g) a policy on clsact egress that counts the DNS replies reaching the pod:
#      fail-open's egress program (tcx where the kernel has it) lets every packet go on, so the
#      policy sees each socket-path reply.
# Usage: test_cni_order.sh BUILD_DIR   (root: network namespaces, BPF)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
# shellcheck source=lib.sh
. "$here/lib.sh"

need_bin "$bin" || exit 1
need_bpffs || exit 1
command -v bpftool >/dev/null || {
	echo "no bpftool" >&2
	exit 1
}

topo_up || exit 1
# No dot in the path: libbpf turns dots in pin paths into underscores.
BPF_DIR="/tmp/ndc_cni_bpf_$TOPO_ID"
cni_down() {
	[ -n "${NDCACHE_PID:-}" ] && term_wait "$NDCACHE_PID" ndcache
	rm -f "$BPF_DIR/tcx_link" 2>/dev/null
	mountpoint -q "$BPF_DIR" && umount "$BPF_DIR"
	rmdir "$BPF_DIR" 2>/dev/null
	topo_down
}
trap cni_down EXIT
upstream_up || exit 1

# The policy programs, loaded once and pinned on a bpffs of this test's own (ip netns exec
# mounts a fresh /sys, so /sys/fs/bpf inside is not the one outside).
mkdir -p "$BPF_DIR" && mount -t bpf bpf "$BPF_DIR" || exit 1
clang -target bpf -O2 -g -Wall -Werror -I"/usr/include/$(gcc -print-multiarch)" \
	-c "$here/cni_policy.bpf.c" -o "$TOPO_DIR/cni_policy.o" || exit 1
bpftool prog loadall "$TOPO_DIR/cni_policy.o" "$BPF_DIR/p" type classifier \
	pinmaps "$BPF_DIR/m" || exit 1
NAME=kubernetes.default.svc.cluster.local
N=20

# seen: the DNS packets the policy programs saw so far (their shared .bss counter, counts[0]).
seen() {
	bpftool -j map lookup pinned "$BPF_DIR/m/cni_poli_bss" key 0 0 0 0 2>/dev/null |
		python3 -c 'import json,sys; v=json.load(sys.stdin)["value"]
print(int.from_bytes(bytes(int(b,16) for b in v[:8]),"little"))' 2>/dev/null || echo 0
}
# replies: the DNS replies to the pod that policy_reply saw on egress (counts[1]).
replies() {
	bpftool -j map lookup pinned "$BPF_DIR/m/cni_poli_bss" key 0 0 0 0 2>/dev/null |
		python3 -c 'import json,sys; v=json.load(sys.stdin)["value"]
print(int.from_bytes(bytes(int(b,16) for b in v[8:16]),"little"))' 2>/dev/null || echo 0
}
hits() { metric 'ndcache_kernel_answers_total{kind="answer"}'; }

# policy_clsact drop|mark: the policy at clsact ingress pref 20 of eth-pod.
policy_clsact() {
	in_node tc qdisc add dev eth-pod clsact 2>/dev/null
	in_node tc filter add dev eth-pod ingress pref 20 handle 1 bpf da \
		pinned "$BPF_DIR/p/policy_$1"
}
policy_off() {
	in_node tc filter del dev eth-pod ingress pref 20 2>/dev/null
	rm -f "$BPF_DIR/tcx_link"
}
# policy_tcx drop: the policy attached with tcx (BPF_LINK_CREATE, BPF_TCX_INGRESS) and its link
# pinned, so that it stays until the pin goes. Fails where the kernel has no tcx.
policy_tcx() {
	in_node python3 "$here/tcx_progs.py" link "$BPF_DIR/p/policy_$1" eth-pod ingress \
		"$BPF_DIR/tcx_link"
}

# start MODE ORDER: the agent on eth-pod; waits until it answers and has attached.
start() {
	local conf="$TOPO_DIR/ndcache.yaml"
	ndcache_conf "$conf" "$SAMPLE_CLUSTER" "$1" eth-pod \
		"workers: 2" >/dev/null
	sed -i "s/interfaces: \[eth-pod\]}/interfaces: [eth-pod], tc_order: $2}/" "$conf"
	ndcache_start "$bin" "$conf"
	wait_dns "$NODE_LOCAL" 53 "$NAME" || return 1
	until_ok 10 grep -q "fast path: attached" "$TOPO_DIR/ndcache.log" || {
		echo "fast path not attached after 10 s" >&2
		tail -20 "$TOPO_DIR/ndcache.log" >&2
		return 1
	}
}
stop() {
	term_wait "$NDCACHE_PID" ndcache 10
	NDCACHE_PID=""
}

# ask [spread]: N questions from the pod at once, for NAME, or with spread for N names under it
# asked once each (so never in the kernel's table); sets answered (ANSWER 1), replied (any reply),
# kernel (the counter's move), saw (the policy's count) and back (policy_reply's count).
ask() {
	local h0 s0 b0 i p q opt=+norecurse pids=()
	h0=$(hits)
	s0=$(seen)
	b0=$(replies)
	[ "${1:-}" = spread ] && opt=+recurse
	for ((i = 0; i < N; i++)); do
		q=$NAME
		[ "${1:-}" = spread ] && q="h$i.$NAME"
		in_pod dig +time=1 +tries=1 "$opt" "@$NODE_LOCAL" "$q" A >"$TOPO_DIR/q.$i" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait_pid "$p" 10 dig >/dev/null
	done
	answered=$(grep -l "ANSWER: 1," "$TOPO_DIR"/q.* | wc -l)
	replied=$(grep -l "status: " "$TOPO_DIR"/q.* | wc -l)
	rm -f "$TOPO_DIR"/q.*
	kernel=$(($(hits) - ${h0:-0}))
	saw=$(($(seen) - s0))
	back=$(($(replies) - b0))
}

# check DESC CONDITION...: ok when the test command succeeds, else bad with the figures.
check() {
	local desc=$1
	shift
	if "$@"; then
		ok "$desc (answered $answered/$N, kernel +$kernel, policy saw $saw)"
	else
		bad "$desc (answered $answered/$N, kernel +$kernel, policy saw $saw)" \
			"$(in_node tc filter show dev eth-pod ingress; tail -5 "$TOPO_DIR/ndcache.log")"
	fi
}
ndc_prefs() { in_node tc filter show dev eth-pod ingress | grep 'handle 0x6e6463' | grep -o 'pref [0-9]*'; }
logged() { grep -q "$1" "$TOPO_DIR/ndcache.log"; }

# a. drop at pref 20, tc, after
policy_clsact drop || exit 1
start tc after || exit 1
if fastpath_missing tc; then
	summary test_cni_order
	exit
fi
ask
check "a. drop policy at pref 20, tc_order after: ndcache at $(ndc_prefs | tr '\n' ' ')" \
	test "$answered" = 0 -a "$kernel" = 0 -a "$saw" -ge "$N" -a "$(ndc_prefs)" = "pref 21"
[ "$(metric ndcache_fastpath_foreign_programs)" = 0 ] &&
	ok "a. ndcache_fastpath_foreign_programs 0" ||
	bad "a. ndcache_fastpath_foreign_programs $(metric ndcache_fastpath_foreign_programs)"

# b. kill -9 and start again: the earlier agent's filter is taken back, not counted as another's
kill -9 "$NDCACHE_PID"
wait "$NDCACHE_PID" 2>/dev/null
start tc after || exit 1
ask
check "b. after kill -9 and a restart: one ndc filter ($(ndc_prefs | tr '\n' ' ')), behind the policy" \
	test "$answered" = 0 -a "$kernel" = 0 -a "$(ndc_prefs)" = "pref 21"
[ "$(metric ndcache_fastpath_foreign_programs)" = 0 ] &&
	ok "b. ndcache_fastpath_foreign_programs 0" ||
	bad "b. ndcache_fastpath_foreign_programs $(metric ndcache_fastpath_foreign_programs)"
stop

# c. tc_order first: the old behaviour, in front of the policy
start tc first || exit 1
ask
check "c. tc_order first: the kernel answers in front of the policy" \
	test "$answered" = "$N" -a "$kernel" -ge "$N" -a "$saw" = 0 -a "$(ndc_prefs)" = "pref 7"
# What the kernel does not answer goes on to the filters behind it (NDC_TC_PASS, TC_ACT_UNSPEC):
# the policy drops it. With TC_ACT_OK it ended the hook and the socket path answered.
name_cluster=$NAME
NAME=not-in-the-table.example.org
ask
check "c. tc_order first: what the kernel passes still reaches the policy behind it" \
	test "$answered" = 0 -a "$kernel" = 0 -a "$saw" -ge "$N"
NAME=$name_cluster
logged "runs in front of 1 other filter" && ok "c. warned: in front of 1 other filter" ||
	bad "c. no warning" "$(cat "$TOPO_DIR/ndcache.log")"
[ "$(metric ndcache_fastpath_foreign_programs)" = 1 ] &&
	ok "c. ndcache_fastpath_foreign_programs 1" ||
	bad "c. ndcache_fastpath_foreign_programs $(metric ndcache_fastpath_foreign_programs)"
stop
policy_off

# d. mark and pass to the stack: the socket path answers, never the kernel
policy_clsact mark || exit 1
start tc after || exit 1
ask
check "d. mark policy: answered by the socket path only" \
	test "$answered" = "$N" -a "$kernel" = 0 -a "$saw" -ge "$N"
stop
policy_off

# e. the policy attached after ndcache: ndcache moves behind it
start tc after || exit 1
policy_clsact drop || exit 1
if until_ok 5 test "$(ndc_prefs)" = "pref 21"; then
	ask
	check "e. policy added after ndcache: moved behind it" \
		test "$answered" = 0 -a "$kernel" = 0 -a "$saw" -ge "$N"
else
	bad "e. not moved behind a policy added later: $(ndc_prefs | tr '\n' ' ')" \
		"$(in_node tc filter show dev eth-pod ingress)"
fi
stop
policy_off

# f. tcx
if policy_tcx drop 2>"$TOPO_DIR/tcx.err"; then
	start tc after || exit 1
	ask
	check "f. drop policy with tcx: runs before our clsact filter" \
		test "$answered" = 0 -a "$kernel" = 0 -a "$saw" -ge "$N"
	logged "1 tcx program(s)" && ok "f. logged the tcx program" ||
		bad "f. tcx program not logged" "$(cat "$TOPO_DIR/ndcache.log")"
	stop
	policy_off
else
	echo "skip - f. tcx: the kernel refused ($(cat "$TOPO_DIR/tcx.err" | tail -1))"
fi

# h. a policy on egress behind fail-open's egress program (a tcx program where the kernel has
# tcx, else a clsact filter behind the policy's): it still sees every reply that reaches the pod
# through the stack (the socket path's; kernel answers leave with redirect_peer, which skips the
# hook). Were ours to end the hook (TCX_PASS) instead of going on (TCX_NEXT) it would see none.
in_node tc qdisc add dev eth-pod clsact 2>/dev/null
in_node tc filter add dev eth-pod egress pref 20 handle 1 bpf da pinned "$BPF_DIR/p/policy_reply" ||
	exit 1
start tc after || exit 1
NAME=not-in-the-table.example.org
ask spread
NAME=$name_cluster
if tcx_e=$(in_node python3 "$here/tcx_progs.py" eth-pod egress 2>/dev/null) && [ -n "$tcx_e" ]; then
	where="ours a tcx program (id $tcx_e)"
else
	where="ours at clsact $(in_node tc filter show dev eth-pod egress | grep 'handle 0x6e6463' | grep -o 'pref [0-9]*')"
fi
if [ "$replied" = "$N" ] && [ "$kernel" = 0 ] && [ "$back" -ge "$N" ]; then
	ok "h. a policy on egress (clsact pref 20) saw $back of the $N socket path's replies; $where"
else
	bad "h. the egress policy saw $back replies; the pod got $replied of $N (kernel +$kernel); $where" \
		"$(in_node tc filter show dev eth-pod egress; tail -5 "$TOPO_DIR/ndcache.log")"
fi
stop
in_node tc filter del dev eth-pod egress pref 20 2>/dev/null

# g. XDP mode
pod_xdp_pass || exit 1
policy_clsact drop || exit 1
start xdp after || exit 1
ask
logged "XDP runs before them" && ok "g. xdp: warned that XDP runs before the tc policy" ||
	bad "g. xdp: no warning" "$(cat "$TOPO_DIR/ndcache.log")"
n=$(metric ndcache_fastpath_foreign_programs)
[ "${n:-0}" -ge 1 ] && ok "g. xdp: ndcache_fastpath_foreign_programs $n" ||
	bad "g. xdp: ndcache_fastpath_foreign_programs ${n:-missing}"
check "g. xdp: the kernel answers, the policy is bypassed (what the warning says)" \
	test "$kernel" -ge "$N" -a "$saw" = 0
stop
policy_off

summary test_cni_order
