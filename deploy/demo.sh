#!/usr/bin/env bash
# The main job, the README's first command: installs what is missing, builds ndcache, and runs it
# on its embedded default (the sample cluster in deploy/examples/) inside network namespaces it
# creates, with unbound as the upstream kube-dns stand-in. A "pod" namespace asks with dig for
# every record kind, a search-path NXDOMAIN and an external name forwarded and then cached.
# Everything is torn down at the end (or on Ctrl-C). With --keep it stays up until Ctrl-C, so
# you can ask your own questions:  ip netns exec ndc-pod-<pid> dig @169.254.20.10 <name>
# Usage: deploy/demo.sh [--keep]   (root)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = --keep ] && keep=1

"$root/deploy/deps.sh" test || exit 1
cd "$root" || exit 1
if [ ! -d build ]; then
	meson setup build >/dev/null || exit 1
fi
meson compile -C build control/ndcache >/dev/null || {
	echo "demo: build failed; run: meson compile -C build" >&2
	exit 1
}

# shellcheck source=../tests/integration/lib.sh
. "$root/tests/integration/lib.sh"
topo_up || exit 1
upstream_up || exit 1

# Only the upstream and the pod-facing interface are configured: source, listen address, zone,
# TTL and dataplane mode (tc: the in-kernel fast path) are the defaults, so the agent serves the
# sample cluster compiled into it, answering from the kernel where it can.
conf="$TOPO_DIR/ndcache.yaml"
printf 'upstream: [%s:53]\ndataplane:\n  interfaces: [eth-pod]\n' "$UPSTREAM_ADDR" >"$conf"
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
echo "== ndcache $(build/control/ndcache --version | cut -d' ' -f2), config:"
sed 's/^/   /' "$conf"
ndcache_up "$root/build/control/ndcache" "$conf" || exit 1
sed 's/^/   /' "$TOPO_DIR/ndcache.log"

ask() {
	local title=$1
	shift
	echo
	echo "== $title"
	echo "   pod\$ dig $*"
	in_pod dig +time=2 +tries=1 +noall +comments +answer +authority +additional \
		"@$NODE_LOCAL" "$@" 2>&1 | grep -Ev '^;; (Got answer|OPT PSEUDOSECTION|WARNING: .local|You are currently testing)|^; EDNS|^$' |
		sed 's/^/   /'
}

Z=svc.cluster.local
ask "A record of a ClusterIP service" kubernetes.default.$Z A
ask "AAAA of a dual-stack service" frontend.shop.$Z AAAA
ask "headless service: one A per ready endpoint" postgres.data.$Z A
ask "a headless endpoint by hostname" postgres-0.postgres.data.$Z A
ask "SRV for a named port (headless), targets in additional" _pg._tcp.postgres.data.$Z SRV
ask "SRV for a named port (ClusterIP)" _grpc._tcp.cart.shop.$Z SRV
ask "PTR of a ClusterIP" -x 10.96.0.10
ask "ExternalName service: CNAME" payments.shop.$Z A
ask "schema version" dns-version.cluster.local TXT
ask "SOA at the zone apex" cluster.local SOA
ask "search-path name (ndots:5): NXDOMAIN with SOA, answered locally" api.example.com.default.$Z A
ask "existing name, other type: NODATA" kubernetes.default.$Z AAAA
ask "external name: forwarded to the upstream" www.example.com A
sleep 1.2
ask "same name 1 s later: from the cache (TTL counts down)" www.example.com A
echo
echo "== upstream (unbound) saw $(grep -c 'www.example.com. A IN' "$TOPO_DIR/unbound.log") query for www.example.com"
echo
echo "== who answered: ndcache's /metrics (kernel = the tc fast path, the rest = the socket path)"
in_node curl -s http://127.0.0.1:9254/metrics |
	grep -E '^ndcache_(kernel_answers_total|answers_total|queries_total)' | sed 's/^/   /'

if [ $keep = 1 ]; then
	echo
	echo "== ndcache is up. In another shell:  ip netns exec $NS_POD dig @$NODE_LOCAL <name>"
	echo "   Ctrl-C tears everything down."
	wait "$NDCACHE_PID"
fi
