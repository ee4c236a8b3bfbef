#!/usr/bin/env bash
# Prefetch (issue 22): an upstream that takes 50 ms per answer gives hot.example.com TTL 5; a
# pod asks it 20 times a second for 30 s, one query at a time. Checks:
#   - no query after the first waited for the upstream: the cache missed once in all
#     (ndcache_cache_misses_total 1), because the entry is refreshed before it expires;
#   - no answer after the first took half the upstream's 50 ms or more (what a wait for it
#     takes at least), and every one within 1 ms (send to the kernel's receive timestamp). On a
#     2-CPU machine shared with other work the asker and the agent's socket threads are
#     sometimes scheduled late, at random points of the TTL cycle (each slow answer is printed
#     with its time since the last upstream answer, to tell them from a refresh): up to
#     NDC_PREFETCH_SLOW_PCT percent (default 2) may take more than 1 ms. 1% failed CI once
#     (2026-11-29, commit 60c3d0d: 6 of 596 in socket and tc mode, 1.02-1.59 ms; tc's answers
#     come from the kernel, so that was the asker's own scheduling); the miss count above and the
#     25 ms bound are the exact checks;
#   - the answered TTL is never above what the upstream gave minus the time since it gave it
#     (whole seconds, as TTLs are: TTL <= 5 - floor(t_query - t_upstream_answer - 5 ms), the
#     5 ms allowing for the answer's way from the upstream into the cache);
#   - the upstream was asked again about once per TTL, not per query, and the agent counts
#     the refreshes (ndcache_prefetch_total{result="refreshed"}).
# Usage: test_prefetch.sh BUILD_DIR [socket|tc|xdp ...]   (root: network namespaces; tc and XDP need
# the kernel's hit counters, ndc_publisher_kernel_hits, to see the hits the kernel answers)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(socket)
bin="$build/control/ndcache"
tool="$here/upstream_share.py"
# shellcheck source=lib.sh
. "$here/lib.sh"

SECONDS_ASKED=30
TTL=5
SLOW_PCT=${NDC_PREFETCH_SLOW_PCT:-2}
need_bin "$bin" || exit 1
need_bpffs || exit 1

topo_up || exit 1
ip netns exec "$NS_NODE" python3 "$tool" slow-upstream "$UPSTREAM_ADDR" --delay-ms 50 --ttl $TTL \
	--log "$TOPO_DIR/upstream.log" 2>"$TOPO_DIR/upstream.err" &
TOPO_PIDS+=($!)
wait_dns "$UPSTREAM_ADDR" 53 ready.example.com || {
	bad "the slow upstream did not start" "$(cat "$TOPO_DIR/upstream.err")"
	summary test_prefetch
	exit 1
}

