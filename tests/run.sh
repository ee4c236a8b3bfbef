#!/usr/bin/env bash
# The whole test suite, the README's test command: installs missing packages, then builds and
# runs every unit test and fuzz-corpus replay in a -Werror build and in an ASan+UBSan build, and
# the netns integration tests against both binaries, the demo's own check, the scripts' commands
# against deploy/deps.sh, and the README's first command (deploy/demo.sh) in a fresh minimal
# Debian 12 root (tests/minimal/run_minimal.sh). Needs root for apt, namespaces and the chroot.
# Every step is bounded (NDC_STEP_TIMEOUT seconds, default 1800); a step that exits 77 is
# reported as skipped.
# Usage: tests/run.sh   (environment: NDC_JOBS to limit build parallelism; NDC_MINIMAL_FULL=1 to
#        run this whole suite in the minimal root too, which about doubles the time)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

"$root/deploy/deps.sh" test || exit 1
# The BPF unit tests pin under /sys/fs/bpf: a fresh machine may not have bpffs mounted there yet.
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || {
	echo "tests/run.sh: cannot mount bpffs at /sys/fs/bpf" >&2
	exit 1
}

passed=0
failed=0
skipped=0
step_timeout=${NDC_STEP_TIMEOUT:-1800}
step() {
	local name=$1 rc t0=$SECONDS
	shift
	echo "=== $name"
	if [ "$(type -t "$1")" = function ]; then
		# A function of this script runs in a bash of its own, so that timeout can bound it.
		timeout -k 30 "$step_timeout" bash -c \
			"$(declare -f "$1"); $(declare -p jobs); $(printf '%q ' "$@")"
	else
		timeout -k 30 "$step_timeout" "$@"
	fi
	rc=$?
	if [ $rc = 0 ]; then
		passed=$((passed + 1))
		echo "=== $name: ok ($((SECONDS - t0)) s)"
	elif [ $rc = 77 ]; then
		skipped=$((skipped + 1))
		echo "=== $name: SKIPPED"
	elif [ $rc = 124 ] || [ $rc = 137 ]; then
		failed=$((failed + 1))
		echo "=== $name: FAILED (timed out after $step_timeout s: $*)"
	else
		failed=$((failed + 1))
		echo "=== $name: FAILED"
	fi
}

jobs=()
[ -n "${NDC_JOBS:-}" ] && jobs=(-j "$NDC_JOBS")

