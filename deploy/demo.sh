#!/usr/bin/env bash
# The main job, the README's first command: installs what is missing, builds ndcache, and runs it
# on its embedded default (the sample cluster in deploy/examples/) inside network namespaces it
# creates, with unbound as the upstream kube-dns stand-in. A "pod" namespace asks with dig for
# every record kind (a multi-cluster service in clusterset.local too), a search-path NXDOMAIN, a NODATA and an external name forwarded and then
# cached. Each answer is checked against what the sample cluster must give (RCODE and data), and
# ndcache's /metrics counters, read before and after each question, say which path answered it:
# the kernel (tc fast path), the record table or the cache (socket path), or the upstream.
# It ends with "demo: N of M answers as expected" and exits 1 when one is not, naming it.
# Everything is torn down at the end (or on Ctrl-C). With --keep it stays up (NDC_DEMO_KEEP_S
# seconds, default 3600, or until Ctrl-C), so you can ask your own questions:
#   ip netns exec ndc-pod-<pid> dig @169.254.20.10 <name>
# Usage: deploy/demo.sh [--keep] [--snapshot FILE]   (root)
#   --snapshot FILE (or NDC_DEMO_SNAPSHOT=FILE): serve FILE (a kubectl List) instead of the
#   embedded sample; the expected answers stay the sample's, so any difference makes the demo
#   fail (tests/integration/test_demo.sh breaks a record on purpose this way).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
keep=0
snapshot=${NDC_DEMO_SNAPSHOT:-}
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) keep=1 ;;
	--snapshot)
		snapshot=${2:?--snapshot needs a FILE}
		shift
		;;
	*)
		echo "usage: $0 [--keep] [--snapshot FILE]" >&2
		exit 2
		;;
	esac
	shift
done
if [ -n "$snapshot" ]; then
	[ -r "$snapshot" ] || {
		echo "demo: $snapshot: cannot read" >&2
		exit 2
	}
	snapshot=$(cd "$(dirname "$snapshot")" && pwd)/$(basename "$snapshot")
fi
t0=$SECONDS
phase() { echo "demo: $*"; }

phase "packages: deploy/deps.sh test (installs what is missing)"
"$root/deploy/deps.sh" test || exit 1
cd "$root" || exit 1
mkdir -p build
blog="$root/build/demo-build.log"
if [ ! -f build/build.ninja ]; then
	phase "build: meson setup build"
	meson setup build >"$blog" 2>&1 || {
		tail -20 "$blog" >&2
		echo "demo: meson setup failed (log: $blog)" >&2
		exit 1
	}
fi
phase "build: meson compile -C build control/ndcache"
meson compile -C build control/ndcache >"$blog" 2>&1 || {
	tail -20 "$blog" >&2
	echo "demo: build failed (log: $blog); run: meson compile -C build" >&2
	exit 1
}
phase "ready after $((SECONDS - t0)) s; starting the namespaces, unbound and ndcache"

# shellcheck source=../tests/integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || exit 1
upstream_up || exit 1

# Only the upstream, the pod-facing interface and the multicluster zone are configured: source,
# listen address, zone, TTL and dataplane mode (tc: the in-kernel fast path) are the defaults,
# so the agent serves the sample cluster compiled into it, answering from the kernel where it
# can.
conf="$TOPO_DIR/ndcache.yaml"
printf 'upstream: [%s:53]\ndataplane:\n  interfaces: [eth-pod]\n' "$UPSTREAM_ADDR" >"$conf"
# Multi-cluster services (MCS): the sample's ServiceImport answers in clusterset.local.
printf 'records:\n  multicluster_zones: [clusterset.local]\n' >>"$conf"
[ -n "$snapshot" ] && printf 'source:\n  snapshot: %s\n' "$snapshot" >>"$conf"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
echo "== ndcache $(build/control/ndcache --version | cut -d' ' -f2), config:"
sed 's/^/   /' "$conf"
ndcache_up "$root/build/control/ndcache" "$conf" || exit 1
sed 's/^/   /' "$TOPO_DIR/ndcache.log"

# The answering paths' counters, "kernel cluster cache upstream": the kernel's answers of every
# kind, and the socket path's answers by source.
counters() {
	in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics | awk '
		/^ndcache_kernel_answers_total/ { k += $2 }
		/^ndcache_answers_total\{source="cluster"\}/ { c = $2 }
		/^ndcache_answers_total\{source="cache"\}/ { h = $2 }
		/^ndcache_answers_total\{source="upstream"\}/ { u = $2 }
		END { print k + 0, c + 0, h + 0, u + 0 }'
}
# Which one counter moved between two readings: kernel, table, cache, upstream, or "none"/"several".
moved() {
	local -a a b
	local names=(kernel table cache upstream) i who=""
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	for i in 0 1 2 3; do
		if [ "${b[i]:-0}" != "${a[i]:-0}" ]; then
			[ -n "$who" ] && who=several || who=${names[i]}
		fi
	done
	echo "${who:-none}"
}
path_text() {
	case "$1" in
	kernel) echo "${KERNEL_NOTE:-the kernel (tc fast path, from its table)}" ;;
	table) echo "the record table (socket path)" ;;
	cache) echo "the cache (socket path)" ;;
	upstream) echo "the upstream (forwarded by the socket path, then cached)" ;;
	*) echo "unknown (counters: $1)" ;;
	esac
}

