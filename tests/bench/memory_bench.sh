#!/usr/bin/env bash
# Memory benchmark (issue 21): what one ndcache agent costs a node in memory, by cluster size and
# dataplane mode. For each cluster and each mode the agent starts alone in the node netns of
# tests/integration/lib.sh's topology (fast path on the pod's veth), and once /ready is 200 and
# it answers, the script reads:
#   RSS and peak RSS   VmRSS and VmHWM from /proc/PID/status
#   BPF maps           the memlock of every BPF map the agent holds open, each once, from
#                      /proc/PID/fdinfo: kernel memory charged to the pod, mapped or not
#   table metrics      every ndcache_fastpath_table_* line of /metrics (entries, capacity, bytes,
#                      and whatever the table exports)
#   BPF total          BPF maps plus the table's bytes: the answer table's chunks are held by its
#                      outer maps, not by a file descriptor, so fdinfo does not see them
# and, for tc and XDP rows, the issue's targets: RSS at most socket's + 8 MB with the sample
# cluster and + 24 MB at 10,000 services, BPF total at most 4 MB with the sample cluster.
# Clusters: "sample" is the embedded sample cluster (deploy/examples); N services come from
# gen_k8s_scale.py through the fake API server (every 5th service headless, 3 endpoints each,
# N/50 namespaces), the whole Kubernetes sync path an agent in a cluster runs; "N:snap" is
# gen_cluster.py's cluster as a snapshot file instead (100 namespaces, 20% headless with 3
# endpoints: the cluster latency_bench.sh measures; up to 16,000 services, where its
# 10.244.0.0/16 pod range ends). Compare rows of one source only (tests/bench/sync_scale.sh
# compares the two sources' memory).
# Prints the CPU model and commit, a markdown table a README can quote, and a CSV.
#
# Usage: tests/bench/memory_bench.sh [options]
#   --scales LIST     sample, N or N:snap, comma-separated (default sample,10000,100000)
#   --modes LIST      socket, tc, xdp, comma-separated (default socket,tc,xdp)
#   --table-size N    dataplane.table_size (default: the agent's default)
#   --build DIR       meson build dir (default build-mem; set up release, -Dbpf=enabled if missing)
#   --out FILE        the CSV (default BUILD/memory_bench.csv)
#   --quick           sample and 10000 only
# Needs root (network namespaces, BPF). About 20 s per agent start, plus 1-2 minutes for the fake
# API server to load 100,000 services. Exit 0 when every row was measured, 1 otherwise, 130 when
# interrupted; everything it starts is stopped and removed on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="tests/bench/memory_bench.sh${*:+ $*}"

scales=sample,10000,100000
modes=socket,tc,xdp
table_size=""
build="$root/build-mem"
out=""
API_PORT=16453
CTL_PORT=16454
HTTP=127.0.0.1:9254
READY_MAX=180
API_LOAD_MAX=400
SNAPSHOT_MAX=16000 # gen_cluster.py's pod range at 3 endpoints per headless service

# shellcheck disable=SC2034 # read by lib.sh
BENCH_NAME=memory_bench
# shellcheck source=SCRIPTDIR/lib.sh
. "$here/lib.sh"
say() { echo "memory_bench: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--quick) scales=sample,10000; shift; continue ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--scales) scales=$2 ;;
	--modes) modes=$2 ;;
	--table-size) table_size=$2 ;;
	--build) build=$2 ;;
	--out) out=$2 ;;
	*) echo "memory_bench: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
[[ $scales =~ ^(sample|[0-9]+(:snap)?)(,(sample|[0-9]+(:snap)?))*$ ]] ||
	die "--scales: e.g. sample,10000,100000 (N:snap: gen_cluster.py's snapshot)"
for s in ${scales//,/ }; do
	case "$s" in
	sample) ;;
	*:snap) n=${s%:snap}; { [ "$n" -ge 1 ] && [ "$n" -le $SNAPSHOT_MAX ]; } ||
		die "--scales: N:snap is 1..$SNAPSHOT_MAX services" ;;
	*) { [ "$s" -ge 1 ] && [ "$s" -le 500000 ]; } || die "--scales: 1..500000 services" ;;
	esac
