#!/usr/bin/env bash
# deploy/demo.sh checks the answers it shows: run on a copy of the sample cluster it must pass
# (17 of 17), and on a copy with one record broken on purpose (the kubernetes Service's ClusterIP
# moved) it must exit non-zero and name that answer. Both through --snapshot, which serves the
# copy instead of the embedded sample while the demo keeps its own expected values.
# Usage (root): tests/integration/test_demo.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
. "$root/tests/integration/lib.sh" # ok, bad, summary
[ "$(id -u)" = 0 ] || {
	echo "test_demo.sh: needs root (network namespaces)" >&2
	exit 1
}
work=$(mktemp -d /tmp/ndc-demo-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

cp "$root/deploy/examples/sample-cluster.json" "$work/same.json"
python3 - "$root/deploy/examples/sample-cluster.json" "$work/broken.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
n = 0
for o in doc["items"]:
    m = o["metadata"]
    if o["kind"] == "Service" and m["name"] == "kubernetes" and m["namespace"] == "default":
        o["spec"]["clusterIP"] = "10.96.0.99"
        o["spec"]["clusterIPs"] = ["10.96.0.99"]
        n += 1
assert n == 1, "no kubernetes Service in the sample"
json.dump(doc, open(sys.argv[2], "w"))
PY

# run NAME FILE: the demo on FILE, bounded; its output in $work/NAME.log, its status returned.
run() {
	timeout -k 10 600 "$root/deploy/demo.sh" --snapshot "$2" >"$work/$1.log" 2>&1
}

run same "$work/same.json"
rc=$?
verdict=$(grep '^demo: [0-9]* of [0-9]* answers' "$work/same.log")
if [ $rc = 0 ] && [ "$verdict" = "demo: 17 of 17 answers as expected" ]; then
	ok "unchanged copy of the sample: exit 0, '$verdict'"
else
	bad "unchanged copy: exit $rc, '$verdict'" "$(tail -30 "$work/same.log")"
fi

run broken "$work/broken.json"
rc=$?
verdict=$(grep '^demo: [0-9]* of [0-9]* answers' "$work/broken.log")
named=$(grep '^demo: WRONG: ' "$work/broken.log")
if [ $rc != 0 ] && [ $rc != 124 ] && [ "$verdict" = "demo: 16 of 17 answers as expected" ]; then
	ok "one record broken: exit $rc, '$verdict'"
else
	bad "one record broken: exit $rc, '$verdict'" "$(tail -30 "$work/broken.log")"
fi
if [ "$(wc -l <<<"$named")" = 1 ] && [[ $named == *"A record of a ClusterIP service"* ]] &&
	[[ $named == *"kubernetes.default.svc.cluster.local"* ]] && [[ $named == *10.96.0.99* ]]; then
	ok "the wrong answer is named: $named"
else
	bad "the wrong answer is not named as it should be" "${named:-no 'demo: WRONG' line}"
fi

summary test_demo
