#!/usr/bin/env bash
# A plain build builds the product only (issue 36): `meson setup DIR && ninja -C DIR` in a fresh
# build folder must build no object under tests/ (unit tests, fuzz replays, benchmarks, planted
# objects) and no benchmark BPF object (the reflector) anywhere; and what `meson test` builds
# before it runs (each test's targets) must still build every test's executable and argument, so
# the suite does not lose a test to build_by_default : false.
# Usage: tests/build/check_plain_build.sh [SOURCE] [meson setup options...]
#        (SOURCE: the tree to check, default this one; environment: NDC_JOBS, default 2)
set -u
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd) || exit 1
[ $# -gt 0 ] && shift
jobs=${NDC_JOBS:-2}
work=$(mktemp -d /tmp/ndc-plain-build.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
build=$work/build
rc=0

if ! meson setup "$build" "$src" "$@" >"$work/setup.log" 2>&1; then
	tail -20 "$work/setup.log" >&2
	echo "check_plain_build: meson setup failed" >&2
	exit 1
fi
if ! ninja -C "$build" -j "$jobs" >"$work/build.log" 2>&1; then
	tail -20 "$work/build.log" >&2
	echo "check_plain_build: the plain build failed" >&2
	exit 1
fi
echo "plain build: $(grep -c '^\[' "$work/build.log") steps"

# Every file a build step wrote under tests/ (meson itself writes none there at setup), and
# every benchmark or planted BPF object anywhere in the build folder.
built=$(cd "$build" && {
	[ -d tests ] && find tests -type f
	find . -type f \( -name '*reflector*' -o -name '*planted*' \) -not -path './meson-*'
} | sort -u)
if [ -n "$built" ]; then
	echo "FAIL: the plain build built test or benchmark files:"
	sed 's/^/  /' <<<"$built"
	rc=1
else
	echo "ok: nothing under tests/, no reflector or planted object"
fi
if [ ! -x "$build/control/ndcache" ]; then
	echo "FAIL: the plain build did not build control/ndcache"
	rc=1
fi

# What meson test builds before it runs the tests (meson's rebuild_deps: every target in each
# test's "depends"), built here the same way; every one must then exist.
deps=$(python3 - "$build" <<'PY'
import json, os, subprocess, sys
build = sys.argv[1]
intro = lambda what: json.loads(subprocess.run(["meson", "introspect", what, build],
                                               capture_output=True, text=True, check=True).stdout)
files = {t["id"]: t["filename"] for t in intro("--targets")}
print("\n".join(sorted({os.path.relpath(f, build) for t in intro("--tests")
                          for d in t["depends"] for f in files[d]})))
PY
) || exit 1
mapfile -t targets <<<"$deps"
if ! ninja -C "$build" -j "$jobs" "${targets[@]}" >"$work/tests.log" 2>&1; then
	tail -20 "$work/tests.log" >&2
	echo "FAIL: building the tests' targets failed"
	exit 1
fi
missing=$(cd "$build" && for t in "${targets[@]}"; do [ -e "$t" ] || echo "$t"; done)
ntests=$(meson introspect --tests "$build" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
if [ -n "$missing" ]; then
	echo "FAIL: after building the tests' targets, missing:"
	sed 's/^/  /' <<<"$missing"
	rc=1
elif ! grep -q 'test_dns_wire' "$work/tests.log"; then
	echo "FAIL: building the tests' targets did not build tests/test_dns_wire"
	rc=1
else
	echo "ok: what meson test builds first builds every test's targets ($ntests tests," \
		"${#targets[@]} targets, $(grep -c '^\[' "$work/tests.log") steps)"
fi
exit $rc