run_mode() {
	local mode=$1 conf="$TOPO_DIR/ndcache-$1.yaml" asker out refreshed misses nslow
	echo "--- mode $mode"
	: >"$TOPO_DIR/upstream.log"
	ndcache_conf "$conf" "$SAMPLE_CLUSTER" "$mode" eth-pod \
		'cache: {prefetch: {min_hits: 2, before_pct: 10}}' 'workers: 2'
	ndcache_up "$bin" "$conf" || {
		bad "$mode: ndcache did not start" "$(cat "$TOPO_DIR/ndcache.log")"
		return
	}
	if fastpath_missing "$mode"; then
		term_wait "$NDCACHE_PID" ndcache
		return
	fi
	# XDP answers with XDP_TX, which a veth delivers only to a peer with an XDP program
	if [ "$mode" = xdp ] && ! pod_xdp_pass; then
		bad "$mode: no XDP program on the pod's side: its answers would not arrive"
		term_wait "$NDCACHE_PID" ndcache
		return
	fi
	# The agent's threads and the pod ahead of other work on the machine: the 1 ms bound is
	# about the agent never waiting for the upstream, not about a shared machine's CPU queue.
	for t in /proc/"$NDCACHE_PID"/task/*; do renice -n -15 -p "${t##*/}" >/dev/null; done
	in_pod nice -n -15 python3 "$tool" ask "$NODE_LOCAL" --name hot.example.com --rate 20 \
		--seconds $SECONDS_ASKED --out "$TOPO_DIR/ask-$mode.jsonl" &
	asker=$!
	wait_pid $asker $((SECONDS_ASKED + 30)) "the pod's queries" || bad "$mode: the asking pod failed"
	out=$(python3 - "$TOPO_DIR/ask-$mode.jsonl" "$TOPO_DIR/upstream.log" $TTL <<'PY'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ups = sorted(float(l.split()[0]) for l in open(sys.argv[2]) if l.split()[1:] == ["hot.example.com"])
ttl0 = int(sys.argv[3])
lost = [r for r in recs if r["latency_ms"] is None]
notok = [r for r in recs if r["latency_ms"] is not None and r["rcode"] != "NOERROR"]
later = [r["latency_ms"] for r in recs[1:] if r["latency_ms"] is not None]
# (latency ms, seconds since the last upstream answer): a slow answer near a refresh is the
# agent's doing, one anywhere else the machine's.
slow = [(round(r["latency_ms"], 3), round(r["t"] - max([u for u in ups if u <= r["t"]] or [0]), 2))
        for r in recs[1:] if r["latency_ms"] is not None and r["latency_ms"] > 1.0]
waited = [s for s in slow if s[0] >= 25.0]
high = []
for r in recs:
    if r["ttl"] is None:
        continue
    # The latest upstream answer given before the query was sent could be the one served.
    given = [u for u in ups if u <= r["t"] + r["latency_ms"] / 1000]
    if not given:
        high.append((r["t"], r["ttl"], "no upstream answer before it"))
        continue
    since = r["t"] - given[-1] - 0.005
    bound = ttl0 - max(0, math.floor(since))
    if r["ttl"] > bound:
        high.append((round(r["t"] - given[-1], 3), r["ttl"], bound))
later.sort()
if recs and later:
    print("queries %d lost %d not-NOERROR %d upstream-answers %d first %.2f ms p50 %.3f p99 %.3f max %.3f ms"
          % (len(recs), len(lost), len(notok), len(ups), recs[0]["latency_ms"] or -1,
             later[len(later) // 2], later[int(len(later) * 0.99)], later[-1]))
else:
    print("queries %d, %d answered after the first: nothing to measure" % (len(recs), len(later)))
print("SLOW %d %s" % (len(slow), slow[:10]))
print("WAITED %d %s" % (len(waited), waited[:10]))
print("HIGH %d %s" % (len(high), high[:10]))
print("COUNTS %d %d %d %d" % (len(recs), len(lost), len(notok), len(ups)))
PY
	)
	echo "$out" | head -1 | sed 's/^/     /'
	read -r _ n lost notok ups < <(grep '^COUNTS' <<<"$out")
	[ "$n" -ge $((SECONDS_ASKED * 20 * 9 / 10)) ] && [ "$lost" = 0 ] && [ "$notok" = 0 ] &&
		ok "$mode: $n queries, every one answered NOERROR" ||
		bad "$mode: $n queries, $lost lost, $notok not NOERROR" "$out"
	misses=$(metric ndcache_cache_misses_total)
	[ "${misses:-x}" = 1 ] &&
		ok "$mode: no query after the first waited for the upstream (1 cache miss in all)" ||
		bad "$mode: ${misses:-no} cache misses (1 expected: the first query)"
	read -r _ nwaited _ < <(grep '^WAITED' <<<"$out")
	[ "${nwaited:-x}" = 0 ] &&
		ok "$mode: no answer after the first took 25 ms or more (the upstream takes 50)" ||
		bad "$mode: ${nwaited:-no count of} answers after the first took 25 ms or more: a wait for the upstream" \
			"$(grep '^WAITED' <<<"$out")"
	read -r _ nslow _ < <(grep '^SLOW' <<<"$out")
	if ! [ "${n:-0}" -gt 0 ] 2>/dev/null || [ -z "$nslow" ]; then
		bad "$mode: no answers to time (${n:-no} queries)"
	elif [ "$nslow" = 0 ]; then
		ok "$mode: every answer after the first within 1 ms"
	elif [ $((nslow * 100)) -le $((n * SLOW_PCT)) ]; then
		ok "$mode: $nslow of $n answers over 1 ms (<= $SLOW_PCT%: the machine's scheduling; latency ms, s since refresh): $(grep '^SLOW' <<<"$out" | cut -d' ' -f3-)"
	else
		bad "$mode: $nslow of $n answers after the first slower than 1 ms (> $SLOW_PCT%)" \
			"$(grep '^SLOW' <<<"$out")"
	fi
	grep -q '^HIGH 0 ' <<<"$out" &&
		ok "$mode: the answered TTL never above the upstream's minus the time since" ||
		bad "$mode: TTLs above the upstream's minus the time since (since, ttl, bound)" \
			"$(grep '^HIGH' <<<"$out")"
	# Refreshed about once per TTL (4 s apart: 1 s before expiry), never per query.
	[ "$ups" -ge $((SECONDS_ASKED / TTL)) ] && [ "$ups" -le $((SECONDS_ASKED / (TTL - 1) + 2)) ] &&
		ok "$mode: the upstream was asked $ups times in ${SECONDS_ASKED} s" ||
		bad "$mode: the upstream was asked $ups times in ${SECONDS_ASKED} s (expected $((SECONDS_ASKED / TTL))..$((SECONDS_ASKED / (TTL - 1) + 2)))"
	refreshed=$(metric 'ndcache_prefetch_total{result="refreshed"}')
	[ "${refreshed:-0}" -ge $((SECONDS_ASKED / TTL - 1)) ] &&
		ok "$mode: ndcache_prefetch_total{result=\"refreshed\"} $refreshed" ||
		bad "$mode: ndcache_prefetch_total{result=\"refreshed\"} ${refreshed:-missing}"
	kill -0 "$NDCACHE_PID" 2>/dev/null && ok "$mode: ndcache still running" || bad "$mode: ndcache died"
	term_wait "$NDCACHE_PID" ndcache || bad "$mode: ndcache did not stop on SIGTERM"
}

for m in "${modes[@]}"; do
	run_mode "$m"
done
summary test_prefetch
