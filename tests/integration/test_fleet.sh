#!/usr/bin/env bash
# Integration test (issue 25): a fleet of agents against one fake API server with 10,000
# Services. N agents (NDC_FLEET_AGENTS, default 10) in socket mode, one process each with its own
# listen address (169.254.1.x) and HTTP port, started within 3 s; 100 Service changes; the API
# server restarted. Checks (tests/bench/fleet.py --check): every agent gets ready and answers
# every change, and with the stream and the watch cache offered no agent makes a consistent list,
# at start or after the restart; then, with both refused, each falls back to consistent lists and
# still gets ready and answers. Each agent has env NODE_NAME (node-<i>), as the DaemonSet
# passes it, so each also watches its node's pods (pod identity, issue 37): one watch more.
# Every wait in fleet.py has a time limit; cleanup by trap.
# Usage: tests/integration/test_fleet.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: test_fleet.sh BUILD_DIR}
[[ $build = /* ]] || build="$root/$build"
bin="$build/control/ndcache"
agents=${NDC_FLEET_AGENTS:-10}

# shellcheck source=SCRIPTDIR/lib.sh
. "$here/lib.sh"
[ -x "$bin" ] || {
	echo "test_fleet: no $bin (build first)" >&2
	exit 1
}
topo_up || exit 1
# Agents and servers fleet.py started are its children; should it die, they die with the netns.
trap 'ns_stop "$NS_NODE"; topo_down' EXIT
for ((i = 1; i <= agents; i++)); do
	in_node ip addr add "169.254.1.$i/32" dev lo || exit 1
done
"$root/tests/fakeapi/make_certs.sh" "$TOPO_DIR/certs" >/dev/null || exit 1
python3 "$root/tests/bench/gen_k8s_scale.py" --services 10000 --out "$TOPO_DIR/cluster" \
	>/dev/null || exit 1

fleet() { # ID NAME ARGS... (ID names the scratch directory)
	local id=$1 name=$2 rc
	shift 2
	mkdir -p "$TOPO_DIR/$id"
	in_node timeout -k 10 300 python3 "$root/tests/bench/fleet.py" --ndcache "$bin" \
		--fakeapi "$root/tests/fakeapi/fake_apiserver.py" --certs "$TOPO_DIR/certs" \
		--cluster "$TOPO_DIR/cluster" --dir "$TOPO_DIR/$id" --agents "$agents" \
		--rollout-s 3 --node-names --check "$@" >"$TOPO_DIR/$id.out" 2>&1
	rc=$?
	sed -n '/^  [a-z]/p' "$TOPO_DIR/$id.out"
	if [ $rc = 0 ]; then
		ok "$name: $(tail -1 "$TOPO_DIR/$id.out")"
	else
		bad "$name (exit $rc)" "$(grep -E 'FAILED|Error|Traceback' "$TOPO_DIR/$id.out" |
			head -20; tail -5 "$TOPO_DIR/$id"/agent-0/ndcache.log 2>/dev/null)"
	fi
}

fleet offered "$agents agents, stream and watch cache offered: no consistent list" --changes 100
fleet refused "$agents agents, stream and watch cache refused: consistent lists, still ready" \
	--changes 10 --refuse stream,cache
summary test_fleet
