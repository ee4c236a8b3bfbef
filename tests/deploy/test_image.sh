#!/usr/bin/env bash
# Runs the image (deploy/image.sh) as the DaemonSet in deploy/kubernetes/ndcache.yaml runs it:
# first the init container's command, then the agent, each with the manifest's image, user,
# capabilities (drop ALL, add the listed ones), privilege escalation setting, read-only root,
# memory limit, environment and mounts (the ConfigMap's key at its path, read-only; a bpffs where
# the hostPath is mounted, with its propagation), in the network namespace of a "node" made here
# (hostNetwork: podman --network ns:, the same as `--network host` run from inside it, which
# `ip netns exec` cannot do here: its private /sys hides the cgroup mounts from the runtime); a
# "pod" namespace asks over a veth. Every value comes from the manifest (parsed below),
# none is repeated here. Required: the kernel answers the pod (fast path loaded as uid 65532 from
# the image's file capabilities), the probes' paths answer 200 on the probes' port, and a stop
# (SIGTERM, the manifest's grace period) exits 0 with the tc filter and the pins gone.
#
# Differences from a kubelet, on purpose: the config's `source` is dropped (the embedded sample
# cluster: no API server here) and `upstream` emptied (no packet leaves the namespaces); the
# bpffs is a private one, not the machine's. Two where podman is not what a Kubernetes runtime
# is: podman gives a non-root user's added capabilities as ambient ones, which containerd and
# CRI-O never do, so the agent is started through `setpriv --ambient-caps=-all --inh-caps=-all`
# (util-linux, in the image): its capabilities then come only from the image's file
# capabilities, as under Kubernetes. And seccomp RuntimeDefault: Debian 12's podman profile
# (containers-common 0.50) allows bpf() only with CAP_SYS_ADMIN, Docker's and containerd's allow
# it with CAP_BPF; the test runs podman's profile with bpf() treated as Docker's does (one rule
# changed, below). Under podman's own profile the agent logs "fast path unavailable (Operation
# not permitted)" and answers from sockets (seen here).
# Usage (root): tests/deploy/test_image.sh   (the image must exist: deploy/image.sh)
# Needs: podman, iproute2, dnsutils, curl, python3-yaml, libcap2-bin (capsh).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test_image.sh: needs root" >&2; exit 1; }
command -v podman >/dev/null || { echo "test_image.sh: no podman (deploy/image.sh installs it)" >&2; exit 1; }

ns_node=ndci-node-$$ ns_pod=ndci-pod-$$
host_if=vethi$$ pod_if=ndcip$$
node_ip=169.254.97.1 pod_ip=169.254.97.2
init_name=ndci-init-$$ agent_name=ndci-agent-$$
work=$(mktemp -d /tmp/ndc-image.XXXXXX)
chmod 755 "$work"
passed=0 failed=0
PODMAN_GLOBAL=()
cleanup() {
	# One at a time: podman rm stops at a name that no longer exists.
	for c in "$init_name" "$agent_name"; do
		podman "${PODMAN_GLOBAL[@]}" rm -f -t 0 --ignore "$c" >/dev/null 2>&1
	done
	ip netns del "$ns_pod" 2>/dev/null
	ip netns del "$ns_node" 2>/dev/null
	umount "$work/bpffs" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

# -- what the manifest says ----------------------------------------------------------------------
# Writes $work/manifest.sh (shell arrays of podman options per container) and the config file at
# the path the ConfigMap volume gives it.
python3 - "$root" "$work" <<'PY' || { echo "test_image.sh: cannot read the manifest" >&2; exit 1; }
import json, os, shlex, sys, yaml
root, work = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(root + "/deploy/kubernetes/ndcache.yaml")) if d]
pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
assert pod.get("hostNetwork") is True, "the test runs the pod in the node's network: hostNetwork"
volumes = {v["name"]: v for v in pod["volumes"]}
out = {}

def quantity(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "M": 10**6, "G": 10**9}
    for u, m in units.items():
        if str(q).endswith(u):
            return int(str(q)[: -len(u)]) * m
    return int(q)

