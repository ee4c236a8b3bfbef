#!/usr/bin/env bash
# Fleet benchmark (issue 25): what N agents cost one API server. N agents (socket mode, one
# process each, own listen address in 169.254.0.0/16 and HTTP port) against the fake API server
# with S Services (tests/bench/gen_k8s_scale.py): one agent alone first (the yardstick), then all
# N started within --rollout-s seconds, C Service changes (fan-out: API write to every agent
# answering), the API server restarted. Prints per phase requests and bytes per agent and in
# all, times, CPU and the load average (this machine's cores are shared: say it beside figures).
# A benchmark, not a test: it prints met/MISSED against issue 25's targets (all ready within 2x
# one agent's time alone; fan-out p99 under 1 s) and exits 0 when it ran.
#
# Usage: fleet_bench.sh [--agents N] [--services S] [--changes C] [--rollout-s R]
#                       [--refuse WAYS] [--build DIR] [--out FILE] [--logs DIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
agents=50
services=10000
changes=100
rollout=5
refuse=""
build="$root/build-k8b"
out=""
logs=""
while [ $# -gt 0 ]; do
	case $1 in
	--agents) agents=${2:-}; shift 2 ;;
	--services) services=${2:-}; shift 2 ;;
	--changes) changes=${2:-}; shift 2 ;;
	--rollout-s) rollout=${2:-}; shift 2 ;;
	--refuse) refuse=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	--out) out=${2:-}; shift 2 ;;
	--logs) logs=${2:-}; shift 2 ;;
	-h | --help) sed -n 's/^# \{0,1\}//; 12,13p' "$0" >&2; exit 2 ;;
	*) echo "fleet_bench: unknown argument $1" >&2; exit 2 ;;
	esac
done
if ! [[ $agents =~ ^[0-9]+$ ]] || ((agents < 1 || agents > 500)); then
	echo "fleet_bench: --agents must be 1..500" >&2
	exit 2
fi
if ! [[ $services =~ ^[0-9]+$ ]] || ((services < 100 || services > 500000)); then
	echo "fleet_bench: --services must be 100..500000" >&2
	exit 2
fi

# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"
bin="$build/control/ndcache"
if [ ! -d "$build" ]; then
	meson setup "$build" --buildtype=release >/dev/null || exit 1
fi
ninja -C "$build" control/ndcache >/dev/null || exit 1

topo_up || exit 1
trap 'ns_stop "$NS_NODE"; topo_down' EXIT
for ((i = 0; i <= agents; i++)); do # .1 is the solo agent's and agent 0's
	a=$((i + 1))
	if ((a < 255)); then ip=169.254.1.$a; else ip=169.254.2.$((a - 254)); fi
	in_node ip addr add "$ip/32" dev lo 2>/dev/null
done
"$root/tests/fakeapi/make_certs.sh" "$TOPO_DIR/certs" >/dev/null || exit 1
python3 "$here/gen_k8s_scale.py" --services "$services" --out "$TOPO_DIR/cluster" || exit 1

echo "fleet_bench: $(date -u '+%F %T') UTC, commit $(git -C "$root" rev-parse --short HEAD)," \
	"$(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo))," \
	"$(free -m | awk '/^Mem:/ { print $2 }') MB; release build $bin"
echo "fleet_bench: $agents agents, $services services, $changes changes, rollout over" \
	"${rollout}s${refuse:+, the fake API server refusing $refuse}"
echo "fleet_bench: load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$TOPO_DIR/run"
in_node python3 "$here/fleet.py" --ndcache "$bin" --fakeapi "$root/tests/fakeapi/fake_apiserver.py" \
	--certs "$TOPO_DIR/certs" --cluster "$TOPO_DIR/cluster" --dir "$TOPO_DIR/run" \
	--agents "$agents" --changes "$changes" --rollout-s "$rollout" --solo \
	${refuse:+--refuse "$refuse"} | tee "$TOPO_DIR/fleet.out"
rc=${PIPESTATUS[0]}
echo "fleet_bench: load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$out" ] && cp "$TOPO_DIR/fleet.out" "$out"
[ -n "$logs" ] && mkdir -p "$logs" && cp -r "$TOPO_DIR/run/." "$logs/"
kv() { sed -n "s/^$1=//p" "$TOPO_DIR/fleet.out"; }
solo=$(kv solo_ready_s)
all=$(kv rollout_all_ready_s)
own=$(kv rollout_ready_max_s)
p99=$(kv fanout_p99_ms)
verdict() { awk "BEGIN { exit !($1) }" && echo met || echo MISSED; }
if [ -n "$solo" ] && [ -n "$all" ]; then
	echo "Targets (issue 25):"
	echo "  every agent ready within 2x one agent alone ($solo s): from the first start $all s:" \
		"$(verdict "$all <= 2 * $solo"); each from its own start, slowest $own s:" \
		"$(verdict "$own <= 2 * $solo")"
	echo "  change fan-out p99 $p99 ms < 1000 ms: $(verdict "$p99 < 1000")"
fi
exit $rc
