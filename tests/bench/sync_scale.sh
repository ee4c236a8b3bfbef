#!/usr/bin/env bash
# Sync at scale by source (issue 34): the same N-service cluster (gen_k8s_scale.py: every 5th
# service headless, 3 endpoints each, one EndpointSlice per service, N/50 namespaces) loaded from
# a snapshot file (source.snapshot, the List as JSON) and synced from the fake API server
# (tests/fakeapi), in socket and tc mode. For each agent, started alone in the node netns of
# tests/integration/lib.sh's topology:
#   ready      seconds from the agent's start until /ready is 200 (polled every 50 ms)
#   RSS        VmRSS once it answers (a ClusterIP and a headless name from the pod, then 2 s)
#   peak       VmHWM at that point: the most the load and the first table ever took
#   reload     snapshot rows: records.ttl changed and SIGHUP, so the snapshot is read and built
#              again (the reload path); RSS and peak once the new table answers
# and the issue's target: a snapshot's RSS within 1.5x of the API source's, per mode.
# Prints the CPU model and commit, a markdown table and a CSV.
#
# Usage: tests/bench/sync_scale.sh [options]
#   --services N     services (default 100000)
#   --modes LIST     socket, tc, comma-separated (default socket,tc)
#   --sources LIST   snapshot, api, comma-separated (default snapshot,api)
#   --repeat R       agents per row (default 1): ready times vary with the machine's load
#   --no-reload      skip the reload of snapshot rows
#   --build DIR      meson build dir (default build-sync; set up release, -Dbpf=enabled if missing)
#   --out FILE       the CSV (default BUILD/sync_scale.csv)
# Needs root (network namespaces, BPF). At 100,000 services: about a minute to generate the
# cluster, 1-2 minutes for the fake API server to load it, 10-30 s per agent. Exit 0 when every
# row was measured and the target met, 1 otherwise; everything it starts is stopped on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cmdline="tests/bench/sync_scale.sh${*:+ $*}"

services=100000
modes=socket,tc
sources=snapshot,api
repeat=1
reload=1
build="$root/build-sync"
out=""
API_PORT=16463
CTL_PORT=16464
HTTP=127.0.0.1:9254
READY_MAX=300
API_LOAD_MAX=400
RELOAD_MAX=300
RATIO_MAX=1.5

# shellcheck disable=SC2034 # read by lib.sh
BENCH_NAME=sync_scale
# shellcheck source=SCRIPTDIR/lib.sh
. "$here/lib.sh"
say() { echo "sync_scale: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--no-reload) reload=0; shift; continue ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--services) services=$2 ;;
	--modes) modes=$2 ;;
	--sources) sources=$2 ;;
	--repeat) repeat=$2 ;;
	--build) build=$2 ;;
	--out) out=$2 ;;
	*) echo "sync_scale: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
{ is_uint "$services" && [ "$services" -ge 100 ] && [ "$services" -le 500000 ]; } ||
	die "--services: 100..500000"
[[ $modes =~ ^(socket|tc)(,(socket|tc))*$ ]] || die "--modes: socket, tc"
[[ $sources =~ ^(snapshot|api)(,(snapshot|api))*$ ]] || die "--sources: snapshot, api"
{ is_uint "$repeat" && [ "$repeat" -le 10 ]; } || die "--repeat: 1..10"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, BPF)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -n "$out" ] || out="$build/sync_scale.csv"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
for tool in bpftool curl dig openssl python3 ip; do
	command -v "$tool" >/dev/null || die "$tool not found (deploy/deps.sh bench)"
done

bench_build "$build" "$(dirname "$out")" control/ndcache
bin="$build/control/ndcache"

# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || die "could not create the network namespaces"
API_PID=""
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
now() { echo "$EPOCHREALTIME"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

# --- The cluster --------------------------------------------------------------------------------
cluster="$TOPO_DIR/cluster"
t0=$(now)
gen=$(python3 "$here/gen_k8s_scale.py" --services "$services" --out "$cluster") ||
	die "gen_k8s_scale.py --services $services failed"
say "cluster: $gen ($(sub "$(now)" "$t0") s); snapshot $cluster/cluster.json," \
	"$(($(stat -c %s "$cluster/cluster.json") / 1048576)) MB"
# The names every agent must answer from the pod: the kubernetes Service, the last ClusterIP
# Service, the first headless one (every ready endpoint).
read -r _ ns name cip _ <<<"$(awk '$4 != "None"' "$cluster/services.tsv" | tail -1)"
CHECK_IP=("kubernetes.default.svc.cluster.local" "10.96.0.1" "$name.$ns.svc.cluster.local" "$cip")
read -r _ ns name _ _ eps <<<"$(awk '$4 == "None"' "$cluster/services.tsv" | head -1)"
CHECK_IP+=("$name.$ns.svc.cluster.local" "$(tr ',' '\n' <<<"$eps" | sort | paste -sd' ')")

api_up() {
	local certs="$TOPO_DIR/certs" i
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
	t0=$(now)
	ip netns exec "$NS_NODE" python3 "$root/tests/fakeapi/fake_apiserver.py" \
		--cert "$certs/server.pem" --key "$certs/server.key" --token bench-token \
		--objects "$cluster/cluster.json" --port $API_PORT --control-port $CTL_PORT \
		>"$TOPO_DIR/fakeapi.out" 2>"$TOPO_DIR/fakeapi.err" &
	API_PID=$!
	TOPO_PIDS+=("$API_PID")
	for ((i = 0; i < API_LOAD_MAX * 5; i++)); do
		if grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" 2>/dev/null; then
			say "fake API server loaded the cluster in $(sub "$(now)" "$t0") s"
			return 0
		fi
		kill -0 "$API_PID" 2>/dev/null || break
		sleep 0.2
	done
	die "the fake API server did not load the cluster within ${API_LOAD_MAX}s:" \
		"$(tail -5 "$TOPO_DIR/fakeapi.err")"
}

# answers: every CHECK_IP name answered from the pod as expected (0), or 1 with the reason said.
answers() {
	local i got
	for ((i = 0; i < ${#CHECK_IP[@]}; i += 2)); do
		got=$(in_pod dig +time=2 +tries=2 +short "@$NODE_LOCAL" "${CHECK_IP[i]}" A </dev/null |
			sort | paste -sd' ')
		if [ "$got" != "${CHECK_IP[i + 1]}" ]; then
			say "${CHECK_IP[i]}: got '$got', want '${CHECK_IP[i + 1]}'"
			return 1
		fi
	done
}

# --- One agent ----------------------------------------------------------------------------------
# measure SOURCE MODE RUN: one row into ROWS and CSV, or 1 with the reason said.
ROWS=()
CSV=()
declare -A RSS_SUM RSS_N
measure() {
	local src=$1 mode=$2 run=$3 conf="$TOPO_DIR/ndcache-$1-$2-$3.yaml"
	local log="$TOPO_DIR/ndcache-$1-$2-$3.log" pid code t0 ready rss hwm rss2="-" hwm2="-" t1 rl="-"
	local rss2mb=- hwm2mb=-
	{
		echo "listen: [$NODE_LOCAL]"
		echo "upstream: [$UPSTREAM_ADDR]"
		if [ "$src" = snapshot ]; then
			echo "source: {snapshot: $cluster/cluster.json}"
		else
			echo "source: {kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}}"
		fi
		echo "records: {ttl: 5}"
		echo "dataplane: {mode: $mode, interfaces: [eth-pod]}"
		echo "http: {listen: \"$HTTP\"}"
	} >"$conf"
	t0=$(now)
	ip netns exec "$NS_NODE" "$bin" --config "$conf" >"$log" 2>&1 &
	pid=$!
	TOPO_PIDS+=("$pid")
	code=000
	while :; do
		kill -0 "$pid" 2>/dev/null || break
		code=$(ready_code)
		[ "$code" = 200 ] && break
		[ "$(sub "$(now)" "$t0" | cut -d. -f1)" -ge $READY_MAX ] && break
		sleep 0.05
	done
	ready=$(sub "$(now)" "$t0")
	if [ "$code" != 200 ]; then
		say "$src, $mode: not ready after $ready s (/ready $code): $(tail -3 "$log")"
		stop_pid "$pid"
		return 1
	fi
	if ! answers; then
		say "$src, $mode: ready but not answering: $(tail -3 "$log")"
		stop_pid "$pid"
		return 1
	fi
	if [ "$mode" = tc ] && ! in_node bpftool -j net show dev eth-pod | grep -q '"id"'; then
		say "$src, $mode: no program attached to eth-pod: $(grep -m1 'fast path' "$log")"
		stop_pid "$pid"
		return 1
	fi
	# What the agent does right after it is ready (the publisher's first fill, page faults of
	# the first answers) is part of its steady state: wait it out.
	sleep 2
	rss=$(status_kb "$pid" VmRSS)
	hwm=$(status_kb "$pid" VmHWM)
	[ -n "$rss" ] && [ -n "$hwm" ] || { say "$src, $mode: the agent exited"; return 1; }
	if [ "$src" = snapshot ] && [ "$reload" = 1 ]; then
		# A records.* change rebuilds the table: the snapshot is read and parsed again, before
		# the reload's log line (the file's change may start it before the SIGHUP does).
		sed -i 's/^records: {ttl: 5}$/records: {ttl: 7}/' "$conf"
		t1=$(now)
		kill -HUP "$pid"
		code=0
		while :; do
			grep -q 'config: reloaded .*records' "$log" && code=1 && break
			kill -0 "$pid" 2>/dev/null || break
			[ "$(sub "$(now)" "$t1" | cut -d. -f1)" -ge $RELOAD_MAX ] && break
			sleep 0.05
		done
		if [ "$code" != 1 ] || ! answers; then
			say "$src, $mode: the reload did not build a new table within ${RELOAD_MAX}s:" \
				"$(tail -3 "$log")"
			stop_pid "$pid"
			return 1
		fi
		rl=$(sub "$(now)" "$t1")
		sleep 2
		rss2=$(status_kb "$pid" VmRSS)
		hwm2=$(status_kb "$pid" VmHWM)
	fi
	stop_pid "$pid"
	RSS_SUM[$src-$mode]=$((${RSS_SUM[$src-$mode]:-0} + rss))
	RSS_N[$src-$mode]=$((${RSS_N[$src-$mode]:-0} + 1))
	[ "$rss2" = - ] || rss2mb=$(mb "$rss2")
	[ "$hwm2" = - ] || hwm2mb=$(mb "$hwm2")
	ROWS+=("| $src | $mode | $ready | $(mb "$rss") | $(mb "$hwm") | $rl | $rss2mb | $hwm2mb |")
	CSV+=("$commit,$services,$src,$mode,$run,$ready,$rss,$hwm,$rl,$rss2,$hwm2")
	say "$src, $mode: ready in $ready s; RSS $(mb "$rss") MB, peak $(mb "$hwm") MB$(
		[ "$rl" = - ] || echo "; reloaded in $rl s: RSS $(mb "$rss2") MB, peak $(mb "$hwm2") MB")"
	return 0
}

# --- The run ------------------------------------------------------------------------------------
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+="-dirty"
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
echo "sync_scale: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($cpu_model)," \
	"kernel $(uname -r), $(free -m | awk '/^Mem:/ { print $2 }') MB;" \
	"load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sync_scale: commit $commit, $("$bin" --version 2>&1 | head -1) ($bin); $cmdline"
failed=0
for src in ${sources//,/ }; do
	[ "$src" = api ] && api_up
	for mode in ${modes//,/ }; do
		for ((r = 1; r <= repeat; r++)); do
			measure "$src" "$mode" "$r" || failed=1
		done
	done
	if [ "$src" = api ]; then
		stop_pid "$API_PID"
		API_PID=""
	fi
done

echo
echo "$services services by source (commit $commit, $cpu_model):"
echo
echo "| source | mode | ready s | RSS MB | peak MB | reload s | RSS after reload MB | peak after reload MB |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
echo
echo "ready: agent start -> /ready 200; RSS: VmRSS once answering (+2 s); peak: VmHWM then;" \
	"reload: records.ttl changed + SIGHUP (snapshot read and built again) -> the new table answers"
for mode in ${modes//,/ }; do
	[ -n "${RSS_N[snapshot-$mode]:-}" ] && [ -n "${RSS_N[api-$mode]:-}" ] || continue
	if ! awk -v s="${RSS_SUM[snapshot-$mode]}" -v sn="${RSS_N[snapshot-$mode]}" \
		-v a="${RSS_SUM[api-$mode]}" -v an="${RSS_N[api-$mode]}" -v m="$mode" -v x=$RATIO_MAX '
		BEGIN { r = (s / sn) / (a / an)
			printf "sync_scale: target: %s: snapshot RSS %.0f MB = %.2fx the API source'"'"'s %.0f MB, within %.1fx: %s\n",
				m, s / sn / 1024, r, a / an / 1024, x, (r <= x ? "met" : "NOT met")
			exit !(r <= x) }'; then
		failed=1
	fi
done
{
	echo "commit,services,source,mode,run,ready_s,rss_kb,hwm_kb,reload_s,rss_reload_kb,hwm_reload_kb"
	printf '%s\n' "${CSV[@]}"
} >"$out"
say "CSV: $out"
exit $failed