def options(c, prefix):
    sc = c.get("securityContext") or {}
    o = ["--read-only-tmpfs=false"]
    uid = sc.get("runAsUser")
    if uid is not None:
        o += ["--user", f"{uid}:{sc.get('runAsGroup', uid)}"]
    caps = sc.get("capabilities") or {}
    for d in caps.get("drop") or []:
        o += ["--cap-drop", d.lower()]
    if caps.get("add"):
        o += ["--cap-add", ",".join("CAP_" + a.upper() for a in caps["add"])]
    if sc.get("readOnlyRootFilesystem"):
        o.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        o += ["--security-opt", "no-new-privileges"]
    assert not sc.get("privileged"), "privileged containers are not what this test runs"
    assert (sc.get("seccompProfile") or {}).get("type", "RuntimeDefault") == "RuntimeDefault", \
        "seccomp: only RuntimeDefault is mapped (to podman's profile, bpf() as Docker's)"
    o += ["--security-opt", f"seccomp={work}/seccomp.json"]
    lim = ((c.get("resources") or {}).get("limits") or {}).get("memory")
    if lim:
        o += ["--memory", str(quantity(lim))]
    for e in c.get("env") or []:
        if "value" in e:
            o += ["--env", f"{e['name']}={e['value']}"]
            continue
        # the downward API: the node's name is the one field the manifest takes from it
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        assert ref == "spec.nodeName", f"env {e['name']}: only spec.nodeName is mapped, not {e}"
        o += ["--env", f"{e['name']}=node-image-test"]
    for m in c.get("volumeMounts") or []:
        v = volumes[m["name"]]
        if "configMap" in v:
            src = f"{work}/volumes/{m['name']}"
            os.makedirs(src, exist_ok=True)
            data = cms[v["configMap"]["name"]]["data"]
            for it in v["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
                text = data[it["key"]]
                if it["key"] == "ndcache.yaml":
                    cfg = yaml.safe_load(text)
                    cfg.pop("source", None)  # the embedded sample cluster: no API server here
                    cfg["upstream"] = []  # nothing leaves the test's namespaces
                    text = yaml.safe_dump(cfg)
                    out["LISTEN"] = " ".join(str(a) for a in cfg["listen"])
                    out["HTTP_PORT"] = str(cfg["http"]["listen"]).rsplit(":", 1)[1]
                with open(os.path.join(src, it["path"]), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(src, it["path"]), 0o644)
        elif v.get("hostPath", {}).get("path") == "/sys/fs/bpf":
            src = f"{work}/bpffs"  # a private bpffs stands for the node's
        else:
            raise SystemExit(f"volume {m['name']}: no stand-in for it in this test")
        flags = ["ro"] if m.get("readOnly") else []
        prop = m.get("mountPropagation")
        if prop == "HostToContainer":
            flags.append("rslave")
        elif prop == "Bidirectional":
            flags.append("rshared")
        o += ["--volume", f"{src}:{m['mountPath']}" + (":" + ",".join(flags) if flags else "")]
    out[prefix + "_OPTS"] = o
    out[prefix + "_IMAGE"] = c["image"]
    out[prefix + "_COMMAND"] = (c.get("command") or []) + (c.get("args") or [])
    out[prefix + "_UID"] = str(uid)
    out[prefix + "_CAPS"] = ",".join(sorted(caps.get("add") or []))

# RuntimeDefault: podman's default profile, with bpf() allowed to CAP_BPF holders as in Docker's
# (moby profiles/seccomp/default.json): taken out of the CAP_SYS_ADMIN rules, given its own.
prof = json.load(open("/usr/share/containers/seccomp.json"))
for rule in prof["syscalls"]:
    caps = (rule.get("includes") or {}).get("caps", []) + (rule.get("excludes") or {}).get("caps", [])
    if "bpf" in rule["names"] and caps == ["CAP_SYS_ADMIN"]:
        rule["names"] = [n for n in rule["names"] if n != "bpf"]
prof["syscalls"] = [r for r in prof["syscalls"] if r["names"]]
for cap in ("CAP_SYS_ADMIN", "CAP_BPF"):
    prof["syscalls"].append({"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": [cap]}})
json.dump(prof, open(work + "/seccomp.json", "w"))

out_lines = []
init, agent = pod["initContainers"][0], pod["containers"][0]
options(init, "INIT")
options(agent, "AGENT")
out["AGENT_HAS_COMMAND"] = "1" if agent.get("command") else "0"
for probe in ("livenessProbe", "readinessProbe"):
    g = agent[probe]["httpGet"]
    named = {p.get("name"): p["containerPort"] for p in agent.get("ports") or []}
    out[probe.upper()] = f"{named.get(g['port'], g['port'])}{g['path']}"
out["GRACE"] = str(pod.get("terminationGracePeriodSeconds", 30))
for k, v in out.items():
    if isinstance(v, list):
        out_lines.append(f"{k}=({' '.join(shlex.quote(str(x)) for x in v)})")
    else:
        out_lines.append(f"{k}={shlex.quote(v)}")