done
[[ $modes =~ ^(socket|tc|xdp)(,(socket|tc|xdp))*$ ]] || die "--modes: socket, tc, xdp"
[ -z "$table_size" ] || { is_uint "$table_size" && [ "$table_size" -ge 1024 ] &&
	[ "$table_size" -le 16777216 ]; } || die "--table-size: 1024..16777216"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -n "$out" ] || out="$build/memory_bench.csv"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
for tool in bpftool clang curl dig openssl python3 ip; do
	command -v "$tool" >/dev/null || die "$tool not found (deploy/deps.sh bench)"
done

bench_build "$build" "$(dirname "$out")" control/ndcache
bin="$build/control/ndcache"

# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || die "could not create the network namespaces"
API_PID=""
AGENT_PID=""
# Every process started here is in TOPO_PIDS: topo_down (the EXIT trap) stops them.
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	trap '' INT TERM
	bench_detach eth-pod
	topo_down
}
trap cleanup EXIT

# stop_pid PID: SIGTERM, up to 5 s, SIGKILL; forgotten by TOPO_PIDS.
stop_pid() {
	local pid=$1 p keep=()
	term_wait "$pid" "process $pid" 5 >/dev/null 2>&1
	for p in "${TOPO_PIDS[@]}"; do
		[ "$p" = "$pid" ] || keep+=("$p")
	done
	TOPO_PIDS=("${keep[@]}")
}
ready_code() { in_node curl -s --max-time 1 -o /dev/null -w '%{http_code}' "http://$HTTP/ready"; }
metrics() { in_node curl -s --max-time 5 "http://$HTTP/metrics"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# A veth delivers the frames its peer sends with XDP_TX only when it has an XDP program itself
# (servers.sh, pass_on): XDP mode's replies need one on the pod's side.
cat >"$TOPO_DIR/xdp_pass.c" <<'EOF'
struct xdp_md;
__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx)
{
	return 2; /* XDP_PASS */
}
char _license[] __attribute__((section("license"), used)) = "GPL";
EOF
clang -O2 -target bpf -c "$TOPO_DIR/xdp_pass.c" -o "$TOPO_DIR/xdp_pass.o" ||
	die "cannot compile the XDP pass program"
in_pod ip -force link set dev eth0 xdp obj "$TOPO_DIR/xdp_pass.o" sec xdp ||
	die "cannot attach the XDP pass program to the pod's eth0"

# --- The clusters -------------------------------------------------------------------------------
certs="$TOPO_DIR/certs"
api_setup() {
	[ -f "$TOPO_DIR/kubeconfig" ] && return 0
	"$root/tests/fakeapi/make_certs.sh" "$certs" >/dev/null || die "make_certs.sh failed"
	printf '%s' bench-token >"$TOPO_DIR/token"
	cat >"$TOPO_DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: bench
contexts:
- name: bench
  context: {cluster: fake, user: ndcache}
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $certs/ca.pem
users:
- name: ndcache
  user:
    tokenFile: $TOPO_DIR/token
EOF
}

# api_up N: the fake API server in the node netns, serving gen_k8s_scale.py's N services.
api_up() {
	local n=$1 dir="$TOPO_DIR/k8s-$1" i
	api_setup
	python3 "$here/gen_k8s_scale.py" --services "$n" --out "$dir" >/dev/null ||
		die "gen_k8s_scale.py --services $n failed"
	ip netns exec "$NS_NODE" python3 "$root/tests/fakeapi/fake_apiserver.py" \
		--cert "$certs/server.pem" --key "$certs/server.key" --token bench-token \
		--objects "$dir/cluster.json" --port $API_PORT --control-port $CTL_PORT \
		>"$TOPO_DIR/fakeapi.out" 2>"$TOPO_DIR/fakeapi.err" &
	API_PID=$!
	TOPO_PIDS+=("$API_PID")
	for ((i = 0; i < API_LOAD_MAX * 5; i++)); do
		grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" 2>/dev/null && return 0
		kill -0 "$API_PID" 2>/dev/null || break
		sleep 0.2
	done
	die "the fake API server did not load $n services within ${API_LOAD_MAX}s:" \
		"$(tail -5 "$TOPO_DIR/fakeapi.err")"
}
api_down() {
	[ -z "$API_PID" ] || stop_pid "$API_PID"
	API_PID=""
}

