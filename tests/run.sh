#!/usr/bin/env bash
# The whole test suite, the README's test command: installs missing packages, then builds and
# runs every unit test and fuzz-corpus replay in a -Werror build and in an ASan+UBSan build, and
# the netns integration tests against both binaries. Needs root for apt and network namespaces.
# Usage: tests/run.sh   (environment: NDC_JOBS to limit build parallelism)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

"$root/deploy/deps.sh" test || exit 1

passed=0
failed=0
step() {
	local name=$1
	shift
	echo "=== $name"
	if "$@"; then
		passed=$((passed + 1))
		echo "=== $name: ok"
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

step "clang-format (kernel style)" tests/format.sh
# -Wall -Wextra clean is enforced by -Werror here.
step "build (gcc, -Werror)" setup build -Dwerror=true -Dbpf=enabled
step "unit tests and fuzz corpus replays" meson test -C build --print-errorlogs
step "build (ASan + UBSan)" setup build-asan -Db_sanitize=address,undefined -Dwerror=true \
	-Dbpf=enabled
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
step "unit tests and fuzz corpus replays (ASan + UBSan)" meson test -C build-asan --print-errorlogs
step "integration: netns, dig/kdig, unbound upstream" tests/integration/test_e2e.sh build
step "integration under ASan + UBSan" tests/integration/test_e2e.sh build-asan
step "integration: fast path (tc) answers equal the socket path's" \
	tests/integration/test_fastpath.sh build
step "integration: sync from a (fake) API server, answers from the kernel (tc)" \
	tests/integration/test_k8s.sh build tc
step "integration: sync from a (fake) API server under ASan + UBSan" \
	tests/integration/test_k8s.sh build-asan
step "integration: upgrades, second instances, no agent (fail open)" \
	tests/integration/test_upgrade.sh build
step "integration: DPDK dataplane (net_af_packet --no-huge, net_af_xdp, a build without DPDK)" tests/integration/test_dpdk.sh build
step "deploy: manifests against the code" tests/deploy/check_manifests.sh build
step "deploy: the fast path under the manifest's user and capabilities" \
	tests/deploy/try_security_context.sh build

echo "tests/run.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
