#!/usr/bin/env bash
# Checks deploy/kubernetes/ (manifests, Dockerfile) against the code and the built agent, without
# a cluster, then proves the check can fail (--self-test applies known mistakes to copies).
# Usage: tests/deploy/check_manifests.sh BUILD_DIR   (the agent is BUILD_DIR/control/ndcache)
# Needs python3-yaml. No root, no network.
set -u
build=${1:?usage: $0 BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$build" 2>/dev/null && pwd)/control/ndcache
if [ ! -x "$bin" ]; then
	echo "check_manifests.sh: $build/control/ndcache: not built" >&2
	exit 1
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
	echo "check_manifests.sh: needs python3-yaml (apt-get install python3-yaml)" >&2
	exit 1
fi
rc=0
python3 "$root/tests/deploy/check_manifests.py" --root "$root" --ndcache "$bin" || rc=1
python3 "$root/tests/deploy/check_manifests.py" --root "$root" --ndcache "$bin" --self-test || rc=1
exit $rc