# source_for SCALE: the config's source line (the fake API server started when it needs one);
# SRC_NAME says where the cluster came from.
source_for() {
	local s=$1 n=${1%:snap}
	if [ "$s" = sample ]; then
		SRC_NAME=embedded
		SRC_LINE="" # the agent's default: the embedded sample cluster
	elif [ "$s" != "$n" ]; then
		SRC_NAME=snapshot
		python3 "$here/gen_cluster.py" --services "$n" --namespaces 100 --headless-pct 20 \
			--endpoints 3 --out "$TOPO_DIR/snap-$n" >/dev/null ||
			die "gen_cluster.py --services $n failed"
		SRC_LINE="source: {snapshot: $TOPO_DIR/snap-$n/cluster.json}"
	else
		SRC_NAME=fake-api
		api_up "$n"
		SRC_LINE="source: {kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}}"
	fi
}

# --- One agent ----------------------------------------------------------------------------------
# measure SCALE MODE: one row into ROWS (and the CSV), or 1 with the reason said.
ROWS=()
CSV=()
declare -A SOCKET_RSS
measure() {
	local s=$1 mode=$2 conf="$TOPO_DIR/ndcache-$1-$2.yaml" log="$TOPO_DIR/ndcache-$1-$2.log"
	local i code t0 mem rss hwm maps nmaps m entries cap tbytes full rrsets extra delta bpf_total
	{
		echo "listen: [$NODE_LOCAL]"
		echo "upstream: [$UPSTREAM_ADDR]"
		[ -z "$SRC_LINE" ] || echo "$SRC_LINE"
		echo "dataplane: {mode: $mode, interfaces: [eth-pod]${table_size:+, table_size: $table_size}}"
		echo "http: {listen: \"$HTTP\"}"
	} >"$conf"
	t0=$SECONDS
	ip netns exec "$NS_NODE" "$bin" --config "$conf" >"$log" 2>&1 &
	AGENT_PID=$!
	TOPO_PIDS+=("$AGENT_PID")
	code=000
	for ((i = 0; SECONDS - t0 < READY_MAX; i++)); do
		kill -0 "$AGENT_PID" 2>/dev/null || break
		code=$(ready_code)
		[ "$code" = 200 ] && break
		sleep 0.1
	done
	if [ "$code" != 200 ]; then
		say "$s, $mode: not ready after $((SECONDS - t0)) s (/ready $code): $(tail -3 "$log")"
		stop_pid "$AGENT_PID"
		return 1
	fi
	# Ready means the table is built, published and attached: it must answer, in the kernel
	# when the mode has a fast path.
	if ! in_pod dig +time=2 +tries=2 +short "@$NODE_LOCAL" kubernetes.default.svc.cluster.local \
		</dev/null | grep -qx 10.96.0.1; then
		say "$s, $mode: ready but no answer from the pod: $(tail -3 "$log")"
		stop_pid "$AGENT_PID"
		return 1
	fi
	if [ "$mode" != socket ] && ! in_node bpftool -j net show dev eth-pod | grep -q '"id"'; then
		say "$s, $mode: no program attached to eth-pod: $(grep -m1 'fast path' "$log")"
		stop_pid "$AGENT_PID"
		return 1
	fi
	# What the agent does right after it is ready (the publisher's first fill, page faults of
	# the first answers) is part of its steady state: wait it out.
	sleep 2
	mem=$(bench_mem "$AGENT_PID") || { say "$s, $mode: the agent exited"; return 1; }
	read -r rss hwm maps nmaps <<<"$mem"
	m=$(metrics)
	metric() { awk -v k="$1" '$1 == k { printf "%d", $2 }' <<<"$m"; }
	entries=$(metric ndcache_fastpath_table_entries)
	cap=$(metric ndcache_fastpath_table_capacity)
	tbytes=$(metric ndcache_fastpath_table_bytes)
	full=$(metric ndcache_fastpath_table_full_total)
	rrsets=$(metric ndcache_records)
	[ -n "$rrsets" ] || rrsets=$(sed -n 's/.*records: \([0-9]*\) RRsets.*/\1/p' "$log" | head -1)
	# Every table metric, whatever the table exports (the rewrite adds its own).
	extra=$(awk '/^ndcache_fastpath_table_/ { printf "%s%s=%s", sep, substr($1, 18), $2; sep = " " }' \
		<<<"$m")
	stop_pid "$AGENT_PID"
	AGENT_PID=""
	[ "$mode" = socket ] && SOCKET_RSS[$s]=$rss
	delta="-"
	[ -z "${SOCKET_RSS[$s]:-}" ] || [ "$mode" = socket ] ||
		delta=$(awk -v a="$rss" -v b="${SOCKET_RSS[$s]}" 'BEGIN { printf "%+.1f", (a - b) / 1024 }')
	bpf_total=$((maps + ${tbytes:-0}))
	ROWS+=("$(printf '| %s | %s | %s | %s | %.1f | %s | %.1f | %s | %d | %s | %s | %s | %s | %s |' \
		"${s%:snap}" "$SRC_NAME" "${rrsets:-?}" "$mode" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" \
		"$delta" "$(awk -v k="$hwm" 'BEGIN { print k / 1024 }')" "$(mb "$maps")" "$nmaps" \
		"${entries:--}" "${cap:--}" "$([ -n "$tbytes" ] && mb "$tbytes" || echo -)" "${full:--}" \
		"$(mb "$bpf_total")")")
	verdict "$s" "$mode" "$delta" "$bpf_total"
	CSV+=("$commit,${s%:snap},$SRC_NAME,${rrsets:-},$mode,$rss,$hwm,$maps,$nmaps,${entries:-},${cap:-},${tbytes:-},\"$extra\"")
	say "$s, $mode: ready in $((SECONDS - t0)) s; $(awk '{ printf "RSS %.1f MB, peak %.1f MB, BPF maps %.1f MB in %d maps", $1 / 1024, $2 / 1024, $3 / 1048576, $4 }' <<<"$mem")"
	[ -z "$extra" ] || say "$s, $mode: table metrics: $extra"
	return 0
}