setup() {
	local dir=$1
	shift
	if [ -d "$dir" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi && meson compile -C "$dir" "${jobs[@]}"
}
# meson counts a skipped test (exit 77) as passed; here, as root, every test must run.
unit() {
	meson test -C "$1" --print-errorlogs || return 1
	python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, sys
skipped = [t["name"] for t in map(json.loads, open(sys.argv[1])) if t.get("result") == "SKIP"]
if skipped:
    print("skipped, which must not happen as root: " + ", ".join(skipped))
sys.exit(1 if skipped else 0)
PY
}

step "clang-format (kernel style)" tests/format.sh
# Issue 36: a plain meson setup + ninja builds no test or benchmark object; meson test's
# prerequisites still build every test.
step "plain build builds the product only (fresh build folder)" tests/build/check_plain_build.sh
# -Wall -Wextra clean is enforced by -Werror here.
step "build (gcc, -Werror)" setup build -Dwerror=true -Dbpf=enabled
step "unit tests and fuzz corpus replays" unit build
step "build (ASan + UBSan)" setup build-asan -Db_sanitize=address,undefined -Dwerror=true \
	-Dbpf=enabled
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "unit tests and fuzz corpus replays (ASan + UBSan)" unit build-asan
step "integration: netns, dig/kdig, unbound upstream" tests/integration/test_e2e.sh build
step "integration under ASan + UBSan" tests/integration/test_e2e.sh build-asan
step "integration: fast path (tc) answers equal the socket path's" \
	tests/integration/test_fastpath.sh build
# Issue 38: a pod's TYPE0 or meta-type question changes nothing for others; TTLs capped.
step "integration: question hygiene and TTL caps (TYPE0, meta types, classes), tc, xdp, socket" \
	tests/integration/test_hygiene.sh build tc xdp socket
step "integration: sync from a (fake) API server, answers from the kernel (tc)" \
	tests/integration/test_k8s.sh build tc
# Issue 21: the kernel's answer table grows to 10,000 services and shrinks back under a prober.
step "integration: the answer table grows and shrinks under traffic (10,000 services and back), tc" \
	timeout 420 tests/integration/test_growth.sh build tc
step "integration: the answer table grows and shrinks under traffic (10,000 services and back), xdp" \
	timeout 420 tests/integration/test_growth.sh build xdp
step "integration: sync from a (fake) API server under ASan + UBSan" \
	tests/integration/test_k8s.sh build-asan
step "integration: a fleet of 10 agents on one (fake) API server: no consistent lists, fallbacks" \
	tests/integration/test_fleet.sh build
step "integration: multi-cluster services (no CRD, CRD appears, ServiceImports under a query loop), tc" \
	tests/integration/test_mcs.sh build tc
step "integration: multi-cluster services under ASan + UBSan (socket)" \
	tests/integration/test_mcs.sh build-asan socket
# Issue 38: against unbound on the same knotd upstream; every difference a class ANSWERS.md lists.
step "integration: ndcache against a reference resolver (unbound, knotd upstream; 884 questions), tc" \
	tests/integration/test_reference.sh build
step "integration: upgrades, second instances, no agent (fail open)" \
	tests/integration/test_upgrade.sh build
step "integration: SIGTERM under 5,000 cache misses/s, ASan + UBSan clean (socket, tc)" \
	sh -c 'tests/integration/test_upgrade_shutdown.sh build-asan socket &&
		tests/integration/test_upgrade_shutdown.sh build-asan tc'
step "integration: an upgrade at any moment (SIGTERM 0, 0.2, 1, 3 s after the successor's start; a successor killed) under 5,000 QPS: 0 lost (tc, socket)" \
	sh -c 'tests/integration/test_upgrade_any_moment.sh build tc &&
		tests/integration/test_upgrade_any_moment.sh build socket'
step "integration: chaos (kill -9, upgrade, 10 s without an agent, upstream down, garbage), tc" \
	tests/integration/test_chaos.sh build tc
step "integration: chaos (kill -9, upgrade, 10 s without an agent, upstream down, garbage), socket" \
	tests/integration/test_chaos.sh build socket
step "integration: chaos (kill -9, upgrade, 10 s without an agent, upstream down, garbage), xdp" \
	tests/integration/test_chaos.sh build xdp
step "integration: hostile input and upstream trouble under a prober (socket, tc)" \
	tests/integration/test_hostile.sh build
step "integration: stub domains, the kube-dns ConfigMap from a (fake) API server (tc)" \
	tests/integration/test_stub_domains.sh build tc
step "integration: stub domains and the kube-dns ConfigMap under ASan + UBSan (socket)" \
	tests/integration/test_stub_domains.sh build-asan socket
step "integration: config reloads under a prober (symlink swap, broken file, SIGHUP), tc" \
	tests/integration/test_reload.sh build tc
step "integration: upstream path: pooled TCP (10,000 names at 5,000 QPS), loop detection" \
	tests/integration/test_upstream.sh build
# Issue 34: upstreams that fail quietly (a frozen TCP connection, a peer that stops reading, an
# answer with no question), socket mode: the upstream path is the same in every mode.
step "integration: upstreams that fail quietly (frozen TCP, a peer not reading, FORMERR without a question)" \
	tests/integration/test_upstream_quiet.sh build
# Issue 22: the upstream path. In tc and XDP mode the kernel answers the repeats: prefetch reads the
# kernel table's hit counters (ndc_publisher_kernel_hits).
step "integration: prefetch (a 50 ms upstream, a TTL-5 name asked 20/s for 30 s), socket, tc, xdp" \
	timeout 420 tests/integration/test_prefetch.sh build socket tc xdp
step "integration: fair share per client (a 20,000/s flood beside a 100/s pod), socket and tc" \
	timeout 240 tests/integration/test_fair_share.sh build socket tc
# Issue 37: the dnstap writer against Debian's fstrm_capture and dnstap-ldns (a test driver).
step "integration: dnstap writer (fstrm_capture, dnstap-ldns: pairs with pod names, no reader, reconnect), also under ASan + UBSan" \
	sh -c 'tests/integration/test_dnstap_writer.sh build &&
		tests/integration/test_dnstap_writer.sh build-asan'
# Issue 37: who asks what: pods named in /debug/top and ndcache top; dnstap from the agent.
step "integration: who asks what (pods of a fake API server in /debug/top and ndcache top; socket, also under ASan + UBSan; tc: the kernel's per-client counts merged)" \
	sh -c 'tests/integration/test_top.sh build && tests/integration/test_top.sh build-asan &&
		tests/integration/test_top.sh build tc'
step "integration: dnstap from the agent (fstrm_capture, dnstap-ldns: CLIENT_* and FORWARDER_* with pods; no reader; the kernel's sampled answers, tc)" \
	tests/integration/test_dnstap.sh build
step "integration: transparent mode (the kube-dns ClusterIP answered; iptables-nft, -legacy, nft)" \
	tests/integration/test_transparent.sh build
step "integration: a CNI's policy program on the pod's interface is never skipped (clsact, tcx; tc_order first and xdp shown bypassing it)" \
	tests/integration/test_cni_order.sh build
step "integration: DPDK dataplane (net_af_packet --no-huge, net_af_xdp, a build without DPDK)" tests/integration/test_dpdk.sh build
step "deploy: manifests against the code" tests/deploy/check_manifests.sh build
step "deploy: the fast path under the manifest's user and capabilities" \
	tests/deploy/try_security_context.sh build
step "deploy: kustomize base and overlays render and pass the manifest checks" \
	tests/deploy/test_kustomize.sh build
step "deploy: dashboard and alerts use only metrics the agent exports" \
	tests/deploy/test_monitoring.sh build
# 1.5 to 3.5 min from nothing (debootstrap, podman build), under 1 min with the layers cached.
step "deploy: the image (deploy/image.sh: debootstrap base, podman build)" deploy/image.sh
step "deploy: the image run as the DaemonSet runs it" tests/deploy/test_image.sh
step "scripts: every command they run comes from the minimal root or deploy/deps.sh" \
	bash -c "tests/minimal/check_commands.py --self-test && tests/minimal/check_commands.py"
step "demo: every answer checked; a wrong one fails the demo, named" tests/integration/test_demo.sh
if [ "${NDC_MINIMAL_FULL:-0}" = 1 ]; then
	# The suite inside takes about as long as outside: more than one step's usual bound.
	step_timeout=$((step_timeout + 3600)) step \
		"minimal Debian 12 root: deploy/demo.sh, then tests/run.sh" tests/minimal/run_minimal.sh --full
else
	step "minimal Debian 12 root: deploy/demo.sh (NDC_MINIMAL_FULL=1: tests/run.sh too)" \
		tests/minimal/run_minimal.sh
fi

if [ "$skipped" = 0 ]; then
	echo "tests/run.sh: $passed passed, $failed failed"
else
	echo "tests/run.sh: $passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" = 0 ]
