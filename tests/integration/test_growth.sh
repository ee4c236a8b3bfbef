#!/usr/bin/env bash
# Growth and shrink of the kernel's answer table under traffic (issue 21, acceptance item 2).
# The agent syncs from the fake API server (tests/fakeapi), which starts with the sample cluster;
# 10,000 services with an EndpointSlice each (gen_k8s_scale.py's, every 5th headless) are added
# in batches, then deleted again, while a prober in the pod netns (growth.py probe) asks the
# sample's names 1,000 times a second (A, AAAA and NODATA, headless, SRV, NXDOMAIN), and 200 a
# second some of the added services' while they exist, every reply checked whole (rcode and
# records; 1 s timeout). /metrics is sampled every 0.5 s throughout.
# Pass: 0 lost and 0 wrong over the whole run; the added names answered right once the table
# holds them and NXDOMAIN once deleted; the table rebuilt both ways (slots up, then down);
# ndcache_fastpath_table_bytes <= 2 x ndcache_fastpath_table_needed_bytes at 10,000 services and
# at every sample once the table is past 4 chunks of slots (below that a chunk of slots and one
# of big answers are the granularity: at one chunk bytes <= 4 MiB, issue 21's target for the
# sample, above it 2x plus one chunk of each kind); the kernel answered the sample's names. Prints the table's figures, the agent's RSS and
# its BPF map memory (memlock from /proc/PID/fdinfo, and the BPF map regions it has mapped:
# the table's chunks, whose fds it closes) at each phase.
# Usage: test_growth.sh BUILD_DIR [tc|xdp]   (root: network namespaces, BPF; about 1-2 minutes)
# Environment: GROWTH_SERVICES (10000), GROWTH_BATCHES (4), GROWTH_QPS (1000), GROWTH_SETTLE
# (90: seconds the table may take to hold the added services, and to let them go: the window
# in which an added name may still be missing, or a deleted one still answered).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 1
bin="$build/control/ndcache"
MODE=${2:-tc}
growth="$here/growth.py"
SERVICES=${GROWTH_SERVICES:-10000}
BATCHES=${GROWTH_BATCHES:-4}
QPS=${GROWTH_QPS:-1000}
SETTLE=${GROWTH_SETTLE:-90}
# shellcheck source=lib.sh
. "$here/lib.sh"

case $MODE in
tc | xdp) ;;
*)
	echo "usage: test_growth.sh BUILD_DIR [tc|xdp]" >&2
	exit 2
	;;
esac
for v in SERVICES BATCHES QPS SETTLE; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "test_growth.sh: GROWTH_$v must be a positive integer, got '${!v}'" >&2
		exit 2
	}
done
need_bin "$bin" || exit 1

# abi.h: NDC_FP_CHUNK_BUCKETS * NDC_FP_BUCKET, read from the header the agent was built with
CHUNK_SLOTS=$(($(sed -n 's/^#define NDC_FP_CHUNK_BUCKETS \([0-9]*\).*/\1/p' "$root/include/ndc/abi.h") *
	$(sed -n 's/^#define NDC_FP_BUCKET \([0-9]*\).*/\1/p' "$root/include/ndc/abi.h")))
# past 4 chunks of slots: bytes <= 2 x needed; at one chunk (the sample cluster's size): <= 4 MiB;
# in between, a table of a few 904 KiB chunks and a 384 KiB chunk of big answers is decided by
# that granularity: <= 2 x needed plus one chunk of each kind
BIG_CHECK_SLOTS=$((4 * CHUNK_SLOTS))
GRAIN_BYTES=$((1024 * 1024 + 400 * 1024))
SAMPLE_MAX_BYTES=$((4 << 20))
FIG_start="" FIG_full="" FIG_end=""

ts() { date +%H:%M:%S.%3N; }
say() { echo "# $(ts) $*"; }

topo_up || exit 1
upstream_up || exit 1
API_PORT=16443
CTL_PORT=16444

