#!/usr/bin/env bash
# Renders the kustomize base (deploy/kubernetes) and every overlay (deploy/overlays/*) with a real
# kustomize, offline, and runs the manifest checks (check_manifests.py) on each output. Also: the
# base renders exactly ndcache.yaml, and the overlays' per-cluster copies of the config hold the
# base's values (they replace the ConfigMap whole, so they would otherwise drift), the
# transparent one's listen adding the kube-dns ClusterIP.
# Usage: tests/deploy/test_kustomize.sh BUILD_DIR
# The renderer: `kubectl kustomize` (any kubectl from 1.14 on) or `kustomize build`; without
# either, as root, Debian's kubernetes-client (kubectl 1.20, kustomize v2.0.3) is installed.
set -u
build=${1:?usage: $0 BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$build" 2>/dev/null && pwd)/control/ndcache
[ -x "$bin" ] || { echo "test_kustomize.sh: $bin: not built" >&2; exit 1; }

if ! command -v kubectl >/dev/null && ! command -v kustomize >/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		echo "test_kustomize.sh: needs kubectl or kustomize (apt-get install kubernetes-client)" >&2
		exit 1
	fi
	echo "test_kustomize.sh: installing kubernetes-client (kubectl with kustomize)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		kubernetes-client >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends kubernetes-client >/dev/null; } || exit 1
fi
if command -v kubectl >/dev/null; then
	render() { timeout 60 kubectl kustomize "$1"; }
	echo "renderer: kubectl $(kubectl version --client 2>/dev/null | head -2 | tr '\n' ' ')"
else
	render() { timeout 60 kustomize build "$1"; }
	echo "renderer: kustomize $(kustomize version 2>/dev/null)"
fi

work=$(mktemp -d /tmp/ndc-kustomize.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

dirs=("$root/deploy/kubernetes")
for d in "$root"/deploy/overlays/*/; do
	[ -f "$d/kustomization.yaml" ] && dirs+=("${d%/}")
done
[ ${#dirs[@]} -gt 1 ] || bad "no overlay found in deploy/overlays/"

for d in "${dirs[@]}"; do
	name=${d#"$root"/}
	out=$work/$(echo "$name" | tr / _).yaml
	if ! render "$d" >"$out" 2>"$out.err"; then
		bad "$name: does not render: $(grep -v '^# Warning' "$out.err" | tail -3)"
		continue
	fi
	ok "$name renders ($(grep -c '^kind:' "$out") objects)"
	if python3 "$root/tests/deploy/check_manifests.py" --root "$root" --ndcache "$bin" \
		--manifest "$out" >"$out.check" 2>&1; then
		ok "$name: manifest checks pass on the rendered output"
	else
		bad "$name: manifest checks on the rendered output:"
		sed 's/^/     /' "$out.check"
	fi
done

# The base is ndcache.yaml itself; the overlays' copies of the per-cluster values are the base's
# (the transparent one's listen adds the kube-dns ClusterIP).
python3 - "$root" "$work" <<'PY' && ok "base = ndcache.yaml; the overlays' configs and ClusterIPs = the base's" || bad "renders differ (above)"
import sys, yaml
root, work = sys.argv[1:]
load = lambda p: [d for d in yaml.safe_load_all(open(p)) if d]
key = lambda d: (d["kind"], d["metadata"]["name"])
src = {key(d): d for d in load(root + "/deploy/kubernetes/ndcache.yaml")}
base = {key(d): d for d in load(work + "/deploy_kubernetes.yaml")}
rc = 0
# kustomize v2 adds empty labels/annotations maps; they change nothing.
def norm(d):
    if isinstance(d, dict):
        return {k: norm(v) for k, v in d.items() if v != {} or k not in ("labels", "annotations")}
    return [norm(x) for x in d] if isinstance(d, list) else d
if norm(src) != norm(base):
    print("     deploy/kubernetes renders other objects than ndcache.yaml:",
          sorted(set(src) ^ set(base)) or [k for k in src if norm(src[k]) != norm(base.get(k))])
    rc = 1
cfg = lambda objs: yaml.safe_load(objs[("ConfigMap", "ndcache")]["data"]["ndcache.yaml"])
cip = lambda objs: objs[("Service", "kube-dns-upstream")]["spec"]["clusterIP"]
for name in ("clusterdns", "transparent"):
    try:
        ov = {key(d): d for d in load(f"{work}/deploy_overlays_{name}.yaml")}
    except FileNotFoundError:
        sys.exit(1)
    a, b = cfg(src), cfg(ov)
    if name == "transparent":
        # listen: the base's node-local address and the kube-dns ClusterIP.
        if b["listen"][:len(a["listen"])] != a["listen"] or len(b["listen"]) != len(a["listen"]) + 1:
            print(f"     transparent overlay listen {b['listen']}: not the base's {a['listen']} "
                  f"plus the kube-dns ClusterIP")
            rc = 1
        a, b = dict(a, listen=None), dict(b, listen=None)
    if a != b:
        print(f"     {name} overlay config differs from the base's in:",
              sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
        rc = 1
    if cip(ov) != cip(src):
        print(f"     {name} overlay ClusterIP {cip(ov)} != the base's {cip(src)}")
        rc = 1
sys.exit(rc)
PY

echo "test_kustomize.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