# ask TITLE RCODE ANSWER AUTHORITY PATHS -- DIG-ARGS: shows the question and dig's answer, then
# checks it. ANSWER and AUTHORITY are "TYPE RDATA" entries separated by ';' (order free, glob
# patterns allowed; "" for none, "-" for not checked); PATHS the paths allowed, '|'-separated.
total=0 good=0 wrong=()
last_ttl=""
ask() {
	local title=$1 want_rc=$2 want_an=$3 want_ns=$4 paths=$5 out c0 c1 who rc an ns why=""
	shift 6
	total=$((total + 1))
	echo
	echo "== $title"
	echo "   pod\$ dig $*"
	c0=$(counters)
	out=$(in_pod dig +time=2 +tries=1 +noall +comments +answer +authority +additional \
		"@$NODE_LOCAL" "$@" 2>&1)
	c1=$(counters)
	# A socket-path counter may lag its reply by a moment (polled up to 3 s: a busy machine).
	for _ in $(seq 30); do
		[ "$(moved "$c0" "$c1")" = none ] || break
		sleep 0.1
		c1=$(counters)
	done
	who=$(moved "$c0" "$c1")
	grep -Ev '^;; (Got answer|OPT PSEUDOSECTION|WARNING: .local|You are currently testing)|^; EDNS|^$' <<<"$out" |
		sed 's/^/   /'
	rc=$(sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<<"$out" | head -1)
	# "TYPE RDATA" per record of a section, sorted, ';'-joined (whitespace collapsed).
	section() {
		awk -v s="$1" '/^;; [A-Z]+ SECTION:/ { cur = $2; next } /^;/ || NF < 5 { next }
			cur == s { line = $4; for (i = 5; i <= NF; i++) line = line " " $i; print line }' <<<"$out" |
			sort | paste -sd';'
	}
	an=$(section ANSWER)
	ns=$(section AUTHORITY)
	last_ttl=$(awk '/^;; ANSWER SECTION:/ { a = 1; next } a && !/^;/ && NF >= 5 { print $2; exit }' <<<"$out")
	[ "$rc" = "$want_rc" ] || why+="RCODE ${rc:-none}, want $want_rc; "
	match_set "$an" "$want_an" || why+="answer '${an}', want '${want_an}'; "
	match_set "$ns" "$want_ns" || why+="authority '${ns}', want '${want_ns}'; "
	[[ "|$paths|" == *"|$who|"* ]] || why+="answered by $who, want ${paths//|/ or }; "
	if [ -n "${EXTRA_CHECK:-}" ]; then
		$EXTRA_CHECK || why+="$EXTRA_WHY; "
	fi
	if [ -z "$why" ]; then
		good=$((good + 1))
		if [ -n "$an" ]; then an=": ${an//;/, }"; else an=", no answer records"; fi
		[ -n "$ns" ] && an+=", ${ns%% *} in authority"
		echo "   -> as expected ($rc$an); answered by $(path_text "$who")"
	else
		why=${why%; }
		wrong+=("$title ($*: $why)")
		echo "   -> WRONG: $why; answered by $(path_text "$who")"
	fi
}
# match_set GOT WANT: ';'-separated sets equal, WANT's entries as glob patterns ("-": any).
match_set() {
	local got=$1 want=$2 i
	local -a g w
	[ "$want" = - ] && return 0
	IFS=';' read -ra g <<<"$got"
	IFS=';' read -ra w <<<"$want"
	[ ${#g[@]} = ${#w[@]} ] || return 1
	mapfile -t w < <(printf '%s\n' "${w[@]}" | sort)
	for i in "${!g[@]}"; do
		# shellcheck disable=SC2053 # WANT is a pattern
		[[ ${g[i]} == ${w[i]} ]] || return 1
	done
	return 0
}

Z=svc.cluster.local
SOA="SOA ns.dns.cluster.local. hostmaster.cluster.local. *"
LOCAL="kernel|table" # a cluster name: the kernel or the record table, never upstream or cache
ask "A record of a ClusterIP service" NOERROR "A 10.96.0.1" "" "$LOCAL" -- kubernetes.default.$Z A
ask "AAAA of a dual-stack service" NOERROR "AAAA fd00:10:96::1234" "" "$LOCAL" -- \
	frontend.shop.$Z AAAA
ask "headless service: one A per ready endpoint" NOERROR "A 10.244.1.40;A 10.244.2.41" "" \
	"$LOCAL" -- postgres.data.$Z A
ask "a headless endpoint by hostname" NOERROR "A 10.244.1.40" "" "$LOCAL" -- \
	postgres-0.postgres.data.$Z A
ask "SRV for a named port (headless), targets in additional" NOERROR \
	"SRV 0 50 5432 postgres-0.postgres.data.$Z.;SRV 0 50 5432 postgres-1.postgres.data.$Z." "" \
	"$LOCAL" -- _pg._tcp.postgres.data.$Z SRV
ask "SRV for a named port (ClusterIP)" NOERROR "SRV 0 100 50051 cart.shop.$Z." "" "$LOCAL" -- \
	_grpc._tcp.cart.shop.$Z SRV
ask "PTR of a ClusterIP" NOERROR "PTR kube-dns.kube-system.$Z." "" "$LOCAL" -- -x 10.96.0.10
ask "ExternalName service: CNAME" NOERROR "CNAME payments.example.com." "" "$LOCAL" -- \
	payments.shop.$Z A
ask "ExternalName into the cluster domain: the CNAME followed to the target's address" NOERROR \
	"CNAME frontend.shop.$Z.;A 10.96.12.34" "" "$LOCAL" -- storefront.shop.$Z A
ask "PTR of an endpoint address two services share: one per service" NOERROR \
	"PTR 10-244-1-40.postgres-rw.data.$Z.;PTR postgres-0.postgres.data.$Z." "" "$LOCAL" -- \
	-x 10.244.1.40
ask "multi-cluster service (MCS ServiceImport): its ClusterSetIP in clusterset.local" NOERROR \
	"A 10.97.12.50" "" "$LOCAL" -- cart.shop.svc.clusterset.local A
ask "schema version" NOERROR 'TXT "1.1.0"' "" "$LOCAL" -- dns-version.cluster.local TXT
ask "SOA at the zone apex" NOERROR "$SOA" "" "$LOCAL" -- cluster.local SOA
ask "search-path name (ndots:5): NXDOMAIN with SOA, answered locally" NXDOMAIN "" "$SOA" \
	"$LOCAL" -- api.example.com.default.$Z A
ask "existing name, other type: NODATA" NOERROR "" "$SOA" "$LOCAL" -- kubernetes.default.$Z AAAA
ask "external name: forwarded to the upstream" NOERROR "A 192.0.2.10" "" upstream -- \
	www.example.com A
first_ttl=$last_ttl
sleep 1.2 # a duration: the TTL counts down in whole seconds
# The socket path cached the upstream's answer and the publisher put it in the kernel's table
# too: the kernel answers the repeat, counting the TTL down. Without the fast path the socket
# path's cache answers it. Either way the upstream is not asked again.
ttl_down() { [ -n "$last_ttl" ] && [ -n "$first_ttl" ] && [ "$last_ttl" -lt "$first_ttl" ]; }
KERNEL_NOTE="the kernel: the fast path's table holds the upstream's answer the socket path cached,
      and the kernel counts its TTL down" EXTRA_CHECK=ttl_down EXTRA_WHY="TTL did not count down" \
	ask "same name 1 s later: a cached answer (TTL counts down), not asked upstream again" \
	NOERROR "A 192.0.2.10" "" "kernel|cache" -- www.example.com A
echo "   (TTL $first_ttl, then $last_ttl)"
echo
echo "== upstream (unbound) saw $(grep -c 'www.example.com. A IN' "$TOPO_DIR/unbound.log") query for www.example.com"
echo
echo "== ndcache's /metrics (kernel = the tc fast path; the rest = the socket path)"
in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics |
	grep -E '^ndcache_(kernel_answers_total|answers_total|queries_total)' | sed 's/^/   /'
echo
# Who asked (issue 37): the socket path's per-client counts. With a Kubernetes source and env
# NODE_NAME the pod is named namespace/name; here (a snapshot, no NODE_NAME) by its address.
echo "== ndcache top --once (who asked what; docs/OPERATIONS.md, \"which pod is hammering DNS\")"
in_node "$root/build/control/ndcache" top --once --interval 0.2 --rows 8 2>&1 | sed 's/^/   /'

echo
for w in "${wrong[@]}"; do
	echo "demo: WRONG: $w"
done
echo "demo: $good of $total answers as expected"
rc=0
[ "$good" = "$total" ] || rc=1

if [ $keep = 1 ]; then
	keep_s=${NDC_DEMO_KEEP_S:-3600}
	echo
	echo "== ndcache is up for ${keep_s} s (NDC_DEMO_KEEP_S). In another shell:"
	echo "   ip netns exec $NS_POD dig @$NODE_LOCAL <name>"
	echo "   Ctrl-C tears everything down."
	wait_pid "$NDCACHE_PID" "$keep_s" "ndcache (--keep)" >/dev/null 2>&1
	echo "demo: torn down"
fi
exit $rc
