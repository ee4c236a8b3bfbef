#!/usr/bin/env bash
# What a program on a pod interface's egress hook costs every packet that leaves through it, by
# how it is attached (issue 35, session 38): none; a clsact filter (the hook then runs tc_run,
# tcf_classify and cls_bpf_classify before the program), the way fail-open's egress program went
# in before; a tcx program (the program alone, Linux 6.6), the way it goes in now where the agent
# has CAP_SYS_ADMIN. The program parses Ethernet, IPv4 and UDP and lets everything go on
# (TC_ACT_UNSPEC, TCX_NEXT), about what fail-open's does with a reply that is not one of its
# flows. Every packet to a pod passes that hook, DNS or not.
#
# A sender (udp_blast.c, built here) in one network namespace blasts 32-byte UDP datagrams with
# sendmmsg through a veth to a bound socket in another that never reads; the hook is on the
# sender's end of the veth, and the sender is pinned to one CPU, where the receive path runs too
# (veth: the backlog, in the sender's softirq). Each round runs every mode for --duration
# seconds, modes in turn; the figure is the wall time per datagram (the CPU is the sender's
# alone), median over the rounds, and each mode's difference to none in the same round.
#
# Usage: tests/bench/egress_hook_bench.sh [--rounds N] [--duration S] [--cpu N] [--out DIR]
#   --rounds N    rounds (default 7)
#   --duration S  seconds per mode and round (default 3)
#   --cpu N       the sender's CPU (default 1)
#   --out DIR     results (default a fresh directory under /tmp): egress_hook.txt, raw.txt
# Needs root (network namespaces, BPF), clang, bpftool, tc, python3, gcc. Exit 0 when the table was
# printed. Test traffic stays inside the two namespaces it creates (169.254.99.0/30).
set -u
here=$(cd "$(dirname "$0")" && pwd)
cmdline="tests/bench/egress_hook_bench.sh${*:+ $*}"
BENCH_NAME=egress_hook_bench # read by lib.sh
# shellcheck source=lib.sh
. "$here/lib.sh"

rounds=7
duration=3
cpu=1
out=""
while [ $# -gt 0 ]; do
	case "$1" in -h | --help) usage 0 ;; esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--rounds) rounds=$2 ;;
	--duration) duration=$2 ;;
	--cpu) cpu=$2 ;;
	--out) out=$2 ;;
	*) echo "egress_hook_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
is_uint "$rounds" || die "--rounds: a number above 0, got '$rounds'"
is_uint "$duration" || die "--duration: a number above 0, got '$duration'"
is_uint0 "$cpu" && [ "$cpu" -lt "$(nproc)" ] || die "--cpu: one of this machine's CPUs, got '$cpu'"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF)"
for c in clang bpftool tc python3 gcc taskset; do
	command -v "$c" >/dev/null || die "needs $c (deploy/deps.sh bench)"
done
[ -n "$out" ] || out=$(mktemp -d /tmp/ndc-egress-hook.XXXXXX)
mkdir -p "$out" || die "cannot create $out"