# verdict SCALE MODE DELTA BPF_BYTES: the issue's targets for a fast-path row, into VERDICTS.
VERDICTS=()
verdict() {
	local s=$1 mode=$2 delta=$3 bpf=$4 n=${1%:snap} max
	[ "$mode" != socket ] && [ "$delta" != "-" ] || return 0
	case "$n" in
	sample) max=8 ;;
	10000) max=24 ;;
	*) return 0 ;;
	esac
	VERDICTS+=("$(awk -v d="$delta" -v m="$max" -v r="$s $mode" \
		'BEGIN { printf "%s: RSS %+.1f MB vs socket, target <= +%d MB: %s", r, d, m, (d <= m ? "met" : "NOT met") }')")
	[ "$n" = sample ] || return 0
	VERDICTS+=("$(awk -v b="$bpf" -v r="$s $mode" \
		'BEGIN { printf "%s: BPF total %.1f MB, target <= 4 MB: %s", r, b / 1048576, (b <= 4 * 1048576 ? "met" : "NOT met") }')")
}

# --- The run ------------------------------------------------------------------------------------
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+="-dirty"
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
echo "memory_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu_model)," \
	"kernel $(uname -r), $(free -m | awk '/^Mem:/ { print $2 }') MB"
echo "memory_bench: commit $commit, $("$bin" --version 2>&1 | head -1) ($bin);" \
	"dataplane.table_size ${table_size:-default}; $cmdline"
failed=0
for s in ${scales//,/ }; do
	source_for "$s"
	for mode in ${modes//,/ }; do
		measure "$s" "$mode" || failed=1
	done
	api_down
done

echo
echo "Memory of one agent once ready (commit $commit, $cpu_model):"
echo
echo "| cluster | source | RRsets | mode | RSS MB | vs socket | peak MB | BPF maps MB | maps |" \
	"table entries | table capacity | table MB | not in table | BPF total MB |"
echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
echo
[ ${#VERDICTS[@]} -eq 0 ] || printf 'memory_bench: target: %s\n' "${VERDICTS[@]}"
echo
echo "RSS: VmRSS; peak: VmHWM; BPF maps: memlock of the maps the agent holds (/proc/PID/fdinfo);" \
	"table: ndcache_fastpath_table_entries, _capacity, _bytes, and not in table:" \
	"ndcache_fastpath_table_full_total (answers left to user space: the table was full), from /metrics;" \
	"BPF total: BPF maps + table MB (the table's chunks hang off its outer maps, which fdinfo counts empty)."
{
	echo "commit,cluster,source,rrsets,mode,rss_kb,hwm_kb,bpf_map_bytes,bpf_maps,table_entries,table_capacity,table_bytes,table_metrics"
	printf '%s\n' "${CSV[@]}"
} >"$out"
say "CSV: $out"
exit $failed
