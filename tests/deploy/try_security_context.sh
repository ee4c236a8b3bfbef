#!/usr/bin/env bash
# Runs the DaemonSet's init script and the agent exactly as deploy/kubernetes/ndcache.yaml says
# (users, capability bounding sets, no_new_privs, the image's file capabilities), in network
# namespaces made here with a private bpffs, and asks from a "pod" over a veth: the fast path must
# load and answer in the kernel with only those capabilities. The config is the ConfigMap's, with
# the embedded sample cluster as source and no upstream (nothing leaves the namespaces).
# Usage (root): tests/deploy/try_security_context.sh BUILD_DIR
# Needs: iproute2, util-linux (setpriv, unshare), libcap2-bin (setcap, capsh), bind9-dnsutils, curl,
# python3-yaml. Every wait is bounded; a check that cannot run fails, it is never skipped.
set -u
build=${1:?usage: $0 BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$build" 2>/dev/null && pwd)/control/ndcache
[ "$(id -u)" = 0 ] || { echo "try_security_context.sh: needs root" >&2; exit 1; }
[ -x "$bin" ] || { echo "try_security_context.sh: $bin: not built" >&2; exit 1; }

ns_node=ndck-node-$$ ns_pod=ndck-pod-$$
work=$(mktemp -d /tmp/ndc-secctx.XXXXXX)
chmod 755 "$work"
runner=
passed=0 failed=0
# shellcheck source=../integration/lib.sh
. "$root/tests/integration/lib.sh" # wait_pid, term_wait
cleanup() {
	[ -n "$runner" ] && term_wait "$runner" "the agent, on exit"
	ip netns del "$ns_pod" 2>/dev/null
	ip netns del "$ns_node" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

# What the manifest says: init script and env, both containers' users and capabilities, the
# config; and the Dockerfile's setcap list.
python3 - "$root" "$work" <<'PY' || exit 1
import re, shlex, sys, yaml
root, work = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(root + "/deploy/kubernetes/ndcache.yaml")) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
cm = next(d for d in docs if d["kind"] == "ConfigMap")
init, agent = ds["initContainers"][0], ds["containers"][0]
# The init container's command, a file the Dockerfile copies into the image run from this tree.
copies = dict(reversed(m.groups()) for m in re.finditer(
    r"^COPY\s+(?!--)(\S+)\s+(\S+)\s*$", open(root + "/deploy/kubernetes/Dockerfile").read(), re.M))
cmd = [root + "/" + copies[a] if a in copies else a
       for a in (init.get("command") or []) + (init.get("args") or [])]
open(work + "/init.sh", "w").write(cmd[2] if cmd[:2] == ["/bin/sh", "-c"] else shlex.join(cmd))
caps = lambda c: ",".join("+" + x.lower() for x in c["securityContext"]["capabilities"]["add"])
env = {e["name"]: e["value"] for e in init["env"]}
env.update(INIT_CAPS=caps(init), AGENT_CAPS=caps(agent),
           AGENT_UID=agent["securityContext"]["runAsUser"],
           AGENT_NNP=int(agent["securityContext"].get("allowPrivilegeEscalation") is False),
           FILE_CAPS=re.search(r"setcap\s+(cap_\S+=ep)\s",
                               open(root + "/deploy/kubernetes/Dockerfile").read()).group(1))
open(work + "/env", "w").write("".join(f"{k}='{v}'\n" for k, v in env.items()))
cfg = yaml.safe_load(cm["data"]["ndcache.yaml"])
del cfg["source"]
cfg["upstream"] = []
yaml.safe_dump(cfg, open(work + "/ndcache.yaml", "w"))
PY
. "$work/env"
cp "$bin" "$work/ndcache"
setcap "$FILE_CAPS" "$work/ndcache" || exit 1
chmod 644 "$work/ndcache.yaml"

ip netns add "$ns_node" && ip netns add "$ns_pod" || exit 1
ip link add ndck$$p type veth peer name veth-ndck$$ || exit 1
ip link set ndck$$p netns "$ns_pod"
ip link set veth-ndck$$ netns "$ns_node"
ip -n "$ns_node" link set lo up
ip -n "$ns_node" addr add 169.254.98.1/24 dev veth-ndck$$
ip -n "$ns_node" link set veth-ndck$$ up
ip -n "$ns_pod" link set lo up
ip -n "$ns_pod" addr add 169.254.98.2/24 dev ndck$$p
ip -n "$ns_pod" link set ndck$$p up
ip -n "$ns_pod" route add default via 169.254.98.1

nnp=()
[ "$AGENT_NNP" = 1 ] && nnp=(--no-new-privs)
# ip netns exec remounts /sys; the private bpffs goes on top of that, in this mount namespace.
ip netns exec "$ns_node" unshare -m --propagation private bash -c "
	mount -t bpf bpf /sys/fs/bpf || exit 1
	export NDC_NODE_LOCAL_ADDRESS='$NDC_NODE_LOCAL_ADDRESS' NDC_UID='$NDC_UID'
	setpriv --bounding-set=-all,$INIT_CAPS --inh-caps=-all --no-new-privs \
		sh -c \"\$(cat $work/init.sh)\" || { echo 'init container failed'; exit 1; }
	stat -c 'pin dir %u:%g %a' /sys/fs/bpf/ndcache
	exec setpriv --reuid=$AGENT_UID --regid=$AGENT_UID --clear-groups \
		--bounding-set=-all,$AGENT_CAPS --inh-caps=-all ${nnp[*]} \
		$work/ndcache --config $work/ndcache.yaml
" >"$work/log" 2>&1 &
runner=$!

answer=
for _ in $(seq 50); do
	answer=$(ip netns exec "$ns_pod" dig +time=1 +tries=1 +short @"$NDC_NODE_LOCAL_ADDRESS" \
		kubernetes.default.svc.cluster.local A 2>/dev/null | grep -x '[0-9.]*')
	[ -n "$answer" ] && break
	sleep 0.2
done
grep -q "^pin dir $NDC_UID:$NDC_UID 700" "$work/log" && ok "init: pin directory for uid $NDC_UID" ||
	bad "init: pin directory"
[ "$answer" = 10.96.0.1 ] && ok "a pod's query answered: $answer" || bad "no answer ($answer)"
# ip netns exec, unshare (no --fork), bash's last command and setpriv all exec: the process
# started above becomes the agent itself, so its PID is $runner (no pgrep). Compared as files
# (-ef): in a chroot, the link of a process in another mount namespace reads as a host path.
exe=$(readlink "/proc/$runner/exe" 2>/dev/null)
if [ "/proc/$runner/exe" -ef "$work/ndcache" ]; then
	uid=$(awk '/^Uid:/{print $3}' "/proc/$runner/status")
	eff=$(awk '/^CapEff:/{print $2}' "/proc/$runner/status")
	[ "$uid" = "$AGENT_UID" ] && ok "agent runs as uid $uid" || bad "agent uid $uid, want $AGENT_UID"
	echo "     CapEff $(capsh --decode="$eff" 2>/dev/null || echo "$eff")"
else
	bad "agent process: pid $runner runs '${exe:-nothing}', not $work/ndcache (uid not checked)"
fi
for _ in 1 2 3; do
	ip netns exec "$ns_pod" dig +time=1 +tries=1 +short @"$NDC_NODE_LOCAL_ADDRESS" \
		kubernetes.default.svc.cluster.local A >/dev/null
done
metrics=$(ip netns exec "$ns_node" curl -s --max-time 5 http://169.254.98.1:9254/metrics)
kernel=$(echo "$metrics" | awk -F' ' '/^ndcache_kernel_answers_total\{kind="answer"\}/{print $2}')
[ "${kernel:-0}" -gt 0 ] 2>/dev/null && ok "answered in the kernel: $kernel" ||
	bad "no kernel answers (fast path not loaded: see the log below)"
for p in health ready; do
	code=$(ip netns exec "$ns_node" curl -s --max-time 5 -o /dev/null -w '%{http_code}' \
		http://169.254.98.1:9254/$p)
	[ "$code" = 200 ] && ok "/$p on the node address: 200" || bad "/$p: $code"
done
term_wait "$runner" "the agent after SIGTERM" 10 || bad "agent: no clean exit on SIGTERM (status $?)"
runner=
grep -q "fast path: detached" "$work/log" && ok "clean stop: detached" || bad "no detach on stop"
[ "$failed" = 0 ] || sed 's/^/     log: /' "$work/log" | tail -40
echo "try_security_context.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