open(work + "/manifest.sh", "w").write("\n".join(out_lines) + "\n")
PY
. "$work/manifest.sh"
echo "     image $AGENT_IMAGE; init: uid $INIT_UID +$INIT_CAPS; agent: uid $AGENT_UID +$AGENT_CAPS"
[ "$INIT_IMAGE" = "$AGENT_IMAGE" ] || bad "init and agent images differ ($INIT_IMAGE, $AGENT_IMAGE)"
if ! podman image exists "$AGENT_IMAGE"; then
	echo "test_image.sh: no image $AGENT_IMAGE: build it with deploy/image.sh" >&2
	exit 1
fi
. "$root/deploy/podman-probe.sh"
ndc_podman_probe "$AGENT_IMAGE" || exit 1
pm() { podman "${PODMAN_GLOBAL[@]}" "$@"; }
node_net=(--network "ns:/run/netns/$ns_node")

# -- the node and the pod ------------------------------------------------------------------------
mkdir -p "$work/bpffs"
mount -t bpf bpf "$work/bpffs" || exit 1
ip netns add "$ns_node" && ip netns add "$ns_pod" || exit 1
ip link add "$pod_if" type veth peer name "$host_if" || exit 1
ip link set "$pod_if" netns "$ns_pod"
ip link set "$host_if" netns "$ns_node"
ip -n "$ns_node" link set lo up
ip -n "$ns_node" addr add "$node_ip/24" dev "$host_if"
ip -n "$ns_node" link set "$host_if" up
ip -n "$ns_pod" link set lo up
ip -n "$ns_pod" addr add "$pod_ip/24" dev "$pod_if"
ip -n "$ns_pod" link set "$pod_if" up
ip -n "$ns_pod" route add default via "$node_ip"

# -- the init container: its command, to completion ----------------------------------------------
entry=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${INIT_COMMAND[@]}")
if timeout 120 podman "${PODMAN_GLOBAL[@]}" run --name "$init_name" "${node_net[@]}" \
	"${PODMAN_LIMITS[@]}" "${INIT_OPTS[@]}" --entrypoint "$entry" "$INIT_IMAGE" \
	>"$work/init.log" 2>&1; then
	ok "init container: $(tail -1 "$work/init.log")"
else
	bad "init container failed:"
	sed 's/^/     /' "$work/init.log"
fi
pm rm "$init_name" >/dev/null 2>&1
for a in $LISTEN; do
	ip -n "$ns_node" -o addr show | grep -q " $a/" && ok "node-local address $a on the node" ||
		bad "node-local address $a missing from the node"
done
stat -c '%u %a' "$work/bpffs/ndcache" 2>/dev/null | grep -qx "$AGENT_UID 700" &&
	ok "pin directory /sys/fs/bpf/ndcache owned by uid $AGENT_UID" || bad "pin directory"

# -- the agent -----------------------------------------------------------------------------------
if [ "$AGENT_HAS_COMMAND" = 1 ]; then
	argv=("${AGENT_COMMAND[@]}")
else
	mapfile -t argv < <(pm image inspect -f '{{range .Config.Entrypoint}}{{println .}}{{end}}' \
		"$AGENT_IMAGE" | sed '/^$/d')
	argv+=("${AGENT_COMMAND[@]}")
fi
entry=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \
	setpriv --ambient-caps=-all --inh-caps=-all -- "${argv[@]}")
if ! timeout 120 podman "${PODMAN_GLOBAL[@]}" run -d --name "$agent_name" "${node_net[@]}" \
	"${PODMAN_LIMITS[@]}" "${AGENT_OPTS[@]}" --entrypoint "$entry" "$AGENT_IMAGE" \
	>"$work/run.log" 2>&1; then
	bad "agent container does not start: $(tail -3 "$work/run.log")"
fi

# Readiness as kubelet probes it: the node's address (a hostNetwork pod's IP), the probe's port.
code= t0=$SECONDS
while [ $((SECONDS - t0)) -lt 30 ]; do
	code=$(ip netns exec "$ns_node" curl -s -m 2 -o /dev/null -w '%{http_code}' \
		"http://$node_ip:$READINESSPROBE")
	[ "$code" = 200 ] && break
	sleep 0.5
done
[ "$code" = 200 ] && ok "readiness GET :$READINESSPROBE: 200 after $((SECONDS - t0)) s" ||
	bad "readiness GET :$READINESSPROBE: '$code' after 30 s"
code=$(ip netns exec "$ns_node" curl -s -m 2 -o /dev/null -w '%{http_code}' \
	"http://$node_ip:$LIVENESSPROBE")