say "generating $SERVICES services in $BATCHES batches"
gen_out=$(python3 "$growth" objects --services "$SERVICES" --batches "$BATCHES" \
	--out "$TOPO_DIR/objs") || {
	bad "growth.py objects failed" "$gen_out"
	summary test_growth.sh
	exit 1
}
echo "  $gen_out"

fakeapi_up 10 || {
	bad "the fake API server did not start within 10 s"
	summary test_growth.sh
	exit 1
}

# XDP mode: the pod's eth0 needs an XDP program of its own to receive XDP_TX (lib.sh).
if [ "$MODE" = xdp ] && ! pod_xdp_pass; then
	bad "xdp: cannot attach an XDP pass program to the pod's eth0"
	summary test_growth.sh
	exit 1
fi

ndcache_conf "$TOPO_DIR/ndcache.yaml" kubernetes "$MODE" eth-pod
ndcache_start "$bin" "$TOPO_DIR/ndcache.yaml"
if ! ndcache_ready 20; then
	bad "the agent was not ready within 20 s"
	summary test_growth.sh
	exit 1
fi

# One sample of the table: "entries slots bytes needed rebuilds kernel_answers" (kernel_answers:
# every kind of ndcache_kernel_answers_total summed).
table() {
	metrics | awk '
		$1 == "ndcache_fastpath_table_entries" { e = $2 }
		$1 == "ndcache_fastpath_table_slots" { s = $2 }
		$1 == "ndcache_fastpath_table_bytes" { b = $2 }
		$1 == "ndcache_fastpath_table_needed_bytes" { n = $2 }
		$1 == "ndcache_fastpath_table_rebuilds_total" { r = $2 }
		$1 ~ /^ndcache_kernel_answers_total/ { k += $2 }
		END { if (e == "" || s == "" || b == "" || n == "" || r == "") exit 1
		      printf "%d %d %d %d %d %d\n", e, s, b, n, r, k }'
}
# The agent's memory: "RSS_KB FD_MAP_BYTES FD_MAPS MAPPED_MAP_BYTES MAPPED_REGIONS": VmRSS; the
# memlock of the BPF maps it holds fds of, each once (by map_id); and the BPF map regions it has
# mapped (/proc/PID/maps, anon_inode:bpf-map: the table's chunks, held by the outer maps and the
# mapping after their fds are closed; a map that is both mapped and open counts in both).
agent_mem() {
	local pid=$NDCACHE_PID rss fd mapped
	rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status") || return 1
	fd=$(awk '$1 == "memlock:" { m[FILENAME] = $2 } $1 == "map_id:" { id[FILENAME] = $2 }
		END { for (f in id) if (!(id[f] in seen)) { seen[id[f]] = 1; b += m[f]; n++ }
		      print b + 0, n + 0 }' "/proc/$pid"/fdinfo/* 2>/dev/null)
	mapped=$(python3 -c 'import sys
n = b = 0
for line in open(sys.argv[1]):
    if "anon_inode:bpf-map" in line:
        lo, hi = line.split()[0].split("-")
        b, n = b + int(hi, 16) - int(lo, 16), n + 1
print(b, n)' "/proc/$pid/maps")
	echo "$rss $fd $mapped"
}
mb() { awk -v b="$1" 'BEGIN { printf "%.2f MB", b / 1048576 }'; }
# figures PHASE: one line of the table's figures and the agent's memory, kept in FIG_<PHASE>.
figures() {
	local t m e s b n r k rss fdb fdn mpb mpn
	# /metrics reads the table under its lock: a rebuild in progress delays the answer
	local end=$((SECONDS + 30))
	until t=$(table) || [ $SECONDS -ge $end ]; do sleep 0.5; done
	[ -n "$t" ] || {
		bad "$1: no table metrics within 30 s" "$(metrics | grep fastpath_table)"
		return 1
	}
	m=$(agent_mem)
	read -r e s b n r k <<<"$t"
	read -r rss fdb fdn mpb mpn <<<"$m"
	printf -v "FIG_$1" '%s' "$t"
	printf '  %-7s entries %6d  slots %6d (%3d chunks)  bytes %s  needed %s (%.2fx)  rebuilds %d' \
		"$1" "$e" "$s" $((s / CHUNK_SLOTS)) "$(mb "$b")" "$(mb "$n")" \
		"$(awk -v b="$b" -v n="$n" 'BEGIN { print n ? b / n : 0 }')" "$r"
	printf '  kernel answers %d\n          agent RSS %s; BPF maps: %s by fd (%d maps), %s mapped (%d regions)\n' \
		"$k" "$(mb $((rss * 1024)))" "$(mb "$fdb")" "$fdn" "$(mb "$mpb")" "$mpn"
}

# Wait until the kernel answers (the pod's first query reaches the fast path once synced).
if ! until_ok 10 in_pod dig +time=1 +tries=1 +short "@$NODE_LOCAL" \
	kubernetes.default.svc.cluster.local A >/dev/null; then
	bad "no answer from the agent within 10 s" "$(tail -20 "$TOPO_DIR/ndcache.log")"
	summary test_growth.sh
	exit 1
fi

# --- The sampler and the prober -------------------------------------------------------------
phase_file="$TOPO_DIR/phase"
echo sample >"$phase_file"
samples="$TOPO_DIR/samples"
(
	while :; do
		if t=$(table); then echo "$(cat "$phase_file") $t"; else echo "$(cat "$phase_file") FAIL"; fi
		sleep 0.5
	done >"$samples"
) &
TOPO_PIDS+=($!)

fifo="$TOPO_DIR/marks"
mkfifo "$fifo"
ip netns exec "$NS_POD" python3 "$growth" probe --rate "$QPS" --dyn "$TOPO_DIR/objs/dyn.txt" \
	--summary "$TOPO_DIR/prober.sum" <"$fifo" >"$TOPO_DIR/prober.out" 2>"$TOPO_DIR/prober.err" &
PROBER=$!
TOPO_PIDS+=("$PROBER")
trap '' PIPE # a prober that died must not take the script with it
exec 7>"$fifo"
# mark PHASE MODE: a new window for the prober and the sampler, and what is right for the added
# services in it (growth.py: dyn). One write: the prober takes both before its next query.
mark() {
	printf 'dyn %s\nphase %s\n' "$2" "$1" >&7
	# a new file renamed over the old: the sampler never reads it empty (a truncated phase
	# shifted a sample's fields: entries read as the phase, bytes as the slot count)
	echo "$1" >"$phase_file.new" && mv -f "$phase_file.new" "$phase_file"
	say "phase $1 (added services: $2)"
}

# entries_settle SECONDS WHAT TEST: waits until the table's entries pass TEST (an awk condition
# on e, the entries) and then stay the same for 2 s; fails after SECONDS with WHAT.
entries_settle() {
	local secs=$1 what=$2 cond=$3 end=$((SECONDS + $1)) e last="" same=0
	while [ $SECONDS -lt "$end" ]; do
		e=$(table | cut -d' ' -f1)
		if [ -n "$e" ] && awk -v e="$e" "BEGIN { exit !($cond) }"; then
			[ "$e" = "$last" ] && same=$((same + 1)) || same=0
			[ $same -ge 6 ] && return 0
		fi
		[ -n "$e" ] && last=$e
		sleep 0.5
	done
	bad "timeout: $what not within ${secs}s (entries ${last:-?}, slots and rebuilds $(table | cut -d' ' -f2,5))"
	return 1
}

echo "--- the table ($MODE mode), the agent's memory, per phase"
sleep 3 # a duration: the prober asks the sample's names 3 s before the growth
figures start
read -r e0 s0 b0 _ r0 k0 <<<"${FIG_start:-0 0 0 0 0 0}"

# --- Growth: the services in batches, asked while they come -----------------------------------
mark grow lenient
push() { ip netns exec "$NS_NODE" python3 "$growth" push --port $CTL_PORT "$@"; }
out=$(push apply "$TOPO_DIR/objs/namespaces.json" 2>&1) || bad "pushing the namespaces" "$out"
for ((b = 0; b < BATCHES; b++)); do
	out=$(push apply "$TOPO_DIR/objs/batch-$b.json" 2>&1) || bad "pushing batch $b" "$out"
	say "batch $b: $out; table: $(table | cut -d' ' -f1-2) entries, slots"
	sleep 1 # pacing: the batches come a second apart, asked while they come
done
# A service adds at least 5 entries (A, AAAA, SRV and their NODATA kin); wait for them all.
grown=0
entries_settle "$SETTLE" "the table holding the $SERVICES services" "e >= $e0 + 5 * $SERVICES" && grown=1
last=$(python3 - "$TOPO_DIR/objs/dyn.txt" <<'EOF'
import sys
lines = [l.split() for l in open(sys.argv[1]) if l.split()[1] == "A"]
print(lines[-1][0], lines[-1][2])
EOF
)
read -r last_name last_want <<<"$last"
got=$(in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$last_name" A | sort | paste -sd,)
want=$(tr , '\n' <<<"$last_want" | sort | paste -sd,)
[ "$got" = "$want" ] && ok "grown: the last service added answers ($last_name $got)" ||
	bad "grown: $last_name answers '$got', want '$want'"

# --- The full table: every added name asked must be answered right ----------------------------
mark full present
sleep 5 # a duration: the prober asks every added name for 5 s (entries_settle waited above)
figures full
read -r e1 s1 b1 n1 r1 _ <<<"${FIG_full:-0 0 0 0 0 0}"

# --- Shrink: every added object deleted, asked while they go -----------------------------------
mark shrink lenient
out=$(push delete "$TOPO_DIR/objs/delete.txt" 2>&1) || bad "deleting the services" "$out"
say "$out; table: $(table | cut -d' ' -f1-2) entries, slots"
entries_settle "$SETTLE" "the table back near its start size ($e0 entries)" "e <= $e0 + 50"

# --- After: the deleted names are gone, the sample's still answered ----------------------------
mark after absent
sleep 5 # a duration: the prober asks the deleted names for 5 s (entries_settle waited above)
figures end
read -r e2 s2 b2 _ r2 k2 <<<"${FIG_end:-0 0 0 0 0 0}"

echo stop >&7
exec 7>&-
wait_pid "$PROBER" 15 "the prober after stop" || bad "the prober did not finish within 15 s"
echo "--- prober: $QPS/s about the sample's names, 200/s about the added ones while asked"
cat "$TOPO_DIR/prober.out"
[ -s "$TOPO_DIR/prober.err" ] && cat "$TOPO_DIR/prober.err"

# --- Verdicts ----------------------------------------------------------------------------------
sum="$TOPO_DIR/prober.sum"
if [ ! -s "$sum" ]; then
	bad "the prober wrote no results"
else
	read -r _ sent lost wrong dsent dabsent rate < <(grep '^total ' "$sum")
	if [ "$lost" = 0 ] && [ "$wrong" = 0 ]; then
		ok "$sent queries, 0 lost, 0 wrong ($dsent about the added services, $dabsent of them not there yet or already gone while being added or deleted)"
	else
		bad "$lost lost, $wrong wrong of $sent" "$(grep -E '^ +\+' "$TOPO_DIR/prober.out")"
	fi
	awk -v r="$rate" -v q="$QPS" 'BEGIN { exit !(r >= 0.95 * q) }' &&
		ok "the prober kept its rate: $rate/s about the sample's names" ||
		bad "the prober did not keep its rate: $rate/s of $QPS"
	read -r _ _ _ _ fds _ < <(grep '^full ' "$sum")
	read -r _ _ _ _ ads _ < <(grep '^after ' "$sum")
	[ "${fds:-0}" -ge 500 ] && [ "${ads:-0}" -ge 500 ] &&
		ok "added services asked: $fds while present (all right), $ads once deleted (NXDOMAIN)" ||
		bad "too few questions about the added services: ${fds:-0} present, ${ads:-0} deleted"
fi

if [ "$grown" = 1 ] && [ "$s1" -gt "$s0" ] && [ "$s2" -lt "$s1" ] && [ "$r1" -gt "$r0" ] &&
	[ "$r2" -gt "$r1" ]; then
	ok "rebuilt both ways: slots $s0 -> $s1 -> $s2, entries $e0 -> $e1 -> $e2, rebuilds $r0 -> $r1 -> $r2"
else
	bad "not rebuilt both ways: slots $s0 -> $s1 -> $s2, rebuilds $r0 -> $r1 -> $r2"
fi
[ "$b0" -gt 0 ] && [ "$b2" -gt 0 ] && [ "$b0" -le $SAMPLE_MAX_BYTES ] &&
	[ "$b2" -le $SAMPLE_MAX_BYTES ] &&
	ok "with the sample cluster: bytes $(mb "$b0") at the start, $(mb "$b2") at the end (<= 4 MiB)" ||
	bad "with the sample cluster: bytes $b0 at the start, $b2 at the end (> 4 MiB)"
awk -v b="$b1" -v n="$n1" 'BEGIN { exit !(n > 0 && b <= 2 * n) }' &&
	ok "at $SERVICES services: bytes $b1 <= 2 x needed $n1" ||
	bad "at $SERVICES services: bytes $b1 > 2 x needed $n1"
# Every sample: past 4 chunks within 2x; one chunk <= 4 MiB; in between 2x plus the grain.
read -r nbig worst worst_line nsmall small_max over < <(awk -v big="$BIG_CHECK_SLOTS" \
	-v cap="$SAMPLE_MAX_BYTES" -v one="$CHUNK_SLOTS" -v grain="$GRAIN_BYTES" '
	$2 == "FAIL" { next }
	$3 >= big { nb++; x = $4 / $5; if (x > w) { w = x; wl = $0 } if ($4 > 2 * $5) bad++ }
	$3 < big { ns++; if ($4 > sm) sm = $4
		if ($3 <= one ? $4 > cap : $4 > 2 * $5 + grain) bad++ }
	END { gsub(/ /, "_", wl); printf "%d %.3f %s %d %d %d\n", nb, w, wl ? wl : "-", ns, sm, bad }
' "$samples")
if [ "$nbig" -ge 10 ] && [ "$nsmall" -ge 10 ] && [ "$over" = 0 ]; then
	ok "bytes within bounds at every one of $((nbig + nsmall)) samples: past 4 chunks ($nbig) at most ${worst}x needed; below ($nsmall) within 4 MiB at one chunk, 2x + one chunk of each kind above"
else
	bad "bytes out of bounds in $over of $((nbig + nsmall)) samples (past 4 chunks $nbig, worst ${worst}x: $worst_line; below $nsmall, largest $small_max bytes)"
fi
stalls=$(grep -c ' FAIL$' "$samples")
echo "# /metrics did not answer within 5 s $stalls times of $(wc -l <"$samples") samples" \
	"(it reads the table under the lock a rebuild holds)"
kd=$((k2 - k0))
[ "$k2" -gt 0 ] && [ "$kd" -ge $((${sent:-0} / 2)) ] && ok "the kernel answered $kd queries during the run (of $sent)" ||
	bad "the kernel answered only $kd of $sent queries"
kill -0 "$NDCACHE_PID" 2>/dev/null && ok "the agent is alive at the end" ||
	bad "the agent died" "$(tail -20 "$TOPO_DIR/ndcache.log")"
summary test_growth.sh