ns_a="ndc-eh-$$-a"
ns_b="ndc-eh-$$-b"
bpf_dir="/tmp/ndc_eh_bpf_$$" # no dot: libbpf turns dots in pin paths into underscores
work=$(mktemp -d /tmp/ndc-eh-work.XXXXXX)
recv_pid=""
cleanup() {
	# the receiver first: it lives in a namespace the next lines delete, not with it
	[ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null && wait "$recv_pid" 2>/dev/null
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -f "$bpf_dir/pass"
	mountpoint -q "$bpf_dir" && umount "$bpf_dir"
	rmdir "$bpf_dir" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the sender and the program
gcc -O2 -Wall -Wextra -o "$work/udp_blast" "$here/udp_blast.c" || die "cannot build udp_blast"
cat >"$work/pass.bpf.c" <<'C'
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

/* Parses to UDP and lets every packet go on: TC_ACT_UNSPEC in clsact, TCX_NEXT in tcx. */
__attribute__((section("tc"), used)) int eh_pass(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end)
		return -1;
	/* read, as fail-open's program reads a reply that belongs to none of its flows */
	(void)*(volatile __u16 *)&eth->h_proto;
	(void)*(volatile __u8 *)&ip->protocol;
	(void)*(volatile __u16 *)&udp->source;
	return -1;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
C
clang -target bpf -O2 -Wall -I"/usr/include/$(gcc -print-multiarch)" -c "$work/pass.bpf.c" \
	-o "$work/pass.o" || die "cannot build the program"
mkdir -p "$bpf_dir" && mount -t bpf bpf "$bpf_dir" || die "cannot mount a bpffs at $bpf_dir"
bpftool prog load "$work/pass.o" "$bpf_dir/pass" type classifier || die "cannot load the program"

# the namespaces: the sender's veth end in a, the receiver's in b
ip netns add "$ns_a" && ip netns add "$ns_b" || die "cannot create network namespaces"
ip -n "$ns_a" link add va type veth peer name vb netns "$ns_b" || die "cannot create the veth"
ip -n "$ns_a" addr add 169.254.99.1/30 dev va && ip -n "$ns_a" link set va up &&
	ip -n "$ns_b" addr add 169.254.99.2/30 dev vb && ip -n "$ns_b" link set vb up &&
	ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || die "cannot set the veth up"
ip -n "$ns_a" neigh replace 169.254.99.2 lladdr \
	"$(ip -n "$ns_b" -o link show vb | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')" dev va ||
	die "cannot set the neighbour"
# the receiver: a bound socket that is never read (the datagrams end at its full buffer)
ip netns exec "$ns_b" python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("169.254.99.2", 9999))
time.sleep(86400)' &
recv_pid=$!
# tcx FLAG: attach (1) or detach (0) the pinned program on va's egress with BPF_PROG_ATTACH
tcx() {
	local verb=detach
	[ "$1" = 1 ] && verb=attach
	ip netns exec "$ns_a" python3 "$here/../integration/tcx_progs.py" "$verb" \
		"$bpf_dir/pass" va egress
}
# mode none|clsact|tcx: what is on va's egress now
mode() {
	ip netns exec "$ns_a" tc qdisc del dev va clsact 2>/dev/null
	tcx 0 2>/dev/null
	case "$1" in
	none) ;;
	clsact)
		ip netns exec "$ns_a" tc qdisc add dev va clsact &&
			ip netns exec "$ns_a" tc filter add dev va egress pref 7 handle 1 bpf da \
				pinned "$bpf_dir/pass"
		;;
	tcx) tcx 1 ;;
	esac
}
mode tcx 2>"$work/tcx.err" || die "this kernel refuses tcx: $(tail -1 "$work/tcx.err")"
mode none

cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
modes=(none clsact tcx)
: >"$out/raw.txt"
for ((r = 1; r <= rounds; r++)); do
	for m in "${modes[@]}"; do
		mode "$m" || die "cannot attach in mode $m"
		line=$(ip netns exec "$ns_a" taskset -c "$cpu" "$work/udp_blast" 169.254.99.2 9999 \
			"$duration") || die "udp_blast failed in mode $m"
		echo "$r $m $line" >>"$out/raw.txt"
	done
	echo "egress_hook_bench: round $r of $rounds done" >&2
done
mode none

python3 - "$out/raw.txt" "$cmdline" "$cpu_model" "$(uname -r)" "$duration" <<'PY' | tee "$out/egress_hook.txt"
import statistics, sys, time
raw, cmd, model, kernel, dur = sys.argv[1:6]
ns = {}  # (round, mode) -> wall ns per datagram
for line in open(raw):
    f = line.split()
    r, m, sent, wall = int(f[0]), f[1], int(f[3]), int(f[5])
    ns[(r, m)] = wall / sent if sent else float("nan")
rounds = sorted({r for r, _ in ns})
print("Egress hook cost per packet (issue 35): a pass-through program on a veth's egress, by how")
print("it is attached; udp_blast on one CPU, wall ns per datagram (sender and receive path), "
      "%s s per mode and round" % dur)
print("date: %s; machine: %s, kernel %s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                          model, kernel))
print("command: %s" % cmd)
print()
print("%-8s %10s %12s   %s" % ("mode", "ns/pkt", "over none", "per round (ns/pkt)"))
for m in ("none", "clsact", "tcx"):
    per = [ns[(r, m)] for r in rounds]
    diff = [ns[(r, m)] - ns[(r, "none")] for r in rounds]
    print("%-8s %10.1f %+12.1f   %s" % (m, statistics.median(per), statistics.median(diff),
                                      " ".join("%.0f" % x for x in per)))
d = [ns[(r, "clsact")] - ns[(r, "tcx")] for r in rounds]
print()
print("clsact over tcx, per round: %s; median %+.1f ns a packet" %
      (" ".join("%+.0f" % x for x in d), statistics.median(d)))
PY