[ "$code" = 200 ] && ok "liveness GET :$LIVENESSPROBE: 200" || bad "liveness: '$code'"

addr=${LISTEN%% *}
answer= t0=$SECONDS
while [ $((SECONDS - t0)) -lt 20 ]; do
	answer=$(ip netns exec "$ns_pod" dig +time=1 +tries=1 +short @"$addr" \
		kubernetes.default.svc.cluster.local A 2>/dev/null | grep -x '[0-9.]*')
	[ -n "$answer" ] && break
	sleep 0.2
done
[ "$answer" = 10.96.0.1 ] && ok "the pod's query answered: $answer" ||
	bad "no answer from $addr in 20 s ('$answer')"
for _ in 1 2 3; do
	ip netns exec "$ns_pod" dig +time=1 +tries=1 +short @"$addr" \
		kubernetes.default.svc.cluster.local A >/dev/null
done
kernel=$(ip netns exec "$ns_node" curl -s -m 2 "http://$node_ip:$HTTP_PORT/metrics" |
	awk '/^ndcache_kernel_answers_total\{kind="answer"\}/ { print $2 }')
[ "${kernel:-0}" -gt 0 ] 2>/dev/null && ok "answered in the kernel: $kernel" ||
	bad "no kernel answers (fast path not loaded: log below)"
pid=$(pm inspect -f '{{.State.Pid}}' "$agent_name" 2>/dev/null)
if [ -n "$pid" ] && [ "$pid" != 0 ]; then
	st=/proc/$pid/status
	uid=$(awk '/^Uid:/ { print $3 }' "$st")
	[ "$uid" = "$AGENT_UID" ] && ok "agent runs as uid $uid" || bad "agent uid $uid"
	amb=$(awk '/^CapAmb:/ { print $2 }' "$st")
	decode() { capsh --decode="$(awk -v k="^$1:" '$0 ~ k { print $2 }' "$st")" 2>/dev/null |
		sed 's/.*=//' | tr , '\n' | sort | paste -sd,; }
	want=$(echo "$AGENT_CAPS" | tr A-Z a-z | tr , '\n' | sed 's/^/cap_/' | sort | paste -sd,)
	got=$(decode CapEff) bnd=$(decode CapBnd)
	[ "$amb" = 0000000000000000 ] && [ "$got" = "$want" ] &&
		ok "capabilities from the image's file capabilities: $got (ambient none)" ||
		bad "capabilities: effective $got, ambient $amb; want $want and no ambient"
	[ "$bnd" = "$want" ] && ok "bounding set = capabilities.add ($bnd)" ||
		bad "bounding set $bnd, want $want (drop ALL, add the manifest's)"
	ip -n "$ns_node" link show "$host_if" >/dev/null && tc -n "$ns_node" filter show dev "$host_if" \
		ingress | grep -q ndc_ && ok "tc filter attached on the pod's veth $host_if" ||
		bad "no tc filter on $host_if"
else
	bad "agent container not running"
	pm logs "$agent_name" 2>&1 | sed 's/^/     log: /' | tail -20
	echo "test_image.sh: $passed passed, $failed failed"
	exit 1
fi

# -- stop: SIGTERM, then the grace period -------------------------------------------------------
t0=$SECONDS
timeout $((GRACE + 30)) podman "${PODMAN_GLOBAL[@]}" stop -t "$GRACE" "$agent_name" >/dev/null 2>&1
rc=$(pm inspect -f '{{.State.ExitCode}}' "$agent_name" 2>/dev/null)
[ "$rc" = 0 ] && ok "stopped by SIGTERM in $((SECONDS - t0)) s, exit 0" ||
	bad "stop: exit code '$rc' after $((SECONDS - t0)) s (grace $GRACE s)"
pm logs "$agent_name" >"$work/agent.log" 2>&1
grep -q "fast path: detached" "$work/agent.log" && ok "log: fast path detached" ||
	bad "no 'fast path: detached' in the log"
tc -n "$ns_node" filter show dev "$host_if" ingress 2>/dev/null | grep -q ndc_ &&
	bad "tc filter still on $host_if after the stop" || ok "no tc filter left on $host_if"
left=$(ls -A "$work/bpffs/ndcache" 2>/dev/null)
[ -z "$left" ] && ok "no pins left in /sys/fs/bpf/ndcache" || bad "pins left: $left"
[ "$failed" = 0 ] || sed 's/^/     log: /' "$work/agent.log" | tail -40
echo "test_image.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
